"""Calls on a stdio session, which the server runs beside rmcp's service
loop (`protocol::session`): what rmcp's loop did around a call must still
happen. A call in flight when the client closes stdin is answered before
the server exits; one still running after the drain does not keep it up; a
cancelled call is never answered, and its id can be used again; a
`roots/list_changed` sent just before a call is seen by that call; a reply
larger than a default pipe goes out without waiting for the client to read."""

from __future__ import annotations

import fcntl
import json
import select
import termios
import time

from conftest import RawServer, call_request, raw_text, read_journal

LONG_CALL = "[tools.slow]\ndeadline_ms = 60000\n"


def test_a_call_in_flight_when_stdin_closes_is_answered_before_exit(setup):
    setup.add("misbehave")
    setup.write_config(LONG_CALL)
    raw = RawServer(setup)
    raw.initialize()
    raw.send(call_request("slow", "slow", {"ms": 1500}))
    rest = raw.close()
    assert raw.proc.returncode == 0, setup.stderr()[-2000:]
    answers = [json.loads(line) for line in rest.splitlines()]
    answer = next((m for m in answers if m.get("id") == "slow"), None)
    assert answer is not None, f"the call was not answered: {rest!r}"
    assert "result" in answer and not answer["result"].get("isError"), answer


def test_a_call_still_running_after_the_drain_does_not_keep_the_server_up(setup, tmp_path):
    setup.add("misbehave")
    log = tmp_path / "journal.jsonl"
    setup.write_config(LONG_CALL + f'[journal]\npath = "{log}"\n')
    raw = RawServer(setup)
    raw.initialize()
    # Far longer than the drain (5 s), within its deadline: only the end
    # of the session stops it. `close` waits up to 30 s for the exit.
    raw.send(call_request("long", "slow", {"ms": 50000}))
    # Answered: the call has started when the ping's answer comes.
    assert "result" in raw.request("ping", {})
    raw.close()
    assert raw.proc.returncode == 0, setup.stderr()[-2000:]
    entries = [e for e in read_journal(log) if e["client"]["request"] == "long"]
    assert [e["outcome"] for e in entries] == ["cancelled"], entries


def test_a_cancelled_call_is_not_answered_and_its_id_can_be_used_again(setup, tmp_path):
    setup.add("misbehave")
    setup.add("time")
    log = tmp_path / "journal.jsonl"
    setup.write_config(LONG_CALL + f'[journal]\npath = "{log}"\n')
    raw = RawServer(setup)
    raw.initialize()
    raw.send(call_request(7, "slow", {"ms": 1000}))
    raw.send(
        {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": 7, "reason": "changed my mind"},
        }
    )
    raw.send(call_request(7, "get_current_time", {"timezone": "UTC"}))
    first = raw.read_response(7)
    assert "UTC" in raw_text(first["result"]), first
    # Longer than the cancelled call would have taken: had it run on, its
    # answer would come before this one.
    raw.send(call_request("later", "slow", {"ms": 1500}))
    raw.read_response("later")
    raw.close()
    answers_to_7 = [line for line in raw.lines if json.loads(line).get("id") == 7]
    assert len(answers_to_7) == 1, answers_to_7
    outcomes = {(e["tool"], e["outcome"]) for e in read_journal(log) if e["client"]["request"] == "7"}
    assert outcomes == {("slow", "cancelled"), ("get_current_time", "ok")}, outcomes


def test_a_call_sent_right_after_roots_list_changed_runs_on_the_new_roots(setup, tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    for folder in (old, new):
        folder.mkdir()
        (folder / "note.txt").write_text(f"in {folder.name}")
    setup.add("fs")
    setup.write_config(f'[defaults]\nroots = [{{ path = "{tmp_path}", mode = "ro" }}]\nconfirm = false\n')
    raw = RawServer(setup)
    raw.initialize(capabilities={"roots": {"listChanged": True}})

    def answer_roots(folder):
        """Answer the server's next `roots/list` with `folder` alone."""
        while True:
            message = raw.read()
            assert message.get("id") != "after", f"answered on the roots it made stale: {message}"
            if message.get("method") == "roots/list":
                raw.send(
                    {
                        "jsonrpc": "2.0",
                        "id": message["id"],
                        "result": {"roots": [{"uri": folder.as_uri(), "name": folder.name}]},
                    }
                )
                return

    answer_roots(old)
    assert raw_text(raw.call("read_text_file", {"path": str(old / "note.txt")})) == "in old"
    # The change and the call in one write: the call must wait for the
    # roots read after the change, and run on them.
    change = {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}
    call = call_request("after", "read_text_file", {"path": str(new / "note.txt")})
    assert raw.proc.stdin is not None
    raw.proc.stdin.write((json.dumps(change) + "\n" + json.dumps(call) + "\n").encode())
    raw.proc.stdin.flush()
    answer_roots(new)
    reply = raw.read_response("after")
    assert raw_text(reply["result"]) == "in new", reply
    refused = raw.call("read_text_file", {"path": str(old / "note.txt")})
    assert refused.get("isError"), refused
    raw.close()
    assert raw.proc.returncode == 0, setup.stderr()[-2000:]


def test_a_large_reply_goes_into_the_pipe_without_waiting_for_the_client(setup, tmp_path):
    """The server grows its stdio pipes (`transport::stdio::PIPE_BYTES`), so
    a reply past Linux's default 64 KiB is written whole while the client
    has not read yet, instead of a pipe's worth per wake-up of the client."""
    folder = tmp_path / "files"
    folder.mkdir()
    text = "".join(f"line {n:06} of a file larger than the default pipe\n" for n in range(3000))
    (folder / "big.txt").write_text(text)
    setup.add("fs")
    setup.write_config(f'[defaults]\nroots = [{{ path = "{folder}", mode = "ro" }}]\n')
    raw = RawServer(setup)
    raw.initialize()
    for pipe in (raw.proc.stdin, raw.proc.stdout):
        assert fcntl.fcntl(pipe.fileno(), fcntl.F_GETPIPE_SZ) >= 256 * 1024

    raw.send(call_request(1, "read_text_file", {"path": str(folder / "big.txt")}))
    # Wait, without reading, until the reply has stopped growing in the pipe.
    stdout = raw.proc.stdout.fileno()
    assert select.select([stdout], [], [], 30)[0], "no reply within 30 s"
    queued, deadline = -1, time.monotonic() + 30
    while time.monotonic() < deadline:
        time.sleep(0.2)
        now = int.from_bytes(fcntl.ioctl(stdout, termios.FIONREAD, b"\0" * 4), "little")
        if now == queued:
            break
        queued = now
    assert queued > 64 * 1024 + len(text) // 2, queued
    reply = raw.read_response(1)
    assert reply["result"]["content"][0]["text"] == text
    raw.close()
    assert raw.proc.returncode == 0, setup.stderr()[-2000:]
