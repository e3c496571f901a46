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
    # The call stops (its audit line says cancelled: as "was cancelled" when
    # it saw the client's cancellation, as "abandoned" when the request
    # that ran it was dropped with the connection), long before its 20 s.
    def cancelled():
        return [
            line
            for line in server.setup.stderr().splitlines()
            if "toolcage::audit" in line and "tool=slow" in line and "outcome=cancelled" in line
        ]

    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not cancelled():
        time.sleep(0.1)
    assert cancelled(), server.setup.stderr()[-2000:]
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


# rmcp reads a weight in `Accept`; the direct path leaves any parameter to
# it. The same request with this header is answered by rmcp's service.
BY_RMCP = {"Accept": "application/json, text/event-stream;q=1"}


def _answered_by(url) -> dict:
    """`toolcage_mcp_http_requests_total` by what answered, from /metrics."""
    _, _, text = _get(url.replace("/mcp", "/metrics"))
    counts = {"direct": 0, "rmcp": 0}
    for line in text.splitlines():
        if line.startswith("toolcage_mcp_http_requests_total{"):
            label = line.split('answered_by="', 1)[1].split('"', 1)[0]
            counts[label] = int(float(line.rsplit(" ", 1)[1]))
    return counts


def _get(url):
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.status, dict(response.headers), response.read().decode()


def _raw_post(port, body: bytes, headers: list[tuple[str, str]]):
    """A POST with exactly `headers`, repeated names included: its status
    and body."""
    status, _, text = _raw_exchange(port, body, headers)
    return status, text


def _raw_exchange(port, body: bytes, headers: list[tuple[str, str]]):
    """A POST with exactly `headers`: its status, content type and body."""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.putrequest("POST", "/mcp", skip_host=True, skip_accept_encoding=True)
    for name, value in headers:
        conn.putheader(name, value)
    conn.putheader("Content-Length", str(len(body)))
    conn.endheaders(body)
    response = conn.getresponse()
    text = response.read().decode()
    conn.close()
    return response.status, response.getheader("content-type"), text


def text_of_raw(text: str) -> str:
    """The text items of a raw `tools/call` answer."""
    return "".join(c.get("text", "") for c in json.loads(text)["result"]["content"])


def _without_state(message: dict) -> dict:
    """`message` without its signed request state (fresh on every answer)."""
    result = message.get("result")
    if isinstance(result, dict) and "requestState" in result:
        result = {**result, "requestState": "<state>"}
        return {**message, "result": result}
    return message


def test_plain_modern_calls_are_answered_directly_exactly_as_rmcp_answers_them(setup):
    """A plain 2026-07-28 `tools/call` is answered without rmcp's
    per-request service; every answer (results, tool errors, JSON-RPC
    errors, input-required, missing capabilities) is the one rmcp gives the
    same request, status included."""
    setup.add("time")
    setup.add("misbehave")
    setup.write_config(
        "[tools.summarize]\nallow_sampling = true\n"
        'requires_client = ["sampling", "elicitation"]\n'
        '[http]\nmetrics = "open"\n'
    )
    srv = HttpServer(setup)
    try:
        elicit = {**META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
        cases = [
            ("echo", {"text": "hi"}, META, 1),
            ("convert_timezone", {"time": "2026-01-01T00:00:00Z", "timezone": "Asia/Tokyo"}, META, "s-1"),
            ("convert_timezone", {"time": 5}, META, 3),
            ("spin", {}, META, 4),
            ("no_such_tool", {}, META, 5),
            ("summarize", {"text": "t"}, META, 6),
            ("ask_user", {}, elicit, 2**53),
            ("echo", None, META, 8),
        ]
        for tool, arguments, meta, request_id in cases:
            body = call_body(tool, arguments, request_id)
            body["params"]["_meta"] = meta
            if arguments is None:
                del body["params"]["arguments"]
            before = _answered_by(srv.url)
            direct = post(srv.url, body, modern_headers(tool))
            middle = _answered_by(srv.url)
            by_rmcp = post(srv.url, body, {**modern_headers(tool), **BY_RMCP})
            after = _answered_by(srv.url)
            assert middle["direct"] == before["direct"] + 1, (tool, before, middle)
            assert after["rmcp"] == middle["rmcp"] + 1 and after["direct"] == middle["direct"], (tool, after)
            assert direct[0] == by_rmcp[0], (tool, direct, by_rmcp)
            types = {k.lower(): v for k, v in direct[1].items()}["content-type"], {
                k.lower(): v for k, v in by_rmcp[1].items()
            }["content-type"]
            assert types == ("application/json", "application/json"), (tool, types)
            assert _without_state(json.loads(direct[2])) == _without_state(json.loads(by_rmcp[2])), (tool, direct, by_rmcp)
        # What some of the cases above mean, so the comparison is not of two wrongs.
        echoed = post(srv.url, call_body("echo", {"text": "hi"}), modern_headers("echo"))
        assert echoed[0] == 200 and "hi" in text_of_raw(echoed[2]), echoed
        refused = post(srv.url, call_body("summarize", {"text": "t"}), modern_headers("summarize"))
        assert refused[0] == 400 and json.loads(refused[2])["error"]["code"] == -32021, refused
        unknown = post(srv.url, call_body("no_such_tool"), modern_headers("no_such_tool"))
        assert unknown[0] == 200 and json.loads(unknown[2])["error"]["code"] == -32602, unknown

        # Input-required, then the retry with the answer, both directly.
        body = call_body("ask_user", {}, 11)
        body["params"]["_meta"] = elicit
        first = json.loads(post(srv.url, body, modern_headers("ask_user"))[2])["result"]
        assert first["resultType"] == "input_required", first
        (key,) = first["inputRequests"]
        body["params"]["inputResponses"] = {key: {"action": "accept", "content": {"name": "Ada", "age": 36}}}
        # An answer the request brings before the question was put to it
        # (no state naming it) is not taken, by either path: it is asked.
        for headers in [modern_headers("ask_user"), {**modern_headers("ask_user"), **BY_RMCP}]:
            unasked = json.loads(post(srv.url, body, headers)[2])["result"]
            assert unasked["resultType"] == "input_required" and key in unasked["inputRequests"], unasked
        body["params"]["requestState"] = first["requestState"]
        before = _answered_by(srv.url)
        status, _, text = post(srv.url, body, modern_headers("ask_user"))
        assert _answered_by(srv.url)["direct"] == before["direct"] + 1
        assert status == 200 and json.loads(text)["result"]["structuredContent"]["greeting"] == "Hello Ada, 36!", text
    finally:
        srv.stop()


def _metered_time_server(setup):
    """A server of the time tool with `/metrics` open (to count which path
    answered), its port, and the body of a plain call."""
    setup.add("time")
    setup.write_config('[http]\nmetrics = "open"\n')
    server = HttpServer(setup)
    return server, server.port, json.dumps(call_body()).encode()


def test_requests_the_direct_path_does_not_take_get_rmcps_answers(setup):
    """Anything but a plain, well-formed 2026-07-28 `tools/call` goes to
    rmcp, which gives its own answer: each bad or unusual request here is
    answered by rmcp (as /metrics counts it), with rmcp's status."""
    server, port, ok = _metered_time_server(setup)
    base = [
        ("Host", f"127.0.0.1:{port}"),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", MODERN),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "get_current_time"),
    ]
    progress = call_body()
    progress["params"]["_meta"] = {**META, "progressToken": "p1"}
    no_info = call_body()
    no_info["params"]["_meta"] = {k: v for k, v in META.items() if "clientInfo" not in k}
    missing_caps = call_body()
    missing_caps["params"]["_meta"] = {k: v for k, v in META.items() if "clientCapabilities" not in k}
    import base64

    encoded = "=?base64?" + base64.b64encode(b"get_current_time").decode() + "?="
    cases = [
        # (why, body, headers, expected status)
        ("Mcp-Method twice", ok, base + [("Mcp-Method", "tools/call")], 400),
        ("Mcp-Name in Base64", ok, [h for h in base if h[0] != "Mcp-Name"] + [("Mcp-Name", encoded)], 200),
        ("Mcp-Name of another tool", ok, [h for h in base if h[0] != "Mcp-Name"] + [("Mcp-Name", "spin")], 400),
        ("no Mcp-Name", ok, [h for h in base if h[0] != "Mcp-Name"], 400),
        ("only JSON accepted", ok, [h for h in base if h[0] != "Accept"] + [("Accept", "application/json")], 406),
        ("not JSON", ok, [h for h in base if h[0] != "Content-Type"] + [("Content-Type", "text/plain")], 415),
        ("an older revision", ok, [h for h in base if h[0] != "MCP-Protocol-Version"] + [("MCP-Protocol-Version", LEGACY)], 400),
        ("a progress token", json.dumps(progress).encode(), base, 200),
        ("no clientInfo", json.dumps(no_info).encode(), base, 200),
        ("no clientCapabilities", json.dumps(missing_caps).encode(), base, 400),
        ("not JSON at all", b"{not json", base, 415),
        ("a batch", json.dumps([call_body()]).encode(), base, 415),
        ("a disallowed Host", ok, [("Host", "evil.example")] + base[1:], 403),
        ("an allowed Origin", ok, base + [("Origin", f"http://127.0.0.1:{port}")], 200),
        ("a foreign Origin", ok, base + [("Origin", "https://evil.example")], 403),
    ]
    try:
        for why, body, headers, expected in cases:
            before = _answered_by(server.url)
            status, text = _raw_post(port, body, headers)
            after = _answered_by(server.url)
            assert status == expected, (why, status, text)
            assert after == {"direct": before["direct"], "rmcp": before["rmcp"] + 1}, (why, before, after)
        # The plain request itself is answered directly.
        before = _answered_by(server.url)
        assert _raw_post(port, ok, base)[0] == 200
        assert _answered_by(server.url)["direct"] == before["direct"] + 1
    finally:
        server.stop()


def test_hosts_of_every_shape_are_judged_as_rmcp_judges_them(setup):
    """The direct path reads a plain `Host` (a name or an IPv4 address,
    perhaps a port) in place and parses every other shape in full. Each
    `Host` here gets the same status whichever path answers, and the
    allowed ones, in any case and with or without a port, are answered
    directly."""
    server, port, ok = _metered_time_server(setup)
    base = [
        ("Content-Type", "application/json"),
        ("MCP-Protocol-Version", MODERN),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "get_current_time"),
    ]
    plain_accept = ("Accept", "application/json, text/event-stream")
    weighted_accept = ("Accept", BY_RMCP["Accept"])
    allowed = [f"127.0.0.1:{port}", f"LOCALHOST:{port}", "localhost", f"[::1]:{port}", "127.0.0.1:1"]
    refused = [
        "evil.example",
        f"evil.example:{port}",
        f"127.0.0.1.evil.example:{port}",
        f"localhost.:{port}",
        "127.0.0.2",
        f"[::2]:{port}",
    ]
    odd = [f"user@127.0.0.1:{port}", f"127.0.0.1:{port}x", "127.0.0.1:99999", "127.0.0.1:", f"127.0.0.1:0{port}", ":80", "[::1"]
    try:
        for host in allowed + refused + odd:
            before = _answered_by(server.url)
            direct = _raw_post(port, ok, [("Host", host), plain_accept] + base)
            middle = _answered_by(server.url)
            by_rmcp = _raw_post(port, ok, [("Host", host), weighted_accept] + base)
            assert direct[0] == by_rmcp[0], (host, direct, by_rmcp)
            if host in allowed:
                assert direct[0] == 200, (host, direct)
                assert middle["direct"] == before["direct"] + 1, (host, before, middle)
            if host in refused:
                assert direct[0] == 403, (host, direct)
                assert middle == {"direct": before["direct"], "rmcp": before["rmcp"] + 1}, (host, before, middle)
    finally:
        server.stop()


def test_mutated_requests_get_the_same_answer_from_either_path(setup):
    """Randomly mutated calls (seeded, so a failure replays): wrong types in
    `_meta`, ids, names and arguments, extra params, other hosts, content
    types, names and revisions in the headers. Each is sent as is, then with
    an extra weighted `Accept` value, which rmcp ignores (it asks only that
    JSON and event streams be accepted) and the direct path leaves to rmcp.
    Whichever path took the first, both answers are the same."""
    import copy
    import random

    setup.add("time")
    setup.add("misbehave")
    setup.write_config('[http]\nmetrics = "open"\n')
    server = HttpServer(setup)
    port = server.port
    rnd = random.Random(2026)
    weird = [None, 0, -1, 1.5, "x", [], {}, True, 2**64, MODERN]
    tools = [
        ("echo", {"text": "hi"}),
        ("echo", {"text": 5}),
        ("ask_user", {}),
        ("spin", {}),
        ("no_such_tool", {}),
    ]

    def mutate(body, headers, tool):
        params = body["params"]
        kind = rnd.randrange(12)
        if kind == 0 and "_meta" in params:
            params["_meta"][rnd.choice(list(META))] = rnd.choice(weird)
        elif kind == 1 and "_meta" in params:
            params["_meta"]["io.modelcontextprotocol/clientCapabilities"] = rnd.choice(
                [{"elicitation": {}}, {"sampling": {}}, {"roots": {}}, {"elicitation": 5}, {"extensions": {"x": {}}}]
            )
        elif kind == 2:
            params["arguments"] = rnd.choice(weird)
        elif kind == 3:
            body["id"] = rnd.choice(weird)
        elif kind == 4:
            params[rnd.choice(["task", "requestState", "inputResponses", "extra"])] = rnd.choice(weird)
        elif kind == 5:
            params["name"] = rnd.choice(weird)
        elif kind == 6:
            headers["Host"] = rnd.choice(
                [f"LOCALHOST:{port}", "127.0.0.1", f"[::1]:{port}", "localhost:1", "evil.example:1", f"u@127.0.0.1:{port}"]
            )
        elif kind == 7:
            headers["Content-Type"] = rnd.choice(
                ["application/json; charset=utf-8", "APPLICATION/JSON", "application/jsonx", "text/json"]
            )
        elif kind == 8:
            headers["Mcp-Name"] = rnd.choice([tool.upper(), " " + tool, tool + " ", "echo"])
        elif kind == 9:
            headers["MCP-Protocol-Version"] = rnd.choice([LEGACY, MODERN + " ", "2099-01-01"])
        elif kind == 10:
            body["jsonrpc"] = rnd.choice(weird)
        else:
            params.pop(rnd.choice(["_meta", "arguments", "name"]), None)

    def comparable(text):
        try:
            message = json.loads(text)
        except ValueError:
            return text
        return _without_state(message) if isinstance(message, dict) else message

    taken = 0
    try:
        for case in range(200):
            tool, arguments = rnd.choice(tools)
            body = call_body(tool, copy.deepcopy(arguments), rnd.choice([1, "a", 2**53, 0, -5]))
            body["params"]["_meta"] = copy.deepcopy(META)
            headers = {
                "Host": f"127.0.0.1:{port}",
                "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": MODERN,
                "Mcp-Method": "tools/call",
                "Mcp-Name": tool,
            }
            for _ in range(rnd.randint(0, 2)):
                mutate(body, headers, tool)
            raw = json.dumps(body).encode()
            before = _answered_by(server.url)
            first = _raw_exchange(port, raw, list(headers.items()))
            middle = _answered_by(server.url)
            second = _raw_exchange(port, raw, [*headers.items(), ("Accept", "application/x-none;q=1")])
            assert _answered_by(server.url)["direct"] == middle["direct"], (case, body, headers)
            taken += middle["direct"] - before["direct"]
            assert first[:2] == second[:2] and comparable(first[2]) == comparable(second[2]), (
                case,
                body,
                headers,
                first,
                second,
            )
        # Both paths were exercised, not only the fallback.
        assert 50 < taken < 190, taken
    finally:
        server.stop()


def _session_post(port, session, message):
    """POST `message` in `session` on a connection of its own; the open
    connection and its response (read no further than the head)."""
    import http.client

    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if session:
        headers["Mcp-Session-Id"] = session
    connection.request("POST", "/mcp", body=json.dumps(message), headers=headers)
    return connection, connection.getresponse()


def _next_message(response) -> dict | None:
    """The next JSON-RPC message of an SSE response; None at its end."""
    while True:
        line = response.fp.readline()
        if not line:
            return None
        line = line.decode().strip()
        if line.startswith("data:") and line[5:].strip():
            return json.loads(line[5:])


def _pending_confirmation(port, session, request_id):
    """A call that waits for the user's confirmation: its connection, its
    streaming response and the id of the question it asked."""
    connection, response = _session_post(
        port, session, {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": "get_current_time", "arguments": {}}}
    )
    assert response.status == 200, response.read()
    while (message := _next_message(response)) is not None:
        if message.get("method") == "elicitation/create":
            return connection, response, message["id"]
    raise AssertionError("the call asked nothing")


def test_streamed_responses_count_as_requests_in_progress(setup):
    # Two requests in progress at most; every call of get_current_time asks
    # the user first, and the answer streams back on the call's response.
    setup.add("time")
    setup.write_config("[http]\nmax_concurrent_requests = 2\n\n[tools.get_current_time]\nconfirm = true\n")
    server = HttpServer(setup)
    try:
        connection, response = _session_post(
            server.port,
            None,
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {"protocolVersion": LEGACY, "capabilities": {"elicitation": {}}, "clientInfo": {"name": "raw", "version": "0"}},
            },
        )
        session = response.getheader("Mcp-Session-Id")
        assert response.status == 200 and session
        response.read()
        connection.close()
        connection, response = _session_post(server.port, session, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert response.status == 202
        connection.close()

        def another_client():
            body = call_body("convert_timezone", {"time": "2026-01-01T00:00:00Z", "timezone": "UTC"})
            return post(server.url, body, modern_headers("convert_timezone"))[0]

        # Two calls wait on their users: the cap is taken until they end.
        first = _pending_confirmation(server.port, session, 1)
        second = _pending_confirmation(server.port, session, 2)
        assert another_client() == 503
        # An answer still gets in (it is what ends a request in progress).
        connection, response = _session_post(
            server.port, session, {"jsonrpc": "2.0", "id": first[2], "result": {"action": "decline"}}
        )
        assert response.status == 202
        connection.close()
        replies = []
        while (message := _next_message(first[1])) is not None:
            replies.append(message)
        assert any(m.get("id") == 1 and m["result"]["isError"] for m in replies), replies
        first[0].close()
        # Its stream has ended: one permit is free again, and only one.
        assert another_client() == 200
        third = _pending_confirmation(server.port, session, 3)
        assert another_client() == 503
        # A client that goes away frees its request too.
        second[0].close()
        deadline = time.monotonic() + 20
        while another_client() != 200:
            assert time.monotonic() < deadline, "a dropped stream still counts"
            time.sleep(0.05)
        third[0].close()
    finally:
        server.stop()
