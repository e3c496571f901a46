"""A fresh instance never reads an earlier call's memory, even when the
kernel swapped that memory out before the instance's slot was reset.

wasmtime 48 resets a pooled slot with `PAGEMAP_SCAN` by rewriting the pages
the kernel reports as written *and present*; a written page that was
swapped out is neither rewritten nor dropped, and the next instance in the
slot reads it back. The server therefore scans only while swap cannot reach
it (`server.memory_reset = "auto"`), and refuses new instances once swap
comes on after it started. These tests play the attacker's luck on purpose:
a hostile tool fills 64 KiB with a marker only it computes and sleeps; the
test pushes exactly those pages out to swap (`process_madvise` with
`MADV_PAGEOUT`, checked in `/proc/PID/pagemap`); once the call has ended
and its slot was reset, the next call looks through all of its fresh
memory for the marker.

They need root (to turn on a swap area and page another process's memory
out); the swap area is a file in the test's folder, turned off after."""

from __future__ import annotations

import contextlib
import ctypes
import os
import struct
import subprocess
import time
from pathlib import Path

import pytest

from conftest import RawServer, call_request

PAGE = 4096
MADV_PAGEOUT = 21
SYS_PROCESS_MADVISE = 440  # x86-64 and aarch64 alike


def active_swap() -> list[str]:
    return [line.split()[0] for line in Path("/proc/swaps").read_text().splitlines()[1:] if line.strip()]


@contextlib.contextmanager
def swap_on(folder: Path):
    """A swap area for the block: a 64 MiB file turned on here, off after
    (skips the test where it cannot be, e.g. without root)."""
    if os.geteuid() != 0:
        pytest.skip("turning on a swap area needs root")
    area = folder / "swapfile"
    with open(area, "wb") as f:
        f.write(b"\0" * (64 << 20))
    area.chmod(0o600)
    made = subprocess.run(["mkswap", str(area)], capture_output=True, text=True)
    on = made.returncode == 0 and subprocess.run(["swapon", str(area)], capture_output=True, text=True)
    if not on or on.returncode != 0:
        area.unlink()
        pytest.skip(f"cannot turn on a swap area here: {(on or made).stderr.strip()}")
    try:
        yield area
    finally:
        subprocess.run(["swapoff", str(area)], check=True)
        area.unlink()


def marker_of(seed: str) -> bytes:
    """The bytes the hostile `stash` tool writes for `seed`."""
    return bytes(b ^ 0x5A for b in seed.encode())


def pages_holding(pid: int, marker: bytes) -> list[int]:
    """The pages of process `pid` whose bytes hold `marker`, from its
    writable mappings."""
    pages: set[int] = set()
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        for line in maps:
            fields = line.split()
            start, end = (int(x, 16) for x in fields[0].split("-"))
            if not fields[1].startswith("rw") or end - start > (256 << 20):
                continue
            try:
                mem.seek(start)
                data = mem.read(end - start)
            except (OSError, ValueError):
                continue
            at = data.find(marker)
            while at != -1:
                pages.add((start + at) // PAGE * PAGE)
                at = data.find(marker, at + 1)
    return sorted(pages)


def page_out(pid: int, pages: list[int]) -> None:
    """Ask the kernel to reclaim `pages` of `pid` now (to swap, as they are
    anonymous)."""
    libc = ctypes.CDLL(None, use_errno=True)

    class Iovec(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

    # Runs of adjacent pages as one range each, so that a larger folio is
    # covered whole.
    runs: list[list[int]] = []
    for page in pages:
        if runs and runs[-1][0] + runs[-1][1] == page:
            runs[-1][1] += PAGE
        else:
            runs.append([page, PAGE])
    vector = (Iovec * len(runs))(*[Iovec(start, length) for start, length in runs])
    pidfd = os.pidfd_open(pid)
    try:
        done = libc.syscall(SYS_PROCESS_MADVISE, pidfd, vector, len(runs), MADV_PAGEOUT, 0)
        if done < 0:
            raise OSError(ctypes.get_errno(), "process_madvise")
    finally:
        os.close(pidfd)


def swapped(pid: int, pages: list[int]) -> int:
    """How many of `pages` are in swap now (bit 62 of their pagemap entry)."""
    count = 0
    with open(f"/proc/{pid}/pagemap", "rb") as pagemap:
        for page in pages:
            pagemap.seek(page // PAGE * 8)
            (entry,) = struct.unpack("<Q", pagemap.read(8))
            count += bool(entry >> 62 & 1)
    return count


class Probe:
    """The hostile tool on a server that makes each instance when its call
    comes (no instances made ahead), one call at a time, so that the next
    call's instance gets the slot the last one used."""

    def __init__(self, setup, reset: str | None):
        setup.add("hostile")
        line = f'memory_reset = "{reset}"\n' if reset else ""
        setup.write_config(f"[server]\nmax_concurrent_calls = 1\nready_instances = 0\n{line}")
        self.raw = RawServer(setup, log="info,toolcage=debug,rmcp=warn")
        self.raw.initialize()
        self.setup = setup

    def stash_and_swap(self, seed: str) -> int:
        """One `stash` call whose marked pages go to swap while it sleeps;
        how many of them were in swap when it ended."""
        raw, marker = self.raw, marker_of(seed)
        raw.next_id += 1
        request_id = raw.next_id
        raw.send(call_request(request_id, "stash", {"seed": seed, "ms": 1500}))
        pages: list[int] = []
        deadline = time.monotonic() + 20
        while not pages and time.monotonic() < deadline:
            time.sleep(0.05)
            pages = pages_holding(raw.proc.pid, marker)
        assert pages, "the stash never showed in the server's memory"
        # The kernel may pass over a page once (one it is still moving
        # between its lists, or part of a larger folio): ask again.
        out = 0
        for _ in range(5):
            page_out(raw.proc.pid, pages)
            out = swapped(raw.proc.pid, pages)
            if out:
                break
            time.sleep(0.05)
        reply = raw.read_response(request_id)
        assert "result" in reply and not reply["result"].get("isError"), reply
        return out

    def snoop(self, seed: str) -> dict:
        result = self.raw.call("snoop", {"seed": seed})
        assert not result.get("isError"), result
        return result["structuredContent"]

    def rounds(self, wanted: int) -> tuple[int, int]:
        """Rounds until `wanted` of them had their pages in swap (at most
        three times as many): (those rounds, how many of their next calls
        found the marker)."""
        reached = leaked = 0
        for i in range(3 * wanted):
            if reached == wanted:
                break
            seed = f"toolcage-memory-reset-probe-{os.getpid()}-{i}"
            if self.stash_and_swap(seed) == 0:
                continue
            reached += 1
            leaked += self.snoop(seed)["found"]
        return reached, leaked


@pytest.mark.parametrize("reset", [None, "full"])
def test_a_fresh_instance_never_reads_an_earlier_calls_swapped_out_memory(setup, tmp_path, reset):
    with swap_on(tmp_path):
        probe = Probe(setup, reset)
        try:
            reached, leaked = probe.rounds(6)
            # A round counts only if its pages really were in swap when
            # the call ended.
            assert reached == 6, f"only {reached} of 18 rounds' pages reached swap"
            assert leaked == 0, f"{leaked} of {reached} fresh instances read the previous call's swapped-out memory"
        finally:
            probe.raw.close()
    assert "memory reset: full" in setup.stderr()


def test_the_probe_sees_what_the_scan_misses(setup, tmp_path):
    """The control: with the scan forced on, the same rounds do leak, so the
    test above would see a leak if there were one."""
    with swap_on(tmp_path):
        probe = Probe(setup, "scan")
        try:
            reached, leaked = probe.rounds(6)
        finally:
            probe.raw.close()
    assert reached == 6, f"only {reached} of 18 rounds' pages reached swap"
    assert leaked >= 1, f"no leak in {reached} rounds: the probe cannot tell a safe reset from an unsafe one"
    assert "memory reset: scan, as server.memory_reset" in setup.stderr()


def test_swap_coming_on_after_start_refuses_every_call(setup, tmp_path):
    if active_swap():
        pytest.skip(f"this machine has swap on already ({', '.join(active_swap())}); the test needs it off at start")
    probe = Probe(setup, None)
    raw = probe.raw
    try:
        assert "memory reset: scan (no swap area is active)" in setup.stderr()
        assert probe.snoop("before")["found"] is False
        with swap_on(tmp_path):
            # The server looks again at most once a second.
            time.sleep(1.2)
            raw.next_id += 1
            raw.send(call_request(raw.next_id, "snoop", {"seed": "during"}))
            reply = raw.read_response(raw.next_id)
        refusal = str(reply)
        assert "swap came on after the server started" in refusal, reply
        assert "restart toolcage" in refusal
        # Swap off again does not undo it: slots reset meanwhile may hold
        # stale pages.
        raw.next_id += 1
        raw.send(call_request(raw.next_id, "snoop", {"seed": "after"}))
        assert "swap came on" in str(raw.read_response(raw.next_id))
        # The server is up and says why.
        assert "tools" in raw.request("tools/list", {})["result"]
    finally:
        raw.close()
    assert "every call is refused from now on" in setup.stderr()
