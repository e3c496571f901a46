"""Shared helpers: start the real `toolcage` binary over stdio in a temp dir
and talk to it with the official MCP Python SDK, in either protocol era.

Environment (set by tests/run):
  TOOLCAGE_BIN     the toolcage binary under test
  TOOLCAGE_GUESTS  the folder with the built guest components (*.wasm)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

BIN = Path(os.environ.get("TOOLCAGE_BIN", "target/debug/toolcage")).resolve()
GUESTS = Path(os.environ.get("TOOLCAGE_GUESTS", "target/wasm32-wasip2/debug")).resolve()

LEGACY = "2025-11-25"
MODERN = "2026-07-28"
ERAS = [LEGACY, MODERN]

# Guest crate name -> the file name it gets in a tools folder.
GUEST_FILES = {
    "time": "time_tool.wasm",
    "misbehave": "misbehave.wasm",
    "weather": "weather_tool.wasm",
    "bad-describe": "bad_describe.wasm",
    "liar": "liar.wasm",
    "greet": "greet.wasm",
    "fs": "fs_tool.wasm",
    "v1": "versioned_v1.wasm",
    "v2": "versioned_v2.wasm",
    "conformance": "conformance_fixture.wasm",
    "hostile": "hostile.wasm",
    "impostor": "impostor.wasm",
    # Contract 0.2.0's additions through the Rust SDK, and a build whose
    # icon the host refuses.
    "contract2": "contract2.wasm",
    "contract2-bad-icons": "contract2_bad_icons.wasm",
    # With its WIT docs embedded (`toolcage embed-docs`, in tests/run).
    "plain": "plain_documented.wasm",
    "plain-bare": "plain_types.wasm",
    # Built by tests/components/build with componentize-py / componentize-js.
    "plain-py": "plain_py.wasm",
    "plain-js": "plain_js.wasm",
    "plain-needs": "plain_needs.wasm",
    # The same six example tools with each language's SDK (test_sdk.py).
    "sdk-rust": "sdk_rust.wasm",
    "sdk-py": "sdk_py.wasm",
    "sdk-js": "sdk_js.wasm",
    "sdk-c": "sdk_c.wasm",
    # Reads its environment while it is instantiated (tests/components/ctor-c).
    "ctor-c": "ctor_c.wasm",
}
# One hostile descriptor per build of tests/guests/hostile-describe.
for _feature in [
    "huge-description",
    "many-tools",
    "many-properties",
    "exp-schema",
    "exp-output",
    "pattern-schema",
    "ref-chain",
    "self-ref",
    "template-bomb",
    "deep-schema",
]:
    GUEST_FILES[f"describe:{_feature}"] = f"hostile_describe_{_feature.replace('-', '_')}.wasm"


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    """One compile cache for the whole run: tests need not recompile."""
    return tmp_path_factory.mktemp("compile-cache")


@dataclass
class Setup:
    """A tools folder, a config file and where the server's stderr goes."""

    root: Path
    cache_dir: Path
    tools_dir: Path = field(init=False)
    config: Path = field(init=False)
    stderr_path: Path = field(init=False)

    def __post_init__(self):
        self.tools_dir = self.root / "tools"
        self.tools_dir.mkdir()
        self.config = self.root / "config.toml"
        self.config.write_text("")
        self.stderr_path = self.root / "server.stderr"

    def add(self, guest: str, as_name: str | None = None) -> Path:
        src = GUESTS / GUEST_FILES[guest]
        dst = self.tools_dir / (as_name or GUEST_FILES[guest])
        shutil.copyfile(src, dst)
        return dst

    def write_config(self, text: str) -> None:
        self.config.write_text(text)

    def args(self, command: str = "serve") -> list[str]:
        return [
            command,
            "--tools",
            str(self.tools_dir),
            "--config",
            str(self.config),
            "--cache-dir",
            str(self.cache_dir),
        ]

    def params(self) -> StdioServerParameters:
        return StdioServerParameters(
            command=str(BIN),
            args=self.args(),
            env={"TOOLCAGE_LOG": "info,toolcage=debug,rmcp=warn"},
        )

    def stderr(self) -> str:
        return self.stderr_path.read_text() if self.stderr_path.exists() else ""

    def run(self, *args: str, command: str = "list", check: bool = False, env: dict | None = None):
        """Run a one-shot CLI command (`list`, `call`), with `env` added to
        the environment."""
        return subprocess.run(
            [str(BIN), *self.args(command), *args],
            env={**os.environ, **(env or {})},
            # Never a terminal: a confirmation prompt must not wait for one.
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
            check=check,
        )


@pytest.fixture
def setup(tmp_path, cache_dir) -> Setup:
    return Setup(tmp_path, cache_dir)


@asynccontextmanager
async def session(s: Setup, era: str, **kwargs):
    """An MCP session with the server in `s`, negotiated in `era`: the
    2025-11-25 initialize handshake, or 2026-07-28 discovery (stateless, the
    version in every request's `_meta`)."""
    kwargs.setdefault("read_timeout_seconds", 120)
    with open(s.stderr_path, "a") as errlog:
        async with stdio_client(s.params(), errlog=errlog) as (read, write):
            async with ClientSession(read, write, **kwargs) as client:
                if era == MODERN:
                    await client.discover()
                    assert client.initialize_result is None
                else:
                    await client.initialize()
                    assert client.discover_result is None
                assert client.protocol_version == era
                yield client


def read_journal(path: Path) -> list[dict]:
    """The call journal's lines, parsed (none if it does not exist yet)."""
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


async def until(predicate, timeout: float = 20):
    """Wait until `predicate()` is true (the journal is written by its own
    thread, a little after the result)."""
    import anyio

    with anyio.fail_after(timeout):
        while not predicate():
            await anyio.sleep(0.05)


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", None) == "text")


def leb128(n: int) -> bytes:
    """`n` as unsigned LEB128, the integers of the WebAssembly binary format."""
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def wasm_section(section_id: int, payload: bytes) -> bytes:
    """A section of a WebAssembly module or component: id, size, payload."""
    return bytes([section_id]) + leb128(len(payload)) + payload


def call_request(request_id, name: str, arguments: dict) -> dict:
    """A `tools/call` request as a JSON-RPC object."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def raw_text(result: dict) -> str:
    """The text items of a raw `tools/call` result, joined."""
    return "\n".join(c.get("text", "") for c in result["content"])


class RawServer:
    """The binary on raw pipes, for what an SDK would not send: malformed
    lines, wrong shapes. Every stdout line is checked to be JSON-RPC."""

    def __init__(self, s: Setup, log: str = "info,rmcp=warn", preexec_fn=None):
        self.stderr = open(s.stderr_path, "a")
        self.proc = subprocess.Popen(
            [str(BIN), *s.args()],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env={**os.environ, "TOOLCAGE_LOG": log},
            preexec_fn=preexec_fn,
        )
        self.lines: list[str] = []
        self.next_id = 0

    def send(self, line) -> None:
        if not isinstance(line, str):
            line = json.dumps(line)
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def read(self) -> dict:
        """The next stdout line, which must be one JSON-RPC message."""
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, "server closed stdout"
        self.lines.append(line.decode())
        message = json.loads(line)
        assert message.get("jsonrpc") == "2.0", line
        return message

    def read_response(self, request_id) -> dict:
        """Read until the response to `request_id`, skipping notifications."""
        while True:
            message = self.read()
            if message.get("id") == request_id and ("result" in message or "error" in message):
                return message

    def call(self, name: str, arguments: dict | None = None, meta: dict | None = None) -> dict:
        """tools/call `name`; the result object (an error reply fails)."""
        self.next_id += 1
        request = call_request(self.next_id, name, arguments or {})
        if meta:
            request["params"]["_meta"] = meta
        self.send(request)
        reply = self.read_response(self.next_id)
        assert "result" in reply, reply
        return reply["result"]

    def request(self, method: str, params: dict) -> dict:
        """Any request; the whole reply, result or error."""
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return self.read_response(self.next_id)

    def peak_mib(self) -> int:
        """VmHWM: the most resident memory the process has had."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024
        raise AssertionError("no VmHWM")

    def initialize(self, version: str = LEGACY, capabilities: dict | None = None) -> dict:
        self.send(
            {
                "jsonrpc": "2.0",
                "id": "init",
                "method": "initialize",
                "params": {
                    "protocolVersion": version,
                    "capabilities": capabilities or {},
                    "clientInfo": {"name": "raw-test", "version": "0"},
                },
            }
        )
        reply = self.read_response("init")
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return reply

    def close(self) -> str:
        """Close stdin, wait for exit, and check every remaining stdout line."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        rest = self.proc.stdout.read().decode()
        self.proc.wait(timeout=30)
        self.stderr.close()
        for line in rest.splitlines():
            message = json.loads(line)
            assert message.get("jsonrpc") == "2.0", line
        return rest


class HttpServer:
    """`toolcage serve --http` on a free loopback port (or ADDR)."""

    def __init__(self, s: Setup, addr: str = "127.0.0.1:0", env: dict | None = None):
        import re
        import time

        self.stderr = open(s.stderr_path, "a")
        self.setup = s
        self.proc = subprocess.Popen(
            [str(BIN), *s.args(), "--http", addr],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env={**os.environ, "TOOLCAGE_LOG": "info,toolcage=debug,rmcp=warn", **(env or {})},
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            match = re.search(r"listening on http://([\d.:\[\]]+)/mcp", s.stderr())
            if match:
                self.port = int(match.group(1).rsplit(":", 1)[1])
                self.url = f"http://127.0.0.1:{self.port}/mcp"
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {s.stderr()[-2000:]}")
            time.sleep(0.05)
        raise RuntimeError("server did not start listening")

    def stop(self, sig=None) -> int:
        import signal

        if self.proc.poll() is None:
            self.proc.send_signal(sig or signal.SIGTERM)
        code = self.proc.wait(timeout=60)
        self.stderr.close()
        return code


@asynccontextmanager
async def http_session(url: str, era: str, headers: dict | None = None, auth=None, **kwargs):
    """An MCP session over Streamable HTTP, negotiated in `era`; `auth` is
    an httpx auth flow (the SDK's OAuth providers)."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    kwargs.setdefault("read_timeout_seconds", 120)
    async with httpx2.AsyncClient(headers=headers or {}, auth=auth, timeout=httpx2.Timeout(120)) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write, **kwargs) as client:
                if era == MODERN:
                    await client.discover()
                else:
                    await client.initialize()
                assert client.protocol_version == era
                yield client
