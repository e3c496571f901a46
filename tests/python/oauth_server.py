"""A real OAuth 2.1 authorization server on loopback, for the authorization
tests: authlib's AuthorizationServer (Flask) with the client-credentials
grant, issuing RFC 9068 JWT access tokens whose `aud` is the RFC 8707
`resource` the client asks for.

It also publishes its metadata (RFC 8414) and its keys (JWKS), counts how
often the keys are fetched, and can be made slow or down, so tests can see
what toolcage does when the issuer misbehaves.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field

# authlib refuses plain-http token endpoints unless told this is a test.
os.environ.setdefault("AUTHLIB_INSECURE_TRANSPORT", "1")

from authlib.integrations.flask_oauth2 import AuthorizationServer  # noqa: E402
import warnings  # noqa: E402

with warnings.catch_warnings():
    # authlib.jose is deprecated in favour of joserfc, and works.
    warnings.simplefilter("ignore")
    from authlib.jose import JsonWebKey, jwt  # noqa: E402
from authlib.oauth2.rfc6749 import ClientMixin, grants  # noqa: E402
from authlib.oauth2.rfc7662 import IntrospectionEndpoint  # noqa: E402
from authlib.oauth2.rfc9068 import JWTBearerTokenGenerator  # noqa: E402
from flask import Flask, Response, request  # noqa: E402
from werkzeug.serving import make_server  # noqa: E402


# One line per request would drown the test output.
logging.getLogger("werkzeug").setLevel(logging.ERROR)


@dataclass
class Client(ClientMixin):
    client_id: str
    client_secret: str
    scopes: list[str]

    def get_client_id(self):
        return self.client_id

    def get_default_redirect_uri(self):
        return None

    def get_allowed_scope(self, scope):
        if not scope:
            return " ".join(self.scopes)
        return " ".join(s for s in scope.split() if s in self.scopes)

    def check_redirect_uri(self, redirect_uri):
        return False

    def check_client_secret(self, client_secret):
        return client_secret == self.client_secret

    def check_endpoint_auth_method(self, method, endpoint):
        return method in ("client_secret_basic", "client_secret_post")

    def check_response_type(self, response_type):
        return False

    def check_grant_type(self, grant_type):
        return grant_type == "client_credentials"


def new_key(kid: str):
    return JsonWebKey.generate_key("RSA", 2048, is_private=True, options={"kid": kid})


@dataclass
class Issued:
    """An issued access token, as the introspection endpoint knows it."""

    claims: dict
    revoked: bool = False

    def is_expired(self):
        return self.claims["exp"] < time.time()

    def is_revoked(self):
        return self.revoked


@dataclass
class AuthServer:
    """The server, its clients and keys; `url` is its issuer."""

    clients: dict[str, Client] = field(default_factory=dict)
    jwks_hits: int = 0
    jwks_delay: float = 0.0
    jwks_down: bool = False
    lifetime: int = 300
    introspections: int = 0
    # Access tokens issued, by their text.
    issued: dict[str, Issued] = field(default_factory=dict)

    def __post_init__(self):
        self.key = new_key("key-1")
        # Published keys; the signing key is `self.key`.
        self.published = [self.key]
        self.app = Flask("oauth-test-server")
        self._routes()
        self.http = make_server("127.0.0.1", 0, self.app, threaded=True)
        self.url = f"http://127.0.0.1:{self.http.server_port}"
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)
        self.thread.start()

    def add_client(self, client_id: str, secret: str, scopes: list[str]) -> None:
        self.clients[client_id] = Client(client_id, secret, scopes)

    def _routes(self):
        server = self

        class Generator(JWTBearerTokenGenerator):
            def get_jwks(self):
                # A set, so authlib names the key (`kid`) in the header.
                return {"keys": [server.key.as_dict(is_private=True)]}

            def get_audiences(self, client, user, scope):
                # RFC 8707: the token is for the resource the client named.
                return request.form.get("resource") or "urn:no-resource"

        def save_token(token, req):
            text = token["access_token"]
            _, claims, _ = text.split(".")
            claims = json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4)))
            self.issued[text] = Issued(claims)

        authorization = AuthorizationServer(
            self.app,
            query_client=lambda client_id: self.clients.get(client_id),
            save_token=save_token,
        )

        class Introspection(IntrospectionEndpoint):
            CLIENT_AUTH_METHODS = ["client_secret_basic"]

            def query_token(self, token_string, token_type_hint):
                return server.issued.get(token_string)

            def check_permission(self, token, client, request):
                # Only the resource server may introspect.
                return client.client_id == "toolcage"

            def introspect_token(self, token):
                return {"active": True, "token_type": "Bearer", **token.claims}

        authorization.register_endpoint(Introspection)
        class ClientCredentials(grants.ClientCredentialsGrant):
            TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post"]

        authorization.register_grant(ClientCredentials)
        authorization.register_token_generator(
            "default",
            Generator(issuer=None, alg="RS256", expires_generator=lambda c, g: self.lifetime),
        )
        # The issuer is only known once the port is.
        self._generator_issuer = lambda: self.url
        self.generator = authorization._token_generators["default"]

        @self.app.get("/.well-known/oauth-authorization-server")
        def metadata():
            return {
                "issuer": self.url,
                # Required by RFC 8414 (and by the SDK's model); this server
                # has no interactive grant, so it only ever says so.
                "authorization_endpoint": f"{self.url}/authorize",
                "token_endpoint": f"{self.url}/token",
                "jwks_uri": f"{self.url}/jwks",
                "introspection_endpoint": f"{self.url}/introspect",
                "grant_types_supported": ["client_credentials"],
                "token_endpoint_auth_methods_supported": [
                    "client_secret_basic",
                    "client_secret_post",
                ],
                "response_types_supported": ["token"],
            }

        @self.app.get("/authorize")
        def authorize():
            return {"error": "unsupported_response_type"}, 400

        @self.app.get("/jwks")
        def jwks():
            self.jwks_hits += 1
            if self.jwks_delay:
                time.sleep(self.jwks_delay)
            if self.jwks_down:
                return Response("down", status=503)
            keys = [k.as_dict(is_private=False) for k in self.published]
            return Response(json.dumps({"keys": keys}), mimetype="application/json")

        @self.app.post("/introspect")
        def introspect():
            self.introspections += 1
            return authorization.create_endpoint_response("introspection")

        @self.app.post("/token")
        def token():
            self.generator.issuer = self.url
            return authorization.create_token_response()

    def issue(self, client_id: str, resource: str, scope: str | None = None) -> str:
        """An access token through the real token endpoint (client
        credentials, secret in the body)."""
        import urllib.parse
        import urllib.request

        client = self.clients[client_id]
        form = {
            "grant_type": "client_credentials",
            "client_id": client_id,
            "client_secret": client.client_secret,
            "resource": resource,
        }
        if scope is not None:
            form["scope"] = scope
        body = urllib.parse.urlencode(form).encode()
        with urllib.request.urlopen(f"{self.url}/token", data=body, timeout=30) as response:
            return json.loads(response.read())["access_token"]

    def forge(self, claims: dict, header: dict | None = None, key=None) -> str:
        """A token signed by `key` (the issuer's own by default) with
        exactly these claims: for the tests of what must be refused."""
        now = int(time.time())
        full = {"iss": self.url, "iat": now, "exp": now + 300, **claims}
        full = {k: v for k, v in full.items() if v is not None}
        key = key or self.key
        header = {"alg": "RS256", "kid": key.as_dict()["kid"], **(header or {})}
        # Without its `kid`, so authlib keeps the header's as given.
        material = {k: v for k, v in key.as_dict(is_private=True).items() if k != "kid"}
        return jwt.encode(header, full, material).decode()

    def revoke(self, token: str) -> None:
        self.issued[token].revoked = True

    def rotate(self) -> None:
        """Sign with a new key, published alongside the old one."""
        self.key = new_key(f"key-{len(self.published) + 1}")
        self.published.append(self.key)

    def stop(self) -> None:
        self.http.shutdown()
