"""Installing tools: `toolcage add`, `update`, `remove`, `publish` and
`[[sources]]`, against a real OCI registry (Debian's docker-registry, the
CNCF distribution registry) started on loopback, with artifacts pushed by
`toolcage publish` and by an independent client (oras), and URL sources
from a loopback HTTP server. Every hostile case checks that nothing
half-written appears in the tools folder and that the lock is unchanged."""

import base64
import hashlib
import json
import os
import subprocess
import threading

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from conftest import BIN, ERAS, GUEST_FILES, GUESTS, session, text_of
from registry import (  # noqa: F401 (fixtures)
    OCI_MANIFEST,
    WASM_CONFIG,
    WASM_LAYER,
    delete_tag,
    descriptor,
    get_blob,
    get_manifest,
    image_index,
    image_manifest,
    oras_push,
    put_blob,
    put_manifest,
    retag,
    start_registry,
    start_static,
    tamper_blob,
)

pytestmark = pytest.mark.anyio

SIMPLESIGNING = "application/vnd.dev.cosign.simplesigning.v1+json"


def guest(name: str) -> bytes:
    return (GUESTS / GUEST_FILES[name]).read_bytes()


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def clean_env(tmp_path, **extra) -> dict:
    """No credentials of this machine's: a home of the test's own."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DOCKER_", "REGISTRY_AUTH", "TOOLCAGE_REGISTRY", "XDG_"))
    }
    env.update(HOME=str(home), TOOLCAGE_LOG="warn")
    env.update(extra)
    return env


def credentials_env(tmp_path, registry) -> dict:
    """The registry's account, in toolcage's variables for that registry."""
    return clean_env(
        tmp_path,
        TOOLCAGE_REGISTRY_HOST=registry.host,
        TOOLCAGE_REGISTRY_USERNAME=registry.user,
        TOOLCAGE_REGISTRY_PASSWORD=registry.password,
    )


def tc(setup, command: str, *args: str, env=None, timeout=300):
    return subprocess.run(
        [str(BIN), *setup.args(command), *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env if env is not None else clean_env(setup.root),
    )


def lock_of(setup) -> str:
    path = setup.root / "toolcage.lock"
    return path.read_text() if path.exists() else ""


def folder(setup) -> list[str]:
    """Everything in the tools folder, hidden entries included."""
    return sorted(p.name for p in setup.tools_dir.iterdir())


def publish(setup, name: str, ref: str, *extra: str, env=None) -> str:
    out = tc(setup, "publish", str(GUESTS / GUEST_FILES[name]), ref, *extra, env=env)
    assert out.returncode == 0, out.stderr
    return next(line.split()[1] for line in out.stdout.splitlines() if line.strip().startswith("manifest"))


def keypair(tmp_path, name="key"):
    key = ec.generate_private_key(ec.SECP256R1())
    private = tmp_path / f"{name}.pem"
    public = tmp_path / f"{name}.pub"
    private.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    public.write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return key, private, public


def test_publish_add_call_update_and_remove(start_registry, setup):
    registry = start_registry()
    ref = f"oci://{registry.host}/tools/clock:1"
    first = publish(setup, "time", ref)

    added = tc(setup, "add", ref)
    assert added.returncode == 0, added.stderr
    report = added.stdout
    assert f"manifest   {first}" in report
    assert f"component  {sha256(guest('time'))}" in report
    assert "signature  UNSIGNED" in report
    assert "get_current_time" in report and "convert_timezone" in report
    assert folder(setup) == ["clock.wasm"]
    assert (setup.tools_dir / "clock.wasm").read_bytes() == guest("time")
    lock = lock_of(setup)
    assert f'manifest = "{first}"' in lock and f'source = "{ref}"' in lock

    called = setup.run("get_current_time", '{"timezone":"UTC"}', command="call")
    assert called.returncode == 0, called.stderr

    # The tag moves to a build that imports more (outgoing HTTP): update
    # shows both digests and the new import, and without --yes (and no
    # terminal to ask on) replaces nothing.
    second = publish(setup, "weather", ref)
    assert second != first
    asked = tc(setup, "update", "clock")
    assert asked.returncode == 0, asked.stderr
    assert f"old        {sha256(guest('time'))}" in asked.stdout
    assert f"new        {sha256(guest('weather'))}" in asked.stdout
    assert "NEW IMPORTS: wasi:http/outgoing-handler" in asked.stdout
    assert "`network = [" in asked.stdout
    assert "not replaced" in asked.stdout
    assert (setup.tools_dir / "clock.wasm").read_bytes() == guest("time")
    assert lock_of(setup) == lock

    done = tc(setup, "update", "--yes")
    assert done.returncode == 0, done.stderr
    assert (setup.tools_dir / "clock.wasm").read_bytes() == guest("weather")
    assert f'manifest = "{second}"' in lock_of(setup)
    again = tc(setup, "update")
    assert "clock: up to date" in again.stdout, again.stdout

    removed = tc(setup, "remove", "clock")
    assert removed.returncode == 0, removed.stderr
    assert folder(setup) == []
    assert "clock" not in lock_of(setup)
    assert tc(setup, "remove", "clock").returncode != 0


def test_an_artifact_oras_pushed_installs_and_reports_what_it_may_use(start_registry, setup, tmp_path):
    registry = start_registry()
    digest = oras_push(registry, "acme/weather", "2.0", GUESTS / GUEST_FILES["weather"])
    added = tc(setup, "add", f"oci://{registry.host}/acme/weather@{digest}", "--name", "forecast")
    assert added.returncode == 0, added.stderr
    assert "network (outgoing HTTP)" in added.stdout
    assert "nothing is granted by installing" in added.stdout
    assert folder(setup) == ["forecast.wasm"]
    # Installing granted nothing: the config is as it was.
    assert setup.config.read_text() == ""


def test_a_locked_file_whose_bytes_change_is_refused(start_registry, setup):
    registry = start_registry()
    ref = f"oci://{registry.host}/tools/clock:1"
    publish(setup, "time", ref)
    assert tc(setup, "add", ref).returncode == 0
    # Someone replaces the installed file by hand.
    (setup.tools_dir / "clock.wasm").write_bytes(guest("greet"))
    listing = setup.run("--json")
    assert listing.returncode == 1
    (file,) = json.loads(listing.stdout)["files"]
    assert file["status"] == "failed"
    assert "does not match the lock" in file["error"] and "toolcage update" in file["error"]


async def test_a_running_server_keeps_the_locked_version_when_the_file_is_swapped(start_registry, setup):
    registry = start_registry()
    ref = f"oci://{registry.host}/tools/clock:1"
    publish(setup, "time", ref)
    assert tc(setup, "add", ref).returncode == 0
    async with session(setup, ERAS[1]) as client:
        before = {t.name for t in (await client.list_tools()).tools}
        assert "get_current_time" in before
        (setup.tools_dir / "clock.wasm").write_bytes(guest("greet"))
        # The reload sees the swap and refuses it: the old version serves on.
        import anyio

        for _ in range(100):
            if "does not match the lock" in setup.stderr():
                break
            await anyio.sleep(0.1)
        assert "does not match the lock" in setup.stderr()
        after = {t.name for t in (await client.list_tools()).tools}
        assert after == before
        result = await client.call_tool("get_current_time", {"timezone": "UTC"})
        assert not result.is_error, text_of(result)


def test_a_moved_tag_does_not_change_what_a_replica_starts_with(start_registry, setup, tmp_path):
    registry = start_registry()
    ref = f"oci://{registry.host}/tools/clock:1"
    publish(setup, "time", ref)
    setup.write_config(f'[[sources]]\nsource = "{ref}"\nname = "clock"\n')
    # The first replica fetches and locks.
    listing = tc(setup, "add", ref, "--name", "clock")
    assert listing.returncode == 0, listing.stderr
    lock = lock_of(setup)
    # The tag moves; a second replica (same config and lock, empty tools
    # folder) starts from the locked manifest, not the tag.
    publish(setup, "weather", ref)
    (setup.tools_dir / "clock.wasm").unlink()
    served = subprocess.run(
        [str(BIN), *setup.args("serve")],
        input="",
        capture_output=True,
        text=True,
        timeout=120,
        env=clean_env(setup.root, TOOLCAGE_LOG="info"),
    )
    assert "clock: installed" in served.stderr, served.stderr
    assert (setup.tools_dir / "clock.wasm").read_bytes() == guest("time")
    assert lock_of(setup) == lock


async def test_sources_are_fetched_before_serving(start_registry, setup):
    registry = start_registry()
    ref = f"oci://{registry.host}/tools/hello:1"
    publish(setup, "greet", ref)
    setup.write_config(f'[[sources]]\nsource = "{ref}"\n')
    async with session(setup, ERAS[0]) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert "greet" in names, setup.stderr()
    assert "hello" in lock_of(setup)


@pytest.mark.parametrize("case", ["tampered", "no-wasm-layer", "two-layers", "index", "core-module", "oversized", "lying-size"])
def test_bad_artifacts_are_refused_and_nothing_is_written(start_registry, setup, case):
    registry = start_registry()
    repo = "bad/tool"
    wasm = guest("sdk-c")
    config = descriptor(WASM_CONFIG, b"{}")
    put_blob(registry, repo, b"{}")
    if case == "tampered":
        digest = oras_push(registry, repo, "1", GUESTS / GUEST_FILES["sdk-c"])
        tamper_blob(registry, sha256(wasm), wasm[:-1] + b"\0")
        expect = "does not match its digest"
    elif case == "no-wasm-layer":
        put_blob(registry, repo, b"hello")
        digest = put_manifest(registry, repo, "1", image_manifest(config, [descriptor("text/plain", b"hello")]))
        expect = "no Wasm layer"
    elif case == "two-layers":
        put_blob(registry, repo, wasm)
        layer = descriptor(WASM_LAYER, wasm)
        digest = put_manifest(registry, repo, "1", image_manifest(config, [layer, layer]))
        expect = "2 Wasm layers"
    elif case == "index":
        put_blob(registry, repo, wasm)
        inner = put_manifest(registry, repo, "inner", image_manifest(config, [descriptor(WASM_LAYER, wasm)]))
        digest = put_manifest(
            registry, repo, "1", image_index([{"mediaType": OCI_MANIFEST, "digest": inner, "size": 1}]), media_type="application/vnd.oci.image.index.v1+json"
        )
        expect = "image index"
    elif case == "core-module":
        core = b"\0asm\x01\0\0\0"
        put_blob(registry, repo, core)
        digest = put_manifest(registry, repo, "1", image_manifest(config, [descriptor(WASM_LAYER, core)]))
        expect = "core WebAssembly module"
    elif case == "oversized":
        setup.write_config("[install]\nmax_component_mib = 1\n")
        big = guest("time")
        put_blob(registry, repo, big)
        digest = put_manifest(registry, repo, "1", image_manifest(config, [descriptor(WASM_LAYER, big)]))
        expect = "over the cap"
    else:  # lying-size: the manifest says fewer bytes than the blob has
        put_blob(registry, repo, wasm)
        digest = put_manifest(registry, repo, "1", image_manifest(config, [descriptor(WASM_LAYER, wasm, size=100)]))
        expect = "cap of 100"
    out = tc(setup, "add", f"oci://{registry.host}/{repo}:1")
    assert out.returncode != 0
    assert expect in out.stderr, out.stderr
    assert folder(setup) == [] and lock_of(setup) == ""
    assert digest


def test_registry_failures_are_clear(start_registry, setup):
    registry = start_registry()
    ref = f"oci://{registry.host}/tools/clock:1"
    missing = tc(setup, "add", ref)
    assert missing.returncode != 0 and "404" in missing.stderr, missing.stderr
    host = registry.host
    registry.stop()
    down = tc(setup, "add", f"oci://{host}/tools/clock:1")
    assert down.returncode != 0 and "cannot connect" in down.stderr, down.stderr
    assert folder(setup) == [] and lock_of(setup) == ""


def test_private_registries_with_basic_auth(start_registry, setup, tmp_path):
    registry = start_registry(auth="htpasswd")
    ref = f"oci://{registry.host}/private/clock:1"
    env = credentials_env(tmp_path, registry)
    publish(setup, "time", ref, env=env)
    anonymous = tc(setup, "add", ref)
    assert anonymous.returncode != 0 and "needs credentials" in anonymous.stderr, anonymous.stderr

    wrong = tc(setup, "add", ref, env={**env, "TOOLCAGE_REGISTRY_PASSWORD": "not-the-password"})
    assert wrong.returncode != 0 and "refused the credentials" in wrong.stderr, wrong.stderr
    assert "not-the-password" not in wrong.stderr + wrong.stdout

    # Docker's config.json, as `docker login` writes it.
    docker = tmp_path / "docker"
    docker.mkdir()
    auth = base64.b64encode(f"{registry.user}:{registry.password}".encode()).decode()
    (docker / "config.json").write_text(json.dumps({"auths": {registry.host: {"auth": auth}}}))
    added = tc(setup, "add", ref, env=clean_env(tmp_path, DOCKER_CONFIG=str(docker)))
    assert added.returncode == 0, added.stderr
    for text in [added.stdout, added.stderr, lock_of(setup)]:
        assert registry.password not in text and auth not in text


def test_private_registries_with_token_auth(start_registry, setup, tmp_path):
    registry = start_registry(auth="token")
    ref = f"oci://{registry.host}/private/clock:1"
    env = credentials_env(tmp_path, registry)
    publish(setup, "time", ref, env=env)
    registry.token_server.requests.clear()
    added = tc(setup, "add", ref, env=env)
    assert added.returncode == 0, added.stderr
    # Credentials went to the token realm, and the registry saw tokens.
    seen = registry.token_server.requests
    assert seen and all(r["authorization"] for r in seen), seen
    wrong = tc(setup, "remove", "clock")
    assert wrong.returncode == 0
    refused = tc(setup, "add", ref, env={**env, "TOOLCAGE_REGISTRY_PASSWORD": "wrong-password-xyz"})
    assert refused.returncode != 0 and "refused the credentials" in refused.stderr, refused.stderr
    assert "wrong-password-xyz" not in refused.stderr + refused.stdout
    anonymous = tc(setup, "add", ref)
    assert anonymous.returncode != 0, anonymous.stdout


def test_signatures_made_by_publish_are_verified(start_registry, setup, tmp_path):
    registry = start_registry()
    _, private, public = keypair(tmp_path)
    _, _, other = keypair(tmp_path, "other")
    signed = f"oci://{registry.host}/tools/clock:1"
    unsigned = f"oci://{registry.host}/tools/plain:1"
    publish(setup, "time", signed, "--sign", str(private))
    publish(setup, "greet", unsigned)

    verified = tc(setup, "add", signed, "--key", str(public), "--require-signature")
    assert verified.returncode == 0, verified.stderr
    assert "signature  verified (key" in verified.stdout
    assert "signed_by" in lock_of(setup)

    refused = tc(setup, "add", unsigned, "--key", str(public), "--require-signature")
    assert refused.returncode != 0 and "UNSIGNED" in refused.stderr, refused.stderr
    wrong_key = tc(setup, "add", signed, "--name", "clock2", "--key", str(other), "--require-signature")
    assert wrong_key.returncode != 0 and "INVALID" in wrong_key.stderr, wrong_key.stderr
    # Without a key to check with, a signature is shown as unchecked.
    assert tc(setup, "remove", "clock").returncode == 0
    shown = tc(setup, "add", signed, "--name", "clock3")
    assert "NOT CHECKED" in shown.stdout, shown.stdout + shown.stderr
    # Required in the config, for every add.
    setup.write_config(f'[install]\nkeys = ["{public}"]\nrequire_signature = true\n')
    assert tc(setup, "add", unsigned, "--name", "plain2").returncode != 0
    assert folder(setup) == ["clock3.wasm"]


def test_a_signature_made_elsewhere_is_verified_and_a_forged_one_refused(start_registry, setup, tmp_path):
    """A cosign-format signature made with Python's `cryptography` (not our
    signer), pushed with plain registry requests."""
    registry = start_registry()
    key, _, public = keypair(tmp_path)
    repo = "tools/clock"
    digest = oras_push(registry, repo, "1", GUESTS / GUEST_FILES["time"])

    def push_signature(payload_digest: str, sign_with=key, tweak=lambda b: b, identity=f"{registry.host}/{repo}"):
        payload = json.dumps(
            {
                "critical": {
                    "identity": {"docker-reference": identity},
                    "image": {"docker-manifest-digest": payload_digest},
                    "type": "cosign container image signature",
                },
                "optional": None,
            }
        ).encode()
        signature = base64.b64encode(sign_with.sign(payload, ec.ECDSA(hashes.SHA256()))).decode()
        payload = tweak(payload)
        put_blob(registry, repo, payload)
        put_blob(registry, repo, b"{}")
        layer = descriptor(SIMPLESIGNING, payload, annotations={"dev.cosignproject.cosign/signature": signature})
        manifest = image_manifest(descriptor("application/vnd.oci.image.config.v1+json", b"{}"), [layer])
        put_manifest(registry, repo, "sha256-" + digest.split(":")[1] + ".sig", manifest)

    ref = f"oci://{registry.host}/{repo}:1"
    push_signature(digest)
    ok = tc(setup, "add", ref, "--key", str(public), "--require-signature")
    assert ok.returncode == 0, ok.stderr
    assert "signed for" not in ok.stdout
    assert tc(setup, "remove", "clock").returncode == 0
    # Signed for another repository (a mirror's copy): verified, and said.
    push_signature(digest, identity="ghcr.io/someone/else")
    mirrored = tc(setup, "add", ref, "--key", str(public), "--require-signature")
    assert mirrored.returncode == 0, mirrored.stderr
    assert "signed for `ghcr.io/someone/else`" in mirrored.stdout
    assert tc(setup, "remove", "clock").returncode == 0

    # A signature of another artifact's digest, moved onto this one.
    push_signature("sha256:" + "0" * 64)
    moved = tc(setup, "add", ref, "--key", str(public), "--require-signature")
    assert moved.returncode != 0 and "INVALID" in moved.stderr, moved.stderr
    # A payload changed after signing.
    push_signature(digest, tweak=lambda b: b.replace(b'"optional": null', b'"optional": {}'))
    forged = tc(setup, "add", ref, "--key", str(public), "--require-signature")
    assert forged.returncode != 0 and "INVALID" in forged.stderr, forged.stderr
    assert folder(setup) == []


def test_our_signatures_verify_with_an_independent_verifier(start_registry, setup, tmp_path):
    registry = start_registry()
    key, private, _ = keypair(tmp_path)
    repo = "tools/clock"
    digest = publish(setup, "time", f"oci://{registry.host}/{repo}:1", "--sign", str(private))
    manifest, _ = get_manifest(registry, repo, "sha256-" + digest.split(":")[1] + ".sig")
    (layer,) = json.loads(manifest)["layers"]
    assert layer["mediaType"] == SIMPLESIGNING
    payload = get_blob(registry, repo, layer["digest"])
    signature = base64.b64decode(layer["annotations"]["dev.cosignproject.cosign/signature"])
    key.public_key().verify(signature, payload, ec.ECDSA(hashes.SHA256()))
    claims = json.loads(payload)
    assert claims["critical"]["image"]["docker-manifest-digest"] == digest
    assert claims["critical"]["type"] == "cosign container image signature"


def test_url_sources_need_their_digest(start_static, setup, tmp_path):
    served = tmp_path / "www"
    served.mkdir()
    (served / "hello.wasm").write_bytes(guest("greet"))
    server = start_static(served)
    url = f"{server.url}/hello.wasm"
    no_digest = tc(setup, "add", url)
    assert no_digest.returncode != 0 and "--digest" in no_digest.stderr
    wrong = tc(setup, "add", url, "--digest", "sha256:" + "1" * 64)
    assert wrong.returncode != 0 and "not the expected" in wrong.stderr
    ok = tc(setup, "add", url, "--digest", sha256(guest("greet")))
    assert ok.returncode == 0, ok.stderr
    assert folder(setup) == ["hello.wasm"]


def test_url_sources_survive_truncation_failures_and_redirects(start_static, setup, tmp_path):
    served = tmp_path / "www"
    served.mkdir()
    data = guest("greet")
    (served / "t.wasm").write_bytes(data)
    elsewhere = start_static(served)
    server = start_static(served)
    digest = sha256(data)
    server.route("/cut.wasm", truncate=1000)
    (served / "cut.wasm").write_bytes(data)
    cut = tc(setup, "add", f"{server.url}/cut.wasm", "--digest", digest)
    assert cut.returncode != 0 and "cut short" in cut.stderr, cut.stderr
    server.route("/fail.wasm", status=500)
    failed = tc(setup, "add", f"{server.url}/fail.wasm", "--digest", digest)
    assert failed.returncode != 0 and "500" in failed.stderr
    # A server that does not answer, or stops sending, within the timeout.
    setup.write_config("[install]\ntimeout_ms = 300\n")
    server.route("/slow.wasm", delay=3)
    slow = tc(setup, "add", f"{server.url}/slow.wasm", "--digest", digest)
    assert slow.returncode != 0 and "within 300 ms" in slow.stderr, slow.stderr
    server.route("/stall.wasm", trickle=1)
    (served / "stall.wasm").write_bytes(data)
    stall = tc(setup, "add", f"{server.url}/stall.wasm", "--digest", digest)
    assert stall.returncode != 0 and "stopped sending" in stall.stderr, stall.stderr
    setup.write_config("")
    # A redirect to another host is followed; the digest guards the bytes.
    server.route("/moved.wasm", redirect=f"{elsewhere.url}/t.wasm")
    moved = tc(setup, "add", f"{server.url}/moved.wasm", "--digest", digest)
    assert moved.returncode == 0, moved.stderr
    assert elsewhere.requests and not any(r["authorization"] for r in elsewhere.requests)
    # A redirect off loopback to plain http is refused like any such URL.
    server.route("/away.wasm", redirect="http://example.com/t.wasm")
    away = tc(setup, "add", f"{server.url}/away.wasm", "--digest", digest, "--name", "away")
    assert away.returncode != 0 and "loopback" in away.stderr, away.stderr
    assert folder(setup) == ["moved.wasm"]


def test_names_that_clash_or_escape_are_refused(start_registry, setup):
    registry = start_registry()
    ref = f"oci://{registry.host}/tools/clock:1"
    publish(setup, "time", ref)
    for bad in ["../x", "a/b", "X", ".hidden", ""]:
        out = tc(setup, "add", ref, "--name", bad)
        assert out.returncode != 0 and "cannot name a tool file" in out.stderr, (bad, out.stderr)
    setup.add("time", "mine.wasm")
    taken = tc(setup, "add", ref, "--name", "mine")
    assert taken.returncode != 0 and "already in the tools folder" in taken.stderr
    # Another file already provides the same tool names.
    clash = tc(setup, "add", ref, "--name", "clock")
    assert clash.returncode != 0 and "already provides" in clash.stderr, clash.stderr
    assert folder(setup) == ["mine.wasm"] and lock_of(setup) == ""


def test_concurrent_adds_of_one_tool(start_registry, setup):
    registry = start_registry()
    ref = f"oci://{registry.host}/tools/clock:1"
    publish(setup, "time", ref)
    results = []

    def add():
        results.append(tc(setup, "add", ref))

    threads = [threading.Thread(target=add) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r.returncode == 0 for r in results) == [False, False, True], [r.stderr for r in results]
    assert all("already installed" in r.stderr for r in results if r.returncode != 0)
    assert folder(setup) == ["clock.wasm"]
    assert lock_of(setup).count("[tools.clock]") == 1


def test_a_cosign_bundle_signature_is_verified(start_registry, setup, tmp_path):
    """cosign 3's default layout: a sigstore bundle (a DSSE envelope over an
    in-toto statement naming the manifest) as a referrer of the artifact,
    found through the referrers fallback tag (registry 2.8 has no referrers
    API). Made here with Python's `cryptography`, not our signer."""
    registry = start_registry()
    key, _, public = keypair(tmp_path)
    _, _, other = keypair(tmp_path, "other")
    repo = "tools/clock"
    digest = oras_push(registry, repo, "1", GUESTS / GUEST_FILES["time"])
    bundle_type = "application/vnd.dev.sigstore.bundle.v0.3+json"
    empty = "application/vnd.oci.empty.v1+json"

    def push_bundle(subject_hex: str):
        statement = json.dumps(
            {
                "_type": "https://in-toto.io/Statement/v1",
                "subject": [{"digest": {"sha256": subject_hex}, "annotations": {}}],
                "predicateType": "https://sigstore.dev/cosign/sign/v1",
            }
        ).encode()
        payload_type = b"application/vnd.in-toto+json"
        pae = b"DSSEv1 %d %s %d %s" % (len(payload_type), payload_type, len(statement), statement)
        sig = key.sign(pae, ec.ECDSA(hashes.SHA256()))
        bundle = json.dumps(
            {
                "mediaType": bundle_type,
                "verificationMaterial": {"publicKey": {"hint": "test"}, "tlogEntries": []},
                "dsseEnvelope": {
                    "payload": base64.b64encode(statement).decode(),
                    "payloadType": payload_type.decode(),
                    "signatures": [{"sig": base64.b64encode(sig).decode()}],
                },
            }
        ).encode()
        put_blob(registry, repo, bundle)
        put_blob(registry, repo, b"{}")
        referrer = image_manifest(
            descriptor(empty, b"{}"),
            [descriptor(bundle_type, bundle)],
            artifactType=bundle_type,
        )
        referrer_digest = put_manifest(registry, repo, sha256(referrer), referrer)
        index = image_index([{"mediaType": OCI_MANIFEST, "digest": referrer_digest, "size": len(referrer), "artifactType": bundle_type}])
        put_manifest(registry, repo, "sha256-" + digest.split(":")[1], index, media_type="application/vnd.oci.image.index.v1+json")

    ref = f"oci://{registry.host}/{repo}:1"
    push_bundle(digest.split(":")[1])
    ok = tc(setup, "add", ref, "--key", str(public), "--require-signature")
    assert ok.returncode == 0, ok.stderr
    assert "signature  verified" in ok.stdout
    assert tc(setup, "remove", "clock").returncode == 0
    wrong_key = tc(setup, "add", ref, "--key", str(other), "--require-signature")
    assert wrong_key.returncode != 0 and "INVALID" in wrong_key.stderr, wrong_key.stderr
    # A bundle for another artifact, listed as this one's referrer.
    push_bundle("0" * 64)
    moved = tc(setup, "add", ref, "--key", str(public), "--require-signature")
    assert moved.returncode != 0 and "INVALID" in moved.stderr, moved.stderr
    assert folder(setup) == []


def test_registry_answers_and_redirects_are_handled(start_registry, start_static, setup, tmp_path):
    """A registry (behind a proxy that answers in its place) that refuses,
    fails, redirects a manifest, or sends a blob from another host (as
    registries do with object storage): only the last is followed, and the
    other host never sees the credentials."""
    registry = start_registry(auth="htpasswd", record=True)
    env = credentials_env(tmp_path, registry)
    ref = f"oci://{registry.host}/tools/clock:1"
    publish(setup, "time", ref, env=env)
    wasm = guest("time")
    cdn_dir = tmp_path / "cdn"
    cdn_dir.mkdir()
    (cdn_dir / "blob").write_bytes(wasm)
    cdn = start_static(cdn_dir)
    blob_path = f"/v2/tools/clock/blobs/{sha256(wasm)}"

    for answer, expect in [
        (lambda m, p: (403, {}, b"") if "/manifests/" in p else None, "denies access (403)"),
        (lambda m, p: (500, {}, b'{"errors":[{"code":"UNKNOWN","message":"boom"}]}') if p == blob_path else None, "500"),
        (lambda m, p: (302, {"Location": f"{cdn.url}/m"}, b"") if "/manifests/1" in p else None, "not followed"),
    ]:
        registry.proxy.answer = answer
        out = tc(setup, "add", ref, env=env)
        assert out.returncode != 0 and expect in out.stderr, (expect, out.stderr)
        assert folder(setup) == [] and lock_of(setup) == ""

    registry.proxy.answer = lambda m, p: (307, {"Location": f"{cdn.url}/blob"}, b"") if p == blob_path else None
    out = tc(setup, "add", ref, env=env)
    assert out.returncode == 0, out.stderr
    assert [r["path"] for r in cdn.requests] == ["/blob"]
    assert not any(r["authorization"] for r in cdn.requests)
    assert any(r["authorization"] == "Basic" for r in registry.requests)
