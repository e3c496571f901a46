"""Supply-side hardening: what `add`, `update`, `[[sources]]` and the
loader do with what the registry and the tools folder hand them.

- A `[[sources]]` entry's keys and signature rule hold for `add`, `update`
  and `serve` alike, and an update never swaps a signed tool for one its
  key did not sign unless the operator says so.
- A file in the tools folder larger than a component may be is refused by
  its size, never read; the loader's memory stays bounded.
- An installed file that is not a regular file (a FIFO, a link to
  /dev/zero) is refused with a clear error, never read or waited on, and
  nothing is replaced.
- A registry that trickles every body just inside each request's deadline
  holds `add` and `serve`'s start-up no longer than the source's whole
  fetch is allowed (`[install] fetch_deadline_ms`); a lock another process
  holds is waited on for a bounded time, then named; a staging folder an
  install that died left behind is removed by the next command.

Memory is read from the kernel (a child's `ru_maxrss`, a server's VmHWM),
and bounds are generous: each is far below what the unbounded reads took.
"""

import fcntl
import hashlib
import json
import os
import re
import stat
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import BIN, RawServer
from registry import start_registry  # noqa: F401 (fixture)
from test_install import clean_env, folder, guest, keypair, lock_of, publish, sha256, tc

GIB = 1024 * 1024 * 1024


@dataclass
class Measured:
    returncode: int
    stdout: str
    stderr: str
    peak_mib: int


def measured(setup, command: str, *args: str, env=None, timeout=120) -> Measured:
    """Run a command of the binary and read its peak resident memory from
    the kernel (`wait4`'s `ru_maxrss`); killed at `timeout`."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [str(BIN), *setup.args(command), *args],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env=env if env is not None else clean_env(setup.root),
        )
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Measured(proc.returncode, out.read().decode(), err.read().decode(), usage.ru_maxrss // 1024)


def serve_once(setup) -> Measured:
    """`serve` over stdio with stdin closed: the `[[sources]]` step, the
    first load, then exit."""
    return measured(setup, "serve", env=clean_env(setup.root, TOOLCAGE_LOG="info"))


def sparse(path, size: int) -> None:
    """A file of `size` bytes that takes no disk (as `truncate -s`)."""
    with open(path, "wb") as f:
        f.truncate(size)


def eventually(predicate, timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


# --- a [[sources]] entry's signature rule, for every command ---------------


def sources_config(ref: str, *keys, require: bool | None = None) -> str:
    text = f'[[sources]]\nsource = "{ref}"\nname = "greet"\nkeys = {json.dumps([str(k) for k in keys])}\n'
    if require is not None:
        text += f"require_signature = {str(require).lower()}\n"
    return text


def test_update_keeps_a_sources_entrys_required_signature(start_registry, setup, tmp_path):
    """The audit's case: the entry requires acme's signature, nothing global
    does; the tag moves to an unsigned, different component."""
    registry = start_registry()
    _, acme, acme_pub = keypair(tmp_path, "acme")
    ref = f"oci://{registry.host}/tools/greet:1"
    setup.write_config(sources_config(ref, acme_pub, require=True))

    publish(setup, "greet", ref)
    refused = serve_once(setup)
    assert "a signature is required, and it is UNSIGNED" in refused.stderr, refused.stderr
    assert folder(setup) == []

    publish(setup, "greet", ref, "--sign", str(acme))
    served = serve_once(setup)
    assert "greet: installed" in served.stderr and "verified (key" in served.stderr, served.stderr
    lock = lock_of(setup)
    assert "signed_by" in lock

    # The registry moves the tag to an unsigned, different component.
    publish(setup, "time", ref)
    for command in [("update", "--yes"), ("update", "greet", "--yes")]:
        out = tc(setup, *command)
        assert out.returncode != 0
        assert "a signature is required, and it is UNSIGNED" in out.stderr, out.stderr
        assert (setup.tools_dir / "greet.wasm").read_bytes() == guest("greet")
        assert lock_of(setup) == lock
    # `add` under the entry's name is held to the same rule.
    assert tc(setup, "remove", "greet").returncode == 0
    added = tc(setup, "add", ref, "--name", "greet")
    assert added.returncode != 0 and "UNSIGNED" in added.stderr, added.stderr
    assert folder(setup) == []


def test_update_refuses_to_lose_the_signature_the_lock_records(start_registry, setup, tmp_path):
    """No signature required anywhere: the lock's `signed_by` is what an
    update must keep, unless `--allow-signature-change`."""
    registry = start_registry()
    _, acme, acme_pub = keypair(tmp_path, "acme")
    _, other, other_pub = keypair(tmp_path, "other")
    ref = f"oci://{registry.host}/tools/greet:1"
    setup.write_config(sources_config(ref, acme_pub, other_pub))
    publish(setup, "greet", ref, "--sign", str(acme))
    added = tc(setup, "add", ref, "--name", "greet")
    assert added.returncode == 0, added.stderr
    lock = lock_of(setup)
    acme_id = re.search(r'signed_by = "([^"]+)"', lock).group(1)

    # Signed by the other accepted key: refused, both keys named.
    publish(setup, "time", ref, "--sign", str(other))
    other_signed = tc(setup, "update", "--yes")
    assert other_signed.returncode != 0
    assert f"signed by key {acme_id}, and the new one by another key" in other_signed.stderr, other_signed.stderr
    assert "--allow-signature-change" in other_signed.stderr
    # Unsigned (another build: `time`'s manifest has a signature now):
    # refused.
    publish(setup, "weather", ref)
    unsigned = tc(setup, "update", "--yes")
    assert unsigned.returncode != 0
    assert "the new one's signature is: UNSIGNED" in unsigned.stderr, unsigned.stderr
    assert "nothing was replaced" in unsigned.stderr
    assert (setup.tools_dir / "greet.wasm").read_bytes() == guest("greet")
    assert lock_of(setup) == lock

    # The operator's explicit choice replaces it, and the lock says unsigned.
    allowed = tc(setup, "update", "--yes", "--allow-signature-change")
    assert allowed.returncode == 0, allowed.stderr
    assert "signature  UNSIGNED" in allowed.stdout
    assert (setup.tools_dir / "greet.wasm").read_bytes() == guest("weather")
    assert sha256(guest("weather")) in lock_of(setup) and "signed_by" not in lock_of(setup)


def test_an_update_signed_by_the_same_key_replaces_without_the_flag(start_registry, setup, tmp_path):
    registry = start_registry()
    _, acme, acme_pub = keypair(tmp_path, "acme")
    ref = f"oci://{registry.host}/tools/greet:1"
    setup.write_config(sources_config(ref, acme_pub))
    publish(setup, "greet", ref, "--sign", str(acme))
    assert tc(setup, "add", ref, "--name", "greet").returncode == 0
    publish(setup, "time", ref, "--sign", str(acme))
    out = tc(setup, "update", "--yes")
    assert out.returncode == 0, out.stderr
    assert (setup.tools_dir / "greet.wasm").read_bytes() == guest("time")
    assert "signed_by" in lock_of(setup)


# --- files in the tools folder over the loader's cap -----------------------


def test_oversized_files_are_refused_by_their_size_and_never_read(setup):
    setup.add("time")
    for i in (1, 2, 3):
        sparse(setup.tools_dir / f"z{i}.wasm", 2 * GIB)
    out = measured(setup, "list", "--json")
    assert out.returncode == 1, out.stderr
    files = {os.path.basename(f["file"]): f for f in json.loads(out.stdout)["files"]}
    for i in (1, 2, 3):
        error = files[f"z{i}.wasm"]["error"]
        assert "larger than 256 MiB" in error and "max_component_mib" in error, error
    assert files["time_tool.wasm"]["status"] == "loaded"
    # Before: 6.3 GB (every file read whole, all at once).
    assert out.peak_mib < 1024, out.peak_mib


def test_the_loader_cap_is_the_component_cap(setup):
    setup.write_config("[install]\nmax_component_mib = 1\n")
    setup.add("time")  # several MiB: over a 1 MiB cap
    out = setup.run("--json")
    assert out.returncode == 1
    assert "larger than 1 MiB" in out.stdout, out.stdout


def test_a_running_server_refuses_oversized_files_dropped_in(setup):
    setup.add("time")
    server = RawServer(setup)
    try:
        server.initialize()
        before = server.peak_mib()
        for i in (1, 2, 3):
            sparse(setup.tools_dir / f"z{i}.wasm", 2 * GIB)
        assert eventually(lambda: all(f"z{i}.wasm" in setup.stderr() for i in (1, 2, 3))), setup.stderr()
        assert "larger than 256 MiB" in setup.stderr()
        # Before: from 40 MB to 6.3 GB.
        assert server.peak_mib() < before + 512, (before, server.peak_mib())
        result = server.call("get_current_time", {"timezone": "UTC"})
        assert not result.get("isError"), result
    finally:
        server.close()


# --- an installed file that is not a regular file --------------------------


def install_greet(registry, setup) -> str:
    ref = f"oci://{registry.host}/tools/greet:1"
    publish(setup, "greet", ref)
    setup.write_config(f'[[sources]]\nsource = "{ref}"\nname = "greet"\n')
    served = serve_once(setup)
    assert "greet: installed" in served.stderr, served.stderr
    return ref


@pytest.mark.parametrize("case", ["fifo", "dev-zero"])
def test_an_installed_file_that_is_not_a_regular_file_is_refused(start_registry, setup, case):
    registry = start_registry()
    install_greet(registry, setup)
    lock = lock_of(setup)
    target = setup.tools_dir / "greet.wasm"
    target.unlink()
    if case == "fifo":
        os.mkfifo(target)
        expect = "is a FIFO, not a regular file"
    else:
        os.symlink("/dev/zero", target)
        expect = "is a symbolic link, not a regular file"
    setup.add("time")

    # Update: the tag moved, so it would replace the file if it could.
    publish(setup, "weather", f"oci://{registry.host}/tools/greet:1")
    updated = measured(setup, "update", "--yes")
    assert updated.returncode != 0
    assert expect in updated.stderr and "remove it" in updated.stderr, updated.stderr
    # Before: a FIFO hung it forever; /dev/zero took 4.1 GB in 3 s.
    assert updated.peak_mib < 1024, updated.peak_mib

    # Serve: the source is reported, the rest serves.
    server = RawServer(setup)
    try:
        server.initialize()
        result = server.call("get_current_time", {"timezone": "UTC"})
        assert not result.get("isError"), result
        assert server.peak_mib() < 1024
    finally:
        server.close()
    assert expect in setup.stderr(), setup.stderr()

    # Nothing was replaced, and the lock is as it was.
    if case == "fifo":
        assert stat.S_ISFIFO(os.lstat(target).st_mode)
    else:
        assert os.readlink(target) == "/dev/zero"
    assert lock_of(setup) == lock


# --- a slow registry: one deadline for a source's whole fetch ---------------


def slow_registry(wasm: bytes, signatures: int, seconds_per_body: float):
    """A registry that sends every body in small pieces over
    `seconds_per_body`, each piece well inside the client's per-wait timeout,
    with a `.sig` manifest of `signatures` payloads and as many bundle
    referrers, so that a client with keys fetches every one of them (the
    audit's hostile registry). Returns the server and a list of the paths
    asked for."""

    def digest(b: bytes) -> str:
        return "sha256:" + hashlib.sha256(b).hexdigest()

    oci = "application/vnd.oci.image.manifest.v1+json"
    bundle_type = "application/vnd.dev.sigstore.bundle.v0.3+json"
    docs: dict[str, bytes] = {}

    def keep(b: bytes) -> dict:
        docs[digest(b)] = b
        return {"digest": digest(b), "size": len(b)}

    config = keep(b"{}")
    artifact = json.dumps({
        "schemaVersion": 2, "mediaType": oci,
        "config": {"mediaType": "application/vnd.wasm.config.v0+json", **config},
        "layers": [{"mediaType": "application/wasm", **keep(wasm)}],
    }).encode()
    signature_tag = digest(artifact).replace(":", "-", 1) + ".sig"
    sig = json.dumps({
        "schemaVersion": 2, "mediaType": oci,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **config},
        "layers": [
            {"mediaType": "application/vnd.dev.cosign.simplesigning.v1+json", **keep(os.urandom(200)),
             "annotations": {"dev.cosignproject.cosign/signature": "MEUCIQ" + "A" * 90}}
            for _ in range(signatures)
        ],
    }).encode()
    referrers = []
    for _ in range(signatures):
        manifest = json.dumps({
            "schemaVersion": 2, "mediaType": oci, "artifactType": bundle_type,
            "config": {"mediaType": "application/vnd.oci.empty.v1+json", **config},
            "layers": [{"mediaType": bundle_type, **keep(os.urandom(300))}],
        }).encode()
        referrers.append({"mediaType": oci, "artifactType": bundle_type, **keep(manifest)})
    index = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                        "manifests": referrers}).encode()
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def trickle(self, body: bytes, content_type: str):
            asked.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            pieces = 40
            step = max(1, len(body) // pieces)
            try:
                for i in range(0, len(body), step):
                    self.wfile.write(body[i:i + step])
                    self.wfile.flush()
                    time.sleep(seconds_per_body / pieces)
            except OSError:
                pass  # the client gave up

        def do_GET(self):
            match = re.match(r"^/v2/.+/(manifests|blobs|referrers)/(.+)$", self.path)
            kind, ref = match.groups() if match else ("", "")
            if kind == "manifests" and ref in ("1", digest(artifact)):
                return self.trickle(artifact, oci)
            if kind == "manifests" and ref == signature_tag:
                return self.trickle(sig, oci)
            if kind == "referrers":
                return self.trickle(index, "application/vnd.oci.image.index.v1+json")
            if kind in ("manifests", "blobs") and ref in docs:
                return self.trickle(docs[ref], oci if kind == "manifests" else "application/octet-stream")
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, asked


SLOW_INSTALL = """[install]
keys = ["{key}"]
timeout_ms = 1000
fetch_deadline_ms = 3000
"""

#: What every request's own deadline allowed, summed, before the overall
#: one: 1 + 1 + 8 + 1 + 8 + 8 bodies of 2 s each, about 54 s. A bound far
#: below that and far above the configured 3 s.
SLOW_BOUND_S = 30


def test_a_slow_registry_holds_add_no_longer_than_its_fetch_deadline(setup, tmp_path):
    """The audit's case: keys configured, every body trickling in (2 s a
    body, a piece every 50 ms) inside the per-request deadline (1 s per
    wait, 20 s per download: far enough that a stall of a loaded test
    machine does not trip it before the overall deadline under test), a
    `.sig` of 8 payloads and 8 bundle referrers. Before: each request had
    its own deadline (N=2 took 42 s, N=64 about 32 h)."""
    _, _, public = keypair(tmp_path)
    server, asked = slow_registry(guest("greet"), signatures=8, seconds_per_body=2)
    try:
        setup.write_config(SLOW_INSTALL.format(key=public))
        ref = f"oci://127.0.0.1:{server.server_port}/tools/greet:1"
        started = time.monotonic()
        out = tc(setup, "add", ref, "--name", "greet", timeout=120)
        took = time.monotonic() - started
    finally:
        server.shutdown()
    assert out.returncode != 0
    assert f"`{ref}` was not fetched within `[install] fetch_deadline_ms` (3000 ms" in out.stderr, out.stderr
    assert "nothing was kept" in out.stderr
    assert took < SLOW_BOUND_S, (took, asked)
    assert len(asked) < 19, asked  # it stopped, rather than asking for all
    assert folder(setup) == [] and lock_of(setup) == ""


def test_a_slow_registry_holds_serve_start_up_no_longer_than_its_fetch_deadline(setup, tmp_path):
    """`serve` fetches `[[sources]]` before it serves (the README's promise
    to identical replicas), so the overall deadline is what bounds its
    start-up; the source is logged as not installed and the rest serves."""
    _, _, public = keypair(tmp_path)
    server, _ = slow_registry(guest("greet"), signatures=8, seconds_per_body=2)
    try:
        ref = f"oci://127.0.0.1:{server.server_port}/tools/greet:1"
        setup.write_config(SLOW_INSTALL.format(key=public) + f'[[sources]]\nsource = "{ref}"\nname = "greet"\n')
        setup.add("time")
        started = time.monotonic()
        served = serve_once(setup)
        took = time.monotonic() - started
    finally:
        server.shutdown()
    assert "[[sources]]: not installed" in served.stderr, served.stderr
    assert "was not fetched within `[install] fetch_deadline_ms` (3000 ms" in served.stderr, served.stderr
    assert took < SLOW_BOUND_S, took
    assert folder(setup) == ["time_tool.wasm"]


def test_a_held_lock_is_waited_on_for_a_bounded_time_then_named(setup):
    """Another process holds the lock (as `serve` did through a slow
    `[[sources]]` step): `remove` says so instead of waiting forever."""
    setup.add("time")
    guard = setup.root / ".toolcage.lock.guard"
    with open(guard, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        started = time.monotonic()
        out = tc(setup, "remove", "time_tool", timeout=120)
        took = time.monotonic() - started
    assert out.returncode != 0
    assert "another toolcage process holds the lock" in out.stderr and "try again" in out.stderr, out.stderr
    assert str(setup.root / "toolcage.lock") in out.stderr
    assert took < SLOW_BOUND_S, took
    assert (setup.tools_dir / "time_tool.wasm").exists()
    # Released: the same command works.
    out = tc(setup, "remove", "time_tool")
    assert out.returncode == 0, out.stderr
    assert folder(setup) == []


def test_a_staging_folder_left_by_a_dead_install_is_removed(setup):
    """A process killed while it compiled a staged file (a signal skips its
    cleanup) left `.toolcage-staging-PID-N` behind, up to the component cap:
    the next command that holds the lock removes it, and only it."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = setup.tools_dir / f".toolcage-staging-{dead.pid}-0"
    live = setup.tools_dir / f".toolcage-staging-{os.getpid()}-0"
    for folder_path in (stale, live):
        folder_path.mkdir()
        sparse(folder_path / "greet.wasm", 256 * 1024 * 1024)
    setup.add("time")
    out = tc(setup, "remove", "time_tool")
    assert out.returncode == 0, out.stderr
    assert folder(setup) == [live.name]
