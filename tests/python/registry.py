"""Real OCI registries on loopback, for the tests of `toolcage add oci://…`
and `toolcage publish`: the CNCF distribution registry 2.8 (Debian's
`docker-registry`, or $TOOLCAGE_REGISTRY_BIN), with no auth, with an
htpasswd file (Basic), or with token auth against a token server of our own
(the Docker registry token spec), plus the clients to fill them: the `oras`
client for the standard Wasm artifact layout and raw helpers for what a
well-behaved client would never push.

    from registry import oras_push, start_registry  # noqa: F401 (fixture)

    def test_pull(start_registry, tmp_path):
        registry = start_registry(auth="token")
        digest = oras_push(registry, "tools/time", "1.0", GUESTS / "time_tool.wasm")
        registry.token_server.requests.clear()
        ...  # toolcage add oci://{registry.host}/tools/time:1.0, then assert
             # on registry.token_server.requests

What the registry does (2.8.2, checked by test_registry_fixture.py):

- `GET /v2/` answers 200 without auth. Under htpasswd, anything without
  the right credentials is a 401 with `WWW-Authenticate: Basic
  realm="toolcage-test-registry"`. Under token auth, anything without a
  good token (Basic credentials included) is a 401 with `Bearer
  realm="http://127.0.0.1:PORT/token",service="toolcage-test-registry"`,
  plus `,scope="repository:NAME:pull"` on a repository (`pull,push` for an
  upload, in either order from one request to the next; `delete` for a
  DELETE), plus `,error="invalid_token"` for a token it rejects or
  `,error="insufficient_scope"` for one without the access.
- A manifest GET or HEAD must accept its media type *by name*: an OCI
  manifest asked for without `application/vnd.oci.image.manifest.v1+json`
  in Accept (`*/*` is not enough) is a 404 MANIFEST_UNKNOWN. The digest is
  the sha256 of the bytes as pushed, in `Docker-Content-Digest` (and Etag).
- Blobs come straight from filesystem storage, 200 with the body, never a
  redirect; Range requests get 206.
- It checks that a manifest's blobs exist, not that their sizes are right;
  it refuses a blob whose digest does not match its bytes (400
  DIGEST_INVALID), so a lying blob is made by `tamper_blob` on the storage.
- Tags cannot be deleted through the API (DELETE by tag is 400); deleting a
  manifest by digest drops every tag on it. `delete_tag` therefore removes
  the tag from the storage, as the registry's own tag service would.
"""

from __future__ import annotations

import atexit
import base64
import hashlib
import http.client
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import bcrypt
import pytest
import requests

REGISTRY_BIN = os.environ.get("TOOLCAGE_REGISTRY_BIN", "docker-registry")

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_MANIFEST_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
# Every manifest type, named: the registry hides one not named in Accept.
MANIFEST_TYPES = [OCI_MANIFEST, OCI_INDEX, DOCKER_MANIFEST, DOCKER_MANIFEST_LIST]
# The CNCF TAG Runtime Wasm OCI artifact layout.
WASM_CONFIG = "application/vnd.wasm.config.v0+json"
WASM_LAYER = "application/wasm"

SERVICE = "toolcage-test-registry"
ISSUER = "toolcage-test-issuer"
BASIC_REALM = "toolcage-test-registry"

START_TIMEOUT = 30.0


def sha256(data: bytes) -> str:
    """The OCI digest of `data`."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _session() -> requests.Session:
    session = requests.Session()
    # Loopback only: a proxy from the environment must not see these.
    session.trust_env = False
    return session


# --- The registry ----------------------------------------------------------



def _serve(handler) -> tuple[ThreadingHTTPServer, str]:
    """A threaded HTTP server for `handler` on a free 127.0.0.1 port, running
    on a daemon thread (polling every 50 ms, so shutdown is quick); it and
    its `host:port`."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    return server, f"127.0.0.1:{server.server_port}"


class Registry:
    """One `docker-registry serve` on a free 127.0.0.1 port, storing in its
    own folder under `tmp_path`. Start it with `Registry.start` (or the
    `start_registry` fixture, which also stops it); use it as a context
    manager or call `stop()`.

    - `auth`: None, "htpasswd" or "token".
    - `user`, `password`: the account created at start (auth modes only),
      which may pull, push and delete.
    - `token_server`: the `TokenServer` (token mode), with its request log
      and failure knobs.
    - `root`: the registry's folder (config.yml, registry.log, storage/).
    - `requests`: with `record=True`, every request that reached the
      registry (see `RecordingProxy`); None otherwise.
    """

    def __init__(self, root: Path, auth: str | None):
        self.root = root
        self.auth = auth
        self.storage = root / "storage"
        self.config_path = root / "config.yml"
        self.log_path = root / "registry.log"
        self.htpasswd_path = root / "htpasswd"
        self.user: str | None = None
        self.password: str | None = None
        self.token_server: TokenServer | None = None
        self.proxy: RecordingProxy | None = None
        self.requests: list[dict] | None = None
        self.proc: subprocess.Popen | None = None
        self.host = ""
        self.url = ""
        self._htpasswd: dict[str, str] = {}

    @classmethod
    def start(
        cls,
        tmp_path: Path,
        auth: str | None = None,
        *,
        anonymous_pull: bool = False,
        record: bool = False,
    ) -> Registry:
        """Start a registry and wait until `GET /v2/` answers (200, or 401
        under auth). `anonymous_pull` (token mode): the token server gives
        anonymous requests pull access; otherwise their tokens grant
        nothing, as for a private repository. `record`: put a
        `RecordingProxy` in front, so `host` and `url` are the proxy's and
        `requests` lists what clients sent the registry."""
        if auth not in (None, "htpasswd", "token"):
            raise ValueError(f"unknown auth mode `{auth}` (None, 'htpasswd' or 'token')")
        if anonymous_pull and auth != "token":
            raise ValueError("anonymous_pull only applies to auth='token'")
        tmp_path.mkdir(parents=True, exist_ok=True)
        registry = cls(Path(tempfile.mkdtemp(prefix="registry-", dir=tmp_path)), auth)
        try:
            registry._start(anonymous_pull, record)
        except BaseException:
            registry.stop()
            raise
        return registry

    def _start(self, anonymous_pull: bool, record: bool) -> None:
        auth_config = {}
        if self.auth is not None:
            self.user, self.password = "toolcage", secrets.token_urlsafe(12)
        if self.auth == "htpasswd":
            self.add_user(self.user, self.password)
            auth_config = {"htpasswd": {"realm": BASIC_REALM, "path": str(self.htpasswd_path)}}
        elif self.auth == "token":
            self.token_server = TokenServer(anonymous_pull=anonymous_pull)
            self.token_server.add_user(self.user, self.password, ("pull", "push", "delete"))
            bundle = self.root / "token-root.pem"
            bundle.write_bytes(self.token_server.root_certificate_pem())
            auth_config = {
                "token": {
                    "realm": self.token_server.realm,
                    "service": SERVICE,
                    "issuer": ISSUER,
                    "rootcertbundle": str(bundle),
                }
            }
        config = {
            "version": 0.1,
            "log": {"level": "info", "formatter": "text"},
            "storage": {
                "filesystem": {"rootdirectory": str(self.storage)},
                "delete": {"enabled": True},
                # A purge of uploads in progress is background work no test wants.
                "maintenance": {"uploadpurging": {"enabled": False}},
            },
            # Port 0: the registry logs the port it got, so no race for it.
            "http": {"addr": "127.0.0.1:0", "secret": secrets.token_hex(16)},
        }
        if auth_config:
            config["auth"] = auth_config
        # JSON is YAML, and quotes every path safely.
        self.config_path.write_text(json.dumps(config, indent=2))

        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(
                [REGISTRY_BIN, "serve", str(self.config_path)],
                stdin=subprocess.DEVNULL,
                # The access log goes to stdout, the rest to stderr.
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        except FileNotFoundError:
            raise RuntimeError(
                f"registry binary `{REGISTRY_BIN}` not found "
                "(apt-get install docker-registry, or set TOOLCAGE_REGISTRY_BIN)"
            ) from None
        finally:
            log.close()
        _running.add(self)

        deadline = time.monotonic() + START_TIMEOUT
        while True:
            match = re.search(r"listening on 127\.0\.0\.1:(\d+)", self.log())
            if match:
                break
            self._check_alive(deadline)
        self.host = f"127.0.0.1:{match.group(1)}"
        self.url = f"http://{self.host}"
        ready = 401 if self.auth else 200
        session = _session()
        while True:
            try:
                if session.get(f"{self.url}/v2/", timeout=5).status_code == ready:
                    break
            except requests.ConnectionError:
                pass
            self._check_alive(deadline)
        if record:
            self.proxy = RecordingProxy(self.host)
            self.requests = self.proxy.requests
            self.host, self.url = self.proxy.host, self.proxy.url

    def _check_alive(self, deadline: float) -> None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise RuntimeError(f"registry exited ({self.proc.returncode}): {self.log()[-3000:]}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"registry did not start: {self.log()[-3000:]}")
        time.sleep(0.02)

    def add_user(self, name: str, password: str, actions: tuple[str, ...] = ("pull", "push")) -> None:
        """Another account. htpasswd: the registry rereads the file when it
        changes, and any user may do anything. Token: the token server grants
        the user `actions` ("pull", "push", "delete") on every repository."""
        if self.auth == "htpasswd":
            if actions != ("pull", "push"):
                raise ValueError("htpasswd users cannot be limited: any user may pull and push")
            # Cost 4, the least bcrypt allows: these are test passwords.
            self._htpasswd[name] = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode()
            lines = "".join(f"{user}:{hashed}\n" for user, hashed in self._htpasswd.items())
            self.htpasswd_path.write_text(lines)
        elif self.auth == "token":
            assert self.token_server is not None
            self.token_server.add_user(name, password, actions)
        else:
            raise ValueError("a registry without auth has no users")

    def log(self) -> str:
        """The registry's log so far (for failure messages)."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        """Terminate the registry (kill it if it lingers) and the token server."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        if self.proxy is not None:
            self.proxy.stop()
        if self.token_server is not None:
            self.token_server.stop()
        _running.discard(self)

    def __enter__(self) -> Registry:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


class RecordingProxy:
    """A loopback HTTP proxy in front of one registry that records every
    request before passing it on: method, path, authorization (the scheme:
    "Basic", "Bearer", or None), status (the registry's answer). It passes
    the Host header through, so the registry's Location headers name the
    proxy and clients stay on it."""

    # Per connection, not per request; the proxy's own HTTP handles them
    # (and answers `Expect: 100-continue` itself).
    HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "te", "upgrade", "expect"}

    def __init__(self, upstream: str):
        self.upstream = upstream
        self.answer = None
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def handle_one_request(self):
                # Every method alike: there is no do_* per verb to write.
                self.raw_requestline = self.rfile.readline(65537)
                if not self.raw_requestline:
                    self.close_connection = True
                    return
                if self.parse_request():
                    proxy._forward(self)
                    self.wfile.flush()

            def log_message(self, *args):
                pass

        self.http, self.host = _serve(Handler)
        self.url = f"http://{self.host}"

    def _forward(self, handler: BaseHTTPRequestHandler) -> None:
        if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = b""
            while size := int(handler.rfile.readline().split(b";")[0], 16):
                body += handler.rfile.read(size)
                handler.rfile.readline()
            while handler.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass
        else:
            body = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        authorization = handler.headers.get("Authorization")
        record = {
            "method": handler.command,
            "path": handler.path,
            "authorization": authorization.partition(" ")[0] if authorization else None,
            "status": None,
        }
        with self._lock:
            self.requests.append(record)
        answer = self.answer(handler.command, handler.path) if self.answer else None
        if answer is not None:
            status, headers, data = answer
            record["status"] = status
            handler.send_response_only(status)
            for name, value in headers.items():
                handler.send_header(name, value)
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            if handler.command != "HEAD":
                handler.wfile.write(data)
            return
        upstream = http.client.HTTPConnection(self.upstream, timeout=60)
        try:
            upstream.putrequest(handler.command, handler.path, skip_host=True, skip_accept_encoding=True)
            for name, value in handler.headers.items():
                if name.lower() not in self.HOP_BY_HOP:
                    upstream.putheader(name, value)
            if body or handler.command in ("PUT", "POST", "PATCH"):
                upstream.putheader("Content-Length", str(len(body)))
            upstream.endheaders(body or None)
            response = upstream.getresponse()
            data = response.read()
        finally:
            upstream.close()
        record["status"] = response.status
        handler.send_response_only(response.status)
        for name, value in response.getheaders():
            if name.lower() not in self.HOP_BY_HOP:
                handler.send_header(name, value)
        # A HEAD's Content-Length is the length the GET would have.
        length = response.getheader("Content-Length") if handler.command == "HEAD" else None
        handler.send_header("Content-Length", length or str(len(data)))
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(data)

    def stop(self) -> None:
        self.http.shutdown()
        self.http.server_close()


# Every registry not yet stopped: an interrupted run skips fixture teardown,
# and a registry must not outlive the tests.
_running: set[Registry] = set()


@atexit.register
def _stop_all() -> None:
    for registry in list(_running):
        registry.stop()


@pytest.fixture
def start_registry(tmp_path):
    """`start_registry(auth=None, anonymous_pull=False, record=False) ->
    Registry`; every registry started is stopped when the test ends, failed
    or not."""
    started: list[Registry] = []

    def start(auth: str | None = None, **kwargs) -> Registry:
        registry = Registry.start(tmp_path, auth, **kwargs)
        started.append(registry)
        return registry

    yield start
    for registry in started:
        registry.stop()


# --- The token server ------------------------------------------------------


@dataclass(frozen=True)
class SigningIdentity:
    """An RSA key and its self-signed certificate."""

    key: object
    certificate: object

    def der_b64(self) -> str:
        from cryptography.hazmat.primitives.serialization import Encoding

        return base64.b64encode(self.certificate.public_bytes(Encoding.DER)).decode()

    def sign(self, data: bytes) -> bytes:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        return self.key.sign(data, padding.PKCS1v15(), hashes.SHA256())


@lru_cache(maxsize=None)
def signing_identity(name: str) -> SigningIdentity:
    """One identity per name for the whole run: RSA keys are slow to make.
    "issuer" is the one registries trust; any other name is a stranger."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"toolcage test {name}")])
    now = datetime.now(timezone.utc)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return SigningIdentity(key, certificate)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def decode_jwt(token: str) -> tuple[dict, dict]:
    """A JWT's header and claims, unverified (for assertions)."""
    header, claims, _ = token.split(".")
    pad = lambda part: part + "=" * (-len(part) % 4)  # noqa: E731
    return (
        json.loads(base64.urlsafe_b64decode(pad(header))),
        json.loads(base64.urlsafe_b64decode(pad(claims))),
    )


def parse_scope(scope: str) -> tuple[str, str, list[str]] | None:
    """`repository:tools/time:pull,push` -> ("repository", "tools/time",
    ["pull", "push"]); None if it is not of that form."""
    kind, sep, rest = scope.partition(":")
    name, sep2, actions = rest.rpartition(":")
    if not sep or not sep2 or not kind or not name:
        return None
    return kind, name, [action for action in actions.split(",") if action]


# What `defect` does to an issued token; the registry refuses each one.
DEFECTS = {
    "signature": "signed by another key, naming the trusted certificate",
    "untrusted": "signed by another key, with that key's own certificate",
    "issuer": "an `iss` the registry does not trust",
    "audience": "an `aud` other than the registry's service",
    "expired": "expired an hour ago (beyond the registry's 60 s leeway)",
    "malformed": "not a JWT at all",
}


@dataclass
class TokenServer:
    """The Docker registry token spec's authorization server, on loopback:
    `GET /token?service=…&scope=repository:NAME:ACTIONS` with optional Basic
    credentials, answering `{"token", "access_token", "expires_in",
    "issued_at"}`. The JWT is RS256 with the signing certificate in `x5c`
    (the registry verifies it against its rootcertbundle, which is that same
    self-signed certificate); claims iss, sub, aud, exp, nbf, iat, jti and
    access. It grants what was asked, less what the account may not do;
    anonymous requests get no access unless `anonymous_pull`. Wrong
    credentials are a 401.

    Knobs for hostile tests, settable at any time:
    - `status`: answer every request with this HTTP status (e.g. 500) and a
      JSON error body.
    - `body`: answer 200 with these bytes instead of a token response.
    - `defect`: issue tokens the registry rejects (one of DEFECTS).
    - `expires_in`: the lifetime to claim and set in `exp`.

    `requests` records every request, as a dict: method, path, query (dict
    of lists), authorization (bool), scheme ("Basic", "Bearer", or None),
    user (the account, if the credentials were right), status, and
    granted (the `access` claim issued, if any).
    """

    anonymous_pull: bool = False
    status: int | None = None
    body: bytes | None = None
    defect: str | None = None
    expires_in: int = 300
    requests: list[dict] = field(default_factory=list)
    users: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)

    def __post_init__(self):
        self.identity = signing_identity("issuer")
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                server._handle(self)

            def do_POST(self):
                # The OAuth2 password/refresh flow is not offered; clients
                # fall back to GET on 404/405.
                server._handle(self)

            def log_message(self, *args):
                pass

        self.http, host = _serve(Handler)
        self.url = f"http://{host}"
        self.realm = f"{self.url}/token"

    def add_user(self, name: str, password: str, actions: tuple[str, ...] = ("pull", "push")) -> None:
        self.users[name] = (password, tuple(actions))

    def root_certificate_pem(self) -> bytes:
        from cryptography.hazmat.primitives.serialization import Encoding

        return self.identity.certificate.public_bytes(Encoding.PEM)

    def mint(self, subject: str, access: list[dict], *, defect: str | None = None) -> str:
        """A signed token for `subject` granting `access` ([{type, name,
        actions}]); `defect` spoils it as DEFECTS says."""
        if defect is not None and defect not in DEFECTS:
            raise ValueError(f"unknown defect `{defect}` (one of {', '.join(DEFECTS)})")
        if defect == "malformed":
            return "not-a-jwt"
        now = int(time.time())
        claims = {
            "iss": "someone-else" if defect == "issuer" else ISSUER,
            "sub": subject,
            # A string: registry 2.8 cannot parse an array here.
            "aud": "another-service" if defect == "audience" else SERVICE,
            "exp": now - 3600 if defect == "expired" else now + self.expires_in,
            "nbf": now - 3600 - 10 if defect == "expired" else now - 10,
            "iat": now - 3600 - 10 if defect == "expired" else now,
            "jti": secrets.token_hex(16),
            "access": access,
        }
        named = signing_identity("stranger") if defect == "untrusted" else self.identity
        signer = signing_identity("stranger") if defect in ("signature", "untrusted") else self.identity
        header = {"typ": "JWT", "alg": "RS256", "x5c": [named.der_b64()]}
        signing_input = f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
        return f"{signing_input}.{_b64url(signer.sign(signing_input.encode()))}"

    def check(self, user: str, password: str) -> bool:
        """Whether `user`/`password` is one of the accounts."""
        known = self.users.get(user)
        return known is not None and secrets.compare_digest(known[0], password)

    def issue(self, user: str | None, scopes: list[str], defect: str | None = None) -> tuple[str, list[dict]]:
        """A token for `user` (None: anonymous) and the access it grants:
        what `scopes` ask for, less what the account may not do."""
        if user is not None:
            allowed = set(self.users[user][1])
        else:
            allowed = {"pull"} if self.anonymous_pull else set()
        access = []
        for scope in scopes:
            for part in scope.split():
                parsed = parse_scope(part)
                if parsed is None or parsed[0] != "repository":
                    continue
                kind, name, actions = parsed
                access.append({"type": kind, "name": name, "actions": [a for a in actions if a in allowed]})
        return self.mint(user or "", access, defect=defect), access

    def _authenticate(self, authorization: str | None) -> tuple[str | None, bool]:
        """(user, ok): no credentials is (None, True)."""
        if not authorization:
            return None, True
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() != "basic":
            return None, False
        try:
            user, _, password = base64.b64decode(value).decode().partition(":")
        except ValueError:
            return None, False
        return (user, True) if self.check(user, password) else (None, False)

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        url = urllib.parse.urlsplit(handler.path)
        query = urllib.parse.parse_qs(url.query)
        authorization = handler.headers.get("Authorization")
        length = int(handler.headers.get("Content-Length") or 0)
        if length:
            handler.rfile.read(length)
        record = {
            "method": handler.command,
            "path": handler.path,
            "query": query,
            "authorization": authorization is not None,
            "scheme": authorization.partition(" ")[0] if authorization else None,
            "user": None,
            "status": None,
            "granted": None,
        }
        user, ok = self._authenticate(authorization)
        record["user"] = user
        if self.status is not None:
            status, body, headers = self.status, {"errors": [{"code": "UNAVAILABLE"}]}, {}
        elif handler.command != "GET" or url.path != "/token":
            status, body, headers = 404, {"errors": [{"code": "NOT_FOUND"}]}, {}
        elif not ok:
            status, body = 401, {"errors": [{"code": "UNAUTHORIZED", "message": "wrong credentials"}]}
            headers = {"WWW-Authenticate": 'Basic realm="toolcage-test-token"'}
        elif self.body is not None:
            status, body, headers = 200, self.body, {}
        else:
            token, access = self.issue(user, query.get("scope", []), self.defect)
            record["granted"] = access
            issued = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            status, headers = 200, {}
            body = {"token": token, "access_token": token, "expires_in": self.expires_in, "issued_at": issued}
        record["status"] = status
        with self._lock:
            self.requests.append(record)
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(data)

    def stop(self) -> None:
        self.http.shutdown()
        self.http.server_close()


# --- Raw registry helpers --------------------------------------------------


class RegistryClient:
    """Plain HTTP to a registry, authenticated the way the registry asks:
    Basic credentials up front under htpasswd; under token auth, a 401's
    challenge is answered with a token the fixture's token server issues
    in-process, by its own rules (accounts, actions, anonymous_pull), for
    the scope challenged. In-process, so that setting up content is neither
    recorded in `token_server.requests` nor hit by its failure knobs.

    `username`/`password` default to the registry's own account;
    `anonymous=True` sends no credentials (under token auth: asks for an
    anonymous token). Bodies must be bytes: a challenged request is sent
    again.
    """

    def __init__(self, registry: Registry, username=None, password=None, anonymous: bool = False):
        self.registry = registry
        self.session = _session()
        self.anonymous = anonymous
        self.username = username if username is not None else registry.user
        self.password = password if password is not None else registry.password

    def request(self, method: str, path_or_url: str, **kwargs) -> requests.Response:
        url = path_or_url if "://" in path_or_url else f"{self.registry.url}{path_or_url}"
        headers = dict(kwargs.pop("headers", None) or {})
        kwargs.setdefault("timeout", 30)
        kwargs.setdefault("allow_redirects", False)
        if self.registry.auth == "htpasswd" and not self.anonymous:
            kwargs["auth"] = (self.username, self.password)
        response = self.session.request(method, url, headers=headers, **kwargs)
        challenge = response.headers.get("WWW-Authenticate", "")
        if response.status_code != 401 or not challenge.startswith("Bearer "):
            return response
        token_server = self.registry.token_server
        assert token_server is not None
        if self.anonymous:
            user = None
        elif token_server.check(self.username, self.password):
            user = self.username
        else:
            # The token server would refuse these: the registry's 401 stands.
            return response
        token, _ = token_server.issue(user, [_challenge_params(challenge).get("scope", "")])
        headers["Authorization"] = f"Bearer {token}"
        return self.session.request(method, url, headers=headers, **kwargs)


def _challenge_params(challenge: str) -> dict[str, str]:
    return dict(re.findall(r'(\w+)="([^"]*)"', challenge))


def _client(registry, username=None, password=None, anonymous=False) -> RegistryClient:
    return RegistryClient(registry, username, password, anonymous)


def _expect(response: requests.Response, *statuses: int) -> requests.Response:
    if response.status_code not in statuses:
        raise AssertionError(
            f"{response.request.method} {response.url}: {response.status_code} {response.text[:500]}"
        )
    return response


def put_blob(registry: Registry, repo: str, data: bytes, **credentials) -> str:
    """Upload `data` as a blob (monolithic POST then PUT); its digest."""
    client = _client(registry, **credentials)
    started = _expect(client.request("POST", f"/v2/{repo}/blobs/uploads/"), 202)
    location = urllib.parse.urljoin(registry.url, started.headers["Location"])
    digest = sha256(data)
    sep = "&" if "?" in location else "?"
    _expect(
        client.request(
            "PUT",
            f"{location}{sep}digest={digest}",
            data=data,
            headers={"Content-Type": "application/octet-stream"},
        ),
        201,
    )
    return digest


def put_manifest(
    registry: Registry,
    repo: str,
    reference: str,
    manifest: bytes | dict,
    media_type: str = OCI_MANIFEST,
    **credentials,
) -> str:
    """PUT a manifest (bytes as they are; a dict as compact JSON) under a
    tag or digest; the digest the registry reports."""
    data = manifest if isinstance(manifest, bytes) else json.dumps(manifest).encode()
    response = _client(registry, **credentials).request(
        "PUT", f"/v2/{repo}/manifests/{reference}", data=data, headers={"Content-Type": media_type}
    )
    return _expect(response, 201).headers["Docker-Content-Digest"]


def manifest_digest(registry: Registry, repo: str, reference: str, **credentials) -> str:
    """`Docker-Content-Digest` of a HEAD of the manifest, any media type."""
    response = _client(registry, **credentials).request(
        "HEAD", f"/v2/{repo}/manifests/{reference}", headers={"Accept": ", ".join(MANIFEST_TYPES)}
    )
    return _expect(response, 200).headers["Docker-Content-Digest"]


def get_manifest(registry: Registry, repo: str, reference: str, **credentials) -> tuple[bytes, str]:
    """A manifest's bytes and its Content-Type."""
    response = _client(registry, **credentials).request(
        "GET", f"/v2/{repo}/manifests/{reference}", headers={"Accept": ", ".join(MANIFEST_TYPES)}
    )
    _expect(response, 200)
    return response.content, response.headers["Content-Type"]


def get_blob(registry: Registry, repo: str, digest: str, **credentials) -> bytes:
    """A blob's bytes, as the registry serves them."""
    response = _client(registry, **credentials).request("GET", f"/v2/{repo}/blobs/{digest}")
    return _expect(response, 200).content


def retag(registry: Registry, repo: str, source: str, tag: str, **credentials) -> str:
    """Push the manifest at `source` (tag or digest) again under `tag`; the
    digest (the same: the bytes are the same)."""
    data, media_type = get_manifest(registry, repo, source, **credentials)
    return put_manifest(registry, repo, tag, data, media_type, **credentials)


def delete_manifest(registry: Registry, repo: str, digest: str, **credentials) -> None:
    """DELETE a manifest by digest: every tag on it goes with it."""
    _expect(_client(registry, **credentials).request("DELETE", f"/v2/{repo}/manifests/{digest}"), 202)


def _repository_dir(registry: Registry, repo: str) -> Path:
    return registry.storage / "docker/registry/v2/repositories" / repo


def delete_tag(registry: Registry, repo: str, tag: str) -> None:
    """Remove one tag, leaving the manifest and other tags. Registry 2.8
    has no API for this, so it is done on the storage, which the registry
    reads on every request."""
    path = _repository_dir(registry, repo) / "_manifests/tags" / tag
    if not path.is_dir():
        raise FileNotFoundError(f"no tag `{tag}` in `{repo}`")
    shutil.rmtree(path)


def tamper_blob(registry: Registry, digest: str, data: bytes) -> None:
    """Replace a stored blob's bytes: the registry then serves `data` under
    `digest` (and the new length as Content-Length), which it would never
    accept in an upload."""
    algorithm, hexdigest = digest.split(":")
    path = registry.storage / "docker/registry/v2/blobs" / algorithm / hexdigest[:2] / hexdigest / "data"
    if not path.is_file():
        raise FileNotFoundError(f"no blob `{digest}` in the storage")
    path.write_bytes(data)


def descriptor(media_type: str, data: bytes, **extra) -> dict:
    """An OCI descriptor for `data` (extra fields, e.g. annotations or a
    lying size, as keyword arguments)."""
    return {"mediaType": media_type, "digest": sha256(data), "size": len(data), **extra}


def image_manifest(config: dict, layers: list[dict], **extra) -> bytes:
    """An OCI image manifest, as the bytes to push."""
    manifest = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": config, "layers": layers, **extra}
    return json.dumps(manifest).encode()


def image_index(manifests: list[dict], **extra) -> bytes:
    """An OCI image index over `manifests` (descriptors), as bytes."""
    return json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": manifests, **extra}).encode()


def push_wasm_raw(registry: Registry, repo: str, tag: str, wasm: bytes, **credentials) -> str:
    """The standard Wasm artifact, pushed with the raw helpers; its digest."""
    config = wasm_config(wasm)
    put_blob(registry, repo, wasm, **credentials)
    put_blob(registry, repo, config, **credentials)
    manifest = image_manifest(descriptor(WASM_CONFIG, config), [descriptor(WASM_LAYER, wasm)])
    return put_manifest(registry, repo, tag, manifest, **credentials)


# --- The Wasm artifact config ----------------------------------------------


def wasm_config(wasm: bytes, created: str | None = None) -> bytes:
    """The config blob of the CNCF Wasm OCI artifact layout
    (application/vnd.wasm.config.v0+json): created, architecture "wasm",
    os "wasip2" for a component ("wasip1" otherwise), layerDigests, and for
    a component its top-level import and export names."""
    config: dict = {
        "created": created or datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "architecture": "wasm",
        "os": "wasip1",
        "layerDigests": [sha256(wasm)],
    }
    if is_component(wasm):
        imports, exports = component_names(wasm)
        config["os"] = "wasip2"
        config["component"] = {"exports": exports, "imports": imports}
    return json.dumps(config).encode()


def is_component(wasm: bytes) -> bool:
    """The component preamble: magic, version 0x0d, layer 1."""
    return wasm[:8] == b"\0asm\x0d\x00\x01\x00"


def component_names(wasm: bytes) -> tuple[list[str], list[str]]:
    """The names of a component's top-level imports and exports (e.g.
    `wasi:cli/environment@0.2.3`), read from its import (10) and export (11)
    sections; nested components and modules are skipped whole."""
    reader = _Reader(wasm, 8)
    imports: list[str] = []
    exports: list[str] = []
    while not reader.done():
        section_id = reader.byte()
        end = reader.u32() + reader.pos
        if section_id == 10:
            for _ in range(reader.u32()):
                imports.append(reader.extern_name())
                reader.extern_desc()
        elif section_id == 11:
            for _ in range(reader.u32()):
                exports.append(reader.extern_name())
                reader.sort()
                reader.u32()
                if reader.byte() == 0x01:
                    reader.extern_desc()
        reader.pos = end
    dedup = lambda names: list(dict.fromkeys(names))  # noqa: E731
    return dedup(imports), dedup(exports)


class _Reader:
    """Just enough of the component binary format for `component_names`
    (grammar as in wasmparser's readers/component)."""

    def __init__(self, data: bytes, pos: int):
        self.data, self.pos = data, pos

    def done(self) -> bool:
        return self.pos >= len(self.data)

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise ValueError("component ends early")
        self.pos += 1
        return self.data[self.pos - 1]

    def u32(self) -> int:
        result = shift = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return result

    def string(self) -> str:
        length = self.u32()
        self.pos += length
        return self.data[self.pos - length : self.pos].decode()

    def extern_name(self) -> str:
        kind = self.byte()
        if kind not in (0x00, 0x01, 0x02):
            raise ValueError(f"unknown component name kind 0x{kind:02x}")
        name = self.string()
        implements = suffix = None
        if kind == 0x02:
            for _ in range(self.u32()):
                option, value = self.byte(), self.string()
                if option == 0x00:
                    implements = value
                elif option == 0x01:
                    suffix = value
        return name + suffix if suffix and not implements else name

    def sort(self) -> int:
        sort = self.byte()
        if sort == 0x00:
            self.byte()
        return sort

    def extern_desc(self) -> None:
        sort = self.sort()
        if sort == 0x02:
            # A value type: a primitive is one byte in 0x40..0x7f (negative
            # as an s33); anything else is a type index.
            if not 0x40 <= self.data[self.pos] < 0x80:
                self.u32()
            else:
                self.byte()
        elif sort == 0x03:
            if self.byte() == 0x00:
                self.u32()
        elif sort in (0x00, 0x01, 0x04, 0x05):
            self.u32()
        else:
            raise ValueError(f"unknown extern kind 0x{sort:02x}")


# --- oras ------------------------------------------------------------------


def _oras(registry: Registry, username=None, password=None, anonymous: bool = False):
    """An oras client for `registry`: plain http, no retries, no Docker
    config of the machine's, credentials as given."""
    import oras.provider

    class Client(oras.provider.Registry):
        def do_request(self, url, method="GET", data=None, headers=None, json=None, stream=False):
            # oras' own do_request retries every failure with sleeps of
            # minutes, and reuses a token whose scope is too narrow for the
            # next request (registries answer that with 401, not 403): one
            # fresh authentication per 401 instead.
            headers = dict(headers or {})
            if getattr(self.auth, "token", None):
                headers.update(self.auth.get_auth_header())
            send = lambda: self.session.request(  # noqa: E731
                method, url, data=data, json=json, headers=headers, stream=stream, timeout=30
            )
            response = send()
            # Anonymous still follows a Bearer challenge: for an anonymous token.
            if response.status_code != 401 or (anonymous and registry.auth != "token"):
                return response
            headers, changed = self.auth.authenticate_request(response, headers, refresh=True)
            return send() if changed else response

    backend = "token" if registry.auth == "token" else "basic"
    client = Client(hostname=registry.host, insecure=True, auth_backend=backend)
    client.session.trust_env = False
    # Non-empty, so oras does not read ~/.docker/config.json.
    client.auth._auth_config = {"auths": {}}
    if registry.auth is not None and not anonymous:
        client.auth.set_basic_auth(username or registry.user, password or registry.password)
    return client


def oras_push(
    registry: Registry,
    repo: str,
    tag: str,
    wasm_path: Path,
    username: str | None = None,
    password: str | None = None,
    *,
    anonymous: bool = False,
    config: bytes | None = None,
    annotations: dict | None = None,
) -> str:
    """Push `wasm_path` with the oras client in the Wasm artifact layout
    (one application/wasm layer titled with the file name, config
    application/vnd.wasm.config.v0+json: `wasm_config`, or `config`); the
    manifest digest the registry reports. Credentials default to the
    registry's account; a refusal raises."""
    wasm_path = Path(wasm_path)
    with tempfile.TemporaryDirectory() as scratch:
        config_path = Path(scratch) / "config.json"
        config_path.write_bytes(config if config is not None else wasm_config(wasm_path.read_bytes()))
        client = _oras(registry, username, password, anonymous)
        client.push(
            target=f"{registry.host}/{repo}:{tag}",
            files=[f"{wasm_path}:{WASM_LAYER}"],
            manifest_config=f"{config_path}:{WASM_CONFIG}",
            manifest_annotations=annotations,
            disable_path_validation=True,
            quiet=True,
        )
    return manifest_digest(registry, repo, tag, username=username, password=password)


def oras_pull(
    registry: Registry,
    repo: str,
    reference: str,
    out_dir: Path,
    username: str | None = None,
    password: str | None = None,
    *,
    anonymous: bool = False,
) -> list[Path]:
    """Pull a tag or digest with the oras client into `out_dir`; the files
    it wrote (one per layer, named by its title annotation)."""
    client = _oras(registry, username, password, anonymous)
    separator = "@" if reference.startswith("sha256:") else ":"
    files = client.pull(target=f"{registry.host}/{repo}{separator}{reference}", outdir=str(out_dir))
    return [Path(path) for path in files]


# --- A static file server --------------------------------------------------


@dataclass
class Route:
    """How the static server answers one path (see `StaticServer.route`)."""

    status: int | None = None
    redirect: str | None = None
    redirect_status: int = 302
    truncate: int | None = None
    delay: float = 0.0
    trickle: float = 0.0


class StaticServer:
    """A threaded http.server on 127.0.0.1 serving the files in `directory`
    (GET and HEAD), for tool sources given by URL. `route(path, …)` makes
    one path misbehave. `requests` records every request: method, path,
    host (the Host header), authorization (bool), headers."""

    CHUNK = 1024

    def __init__(self, directory: Path):
        self.directory = Path(directory).resolve()
        self.routes: dict[str, Route] = {}
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                server._handle(self, body=True)

            def do_HEAD(self):
                server._handle(self, body=False)

            def log_message(self, *args):
                pass

        self.http, self.host = _serve(Handler)
        self.url = f"http://{self.host}"

    def route(
        self,
        path: str,
        *,
        status: int | None = None,
        redirect: str | None = None,
        redirect_status: int = 302,
        truncate: int | None = None,
        delay: float = 0.0,
        trickle: float = 0.0,
    ) -> None:
        """Make `path` (e.g. "/tool.wasm") misbehave:
        - `status`: answer it (e.g. 500) with a short text body;
        - `redirect`: answer `redirect_status` with Location: `redirect`
          (any URL: another host or port);
        - `truncate`: declare the full Content-Length, send only this many
          bytes, then close the connection;
        - `delay`: wait this long before the status line;
        - `trickle`: wait this long before each 1 KiB of the body."""
        self.routes[path] = Route(status, redirect, redirect_status, truncate, delay, trickle)

    def _handle(self, handler: BaseHTTPRequestHandler, body: bool) -> None:
        path = urllib.parse.urlsplit(handler.path).path
        with self._lock:
            self.requests.append(
                {
                    "method": handler.command,
                    "path": handler.path,
                    "host": handler.headers.get("Host"),
                    "authorization": "Authorization" in handler.headers,
                    "headers": list(handler.headers.items()),
                }
            )
        route = self.routes.get(path, Route())
        if route.delay:
            time.sleep(route.delay)
        if route.redirect is not None:
            return self._reply(handler, route.redirect_status, b"", {"Location": route.redirect}, body)
        if route.status is not None:
            return self._reply(handler, route.status, f"status {route.status}\n".encode(), {}, body)
        file = (self.directory / path.lstrip("/")).resolve()
        if not file.is_relative_to(self.directory) or not file.is_file():
            return self._reply(handler, 404, b"not found\n", {}, body)
        data = file.read_bytes()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/octet-stream")
        handler.send_header("Content-Length", str(len(data)))
        if route.truncate is not None:
            handler.send_header("Connection", "close")
        handler.end_headers()
        if not body:
            return
        sent = data if route.truncate is None else data[: route.truncate]
        for start in range(0, len(sent), self.CHUNK):
            if route.trickle:
                time.sleep(route.trickle)
            try:
                handler.wfile.write(sent[start : start + self.CHUNK])
                handler.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                return
        if route.truncate is not None:
            handler.close_connection = True
            handler.connection.shutdown(socket.SHUT_RDWR)

    @staticmethod
    def _reply(handler, status: int, data: bytes, headers: dict, body: bool) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", "text/plain")
        handler.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.end_headers()
        if body:
            handler.wfile.write(data)

    def stop(self) -> None:
        self.http.shutdown()
        self.http.server_close()

    def __enter__(self) -> StaticServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def static_server(directory: Path) -> StaticServer:
    """A started `StaticServer` for `directory` (stop it, or use `with`)."""
    return StaticServer(directory)


@pytest.fixture
def start_static():
    """`start_static(directory) -> StaticServer`, stopped when the test ends."""
    started: list[StaticServer] = []

    def start(directory: Path) -> StaticServer:
        server = static_server(directory)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
