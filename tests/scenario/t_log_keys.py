#!/usr/bin/env python3
"""The keys of every connection-log record, pinned in order.

The cases provoke every record type with the real sluiced and real
clients (decision, close, admin, prompt, prompt_answer; the decision of
a forwarded request and of a tunnel, allowed, denied and decided by a
prompt, the tunnel's own SNI refusal, transparent mode) and name every
record they take a "variant" (event type and what made it:
"decision.forward.allow", "admin.reload", ...).  The
ordered list of the record's top-level keys is compared with
tests/scenario/golden/log_keys.json (variant -> keys); values are not
pinned.  A variant is specific enough that its keys are fixed: every
record the case's match finds must have the same keys.  The last case
checks that the golden file names exactly the variants the cases make.

SLUICE_UPDATE_GOLDEN=1 (e.g. SLUICE_UPDATE_GOLDEN=1 make check
TESTS=tests/scenario/t_log_keys.py) writes the golden file in the source
tree from what the cases saw, only when every case ran and saw all of
its variants.

The transparent-mode records need a redirect (conntrack's original
destination): that case runs in a network namespace of its own
(unshare -n, as root, else unshare -rn), where an nft output rule
redirects the client's TCP 80 and 443 to the transparent listener;
nothing outside that namespace is touched.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, Skip, Fail, Env, check, check_eq,  # noqa: E402
                     do_connect, read_response, read_head, read_body,
                     get_request, api_unix, api_request, curl, curl_status,
                     client_hello, echo_handler, recorder_handler, is_closed,
                     insecure_ctx, require_tool, verify_chain, wait_until,
                     free_port, log, SRCDIR)

S = Suite("t_log_keys", time_limit=300)

GOLDEN = os.path.join(SRCDIR, "tests", "scenario", "golden", "log_keys.json")
UPDATE = os.environ.get("SLUICE_UPDATE_GOLDEN") == "1"

DECLARED = {}       # variant -> the case that makes it
SEEN = {}           # variant -> its keys, from the cases that ran


# ---------------------------------------------------------------------------
# Reading records with their keys in order

def parse_line(line):
    """(keys in order, dict of the top-level values) of one record; a
    duplicated key shows in the list twice."""
    pairs = json.loads(line, object_pairs_hook=list)
    return [k for k, _ in pairs], dict(pairs)


class Log:
    """Takes records of a log file by their values and files their keys
    under a variant name."""

    def __init__(self, path, got):
        self.path = path
        self.got = got

    def records(self):
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return []
        # only whole lines: a record may be being written
        return [parse_line(ln) for ln in data.split(b"\n")[:-1] if ln]

    def take(self, variant, timeout=10.0, **match):
        """Wait for records with the given values; all of them must have
        the same keys.  Returns the values of the first."""
        def find():
            hits = [(k, v) for k, v in self.records()
                    if all(v.get(f) == x for f, x in match.items())]
            return hits or None
        hits = wait_until(find, timeout, what="%s: a record %r" % (variant, match))
        kinds = sorted(set(tuple(k) for k, _ in hits))
        check(len(kinds) == 1, "%s: the records matching %r differ in their "
              "keys (make the variant more specific): %r", variant, match,
              kinds)
        check(variant not in self.got, "%s taken twice", variant)
        self.got[variant] = list(hits[0][0])
        return hits[0][1]


def load_golden():
    try:
        with open(GOLDEN) as f:
            g = json.load(f)
    except FileNotFoundError:
        raise Fail("%s missing: run with SLUICE_UPDATE_GOLDEN=1 to write it"
                   % GOLDEN)
    check(isinstance(g, dict) and all(isinstance(v, list) for v in g.values()),
          "%s: not an object of key lists", GOLDEN)
    return g


def describe(want, got):
    added = [k for k in got if k not in want]
    removed = [k for k in want if k not in got]
    parts = []
    if added:
        parts.append("added %s" % added)
    if removed:
        parts.append("removed %s" % removed)
    if not parts:
        parts.append("reordered")
    return "%s; golden %s, log %s" % (", ".join(parts), want, got)


def pinned(*variants):
    """A case making exactly these variants; fn(env, got) fills got."""
    def deco(fn):
        for v in variants:
            check(v not in DECLARED, "variant %s declared twice" % v)
            DECLARED[v] = fn.__name__

        def run(env):
            got = {}
            fn(env, got)
            extra = sorted(set(got) - set(variants))
            check(not extra, "undeclared variants taken: %s", extra)
            missing = sorted(set(variants) - set(got))
            check(not missing, "variants not seen: %s", missing)
            SEEN.update(got)
            if UPDATE:
                return
            golden = load_golden()
            bad = []
            for v in variants:
                if v not in golden:
                    bad.append("%s: not in the golden file" % v)
                elif golden[v] != got[v]:
                    bad.append("%s: %s" % (v, describe(golden[v], got[v])))
            check(not bad, "keys differ from %s (SLUICE_UPDATE_GOLDEN=1 "
                  "rewrites it):\n  %s", os.path.relpath(GOLDEN, SRCDIR),
                  "\n  ".join(bad))
        run.__name__ = fn.__name__
        return S.case(run)
    return deco


# ---------------------------------------------------------------------------
# Clients

def raw_request(d, src, data):
    s = d.connect(src)
    try:
        s.sendall(data)
        return read_response(s)
    finally:
        s.close()


def connect_refused(d, src, host, port):
    s = d.connect(src)
    try:
        resp, _ = do_connect(s, host, port)
    finally:
        s.close()
    check(resp.status >= 400, "CONNECT %s:%d answered %d", host, port,
          resp.status)
    return resp


def tunnel_hello(d, src, host, port, sni):
    """CONNECT, then a ClientHello naming sni (None: no SNI); sluiced
    must close the tunnel."""
    s = d.connect(src)
    try:
        resp, rest = do_connect(s, host, port)
        check_eq(resp.status, 200, "CONNECT %s:%d" % (host, port))
        s.sendall(client_hello(sni))
        check(is_closed(s, 5.0), "tunnel open after a ClientHello for %r", sni)
    finally:
        s.close()


class Approver:
    """GET /v1/events held open on the control socket: its presence makes
    sluiced ask instead of refusing.  The stream is drained and ignored."""

    def __init__(self, ctl):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(10)
        self.sock.connect(ctl)
        self.sock.sendall(b"GET /v1/events HTTP/1.1\r\nHost: x\r\n"
                          b"Accept: text/event-stream\r\n\r\n")
        head, _ = read_head(self.sock)
        check_eq(head.status, 200, "event stream")
        self.stop = False
        self.t = threading.Thread(target=self._drain, daemon=True)
        self.t.start()

    def _drain(self):
        self.sock.settimeout(0.5)
        for _ in range(100000):
            if self.stop:
                return
            try:
                if not self.sock.recv(65536):
                    return
            except socket.timeout:
                continue
            except OSError:
                return

    def close(self):
        self.stop = True
        self.t.join(2)
        self.sock.close()


class Held(threading.Thread):
    """One request through a session socket on its own thread (it waits
    for a prompt's answer)."""

    def __init__(self, d, sid, data):
        super().__init__(daemon=True)
        self.resp = None
        self.err = None
        self.data = data
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(30)
        self.sock.connect(d.session_socket(sid))
        self.start()

    def run(self):
        try:
            self.sock.sendall(self.data)
            r, rest = read_head(self.sock, timeout=30)
            if r.status != 200 or not self.data.startswith(b"CONNECT"):
                r.body, rest = read_body(self.sock, r, rest, 30)
            self.resp = r
        except Exception as e:          # reported by finish()
            self.err = e

    def finish(self, status, close=True):
        self.join(30)
        check(not self.is_alive(), "a held client still waits")
        check(self.err is None, "held client: %r", self.err)
        check_eq(self.resp.status, status, "held client status")
        if close:
            self.sock.close()


def pending_prompt(d, host):
    def find():
        r = api_unix(d.ctl, "GET", "/v1/prompts")
        check_eq(r.status, 200, "GET /v1/prompts")
        return [p for p in r.json["prompts"] if p["host"] == host]
    return wait_until(find, 10, what="a prompt for %s" % host)[0]


def answer(d, pid, decision):
    r = api_unix(d.ctl, "POST", "/v1/prompts/%s" % pid, {"decision": decision})
    check_eq(r.status, 200, "answer %s %s" % (pid, decision))


def control_for_caller():
    """Root is admin on the control socket; another uid must be named."""
    return {} if os.geteuid() == 0 else {"admin_uids": [os.getuid()]}


# ---------------------------------------------------------------------------
# Cases

@pinned("admin.start", "admin.reopen", "admin.reload", "admin.stop",
        "decision.forward.allow", "close.forward",
        "decision.forward.deny",
        "decision.connect.allow", "close.connect",
        "decision.connect.deny",
        "decision.connect.session_unknown",
        "decision.bad_request",
        "decision.tunnel.sni_mismatch", "decision.tunnel.sni_missing",
        "close.tunnel.sni_refused")
def proxy_records(env, got):
    up = env.http_upstream()
    rec = env.server(recorder_handler)
    hosts = {h: ["127.0.0.1"] for h in ("up.test", "tun.test", "rec.test",
                                         "bad.test", "badc.test")}
    cfg = env.config(ports=env.ports(up.port, rec.port), dns={"hosts": hosts},
                     deny_hosts=["bad.test", "badc.test"],
                     tls={"sni_check": True, "sni_timeout_ms": 2000,
                          "sni_ports": [443, rec.port]})
    d = env.sluiced(cfg)
    lg = Log(d.log_path, got)
    src = env.src(1)
    lg.take("admin.start", event="admin", action="start")

    # a forwarded request and a tunnel, each with a real client
    p = curl(["-x", d.proxy_url(), "-w", "\n%{http_code}",
              "http://up.test:%d/fwd" % up.port], src=src)
    check_eq(curl_status(p.stdout)[1], 200, "curl forward (%r)" % p.stderr)
    dec = lg.take("decision.forward.allow", event="decision", method="GET",
                  host="up.test", decision="allow")
    lg.take("close.forward", event="close", conn=dec["conn"])
    p = curl(["-p", "-x", d.proxy_url(), "-w", "\n%{http_code}",
              "http://tun.test:%d/tun" % up.port], src=src)
    check_eq(curl_status(p.stdout)[1], 200, "curl tunnel (%r)" % p.stderr)
    dec = lg.take("decision.connect.allow", event="decision",
                  method="CONNECT", host="tun.test", decision="allow")
    lg.take("close.connect", event="close", conn=dec["conn"])

    # refused by policy, by identity, by syntax
    r = raw_request(d, src, get_request("http://bad.test:%d/x" % up.port))
    check_eq(r.sluice_reason, "admin_deny", "forward deny")
    lg.take("decision.forward.deny", event="decision", method="GET",
            host="bad.test")
    connect_refused(d, src, "badc.test", up.port)
    lg.take("decision.connect.deny", event="decision", method="CONNECT",
            host="badc.test")
    connect_refused(d, env.src(9), "up.test", up.port)
    lg.take("decision.connect.session_unknown", event="decision",
            reason="session_unknown")
    r = raw_request(d, src, b"GET http://up.test:%d/ HTTP/1.1\r\n"
                    b"Host: up.test\r\nContent-Length: x\r\n\r\n" % up.port)
    check_eq(r.sluice_reason, "bad_request", "bad request")
    lg.take("decision.bad_request", event="decision", reason="bad_request")

    # the tunnel's own refusal, after its allow record, on an SNI port
    tunnel_hello(d, src, "rec.test", rec.port, "other.test")
    dec = lg.take("decision.tunnel.sni_mismatch", event="decision",
                  reason="sni_mismatch")
    lg.take("close.tunnel.sni_refused", event="close", conn=dec["conn"])
    tunnel_hello(d, src, "rec.test", rec.port, None)
    lg.take("decision.tunnel.sni_missing", event="decision",
            reason="sni_missing")

    # logrotate's move, then SIGHUP: the reload record opens the new file
    old = d.log_path + ".1"
    os.rename(d.log_path, old)
    d.signal(signal.SIGHUP)
    lg.take("admin.reopen", event="admin", action="reopen")
    lg.take("admin.reload", event="admin", action="reload")
    check_eq(d.stop(), 0, "exit status")
    lg.take("admin.stop", event="admin", action="stop")
    d.chain_paths = [old, d.log_path]


@pinned("admin.ceiling_set", "admin.session_create", "admin.session_set_tier",
        "admin.grant_add", "admin.grant_remove", "admin.session_egress",
        "admin.session_delete")
def control_records(env, got):
    cfg = env.config(sessions=[], control=control_for_caller())
    d = env.sluiced(cfg)
    ctl = os.path.join(cfg["runtime_dir"], "control.sock")
    lg = Log(d.log_path, got)
    calls = [
        ("PUT", "/v1/ceiling", {"tier": "registries"}, "ceiling_set"),
        ("POST", "/v1/sessions", {"id": "k1", "tenant": "acme",
                                  "user": "alice", "tier": "public"},
         "session_create"),
        ("PATCH", "/v1/sessions/k1", {"tier": "off"}, "session_set_tier"),
        ("POST", "/v1/sessions/k1/grants", {"host": "up.test", "port": 8443},
         "grant_add"),
        ("DELETE", "/v1/sessions/k1/grants/up.test:8443", None, "grant_remove"),
        ("PUT", "/v1/sessions/k1/egress", {"allow": ["*.up.test"],
                                           "deny": ["bad.test"]},
         "session_egress"),
        ("DELETE", "/v1/sessions/k1", None, "session_delete"),
    ]
    for method, path, body, action in calls:
        r = api_unix(ctl, method, path, body)
        check(r.status in (200, 201), "%s %s: %d %r", method, path, r.status,
              r.body[:200])
        lg.take("admin." + action, event="admin", action=action, outcome="ok")


@pinned("admin.start.keyed", "decision.forward.keyed")
def keyed_records(env, got):
    """With log.mac_key_file every record ends in a mac after its hash."""
    key = env.path("mac.key")
    with open(key, "wb") as f:
        f.write(os.urandom(32))
    os.chmod(key, 0o600)
    cfg = env.config(deny_hosts=["bad.test"], log={"mac_key_file": key})
    d = env.sluiced(cfg)
    lg = Log(d.log_path, got)
    lg.take("admin.start.keyed", event="admin", action="start")
    r = raw_request(d, env.src(1), get_request("http://bad.test/x"))
    check_eq(r.sluice_reason, "admin_deny", "refused")
    lg.take("decision.forward.keyed", event="decision", host="bad.test")


@pinned("refusals_folded", "decision.too_many_refusals")
def refusal_records(env, got):
    """Refusals past the bucket fold into a refusals_folded record; a
    connection refused too often gets too_many_refusals."""
    cfg = env.config(deny_hosts=["bad.test"],
                     log={"refusals_per_s": 1, "refusal_burst": 8},
                     limits={"max_refusals_per_conn": 4})
    d = env.sluiced(cfg)
    lg = Log(d.log_path, got)
    for _ in range(3):      # 15 refusals: the bucket has 8 and 1/s
        s = d.connect(env.src(1))
        s.sendall(get_request("http://bad.test/x") * 5)
        rest = b""
        for i in range(5):
            r, rest = read_head(s, pre=rest)
            r.body, rest = read_body(s, r, rest)
        check_eq(r.sluice_reason, "too_many_refusals", "the fifth refusal")
        s.close()
    check_eq(d.stop(), 0, "exit status")
    lg.take("refusals_folded", event="refusals_folded", session="s1")
    lg.take("decision.too_many_refusals", event="decision",
            reason="too_many_refusals")


@pinned("admin.refused.unauthorized", "admin.refused.forbidden",
        "admin.refused.api_call")
def refused_api_calls(env, got):
    crt, key = env.cert(("localhost",))
    tok = env.path("app.token")
    with open(tok, "w") as f:
        f.write("app-token-0123456789abcdef\n")
    os.chmod(tok, 0o600)
    env.give(tok)
    env.give(key)
    port = free_port()
    cfg = env.config(sessions=[], control={
        "tcp": "127.0.0.1:%d" % port, "tls_cert": crt, "tls_key": key,
        "tokens": [{"name": "app", "role": "app", "token_file": tok}]})
    d = env.sluiced(cfg)
    lg = Log(d.log_path, got)

    def tls_call(method, path, body=None, token=None):
        raw = socket.create_connection(("127.0.0.1", port), timeout=10)
        s = insecure_ctx().wrap_socket(raw, server_hostname="localhost")
        try:
            hdrs = [("Authorization", "Bearer " + token)] if token else []
            return api_request(s, method, path, body, headers=hdrs)
        finally:
            s.close()

    check_eq(tls_call("GET", "/v1/health").status, 401, "no token")
    lg.take("admin.refused.unauthorized", event="admin", action="health",
            outcome="unauthorized")
    check_eq(tls_call("GET", "/v1/nothing").status, 401, "no route, no token")
    lg.take("admin.refused.api_call", event="admin", action="api_call",
            outcome="unauthorized")
    check_eq(tls_call("PUT", "/v1/ceiling", {"tier": "off"},
                      token="app-token-0123456789abcdef").status, 403,
             "app sets the ceiling")
    lg.take("admin.refused.forbidden", event="admin", action="ceiling_set",
            outcome="forbidden")


def prompt_daemon(env, timeout_s):
    up = env.http_upstream()
    hosts = {h: ["127.0.0.1"] for h in ("reg.test", "ask.test", "two.test",
                                         "three.test", "late.test")}
    cfg = env.config(sessions=[{"id": "c1", "tenant": "acme", "user": "alice",
                                "tier": "registries"}],
                     ceiling="public", registries=["reg.test"],
                     ports=env.ports(up.port), dns={"hosts": hosts},
                     control=control_for_caller(),
                     prompt={"timeout_s": timeout_s, "deny_quiet_s": 1})
    d = env.sluiced(cfg)
    d.ctl = os.path.join(cfg["runtime_dir"], "control.sock")
    return d, up


def get_head(host, port, path):
    return (b"GET http://%s:%d%s HTTP/1.1\r\nHost: %s:%d\r\n"
            b"Connection: close\r\n\r\n" % (host.encode(), port, path.encode(),
                                            host.encode(), port))


def connect_head_bytes(host, port):
    return (b"CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n"
            % (host.encode(), port, host.encode(), port))


@pinned("prompt.forward", "prompt_answer.forward.allow_once",
        "decision.forward.prompt_allow", "close.forward.prompt",
        "prompt.connect", "prompt_answer.connect.deny",
        "decision.connect.prompt_deny",
        "prompt_answer.connect.allow_once", "decision.connect.prompt_allow",
        "close.connect.prompt")
def prompt_records(env, got):
    d, up = prompt_daemon(env, 30)
    lg = Log(d.log_path, got)
    a = Approver(d.ctl)
    try:
        # a forwarded request held by a prompt, allowed once
        h = Held(d, "c1", get_head("ask.test", up.port, "/held"))
        p = pending_prompt(d, "ask.test")
        lg.take("prompt.forward", event="prompt", host="ask.test")
        answer(d, p["id"], "allow_once")
        h.finish(200)
        lg.take("prompt_answer.forward.allow_once", event="prompt_answer",
                host="ask.test")
        dec = lg.take("decision.forward.prompt_allow", event="decision",
                      host="ask.test")
        lg.take("close.forward.prompt", event="close", conn=dec["conn"])

        # a tunnel held by a prompt, denied
        h = Held(d, "c1", connect_head_bytes("two.test", up.port))
        p = pending_prompt(d, "two.test")
        lg.take("prompt.connect", event="prompt", host="two.test")
        answer(d, p["id"], "deny")
        h.finish(403)
        lg.take("prompt_answer.connect.deny", event="prompt_answer",
                host="two.test")
        lg.take("decision.connect.prompt_deny", event="decision",
                host="two.test")

        # a tunnel held by a prompt, allowed once, used and closed
        h = Held(d, "c1", connect_head_bytes("three.test", up.port))
        p = pending_prompt(d, "three.test")
        answer(d, p["id"], "allow_once")
        h.finish(200, close=False)
        h.sock.sendall(b"GET /in HTTP/1.1\r\nHost: three.test\r\n"
                       b"Connection: close\r\n\r\n")
        check_eq(read_response(h.sock).status, 200, "GET in the tunnel")
        h.sock.close()
        lg.take("prompt_answer.connect.allow_once", event="prompt_answer",
                host="three.test")
        dec = lg.take("decision.connect.prompt_allow", event="decision",
                      host="three.test")
        lg.take("close.connect.prompt", event="close", conn=dec["conn"])
    finally:
        a.close()


@pinned("prompt_answer.expired", "decision.forward.prompt_timeout")
def prompt_expired(env, got):
    d, up = prompt_daemon(env, 1)
    lg = Log(d.log_path, got)
    a = Approver(d.ctl)
    try:
        h = Held(d, "c1", get_head("late.test", up.port, "/late"))
        h.finish(403)
        check_eq(h.resp.sluice_reason, "prompt_timeout", "unanswered prompt")
        lg.take("prompt_answer.expired", event="prompt_answer",
                host="late.test", answer="timeout")
        lg.take("decision.forward.prompt_timeout", event="decision",
                host="late.test")
    finally:
        a.close()


TRANSPARENT = ("decision.transparent.http.allow", "close.transparent.http",
               "decision.transparent.http.deny",
               "decision.transparent.tls.allow", "close.transparent.tls",
               "decision.transparent.tls.deny")


def netns_ino():
    return os.stat("/proc/self/ns/net").st_ino


@pinned(*TRANSPARENT)
def transparent_records(env, got):
    for t in ("unshare", "nft", "ip"):
        require_tool(t)
    out = env.path("transparent.json")
    ns = ["unshare", "-n"] if os.geteuid() == 0 else ["unshare", "-r", "-n"]
    try:
        r = subprocess.run(ns + [sys.executable, os.path.abspath(__file__),
                                 "--netns-child", out, str(netns_ino())],
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=120)
    except subprocess.TimeoutExpired:
        raise Fail("the transparent-mode child did not finish in 120 s")
    err = r.stderr.decode(errors="replace")
    if r.returncode != 0 and err.startswith("unshare:"):
        raise Skip("no network namespace: %s" % err.strip())
    if r.returncode == 77:
        raise Skip("transparent child: %s" % err.strip().splitlines()[-1:])
    check(r.returncode == 0, "transparent-mode child failed (%d):\n%s",
          r.returncode, err[-4000:])
    with open(out) as f:
        got.update(json.load(f))


def netns_child(out, host_ino):
    """Inside the new namespace: lo, an nft redirect of the client's 80
    and 443 to the transparent listener, upstreams on 127.0.0.1:80 and
    :443 (where the names resolve and the redirected port sends the dial;
    sluiced dials from 127.0.0.1, which the redirect leaves alone), four
    connections."""
    if netns_ino() == host_ino:
        sys.stderr.write("refusing: still in the host network namespace\n")
        return 1
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True, timeout=10)
    root = tempfile.mkdtemp(prefix="sluice-t_log_keys-tp.")
    env = Env(root, "transparent")
    got = {}
    try:
        env.http_upstream(port=80)
        env.server(echo_handler, port=443)
        tp = free_port()
        src = env.src(1)
        table = ("table ip t_log_keys {\n"
                 " chain out {\n"
                 "  type nat hook output priority -100; policy accept;\n"
                 "  ip saddr %s tcp dport { 80, 443 } redirect to :%d\n"
                 " }\n}\n" % (src, tp))
        subprocess.run(["nft", "-f", "-"], input=table.encode(), check=True,
                       timeout=10)
        hosts = {h: ["127.0.0.1"] for h in ("up.test", "bad.test")}
        cfg = env.config(ports=env.ports(), dns={"hosts": hosts},
                         deny_hosts=["bad.test"],
                         listen={"transparent": ["127.0.0.1:%d" % tp]})
        d = env.sluiced(cfg)
        lg = Log(d.log_path, got)

        def dial(port):
            s = socket.socket()
            s.settimeout(10)
            s.bind((src, 0))
            s.connect(("127.0.0.1", port))
            return s

        for host, status in (("up.test", 200), ("bad.test", 403)):
            s = dial(80)
            s.sendall(b"GET /tp HTTP/1.1\r\nHost: %s\r\n"
                      b"Connection: close\r\n\r\n" % host.encode())
            check_eq(read_response(s).status, status, "redirected GET " + host)
            s.close()
        dec = lg.take("decision.transparent.http.allow", event="decision",
                      host="up.test", port=80)
        lg.take("close.transparent.http", event="close", conn=dec["conn"])
        lg.take("decision.transparent.http.deny", event="decision",
                host="bad.test", port=80)

        s = dial(443)
        hello = client_hello("up.test")
        s.sendall(hello)
        got_back = b""
        for _ in range(100):
            c = s.recv(65536)
            if not c:
                break
            got_back += c
            if len(got_back) >= len(hello):
                break
        check_eq(got_back, hello, "ClientHello through the redirect")
        s.close()
        dec = lg.take("decision.transparent.tls.allow", event="decision",
                      host="up.test", port=443)
        lg.take("close.transparent.tls", event="close", conn=dec["conn"])
        s = dial(443)
        s.sendall(client_hello("bad.test"))
        check(is_closed(s, 5.0), "redirected TLS to bad.test not closed")
        s.close()
        lg.take("decision.transparent.tls.deny", event="decision",
                host="bad.test", port=443)
        check_eq(d.stop(), 0, "exit status")
        verify_chain([d.log_path])
        with open(out, "w") as f:
            json.dump(got, f)
        return 0
    except Skip as e:
        sys.stderr.write("%s\n" % e)
        return 77
    except Exception:
        sys.stderr.write(traceback.format_exc())
        for d in env.daemons:
            sys.stderr.write("--- sluiced stderr:\n%s\n" % d.stderr())
        return 1
    finally:
        env.close()
        subprocess.run(["rm", "-rf", root], timeout=30)


@S.case
def golden_file(env):
    """The golden file names exactly the declared variants; with
    SLUICE_UPDATE_GOLDEN=1, written from what the cases saw."""
    if UPDATE:
        missing = sorted(set(DECLARED) - set(SEEN))
        check(not missing, "not writing %s: variants not seen (a case failed "
              "or was skipped): %s", GOLDEN, missing)
        os.makedirs(os.path.dirname(GOLDEN), exist_ok=True)
        lines = ["  %s: %s" % (json.dumps(v), json.dumps(SEEN[v]))
                 for v in sorted(SEEN)]
        with open(GOLDEN + ".tmp", "w") as f:
            f.write("{\n" + ",\n".join(lines) + "\n}\n")
        os.rename(GOLDEN + ".tmp", GOLDEN)
        log("wrote %s (%d variants)" % (GOLDEN, len(SEEN)))
        return
    golden = load_golden()
    stale = sorted(set(golden) - set(DECLARED))
    check(not stale, "golden variants no case makes: %s", stale)
    unpinned = sorted(set(DECLARED) - set(golden))
    check(not unpinned, "variants the golden file lacks: %s", unpinned)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--netns-child":
        sys.exit(netns_child(sys.argv[2], int(sys.argv[3])))
    S.main()
