#!/usr/bin/env python3
"""The control API: every endpoint as root, every role over the Unix socket
(uids and gids), a caller in no role, TLS with bearer tokens and client
certificates, malformed input of every kind, and a session created through
the API serving traffic through its socket."""

import json
import os
import select
import socket
import ssl
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, Skip, check, check_eq, api_unix,  # noqa: E402
                     api_request, do_connect, read_response, read_log,
                     wait_record, wait_until, require_tool, free_port)

S = Suite("t_api", time_limit=300)

APP_UID, AUDITOR_UID, NOBODY_UID, GID_APP_UID, ADMIN_UID = (
    61001, 61002, 61003, 61004, 61005)
APP_GID = 61100


def setup(env, control=None, sessions=None, **over):
    up = env.http_upstream()
    cfg = env.config(sessions=sessions if sessions is not None else [],
                     ports=env.ports(up.port),
                     dns={"hosts": {"up.test": ["127.0.0.1"]}},
                     state_file=env.path("state.json"), **over)
    if control is not None:
        cfg["control"] = control
    d = env.sluiced(cfg)
    d.ctl = os.path.join(cfg["runtime_dir"], "control.sock")
    if control and control.get("socket"):
        d.ctl = control["socket"]
    return d, up


def call(d, method, path, body=None, **kw):
    return api_unix(d.ctl, method, path, body, **kw)


def expect(r, status, code=None, what=""):
    check(r.status == status, "%s: status %d, want %d (body %r)", what,
          r.status, status, r.body[:300])
    ct = (r.header("Content-Type") or "")
    if code is not None:
        check(ct.startswith("application/json"), "%s: error Content-Type %r",
              what, ct)
        check(isinstance(r.json, dict) and set(r.json) == {"error"} and
              r.json["error"].get("code") == code and
              isinstance(r.json["error"].get("message"), str),
              "%s: error body %r, want code %s", what, r.json, code)
    return r.json


def new_session(sid, tier="public", **extra):
    doc = {"id": sid, "tenant": "acme", "user": "alice", "tier": tier}
    doc.update(extra)
    return doc


def admin_records(d, **match):
    return [r for r in read_log(d.log_path) if r.get("event") == "admin" and
            all(r.get(k) == v for k, v in match.items())]


# ---------------------------------------------------------------------------

@S.case
def every_endpoint_as_root(env):
    d, _ = setup(env, sessions=[{"id": "cfg1", "tenant": "acme",
                                 "user": "carol", "tier": "registries",
                                 "source": env.src(1)}])
    st = os.stat(d.ctl)
    check(stat.S_ISSOCK(st.st_mode), "control socket is not a socket")
    check_eq(stat.S_IMODE(st.st_mode), 0o660, "control socket mode")

    h = expect(call(d, "GET", "/v1/health"), 200, what="health")
    for k in ("status", "version", "uptime_s", "sessions", "connections",
              "log"):
        check(k in h, "health lacks %r: %r", k, h)
    check_eq(h["sessions"], 1, "health.sessions")
    if os.geteuid() == 0:
        check_eq(h.get("caller"), {"role": "admin", "who": "root"},
                 "health.caller of root")

    c = expect(call(d, "GET", "/v1/ceiling"), 200, what="ceiling")
    check_eq(c["tier"], "public", "ceiling.tier")
    check_eq(c["tenants"], {}, "ceiling.tenants")
    c = expect(call(d, "PUT", "/v1/ceiling",
                    {"tier": "registries", "tenants": {"acme": "off"}}),
               200, what="PUT ceiling")
    check_eq((c["tier"], c["tenants"], c["closed"]),
             ("registries", {"acme": "off"}, 0), "PUT ceiling answer")
    c = expect(call(d, "PUT", "/v1/ceiling", {"tenants": {"acme": None},
                                              "close_exceeding": True}),
               200, what="clear tenant")
    check_eq(c["tenants"], {}, "tenant ceiling cleared")
    c = expect(call(d, "PUT", "/v1/ceiling", {"tier": "public"}), 200)
    check_eq(c["tier"], "public", "ceiling back to public")

    ss = expect(call(d, "GET", "/v1/sessions"), 200, what="sessions")
    check_eq([s["id"] for s in ss["sessions"]], ["cfg1"], "session list")

    r = call(d, "POST", "/v1/sessions", new_session("chat-1"))
    s = expect(r, 201, what="create")
    check_eq((s["id"], s["tenant"], s["user"], s["tier"]),
             ("chat-1", "acme", "alice", "public"), "created session")
    check_eq(r.header("Location"), "/v1/sessions/chat-1", "Location")
    check(s["socket"] and stat.S_ISSOCK(os.stat(s["socket"]).st_mode),
          "session socket %r missing", s["socket"])
    expect(call(d, "POST", "/v1/sessions", new_session("chat-1")), 409,
           "conflict", "duplicate session")

    s = expect(call(d, "GET", "/v1/sessions/chat-1"), 200, what="get")
    check_eq(s["id"], "chat-1", "GET session id")
    expect(call(d, "GET", "/v1/sessions/nope"), 404, "not_found", "unknown")
    s = expect(call(d, "PATCH", "/v1/sessions/chat-1", {"tier": "off"}), 200,
               what="PATCH")
    check_eq(s["tier"], "off", "tier after PATCH")

    g = expect(call(d, "POST", "/v1/sessions/chat-1/grants",
                    {"host": "Up.Test.", "port": 8443}), 201, what="grant")
    check_eq(g, {"session": "chat-1", "host": "up.test", "port": 8443},
             "grant answer")
    expect(call(d, "POST", "/v1/sessions/chat-1/grants",
                {"host": "up.test", "port": 8443}), 200, what="grant again")
    s = expect(call(d, "GET", "/v1/sessions/chat-1"), 200)
    check_eq(s["grants"], [{"host": "up.test", "port": 8443}], "grants")
    g = expect(call(d, "DELETE", "/v1/sessions/chat-1/grants/UP.test:8443"),
               200, what="grant remove")
    check_eq(g, {"session": "chat-1", "host": "up.test", "port": 8443,
                 "removed": True}, "grant remove answer")
    expect(call(d, "DELETE", "/v1/sessions/chat-1/grants/up.test:8443"), 404,
           "not_found", "grant remove again")
    expect(call(d, "POST", "/v1/sessions/nope/grants",
                {"host": "up.test", "port": 1}), 404, "not_found",
           "grant on unknown session")

    r = call(d, "GET", "/v1/metrics")
    check_eq(r.status, 200, "metrics status")
    check_eq(r.header("Content-Type"), "text/plain; version=0.0.4",
             "metrics Content-Type")
    check(b"# TYPE sluice_decisions_total counter" in r.body and
          b'session="chat-1"' in r.body, "metrics body %r", r.body[:300])

    for p in ("/v1/nothing", "/v2/health", "/v1/health/", "/",
              "/v1/prompts/p-1/x", "/v1/events/1"):
        expect(call(d, "GET", p), 404, "not_found", p)

    sock = s["socket"]
    expect(call(d, "DELETE", "/v1/sessions/chat-1"), 200, what="delete")
    check(not os.path.exists(sock), "session socket left after DELETE")
    expect(call(d, "GET", "/v1/sessions/chat-1"), 404, "not_found",
           "after DELETE")
    expect(call(d, "DELETE", "/v1/sessions/cfg1"), 409, "conflict",
           "deleting a configured session")

    for action in ("ceiling_set", "session_create", "session_set_tier",
                   "grant_add", "grant_remove", "session_delete"):
        recs = admin_records(d, action=action, who="root", outcome="ok")
        check(recs, "no admin record for %s", action)
    d.stop()
    check(not os.path.exists(d.ctl), "control socket left after exit")


@S.case
def created_session_serves_traffic(env):
    d, up = setup(env)
    s = expect(call(d, "POST", "/v1/sessions", new_session("web")), 201)
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.settimeout(10)
    c.connect(s["socket"])
    resp, rest = do_connect(c, "up.test", up.port)
    check_eq(resp.status, 200, "CONNECT through the API-made session")
    c.sendall(b"GET /via-api HTTP/1.1\r\nHost: up.test\r\n\r\n")
    r = read_response(c)
    check_eq(json.loads(r.body)["path"], "/via-api", "path upstream")
    wait_record(d.log_path, event="decision", session="web",
                decision="allow")
    # the ceiling lowered with close_exceeding closes the open tunnel
    cl = expect(call(d, "PUT", "/v1/ceiling", {"tier": "off",
                                               "close_exceeding": True}), 200)
    check_eq(cl["closed"], 1, "tunnels closed by close_exceeding")
    c.settimeout(5)
    try:
        data = c.recv(100)
    except (ConnectionResetError, socket.timeout):
        data = None
    check(data == b"", "tunnel still open after close_exceeding: %r", data)
    c.close()
    expect(call(d, "DELETE", "/v1/sessions/web"), 200)


def run_as(uid, gid, sock_path, method, path, body=None):
    """The request from a forked child with another uid and gid (the
    child only touches sockets and a pipe, then _exits)."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(rfd)
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(10)
            s.connect(sock_path)
            r = api_request(s, method, path, body)
            os.write(wfd, b"%d\n" % r.status + r.body)
            code = 0
        except BaseException as e:
            try:
                os.write(wfd, b"ERR %r" % e)
            except OSError:
                pass
        finally:
            os._exit(code)
    os.close(wfd)
    out = b""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        ready, _, _ = select.select([rfd], [], [], 1.0)
        if ready:
            chunk = os.read(rfd, 65536)
            if not chunk:
                break
            out += chunk
    os.close(rfd)
    _, st = os.waitpid(pid, 0)
    check(st == 0 and not out.startswith(b"ERR"), "client as uid %d: %r",
          uid, out[:300])
    line, _, rest = out.partition(b"\n")
    try:
        doc = json.loads(rest) if rest else None
    except ValueError:
        doc = None
    return int(line), doc, rest


def open_up(path):
    """Let other uids reach a socket under path (test dirs are 0700)."""
    p = os.path.dirname(path)
    for _ in range(20):
        if p in ("/", "/tmp", ""):
            break
        os.chmod(p, os.stat(p).st_mode | 0o011)
        p = os.path.dirname(p)


@S.case
def roles_on_the_unix_socket(env):
    if os.geteuid() != 0:
        raise Skip("needs root to switch uids")
    control = {"socket_mode": "0666",
               "admin_uids": [ADMIN_UID], "app_uids": [APP_UID],
               "auditor_uids": [AUDITOR_UID], "app_gids": [APP_GID]}
    d, _ = setup(env, control=control)
    open_up(d.ctl)
    check_eq(stat.S_IMODE(os.stat(d.ctl).st_mode), 0o666, "socket_mode")
    expect(call(d, "POST", "/v1/sessions", new_session("r1")), 201)

    def asuid(uid, method, path, body=None, gid=65534):
        return run_as(uid, gid, d.ctl, method, path, body)

    # app: sessions, grants; no ceiling, no metrics
    matrix = [
        (APP_UID, "GET", "/v1/health", None, 200),
        (APP_UID, "GET", "/v1/sessions", None, 200),
        (APP_UID, "GET", "/v1/sessions/r1", None, 200),
        (APP_UID, "POST", "/v1/sessions", new_session("app-made"), 201),
        (APP_UID, "PATCH", "/v1/sessions/app-made", {"tier": "off"}, 200),
        (APP_UID, "POST", "/v1/sessions/app-made/grants",
         {"host": "pypi.org", "port": 443}, 201),
        (APP_UID, "DELETE", "/v1/sessions/app-made/grants/pypi.org:443",
         None, 200),
        (APP_UID, "GET", "/v1/ceiling", None, 403),
        (APP_UID, "PUT", "/v1/ceiling", {"tier": "public"}, 403),
        (APP_UID, "GET", "/v1/metrics", None, 403),
        (APP_UID, "DELETE", "/v1/sessions/app-made", None, 200),
        # auditor: read-only
        (AUDITOR_UID, "GET", "/v1/health", None, 200),
        (AUDITOR_UID, "GET", "/v1/sessions", None, 200),
        (AUDITOR_UID, "GET", "/v1/sessions/r1", None, 200),
        (AUDITOR_UID, "GET", "/v1/ceiling", None, 200),
        (AUDITOR_UID, "GET", "/v1/metrics", None, 200),
        (AUDITOR_UID, "POST", "/v1/sessions", new_session("aud"), 403),
        (AUDITOR_UID, "PATCH", "/v1/sessions/r1", {"tier": "off"}, 403),
        (AUDITOR_UID, "DELETE", "/v1/sessions/r1", None, 403),
        (AUDITOR_UID, "POST", "/v1/sessions/r1/grants",
         {"host": "pypi.org", "port": 443}, 403),
        (AUDITOR_UID, "DELETE", "/v1/sessions/r1/grants/pypi.org:443", None,
         403),
        (AUDITOR_UID, "PUT", "/v1/ceiling", {"tier": "off"}, 403),
        # admin by uid list
        (ADMIN_UID, "PUT", "/v1/ceiling", {"tier": "registries"}, 200),
        (ADMIN_UID, "GET", "/v1/metrics", None, 200),
        # in no list: refused everywhere, even unknown paths
        (NOBODY_UID, "GET", "/v1/health", None, 403),
        (NOBODY_UID, "GET", "/v1/sessions", None, 403),
        (NOBODY_UID, "GET", "/v1/nothing", None, 403),
    ]
    for uid, method, path, body, want in matrix:
        status, doc, raw = asuid(uid, method, path, body)
        check(status == want, "uid %d %s %s: %d, want %d (%r)", uid, method,
              path, status, want, raw[:200])
        if path == "/v1/health" and want == 200:
            # health names the caller's role (sluicectl console uses it)
            check_eq(doc.get("caller"), {"role": "app" if uid == APP_UID
                                         else "auditor",
                                         "who": "uid:%d" % uid},
                     "health.caller of uid %d" % uid)
        if want == 403:
            check(doc and doc["error"]["code"] == "forbidden",
                  "403 body %r", raw[:200])
    # a gid in app_gids gives app, whatever the uid
    status, _, raw = asuid(GID_APP_UID, "POST", "/v1/sessions",
                           new_session("by-gid"), gid=APP_GID)
    check_eq(status, 201, "create by a member of app_gids (%r)" % raw[:200])
    status, _, _ = asuid(GID_APP_UID, "PUT", "/v1/ceiling", {"tier": "off"},
                         gid=APP_GID)
    check_eq(status, 403, "app by gid may not set the ceiling")
    status, _, _ = asuid(GID_APP_UID, "GET", "/v1/health")
    check_eq(status, 403, "the same uid without the gid")

    # who did what, and the refusals, are in the log
    rec = admin_records(d, action="session_create", target="app-made")
    check(rec and rec[0]["who"] == "uid:%d" % APP_UID and
          rec[0]["role"] == "app", "create record %r", rec)
    rec = admin_records(d, action="session_create", target="by-gid")
    check(rec and rec[0]["who"] == "uid:%d" % GID_APP_UID, "gid record %r",
          rec)
    refused = admin_records(d, who="uid:%d" % NOBODY_UID, outcome="forbidden")
    check_eq(len(refused), 3, "audit records of the caller in no role")
    check(any(r.get("action") == "health" for r in refused) and
          any(r.get("action") == "api_call" for r in refused),
          "refusal actions %r", [r.get("action") for r in refused])
    rec = admin_records(d, who="uid:%d" % AUDITOR_UID, outcome="forbidden",
                        action="ceiling_set")
    check_eq(len(rec), 1, "auditor's refused ceiling_set record")
    check_eq(rec[0].get("role"), "auditor", "refusal record role")

    # reload moves the app uid to the auditor list
    d.config["control"]["app_uids"] = []
    d.config["control"]["auditor_uids"] = [AUDITOR_UID, APP_UID]
    d.write_config()
    d.signal(__import__("signal").SIGHUP)
    wait_until(lambda: asuid(APP_UID, "GET", "/v1/metrics")[0] == 200, 5,
               what="the reload to make uid %d an auditor" % APP_UID)
    status, _, _ = asuid(APP_UID, "POST", "/v1/sessions", new_session("x"))
    check_eq(status, 403, "app turned auditor may not create")


# ---------------------------------------------------------------------------
# TLS

def openssl(*args):
    r = subprocess.run(["openssl"] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    check(r.returncode == 0, "openssl %s: %s", args[0],
          r.stderr.decode(errors="replace")[-400:])


def make_ca(env, name):
    key, crt = env.path(name + "-ca.key"), env.path(name + "-ca.pem")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
            "-out", crt, "-days", "2", "-subj", "/CN=%s test CA" % name,
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    return crt, key


def make_leaf(env, ca, name, server):
    key, csr, crt = (env.path(name + ".key"), env.path(name + ".csr"),
                     env.path(name + ".pem"))
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out",
            csr, "-subj", "/CN=%s" % name)
    ext = env.path(name + ".ext")
    with open(ext, "w") as f:
        if server:
            f.write("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
        else:
            f.write("extendedKeyUsage=clientAuth\n")
    openssl("x509", "-req", "-in", csr, "-CA", ca[0], "-CAkey", ca[1],
            "-CAcreateserial", "-out", crt, "-days", "2", "-extfile", ext)
    return crt, env.give(key)


def write_token(env, name, value):
    p = env.path(name + ".token")
    with open(p, "w") as f:
        f.write(value + "\n")
    os.chmod(p, 0o600)
    return env.give(p)


TOKENS = {"ops": ("admin", "ops-token-0123456789abcdef"),
          "chat": ("app", "chat-token-0123456789abcdef"),
          "audit": ("auditor", "audit-token-0123456789abcdef")}


def tls_setup(env, client_ca=None):
    require_tool("openssl")
    ca = make_ca(env, "srv")
    crt, key = make_leaf(env, ca, "server", True)
    port = free_port()
    control = {"tcp": "127.0.0.1:%d" % port, "tls_cert": crt, "tls_key": key,
               "client_ca": client_ca,
               "tokens": [{"name": n, "role": r,
                           "token_file": write_token(env, n, t)}
                          for n, (r, t) in TOKENS.items()]}
    d, _ = setup(env, control=control)
    d.tls_port = port
    d.server_ca = ca[0]
    return d


def tls_call(d, method, path, body=None, token=None, cert=None, **kw):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(d.server_ca)
    if cert:
        ctx.load_cert_chain(*cert)
    raw = socket.create_connection(("127.0.0.1", d.tls_port), timeout=10)
    s = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
    try:
        hdrs = list(kw.pop("headers", ()))
        if token:
            hdrs.append(("Authorization", "Bearer " + token))
        return api_request(s, method, path, body, headers=hdrs, **kw)
    finally:
        s.close()


def tls_refused(d, **kw):
    """True when the TLS connection fails before an HTTP answer."""
    try:
        r = tls_call(d, "GET", "/v1/health", **kw)
    except (ssl.SSLError, ConnectionError, OSError, AssertionError):
        return True
    raise AssertionError("TLS call answered %d without a client "
                         "certificate" % r.status)


@S.case
def tls_with_tokens(env):
    d = tls_setup(env)
    r = tls_call(d, "GET", "/v1/health")
    expect(r, 401, "unauthorized", "no token")
    check((r.header("WWW-Authenticate") or "").startswith("Bearer"),
          "WWW-Authenticate %r", r.header("WWW-Authenticate"))
    expect(tls_call(d, "GET", "/v1/health", token="wrong-token-0123456789"),
           401, "unauthorized", "wrong token")
    expect(tls_call(d, "GET", "/v1/health",
                    token=TOKENS["ops"][1] + "x"), 401, "unauthorized",
           "token with a suffix")
    r = tls_call(d, "GET", "/v1/health",
                 headers=[("Authorization", "Basic b3BzOm9wcw==")])
    expect(r, 401, "unauthorized", "basic auth")
    rec = admin_records(d, outcome="unauthorized")
    check(len(rec) >= 4 and rec[0]["who"].startswith("tcp:127.0.0.1:"),
          "401 audit records %r", rec[:1])
    expect(tls_call(d, "GET", "/v1/health", token=TOKENS["ops"][1]), 200,
           what="admin token")
    expect(tls_call(d, "PUT", "/v1/ceiling", {"tier": "registries"},
                    token=TOKENS["ops"][1]), 200, what="admin sets ceiling")
    check(admin_records(d, action="ceiling_set", who="token:ops",
                        outcome="ok"), "ceiling_set by token:ops not logged")
    expect(tls_call(d, "PUT", "/v1/ceiling", {"tier": "off"},
                    token=TOKENS["chat"][1]), 403, "forbidden", "app ceiling")
    expect(tls_call(d, "POST", "/v1/sessions", new_session("t1"),
                    token=TOKENS["chat"][1]), 201, what="app creates")
    expect(tls_call(d, "GET", "/v1/metrics", token=TOKENS["audit"][1]), 200,
           what="auditor metrics")
    expect(tls_call(d, "DELETE", "/v1/sessions/t1",
                    token=TOKENS["audit"][1]), 403, "forbidden",
           "auditor delete")
    check(admin_records(d, who="token:audit", role="auditor",
                        outcome="forbidden"), "auditor refusal not logged")
    # tokens never reach the log
    with open(d.log_path, "rb") as f:
        text = f.read()
    for _, t in TOKENS.values():
        check(t.encode() not in text, "a token is in the log")
    check(all(t not in d.stderr() for _, t in TOKENS.values()),
          "a token is in the diagnostics")
    # plain HTTP on the TLS port gets no HTTP answer
    p = socket.create_connection(("127.0.0.1", d.tls_port), timeout=5)
    p.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
    try:
        got = p.recv(100)
    except (ConnectionError, socket.timeout):
        got = b""
    p.close()
    check(not got.startswith(b"HTTP/"), "plain HTTP answered: %r", got)
    # a rotated token file takes effect on reload
    write_token(env, "chat", "chat-token-rotated-9876543210")
    d.signal(__import__("signal").SIGHUP)
    wait_until(lambda: tls_call(d, "GET", "/v1/health",
                                token="chat-token-rotated-9876543210"
                                ).status == 200, 5, what="rotated token")
    expect(tls_call(d, "GET", "/v1/health", token=TOKENS["chat"][1]), 401,
           "unauthorized", "old token after rotation")


@S.case
def tls_with_client_certificates(env):
    require_tool("openssl")
    client_ca = make_ca(env, "cli")
    d = tls_setup(env, client_ca=client_ca[0])
    good = make_leaf(env, client_ca, "client", False)
    other_ca = make_ca(env, "other")
    bad = make_leaf(env, other_ca, "stranger", False)
    check(tls_refused(d, token=TOKENS["ops"][1]),
          "no client certificate accepted")
    check(tls_refused(d, token=TOKENS["ops"][1], cert=bad),
          "a certificate from another CA accepted")
    expect(tls_call(d, "GET", "/v1/health", token=TOKENS["ops"][1],
                    cert=good), 200, what="certificate and token")
    expect(tls_call(d, "GET", "/v1/health", cert=good), 401, "unauthorized",
           "certificate without a token")


# ---------------------------------------------------------------------------

@S.case
def malformed_input(env):
    d, _ = setup(env, control={"max_body": 2048})
    expect(call(d, "POST", "/v1/sessions", new_session("m1")), 201)

    def bad(method, path, want_status, want_code, msg=None, **kw):
        r = call(d, method, path, kw.pop("body", None), **kw)
        expect(r, want_status, want_code, "%s %s" % (method, path))
        if msg is not None:
            check(msg in r.json["error"]["message"], "%s %s: message %r "
                  "lacks %r", method, path, r.json["error"]["message"], msg)
        return r

    cases = [
        # bad JSON, wrong shapes
        ("POST", "/v1/sessions", 400, "bad_request", "invalid JSON",
         {"raw": b'{"id": "x",'}),
        ("POST", "/v1/sessions", 400, "bad_request", "invalid JSON",
         {"raw": b'{"id": "a", "id": "b"}'}),
        ("POST", "/v1/sessions", 400, "bad_request", "invalid JSON",
         {"raw": b'{"id": "\xff\xfe"}'}),
        ("POST", "/v1/sessions", 400, "bad_request", "expected a JSON object",
         {"raw": b'["id"]'}),
        # exactly one object, no key twice, nothing after it, no NUL:
        # a proxy in front must not read another call than sluiced
        ("POST", "/v1/sessions", 400, "bad_request", "end of file expected",
         {"raw": json.dumps(new_session("m3")).encode() + b' {"id": "m4"}'}),
        ("POST", "/v1/sessions", 400, "bad_request", "NUL byte",
         {"raw": json.dumps(new_session("m3")).encode() + b"\0garbage"}),
        ("POST", "/v1/sessions", 400, "bad_request", "invalid JSON",
         {"raw": b'{"id": "m3", "tenant": "acme", "user": "a\\u0000b", '
                 b'"tier": "off"}'}),
        ("PUT", "/v1/ceiling", 400, "bad_request", "duplicate object key",
         {"raw": b'{"tenants": {"acme": "off", "acme": "public"}}'}),
        ("POST", "/v1/prompts/p-1", 400, "bad_request", "duplicate object key",
         {"raw": b'{"decision": "deny", "decision": "allow_chat"}'}),
        ("POST", "/v1/sessions", 400, "bad_request", "expected a JSON object",
         {"raw": b''}),
        ("POST", "/v1/sessions", 415, "unsupported_media_type", None,
         {"raw": b'{}', "content_type": "text/plain"}),
        ("POST", "/v1/sessions", 415, "unsupported_media_type", None,
         {"raw": b'{}', "content_type": None}),
        # wrong types, unknown and missing fields, with the JSON path
        ("POST", "/v1/sessions", 400, "bad_request", "tier: expected a string",
         {"body": new_session("m2", tier=5)}),
        ("POST", "/v1/sessions", 400, "bad_request", "tier: expected a string",
         {"body": new_session("m2", tier=None)}),
        ("POST", "/v1/sessions", 400, "bad_request",
         "vsock_cid: expected an integer",
         {"body": new_session("m2", vsock_cid="7")}),
        ("POST", "/v1/sessions", 400, "bad_request", "colour: unknown field",
         {"body": new_session("m2", colour="blue")}),
        ("POST", "/v1/sessions", 400, "bad_request", "user: required",
         {"body": {"id": "m2", "tenant": "acme", "tier": "off"}}),
        ("POST", "/v1/sessions", 400, "bad_request", "unknown tier",
         {"body": new_session("m2", tier="everything")}),
        ("POST", "/v1/sessions", 400, "bad_request", "id: bad session id",
         {"body": new_session("bad id")}),
        ("POST", "/v1/sessions", 400, "bad_request", "id: bad session id",
         {"body": new_session("x" * 65)}),
        ("POST", "/v1/sessions", 400, "bad_request", "tenant:",
         {"body": new_session("m2", tenant="a/b")}),
        ("POST", "/v1/sessions", 400, "bad_request", "user:",
         {"body": new_session("m2", user="a\nb")}),
        ("POST", "/v1/sessions", 400, "bad_request", None,
         {"body": new_session("m2", socket="relative.sock")}),
        ("POST", "/v1/sessions", 409, "conflict", None,
         {"body": new_session("m1")}),
        # bad ids in paths
        ("GET", "/v1/sessions/bad%20id", 400, "bad_request", "id:", {}),
        ("GET", "/v1/sessions/" + "y" * 65, 400, "bad_request", "id:", {}),
        ("PATCH", "/v1/sessions/b@d", 400, "bad_request", "id:",
         {"body": {"tier": "off"}}),
        ("PATCH", "/v1/sessions/m1", 400, "bad_request",
         "tier: expected a string", {"body": {"tier": ["off"]}}),
        ("PATCH", "/v1/sessions/none", 404, "not_found", None,
         {"body": {"tier": "off"}}),
        # ceilings
        ("PUT", "/v1/ceiling", 400, "bad_request", "\"tier\" or \"tenants\"",
         {"body": {}}),
        ("PUT", "/v1/ceiling", 400, "bad_request",
         "close_exceeding: expected true or false",
         {"body": {"tier": "off", "close_exceeding": "yes"}}),
        ("PUT", "/v1/ceiling", 400, "bad_request", "tenants.a b:",
         {"body": {"tenants": {"a b": "off"}}}),
        ("PUT", "/v1/ceiling", 400, "bad_request", "tenants.acme:",
         {"body": {"tenants": {"acme": 1}}}),
        ("PUT", "/v1/ceiling", 400, "bad_request", "tenants: expected an object",
         {"body": {"tenants": ["acme"]}}),
        # grants
        ("POST", "/v1/sessions/m1/grants", 400, "bad_request", "pattern",
         {"body": {"host": "*.pypi.org", "port": 443}}),
        ("POST", "/v1/sessions/m1/grants", 400, "bad_request", "host:",
         {"body": {"host": "pypi.org:443", "port": 443}}),
        ("POST", "/v1/sessions/m1/grants", 400, "bad_request", "host:",
         {"body": {"host": "0x7f.0.0.1", "port": 443}}),
        ("POST", "/v1/sessions/m1/grants", 400, "bad_request", "port:",
         {"body": {"host": "pypi.org", "port": 0}}),
        ("POST", "/v1/sessions/m1/grants", 400, "bad_request",
         "port: expected an integer", {"body": {"host": "pypi.org",
                                                "port": "443"}}),
        ("DELETE", "/v1/sessions/m1/grants/pypi.org", 400, "bad_request",
         "grant:", {}),
        ("DELETE", "/v1/sessions/m1/grants/pypi.org%3A443%00", 400,
         "bad_request", "grant:", {}),
        ("DELETE", "/v1/sessions/m1/grants/*.pypi.org:443", 400,
         "bad_request", "grant:", {}),
        # methods, queries, bodies where none belong
        ("DELETE", "/v1/ceiling", 405, "method_not_allowed", None, {}),
        ("GET", "/v1/health?verbose=1", 400, "bad_request", "query", {}),
        ("GET", "/v1/health", 400, "bad_request", "no body",
         {"raw": b'{"x": 1}'}),
        ("PUT", "/v1/prompts", 405, "method_not_allowed", None, {}),
        ("POST", "/v1/prompts/p-1", 400, "bad_request", "decision",
         {"body": {"decision": "later"}}),
    ]
    for method, path, st, code, msg, kw in cases:
        bad(method, path, st, code, msg, **kw)

    r = call(d, "DELETE", "/v1/ceiling")
    check_eq(r.header("Allow"), "GET, PUT", "Allow header")
    r = call(d, "PUT", "/v1/sessions")
    check_eq(r.header("Allow"), "GET, POST", "Allow header of /v1/sessions")

    # a body over control.max_body
    r = call(d, "POST", "/v1/sessions", raw=b'{"id": "' + b"a" * 4000 + b'"}')
    check_eq(r.status, 413, "huge body status")
    # nothing above changed the sessions
    ss = expect(call(d, "GET", "/v1/sessions"), 200)
    check_eq([s["id"] for s in ss["sessions"]], ["m1"], "sessions after "
             "malformed calls")
    expect(call(d, "GET", "/v1/health"), 200, what="still serving")


@S.case
def control_socket_safety(env):
    # a stale socket from an earlier run is replaced; a file is not
    run = env.path("run")
    os.makedirs(run, exist_ok=True)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(os.path.join(run, "control.sock"))
    stale.close()
    d, _ = setup(env, control={"socket_mode": "0600"})
    check_eq(stat.S_IMODE(os.stat(d.ctl).st_mode), 0o600, "socket_mode 0600")
    expect(call(d, "GET", "/v1/health"), 200, what="over a stale socket")
    d.stop()
    plain = env.path("plain.sock")
    with open(plain, "w") as f:
        f.write("not a socket\n")
    cfg = dict(d.config)
    cfg["control"] = {"socket": plain}
    d2 = env.sluiced(cfg, name="second", start=False)
    try:
        d2.start(ready_timeout=5)
        ok = True
    except AssertionError:
        ok = False
    check(not ok, "sluiced started over a regular file at control.socket")
    with open(plain) as f:
        check_eq(f.read(), "not a socket\n", "the file is untouched")
    check("not a socket" in d2.stderr(), "no reason given: %s" % d2.stderr())


if __name__ == "__main__":
    S.main()
