"""Hardening: no tool, descriptor or client can crash, freeze, starve or flood
the server, and no record is lost. Each test plays the attacker (a hostile
component, a hostile client) and checks that the server stays up, that the
next normal call answers, that the bad case gets a clean error naming the
limit, and, where memory is the target, that peak memory stays bounded."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import LEGACY, RawServer, read_journal

# --- The journal loses nothing at exit ----------------------------------------


def busy_cores(n: int = 2) -> list[subprocess.Popen]:
    """Processes that keep the CPUs busy, so the server's journal writer is
    starved the way it is on a loaded machine."""
    return [subprocess.Popen(["python3", "-c", "while True: pass"]) for _ in range(n)]


def call(request_id, name: str, arguments: dict) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


@pytest.mark.parametrize("ending", ["stdin-eof", "sigterm", "sigint"])
def test_every_answered_call_is_in_the_journal_after_exit_under_load(setup, tmp_path, ending):
    setup.add("time")
    log = tmp_path / "journal.jsonl"
    setup.write_config(f'[journal]\npath = "{log}"\n')
    hogs = busy_cores()
    try:
        raw = RawServer(setup)
        raw.initialize()
        calls = 300
        for i in range(calls):
            raw.send(call(i, "get_current_time", {"timezone": "UTC"}))
        # Replies come in the order the calls finish, not the order sent.
        answered = set()
        while len(answered) < calls:
            message = raw.read()
            if "id" in message and "result" in message:
                answered.add(message["id"])
        assert answered == set(range(calls))
        # Every call has been answered; end the process at once.
        if ending == "stdin-eof":
            raw.close()
        else:
            raw.proc.send_signal(signal.SIGTERM if ending == "sigterm" else signal.SIGINT)
            raw.proc.wait(timeout=30)
            raw.stderr.close()
        assert raw.proc.returncode == 0, setup.stderr()[-2000:]
    finally:
        for hog in hogs:
            hog.kill()
    entries = read_journal(log)
    assert len(entries) == calls, f"{len(entries)} of {calls} lines"
    assert {e["client"]["request"] for e in entries} == {str(i) for i in range(calls)}
    assert all(e["outcome"] == "ok" for e in entries)


def test_calls_running_at_sigterm_are_journaled_as_cancelled(setup, tmp_path):
    setup.add("misbehave")
    log = tmp_path / "journal.jsonl"
    setup.write_config(f'[journal]\npath = "{log}"\n')
    raw = RawServer(setup)
    raw.initialize()
    for i in range(3):
        request = call(i, "slow", {"ms": 60_000})
        request["params"]["_meta"] = {"progressToken": f"p{i}"}
        raw.send(request)
    # Each guest reports progress as it starts: all three are running.
    started = set()
    while len(started) < 3:
        message = raw.read()
        if message.get("method") == "notifications/progress":
            started.add(message["params"]["progressToken"])
    raw.proc.send_signal(signal.SIGTERM)
    # It exits without waiting for the 60 s calls to end.
    raw.proc.wait(timeout=30)
    raw.stderr.close()
    assert raw.proc.returncode == 0, setup.stderr()[-2000:]
    entries = read_journal(log)
    assert [e["outcome"] for e in entries] == ["cancelled"] * 3, entries
    assert all("shut down" in e["message"] for e in entries), entries
