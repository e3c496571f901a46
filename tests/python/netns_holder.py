"""The process that owns a private network + mount namespace for netns.py.

Started by `Netns.__enter__` as

    unshare --net --mount --uts --propagation private PYTHON -u netns_holder.py CONFIG_JSON

so this script runs as the first process of a fresh network namespace (only
`lo`, down), a fresh mount namespace whose mounts do not propagate back to
the host, and a UTS namespace for a fixed hostname. It:

1. brings `lo` up (which gives 127.0.0.1/8 and ::1; every 127.x.y.z is then
   bindable) and adds any other address a server asks for to `lo`;
2. bind-mounts the test's files over /etc/hosts and /etc/resolv.conf, so
   every process that later joins these namespaces (`nsenter`) resolves
   through them;
3. serves a stub DNS server on 127.0.0.1:53 (UDP and TCP) that answers from
   a table and logs every question it sees;
4. serves plain HTTP/1.1 on the (ip, port) pairs it is asked for, logging
   every request;
5. prints one JSON line `{"ready": ...}` on stdout, then serves control
   commands, one JSON object per stdin line, one JSON reply per stdout line.

It exits when its stdin reaches EOF: the test closed it, or the test process
died. Either way no holder outlives the test run.

Standard library only; test-only code (it trusts its input).
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket
import socketserver
import struct
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

# --- logs --------------------------------------------------------------------


class JsonLog:
    """An append-only JSON-lines file shared by many threads. Each record is
    one write of one whole line, flushed at once, so the test (another
    process) sees it as soon as the client got its answer: records are
    written before the answer is sent."""

    def __init__(self, path: str):
        self._file = open(path, "a", encoding="utf-8")
        self._lock = threading.Lock()
        self._seq = 0

    def write(self, record: dict) -> None:
        with self._lock:
            self._seq += 1
            record = {"seq": self._seq, "time": time.time(), **record}
            self._file.write(json.dumps(record, sort_keys=True) + "\n")
            self._file.flush()


# --- DNS -----------------------------------------------------------------------

# Type numbers to mnemonics, for readable logs; others log as `TYPE<n>`
# (the RFC 3597 spelling).
QTYPES = {
    1: "A",
    2: "NS",
    5: "CNAME",
    6: "SOA",
    12: "PTR",
    15: "MX",
    16: "TXT",
    28: "AAAA",
    33: "SRV",
    41: "OPT",
    64: "SVCB",
    65: "HTTPS",
    255: "ANY",
}
TYPE_A, TYPE_AAAA, CLASS_IN = 1, 28, 1
NOERROR, FORMERR, NXDOMAIN, NOTIMP = 0, 1, 3, 4
RCODES = {NOERROR: "NOERROR", FORMERR: "FORMERR", NXDOMAIN: "NXDOMAIN", NOTIMP: "NOTIMP"}
TTL = 1  # short: nothing in the namespace should cache answers across a test


class DnsError(Exception):
    """A message we cannot parse far enough to answer normally."""


def label_text(label: bytes) -> str:
    """A label in presentation form, reversibly: printable ASCII as is
    (case kept), `.` and `\\` escaped, every other byte as `\\DDD`. So a label
    that really contains a dot (the only way a "trailing dot" can reach the
    wire, since every wire name already ends at the root) shows as `\\.`."""
    out = []
    for byte in label:
        char = chr(byte)
        if char in ".\\":
            out.append("\\" + char)
        elif 0x21 <= byte <= 0x7E:
            out.append(char)
        else:
            out.append(f"\\{byte:03d}")
    return "".join(out)


def read_name(message: bytes, offset: int) -> tuple[list[bytes], int]:
    """The labels of the name at `offset` and the offset just past it.
    Follows compression pointers (a query has none, but be correct), with a
    bound so a pointer loop cannot hang the server."""
    labels: list[bytes] = []
    end = None  # where the name ends in the message, once a pointer is taken
    jumps = 0
    while True:
        if offset >= len(message):
            raise DnsError("name runs past the message")
        length = message[offset]
        if length & 0xC0 == 0xC0:
            if offset + 1 >= len(message):
                raise DnsError("truncated pointer")
            jumps += 1
            if jumps > 32:
                raise DnsError("pointer loop")
            if end is None:
                end = offset + 2
            offset = ((length & 0x3F) << 8) | message[offset + 1]
            continue
        if length & 0xC0:
            raise DnsError(f"unsupported label type {length:#x}")
        offset += 1
        if length == 0:
            return labels, (end if end is not None else offset)
        if offset + length > len(message):
            raise DnsError("label runs past the message")
        labels.append(message[offset : offset + length])
        offset += length


def parse_query(message: bytes) -> dict:
    """Header fields and questions of a query. Raises DnsError (with the id
    known, when the header was there) on anything malformed."""
    if len(message) < 12:
        raise DnsError("shorter than a header")
    ident, flags, qdcount, ancount, nscount, arcount = struct.unpack("!HHHHHH", message[:12])
    offset = 12
    questions = []
    for _ in range(qdcount):
        labels, offset = read_name(message, offset)
        if offset + 4 > len(message):
            raise DnsError("question runs past the message")
        qtype, qclass = struct.unpack("!HH", message[offset : offset + 4])
        questions.append({"labels": labels, "qtype": qtype, "qclass": qclass, "end": offset + 4})
        offset += 4
    return {
        "id": ident,
        "flags": flags,
        "opcode": (flags >> 11) & 0xF,
        "qr": bool(flags & 0x8000),
        "rd": bool(flags & 0x0100),
        "questions": questions,
        "counts": [qdcount, ancount, nscount, arcount],
    }


def encode_reply(query: bytes, parsed: dict, rcode: int, answers: list[tuple[int, bytes]]) -> bytes:
    """A reply to `query`: its id, opcode and RD, QR/AA/RA set, `rcode`; the
    first question copied byte for byte (so the name's case comes back as
    sent, which resolvers compare); each answer (type, rdata) named by a
    pointer to that question."""
    flags = 0x8000 | (parsed["opcode"] << 11) | 0x0400 | 0x0080 | (rcode & 0xF)
    if parsed["rd"]:
        flags |= 0x0100
    if not parsed["questions"]:
        return struct.pack("!HHHHHH", parsed["id"], flags, 0, 0, 0, 0)
    question = query[12 : parsed["questions"][0]["end"]]
    out = [struct.pack("!HHHHHH", parsed["id"], flags, 1, len(answers), 0, 0), question]
    for rtype, rdata in answers:
        out.append(struct.pack("!HHHIH", 0xC00C, rtype, CLASS_IN, TTL, len(rdata)) + rdata)
    return b"".join(out)


def error_reply(message: bytes, rcode: int) -> bytes | None:
    """A bare error reply (no question) when only the header is readable."""
    if len(message) < 12:
        return None
    ident, flags = struct.unpack("!HH", message[:4])
    flags = 0x8000 | (flags & 0x7900) | 0x0080 | rcode  # keep opcode and RD
    return struct.pack("!HHHHHH", ident, flags, 0, 0, 0, 0)


class DnsTable:
    """What the stub answers: lowercase name without trailing dot -> addresses.
    DNS names compare case-insensitively, so lookups fold case; the log keeps
    what was actually asked."""

    def __init__(self, entries: dict):
        self._lock = threading.Lock()
        self._entries: dict[str, list] = {}  # name -> ipaddress objects
        self.replace(entries)

    def replace(self, entries: dict) -> None:
        table = {}
        for name, addresses in entries.items():
            if isinstance(addresses, str):
                addresses = [addresses]
            table[name.rstrip(".").lower()] = [ipaddress.ip_address(a) for a in addresses]
        with self._lock:
            self._entries = table

    def lookup(self, name: str) -> list | None:
        with self._lock:
            return self._entries.get(name.lower())


def answer(table: DnsTable, message: bytes, transport: str, client, log: JsonLog) -> bytes | None:
    """Log every question in `message` and build the reply (None: drop it)."""
    where = f"{client[0]}:{client[1]}"
    try:
        parsed = parse_query(message)
    except DnsError as error:
        log.write({"transport": transport, "client": where, "error": str(error)})
        return error_reply(message, FORMERR)
    if parsed["qr"]:
        return None  # a response sent to us: never answer one
    rcode, answers = NOERROR, []
    if parsed["opcode"] != 0:
        rcode = NOTIMP
    elif len(parsed["questions"]) != 1:
        rcode = FORMERR
    else:
        question = parsed["questions"][0]
        # The name as the table knows it: the raw labels, joined. (A label
        # that contains a dot can therefore never match a table entry that
        # was meant as two labels; that is the point of logging it exactly.)
        key = ".".join(label.decode("latin-1") for label in question["labels"])
        addresses = table.lookup(key) if question["qclass"] == CLASS_IN else None
        if addresses is None:
            rcode = NXDOMAIN
        else:
            # The name exists: records of the asked type, or none (NODATA).
            for address in addresses:
                if question["qtype"] == TYPE_A and address.version == 4:
                    answers.append((TYPE_A, address.packed))
                elif question["qtype"] == TYPE_AAAA and address.version == 6:
                    answers.append((TYPE_AAAA, address.packed))
    for question in parsed["questions"]:
        name = ".".join(label_text(label) for label in question["labels"]) or "."
        qtype = question["qtype"]
        log.write(
            {
                "transport": transport,
                "client": where,
                "id": parsed["id"],
                "name": name,
                "type": QTYPES.get(qtype, f"TYPE{qtype}"),
                "qtype": qtype,
                "qclass": question["qclass"],
                "rcode": RCODES.get(rcode, str(rcode)),
                "answers": [str(ipaddress.ip_address(rdata)) for _, rdata in answers],
            }
        )
    return encode_reply(message, parsed, rcode, answers)


class DnsUdp(socketserver.ThreadingUDPServer):
    daemon_threads = True
    allow_reuse_address = True


class DnsTcp(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def dns_handlers(table: DnsTable, log: JsonLog):
    class Udp(socketserver.BaseRequestHandler):
        def handle(self):
            message, sock = self.request
            reply = answer(table, message, "udp", self.client_address, log)
            if reply is not None:
                sock.sendto(reply, self.client_address)

    class Tcp(socketserver.BaseRequestHandler):
        # Messages are length-prefixed; a client may send several on one
        # connection (glibc sends A and AAAA back to back).
        def handle(self):
            self.request.settimeout(10)
            try:
                while True:
                    head = self._exactly(2)
                    if head is None:
                        return
                    message = self._exactly(struct.unpack("!H", head)[0])
                    if message is None:
                        return
                    reply = answer(table, message, "tcp", self.client_address, log)
                    if reply is not None:
                        self.request.sendall(struct.pack("!H", len(reply)) + reply)
            except OSError:
                return

        def _exactly(self, count: int) -> bytes | None:
            data = b""
            while len(data) < count:
                chunk = self.request.recv(count - len(data))
                if not chunk:
                    return None
                data += chunk
            return data

    return Udp, Tcp


# --- HTTP ----------------------------------------------------------------------

BODY_LOG_LIMIT = 64 * 1024  # request bodies are logged up to this many bytes


def authority(ip: str, port: int) -> str:
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


class QuietHttpServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        # Clients that hang up mid-request are normal in these tests.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def http_handler(name: str, log: JsonLog):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real servers do
        server_version = "netns-fixture/1"

        def log_message(self, format, *args):  # noqa: A002 - the base class's name
            pass  # the JSON log is the record; keep stderr for real errors

        def parse_request(self):
            ok = super().parse_request()
            if not ok:
                # Malformed requests got an error reply from the base class;
                # record them too, since "nothing arrived" must be provable.
                line = getattr(self, "raw_requestline", b"").decode("latin-1").rstrip("\r\n")
                log.write(
                    {"server": name, "client": self._client(), "request_line": line, "error": True}
                )
            return ok

        def _client(self) -> str:
            return authority(*self.client_address[:2])

        def _read_body(self) -> bytes:
            if "chunked" in self.headers.get("transfer-encoding", "").lower():
                body = b""
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                            pass  # trailers
                        return body
                    body += self.rfile.read(size)
                    self.rfile.readline()  # the CRLF after each chunk
            length = int(self.headers.get("content-length") or 0)
            return self.rfile.read(length) if length else b""

        def do_GET(self):
            body = self._read_body()
            hosts = self.headers.get_all("Host") or []
            log.write(
                {
                    "server": name,
                    "client": self._client(),
                    "request_line": self.requestline,
                    "method": self.command,
                    "target": self.path,
                    "version": self.request_version,
                    "host": hosts[0] if hosts else None,
                    # Every header, in order, names as sent (duplicates kept).
                    "headers": [[k, v] for k, v in self.headers.items()],
                    "body_length": len(body),
                    "body": body[:BODY_LOG_LIMIT].decode("utf-8", "replace"),
                }
            )
            parts = urlsplit(self.path)
            if parts.path == "/redirect":
                # /redirect?to=URL[&status=302]: for tests of where a
                # redirect's second request resolves and goes.
                query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
                self.send_response(int(query.get("status", "302")))
                self.send_header("Location", query.get("to", "/"))
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            reply = {"server": name, "path": self.path, "host": hosts[0] if hosts else None}
            data = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_GET

    return Handler


# --- the namespace ---------------------------------------------------------------

HOSTNAME = "netns-fixture"  # no dot: see Holder.setup


def run(*argv: str) -> None:
    """Run a setup command; its failure is the holder's failure, with why."""
    result = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {result.stderr.strip() or result.returncode}")


def ensure_local(ip: str) -> None:
    """Make `ip` bindable: loopback addresses already are once lo is up;
    anything else (a stand-in "public" address, say) is added to lo."""
    address = ipaddress.ip_address(ip)
    if address.is_loopback:
        return
    probe = socket.socket(socket.AF_INET6 if address.version == 6 else socket.AF_INET)
    try:
        probe.bind((ip, 0))
        return  # already local
    except OSError:
        pass
    finally:
        probe.close()
    if address.version == 6:
        # `nodad`: otherwise the address is "tentative" for a moment and a
        # bind right after adding it fails.
        run("ip", "addr", "add", f"{ip}/128", "dev", "lo", "nodad")
    else:
        run("ip", "addr", "add", f"{ip}/32", "dev", "lo")


class Holder:
    def __init__(self, config: dict):
        self.config = config
        self.dns_log = JsonLog(config["dns_log"])
        self.http_log = JsonLog(config["http_log"])
        self.table = DnsTable(config.get("dns", {}))
        self.servers: dict[str, QuietHttpServer] = {}

    def setup(self) -> None:
        # A hostname without a dot: glibc then has no default search domain,
        # so a name is looked up exactly as given (resolv.conf has no
        # `search` either, unless the test wrote one).
        socket.sethostname(HOSTNAME)
        run("ip", "link", "set", "lo", "up")
        # Our own mount namespace already (unshare --mount, propagation
        # private), so these binds are invisible outside it.
        for target, source in self.config["binds"].items():
            run("mount", "--bind", source, target)
        udp, tcp = dns_handlers(self.table, self.dns_log)
        for server in (DnsUdp(("127.0.0.1", 53), udp), DnsTcp(("127.0.0.1", 53), tcp)):
            threading.Thread(target=server.serve_forever, name="dns", daemon=True).start()
        for ip, port in self.config.get("http", []):
            self.add_http(ip, port)

    def add_http(self, ip: str, port: int) -> str:
        ensure_local(ip)
        server_class = type(
            "Server",
            (QuietHttpServer,),
            {"address_family": socket.AF_INET6 if ":" in ip else socket.AF_INET},
        )
        # Bind first: a port of 0 is known only after binding, and the name
        # each reply carries must be the real one.
        server = server_class((ip, port), BaseHTTPRequestHandler, bind_and_activate=True)
        name = authority(ip, server.server_address[1])
        server.RequestHandlerClass = http_handler(name, self.http_log)
        self.servers[name] = server
        threading.Thread(target=server.serve_forever, name=f"http {name}", daemon=True).start()
        return name

    def command(self, request: dict) -> dict:
        op = request.get("op")
        if op == "add_http":
            return {"server": self.add_http(request["ip"], int(request["port"]))}
        if op == "set_dns":
            self.table.replace(request["dns"])
            return {}
        if op == "ping":
            return {}
        raise ValueError(f"unknown op {op!r}")


def reply(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> None:
    holder = Holder(json.loads(sys.argv[1]))
    try:
        holder.setup()
    except Exception as error:  # noqa: BLE001 - reported to the test, then exit
        reply({"ready": False, "error": f"{type(error).__name__}: {error}"})
        sys.exit(1)
    reply({"ready": True, "pid": os.getpid(), "http": list(holder.servers)})
    # Control loop: EOF on stdin (the test closed it or died) ends the
    # holder; its server threads are daemons and die with it.
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            reply({"ok": True, **holder.command(json.loads(line))})
        except Exception as error:  # noqa: BLE001 - one bad command is not fatal
            reply({"ok": False, "error": f"{type(error).__name__}: {error}"})


if __name__ == "__main__":
    main()
