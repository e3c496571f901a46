"""The official MCP Inspector's CLI against the stdio transport, in both
protocol eras: a client we did not write must list the tools and call one.

The Inspector and the Node.js 22 it needs are installed by tests/npm/install
into TOOLCAGE_NPM (set by tests/run; default target/npm). The test fails,
never skips, when they are missing.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import BIN, LEGACY, MODERN

NPM = Path(os.environ.get("TOOLCAGE_NPM", "target/npm")).resolve()
NODE = NPM / "node_modules" / "node" / "bin" / "node"
INSPECTOR = NPM / "node_modules" / "@modelcontextprotocol" / "inspector"

# The Inspector's --protocol-era for each era: the 2025-11-25 initialize
# handshake, or 2026-07-28 server/discover with the version in `_meta`.
ERA_FLAGS = {LEGACY: "legacy", MODERN: "modern"}


@pytest.fixture(scope="module")
def inspector() -> list[str]:
    """The command that runs the Inspector CLI with the pinned Node 22."""
    package = INSPECTOR / "package.json"
    assert NODE.is_file() and package.is_file(), (
        f"the MCP Inspector is not installed in {NPM}: run tests/npm/install"
    )
    version = subprocess.run([str(NODE), "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith("v22."), version.stdout
    entry = INSPECTOR / json.loads(package.read_text())["bin"]["mcp-inspector"]
    assert entry.is_file(), entry
    return [str(NODE), str(entry), "--cli"]


def run_inspector(inspector, setup, era, *args):
    """One Inspector CLI run against the server in `setup`; returns the JSON
    it printed and every line it wrote to the server's stdin."""
    home = setup.root / "home"  # keeps its catalog and secrets out of ~
    home.mkdir(exist_ok=True)
    sent = setup.root / f"client-{era}.jsonl"
    sent.unlink(missing_ok=True)
    # The server behind a tee, to see what the Inspector negotiated.
    server = ["/bin/sh", "-c", 'tee "$0" | "$@"', str(sent), str(BIN), *setup.args()]
    proc = subprocess.run(
        [*inspector, "--format", "json", "--protocol-era", ERA_FLAGS[era], *args, "--", *server],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=setup.root,
        env={**os.environ, "HOME": str(home), "NO_COLOR": "1"},
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr}"
    messages = [json.loads(line) for line in sent.read_text().splitlines() if line.strip()]
    return json.loads(proc.stdout), messages


def assert_negotiated(messages, era):
    first = messages[0]
    if era == LEGACY:
        assert first["method"] == "initialize", first
        assert first["params"]["protocolVersion"] == LEGACY
    else:
        assert all(m.get("method") != "initialize" for m in messages), messages
        requests = [m for m in messages if "method" in m]
        assert requests and all(
            m["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == MODERN for m in requests
        ), requests


@pytest.mark.parametrize("era", [LEGACY, MODERN])
def test_inspector_lists_the_tools(inspector, setup, era):
    setup.add("time")
    # --strict: exit 6 if a tool schema has an error-severity portability problem.
    out, sent = run_inspector(inspector, setup, era, "--method", "tools/list", "--strict")
    assert_negotiated(sent, era)
    tools = {t["name"]: t for t in out["result"]["tools"]}
    assert set(tools) == {"get_current_time", "convert_timezone"}
    assert tools["convert_timezone"]["inputSchema"]["required"] == ["time", "timezone"]
    assert "outputSchema" in tools["convert_timezone"]


@pytest.mark.parametrize("era", [LEGACY, MODERN])
def test_inspector_calls_convert_timezone(inspector, setup, era):
    setup.add("time")
    out, sent = run_inspector(
        inspector,
        setup,
        era,
        "--method",
        "tools/call",
        "--tool-name",
        "convert_timezone",
        "--tool-arg",
        "time=2026-01-01T00:00:00Z",
        "timezone=Asia/Tokyo",
    )
    assert_negotiated(sent, era)
    call = [m for m in sent if m.get("method") == "tools/call"]
    assert len(call) == 1 and call[0]["params"]["arguments"] == {
        "time": "2026-01-01T00:00:00Z",
        "timezone": "Asia/Tokyo",
    }
    result = out["result"]
    assert result.get("isError") is not True, result
    converted = result["structuredContent"]["converted"]
    assert converted["datetime"] == "2026-01-01T09:00:00+09:00"
    assert converted["timezone"] == "Asia/Tokyo"
    assert result["structuredContent"]["utc_offset"] == "+09:00"
    # The text block carries the same JSON, for clients that ignore structuredContent.
    texts = [c["text"] for c in result["content"] if c["type"] == "text"]
    assert [json.loads(t) for t in texts] == [result["structuredContent"]]
