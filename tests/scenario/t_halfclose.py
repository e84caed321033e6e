#!/usr/bin/env python3
"""Half-close in both directions through a CONNECT tunnel, a client that
vanishes mid-tunnel, and an upstream that vanishes mid-tunnel."""

import hashlib
import os
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, check, check_eq, do_connect, recv_until_eof,  # noqa: E402
                     recv_exact, wait_until, wait_close, close_records,
                     http_handler, read_response)

S = Suite("t_halfclose")

N_UP = 50000
N_DOWN = 100000


def reply_after_eof(server, conn, peer):
    """Read until the client's FIN, then answer with a digest of what came
    and N_DOWN bytes, then close."""
    h = hashlib.sha256()
    n = 0
    for _ in range(100000):
        c = conn.recv(65536)
        if not c:
            break
        h.update(c)
        n += len(c)
    server.record(("got", n))
    conn.sendall(b"%08d%s" % (n, h.hexdigest().encode()) + b"d" * N_DOWN)
    conn.shutdown(socket.SHUT_WR)


def send_then_read(server, conn, peer):
    """Send N_DOWN bytes and FIN first, then keep reading what the client
    still sends; record it."""
    conn.sendall(b"u" * N_DOWN)
    conn.shutdown(socket.SHUT_WR)
    h = hashlib.sha256()
    n = 0
    for _ in range(100000):
        try:
            c = conn.recv(65536)
        except (socket.timeout, OSError):
            break
        if not c:
            break
        h.update(c)
        n += len(c)
    server.record(("after_fin", n, h.hexdigest()))


def stream_forever(server, conn, peer):
    """Send until the peer goes away (bounded: 1 GiB or 60 s)."""
    blk = b"s" * 65536
    deadline = time.monotonic() + 60
    sent = 0
    try:
        while sent < (1 << 30) and time.monotonic() < deadline:
            conn.sendall(blk)
            sent += len(blk)
        server.record(("stream_end", "bound"))
    except OSError as e:
        server.record(("stream_end", type(e).__name__))


def vanish_after_some(server, conn, peer):
    conn.sendall(b"v" * 10000)
    time.sleep(0.2)
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()


def setup(env, handler):
    srv = env.server(handler)
    up = env.http_upstream()
    cfg = env.config(ports=env.ports(srv.port, up.port),
                     dns={"hosts": {"up.test": ["127.0.0.1"]}})
    d = env.sluiced(cfg)
    return d, srv, up


def still_serves(env, d, up):
    s = d.connect(env.src(1))
    resp, _ = do_connect(s, "up.test", up.port)
    check_eq(resp.status, 200, "a new CONNECT afterwards")
    s.sendall(b"GET /ok HTTP/1.1\r\nHost: up.test\r\n\r\n")
    check_eq(read_response(s).status, 200, "request through the new tunnel")
    s.close()


@S.case
def client_half_close(env):
    d, srv, up = setup(env, reply_after_eof)
    s = d.connect(env.src(1))
    resp, _ = do_connect(s, "up.test", srv.port)
    check_eq(resp.status, 200, "CONNECT")
    data = os.urandom(N_UP)
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
    got, eof, reset = recv_until_eof(s, limit=N_DOWN + 1000, timeout=10)
    check(eof and not reset, "no clean EOF after the upstream's answer (reset=%s)", reset)
    check_eq(len(got), 8 + 64 + N_DOWN, "bytes received after our FIN")
    check_eq(int(got[:8]), N_UP, "bytes upstream saw")
    check_eq(got[8:72].decode(), hashlib.sha256(data).hexdigest(), "digest upstream")
    s.close()
    rec = wait_close(d.log_path, srv.port)
    check_eq(rec.get("bytes_up"), N_UP, "close.bytes_up")
    check_eq(rec.get("bytes_down"), 8 + 64 + N_DOWN, "close.bytes_down")


@S.case
def upstream_half_close(env):
    d, srv, up = setup(env, send_then_read)
    s = d.connect(env.src(1))
    resp, rest = do_connect(s, "up.test", srv.port)
    check_eq(resp.status, 200, "CONNECT")
    # the upstream speaks first: its bytes may share a read with the 200
    got = rest + recv_exact(s, N_DOWN - len(rest), timeout=10)
    check_eq(got, b"u" * N_DOWN, "upstream bytes")
    # the upstream's FIN must reach us while our direction stays open
    more, eof, reset = recv_until_eof(s, limit=1000, timeout=5)
    check(eof and not reset and more == b"", "no clean EOF from the upstream side "
          "(eof=%s reset=%s extra=%d)", eof, reset, len(more))
    data = os.urandom(N_UP)
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
    ev = wait_until(lambda: [e for e in srv.events if e[0] == "after_fin"], 10,
                    what="the upstream to receive data after its FIN")[0]
    check_eq(ev[1], N_UP, "bytes upstream got after its FIN")
    check_eq(ev[2], hashlib.sha256(data).hexdigest(), "digest")
    check(recv_until_eof(s, timeout=5)[1], "tunnel not closed after both FINs")
    s.close()
    wait_close(d.log_path, srv.port)


@S.case
def client_vanishes(env):
    d, srv, up = setup(env, stream_forever)
    s = d.connect(env.src(1))
    resp, _ = do_connect(s, "up.test", srv.port)
    check_eq(resp.status, 200, "CONNECT")
    recv_exact(s, 1 << 20, timeout=10)
    # RST, not FIN: the client is gone
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
    rec = wait_close(d.log_path, srv.port)
    check(rec.get("bytes_down", 0) >= 1 << 20, "close.bytes_down %r", rec.get("bytes_down"))
    # the upstream side is closed too (its sender fails), not left hanging
    wait_until(lambda: [e for e in srv.events if e[0] == "stream_end"], 10,
               what="the upstream connection to be closed")
    check_eq([e for e in srv.events if e[0] == "stream_end"][0][1] != "bound", True,
             "upstream stream ended by a closed connection")
    check(d.alive(), "sluiced died")
    still_serves(env, d, up)


@S.case
def client_vanishes_plain_http(env):
    d, srv, up = setup(env, http_handler)
    s = d.connect(env.src(1))
    s.sendall(b"GET http://up.test:%d/big?n=%d HTTP/1.1\r\nHost: up.test:%d\r\n\r\n"
              % (srv.port, 64 << 20, srv.port))
    recv_exact(s, 1 << 20, timeout=10)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
    wait_close(d.log_path, srv.port)
    check(d.alive(), "sluiced died")
    still_serves(env, d, up)


@S.case
def upstream_vanishes(env):
    d, srv, up = setup(env, vanish_after_some)
    s = d.connect(env.src(1))
    resp, rest = do_connect(s, "up.test", srv.port)
    check_eq(resp.status, 200, "CONNECT")
    got, eof, _ = recv_until_eof(s, limit=20000, timeout=10)
    got = rest + got
    check(eof, "tunnel not closed after the upstream reset")
    check(len(got) <= 10000, "more bytes than the upstream sent")
    s.close()
    wait_close(d.log_path, srv.port)
    still_serves(env, d, up)


@S.case
def close_records_match_decisions(env):
    d, srv, up = setup(env, reply_after_eof)
    for _ in range(5):
        s = d.connect(env.src(1))
        resp, _ = do_connect(s, "up.test", srv.port)
        check_eq(resp.status, 200, "CONNECT")
        s.sendall(b"x")
        s.shutdown(socket.SHUT_WR)
        recv_until_eof(s, limit=N_DOWN + 1000, timeout=10)
        s.close()
    wait_close(d.log_path, srv.port, n=5)
    check_eq(len(close_records(d.log_path, srv.port)), 5, "close records")


if __name__ == "__main__":
    S.main()
