"""Streamable HTTP: both eras through the official SDK, and the bad inputs
a network-facing server must survive."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import urllib.error
import urllib.request

import anyio
import pytest

from conftest import ERAS, LEGACY, MODERN, HttpServer, http_session, text_of

pytestmark = pytest.mark.anyio

META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def post(url, body, headers=None, timeout=60):
    """A raw POST; returns (status, headers, text)."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="POST")
    request.add_header("Content-Type", "application/json")
    request.add_header("Accept", "application/json, text/event-stream")
    for key, value in (headers or {}).items():
        request.add_header(key, value)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read().decode()


def call_body(tool="get_current_time", arguments=None, request_id=1):
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments or {}, "_meta": META},
    }


def modern_headers(tool="get_current_time"):
    return {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": tool}


@pytest.fixture
def server(setup):
    setup.add("time")
    setup.add("misbehave")
    setup.write_config("[tools.slow]\nmax_concurrent = 64\n")
    srv = HttpServer(setup)
    yield srv
    srv.stop()


@pytest.mark.parametrize("era", ERAS)
async def test_both_eras_list_and_call_over_http(server, era):
    async with http_session(server.url, era) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"get_current_time", "convert_timezone"} <= names
        result = await client.call_tool(
            "convert_timezone", {"time": "2026-01-01T00:00:00Z", "timezone": "Asia/Tokyo"}
        )
        assert result.structured_content["converted"]["datetime"] == "2026-01-01T09:00:00+09:00"
        bad = await client.call_tool("spin", {})
        assert bad.is_error and "ran out of fuel" in text_of(bad)


def test_origin_and_host_are_checked(server):
    ok = post(server.url, call_body(), modern_headers())
    assert ok[0] == 200, ok  # no Origin: a non-browser client
    foreign = post(server.url, call_body(), {**modern_headers(), "Origin": "https://evil.example"})
    assert foreign[0] == 403
    other_port = post(server.url, call_body(), {**modern_headers(), "Origin": f"http://127.0.0.1:{server.port + 1}"})
    assert other_port[0] == 403
    # The server's own origin is not cross-origin.
    own = post(server.url, call_body(), {**modern_headers(), "Origin": f"http://127.0.0.1:{server.port}"})
    assert own[0] == 200, own
    rebinding = post(server.url, call_body(), {**modern_headers(), "Host": "evil.example"})
    assert rebinding[0] == 403


def test_wrong_protocol_headers_are_400(server):
    status, _, text = post(server.url, call_body(), {**modern_headers(), "Mcp-Name": "convert_timezone"})
    assert status == 400, text
    status, _, text = post(server.url, call_body(), {**modern_headers(), "Mcp-Method": "tools/list"})
    assert status == 400, text
    status, _, text = post(server.url, call_body(), {**modern_headers(), "MCP-Protocol-Version": "1999-01-01"})
    assert status == 400, text


def test_methods_removed_in_2026_are_not_found_for_2026_requests(server):
    for method in ["initialize", "logging/setLevel", "ping"]:
        params = {"_meta": META}
        if method == "logging/setLevel":
            params["level"] = "debug"
        body = {"jsonrpc": "2.0", "id": 9, "method": method, "params": params}
        status, _, text = post(server.url, body, {"MCP-Protocol-Version": MODERN, "Mcp-Method": method})
        assert status == 404 and "-32601" in text, (method, status, text)


def test_unknown_method_and_unknown_path(server):
    body = {"jsonrpc": "2.0", "id": 5, "method": "no/such", "params": {"_meta": META}}
    status, _, text = post(server.url, body, {"MCP-Protocol-Version": MODERN, "Mcp-Method": "no/such"})
    assert "-32601" in text, (status, text)
    status, _, _ = post(server.url.replace("/mcp", "/other"), call_body(), modern_headers())
    assert status == 404


def test_a_body_over_the_cap_is_413(setup):
    setup.add("time")
    setup.write_config("[http]\nmax_body_kib = 64\n")
    srv = HttpServer(setup)
    try:
        big = call_body(arguments={"timezone": "x" * (200 * 1024)})
        status, _, _ = post(srv.url, big, modern_headers())
        assert status == 413
        assert post(srv.url, call_body(), modern_headers())[0] == 200
    finally:
        srv.stop()


def test_a_public_bind_needs_a_token_and_checks_it(setup, tmp_path):
    setup.add("time")
    refused = setup.run("--http", "0.0.0.0:0", command="serve")
    assert refused.returncode == 2 and "without authentication" in refused.stderr

    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token\n")
    setup.write_config(f'[http]\ntoken_file = "{token_file}"\n')
    srv = HttpServer(setup, addr="0.0.0.0:0")
    try:
        assert post(srv.url, call_body(), modern_headers())[0] == 401
        wrong = post(srv.url, call_body(), {**modern_headers(), "Authorization": "Bearer s3cret-tokeX"})
        assert wrong[0] == 401 and "Bearer" in wrong[1].get("WWW-Authenticate", wrong[1].get("www-authenticate", ""))
        ok = post(srv.url, call_body(), {**modern_headers(), "Authorization": "Bearer s3cret-token"})
        assert ok[0] == 200, ok
    finally:
        srv.stop()


async def test_sdk_clients_send_the_token(setup, tmp_path):
    setup.add("time")
    setup.write_config('[http]\ntoken_env = "TEST_TOOLCAGE_TOKEN"\n')
    srv = HttpServer(setup, env={"TEST_TOOLCAGE_TOKEN": "tok-123"})
    try:
        async with http_session(srv.url, LEGACY, headers={"Authorization": "Bearer tok-123"}) as client:
            assert not (await client.call_tool("get_current_time", {})).is_error
    finally:
        srv.stop()


def test_a_client_that_disconnects_mid_call_cancels_it(server):
    body = call_body("slow", {"ms": 20000})
    with pytest.raises(Exception):
        post(server.url, body, modern_headers("slow"), timeout=0.5)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and "tool `slow` was cancelled" not in server.setup.stderr():
        time.sleep(0.1)
    assert "tool `slow` was cancelled" in server.setup.stderr()
    assert post(server.url, call_body(), modern_headers())[0] == 200


def test_a_thousand_requests_from_64_connections(server):
    statuses: list[int] = []
    lock = threading.Lock()

    def worker(n):
        for i in range(n):
            status, _, text = post(server.url, call_body(request_id=i), modern_headers())
            if status == 200:
                assert json.loads(text)["result"]["isError"] is False
            with lock:
                statuses.append(status)

    threads = [threading.Thread(target=worker, args=(1000 // 64 + (1 if k < 1000 % 64 else 0),)) for k in range(64)]
    rss_before = _rss_kib(server.proc.pid)
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(statuses) == 1000
    assert set(statuses) <= {200, 503}, set(statuses)
    assert statuses.count(200) >= 500
    # Memory stays bounded: no per-request leak of any size.
    assert _rss_kib(server.proc.pid) < rss_before + 200 * 1024


def _running(server) -> str:
    """The server's "call running" log lines."""
    return "\n".join(line for line in server.setup.stderr().splitlines() if "call running" in line)


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_sigterm_finishes_calls_in_flight_then_exits(server):
    results = []

    def slow_call():
        results.append(post(server.url, call_body("slow", {"ms": 1500}), modern_headers("slow")))

    thread = threading.Thread(target=slow_call)
    thread.start()
    # The signal must find the call running: wait for the server to say so.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and 'tool=slow' not in _running(server):
        time.sleep(0.05)
    assert "tool=slow" in _running(server), server.setup.stderr()[-2000:]
    code = server.stop(signal.SIGTERM)
    thread.join()
    assert code == 0
    status, _, text = results[0]
    assert status == 200 and json.loads(text)["result"]["isError"] is False
