"""Hardening: no tool, descriptor or client can crash, freeze, starve or flood
the server, and no record is lost. Each test plays the attacker (a hostile
component, a hostile client) and checks that the server stays up, that the
next normal call answers, that the bad case gets a clean error naming the
limit, and, where memory is the target, that peak memory stays bounded."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import GUEST_FILES, GUESTS, RawServer, call_request, leb128, raw_text, read_journal, wasm_section
from test_http import call_body, modern_headers, post


def post_call(server):
    """A 2026-07-28 `tools/call` over HTTP: (status, headers, body)."""
    return post(server.url, call_body(), modern_headers())

# --- The journal loses nothing at exit ----------------------------------------


def busy_cores(n: int = 2) -> list[subprocess.Popen]:
    """Processes that keep the CPUs busy, so the server's journal writer is
    starved the way it is on a loaded machine."""
    return [subprocess.Popen(["python3", "-c", "while True: pass"]) for _ in range(n)]


@pytest.mark.parametrize("ending", ["stdin-eof", "sigterm", "sigint"])
def test_every_answered_call_is_in_the_journal_after_exit_under_load(setup, tmp_path, ending):
    setup.add("time")
    log = tmp_path / "journal.jsonl"
    setup.write_config(f'[journal]\npath = "{log}"\n')
    hogs = busy_cores()
    try:
        raw = RawServer(setup)
        raw.initialize()
        calls = 300
        for i in range(calls):
            raw.send(call_request(i, "get_current_time", {"timezone": "UTC"}))
        # Replies come in the order the calls finish, not the order sent.
        answered = set()
        while len(answered) < calls:
            message = raw.read()
            if "id" in message and "result" in message:
                answered.add(message["id"])
        assert answered == set(range(calls))
        # Every call has been answered; end the process at once.
        if ending == "stdin-eof":
            raw.close()
        else:
            raw.proc.send_signal(signal.SIGTERM if ending == "sigterm" else signal.SIGINT)
            raw.proc.wait(timeout=30)
            raw.stderr.close()
        assert raw.proc.returncode == 0, setup.stderr()[-2000:]
    finally:
        for hog in hogs:
            hog.kill()
    entries = read_journal(log)
    assert len(entries) == calls, f"{len(entries)} of {calls} lines"
    assert {e["client"]["request"] for e in entries} == {str(i) for i in range(calls)}
    assert all(e["outcome"] == "ok" for e in entries), [e.get("message") for e in entries if e["outcome"] != "ok"][:3]


def test_calls_running_at_sigterm_are_journaled_as_cancelled(setup, tmp_path):
    setup.add("misbehave")
    log = tmp_path / "journal.jsonl"
    setup.write_config(f'[journal]\npath = "{log}"\n')
    raw = RawServer(setup)
    raw.initialize()
    for i in range(3):
        request = call_request(i, "slow", {"ms": 60_000})
        request["params"]["_meta"] = {"progressToken": f"p{i}"}
        raw.send(request)
    # Each guest reports progress as it starts: all three are running.
    started = set()
    while len(started) < 3:
        message = raw.read()
        if message.get("method") == "notifications/progress":
            started.add(message["params"]["progressToken"])
    raw.proc.send_signal(signal.SIGTERM)
    # It exits without waiting for the 60 s calls to end.
    raw.proc.wait(timeout=30)
    raw.stderr.close()
    assert raw.proc.returncode == 0, setup.stderr()[-2000:]
    entries = read_journal(log)
    assert [e["outcome"] for e in entries] == ["cancelled"] * 3, entries
    assert all("shut down" in e["message"] for e in entries), entries


# --- Hostile components ---------------------------------------------------------


class Probe(RawServer):
    """The server on raw pipes, and whether it still serves."""

    def still_serving(self) -> None:
        result = self.call("get_current_time", {"timezone": "UTC"})
        assert not result["isError"], result


# Peak memory a server may reach while it refuses everything below: the
# guest's own memory cap (128 MiB, plus one call given 200 MiB) and the
# host's bounded copies of what the guest handed it; without the bounds, the
# same calls took from 160 MiB to several GiB.
PEAK_MIB = 400


@pytest.fixture
def hostile(setup, tmp_path):
    setup.add("time")
    setup.add("hostile")
    data = tmp_path / "data"
    data.mkdir()
    os.mkfifo(data / "pipe")
    (data / "file").write_text("plain")
    os.symlink(data / "pipe", data / "link-to-pipe")
    setup.write_config(
        f"""
[defaults]
roots = [{{ path = "{data}", mode = "rw" }}]

[tools.empty_items]
memory_mib = 200

[tools.sample_alias]
allow_sampling = true
"""
    )
    probe = Probe(setup)
    probe.initialize(capabilities={"elicitation": {}, "sampling": {}})
    probe.data = data
    yield probe
    probe.close()


@pytest.mark.parametrize(
    "tool,arguments,expected",
    [
        # Result size: counted as sent (escaping, base64, MIME types, URIs,
        # item framing), and before it is copied out of the guest.
        ("mime_bomb", {}, "returned a result over the result size limit (limit 16777216 bytes)"),
        ("alias_text", {}, "returned a result over the result size limit (limit 16777216 bytes)"),
        ("empty_items", {"count": 1500000}, "returned a result over the result size limit"),
        ("escape_bomb", {}, "returned a result of 90000050 bytes, over the result size limit"),
        # Structured output is parsed under a budget.
        ("structured_bomb", {}, "structured output too large to check"),
        ("deep_structured", {}, "recursion limit exceeded"),
        # A key twice: the check and a client could each read another value.
        ("duplicate_key", {}, 'an object has the key "verdict" twice'),
        # Host calls: one transfer is capped, whatever the list aliasing.
        ("sample_alias", {}, "passed more than 16777216 bytes to the host in one call"),
        ("fields_alias", {}, "passed more than 16777216 bytes to the host in one call"),
        ("elicit_huge", {}, "passed more than 16777216 bytes to the host in one call"),
        ("elicit_huge", {"bytes": 1000000}, "the elicitation message is 1000000 bytes, over the limit of 16384"),
        # Host resources, named.
        ("resource_flood", {}, "held more than 10000 host resources at once"),
        ("random_huge", {}, "asked for more random bytes at once than allowed (limit 1048576"),
        ("insecure_random_huge", {}, "asked for more random bytes at once than allowed"),
        ("header_bomb", {}, "built HTTP header fields larger than allowed (limit 131072 bytes"),
        # The cause, not the limit it had hit and handled.
        ("oom_then_panic", {}, "panicked: gave up after the allocation failed"),
    ],
)
def test_hostile_results_and_host_calls_are_bounded_and_named(hostile, tool, arguments, expected):
    result = hostile.call(tool, arguments)
    assert result["isError"], result
    assert expected in raw_text(result), raw_text(result)
    assert "wasm backtrace" not in raw_text(result)
    hostile.still_serving()
    assert hostile.peak_mib() < PEAK_MIB, hostile.peak_mib()


def test_structured_output_of_small_maps_is_refused_within_its_budget(hostile):
    """`{"r":[{"a":0},...]}`, 15 MB: every one-entry map takes a B-tree
    node of over 700 bytes once parsed. Charged 64 bytes a value, the
    parse went to 300 MB (release build) before it was refused, against a
    budget of 64 MiB; charged its nodes, it stops within the budget."""
    result = hostile.call("map_bomb", {})
    assert result["isError"] and "structured output too large to check" in raw_text(result), raw_text(result)
    assert hostile.peak_mib() < 200, hostile.peak_mib()
    # Ten thousand of them (80 KB) are an ordinary result.
    small = hostile.call("map_bomb", {"bytes": 80_000})
    assert not small["isError"], raw_text(small)
    assert len(small["structuredContent"]["r"]) == 10_000
    hostile.still_serving()


def open_fds(probe) -> int:
    return len(os.listdir(f"/proc/{probe.proc.pid}/fd"))


def wait_for_fds(probe, at_most: int) -> int:
    """The server's open descriptors once they are down to `at_most` (or
    after 10 s): connections close in their own tasks, just after the call."""
    for _ in range(100):
        if open_fds(probe) <= at_most:
            break
        time.sleep(0.1)
    return open_fds(probe)


OPEN_CAP = "open files, directory listings and HTTP connections at once"


@pytest.mark.parametrize("how", ["file", "list", "stream"])
def test_a_call_holds_at_most_its_share_of_open_files(hostile, how):
    # Each open file or listing is a descriptor of the server process; one
    # call opening the same file in a loop must not take them all, nor by
    # dropping each descriptor and keeping its read stream (which keeps
    # the file open).
    path = hostile.data if how == "list" else hostile.data / "file"
    before = open_fds(hostile)
    result = hostile.call("open_flood", {"path": str(path), "how": how})
    assert result["isError"], result
    assert f"held more than 256 {OPEN_CAP} (limit 256)" in raw_text(result), raw_text(result)
    # Every one was closed with the call, and the next call may open its own.
    assert wait_for_fds(hostile, before + 4) <= before + 4
    result = hostile.call("open_flood", {"path": str(path), "how": how, "count": 100})
    assert not result["isError"], result
    hostile.still_serving()


def test_a_call_holds_at_most_its_share_of_connections(setup, tmp_path):
    # A granted host that accepts connections (the kernel's backlog) and
    # never answers: every request holds a socket until its timeout.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1024)
    authority = f"127.0.0.1:{listener.getsockname()[1]}"
    setup.add("time")
    setup.add("hostile")
    setup.write_config(f'[tools.connection_flood]\nnetwork = ["{authority}"]\nhttp_timeout_ms = 5000\n')
    probe = Probe(setup)
    probe.initialize()
    before = open_fds(probe)
    result = probe.call("connection_flood", {"authority": authority, "count": 300, "check": 20})
    # The first 256 were sent; the rest were refused at once, with the reason.
    assert raw_text(result).startswith("20 of the last 20 refused"), result
    assert "holds 256 open files, directories and connections already, its limit" in raw_text(result)
    # The call's connections closed with it.
    assert wait_for_fds(probe, before + 4) <= before + 4
    probe.still_serving()
    probe.close()
    listener.close()


def test_the_cap_fits_the_process_limit_which_the_server_raises(setup, tmp_path):
    import resource

    setup.add("time")
    setup.add("hostile")
    data = tmp_path / "data"
    data.mkdir()
    (data / "file").write_text("plain")
    setup.write_config(
        f"""
[server]
max_concurrent_calls = 4

[http]
max_connections = 64

[defaults]
roots = [{{ path = "{data}" }}]
"""
    )
    # Started with a soft limit of 300 and a hard one of 600: the server
    # raises its own to 600, keeps 64 connections and 256 files for
    # itself, and gives each of 4 calls (600 - 320) / 4 = 70.
    probe = Probe(setup, preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (300, 600)))
    probe.initialize()
    limits = Path(f"/proc/{probe.proc.pid}/limits").read_text()
    assert any(line.startswith("Max open files") and line.split()[3:5] == ["600", "600"] for line in limits.splitlines()), limits
    # Four floods at once: each ends at its own cap, none at the process's.
    ids = []
    for _ in range(4):
        probe.next_id += 1
        ids.append(probe.next_id)
        probe.send(call_request(probe.next_id, "open_flood", {"path": str(data / "file"), "hold_ms": 500}))
    # The replies come in any order.
    replies = {}
    while len(replies) < len(ids):
        message = probe.read()
        if message.get("id") in ids:
            replies[message["id"]] = message
    for reply in replies.values():
        assert f"held more than 70 {OPEN_CAP} (limit 70)" in raw_text(reply["result"]), reply
    probe.still_serving()
    probe.close()


def test_a_client_that_cannot_be_asked_is_checked_before_the_request_is_read(setup):
    setup.add("hostile")
    probe = Probe(setup)
    probe.initialize()  # no elicitation capability
    result = probe.call("elicit_huge", {"bytes": 1000000})
    assert "the client does not support elicitation" in raw_text(result), result
    probe.close()


def test_floods_of_logs_and_progress_are_bounded(hostile):
    # The client asks for both and reads slowly: only after the result.
    hostile.request("logging/setLevel", {"level": "debug"})
    result = hostile.call("log_flood", {"count": 100000, "bytes": 16384})
    assert raw_text(result) == "done"
    result = hostile.call("progress_flood", {"count": 1000000, "bytes": 1024}, meta={"progressToken": "t"})
    assert raw_text(result) == "done"
    hostile.still_serving()
    # Every notification was read (read_response skips them): at most the
    # per-call caps arrived, a 64-event queue at a time.
    notes = [json.loads(line) for line in hostile.lines]
    logs = [n for n in notes if n.get("method") == "notifications/message"]
    progress = [n for n in notes if n.get("method") == "notifications/progress"]
    assert len(logs) <= 1001, len(logs)
    assert len(progress) <= 10000, len(progress)
    assert all(len(n["params"].get("message", "")) <= 1024 for n in progress)
    assert hostile.peak_mib() < PEAK_MIB


@pytest.mark.parametrize("name", ["pipe", "link-to-pipe"])
def test_special_files_are_refused_without_blocking(hostile, name):
    # A FIFO with no writer would block open(2) forever on a runtime thread.
    path = hostile.data / name
    result = hostile.call("open_path", {"path": str(path)})
    assert result["isError"] and "open failed" in raw_text(result), result
    assert not hostile.call("open_path", {"path": str(hostile.data / "file")})["isError"]
    hostile.still_serving()


def test_the_bundled_file_tool_refuses_a_fifo(setup, tmp_path):
    setup.add("fs")
    setup.add("time")
    data = tmp_path / "data"
    data.mkdir()
    os.mkfifo(data / "pipe")
    setup.write_config(f'[defaults]\nroots = [{{ path = "{data}" }}]\n')
    probe = Probe(setup)
    probe.initialize()
    for tool in ["read_text_file", "read_media_file"]:
        result = probe.call(tool, {"path": str(data / "pipe")})
        assert result["isError"] and "it is not a regular file" in raw_text(result), (tool, result)
    # Its metadata is still readable: a stat never blocks.
    assert not probe.call("get_file_info", {"path": str(data / "pipe")})["isError"]
    probe.still_serving()
    probe.close()


# --- Hostile descriptors --------------------------------------------------------


def test_hostile_descriptors_are_refused_at_load_with_the_reason(setup):
    refused = {
        "describe:huge-description": "`describe` returned more than 4194304 bytes, the limit (`server.max_describe_kib`)",
        "describe:many-tools": "`describe` returned more than 4194304 bytes",
        "describe:many-properties": "`describe` returned more than 4194304 bytes",
        "describe:ref-chain": "input schema that is 2327855 bytes, over the limit of 262144",
        "describe:deep-schema": "over the limit of 262144",
        "describe:template-bomb": "a resource template is 888897 bytes, over the limit of 1024",
    }
    served = {
        "describe:exp-schema": "exp",
        "describe:exp-output": "exp_out",
        "describe:pattern-schema": "pat",
        "describe:self-ref": "selfref",
    }
    for guest in [*refused, *served, "time"]:
        setup.add(guest)
    listed = setup.run("--json")
    files = {Path(f["file"]).name: f for f in json.loads(listed.stdout)["files"]}
    for guest, reason in refused.items():
        report = files[GUEST_FILES[guest]]
        assert report["status"] == "failed" and reason in report["error"], report
    for guest, tool in served.items():
        report = files[GUEST_FILES[guest]]
        assert report["status"] == "loaded" and report["tools"][0]["name"] == tool, report
    # The server starts and serves the rest.
    probe = Probe(setup)
    probe.initialize()
    probe.still_serving()
    tools = {t["name"] for t in probe.request("tools/list", {})["result"]["tools"]}
    assert tools == {"exp", "exp_out", "pat", "selfref", "get_current_time", "convert_timezone"}
    probe.close()


def test_expensive_schemas_run_out_of_steps_and_the_server_goes_on(setup):
    for guest in ["describe:exp-schema", "describe:exp-output", "describe:pattern-schema", "time"]:
        setup.add(guest)
    probe = Probe(setup)
    probe.initialize()
    # 2^30 ways to check a string: the budget stops it, the tool never runs.
    result = probe.call("exp", {"x": "str"})
    assert result["isError"] and "took more than 100022 steps" in raw_text(result), result
    assert "the tool was not run" in raw_text(result)
    assert raw_text(probe.call("exp", {"x": 1})) == "ran"
    # The same over a result.
    result = probe.call("exp_out")
    assert result["isError"] and "could not be checked against its output schema" in raw_text(result)
    # A pattern built for backtracking runs in linear time.
    strings = ["a" * 50_000 + "!"] * 40
    result = probe.call("pat", {"x": strings})
    assert result["isError"] and "does not match" in raw_text(result)
    probe.still_serving()
    probe.close()


def test_a_template_built_for_backtracking_matches_in_linear_time(hostile):
    # 24 adjacent variables, then a literal the URI never has.
    reply = hostile.request("resources/read", {"uri": "hostile://" + "a" * 100_000})
    assert reply["error"]["code"] == -32602 and "the resource URI is" in reply["error"]["message"]
    reply = hostile.request("resources/read", {"uri": "hostile://" + "a" * 8000})
    assert reply["error"]["code"] == -32602 and "unknown resource" in reply["error"]["message"]
    reply = hostile.request("resources/read", {"uri": "hostile://" + "a" * 30 + "x"})
    assert reply["result"]["contents"][0]["text"] == "read"
    hostile.still_serving()


# --- Hostile clients ------------------------------------------------------------


# `tools/list` is answered through rmcp's loop, `tools/call` beside it
# (`protocol/session.rs`): each writes its own replies.
@pytest.mark.parametrize(
    "request_",
    [
        {"method": "tools/list"},
        {"method": "tools/call", "params": {"name": "get_current_time", "arguments": {"timezone": "UTC"}}},
    ],
    ids=["list", "call"],
)
def test_a_stdio_client_that_never_reads_cannot_grow_the_server(setup, request_):
    setup.add("time")
    # Small caps so the test is quick; the defaults are 256 requests and
    # 16 MiB of replies.
    setup.write_config("[stdio]\nmax_requests_in_flight = 64\nmax_pending_output_mib = 1\n")
    raw = Probe(setup)
    raw.initialize()
    baseline = raw.peak_mib()
    sent = 0
    stop = threading.Event()

    def flood():
        # Writes block once the server stops reading: that is the point.
        nonlocal sent
        try:
            for i in range(50_000):
                if stop.is_set():
                    return
                raw.send({"jsonrpc": "2.0", "id": f"l{i}", **request_})
                sent += 1
        except (BrokenPipeError, ValueError):
            pass

    writer = threading.Thread(target=flood, daemon=True)
    writer.start()
    # Wait until the flood stalls: the server stopped reading.
    stalled_at, last = time.monotonic(), -1
    while sent != last or time.monotonic() - stalled_at < 2:
        if sent != last:
            last, stalled_at = sent, time.monotonic()
        writer.join(timeout=0.2)
        if not writer.is_alive():
            break
    assert sent < 50_000, "the server kept reading a client that reads nothing"
    grown = raw.peak_mib() - baseline
    stop.set()
    # Now read: every request read so far is answered, and the server goes on.
    answered = 0
    while answered < sent:
        message = raw.read()
        if str(message.get("id", "")).startswith("l"):
            answered += 1
    writer.join(timeout=30)
    assert grown < 64, f"grew {grown} MiB while the client read nothing"
    raw.still_serving()
    raw.close()


def http_server(setup, config: str):
    from conftest import HttpServer

    setup.add("time")
    setup.write_config(config)
    return HttpServer(setup)


def test_idle_and_slow_http_clients_are_disconnected(setup):
    server = http_server(setup, "[http]\nidle_timeout_ms = 300\nbody_timeout_ms = 300\n")
    try:
        # Half a request head, then silence: closed at the timeout.
        slow = socket.create_connection(("127.0.0.1", server.port))
        slow.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        slow.settimeout(30)
        reply = slow.recv(4096)
        # Closed, with or without a 408 first.
        assert reply == b"" or (b" 408 " in reply and slow.recv(4096) == b""), reply
        # A whole head, then a body that does not come: 408.
        dribble = socket.create_connection(("127.0.0.1", server.port))
        dribble.sendall(
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{"
        )
        dribble.settimeout(30)
        assert b" 408 " in dribble.recv(4096)
        # The server serves the next client as usual.
        status, _, body = post_call(server)
        assert status == 200, body
    finally:
        server.stop()


def test_connections_past_the_cap_are_refused_and_the_rest_served(setup):
    server = http_server(setup, "[http]\nmax_connections = 4\n")
    try:
        held = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(4)]
        extra = socket.create_connection(("127.0.0.1", server.port))
        extra.settimeout(30)
        reply = extra.recv(4096)
        assert b" 503 " in reply and b"too many connections" in reply, reply
        held.pop().close()
        # Once one closes, a new client is served (the slot frees when the
        # server notices the close; until then a new client is still
        # refused, with a 503 or, if the server closes before it has sent
        # its request, a broken pipe).
        deadline = time.monotonic() + 30
        while True:
            try:
                status, _, body = post_call(server)
            except OSError as error:  # urllib's URLError is an OSError
                status, body = None, str(error)
            if status == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert status == 200, body
    finally:
        server.stop()


def test_sessions_past_the_cap_get_503_and_stateless_clients_go_on(setup):
    server = http_server(setup, "[http]\nmax_sessions = 3\n")
    try:
        initialize = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        }
        statuses = [post(server.url, initialize)[0] for _ in range(5)]
        assert statuses == [200, 200, 200, 503, 503], statuses
        status, headers, body = post(server.url, initialize)
        assert status == 503 and "max_sessions" in body
        assert {k.lower(): v for k, v in headers.items()}["retry-after"] == "1"
        # 2026-07-28 needs no session.
        status, _, body = post_call(server)
        assert status == 200, body
    finally:
        server.stop()


# --- Grants follow a tool's file, not just its name ---------------------------


def impostor_setup(setup, tmp_path, extra: str = ""):
    """The bundled fs tool, whose `read_text_file` has a root of its own,
    and an impostor declaring `read_text_file` in a file that sorts first."""
    secret = tmp_path / "granted"
    secret.mkdir()
    (secret / "notes.txt").write_text("real notes")
    setup.add("fs")
    setup.add("impostor", as_name="aaa_impostor.wasm")
    setup.write_config(
        f'[tools.read_text_file]\nroots = [{{ path = "{secret}" }}]\n{extra}'
    )
    return secret


def test_a_new_file_cannot_take_a_name_that_has_grants(setup, tmp_path):
    secret = impostor_setup(setup, tmp_path)
    files = {Path(f["file"]).name: f for f in json.loads(setup.run("--json").stdout)["files"]}
    for file in ["aaa_impostor.wasm", "fs_tool.wasm"]:
        (entry,) = [t for t in files[file]["tools"] if t["name"] == "read_text_file"]
        assert entry["status"] == "refused", entry
        assert "toolcage will not guess" in entry["refusedBecause"]
    probe = Probe(setup)
    probe.initialize()
    tools = {t["name"] for t in probe.request("tools/list", {})["result"]["tools"]}
    assert "read_text_file" not in tools and "list_directory" in tools
    reply = probe.request("tools/call", {"name": "read_text_file", "arguments": {"path": str(secret / "notes.txt")}})
    assert reply["error"]["code"] == -32602
    probe.close()


def test_binding_the_grant_to_its_file_settles_it(setup, tmp_path):
    secret = impostor_setup(setup, tmp_path, extra='file = "fs_tool.wasm"\n')
    probe = Probe(setup)
    probe.initialize()
    result = probe.call("read_text_file", {"path": str(secret / "notes.txt")})
    assert raw_text(result) == "real notes", result
    probe.close()
    listed = setup.run()
    assert "REFUSED: `tools.read_text_file.file` binds it to `fs_tool.wasm`" in listed.stdout, listed.stdout


def test_an_impostor_dropped_in_while_serving_gets_nothing(setup, tmp_path):
    import shutil

    from conftest import GUESTS

    secret = tmp_path / "granted"
    secret.mkdir()
    (secret / "notes.txt").write_text("real notes")
    setup.add("fs")
    setup.write_config(f'[tools.read_text_file]\nroots = [{{ path = "{secret}" }}]\n')
    probe = Probe(setup)
    probe.initialize()
    path = {"path": str(secret / "notes.txt")}
    assert raw_text(probe.call("read_text_file", path)) == "real notes"
    shutil.copyfile(GUESTS / GUEST_FILES["impostor"], setup.tools_dir / "aaa_impostor.wasm")
    # The reload warns clients that the impostor's tool is not served.
    while True:
        message = probe.read()
        if message.get("method") == "notifications/message" and "aaa_impostor.wasm" in str(message):
            assert "is not served" in str(message["params"]["data"]), message
            break
    assert raw_text(probe.call("read_text_file", path)) == "real notes"
    probe.close()


# --- Shares of the instance pool ------------------------------------------------


def component_with_core_instances(count: int, memory: bool) -> bytes:
    """A component, encoded by hand, that instantiates one core module
    `count` times; the module defines a one-page memory if `memory`."""

    module = b"\0asm\x01\0\0\0" + (wasm_section(5, b"\x01\x00\x01") if memory else b"")
    instances = leb128(count) + b"\x00\x00\x00" * count  # instantiate module 0, no arguments
    return b"\0asm\x0d\x00\x01\x00" + wasm_section(1, module) + wasm_section(2, instances)


def test_a_component_needing_more_than_its_share_of_the_pool_is_refused_at_load(setup):
    setup.add("time")
    (setup.tools_dir / "memories.wasm").write_bytes(component_with_core_instances(5, memory=True))
    (setup.tools_dir / "instances.wasm").write_bytes(component_with_core_instances(65, memory=False))
    files = {Path(f["file"]).name: f for f in json.loads(setup.run("--json").stdout)["files"]}
    assert "contains 5 Wasm linear memories, which exceeds the configured maximum of 4" in (
        files["memories.wasm"]["error"]
    ), files["memories.wasm"]
    assert "contains 65 core module instances, which exceeds the configured maximum of 64" in (
        files["instances.wasm"]["error"]
    ), files["instances.wasm"]
    assert files["time_tool.wasm"]["status"] == "loaded"


def with_longer_function_names(component: bytes, needle: bytes, extra: int) -> bytes:
    """`component` with `extra` bytes appended to the name, in its core
    modules' `name` sections, of every function whose name contains
    `needle`."""

    def leb(data: bytes, i: int) -> tuple[int, int]:
        value = shift = 0
        while True:
            byte = data[i]
            i += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return value, i

    def sections(data: bytes):
        i = 8
        while i < len(data):
            size, j = leb(data, i + 1)
            yield data[i], data[j : j + size]
            i = j + size

    def names(body: bytes) -> bytes:
        length, i = leb(body, 0)
        if body[i : i + length] != b"name":
            return body
        out = bytearray(body[: i + length])
        i += length
        while i < len(body):
            size, j = leb(body, i + 1)
            sub_id, sub = body[i], body[j : j + size]
            i = j + size
            if sub_id == 1:
                count, k = leb(sub, 0)
                renamed = bytearray(leb128(count))
                for _ in range(count):
                    index, k = leb(sub, k)
                    length, k = leb(sub, k)
                    name = sub[k : k + length]
                    k += length
                    if needle in name:
                        name += b"x" * extra
                    renamed += leb128(index) + leb128(len(name)) + name
                sub = bytes(renamed)
            out += wasm_section(sub_id, sub)
        return bytes(out)

    def rewrite(data: bytes) -> bytes:
        component = data[4:8] == b"\x0d\x00\x01\x00"
        out = bytearray(data[:8])
        for section_id, body in sections(data):
            if component and section_id in (1, 4):  # a core module, a nested component
                body = rewrite(body)
            elif not component and section_id == 0:  # a core module's custom section
                body = names(body)
            out += wasm_section(section_id, body)
        return bytes(out)

    return rewrite(component)


def test_a_component_with_huge_function_names_is_refused_at_load(setup):
    """wasmtime copies the function name of every frame of a trap's
    backtrace (up to 20): a 20 MB name on a recursing function made one
    trapping call take 1.3 GB of host memory. Names over 64 KiB are
    refused at load; under it, the trap is named and cheap."""
    original = (GUESTS / GUEST_FILES["misbehave"]).read_bytes()
    (setup.tools_dir / "huge.wasm").write_bytes(
        with_longer_function_names(original, b"recurse_in_linear_memory", 20_000_000)
    )
    (setup.tools_dir / "long.wasm").write_bytes(
        with_longer_function_names(original, b"recurse_in_linear_memory", 60_000)
    )
    files = {Path(f["file"]).name: f for f in json.loads(setup.run("--json").stdout)["files"]}
    huge = files["huge.wasm"]
    assert huge["status"] == "failed", huge
    assert "names a function with 20000" in huge["error"] and "at most 65536 bytes" in huge["error"], huge
    assert files["long.wasm"]["status"] == "loaded", files["long.wasm"]
    (setup.tools_dir / "huge.wasm").unlink()
    raw = RawServer(setup)
    raw.initialize()
    result = raw.call("recurse", {"stack": "linear"})
    assert result["isError"] and "overflowed its stack" in raw_text(result), result
    # A trap copies at most 20 names of 60 KB: the server's peak is far
    # below what the 20 MB name alone would have cost twenty times over.
    peak_kib = int(
        next(l for l in Path(f"/proc/{raw.proc.pid}/status").read_text().splitlines() if l.startswith("VmHWM"))
        .split()[1]
    )
    assert peak_kib < 400 * 1024, peak_kib
    raw.close()


def component_with_one_function(body: bytes) -> bytes:
    """A component holding (and instantiating) one core module whose only
    function, `[] -> []` without locals, runs the instructions `body`."""
    code = b"\x00" + body + b"\x0b"  # no locals; the body's `end`
    module = (
        b"\0asm\x01\0\0\0"
        + wasm_section(1, b"\x01\x60\x00\x00")  # one type: [] -> []
        + wasm_section(3, b"\x01\x00")  # one function of that type
        + wasm_section(10, b"\x01" + leb128(len(code)) + code)
    )
    instance = b"\x01\x00\x00\x00"  # one core instance of module 0, no arguments
    return b"\0asm\x0d\x00\x01\x00" + wasm_section(1, module) + wasm_section(2, instance)


def test_a_component_with_a_function_too_costly_to_compile_is_refused_at_load(setup):
    """Cranelift's compile time grows faster than the number of branch
    points in one function: 100,000 nested empty `loop`s (a 300 KB file)
    took 39 s of CPU and 2.1 GB to compile in a release build, minutes in a
    debug one. Inspection counts them before compiling and refuses the
    file, naming the function and the cap; the other tools still load."""
    setup.add("time")
    loops = 100_000
    (setup.tools_dir / "loops.wasm").write_bytes(component_with_one_function(b"\x03\x40" * loops + b"\x0b" * loops))
    files = {Path(f["file"]).name: f for f in json.loads(setup.run("--json").stdout)["files"]}
    refused = files["loops.wasm"]
    assert refused["status"] == "failed", refused
    assert "core module 0's function 0 has more than 20000 branch points" in refused["error"], refused
    assert "at most 20000" in refused["error"], refused
    assert files["time_tool.wasm"]["status"] == "loaded", files["time_tool.wasm"]
