#!/usr/bin/env python3
"""control.tcp against a peer without a token (issue 11, finding 6):
connections per peer address and in all are capped, the TLS handshake
and the whole request head have one deadline that a byte now and then
does not extend, and the listener leaves limits.fd_reserve descriptors
to the proxy; meanwhile sandboxes and authenticated callers are served."""

import os
import resource
import socket
import ssl
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, check, check_eq, free_port, get_request,  # noqa: E402
                     read_response, require_tool, api_request, wait_until,
                     log)
from t_api import TOKENS, make_ca, make_leaf, write_token  # noqa: E402

S = Suite("t_control_limits", time_limit=200)


def setup(env, control=None, limits=None):
    require_tool("openssl")
    ca = make_ca(env, "srv")
    crt, key = make_leaf(env, ca, "server", True)
    port = free_port()
    ctl = {"tcp": "127.0.0.1:%d" % port, "tls_cert": crt, "tls_key": key,
           "tokens": [{"name": n, "role": r,
                       "token_file": write_token(env, n, t)}
                      for n, (r, t) in TOKENS.items()]}
    ctl.update(control or {})
    up = env.http_upstream()
    over = {"control": ctl}
    if limits:
        over["limits"] = limits
    cfg = env.config(ports=env.ports(up.port),
                     dns={"hosts": {"up.test": ["127.0.0.1"]}}, **over)
    d = env.sluiced(cfg)
    d.tls_port = port
    d.server_ca = ca[0]
    return d, up


def raw(d, src):
    return socket.create_connection(("127.0.0.1", d.tls_port), timeout=10,
                                    source_address=(src, 0))


def tls(d, src):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(d.server_ca)
    return ctx.wrap_socket(raw(d, src), server_hostname="127.0.0.1")


def authed_health(d, src):
    s = tls(d, src)
    try:
        return api_request(s, "GET", "/v1/health",
                           headers=[("Authorization",
                                     "Bearer " + TOKENS["ops"][1])]).status
    finally:
        s.close()


def proxied(d, env, up):
    s = d.connect(env.src(1))
    try:
        s.sendall(get_request("http://up.test:%d/ok" % up.port))
        return read_response(s).status
    finally:
        s.close()


def closed_now(s, wait):
    """True when the peer has closed s (EOF, reset, TLS close) within
    wait seconds; False when it is still open and silent."""
    s.settimeout(wait)
    try:
        data = s.recv(4096)
    except socket.timeout:
        return False
    except (ConnectionError, ssl.SSLError, OSError):
        return True
    if data:
        raise AssertionError("unexpected bytes from control.tcp: %r" % data[:80])
    return True


@S.case
def slowloris(env):
    d, up = setup(env, control={"max_conns_per_peer": 4, "max_conns": 32,
                                "head_timeout_ms": 2500})
    attacker = env.src(2)
    held = []
    try:
        # ten silent connections from one address: four are kept (until
        # the deadline), the rest are closed at once
        t0 = time.monotonic()
        for _ in range(10):
            held.append(raw(d, attacker))
        time.sleep(0.8)
        gone = [closed_now(s, 0.05) for s in held]
        check_eq(gone.count(True), 6, "connections of one peer closed at "
                 "once beyond control.max_conns_per_peer 4 (of 10; closed: "
                 "%r)" % gone)
        # while that peer sits at its cap, sandboxes are served and an
        # authenticated caller from another address gets through
        check_eq(proxied(d, env, up), 200, "a sandbox's request")
        check_eq(authed_health(d, env.src(3)), 200,
                 "an authenticated call from another address")
        # the kept four end at the deadline, though they never spoke
        for s, g in zip(held, gone):
            if not g:
                check(closed_now(s, max(0.1, 6 - (time.monotonic() - t0))),
                      "a silent connection outlived control.head_timeout_ms "
                      "2.5 s (%.1f s)", time.monotonic() - t0)
        el = time.monotonic() - t0
        check(el < 5, "silent connections closed only after %.1f s", el)
    finally:
        for s in held:
            s.close()
    # one byte a second, after a complete TLS handshake: the deadline is
    # for the whole head and is not pushed back by each byte
    s = tls(d, attacker)
    t0 = time.monotonic()
    head = b"GET /v1/health HTTP/1.1\r\nHost: sluice\r\nAuthorization: x\r\n"
    closed = False
    try:
        for i in range(len(head)):
            if time.monotonic() - t0 > 8:
                break
            try:
                s.sendall(head[i:i + 1])
            except (ConnectionError, ssl.SSLError, OSError):
                closed = True
                break
            if closed_now(s, 1.0):
                closed = True
                break
    finally:
        s.close()
    el = time.monotonic() - t0
    check(closed, "a connection sending a byte a second is still open after "
          "%.1f s (control.head_timeout_ms 2.5 s)", el)
    check(1.5 < el < 5, "the dripping connection was closed after %.1f s "
          "(control.head_timeout_ms 2.5 s)", el)
    # the attacker's address is served again once its connections are gone
    check_eq(authed_health(d, attacker), 200, "the same address, later")
    # a kept connection: its next request may come, and then the deadline
    # runs again from the answer
    s = tls(d, env.src(4))
    req = ("GET /v1/health HTTP/1.1\r\nHost: sluice\r\n"
           "Authorization: Bearer %s\r\n\r\n" % TOKENS["ops"][1]).encode()
    try:
        for i in range(2):
            s.sendall(req)
            r = read_response(s)
            check_eq(r.status, 200, "kept connection, request %d" % i)
            check(r.header("Connection", "").lower() != "close",
                  "the kept connection was not kept: %r", r.headers)
        t0 = time.monotonic()
        check(closed_now(s, 6), "an idle kept connection outlived "
              "control.head_timeout_ms 2.5 s")
        el = time.monotonic() - t0
        check(1.5 < el < 5, "the idle kept connection was closed after "
              "%.1f s (control.head_timeout_ms 2.5 s)", el)
    finally:
        s.close()


@S.case
def total_cap(env):
    d, up = setup(env, control={"max_conns_per_peer": 100, "max_conns": 6,
                                "head_timeout_ms": 3000})
    held = []
    try:
        # six silent connections from six addresses fill control.max_conns;
        # the next ones wait in the kernel's queue, not in sluiced
        t0 = time.monotonic()
        for n in range(10, 16):
            held.append(raw(d, env.src(n)))
        wait_until(lambda: "accepting paused" in d.stderr(), 5,
                   what="control.tcp pausing at control.max_conns")
        s = raw(d, env.src(3))
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.load_verify_locations(d.server_ca)
        s.settimeout(1.0)
        try:
            t = ctx.wrap_socket(s, server_hostname="127.0.0.1")
            t.close()
            served = True
        except (socket.timeout, ssl.SSLError, OSError):
            served = False
        finally:
            s.close()
        check(not served, "a seventh connection was served beyond "
              "control.max_conns 6")
        check_eq(proxied(d, env, up), 200, "a sandbox's request at the cap")
        # once they are gone (deadline), an authenticated call is served
        check_eq(authed_health(d, env.src(3)), 200, "a call after the cap")
        check(time.monotonic() - t0 < 7, "served only after %.1f s",
              time.monotonic() - t0)
    finally:
        for s in held:
            s.close()


@S.case
def fd_reserve(env):
    d, up = setup(env, control={"max_conns_per_peer": 1000,
                                "max_conns": 1000,
                                "head_timeout_ms": 30000},
                  limits={"fd_reserve": 20})
    pid = d.pid
    nfd = len(os.listdir("/proc/%d/fd" % pid))
    limit = nfd + 40
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (limit, limit))
    held = []
    try:
        # sixty silent connections from sixty addresses: without a
        # reserve they would take every descriptor the proxy has left
        for n in range(10, 70):
            held.append(raw(d, env.src(n)))
        wait_until(lambda: "limits.fd_reserve" in d.stderr(), 5,
                   what="control.tcp pausing at limits.fd_reserve")
        time.sleep(0.5)
        open_now = len(os.listdir("/proc/%d/fd" % pid))
        log("sluiced holds %d of %d descriptors" % (open_now, limit))
        check(limit - open_now >= 15, "control.tcp left only %d descriptors "
              "(limits.fd_reserve 20)", limit - open_now)
        for i in range(3):
            check_eq(proxied(d, env, up), 200,
                     "a sandbox's request while control.tcp is flooded (%d)" % i)
    finally:
        for s in held:
            s.close()
    # the flood gone, the listener accepts again
    wait_until(lambda: authed_health(d, env.src(3)) == 200, 10, step=0.5,
               what="an authenticated call after the flood")


if __name__ == "__main__":
    S.main()
