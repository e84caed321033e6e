#!/usr/bin/env python3
"""sluice-execd, terminals over a WebSocket and the native port route
(issue 22 points 7 and 8):
POST /v1/sandboxes/{id}/pty, GET|DELETE .../pty/{sid},
GET .../pty/{sid}/ws (exec_pty.c, framing exec_wsf.c).

The client is written here (RFC 6455, client side: masked frames), so
that what crosses is exactly what the test sends.

session: a shell on a pty in the sandbox as its user; a command's output
comes as 0x01 frames; `stty size` shows the size given at the start and
after a resize message; Ctrl-C (the byte 0x03) and a signal message
interrupt a sleep; the status names the offset; exit's code comes in an
exit message and a 1000 close.

replay_takeover: output made while no client is attached is replayed from
an offset (0x03 frame, the 8-byte offset first); a second client gets
409 unless it asks ?takeover=1, then the first gets TAKEN_OVER and a
4001 close; a DELETE ends a terminal; a command is no terminal (404).

framing: an unmasked frame is failed with 1002, a message over 64 KiB
with 1009, text that is not UTF-8 with 1007; a ping is answered with its
payload; a JSON message in fragments with a ping between them is taken
whole; a bad JSON message is answered with an error and the connection
stays; a client that reads nothing while 40 MB come is closed 1008.

opensandbox: OpenSandbox's /pty under the execd endpoint prefix, with
the endpoint's token: POST /pty, GET /pty/{sid}, the WebSocket, 409
ALREADY_CONNECTED, takeover, a wrong token 401, DELETE.

ports: ANY /v1/sandboxes/{id}/ports/{port}/... into 127.0.0.1:{port}
inside (the proxy OpenSandbox's /proxy/{port} uses): a background
python3 -m http.server serves a file and a listing (query passed on), a
POST's 501 passed on, a WebSocket echo server relayed after its 101,
over the Unix socket and over TLS with a tenant-bound token (which the
server inside never sees), another tenant's token 404, nothing
listening 502 bad_gateway, a POST's body seen by the server inside.

gvisor_session, gvisor_replay_takeover, gv_os (opensandbox),
gvisor_ports: session, replay_takeover, opensandbox and ports again with every sandbox on gVisor, where the
terminal is one the agent opens inside (relayed to the daemon's pty,
resized and signalled through the backend) and a port is reached by the
agent's connect inside (CONNECT; skips without a working runsc).

gvisor_connect: the agent's CONNECT spoken directly on its socket: a
half-close passed to the server inside, its answer and close back, a
refused port's ECONNREFUSED, port 0 an ERROR.

tls: the same over the TCP listener (TLS, a bearer token bound to the
sandbox's tenant), through exec_gate.c's filter, which passes a
WebSocket's frames once the 101 is sent; no token 401, another tenant's
404.

Skips (77) without root or user namespaces."""

import base64
import hashlib
import json
import os
import signal
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, Fail, check, check_eq, free_port,  # noqa: E402
                     wait_until, log)
from t_execd import (start, create, check_err, root_call,  # noqa: E402
                     preflight, runsc_works, _backend, on_gvisor)
from harness import Skip  # noqa: E402
import sdklib  # noqa: E402

S = Suite("t_execd_pty", time_limit=600)

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class WS:
    """A WebSocket client on a connected socket."""

    def __init__(self, sock, path, headers=(), expect=101):
        self.s = sock
        self.s.settimeout(20)
        key = base64.b64encode(os.urandom(16)).decode()
        h = ("GET %s HTTP/1.1\r\nHost: sluice\r\nUpgrade: websocket\r\n"
             "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
             "Sec-WebSocket-Version: 13\r\n" % (path, key))
        for k, v in headers:
            h += "%s: %s\r\n" % (k, v)
        self.s.sendall((h + "\r\n").encode())
        buf = b""
        while b"\r\n\r\n" not in buf:
            b = self.s.recv(65536)
            if not b:
                raise Fail("closed before the answer's head: %r" % buf)
            buf += b
        head, self.buf = buf.split(b"\r\n\r\n", 1)
        lines = head.decode().split("\r\n")
        self.status = int(lines[0].split()[1])
        self.headers = dict((l.split(":", 1)[0].lower(),
                             l.split(":", 1)[1].strip()) for l in lines[1:])
        self.body = None
        if self.status != 101:
            n = int(self.headers.get("content-length", "0"))
            while len(self.buf) < n:
                self.buf += self.s.recv(65536)
            self.body = json.loads(self.buf[:n]) if n else None
            check_eq(self.status, expect, "handshake: %r" % self.body)
            return
        want = base64.b64encode(hashlib.sha1(key.encode() + GUID).digest())
        check_eq(self.headers.get("sec-websocket-accept"), want.decode(),
                 "Sec-WebSocket-Accept")
        check_eq(self.status, expect, "handshake")
        self.out = bytearray()  # 0x01 bytes (appended in place: a
        # terminal's output comes in many small frames)
        self.msgs = []          # JSON messages
        self.closed = None      # (code, reason)

    def frame(self, op, payload, fin=True, mask=True, rsv=0):
        b0 = (0x80 if fin else 0) | rsv | op
        n = len(payload)
        m = 0x80 if mask else 0
        if n < 126:
            h = struct.pack("!BB", b0, m | n)
        elif n < 65536:
            h = struct.pack("!BBH", b0, m | 126, n)
        else:
            h = struct.pack("!BBQ", b0, m | 127, n)
        if mask:
            k = os.urandom(4)
            payload = bytes(c ^ k[i % 4] for i, c in enumerate(payload))
            h += k
        self.s.sendall(h + payload)

    def input(self, data):
        self.frame(2, b"\x00" + data)

    def json(self, obj):
        self.frame(1, json.dumps(obj).encode())

    def _fill(self, n, deadline):
        while len(self.buf) < n:
            self.s.settimeout(max(0.05, deadline - time.monotonic()))
            b = self.s.recv(65536)
            if not b:
                raise EOFError
            self.buf += b

    def recv(self, timeout=10.0):
        """One frame: (op, payload); replays, output and JSON are kept
        too."""
        deadline = time.monotonic() + timeout
        self._fill(2, deadline)
        b0, b1 = self.buf[0], self.buf[1]
        check(b1 & 0x80 == 0, "a server frame is not masked")
        n, hl = b1 & 0x7f, 2
        if n == 126:
            self._fill(4, deadline)
            n, hl = struct.unpack("!H", self.buf[2:4])[0], 4
        elif n == 127:
            self._fill(10, deadline)
            n, hl = struct.unpack("!Q", self.buf[2:10])[0], 10
        self._fill(hl + n, deadline)
        p, self.buf = self.buf[hl:hl + n], self.buf[hl + n:]
        op = b0 & 0x0f
        if op == 1:
            try:
                self.msgs.append(json.loads(p))
            except ValueError:
                self.msgs.append({"text": p.decode("utf-8", "replace")})
        elif op == 2 and p[:1] == b"\x01":
            self.out += p[1:]
        elif op == 2 and p[:1] == b"\x03":
            self.out += p[9:]
        elif op == 8:
            self.closed = (struct.unpack("!H", p[:2])[0] if len(p) >= 2
                           else 1005, p[2:].decode())
        return op, p

    def until(self, pred, timeout=15.0, what="output"):
        deadline = time.monotonic() + timeout
        while not pred():
            left = deadline - time.monotonic()
            if left <= 0:
                raise Fail("%s: timed out; output %r, messages %r" % (
                    what, self.out[-600:], self.msgs[-5:]))
            try:
                self.recv(left)
            except socket.timeout:
                continue
            except EOFError:
                raise Fail("%s: the connection ended; output %r, "
                           "messages %r, close %r" % (what, self.out[-600:],
                                                      self.msgs[-5:],
                                                      self.closed))
        return True

    def see(self, text, what=None, timeout=15.0):
        t = text.encode()
        self.until(lambda: t in self.out, timeout, what or repr(text))

    def close(self, code=1000):
        self.frame(8, struct.pack("!H", code))
        self.until(lambda: self.closed is not None, 10, "close echoed")
        self.s.close()


def unix(x):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(x.sock)
    return s


def attach(x, sid, pty, query="", expect=101):
    return WS(unix(x), "/v1/sandboxes/%s/pty/%s/ws%s" % (sid, pty, query),
              expect=expect)


def new_pty(x, sid, **body):
    r = x.app("POST", "/v1/sandboxes/%s/pty" % sid, body or None)
    check_eq(r.status, 201, "pty: %r" % r)
    check(r.json["running"] and r.json["output_offset"] == 0,
          "new terminal: %r" % r.json)
    return r.json["session_id"]


def connected(w):
    w.until(lambda: any(m.get("type") == "connected" for m in w.msgs), 10,
            "connected")
    return [m for m in w.msgs if m.get("type") == "connected"][0]


@S.case
def session(env):
    d, ctl, x = start(env)
    create(x, "p1")
    pty = new_pty(x, "p1", cols=100, rows=30)
    w = attach(x, "p1", pty)
    c = connected(w)
    check(c["session_id"] == pty and c["mode"] == "pty" and
          isinstance(c["offset"], int), "connected: %r" % c)
    w.input(b"echo hi-$((6*7)); id -u\n")
    w.see("hi-42")
    # the sandbox user, not root
    w.until(lambda: any(l.strip().isdigit() and int(l) >= 1000
                        for l in w.out.decode("utf-8", "replace")
                        .splitlines()), 10, "uid")
    w.input(b"stty size\n")
    w.see("30 100", "stty size at the start")
    w.json({"type": "resize", "cols": 120, "rows": 40})
    w.input(b"stty size\n")
    w.see("40 120", "stty size after a resize")
    # Ctrl-C through the line discipline
    w.input(b"sleep 30; echo after-$((5+5))\n")
    time.sleep(0.7)
    t0 = time.monotonic()
    w.input(b"\x03")
    w.input(b"echo ok-$((1+1))\n")
    w.see("ok-2", "a prompt after Ctrl-C")
    check(time.monotonic() - t0 < 10 and b"after-10" not in w.out,
          "Ctrl-C interrupted the sleep")
    # a signal message: to the foreground group
    w.input(b"sleep 30; echo after-$((10+10))\n")
    time.sleep(0.7)
    w.json({"type": "signal", "signal": "SIGINT"})
    w.input(b"echo ok-$((2+2))\n")
    w.see("ok-4", "a prompt after a signal message")
    check(b"after-20" not in w.out, "the signal interrupted the sleep")
    r = x.app("GET", "/v1/sandboxes/p1/pty/%s" % pty)
    check(r.status == 200 and r.json["running"] and r.json["attached"] and
          r.json["cols"] == 120 and r.json["rows"] == 40 and
          r.json["output_offset"] >= len(w.out), "status: %r" % r)
    # it is a command of the sandbox too
    r = x.app("GET", "/v1/sandboxes/p1/commands/%s" % pty)
    check_eq(r.status, 200, "as a command: %r" % r)
    w.input(b"exit 3\n")
    w.until(lambda: any(m.get("type") == "exit" for m in w.msgs), 15,
            "exit message")
    e = [m for m in w.msgs if m.get("type") == "exit"][0]
    check_eq(e["exit_code"], 3, "exit code: %r" % e)
    w.until(lambda: w.closed is not None, 10, "close after exit")
    check_eq(w.closed[0], 1000, "close code after exit")
    r = x.app("GET", "/v1/sandboxes/p1/pty/%s" % pty)
    check(not r.json["running"] and r.json["exit_code"] == 3,
          "status after exit: %r" % r.json)
    # an exited terminal takes no client
    attach(x, "p1", pty, expect=409)
    # a command given
    pty2 = new_pty(x, "p1", command="test -t 0 && echo is-a-tty; "
                   "test -t 1 && echo out-is-tty; sleep 30")
    w = attach(x, "p1", pty2, "?since=0")
    w.see("is-a-tty")
    w.see("out-is-tty")
    w.s.close()


@S.case
def replay_takeover(env):
    d, ctl, x = start(env)
    create(x, "p2")
    pty = new_pty(x, "p2")
    a = attach(x, "p2", pty)
    connected(a)
    a.input(b"echo one-$((1+0))\n")
    a.see("one-1")
    # let the echo of what follows come, then detach
    a.input(b"sleep 1.5; echo detached-$((3*3))\n")
    a.see("echo detached-")
    time.sleep(0.3)
    seen = connected(a)["offset"] + len(a.out)
    a.close()
    time.sleep(2.5)
    r = x.app("GET", "/v1/sandboxes/p2/pty/%s" % pty)
    check(r.json["running"] and not r.json["attached"] and
          r.json["output_offset"] > seen, "detached status: %r" % r.json)
    b = attach(x, "p2", pty, "?since=%d" % seen)
    c = connected(b)
    # the replay frame: 0x03, the offset, the bytes since
    rep = None
    for _ in range(20):
        op, p = b.recv(10)
        if op == 2 and p[:1] == b"\x03":
            rep = p
            break
    check(rep is not None, "a replay frame")
    off = struct.unpack("!Q", rep[1:9])[0]
    check_eq(off, seen, "replay offset")
    check(b"detached-9" in rep[9:], "replayed: %r" % rep[9:])
    check_eq(off + len(rep) - 9, c["offset"], "the replay ends at the "
             "connected offset")
    # a second client: 409 without takeover
    w = attach(x, "p2", pty, expect=409)
    check_eq(w.body["error"]["reason"], "ALREADY_CONNECTED", "409 reason")
    t = attach(x, "p2", pty, "?takeover=1")
    connected(t)
    b.until(lambda: b.closed is not None, 10, "the first client closed")
    check_eq(b.closed[0], 4001, "taken over: close code")
    check(any(m.get("code") == "TAKEN_OVER" for m in b.msgs),
          "TAKEN_OVER message: %r" % b.msgs)
    t.input(b"echo two-$((1+1))\n")
    t.see("two-2", "the new client drives it")
    t.s.close()
    r = x.app("DELETE", "/v1/sandboxes/p2/pty/%s" % pty)
    check_eq(r.status, 200, "delete: %r" % r)
    for _ in range(100):
        r = x.app("GET", "/v1/sandboxes/p2/pty/%s" % pty)
        if not r.json["running"]:
            break
        time.sleep(0.1)
    check(not r.json["running"], "ended by DELETE: %r" % r.json)
    # a command is no terminal; unknown sessions
    r = x.app("POST", "/v1/sandboxes/p2/commands", {"shell": "sleep 5"})
    check_err(x.app("GET", "/v1/sandboxes/p2/pty/%s" % r.json["id"]), 404,
              "not_found", "a command as a terminal")
    check_err(x.app("GET", "/v1/sandboxes/p2/pty/c999"), 404, "not_found",
              "no such terminal")
    check_err(x.app("POST", "/v1/sandboxes/p2/pty", {"cols": 0}), 400,
              "bad_request", "cols 0")
    check_err(x.app("POST", "/v1/sandboxes/p2/pty", {"shell": "x"}), 400,
              "bad_request", "unknown key")
    check_eq(x.auditor("POST", "/v1/sandboxes/p2/pty", {}).status, 403,
             "the auditor may not")
    # an ended terminal takes no client
    attach(x, "p2", pty, expect=409)


@S.case
def framing(env):
    d, ctl, x = start(env)
    create(x, "p3")
    pty = new_pty(x, "p3")
    r = root_call(x.sock, "GET", "/v1/sandboxes/p3/pty/%s/ws" % pty)
    check_err(r, 400, "bad_request", "a GET without Upgrade")
    w = attach(x, "p3", pty)
    connected(w)
    # ping answered with its payload
    w.frame(9, b"hello")
    got = None
    for _ in range(10):
        op, p = w.recv(5)
        if op == 10:
            got = p
            break
    check_eq(got, b"hello", "pong")
    # a JSON message in two fragments with a ping between
    msg = json.dumps({"type": "stdin", "data": "echo frag-$((5*5))\n"})
    w.frame(1, msg[:10].encode(), fin=False)
    w.frame(9, b"p")
    w.frame(0, msg[10:].encode())
    w.see("frag-25", "a fragmented message")
    # a bad JSON message: an error, the connection stays
    w.frame(1, b"{not json")
    w.until(lambda: any(m.get("code") == "INVALID_FRAME" for m in w.msgs),
            5, "INVALID_FRAME")
    w.json({"type": "resize", "cols": 0, "rows": 5})
    w.input(b"echo still-$((7*7))\n")
    w.see("still-49", "the connection stays after bad messages")
    # unmasked: 1002
    w.frame(2, b"\x00echo x\n", mask=False)
    w.until(lambda: w.closed is not None, 10, "close after unmasked")
    check_eq(w.closed[0], 1002, "unmasked frame")
    w.s.close()
    # a reserved bit: 1002
    w = attach(x, "p3", pty)
    w.frame(2, b"\x00", rsv=0x40)
    w.until(lambda: w.closed is not None, 10, "close after rsv")
    check_eq(w.closed[0], 1002, "reserved bit")
    w.s.close()
    # too big: 1009 (decided from the head)
    w = attach(x, "p3", pty)
    w.frame(2, b"\x00" + b"a" * (70 * 1024))
    w.until(lambda: w.closed is not None, 10, "close after too big")
    check_eq(w.closed[0], 1009, "message over 64 KiB")
    w.s.close()
    # not UTF-8: 1007
    w = attach(x, "p3", pty)
    w.frame(1, b"\xff\xfe")
    w.until(lambda: w.closed is not None, 10, "close after bad UTF-8")
    check_eq(w.closed[0], 1007, "text not UTF-8")
    w.s.close()
    # a client that does not read: closed 1008 past 4 MiB behind
    w = attach(x, "p3", pty)
    w.input(b"head -c 40000000 /dev/zero | tr '\\0' x; echo\n")
    time.sleep(4)
    w.until(lambda: w.closed is not None, 60, "close of a slow client")
    check_eq(w.closed[0], 1008, "a slow client")
    check(any(m.get("code") == "RUNTIME_ERROR" for m in w.msgs),
          "the slow client is told: %r" % w.msgs[-3:])
    w.s.close()
    # and still usable afterwards
    w = attach(x, "p3", pty)
    w.input(b"\x03")
    time.sleep(1.5)
    w.input(b"\n")
    time.sleep(0.5)
    w.input(b"echo last-$((8*8))\n")
    w.see("last-64", timeout=30)
    w.close()


@S.case
def tls(env):
    crt, key = sdklib.make_tls(env.dir)
    port = free_port()
    tok = env.path("acme.tok")
    with open(tok, "w") as f:
        f.write("acme-token-0123456789abcdef0123456789\n")
    os.chmod(tok, 0o600)
    btok = env.path("beta.tok")
    with open(btok, "w") as f:
        f.write("beta-token-0123456789abcdef0123456789\n")
    os.chmod(btok, 0o600)
    d, ctl, x = start(env, tcp={
        "listen": "127.0.0.1:%d" % port, "tls_cert": crt, "tls_key": key,
        "tokens": [{"name": "acme", "role": "app", "tenant": "acme",
                    "file": tok},
                   {"name": "beta", "role": "app", "tenant": "beta",
                    "file": btok}]})
    create(x, "p4")
    pty = new_pty(x, "p4")
    ctx = ssl.create_default_context(cafile=crt)

    def tcp():
        s = socket.create_connection(("127.0.0.1", port), 10)
        return ctx.wrap_socket(s, server_hostname="localhost")
    auth = [("Authorization",
             "Bearer acme-token-0123456789abcdef0123456789")]
    w = WS(tcp(), "/v1/sandboxes/p4/pty/%s/ws" % pty, auth)
    connected(w)
    w.input(b"echo tls-$((4*4))\n")
    w.see("tls-16", "over TLS")
    w.json({"type": "resize", "cols": 90, "rows": 20})
    w.input(b"stty size\n")
    w.see("20 90", "resize over TLS")
    w.close()
    # no token: 401 before any upgrade
    WS(tcp(), "/v1/sandboxes/p4/pty/%s/ws" % pty, expect=401)
    # another tenant's token: the sandbox is missing
    WS(tcp(), "/v1/sandboxes/p4/pty/%s/ws" % pty, [(
        "Authorization", "Bearer beta-token-0123456789abcdef0123456789")],
       expect=404)


@S.case
def opensandbox(env):
    import t_opensandbox as tos
    port = free_port()
    kp = env.path("os-a.key")
    with open(kp, "w") as f:
        f.write(tos.KEY_A + "\n")
    os.chmod(kp, 0o600)
    d, ctl, x = start(env, opensandbox={
        "listen": "127.0.0.1:%d" % port,
        "api_keys": [{"name": "chathub", "file": kp, "tenant": "acme",
                      "user": "chathub"}],
        "images": {"chathub-sandbox:1": "host"}, "max_timeout_s": 3600})
    st, j = tos.call(port, "POST", "/v1/sandboxes", {
        "image": {"uri": "chathub-sandbox:1"}, "entrypoint": ["sleep"],
        "resourceLimits": {"cpu": "1"}}, key=tos.KEY_A)
    check_eq(st, 202, "create: %r" % (j,))
    sid = j["id"]
    for _ in range(300):
        st, j = tos.call(port, "GET", "/v1/sandboxes/%s" % sid,
                         key=tos.KEY_A)
        if j["status"]["state"] == "Running":
            break
        time.sleep(0.1)
    st, ep = tos.call(port, "GET", "/v1/sandboxes/%s/endpoints/44772" % sid,
                      key=tos.KEY_A)
    check_eq(st, 200, "endpoint: %r" % (ep,))
    pre = "/" + ep["endpoint"].split("/", 1)[1]
    hd = ep["headers"]
    st, j = tos.call(port, "POST", pre + "/pty", {}, headers=hd)
    check(st == 200 and j["session_id"], "POST /pty: %r %r" % (st, j))
    pty = j["session_id"]

    def tcp():
        return socket.create_connection(("127.0.0.1", port), 10)
    a = WS(tcp(), "%s/pty/%s/ws" % (pre, pty), list(hd.items()))
    connected(a)
    a.input(b"echo os-$((3*5))\n")
    a.see("os-15", "through OpenSandbox's route")
    b = WS(tcp(), "%s/pty/%s/ws" % (pre, pty), list(hd.items()),
           expect=409)
    check_eq(b.body["code"], "ALREADY_CONNECTED", "409: %r" % b.body)
    # since and takeover read as on the native route: a value that is
    # neither yes nor no is refused, not taken for no
    for q in ("takeover=yes", "takeover=", "since=-1", "since=1x"):
        b = WS(tcp(), "%s/pty/%s/ws?%s" % (pre, pty, q), list(hd.items()),
               expect=400)
        check_eq(b.body["code"], "INVALID_REQUEST", "?%s: %r" % (q, b.body))
    seen = len(a.out)
    b = WS(tcp(), "%s/pty/%s/ws?takeover=1&since=0" % (pre, pty),
           list(hd.items()))
    b.see("os-15", "replayed since 0")
    a.until(lambda: a.closed is not None, 10, "taken over")
    check_eq(a.closed[0], 4001, "OpenSandbox's takeover code")
    check(seen > 0, "output before the takeover")
    st, j = tos.call(port, "GET", "%s/pty/%s" % (pre, pty), headers=hd)
    check(st == 200 and j["running"] and j["output_offset"] >= seen,
          "GET /pty/{id}: %r" % (j,))
    WS(tcp(), "%s/pty/%s/ws" % (pre, pty),
       [("X-EXECD-ACCESS-TOKEN", "0" * 64)], expect=401)
    st, j = tos.call(port, "DELETE", "%s/pty/%s" % (pre, pty), headers=hd)
    check_eq(st, 200, "DELETE /pty/{id}")
    b.until(lambda: any(m.get("type") == "exit" for m in b.msgs), 15,
            "exit after DELETE")
    st, j = tos.call(port, "GET", "%s/pty/nope" % pre, headers=hd)
    check_eq(st, 404, "no such session")
    st, _ = tos.call(port, "DELETE", "/v1/sandboxes/%s" % sid, key=tos.KEY_A)
    check_eq(st, 204, "delete")


def raw_http(sock, method, path, headers=(), body=b""):
    h = "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" % (method,
                                                                  path)
    for k, v in headers:
        h += "%s: %s\r\n" % (k, v)
    if body or method in ("POST", "PUT", "PATCH"):
        h += "Content-Length: %d\r\n" % len(body)
    h += "\r\n"
    sock.settimeout(20)
    sock.sendall(h.encode() + body)
    data = b""
    while True:
        try:
            b = sock.recv(65536)
        except (ssl.SSLError, ConnectionResetError) as e:
            data += ("<%r>" % e).encode()
            break
        if not b:
            break
        data += b
    sock.close()
    if not data.startswith(b"HTTP/"):
        raise Fail("no answer to %s %s: %r" % (method, path, data[:300]))
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    hd = dict((l.split(":", 1)[0].lower(), l.split(":", 1)[1].strip())
              for l in lines[1:] if ":" in l)
    return int(lines[0].split()[1]), hd, rest


def put_echo(x, sid):
    """The WebSocket echo server (os_ws_echo.py) as echo.py in sid."""
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           "os_ws_echo.py"), "rb") as f:
        x.app("PUT", "/v1/sandboxes/%s/files/echo.py" % sid, raw=f.read())


@S.case
def ports(env):
    crt, key = sdklib.make_tls(env.dir)
    port = free_port()
    toks = {}
    for name, tenant in (("acme", "acme"), ("beta", "beta")):
        toks[name] = "%s-token-0123456789abcdef0123456789" % name
        with open(env.path(name + ".tok"), "w") as f:
            f.write(toks[name] + "\n")
        os.chmod(env.path(name + ".tok"), 0o600)
    d, ctl, x = start(env, tcp={
        "listen": "127.0.0.1:%d" % port, "tls_cert": crt, "tls_key": key,
        "tokens": [{"name": n, "role": "app", "tenant": n,
                    "file": env.path(n + ".tok")} for n in toks]})
    create(x, "w1")
    r = x.app("PUT", "/v1/sandboxes/w1/files/site/hello.txt",
              raw=b"hello from inside\n")
    check_eq(r.status, 201, "put: %r" % r)
    put_echo(x, "w1")
    # a server that prints what it got, so that the headers are seen
    x.app("PUT", "/v1/sandboxes/w1/files/hdr.py", raw=(
        b"import http.server as h\n"
        b"class H(h.BaseHTTPRequestHandler):\n"
        b"    def do_GET(self):\n"
        b"        b = str(self.headers).encode()\n"
        b"        self.send_response(200)\n"
        b"        self.send_header('Content-Length', str(len(b)))\n"
        b"        self.end_headers()\n"
        b"        self.wfile.write(b)\n"
        b"    def do_POST(self):\n"
        b"        n = int(self.headers['Content-Length'])\n"
        b"        b = b'got:' + self.rfile.read(n)\n"
        b"        self.send_response(200)\n"
        b"        self.send_header('Content-Length', str(len(b)))\n"
        b"        self.end_headers()\n"
        b"        self.wfile.write(b)\n"
        b"h.HTTPServer(('127.0.0.1', 8002), H).serve_forever()\n"))
    for cmd in ("cd site && exec python3 -m http.server 8000 --bind "
                "127.0.0.1", "exec python3 echo.py 8001",
                "exec python3 hdr.py"):
        r = x.app("POST", "/v1/sandboxes/w1/commands", {"shell": cmd})
        check_eq(r.status, 202, "background: %r" % r)

    def get(path, **kw):
        for _ in range(100):
            st, hd, body = raw_http(unix(x), "GET", path, **kw)
            if not (st == 502 and b"port_unreachable" in body):
                return st, hd, body
            time.sleep(0.1)
        return st, hd, body
    st, hd, body = get("/v1/sandboxes/w1/ports/8000/hello.txt")
    check(st == 200 and body == b"hello from inside\n",
          "a file through the port route: %r %r" % (st, body))
    st, hd, body = get("/v1/sandboxes/w1/ports/8000/?C=M;O=A")
    check(st == 200 and b"hello.txt" in body, "the listing: %r" % body[:200])
    st, hd, body = get("/v1/sandboxes/w1/ports/8000")
    check(st == 200 and b"hello.txt" in body, "no trailing slash")
    st, hd, body = raw_http(unix(x), "POST", "/v1/sandboxes/w1/ports/8000/x",
                            body=b"data")
    check_eq(st, 501, "the server's own 501 for a POST, passed on")
    for _ in range(100):
        st, hd, body = raw_http(unix(x), "POST",
                                "/v1/sandboxes/w1/ports/8002/p",
                                body=b"x" * 70000 + b"-end")
        if not (st == 502 and b"port_unreachable" in body):
            break
        time.sleep(0.1)
    check(st == 200 and body == b"got:" + b"x" * 70000 + b"-end",
          "a POST's body through the proxy: %r %r" % (st, body[-40:]))
    st, hd, body = get("/v1/sandboxes/w1/ports/8009/")
    check(body.startswith(b"{"), "a JSON error: %r %r %r" % (st, hd, body))
    j = json.loads(body)
    check(st == 502 and j["error"]["code"] == "bad_gateway" and
          j["error"]["reason"] == "port_unreachable", "nothing listens: %r"
          % j)
    st, hd, body = get("/v1/sandboxes/w1/ports/70000/")
    check_eq(st, 400, "port out of range")
    # a server that never accepts (its backlog full) stalls its own
    # request, never the daemon: other calls are answered meanwhile
    x.app("PUT", "/v1/sandboxes/w1/files/stuck.py", raw=(
        b"import socket, time\n"
        b"s = socket.socket()\n"
        b"s.bind(('127.0.0.1', 8004))\n"
        b"s.listen(0)\n"
        b"cs = []\n"
        b"for i in range(4):\n"
        b"    c = socket.socket()\n"
        b"    c.setblocking(False)\n"
        b"    c.connect_ex(('127.0.0.1', 8004))\n"
        b"    cs.append(c)\n"
        b"open('stuck.ready', 'w').close()\n"
        b"time.sleep(120)\n"))
    r = x.app("POST", "/v1/sandboxes/w1/commands",
              {"shell": "exec python3 stuck.py"})
    check_eq(r.status, 202, "the stuck server: %r" % r)
    wait_until(lambda: x.app("GET", "/v1/sandboxes/w1/files/stuck.ready"
                             ).status == 200, 30, what="the stuck server")
    out = {}

    def stuck():
        s = unix(x)
        s.settimeout(8)
        t0 = time.monotonic()
        try:
            s.sendall(b"GET /v1/sandboxes/w1/ports/8004/ HTTP/1.1\r\n"
                      b"Host: x\r\nConnection: close\r\n\r\n")
            out["answer"] = s.recv(4096)
        except OSError as e:
            out["answer"] = repr(e).encode()
        out["s"] = time.monotonic() - t0
        s.close()
    th = threading.Thread(target=stuck, daemon=True)
    th.start()
    time.sleep(1.0)
    waited = th.is_alive()
    slow = 0.0
    for _ in range(5):
        t0 = time.monotonic()
        check_eq(x.app("GET", "/v1/sandboxes/w1").status, 200,
                 "another call while the port's request waits")
        slow = max(slow, time.monotonic() - t0)
    th.join(15)
    check(waited, "the request to a server that never accepts was "
          "answered at once (%r after %.1f s): nothing was stalled" %
          (out.get("answer", b"")[:120], out.get("s", -1)))
    check(slow < 0.5, "a call took %.2f s while a port's request waited "
          "(the daemon was stalled)" % slow)
    # a WebSocket relayed after the server's 101
    w = WS(unix(x), "/v1/sandboxes/w1/ports/8001/ws")
    w.frame(1, b"ping-one")
    op, p = w.recv(10)
    check_eq((op, p), (1, b"echo:ping-one"), "echoed through the relay")
    w.s.close()
    # TLS, a tenant-bound token: the server inside never sees it
    ctx = ssl.create_default_context(cafile=crt)

    def tcp():
        s = socket.create_connection(("127.0.0.1", port), 10)
        return ctx.wrap_socket(s, server_hostname="localhost")
    auth = [("Authorization", "Bearer " + toks["acme"])]
    st, hd, body = raw_http(tcp(), "GET", "/v1/sandboxes/w1/ports/8002/h",
                            headers=auth + [("X-Mine", "kept")])
    check(st == 200 and b"X-Mine: kept" in body and
          b"Authorization" not in body and toks["acme"].encode() not in body,
          "headers inside: %r" % body)
    st, hd, body = raw_http(tcp(), "GET",
                            "/v1/sandboxes/w1/ports/8000/hello.txt",
                            headers=[("Authorization",
                                      "Bearer " + toks["beta"])])
    check_eq(st, 404, "another tenant's sandbox")
    st, hd, body = raw_http(tcp(), "GET",
                            "/v1/sandboxes/w1/ports/8000/hello.txt")
    check_eq(st, 401, "no token")
    w = WS(tcp(), "/v1/sandboxes/w1/ports/8001/ws", auth)
    w.frame(1, b"over-tls")
    op, p = w.recv(10)
    check_eq((op, p), (1, b"echo:over-tls"), "a WebSocket over TLS")
    w.close()
    check_eq(x.auditor("GET", "/v1/sandboxes/w1/ports/8000/").status, 403,
             "the auditor may not")


def agent_connect(env, port):
    """A connection to the gVisor sandbox's agent (its socket under the
    state directory, through /proc/self/fd: the path may not fit), a
    CONNECT for port sent: the socket and the reply's type and payload."""
    import glob
    socks = glob.glob(os.path.join(env.path("xstate"), "*", "agent",
                                   "agent.sock"))
    check_eq(len(socks), 1, "one agent socket: %r" % socks)
    dfd = os.open(os.path.dirname(socks[0]), os.O_PATH)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect("/proc/self/fd/%d/agent.sock" % dfd)
    finally:
        os.close(dfd)
    s.settimeout(20)
    s.sendall(struct.pack(">B3xI", 6, 2) + struct.pack(">H", port))
    h = b""
    while len(h) < 8:
        b = s.recv(8 - len(h))
        if not b:
            raise Fail("the agent closed without a reply to CONNECT")
        h += b
    t, n = struct.unpack(">B3xI", h)
    p = b""
    while len(p) < n:
        b = s.recv(n - len(p))
        if not b:
            raise Fail("the agent's reply cut short")
        p += b
    return s, t, p


@S.case
def gvisor_connect(env):
    """The agent's CONNECT as the backend speaks it (agent_wire.h): a
    server inside that answers only at the end of its input sees the
    host's half-close and its answer and close come back (100 KB each
    way through the relay's bounded buffers); a port nothing listens on
    is CONNECTED with ECONNREFUSED; port 0 is an ERROR."""
    preflight()
    if not runsc_works():
        raise Skip("runsc not installed")
    _backend["name"] = "gvisor"
    try:
        d, ctl, x = start(env)
        create(x, "h1")
    finally:
        _backend["name"] = ""
    x.app("PUT", "/v1/sandboxes/h1/files/half.py", raw=(
        b"import socket\n"
        b"l = socket.socket()\n"
        b"l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        b"l.bind(('127.0.0.1', 8003))\n"
        b"l.listen(4)\n"
        b"while True:\n"
        b"    c, _ = l.accept()\n"
        b"    n = 0\n"
        b"    while True:\n"
        b"        b = c.recv(65536)\n"
        b"        if not b:\n"
        b"            break\n"
        b"        n += len(b)\n"
        b"    c.sendall(b'n=%d;' % n + b'y' * 100000)\n"
        b"    c.close()\n"))
    r = x.app("POST", "/v1/sandboxes/h1/commands", {"shell":
                                                      "exec python3 half.py"})
    check_eq(r.status, 202, "background: %r" % r)
    for _ in range(100):
        s, t, p = agent_connect(env, 8003)
        if t == 21 and p == struct.pack(">I", 0):
            break
        s.close()
        time.sleep(0.1)
    check_eq((t, p), (21, struct.pack(">I", 0)), "CONNECTED, errno 0")
    # the relay runs as the sandbox user, not with the agent's
    # capabilities: the agent's processes' real uids, seen inside
    uids = ("import os\n"
            "for p in os.listdir('/proc'):\n"
            "    try:\n"
            "        c = open('/proc/%s/cmdline' % p, 'rb').read()\n"
            "        s = open('/proc/%s/status' % p).read()\n"
            "    except (OSError, ValueError):\n"
            "        continue\n"
            "    if b'--agent' in c:\n"
            "        print([l.split()[1] for l in s.splitlines()\n"
            "               if l.startswith('Uid:')][0])\n")
    x.app("PUT", "/v1/sandboxes/h1/files/uids.py", raw=uids.encode())

    def agent_uids():
        r = x.app("POST", "/v1/sandboxes/h1/exec",
                  {"cmd": ["python3", "uids.py"]})
        check_eq(r.status, 200, "uids: %r" % r)
        return r.json["stdout"].split()
    u = agent_uids()
    check("0" in u and any(v != "0" for v in u), "the agent's processes "
          "while a CONNECT relays (one the sandbox user's): %r" % u)
    s.sendall(b"x" * 100000)
    s.shutdown(socket.SHUT_WR)
    got = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        got += b
    s.close()
    check(got == b"n=100000;" + b"y" * 100000,
          "the half-close reached the server, its answer and close came "
          "back: %r... (%d bytes)" % (got[:20], len(got)))
    wait_until(lambda: all(v == "0" for v in agent_uids()), 10,
               what="the relay's worker to end with its connection")
    s, t, p = agent_connect(env, 8009)
    s.close()
    check_eq((t, p), (21, struct.pack(">I", 111)),
             "nothing listens: CONNECTED with ECONNREFUSED")
    s, t, p = agent_connect(env, 0)
    s.close()
    check_eq(t, 20, "port 0: an ERROR frame (%r)" % p)


@S.case
def ports_drain(env):
    """SIGTERM's drain ends a WebSocket through the port proxy at once (no
    answer is under way on it) and cuts an answer still coming once
    drain_s has passed: the daemon exits then.  Both used to hold the
    exit until the drain gave up, 15 s past drain_s."""
    d, ctl, x = start(env, drain_s=2)
    create(x, "w1")
    put_echo(x, "w1")
    # an answer that never ends: a byte every 0.2 s
    x.app("PUT", "/v1/sandboxes/w1/files/drip.py", raw=(
        b"import socket, time\n"
        b"s = socket.socket()\n"
        b"s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        b"s.bind(('127.0.0.1', 8005))\n"
        b"s.listen(4)\n"
        b"c, _ = s.accept()\n"
        b"c.recv(65536)\n"
        b"c.sendall(b'HTTP/1.0 200 OK\\r\\n\\r\\nstart')\n"
        b"for i in range(600):\n"
        b"    c.sendall(b'.')\n"
        b"    time.sleep(0.2)\n"))
    for cmd in ("exec python3 echo.py 8001", "exec python3 drip.py"):
        r = x.app("POST", "/v1/sandboxes/w1/commands", {"shell": cmd})
        check_eq(r.status, 202, "background: %r" % r)
    w = None
    for _ in range(100):
        try:
            w = WS(unix(x), "/v1/sandboxes/w1/ports/8001/")
            break
        except Fail:
            time.sleep(0.1)
    check(w is not None and w.status == 101, "the WebSocket's 101")
    w.frame(1, b"hi")
    w.until(lambda: any(m.get("text") == "echo:hi" for m in w.msgs), 10,
            "the echo")
    for _ in range(100):
        st = unix(x)
        st.settimeout(10)
        st.sendall(b"GET /v1/sandboxes/w1/ports/8005/ HTTP/1.1\r\n"
                   b"Host: x\r\n\r\n")
        got = st.recv(65536)
        if b" 200 " in got.split(b"\r\n", 1)[0]:
            break
        st.close()
        time.sleep(0.1)
    check(b" 200 " in got.split(b"\r\n", 1)[0], "the drip's answer: %r"
          % got[:200])
    # a connection kept alive: a GET on it is still let in while draining
    ka = unix(x)
    ka.settimeout(10)

    def ka_get(path):
        ka.sendall(("GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path).encode())
        got = b""
        while b"\r\n\r\n" not in got:
            b = ka.recv(65536)
            if not b:
                return None
            got += b
        head, body = got.split(b"\r\n\r\n", 1)
        n = [int(l.split(b":", 1)[1]) for l in head.split(b"\r\n")
             if l.lower().startswith(b"content-length:")]
        while n and len(body) < n[0]:
            body += ka.recv(65536)
        return int(head.split()[1])
    check_eq(ka_get("/v1/sandboxes/w1"), 200, "a GET kept alive")
    t0 = time.monotonic()
    x.proc.send_signal(signal.SIGTERM)
    # the proxy begins nothing more once the drain has begun
    time.sleep(0.3)
    st_ka = ka_get("/v1/sandboxes/w1/ports/8001/")
    log("kept-alive GET while draining: %r" % st_ka)
    check(st_ka in (503, None), "the port proxy while draining: %r" % st_ka)
    # the WebSocket ends at once
    try:
        while w.s.recv(65536):
            pass
    except OSError:
        pass
    ws_s = time.monotonic() - t0
    # the answer still coming is cut once drain_s (2 s) has passed
    try:
        while st.recv(65536):
            pass
    except OSError:
        pass
    cut_s = time.monotonic() - t0
    try:
        rc = x.proc.wait(15)
    except subprocess.TimeoutExpired:
        rc = None
    exit_s = time.monotonic() - t0
    check(ws_s < 1.5, "the WebSocket ended %.1f s after SIGTERM" % ws_s)
    check(1.5 < cut_s < 5, "the answer under way cut %.1f s after SIGTERM "
          "(drain_s 2)" % cut_s)
    check(rc == 0 and exit_s < 5, "the daemon exited %r, %.1f s after "
          "SIGTERM" % (rc, exit_s))


def paste_interrupt(env):
    """Ctrl-C, a signal and a resize behind pasted lines the program does
    not read are acted on at once.  The agent reads the host ahead of the
    command's input: it used to read nothing more while a frame of input
    waited, and gVisor's terminal takes about 128 KiB.  (No shell reads
    the paste afterwards: gVisor's terminal has no flush, and a shell
    reading it byte by byte under ptrace is slow.)"""
    d, ctl, x = start(env)
    create(x, "pi")
    # a program that reads no input and says when SIGINT comes, with the
    # terminal's size then
    catcher = ("stty -echo; exec python3 -c 'import os, signal, sys, time\n"
               "def h(*a):\n"
               "    c, r = os.get_terminal_size(0)\n"
               "    print(\"got-int %dx%d\" % (r, c), flush=True)\n"
               "    sys.exit(0)\n"
               "signal.signal(signal.SIGINT, h)\n"
               "print(\"wait\" + \"ing\", flush=True)\n"
               "time.sleep(60)'")
    for what in ("Ctrl-C", "a resize and Ctrl-C", "a signal message"):
        pty = new_pty(x, "pi", cols=80, rows=24, command=catcher)
        w = attach(x, "pi", pty, "?since=0")
        w.see("waiting", "the catcher (%s)" % what)
        # 180 KB of lines nobody reads, in three frames
        for i in range(3):
            w.input((b"#" * 99 + b"\n") * 600)
        t0 = time.monotonic()
        size = "24x80"
        if what == "a resize and Ctrl-C":
            w.json({"type": "resize", "cols": 90, "rows": 33})
            size = "33x90"
        if what == "a signal message":
            w.json({"type": "signal", "signal": "SIGINT"})
        else:
            w.input(b"\x03")
        w.see("got-int " + size, "%s behind a paste" % what, timeout=20)
        took = time.monotonic() - t0
        check(took < 5, "%s behind a paste: SIGINT after %.1f s" % (
            what, took))
        w.until(lambda: any(m.get("type") == "exit" for m in w.msgs), 15,
                "the catcher's exit (%s)" % what)
        w.s.close()


for _fn in (session, replay_takeover, ports, paste_interrupt):
    on_gvisor(_fn, S)
on_gvisor(opensandbox, S, "gv_os")


if __name__ == "__main__":
    S.main()
