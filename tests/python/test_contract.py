"""Contract 0.2.0 (`guest-sdk/wit/tool.wit`), through the official Python
SDK: icons, completions, roots, questions under the tool's own keys, needs
a tool declares; and that a component built against 0.1.0 still loads and
runs unchanged."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import mcp.types as types
from mcp import MCPError

from conftest import ERAS, LEGACY, MODERN, session, text_of

pytestmark = pytest.mark.anyio


async def on_roots(_ctx):
    return types.ListRootsResult(
        roots=[
            types.Root(uri="file:///work/project", name="project"),
            types.Root(uri="file:///work/notes"),
        ]
    )


def answering(content):
    async def on_elicit(_ctx, params):
        on_elicit.asked.append(params.message)
        return types.ElicitResult(action="accept", content=content)

    on_elicit.asked = []
    return on_elicit


@pytest.mark.parametrize("era", ERAS)
async def test_icons_are_listed_for_tools_templates_and_prompts(setup, era):
    setup.add("contract2")
    async with session(setup, era) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        icons = [i.model_dump(by_alias=True, exclude_none=True) for i in tools["iconic"].icons]
        assert icons == [
            {"src": "data:image/svg+xml;base64,PHN2Zy8+"},
            {
                "src": "https://icons.example.com/iconic.png",
                "mimeType": "image/png",
                "sizes": ["48x48"],
                "theme": "dark",
            },
        ]
        assert tools["roots_listing"].icons is None
        [template] = (await client.list_resource_templates()).resource_templates
        assert [i.src for i in template.icons] == ["https://icons.example.com/item.svg"]
        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
        assert [i.src for i in prompts["plan"].icons] == ["https://icons.example.com/plan.png"]


def test_an_icon_a_client_would_fetch_over_plain_http_refuses_the_file(setup):
    setup.add("contract2-bad-icons")
    setup.add("time")
    # `list` says what failed to load, and exits 1 for it.
    listed = setup.run("--json")
    files = {Path_name(f["file"]): f for f in json.loads(listed.stdout)["files"]}
    bad = files["contract2_bad_icons.wasm"]
    assert bad["status"] == "failed", bad
    assert "tool `iconic` has an icon whose `src`" in bad["error"], bad["error"]
    assert "http://tracker.example.com/pixel.png" in bad["error"]
    assert "`https:` URL or a `data:image/...` URI" in bad["error"]
    assert files["time_tool.wasm"]["status"] == "loaded"


def Path_name(path: str) -> str:
    return path.rsplit("/", 1)[-1]


@pytest.mark.parametrize("era", ERAS)
async def test_completions_come_from_the_component(setup, era):
    setup.add("contract2")
    async with session(setup, era) as client:
        prompt = types.PromptReference(type="ref/prompt", name="plan")
        done = await client.complete(prompt, {"name": "topic", "value": "trip"})
        # 250 suggestions: the host keeps MCP's 100 and says there are more.
        assert done.completion.values[:3] == ["trip0", "trip1", "trip2"]
        assert len(done.completion.values) == 100
        assert done.completion.total == 250 and done.completion.has_more is True
        template = types.ResourceTemplateReference(type="ref/resource", uri="items://{kind}/{id}")
        kinds = await client.complete(template, {"name": "kind", "value": "ap"})
        assert kinds.completion.values == ["apple", "apricot"]
        assert kinds.completion.has_more is False
        # The other variables already chosen reach the component.
        ids = await client.complete(
            template, {"name": "id", "value": "7"}, context_arguments={"kind": "banana"}
        )
        assert ids.completion.values == ["banana-71", "banana-72", "banana-73"]
        # An argument the component completes nothing for: nothing.
        quiet = await client.complete(types.PromptReference(type="ref/prompt", name="quiet"), {"name": "mood", "value": "c"})
        assert quiet.completion.values == []


@pytest.mark.parametrize("era", ERAS)
async def test_completions_of_what_does_not_exist_are_invalid_params(setup, era):
    setup.add("contract2")
    async with session(setup, era) as client:
        cases = [
            (types.PromptReference(type="ref/prompt", name="nope"), "topic", "unknown prompt `nope`"),
            (types.PromptReference(type="ref/prompt", name="plan"), "subject", "has no argument `subject`; its arguments are: `topic`"),
            (types.ResourceTemplateReference(type="ref/resource", uri="items://{x}"), "x", "unknown resource"),
            (types.ResourceTemplateReference(type="ref/resource", uri="items://{kind}/{id}"), "colour", "its arguments are: `kind`, `id`"),
        ]
        for ref, argument, words in cases:
            with pytest.raises(MCPError) as refused:
                await client.complete(ref, {"name": argument, "value": ""})
            assert refused.value.error.code == -32602
            assert words in refused.value.error.message, refused.value.error.message
        with pytest.raises(MCPError) as refused:
            await client.complete(types.PromptReference(type="ref/prompt", name="plan"), {"name": "topic", "value": "v" * 10_000})
        assert refused.value.error.code == -32602 and "too large" in refused.value.error.message


async def test_roots_reach_the_tool_in_both_eras(setup):
    setup.add("contract2")
    async with session(setup, LEGACY, list_roots_callback=on_roots) as client:
        result = await client.call_tool("roots_listing", {})
        assert text_of(result) == "file:///work/project (project)\nfile:///work/notes (-)", text_of(result)
    async with session(setup, MODERN, list_roots_callback=on_roots) as client:
        first = await client.call_tool("roots_listing", {}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
        [(key, request)] = first.input_requests.items()
        assert key == "roots-0" and request.method == "roots/list"
        result = await client.call_tool(
            "roots_listing",
            {},
            input_responses={key: {"roots": [{"uri": "file:///elsewhere", "name": "x"}]}},
            request_state=first.request_state,
        )
        assert text_of(result) == "file:///elsewhere (x)"
    # A client that shares no roots gets a clear refusal, not a question.
    async with session(setup, LEGACY) as client:
        result = await client.call_tool("roots_listing", {})
        assert result.is_error and "does not share its roots" in text_of(result)


async def test_questions_under_the_tools_own_keys_in_one_round(setup):
    setup.add("contract2")
    async with session(setup, MODERN, list_roots_callback=on_roots, elicitation_callback=answering({})) as client:
        first = await client.call_tool("ask_two", {}, allow_input_required=True)
        assert sorted(first.input_requests) == ["where", "who"]
        assert first.input_requests["who"].method == "elicitation/create"
        assert first.input_requests["where"].method == "roots/list"
        result = await client.call_tool(
            "ask_two",
            {},
            input_responses={
                "who": {"action": "accept", "content": {"name": "Ada"}},
                "where": {"roots": []},
            },
            request_state=first.request_state,
        )
        assert "elicit: ElicitResponse::Accept" in text_of(result) and "roots: 0" in text_of(result), text_of(result)
    # On 2025-11-25 they are asked one after another.
    handler = answering({"name": "Bob"})
    async with session(setup, LEGACY, list_roots_callback=on_roots, elicitation_callback=handler) as client:
        result = await client.call_tool("ask_two", {})
        assert "roots: 2" in text_of(result) and "Bob" in text_of(result), text_of(result)
    assert handler.asked == ["Who are you?"]


@pytest.mark.parametrize(
    "case,words",
    [
        ("repeat", "`a` is used twice"),
        ("reserved", "`elicit-0` is one the host gives"),
        ("confirm", "`toolcage-confirm` is one the host gives"),
        ("long", "is not 1 to 64 characters"),
        ("space", "`a b` is not 1 to 64 characters"),
        ("too_many", "17 questions in one ask, over the limit of 16"),
    ],
)
async def test_a_malformed_batch_of_questions_ends_the_call_with_the_reason(setup, case, words):
    setup.add("contract2")
    async with session(setup, MODERN, list_roots_callback=on_roots) as client:
        result = await client.call_tool("ask_bad_keys", {"case": case})
        assert result.is_error and "host.ask" in text_of(result) and words in text_of(result), text_of(result)
        # The server serves on.
        assert text_of(await client.call_tool("iconic", {})) == "iconic"


async def test_a_need_the_tool_declares_refuses_a_request_that_lacks_it(setup):
    setup.add("contract2")
    async with session(setup, MODERN) as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("needs_elicit", {})
        assert refused.value.error.code == -32021
        assert refused.value.error.data["requiredCapabilities"] == {"elicitation": {}}
    async with session(setup, MODERN, elicitation_callback=answering({"ok": True})) as client:
        first = await client.call_tool("needs_elicit", {}, allow_input_required=True)
        assert list(first.input_requests) == ["ok_to_go"]


def test_components_of_both_contract_versions_load_side_by_side(setup):
    setup.add("liar")  # contract 0.1.0, bound to the raw WIT
    setup.add("contract2")  # 0.2.0, through the SDK
    listed = json.loads(setup.run("--json", check=True).stdout)
    versions = {Path_name(f["file"]): (f["status"], f["kind"], f["contract"]) for f in listed["files"]}
    assert versions == {
        "liar.wasm": ("loaded", "contract", "0.1"),
        "contract2.wasm": ("loaded", "contract", "0.2"),
    }
    # A 0.1.0 component's call runs, and its result is checked as any.
    called = setup.run("not_object", "{}", command="call")
    assert "returned structured output that is not a JSON object" in called.stdout, called


NOTES = Path("/tmp/toolcage-test-resource-files")


class Updates:
    def __init__(self):
        self.uris: list[str] = []

    async def on_message(self, message):
        if isinstance(message, types.ResourceUpdatedNotification):
            self.uris.append(str(message.params.uri))

    async def wait_for(self, n: int, timeout: float = 30):
        import anyio

        with anyio.fail_after(timeout):
            while len(self.uris) < n:
                await anyio.sleep(0.02)


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
async def test_a_resource_backed_by_a_granted_file_tells_its_subscribers_when_it_changes(setup):
    """The component says which file a resource comes from; the operator
    grants resource reads that folder (read-only); the host watches the
    file and sends `notifications/resources/updated` when it changes,
    through an editor's replace as through a write in place. A resource
    that names a file outside the grant is neither watched nor readable."""
    shutil.rmtree(NOTES, ignore_errors=True)
    NOTES.mkdir(parents=True)
    (NOTES / "today.txt").write_text("buy milk")
    setup.add("contract2")
    setup.write_config(f'[resources]\nroots = [{{ path = "{NOTES}", mode = "ro" }}]\n')
    updates = Updates()
    try:
        async with session(setup, LEGACY, message_handler=updates.on_message) as client:
            read = await client.read_resource("notes://today")
            assert read.contents[0].text == "buy milk"
            await client.subscribe_resource("notes://today")
            await client.subscribe_resource("notes://passwords")
            (NOTES / "today.txt").write_text("buy milk and bread")
            await updates.wait_for(1)
            assert updates.uris == ["notes://today"]
            assert (await client.read_resource("notes://today")).contents[0].text == "buy milk and bread"
            # An editor writes a new file and renames it over the old one.
            part = NOTES / "today.txt.part"
            part.write_text("done")
            part.rename(NOTES / "today.txt")
            await updates.wait_for(2)
            assert set(updates.uris) == {"notes://today"}
            # What the grant does not name stays out of reach.
            with pytest.raises(MCPError) as refused:
                await client.read_resource("notes://passwords")
            assert "cannot read" in refused.value.message
        assert "outside the `[resources] roots`" in setup.stderr()
    finally:
        shutil.rmtree(NOTES, ignore_errors=True)


async def test_without_a_grant_reads_open_nothing_and_nothing_is_watched(setup):
    shutil.rmtree(NOTES, ignore_errors=True)
    NOTES.mkdir(parents=True)
    (NOTES / "today.txt").write_text("private")
    setup.add("contract2")
    try:
        async with session(setup, LEGACY) as client:
            with pytest.raises(MCPError) as refused:
                await client.read_resource("notes://today")
            assert "cannot read today's notes" in refused.value.message
        assert "outside the `[resources] roots`" in setup.stderr()
    finally:
        shutil.rmtree(NOTES, ignore_errors=True)


def test_resource_roots_are_read_only(setup):
    setup.add("contract2")
    setup.write_config('[resources]\nroots = [{ path = "/tmp", mode = "rw" }]\n')
    listed = setup.run()
    assert listed.returncode != 0
    assert "resources.roots[0].mode" in listed.stderr and "must be \"ro\"" in listed.stderr, listed.stderr
