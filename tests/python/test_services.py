"""Elicitation and sampling for tools: server-to-client requests on
2025-11-25, input-required replay on 2026-07-28, and the refusals."""

from __future__ import annotations

import pytest
import mcp.types as types
from mcp import Client, MCPError, stdio_client

from conftest import LEGACY, MODERN, read_journal, session, text_of, until

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


# `summarize` asks a question (elicitation), then samples.
REQUIRES_BOTH = SAMPLING_ON + 'requires_client = ["sampling", "elicitation"]\n'


async def test_a_modern_call_without_a_required_capability_is_refused_before_it_runs(setup, tmp_path):
    setup.add("misbehave")
    journal = tmp_path / "journal.jsonl"
    setup.write_config(REQUIRES_BOTH + f'[journal]\npath = "{journal}"\n')
    handler = elicitation("accept", {})
    # The request declares elicitation, not sampling.
    async with session(setup, MODERN, elicitation_callback=handler) as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("summarize", {"text": "a long text"})
        assert refused.value.code == -32021, refused.value.message
        assert refused.value.data == {"requiredCapabilities": {"sampling": {}}}
        assert "needs the client's sampling" in refused.value.message
        # A tool that needs nothing more still runs for this client.
        assert not (await client.call_tool("echo", {"text": "hi"})).is_error
    # Nothing ran: the tool's first question was never asked.
    assert handler.asked == []
    # A request declaring neither lacks both.
    async with session(setup, MODERN) as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("summarize", {"text": "a long text"})
        assert refused.value.code == -32021
        assert refused.value.data == {"requiredCapabilities": {"sampling": {}, "elicitation": {}}}
        assert "sampling and elicitation" in refused.value.message
    await until(lambda: len(read_journal(journal)) >= 3)
    entries = read_journal(journal)
    summarize = [e for e in entries if e["tool"] == "summarize"]
    assert [e["outcome"] for e in summarize] == ["refused", "refused"]
    assert "does not declare sampling" in summarize[0]["message"]
    # A client declaring both gets the whole call.
    with open(setup.stderr_path, "a") as errlog:
        async with Client(
            stdio_client(setup.params(), errlog=errlog),
            mode="auto",
            elicitation_callback=elicitation("accept", {}),
            sampling_callback=on_sample,
            cache=None,
        ) as client:
            summary = await client.call_tool("summarize", {"text": "a long text"})
            assert text_of(summary) == "summary: short"


async def test_a_legacy_session_keeps_the_tool_error(setup):
    # 2025-11-25 has no per-request capabilities to refuse against: the
    # call runs, and the tool's first question gets the clear error.
    setup.add("misbehave")
    setup.write_config(REQUIRES_BOTH)
    async with session(setup, LEGACY) as client:
        result = await client.call_tool("summarize", {"text": "a long text"})
        assert result.is_error and "does not support elicitation" in text_of(result)


@pytest.mark.parametrize(
    "entry,reason",
    [('["telepathy"]', "is not a client capability"), ('"sampling"', "")],
)
def test_requires_client_must_name_client_capabilities(setup, entry, reason):
    setup.add("misbehave")
    setup.write_config(f"[tools.summarize]\nrequires_client = {entry}\n")
    listed = setup.run()
    assert listed.returncode != 0
    assert "requires_client" in listed.stderr and reason in listed.stderr, listed.stderr


async def test_request_state_of_another_call_or_an_earlier_process_is_refused(setup):
    """State binds answers to the call (caller, tool or prompt, arguments)
    and to the server process that signed it: presented anywhere else it
    is refused, and nothing runs on it."""
    setup.add("conformance")
    ask = elicitation("accept", {})
    async with session(setup, MODERN, elicitation_callback=ask) as client:
        first = await client.call_tool("test_input_required_result_elicitation", {}, allow_input_required=True)
        assert list(first.input_requests) == ["user_name"]
        answer = {"user_name": {"action": "accept", "content": {"name": "Eve"}}}
        # Another tool.
        with pytest.raises(MCPError) as other_tool:
            await client.call_tool(
                "test_input_required_result_tampered_state", {}, input_responses=answer, request_state=first.request_state
            )
        assert other_tool.value.code == types.INVALID_PARAMS and "another tool call" in other_tool.value.message
        # A prompt, under the same name space of keys.
        with pytest.raises(MCPError) as prompt:
            await client.get_prompt(
                "test_input_required_result_prompt", input_responses=answer, request_state=first.request_state
            )
        assert prompt.value.code == types.INVALID_PARAMS and "another tool call" in prompt.value.message
        stale = first.request_state
    # The same state, after a restart: another process's key.
    async with session(setup, MODERN, elicitation_callback=ask) as client:
        with pytest.raises(MCPError) as restarted:
            await client.call_tool(
                "test_input_required_result_elicitation", {}, input_responses=answer, request_state=stale
            )
        assert restarted.value.code == types.INVALID_PARAMS and "not issued by this server" in restarted.value.message
        # Answers alone, without state, are not taken: nothing was asked
        # yet, so the question is put to the client; answered with the state
        # that asks it, the call runs.
        fresh = await client.call_tool(
            "test_input_required_result_elicitation", {}, input_responses=answer, allow_input_required=True
        )
        assert list(fresh.input_requests) == ["user_name"]
        done = await client.call_tool(
            "test_input_required_result_elicitation", {}, input_responses=answer, request_state=fresh.request_state
        )
        assert text_of(done) == "Hello, Eve!"
