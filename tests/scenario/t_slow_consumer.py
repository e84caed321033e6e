#!/usr/bin/env python3
"""A client that stops reading must make sluiced stop reading from the
upstream (backpressure) instead of buffering: VmRSS stays bounded while
64 MiB wait upstream, and afterwards every byte arrives intact."""

import hashlib
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, check, check_eq, do_connect, read_head,  # noqa: E402
                     pattern_digest, vmrss_kib, get_request, log)

S = Suite("t_slow_consumer", time_limit=300)

TOTAL = 64 * 1024 * 1024
PAUSE_S = 4.0
MAX_GROWTH_KIB = 16 * 1024


def setup(env, *extra_ports):
    up = env.http_upstream()
    cfg = env.config(ports=env.ports(up.port, *extra_ports),
                     dns={"hosts": {"up.test": ["127.0.0.1"]}})
    d = env.sluiced(cfg)
    return d, up


def small_rcvbuf_socket(d, src):
    host, port = d.tcp_addr
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(30)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    s.bind((src, 0))
    s.connect((host, port))
    return s


def warm_up(env, d, up):
    # one full exchange so that the baseline includes the daemon's
    # steady-state allocations (TLS/c-ares/log init)
    s = d.connect(env.src(1))
    s.sendall(get_request("http://up.test:%d/big?n=1048576" % up.port))
    r, rest = read_head(s)
    from harness import read_body
    body, _ = read_body(s, r, rest, timeout=30)
    check_eq(len(body), 1048576, "warm-up body")
    s.close()
    time.sleep(0.3)


def pause_and_measure(d, label):
    base = vmrss_kib(d.pid)
    peak = base
    deadline = time.monotonic() + PAUSE_S
    for _ in range(1000):
        if time.monotonic() >= deadline:
            break
        time.sleep(0.2)
        peak = max(peak, vmrss_kib(d.pid))
    log("%s: VmRSS before %d KiB, peak %d KiB while the client slept"
        % (label, base, peak))
    return base, peak


def drain_body(s, pre, n):
    h = hashlib.sha256()
    got = len(pre)
    h.update(pre)
    s.settimeout(30)
    deadline = time.monotonic() + 120
    while got < n:
        check(time.monotonic() < deadline, "body not complete in 120s (%d/%d)", got, n)
        c = s.recv(min(1 << 20, n - got))
        check(c, "EOF after %d of %d bytes", got, n)
        h.update(c)
        got += len(c)
    return h.hexdigest()


def run(env, tunnel):
    d, up = setup(env)
    warm_up(env, d, up)
    rss0 = vmrss_kib(d.pid)
    s = small_rcvbuf_socket(d, env.src(1))
    path = "/big?n=%d" % TOTAL
    if tunnel:
        resp, rest = do_connect(s, "up.test", up.port)
        check_eq(resp.status, 200, "CONNECT")
        s.sendall(("GET %s HTTP/1.1\r\nHost: up.test\r\n\r\n" % path).encode())
    else:
        s.sendall(get_request("http://up.test:%d%s" % (up.port, path)))
    # read nothing for a while: the upstream keeps trying to send 64 MiB
    _, peak = pause_and_measure(d, "tunnel" if tunnel else "plain")
    growth = peak - rss0
    check(growth < MAX_GROWTH_KIB,
          "sluiced grew by %d KiB while the client slept (bound %d KiB)",
          growth, MAX_GROWTH_KIB)
    r, rest = read_head(s, timeout=30)
    check_eq(r.status, 200, "response status")
    check_eq(int(r.header("Content-Length")), TOTAL, "Content-Length")
    digest = drain_body(s, rest, TOTAL)
    check_eq(digest, pattern_digest(TOTAL), "the 64 MiB body")
    s.close()
    check(d.alive(), "sluiced died")
    check(vmrss_kib(d.pid) - rss0 < MAX_GROWTH_KIB, "RSS after the transfer")


@S.case
def slow_consumer_tunnel(env):
    run(env, tunnel=True)


@S.case
def slow_consumer_plain_http(env):
    run(env, tunnel=False)


@S.case
def slow_producer_fast_consumer_upload(env):
    # the mirror image: a client uploads 32 MiB through a tunnel to an
    # upstream that reads slowly at first; RSS stays bounded too
    import threading
    gate = threading.Event()
    total = 32 * 1024 * 1024
    result = {}

    def slow_reader(server, conn, peer):
        gate.wait(PAUSE_S + 2)
        h = hashlib.sha256()
        got = 0
        conn.settimeout(30)
        while got < total:
            c = conn.recv(1 << 20)
            if not c:
                break
            h.update(c)
            got += len(c)
        result["got"], result["digest"] = got, h.hexdigest()
        conn.sendall(b"done")

    sink = env.server(slow_reader)
    d, _ = setup(env, sink.port)
    warm = d.connect(env.src(1))
    warm.close()
    rss0 = vmrss_kib(d.pid)
    s = d.connect(env.src(1))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
    resp, _ = do_connect(s, "up.test", sink.port)
    check_eq(resp.status, 200, "CONNECT")
    from harness import pattern_block
    blk = pattern_block()
    two = memoryview(blk + blk)
    L = len(blk)

    def chunk_at(off):
        o = off % L
        return two[o:o + min(L, total - off)]

    sent = 0
    s.settimeout(0.5)
    deadline = time.monotonic() + PAUSE_S
    # send until the pipe is full (bounded by time): the proxy must stop
    # reading from us
    while sent < total and time.monotonic() < deadline:
        try:
            sent += s.send(chunk_at(sent))
        except socket.timeout:
            continue
    peak = vmrss_kib(d.pid)
    check(sent < total, "all %d bytes accepted while upstream did not read", sent)
    check(peak - rss0 < MAX_GROWTH_KIB, "sluiced grew by %d KiB (upload)",
          peak - rss0)
    gate.set()
    s.settimeout(30)
    off = sent
    for _ in range(100000):
        if off >= total:
            break
        c = chunk_at(off)
        s.sendall(c)
        off += len(c)
    s.shutdown(socket.SHUT_WR)
    s.settimeout(60)
    data = s.recv(16)
    check_eq(data, b"done", "upstream confirmation")
    check_eq(result.get("got"), total, "bytes upstream")
    check_eq(result.get("digest"), pattern_digest(total), "upload bytes")
    s.close()


if __name__ == "__main__":
    S.main()
