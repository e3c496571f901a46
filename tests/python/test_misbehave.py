"""Guests that misbehave: each limit hit is an error result naming the limit,
and the server keeps serving afterwards."""

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import pytest

from conftest import ERAS, LEGACY, MODERN, session, text_of

pytestmark = pytest.mark.anyio

CONFIG = """
[tools.spin]
fuel = 300000000

[tools.huge_result]
# Enough memory to build 100 MiB, so the result cap is what stops it.
memory_mib = 1024

[tools.sleep_forever]
deadline_ms = 1500
"""


async def still_serving(client):
    result = await client.call_tool("get_current_time", {"timezone": "UTC"})
    assert not result.is_error, text_of(result)


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize(
    "tool,arguments,expected",
    [
        ("spin", {}, "tool `spin` ran out of fuel (limit 300000000)"),
        ("grow_memory", {}, "tool `grow_memory` exceeded its memory limit (limit 128 MiB)"),
        ("recurse", {"stack": "native"}, "tool `recurse` overflowed its stack"),
        ("recurse", {"stack": "linear"}, "tool `recurse` overflowed its stack"),
        ("panic", {"message": "kaboom 42"}, "tool `panic` panicked: kaboom 42"),
        (
            "huge_result",
            {"mib": 100},
            "tool `huge_result` returned a result over the result size limit (limit 16777216 bytes)",
        ),
        ("sleep_forever", {}, "tool `sleep_forever` exceeded its deadline (limit 1500 ms)"),
    ],
)
async def test_limit_hits_are_error_results_that_name_the_limit(setup, era, tool, arguments, expected):
    setup.add("time")
    setup.add("misbehave")
    setup.write_config(CONFIG)
    async with session(setup, era) as client:
        await client.list_tools()
        result = await client.call_tool(tool, arguments)
        assert result.is_error
        assert expected in text_of(result)
        await still_serving(client)
        # The same tool again: a fresh instance, the same clean error.
        again = await client.call_tool(tool, arguments)
        assert again.is_error and expected in text_of(again)


async def test_a_tool_that_writes_to_stdout_cannot_touch_the_protocol(setup):
    from conftest import RawServer

    setup.add("misbehave")
    raw = RawServer(setup)
    raw.initialize()
    raw.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "chatty"}})
    reply = raw.read_response(1)
    assert reply["result"]["content"][0]["text"] == "chatty done"
    raw.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    assert raw.read_response(2)["result"]["tools"]
    raw.close()
    # Every stdout line was one JSON-RPC message (RawServer checks each);
    # the forged reply the guest printed never reached the client.
    assert not any("forged by the guest" in line for line in raw.lines)
    # The output went to the log instead, bounded.
    log = setup.stderr()
    assert "guest output" in log and "forged by the guest" in log
    assert "dropped_bytes" in log


@pytest.mark.parametrize("era", ERAS)
async def test_output_that_breaks_the_output_schema_is_an_error(setup, era):
    setup.add("liar")
    async with session(setup, era) as client:
        await client.list_tools()
        bad = await client.call_tool("bad_output", {})
        assert bad.is_error
        assert "does not match its output schema" in text_of(bad)
        assert "/count" in text_of(bad)
        missing = await client.call_tool("no_structured", {})
        assert missing.is_error and "returned no structured output" in text_of(missing)
        array = await client.call_tool("not_object", {})
        assert array.is_error and "not a JSON object" in text_of(array)


@pytest.mark.parametrize("era", ERAS)
async def test_fifty_concurrent_slow_calls_all_complete_within_the_limit(setup, era):
    setup.add("misbehave")
    setup.write_config("[tools.slow]\nmax_concurrent = 4\n")
    intervals = []
    async with session(setup, era) as client:
        await client.list_tools()

        async def one():
            result = await client.call_tool("slow", {"ms": 100})
            assert not result.is_error, text_of(result)
            intervals.append((result.structured_content["start_ns"], result.structured_content["end_ns"]))

        async with anyio.create_task_group() as group:
            for _ in range(50):
                group.start_soon(one)
    assert len(intervals) == 50
    # The most calls running at any instant, from the guests' own clocks.
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    running = peak = 0
    for _, delta in events:
        running += delta
        peak = max(peak, running)
    assert peak <= 4, f"{peak} calls ran at once; the limit is 4"
    assert peak >= 2, "calls never overlapped; the test did not exercise the limit"


@pytest.mark.parametrize("era", ERAS)
async def test_cancellation_stops_a_running_call_promptly(setup, era):
    setup.add("time")
    setup.add("misbehave")
    # Without cancellation these would run for a minute.
    setup.write_config(
        "[tools.sleep_forever]\ndeadline_ms = 60000\n[tools.spin]\ndeadline_ms = 60000\nfuel = 1000000000000\n"
    )
    async with session(setup, era) as client:
        await client.list_tools()
        for tool in ["sleep_forever", "spin"]:
            with anyio.move_on_after(0.5) as scope:
                await client.call_tool(tool, {})
            assert scope.cancelled_caught
        # Wait (bounded) for the audit records of both cancelled calls.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            log = setup.stderr()
            if all(f"tool `{t}` was cancelled" in log for t in ["sleep_forever", "spin"]):
                break
            await anyio.sleep(0.1)
        log = setup.stderr()
        assert "tool `sleep_forever` was cancelled" in log
        assert "tool `spin` was cancelled" in log
        await still_serving(client)


def epoch_wakeups(pid: int) -> int:
    """How many times the server's epoch ticker thread has slept and woken."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        if (task / "comm").read_text().strip() == "toolcage-epoch":
            for line in (task / "status").read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches:"):
                    return int(line.split()[1])
    raise AssertionError("the server has no epoch ticker thread")


def test_an_idle_server_sleeps_and_still_stops_a_spinning_guest_at_its_deadline(setup):
    """While no guest runs, the epoch ticker parks (it used to wake the
    server 100 times a second); a guest that spins after such a pause still
    yields at every tick, so its deadline still stops it."""
    from conftest import RawServer

    setup.add("time")
    setup.add("misbehave")
    setup.write_config("[tools.spin]\ndeadline_ms = 1000\nfuel = 1000000000000\n")
    raw = RawServer(setup)
    pool = ThreadPoolExecutor(1)
    try:
        raw.initialize()
        assert raw.request("tools/list", {})["result"]["tools"]
        # Past the ticker's idle half minute (the last guest code ran at
        # start-up).
        time.sleep(32)
        before = epoch_wakeups(raw.proc.pid)
        time.sleep(2)
        # Ticking, the thread wakes about 200 times in two seconds; parked,
        # at most once (it checks every 5 s that its engine still exists).
        assert epoch_wakeups(raw.proc.pid) - before <= 5
        # Bounded: a guest that never yields would hold the call forever.
        result = pool.submit(raw.call, "spin", {}).result(timeout=60)
        assert result["isError"]
        assert "tool `spin` exceeded its deadline (limit 1000 ms)" in result["content"][0]["text"]
        # And a call after it is served as usual.
        assert not raw.call("get_current_time", {"timezone": "UTC"})["isError"]
    finally:
        # Killed first, so a call still waiting for its reply ends too.
        raw.proc.kill()
        raw.proc.wait(timeout=30)
        pool.shutdown()


@pytest.mark.parametrize("era", [LEGACY, MODERN])
async def test_guest_logs_and_progress_reach_the_client(setup, era):
    setup.add("misbehave")
    logs, progress = [], []

    async def on_log(params):
        logs.append((params.level, params.data))

    async def on_progress(done, total, message):
        progress.append((done, total, message))

    async with session(setup, era, logging_callback=on_log, log_level="info") as client:
        await client.list_tools()
        result = await client.call_tool(
            "echo", {"text": "hello", "progress_steps": 3}, progress_callback=on_progress
        )
        assert not result.is_error, text_of(result)
        # The sandbox showed the tool nothing of the host.
        assert result.structured_content == {"text": "hello", "env_count": 0, "sees_root": False}
        with anyio.fail_after(10):
            while len(progress) < 3 or len(logs) < 2:
                await anyio.sleep(0.05)
    assert progress == [(1.0, 3.0, "step 1"), (2.0, 3.0, "step 2"), (3.0, 3.0, "step 3")]
    # info and warning pass the client's level; debug does not.
    assert ("info", "info: hello") in logs
    assert ("warning", "warning: hello") in logs
    assert not any(level == "debug" for level, _ in logs)
