"""Tasks in a fleet: three replicas sharing their tasks through a real
Redis server (`[tasks] store_url`), so a client polling through a
round-robin balancer reaches its task from any replica. Each test talks
to the replicas directly (which one answers is then known), or through
nginx configured not to route tasks home (as a Kubernetes Service
cannot). The task's call runs where it started;
the others read its record, and send `tasks/update` and `tasks/cancel`
to it."""

from __future__ import annotations

import os
import signal

import anyio
import pytest
from mcp import MCPError

from conftest import MODERN, http_session, until
from fleet import Fleet, Redis
from test_tasks import (
    TASKS,
    CreatedTask,
    TasksExtension,
    cancel_task,
    get_task,
    never_asked,
    update_task,
    wait_for,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def redis(tmp_path):
    server = Redis(tmp_path)
    yield server
    server.stop()


@pytest.fixture
def fleet(tmp_path, cache_dir, redis):
    f = Fleet(tmp_path, cache_dir, ["conformance"], extra_config=f'\n[tasks]\nstore_url = "{redis.url}"\n')
    yield f
    f.stop()


def on(replica_or_url, **kwargs):
    """A 2026-07-28 session that declares the tasks extension, with one
    replica (or the balancer's URL)."""
    url = replica_or_url if isinstance(replica_or_url, str) else f"http://127.0.0.1:{replica_or_url.port}/mcp"
    extension = TasksExtension()
    kwargs.setdefault("elicitation_callback", never_asked)
    return http_session(url, MODERN, extensions={TASKS: {}}, result_claims={TASKS: list(extension.claims())}, **kwargs)


async def start(replica, tool, arguments) -> str:
    async with on(replica) as client:
        created = await client.call_tool(tool, arguments, allow_claimed=True)
    assert isinstance(created, CreatedTask), created
    assert created.task_id.startswith(replica.name + ".")
    return created.task_id


def task_lines(replica, task_id):
    return [line for line in replica.journal_lines() if line.get("task") == task_id]


async def test_every_replica_reads_a_task_and_cancels_it_where_it_runs(fleet):
    r1, r2, r3 = fleet.replicas
    task = await start(r1, "slow_compute", {"seconds": 60, "label": "shared"})
    # Its progress, read on another replica.
    async with on(r2) as client:
        with anyio.fail_after(20):
            while True:
                state = await get_task(client, task)
                if (state.status_message or "").startswith("computing shared"):
                    break
                await anyio.sleep(0.1)
        assert state.status == "working"
    # Cancelled from a third: the call stops on the first.
    async with on(r3) as client:
        ack = await cancel_task(client, task)
        assert ack.model_dump(exclude_none=True) == {"resultType": "complete"}
    async with on(r2) as client:
        state = await wait_for(client, task, {"cancelled", "completed", "failed"}, timeout=20)
        assert state.status == "cancelled"
    await until(lambda: any(l.get("outcome") == "cancelled" for l in task_lines(r1, task)))
    await until(lambda: any(l.get("status") == "cancelled" for l in task_lines(r1, task)))
    assert task_lines(r2, task) == [] and task_lines(r3, task) == []


async def test_a_result_and_the_answers_to_a_tasks_questions_cross_replicas(fleet):
    r1, r2, r3 = fleet.replicas
    quick = await start(r1, "slow_compute", {"seconds": 0, "label": "quick"})
    async with on(r3) as client:
        done = await wait_for(client, quick, {"completed"})
    assert done.result["content"][0]["text"] == "Computed quick after 0 s"
    asking = await start(r1, "multi_input", {})
    async with on(r2) as client:
        state = await wait_for(client, asking, {"input_required"})
        with anyio.fail_after(10):
            while len(state.input_requests or {}) < 2:
                state = await get_task(client, asking)
                await anyio.sleep(0.05)
        assert set(state.input_requests) == {"first", "second"}
    # One answer through r3, the other through r2; both reach r1's call.
    async with on(r3) as client:
        await update_task(client, asking, {"first": {"action": "accept", "content": {"name": "one"}}})
    async with on(r2) as client:
        with anyio.fail_after(10):
            while set((state := await get_task(client, asking)).input_requests or {}) != {"second"}:
                await anyio.sleep(0.05)
        await update_task(client, asking, {"second": {"action": "decline"}})
        state = await wait_for(client, asking, {"completed"})
    assert "one" in str(state.result) and "action=decline" in str(state.result)


async def test_a_task_whose_replica_died_reads_as_failed_elsewhere(fleet):
    r1, r2, _ = fleet.replicas
    task = await start(r1, "slow_compute", {"seconds": 60, "label": "doomed"})
    async with on(r2) as client:
        assert (await get_task(client, task)).status == "working"
        r1.kill()
        state = await wait_for(client, task, {"failed"}, timeout=30)
    assert state.error["message"] == "the replica running this task stopped before it finished"


async def test_forged_ids_are_unknown_on_every_replica(fleet):
    for replica in fleet.replicas:
        async with on(replica) as client:
            for forged in ["r1." + "0" * 32, "r9.abc", "x" * 10_000, "a:b", "*"]:
                with pytest.raises(MCPError) as refused:
                    await get_task(client, forged)
                assert refused.value.error.code == -32602 and "unknown task" in refused.value.error.message


async def test_a_balancer_that_does_not_route_tasks_still_reaches_them(tmp_path, cache_dir, redis):
    (tmp_path / "plain").mkdir()
    fleet = Fleet(
        tmp_path / "plain",
        cache_dir,
        ["conformance"],
        extra_config=f'\n[tasks]\nstore_url = "{redis.url}"\n',
        route_tasks=False,
    )
    try:
        task = await start(fleet.replicas[0], "slow_compute", {"seconds": 2, "label": "polled"})
        async with on(fleet.url) as client:
            state = await wait_for(client, task, {"completed", "failed", "cancelled"})
        assert state.status == "completed"
        # Polled round-robin: answered by more than the replica running it.
        assert len(set(fleet.upstreams("tasks/get"))) == 3, fleet.upstreams("tasks/get")
    finally:
        fleet.stop()


async def test_without_the_store_a_task_is_unknown_elsewhere_and_clear_when_redis_is_down(tmp_path, cache_dir, redis):
    (tmp_path / "lone").mkdir()
    (tmp_path / "shared").mkdir()
    lone = Fleet(tmp_path / "lone", cache_dir, ["conformance"])
    try:
        task = await start(lone.replicas[0], "slow_compute", {"seconds": 0, "label": "x"})
        async with on(lone.replicas[1]) as client:
            with pytest.raises(MCPError) as unknown:
                await get_task(client, task)
            assert unknown.value.error.code == -32602
    finally:
        lone.stop()
    shared = Fleet(tmp_path / "shared", cache_dir, ["conformance"], extra_config=f'\n[tasks]\nstore_url = "{redis.url}"\n')
    try:
        r1, r2, _ = shared.replicas
        task = await start(r1, "slow_compute", {"seconds": 0, "label": "kept"})
        redis.stop()
        async with on(r2) as client:
            with pytest.raises(MCPError) as down:
                await get_task(client, task)
            assert down.value.error.code == -32603 and "task store cannot be reached" in down.value.error.message
        async with on(r1) as client:
            # Held here, it is answered here; a new task cannot be shared,
            # so it is cancelled at once.
            assert (await get_task(client, task)).status == "completed"
            with pytest.raises(MCPError) as refused:
                await client.call_tool("slow_compute", {"seconds": 0, "label": "y"}, allow_claimed=True)
            assert "task store cannot be reached" in refused.value.error.message
            assert "the task was cancelled" in refused.value.error.message
        # Down long enough for every reconnection attempt to have failed;
        # then back (empty) on the same port: the replicas reconnect by
        # themselves, and the first request to each succeeds.
        await anyio.sleep(3)
        redis.start()
        with anyio.fail_after(30):
            while True:
                try:
                    again = await start(r1, "slow_compute", {"seconds": 0, "label": "again"})
                    break
                except MCPError:
                    await anyio.sleep(0.5)
        async with on(r2) as client:
            assert (await wait_for(client, again, {"completed"})).status == "completed"
    finally:
        shared.stop()


async def test_commands_waiting_for_a_replica_that_does_not_take_them_are_bounded(fleet, redis):
    r1, r2, _ = fleet.replicas
    done = await start(r1, "slow_compute", {"seconds": 0, "label": "done"})
    asking = await start(r1, "multi_input", {})
    async with on(r2) as client:
        await wait_for(client, done, {"completed"})
        await wait_for(client, asking, {"input_required"})

    def inboxes():
        return {k.decode(): redis.command("LLEN", k.decode()) for k in redis.command("KEYS", "toolcage:inbox:*")}

    def waiting_bytes():
        counts = redis.command("KEYS", "toolcage:inbox-bytes:*")
        return sum(int(redis.command("GET", k.decode())) for k in counts)

    os.kill(r1.proc.pid, signal.SIGSTOP)  # alive, but taking nothing
    try:
        async with on(r2) as client:
            # A task that ended takes no cancel and no answers: nothing is sent.
            for _ in range(20):
                await cancel_task(client, done)
                await update_task(client, done, {"x": {"action": "decline"}})
            assert inboxes() == {}
            # Answers to a question nobody asked, 1 MiB each: refused, with a
            # clear message, once 64 MiB wait.
            big = {"nope": {"action": "accept", "content": {"v": "x" * (1 << 20)}}}
            sent = 0
            with pytest.raises(MCPError) as full:
                while sent < 100:
                    await update_task(client, asking, big)
                    sent += 1
            assert "retry shortly" in full.value.error.message, full.value.error.message
            assert 60 <= sent < 64
            assert list(inboxes().values()) == [sent]
            assert sent << 20 < waiting_bytes() <= 64 << 20
    finally:
        os.kill(r1.proc.pid, signal.SIGCONT)
    # r1 takes what waited (an answer to no question changes nothing), and
    # its inbox and count are gone with the last command.
    await until(lambda: inboxes() == {} and waiting_bytes() == 0, timeout=30)

    os.kill(r1.proc.pid, signal.SIGSTOP)
    try:
        async with on(r2) as client:
            small = {"nope": {"action": "decline"}}
            for _ in range(1024):
                await update_task(client, asking, small)
            with pytest.raises(MCPError) as full:
                await update_task(client, asking, small)
            assert "1024 commands" in full.value.error.message
            assert list(inboxes().values()) == [1024]
    finally:
        os.kill(r1.proc.pid, signal.SIGCONT)
    await until(lambda: inboxes() == {} and waiting_bytes() == 0, timeout=30)
    # The task still waits for its real answers, and finishes with them.
    async with on(r2) as client:
        with anyio.fail_after(30):
            while len((await get_task(client, asking)).input_requests or {}) < 2:
                await anyio.sleep(0.05)
        answers = {"first": {"action": "accept", "content": {"name": "one"}}, "second": {"action": "decline"}}
        await update_task(client, asking, answers)
        state = await wait_for(client, asking, {"completed"})
    assert "one" in str(state.result)
