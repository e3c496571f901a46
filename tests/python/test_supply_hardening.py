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

Memory is read from the kernel (a child's `ru_maxrss`, a server's VmHWM),
and bounds are generous: each is far below what the unbounded reads took.
"""

import json
import os
import re
import stat
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass

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
