"""Least privilege beyond files: confirmation of destructive calls, the
call journal, environment and secrets, pinned tools and capability
changes. (Network grants are in test_network.py.)"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import mcp.types as types
import pytest
from mcp import Client, stdio_client

from conftest import ERAS, GUESTS, GUEST_FILES, LEGACY, MODERN, read_journal, session, text_of, until

pytestmark = pytest.mark.anyio


def asking(action, content=None):
    """An elicitation callback that answers `action` and records what it
    was asked."""

    async def on_elicit(_ctx, params):
        on_elicit.asked.append(params.message)
        return types.ElicitResult(action=action, content=content)

    on_elicit.asked = []
    return on_elicit


@asynccontextmanager
async def client(setup, era, **callbacks):
    """A session in `era`; on 2026-07-28 a `Client` that answers
    input-required results with the callbacks and retries, as a real
    client does."""
    if era == LEGACY:
        async with session(setup, LEGACY, **callbacks) as c:
            yield c
        return
    with open(setup.stderr_path, "a") as errlog:
        async with Client(
            stdio_client(setup.params(), errlog=errlog), mode="auto", cache=None, **callbacks
        ) as c:
            assert c.protocol_version == MODERN
            yield c


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def data(tmp_path) -> Path:
    d = tmp_path / "data"
    d.mkdir()
    (d / "victim.txt").write_text("keep me")
    (d / "notes.txt").write_text("notes")
    return d


def fs_config(data: Path, journal_path: Path, extra: str = "") -> str:
    return f"""
[defaults]
roots = [{{ path = "{data}", mode = "rw" }}]

[journal]
path = "{journal_path}"
{extra}
"""


# --- Confirmation -----------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
async def test_a_destructive_call_runs_only_once_the_user_confirms(setup, data, tmp_path, era):
    setup.add("fs")
    log = tmp_path / "journal.jsonl"
    setup.write_config(fs_config(data, log))
    victim = {"path": str(data / "victim.txt")}

    declined = asking("decline")
    async with client(setup, era, elicitation_callback=declined) as c:
        result = await c.call_tool("delete_file", victim)
        assert result.is_error and "declined" in text_of(result), text_of(result)
    assert (data / "victim.txt").read_text() == "keep me"
    # The user saw the tool and its arguments.
    (question,) = declined.asked
    assert "delete_file" in question and str(data / "victim.txt") in question

    accepted = asking("accept", {"confirm": True})
    async with client(setup, era, elicitation_callback=accepted) as c:
        result = await c.call_tool("delete_file", victim)
        assert not result.is_error, text_of(result)
        # A read-only tool is not confirmed.
        assert not (await c.call_tool("read_text_file", {"path": str(data / "notes.txt")})).is_error
    assert not (data / "victim.txt").exists()
    assert len(accepted.asked) == 1

    await until(lambda: any(e["outcome"] == "ok" and e["tool"] == "delete_file" for e in read_journal(log)))
    outcomes = [(e["tool"], e["outcome"]) for e in read_journal(log)]
    assert ("delete_file", "refused") in outcomes
    refused = next(e for e in read_journal(log) if e["outcome"] == "refused")
    assert "declined" in refused["message"]


@pytest.mark.parametrize("era", ERAS)
async def test_a_client_that_cannot_ask_the_user_gets_a_refusal(setup, data, tmp_path, era):
    setup.add("fs")
    setup.write_config(fs_config(data, tmp_path / "j.jsonl"))
    async with session(setup, era) as c:
        result = await c.call_tool("delete_file", {"path": str(data / "victim.txt")})
        assert result.is_error
        text = text_of(result)
        assert "confirmation" in text and "elicitation" in text and "confirm = false" in text, text
    assert (data / "victim.txt").exists()


async def test_the_operator_decides_what_is_confirmed(setup, data, tmp_path):
    setup.add("fs")
    setup.write_config(
        fs_config(data, tmp_path / "j.jsonl")
        + "\n[tools.delete_file]\nconfirm = false\n\n[tools.read_text_file]\nconfirm = true\n"
    )
    never = asking("decline")
    async with session(setup, LEGACY, elicitation_callback=never) as c:
        assert not (await c.call_tool("delete_file", {"path": str(data / "victim.txt")})).is_error
        read = await c.call_tool("read_text_file", {"path": str(data / "notes.txt")})
        assert read.is_error and "declined" in text_of(read)
    assert not (data / "victim.txt").exists()
    assert len(never.asked) == 1 and "read_text_file" in never.asked[0]


def test_the_command_line_confirms_with_yes_only(setup, data, tmp_path):
    setup.add("fs")
    setup.write_config(fs_config(data, tmp_path / "j.jsonl"))
    args = ("delete_file", json.dumps({"path": str(data / "victim.txt")}))
    refused = setup.run(*args, command="call")
    assert refused.returncode == 1 and "--yes" in refused.stdout, refused.stdout + refused.stderr
    assert (data / "victim.txt").exists()
    done = setup.run("--yes", *args, command="call")
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (data / "victim.txt").exists()


# --- The journal ------------------------------------------------------------


async def test_every_call_is_journaled_with_what_it_cost(setup, tmp_path):
    tool_file = setup.add("time")
    setup.add("misbehave")
    log = tmp_path / "journal.jsonl"
    secret_file = tmp_path / "key"
    secret_file.write_text("s3cr3t-value-42\n")
    setup.write_config(
        f"""
[journal]
path = "{log}"

[tools.spin]
fuel = 1000000

[tools.read_env.env]
API_KEY = {{ file = "{secret_file}" }}
"""
    )
    async with session(setup, LEGACY) as c:
        ok = await c.call_tool("get_current_time", {"timezone": "UTC"})
        assert not ok.is_error
        assert (await c.call_tool("spin", {})).is_error
        assert (await c.call_tool("get_current_time", {"timezone": 5})).is_error
        # A secret value passed as an argument is scrubbed from the journal.
        echoed = await c.call_tool("read_env", {"name": "s3cr3t-value-42"})
        assert not echoed.is_error
        with pytest.raises(Exception):
            await c.call_tool("no_such_tool", {"password": "hunter2"})

    await until(lambda: len(read_journal(log)) >= 5)
    entries = read_journal(log)
    by_tool = {}
    for e in entries:
        by_tool.setdefault(e["tool"], []).append(e)
    ok_entry, refused_entry = by_tool["get_current_time"]
    assert ok_entry["outcome"] == "ok"
    assert ok_entry["digest"] == sha256(tool_file)
    assert ok_entry["arguments"] == {"timezone": "UTC"}
    assert ok_entry["client"]["transport"] == "stdio" and ok_entry["client"]["request"]
    assert ok_entry["client"]["name"].startswith("mcp")
    assert ok_entry["fuel"] > 0 and ok_entry["peak_memory_bytes"] > 0
    assert ok_entry["bytes_in"] == len('{"timezone":"UTC"}') and ok_entry["bytes_out"] > 0
    assert ok_entry["duration_ms"] > 0 and ok_entry["time"].endswith("Z")
    assert refused_entry["outcome"] == "refused" and "schema" in refused_entry["message"]
    (spin,) = by_tool["spin"]
    assert spin["outcome"] == "error" and "fuel" in spin["message"] and spin["fuel"] >= 1_000_000
    (env,) = by_tool["read_env"]
    assert env["arguments"] == {"name": "[secret]"}
    (unknown,) = by_tool["no_such_tool"]
    assert unknown["outcome"] == "refused" and unknown["arguments"] == {"password": "[redacted]"}
    assert "s3cr3t-value-42" not in log.read_text()
    assert "hunter2" not in log.read_text()
    assert "s3cr3t-value-42" not in setup.stderr()

    # `toolcage journal` answers "what did tool X do in the last hour".
    shown = setup.run("--tool", "get_current_time", "--since", "1h", command="journal")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert len(lines) == 2 and all("get_current_time" in line for line in lines)
    assert "refused" in lines[1]
    as_json = setup.run("--outcome", "error", "--json", command="journal")
    assert [json.loads(line)["tool"] for line in as_json.stdout.splitlines()] == ["spin"]
    future = setup.run("--since", "0s", command="journal")
    assert future.returncode == 0 and future.stdout == ""


async def test_digest_mode_records_no_arguments(setup, tmp_path):
    setup.add("time")
    log = tmp_path / "journal.jsonl"
    setup.write_config(f'[journal]\npath = "{log}"\narguments = "digest"\n')
    async with session(setup, LEGACY) as c:
        await c.call_tool("get_current_time", {"timezone": "Europe/Paris"})
    await until(lambda: len(read_journal(log)) == 1)
    (entry,) = read_journal(log)
    assert "arguments" not in entry
    assert entry["arguments_sha256"] == hashlib.sha256(b'{"timezone":"Europe/Paris"}').hexdigest()


@pytest.mark.parametrize("where", ["under-a-file", "proc"])
async def test_an_unwritable_journal_is_loud_and_loses_no_call(setup, tmp_path, where):
    setup.add("time")
    if where == "under-a-file":
        blocker = tmp_path / "not-a-folder"
        blocker.write_text("")
        path = blocker / "journal.jsonl"
    else:
        path = Path("/proc/toolcage-journal.jsonl")
    setup.write_config(f'[journal]\npath = "{path}"\n')
    async with session(setup, LEGACY) as c:
        for _ in range(3):
            result = await c.call_tool("get_current_time", {"timezone": "UTC"})
            assert not result.is_error, text_of(result)
    assert "CANNOT WRITE THE CALL JOURNAL" in setup.stderr()
    assert not path.exists()


# --- Environment and secrets ------------------------------------------------


async def test_a_tool_sees_only_the_variables_it_is_given(setup, tmp_path, monkeypatch):
    setup.add("misbehave")
    secret_file = tmp_path / "api.key"
    secret_file.write_text("key-from-a-file\n")
    monkeypatch.setenv("TOOLCAGE_TEST_PASSED", "passed-through")
    monkeypatch.setenv("TOOLCAGE_TEST_NOT_GRANTED", "must-not-leak")
    setup.write_config(
        f"""
[defaults.env]
GREETING = "hello"
PASSED = {{ from_env = "TOOLCAGE_TEST_PASSED" }}
API_KEY = {{ file = "{secret_file}" }}

[tools.read_env.env]
GREETING = "hello from read_env"
"""
    )
    params = setup.params()
    params.env = {**params.env, **{k: v for k, v in os.environ.items() if k.startswith("TOOLCAGE_TEST_")}}
    with open(setup.stderr_path, "a") as errlog:
        from mcp import ClientSession

        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=120) as c:
                await c.initialize()
                names = await c.call_tool("env_names", {})
                assert names.structured_content["names"] == ["API_KEY", "GREETING", "PASSED"]

                async def value(name):
                    result = await c.call_tool("read_env", {"name": name})
                    assert not result.is_error, text_of(result)
                    return result.structured_content.get("value")

                assert await value("GREETING") == "hello from read_env"
                assert await value("PASSED") == "passed-through"
                assert await value("API_KEY") == "key-from-a-file"
                for name in ["TOOLCAGE_TEST_NOT_GRANTED", "HOME", "PATH", "TOOLCAGE_LOG"]:
                    assert await value(name) is None, name
    assert "key-from-a-file" not in setup.stderr()


def test_a_missing_secret_file_is_a_config_error_naming_it(setup, tmp_path):
    setup.add("time")
    setup.write_config(f'[tools.get_current_time.env]\nKEY = {{ file = "{tmp_path / "nope"}" }}\n')
    result = setup.run()
    assert result.returncode == 2
    assert "tools.get_current_time.env.KEY" in result.stderr and "cannot be read" in result.stderr


# --- Pinning and capability changes -----------------------------------------


def test_a_pinned_tool_loads_only_with_its_digest(setup):
    tool_file = setup.add("time")
    setup.write_config('[tools.get_current_time]\npin = "sha256:' + "0" * 64 + '"\n')
    listed = setup.run("--json")
    # The file failed: exit status 1, the report printed all the same.
    assert listed.returncode == 1, listed.stderr
    (file,) = json.loads(listed.stdout)["files"]
    assert file["status"] == "failed" and "pinned" in file["error"] and sha256(tool_file) in file["error"]

    printed = setup.run(command="pin")
    assert f'pin = "sha256:{sha256(tool_file)}"' in printed.stdout and "[tools.get_current_time]" in printed.stdout
    setup.write_config(printed.stdout)
    (file,) = json.loads(setup.run("--json").stdout)["files"]
    assert file["status"] == "loaded"


def test_bad_pins_are_config_errors(setup):
    setup.add("time")
    for text, needle in [
        ('[tools.get_current_time]\npin = "abc"\n', "tools.get_current_time.pin"),
        ('[defaults]\npin = "sha256:' + "0" * 64 + '"\n', "defaults.pin"),
    ]:
        setup.write_config(text)
        result = setup.run()
        assert result.returncode == 2 and needle in result.stderr, result.stderr


class Warnings:
    def __init__(self):
        self.seen: list[str] = []

    async def on_log(self, params):
        if params.level == "warning":
            self.seen.append(str(params.data))


async def which(client) -> str:
    result = await client.call_tool("which_version", {"sleep_ms": 0})
    assert not result.is_error, text_of(result)
    return result.structured_content["version"]


async def test_a_pinned_tool_keeps_its_version_until_the_operator_moves_the_pin(setup):
    v1 = setup.add("v1", "versioned.wasm")
    v2_bytes = (GUESTS / GUEST_FILES["v2"]).read_bytes()
    setup.write_config(f'[tools.which_version]\npin = "sha256:{sha256(v1)}"\n')
    warnings = Warnings()
    async with session(setup, LEGACY, logging_callback=warnings.on_log) as c:
        assert await which(c) == "v1"
        part = setup.tools_dir / "versioned.part"
        part.write_bytes(v2_bytes)
        part.rename(v1)
        await until(lambda: any("pinned" in w for w in warnings.seen))
        assert await which(c) == "v1"
        # The operator accepts v2 by pinning it.
        setup.write_config(f'[tools.which_version]\npin = "sha256:{hashlib.sha256(v2_bytes).hexdigest()}"\n')
        with anyio.fail_after(20):
            while await which(c) != "v2":
                await anyio.sleep(0.05)


async def test_a_pinned_tools_replacement_is_inspected_before_anything_compiles_it(setup):
    """A new version of a pinned file is refused, but compiled first to say
    what it would import: that compile skipped the checks made before every
    other, so a function over the compile caps (25,000 nested loops here;
    100,000 take minutes of CPU and gigabytes) was compiled anyway. The
    checks now sit in the compile itself: refused before compiling, nothing
    cached for it."""
    from test_hardening import component_with_one_function

    v1 = setup.add("v1", "versioned.wasm")
    setup.write_config(f'[tools.which_version]\npin = "sha256:{sha256(v1)}"\n')
    loops = 25_000
    bomb = component_with_one_function(b"\x03\x40" * loops + b"\x0b" * loops)
    warnings = Warnings()
    async with session(setup, LEGACY, logging_callback=warnings.on_log) as c:
        assert await which(c) == "v1"
        part = setup.tools_dir / "versioned.part"
        part.write_bytes(bomb)
        part.rename(v1)
        await until(lambda: any("pinned" in w for w in warnings.seen), timeout=300)
        assert await which(c) == "v1"
    digest = hashlib.sha256(bomb).hexdigest()
    assert not [f for f in setup.cache_dir.iterdir() if f.name.startswith(digest)], "the refused file was compiled"


@pytest.mark.parametrize("pinned", [False, True], ids=["unpinned", "pinned"])
async def test_a_new_version_that_imports_more_is_a_capability_change(setup, pinned):
    # greet imports no wasi:http; misbehave (a different build at the same
    # path) does.
    target = setup.add("greet", "tool.wasm")
    if pinned:
        setup.write_config(f'[tools.greet]\npin = "sha256:{sha256(target)}"\n')
    warnings = Warnings()
    async with session(setup, LEGACY, logging_callback=warnings.on_log) as c:
        assert "greet" in {t.name for t in (await c.list_tools()).tools}
        part = setup.tools_dir / "tool.part"
        shutil.copyfile(GUESTS / GUEST_FILES["misbehave"], part)
        part.rename(target)
        await until(lambda: any("capability change" in w for w in warnings.seen))
        change = next(w for w in warnings.seen if "capability change" in w)
        assert "wasi:http/outgoing-handler" in change
        names = {t.name for t in (await c.list_tools()).tools}
        if pinned:
            assert "it was not loaded" in change and "greet" in names and "spin" not in names
        else:
            assert "it is loaded" in change and "spin" in names


async def test_over_http_the_journal_names_the_session(setup, tmp_path):
    from conftest import HttpServer, http_session

    setup.add("time")
    log = tmp_path / "journal.jsonl"
    setup.write_config(f'[journal]\npath = "{log}"\n')
    srv = HttpServer(setup)
    try:
        async with http_session(srv.url, LEGACY) as c:
            assert not (await c.call_tool("get_current_time", {"timezone": "UTC"})).is_error
        async with http_session(srv.url, MODERN) as c:
            assert not (await c.call_tool("get_current_time", {"timezone": "UTC"})).is_error
    finally:
        srv.stop()
    await until(lambda: len(read_journal(log)) == 2)
    legacy, modern = (e["client"] for e in read_journal(log))
    assert legacy["transport"] == "http" and legacy["session"], legacy
    assert modern["transport"] == "http" and "session" not in modern, modern
    assert modern["name"].startswith("mcp"), modern
