"""Calls that overlap, over stdio, in both of its thread layouts: a
multi-thread runtime, each call its own task (the default where the server
may use several CPUs), and `stdio.one_thread` (the default on one CPU: one thread reads and answers requests and runs a lone
call itself; a call that runs long moves to the worker threads at its first
yield, and calls that overlap it run there: `runtime/src/dispatch/lanes.rs`).
Whatever runs, a quick request is still read and answered: no guest holds
the serving thread."""

import os
import time
from pathlib import Path

import pytest

from conftest import RawServer, call_request, read_journal

LAYOUTS = ["pool", "one_thread"]


def configure(setup, layout: str, extra: str = "", deadline_ms: int = 4000) -> None:
    stdio = f"[stdio]\none_thread = {'true' if layout == 'one_thread' else 'false'}\n"
    setup.write_config(CONFIG.format(deadline_ms=deadline_ms) + extra + stdio)


def start_spinning_server(setup, layout: str, extra: str = "", deadline_ms: int = 4000) -> RawServer:
    setup.add("time")
    setup.add("misbehave")
    configure(setup, layout, extra, deadline_ms)
    raw = RawServer(setup, log=LOG)
    raw.initialize()
    return raw


def thread_names(raw: RawServer) -> set:
    return {Path(t, "comm").read_text().strip() for t in Path(f"/proc/{raw.proc.pid}/task").iterdir()}

# Long calls end by their deadline; fuel is not what stops them.
CONFIG = """
[tools.spin]
fuel = 1000000000000
deadline_ms = {deadline_ms}
"""

LOG = "info,toolcage::dispatch=debug,rmcp=warn"


def wait_running(setup, tool: str, count: int) -> None:
    """Until the log says `count` calls of `tool` got their permits."""
    needle = f"tool={tool}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        running = [line for line in setup.stderr().splitlines() if "call running" in line and needle in line]
        if len(running) >= count:
            return
        time.sleep(0.02)
    raise AssertionError(f"{count} calls of {tool} never started:\n{setup.stderr()[-3000:]}")


def replies_in_order(raw: RawServer, ids: set) -> list:
    """Read until every id in `ids` has its reply; the ids in arrival order."""
    order = []
    while len(order) < len(ids):
        message = raw.read()
        if message.get("id") in ids and ("result" in message or "error" in message):
            order.append((message["id"], message))
    return order


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_layout_is_the_one_configured(setup, layout):
    setup.add("time")
    configure(setup, layout)
    raw = RawServer(setup, log=LOG)
    raw.initialize()
    assert not raw.call("get_current_time", {"timezone": "UTC"}).get("isError")
    names = thread_names(raw)
    if layout == "one_thread":
        assert {"toolcage-serve", "toolcage-call"} <= names, names
    else:
        assert not {"toolcage-serve", "toolcage-call"} & names, names
    raw.close()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to tell the defaults apart")
def test_by_default_one_thread_serves_exactly_when_one_cpu_is_usable(setup):
    setup.add("time")
    cpus = os.sched_getaffinity(0)
    layouts = {}
    for name, allowed in [("all", cpus), ("one", {min(cpus)})]:
        # The server inherits this process's affinity mask.
        os.sched_setaffinity(0, allowed)
        try:
            raw = RawServer(setup, log=LOG)
        finally:
            os.sched_setaffinity(0, cpus)
        raw.initialize()
        assert not raw.call("get_current_time", {"timezone": "UTC"}).get("isError")
        layouts[name] = "toolcage-serve" in thread_names(raw)
        raw.close()
    assert layouts == {"all": False, "one": True}, layouts


@pytest.mark.parametrize("layout", LAYOUTS)
def test_requests_after_a_lone_long_call_are_served_as_if_it_were_not_there(setup, layout):
    raw = start_spinning_server(setup, layout)
    # With one thread the spinning call is alone, so it starts on the
    # serving thread, and moves off it at its first yield. Two hundred
    # requests one after another are then answered before it ends: a guest
    # that held the serving thread (never yielding there) would keep every
    # one of them waiting until its deadline.
    raw.send(call_request(1, "spin", {}))
    wait_running(setup, "spin", 1)
    raw.next_id = 100
    for i in range(200):
        if i % 2:
            reply = raw.request("tools/list", {})
            assert reply["result"]["tools"], reply
        else:
            result = raw.call("get_current_time", {"timezone": "UTC"})
            assert not result.get("isError"), result
    # None of those read the spin's reply; it still ends by its own
    # deadline where it moved to.
    assert not any('"id":1,' in line.replace(" ", "") for line in raw.lines), raw.lines[-3:]
    spin = raw.read_response(1)["result"]
    assert spin["isError"] and "exceeded its deadline (limit 4000 ms)" in spin["content"][0]["text"], spin
    raw.close()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_quick_calls_are_answered_while_more_long_calls_than_cores_spin(setup, layout):
    raw = start_spinning_server(setup, layout)
    spins = set(range(1, 6))
    for i in spins:
        raw.send(call_request(i, "spin", {}))
    wait_running(setup, "spin", len(spins))
    quick = set(range(10, 30))
    for i in quick:
        raw.send(call_request(i, "get_current_time", {"timezone": "UTC"}))
    order = replies_in_order(raw, spins | quick)
    ids = [i for i, _ in order]
    first_spin = min(ids.index(i) for i in spins)
    assert all(ids.index(i) < first_spin for i in quick), ids
    for i, message in order:
        result = message["result"]
        if i in quick:
            assert not result.get("isError"), result
        else:
            assert result["isError"] and "exceeded its deadline" in result["content"][0]["text"], result
    raw.close()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_cancelled_long_call_is_stopped_and_journaled(setup, tmp_path, layout):
    log = tmp_path / "journal.jsonl"
    # Without cancellation it would spin for a minute.
    raw = start_spinning_server(setup, layout, f'\n[journal]\npath = "{log}"\n', deadline_ms=60_000)
    raw.send(call_request(1, "spin", {}))
    wait_running(setup, "spin", 1)
    raw.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
    raw.next_id = 100
    # The server is not held up: the next call is answered, on a fresh
    # instance, and the cancelled one is in the journal as cancelled.
    assert not raw.call("get_current_time", {"timezone": "UTC"}).get("isError")
    raw.close()
    outcomes = {e["tool"]: e["outcome"] for e in read_journal(log)}
    assert outcomes == {"spin": "cancelled", "get_current_time": "ok"}, outcomes


def test_resources_and_prompts_are_served_on_one_thread(setup):
    # They run on the worker threads (`Lanes::pooled`); the replies are the
    # same as in the default layout (test_resources_prompts.py).
    setup.add("conformance")
    setup.write_config("[stdio]\none_thread = true\n")
    raw = RawServer(setup, log=LOG)
    raw.initialize()
    text = raw.request("resources/read", {"uri": "test://static-text"})
    assert text["result"]["contents"][0]["text"], text
    templated = raw.request("resources/read", {"uri": "test://template/123/data"})
    assert "123" in templated["result"]["contents"][0]["text"], templated
    prompt = raw.request("prompts/get", {"name": "test_simple_prompt"})
    assert prompt["result"]["messages"], prompt
    unknown = raw.request("resources/read", {"uri": "test://no-such"})
    assert unknown["error"]["code"] == -32602, unknown
    assert "toolcage-serve" in thread_names(raw)
    raw.close()
