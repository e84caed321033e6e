#!/usr/bin/env python3
"""limits{}: head size, line length, header count, head deadline,
connections per session and in total, idle tunnels."""

import os
import select
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, check, check_eq, do_connect, read_response,  # noqa: E402
                     decisions, get_request, check_refusal, is_closed,
                     wait_until, wait_close, close_records, read_head)

S = Suite("t_limits")


def setup(env, limits, sessions=None):
    up = env.http_upstream()
    cfg = env.config(sessions=sessions, ports=env.ports(up.port),
                     dns={"hosts": {"up.test": ["127.0.0.1"]}}, limits=limits)
    d = env.sluiced(cfg)
    return d, up


def refused(d, src, raw, reason, what):
    s = d.connect(src)
    s.sendall(raw)
    r = read_response(s)
    check_refusal(r, reason, what)
    s.close()
    return r


@S.case
def head_too_large(env):
    d, up = setup(env, {"max_head": 2048, "max_line": 1024})
    u = "http://up.test:%d/" % up.port
    # within the limits: passes
    ok = get_request(u, headers=[("X-Pad-%d" % i, "p" * 100) for i in range(10)])
    check(len(ok) < 2048, "control request too big")
    s = d.connect(env.src(1))
    s.sendall(ok)
    check_eq(read_response(s).status, 200, "request under max_head")
    s.close()
    big = get_request(u, headers=[("X-Pad-%d" % i, "p" * 500) for i in range(8)])
    refused(d, env.src(1), big, "head_too_large", "head of %d bytes" % len(big))
    refused(d, env.src(1), get_request(u, headers=[("X-Long", "l" * 1500)]),
            "head_too_large", "one line over max_line")
    # a CONNECT head too
    s = d.connect(env.src(1))
    s.sendall(b"CONNECT up.test:%d HTTP/1.1\r\nHost: up.test\r\n" % up.port
              + b"".join(b"X-P%d: %s\r\n" % (i, b"q" * 400) for i in range(8)) + b"\r\n")
    check_refusal(read_response(s), "head_too_large", "big CONNECT head")
    s.close()
    check(len(decisions(d.log_path, reason="head_too_large")) >= 3,
          "head_too_large records")
    check_eq(up.accept_count(), 1, "upstream connections (only the control)")


@S.case
def too_many_headers(env):
    d, up = setup(env, {"max_headers": 10})
    u = "http://up.test:%d/" % up.port
    refused(d, env.src(1), get_request(u, headers=[("X-H%d" % i, "v") for i in range(30)]),
            "head_too_large", "30 headers over max_headers 10")


@S.case
def head_never_ends_without_limit(env):
    # a head that keeps coming forever is cut at max_head, not buffered
    d, up = setup(env, {"max_head": 4096, "max_line": 1024})
    s = d.connect(env.src(1))
    s.sendall(b"GET http://up.test:%d/ HTTP/1.1\r\nHost: up.test\r\n" % up.port)
    sent = 0
    try:
        for i in range(2000):
            s.sendall(b"X-Flood-%d: %s\r\n" % (i, b"f" * 50))
            sent += 1
    except (BrokenPipeError, ConnectionResetError):
        pass
    r, _ = read_head(s)
    check_eq(r.header("X-Sluice-Reason"), "head_too_large", "flooded head")
    s.close()


@S.case
def head_timeout(env):
    d, up = setup(env, {"head_timeout_ms": 600})
    for partial in (b"", b"CONNECT up.test:%d HTTP/1.1\r\n" % up.port,
                    b"GET http://up.test:%d/ HTTP/1.1\r\nHost: up" % up.port):
        s = d.connect(env.src(1))
        t0 = time.monotonic()
        if partial:
            s.sendall(partial)
        try:
            r = read_response(s, timeout=8)
        except AssertionError:
            r = None
        el = time.monotonic() - t0
        if r is None:
            # nothing sent at all: closing silently is acceptable
            check(not partial, "no head_timeout answer for %r" % partial[:30])
        else:
            check_refusal(r, "head_timeout", "partial head %r" % partial[:30])
        check(el < 5, "head deadline enforced only after %.1fs (limit 0.6s)", el)
        check(el >= 0.4, "closed after %.2fs, before the deadline", el)
        s.close()
    # a slow but steady head still has one deadline for the whole head
    s = d.connect(env.src(1))
    t0 = time.monotonic()
    line = b"GET http://up.test:%d/ HTTP/1.1\r\n" % up.port
    try:
        for i in range(40):
            s.sendall(line if i == 0 else b"X-Drip-%d: d\r\n" % i)
            if select.select([s], [], [], 0.1)[0]:
                break
    except (BrokenPipeError, ConnectionResetError):
        pass
    r, _ = read_head(s, timeout=8)
    check_eq(r.header("X-Sluice-Reason"), "head_timeout", "dripping head")
    check(time.monotonic() - t0 < 5, "dripping head survived")
    s.close()


@S.case
def too_many_connections_per_session(env):
    sessions = [{"id": "a", "tier": "public", "source": env.src(1)},
                {"id": "b", "tier": "public", "source": env.src(2)}]
    d, up = setup(env, {"max_conns_per_session": 2}, sessions)
    held = []
    for i in range(2):
        s = d.connect(env.src(1))
        resp, _ = do_connect(s, "up.test", up.port)
        check_eq(resp.status, 200, "tunnel #%d" % i)
        held.append(s)
    s = d.connect(env.src(1))
    resp, _ = do_connect(s, "up.test", up.port)
    check_refusal(resp, "too_many_connections", "third tunnel")
    check_eq(resp.status, 429, "status")
    s.close()
    # another session is not affected
    s = d.connect(env.src(2))
    resp, _ = do_connect(s, "up.test", up.port)
    check_eq(resp.status, 200, "other session")
    s.close()
    # closing one frees a slot (the daemon notices within a bounded time)
    held.pop().close()

    def slot_free():
        s = d.connect(env.src(1))
        resp, _ = do_connect(s, "up.test", up.port)
        s.close()
        return resp.status == 200
    wait_until(slot_free, 5, step=0.2, what="a freed connection slot")
    for s in held:
        s.close()
    check(decisions(d.log_path, reason="too_many_connections"), "no record")


@S.case
def too_many_connections_total(env):
    sessions = [{"id": "s%d" % i, "tier": "public", "source": env.src(i)}
                for i in range(1, 5)]
    d, up = setup(env, {"max_conns_total": 3}, sessions)
    held = []
    for i in range(1, 4):
        s = d.connect(env.src(i))
        resp, _ = do_connect(s, "up.test", up.port)
        check_eq(resp.status, 200, "tunnel of session %d" % i)
        held.append(s)
    s = d.connect(env.src(4))
    try:
        resp, _ = do_connect(s, "up.test", up.port)
        check_refusal(resp, "too_many_connections", "fourth connection in total")
    except AssertionError as e:
        # refusing at accept (closing without an answer) is not what a
        # client can act on
        raise AssertionError("over max_conns_total: %s" % e)
    s.close()
    for s in held:
        s.close()


@S.case
def idle_tunnel_closed(env):
    d, up = setup(env, {"idle_timeout_s": 1})
    s = d.connect(env.src(1))
    resp, _ = do_connect(s, "up.test", up.port)
    check_eq(resp.status, 200, "CONNECT")
    t0 = time.monotonic()
    check(is_closed(s, 6), "idle tunnel still open")
    el = time.monotonic() - t0
    check(0.8 <= el < 5, "idle tunnel closed after %.1fs (idle_timeout_s 1)", el)
    s.close()
    rec = wait_close(d.log_path, up.port)
    check_eq(rec.get("reason"), "idle_timeout", "close reason")


@S.case
def busy_tunnel_not_idle(env):
    d, up = setup(env, {"idle_timeout_s": 1})
    s = d.connect(env.src(1))
    resp, _ = do_connect(s, "up.test", up.port)
    check_eq(resp.status, 200, "CONNECT")
    # 5 s of activity every 0.7 s: never 1 s idle (whole-second clocks
    # that round the last activity down close this tunnel early)
    for i in range(7):
        s.sendall(b"GET /k%d HTTP/1.1\r\nHost: up.test\r\n\r\n" % i)
        try:
            r = read_response(s)
        except AssertionError as e:
            recs = close_records(d.log_path, up.port)
            raise AssertionError("tunnel with traffic every 0.7 s closed at request %d "
                                 "(idle_timeout_s 1; close reason %r): %s"
                                 % (i, recs[-1].get("reason") if recs else None, e))
        check_eq(r.status, 200, "request %d" % i)
        time.sleep(0.7)
    s.close()
    check_eq(len(close_records(d.log_path, up.port)) <= 1, True, "close records")


if __name__ == "__main__":
    S.main()
