"""MCP tasks (`io.modelcontextprotocol/tasks`, protocol 2026-07-28): a
long-running call answered at once with a task, polled to its end through
the official Python SDK; and the bad inputs: forged, foreign and expired
ids, cancelling what already ended, a client that makes tasks without
end, and tasks whose tool traps, runs out of fuel or misses its deadline.

The SDK carries the extension's wire (capabilities in `_meta`, `Mcp-Name`
for `tasks/*`, the claimed `resultType: "task"`); the client side of the
extension (poll until the task ends) is `TasksExtension` below, written
against the SDK's own extension interface."""

from __future__ import annotations

import json
from typing import Any, Literal

import anyio
import pytest
import mcp.types as types
from mcp import Client, MCPError
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from pydantic import ConfigDict

from conftest import MODERN, HttpServer, read_journal, session, text_of, until
from test_http import META, post

pytestmark = pytest.mark.anyio

TASKS = "io.modelcontextprotocol/tasks"


# --- The client side of the extension, on the SDK's extension interface ----


class TaskParams(types.RequestParams):
    task_id: str


class UpdateParams(TaskParams):
    input_responses: dict[str, Any]


class TasksGet(types.Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    name_param = "taskId"


class TasksUpdate(types.Request[UpdateParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    name_param = "taskId"


class TasksCancel(types.Request[TaskParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    name_param = "taskId"


class CreatedTask(types.Result):
    """`tools/call`'s answer when it makes a task."""

    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None


class TaskState(types.Result):
    """What `tasks/get` says."""

    model_config = ConfigDict(extra="allow")
    task_id: str
    status: str
    status_message: str | None = None
    input_requests: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class Ack(types.Result):
    model_config = ConfigDict(extra="allow")


async def get_task(session, task_id: str) -> TaskState:
    return await session.send_request(TasksGet(params=TaskParams(task_id=task_id)), TaskState)


async def cancel_task(session, task_id: str) -> Ack:
    return await session.send_request(TasksCancel(params=TaskParams(task_id=task_id)), Ack)


async def update_task(session, task_id: str, responses: dict) -> Ack:
    return await session.send_request(
        TasksUpdate(params=UpdateParams(task_id=task_id, input_responses=responses)), Ack
    )


async def wait_for(session, task_id: str, statuses: set[str], timeout: float = 60) -> TaskState:
    with anyio.fail_after(timeout):
        while True:
            state = await get_task(session, task_id)
            if state.status in statuses:
                return state
            await anyio.sleep(0.05)


class TasksExtension(ClientExtension):
    """Declares the tasks extension, and resolves a `task` result by polling
    `tasks/get` until it ends: `call_tool` then returns the call's own
    result, as for a call answered in its request."""

    identifier = TASKS

    def __init__(self):
        self.created: list[CreatedTask] = []

    def claims(self):
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=self.resolve)]

    async def resolve(self, created: CreatedTask, ctx: ClaimContext) -> types.CallToolResult:
        self.created.append(created)
        state = await wait_for(ctx.session, created.task_id, {"completed", "failed", "cancelled"})
        if state.status != "completed":
            raise RuntimeError(f"task {created.task_id} ended {state.status}: {state.error}")
        return types.CallToolResult.model_validate(state.result)


async def never_asked(_ctx, params):
    raise AssertionError(f"a 2026-07-28 client is never sent a request: {params}")


def tasks_session(setup, extension: TasksExtension | None = None, **kwargs):
    """A 2026-07-28 session that declares the tasks extension (and
    elicitation, which it answers through the task, never by a request)."""
    extension = extension or TasksExtension()
    kwargs.setdefault("elicitation_callback", never_asked)
    return session(
        setup,
        MODERN,
        extensions={TASKS: {}},
        result_claims={TASKS: list(extension.claims())},
        **kwargs,
    )


# --- A long-running tool, end to end ---------------------------------------


async def test_a_slow_computation_runs_as_a_task_end_to_end(setup, tmp_path):
    setup.add("conformance")
    journal = tmp_path / "journal.jsonl"
    setup.write_config(f'[journal]\npath = "{journal}"\n')
    extension = TasksExtension()
    # The SDK's high-level client resolves the claimed result through the
    # extension: `call_tool` returns the call's own result.
    async with Client(setup.params(), extensions=[extension], mode=MODERN, read_timeout_seconds=120) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert listed["slow_compute"].meta[TASKS] == {"taskSupport": "optional"}
        assert listed["test_tool_with_task"].meta[TASKS] == {"taskSupport": "required"}
        assert not (listed["greet"].meta or {}).get(TASKS)
        # A call that answers in its request stays one.
        greeting = await client.call_tool("greet", {"name": "Ada"})
        assert text_of(greeting) == "Hello, Ada!"
        assert extension.created == []
        # The slow one is answered at once with a task, and polled to its end.
        result = await client.call_tool("slow_compute", {"seconds": 1.5, "label": "sums"})
        assert not result.is_error, text_of(result)
        assert text_of(result) == "Computed sums after 1.5 s"
    [created] = extension.created
    assert created.status == "working"
    assert created.ttl_ms == 3_600_000 and created.poll_interval_ms == 500
    await until(lambda: sum(1 for l in read_journal(journal) if l.get("task") == created.task_id) == 3)
    lines = [l for l in read_journal(journal) if l.get("task") == created.task_id]
    events = [(l.get("event"), l.get("status") or l.get("outcome")) for l in lines]
    assert ("task", "created") in events and ("task", "completed") in events, events
    [call] = [l for l in lines if "outcome" in l]
    assert call["tool"] == "slow_compute" and call["outcome"] == "ok", call
    assert call["duration_ms"] >= 1500


async def test_task_progress_is_its_status_message_and_cancel_stops_it(setup):
    setup.add("conformance")
    async with tasks_session(setup) as client:
        created = await client.call_tool(
            "slow_compute", {"seconds": 60, "label": "long"}, allow_claimed=True
        )
        assert isinstance(created, CreatedTask)
        state = await wait_for(client, created.task_id, {"working"})
        with anyio.fail_after(20):
            while not (state.status_message or "").startswith("computing long"):
                state = await get_task(client, created.task_id)
        ack = await cancel_task(client, created.task_id)
        assert ack.model_dump(exclude_none=True) == {"resultType": "complete"}
        state = await get_task(client, created.task_id)
        assert state.status == "cancelled" and state.result is None and state.error is None
        # Cancelling what already ended is the same acknowledgment, and
        # changes nothing.
        await cancel_task(client, created.task_id)
        assert (await get_task(client, created.task_id)).status == "cancelled"
        done = await client.call_tool("slow_compute", {"seconds": 0, "label": "quick"}, allow_claimed=True)
        finished = await wait_for(client, done.task_id, {"completed"})
        await cancel_task(client, done.task_id)
        again = await get_task(client, done.task_id)
        assert again.status == "completed" and again.result == finished.result


async def test_questions_inside_a_task_wait_for_tasks_update(setup):
    setup.add("conformance")
    async with tasks_session(setup) as client:
        created = await client.call_tool("multi_input", {}, allow_claimed=True)
        state = await wait_for(client, created.task_id, {"input_required"})
        with anyio.fail_after(10):
            while len(state.input_requests or {}) < 2:
                state = await get_task(client, created.task_id)
        assert set(state.input_requests) == {"first", "second"}
        assert all(r["method"] == "elicitation/create" for r in state.input_requests.values())
        # Unknown keys are ignored; a partial answer leaves the rest asked.
        await update_task(
            client,
            created.task_id,
            {"first": {"action": "accept", "content": {"name": "one"}}, "nonsense": {"x": 1}},
        )
        state = await get_task(client, created.task_id)
        assert state.status == "input_required" and set(state.input_requests) == {"second"}
        await update_task(client, created.task_id, {"second": {"action": "decline"}})
        state = await wait_for(client, created.task_id, {"completed"})
        assert "name" in json.dumps(state.result) and "action=decline" in json.dumps(state.result)


async def test_a_tool_asks_in_its_request_then_begins_its_task(setup):
    setup.add("conformance")
    async with tasks_session(setup) as client:
        first = await client.call_tool("test_tool_with_task", {}, allow_input_required=True, allow_claimed=True)
        assert isinstance(first, types.InputRequiredResult)
        assert set(first.input_requests) == {"user_name"}
        created = await client.call_tool(
            "test_tool_with_task",
            {},
            input_responses={"user_name": {"action": "accept", "content": {"name": "Grace"}}},
            request_state=first.request_state,
            allow_claimed=True,
        )
        assert isinstance(created, CreatedTask), created
        state = await wait_for(client, created.task_id, {"completed", "failed", "cancelled"})
        assert state.status == "completed", state
        assert "Grace" in json.dumps(state.result)


# --- Bad inputs -----------------------------------------------------------------


async def test_forged_and_expired_ids_are_unknown(setup):
    setup.add("conformance")
    setup.write_config("[tasks]\nttl_ms = 1000\n\n[defaults]\ntask_deadline_ms = 1000\n")
    async with tasks_session(setup) as client:
        for forged in ["tasks-nonexistent", "0" * 32, "x" * 10_000]:
            with pytest.raises(MCPError) as refused:
                await get_task(client, forged)
            assert refused.value.error.code == -32602 and "unknown task" in refused.value.error.message
            assert len(refused.value.error.message) < 400
        created = await client.call_tool("slow_compute", {"seconds": 0, "label": "x"}, allow_claimed=True)
        await wait_for(client, created.task_id, {"completed"})
        await anyio.sleep(1.2)
        for request in (get_task, cancel_task):
            with pytest.raises(MCPError) as expired:
                await request(client, created.task_id)
            assert expired.value.error.code == -32602


async def test_a_task_still_running_at_its_time_to_live_is_cancelled(setup, tmp_path):
    setup.add("conformance")
    journal = tmp_path / "journal.jsonl"
    setup.write_config(
        f'[journal]\npath = "{journal}"\n\n[tasks]\nttl_ms = 2000\n\n[defaults]\ntask_deadline_ms = 2000\n'
    )
    async with tasks_session(setup) as client:
        created = await client.call_tool("slow_compute", {"seconds": 60, "label": "x"}, allow_claimed=True)
        await anyio.sleep(2.3)
        with pytest.raises(MCPError):
            await get_task(client, created.task_id)
    await until(lambda: any(l.get("status") == "expired" for l in read_journal(journal)))


@pytest.mark.parametrize(
    "tool,config,words",
    [
        ("protocol_error_job", "", "panicked: the job crashed"),
        ("slow_compute", "[tools.slow_compute]\ntask_deadline_ms = 300\n", "deadline (limit 300 ms)"),
        ("spin", '[tools.spin]\ntasks = "optional"\nfuel = 1000000\n', "ran out of fuel"),
    ],
)
async def test_a_task_whose_tool_traps_runs_out_of_fuel_or_time_fails(setup, tool, config, words):
    setup.add("conformance")
    setup.add("misbehave")
    setup.write_config(config)
    async with tasks_session(setup) as client:
        created = await client.call_tool(tool, {"seconds": 5, "label": "x"} if tool == "slow_compute" else {}, allow_claimed=True)
        assert isinstance(created, CreatedTask)
        state = await wait_for(client, created.task_id, {"completed", "failed", "cancelled"})
        assert state.status == "failed", state
        assert state.error["code"] == -32603 and words in state.error["message"], state.error
        assert state.result is None
        # The server serves on.
        assert text_of(await client.call_tool("greet", {"name": "x"})) == "Hello, x!"


async def test_a_tool_error_completes_its_task_with_is_error(setup):
    setup.add("conformance")
    async with tasks_session(setup) as client:
        created = await client.call_tool("failing_job", {}, allow_claimed=True)
        state = await wait_for(client, created.task_id, {"completed", "failed", "cancelled"})
        assert state.status == "completed" and state.result["isError"] is True


async def test_a_task_only_tool_is_refused_without_the_extension(setup):
    setup.add("conformance")
    async with session(setup, MODERN) as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("failing_job", {})
        assert refused.value.error.code == -32021
        assert refused.value.error.data["requiredCapabilities"]["extensions"] == {TASKS: {}}
        # An optional one runs in its request.
        result = await client.call_tool("slow_compute", {"seconds": 0, "label": "sync"})
        assert text_of(result) == "Computed sync after 0 s"
        # And tasks/* need the extension too.
        with pytest.raises(MCPError) as gated:
            await get_task(client, "anything")
        assert gated.value.error.code == -32021


async def test_ten_thousand_tasks_from_one_client_are_bounded(setup):
    """A client that makes tasks without end gets its first
    `tasks.max_per_client` and then a clear refusal for every other; the
    server answers the others at once and keeps serving."""
    setup.add("conformance")
    setup.write_config("[tasks]\nmax_per_client = 50\n")
    server = HttpServer(setup)
    try:
        meta = {**META, "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}}}
        headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "slow_compute"}
        created, refused = [], 0

        def one(i):
            body = {
                "jsonrpc": "2.0",
                "id": i,
                "method": "tools/call",
                "params": {"name": "slow_compute", "arguments": {"seconds": 600, "label": str(i)}, "_meta": meta},
            }
            return post(server.url, body, headers)

        async def worker(ids):
            nonlocal refused
            for i in ids:
                status, _, text = await anyio.to_thread.run_sync(one, i)
                reply = json.loads(text)
                if "result" in reply:
                    assert reply["result"]["resultType"] == "task", reply
                    created.append(reply["result"]["taskId"])
                else:
                    assert "50 tasks" in reply["error"]["message"] and "max_per_client" in reply["error"]["message"], reply
                    refused += 1

        async with anyio.create_task_group() as group:
            for w in range(16):
                group.start_soon(worker, range(w, 10_000, 16))
        assert len(created) == 50 and refused == 9_950
        # Still serving: a call answered in its request.
        status, _, text = post(
            server.url,
            {"jsonrpc": "2.0", "id": "g", "method": "tools/call", "params": {"name": "greet", "arguments": {"name": "z"}, "_meta": META}},
            {**headers, "Mcp-Name": "greet"},
        )
        assert json.loads(text)["result"]["content"][0]["text"] == "Hello, z!"
    finally:
        server.stop()


async def test_an_update_for_a_task_that_asks_nothing_changes_nothing(setup):
    setup.add("conformance")
    async with tasks_session(setup) as client:
        created = await client.call_tool("slow_compute", {"seconds": 60, "label": "x"}, allow_claimed=True)
        ack = await update_task(client, created.task_id, {"elicit-0": {"action": "accept", "content": {}}})
        assert ack.model_dump(exclude_none=True) == {"resultType": "complete"}
        state = await get_task(client, created.task_id)
        assert state.status == "working" and not state.input_requests
        await cancel_task(client, created.task_id)


async def test_a_task_is_invisible_to_another_caller(setup, tmp_path):
    """Over HTTP with OAuth, a task belongs to the identity that made it:
    another caller (here another client of the same policy) asking for it
    by its id gets the answer an id that never existed gets."""
    from oauth_server import AuthServer
    from test_authorization import Protected, bearer

    auth = AuthServer()
    auth.add_client("writer", "writer-secret", ["mcp", "tools.write"])
    auth.add_client("writer2", "writer2-secret", ["mcp", "tools.write"])
    # `slow` (misbehave) runs as a task by the operator's word.
    protected = Protected(setup, auth, tmp_path, extra_oauth='\n[tools.slow]\ntasks = "optional"\n')
    try:
        meta = {**META, "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}}}

        def request(token, method, params, name):
            body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
            headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": method, "Mcp-Name": name, **bearer(token)}
            status, _, text = post(protected.url, body, headers)
            return json.loads(text)

        mine, theirs = protected.token("writer"), protected.token("writer2")
        created = request(mine, "tools/call", {"name": "slow", "arguments": {"ms": 60_000}}, "slow")["result"]
        assert created["resultType"] == "task", created
        task = created["taskId"]
        for method in ["tasks/get", "tasks/cancel", "tasks/update"]:
            params = {"taskId": task, **({"inputResponses": {}} if method == "tasks/update" else {})}
            reply = request(theirs, method, params, task)
            assert reply["error"]["code"] == -32602 and "unknown task" in reply["error"]["message"], reply
        # Still running, and still its maker's to read and cancel.
        assert request(mine, "tasks/get", {"taskId": task}, task)["result"]["status"] == "working"
        assert request(mine, "tasks/cancel", {"taskId": task}, task)["result"] == {"resultType": "complete"}
        assert request(mine, "tasks/get", {"taskId": task}, task)["result"]["status"] == "cancelled"
    finally:
        protected.stop()
        auth.stop()
