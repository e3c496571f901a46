"""The command line: `list`, `call`, `--help`, config errors, the compile
cache, and components that must be rejected at load while others serve."""

import json
import re
import subprocess

import pytest

from conftest import BIN, ERAS, session, text_of

pytestmark = pytest.mark.anyio


def test_help_everywhere():
    for args in [["--help"], ["serve", "--help"], ["list", "--help"], ["call", "--help"]]:
        out = subprocess.run([str(BIN), *args], capture_output=True, text=True, check=True).stdout
        assert "Usage: toolcage" in out
    assert "--json" in subprocess.run([str(BIN), "list", "--help"], capture_output=True, text=True).stdout


def test_call_prints_the_result_and_sets_the_exit_code(setup):
    setup.add("time")
    ok = setup.run("convert_timezone", '{"time":"2026-01-01T00:00:00Z","timezone":"Asia/Tokyo"}', command="call")
    assert ok.returncode == 0, ok.stderr
    result = json.loads(ok.stdout)
    assert result["structuredContent"]["converted"]["datetime"] == "2026-01-01T09:00:00+09:00"

    bad = setup.run("get_current_time", '{"timezone":"Nowhere/Else"}', command="call")
    assert bad.returncode == 1
    assert json.loads(bad.stdout)["isError"] is True

    unknown = setup.run("nope", command="call")
    assert unknown.returncode == 2 and "unknown tool `nope`" in unknown.stderr

    not_object = setup.run("get_current_time", "[1]", command="call")
    assert not_object.returncode == 2 and "JSON object" in not_object.stderr


def test_broken_components_are_skipped_with_a_reason_and_the_rest_serve(setup):
    setup.add("time")
    setup.add("bad-describe")
    (setup.tools_dir / "garbage.wasm").write_bytes(b"definitely not wasm")
    (setup.tools_dir / "core-module.wasm").write_bytes(b"\0asm\x01\0\0\0")
    (setup.tools_dir / "half.wasm").write_bytes((setup.tools_dir / "time_tool.wasm").read_bytes()[:5000])
    (setup.tools_dir / "notes.txt").write_text("not a tool, ignored")

    listing = setup.run("--json")
    # Some files failed: exit status 1, with every file still reported.
    assert listing.returncode == 1, listing.stderr
    files = {f["file"].rsplit("/", 1)[1]: f for f in json.loads(listing.stdout)["files"]}
    assert "notes.txt" not in files
    assert files["time_tool.wasm"]["status"] == "loaded"
    assert len(files["time_tool.wasm"]["digest"]) == 64
    tools = {t["name"]: t for t in files["time_tool.wasm"]["tools"]}
    assert tools["convert_timezone"]["inputSchema"]["type"] == "object"
    assert tools["convert_timezone"]["status"] == "served"

    reasons = {name: f["error"] for name, f in files.items() if f["status"] == "failed"}
    assert set(reasons) == {"bad_describe.wasm", "garbage.wasm", "core-module.wasm", "half.wasm"}
    assert "tool name `not a valid name!`" in reasons["bad_describe.wasm"]
    assert "not a WebAssembly component" in reasons["garbage.wasm"]
    assert "core WebAssembly module" in reasons["core-module.wasm"]
    assert "failed to compile" in reasons["half.wasm"]
    # The verdict is cached with the compiled artefacts: the next load does
    # not compile the file again, and says the same.
    half_digest = files["half.wasm"]["digest"]
    assert list(setup.cache_dir.glob(f"{half_digest}-*.refused"))
    again = {f["file"].rsplit("/", 1)[1]: f for f in json.loads(setup.run("--json").stdout)["files"]}
    assert again["half.wasm"]["error"] == reasons["half.wasm"]

    text = setup.run()
    assert text.returncode == 1
    assert "FAILED" in text.stdout and "convert_timezone" in text.stdout


@pytest.mark.parametrize("era", ERAS)
async def test_the_server_serves_the_good_tools_next_to_broken_ones(setup, era):
    setup.add("time")
    setup.add("bad-describe")
    (setup.tools_dir / "garbage.wasm").write_bytes(b"nope")
    async with session(setup, era) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert names == {"get_current_time", "convert_timezone"}
        assert not (await client.call_tool("get_current_time", {})).is_error
    assert "bad_describe.wasm" in setup.stderr() and "skipping tool component" in setup.stderr()


def test_duplicate_tool_names_are_resolved_by_file_name_and_reported(setup):
    setup.add("time", as_name="b-time.wasm")
    setup.add("time", as_name="a-time.wasm")
    files = {f["file"].rsplit("/", 1)[1]: f for f in json.loads(setup.run("--json").stdout)["files"]}
    assert all(t["status"] == "served" for t in files["a-time.wasm"]["tools"])
    shadowed = files["b-time.wasm"]["tools"]
    assert all(t["status"] == "shadowed" for t in shadowed)
    assert all(t["shadowedBy"].endswith("a-time.wasm") for t in shadowed)
    assert "SHADOWED by" in setup.run().stdout


@pytest.mark.parametrize(
    "config,needles",
    [
        ("[defaults]\nfuell = 5\n", ["config.toml", "fuell"]),
        ("[tools.spin]\nfuel = 0\n", ["config.toml", "`tools.spin.fuel` = 0", "at least 1"]),
        ("[defaults]\nmemory_mib = 99999\n", ["`defaults.memory_mib` = 99999"]),
        ("[defaults]\ndeadline_ms = \"soon\"\n", ["deadline_ms", "soon"]),
        ("this is = = not toml", ["config.toml"]),
    ],
)
def test_config_errors_name_the_file_key_and_value(setup, config, needles):
    setup.add("time")
    setup.write_config(config)
    result = setup.run()
    assert result.returncode == 2
    for needle in needles:
        assert needle in result.stderr, result.stderr


def test_limits_come_from_the_config(setup):
    setup.add("misbehave")
    setup.write_config("[defaults]\nfuel = 1000\n[tools.echo]\nfuel = 100000000\n")
    spin = setup.run("slow", '{"ms": 1}', command="call")
    assert spin.returncode == 1 and "ran out of fuel (limit 1000)" in spin.stdout
    echo = setup.run("echo", '{"text": "x"}', command="call")
    assert echo.returncode == 0, echo.stdout


def test_a_restart_uses_the_compile_cache(setup, tmp_path):
    setup.cache_dir = tmp_path / "fresh-cache"
    setup.add("time")
    # The load lines are INFO: asked for, as the CLI logs warnings only.
    info = {"TOOLCAGE_LOG": "info"}
    first = setup.run("get_current_time", command="call", env=info)
    assert first.returncode == 0 and "cached=false" in first.stderr
    assert list(setup.cache_dir.glob("*.cwasm"))
    second = setup.run("get_current_time", command="call", env=info)
    assert second.returncode == 0 and "cached=true" in second.stderr
    # A corrupted cache entry is discarded, not trusted.
    for entry in setup.cache_dir.glob("*.cwasm"):
        entry.write_bytes(b"corrupt")
    third = setup.run("get_current_time", command="call")
    assert third.returncode == 0 and "discarding unreadable compile-cache entry" in third.stderr


def test_a_reader_that_stops_early_is_not_an_error(tmp_path):
    # `toolcage journal | head -1`: the pipe closes after one line; like
    # `cat`, toolcage stops quietly with status 0 (not "Broken pipe", 2).
    journal = tmp_path / "journal.jsonl"
    line = {
        "time": "2026-01-01T00:00:00Z",
        "tool": "t",
        "outcome": "ok",
        "duration_ms": 1,
        "digest": "0" * 64,
        "client": {"transport": "stdio"},
    }
    journal.write_text("\n".join(json.dumps(line) for _ in range(20_000)) + "\n")
    shell = subprocess.run(
        ["bash", "-c", f'"{BIN}" journal --file "{journal}" | head -1; echo "status=${{PIPESTATUS[0]}}"'],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shell.stdout.strip().endswith("status=0"), (shell.stdout[-500:], shell.stderr)
    assert "Broken pipe" not in shell.stderr, shell.stderr


def test_serve_on_a_terminal_says_what_it_waits_for_and_is_quiet_otherwise(setup):
    import os
    import pty

    setup.add("time")
    env = {k: v for k, v in os.environ.items() if k != "TOOLCAGE_LOG"}
    # stdin a terminal, as when a person types `toolcage serve`.
    terminal, its_end = pty.openpty()
    served = subprocess.Popen(
        [str(BIN), *setup.args("serve")],
        stdin=its_end,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    os.close(its_end)
    try:
        first = served.stderr.readline().decode()
        assert "speaks MCP on stdin/stdout" in first, first
        assert "toolcage call" in first and "inspector" in first
        os.write(terminal, b"\x04")  # Ctrl-D: end of input
        _, rest = served.communicate(timeout=60)
    finally:
        served.kill()
        os.close(terminal)
    assert served.returncode == 0, rest.decode()
    # Nothing else: no INFO lines for a person at a terminal.
    assert rest.decode().strip() == "", rest.decode()
    # Behind a pipe (an MCP client), the log as before and no hint.
    piped = subprocess.run(
        [str(BIN), *setup.args("serve")], input="", capture_output=True, text=True, env=env, timeout=60
    )
    assert piped.returncode == 0
    assert "speaks MCP" not in piped.stderr and "INFO" in piped.stderr, piped.stderr


def test_commands_other_than_serve_log_only_warnings_unless_asked(setup):
    import os

    setup.add("time")
    setup.add("bad-describe")
    env = {k: v for k, v in os.environ.items() if k != "TOOLCAGE_LOG"}
    quiet = subprocess.run([str(BIN), *setup.args("list")], capture_output=True, text=True, env=env, timeout=120)
    assert quiet.returncode == 1  # a file failed to load
    assert "INFO" not in quiet.stderr, quiet.stderr
    # The warning about the broken file still shows.
    assert "WARN" in quiet.stderr and "bad_describe.wasm" in quiet.stderr, quiet.stderr
    asked = subprocess.run(
        [str(BIN), *setup.args("list")], capture_output=True, text=True, env={**env, "TOOLCAGE_LOG": "info"}, timeout=120
    )
    assert "INFO" in asked.stderr and "tools loaded" in asked.stderr, asked.stderr


# What a terminal would act on rather than show (C0 but line feed and tab,
# DEL, C1, the bidirectional formatting characters): none of it may reach
# the terminal from text toolcage did not write.
HIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# The hostile guest's `spoof` description (tests/guests/hostile).
SPOOF = "\x1b]0;owned\x07\x1b[2J\x1b[1A\r\x9b31mSAFE \u202etxt.exe"


def strings(value):
    """Every string in a JSON value."""
    if isinstance(value, str):
        return [value]
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    return [s for item in items for s in strings(item)]


def test_what_tools_and_clients_wrote_is_shown_escaped_never_obeyed_by_the_terminal(setup, tmp_path):
    setup.add("hostile")
    journal = tmp_path / "journal.jsonl"
    setup.write_config(f'[journal]\npath = "{journal}"\n')

    # `list`: a community tool's description is read by the operator
    # before anything is granted.
    listing = setup.run()
    assert listing.returncode == 0, listing.stderr
    assert not HIDDEN.search(listing.stdout), repr(listing.stdout)
    assert r"\u{1b}]0;owned\u{7}\u{1b}[2J\u{1b}[1A\r\u{9b}31mSAFE \u{202e}txt.exe" in listing.stdout
    # As JSON, the same value, with every such character as a JSON escape.
    as_json = setup.run("--json")
    assert not HIDDEN.search(as_json.stdout)
    tools = {t["name"]: t for t in json.loads(as_json.stdout)["files"][0]["tools"]}
    assert tools["spoof"]["description"] == SPOOF
    for api in ["openai", "anthropic", "gemini"]:
        declared = setup.run("--format", api)
        assert declared.returncode == 0 and not HIDDEN.search(declared.stdout), api
        assert SPOOF in strings(json.loads(declared.stdout)), api

    # `call`: the tool's log and progress (stderr), its error (stdout, JSON).
    said = "\x1b[31mred\x1b[0m\r\u2066over\u2069\x07\x9b2J"
    call = setup.run("spoof", json.dumps({"text": said}), command="call")
    assert call.returncode == 1, call.stderr
    assert not HIDDEN.search(call.stdout) and not HIDDEN.search(call.stderr), repr(call.stderr)
    assert r"\u{1b}[31mred" in call.stderr
    assert json.loads(call.stdout)["content"][0]["text"] == said

    # `journal`: a line with a client's name and a tool's error in every
    # field the text form prints.
    with journal.open("a") as f:
        f.write(
            json.dumps(
                {
                    "time": "2026-12-02T00:00:00Z" + SPOOF,
                    "unix_ms": 1,
                    "tool": "t" + SPOOF,
                    "outcome": "error" + SPOOF,
                    "message": SPOOF,
                    "client": {"transport": "http", "name": SPOOF, "session": SPOOF},
                    "arguments": {"a": SPOOF},
                },
                ensure_ascii=False,
            )
            + "\n"
        )
        fields = ["time", "tool", "task", "status", "run", "model", "ending", "message"]
        for event in ["task", "agent"]:
            line = {"event": event, "unix_ms": 1, **{k: SPOOF for k in fields}}
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
    text = setup.run(command="journal")
    assert text.returncode == 0, text.stderr
    assert not HIDDEN.search(text.stdout), repr(text.stdout)
    assert text.stdout.count(r"\u{202e}txt.exe") >= 5
    lines = setup.run("--json", command="journal")
    assert not HIDDEN.search(lines.stdout)
    parsed = [json.loads(line) for line in lines.stdout.splitlines()]
    assert parsed[-3]["client"]["name"] == SPOOF and parsed[-1]["model"] == SPOOF

    # An error that quotes what a client passed.
    unknown = setup.run("no\x1b[2Jtool", command="call")
    assert unknown.returncode == 2 and not HIDDEN.search(unknown.stderr), repr(unknown.stderr)


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_file_name_in_the_log_is_shown_escaped(setup, log_format):
    # Anyone who can write to the tools folder names its files.
    name = "bad\x1b]0;owned\x07\u202e.wasm"
    (setup.tools_dir / name).write_bytes(b"not wasm")
    listing = subprocess.run(
        [str(BIN), "--log-format", log_format, *setup.args("list")], capture_output=True, text=True, timeout=120
    )
    assert listing.returncode == 1
    assert "skipping tool component" in listing.stderr
    assert not HIDDEN.search(listing.stderr) and not HIDDEN.search(listing.stdout), repr(listing.stderr)
    if log_format == "json":
        [line] = [json.loads(line) for line in listing.stderr.splitlines()]
        assert line["fields"]["file"].endswith(name)
    else:
        assert r"bad\u{1b}]0;owned\u{7}\u{202e}.wasm" in listing.stderr
