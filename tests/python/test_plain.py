"""Plain components: a component that does not export the toolcage
contract serves its exported WIT functions as tools, through the real
binary and the official MCP SDK, in both protocol eras.

The guest is tests/guests/plain-types (a function of every WIT type);
`plain-needs` is a build of it that imports an interface the host does not
provide."""

from __future__ import annotations

import json
import time

import pytest

from conftest import ERAS, MODERN, read_journal, session, text_of

pytestmark = pytest.mark.anyio

# Plain components carry no annotations, so their tools count as
# destructive and ask for confirmation; these tests turn that off.
NO_CONFIRM = "[defaults]\nconfirm = false\n"

U64_MAX = 2**64 - 1
S64_MIN = -(2**63)


def plain_setup(setup, extra: str = ""):
    setup.add("plain", "plain_types.wasm")
    setup.write_config(NO_CONFIRM + extra)
    return setup


def tool_by_name(tools, name):
    [tool] = [t for t in tools if t.name == name]
    return tool


@pytest.mark.parametrize("era", ERAS)
async def test_exported_functions_are_tools_with_precise_schemas(setup, era):
    plain_setup(setup)
    async with session(setup, era) as client:
        tools = (await client.list_tools()).tools
    names = {t.name for t in tools}
    # World-level functions keep their names; interface functions too,
    # unless two share a name (`echo`), then the interface qualifies them.
    assert {"bounds", "divide", "nested", "translate", "area", "version"} <= names
    assert {"geometry.echo", "text.echo"} <= names
    assert "echo" not in names
    # Resource methods, constructors and functions using a resource are
    # not tools.
    assert not any("counter" in n or n == "make" for n in names)

    bounds = tool_by_name(tools, "bounds").input_schema
    props = bounds["properties"]
    assert props["a"] == {"type": "integer", "minimum": 0, "maximum": 255}
    assert props["d"] == {"type": "integer", "minimum": 0, "maximum": U64_MAX}
    assert props["h"] == {"type": "integer", "minimum": S64_MIN, "maximum": 2**63 - 1}
    assert props["e"]["minimum"] == -128 and props["f"]["maximum"] == 32767
    assert sorted(bounds["required"]) == list("abcdefgh")
    assert bounds["additionalProperties"] is False

    nested = tool_by_name(tools, "nested").input_schema
    options = nested["properties"]["o"]
    assert options["type"] == "object" and options["additionalProperties"] is False
    # Only the non-option fields are required; field docs are descriptions.
    assert sorted(options["required"]) == ["limit", "tags"]
    assert options["properties"]["limit"]["description"] == "At most this many."
    # An option parameter is not required, and may be null.
    assert "maybe" not in nested["required"]
    assert {"type": "null"} in nested["properties"]["maybe"]["anyOf"]
    # A variant: a bare case is its name, a case with a payload an object.
    figure = nested["properties"]["shapes"]["items"]["oneOf"]
    assert {"const": "dot"} in figure
    assert any(c.get("required") == ["circle"] for c in figure)

    chars = tool_by_name(tools, "chars").input_schema["properties"]["c"]
    assert chars == {"type": "string", "minLength": 1, "maxLength": 1}
    colors = tool_by_name(tools, "colors").input_schema["properties"]
    assert colors["c"]["enum"] == ["red", "green", "blue"]
    assert colors["p"]["uniqueItems"] is True
    # A result's ok type is the output schema, under `result`.
    divide = tool_by_name(tools, "divide")
    assert divide.output_schema["properties"]["result"]["type"] == "integer"
    # Descriptions are the WIT docs, of functions, records and fields.
    assert divide.description == "Divide `a` by `b`; an error when `b` is zero."
    translate = tool_by_name(tools, "translate").input_schema["properties"]["p"]
    assert translate["description"] == "A point on a plane."
    assert translate["properties"]["x"]["description"] == "Horizontal position."
    # A function without docs says so plainly.
    assert "no description in its WIT" in tool_by_name(tools, "nothing").description
    # No hints: destructive and open-world, as MCP reads an unannotated tool.
    assert divide.annotations.destructive_hint is True
    assert divide.annotations.read_only_hint is False


def test_without_docs_the_description_is_generated(setup):
    setup.add("plain-bare")
    setup.write_config(NO_CONFIRM)
    report = json.loads(setup.run("--json").stdout)
    tools = {t["name"]: t for t in report["files"][0]["tools"]}
    assert tools["divide"]["description"] == (
        "`divide`: the function `divide` of a plain component, which has no description "
        "in its WIT. Signature: (a: s32, b: s32) -> result."
    )
    assert "`echo` of `test:plain/text`" in tools["text.echo"]["description"]


@pytest.mark.parametrize("era", ERAS)
async def test_calls_convert_every_type_both_ways(setup, era):
    plain_setup(setup)
    async with session(setup, era) as client:
        bounds = {"a": 255, "b": 65535, "c": 2**32 - 1, "d": U64_MAX, "e": -128, "f": -32768, "g": -(2**31), "h": S64_MIN}
        result = await client.call_tool("bounds", bounds)
        assert not result.is_error, text_of(result)
        assert result.structured_content == {"result": list(bounds.values())}

        result = await client.call_tool("translate", {"p": {"x": 1, "y": 2}, "dx": 10, "dy": -5})
        assert result.structured_content == {"result": {"x": 11, "y": -3}}

        result = await client.call_tool("bytes", {"data": "aGVsbG8="})
        assert result.structured_content == {"result": "b2xsZWg="}  # "olleh"
        result = await client.call_tool("bytes", {"data": [1, 2, 3]})
        assert result.structured_content == {"result": "AwIB"}

        result = await client.call_tool("colors", {"c": "green", "p": ["read", "exec"]})
        assert result.structured_content == {"result": ["green", ["read", "exec"]]}

        result = await client.call_tool(
            "nested",
            {
                "o": {"limit": 5, "tags": ["x", "y"]},
                "shapes": [{"circle": 2.5}, "dot", {"square": 3}],
                "maybe": {"x": 1, "y": 2},
            },
        )
        assert result.structured_content == {
            "result": [{"x": 2, "y": 2}, None, {"x": 3, "y": 2}, {"x": 1, "y": 2}]
        }
        # `none` at the top is null.
        result = await client.call_tool("nested", {"o": {"limit": 0, "tags": []}, "shapes": []})
        assert result.structured_content == {"result": None}

        result = await client.call_tool("chars", {"c": "é"})
        # A string result is the text itself.
        assert text_of(result) == "é U+00E9"
        result = await client.call_tool("floats", {"a": 1.5, "b": 2.25})
        assert result.structured_content == {"result": [1.5, 2.25, 3.75]}
        result = await client.call_tool("geometry.echo", {"text": "hi"})
        assert text_of(result) == "geometry: hi"
        result = await client.call_tool("text.echo", {"text": "hi"})
        assert text_of(result) == "text: hi"

        result = await client.call_tool("nothing", {})
        assert not result.is_error and result.content == []


@pytest.mark.parametrize("era", ERAS)
async def test_a_returned_err_is_an_error_result(setup, era):
    plain_setup(setup)
    async with session(setup, era) as client:
        result = await client.call_tool("divide", {"a": 7, "b": 0})
        assert result.is_error
        assert text_of(result) == "cannot divide 7 by zero"
        result = await client.call_tool("divide", {"a": 7, "b": 2})
        assert not result.is_error and result.structured_content == {"result": 3}
        result = await client.call_tool("fail-record", {})
        assert result.is_error
        assert json.loads(text_of(result)) == {"limit": 7, "label": "broken", "tags": ["a"]}


BAD_ARGUMENTS = [
    ("bounds", {"a": 300, "b": 0, "c": 0, "d": 0, "e": 0, "f": 0, "g": 0, "h": 0}, "$.a: expected an integer in 0..=255 (u8), got 300"),
    ("bounds", {"a": 0, "b": 0, "c": 0, "d": -1, "e": 0, "f": 0, "g": 0, "h": 0}, "$.d: expected an integer in 0..=18446744073709551615 (u64), got -1"),
    ("bounds", {"a": 0, "b": 0, "c": 0, "d": 0, "e": 128, "f": 0, "g": 0, "h": 0}, "$.e: expected an integer in -128..=127 (s8), got 128"),
    ("bounds", {"a": 1.5, "b": 0, "c": 0, "d": 0, "e": 0, "f": 0, "g": 0, "h": 0}, "$.a: expected an integer"),
    ("bounds", {"a": 1}, "$.b: missing (required)"),
    ("nested", {"o": {"limit": 300, "tags": []}, "shapes": []}, "$.o.limit: expected an integer in 0..=255 (u8), got 300"),
    ("nested", {"o": {"limit": 1, "tags": [], "extra": 1}, "shapes": []}, "$.o.extra: unknown field"),
    ("nested", {"o": {"limit": 1, "tags": [1]}, "shapes": []}, "$.o.tags[0]: expected a string, got 1"),
    ("nested", {"o": {"limit": 1, "tags": []}, "shapes": [{"circle": "big"}]}, '$.shapes[0].circle: expected a number, got "big"'),
    ("nested", {"o": {"limit": 1, "tags": []}, "shapes": ["circle"]}, "$.shapes[0]: case `circle` carries a value"),
    ("nested", {"o": {"limit": 1, "tags": []}, "shapes": [{"hexagon": 1}]}, "$.shapes[0]: expected one of"),
    ("colors", {"c": "pink", "p": []}, '$.c: expected one of "red", "green", "blue", got "pink"'),
    ("colors", {"c": "red", "p": ["read", "read"]}, "flag `read` given twice"),
    ("chars", {"c": "ab"}, '$.c: expected a string of exactly one character, got "ab"'),
    ("bytes", {"data": [1, 2, 300]}, "$.data[2]: expected a byte (0..=255), got 300"),
    ("bytes", {"data": "not base64!"}, "$.data: expected base64 text"),
    ("greet", {"name": "x", "extra": 1}, "unknown argument `extra`"),
    ("translate", {"p": {"x": 1}, "dx": 0, "dy": 0}, "$.p.y: missing (required)"),
]


@pytest.mark.parametrize("era", ERAS)
async def test_bad_arguments_name_the_path_and_the_type(setup, era):
    journal = setup.root / "journal.jsonl"
    plain_setup(setup, f'\n[journal]\npath = "{journal}"\n')
    async with session(setup, era) as client:
        for tool, arguments, expected in BAD_ARGUMENTS:
            result = await client.call_tool(tool, arguments)
            assert result.is_error, (tool, arguments)
            assert expected in text_of(result), (expected, text_of(result))
            assert "the tool was not run" in text_of(result)
        # Deeply nested junk is refused, not followed.
        deep = {"x": 1}
        for _ in range(100):
            deep = {"x": deep}
        result = await client.call_tool("greet", {"name": deep})
        assert result.is_error and "$.name: expected a string" in text_of(result)
        # The server is fine afterwards.
        result = await client.call_tool("greet", {"name": "after"})
        assert text_of(result) == "Hello, after!"
    # Each refusal is journalled as refused, before anything ran.
    deadline = time.monotonic() + 10
    while len(read_journal(journal)) < len(BAD_ARGUMENTS) + 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    lines = read_journal(journal)
    assert [line["outcome"] for line in lines[: len(BAD_ARGUMENTS)]] == ["refused"] * len(BAD_ARGUMENTS)
    assert lines[-1]["outcome"] == "ok"


@pytest.mark.parametrize("era", ERAS)
async def test_limits_apply_to_plain_tools(setup, era):
    plain_setup(setup, "\n[tools.spin]\ndeadline_ms = 300\n")
    async with session(setup, era) as client:
        result = await client.call_tool("spin", {})
        assert result.is_error
        assert "deadline" in text_of(result)
        result = await client.call_tool("greet", {"name": "still here"})
        assert text_of(result) == "Hello, still here!"


async def test_plain_tools_ask_for_confirmation_by_default(setup):
    setup.add("plain", "plain_types.wasm")
    result = setup.run("greet", '{"name": "x"}', command="call")
    assert result.returncode != 0
    out = result.stdout + result.stderr
    assert "confirmation" in out


def test_list_reports_kind_exports_and_what_is_not_a_tool(setup):
    plain_setup(setup)
    result = setup.run()
    assert result.returncode == 0, result.stderr
    assert "plain_types.wasm" in result.stdout and "plain component" in result.stdout
    assert "test:plain/geometry@0.1.0" in result.stdout
    assert "NOT A TOOL: it is a resource method or constructor" in result.stdout
    assert "uses the resource `counter`" in result.stdout

    report = json.loads(setup.run("--json").stdout)
    [file] = report["files"]
    assert file["kind"] == "plain"
    assert "bounds" in file["exports"] and "test:plain/counters@0.1.0" in file["exports"]
    skipped = {s["function"]: s["reason"] for s in file["skipped"]}
    assert "test:plain/counters@0.1.0#make" in skipped
    assert "test:plain/counters@0.1.0#[method]counter.get" in skipped
    assert {t["name"] for t in file["tools"]} >= {"bounds", "geometry.echo", "version"}


def test_a_missing_import_is_refused_before_compiling_with_the_whole_list(setup):
    setup.add("plain-needs")
    setup.add("plain", "plain_types.wasm")
    started = time.monotonic()
    result = setup.run("--json")
    # One file failed: exit status 1, and --json still prints everything.
    assert result.returncode == 1
    report = json.loads(result.stdout)
    by_file = {f["file"].rsplit("/", 1)[-1]: f for f in report["files"]}
    needs = by_file["plain_needs.wasm"]
    assert needs["status"] == "failed"
    assert "`test:plain/elsewhere@0.1.0`" in needs["error"]
    assert "which toolcage does not provide" in needs["error"]
    assert by_file["plain_types.wasm"]["status"] == "loaded"
    # (No timing is asserted; the refusal comes from the type, not a compile:
    # the message is the inspector's, which lists every missing import.)
    assert time.monotonic() - started < 120


def test_core_modules_and_garbage_are_refused(setup):
    (setup.tools_dir / "core.wasm").write_bytes(b"\0asm\x01\0\0\0")
    (setup.tools_dir / "junk.wasm").write_bytes(b"not wasm at all")
    setup.add("plain", "plain_types.wasm")
    result = setup.run("--json")
    assert result.returncode == 1
    by_file = {f["file"].rsplit("/", 1)[-1]: f for f in json.loads(result.stdout)["files"]}
    assert "core WebAssembly module" in by_file["core.wasm"]["error"]
    assert "not a WebAssembly component" in by_file["junk.wasm"]["error"]
    assert by_file["plain_types.wasm"]["status"] == "loaded"


@pytest.mark.parametrize("era", ERAS)
async def test_two_plain_components_with_the_same_function(setup, era):
    plain_setup(setup)
    setup.add("plain", "zz_second.wasm")
    async with session(setup, era) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert names.count("greet") == 1
        result = await client.call_tool("greet", {"name": "x"})
        assert text_of(result) == "Hello, x!"
    report = json.loads(setup.run("--json").stdout)
    second = [f for f in report["files"] if f["file"].endswith("zz_second.wasm")][0]
    greet = [t for t in second["tools"] if t["name"] == "greet"][0]
    assert greet["status"] == "shadowed"


def test_calling_a_tool_of_a_refused_file_says_which_file_failed_and_why(setup):
    setup.add("plain-needs")
    setup.write_config(NO_CONFIRM)
    result = setup.run("greet", '{"name": "x"}', command="call")
    assert result.returncode == 2
    assert "unknown tool `greet`" in result.stderr
    assert "1 file in the tools folder failed to load and might have provided it" in result.stderr
    assert "plain_needs.wasm: cannot be linked: it imports interface `test:plain/elsewhere@0.1.0`" in result.stderr


@pytest.mark.parametrize("era", ERAS)
async def test_a_python_plain_component_runs_unchanged(setup, era):
    """Built by componentize-py from tests/components/plain-py: world
    functions, an interface, `result` and `option`, and componentize-py's
    own `exports#init`, which is not a tool."""
    setup.add("plain-py")
    setup.write_config(NO_CONFIRM)
    async with session(setup, era) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == {"add", "divide", "words", "stats", "fail"}
        assert tools["add"].description == "Add two integers."
        assert tools["add"].input_schema["properties"]["a"]["minimum"] == S64_MIN
        result = await client.call_tool("add", {"a": 2**62, "b": 2**62 - 1})
        assert result.structured_content == {"result": 2**63 - 1}
        result = await client.call_tool("divide", {"a": 1, "b": 0})
        assert result.is_error and text_of(result) == "cannot divide 1.0 by zero"
        result = await client.call_tool("words", {"text": "a bc"})
        assert result.structured_content == {"result": ["a", "bc"]}
        result = await client.call_tool("words", {"text": "a bc", "shout": True})
        assert result.structured_content == {"result": ["A", "BC"]}
        result = await client.call_tool("stats", {"text": "héllo world"})
        assert result.structured_content == {"result": {"words": 2, "chars": 11}}
        # An exception with no `result` to carry it: the author's message,
        # not componentize-py's own panic.
        result = await client.call_tool("fail", {"why": "x"})
        assert result.is_error
        assert text_of(result) == "tool `fail` raised an error: ValueError: failed on purpose: x"
        result = await client.call_tool("add", {"a": 1, "b": 1})
        assert result.structured_content == {"result": 2}
    report = json.loads(setup.run("--json").stdout)
    skipped = {s["function"]: s["reason"] for s in report["files"][0]["skipped"]}
    assert skipped == {"exports#init": "componentize-py's start-up export, not a tool"}


@pytest.mark.parametrize("era", ERAS)
async def test_a_javascript_plain_component_runs_unchanged(setup, era):
    """Built by componentize-js from tests/components/plain-js: world
    functions, an interface, an `async` JavaScript function, and a thrown
    error as a `result`'s `err`."""
    setup.add("plain-js")
    secret = setup.root / "greeting.txt"
    secret.write_text("Bonjour\n")
    setup.write_config(NO_CONFIRM + f'\n[tools.greeting.config]\ngreeting = {{ file = "{secret}" }}\n')
    async with session(setup, era) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == {"reverse", "shout", "parse", "word-count", "greeting", "boom"}
        # `wasi:config/store` serves the tool's `config` grant.
        result = await client.call_tool("greeting", {"name": "Ada"})
        assert text_of(result) == "Bonjour, Ada!"
        assert tools["word-count"].description == "The number of words in `text`."
        result = await client.call_tool("reverse", {"text": "abc"})
        assert text_of(result) == "cba"
        result = await client.call_tool("shout", {"text": "quiet"})
        assert text_of(result) == "QUIET"
        result = await client.call_tool("parse", {"text": "42"})
        assert result.structured_content == {"result": 42}
        result = await client.call_tool("parse", {"text": "x"})
        assert result.is_error and text_of(result) == 'not a non-negative integer: "x"'
        result = await client.call_tool("word-count", {"text": "a b  c"})
        assert result.structured_content == {"result": 3}
        # A throw with no `result`: the thrown message, not a wasm trap.
        result = await client.call_tool("boom", {"why": "x"})
        assert result.is_error
        assert text_of(result) == "tool `boom` raised an error: boom on purpose: x"
    # `toolcage list` says it may read granted configuration values.
    assert "configuration values (granted `config`)" in setup.run().stdout


async def test_wasi_config_serves_nothing_that_is_not_granted(setup):
    setup.add("plain-js")
    # Another tool's grant, and the environment, are not this tool's config.
    setup.write_config(
        NO_CONFIRM + '\n[tools.reverse.config]\ngreeting = "Hi"\n[tools.greeting.env]\ngreeting = "Hi"\n'
    )
    async with session(setup, MODERN) as client:
        result = await client.call_tool("greeting", {"name": "Ada"})
        assert result.is_error and text_of(result) == "the `greeting` setting is not granted"


@pytest.mark.parametrize("era", ERAS)
async def test_the_operator_exposes_hides_renames_and_describes(setup, era):
    setup.add("plain", "p.wasm")
    setup.write_config(
        NO_CONFIRM
        + """
[components."p.wasm"]
expose = ["divide", "geometry.echo", "greet", "no-such-function"]
hide = ["greet"]
rename = { "geometry.echo" = "geo_echo" }

[components."p.wasm".tools.divide]
description = "Integer division, checked."
read_only = true
idempotent = true
"""
    )
    async with session(setup, era) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == {"divide", "geo_echo"}
        divide = tools["divide"]
        assert divide.description == "Integer division, checked."
        # Read-only: no longer destructive, so no confirmation is needed.
        assert divide.annotations.read_only_hint is True
        assert divide.annotations.destructive_hint is False
        assert divide.annotations.idempotent_hint is True
        result = await client.call_tool("geo_echo", {"text": "hi"})
        assert text_of(result) == "geometry: hi"
    report = json.loads(setup.run("--json").stdout)
    skipped = {s["function"]: s["reason"] for s in report["files"][0]["skipped"]}
    assert skipped["greet"] == "`greet` is hidden by the config's `hide` list"
    assert skipped["bounds"] == "`bounds` is not in the config's `expose` list"
    # A name the rules give that no function has is reported, not ignored.
    assert "no-such-function" in setup.run().stderr


def test_read_only_from_the_config_lifts_the_confirmation(setup):
    setup.add("plain", "p.wasm")
    setup.write_config('[components."p.wasm".tools.greet]\nread_only = true\n')
    result = setup.run("greet", '{"name": "x"}', command="call")
    assert result.returncode == 0, result.stderr
    assert "Hello, x!" in result.stdout


async def test_missing_imports_may_be_loaded_to_trap_by_the_operator(setup):
    setup.add("plain-needs")
    setup.write_config(NO_CONFIRM + '\n[components."plain_needs.wasm"]\nmissing_imports = "trap"\n')
    async with session(setup, MODERN) as client:
        # What does not touch the missing import works...
        result = await client.call_tool("divide", {"a": 6, "b": 3})
        assert result.structured_content == {"result": 2}
        # ...and what does gets an error that names it.
        result = await client.call_tool("greet", {"name": "x"})
        assert result.is_error
        assert "`test:plain/elsewhere@0.1.0#fetch`" in text_of(result)
    assert "missing imports that trap" in setup.stderr()


@pytest.mark.parametrize(
    "section, key",
    [
        ('missing_imports = "maybe"', "components.\"p.wasm\".missing_imports"),
        ('rename = { greet = "not a name!" }', "components.\"p.wasm\".rename.greet"),
        ("colour = 1", "colour"),
    ],
)
def test_a_bad_components_section_is_a_config_error_naming_the_key(setup, section, key):
    setup.add("plain", "p.wasm")
    setup.write_config(f'[components."p.wasm"]\n{section}\n')
    result = setup.run()
    assert result.returncode == 2
    assert key in result.stderr, result.stderr
