#!/usr/bin/env python3
"""Request rules (rules, issue 23 step 2), per request inside inspected
tunnels and for plain HTTP, after the host was allowed: a deny rule is
403 rule_denied naming the rule (body, X-Sluice-Rule, the record's
request_rule); the registry list is read-only (POST refused, GET
allowed) unless a rule allows more; git's git-receive-pack is refused
and git-upload-pack allowed; a prompt rule raises a prompt showing
method, path and rule, allow_once releases only that request and
allow_chat the rule for the chat; a plain-HTTP-only rule (host:port of
tls.plain_http_ports); a rule naming a host sluice never sees is
refused at load; rules reload on SIGHUP without dropping a tunnel.
Upstreams are HTTPS on loopback named by dns.hosts, with a test CA."""

import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, check, check_eq, do_connect, read_log,  # noqa: E402
                     wait_until, http_handler, tls_server_ctx,
                     check_refusal, read_response, sluiced_path, api_unix,
                     get_request, BUILDDIR)
from t_inspect import test_ca  # noqa: E402

S = Suite("t_rules", time_limit=300)

HOSTS = ("insp.test", "reg.test", "git.test", "plain.test")


def setup(env, rules=None, plain_port=False, extra=None):
    ca_crt, crt, key = test_ca(env, names=HOSTS)
    up = env.server(http_handler, ssl_ctx=tls_server_ctx(crt, key, []))
    plain = env.http_upstream()
    cfg = env.config(
        ports=env.ports(up.port, plain.port),
        registries=["reg.test"],
        dns={"hosts": {h: ["127.0.0.1"] for h in HOSTS}},
        tls={"sni_ports": [443, up.port],
             "plain_http_ports": [80, plain.port]},
        inspect={"hosts": ["insp.test", "reg.test", "*.git.test",
                           "git.test"],
                 "ca_cert": env.path("inspect-ca.pem"),
                 "ca_key": env.path("inspect-ca.key"),
                 "upstream_ca_file": ca_crt},
        rules=rules or [], **(extra or {}))
    d = env.sluiced(cfg)
    d.ctl = os.path.join(cfg["runtime_dir"], "control.sock")
    d.up, d.plain = up, plain
    return d


def tls_to(env, d, host):
    """An inspected TLS connection to host through sluiced."""
    s = d.connect(env.src(1))
    resp, _ = do_connect(s, host, d.up.port)
    check_eq(resp.status, 200, "CONNECT %s" % host)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(d.config["inspect"]["ca_cert"])
    return ctx.wrap_socket(s, server_hostname=host)


def ask(t, host, port, method, path, body=b"", headers=()):
    h = "".join("%s: %s\r\n" % kv for kv in headers)
    if body or method in ("POST", "PUT"):
        h += "Content-Length: %d\r\n" % len(body)
    t.sendall(b"%s %s HTTP/1.1\r\nHost: %s:%d\r\n%s\r\n%s"
              % (method.encode(), path.encode(), host.encode(), port,
                 h.encode(), body))
    return read_response(t, head_req=method == "HEAD")


def records(d, **match):
    return [x for x in read_log(d.log_path) if x.get("event") == "decision"
            and all(x.get(k) == v for k, v in match.items())]


@S.case
def deny_rule_names_the_rule(env):
    d = setup(env, rules=[
        {"name": "no-admin", "hosts": ["insp.test"], "paths": ["/admin/*"],
         "action": "deny"},
        {"hosts": ["insp.test"], "methods": ["DELETE"], "action": "deny"}])
    t = tls_to(env, d, "insp.test")
    r = ask(t, "insp.test", d.up.port, "GET", "/admin/users")
    check_refusal(r, "rule_denied")
    check_eq(r.status, 403, "status")
    check_eq(r.header("X-Sluice-Rule"), "no-admin", "X-Sluice-Rule")
    check(b'"no-admin"' in r.body, "the body names the rule: %r" % r.body)
    # another spelling of the path is the same path
    r = ask(t, "insp.test", d.up.port, "GET", "/public/..//admin/%75sers")
    check_refusal(r, "rule_denied")
    # the keep-alive connection goes on: other requests pass
    r = ask(t, "insp.test", d.up.port, "GET", "/public")
    check_eq(r.status, 200, "GET /public")
    # an unnamed rule is named by its index
    r = ask(t, "insp.test", d.up.port, "DELETE", "/x")
    check_refusal(r, "rule_denied")
    check_eq(r.header("X-Sluice-Rule"), "rule-1", "unnamed rule")
    t.close()
    paths = [x["path"] for x in d.up.events]
    check_eq(paths, ["/public"], "what reached the upstream")
    wait_until(lambda: records(d, request_rule="no-admin",
                               reason="rule_denied", inspected=True), 5,
               what="the deny record naming the rule")
    check(records(d, request_rule="rule-1", decision="deny"),
          "the record of rule-1")
    q = subprocess.run([os.path.join(BUILDDIR, "proxy", "sluicectl",
                                     "sluicectl"), "--json", "log", "query",
                        "--rule", "no-admin", "--file", d.log_path],
                       stdout=subprocess.PIPE, timeout=20)
    check_eq(q.returncode, 0, "sluicectl log query")
    check_eq(sorted(json.loads(x)["path"] for x in
                    q.stdout.decode().splitlines() if x.strip()),
             ["/admin/users", "/public/..//admin/%75sers"],
             "log query --rule no-admin")


@S.case
def registry_read_only_and_git_push(env):
    d = setup(env, rules=[
        {"name": "publish-ok", "hosts": ["reg.test"], "methods": ["PUT"],
         "paths": ["/ok/*"], "action": "allow"}])
    t = tls_to(env, d, "reg.test")
    r = ask(t, "reg.test", d.up.port, "GET", "/left-pad")
    check_eq(r.status, 200, "GET on the registry")
    r = ask(t, "reg.test", d.up.port, "HEAD", "/left-pad")
    check_eq(r.status, 200, "HEAD on the registry")
    r = ask(t, "reg.test", d.up.port, "POST", "/legacy/", body=b"x" * 10)
    check_refusal(r, "rule_denied")
    check_eq(r.header("X-Sluice-Rule"), "builtin:registries-read-only",
             "the built-in rule")
    t.close()
    t = tls_to(env, d, "reg.test")
    # an admin's rule comes first
    r = ask(t, "reg.test", d.up.port, "PUT", "/ok/pkg", body=b"{}")
    check_eq(r.status, 200, "PUT the rule allows")
    r = ask(t, "reg.test", d.up.port, "PUT", "/other/pkg")
    check_refusal(r, "rule_denied")
    t.close()

    t = tls_to(env, d, "git.test")
    r = ask(t, "git.test", d.up.port, "GET",
            "/o/r.git/info/refs?service=git-upload-pack")
    check_eq(r.status, 200, "fetch discovery")
    r = ask(t, "git.test", d.up.port, "POST", "/o/r.git/git-upload-pack",
            body=b"0000")
    check_eq(r.status, 200, "git-upload-pack")
    r = ask(t, "git.test", d.up.port, "GET",
            "/o/r.git/info/refs?service=git-receive-pack")
    check_refusal(r, "rule_denied")
    check_eq(r.header("X-Sluice-Rule"), "builtin:git-receive-pack",
             "push discovery")
    t.close()
    t = tls_to(env, d, "git.test")
    r = ask(t, "git.test", d.up.port, "POST", "/x/git-receive-pack",
            body=b"0000")
    check_refusal(r, "rule_denied")
    t.close()
    seen = [(x["method"], x["path"]) for x in d.up.events]
    check(("POST", "/legacy/") not in seen and
          ("POST", "/x/git-receive-pack") not in seen and
          ("PUT", "/other/pkg") not in seen,
          "nothing refused reached the upstream: %r" % seen)
    check(("PUT", "/ok/pkg") in seen, "the allowed PUT went up")
    check(records(d, request_rule="publish-ok", decision="allow"),
          "the allow record names the rule")


@S.case
def plain_http_rules(env):
    up_port = None
    d = None
    # the plain upstream's port is known only once it listens
    d0 = setup(env)
    up_port = d0.plain.port
    d0.stop()
    cfg = d0.config
    cfg["rules"] = [{"name": "plain-no-delete",
                     "hosts": ["plain.test:%d" % up_port],
                     "methods": ["DELETE"], "action": "deny"}]
    cfg["registries"] = ["reg.test", "reg.test:%d" % up_port]
    d = env.sluiced(cfg, name="sluiced2")
    s = d.connect(env.src(1))
    s.sendall(get_request("http://plain.test:%d/x" % up_port,
                          method="DELETE"))
    r = read_response(s)
    check_refusal(r, "rule_denied")
    check_eq(r.header("X-Sluice-Rule"), "plain-no-delete", "rule")
    s.sendall(get_request("http://plain.test:%d/x" % up_port))
    r = read_response(s)
    check_eq(r.status, 200, "GET plain")
    s.sendall(get_request("http://reg.test:%d/up" % up_port, method="POST",
                          body=b"abc"))
    r = read_response(s)
    check_refusal(r, "rule_denied")
    check_eq(r.header("X-Sluice-Rule"), "builtin:registries-read-only",
             "a plain registry POST")
    s.close()


@S.case
def rule_naming_a_host_never_seen_is_refused(env):
    for bad, ok in ((["nowhere.test"], False), (["*.test"], False),
                    (["nowhere.test:443"], False),
                    (["a.git.test"], True), (["*.b.git.test"], True),
                    (["nowhere.test:80"], True)):
        cfg = env.config(inspect={"hosts": ["insp.test", "*.git.test"]},
                         rules=[{"name": "r", "hosts": bad,
                                 "action": "deny"}])
        p = env.path("check.json")
        with open(p, "w") as f:
            json.dump(cfg, f)
        r = subprocess.run([sluiced_path(), "--check-config", p],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=20)
        if ok:
            check_eq(r.returncode, 0, "%r: %r" % (bad, r.stderr))
        else:
            check(r.returncode != 0, "%r refused" % bad)
            check(b"never sees" in r.stderr and b"inspect.hosts" in
                  r.stderr, "the reason for %r: %r" % (bad, r.stderr))
    for rule, what in (({"hosts": ["insp.test"], "action": "maybe"},
                        b"allow"),
                       ({"hosts": ["insp.test"], "action": "deny",
                         "paths": ["x"]}, b"glob"),
                       ({"hosts": ["insp.test"], "action": "deny",
                         "methods": ["get"]}, b"method"),
                       ({"hosts": [], "action": "deny"}, b"host"),
                       ({"action": "deny"}, b"hosts")):
        cfg = env.config(inspect={"hosts": ["insp.test"]}, rules=[rule])
        p = env.path("check.json")
        with open(p, "w") as f:
            json.dump(cfg, f)
        r = subprocess.run([sluiced_path(), "--check-config", p],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=20)
        check(r.returncode != 0 and what in r.stderr,
              "%r refused: %r" % (rule, r.stderr))


class Approver:
    """GET /v1/events held open: sluiced asks instead of refusing."""

    def __init__(self, ctl):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(0.5)
        self.sock.connect(ctl)
        self.sock.sendall(b"GET /v1/events HTTP/1.1\r\nHost: x\r\n\r\n")
        self.buf = b""
        self.stop = False
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        for _ in range(100000):
            if self.stop:
                return
            try:
                d = self.sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                return
            if not d:
                return
            self.buf += d

    def close(self):
        self.stop = True
        self.sock.close()


def pending(d):
    r = api_unix(d.ctl, "GET", "/v1/prompts")
    return json.loads(r.body)["prompts"]


def answer(d, pid, decision):
    r = api_unix(d.ctl, "POST", "/v1/prompts/%s" % pid,
                 {"decision": decision})
    check_eq(r.status, 200, "answer %s" % decision)


class Req(threading.Thread):
    def __init__(self, t, host, port, method, path):
        super().__init__(daemon=True)
        self.args = (t, host, port, method, path)
        self.resp = None
        self.start()

    def run(self):
        try:
            self.resp = ask(*self.args)
        except Exception as e:  # noqa: BLE001
            self.resp = e


@S.case
def prompt_rule(env):
    d = setup(env, rules=[{"name": "ask-posts", "hosts": ["insp.test"],
                           "methods": ["POST"], "action": "prompt"}],
              extra={"prompt": {"timeout_s": 30, "deny_quiet_s": 4}})
    a = Approver(d.ctl)
    env.closers.append(a.close)
    wait_until(lambda: b" 200 " in a.buf, 5, what="event stream")
    port = d.up.port
    t1 = tls_to(env, d, "insp.test")
    t2 = tls_to(env, d, "insp.test")
    # GETs do not ask
    r = ask(t1, "insp.test", port, "GET", "/g")
    check_eq(r.status, 200, "GET")
    w1 = Req(t1, "insp.test", port, "POST", "/a")
    ps = wait_until(lambda: pending(d), 5, what="the rule's prompt")
    check_eq(len(ps), 1, "one prompt")
    p = ps[0]
    check_eq((p["method"], p["path"], p["rule"], p["host"]),
             ("POST", "/a", "ask-posts", "insp.test"), "what it shows")
    # a second POST to another path joins it; allow_once releases only
    # the request shown
    w2 = Req(t2, "insp.test", port, "POST", "/b")
    wait_until(lambda: pending(d)[0]["waiting"] == 2, 5,
               what="the second waiter")
    answer(d, p["id"], "allow_once")
    w1.join(10)
    check_eq(w1.resp.status, 200, "the request shown went on")
    ps = wait_until(lambda: pending(d), 5, what="the other one asks again")
    check_eq(ps[0]["path"], "/b", "the new prompt's path")
    answer(d, ps[0]["id"], "deny")
    w2.join(10)
    check_refusal(w2.resp, "user_denied")
    check_eq(w2.resp.header("X-Sluice-Rule"), "ask-posts", "its rule")
    # a person's deny: the rule does not ask again for a while
    t2 = tls_to(env, d, "insp.test")
    r = ask(t2, "insp.test", port, "POST", "/q")
    check_refusal(r, "user_denied")
    check_eq(pending(d), [], "no prompt in the quiet period")
    # the quiet period (4 s: long enough for a new inspected leg on a
    # loaded machine to land inside it) ends
    time.sleep(4.2)
    # the same POST again asks again (allow_once was for one request)
    w3 = Req(t1, "insp.test", port, "POST", "/a")
    ps = wait_until(lambda: pending(d), 5, what="asked again")
    answer(d, ps[0]["id"], "allow_chat")
    w3.join(10)
    check_eq(w3.resp.status, 200, "allow_chat")
    # the rule is allowed for the chat now
    r = ask(t1, "insp.test", port, "POST", "/c")
    check_eq(r.status, 200, "no prompt after allow_chat")
    check_eq(pending(d), [], "nothing pending")
    seen = [(x["method"], x["path"]) for x in d.up.events]
    check_eq(seen, [("GET", "/g"), ("POST", "/a"), ("POST", "/a"),
                    ("POST", "/c")], "what reached the upstream")
    recs = [x for x in read_log(d.log_path) if x.get("event") == "prompt"]
    check(recs and recs[0].get("request_rule") == "ask-posts" and
          recs[0].get("path") == "/a", "the prompt record: %r" % recs[:1])


@S.case
def rules_reload_without_dropping_tunnels(env):
    d = setup(env)
    t = tls_to(env, d, "insp.test")
    r = ask(t, "insp.test", d.up.port, "GET", "/admin/x")
    check_eq(r.status, 200, "before the reload")
    d.config["rules"] = [{"name": "late", "hosts": ["insp.test"],
                          "paths": ["/admin/*"], "action": "deny"}]
    d.write_config()
    d.signal(signal.SIGHUP)
    wait_until(lambda: "configuration reloaded" in d.stderr(), 5,
               what="the reload")
    r = ask(t, "insp.test", d.up.port, "GET", "/admin/x")
    check_refusal(r, "rule_denied")
    check_eq(r.header("X-Sluice-Rule"), "late", "the new rule")
    r = ask(t, "insp.test", d.up.port, "GET", "/fine")
    check_eq(r.status, 200, "the same tunnel goes on")
    t.close()
    # a bad rule keeps the running ones
    d.config["rules"] = [{"hosts": ["never.test"], "action": "deny"}]
    d.write_config()
    d.signal(signal.SIGHUP)
    wait_until(lambda: "never sees" in d.stderr(), 5,
               what="the refused reload")
    t = tls_to(env, d, "insp.test")
    r = ask(t, "insp.test", d.up.port, "GET", "/admin/x")
    check_refusal(r, "rule_denied")
    t.close()


if __name__ == "__main__":
    S.main()
