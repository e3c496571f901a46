"""Authorization over HTTP: toolcage as an OAuth 2.1 resource server in
front of a real authorization server (authlib, client credentials, RFC 9068
JWT access tokens), and `[[callers]]` policy per caller.

The clients are the official Python SDK with its client-credentials OAuth
provider (discovery from the 401 challenge, RFC 9728 metadata, RFC 8414
metadata, RFC 8707 resource indicator), and raw HTTP for the tokens no
honest client sends.
"""

from __future__ import annotations

import base64
import json
import secrets
import socket
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
import mcp.types as types
from mcp import MCPError

from conftest import ERAS, LEGACY, MODERN, HttpServer, http_session, read_journal, text_of, until
from oauth_server import AuthServer, new_key
from openmeteo_server import OpenMeteoServer
from test_http import META, call_body, modern_headers, post

pytestmark = pytest.mark.anyio

READER_TOOLS = {"read_text_file", "list_directory", "get_current_time"}


class Memory:
    """Token storage for the SDK's OAuth provider: in memory."""

    def __init__(self):
        self.tokens = None
        self.info = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.info

    async def set_client_info(self, info):
        self.info = info


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def auth():
    server = AuthServer()
    server.add_client("reader", "reader-secret", ["mcp", "tools.read"])
    server.add_client("writer", "writer-secret", ["mcp", "tools.write"])
    server.add_client("writer2", "writer2-secret", ["mcp", "tools.write"])
    server.add_client("stranger", "stranger-secret", ["mcp"])
    server.add_client("noscope", "noscope-secret", ["tools.read"])
    yield server
    server.stop()


class Protected:
    """toolcage over HTTP with `[http.oauth]` naming `auth`, the filesystem,
    time and misbehave tools, a journal, and two `[[callers]]` entries."""

    def __init__(self, setup, auth, tmp_path, extra_oauth: str = "", echo: OpenMeteoServer | None = None):
        self.data = tmp_path / "data"
        (self.data / "public").mkdir(parents=True)
        (self.data / "private").mkdir()
        (self.data / "public" / "notes.txt").write_text("public notes")
        (self.data / "private" / "secret.txt").write_text("private")
        self.journal = tmp_path / "journal.jsonl"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.auth = auth
        setup.add("fs")
        setup.add("time")
        setup.add("misbehave")
        hosts = f'["127.0.0.1:{echo.port}", "localhost:{echo.port}"]' if echo else "[]"
        setup.write_config(
            f"""
[journal]
path = "{self.journal}"

[http.oauth]
resource = "{self.url}"
issuer = "{auth.url}"
required_scopes = ["mcp"]
scopes_supported = ["mcp", "tools.read", "tools.write"]
leeway_secs = 0
{extra_oauth}

[defaults]
roots = [{{ path = "{self.data}", mode = "rw" }}]

[tools.fetch]
network = {hosts}

[[callers]]
name = "readers"
client_ids = ["reader"]
tools = ["read_text_file", "list_directory", "get_current_*"]
roots = [{{ path = "{self.data}/public", mode = "ro" }}]

[[callers]]
name = "writers"
scopes = ["tools.write"]
tools = ["*"]
network = ["localhost:{echo.port if echo else 1}"]
"""
        )
        self.server = HttpServer(setup, f"127.0.0.1:{self.port}")

    def token(self, client: str, resource: str | None = None, scope: str | None = "mcp tools.read tools.write") -> str:
        return self.auth.issue(client, resource or self.url, scope)

    def provider(self, client: str) -> ClientCredentialsOAuthProvider:
        return ClientCredentialsOAuthProvider(
            server_url=self.url,
            storage=Memory(),
            client_id=client,
            client_secret=self.auth.clients[client].client_secret,
            token_endpoint_auth_method="client_secret_post",
            scope="mcp tools.read tools.write",
            issuer=self.auth.url,
        )

    def stop(self):
        self.server.stop()


@pytest.fixture
def protected(setup, auth, tmp_path):
    server = Protected(setup, auth, tmp_path)
    yield server
    server.stop()


def list_body(request_id=1):
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/list", "params": {"_meta": META}}


def list_headers():
    return {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"}


def bearer(token):
    return {"Authorization": f"Bearer {token}"}


def get(url, headers=None):
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read().decode()


async def test_metadata_and_the_challenge_point_at_the_authorization_server(protected, auth):
    origin = f"http://127.0.0.1:{protected.port}"
    for path in ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"]:
        status, headers, body = get(origin + path)
        assert status == 200 and headers["content-type"] == "application/json", (path, status, body)
        document = json.loads(body)
        assert document["resource"] == protected.url
        assert document["authorization_servers"] == [auth.url]
        assert document["bearer_methods_supported"] == ["header"]
        assert "tools.write" in document["scopes_supported"]
    status, headers, body = post(protected.url, list_body(), list_headers())
    assert status == 401, body
    challenge = headers["www-authenticate"]
    assert challenge.startswith("Bearer ") and "error=" not in challenge, challenge
    assert f'resource_metadata="{origin}/.well-known/oauth-protected-resource/mcp"' in challenge
    assert auth.url in body and protected.url in body


@pytest.mark.parametrize("era", ERAS)
async def test_two_callers_see_and_run_only_what_their_policy_allows(protected, era):
    async with http_session(protected.url, era, auth=protected.provider("reader")) as reader:
        listed = {tool.name for tool in (await reader.list_tools()).tools}
        assert listed == READER_TOOLS, listed
        public = await reader.call_tool("read_text_file", {"path": str(protected.data / "public" / "notes.txt")})
        assert not public.is_error and text_of(public) == "public notes", text_of(public)
        # Its roots are narrowed to data/public, read-only.
        private = await reader.call_tool("read_text_file", {"path": str(protected.data / "private" / "secret.txt")})
        assert private.is_error, text_of(private)
        with pytest.raises(MCPError) as refused:
            await reader.call_tool("write_file", {"path": str(protected.data / "public" / "x"), "content": "x"})
        assert refused.value.code == types.INVALID_PARAMS
        assert "not available to this caller" in refused.value.message and "`readers`" in refused.value.message
        # The same answer for a tool that does not exist: nothing is revealed.
        with pytest.raises(MCPError) as unknown:
            await reader.call_tool("no_such_tool_anywhere", {})
        assert "not available to this caller" in unknown.value.message
    async with http_session(protected.url, era, auth=protected.provider("writer")) as writer:
        listed = {tool.name for tool in (await writer.list_tools()).tools}
        assert READER_TOOLS < listed and {"write_file", "fetch"} <= listed, listed
        secret = await writer.call_tool("read_text_file", {"path": str(protected.data / "private" / "secret.txt")})
        assert not secret.is_error and text_of(secret) == "private", text_of(secret)
    # The journal is written by its own thread, a little after the reply.
    await until(
        lambda: any(
            e["tool"] == "read_text_file" and e["client"].get("caller", {}).get("client_id") == "writer"
            for e in read_journal(protected.journal)
        )
    )
    entries = read_journal(protected.journal)
    by_policy = {}
    for entry in entries:
        caller = entry["client"]["caller"]
        assert caller["issuer"] == protected.auth.url
        by_policy.setdefault(caller["policy"], []).append(entry)
    assert {e["client"]["caller"]["client_id"] for e in by_policy["readers"]} == {"reader"}
    assert {e["client"]["caller"]["client_id"] for e in by_policy["writers"]} == {"writer"}
    refusals = [e for e in by_policy["readers"] if e["outcome"] == "refused"]
    assert {e["tool"] for e in refusals} == {"write_file", "no_such_tool_anywhere"}, refusals


async def test_a_caller_matching_no_entry_gets_nothing(protected):
    token = protected.token("stranger", scope="mcp")
    status, _, body = post(protected.url, list_body(), {**list_headers(), **bearer(token)})
    assert status == 200, body
    assert json.loads(body)["result"]["tools"] == []
    status, _, body = post(protected.url, call_body(), {**modern_headers(), **bearer(token)})
    error = json.loads(body)["error"]
    assert error["code"] == types.INVALID_PARAMS and "matches no `[[callers]]` entry" in error["message"], error


def message(text: str) -> dict:
    """The JSON-RPC message of a response body: JSON, or the data of an
    SSE event."""
    if text.lstrip().startswith("{"):
        return json.loads(text)
    data = [line[5:].strip() for line in text.splitlines() if line.startswith("data:") and line[5:].strip()]
    return json.loads(data[-1])


def b64(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def bad_tokens(protected, auth):
    """(name, token, status, what the refusal says)."""
    now = int(time.time())
    good = {"aud": protected.url, "sub": "reader", "client_id": "reader", "scope": "mcp"}
    other_key = new_key("key-1")  # the issuer's kid, another key
    real = protected.token("reader", scope="mcp")
    header, claims, _ = real.split(".")
    return [
        ("expired", auth.forge({**good, "exp": now - 5}), 401, "expired"),
        ("not yet valid", auth.forge({**good, "nbf": now + 600}), 401, "not valid yet"),
        ("wrong audience", auth.forge({**good, "aud": "http://127.0.0.1:1/mcp"}), 401, "another resource"),
        ("no audience", auth.forge({**good, "aud": None}), 401, "`aud`"),
        ("wrong issuer", auth.forge({**good, "iss": "http://127.0.0.1:1"}), 401, "another issuer"),
        ("bad signature", auth.forge(good, key=other_key), 401, "signature"),
        ("tampered claims", f"{header}.{b64({**json.loads(base64.urlsafe_b64decode(claims + '==')), 'client_id': 'writer'})}.{real.split('.')[2]}", 401, "signature"),
        ("unknown key id", auth.forge(good, header={"kid": "key-404"}), 401, "does not publish"),
        ("alg none", f"{b64({'alg': 'none', 'typ': 'JWT'})}.{b64({**good, 'iss': auth.url, 'exp': now + 300})}.", 401, "unsigned"),
        ("HS256 with the public key", hs256_with_public_key(auth, good), 401, "not accepted"),
        ("for another resource", protected.token("reader", resource="http://127.0.0.1:1/mcp", scope="mcp"), 401, "another resource"),
        ("insufficient scope", protected.token("noscope", scope="tools.read"), 403, "lacks the scope mcp"),
        ("garbage", "not-a-token", 401, "not a JWT"),
        ("huge", "a" * 20000, 401, "over 16 KiB"),
    ]


def hs256_with_public_key(auth, claims) -> str:
    """The algorithm-confusion forgery: an HMAC keyed with the issuer's
    public key, as a verifier that trusts the header's `alg` would accept."""
    import hashlib
    import hmac

    now = int(time.time())
    public = json.dumps(auth.key.as_dict(is_private=False)).encode()
    signing = f"{b64({'alg': 'HS256', 'kid': 'key-1'})}.{b64({**claims, 'iss': auth.url, 'exp': now + 300})}"
    mac = base64.urlsafe_b64encode(hmac.new(public, signing.encode(), hashlib.sha256).digest()).rstrip(b"=").decode()
    return f"{signing}.{mac}"


async def test_every_bad_token_is_refused_with_its_reason_and_never_logged(protected, auth, setup):
    cases = bad_tokens(protected, auth)
    for name, token, status, reason in cases:
        for body, headers in [(list_body(), list_headers()), (call_body(), modern_headers())]:
            got, response_headers, text = post(protected.url, body, {**headers, **bearer(token)})
            assert got == status, (name, got, text)
            assert reason in text, (name, text)
            challenge = response_headers["www-authenticate"]
            code = "insufficient_scope" if status == 403 else "invalid_token"
            assert f'error="{code}"' in challenge and "resource_metadata=" in challenge, (name, challenge)
    # A good token still works afterwards.
    ok = protected.token("reader", scope="mcp")
    got, _, text = post(protected.url, call_body(), {**modern_headers(), **bearer(ok)})
    assert got == 200 and '"isError":false' in text.replace(" ", ""), text
    protected.stop()
    logged = setup.stderr() + (protected.journal.read_text() if protected.journal.exists() else "")
    for name, token, _, _ in cases + [("good", ok, 0, "")]:
        signature = token.rsplit(".", 1)[-1] or token
        assert token not in logged and (len(signature) < 16 or signature not in logged), name


async def test_unknown_key_ids_refetch_the_keys_once_and_rotation_is_picked_up(setup, auth, tmp_path):
    protected = Protected(setup, auth, tmp_path, extra_oauth="jwks_min_refresh_secs = 1")
    try:
        good = {"aud": protected.url, "sub": "x", "client_id": "writer", "scope": "mcp"}
        await until(lambda: auth.jwks_hits == 1)
        # Let the start-up fetch age past the minimum interval, then flood.
        time.sleep(1.2)
        tokens = [auth.forge(good, header={"kid": f"made-up-{i}"}) for i in range(40)]
        with ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(lambda t: post(protected.url, list_body(), {**list_headers(), **bearer(t)}), tokens))
        assert all(status == 401 and "does not publish" in text for status, _, text in answers)
        assert auth.jwks_hits == 2, f"40 unknown key ids fetched the keys {auth.jwks_hits - 1} times"
        # A rotation: the new key is fetched when a token first names it.
        time.sleep(1.2)
        auth.rotate()
        rotated = protected.token("writer", scope="mcp")
        status, _, text = post(protected.url, list_body(), {**list_headers(), **bearer(rotated)})
        assert status == 200, text
        assert auth.jwks_hits == 3
    finally:
        protected.stop()


async def test_a_down_or_slow_key_endpoint_stops_only_tokens_without_a_cached_key(setup, auth, tmp_path):
    auth.jwks_down = True
    protected = Protected(setup, auth, tmp_path, extra_oauth="jwks_min_refresh_secs = 1\nfetch_timeout_ms = 20000")
    try:
        token = protected.token("writer", scope="mcp tools.write")
        # Never fetched: no token can be checked, and the answer says to retry.
        await until(lambda: auth.jwks_hits >= 1)
        status, headers, text = post(protected.url, list_body(), {**list_headers(), **bearer(token)})
        assert status == 503 and headers.get("retry-after"), (status, text)
        assert "retry" in text
        auth.jwks_down = False
        time.sleep(1.2)
        status, _, text = post(protected.url, list_body(), {**list_headers(), **bearer(token)})
        assert status == 200, text
        # Now slow: a token naming a new key waits for the refetch; one with
        # the cached key is answered while that refetch is still hanging.
        auth.jwks_delay = 8
        time.sleep(1.2)
        unknown = auth.forge({"aud": protected.url, "client_id": "writer", "scope": "mcp"}, header={"kid": "key-9"})
        hanging = {}
        waiting = threading.Thread(
            target=lambda: hanging.update(answer=post(protected.url, list_body(), {**list_headers(), **bearer(unknown)}))
        )
        hits = auth.jwks_hits
        waiting.start()
        await until(lambda: auth.jwks_hits == hits + 1)
        status, _, text = post(protected.url, call_body(), {**modern_headers(), **bearer(token)})
        assert status == 200 and "isError" in text, text
        assert "answer" not in hanging, "the cached-key call waited for the key fetch"
        waiting.join(timeout=60)
        assert hanging["answer"][0] == 401 and "does not publish" in hanging["answer"][2]
    finally:
        auth.jwks_delay = 0
        protected.stop()


async def test_a_session_belongs_to_the_caller_that_opened_it(protected):
    reader = bearer(protected.token("reader", scope="mcp"))
    writer = bearer(protected.token("writer", scope="mcp tools.write"))
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
    }
    status, headers, text = post(protected.url, initialize, reader)
    assert status == 200, text
    session_id = headers["mcp-session-id"]
    session = {"Mcp-Session-Id": session_id, "MCP-Protocol-Version": LEGACY}
    status, _, _ = post(protected.url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, {**reader, **session})
    assert status == 202
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    status, _, text = post(protected.url, listing, {**reader, **session})
    assert status == 200, text
    assert {t["name"] for t in message(text)["result"]["tools"]} == READER_TOOLS
    # Another caller with the same session id: as if it did not exist.
    status, _, text = post(protected.url, listing, {**writer, **session})
    assert status == 404, (status, text)
    status, _, _ = get(protected.url, {**writer, **session, "Accept": "text/event-stream"})
    assert status == 404


async def test_confirmation_state_is_bound_to_the_caller(protected):
    path = str(protected.data / "public" / "confirmed.txt")
    arguments = {"path": path, "content": "yes"}
    # Declares elicitation; the answers are given by hand below.
    async def never(_ctx, _params):
        raise AssertionError("the client is not asked directly in 2026-07-28")

    async with http_session(protected.url, MODERN, auth=protected.provider("writer"), elicitation_callback=never) as writer:
        first = await writer.call_tool("write_file", arguments, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult), first
        (key,) = first.input_requests
        answer = {key: {"action": "accept", "content": {"confirm": True}}}
        state = first.request_state
        async with http_session(
            protected.url, MODERN, auth=protected.provider("writer2"), elicitation_callback=never
        ) as other:
            with pytest.raises(MCPError) as stolen:
                await other.call_tool("write_file", arguments, input_responses=answer, request_state=state)
            assert stolen.value.code == types.INVALID_PARAMS and "requestState" in stolen.value.message
        assert not (protected.data / "public" / "confirmed.txt").exists()
        done = await writer.call_tool("write_file", arguments, input_responses=answer, request_state=state)
        assert not done.is_error, text_of(done)
    assert (protected.data / "public" / "confirmed.txt").read_text() == "yes"


async def test_a_caller_policy_narrows_the_hosts_a_tool_may_reach(setup, auth, tmp_path):
    with OpenMeteoServer() as echo:
        protected = Protected(setup, auth, tmp_path, echo=echo)
        try:
            async with http_session(protected.url, LEGACY, auth=protected.provider("writer")) as writer:
                allowed = await writer.call_tool("fetch", {"url": f"http://localhost:{echo.port}/echo"})
                assert not allowed.is_error, text_of(allowed)
                # In the tool's grant, not in the caller's entry.
                refused = await writer.call_tool("fetch", {"url": f"http://127.0.0.1:{echo.port}/echo"})
                assert refused.is_error and "`[[callers]]` entry `writers`" in text_of(refused), text_of(refused)
            assert [p for p in echo.paths()] == ["/echo"]
        finally:
            protected.stop()


def test_authorization_settings_are_checked_when_the_config_loads(setup, auth):
    setup.add("time")
    cases = [
        ('[[callers]]\nname = "x"\ntools = ["*"]\n', "callers"),
        (f'[http]\ntoken_env = "HOME"\n[http.oauth]\nresource = "https://a/mcp"\nissuer = "{auth.url}"\n', "conflicts"),
        ('[http.oauth]\nresource = "http://example.com/mcp"\nissuer = "https://as"\n', "https"),
        ('[http.oauth]\nresource = "https://a/mcp"\nissuer = "https://as"\nalgorithms = ["HS256"]\n', "symmetric"),
        ('[http.oauth]\nissuer = "https://as"\n', "resource"),
        (
            '[http.oauth]\nresource = "https://a/mcp"\nissuer = "https://as"\n'
            '[[callers]]\nname = "all"\ntools = ["*"]\n[[callers]]\nname = "late"\nclient_ids = ["x"]\ntools = []\n',
            "never apply",
        ),
    ]
    for config, expected in cases:
        setup.write_config(config)
        result = setup.run()
        assert result.returncode != 0 and expected in result.stderr, (config, result.stderr)


async def test_introspection_asks_the_authorization_server_about_every_token(setup, auth, tmp_path):
    auth.add_client("toolcage", "resource-server-secret", [])
    secret = tmp_path / "introspection-secret"
    secret.write_text("resource-server-secret\n")
    protected = Protected(
        setup,
        auth,
        tmp_path,
        extra_oauth=f'introspection_endpoint = "{auth.url}/introspect"\n'
        f'introspection_client_id = "toolcage"\nintrospection_secret_file = "{secret}"\n'
        "introspection_cache_secs = 0",
    )
    try:
        async with http_session(protected.url, MODERN, auth=protected.provider("reader")) as reader:
            assert {t.name for t in (await reader.list_tools()).tools} == READER_TOOLS
        assert auth.introspections >= 1 and auth.jwks_hits == 0
        token = protected.token("reader", scope="mcp")
        ok = post(protected.url, list_body(), {**list_headers(), **bearer(token)})
        assert ok[0] == 200, ok
        # Signed by the issuer's key but never issued: not active.
        forged = auth.forge({"aud": protected.url, "client_id": "reader", "scope": "mcp"})
        status, _, text = post(protected.url, list_body(), {**list_headers(), **bearer(forged)})
        assert status == 401 and "not active" in text, text
        other = protected.token("reader", resource="http://127.0.0.1:1/mcp", scope="mcp")
        status, _, text = post(protected.url, list_body(), {**list_headers(), **bearer(other)})
        assert status == 401 and "another resource" in text, text
        # Revoked at the authorization server: refused from the next request.
        auth.revoke(token)
        status, _, text = post(protected.url, list_body(), {**list_headers(), **bearer(token)})
        assert status == 401 and "not active" in text, text
        # The resource server's own credentials are wrong: nothing can be checked.
        auth.clients["toolcage"].client_secret = "changed"
        fresh = protected.token("reader", scope="mcp")
        status, _, text = post(protected.url, list_body(), {**list_headers(), **bearer(fresh)})
        assert status == 503, text
    finally:
        protected.stop()
    assert "resource-server-secret" not in setup.stderr()
