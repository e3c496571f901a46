"""The guest SDKs, language by language: the same six example tools written
with the Rust, Python, JavaScript and C SDKs (tests/guests/sdk-rust,
tests/components/sdk-{py,js,c}) must list and behave the same through the
official Python SDK, in both protocol eras, under the same argument checks
and limits. Every example has a seventh, `where`,
built on what contract 0.2.0 added (an icon, task support, a client need,
the client's roots, a keyed question)."""

from __future__ import annotations

import json

import mcp.types as types
import pytest
from mcp import MCPError

from conftest import ERAS, LEGACY, MODERN, session, text_of
from test_least_privilege import asking, client

pytestmark = pytest.mark.anyio

LANGS = ["rust", "py", "js", "c"]
TOOLS = {"word_count", "fail", "chatty", "archive", "spin", "hog"}
# The examples built against contract 0.2.0, and the tool they add.
V2_LANGS = ["rust", "py", "js", "c"]
V2_TOOLS = {"where"}
TASKS = "io.modelcontextprotocol/tasks"


@pytest.fixture(params=LANGS)
def lang(request, setup):
    setup.add(f"sdk-{request.param}")
    return request.param


@pytest.fixture(params=V2_LANGS)
def v2_lang(request, setup):
    setup.add(f"sdk-{request.param}")
    return request.param


@pytest.mark.parametrize("era", ERAS)
async def test_the_example_tools_are_listed_with_their_schemas(setup, lang, era):
    async with session(setup, era) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
    assert set(tools) == TOOLS | (V2_TOOLS if lang in V2_LANGS else set()), (lang, set(tools))
    count = tools["word_count"]
    assert count.description.startswith("Count the words in a text"), count.description
    schema = count.input_schema
    assert schema["type"] == "object" and schema["required"] == ["text"], schema
    assert schema["properties"]["text"]["type"] == "string"
    assert schema["properties"]["text"]["minLength"] == 1
    assert schema["properties"]["unique"]["type"] == "boolean"
    assert count.output_schema["type"] == "object"
    assert count.output_schema["properties"]["words"]["type"] == "integer"
    assert count.annotations.read_only_hint is True and count.annotations.idempotent_hint is True
    assert not tools["archive"].annotations or not tools["archive"].annotations.destructive_hint


@pytest.mark.parametrize("era", ERAS)
async def test_structured_output_errors_and_argument_checks(setup, lang, era):
    async with session(setup, era) as c:
        both = await c.call_tool("word_count", {"text": "a b A", "unique": True})
        assert not both.is_error, text_of(both)
        assert both.structured_content == {"words": 3, "unique_words": 2}, (lang, both.structured_content)
        assert json.loads(text_of(both)) == {"words": 3, "unique_words": 2}
        plain = await c.call_tool("word_count", {"text": "one two"})
        assert plain.structured_content == {"words": 2}, (lang, plain.structured_content)

        failed = await c.call_tool("fail", {"message": "it broke: badly"})
        assert failed.is_error and text_of(failed) == "it broke: badly", (lang, text_of(failed))

        # The host checks arguments against the schema before anything runs.
        for arguments, problem in [({}, "text"), ({"text": ""}, "shorter than 1"), ({"text": 5}, "string")]:
            bad = await c.call_tool("word_count", arguments)
            assert bad.is_error and "input schema" in text_of(bad) and problem in text_of(bad), (lang, text_of(bad))
        over = await c.call_tool("chatty", {"steps": 11})
        assert over.is_error and "input schema" in text_of(over), (lang, text_of(over))


async def test_logs_and_progress_reach_the_client(setup, lang):
    logged = []
    progress = []

    async def on_log(params):
        logged.append(params.data)

    async def on_progress(done, total, message):
        progress.append((done, total, message))

    async with session(setup, LEGACY, logging_callback=on_log) as c:
        result = await c.call_tool("chatty", {"steps": 3}, progress_callback=on_progress)
    assert not result.is_error and text_of(result) == "done after 3 steps", (lang, text_of(result))
    assert [str(m) for m in logged if "step" in str(m)] == ["step 1", "step 2", "step 3"], (lang, logged)
    assert progress == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")], (lang, progress)


@pytest.mark.parametrize("era", ERAS)
async def test_a_tool_asks_the_user_through_its_sdk(setup, lang, era):
    yes = asking("accept", {})
    async with client(setup, era, elicitation_callback=yes) as c:
        done = await c.call_tool("archive", {"name": "reports"})
        assert not done.is_error and text_of(done) == "archived reports", (lang, text_of(done))
    assert yes.asked == ["Archive reports?"], (lang, yes.asked)
    no = asking("decline")
    async with client(setup, era, elicitation_callback=no) as c:
        kept = await c.call_tool("archive", {"name": "reports"})
        assert kept.is_error and text_of(kept) == "not archived: the user said no", (lang, text_of(kept))
    # A client that cannot ask: the host's message reaches the model.
    async with session(setup, era) as c:
        unasked = await c.call_tool("archive", {"name": "reports"})
        assert unasked.is_error and "elicitation" in text_of(unasked), (lang, text_of(unasked))


async def test_limits_hold_for_every_language(setup, lang):
    setup.write_config(
        "[tools.spin]\nfuel = 200000000\n\n[tools.hog]\nmemory_mib = 160\n"
    )
    async with session(setup, LEGACY) as c:
        spun = await c.call_tool("spin", {})
        assert spun.is_error and "ran out of fuel" in text_of(spun), (lang, text_of(spun))
        small = await c.call_tool("hog", {"mib": 4})
        assert not small.is_error and text_of(small) == "allocated 4 MiB", (lang, text_of(small))
        big = await c.call_tool("hog", {"mib": 400})
        assert big.is_error and "memory limit" in text_of(big), (lang, text_of(big))
        # Each call is a fresh instance: the server and the tool go on.
        again = await c.call_tool("word_count", {"text": "still here"})
        assert again.structured_content == {"words": 2}
    setup.write_config("[tools.spin]\nfuel = 1000000000000000\ndeadline_ms = 300\n")
    async with session(setup, LEGACY) as c:
        timed = await c.call_tool("spin", {})
        assert timed.is_error and "deadline" in text_of(timed), (lang, text_of(timed))


@pytest.mark.parametrize("era", ERAS)
async def test_icons_and_task_support_declared_with_the_sdk_are_listed(setup, v2_lang, era):
    async with session(setup, era) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
    where = tools["where"]
    assert [(i.src, i.mime_type, i.sizes, i.theme) for i in where.icons or []] == [
        ("data:image/svg+xml;base64,PHN2Zy8+", "image/svg+xml", ["any"], None)
    ], (v2_lang, where.icons)
    assert where.meta[TASKS]["taskSupport"] == "optional", (v2_lang, where.meta)
    # The defaults: no icons, and no task support to show.
    for name in TOOLS:
        assert not tools[name].icons, (v2_lang, name, tools[name].icons)
        assert TASKS not in (tools[name].meta or {}), (v2_lang, name, tools[name].meta)


def roots_of(*uris):
    async def on_roots(_ctx):
        return types.ListRootsResult(roots=[types.Root(uri=uri) for uri in uris])

    return on_roots


async def test_a_tool_that_needs_roots_refuses_a_modern_request_without_them(setup, v2_lang):
    async with session(setup, MODERN) as c:
        with pytest.raises(MCPError) as refused:
            await c.call_tool("where", {})
        assert refused.value.code == -32021, (v2_lang, refused.value.message)
        assert refused.value.data == {"requiredCapabilities": {"roots": {}}}, (v2_lang, refused.value.data)
        # Its other tools need nothing and still run.
        assert not (await c.call_tool("word_count", {"text": "a b"})).is_error
    # 2025-11-25 has no per-request capabilities: the call runs, and the
    # host's refusal of `roots` reaches the model.
    async with session(setup, LEGACY) as c:
        unasked = await c.call_tool("where", {})
        assert unasked.is_error and "roots" in text_of(unasked), (v2_lang, text_of(unasked))


@pytest.mark.parametrize("era", ERAS)
async def test_the_client_roots_reach_the_tool_plain_and_keyed(setup, v2_lang, era):
    shared = roots_of("file:///home/ada/project", "file:///srv/data")
    async with client(setup, era, list_roots_callback=shared) as c:
        for arguments in [{}, {"key": "workspace"}]:
            listed = await c.call_tool("where", arguments)
            assert not listed.is_error, (v2_lang, arguments, text_of(listed))
            assert text_of(listed) == "file:///home/ada/project\nfile:///srv/data", (v2_lang, arguments, text_of(listed))


async def test_a_keyed_question_reaches_a_modern_client_under_its_key(setup, v2_lang):
    async with session(setup, MODERN, list_roots_callback=roots_of("file:///w")) as c:
        first = await c.call_tool("where", {"key": "workspace"}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult), (v2_lang, first)
        assert list(first.input_requests) == ["workspace"], (v2_lang, first.input_requests)
        plain = await c.call_tool("where", {}, allow_input_required=True)
        assert isinstance(plain, types.InputRequiredResult), (v2_lang, plain)
        assert list(plain.input_requests) == ["roots-0"], (v2_lang, plain.input_requests)


def test_the_javascript_sdk_passes_its_own_tests():
    """guest-sdk/js/test: the SDK's logic under Node with a stand-in host
    (schemas, results, errors, helpers), beside the component tests above."""
    import subprocess
    from pathlib import Path

    sdk = Path(__file__).resolve().parents[2] / "guest-sdk" / "js"
    result = subprocess.run(
        ["node", "--import", "./test/register.mjs", "--test", "test/sdk.test.mjs"],
        cwd=sdk,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "# fail 0" in result.stdout


def test_the_javascript_sdk_types_accept_and_refuse_what_they_should():
    """guest-sdk/js/test/types.ts: inferred argument types, output types and
    annotations, each `@ts-expect-error` a mistake the types must catch
    (tsc fails on one that is not an error)."""
    import os
    import subprocess
    from pathlib import Path

    npm = Path(os.environ.get("TOOLCAGE_NPM", "target/npm")).resolve()
    test = Path(__file__).resolve().parents[2] / "guest-sdk" / "js" / "test"
    result = subprocess.run(
        [str(npm / "node_modules" / "node" / "bin" / "node"), str(npm / "node_modules" / "typescript" / "bin" / "tsc"), "-p", str(test / "tsconfig.json")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_the_c_helper_passes_its_own_tests():
    """guest-sdk/c/tests: toolcage.h's argument reader and builders, natively
    under AddressSanitizer and UndefinedBehaviorSanitizer (mutated JSON
    included)."""
    import subprocess
    from pathlib import Path

    run = Path(__file__).resolve().parents[2] / "guest-sdk" / "c" / "tests" / "run"
    result = subprocess.run([str(run)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert " 0 failed" in result.stdout, result.stdout[-2000:]
