#!/usr/bin/env python3
"""The control plane's state against the real daemon: sessions, a grant
and a ceiling made through the API survive a restart (listeners, socket
paths and the grant's effect included); a state file sluiced cannot read
stops it with advice; a ceiling lowered under an open tunnel (with and
without close_exceeding); a session deleted under open tunnels; the admin
records every change writes; and sluicectl end to end."""

import json
import os
import signal
import socket
import stat
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, Fail, check, check_eq, api_unix,  # noqa: E402
                     do_connect, check_refusal, read_response, read_log,
                     recv_exact, is_closed, echo_handler, wait_record,
                     wait_until, BUILDDIR)

S = Suite("t_state", time_limit=300)

EX_OK, EX_REFUSED, EX_USAGE, EX_UNREACHABLE = 0, 1, 2, 3


# ---------------------------------------------------------------------------
# Helpers

def setup(env, sessions=None, start=True, **over):
    """sluiced with an HTTP and an echo upstream behind up.test, a registry
    host reg.test, and a control socket; returns (daemon, http, echo)."""
    up = env.http_upstream()
    echo = env.server(echo_handler)
    cfg = env.config(sessions=sessions if sessions is not None else [],
                     ports=env.ports(up.port, echo.port),
                     registries=["reg.test"],
                     dns={"hosts": {"up.test": ["127.0.0.1"],
                                    "reg.test": ["127.0.0.1"]}},
                     **over)
    d = env.sluiced(cfg, start=start)
    d.ctl = os.path.join(cfg["runtime_dir"], "control.sock")
    return d, up, echo


def restart(env, d, name):
    """The same configuration in a new process (the old one must be gone)."""
    check(not d.alive(), "%s still running", d.name)
    n = env.sluiced(dict(d.config), name=name)
    n.ctl = d.ctl
    return n


def call(d, method, path, body=None):
    return api_unix(d.ctl, method, path, body)


def ok(r, status, what):
    check(r.status == status, "%s: status %d, want %d (body %r)", what,
          r.status, status, r.body[:300])
    return r.json


def new_session(sid, tenant="acme", tier="public", **extra):
    doc = {"id": sid, "tenant": tenant, "user": "alice", "tier": tier}
    doc.update(extra)
    return doc


def log_mark(d):
    return len(read_log(d.log_path))


def records_since(d, mark, **match):
    return [r for r in read_log(d.log_path)[mark:]
            if all(r.get(k) == v for k, v in match.items())]


def tunnel(connect, host, port):
    """A CONNECT tunnel through a fresh client socket; checks the 200."""
    c = connect()
    resp, rest = do_connect(c, host, port)
    check_eq(resp.status, 200, "CONNECT %s:%d (%r)" % (host, port, resp))
    check_eq(rest, b"", "bytes after the 200")
    return c


def echo_ok(c, what, payload=None):
    """The tunnel carries bytes both ways (echo upstream)."""
    payload = payload or ("ping %s" % what).encode()
    c.sendall(payload)
    check_eq(recv_exact(c, len(payload), timeout=5), payload,
             "echo through %s" % what)


def refused(connect, host, port, reasons, what):
    """A CONNECT that must be refused with one of reasons."""
    c = connect()
    try:
        resp, _ = do_connect(c, host, port)
    finally:
        c.close()
    check(resp.sluice_reason in reasons, "%s: got %d %r, want one of %s",
          what, resp.status, resp.sluice_reason, sorted(reasons))
    check_refusal(resp, resp.sluice_reason, what)
    return resp


def unix_connector(path):
    def connect():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(path)
        return s
    return connect


def tcp_connector(d, src):
    return lambda: d.connect(src=src)


def gone(c, what):
    """The daemon closed the client side of a tunnel (EOF or reset)."""
    try:
        closed = is_closed(c, timeout=5)
    except (ConnectionResetError, BrokenPipeError):
        closed = True
    check(closed, "%s: the tunnel is still open" % what)


def admin_recs(d, action, **match):
    return [r for r in read_log(d.log_path)
            if r.get("event") == "admin" and r.get("action") == action and
            all(r.get(k) == v for k, v in match.items())]


def check_admin(d, action, who="root", **match):
    """One admin record for action: who, role, before and after present
    and changed (for a grant: the grant changed and the count after)."""
    recs = admin_recs(d, action, outcome="ok", **match)
    check(recs, "no admin record for %s %r (admin records: %r)", action,
          match, [(r.get("action"), r.get("target"))
                  for r in read_log(d.log_path) if r.get("event") == "admin"])
    r = recs[-1]
    check_eq(r.get("who"), who, "%s record who" % action)
    check_eq(r.get("role"), "admin", "%s record role" % action)
    if action.startswith("grant_"):
        check("grant" in r and "grants" in r and "before" not in r,
              "%s record: not grant and grants: %r", action, r)
        return r
    check("before" in r and "after" in r, "%s record lacks before/after: %r",
          action, r)
    check(r["before"] != r["after"], "%s record: before == after (%r)",
          action, r["before"])
    return r


def wait_conns(d, sid, n):
    """Until the daemon counts n connections on session sid (a client's
    close takes a moment to reach the daemon's side)."""
    wait_until(lambda: ok(call(d, "GET", "/v1/sessions/%s" % sid), 200,
                          "GET %s" % sid)["connections"] == n, 5,
               what="%d connection(s) on %s" % (n, sid))


def ctl_path():
    p = os.path.join(BUILDDIR, "proxy", "sluicectl", "sluicectl")
    if not os.access(p, os.X_OK):
        raise Fail("sluicectl not built at %s" % p)
    return p


def ctl(*args, timeout=30):
    e = dict(os.environ)
    for k in ("SLUICE_CONTROL_SOCKET", "SLUICE_TOKEN"):
        e.pop(k, None)
    try:
        r = subprocess.run([ctl_path()] + list(args), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                           env=e, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Fail("sluicectl %s did not finish" % " ".join(args))
    r.out = r.stdout.decode("utf-8", "replace")
    r.err = r.stderr.decode("utf-8", "replace")
    return r


def expect_exit(r, code, what):
    check(r.returncode == code, "%s: exit %d, want %d\nstdout: %s\nstderr: %s",
          what, r.returncode, code, r.out[-600:], r.err[-600:])
    return r


def verify_log(d):
    r = expect_exit(ctl("log", "verify", "--file", d.log_path), EX_OK,
                    "sluicectl log verify")
    check(r.out.strip() or r.err.strip(), "log verify said nothing")
    return r


# ---------------------------------------------------------------------------
# 1. restart

def restart_case(env, how):
    d, up, echo = setup(env, sessions=[
        {"id": "cfg1", "tenant": "acme", "user": "carol",
         "tier": "registries", "source": env.src(3)}])
    uni = ok(call(d, "POST", "/v1/sessions",
                  new_session("uni", tier="registries")), 201, "create uni")
    want_sock = os.path.join(d.config["runtime_dir"], "sessions", "uni",
                             "proxy.sock")
    check_eq(uni["socket"], want_sock, "default socket path")
    tcp = ok(call(d, "POST", "/v1/sessions",
                  new_session("tcp1", tenant="beta", source=env.src(2))),
             201, "create tcp1")
    check_eq((tcp["transport"], tcp["source"]), ("tcp", env.src(2)),
             "TCP session")

    # up.test is inside the ceiling (public) but outside uni's tier
    # (registries): without an approver it is refused ...
    uconn = unix_connector(want_sock)
    refused(uconn, "up.test", echo.port, {"no_approver", "above_ceiling"},
            "uni to up.test before the grant")
    ok(call(d, "POST", "/v1/sessions/uni/grants",
            {"host": "up.test", "port": echo.port}), 201, "grant")
    ok(call(d, "POST", "/v1/sessions/cfg1/grants",
            {"host": "up.test", "port": up.port}), 201, "grant on cfg1")
    # ... and with the grant it is allowed, by the grant
    c = tunnel(uconn, "up.test", echo.port)
    echo_ok(c, "uni before the restart")
    c.close()
    # the sessions' own egress rules (OpenSandbox's policy) are kept too,
    # a declared session's as its grants are
    eg = {"allow": ["*.up.test"], "deny": ["bad.test"]}
    check_eq(ok(call(d, "PUT", "/v1/sessions/uni/egress", eg), 200,
                "egress")["egress"], eg, "uni's egress rules")
    ok(call(d, "PUT", "/v1/sessions/cfg1/egress", {"deny": ["bad.test"]}),
       200, "egress on cfg1")
    cl = ok(call(d, "PUT", "/v1/ceiling", {"tenants": {"beta": "registries"}}),
            200, "tenant ceiling")
    check_eq(cl["tenants"].get("beta"), "registries", "tenant ceiling set")
    before = {s["id"]: s for s in
              ok(call(d, "GET", "/v1/sessions"), 200, "list")["sessions"]}

    if how == "term":
        check_eq(d.stop(), 0, "sluiced exit status after SIGTERM")
    else:
        d.signal(signal.SIGKILL)
        check(d.wait(10) is not None, "sluiced survived SIGKILL")

    with open(d.config["state_file"]) as f:
        state = json.load(f)
    check_eq(state.get("version"), 1, "state version")
    saved = {s["id"]: s for s in state["sessions"]}
    check_eq(sorted(saved), ["cfg1", "tcp1", "uni"], "sessions in the state")
    check_eq(saved["uni"].get("socket"), want_sock, "uni's socket saved")
    check_eq(saved["tcp1"].get("source"), env.src(2), "tcp1's source saved")
    check_eq(saved["uni"].get("grants"),
             [{"host": "up.test", "port": echo.port}], "uni's grant saved")
    check(saved["cfg1"].get("from_config") is True, "cfg1 saved as the "
          "config's: %r", saved["cfg1"])
    check_eq(state["ceiling"]["tenants"], {"beta": "registries"},
             "ceiling saved")

    n = restart(env, d, "sluiced-again")
    mark = log_mark(n)
    after = {s["id"]: s for s in
             ok(call(n, "GET", "/v1/sessions"), 200, "list again")["sessions"]}
    check_eq(sorted(after), sorted(before), "sessions after the restart")
    for sid in before:
        for k in ("tenant", "user", "tier", "transport", "socket", "source",
                  "grants", "egress", "from_config", "ceiling"):
            check_eq(after[sid][k], before[sid][k], "%s.%s after the "
                     "restart" % (sid, k))
    check_eq(after["uni"]["grants"], [{"host": "up.test", "port": echo.port}],
             "uni's grant restored")
    check_eq(after["uni"]["egress"], eg, "uni's egress rules restored")
    check_eq(after["cfg1"]["egress"], {"allow": [], "deny": ["bad.test"]},
             "cfg1's egress rules restored")
    check_eq(after["cfg1"]["grants"], [{"host": "up.test", "port": up.port}],
             "cfg1's grant restored")
    cl = ok(call(n, "GET", "/v1/ceiling"), 200, "ceiling again")
    check_eq((cl["tier"], cl["tenants"].get("beta")), ("public", "registries"),
             "ceiling after the restart")
    check(stat.S_ISSOCK(os.stat(want_sock).st_mode), "uni's socket is back")

    # the same socket path carries traffic, and the grant still decides
    c = tunnel(uconn, "up.test", echo.port)
    echo_ok(c, "uni after the restart", os.urandom(3000))
    c.close()
    rec = records_since(n, mark, event="decision", session="uni",
                        decision="allow")
    check(rec, "no decision for uni after the restart")
    check_eq(rec[-1].get("rule"), "grant", "rule of uni's allow")
    # the grant is for that port only
    refused(uconn, "up.test", up.port, {"no_approver", "above_ceiling"},
            "uni to up.test on an ungranted port")

    # the TCP source is served again, under the restored tenant ceiling
    tconn = tcp_connector(n, env.src(2))
    c = tunnel(tconn, "reg.test", echo.port)
    echo_ok(c, "tcp1 after the restart")
    c.close()
    refused(tconn, "up.test", echo.port, {"above_ceiling"},
            "tcp1 above its tenant's restored ceiling")
    # the config session's grant is back too
    c = n.connect(src=env.src(3))
    c.sendall(b"GET http://up.test:%d/cfg HTTP/1.1\r\nHost: up.test:%d\r\n"
              b"Connection: close\r\n\r\n" % (up.port, up.port))
    r = read_response(c)
    c.close()
    check_eq(r.status, 200, "cfg1 through its restored grant (%r)" % r)
    rec = records_since(n, mark, event="decision", session="cfg1",
                        decision="allow")
    check(rec and rec[-1].get("rule") == "grant", "cfg1 decision %r", rec)

    # a reload keeps what the API made (the file's ceilings are re-applied
    # under the API's)
    n.signal(signal.SIGHUP)
    wait_until(lambda: "configuration reloaded" in n.stderr(), 5,
               what="the reload")
    again = {s["id"]: s for s in
             ok(call(n, "GET", "/v1/sessions"), 200, "list")["sessions"]}
    check_eq(sorted(again), sorted(before), "sessions after a reload")
    check_eq(again["uni"]["grants"], after["uni"]["grants"],
             "grants after a reload")
    check_eq(ok(call(n, "GET", "/v1/ceiling"), 200, "ceiling")["tenants"],
             {"beta": "registries"}, "tenant ceiling after a reload")
    check(not os.path.exists(d.config["state_file"] + ".tmp"),
          "temporary state file left behind")
    n.stop()
    verify_log(n)     # the restarted daemon continued the chain


@S.case
def restart_restores_sessions_grants_ceiling(env):
    restart_case(env, "term")


@S.case
def restart_after_a_crash(env):
    # SIGKILL leaves the socket files behind: the restart must take over
    # the same paths, not fail on them
    restart_case(env, "kill")


@S.case
def group_commit_acknowledged_is_saved(env):
    """Changes made at once (group commit: that they share saves is
    group_commit_one_save_per_pass's); each reply comes only once the
    state file holds its change: read right after the
    reply, the file names the session, and a SIGKILL right after the
    last reply loses none."""
    import threading
    d, _, _ = setup(env)
    n = 24
    ids = ["g%02d" % i for i in range(n)]
    errs = []
    lock = threading.Lock()

    def one(sid):
        try:
            r = call(d, "POST", "/v1/sessions",
                     new_session(sid, source=env.src(10 + ids.index(sid))))
            if r.status != 201:
                raise Fail("%s: status %d %r" % (sid, r.status, r.body[:200]))
            with open(d.config["state_file"]) as f:
                saved = [x["id"] for x in json.load(f)["sessions"]]
            if sid not in saved:
                raise Fail("%s acknowledged but not in the state file" % sid)
        except Exception as e:  # noqa: BLE001 (reported below)
            with lock:
                errs.append(repr(e))
    ts = [threading.Thread(target=one, args=(sid,)) for sid in ids]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    check(not errs, "concurrent creates: %s", errs[:3])
    d.signal(signal.SIGKILL)
    d.wait(10)
    n2 = restart(env, d, "sluiced2")
    got = sorted(x["id"] for x in ok(call(n2, "GET", "/v1/sessions"), 200,
                                      "list after the kill")["sessions"])
    check_eq(got, ids, "sessions after SIGKILL")
    n2.stop()


def renames_to(fd, name):
    """How many IN_MOVED_TO events of name the inotify descriptor fd has
    read since the last call (struct inotify_event: wd, mask, cookie,
    len, then the name padded to len)."""
    import struct
    n = 0
    while True:
        try:
            buf = os.read(fd, 65536)
        except BlockingIOError:
            return n
        off = 0
        while off < len(buf):
            _, mask, _, ln = struct.unpack_from("iIII", buf, off)
            got = buf[off + 16:off + 16 + ln].rstrip(b"\0").decode()
            if mask & 0x80 and got == name:
                n += 1
            off += 16 + ln


@S.case
def group_commit_one_save_per_pass(env):
    """Changes read in one pass of the loop share one save: with sluiced
    stopped (SIGSTOP), sixteen creates are written on sixteen
    connections; once it runs again it reads them all in a pass, and the
    state file is replaced (renamed into place, counted with inotify)
    once or twice, not sixteen times as a save per change would."""
    import ctypes
    d, _, _ = setup(env)
    state = d.config["state_file"]
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    check(fd >= 0, "inotify_init1: errno %d", ctypes.get_errno())
    socks = []
    try:
        # IN_MOVED_FROM too: the kernel merges an event with the one
        # before it when they are the same and unread, so two renames'
        # IN_MOVED_TO count as two only with the IN_MOVED_FROM between
        check(libc.inotify_add_watch(fd, os.path.dirname(state).encode(),
                                     0x40 | 0x80) >= 0,
              "inotify_add_watch: errno %d", ctypes.get_errno())
        ok(call(d, "POST", "/v1/sessions", new_session(
            "p00", source=env.src(10))), 201, "a first create")
        check_eq(renames_to(fd, os.path.basename(state)), 1,
                 "the first create's save")
        n = 16
        d.signal(signal.SIGSTOP)
        try:
            for i in range(1, n + 1):
                body = json.dumps(new_session(
                    "p%02d" % i, source=env.src(10 + i))).encode()
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                socks.append(s)
                s.settimeout(10)
                s.connect(d.ctl)
                s.sendall(("POST /v1/sessions HTTP/1.1\r\nHost: sluice\r\n"
                           "Connection: close\r\nContent-Type: "
                           "application/json\r\nContent-Length: %d\r\n\r\n"
                           % len(body)).encode() + body)
        finally:
            d.signal(signal.SIGCONT)
        for i, s in enumerate(socks):
            r = read_response(s)
            check_eq(r.status, 201, "create p%02d (body %r)" % (i + 1,
                                                                r.body[:200]))
        saves = renames_to(fd, os.path.basename(state))
        check(1 <= saves <= 2, "%d creates read in one pass made %d saves, "
              "want 1 or 2", n, saves)
        with open(state) as f:
            saved = sorted(x["id"] for x in json.load(f)["sessions"])
        check_eq(saved, ["p%02d" % i for i in range(n + 1)],
                 "every create saved")
    finally:
        for s in socks:
            s.close()
        os.close(fd)
    d.stop()


@S.case
def group_commit_failed_save(env):
    """A save that fails after the change was made (here: the temporary
    file's name taken by a directory, which stops every save, even
    root's): the request is answered 500 saying the change is in force
    but not saved; the next change saves both."""
    d, _, _ = setup(env)
    tmp = d.config["state_file"] + ".tmp"
    os.mkdir(tmp)
    try:
        r = call(d, "POST", "/v1/sessions", new_session(
            "f1", source=env.src(2)))
        check_eq(r.status, 500, "create while the state cannot be saved")
        check("in force but the state file could not be saved" in
              r.body.decode(), "message: %r", r.body[:300])
        # apireply's error: the one shape, ending in a newline
        check(r.body.endswith(b"}\n"), "no trailing newline: %r",
              r.body[-40:])
        check_eq(json.loads(r.body)["error"]["code"], "internal",
                 "the unsaved change's code")
        ok(call(d, "GET", "/v1/sessions/f1"), 200, "f1 is in force")
    finally:
        os.rmdir(tmp)
    ok(call(d, "POST", "/v1/sessions", new_session(
        "f2", source=env.src(3))), 201, "create after")
    with open(d.config["state_file"]) as f:
        saved = sorted(x["id"] for x in json.load(f)["sessions"])
    check_eq(saved, ["f1", "f2"], "both saved by the next change's save")
    d.stop()


# ---------------------------------------------------------------------------
# 2. a state file sluiced cannot use

def must_refuse(env, cfg, name, what):
    d = env.sluiced(dict(cfg), name=name, start=False)
    try:
        d.start(ready_timeout=10)
    except Fail:
        pass
    else:
        raise Fail("%s: sluiced started on it" % what)
    rc = d.wait(5)
    check(rc is not None and rc != 0, "%s: exit status %r", what, rc)
    err = d.stderr()
    check("move" in err and cfg["state_file"] in err,
          "%s: stderr does not say how to start empty:\n%s", what, err)
    check(not os.path.exists(os.path.join(cfg["runtime_dir"],
                                          "control.sock")),
          "%s: control socket left behind", what)
    return d


@S.case
def corrupt_state_file(env):
    d, _, _ = setup(env)
    ok(call(d, "POST", "/v1/sessions", new_session("keep")), 201, "create")
    ok(call(d, "PUT", "/v1/ceiling", {"tier": "registries"}), 200, "ceiling")
    d.stop()
    cfg = d.config
    path = cfg["state_file"]
    with open(path, "rb") as f:
        good = f.read()
    json.loads(good)
    doc = json.loads(good)

    bad_version = dict(doc, version=2)
    bad_tier = json.loads(good)
    bad_tier["sessions"][0]["tier"] = "everything"
    variants = [
        ("truncated JSON", good[:len(good) // 2]),
        ("wrong version", json.dumps(bad_version).encode()),
        ("a session with a bad tier", json.dumps(bad_tier).encode()),
        ("not an object", b"[]\n"),
        # one JSON object and nothing else (jsonstrict.h): a reader
        # that stops at the NUL or takes the last "tier" must not see
        # another state than sluiced
        ("a key twice", good.replace(b'"tier": "public"',
                                     b'"tier": "off", "tier": "public"', 1)),
        ("text after the object", good + b'{"version": 1}\n'),
        ("a NUL byte after the object", good + b"\0garbage"),
    ]
    for i, (what, data) in enumerate(variants):
        with open(path, "wb") as f:
            f.write(data)
        must_refuse(env, cfg, "refused%d" % i, what)
        with open(path, "rb") as f:
            check_eq(f.read(), data, "%s: the file was changed" % what)

    os.rename(path, path + ".bad")
    n = env.sluiced(dict(cfg), name="empty")
    n.ctl = d.ctl
    ss = ok(call(n, "GET", "/v1/sessions"), 200, "list")["sessions"]
    check_eq(ss, [], "sessions after starting empty")
    cl = ok(call(n, "GET", "/v1/ceiling"), 200, "ceiling")
    check_eq(cl["tier"], "public", "the config's ceiling after starting empty")
    # a fresh state is written on the next change
    ok(call(n, "POST", "/v1/sessions", new_session("fresh")), 201, "create")
    with open(path) as f:
        check_eq([s["id"] for s in json.load(f)["sessions"]], ["fresh"],
                 "new state file")


# ---------------------------------------------------------------------------
# 3. a ceiling lowered while tunnels are open

@S.case
def ceiling_lowered_under_open_tunnels(env):
    d, _, echo = setup(env)
    a = ok(call(d, "POST", "/v1/sessions", new_session("low")), 201, "create")
    ok(call(d, "POST", "/v1/sessions",
            new_session("other", tenant="beta", source=env.src(4))),
       201, "create other")
    aconn = unix_connector(a["socket"])
    bconn = tcp_connector(d, env.src(4))
    t1 = tunnel(aconn, "up.test", echo.port)
    echo_ok(t1, "t1")
    tb = tunnel(bconn, "up.test", echo.port)
    echo_ok(tb, "beta's tunnel")

    # without close_exceeding: the open tunnel stays, a new one is refused
    cl = ok(call(d, "PUT", "/v1/ceiling", {"tenants": {"acme": "registries"}}),
            200, "lower acme")
    check_eq(cl["closed"], 0, "closed without close_exceeding")
    echo_ok(t1, "t1 after the ceiling was lowered")
    refused(aconn, "up.test", echo.port, {"above_ceiling"},
            "new tunnel above the lowered ceiling")
    c = tunnel(aconn, "reg.test", echo.port)     # still inside it
    echo_ok(c, "registry host under the lowered ceiling")
    c.close()
    s = ok(call(d, "GET", "/v1/sessions/low"), 200, "session")
    check_eq((s["ceiling"], s["effective_tier"]), ("registries", "registries"),
             "session view of the lowered ceiling")
    rec = check_admin(d, "ceiling_set", target="acme")
    check(rec["after"]["tenants"].get("acme") == "registries" and
          "acme" not in rec["before"]["tenants"], "ceiling record %r", rec)

    # off: a new connection is refused with network_off
    ok(call(d, "PUT", "/v1/ceiling", {"tenants": {"acme": "off"}}), 200,
       "acme off")
    refused(aconn, "reg.test", echo.port, {"network_off"},
            "new tunnel with the tenant's network off")
    echo_ok(t1, "t1 with the network off (no close_exceeding)")

    # back up, a second tunnel, then down with close_exceeding: both of
    # acme's tunnels close with ceiling_lowered, beta's stays
    ok(call(d, "PUT", "/v1/ceiling", {"tenants": {"acme": None}}), 200,
       "clear acme")
    t2 = tunnel(aconn, "up.test", echo.port)
    echo_ok(t2, "t2")
    wait_conns(d, "low", 2)
    mark = log_mark(d)
    cl = ok(call(d, "PUT", "/v1/ceiling", {"tenants": {"acme": "registries"},
                                           "close_exceeding": True}),
            200, "lower acme, close_exceeding")
    check_eq(cl["closed"], 2, "tunnels closed by close_exceeding")
    gone(t1, "t1 after close_exceeding")
    gone(t2, "t2 after close_exceeding")
    t1.close()
    t2.close()
    echo_ok(tb, "beta's tunnel after acme's ceiling closed acme's")
    closes = wait_until(lambda: (lambda c: c if len(c) >= 2 else None)(
        records_since(d, mark, event="close", session="low")), 5,
        what="two close records for low")
    check_eq([r.get("reason") for r in closes],
             ["ceiling_lowered", "ceiling_lowered"], "close reasons")
    check(not records_since(d, mark, event="close", session="other"),
          "beta's tunnel was logged as closed")
    tb.close()
    wait_conns(d, "other", 0)

    # the global ceiling, too
    t3 = tunnel(bconn, "up.test", echo.port)
    cl = ok(call(d, "PUT", "/v1/ceiling", {"tier": "off",
                                           "close_exceeding": True}),
            200, "global off")
    check_eq(cl["closed"], 1, "closed by the global ceiling")
    gone(t3, "beta's tunnel after the global ceiling went off")
    t3.close()
    wait_record(d.log_path, event="close", session="other",
                reason="ceiling_lowered")
    rec = check_admin(d, "ceiling_set", target="global")
    check_eq((rec["before"]["tier"], rec["after"]["tier"]), ("public", "off"),
             "global ceiling record")
    d.stop()
    verify_log(d)


# ---------------------------------------------------------------------------
# 4. a session deleted while tunnels are open

@S.case
def session_deleted_under_open_tunnels(env):
    d, up, echo = setup(env, sessions=[
        {"id": "cfg1", "tenant": "acme", "user": "carol", "tier": "public",
         "source": env.src(5)}])
    s = ok(call(d, "POST", "/v1/sessions", new_session("doomed")), 201,
           "create")
    sock = s["socket"]
    conn = unix_connector(sock)
    tunnels = [tunnel(conn, "up.test", echo.port) for _ in range(3)]
    for i, t in enumerate(tunnels):
        echo_ok(t, "tunnel %d" % i)
    # a plain-HTTP keep-alive connection of the same session
    k = conn()
    k.sendall(b"GET http://up.test:%d/keep HTTP/1.1\r\nHost: up.test:%d\r\n\r\n"
              % (up.port, up.port))
    check_eq(read_response(k).status, 200, "keep-alive exchange")
    survivor = tunnel(tcp_connector(d, env.src(5)), "up.test", echo.port)
    wait_conns(d, "doomed", 4)

    mark = log_mark(d)
    ok(call(d, "DELETE", "/v1/sessions/doomed"), 200, "delete")
    for i, t in enumerate(tunnels):
        gone(t, "tunnel %d after DELETE" % i)
        t.close()
    gone(k, "keep-alive connection after DELETE")
    k.close()
    check(not os.path.exists(sock), "socket file left after DELETE")
    try:
        conn().close()
        raise Fail("the deleted session's socket still accepts")
    except OSError:
        pass
    # one close record per tunnel; the idle keep-alive connection has no
    # exchange left open to close
    closes = wait_until(lambda: (lambda c: c if len(c) >= 3 else None)(
        records_since(d, mark, event="close", session="doomed",
                      method="CONNECT")), 5,
        what="three close records for doomed")
    check_eq(len(closes), 3, "close records")
    check_eq(set(r.get("reason") for r in closes), {"session_closed"},
             "close reasons")
    r = call(d, "GET", "/v1/sessions/doomed")
    check_eq(r.status, 404, "GET after DELETE")
    ids = [x["id"] for x in ok(call(d, "GET", "/v1/sessions"), 200,
                               "list")["sessions"]]
    check_eq(ids, ["cfg1"], "sessions after DELETE")
    echo_ok(survivor, "another session's tunnel after DELETE")
    rec = check_admin(d, "session_delete", target="doomed")
    check(rec["before"]["id"] == "doomed" and rec["after"] is None,
          "delete record %r", rec)
    with open(d.config["state_file"]) as f:
        check("doomed" not in [x["id"] for x in json.load(f)["sessions"]],
              "deleted session still in the state file")

    # the configuration's session stays
    r = call(d, "DELETE", "/v1/sessions/cfg1")
    check_eq(r.status, 409, "DELETE of a config session")
    check_eq(r.json["error"]["code"], "conflict", "409 error code")
    echo_ok(survivor, "config session's tunnel after the refused DELETE")
    survivor.close()
    check_eq(ok(call(d, "GET", "/v1/sessions/cfg1"), 200, "cfg1")["id"],
             "cfg1", "cfg1 still there")
    d.stop()
    verify_log(d)


# ---------------------------------------------------------------------------
# 5. admin records of every kind of change

@S.case
def admin_records_of_every_change(env):
    d, _, echo = setup(env)
    ok(call(d, "POST", "/v1/sessions", new_session("a1", tier="off")), 201,
       "create")
    ok(call(d, "PATCH", "/v1/sessions/a1", {"tier": "registries"}), 200,
       "patch")
    ok(call(d, "POST", "/v1/sessions/a1/grants",
            {"host": "up.test", "port": echo.port}), 201, "grant")
    ok(call(d, "POST", "/v1/sessions/a1/grants",
            {"host": "up.test", "port": 443}), 201, "grant 2")
    ok(call(d, "DELETE", "/v1/sessions/a1/grants/up.test:443"), 200,
       "grant remove")
    ok(call(d, "PUT", "/v1/ceiling", {"tier": "registries"}), 200, "ceiling")
    ok(call(d, "PUT", "/v1/ceiling", {"tenants": {"acme": "off"}}), 200,
       "tenant ceiling")
    ok(call(d, "PUT", "/v1/ceiling", {"tenants": {"acme": None}}), 200,
       "tenant cleared")
    ok(call(d, "DELETE", "/v1/sessions/a1"), 200, "delete")

    r = check_admin(d, "session_create", target="a1")
    check(r["before"] is None and r["after"]["id"] == "a1" and
          r["after"]["tier"] == "off", "create record %r", r)
    check_eq(r.get("session"), "a1", "create record names its session")
    r = check_admin(d, "session_set_tier", target="a1")
    check_eq((r["before"]["tier"], r["after"]["tier"]), ("off", "registries"),
             "set-tier record")
    adds = admin_recs(d, "grant_add", outcome="ok", session="a1")
    check_eq(len(adds), 2, "grant_add records")
    r = check_admin(d, "grant_add", target="a1 up.test:%d" % echo.port)
    check_eq((r["grant"], r["grants"]),
             ({"host": "up.test", "port": echo.port}, 1),
             "grant_add: the change and the count")
    r = check_admin(d, "grant_remove", target="a1 up.test:443")
    check_eq((r["grant"], r["grants"]), ({"host": "up.test", "port": 443}, 1),
             "grant_remove: the change and the count")
    r = check_admin(d, "ceiling_set", target="global")
    check_eq((r["before"]["tier"], r["after"]["tier"]),
             ("public", "registries"), "global ceiling record")
    recs = admin_recs(d, "ceiling_set", outcome="ok", target="acme")
    check_eq([(r["before"]["tenants"].get("acme"),
               r["after"]["tenants"].get("acme")) for r in recs],
             [(None, "off"), ("off", None)], "tenant ceiling records")
    check_admin(d, "session_delete", target="a1")

    # a refused change is recorded as such, and changes nothing
    check_eq(call(d, "DELETE", "/v1/sessions/a1").status, 404, "delete again")
    recs = admin_recs(d, "session_delete", target="a1")
    check(recs[-1].get("outcome") != "ok" or len(recs) == 1,
          "a 404 delete was recorded as ok: %r", recs)
    d.stop()
    r = verify_log(d)

    # and verify notices when one of those records goes missing
    with open(d.log_path, "rb") as f:
        lines = f.read().split(b"\n")
    idx = next(i for i, ln in enumerate(lines)
               if b'"action":"session_set_tier"' in ln)
    cut = env.path("cut.jsonl")
    with open(cut, "wb") as f:
        f.write(b"\n".join(lines[:idx] + lines[idx + 1:]))
    r = expect_exit(ctl("log", "verify", "--file", cut), EX_REFUSED,
                    "verify with an admin record removed")
    check(str(idx + 1) in r.out + r.err, "verify does not name line %d: %r",
          idx + 1, r.out + r.err)


# ---------------------------------------------------------------------------
# 6. sluicectl end to end

@S.case
def sluicectl_end_to_end(env):
    d, _, echo = setup(env, sessions=[
        {"id": "cfg1", "tenant": "acme", "user": "carol", "tier": "public",
         "source": env.src(6)}])
    s = ["--socket", d.ctl]

    h = json.loads(expect_exit(ctl(*s, "--json", "health"), EX_OK,
                               "health").out)
    check_eq((h["status"], h["sessions"]), ("ok", 1), "health")
    check(h["listeners"] >= 1, "health listeners %r", h)

    r = expect_exit(ctl(*s, "--json", "session", "create", "web", "--tenant",
                        "acme", "--user", "bob", "--tier", "registries"),
                    EX_OK, "create")
    web = json.loads(r.out)
    check_eq((web["id"], web["user"], web["tier"], web["transport"]),
             ("web", "bob", "registries", "unix"), "created")
    check(stat.S_ISSOCK(os.stat(web["socket"]).st_mode), "socket made")
    r = expect_exit(ctl(*s, "--json", "session", "create", "tsrc", "--tenant",
                        "beta", "--user", "bob", "--tier", "public",
                        "--source", env.src(7)), EX_OK, "create --source")
    check_eq(json.loads(r.out)["source"], env.src(7), "source")
    r = expect_exit(ctl(*s, "session", "create", "web", "--tenant", "acme",
                        "--user", "bob", "--tier", "off"), EX_REFUSED,
                    "duplicate create")
    check("409" in r.err, "409 in %r", r.err)

    lst = json.loads(expect_exit(ctl(*s, "--json", "session", "list"), EX_OK,
                                 "list").out)
    check_eq(sorted(x["id"] for x in lst["sessions"]),
             ["cfg1", "tsrc", "web"], "list")
    txt = expect_exit(ctl(*s, "session", "list"), EX_OK, "list text").out
    check(all(x in txt for x in ("cfg1", "tsrc", "web")), "table %r", txt)

    expect_exit(ctl(*s, "session", "set-tier", "web", "public"), EX_OK,
                "set-tier")
    sh = json.loads(expect_exit(ctl(*s, "--json", "session", "show", "web"),
                                EX_OK, "show").out)
    check_eq(sh["tier"], "public", "tier after set-tier")
    check_eq(ok(call(d, "GET", "/v1/sessions/web"), 200, "GET")["tier"],
             "public", "tier as the API sees it")
    c = tunnel(unix_connector(web["socket"]), "up.test", echo.port)
    echo_ok(c, "web after set-tier")
    c.close()
    expect_exit(ctl(*s, "session", "set-tier", "cfg1", "off"), EX_REFUSED,
                "set-tier of a config session (409)")
    expect_exit(ctl(*s, "session", "set-tier", "nope", "off"), EX_REFUSED,
                "set-tier of an unknown session (404)")
    expect_exit(ctl(*s, "session", "set-tier", "web", "loud"), EX_USAGE,
                "set-tier to no tier")

    expect_exit(ctl(*s, "grant", "add", "web", "up.test:%d" % echo.port),
                EX_OK, "grant add")
    expect_exit(ctl(*s, "grant", "add", "tsrc", "[::1]:443"), EX_OK,
                "grant add IPv6")
    g = json.loads(expect_exit(ctl(*s, "--json", "grant", "list", "web"),
                               EX_OK, "grant list").out)
    check_eq(g["grants"], [{"host": "up.test", "port": echo.port}], "grants")
    g = json.loads(expect_exit(ctl(*s, "--json", "grant", "list", "tsrc"),
                               EX_OK, "grant list tsrc").out)
    check_eq(len(g["grants"]), 1, "IPv6 grant listed %r" % g)
    expect_exit(ctl(*s, "grant", "remove", "web", "up.test:%d" % echo.port),
                EX_OK, "grant remove")
    r = expect_exit(ctl(*s, "grant", "remove", "web",
                        "up.test:%d" % echo.port), EX_REFUSED,
                    "grant remove again (404)")
    check("404" in r.err, "404 in %r", r.err)
    expect_exit(ctl(*s, "grant", "list", "nope"), EX_REFUSED,
                "grant list of an unknown session")
    check_eq(ok(call(d, "GET", "/v1/sessions/web"), 200, "GET")["grants"], [],
             "no grants left")

    r = expect_exit(ctl(*s, "--json", "ceiling", "set", "registries",
                        "--tenant", "beta"), EX_OK, "ceiling set tenant")
    check_eq(json.loads(r.out)["tenants"].get("beta"), "registries",
             "ceiling set answer")
    cg = json.loads(expect_exit(ctl(*s, "--json", "ceiling", "get"), EX_OK,
                                "ceiling get").out)
    check_eq((cg["tier"], cg["tenants"]), ("public", {"beta": "registries"}),
             "ceiling get")
    refused(tcp_connector(d, env.src(7)), "up.test", echo.port,
            {"above_ceiling"}, "tsrc above the ceiling sluicectl set")
    expect_exit(ctl(*s, "ceiling", "set", "everything"), EX_USAGE,
                "ceiling set to no tier")

    r = expect_exit(ctl(*s, "session", "delete", "cfg1"), EX_REFUSED,
                    "delete a config session")
    check("409" in r.err, "409 in %r", r.err)
    expect_exit(ctl(*s, "session", "delete", "web"), EX_OK, "delete")
    check(not os.path.exists(web["socket"]), "socket removed")
    r = expect_exit(ctl(*s, "session", "show", "web"), EX_REFUSED,
                    "show deleted")
    check("404" in r.err, "404 in %r", r.err)
    expect_exit(ctl(*s, "session", "delete", "web"), EX_REFUSED,
                "delete twice")

    for action in ("session_create", "session_set_tier", "grant_add",
                   "grant_remove", "ceiling_set", "session_delete"):
        check_admin(d, action)

    # no daemon behind the socket path: 3, for every API command
    missing = env.path("nowhere", "control.sock")
    for args in (["health"], ["session", "list"], ["ceiling", "get"],
                 ["grant", "list", "web"],
                 ["session", "create", "x", "--tenant", "a", "--user", "u",
                  "--tier", "off"]):
        r = expect_exit(ctl("--socket", missing, *args), EX_UNREACHABLE,
                        "%s with no socket" % " ".join(args))
        check(r.err.strip(), "%s: no message on stderr", " ".join(args))
    d.stop()
    expect_exit(ctl(*s, "health"), EX_UNREACHABLE, "health after sluiced exit")
    verify_log(d)


if __name__ == "__main__":
    S.main()
