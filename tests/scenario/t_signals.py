#!/usr/bin/env python3
"""Signals: SIGHUP reopens the log (after logrotate renamed it) and reloads
the configuration (a bad file keeps the old one); SIGTERM stops accepting,
drains open tunnels and exits 0, within limits.drain_timeout_s."""

import json
import os
import signal
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, check, check_eq, do_connect, read_response,  # noqa: E402
                     get_request, check_refusal, read_log, wait_until,
                     echo_handler, recv_exact, Fail)

S = Suite("t_signals")


def setup(env, **over):
    echo = env.server(echo_handler)
    up = env.http_upstream()
    cfg = env.config(ports=env.ports(echo.port, up.port),
                     dns={"hosts": {"up.test": ["127.0.0.1"]}}, **over)
    d = env.sluiced(cfg)
    return d, echo, up


def one_request(env, d, up, path="/"):
    s = d.connect(env.src(1))
    s.sendall(get_request("http://up.test:%d%s" % (up.port, path)))
    r = read_response(s)
    s.close()
    return r


@S.case
def sighup_reopens_log(env):
    d, echo, up = setup(env)
    check_eq(one_request(env, d, up, "/before").status, 200, "before rotation")
    rotated = d.log_path + ".1"
    os.rename(d.log_path, rotated)
    d.signal(signal.SIGHUP)

    def new_file_used():
        one_request(env, d, up, "/after")
        return os.path.exists(d.log_path) and read_log(d.log_path)
    wait_until(new_file_used, 5, step=0.2, what="records in the reopened log")
    check(d.alive(), "sluiced died on SIGHUP")
    old = read_log(rotated)
    new = read_log(d.log_path)
    check_eq(new[0]["prev"], old[-1]["hash"], "chain continues into the new file")
    check_eq(new[0]["seq"], old[-1]["seq"] + 1, "seq continues into the new file")
    d.stop()
    d.chain_paths = [rotated, d.log_path]


@S.case
def sighup_reloads_config(env):
    d, echo, up = setup(env)
    check_eq(one_request(env, d, up).status, 200, "before reload")
    d.config["deny_hosts"] = ["up.test"]
    d.write_config()
    d.signal(signal.SIGHUP)

    def denied():
        r = one_request(env, d, up)
        return r if r.status != 200 else None
    r = wait_until(denied, 5, step=0.2, what="the reloaded deny_hosts")
    check_refusal(r, "admin_deny", "after reload")
    # and back
    d.config["deny_hosts"] = []
    d.write_config()
    d.signal(signal.SIGHUP)
    wait_until(lambda: one_request(env, d, up).status == 200, 5, step=0.2,
               what="the second reload")


@S.case
def sighup_bad_config_keeps_old(env):
    d, echo, up = setup(env)
    with open(d.conf_path, "w") as f:
        f.write('{ "ceiling": "public", "dns": { "timeout_ms": "soon" } }\n')
    d.signal(signal.SIGHUP)
    time.sleep(0.5)
    check(d.alive(), "sluiced died on a bad reload")
    check_eq(one_request(env, d, up).status, 200, "old config still in force")
    wait_until(lambda: "timeout_ms" in d.stderr(), 3,
               what="the reload error on stderr")


@S.case
def sigterm_idle_exits_zero(env):
    d, echo, up = setup(env)
    check_eq(one_request(env, d, up).status, 200, "a request")
    t0 = time.monotonic()
    d.signal(signal.SIGTERM)
    rc = d.wait(10)
    check(rc is not None, "no exit within 10s of SIGTERM")
    check_eq(rc, 0, "exit status")
    check(time.monotonic() - t0 < 3, "idle daemon took %.1fs to exit",
          time.monotonic() - t0)


@S.case
def sigterm_drains_open_tunnel(env):
    d, echo, up = setup(env, limits={"drain_timeout_s": 10})
    s = d.connect(env.src(1))
    resp, _ = do_connect(s, "up.test", echo.port)
    check_eq(resp.status, 200, "CONNECT")
    s.sendall(b"ping")
    check_eq(recv_exact(s, 4), b"ping", "echo before SIGTERM")
    d.signal(signal.SIGTERM)
    time.sleep(0.3)
    check(d.alive(), "exited at once with a tunnel open")
    # new connections are not served
    try:
        n = d.connect(env.src(1), timeout=3)
        try:
            resp2, _ = do_connect(n, "up.test", echo.port, timeout=3)
            check_refusal(resp2, "shutting_down", "CONNECT during drain")
        except Fail as e:
            if "EOF" not in str(e) and "reset" not in str(e):
                raise
        n.close()
    except (ConnectionRefusedError, socket.timeout):
        pass
    # the open tunnel still works
    s.sendall(b"still-here")
    check_eq(recv_exact(s, 10), b"still-here", "echo during drain")
    t0 = time.monotonic()
    s.close()
    rc = d.wait(5)
    check(rc is not None, "not exited 5s after the last tunnel closed")
    check_eq(rc, 0, "exit status after drain")
    check(time.monotonic() - t0 < 5, "exit took %.1fs", time.monotonic() - t0)
    closes = [r for r in read_log(d.log_path) if r.get("event") == "close"]
    check(closes, "no close record for the drained tunnel")


@S.case
def sigterm_drain_deadline(env):
    d, echo, up = setup(env, limits={"drain_timeout_s": 1})
    s = d.connect(env.src(1))
    resp, _ = do_connect(s, "up.test", echo.port)
    check_eq(resp.status, 200, "CONNECT")
    t0 = time.monotonic()
    d.signal(signal.SIGTERM)
    rc = d.wait(8)
    el = time.monotonic() - t0
    check(rc is not None, "not exited 8s after SIGTERM (drain_timeout_s 1)")
    check_eq(rc, 0, "exit status")
    check(0.8 <= el < 5, "exited after %.1fs (drain_timeout_s 1)", el)
    s.settimeout(3)
    try:
        data = s.recv(10)
    except (ConnectionResetError, socket.timeout):
        data = b""
    check_eq(data, b"", "tunnel closed at the deadline")
    s.close()
    recs = read_log(d.log_path)
    closes = [r for r in recs if r.get("event") == "close"]
    check(closes, "no close record for the cut tunnel")
    check(closes[-1].get("reason") in ("shutting_down",), "close reason %r",
          closes[-1].get("reason"))


@S.case
def sigterm_keepalive_next_request(env):
    # on a keep-alive connection, a request after SIGTERM gets 503
    # shutting_down or a clean close, never a forward
    d, echo, up = setup(env, limits={"drain_timeout_s": 5})
    s = d.connect(env.src(1))
    s.sendall(get_request("http://up.test:%d/one" % up.port))
    check_eq(read_response(s).status, 200, "first request")
    before = len(up.events)
    d.signal(signal.SIGTERM)
    time.sleep(0.3)
    try:
        s.sendall(get_request("http://up.test:%d/two" % up.port))
        r = read_response(s, timeout=5)
        check_refusal(r, "shutting_down", "request after SIGTERM")
    except (BrokenPipeError, ConnectionResetError):
        pass
    except Fail as e:
        if "EOF" not in str(e) and "reset" not in str(e):
            raise
    check_eq(len(up.events), before, "requests forwarded after SIGTERM")
    s.close()
    rc = d.wait(8)
    check_eq(rc, 0, "exit status")


@S.case
def sigterm_head_in_progress(env):
    # a request whose head completes after SIGTERM is refused with 503
    # shutting_down (and logged), not forwarded
    d, echo, up = setup(env, limits={"drain_timeout_s": 5})
    s = d.connect(env.src(1))
    s.sendall(b"GET http://up.test:%d/late HTTP/1.1\r\n" % up.port)
    time.sleep(0.2)
    d.signal(signal.SIGTERM)
    time.sleep(0.3)
    s.sendall(b"Host: up.test:%d\r\n\r\n" % up.port)
    r = read_response(s, timeout=5)
    check_refusal(r, "shutting_down", "head completed after SIGTERM")
    check_eq(r.status, 503, "status")
    s.close()
    check_eq(d.wait(8), 0, "exit status")
    check_eq(up.accept_count(), 0, "upstream connections")
    recs = [x for x in read_log(d.log_path) if x.get("reason") == "shutting_down"]
    check(recs, "no shutting_down record")


@S.case
def sessions_sockets_survive_reload(env):
    up = env.http_upstream()
    cfg = env.config(sessions=[{"id": "u1", "tier": "public"}],
                     ports=env.ports(up.port),
                     dns={"hosts": {"up.test": ["127.0.0.1"]}})
    d = env.sluiced(cfg)
    d.signal(signal.SIGHUP)
    time.sleep(0.5)
    s = d.connect_unix("u1")
    s.sendall(get_request("http://up.test:%d/" % up.port))
    check_eq(read_response(s).status, 200, "Unix session after reload")
    s.close()


if __name__ == "__main__":
    S.main()
