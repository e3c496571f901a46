"""Protocol misuse on raw stdio: each gets the right JSON-RPC error, every
stdout line stays one JSON-RPC message, and the server keeps serving."""

from conftest import MODERN, RawServer


def meta():
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "raw-test", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }


def check_serving(raw, request_id, params_meta=None):
    params = {"name": "get_current_time", "arguments": {}}
    if params_meta:
        params["_meta"] = params_meta
    raw.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})
    reply = raw.read_response(request_id)
    assert reply["result"]["isError"] is False, reply
    assert reply["result"]["structuredContent"]["timezone"] == "UTC"


def test_malformed_and_wrong_requests_get_json_rpc_errors(setup):
    setup.add("time")
    raw = RawServer(setup)

    # Not JSON at all, before any session: parse error with id null.
    raw.send("this is {not json")
    reply = raw.read()
    assert reply["id"] is None and reply["error"]["code"] == -32700

    raw.initialize()

    raw.send('{"jsonrpc": "2.0", "id": 7, "method": "tools/list"')  # truncated
    assert raw.read()["error"]["code"] == -32700

    # JSON, but not a JSON-RPC message: invalid request, id echoed.
    raw.send({"jsonrpc": "2.0", "id": 8})
    reply = raw.read()
    assert reply["error"]["code"] == -32600 and reply["id"] == 8
    raw.send([1, 2, 3])
    assert raw.read()["error"]["code"] == -32600

    raw.send({"jsonrpc": "2.0", "id": 9, "method": "no/such/method", "params": {}})
    reply = raw.read_response(9)
    assert reply["error"]["code"] == -32601
    assert "no/such/method" in reply["error"]["message"]

    raw.send({"jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": {"name": "nope", "arguments": {}}})
    reply = raw.read_response(10)
    assert reply["error"]["code"] == -32602 and "`nope`" in reply["error"]["message"]

    # Non-object arguments are invalid params, not a crash.
    for i, arguments in enumerate([[1, 2], "text", 42], start=11):
        raw.send(
            {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "get_current_time", "arguments": arguments}}
        )
        assert raw.read_response(i)["error"]["code"] == -32602

    raw.send({"jsonrpc": "2.0", "id": 20, "method": "tools/call", "params": {"arguments": {}}})
    assert raw.read_response(20)["error"]["code"] == -32602

    check_serving(raw, 21)
    raw.close()


def test_modern_clients_are_served_statelessly_on_the_same_binary(setup):
    setup.add("time")
    raw = RawServer(setup)
    raw.send({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta()}})
    discovered = raw.read_response(1)["result"]
    assert MODERN in discovered["supportedVersions"]

    raw.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": meta()}})
    listed = raw.read_response(2)["result"]
    assert {t["name"] for t in listed["tools"]} == {"get_current_time", "convert_timezone"}
    assert 0 < listed["ttlMs"] <= 60_000  # short: hot reload can change the set

    raw.send({"jsonrpc": "2.0", "id": 3, "method": "bogus", "params": {"_meta": meta()}})
    assert raw.read_response(3)["error"]["code"] == -32601
    raw.send("{garbage")
    assert raw.read()["error"]["code"] == -32700
    check_serving(raw, 4, meta())
    raw.close()
