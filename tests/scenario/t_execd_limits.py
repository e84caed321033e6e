#!/usr/bin/env python3
"""sluice-execd against peers that spend its memory (issue 20):

tcp_gate (point 3): on tcp.listen a peer without a token gets 401 as soon
as its request head is there, its body never read: ten tokenless
connections each announcing a 100 MB body and sending 8 MiB of it leave
the daemon's RSS where it was; tcp.max_conns_per_peer and tcp.max_conns
shut or hold what is beyond them; a head sent a byte at a time is cut at
tcp.head_timeout_ms; an authenticated client is served meanwhile.

slow_file_readers (point 6): eight GETs of a 48 MiB file that do not
read leave the daemon's RSS within 100 MiB of where it was (the file is
sent from its descriptor in bounded chunks, as the client reads); one of
them read fully has the file's bytes (SHA-256); a Range still answers
206 with its bytes.

slow_exec_readers (point 6): eight execs whose commands print 2 MiB of
control characters to stdout and to stderr (12 x that as JSON), from
clients that never read, leave the daemon's RSS within 80 MiB of where
it was (the answer is escaped a piece at a time as the client reads,
within reply_buffer_bytes and reply_total_bytes, from the command's kept
output); a client that does not read for reply_timeout_ms is dropped; a
reading client gets the whole answer, its bytes exact (base64 too)."""

import base64
import hashlib
import json
import os
import socket
import ssl
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, check, check_eq, free_port, log,  # noqa: E402
                     read_response, wait_until)
from t_execd import (start, create, ex, _exchange)  # noqa: E402

S = Suite("t_execd_limits", time_limit=400)

MiB = 1 << 20


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def closed_now(s, wait):
    """True when the peer closed s within wait seconds (EOF, reset)."""
    s.settimeout(wait)
    try:
        data = s.recv(65536)
    except socket.timeout:
        return False
    except (ConnectionError, ssl.SSLError, OSError):
        return True
    return not data or closed_now(s, wait)


def tls_setup(env, **tcp):
    crt, key = env.cert(("execd.test",))
    tok = "tok-adm-%s" % os.urandom(12).hex()
    with open(env.path("adm.tok"), "w") as f:
        f.write(tok + "\n")
    os.chmod(env.path("adm.tok"), 0o600)
    port = free_port()
    conf = {"listen": "127.0.0.1:%d" % port, "tls_cert": crt,
            "tls_key": key,
            "tokens": [{"name": "adm", "file": env.path("adm.tok"),
                        "role": "admin"}]}
    conf.update(tcp)
    d, ctl, x = start(env, tcp=conf, max_file_bytes=64 * MiB,
                      max_body_bytes=MiB)
    ctx = ssl.create_default_context(cafile=crt)
    return x, port, ctx, tok


@S.case
def tcp_gate(env):
    x, port, ctx, tok = tls_setup(env, max_conns=24, max_conns_per_peer=12,
                                  head_timeout_ms=2000)
    pid = x.proc.pid

    def raw(src):
        return socket.create_connection(("127.0.0.1", port), timeout=10,
                                        source_address=(src, 0))

    def tlsc(src):
        return ctx.wrap_socket(raw(src), server_hostname="execd.test")

    def authed(src):
        s = tlsc(src)
        try:
            return _exchange(s, "GET", "/v1/health", None,
                             [("Authorization", "Bearer " + tok)], None,
                             30).status
        finally:
            s.close()

    check_eq(authed(env.src(3)), 200, "an authenticated call")
    base = rss_kib(pid)
    # ten tokenless PUTs of 100 MB, 8 MiB of it sent each (within 20 s)
    head = ("PUT /v1/sandboxes/x/files/big HTTP/1.1\r\nHost: execd\r\n"
            "Content-Length: 100000000\r\n\r\n").encode()
    socks = []
    try:
        for i in range(10):
            s = tlsc(env.src(20 + i))
            s.sendall(head)
            socks.append(s)
        chunk = b"B" * (256 * 1024)
        sent = [0] * len(socks)
        dead = [False] * len(socks)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 20 and not all(
                dead[i] or sent[i] >= 8 * MiB for i in range(len(socks))):
            for i, s in enumerate(socks):
                if dead[i] or sent[i] >= 8 * MiB:
                    continue
                s.settimeout(0.5)
                try:
                    s.sendall(chunk)
                    sent[i] += len(chunk)
                except (socket.timeout, ssl.SSLError, OSError):
                    dead[i] = True
        time.sleep(1.0)
        grown = (rss_kib(pid) - base) / 1024.0
        log("tokenless bodies: %s MiB sent, RSS +%.1f MiB" % (
            [n // MiB for n in sent], grown))
        check(grown < 20, "ten tokenless connections with 100 MB bodies "
              "grew sluice-execd's RSS by %.1f MiB", grown)
        for i, s in enumerate(socks):
            try:
                r = read_response(s, 5)
                st = r.status
            except Exception as e:      # noqa: B902
                st = repr(e)
            check_eq(st, 401, "tokenless connection %d: its answer" % i)
    finally:
        for s in socks:
            s.close()
    check_eq(authed(env.src(3)), 200, "an authenticated call after")

    # one address, fourteen silent connections: twelve kept (until the
    # deadline), two shut at once
    held = []
    try:
        t0 = time.monotonic()
        for _ in range(14):
            held.append(raw(env.src(40)))
        time.sleep(0.8)
        gone = [closed_now(s, 0.05) for s in held]
        check_eq(gone.count(True), 2, "connections of one peer shut beyond "
                 "tcp.max_conns_per_peer 12 (closed: %r)" % gone)
        check_eq(authed(env.src(3)), 200, "an authenticated call while a "
                 "peer is at its cap")
        for s, g in zip(held, gone):
            if not g:
                check(closed_now(s, max(0.1, 6 - (time.monotonic() - t0))),
                      "a silent connection outlived tcp.head_timeout_ms")
        el = time.monotonic() - t0
        check(el < 5, "silent connections closed only after %.1f s", el)
    finally:
        for s in held:
            s.close()

    # a head a byte at a time, after the handshake: cut at the deadline
    s = tlsc(env.src(41))
    req = (b"GET /v1/health HTTP/1.1\r\nHost: execd\r\nAuthorization: "
           b"Bearer " + tok.encode() + b"\r\n")
    t0 = time.monotonic()
    closed = False
    try:
        for i in range(len(req)):
            if time.monotonic() - t0 > 8:
                break
            try:
                s.sendall(req[i:i + 1])
            except (ConnectionError, ssl.SSLError, OSError):
                closed = True
                break
            if closed_now(s, 0.3):
                closed = True
                break
    finally:
        s.close()
    el = time.monotonic() - t0
    check(closed and 1.0 < el < 4.5, "a head dripping a byte at a time: "
          "closed %s after %.1f s (tcp.head_timeout_ms 2 s)", closed, el)

    # tcp.max_conns 24 in all: 24 silent connections from 24 addresses,
    # the 25th is not served until they are gone
    held = []
    try:
        t0 = time.monotonic()
        for n in range(60, 84):
            held.append(raw(env.src(n)))
        time.sleep(0.5)
        s = raw(env.src(3))
        s.settimeout(1.0)
        try:
            ctx.wrap_socket(s, server_hostname="execd.test").close()
            served = True
        except (socket.timeout, ssl.SSLError, OSError):
            served = False
        finally:
            s.close()
        check(not served, "a 25th connection was served beyond "
              "tcp.max_conns 24")
        check_eq(authed(env.src(3)), 200, "a call once the deadline has "
                 "shut the silent ones")
        check(time.monotonic() - t0 < 8, "served only after %.1f s",
              time.monotonic() - t0)
    finally:
        for s in held:
            s.close()
    check("tcp.max_conns" in x.stderr(200), "no word of tcp.max_conns in "
          "the log")


@S.case
def slow_file_readers(env):
    # the workspace without a quota (limits.disk_mb 0): 48 MiB fit
    d, ctl, x = start(env, max_file_bytes=64 * MiB)
    create(x, "big")
    n = 48 * MiB
    o = ex(x, "big", {"shell": "head -c %d /dev/urandom > big.bin && "
                      "sha256sum big.bin" % n}, timeout=120)
    want = o["stdout"].split()[0]
    pid = x.proc.pid
    base = rss_kib(pid)
    req = b"GET /v1/sandboxes/big/files/big.bin HTTP/1.1\r\nHost: x\r\n\r\n"
    socks = []
    try:
        for _ in range(8):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(x.sock)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.sendall(req)
            socks.append(s)
        time.sleep(3.0)
        grown = (rss_kib(pid) - base) / 1024.0
        log("8 unread GETs of 48 MiB: RSS +%.1f MiB" % grown)
        check(grown < 100, "8 unread GETs of a 48 MiB file grew "
              "sluice-execd's RSS by %.1f MiB (bound 100)", grown)
        # one read to its end: the file's bytes
        r = read_response(socks[0], 60)
        check_eq(r.status, 200, "the GET read")
        check_eq((len(r.body), hashlib.sha256(r.body).hexdigest()),
                 (n, want), "the file's bytes")
    finally:
        for s in socks:
            s.close()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(x.sock)
        r = _exchange(s, "GET", "/v1/sandboxes/big/files/big.bin", None,
                      [("Range", "bytes=1000-1999")], None, 30)
    finally:
        s.close()
    check_eq((r.status, r.header("Content-Range"), len(r.body)),
             (206, "bytes 1000-1999/%d" % n, 1000), "a Range")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(x.sock)
        r2 = _exchange(s, "GET", "/v1/sandboxes/big/files/big.bin", None,
                       [("Range", "bytes=0-2999")], None, 30)
    finally:
        s.close()
    check_eq(r2.body[1000:2000], r.body, "the Range's bytes")


@S.case
def slow_exec_readers(env):
    cap = 2 * MiB
    d, ctl, x = start(env, quotas={"per_user": 0, "per_tenant": 0},
                      reply_timeout_ms=10000)
    n = 8
    for i in range(n):
        create(x, "sx%d" % i, limits={"output_cap": cap},
               network={"tier": "off"})
    # two streams of \x01, six bytes each as JSON
    shell = ("head -c %d /dev/zero | tr '\\0' '\\1'; "
             "head -c %d /dev/zero | tr '\\0' '\\1' >&2" % (cap, cap))
    pid = x.proc.pid
    base = rss_kib(pid)
    socks = []
    try:
        for i in range(n):
            body = json.dumps({"shell": shell, "output_cap": cap}).encode()
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(x.sock)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.sendall(b"POST /v1/sandboxes/sx%d/exec HTTP/1.1\r\n"
                      b"Host: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: %d\r\n\r\n" % (i, len(body)) +
                      body)
            socks.append(s)
        # every command ended: its answer is what is held
        wait_until(lambda: all(
            x.app("GET", "/v1/sandboxes/sx%d" % i).json["usage"]
            ["foreground"] is False for i in range(n)), 60,
            what="the commands ended")
        time.sleep(2.0)
        grown = (rss_kib(pid) - base) / 1024.0
        log("%d unread exec answers of 2 x %d control bytes: RSS +%.1f "
            "MiB" % (n, cap, grown))
        check(grown < 80, "%d unread exec answers grew sluice-execd's RSS "
              "by %.1f MiB (bound 80)", n, grown)
        # one read to its end: the whole answer, exact
        r = read_response(socks[0], 60)
        check_eq(r.status, 200, "the exec read")
        o = json.loads(r.body)
        check_eq((o["stdout"] == "\x01" * cap, o["stderr"] == "\x01" * cap,
                  o["exit_code"], o["stdout_truncated"]),
                 (True, True, 0, False), "the answer's output")
        # the others read nothing for reply_timeout_ms: dropped, their
        # answers cut short
        time.sleep(12)
        got, s1 = 0, socks[1]
        s1.settimeout(10)
        for _ in range(10000):
            try:
                b = s1.recv(1 << 16)
            except OSError:
                break
            if not b:
                break
            got += len(b)
        check(got < 1 * MiB, "an unread answer dropped after "
              "reply_timeout_ms: %d bytes came" % got)
    finally:
        for s in socks:
            s.close()
    # a reading client: text of every kind and base64, as json_dumps has
    # them
    data = bytes(range(256)) * 4 + "é€😀".encode() + b"\xff\xc3"
    with open(env.path("d.bin"), "wb") as f:
        f.write(data)
    r = x.app("PUT", "/v1/sandboxes/sx1/files/d.bin", raw=data)
    check(r.status in (200, 201), "PUT: %r" % r)
    o = ex(x, "sx1", {"cmd": ["cat", "d.bin"]})
    want = data.decode("utf-8", errors="replace")
    check_eq(o["stdout"], want, "text of every byte")
    o = ex(x, "sx1", {"cmd": ["cat", "d.bin"], "encoding": "base64"})
    check_eq(base64.b64decode(o["stdout"]), data, "base64")
    o = ex(x, "sx1", {"cmd": ["printf", "%s", 'a"b\\c/\n']})
    check_eq((o["stdout"], o["stderr"]), ('a"b\\c/\n', ""), "quotes")
    for i in range(n):
        check_eq(x.app("DELETE", "/v1/sandboxes/sx%d?archive=discard" % i)
                 .status, 200, "delete sx%d" % i)


if __name__ == "__main__":
    S.main()
