"""Scenario harness for sluice: the real sluiced, real clients, loopback upstreams.

Python 3 standard library only.  Each test file builds cases with
``Suite`` and calls ``Suite.main()``; every case gets an ``Env`` with its
own temp directory, fake DNS server, upstreams and daemon, all torn down on
every exit path (exceptions, SIGTERM/SIGINT/SIGHUP, the suite watchdog).
A daemon's stop() or a closer that finds the case left something on the
machine raises Leak, and the case fails (execdlib.py does, for
sluice-execd's sandboxes).

Exit codes follow automake: 0 pass, 1 fail, 77 skip (a missing client such
as curl or openssl; with SLUICE_TEST_STRICT=1 a skip is a failure).

Run as root, sluiced is configured with "user": "root" (it keeps root);
with SLUICE_TEST_USER=nobody it drops its proxy process to that user as
in a deployment, and each Env's directory belongs to that user.

Safety: every socket has a timeout, every loop is bounded in count and
time, only 127.0.0.0/8 and ::1 are touched, and the daemon is stopped by
the PID we started, never by name.
"""

import hashlib
import json
import os
import random
import re
import select
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback

EXIT_PASS, EXIT_FAIL, EXIT_SKIP = 0, 1, 77

# A proxy in the environment must not redirect our own clients.
for _k in list(os.environ):
    if _k.lower() in ("http_proxy", "https_proxy", "all_proxy", "no_proxy",
                      "ftp_proxy"):
        del os.environ[_k]

SRCDIR = os.environ.get("SLUICE_SRCDIR") or os.path.abspath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILDDIR = os.environ.get("SLUICE_BUILDDIR") or SRCDIR
STRICT = os.environ.get("SLUICE_TEST_STRICT") == "1"
VERBOSE = os.environ.get("SLUICE_TEST_VERBOSE") == "1"
TEST_USER = os.environ.get("SLUICE_TEST_USER")

# Statuses the contract allows for a refusal, and the status each reason
# is answered with where the contract leaves no doubt.  The three heads
# (head_too_large, head_timeout, method_not_allowed) have no dedicated
# code in the allowed set: 400 is what a client would expect from
# "your request was malformed/oversized/slow", 403 is tolerated for
# method_not_allowed (a policy refusal).
REFUSAL_STATUSES = {400, 403, 421, 429, 502, 503, 504}
REASON_STATUS = {
    "bad_request": {400},
    "bad_target": {400},
    "port_not_allowed": {403},
    "admin_deny": {403},
    "network_off": {403},
    "above_ceiling": {403},
    "private_address": {403},
    "session_unknown": {403},
    "sni_mismatch": {403},
    "sni_missing": {403},
    "not_tls": {403},
    "host_mismatch": {421},
    "prompt_timeout": {403},
    "no_approver": {403},
    "user_denied": {403},
    "dns_failed": {502},
    "dns_timeout": {504},
    "upstream_failed": {502},
    "upstream_timeout": {504},
    "too_many_connections": {429},
    "head_too_large": {400},
    "head_timeout": {400},
    "method_not_allowed": {400, 403},
    "log_unavailable": {503},
    "shutting_down": {503},
    "tier_lowered": {403},
    "ech_refused": {403},
    "connect_plain_port": {403},
    "self_target": {400},
    "too_many_interim": {502},
    "too_many_refusals": {429},
    "upstream_tls": {502},
}

ZERO_HASH = "0" * 64


class Skip(Exception):
    """A prerequisite is missing."""


class Fail(AssertionError):
    pass


class Leak(Fail):
    """Raised by a daemon's stop() or a closer at teardown when the case
    left something on the machine: Env.close collects it and the case
    fails, whatever it returned."""


def log(msg):
    sys.stderr.write("# %s\n" % msg)
    sys.stderr.flush()


def check(cond, msg, *args):
    if not cond:
        raise Fail(msg % args if args else msg)


def check_eq(got, want, what):
    if got != want:
        raise Fail("%s: got %r, want %r" % (what, got, want))


def require_tool(name):
    path = shutil.which(name)
    if not path:
        raise Skip("%s not installed" % name)
    return path


def wait_until(pred, timeout, step=0.05, what="condition"):
    """Poll pred() until it returns a true value; bounded by timeout."""
    deadline = time.monotonic() + timeout
    n = 0
    while True:
        v = pred()
        if v:
            return v
        n += 1
        if time.monotonic() > deadline or n > 100000:
            raise Fail("timed out after %.1fs waiting for %s" % (timeout, what))
        time.sleep(step)


# ---------------------------------------------------------------------------
# Ports and addresses

def free_port(host="127.0.0.1", kind=socket.SOCK_STREAM):
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(fam, kind)
    try:
        s.bind((host, 0))
        return s.getsockname()[1]
    finally:
        s.close()


def addr_base():
    """A 127.0.N.0 block for this process's client source addresses, so
    parallel tests never share identities (they also never share daemons)."""
    n = 10 + (os.getpid() % 240)
    return "127.0.%d." % n


def refuse_port(host="127.0.0.1"):
    """A port that was bound and closed: connect() gets RST."""
    return free_port(host)


# ---------------------------------------------------------------------------
# Byte helpers

def pattern_block():
    if not hasattr(pattern_block, "blk"):
        r = random.Random(4242)
        pattern_block.blk = bytes(r.getrandbits(8) for _ in range(65536))
    return pattern_block.blk


def pattern_digest(n):
    """SHA-256 of the first n bytes of the repeating pattern."""
    blk = pattern_block()
    h = hashlib.sha256()
    full, rest = divmod(n, len(blk))
    for _ in range(full):
        h.update(blk)
    h.update(blk[:rest])
    return h.hexdigest()


def recv_exact(sock, n, timeout=10.0):
    """Read exactly n bytes or raise; returns bytes."""
    sock.settimeout(timeout)
    buf = bytearray()
    deadline = time.monotonic() + timeout
    while len(buf) < n:
        if time.monotonic() > deadline:
            raise Fail("recv_exact: timed out with %d/%d bytes" % (len(buf), n))
        chunk = sock.recv(min(262144, n - len(buf)))
        if not chunk:
            raise Fail("recv_exact: EOF after %d/%d bytes" % (len(buf), n))
        buf += chunk
    return bytes(buf)


def recv_until_eof(sock, limit=1 << 20, timeout=10.0):
    """Read until EOF (bounded in size and time).  Returns (data, eof,
    reset) where reset is True when the peer reset the connection."""
    sock.settimeout(timeout)
    buf = bytearray()
    deadline = time.monotonic() + timeout
    while len(buf) <= limit and time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            return bytes(buf), False, False
        except (ConnectionResetError, BrokenPipeError):
            return bytes(buf), True, True
        if not chunk:
            return bytes(buf), True, False
        buf += chunk
    return bytes(buf), False, False


def is_closed(sock, timeout=3.0):
    """True when the peer closes (EOF or RST) within timeout without
    sending anything more; raises if data arrives."""
    data, eof, _ = recv_until_eof(sock, limit=65536, timeout=timeout)
    if data:
        raise Fail("expected a closed connection, got %d bytes: %r"
                   % (len(data), data[:80]))
    return eof


# ---------------------------------------------------------------------------
# HTTP head parsing (strict enough for tests)

class Response:
    def __init__(self, status, reason, headers, body=b"", raw_head=b""):
        self.status = status
        self.reason = reason
        self.headers = headers      # list of (name, value) in order
        self.body = body
        self.raw_head = raw_head

    def header(self, name, default=None):
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return default

    def header_all(self, name):
        name = name.lower()
        return [v for k, v in self.headers if k.lower() == name]

    @property
    def sluice_reason(self):
        return self.header("X-Sluice-Reason")

    def __repr__(self):
        return "<Response %s %s reason=%s body=%r>" % (
            self.status, self.reason, self.sluice_reason, self.body[:120])


def read_head(sock, timeout=10.0, limit=65536, pre=b""):
    """Read a response head.  Returns (Response without body, leftover)."""
    sock.settimeout(timeout)
    buf = bytearray(pre)
    deadline = time.monotonic() + timeout
    while b"\r\n\r\n" not in buf:
        if len(buf) > limit:
            raise Fail("response head larger than %d bytes" % limit)
        if time.monotonic() > deadline:
            raise Fail("timed out reading response head (got %r)" % bytes(buf[:200]))
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            raise Fail("timed out reading response head (got %r)" % bytes(buf[:200]))
        except ConnectionResetError:
            raise Fail("connection reset before a response head (got %r)"
                       % bytes(buf[:200]))
        if not chunk:
            raise Fail("EOF before a complete response head (got %r)"
                       % bytes(buf[:200]))
        buf += chunk
    idx = buf.index(b"\r\n\r\n")
    head = bytes(buf[:idx])
    rest = bytes(buf[idx + 4:])
    lines = head.split(b"\r\n")
    m = re.match(rb"HTTP/1\.[01] (\d{3})(?: (.*))?$", lines[0])
    if not m:
        raise Fail("bad status line %r" % lines[0])
    headers = []
    for ln in lines[1:]:
        if b":" not in ln:
            raise Fail("bad header line %r" % ln)
        k, v = ln.split(b":", 1)
        headers.append((k.decode("latin-1"), v.strip().decode("latin-1")))
    r = Response(int(m.group(1)), (m.group(2) or b"").decode("latin-1"),
                 headers, raw_head=head)
    return r, rest


def read_body(sock, resp, rest, timeout=10.0, limit=1 << 26, head_req=False):
    """Read the body of resp given leftover bytes; returns (body, leftover)."""
    if head_req or resp.status in (204, 304) or 100 <= resp.status < 200:
        return b"", rest
    te = (resp.header("Transfer-Encoding") or "").lower()
    cl = resp.header("Content-Length")
    if te.endswith("chunked"):
        return _read_chunked(sock, rest, timeout, limit)
    if cl is not None:
        n = int(cl)
        check(n <= limit, "body too large: %d" % n)
        if len(rest) >= n:
            return rest[:n], rest[n:]
        more = recv_exact(sock, n - len(rest), timeout)
        return rest + more, b""
    data, _, _ = recv_until_eof(sock, limit, timeout)
    return rest + data, b""


def _read_chunked(sock, rest, timeout, limit):
    buf = bytearray(rest)
    out = bytearray()
    sock.settimeout(timeout)
    deadline = time.monotonic() + timeout

    def need(n):
        while len(buf) < n:
            if time.monotonic() > deadline:
                raise Fail("timeout reading chunked body")
            c = sock.recv(65536)
            if not c:
                raise Fail("EOF inside chunked body")
            buf.extend(c)

    for _ in range(1000000):
        while b"\r\n" not in buf:
            need(len(buf) + 1)
        i = buf.index(b"\r\n")
        size = int(bytes(buf[:i]).split(b";")[0], 16)
        del buf[:i + 2]
        if size == 0:
            while b"\r\n\r\n" not in b"\r\n" + buf:
                need(len(buf) + 1)
            j = (b"\r\n" + buf).index(b"\r\n\r\n")
            del buf[:max(0, j + 2)]
            return bytes(out), bytes(buf)
        need(size + 2)
        out += buf[:size]
        del buf[:size + 2]
        check(len(out) <= limit, "chunked body too large")
    raise Fail("too many chunks")


def read_response(sock, timeout=10.0, head_req=False, pre=b""):
    """One whole response; pre: bytes already read (the leftover of the
    response before, when requests were pipelined)."""
    r, rest = read_head(sock, timeout, pre=pre)
    r.body, r.leftover = read_body(sock, r, rest, timeout, head_req=head_req)
    return r


def check_refusal(resp, reason, what=""):
    """A refusal: status matching the reason, X-Sluice-Reason, one-line
    text/plain body."""
    label = ("%s: " % what) if what else ""
    check(resp.sluice_reason == reason,
          "%sexpected X-Sluice-Reason %s, got %r (status %d, body %r)",
          label, reason, resp.sluice_reason, resp.status, resp.body[:200])
    check(resp.status in REFUSAL_STATUSES, "%sstatus %d not a refusal status",
          label, resp.status)
    want = REASON_STATUS.get(reason)
    if want:
        check(resp.status in want, "%s%s answered %d, expected %s",
              label, reason, resp.status, sorted(want))
    ct = (resp.header("Content-Type") or "").lower()
    check(ct.startswith("text/plain"), "%srefusal Content-Type %r", label, ct)
    body = resp.body.rstrip(b"\r\n")
    check(len(body) > 0, "%srefusal body empty", label)
    check(b"\n" not in body, "%srefusal body is not one line: %r", label, body)


# ---------------------------------------------------------------------------
# Fake DNS server (UDP, hand-made packets)

DNS_A, DNS_AAAA = 1, 28


class FakeDNS:
    """Answers from a dict: name -> {"A": [...], "AAAA": [...]} or one of
    "NXDOMAIN", "SERVFAIL", "drop".  Unknown names get NXDOMAIN."""

    def __init__(self, records=None, host="127.0.0.1"):
        self.records = {}
        for k, v in (records or {}).items():
            self.records[k.lower().rstrip(".")] = v
        self.queries = []
        self.lock = threading.Lock()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((host, 0))
        self.sock.settimeout(0.2)
        self.addr = "%s:%d" % self.sock.getsockname()
        self.stop_ev = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop_ev.is_set():
            try:
                data, peer = self.sock.recvfrom(4096)
            except socket.timeout:
                continue
            except OSError:
                return
            try:
                reply = self._answer(data)
            except Exception as e:  # malformed query: ignore it
                if VERBOSE:
                    log("dns: bad query %r: %s" % (data[:40], e))
                continue
            if reply is not None:
                try:
                    self.sock.sendto(reply, peer)
                except OSError:
                    pass

    @staticmethod
    def _parse_name(data, off):
        labels = []
        for _ in range(128):
            n = data[off]
            off += 1
            if n == 0:
                return ".".join(labels), off
            if n & 0xC0:
                raise ValueError("compressed name in question")
            labels.append(data[off:off + n].decode("ascii"))
            off += n
        raise ValueError("name too long")

    def _answer(self, data):
        qid, flags, qd, _an, _ns, _ar = struct.unpack("!HHHHHH", data[:12])
        if flags & 0x8000 or qd != 1:
            return None
        name, off = self._parse_name(data, 12)
        qtype, qclass = struct.unpack("!HH", data[off:off + 4])
        question = data[12:off + 4]
        key = name.lower().rstrip(".")
        with self.lock:
            self.queries.append((key, qtype))
            rec = self.records.get(key, "NXDOMAIN")
        if rec == "drop":
            return None
        rd = flags & 0x0100
        rflags = 0x8000 | 0x0400 | rd | 0x0080     # QR, AA, RD copied, RA
        answers = []
        if rec == "NXDOMAIN":
            rflags |= 3
        elif rec == "SERVFAIL":
            rflags |= 2
        else:
            if qtype == DNS_A and qclass == 1:
                for ip in rec.get("A", []):
                    answers.append(struct.pack("!HHHIH", 0xC00C, DNS_A, 1, 30, 4)
                                   + socket.inet_pton(socket.AF_INET, ip))
            elif qtype == DNS_AAAA and qclass == 1:
                for ip in rec.get("AAAA", []):
                    answers.append(struct.pack("!HHHIH", 0xC00C, DNS_AAAA, 1, 30, 16)
                                   + socket.inet_pton(socket.AF_INET6, ip))
        hdr = struct.pack("!HHHHHH", qid, rflags, 1, len(answers), 0, 0)
        return hdr + question + b"".join(answers)

    def query_count(self, name=None):
        with self.lock:
            if name is None:
                return len(self.queries)
            return sum(1 for n, _ in self.queries if n == name)

    def close(self):
        self.stop_ev.set()
        try:
            self.sock.close()
        except OSError:
            pass
        self.thread.join(2)


# ---------------------------------------------------------------------------
# TCP servers

class TCPServer:
    """Threaded TCP server calling handler(server, conn, peer) per
    connection.  Records accepted peers; connections are closed by stop()."""

    def __init__(self, handler, host="127.0.0.1", port=0, ssl_ctx=None,
                 conn_timeout=30.0):
        self.handler = handler
        self.ssl_ctx = ssl_ctx
        self.conn_timeout = conn_timeout
        fam = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(fam, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.host = host
        self.port = self.sock.getsockname()[1]
        self.accepted = []
        self.conns = []
        self.events = []           # free-form records from handlers
        self.lock = threading.Lock()
        self.stop_ev = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def record(self, item):
        with self.lock:
            self.events.append(item)

    def _run(self):
        for _ in range(10 ** 7):
            if self.stop_ev.is_set():
                return
            try:
                conn, peer = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            conn.settimeout(self.conn_timeout)
            with self.lock:
                self.accepted.append(peer)
                self.conns.append(conn)
            t = threading.Thread(target=self._serve, args=(conn, peer),
                                 daemon=True)
            t.start()

    def _serve(self, conn, peer):
        try:
            if self.ssl_ctx is not None:
                conn = self.ssl_ctx.wrap_socket(conn, server_side=True)
                with self.lock:
                    self.conns.append(conn)
            self.handler(self, conn, peer)
        except Exception as e:
            if VERBOSE:
                log("upstream %s:%d handler: %r" % (self.host, self.port, e))
            self.record(("error", repr(e)))
        finally:
            try:
                conn.close()
            except OSError:
                pass

    def accept_count(self):
        with self.lock:
            return len(self.accepted)

    def close(self):
        self.stop_ev.set()
        try:
            self.sock.close()
        except OSError:
            pass
        with self.lock:
            conns = list(self.conns)
        for c in conns:
            try:
                c.close()
            except OSError:
                pass
        self.thread.join(2)


def _read_request(conn, buf, timeout=30.0):
    """Read one request from conn (buf is leftover bytearray).  Returns
    (method, target, version, headers, body) or None on clean EOF."""
    deadline = time.monotonic() + timeout
    while b"\r\n\r\n" not in buf:
        if len(buf) > 1 << 20 or time.monotonic() > deadline:
            return None
        try:
            c = conn.recv(65536)
        except (socket.timeout, OSError):
            return None
        if not c:
            return None
        buf.extend(c)
    i = buf.index(b"\r\n\r\n")
    head = bytes(buf[:i])
    del buf[:i + 4]
    lines = head.split(b"\r\n")
    parts = lines[0].decode("latin-1").split(" ")
    if len(parts) != 3:
        return None
    method, target, version = parts
    headers = []
    for ln in lines[1:]:
        k, _, v = ln.partition(b":")
        headers.append((k.decode("latin-1"), v.strip().decode("latin-1")))
    hmap = {k.lower(): v for k, v in headers}
    body = b""
    if hmap.get("transfer-encoding", "").lower() == "chunked":
        out = bytearray()
        for _ in range(100000):
            while b"\r\n" not in buf:
                c = conn.recv(65536)
                if not c:
                    return None
                buf.extend(c)
            j = buf.index(b"\r\n")
            size = int(bytes(buf[:j]).split(b";")[0], 16)
            del buf[:j + 2]
            while len(buf) < size + 2:
                c = conn.recv(65536)
                if not c:
                    return None
                buf.extend(c)
            out += buf[:size]
            del buf[:size + 2]
            if size == 0:
                break
        body = bytes(out)
    elif "content-length" in hmap:
        n = int(hmap["content-length"])
        while len(buf) < n:
            c = conn.recv(65536)
            if not c:
                return None
            buf.extend(c)
        body = bytes(buf[:n])
        del buf[:n]
    return method, target, version, headers, body


def _send_pattern(conn, n):
    blk = pattern_block()
    sent = 0
    while sent < n:
        k = min(len(blk), n - sent)
        conn.sendall(blk[:k])
        sent += k


def http_handler(server, conn, peer):
    """HTTP/1.1 echo upstream with keep-alive.  Routes:
    /big?n=BYTES  pattern body of BYTES bytes
    /slow         body sent in 5 pieces, 200 ms apart
    /close        answers with Connection: close and closes
    anything else a JSON echo of method, path, Host, headers, body."""
    buf = bytearray()
    for _ in range(1000):
        req = _read_request(conn, buf)
        if req is None:
            return
        method, target, version, headers, body = req
        hmap = {k.lower(): v for k, v in headers}
        server.record({"method": method, "path": target, "headers": headers,
                       "body_len": len(body), "peer": peer})
        close = hmap.get("connection", "").lower() == "close" or version == "HTTP/1.0"
        path, _, query = target.partition("?")
        if path == "/big":
            n = int(dict(p.split("=", 1) for p in query.split("&") if "=" in p)
                    .get("n", "0"))
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream"
                         b"\r\nContent-Length: %d\r\n\r\n" % n)
            if method != "HEAD":
                _send_pattern(conn, n)
        elif path == "/slow":
            piece = b"slow-piece;"
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                         b"Content-Length: %d\r\n\r\n" % (5 * len(piece)))
            for _ in range(5):
                time.sleep(0.2)
                conn.sendall(piece)
        elif path == "/close":
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                         b"Connection: close\r\n\r\nbye\n")
            return
        else:
            doc = {"method": method, "path": target, "host": hmap.get("host"),
                   "headers": headers, "body_len": len(body),
                   "body_sha256": hashlib.sha256(body).hexdigest(),
                   "tls": isinstance(conn, ssl.SSLSocket)}
            out = json.dumps(doc).encode()
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n%s\r\n"
                         % (len(out), b"Connection: close\r\n" if close else b"")
                         + out)
        if close:
            return


def echo_handler(server, conn, peer):
    """Raw echo: send back whatever arrives, until EOF."""
    for _ in range(100000):
        data = conn.recv(65536)
        if not data:
            return
        conn.sendall(data)


def silent_handler(server, conn, peer):
    """Accept, read what comes for up to 3 s, answer nothing."""
    conn.settimeout(0.3)
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        try:
            if not conn.recv(65536):
                return
        except socket.timeout:
            continue
        except OSError:
            return


def recorder_handler(server, conn, peer):
    """Record every byte received until EOF; sends nothing."""
    got = bytearray()
    conn.settimeout(10)
    for _ in range(100000):
        try:
            data = conn.recv(65536)
        except (socket.timeout, OSError):
            break
        if not data:
            break
        got += data
    server.record(("bytes", peer, bytes(got)))


def make_cert(directory, names):
    """Self-signed certificate for names via the openssl CLI."""
    require_tool("openssl")
    key = os.path.join(directory, "key.pem")
    crt = os.path.join(directory, "cert.pem")
    san = ",".join("DNS:%s" % n for n in names)
    r = subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
         "-keyout", key, "-out", crt, "-days", "2", "-subj", "/CN=%s" % names[0],
         "-addext", "subjectAltName=%s" % san],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    check(r.returncode == 0, "openssl req failed: %s", r.stderr.decode(errors="replace"))
    return crt, key


def tls_server_ctx(crt, key, seen_sni):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(crt, key)

    def cb(sslsock, name, _ctx):
        seen_sni.append(name)
    ctx.sni_callback = cb
    return ctx


def client_hello(server_hostname):
    """The bytes of a TLS ClientHello (server_hostname None: no SNI)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname=server_hostname)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


# An outer ECHClientHello as a client sends it when it has no ECH
# configuration (GREASE): type outer, an HPKE suite, a config id, a
# 32-byte enc and a payload.  sluice never reads inside it.
GREASE_ECH = (bytes([0, 0, 1, 0, 1, 0x5a, 0, 32]) + b"\x5a" * 32 +
              bytes([0, 64]) + b"\x5a" * 64)


def hello_with_extension(hello, ext_type, body, at_end=False):
    """A one-record ClientHello (client_hello()) with one more extension,
    before the first one or after the last, every length fixed up."""
    p = 5 + 4 + 2 + 32
    p += 1 + hello[p]                                  # session id
    p += 2 + int.from_bytes(hello[p:p + 2], "big")     # cipher suites
    p += 1 + hello[p]                                  # compression
    elen = int.from_bytes(hello[p:p + 2], "big")
    check(p + 2 + elen == len(hello), "not a one-record hello")
    ext = ext_type.to_bytes(2, "big") + len(body).to_bytes(2, "big") + body
    at = len(hello) if at_end else p + 2
    out = bytearray(hello[:at] + ext + hello[at:])
    out[p:p + 2] = (elen + len(ext)).to_bytes(2, "big")
    out[3:5] = (int.from_bytes(hello[3:5], "big") + len(ext)).to_bytes(2, "big")
    out[6:9] = (int.from_bytes(hello[6:9], "big") + len(ext)).to_bytes(3, "big")
    return bytes(out)


class TLSOverSocket:
    """A TLS client driven through MemoryBIO over a plain socket, so the
    test can choose exactly which bytes go first (e.g. the ClientHello in
    the same write as the CONNECT head)."""

    def __init__(self, sock, server_hostname):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        self.sock = sock
        self.inc, self.out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.obj = ctx.wrap_bio(self.inc, self.out,
                                server_hostname=server_hostname)

    def first_flight(self):
        try:
            self.obj.do_handshake()
        except ssl.SSLWantReadError:
            pass
        return self.out.read()

    def _pump(self, timeout):
        data = self.out.read()
        if data:
            self.sock.sendall(data)
        self.sock.settimeout(timeout)
        c = self.sock.recv(65536)
        if not c:
            self.inc.write_eof()
            raise Fail("TLS: EOF from tunnel")
        self.inc.write(c)

    def feed(self, data):
        if data:
            self.inc.write(data)

    def handshake(self, timeout=10.0):
        deadline = time.monotonic() + timeout
        for _ in range(1000):
            try:
                self.obj.do_handshake()
                data = self.out.read()
                if data:
                    self.sock.sendall(data)
                return
            except ssl.SSLWantReadError:
                if time.monotonic() > deadline:
                    raise Fail("TLS handshake timed out")
                self._pump(max(0.1, deadline - time.monotonic()))
        raise Fail("TLS handshake did not finish")

    def sendall(self, data):
        self.obj.write(data)
        self.sock.sendall(self.out.read())

    def recv_some(self, timeout=10.0):
        deadline = time.monotonic() + timeout
        for _ in range(10000):
            try:
                return self.obj.read(65536)
            except ssl.SSLWantReadError:
                if time.monotonic() > deadline:
                    raise Fail("TLS read timed out")
                self._pump(max(0.1, deadline - time.monotonic()))
            except ssl.SSLZeroReturnError:
                return b""
        raise Fail("TLS read did not finish")


# ---------------------------------------------------------------------------
# Connection log

def read_log(path):
    """Records of a JSON Lines log ([] if the file does not exist)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    out = []
    for i, line in enumerate(data.split(b"\n")):
        if not line:
            continue
        try:
            out.append(json.loads(line))
        except ValueError:
            # a record being written concurrently; only the last line may be partial
            if i != len(data.split(b"\n")) - 1:
                raise Fail("%s:%d: not JSON: %r" % (path, i + 1, line[:200]))
    return out


def verify_chain(paths, start_prev=ZERO_HASH):
    """Verify the hash chain over the concatenation of files (oldest
    first).  Rule (proxy/lib/clog.h): line = <body>,"hash":"<hex>"}\\n with
    hash = hex(SHA-256(<body>)); prev = hash of the record before; seq
    increases by one.  A "mac" after the hash (a keyed log) is not
    checked here.  Returns the records."""
    prev = start_prev
    seq = None
    records = []
    for path in paths:
        with open(path, "rb") as f:
            data = f.read()
        check(data == b"" or data.endswith(b"\n"),
              "%s: last record not terminated by a newline", path)
        for no, line in enumerate(data.split(b"\n")[:-1], 1):
            where = "%s:%d" % (os.path.basename(path), no)
            # a keyed log: ,"mac":"<hex>" between the hash and the brace
            m = re.search(rb'","mac":"[0-9a-f]{64}"}$', line)
            if m:
                line = line[:m.start() + 1] + b"}"
            marker = line.rfind(b',"hash":"')
            check(marker > 0 and line.endswith(b'"}'),
                  "%s: no trailing hash field: %r", where, line[-100:])
            body = line[:marker]
            hexd = line[marker + len(b',"hash":"'):-2].decode("ascii", "replace")
            check(hashlib.sha256(body).hexdigest() == hexd,
                  "%s: hash does not match the body", where)
            try:
                rec = json.loads(line)
            except ValueError as e:
                raise Fail("%s: not JSON: %s" % (where, e))
            check(rec.get("hash") == hexd, "%s: hash field parse mismatch", where)
            if prev is not None:
                check(rec.get("prev") == prev, "%s: prev %r != previous hash %r",
                      where, rec.get("prev"), prev)
            s = rec.get("seq")
            check(isinstance(s, int), "%s: seq %r not an integer", where, s)
            if seq is not None:
                check(s == seq + 1, "%s: seq %d after %d", where, s, seq)
            for k in ("ts", "event"):
                check(k in rec, "%s: record lacks %r", where, k)
            check(re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$",
                           str(rec.get("ts"))),
                  "%s: ts %r not RFC 3339 UTC", where, rec.get("ts"))
            bad = _unsanitised(rec)
            check(bad is None, "%s: unsanitised character %r in %s", where,
                  *(bad or ("", "")))
            seq = s
            prev = hexd
            records.append(rec)
    return records


_FORBIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200b-\u200f"
                        "\u202a-\u202e\u2066-\u2069\ufeff]")


def _unsanitised(v, where="record"):
    """(char, path) of the first control, bidi or zero-width character in
    any string of a record, or None (DESIGN.md: sandbox strings are
    sanitised)."""
    if isinstance(v, str):
        m = _FORBIDDEN.search(v)
        return (m.group(0), where) if m else None
    if isinstance(v, dict):
        for k, x in v.items():
            r = _unsanitised(k, where) or _unsanitised(x, "%s.%s" % (where, k))
            if r:
                return r
    if isinstance(v, list):
        for i, x in enumerate(v):
            r = _unsanitised(x, "%s[%d]" % (where, i))
            if r:
                return r
    return None


# ---------------------------------------------------------------------------
# sluiced

def sluiced_path():
    p = os.path.join(BUILDDIR, "proxy", "sluiced")
    if not os.access(p, os.X_OK):
        raise Fail("sluiced not built at %s (set SLUICE_BUILDDIR)" % p)
    return p


def vmrss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise Fail("no VmRSS for pid %d" % pid)


class Daemon:
    """One sluiced process in the foreground.  stderr is drained by a
    thread (so the daemon never blocks on it) and kept for reports."""

    def __init__(self, env, config, name="sluiced"):
        self.env = env
        self.config = config
        self.name = name
        self.conf_path = os.path.join(env.dir, "%s.json" % name)
        self.proc = None
        self.lines = []
        self.lock = threading.Lock()
        self.ready_ev = threading.Event()
        self.returncode = None

    # -- config helpers
    @property
    def log_path(self):
        return self.config["log"]["path"]

    @property
    def tcp_addr(self):
        host, port = self.config["listen"]["tcp"][0].rsplit(":", 1)
        return host.strip("[]"), int(port)

    def session_socket(self, sid):
        for s in self.config.get("sessions", []):
            if s["id"] == sid and s.get("socket"):
                return s["socket"]
        return os.path.join(self.config["runtime_dir"], "sessions", sid,
                            "proxy.sock")

    def write_config(self):
        with open(self.conf_path, "w") as f:
            json.dump(self.config, f, indent=2)
            f.write("\n")

    # -- process
    def start(self, ready_timeout=15.0):
        self.write_config()
        self.proc = subprocess.Popen(
            [sluiced_path(), "-c", self.conf_path],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, cwd=self.env.dir)
        self.env.daemons.append(self)
        t = threading.Thread(target=self._drain, daemon=True)
        t.start()
        deadline = time.monotonic() + ready_timeout
        while time.monotonic() < deadline:
            if self.ready_ev.wait(0.05):
                return self
            if self.proc.poll() is not None:
                time.sleep(0.1)     # let the drain thread collect the tail
                raise Fail("sluiced exited with %s before ready:\n%s"
                           % (self.proc.returncode, self.stderr()))
        raise Fail("sluiced not ready after %.0fs:\n%s" % (ready_timeout,
                                                            self.stderr()))

    def _drain(self):
        f = self.proc.stderr
        for _ in range(10 ** 7):
            line = f.readline()
            if not line:
                return
            text = line.decode("utf-8", "replace").rstrip("\n")
            with self.lock:
                if len(self.lines) < 20000:
                    self.lines.append(text)
            if VERBOSE:
                log("[%s] %s" % (self.name, text))
            if "ready" in text:
                self.ready_ev.set()

    def stderr(self):
        with self.lock:
            return "\n".join(self.lines[-200:])

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig):
        if self.alive():
            os.kill(self.proc.pid, sig)

    def wait(self, timeout):
        try:
            self.returncode = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        return self.returncode

    def stop(self, timeout=15.0):
        """SIGTERM, then SIGKILL after the deadline.  Returns the exit code
        (negative for a signal)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                log("%s did not exit %.0fs after SIGTERM: SIGKILL" % (self.name, timeout))
                try:
                    os.kill(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(5)
        self.returncode = self.proc.returncode
        return self.returncode

    # -- clients
    def connect(self, src=None, timeout=10.0):
        """A TCP connection to the listener, from source address src."""
        host, port = self.tcp_addr
        s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET,
                          socket.SOCK_STREAM)
        s.settimeout(timeout)
        if src:
            s.bind((src, 0))
        s.connect((host, port))
        return s

    def connect_unix(self, sid, timeout=10.0):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(self.session_socket(sid))
        return s

    def proxy_url(self):
        host, port = self.tcp_addr
        return "http://%s:%d" % (host, port)


def connect_head(host, port, extra_headers=(), authority=None):
    auth = authority or "%s:%d" % (host, port)
    h = "CONNECT %s HTTP/1.1\r\nHost: %s\r\n" % (auth, auth)
    for k, v in extra_headers:
        h += "%s: %s\r\n" % (k, v)
    return (h + "\r\n").encode()


def do_connect(sock, host, port, extra=b"", timeout=10.0, authority=None):
    """Send a CONNECT (plus extra bytes in the same write); returns
    (Response head, leftover bytes after the head)."""
    sock.sendall(connect_head(host, port, authority=authority) + extra)
    resp, rest = read_head(sock, timeout)
    if resp.status != 200:
        resp.body, rest = read_body(sock, resp, rest, timeout)
    return resp, rest


def raw_exchange(sock, data, timeout=10.0):
    """Send raw bytes, read one full response."""
    sock.sendall(data)
    return read_response(sock, timeout)


def get_request(url, host_header=None, headers=(), method="GET", body=b""):
    m = re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://([^/]+)", url)
    host = host_header or (m.group(1) if m else "")
    lines = ["%s %s HTTP/1.1" % (method, url), "Host: %s" % host]
    for k, v in headers:
        lines.append("%s: %s" % (k, v))
    if body:
        lines.append("Content-Length: %d" % len(body))
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


# ---------------------------------------------------------------------------
# Control API client (HTTP/1.1 over the control socket or a TLS socket)

def api_request(sock, method, path, body=None, headers=(), raw=None,
                content_type="application/json", timeout=10.0):
    """One request on a connected socket; body is JSON-encoded unless raw
    bytes are given.  Returns a Response with .json (None if the body is
    not JSON)."""
    data = raw if raw is not None else (
        json.dumps(body).encode() if body is not None else b"")
    lines = ["%s %s HTTP/1.1" % (method, path), "Host: sluice",
             "Connection: close"]
    if data and content_type:
        lines.append("Content-Type: %s" % content_type)
    if data or method in ("POST", "PUT", "PATCH"):
        lines.append("Content-Length: %d" % len(data))
    lines += ["%s: %s" % kv for kv in headers]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + data)
    r = read_response(sock, timeout)
    try:
        r.json = json.loads(r.body) if r.body else None
    except ValueError:
        r.json = None
    return r


def api_unix(path, method, reqpath, body=None, **kw):
    """api_request over the control API's Unix socket."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(kw.get("timeout", 10.0))
    try:
        s.connect(path)
        return api_request(s, method, reqpath, body, **kw)
    finally:
        s.close()


# ---------------------------------------------------------------------------
# Environment: one per case

class Env:
    def __init__(self, root, name):
        # short: a socket under it (sluiced's session sockets, named by
        # sluice-execd's keys) must fit in a socket path's 107 bytes
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:24]
        self.dir = tempfile.mkdtemp(prefix=safe + ".", dir=root)
        if TEST_USER and os.geteuid() == 0:
            import pwd
            pw = pwd.getpwnam(TEST_USER)
            os.chmod(root, 0o711)
            os.chmod(self.dir, 0o755)
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        self.name = name
        self.daemons = []
        self.closers = []
        self.leaks = []
        self.base = addr_base()
        self._cert = None

    def src(self, n):
        """Client source address n of this test process (1..250)."""
        return "%s%d" % (self.base, n)

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    def give(self, path):
        """A secret file sluiced reads after its drop: with
        SLUICE_TEST_USER, that user's (a deployment does the same, or
        makes it group-readable)."""
        if TEST_USER and os.geteuid() == 0:
            import pwd
            pw = pwd.getpwnam(TEST_USER)
            os.chown(path, pw.pw_uid, pw.pw_gid)
        return path

    def dns(self, records=None):
        d = FakeDNS(records)
        self.closers.append(d.close)
        return d

    def server(self, handler, host="127.0.0.1", port=0, ssl_ctx=None):
        s = TCPServer(handler, host, port, ssl_ctx)
        self.closers.append(s.close)
        return s

    def http_upstream(self, host="127.0.0.1", port=0):
        return self.server(http_handler, host, port)

    def cert(self, names=("tls.test",)):
        if self._cert is None:
            self._cert = make_cert(self.dir, list(names))
        return self._cert

    def tls_upstream(self, names=("tls.test",), host="127.0.0.1"):
        crt, key = self.cert(names)
        seen = []
        s = self.server(http_handler, host, 0, tls_server_ctx(crt, key, seen))
        s.seen_sni = seen
        return s

    @staticmethod
    def ports(*extra):
        """ports{} admitting 80, 443 and the given upstream ports."""
        p = sorted(set([80, 443] + [int(x) for x in extra]))
        return {"registries": p, "public": p}

    def config(self, sessions=None, **over):
        """A config with this env's runtime_dir, log and a free TCP port;
        top-level keys in over replace (dicts are merged one level)."""
        cfg = {
            "runtime_dir": self.path("run"),
            "state_file": self.path("state.json"),
            "ceiling": "public",
            "listen": {"tcp": ["127.0.0.1:%d" % free_port()]},
            "sessions": sessions if sessions is not None else [
                {"id": "s1", "tenant": "acme", "user": "alice",
                 "tier": "public", "source": self.src(1)}],
            "allow_cidrs": ["127.0.0.0/8"],
            "log": {"path": self.path("conn.jsonl")},
            "dns": {"hosts": {}, "timeout_ms": 2000},
        }
        if os.geteuid() == 0:
            # started as root, sluiced runs its proxy as "user" (default
            # "sluice", which CI machines lack); the scenarios keep root
            # so that their 0600 token files and 0700 temp dirs stay
            # readable.  tests/fw/t_fw_privsep.sh covers the drop;
            # SLUICE_TEST_USER=nobody runs a suite with it (env dirs are
            # then that user's).
            cfg["user"] = TEST_USER or "root"
        for k, v in over.items():
            if isinstance(v, dict) and isinstance(cfg.get(k), dict):
                cfg[k] = dict(cfg[k], **v)
            else:
                cfg[k] = v
        return cfg

    def sluiced(self, config, name="sluiced", start=True, tries=3):
        """Start sluiced; retries with a new port if the listener port was
        taken between free_port() and bind()."""
        last = None
        for _ in range(tries):
            d = Daemon(self, config, name)
            if not start:
                return d
            try:
                return d.start()
            except Fail as e:
                last = e
                if "in use" not in str(e).lower():
                    raise
                config["listen"]["tcp"] = ["127.0.0.1:%d" % free_port()]
        raise last

    def close(self, timeout=12.0):
        for d in self.daemons:
            try:
                d.stop(timeout=timeout)
            except Leak as e:
                self.leaks.append(str(e))
            except Exception as e:
                log("stopping %s: %r" % (d.name, e))
        for c in reversed(self.closers):
            try:
                c()
            except Leak as e:
                self.leaks.append(str(e))
            except Exception:
                pass


def urllib_opener(daemon, src, https_context=None):
    """A urllib opener that uses sluiced as its proxy for http and https,
    with the client socket bound to src (the session's identity)."""
    import functools
    import http.client
    import urllib.request
    proxy = daemon.proxy_url()
    bind = (src, 0) if src else None

    class H(urllib.request.HTTPHandler):
        def http_open(self, req):
            return self.do_open(functools.partial(
                http.client.HTTPConnection, source_address=bind), req)

    class HS(urllib.request.HTTPSHandler):
        def https_open(self, req):
            return self.do_open(functools.partial(
                http.client.HTTPSConnection, source_address=bind), req,
                context=https_context)

    return urllib.request.build_opener(
        urllib.request.ProxyHandler({"http": proxy, "https": proxy}),
        H(), HS(context=https_context))


def insecure_ctx():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def curl(args, timeout=20, src=None):
    """Run curl with args; returns CompletedProcess (stdout/stderr bytes)."""
    exe = require_tool("curl")
    cmd = [exe, "-sS", "--max-time", str(int(timeout))]
    if src:
        cmd += ["--interface", src]
    cmd += list(args)
    try:
        return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, timeout=timeout + 10)
    except subprocess.TimeoutExpired:
        raise Fail("curl did not finish: %s" % " ".join(cmd))


def curl_status(stdout):
    """Parse the trailing '\\n%{http_code}' that callers add with -w."""
    text = stdout.decode("utf-8", "replace")
    body, _, code = text.rpartition("\n")
    return body, int(code) if code.isdigit() else None


# ---------------------------------------------------------------------------
# Suite

class Suite:
    """Runs cases in order; a case is fn(env).  After each case every
    daemon is stopped and the log chain of each is verified."""

    def __init__(self, name, time_limit=240):
        self.name = name
        self.cases = []
        self.time_limit = time_limit
        self.root = None

    def case(self, fn):
        self.cases.append(fn)
        return fn

    def _on_signal(self, signum, frame):
        raise SystemExit("killed by signal %d" % signum)

    def _on_alarm(self, signum, frame):
        raise Fail("suite time limit of %ds exceeded" % self.time_limit)

    def main(self):
        only = set(sys.argv[1:])
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._on_signal)
        signal.signal(signal.SIGALRM, self._on_alarm)
        signal.alarm(self.time_limit)
        self.root = tempfile.mkdtemp(prefix="sluice-%s." % self.name)
        results = []
        skipped = None
        try:
            for fn in self.cases:
                if only and fn.__name__ not in only:
                    continue
                res = self._run_case(fn)
                results.append((fn.__name__, res))
                if res.startswith("SKIP"):
                    skipped = res
        except SystemExit as e:
            log("aborted: %s" % e)
            results.append(("<aborted>", "FAIL %s" % e))
        finally:
            signal.alarm(0)
            shutil.rmtree(self.root, ignore_errors=True)
        npass = sum(1 for _, r in results if r == "PASS")
        nfail = sum(1 for _, r in results if r.startswith("FAIL"))
        nskip = sum(1 for _, r in results if r.startswith("SKIP"))
        for name, r in results:
            print("%s: %s %s" % (r.split(" ", 1)[0], self.name, name
                                 + (" -- " + r.split(" ", 1)[1] if " " in r else "")))
        print("# %s: %d passed, %d failed, %d skipped" % (self.name, npass, nfail, nskip))
        sys.stdout.flush()
        if nfail:
            sys.exit(EXIT_FAIL)
        if nskip and not npass:
            if STRICT:
                print("# SLUICE_TEST_STRICT=1: skip counts as failure (%s)" % skipped)
                sys.exit(EXIT_FAIL)
            sys.exit(EXIT_SKIP)
        if nskip and STRICT:
            sys.exit(EXIT_FAIL)
        sys.exit(EXIT_PASS)

    def _run_case(self, fn):
        env = Env(self.root, fn.__name__)
        t0 = time.monotonic()
        status = "PASS"
        grace = 12.0
        try:
            fn(env)
        except Skip as e:
            status = "SKIP %s" % e
        except Fail as e:
            status = "FAIL %s" % str(e).splitlines()[0] if str(e) else "FAIL"
            log("%s: FAIL: %s" % (fn.__name__, e))
            for d in env.daemons:
                log("--- stderr of %s (pid %s) ---\n%s" % (
                    d.name, d.proc.pid if d.proc else "-", d.stderr()))
        except Exception as e:
            status = "FAIL %r" % e
            log("%s: ERROR:\n%s" % (fn.__name__, traceback.format_exc()))
            for d in env.daemons:
                log("--- stderr of %s ---\n%s" % (d.name, d.stderr()))
        except BaseException:
            grace = 2.0     # aborted by a signal: clean up quickly
            raise
        finally:
            env.close(grace)
            if grace < 12.0:
                shutil.rmtree(env.dir, ignore_errors=True)
        for e in env.leaks:
            # whatever the case said: what it left would pile up
            log("%s: FAIL at teardown: %s" % (fn.__name__, e))
            if not status.startswith("FAIL"):
                status = "FAIL teardown: %s" % e.splitlines()[0]
        if status == "PASS" or status.startswith("FAIL"):
            # The log must verify after every case, including failed ones
            # (reported separately so the first failure stays visible).
            for d in env.daemons:
                if getattr(d, "skip_chain", False):
                    continue
                paths = getattr(d, "chain_paths", None) or [d.log_path]
                paths = [p for p in paths if os.path.isfile(p)]
                if not paths:
                    continue
                try:
                    verify_chain(paths)
                except (Fail, OSError, ValueError) as e:
                    log("%s: log chain: %s" % (fn.__name__, e))
                    if status == "PASS":
                        status = "FAIL log chain: %s" % e
        log("%s: %s (%.1fs)" % (fn.__name__, status.split(" ")[0],
                                 time.monotonic() - t0))
        shutil.rmtree(env.dir, ignore_errors=True)
        return status


# ---------------------------------------------------------------------------
# Log helpers used by many tests

def decisions(path, **match):
    out = []
    for r in read_log(path):
        if r.get("event") != "decision":
            continue
        if all(r.get(k) == v for k, v in match.items()):
            out.append(r)
    return out


def wait_record(path, timeout=5.0, **match):
    """Wait for a record with the given fields (event=... included)."""
    def find():
        for r in read_log(path):
            if all(r.get(k) == v for k, v in match.items()):
                return r
        return None
    return wait_until(find, timeout, what="log record %r" % (match,))


def addr_only(v):
    """'127.0.0.1', '127.0.0.1:80', '[::1]:80' -> address text."""
    if v is None:
        return None
    v = str(v)
    if v.startswith("["):
        return v[1:v.index("]")]
    if v.count(":") == 1:
        return v.split(":")[0]
    return v


def as_list(v):
    if v is None:
        return []
    if isinstance(v, list):
        return v
    return [v]


_LINK_KEYS = ("conn", "conn_id", "connection", "cid", "id")


def close_records(path, port):
    """Close records of the connections to port.  A close record is matched
    by its own "port" field, or else through a connection id shared with
    the decision record (a security team must be able to tie the two)."""
    recs = read_log(path)
    out = []
    ids = {}
    for r in recs:
        if r.get("event") == "decision" and r.get("port") == port:
            for k in _LINK_KEYS:
                if k in r:
                    ids.setdefault(k, set()).add(json.dumps(r[k]))
    for r in recs:
        if r.get("event") != "close":
            continue
        if "port" in r:
            if r.get("port") == port:
                out.append(r)
            continue
        for k, vals in ids.items():
            if k in r and json.dumps(r[k]) in vals:
                out.append(r)
                break
    return out


def wait_close(path, port, n=1, timeout=10.0):
    """Wait for n close records of connections to port; returns the last."""
    recs = wait_until(lambda: (lambda c: c if len(c) >= n else None)(
        close_records(path, port)), timeout,
        what="%d close record(s) for port %d" % (n, port))
    return recs[-1]


def transport_kind(rec):
    """"tcp", "unix" or "vsock" from a record's transport field, which may
    carry the peer after a colon ("tcp:127.0.0.5:40000")."""
    return str(rec.get("transport", "")).split(":", 1)[0]


class Blackhole:
    """A loopback port whose SYNs go unanswered: a listener with a full
    accept queue that never accepts (the kernel drops further SYNs), so a
    connect() to it times out instead of being refused."""

    def __init__(self, host="127.0.0.1"):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind((host, 0))
        self.sock.listen(0)
        self.port = self.sock.getsockname()[1]
        self.fill = []
        for _ in range(4):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            try:
                s.connect((host, self.port))
            except (BlockingIOError, OSError):
                pass
            self.fill.append(s)
        time.sleep(0.2)
        probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        probe.settimeout(0.5)
        try:
            probe.connect((host, self.port))
            ok = False
        except (socket.timeout, OSError):
            ok = True
        finally:
            probe.close()
        if not ok:
            self.close()
            raise Skip("cannot make a blackhole port on this kernel")

    def close(self):
        for s in self.fill + [self.sock]:
            try:
                s.close()
            except OSError:
                pass
