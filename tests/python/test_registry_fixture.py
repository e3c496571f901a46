"""The registry fixture itself, without toolcage: each auth mode starts and
challenges as the real registry does, the oras client round-trips a Wasm
artifact in the standard layout, the accounts and the token server grant
and refuse what they should, the raw helpers make what they say, and the
static server misbehaves on cue. The OCI install tests rely on each of
these facts."""

from __future__ import annotations

import http.client
import json
import time

import pytest
import requests

from conftest import GUEST_FILES, GUESTS, leb128, wasm_section
from registry import (  # noqa: F401 (fixtures)
    BASIC_REALM,
    DEFECTS,
    OCI_INDEX,
    OCI_MANIFEST,
    SERVICE,
    WASM_CONFIG,
    WASM_LAYER,
    RegistryClient,
    component_names,
    decode_jwt,
    delete_manifest,
    delete_tag,
    descriptor,
    get_blob,
    get_manifest,
    image_index,
    image_manifest,
    manifest_digest,
    oras_pull,
    oras_push,
    parse_scope,
    put_blob,
    put_manifest,
    push_wasm_raw,
    retag,
    sha256,
    start_registry,
    start_static,
    tamper_blob,
    wasm_config,
)

AUTH_MODES = [None, "htpasswd", "token"]


def component(imports: list[str], exports: list[str]) -> bytes:
    """A component binary with only import and export sections: enough for
    the name reader and for the registry, which never looks inside."""

    def name(text: str) -> bytes:
        return b"\x00" + leb128(len(text)) + text.encode()

    def section(section_id: int, entries: list[bytes]) -> bytes:
        return wasm_section(section_id, leb128(len(entries)) + b"".join(entries))

    # Imports: an instance of type 0; exports: instance 0, no type ascribed.
    import_entries = [name(n) + b"\x05\x00" for n in imports]
    export_entries = [name(n) + b"\x05\x00\x00" for n in exports]
    return b"\0asm\x0d\x00\x01\x00" + section(10, import_entries) + section(11, export_entries)


WASM = component(["wasi:cli/stdout@0.2.3", "toolcage:tool/types@0.1.0"], ["toolcage:tool/tool@0.1.0"])


@pytest.fixture
def wasm_path(tmp_path):
    path = tmp_path / "tool.wasm"
    path.write_bytes(WASM)
    return path


def plain() -> requests.Session:
    """A session that ignores proxy settings: everything here is loopback."""
    session = requests.Session()
    session.trust_env = False
    return session


def asked(records: list[dict]) -> list[tuple[str, set[str]]]:
    """The (repository, actions) the token requests asked for: the registry
    names the actions of a challenge in no fixed order."""
    scopes = [parse_scope(scope) for r in records for scope in r["query"].get("scope", [])]
    return [(name, set(actions)) for _, name, actions in filter(None, scopes)]


def v2(registry, **kwargs) -> requests.Response:
    return plain().get(f"{registry.url}/v2/", timeout=10, **kwargs)


@pytest.mark.parametrize("auth", AUTH_MODES)
def test_each_mode_starts_and_challenges(start_registry, auth):
    registry = start_registry(auth)
    assert registry.host.startswith("127.0.0.1:") and registry.url == f"http://{registry.host}"
    response = v2(registry)
    if auth is None:
        assert response.status_code == 200
        assert "WWW-Authenticate" not in response.headers
    elif auth == "htpasswd":
        assert response.status_code == 401
        assert response.headers["WWW-Authenticate"] == f'Basic realm="{BASIC_REALM}"'
        assert v2(registry, auth=(registry.user, registry.password)).status_code == 200
        # bcrypt's own prefix; Go's bcrypt takes it as it takes $2a$ and $2y$.
        assert registry.htpasswd_path.read_text().startswith(f"{registry.user}:$2b$04$")
    else:
        assert response.status_code == 401
        challenge = f'Bearer realm="{registry.token_server.realm}",service="{SERVICE}"'
        assert response.headers["WWW-Authenticate"] == challenge
        # The account's password is for the realm: the registry wants a token.
        response = v2(registry, auth=(registry.user, registry.password))
        assert response.status_code == 401 and response.headers["WWW-Authenticate"] == challenge
        response = plain().delete(f"{registry.url}/v2/tools/greet/manifests/{sha256(b'')}", timeout=10)
        assert response.headers["WWW-Authenticate"] == f'{challenge},scope="repository:tools/greet:delete"'


def test_registry_stops_and_leaves_no_process(start_registry):
    registry = start_registry("token")
    registry.stop()
    assert registry.proc.poll() is not None
    with pytest.raises(requests.ConnectionError):
        v2(registry)
    with pytest.raises(requests.ConnectionError):
        plain().get(registry.token_server.realm, timeout=5)


@pytest.mark.parametrize("auth", AUTH_MODES)
def test_oras_round_trip_in_the_wasm_layout(start_registry, wasm_path, tmp_path, auth):
    registry = start_registry(auth)
    digest = oras_push(registry, "tools/greet", "1.0", wasm_path)

    data, media_type = get_manifest(registry, "tools/greet", "1.0")
    assert media_type == OCI_MANIFEST
    assert digest == sha256(data) == manifest_digest(registry, "tools/greet", digest)
    manifest = json.loads(data)
    assert manifest["config"]["mediaType"] == WASM_CONFIG
    [layer] = manifest["layers"]
    assert layer["mediaType"] == WASM_LAYER
    assert layer["digest"] == sha256(WASM) and layer["size"] == len(WASM)
    assert layer["annotations"]["org.opencontainers.image.title"] == "tool.wasm"

    config = json.loads(get_blob(registry, "tools/greet", manifest["config"]["digest"]))
    assert config["architecture"] == "wasm" and config["os"] == "wasip2"
    assert config["layerDigests"] == [sha256(WASM)]
    assert config["component"] == {
        "imports": ["wasi:cli/stdout@0.2.3", "toolcage:tool/types@0.1.0"],
        "exports": ["toolcage:tool/tool@0.1.0"],
    }

    [pulled] = oras_pull(registry, "tools/greet", "1.0", tmp_path / "pulled")
    assert pulled.name == "tool.wasm" and pulled.read_bytes() == WASM
    [pulled] = oras_pull(registry, "tools/greet", digest, tmp_path / "by-digest")
    assert pulled.read_bytes() == WASM


def test_manifest_needs_its_media_type_named_in_accept(start_registry, wasm_path):
    registry = start_registry()
    digest = oras_push(registry, "tools/greet", "1.0", wasm_path)
    client = RegistryClient(registry)
    for accept in [None, "*/*", "application/vnd.docker.distribution.manifest.v2+json"]:
        headers = {"Accept": accept} if accept else {}
        response = client.request("GET", "/v2/tools/greet/manifests/1.0", headers=headers)
        assert response.status_code == 404, accept
        assert response.json()["errors"][0]["code"] == "MANIFEST_UNKNOWN"
    response = client.request("HEAD", "/v2/tools/greet/manifests/1.0", headers={"Accept": OCI_MANIFEST})
    assert response.status_code == 200
    assert response.headers["Docker-Content-Digest"] == digest
    assert response.headers["Etag"] == f'"{digest}"'


def test_blobs_are_served_directly_with_ranges(start_registry):
    registry = start_registry()
    digest = put_blob(registry, "tools/greet", WASM)
    client = RegistryClient(registry)
    response = client.request("GET", f"/v2/tools/greet/blobs/{digest}")
    assert response.status_code == 200 and response.content == WASM
    assert response.headers["Docker-Content-Digest"] == digest
    response = client.request("GET", f"/v2/tools/greet/blobs/{digest}", headers={"Range": "bytes=0-3"})
    assert response.status_code == 206 and response.content == WASM[:4]


def test_htpasswd_refuses_a_wrong_password(start_registry, wasm_path):
    registry = start_registry("htpasswd")
    response = v2(registry, auth=(registry.user, "wrong"))
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == f'Basic realm="{BASIC_REALM}"'
    with pytest.raises(ValueError):
        oras_push(registry, "tools/greet", "1.0", wasm_path, password="wrong")
    with pytest.raises(ValueError):
        oras_push(registry, "tools/greet", "1.0", wasm_path, anonymous=True)


def test_htpasswd_takes_users_added_later(start_registry):
    registry = start_registry("htpasswd")
    assert v2(registry, auth=("second", "pw")).status_code == 401
    registry.add_user("second", "pw")
    assert v2(registry, auth=("second", "pw")).status_code == 200


def test_token_refuses_anonymous_push_and_pull(start_registry, wasm_path, tmp_path):
    registry = start_registry("token")
    with pytest.raises(ValueError):
        oras_push(registry, "tools/greet", "1.0", wasm_path, anonymous=True)
    records = registry.token_server.requests
    assert records and all(not r["authorization"] and r["user"] is None for r in records)
    assert all(r["query"]["service"] == [SERVICE] for r in records)
    assert ("tools/greet", {"pull", "push"}) in asked(records)
    assert all(r["granted"] == [{"type": "repository", "name": "tools/greet", "actions": []}] for r in records)

    push_wasm_raw(registry, "tools/greet", "1.0", WASM)
    response = RegistryClient(registry, anonymous=True).request(
        "GET", "/v2/tools/greet/manifests/1.0", headers={"Accept": OCI_MANIFEST}
    )
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == (
        f'Bearer realm="{registry.token_server.realm}",service="{SERVICE}",'
        'scope="repository:tools/greet:pull",error="insufficient_scope"'
    )
    with pytest.raises(ValueError):
        oras_pull(registry, "tools/greet", "1.0", tmp_path / "pulled", anonymous=True)


def test_token_accepts_the_user_and_records_the_flow(start_registry, wasm_path, tmp_path):
    registry = start_registry("token")
    oras_push(registry, "tools/greet", "1.0", wasm_path)
    records = registry.token_server.requests
    assert records and all(r["authorization"] and r["scheme"] == "Basic" for r in records)
    assert all(r["user"] == registry.user and r["status"] == 200 for r in records)
    assert ("tools/greet", {"pull", "push"}) in asked(records)

    session = plain()
    reply = session.get(
        registry.token_server.realm,
        params={"service": SERVICE, "scope": "repository:tools/greet:pull"},
        auth=(registry.user, registry.password),
    ).json()
    assert reply["token"] == reply["access_token"] and reply["expires_in"] == 300 and reply["issued_at"]
    header, claims = decode_jwt(reply["token"])
    assert header["alg"] == "RS256" and len(header["x5c"]) == 1
    assert claims["aud"] == SERVICE and claims["sub"] == registry.user
    assert claims["access"] == [{"type": "repository", "name": "tools/greet", "actions": ["pull"]}]
    assert {"iss", "exp", "nbf", "iat", "jti"} <= claims.keys()

    registry.token_server.requests.clear()
    [pulled] = oras_pull(registry, "tools/greet", "1.0", tmp_path / "pulled")
    assert pulled.read_bytes() == WASM
    assert registry.token_server.requests


@pytest.mark.parametrize("auth", AUTH_MODES)
def test_recording_shows_what_reached_the_registry(start_registry, wasm_path, tmp_path, auth):
    registry = start_registry(auth, record=True)
    digest = oras_push(registry, "tools/greet", "1.0", wasm_path)
    [pulled] = oras_pull(registry, "tools/greet", "1.0", tmp_path / "pulled")
    assert pulled.read_bytes() == WASM
    assert manifest_digest(registry, "tools/greet", "1.0") == digest
    records = registry.requests
    assert {"HEAD", "POST", "PUT", "GET"} <= {r["method"] for r in records}
    assert any(r["path"] == "/v2/tools/greet/manifests/1.0" and r["status"] == 201 for r in records)
    # oras asks without credentials first, then answers the challenge;
    # under token auth the password goes to the realm only, never here.
    expected = {None: {None}, "htpasswd": {None, "Basic"}, "token": {None, "Bearer"}}[auth]
    assert {r["authorization"] for r in records} == expected
    if auth == "token":
        assert all(r["scheme"] == "Basic" for r in registry.token_server.requests)


def test_token_wrong_password_is_a_401_from_the_token_server(start_registry, wasm_path):
    registry = start_registry("token")
    with pytest.raises(ValueError):
        oras_push(registry, "tools/greet", "1.0", wasm_path, password="wrong")
    records = registry.token_server.requests
    assert records and all(r["status"] == 401 and r["authorization"] and r["user"] is None for r in records)


def test_token_users_get_only_their_actions(start_registry, wasm_path, tmp_path):
    registry = start_registry("token")
    registry.add_user("reader", "pw", actions=("pull",))
    oras_push(registry, "tools/greet", "1.0", wasm_path)
    [pulled] = oras_pull(registry, "tools/greet", "1.0", tmp_path / "pulled", "reader", "pw")
    assert pulled.read_bytes() == WASM
    with pytest.raises(ValueError):
        oras_push(registry, "tools/greet", "2.0", wasm_path, "reader", "pw")


def test_token_anonymous_pull(start_registry, wasm_path, tmp_path):
    registry = start_registry("token", anonymous_pull=True)
    push_wasm_raw(registry, "tools/greet", "1.0", WASM)
    [pulled] = oras_pull(registry, "tools/greet", "1.0", tmp_path / "pulled", anonymous=True)
    assert pulled.read_bytes() == WASM
    assert all(not r["authorization"] for r in registry.token_server.requests)
    with pytest.raises(ValueError):
        oras_push(registry, "tools/greet", "2.0", wasm_path, anonymous=True)


def test_token_server_failure_knobs(start_registry, tmp_path):
    registry = start_registry("token")
    push_wasm_raw(registry, "tools/greet", "1.0", WASM)
    session = plain()
    token_url = registry.token_server.realm
    params = {"service": SERVICE, "scope": "repository:tools/greet:pull"}
    credentials = (registry.user, registry.password)
    manifest_url = f"{registry.url}/v2/tools/greet/manifests/1.0"

    registry.token_server.status = 500
    assert session.get(token_url, params=params, auth=credentials).status_code == 500
    with pytest.raises(ValueError):
        oras_pull(registry, "tools/greet", "1.0", tmp_path / "pulled")
    registry.token_server.status = None

    registry.token_server.body = b"{}"
    assert session.get(token_url, params=params, auth=credentials).json() == {}
    registry.token_server.body = None

    for defect in DEFECTS:
        registry.token_server.defect = defect
        token = session.get(token_url, params=params, auth=credentials).json()["token"]
        response = session.get(
            manifest_url, headers={"Authorization": f"Bearer {token}", "Accept": OCI_MANIFEST}
        )
        assert response.status_code == 401, defect
        assert response.headers["WWW-Authenticate"].endswith(',error="invalid_token"'), defect
    registry.token_server.defect = None
    token = session.get(token_url, params=params, auth=credentials).json()["token"]
    response = session.get(manifest_url, headers={"Authorization": f"Bearer {token}", "Accept": OCI_MANIFEST})
    assert response.status_code == 200


@pytest.mark.parametrize("auth", AUTH_MODES)
def test_raw_helpers_make_what_they_say(start_registry, auth):
    registry = start_registry(auth)
    repo = "tools/odd"
    config = wasm_config(WASM)
    other = b"\0asm\x01\x00\x00\x00"
    for blob in (WASM, config, other):
        assert put_blob(registry, repo, blob) == sha256(blob)
        assert get_blob(registry, repo, sha256(blob)) == blob

    shapes = {
        "no-wasm": image_manifest(descriptor(WASM_CONFIG, config), [descriptor("text/plain", other)]),
        "two": image_manifest(
            descriptor(WASM_CONFIG, config), [descriptor(WASM_LAYER, WASM), descriptor(WASM_LAYER, other)]
        ),
        "lying-size": image_manifest(
            descriptor(WASM_CONFIG, config), [descriptor(WASM_LAYER, WASM, size=len(WASM) + 1)]
        ),
    }
    for tag, manifest in shapes.items():
        digest = put_manifest(registry, repo, tag, manifest)
        assert digest == sha256(manifest) == manifest_digest(registry, repo, tag)
        assert get_manifest(registry, repo, tag) == (manifest, OCI_MANIFEST)

    good = push_wasm_raw(registry, repo, "good", WASM)
    good_bytes, _ = get_manifest(registry, repo, "good")
    index = image_index([descriptor(OCI_MANIFEST, good_bytes, platform={"architecture": "wasm", "os": "wasip2"})])
    assert put_manifest(registry, repo, "index", index, OCI_INDEX) == sha256(index)
    assert get_manifest(registry, repo, "index") == (index, OCI_INDEX)

    assert retag(registry, repo, "good", "also-good") == good
    # The API cannot delete a tag: hence delete_tag on the storage.
    assert RegistryClient(registry).request("DELETE", f"/v2/{repo}/manifests/good").status_code == 400
    delete_tag(registry, repo, "good")
    assert RegistryClient(registry).request("HEAD", f"/v2/{repo}/manifests/good").status_code == 404
    assert manifest_digest(registry, repo, "also-good") == good
    delete_manifest(registry, repo, good)
    assert RegistryClient(registry).request("HEAD", f"/v2/{repo}/manifests/also-good").status_code == 404

    tamper_blob(registry, sha256(WASM), b"\0asm not what was pushed")
    assert get_blob(registry, repo, sha256(WASM)) == b"\0asm not what was pushed"


def test_the_registry_refuses_a_blob_whose_digest_lies(start_registry):
    registry = start_registry()
    client = RegistryClient(registry)
    started = client.request("POST", "/v2/tools/greet/blobs/uploads/")
    response = client.request("PUT", started.headers["Location"] + f"&digest={sha256(b'other')}", data=WASM)
    assert response.status_code == 400
    assert response.json()["errors"][0]["code"] == "DIGEST_INVALID"


def test_component_names_of_a_real_guest():
    imports, exports = component_names((GUESTS / GUEST_FILES["sdk-c"]).read_bytes())
    assert "toolcage:tool/types@0.2.0" in imports
    assert exports == ["toolcage:tool/tool@0.2.0"]
    # A component built against the contract's previous version.
    imports, exports = component_names((GUESTS / GUEST_FILES["liar"]).read_bytes())
    assert "toolcage:tool/types@0.1.0" in imports
    assert exports == ["toolcage:tool/tool@0.1.0"]


def test_static_server_serves_and_misbehaves(start_static, tmp_path):
    files = tmp_path / "files"
    files.mkdir()
    data = bytes(range(256)) * 40
    (files / "tool.wasm").write_bytes(data)
    server = start_static(files)
    other = start_static(files)
    session = plain()

    response = session.get(f"{server.url}/tool.wasm", headers={"Authorization": "Bearer x"})
    assert response.status_code == 200 and response.content == data
    assert session.get(f"{server.url}/missing.wasm").status_code == 404
    assert session.get(f"{server.url}/../etc/passwd").status_code == 404

    server.route("/moved.wasm", redirect=f"{other.url}/tool.wasm")
    response = session.get(f"{server.url}/moved.wasm", allow_redirects=False)
    assert response.status_code == 302 and response.headers["Location"] == f"{other.url}/tool.wasm"
    assert session.get(f"{server.url}/moved.wasm").content == data
    assert other.requests[-1]["path"] == "/tool.wasm"

    server.route("/tool.wasm", status=500)
    assert session.get(f"{server.url}/tool.wasm").status_code == 500

    server.route("/tool.wasm", truncate=1000)
    connection = http.client.HTTPConnection(server.host, timeout=10)
    connection.request("GET", "/tool.wasm")
    reply = connection.getresponse()
    assert reply.status == 200 and reply.getheader("Content-Length") == str(len(data))
    with pytest.raises(http.client.IncompleteRead) as short:
        reply.read()
    assert len(short.value.partial) == 1000
    connection.close()

    server.route("/tool.wasm", delay=0.2, trickle=0.01)
    started = time.monotonic()
    assert session.get(f"{server.url}/tool.wasm").content == data
    # 0.2 s before the headers, then 10 ms before each of 10 KiB.
    assert time.monotonic() - started >= 0.2 + 10 * 0.01

    assert server.requests[0]["authorization"] and server.requests[0]["host"] == server.host
    assert not server.requests[1]["authorization"]
