"""Elicitation and sampling for tools: server-to-client requests on
2025-11-25, input-required replay on 2026-07-28, and the refusals."""

from __future__ import annotations

import pytest
import mcp.types as types
from mcp import Client, MCPError, stdio_client

from conftest import LEGACY, MODERN, session, text_of

pytestmark = pytest.mark.anyio

SAMPLING_ON = "[tools.summarize]\nallow_sampling = true\n"


def elicitation(action, content=None):
    async def on_elicit(_ctx, params):
        on_elicit.asked.append(params.message)
        return types.ElicitResult(action=action, content=content)

    on_elicit.asked = []
    return on_elicit


async def on_sample(_ctx, params):
    return types.CreateMessageResult(
        role="assistant", model="test-model", content=types.TextContent(type="text", text="short")
    )


@pytest.mark.parametrize(
    "action,content,expected",
    [("accept", {"name": "Ada", "age": 36}, "Hello Ada, 36!"), ("decline", None, "would not say")],
)
async def test_legacy_elicitation_round_trip(setup, action, content, expected):
    setup.add("misbehave")
    handler = elicitation(action, content)
    async with session(setup, LEGACY, elicitation_callback=handler) as client:
        result = await client.call_tool("ask_user", {})
        assert not result.is_error, text_of(result)
        assert expected in result.structured_content["greeting"]
    assert handler.asked == ["Who are you?"]


@pytest.mark.parametrize("era", [LEGACY, MODERN])
async def test_a_client_that_cannot_elicit_gets_a_clear_error(setup, era):
    setup.add("misbehave")
    async with session(setup, era) as client:
        result = await client.call_tool("ask_user", {})
        assert result.is_error
        assert "does not support elicitation" in text_of(result)


async def test_sampling_is_refused_unless_the_operator_allows_it(setup):
    setup.add("misbehave")
    async with session(setup, LEGACY, elicitation_callback=elicitation("accept", {}), sampling_callback=on_sample) as client:
        result = await client.call_tool("summarize", {"text": "a long text"})
        assert result.is_error
        assert "may not sample" in text_of(result) and "allow_sampling" in text_of(result)


async def test_legacy_sampling_when_allowed(setup):
    setup.add("misbehave")
    setup.write_config(SAMPLING_ON)
    async with session(setup, LEGACY, elicitation_callback=elicitation("accept", {}), sampling_callback=on_sample) as client:
        result = await client.call_tool("summarize", {"text": "a long text"})
        assert not result.is_error, text_of(result)
        assert text_of(result) == "summary: short"
    async with session(setup, LEGACY, elicitation_callback=elicitation("decline")) as client:
        declined = await client.call_tool("summarize", {"text": "x"})
        assert declined.is_error and "the user said no" in text_of(declined)


async def test_modern_clients_get_input_required_and_the_call_resumes(setup):
    setup.add("misbehave")
    setup.write_config(SAMPLING_ON)
    handler = elicitation("accept", {"name": "Grace", "age": 85})
    with open(setup.stderr_path, "a") as errlog:
        async with Client(
            stdio_client(setup.params(), errlog=errlog),
            mode="auto",
            elicitation_callback=handler,
            sampling_callback=on_sample,
            cache=None,
        ) as client:
            assert client.protocol_version == MODERN
            result = await client.call_tool("ask_user", {})
            assert not result.is_error, text_of(result)
            assert result.structured_content["greeting"] == "Hello Grace, 85!"
            # Two questions in one call: an elicitation, then sampling.
            summary = await client.call_tool("summarize", {"text": "a long text"})
            assert text_of(summary) == "summary: short"
    assert handler.asked == ["Who are you?", "Spend tokens on a summary?"]
    # The tool ran again from the start for each answer (replay).
    assert setup.stderr().count("outcome=input_required") >= 3


async def test_forged_request_state_is_refused(setup):
    setup.add("misbehave")
    async with session(setup, MODERN, elicitation_callback=elicitation("accept", {})) as client:
        first = await client.call_tool("ask_user", {}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult), first
        (key,) = first.input_requests
        state = first.request_state
        answer = {key: {"action": "accept", "content": {"name": "Eve", "age": 1}}}
        body, mac = state.split(".")
        with pytest.raises(MCPError) as error:
            await client.call_tool("ask_user", {}, input_responses=answer, request_state=body + ".00" + mac[2:])
        assert error.value.code == types.INVALID_PARAMS and "requestState" in error.value.message
        # The genuine state works, and is bound to the arguments.
        ok = await client.call_tool("ask_user", {}, input_responses=answer, request_state=state)
        assert ok.structured_content["greeting"] == "Hello Eve, 1!"
