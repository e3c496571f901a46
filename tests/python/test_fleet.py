"""Running as a fleet: replicas behind a standard load balancer (Debian's
nginx, with the configuration docs/deploy.md gives), health and readiness,
Prometheus metrics, JSON logs and journals, a shared requestState key.

Every process is started and stopped by the test, on loopback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request

import pytest
import mcp.types as types
from mcp import MCPError

from conftest import LEGACY, MODERN, BIN, HttpServer, http_session, text_of
from fleet import Fleet, Load, free_port, served_by
from test_http import META

pytestmark = pytest.mark.anyio

TIME = {"timezone": "UTC"}


def answering(content):
    async def on_elicit(_ctx, params):
        return types.ElicitResult(action="accept", content=content)

    return on_elicit


@pytest.fixture
def fleet(tmp_path, cache_dir):
    f = Fleet(tmp_path, cache_dir, ["time", "conformance"])
    yield f
    f.stop()


async def test_modern_clients_round_robin_and_a_retry_lands_on_any_replica(fleet):
    async with http_session(fleet.url, MODERN, elicitation_callback=answering({"name": "Ada"})) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"get_current_time", "test_input_required_result_elicitation"} <= names
        for i in range(6):
            result = await client.call_tool("get_current_time", TIME)
            assert not result.is_error, text_of(result)
        first = await client.call_tool("test_input_required_result_elicitation", {}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
    time_served = {name for name, _ in _lines(fleet, tool="get_current_time")}
    assert len(time_served) >= 2, time_served
    [(asked_on, _)] = [(n, l) for n, l in _lines(fleet, "test_input_required_result_elicitation") if l["outcome"] == "input_required"]
    # The retry, sent to each of the other replicas directly: the state one
    # replica signed is good on every replica sharing its key.
    for other in [r for r in fleet.replicas if r.name != asked_on]:
        async with http_session(f"http://127.0.0.1:{other.port}/mcp", MODERN, elicitation_callback=answering({})) as client:
            done = await client.call_tool(
                "test_input_required_result_elicitation",
                {},
                input_responses={"user_name": {"action": "accept", "content": {"name": "Ada"}}},
                request_state=first.request_state,
            )
            assert text_of(done) == "Hello, Ada!"
        assert any(l.get("tool") == "test_input_required_result_elicitation" and l["outcome"] == "ok" for l in other.journal_lines())


async def test_a_confirmation_answered_on_another_replica_runs_the_call_there(tmp_path, cache_dir):
    # A destructive call's confirmation is an input request on 2026-07-28:
    # the user's answer may come back through the balancer to any replica.
    data = tmp_path / "data"
    data.mkdir()
    (data / "victim.txt").write_text("keep me")
    roots = f'\n[defaults]\nroots = [{{ path = "{data}", mode = "rw" }}]\n'
    f = Fleet(tmp_path, cache_dir, ["fs"], extra_config=roots)
    try:
        victim = {"path": str(data / "victim.txt")}
        async with http_session(f.url, MODERN, elicitation_callback=answering({"confirm": True})) as client:
            first = await client.call_tool("delete_file", victim, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
        [(key, question)] = first.input_requests.items()
        assert question.method == "elicitation/create" and "delete_file" in question.params.message
        assert (data / "victim.txt").read_text() == "keep me"
        [(asked_on, _)] = [(n, line) for n, line in _lines(f, "delete_file") if line["outcome"] == "input_required"]
        other = next(r for r in f.replicas if r.name != asked_on)
        answer = {key: {"action": "accept", "content": {"confirm": True}}}
        asked_again = []

        async def never(_ctx, params):  # the answer comes with the retry
            asked_again.append(params)
            return types.ElicitResult(action="decline")

        async with http_session(f"http://127.0.0.1:{other.port}/mcp", MODERN, elicitation_callback=never) as client:
            # An answer to another call's question does not confirm this one.
            other_file = {"path": str(data / "other.txt")}
            (data / "other.txt").write_text("keep me too")
            with pytest.raises(MCPError, match="belongs to another tool call"):
                await client.call_tool("delete_file", other_file, input_responses=answer, request_state=first.request_state)
            assert (data / "other.txt").exists()
            done = await client.call_tool("delete_file", victim, input_responses=answer, request_state=first.request_state)
            assert not done.is_error, text_of(done)
        assert not (data / "victim.txt").exists() and asked_again == []
        ran = [line for line in other.journal_lines() if line.get("tool") == "delete_file" and line["outcome"] == "ok"]
        assert len(ran) == 1
    finally:
        f.stop()


def _lines(fleet, tool):
    return [(r.name, line) for r in fleet.replicas for line in r.journal_lines() if line.get("tool") == tool]


async def test_without_a_shared_key_a_retry_on_another_replica_is_refused(tmp_path, cache_dir):
    fleet = Fleet(tmp_path, cache_dir, ["conformance"], shared_key=False)
    try:
        a, b = fleet.replicas[0], fleet.replicas[1]
        async with http_session(f"http://127.0.0.1:{a.port}/mcp", MODERN, elicitation_callback=answering({})) as client:
            first = await client.call_tool("test_input_required_result_elicitation", {}, allow_input_required=True)
        async with http_session(f"http://127.0.0.1:{b.port}/mcp", MODERN, elicitation_callback=answering({})) as client:
            with pytest.raises(MCPError) as refused:
                await client.call_tool(
                    "test_input_required_result_elicitation",
                    {},
                    input_responses={"user_name": {"action": "accept", "content": {"name": "x"}}},
                    request_state=first.request_state,
                )
            assert "not issued by this server" in refused.value.message
    finally:
        fleet.stop()


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
async def test_a_legacy_session_stays_on_its_replica_and_gets_404_when_it_is_gone(fleet):
    async with http_session(fleet.url, LEGACY) as client:
        for _ in range(5):
            assert not (await client.call_tool("get_current_time", TIME)).is_error
    lines = _lines(fleet, tool="get_current_time")
    homes = {name for name, _ in lines}
    assert len(homes) == 1, homes
    (home,) = homes
    sessions = {line["client"]["session"] for _, line in lines}
    assert len(sessions) == 1
    # Raw: open a session, see where it lives, kill that replica.
    session_id, status = _initialize(fleet.url)
    assert status == 200 and session_id and session_id.split(".")[0] in {"r1", "r2", "r3"}, session_id
    replica = fleet.replica_of(session_id)
    assert _call_in_session(fleet.url, session_id)[0] == 200
    replica.kill()
    status, body = _call_in_session(fleet.url, session_id)
    assert status == 404 and "start a new session" in body, (status, body)
    # A new session opens on a live replica.
    again, status = _initialize(fleet.url)
    assert status == 200 and fleet.replica_of(again) is not replica
    assert _call_in_session(fleet.url, again)[0] == 200


def _post(url, body, headers):
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    request.add_header("Content-Type", "application/json")
    request.add_header("Accept", "application/json, text/event-stream")
    for key, value in headers.items():
        request.add_header(key, value)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read().decode()


def _initialize(url):
    status, headers, _ = _post(
        url,
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
        },
        {},
    )
    session = {k.lower(): v for k, v in headers.items()}.get("mcp-session-id")
    if session:
        _post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, {"Mcp-Session-Id": session, "MCP-Protocol-Version": LEGACY})
    return session, status


def _call_in_session(url, session):
    status, _, body = _post(
        url,
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "get_current_time", "arguments": TIME}},
        {"Mcp-Session-Id": session, "MCP-Protocol-Version": LEGACY},
    )
    return status, body


def test_under_load_a_killed_and_a_restarted_replica_lose_or_duplicate_no_answered_call(fleet):
    """20,000 calls from 32 concurrent clients; one replica is killed
    (SIGKILL), another restarted (SIGTERM, then started again). Every call
    answered with a result is in exactly one journal line of one replica;
    every other call got a clean error; the fleet serves on."""
    total, workers = 20_000, 32
    load = Load(fleet.port, total, workers, MODERN).start()
    killed, restarted = fleet.replicas[0], fleet.replicas[1]
    load.wait_progress(total // 4)
    killed.kill()
    load.wait_progress(total // 2)
    assert restarted.terminate() == 0, restarted.stderr()[-2000:]
    restarted.start()
    load.join()
    outcomes, elapsed = load.outcomes, load.seconds
    assert len(outcomes) == total
    succeeded = [rid for rid, o in outcomes.items() if o == "ok"]
    failed = [rid for rid, o in outcomes.items() if o != "ok"]
    journaled: dict[str, list[str]] = {}
    for replica in fleet.replicas:
        for line in replica.journal_lines():
            rid = line.get("client", {}).get("request")
            if rid and rid.startswith("load-"):
                journaled.setdefault(rid, []).append(f"{replica.name}:{line['outcome']}")
    lost = [rid for rid in succeeded if not any(e.endswith(":ok") for e in journaled.get(rid, []))]
    duplicated = [rid for rid, entries in journaled.items() if len(entries) > 1]
    failures: dict[str, int] = {}
    for rid in failed:
        failures[outcomes[rid]] = failures.get(outcomes[rid], 0) + 1
    report = {
        "sent": total,
        "succeeded": len(succeeded),
        "failed_cleanly": len(failed),
        "failures": failures,
        "lost": len(lost),
        "duplicated": len(duplicated),
        "seconds": round(elapsed, 1),
    }
    print("fleet load test:", json.dumps(report))
    if path := os.environ.get("TOOLCAGE_FLEET_REPORT"):
        with open(path, "w") as f:
            json.dump(report, f)
    assert lost == [] and duplicated == [], report
    # Most calls were answered; the rest failed with a clean HTTP status
    # (a reset connection of the killed replica counts as clean too).
    assert len(succeeded) > total * 0.9, report
    # The fleet serves on: the restarted replica among them.
    assert any(line.get("client", {}).get("request", "").startswith("load-") for line in restarted.journal_lines())


def _get(url, headers=None):
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except OSError:
        return None, ""


def test_readiness_turns_false_at_sigterm_before_the_drain_and_metrics_parse(setup):
    from prometheus_client.parser import text_string_to_metric_families

    setup.add("time")
    setup.add("misbehave")
    setup.write_config("[http]\ndrain_delay_ms = 3000\n\n[tools.spin]\nfuel = 1000000\n")
    server = HttpServer(setup)
    base = f"http://127.0.0.1:{server.port}"
    try:
        assert _get(base + "/healthz") == (200, "ok")
        assert _get(base + "/readyz") == (200, "ready")
        headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call"}
        for _ in range(3):
            status, _, _ = _post(server.url, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "get_current_time", "arguments": TIME, "_meta": META}}, {**headers, "Mcp-Name": "get_current_time"})
            assert status == 200
        _post(server.url, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "spin", "arguments": {}, "_meta": META}}, {**headers, "Mcp-Name": "spin"})
        _post(server.url, {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "no_such_tool_" + "x" * 50, "arguments": {}, "_meta": META}}, {**headers, "Mcp-Name": "no_such_tool_" + "x" * 50})
        # /metrics needs the token like /mcp (none configured on loopback:
        # open), and parses as the Prometheus text format.
        status, text = _get(base + "/metrics")
        assert status == 200, text
        families = {f.name: f for f in text_string_to_metric_families(text)}
        calls = {(s.labels["tool"], s.labels["outcome"]): s.value for s in families["toolcage_calls"].samples}
        assert calls[("get_current_time", "ok")] == 3
        assert calls[("spin", "error")] == 1
        assert calls[("(unknown)", "refused")] == 1, calls
        assert not any("no_such_tool" in tool for tool, _ in calls)
        limits = {s.labels["limit"]: s.value for s in families["toolcage_limit_hits"].samples}
        assert limits == {"fuel": 1}
        refusals = {s.labels["reason"]: s.value for s in families["toolcage_refusals"].samples}
        assert refusals == {"unknown_tool": 1}
        assert [s.value for s in families["toolcage_tools_loaded"].samples] == [float(len(_tools(setup)))]
        duration = families["toolcage_call_duration_seconds"]
        counts = [s for s in duration.samples if s.name.endswith("_count") and s.labels["tool"] == "get_current_time"]
        assert counts and counts[0].value == 3
        # SIGTERM: readiness goes at once, the server serves on through the
        # drain delay, then stops.
        server.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        while _get(base + "/readyz")[0] != 503 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _get(base + "/readyz") == (503, "draining")
        assert _get(base + "/healthz") == (200, "ok")
        status, _, _ = _post(server.url, {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "get_current_time", "arguments": TIME, "_meta": META}}, {**headers, "Mcp-Name": "get_current_time"})
        assert status == 200
        assert server.proc.wait(timeout=30) == 0
    finally:
        server.stop()


def _tools(setup):
    listed = json.loads(setup.run("--json").stdout)
    return [t for f in listed["files"] for t in f["tools"] if t["status"] == "served"]


def test_metrics_can_need_the_token_be_open_or_be_off(tmp_path, cache_dir):
    from conftest import Setup

    token = tmp_path / "bearer"
    token.write_text("s3cret-token\n")
    for access, without, with_token in [("token", 401, 200), ("open", 200, 200), ("off", 404, 404)]:
        (tmp_path / access).mkdir()
        setup = Setup(tmp_path / access, cache_dir)
        setup.add("time")
        setup.write_config(f'[http]\ntoken_file = "{token}"\nmetrics = "{access}"\n')
        server = HttpServer(setup)
        try:
            base = f"http://127.0.0.1:{server.port}"
            assert _get(base + "/metrics")[0] == without, access
            assert _get(base + "/metrics", {"Authorization": "Bearer s3cret-token"})[0] == with_token, access
            # The probes are open whatever the token.
            assert _get(base + "/healthz")[0] == 200 and _get(base + "/readyz")[0] == 200
        finally:
            server.stop()


def test_json_logs_and_a_journal_on_stderr(setup):
    setup.add("time")
    setup.write_config('[journal]\nto = "stderr"\n')
    proc = subprocess.run(
        [str(BIN), "--log-format", "json", "call", *setup.args("call")[1:], "get_current_time", json.dumps(TIME)],
        env={**os.environ, "TOOLCAGE_LOG": "info"},
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stderr.splitlines()]
    logs = [line for line in lines if "level" in line]
    journal = [line for line in lines if "outcome" in line]
    assert logs and all({"timestamp", "level", "target", "fields"} <= set(line) for line in logs)
    assert any(line["fields"].get("message") == "tools loaded" for line in logs)
    [call] = journal
    assert call["tool"] == "get_current_time" and call["outcome"] == "ok"
    # The journal never takes stdout from the protocol.
    setup.write_config('[journal]\nto = "stdout"\n')
    refused = subprocess.run([str(BIN), *setup.args()], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert refused.returncode != 0
    assert "cannot go to stdout while serving over stdio" in refused.stderr


@pytest.mark.parametrize(
    "text,words",
    [
        ("", "holds no key"),
        ("not-a-key\n", "line 1 is not a key"),
        ("# new\n" + "ab" * 32 + "\n" + "cd" * 31 + "\n", "line 3 is not a key"),
        ("\n".join(["ab" * 32] * 9), "more than 8"),
    ],
)
def test_a_bad_state_key_file_is_a_config_error_that_never_shows_a_key(setup, tmp_path, text, words):
    keys = tmp_path / "keys"
    keys.write_text(text)
    setup.write_config(f'[server]\nstate_key_file = "{keys}"\n')
    listed = setup.run()
    assert listed.returncode != 0
    assert "server.state_key_file" in listed.stderr and words in listed.stderr, listed.stderr
    assert "cd" * 31 not in listed.stderr and "abab" not in listed.stderr


def test_the_kubernetes_manifests_carry_a_config_toolcage_accepts(tmp_path):
    """docs/deploy/kubernetes.yaml cannot run here (no cluster); what can be
    checked is: it parses, the config in its ConfigMap is one toolcage
    accepts (with the Secret's files where it mounts them), and the probes,
    port and arguments agree with what the binary serves."""
    import yaml

    from fleet import DEPLOY_CONF

    manifests = list(yaml.safe_load_all((DEPLOY_CONF.parent / "kubernetes.yaml").read_text()))
    kinds = {m["kind"]: m for m in manifests}
    assert set(kinds) == {"ConfigMap", "Deployment", "Service"}
    config = kinds["ConfigMap"]["data"]["config.toml"]
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "token").write_text("t" * 32 + "\n")
    (secrets / "state-keys").write_text("ab" * 32 + "\n")
    (tmp_path / "tools").mkdir()
    config = config.replace("/run/secrets/toolcage", str(secrets)).replace('"/tools"', f'"{tmp_path / "tools"}"')
    config = config.replace('"/cache"', f'"{tmp_path / "cache"}"')
    (tmp_path / "config.toml").write_text(config)
    listed = subprocess.run(
        [str(BIN), "list", "--config", str(tmp_path / "config.toml")],
        env={**os.environ, "POD_NAME": "toolcage-7d9f4-x2kpt"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listed.returncode == 0, listed.stderr
    pod = kinds["Deployment"]["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["args"][:3] == ["serve", "--http", "0.0.0.0:8080"]
    assert container["ports"][0]["containerPort"] == 8080
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["securityContext"]["runAsNonRoot"] is True
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert {"/etc/toolcage", "/run/secrets/toolcage", "/cache"} <= mounts
