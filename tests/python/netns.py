"""A private network for one test: run processes (the toolcage server, say)
inside their own network and mount namespace, with a test-controlled
/etc/hosts and /etc/resolv.conf, a stub DNS server that logs every query and
HTTP servers that log every request. Tests can then prove what a tool's
outbound `wasi:http` request resolved (which names were asked of DNS, and
which were not) and where it went (which server got it, with what Host).

    with Netns(hosts={"api.test": "127.0.0.2"}, dns={"other.test": "127.0.0.3"},
               http=[("127.0.0.2", 8080)]) as ns:
        proc = ns.popen([...])        # runs inside; pipes work from outside
        ns.queries()                  # [{"name": "other.test", "type": "A", ...}, ...]
        ns.requests("127.0.0.2:8080") # [{"request_line": "GET / HTTP/1.1", "host": ...}]

Or as a pytest fixture (a fresh, empty namespace per test, configured at
run time with `set_hosts`, `set_dns` and `add_http`):

    from netns import netns  # noqa: F401 (fixture)

    def test_something(netns):
        server = netns.add_http("127.0.0.2", 0)    # -> "127.0.0.2:PORT"
        netns.set_dns({"api.test": "127.0.0.2"})

How it works: `unshare --net --mount --uts --propagation private` starts
netns_holder.py, which brings `lo` up, bind-mounts the files in `root` over
/etc/hosts and /etc/resolv.conf, serves DNS on 127.0.0.1:53 and HTTP where
asked, and then takes commands on its stdin (EOF ends it). `popen` runs a
command through `nsenter --target HOLDER --net --mount --uts`, so it shares
them (the UTS namespace only pins the hostname, see `_start`). Nothing in
them can reach the host's network or its resolver, and nothing outside can
reach the servers in them.

Logs (JSON lines, in `root`, written before each answer is sent, so a client
that has its answer can already see the record):

- dns.jsonl, one record per question: `name` (presentation form of the
  labels as received: case kept, no root dot, a dot inside a label as `\\.`,
  other odd bytes as `\\DDD`), `type` ("A", "AAAA", "HTTPS", or "TYPE<n>"),
  `qtype`, `qclass`, `transport` ("udp"/"tcp"), `client`, `id`, `rcode`
  ("NOERROR", "NXDOMAIN", ...), `answers` (addresses), `seq`, `time`.
  (A trailing dot in a name a program looks up never reaches the wire as
  such: every wire name ends at the root label, so `a.test.` and `a.test`
  are the same query. What a trailing dot can change is whether the
  resolver consults /etc/hosts or appends search domains first.)
- http.jsonl, one record per request, to any server: `server` ("ip:port",
  "[v6]:port"), `client`, `request_line`, `method`, `target`, `version`,
  `host` (the first Host header, or null), `headers` ([[name, value], ...]
  in order, as sent), `body_length`, `body`, `seq`, `time`. A request too
  malformed to parse is logged with `error: true` and its request line.

Every HTTP server answers any method and path with 200 and
`{"server": "127.0.0.2:8080", "path": "/x?y", "host": "..."}`, except
`/redirect?to=URL[&status=302]`, a redirect to URL.

Needs root (namespaces, bind mounts, port 53) and util-linux's `unshare`
and `nsenter`; the fixture skips, saying why, where those are missing.
"""

from __future__ import annotations

import functools
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import BIN, RawServer, Setup

HOLDER = Path(__file__).with_name("netns_holder.py")

# The resolver configuration processes in the namespace see: only the stub,
# and fail fast (one try, one second) so a query the stub drops cannot stall
# a test for the glibc default of 5 s x 2 tries.
RESOLV_CONF = "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n"

START_TIMEOUT = 20.0  # for the holder to set up and say "ready"
COMMAND_TIMEOUT = 10.0  # for one control command's reply
STOP_TIMEOUT = 5.0  # for a process to exit after SIGTERM (then SIGKILL)


@functools.lru_cache(maxsize=None)
def unavailable() -> str | None:
    """Why namespaces cannot be used here, or None if they can. Checked once
    per run: root, the tools, and a real (empty) unshare, since a container
    without CAP_SYS_ADMIN has both root and the tools but no namespaces."""
    if os.geteuid() != 0:
        return "needs root (network and mount namespaces, bind mounts, port 53)"
    for tool in ("unshare", "nsenter", "ip", "mount"):
        if shutil.which(tool) is None:
            return f"needs `{tool}` (util-linux / iproute2), which is not installed"
    probe = subprocess.run(
        ["unshare", "--net", "--mount", "--propagation", "private", "true"],
        capture_output=True,
        text=True,
        timeout=10,
    )
    if probe.returncode != 0:
        return f"cannot create namespaces here: {probe.stderr.strip() or probe.returncode}"
    return None


class LineReader:
    """Lines from a pipe with a deadline on every read. A plain `readline()`
    on a pipe blocks forever if the other side stalls; this reads the file
    descriptor directly (select, then os.read) into its own buffer, so never
    mix it with reads through the file object."""

    def __init__(self, stream):
        self._fd = stream.fileno()
        self._buffer = b""
        self._eof = False

    def readline(self, timeout: float) -> bytes:
        """The next line with its newline; at EOF the unterminated rest, then
        b"". Raises TimeoutError after `timeout` seconds without a line."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer and not self._eof:
            self._fill(deadline)
        if b"\n" in self._buffer:
            line, _, self._buffer = self._buffer.partition(b"\n")
            return line + b"\n"
        rest, self._buffer = self._buffer, b""
        return rest

    def read_all(self, timeout: float) -> bytes:
        """Everything up to EOF."""
        deadline = time.monotonic() + timeout
        while not self._eof:
            self._fill(deadline)
        rest, self._buffer = self._buffer, b""
        return rest

    def _fill(self, deadline: float) -> None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no complete line from the pipe in time")
        ready, _, _ = select.select([self._fd], [], [], left)
        if ready:
            chunk = os.read(self._fd, 65536)
            self._buffer += chunk
            self._eof = not chunk


def _read_jsonl(path: Path) -> list[dict]:
    """The complete lines of a log another process appends to (a last line
    still being written has no newline yet and is left for the next read)."""
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    return [json.loads(line) for line in text.split("\n")[:-1] if line.strip()]


def _hosts_text(hosts: dict) -> str:
    lines = ["# /etc/hosts of a netns test fixture: only what the test put here"]
    for name, addresses in hosts.items():
        for address in [addresses] if isinstance(addresses, str) else addresses:
            lines.append(f"{address}\t{name}")
    return "\n".join(lines) + "\n"


class Netns:
    """A private network + mount namespace with a stub resolver and HTTP
    servers; see the module docstring. Use as a context manager; `close()`
    (or leaving the block) ends every process started here, even after a
    failure, and removes `root` if this object created it.

    hosts  name -> IP (or list of IPs): the namespace's /etc/hosts, exactly.
    dns    name -> IP (or list): what the stub answers (A for IPv4 entries,
           AAAA for IPv6 ones, no records of the other type); any name not
           here is NXDOMAIN. Names match case-insensitively, as in DNS.
    http   (ip, port) pairs to serve HTTP on from the start (port 0: any).
           Loopback addresses need nothing; any other IP is added to `lo`.
    resolv_conf  the namespace's /etc/resolv.conf (default: the stub only).
    root   where the files and logs go (default: a new temp dir).
    """

    def __init__(
        self,
        hosts: dict | None = None,
        dns: dict | None = None,
        http: list[tuple[str, int]] | tuple = (),
        resolv_conf: str = RESOLV_CONF,
        root: Path | str | None = None,
    ):
        self._hosts = dict(hosts or {})
        self._dns = dict(dns or {})
        self._http = [(str(ip), int(port)) for ip, port in http]
        self._resolv_conf = resolv_conf
        self._own_root = root is None
        self.root = Path(root) if root is not None else None
        self.pid: int | None = None  # the holder, whose namespaces popen joins
        self.servers: list[str] = []  # "ip:port" of every HTTP server
        self._holder: subprocess.Popen | None = None
        self._holder_out: LineReader | None = None
        self._holder_err = None
        self._procs: list[tuple[subprocess.Popen, bool]] = []  # (process, own group)

    # --- lifecycle --------------------------------------------------------

    def __enter__(self) -> Netns:
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _start(self) -> None:
        if self.root is None:
            self.root = Path(tempfile.mkdtemp(prefix="netns-"))
        self.root.mkdir(parents=True, exist_ok=True)
        self.hosts_path = self.root / "hosts"
        self.resolv_path = self.root / "resolv.conf"
        self.dns_log = self.root / "dns.jsonl"
        self.http_log = self.root / "http.jsonl"
        self.hosts_path.write_text(_hosts_text(self._hosts))
        self.resolv_path.write_text(self._resolv_conf)
        for log in (self.dns_log, self.http_log):
            log.write_text("")
        config = {
            "binds": {
                "/etc/hosts": str(self.hosts_path),
                "/etc/resolv.conf": str(self.resolv_path),
            },
            "dns": self._dns,
            "http": self._http,
            "dns_log": str(self.dns_log),
            "http_log": str(self.http_log),
        }
        self._holder_err = open(self.root / "holder.stderr", "w")
        self._holder = subprocess.Popen(
            [
                "unshare",
                "--net",
                "--mount",
                # A private hostname too: glibc takes a default search domain
                # from the hostname when it has a dot, and that must not
                # depend on the machine the tests run on.
                "--uts",
                # Mounts made inside must never propagate to the host's /etc.
                "--propagation",
                "private",
                sys.executable,
                "-u",
                str(HOLDER),
                json.dumps(config),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._holder_err,
        )
        self._holder_out = LineReader(self._holder.stdout)
        ready = self._reply(START_TIMEOUT)
        if not ready.get("ready"):
            raise RuntimeError(f"netns holder failed: {ready.get('error')}\n{self.holder_stderr()}")
        self.pid = ready["pid"]
        self.servers = list(ready["http"])

    def close(self) -> None:
        """End every process started through `popen`, then the holder (which
        takes the namespaces with it), then remove `root` if it is ours."""
        for proc, own_group in self._procs:
            _end(proc, own_group)
        self._procs.clear()
        if self._holder is not None:
            # EOF on its stdin is the holder's signal to exit.
            try:
                self._holder.stdin.close()
            except OSError:
                pass
            try:
                self._holder.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self._holder.kill()
                self._holder.wait(timeout=STOP_TIMEOUT)
            self._holder.stdout.close()
            self._holder = None
        if self._holder_err is not None:
            self._holder_err.close()
            self._holder_err = None
        if self._own_root and self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)

    def holder_stderr(self) -> str:
        path = self.root / "holder.stderr" if self.root else None
        return path.read_text() if path and path.exists() else ""

    # --- control ----------------------------------------------------------

    def _reply(self, timeout: float) -> dict:
        try:
            line = self._holder_out.readline(timeout)
        except TimeoutError:
            raise RuntimeError(f"netns holder did not answer in time\n{self.holder_stderr()}")
        if not line:
            code = self._holder.wait(timeout=STOP_TIMEOUT)
            raise RuntimeError(f"netns holder exited ({code})\n{self.holder_stderr()}")
        return json.loads(line)

    def _command(self, op: str, **fields) -> dict:
        self._check_running()
        self._holder.stdin.write(json.dumps({"op": op, **fields}).encode() + b"\n")
        self._holder.stdin.flush()
        reply = self._reply(COMMAND_TIMEOUT)
        if not reply.get("ok"):
            raise RuntimeError(f"netns {op} failed: {reply.get('error')}")
        return reply

    def _check_running(self) -> None:
        if self._holder is None or self._holder.poll() is not None:
            raise RuntimeError(f"the namespace is not running\n{self.holder_stderr()}")

    def add_http(self, ip: str = "127.0.0.1", port: int = 0) -> str:
        """Serve HTTP on (ip, port) inside the namespace; port 0 picks a free
        one. Returns the server's name, "ip:port" ("[v6]:port" for IPv6), as
        `requests(server=...)` and the reply bodies spell it."""
        server = self._command("add_http", ip=ip, port=port)["server"]
        self.servers.append(server)
        return server

    def set_dns(self, dns: dict) -> None:
        """Replace what the stub answers (the log is kept)."""
        self._dns = dict(dns)
        self._command("set_dns", dns=self._dns)

    def set_hosts(self, hosts: dict) -> None:
        """Replace the namespace's /etc/hosts. Written in place (same inode):
        the bind mount is of this file, so a new file would not be seen."""
        self._hosts = dict(hosts)
        with open(self.hosts_path, "r+") as f:
            f.truncate(0)
            f.write(_hosts_text(self._hosts))

    @staticmethod
    def url(server: str, path: str = "/") -> str:
        return f"http://{server}{path}"

    # --- observations -----------------------------------------------------

    def queries(self) -> list[dict]:
        """Every DNS question the stub has seen, in order."""
        return _read_jsonl(self.dns_log)

    def requests(self, server: str | None = None) -> list[dict]:
        """Every HTTP request any server (or just `server`) has seen, in order."""
        records = _read_jsonl(self.http_log)
        return [r for r in records if server is None or r["server"] == server]

    def clear(self) -> None:
        """Forget what was logged so far (between phases of a test). The
        holder appends (O_APPEND), so its next record lands at the new end."""
        for log in (self.dns_log, self.http_log):
            with open(log, "r+") as f:
                f.truncate(0)

    @staticmethod
    def wait_for(predicate, timeout: float = 10.0, what: str = "condition"):
        """Poll `predicate()` until it is truthy (and return that), or fail
        after `timeout`. For records that follow an answer only indirectly
        (a request the server under test makes in the background)."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            time.sleep(0.02)

    def wait_queries(self, count: int, timeout: float = 10.0) -> list[dict]:
        """At least `count` logged DNS questions (all of them)."""

        def enough():
            found = self.queries()
            return found if len(found) >= count else None

        return self.wait_for(enough, timeout, f"{count} DNS queries")

    def wait_requests(self, count: int, server: str | None = None, timeout: float = 10.0):
        """At least `count` logged HTTP requests (to `server`, if given)."""

        def enough():
            found = self.requests(server)
            return found if len(found) >= count else None

        return self.wait_for(enough, timeout, f"{count} HTTP requests to {server or 'any server'}")

    # --- processes inside -------------------------------------------------

    def command(self, argv, cwd: str | os.PathLike | None = None) -> list[str]:
        """`argv` prefixed to run inside the namespaces (for callers that
        spawn processes themselves, e.g. the MCP SDK's stdio client; those
        are not tracked by `close()`). The working directory is passed
        explicitly: entering a mount namespace resets it to `/`."""
        self._check_running()
        wd = os.path.abspath(cwd if cwd is not None else os.getcwd())
        return [
            "nsenter",
            f"--target={self.pid}",
            "--net",
            "--mount",
            "--uts",
            f"--wd={wd}",
            "--",
            *(str(a) for a in argv),
        ]

    def popen(self, argv, **kwargs) -> subprocess.Popen:
        """Start `argv` inside the namespaces; stdin, stdout and stderr are
        pipes unless given, and usable from outside (pipes do not care about
        namespaces). nsenter execs `argv` in place, so the Popen's pid is
        the command's. It gets its own process group (unless the caller
        chose a session), so `close()` can end anything it spawned too."""
        for stream in ("stdin", "stdout", "stderr"):
            kwargs.setdefault(stream, subprocess.PIPE)
        own_group = kwargs.get("start_new_session", False)
        if not own_group and "process_group" not in kwargs:
            kwargs["process_group"] = 0
            own_group = True
        proc = subprocess.Popen(self.command(argv, kwargs.pop("cwd", None)), **kwargs)
        self._procs.append((proc, own_group))
        return proc

    def run(self, argv, timeout: float = 30.0, input: bytes | str | None = None, **kwargs):
        """Run `argv` inside to completion: a CompletedProcess with its
        output (text unless `text=False`). Killed (and TimeoutExpired raised)
        after `timeout`."""
        kwargs.setdefault("text", True)
        if input is None:
            kwargs.setdefault("stdin", subprocess.DEVNULL)
        proc = self.popen(argv, **kwargs)
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            _end(proc, True)
            raise
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _end(proc: subprocess.Popen, own_group: bool) -> None:
    """SIGTERM (to the whole group when it has its own), a bounded wait,
    then SIGKILL; pipes closed either way."""

    def signal_it(sig):
        try:
            if own_group:
                os.killpg(proc.pid, sig)  # its children too, if any are left
            elif proc.poll() is None:
                proc.send_signal(sig)
        except (ProcessLookupError, PermissionError):
            pass  # already gone

    signal_it(signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        pass
    # The leader may have exited on SIGTERM while a child ignored it.
    signal_it(signal.SIGKILL)
    try:
        proc.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        pass  # unkillable (stuck in the kernel): nothing more to do; go on
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass


class NetnsRawServer(RawServer):
    """conftest.RawServer's JSON-RPC helpers (send, read_response,
    initialize, close) for `toolcage serve` running inside `ns`. It sets up
    the attributes RawServer's methods use instead of calling its
    constructor (which would start the server outside), and reads stdout
    with a deadline, so a server that stops answering fails the test
    instead of hanging it.
    """

    def __init__(self, ns: Netns, s: Setup, env: dict | None = None, timeout: float = 60.0):
        self.stderr = open(s.stderr_path, "a")
        self.proc = ns.popen(
            [str(BIN), *s.args()],
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env={**os.environ, "TOOLCAGE_LOG": "info,toolcage=debug,rmcp=warn", **(env or {})},
        )
        self.lines: list[str] = []
        self.timeout = timeout
        self._out = LineReader(self.proc.stdout)
        self.next_id = 0

    def read(self) -> dict:
        line = self._out.readline(self.timeout)
        assert line, "server closed stdout"
        self.lines.append(line.decode())
        message = json.loads(line)
        assert message.get("jsonrpc") == "2.0", line
        return message

    def close(self) -> str:
        self.proc.stdin.close()
        rest = self._out.read_all(self.timeout).decode()
        self.proc.wait(timeout=30)
        self.stderr.close()
        for line in rest.splitlines():
            assert json.loads(line).get("jsonrpc") == "2.0", line
        return rest


@pytest.fixture
def netns(tmp_path):
    """A fresh namespace for one test: empty /etc/hosts, a stub that knows no
    names, no HTTP servers yet. Files and logs stay under tmp_path/netns for
    a failed test's post-mortem."""
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    with Netns(root=tmp_path / "netns") as ns:
        yield ns
