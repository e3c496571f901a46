"""A fleet on loopback: N `toolcage serve --http` replicas behind Debian's
nginx, started and stopped by the test itself.

Routing, as docs/deploy.md gives it: requests round-robin over the
replicas, except a 2025-era session's (`Mcp-Session-Id: rN.…`) and a
task's (`Mcp-Name: rN.…`), which go to the replica named in them. nginx
retries a request on the next replica only when the first could not be
connected to (it never resends a request that reached a replica), and a
session whose replica is gone gets 404, so its client starts a new one.

With `Redis`, the replicas share their tasks through a real Redis server
(`[tasks] store_url`), on a free loopback port, with no persistence.

Environment: TOOLCAGE_NGINX_BIN and TOOLCAGE_REDIS_BIN (tests/run installs
Debian's nginx and redis-server)."""

from __future__ import annotations

import http.client
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

from conftest import BIN, GUESTS, GUEST_FILES

NGINX = os.environ.get("TOOLCAGE_NGINX_BIN") or shutil.which("nginx") or "/usr/sbin/nginx"
REDIS = os.environ.get("TOOLCAGE_REDIS_BIN") or shutil.which("redis-server") or "/usr/bin/redis-server"
DEPLOY_CONF = Path(__file__).resolve().parents[2] / "docs" / "deploy" / "nginx-toolcage.conf"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float = 60, proc: subprocess.Popen | None = None, why=lambda: "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"exited with {proc.returncode}: {why()}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"port {port} did not open: {why()}")


class Redis:
    """A redis-server on a free loopback port, nothing saved to disk;
    `stop()` and `start()` again on the same port."""

    def __init__(self, root: Path):
        self.dir = root / "redis"
        self.dir.mkdir()
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        log = open(self.dir / "redis.log", "a")
        self.proc = subprocess.Popen(
            [REDIS, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.dir), "--daemonize", "no"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
        log.close()
        wait_for_port(self.port, proc=self.proc, why=lambda: (self.dir / "redis.log").read_text())

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)

    def command(self, *args: str):
        """One command, its reply parsed (RESP2: integers, bulk strings,
        arrays of them): enough to look at what toolcage keeps."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as sock:
            request = f"*{len(args)}\r\n" + "".join(f"${len(a.encode())}\r\n{a}\r\n" for a in args)
            sock.sendall(request.encode())
            reader = sock.makefile("rb")

            def read():
                line = reader.readline().rstrip(b"\r\n")
                kind, rest = line[:1], line[1:]
                if kind == b":":
                    return int(rest)
                if kind == b"$":
                    return None if int(rest) < 0 else reader.read(int(rest) + 2)[:-2]
                if kind == b"*":
                    return [read() for _ in range(int(rest))]
                if kind == b"+":
                    return rest.decode()
                raise RuntimeError(f"redis: {line!r}")

            return read()


class Replica:
    """One `toolcage serve --http` on a fixed loopback port, so it can be
    restarted where the balancer expects it."""

    def __init__(self, fleet: "Fleet", name: str):
        self.fleet = fleet
        self.name = name
        self.port = free_port()
        self.dir = fleet.root / name
        self.dir.mkdir()
        self.journal = self.dir / "journal.jsonl"
        self.config = self.dir / "config.toml"
        self.stderr_path = self.dir / "stderr.log"
        self.config.write_text(
            f"""
[server]
state_key_file = "{fleet.state_keys}"

[http]
replica_name_env = "TOOLCAGE_REPLICA"
drain_delay_ms = {fleet.drain_delay_ms}
metrics = "open"

[journal]
path = "{self.journal}"
durable = true
{fleet.extra_config}
"""
        )
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        stderr = open(self.stderr_path, "a")
        self.proc = subprocess.Popen(
            [
                str(BIN),
                "serve",
                "--tools",
                str(self.fleet.tools),
                "--config",
                str(self.config),
                "--cache-dir",
                str(self.fleet.cache_dir),
                "--http",
                f"127.0.0.1:{self.port}",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env={**os.environ, "TOOLCAGE_REPLICA": self.name, "TOOLCAGE_LOG": "info"},
        )
        stderr.close()
        wait_for_port(self.port, proc=self.proc, why=self.stderr)

    def stderr(self) -> str:
        return self.stderr_path.read_text() if self.stderr_path.exists() else ""

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def terminate(self) -> int:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60) if self.proc else 0

    def journal_lines(self) -> list[dict]:
        import json

        if not self.journal.exists():
            return []
        return [json.loads(line) for line in self.journal.read_text().splitlines() if line.strip()]


class Fleet:
    """N replicas sharing a tools folder and a requestState key, behind
    nginx on a free loopback port (`url`)."""

    def __init__(
        self,
        root: Path,
        cache_dir: Path,
        guests: list[str],
        replicas: int = 3,
        shared_key: bool = True,
        drain_delay_ms: int = 0,
        extra_config: str = "",
        route_tasks: bool = True,
    ):
        self.root = root
        self.cache_dir = cache_dir
        self.drain_delay_ms = drain_delay_ms
        self.extra_config = extra_config
        self.route_tasks = route_tasks
        self.tools = root / "tools"
        self.tools.mkdir()
        for guest in guests:
            shutil.copyfile(GUESTS / GUEST_FILES[guest], self.tools / GUEST_FILES[guest])
        self.keys_dir = root / "keys"
        self.keys_dir.mkdir()
        self.state_keys = self.keys_dir / "state-keys"
        self.state_keys.write_text(secrets.token_hex(32) + "\n")
        self.replicas = [Replica(self, f"r{i + 1}") for i in range(replicas)]
        if not shared_key:
            # Each replica its own key: a retry that lands elsewhere fails.
            for replica in self.replicas:
                own = replica.dir / "state-key"
                own.write_text(secrets.token_hex(32) + "\n")
                replica.config.write_text(replica.config.read_text().replace(str(self.state_keys), str(own)))
        for replica in self.replicas:
            replica.start()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.nginx_dir = root / "nginx"
        self.nginx_dir.mkdir()
        (self.nginx_dir / "nginx.conf").write_text(self.nginx_conf())
        self.nginx = subprocess.Popen(
            [NGINX, "-p", str(self.nginx_dir), "-c", str(self.nginx_dir / "nginx.conf")],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=open(self.nginx_dir / "stderr.log", "a"),
        )
        wait_for_port(self.port, proc=self.nginx, why=lambda: (self.nginx_dir / "stderr.log").read_text())

    def nginx_conf(self) -> str:
        """The documented configuration (docs/deploy/nginx-toolcage.conf),
        on this fleet's ports, inside a minimal main configuration."""
        site = DEPLOY_CONF.read_text()
        assert len(self.replicas) in (1, 3), "the documented configuration names three replicas"
        site = site.replace("listen 127.0.0.1:8080;", f"listen 127.0.0.1:{self.port};")
        if len(self.replicas) == 1:
            # One replica: the same configuration, every name pointing at it.
            site = re.sub(r"127\.0\.0\.1:808[123]", f"127.0.0.1:{self.replicas[0].port}", site)
        if not self.route_tasks:
            # A balancer that round-robins tasks too (a Kubernetes Service):
            # only a shared task store makes that work.
            site = re.sub(r'^ *"~\^tasks/.*\n', "", site, flags=re.M)
        for i, replica in enumerate(self.replicas):
            site = site.replace(f"127.0.0.1:{8081 + i}", f"127.0.0.1:{replica.port}")
        (self.nginx_dir / "toolcage.conf").write_text(site)
        user = "user root;" if os.geteuid() == 0 else ""
        return f"""
{user}
daemon off;
worker_processes 1;
pid {self.nginx_dir}/nginx.pid;
error_log {self.nginx_dir}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    log_format upstream '$http_mcp_method $upstream_addr $status';
    access_log {self.nginx_dir}/access.log upstream;
    client_body_temp_path {self.nginx_dir}/body;
    proxy_temp_path {self.nginx_dir}/proxy;
    fastcgi_temp_path {self.nginx_dir}/fastcgi;
    uwsgi_temp_path {self.nginx_dir}/uwsgi;
    scgi_temp_path {self.nginx_dir}/scgi;
    include {self.nginx_dir}/toolcage.conf;
}}
"""

    def upstreams(self, method: str) -> list[str]:
        """The replica ports nginx sent each `method` request to."""
        log = self.nginx_dir / "access.log"
        lines = log.read_text().splitlines() if log.exists() else []
        return [line.split()[1] for line in lines if line.split()[0] == method]

    def replica_of(self, session_or_task: str) -> Replica:
        name = session_or_task.split(".", 1)[0]
        return next(r for r in self.replicas if r.name == name)

    def stop(self) -> None:
        if self.nginx.poll() is None:
            self.nginx.send_signal(signal.SIGQUIT)
            try:
                self.nginx.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.nginx.kill()
        for replica in self.replicas:
            try:
                replica.terminate()
            except subprocess.TimeoutExpired:
                replica.kill()


def served_by(replicas: list[Replica], request_id: str) -> list[tuple[str, dict]]:
    """Every journal line (of every replica) for the call with JSON-RPC id
    `request_id`."""
    found = []
    for replica in replicas:
        for line in replica.journal_lines():
            if line.get("client", {}).get("request") == request_id:
                found.append((replica.name, line))
    return found


class Load:
    """`total` 2026-07-28 `tools/call`s of `get_current_time`, raw JSON over
    HTTP/1.1 keep-alive, from `workers` threads, to 127.0.0.1:`port`.
    `start()`, watch `progress`, `join()`; then `outcomes` (request id →
    `ok` or `failed:WHY`) and `seconds`."""

    def __init__(self, port: int, total: int, workers: int, protocol: str):
        self.port = port
        self.total = total
        self.workers = workers
        self.outcomes: dict[str, str] = {}
        self.progress = 0
        self.seconds = 0.0
        self._lock = threading.Lock()
        self._headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": protocol,
            "Mcp-Method": "tools/call",
            "Mcp-Name": "get_current_time",
        }
        self._meta = {
            "io.modelcontextprotocol/protocolVersion": protocol,
            "io.modelcontextprotocol/clientInfo": {"name": "load", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        self._threads = [threading.Thread(target=self._worker, args=(w,)) for w in range(workers)]
        self._started = 0.0

    def start(self) -> "Load":
        self._started = time.monotonic()
        for t in self._threads:
            t.start()
        return self

    def wait_progress(self, n: int, timeout: float = 600) -> None:
        deadline = time.monotonic() + timeout
        while self.progress < n and time.monotonic() < deadline:
            time.sleep(0.01)

    def join(self, timeout: float = 900) -> "Load":
        for t in self._threads:
            t.join(timeout=timeout)
        self.seconds = time.monotonic() - self._started
        return self

    def _worker(self, w: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        for n in range(w, self.total, self.workers):
            request_id = f"load-{n}"
            body = json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "method": "tools/call",
                    "params": {"name": "get_current_time", "arguments": {"timezone": "UTC"}, "_meta": self._meta},
                }
            )
            try:
                connection.request("POST", "/mcp", body, self._headers)
                response = connection.getresponse()
                text = response.read().decode()
                if response.status == 200 and json.loads(text).get("result", {}).get("content"):
                    outcome = "ok"
                else:
                    outcome = f"failed:{response.status}"
            except (OSError, http.client.HTTPException, ValueError) as error:
                outcome = f"failed:{type(error).__name__}"
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            with self._lock:
                self.outcomes[request_id] = outcome
                self.progress += 1
        connection.close()
