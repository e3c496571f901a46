"""Floods of client notifications. rmcp spawns a task for every notification
a client sends, and notifications pass every admission cap (they are not
requests: the stdio gate and the request budget count requests, and an HTTP
POST of one is answered 202 at once), so whatever the server does for one
must end at once, and nothing it keeps may grow with how often a client
repeats one. Each test floods the real binary with raw JSON lines or raw
HTTP, then checks that its memory stayed within a bound, that it still
answers, and that a hot reload still reaches a client."""

from __future__ import annotations

import http.client
import json
import queue
import shutil
import socket
import threading
import time
from pathlib import Path

from conftest import GUEST_FILES, GUESTS, LEGACY, MODERN, HttpServer, RawServer
from test_authorization import message
from test_http import META, post

# What a flood may add to the server's peak memory. Before notification
# handlers stopped waiting on the client, 100,000 `roots/list_changed`
# lines took about 360 MB over stdio (3.6 GB for a million), and each
# POSTed one about 12 KB over HTTP.
FLOOD_MIB = 64

ROOTS_CHANGED = {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def memory_kib(pid: int, field: str) -> int:
    """`VmHWM` (peak) or `VmRSS` (now) of the process, in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field}")


def drop_tool(setup, guest: str) -> None:
    """Add a tool file the way an operator would: written beside the folder,
    then moved in whole."""
    staged = setup.root / GUEST_FILES[guest]
    shutil.copyfile(GUESTS / GUEST_FILES[guest], staged)
    staged.rename(setup.tools_dir / GUEST_FILES[guest])


class Inbox:
    """Reads a `RawServer`'s stdout on a thread, so the server never waits
    on the test to write; answers `roots/list` when told to."""

    def __init__(self, raw: RawServer):
        self.raw = raw
        self.messages: queue.Queue[dict] = queue.Queue()
        self.roots_asked: list[dict] = []
        self.list_changed = 0
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while True:
            line = self.raw.proc.stdout.readline()
            if not line:
                return
            message = json.loads(line)
            assert message.get("jsonrpc") == "2.0", line
            if message.get("method") == "roots/list":
                self.roots_asked.append(message)
            if message.get("method") == "notifications/tools/list_changed":
                self.list_changed += 1
            self.messages.put(message)

    def response(self, request_id, timeout: float = 60, roots: list[str] | None = None) -> dict:
        """The reply to `request_id`; meanwhile `roots/list` requests are
        answered with `roots` when given."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"no reply to {request_id!r}"
            try:
                message = self.messages.get(timeout=left)
            except queue.Empty:
                continue
            if message.get("method") == "roots/list" and roots is not None:
                self.answer_roots(message, roots)
            if message.get("id") == request_id and ("result" in message or "error" in message):
                return message

    def answer_roots(self, request: dict, roots: list[str]) -> None:
        result = {"roots": [{"uri": Path(root).as_uri()} for root in roots]}
        self.raw.send({"jsonrpc": "2.0", "id": request["id"], "result": result})

    def request(self, method: str, params: dict | None = None, **kwargs) -> dict:
        self.raw.next_id += 1
        self.raw.send({"jsonrpc": "2.0", "id": self.raw.next_id, "method": method, "params": params or {}})
        return self.response(self.raw.next_id, **kwargs)

    def flood(self, notification: dict, count: int) -> None:
        """`count` copies of `notification`, written as fast as the pipe takes
        them."""
        line = json.dumps(notification).encode() + b"\n"
        stdin = self.raw.proc.stdin
        for _ in range(count // 10_000):
            stdin.write(line * 10_000)
        stdin.write(line * (count % 10_000))
        stdin.flush()


def flood_holds_nothing(raw, inbox, notification: dict, count: int = 100_000) -> None:
    """Send `notification` `count` times over stdio: the server still
    answers after them, and its peak memory grew by less than FLOOD_MIB."""
    inbox.request("ping")
    peak_before = memory_kib(raw.proc.pid, "VmHWM")
    inbox.flood(notification, count)
    assert "result" in inbox.request("ping")
    grown = (memory_kib(raw.proc.pid, "VmHWM") - peak_before) // 1024
    assert grown < FLOOD_MIB, f"{count} {notification['method']} took {grown} MiB"


def tool_names(reply: dict) -> set[str]:
    assert "result" in reply, reply
    return {tool["name"] for tool in reply["result"]["tools"]}


def test_a_stdio_flood_of_roots_list_changed_asks_the_client_once_and_holds_nothing(setup, tmp_path):
    setup.add("time")
    raw = RawServer(setup)
    raw.initialize(capabilities={"roots": {"listChanged": True}})
    inbox = Inbox(raw)
    # The roots are asked for after `initialized`; left unanswered.
    # Read after every notification: the server still answers.
    flood_holds_nothing(raw, inbox, ROOTS_CHANGED)
    # One `roots/list` in flight, however many changes (a second only if
    # the first timed out, after 10 s).
    assert 1 <= len(inbox.roots_asked) <= 2, len(inbox.roots_asked)

    # Answered, the refresh reads once more (the changes came after it
    # began); a call waits for that read and runs on what it says.
    (tmp_path / "granted").mkdir()
    asked = len(inbox.roots_asked)
    for request in inbox.roots_asked[:asked]:
        inbox.answer_roots(request, [str(tmp_path)])
    call = {"name": "get_current_time", "arguments": {"timezone": "UTC"}}
    reply = inbox.request("tools/call", call, roots=[str(tmp_path)])
    assert not reply["result"]["isError"], reply
    assert len(inbox.roots_asked) <= asked + 1, len(inbox.roots_asked)

    # A hot reload reaches the client.
    drop_tool(setup, "greet")
    deadline = time.monotonic() + 60
    while "greet" not in tool_names(inbox.request("tools/list")):
        assert time.monotonic() < deadline, "the new tool was never served"
        time.sleep(0.05)
    raw.close()


def test_a_stdio_flood_of_initialized_registers_the_session_once(setup):
    setup.add("time")
    raw = RawServer(setup)
    raw.initialize()
    inbox = Inbox(raw)
    flood_holds_nothing(raw, inbox, INITIALIZED)

    # One reload, one `tools/list_changed`: the session is registered once.
    drop_tool(setup, "greet")
    deadline = time.monotonic() + 60
    while inbox.list_changed == 0:
        assert time.monotonic() < deadline, "no tools/list_changed after a reload"
        time.sleep(0.05)
    assert "greet" in tool_names(inbox.request("tools/list"))
    raw.close()
    inbox.thread.join(timeout=30)
    assert inbox.list_changed == 1, inbox.list_changed


# --- Over HTTP -------------------------------------------------------------------


def open_session(server: HttpServer, capabilities: dict) -> dict:
    """A 2025-11-25 session, initialized: the headers its requests carry."""
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": LEGACY, "capabilities": capabilities, "clientInfo": {"name": "raw", "version": "0"}},
    }
    status, headers, text = post(server.url, initialize)
    assert status == 200, text
    session = {"Mcp-Session-Id": {k.lower(): v for k, v in headers.items()}["mcp-session-id"], "MCP-Protocol-Version": LEGACY}
    status, _, text = post(server.url, INITIALIZED, session)
    assert status == 202, text
    return session


def post_many(server: HttpServer, notification: dict, headers: dict, count: int, connections: int = 4) -> None:
    """POST `notification` `count` times over `connections` keep-alive
    connections at once; each must be accepted (202)."""
    body = json.dumps(notification).encode()
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers}
    failures: list[str] = []

    def worker(n: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        try:
            for _ in range(n):
                connection.request("POST", "/mcp", body, headers)
                response = connection.getresponse()
                response.read()
                if response.status != 202:
                    failures.append(f"{response.status}")
                    return
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(count // connections,)) for _ in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures[:5]


def stateless_tools(server: HttpServer) -> set[str]:
    """`tools/list` from a 2026-07-28 client: another client than the
    flooding one."""
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}}
    status, _, text = post(server.url, request, {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"})
    assert status == 200, text
    return tool_names(message(text))


def eventually_served(server: HttpServer, tool: str, served: bool = True, timeout: float = 60) -> None:
    """Wait until another client sees `tool` served (or, with `served`
    false, no longer served)."""
    deadline = time.monotonic() + timeout
    while (tool in stateless_tools(server)) != served:
        assert time.monotonic() < deadline, f"`{tool}` was never {'served' if served else 'withdrawn'}"
        time.sleep(0.05)


def test_an_http_flood_of_roots_list_changed_holds_nothing(setup):
    setup.add("time")
    server = HttpServer(setup)
    try:
        session = open_session(server, {"roots": {"listChanged": True}})
        assert "get_current_time" in stateless_tools(server)
        peak_before = memory_kib(server.proc.pid, "VmHWM")
        post_many(server, ROOTS_CHANGED, session, 20_000)
        grown = (memory_kib(server.proc.pid, "VmHWM") - peak_before) // 1024
        assert grown < FLOOD_MIB, f"20,000 roots/list_changed POSTs took {grown} MiB"
        # The session still answers, and a reload reaches another client.
        status, _, text = post(server.url, {"jsonrpc": "2.0", "id": 2, "method": "ping"}, session)
        assert status == 200 and "result" in message(text), text
        drop_tool(setup, "greet")
        eventually_served(server, "greet")
    finally:
        server.stop()


def test_a_client_that_stops_reading_and_repeats_initialized_cannot_hold_reloads(setup):
    """A session whose standalone SSE stream is never read, POSTing
    `initialized` over and over: once registered once, and told of a
    reload by its own drain task, it cannot hold the reload loop (before,
    each repetition registered it again, and each reload waited up to 5 s
    per registration, in series)."""
    setup.add("time")
    server = HttpServer(setup)
    stalled = socket.socket()
    try:
        session = open_session(server, {})
        # Receive little, and read nothing after the head.
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stalled.connect(("127.0.0.1", server.port))
        head = "".join(f"{key}: {value}\r\n" for key, value in session.items())
        stalled.sendall(f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nAccept: text/event-stream\r\n{head}\r\n".encode())
        stalled.settimeout(30)
        assert b" 200 " in stalled.recv(256)
        peak_before = memory_kib(server.proc.pid, "VmHWM")
        post_many(server, INITIALIZED, session, 20_000)
        grown = (memory_kib(server.proc.pid, "VmHWM") - peak_before) // 1024
        assert grown < FLOOD_MIB, f"20,000 initialized POSTs took {grown} MiB"
        # Reloads in a row reach another client: what they tell the
        # stalled session does not hold the next. (Before, each reload
        # wrote 20,000 notifications towards it, and by the third the
        # connection's buffers were full: every later one waited 5 s.)
        for _ in range(3):
            drop_tool(setup, "greet")
            eventually_served(server, "greet")
            (setup.tools_dir / GUEST_FILES["greet"]).unlink()
            eventually_served(server, "greet", served=False)
    finally:
        stalled.close()
        server.stop()
