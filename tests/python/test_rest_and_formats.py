"""For programs that do not speak MCP: the plain REST face (`GET
/capabilities`, `POST /tool`) with the same token, Origin and size rules
as `/mcp`, and the tools as function declarations in the formats model
APIs take (`toolcage list --format openai|anthropic|gemini`), checked
against each API's own published types (the official `openai`,
`anthropic` and `google-genai` packages)."""

from __future__ import annotations

import json
import time
import urllib.request

import pytest

from conftest import HttpServer, read_journal

TOKEN = "rest-face-token-0123456789"


def request(method, url, body=None, headers=None):
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    for key, value in (headers or {}).items():
        req.add_header(key, value)
    try:
        with urllib.request.urlopen(req, timeout=60) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        text = error.read()
        try:
            return error.code, json.loads(text)
        except ValueError:
            return error.code, text.decode()


AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def rest(setup, tmp_path):
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("alpha")
    setup.add("time")
    setup.add("fs")
    setup.add("misbehave")
    journal = tmp_path / "journal.jsonl"
    setup.write_config(
        f"""
[http]
token_file = "{token}"
max_body_kib = 64
allowed_origins = ["https://app.example.com"]

[http.rest]
enabled = true
unconfirmed = ["write_file"]

[journal]
path = "{journal}"

[defaults]
roots = [{{ path = "{data}", mode = "rw" }}]

[tools.spin]
fuel = 1000000
"""
    )
    server = HttpServer(setup)
    server.base = f"http://127.0.0.1:{server.port}"
    server.data = data
    server.journal = journal
    yield server
    server.stop()


def test_capabilities_list_the_tools_with_their_schemas(rest):
    status, body = request("GET", rest.base + "/capabilities", headers=AUTH)
    assert status == 200
    tools = {t["name"]: t for t in body["tools"]}
    assert {"get_current_time", "read_text_file", "write_file", "spin"} <= set(tools)
    time = tools["get_current_time"]
    assert time["parameters"]["type"] == "object" and "timezone" in time["parameters"]["properties"]
    assert time["annotations"]["readOnly"] is True and time["description"]


def test_a_call_answers_result_or_error_with_the_right_status(rest):
    ok = request("POST", rest.base + "/tool", {"tool": "read_text_file", "parameters": {"path": str(rest.data / "a.txt")}}, AUTH)
    assert ok[0] == 200 and ok[1]["error"] is None
    assert ok[1]["result"]["content"] == "alpha", ok
    # A tool's own failure: 200, with the error.
    missing = request("POST", rest.base + "/tool", {"tool": "read_text_file", "parameters": {"path": str(rest.data / "nope")}}, AUTH)
    assert missing[0] == 200 and missing[1]["result"] is None and "nope" in missing[1]["error"], missing
    # A limit: 200, with the error that names it.
    spun = request("POST", rest.base + "/tool", {"tool": "spin", "parameters": {}}, AUTH)
    assert spun[0] == 200 and "ran out of fuel" in spun[1]["error"], spun
    # Unknown tool: 404. Bad parameters: 400, naming what is wrong.
    assert request("POST", rest.base + "/tool", {"tool": "no_such_tool"}, AUTH)[0] == 404
    bad = request("POST", rest.base + "/tool", {"tool": "get_current_time", "parameters": {"timezone": 7}}, AUTH)
    assert bad[0] == 400 and "input schema" in bad[1]["error"], bad
    # Malformed bodies: 400.
    for body, words in [
        (b"not json", "not JSON"),
        ([1, 2], "must be a JSON object"),
        ({"tool": 3}, "`tool` must be"),
        ({"tool": "x", "parameters": [1]}, "`parameters` must be"),
        ({"tool": "x", "extra": 1}, "unknown field"),
    ]:
        status, answer = request("POST", rest.base + "/tool", body, AUTH)
        assert status == 400 and words in answer["error"], (body, answer)
    # Parameters may be left out for a tool without required ones.
    assert request("POST", rest.base + "/tool", {"tool": "get_current_time"}, AUTH)[0] == 200


def test_destructive_tools_need_the_operators_opt_in(rest):
    # delete_file is destructive and not opted in: refused, the file stays.
    target = rest.data / "a.txt"
    refused = request("POST", rest.base + "/tool", {"tool": "delete_file", "parameters": {"path": str(target)}}, AUTH)
    assert refused[0] == 403 and "unconfirmed" in refused[1]["error"], refused
    assert target.exists()
    # write_file is opted in (`unconfirmed = ["write_file"]`): it runs.
    written = request("POST", rest.base + "/tool", {"tool": "write_file", "parameters": {"path": str(rest.data / "b.txt"), "content": "beta"}}, AUTH)
    assert written[0] == 200 and written[1]["error"] is None, written
    assert (rest.data / "b.txt").read_text() == "beta"
    # The journal is written by its own thread, a little after the reply.
    deadline = time.monotonic() + 20
    while True:
        lines = [l for l in read_journal(rest.journal) if l["client"]["transport"] == "rest"]
        if "write_file" in {l["tool"] for l in lines} or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert {l["tool"] for l in lines} >= {"write_file"} and all(l["tool"] != "delete_file" for l in lines)


def test_the_face_keeps_the_token_origin_and_size_rules(rest):
    assert request("GET", rest.base + "/capabilities")[0] == 401
    assert request("POST", rest.base + "/tool", {"tool": "get_current_time"}, {"Authorization": "Bearer wrong"})[0] == 401
    evil = request("POST", rest.base + "/tool", {"tool": "get_current_time"}, {**AUTH, "Origin": "https://evil.example"})
    assert evil[0] == 403
    assert request("GET", rest.base + "/capabilities", headers={**AUTH, "Origin": "https://app.example.com"})[0] == 200
    big = request("POST", rest.base + "/tool", {"tool": "get_current_time", "parameters": {"pad": "x" * 100_000}}, AUTH)
    assert big[0] == 413
    assert request("DELETE", rest.base + "/tool", headers=AUTH)[0] == 405


def test_the_face_is_off_unless_enabled(setup):
    setup.add("time")
    server = HttpServer(setup)
    try:
        assert request("GET", f"http://127.0.0.1:{server.port}/capabilities")[0] == 404
    finally:
        server.stop()


def listed(setup, fmt):
    result = setup.run("--format", fmt)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout), result.stderr


@pytest.fixture
def many(setup):
    for guest in ["time", "fs", "weather", "conformance", "plain"]:
        setup.add(guest)
    return setup


def test_openai_declarations_fit_the_openai_types(many):
    from openai.types.chat import ChatCompletionFunctionToolParam
    from pydantic import TypeAdapter

    declarations, _ = listed(many, "openai")
    adapter = TypeAdapter(ChatCompletionFunctionToolParam)
    names = set()
    for declaration in declarations:
        adapter.validate_python(declaration, strict=True)
        function = declaration["function"]
        assert function["parameters"]["type"] == "object" and "$schema" not in function["parameters"]
        names.add(function["name"])
        assert len(function["name"]) <= 64 and all(c.isalnum() or c in "_-" for c in function["name"])
    assert len(names) == len(declarations) and "get_current_time" in names


def test_anthropic_declarations_fit_the_anthropic_types(many):
    from anthropic.types import ToolParam
    from pydantic import TypeAdapter

    declarations, _ = listed(many, "anthropic")
    adapter = TypeAdapter(ToolParam)
    for declaration in declarations:
        adapter.validate_python(declaration, strict=True)
        assert declaration["input_schema"]["type"] == "object"
    assert "read_text_file" in {d["name"] for d in declarations}


def test_gemini_declarations_fit_the_gemini_types(many):
    from google.genai import types

    declarations, _ = listed(many, "gemini")
    functions = declarations["functionDeclarations"]
    assert functions
    for function in functions:
        # The SDK's own model: unknown keys and wrong types are refused.
        parsed = types.FunctionDeclaration.model_validate(function)
        assert parsed.parameters.type == types.Type.OBJECT
        text = json.dumps(function)
        for keyword in ["$ref", "$defs", "additionalProperties", "$schema", "oneOf", "const"]:
            assert f'"{keyword}"' not in text, (function["name"], keyword)
