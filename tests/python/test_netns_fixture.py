"""The netns fixture itself, without toolcage: small Python programs run
inside the namespace through `netns.popen`/`netns.run` show that /etc/hosts
and the stub DNS server are what resolves names there, that the stub logs
exactly what was asked, that the HTTP servers log what reached them, and
that the namespace is sealed both ways. The toolcage network tests rely on
each of these facts."""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
import urllib.request

import pytest

from netns import RESOLV_CONF, Netns, netns, unavailable  # noqa: F401 (fixture)

# Resolve each name given as an argument the way a Rust program's
# `ToSocketAddrs` does (getaddrinfo, any family, stream sockets); print one
# JSON object per name: the sorted addresses, or the getaddrinfo error.
RESOLVE = r"""
import json, socket, sys
out = {}
for name in sys.argv[1:]:
    try:
        infos = socket.getaddrinfo(name, 80, type=socket.SOCK_STREAM)
        out[name] = sorted({info[4][0] for info in infos})
    except socket.gaierror as error:
        out[name] = {"error": error.errno}
print(json.dumps(out))
"""

# GET a URL with urllib, never through a proxy (the environment may name
# one); print the status and the JSON body.
FETCH = r"""
import json, sys, urllib.request
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
with opener.open(sys.argv[1], timeout=10) as response:
    print(json.dumps({"status": response.status, "body": json.loads(response.read())}))
"""

# Try to connect (TCP) to HOST PORT; print "connected" or the errno's name.
CONNECT = r"""
import errno, socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5).close()
    print("connected")
except OSError as error:
    print(errno.errorcode.get(error.errno, str(error)))
"""


def python_in(ns: Netns, code: str, *args: str):
    """Run `code` with this interpreter inside `ns`; its stdout, as JSON if
    it parses."""
    result = ns.run([sys.executable, "-c", code, *args], timeout=30)
    assert result.returncode == 0, result.stderr
    try:
        return json.loads(result.stdout)
    except json.JSONDecodeError:
        return result.stdout.strip()


def resolve(ns: Netns, *names: str) -> dict:
    return python_in(ns, RESOLVE, *names)


def asked(ns: Netns) -> list[tuple[str, str]]:
    """(name, type) of every logged DNS question, sorted: glibc sends A and
    AAAA in parallel, so their order in the log is not fixed."""
    return sorted((q["name"], q["type"]) for q in ns.queries())


NXDOMAIN_ERROR = socket.EAI_NONAME  # what getaddrinfo reports for NXDOMAIN


def test_the_namespace_has_only_lo_and_the_test_files(netns):
    netns.set_hosts({"a.test": "127.0.0.9"})
    script = "ip -o link; echo ---; cat /etc/hosts; echo ---; cat /etc/resolv.conf"
    out = netns.run(["sh", "-c", script])
    links, hosts, resolv = out.stdout.split("---\n")
    assert [line.split(":")[1].strip() for line in links.splitlines()] == ["lo"]
    assert "UP" in links
    assert hosts.splitlines()[1:] == ["127.0.0.9\ta.test"]
    assert resolv == RESOLV_CONF
    # The host's own files were not touched.
    assert "a.test" not in open("/etc/hosts").read()
    # Commands start in the caller's working directory, not `/`.
    assert netns.run(["pwd"]).stdout.strip() == os.getcwd()


def test_loopback_addresses_are_bindable(netns):
    code = r"""
import socket
for family, ip in [(socket.AF_INET, "127.0.0.1"), (socket.AF_INET, "127.0.0.2"),
                   (socket.AF_INET, "127.0.0.3"), (socket.AF_INET6, "::1")]:
    with socket.socket(family) as s:
        s.bind((ip, 8080))
print("bound")
"""
    assert python_in(netns, code) == "bound"


def test_a_name_only_in_hosts_resolves_without_dns(netns):
    netns.set_hosts({"hostsonly.test": "127.0.0.2"})
    netns.set_dns({"dnsonly.test": "127.0.0.3"})
    assert resolve(netns, "hostsonly.test", "HostsOnly.TEST") == {
        "hostsonly.test": ["127.0.0.2"],
        # The files backend compares case-insensitively too.
        "HostsOnly.TEST": ["127.0.0.2"],
    }
    # An IPv4-only hosts entry answers an any-family lookup in full: glibc
    # does not go on to ask DNS for AAAA.
    assert netns.queries() == []


def test_a_name_only_in_dns_resolves_through_the_stub_and_is_logged(netns):
    netns.set_dns({"dnsonly.test": "127.0.0.3", "v6.test": ["::1", "127.0.0.4"]})
    assert resolve(netns, "dnsonly.test") == {"dnsonly.test": ["127.0.0.3"]}
    assert asked(netns) == [("dnsonly.test", "A"), ("dnsonly.test", "AAAA")]
    by_type = {q["type"]: q for q in netns.queries()}
    assert by_type["A"]["rcode"] == "NOERROR" and by_type["A"]["answers"] == ["127.0.0.3"]
    # The name exists but has no IPv6 address: NODATA, not NXDOMAIN.
    assert by_type["AAAA"]["rcode"] == "NOERROR" and by_type["AAAA"]["answers"] == []

    netns.clear()
    assert resolve(netns, "v6.test") == {"v6.test": ["127.0.0.4", "::1"]}
    assert {q["type"]: q["answers"] for q in netns.queries()} == {
        "A": ["127.0.0.4"],
        "AAAA": ["::1"],
    }


def test_the_stub_logs_names_as_asked_and_refuses_the_rest(netns):
    netns.set_dns({"dnsonly.test": "127.0.0.3"})
    out = resolve(netns, "DnsOnly.Test", "nowhere.test")
    # Matching is case-insensitive, as in DNS; the log keeps the case sent.
    assert out["DnsOnly.Test"] == ["127.0.0.3"]
    assert out["nowhere.test"] == {"error": NXDOMAIN_ERROR}
    assert asked(netns) == [
        ("DnsOnly.Test", "A"),
        ("DnsOnly.Test", "AAAA"),
        ("nowhere.test", "A"),
        ("nowhere.test", "AAAA"),
    ]
    assert {q["rcode"] for q in netns.queries() if q["name"] == "nowhere.test"} == {"NXDOMAIN"}
    # Nothing in the namespace asked anything else (no search domains: the
    # hostname has no dot and resolv.conf no `search`).
    assert all(q["transport"] == "udp" and q["qclass"] == 1 for q in netns.queries())


def test_a_trailing_dot_skips_hosts_and_goes_to_dns(netns):
    """glibc 2.36 (Debian 12), observed: the files backend compares the name
    with each /etc/hosts entry as a string, so `name.` matches no entry
    there, and the lookup goes on to DNS, where `name.` is the absolute
    form of `name` (no search domains are tried, and on the wire the two
    are the same query). So for a name that is in /etc/hosts, `name` and
    `name.` can resolve to different addresses, or one of them not at all.
    A server that normalises `name.` to `name` when checking a grant, but
    connects to what the URL said, must be tested against exactly this."""
    netns.set_hosts({"hostsonly.test": "127.0.0.2", "both.test": "127.0.0.2"})
    netns.set_dns({"dnsonly.test": "127.0.0.3", "both.test": "127.0.0.3"})

    out = resolve(netns, "hostsonly.test.")
    assert out == {"hostsonly.test.": {"error": NXDOMAIN_ERROR}}
    # Asked of DNS, without the dot (the root label is implicit on the wire).
    assert asked(netns) == [("hostsonly.test", "A"), ("hostsonly.test", "AAAA")]

    netns.clear()
    # In both: without the dot /etc/hosts wins and DNS is never asked ...
    assert resolve(netns, "both.test") == {"both.test": ["127.0.0.2"]}
    assert netns.queries() == []
    # ... with it, DNS answers, with a different address.
    assert resolve(netns, "both.test.") == {"both.test.": ["127.0.0.3"]}
    assert asked(netns) == [("both.test", "A"), ("both.test", "AAAA")]

    netns.clear()
    # A name only in DNS resolves the same either way.
    assert resolve(netns, "dnsonly.test.") == {"dnsonly.test.": ["127.0.0.3"]}
    assert asked(netns) == [("dnsonly.test", "A"), ("dnsonly.test", "AAAA")]


def test_raw_queries_are_logged_byte_exact(netns):
    """What no resolver library would send, sent by hand over UDP: a label
    that contains a dot, a non-ASCII byte, an HTTPS-type question, and a
    packet too short to be a header. The log shows each exactly (escaped),
    and the stub still answers what it can."""
    code = r"""
import json, socket, struct, sys
def query(ident, labels, qtype):
    name = b"".join(bytes([len(l)]) + l for l in labels) + b"\0"
    return struct.pack("!HHHHHH", ident, 0x0100, 1, 0, 0, 0) + name + struct.pack("!HH", qtype, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(5)
s.connect(("127.0.0.1", 53))
rcodes = []
for packet in [query(1, [b"Odd.Label", b"test"], 1), query(2, [b"caf\xe9", b"test"], 65),
               query(3, [b"known", b"test"], 1), b"\x00\x04\x01"]:
    s.send(packet)
    if len(packet) >= 12:
        reply = s.recv(512)
        ident, flags, qd, an = struct.unpack("!HHHH", reply[:8])
        rcodes.append([ident, flags & 0xF, an])
print(json.dumps(rcodes))
"""
    netns.set_dns({"known.test": "127.0.0.7"})
    # NXDOMAIN (3) for the odd names, one answer for the known one.
    assert python_in(netns, code) == [[1, 3, 0], [2, 3, 0], [3, 0, 1]]
    netns.wait_queries(4)  # the short packet is logged without a reply
    logged = netns.queries()
    assert [(q.get("name"), q.get("type")) for q in logged[:3]] == [
        ("Odd\\.Label.test", "A"),
        ("caf\\233.test", "HTTPS"),
        ("known.test", "A"),
    ]
    assert logged[2]["answers"] == ["127.0.0.7"]
    assert logged[3]["error"] == "shorter than a header"


def test_localhost_is_not_special_without_a_hosts_entry(netns):
    # glibc's own resolver has no built-in `localhost` (that would be the
    # nss `myhostname` module, which nsswitch.conf here does not list): with
    # the name missing from /etc/hosts, it is asked of DNS like any other.
    assert resolve(netns, "localhost") == {"localhost": {"error": NXDOMAIN_ERROR}}
    assert asked(netns) == [("localhost", "A"), ("localhost", "AAAA")]


def test_dns_over_tcp_is_served_and_logged(tmp_path):
    if unavailable():
        pytest.skip(unavailable())
    # `use-vc` makes glibc send its queries over TCP.
    with Netns(
        dns={"tcp.test": "127.0.0.5"},
        resolv_conf=RESOLV_CONF + "options use-vc\n",
        root=tmp_path / "netns",
    ) as ns:
        assert resolve(ns, "tcp.test") == {"tcp.test": ["127.0.0.5"]}
        assert asked(ns) == [("tcp.test", "A"), ("tcp.test", "AAAA")]
        assert {q["transport"] for q in ns.queries()} == {"tcp"}


def test_http_requests_are_recorded_with_their_host_header(netns):
    server = netns.add_http("127.0.0.2", 0)
    port = server.rsplit(":", 1)[1]
    netns.set_dns({"api.test": "127.0.0.2"})

    by_ip = python_in(netns, FETCH, f"http://127.0.0.2:{port}/x?y=1")
    assert by_ip == {"status": 200, "body": {"server": server, "path": "/x?y=1", "host": server}}
    by_name = python_in(netns, FETCH, f"http://api.test:{port}/named")
    assert by_name["body"]["server"] == server and by_name["body"]["host"] == f"api.test:{port}"

    first, second = netns.requests(server)
    assert first["request_line"] == "GET /x?y=1 HTTP/1.1"
    assert first["method"] == "GET" and first["target"] == "/x?y=1"
    assert first["host"] == f"127.0.0.2:{port}"
    assert ["Host", f"127.0.0.2:{port}"] in first["headers"]
    assert second["host"] == f"api.test:{port}"
    assert {name.lower() for name, _ in second["headers"]} >= {"host", "user-agent"}
    assert first["seq"] < second["seq"]
    # The name was resolved through the stub.
    assert ("api.test", "A") in asked(netns)


def test_several_servers_each_name_themselves(tmp_path):
    if unavailable():
        pytest.skip(unavailable())
    # Servers chosen up front, including IPv6 and an address that is not
    # loopback (added to `lo` inside): a stand-in for a "public" host.
    with Netns(http=[("127.0.0.2", 0), ("127.0.0.3", 0)], root=tmp_path / "netns") as ns:
        six = ns.add_http("::1", 0)
        public = ns.add_http("192.0.2.10", 8080)
        assert public == "192.0.2.10:8080" and six.startswith("[::1]:")
        assert len(ns.servers) == 4
        for server in ns.servers:
            out = python_in(ns, FETCH, ns.url(server, "/who"))
            assert out["body"]["server"] == server
        for server in ns.servers:
            assert [r["target"] for r in ns.requests(server)] == ["/who"]
        assert len(ns.requests()) == 4

        # The redirect route, for tests of where a redirect's hop goes.
        first, second = ns.servers[:2]
        target = ns.url(second, "/landed")
        out = python_in(ns, FETCH, ns.url(first, f"/redirect?to={target}"))
        assert out["body"] == {"server": second, "path": "/landed", "host": second}


def test_the_namespace_is_sealed_both_ways(netns):
    server = netns.add_http("127.0.0.2", 0)
    six = netns.add_http("::1", 0)
    ip, port = server.rsplit(":", 1)
    # Inside, the server answers ...
    assert python_in(netns, CONNECT, ip, port) == "connected"
    # ... outside, at the same address, nothing listens: the host's loopback
    # is another network.
    for host, p in [(ip, port), ("::1", six.rsplit(":", 1)[1])]:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((host, int(p)), timeout=5).close()
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with pytest.raises(OSError):
        opener.open(netns.url(server), timeout=5)
    assert netns.requests() == []

    # And from inside, a listener outside is unreachable, and so is any
    # address beyond lo (no routes at all: not the host's resolver either).
    with socket.create_server(("127.0.0.1", 0)) as outside:
        outside_port = str(outside.getsockname()[1])
        assert python_in(netns, CONNECT, "127.0.0.1", outside_port) == "ECONNREFUSED"
    assert python_in(netns, CONNECT, "192.0.2.1", "80") == errno.errorcode[errno.ENETUNREACH]


def test_popen_pipes_cross_the_namespace(netns):
    # A line-by-line conversation over stdin/stdout, as an MCP client has
    # with the server on stdio.
    code = "import sys\nfor line in sys.stdin:\n    print(line.strip().upper(), flush=True)\n"
    proc = netns.popen([sys.executable, "-c", code])
    for word in (b"one", b"two"):
        proc.stdin.write(word + b"\n")
        proc.stdin.flush()
        assert proc.stdout.readline() == word.upper() + b"\n"
    proc.stdin.close()
    assert proc.wait(timeout=10) == 0
    # It really ran inside: same network namespace as the holder.
    assert os.readlink(f"/proc/{netns.pid}/ns/net") != os.readlink("/proc/self/ns/net")


def ended(pid: int) -> bool:
    """The process is gone, or a zombie (dead, its parent yet to reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


def test_closing_ends_every_process_and_the_namespace(tmp_path):
    if unavailable():
        pytest.skip(unavailable())
    with Netns(root=tmp_path / "netns") as ns:
        holder = ns.pid
        # A process that ignores SIGTERM and has a child: both must go.
        sleeper = ns.popen(
            ["sh", "-c", "trap '' TERM; sleep 300 & wait"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        net = os.readlink(f"/proc/{holder}/ns/net")
        # Popen returns once nsenter is running; it joins the namespace a
        # moment later, before it execs the command.
        ns.wait_for(lambda: os.readlink(f"/proc/{sleeper.pid}/ns/net") == net, 10, "setns")
        # And its child is running (so the trap is set): the group kill is
        # what has to end both.
        children = f"/proc/{sleeper.pid}/task/{sleeper.pid}/children"
        child = int(ns.wait_for(lambda: open(children).read().split(), 10, "the child")[0])
    assert sleeper.returncode is not None and ended(holder)
    # The orphaned child is reaped by init, not by us: dead is enough.
    Netns.wait_for(lambda: ended(child), 10, f"pid {child} to end")
    # No live process is left in that network namespace.
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            inside = os.readlink(f"/proc/{pid}/ns/net") == net
        except (FileNotFoundError, PermissionError, ProcessLookupError):
            continue
        assert not inside or ended(int(pid)), f"pid {pid} survived"


def test_a_root_it_made_itself_is_removed():
    if unavailable():
        pytest.skip(unavailable())
    with Netns() as ns:
        root = ns.root
        assert (root / "dns.jsonl").exists()
    assert not root.exists()
