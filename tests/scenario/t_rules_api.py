#!/usr/bin/env python3
"""Request rules through the control API (issue 23, rules per tenant):
POST /v1/rules adds a rule (a known name is replaced where it stands),
PUT /v1/rules replaces the API's list, DELETE /v1/rules/{id} removes
one; the API's rules come after the configuration's and before the
built-in ones, apply to every tenant or to one, take effect on the next
request of an open tunnel, are recorded in the log, survive a restart
(state file) and a reload (after the new file's rules; a file rule
that takes one's name is refused, at reload and at start); sluicectl
rule drives them.  Writes are the admin's; an app or auditor is
refused (403) and a token bound to a tenant reads only its tenant's
rules and those for every tenant, and only its tenant's sessions,
grants and prompts (no event stream).  Bad bodies are refused with the
field named: 400 bad_request, 400 host_not_inspected, 409 conflict (a
name twice, or a configuration rule's name).  Real sluiced, real TLS
(inspected upstream on loopback with a test CA)."""

import json
import os
import signal
import ssl
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, check, check_eq, do_connect, read_log,  # noqa: E402
                     check_refusal, api_unix, free_port, require_tool,
                     wait_until, BUILDDIR, Fail)
from t_rules import setup as rules_setup, ask  # noqa: E402
from t_api import make_ca, make_leaf, write_token, tls_call  # noqa: E402

S = Suite("t_rules_api", time_limit=300)

TOKENS = {"ops": ("admin", None, "ops-token-0123456789abcdef"),
          "chat": ("app", None, "chat-token-0123456789abcdef"),
          "acme-app": ("app", "acme", "acme-token-0123456789abcdef"),
          "audit": ("auditor", None, "audit-token-0123456789abcdef")}


def setup(env, rules=None, tokens=False):
    extra = {"sessions": [
        {"id": "s1", "tenant": "acme", "user": "alice", "tier": "public",
         "source": env.src(1)},
        {"id": "s2", "tenant": "beta", "user": "bob", "tier": "public",
         "source": env.src(2)}]}
    if tokens:
        require_tool("openssl")
        ca = make_ca(env, "srv")
        crt, key = make_leaf(env, ca, "server", True)
        port = free_port()
        toks = []
        for n, (role, tenant, t) in TOKENS.items():
            e = {"name": n, "role": role,
                 "token_file": write_token(env, n, t)}
            if tenant:
                e["tenant"] = tenant
            toks.append(e)
        extra["control"] = {"tcp": "127.0.0.1:%d" % port, "tls_cert": crt,
                            "tls_key": key, "tokens": toks}
    d = rules_setup(env, rules=rules, extra=extra)
    if tokens:
        d.tls_port = port
        d.server_ca = ca[0]
    return d


def tls_to(env, d, host, src=1):
    s = d.connect(env.src(src))
    resp, _ = do_connect(s, host, d.up.port)
    check_eq(resp.status, 200, "CONNECT %s" % host)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(d.config["inspect"]["ca_cert"])
    return ctx.wrap_socket(s, server_hostname=host)


def call(d, method, path, body=None):
    r = api_unix(d.ctl, method, path, body)
    return r, (json.loads(r.body) if r.body else None)


def expect(r, doc, status, code=None, what=""):
    check(r.status == status, "%s: status %d, want %d (%r)", what, r.status,
          status, r.body[:300])
    if code is not None:
        check_eq(doc["error"]["code"], code, "%s: error code" % what)
    return doc


def admin_records(d, action):
    return [x for x in read_log(d.log_path) if x.get("event") == "admin"
            and x.get("action") == action]


NO_ADMIN = {"name": "no-admin", "hosts": ["insp.test"],
            "paths": ["/admin/*"], "action": "deny"}


@S.case
def add_replace_delete_in_an_open_tunnel(env):
    d = setup(env, rules=[{"name": "file-first", "hosts": ["insp.test"],
                           "paths": ["/first/*"], "action": "allow"}])
    t = tls_to(env, d, "insp.test")
    r = ask(t, "insp.test", d.up.port, "GET", "/admin/x")
    check_eq(r.status, 200, "no rule yet")
    r, doc = call(d, "POST", "/v1/rules", NO_ADMIN)
    expect(r, doc, 201, what="POST")
    check_eq(r.header("Location"), "/v1/rules/no-admin", "Location")
    check_eq(doc, dict(NO_ADMIN, tenant=None, methods=[]), "the answer")
    # the same tunnel: the next request meets the rule
    r = ask(t, "insp.test", d.up.port, "GET", "/admin/x")
    check_refusal(r, "rule_denied")
    check_eq(r.header("X-Sluice-Rule"), "no-admin", "the API's rule")
    # the configuration's rules come first
    r, doc = call(d, "POST", "/v1/rules", {
        "name": "deny-first", "hosts": ["insp.test"], "paths": ["/first/*"],
        "action": "deny"})
    expect(r, doc, 201, what="POST deny-first")
    r = ask(t, "insp.test", d.up.port, "GET", "/first/a")
    check_eq(r.status, 200, "the file's allow wins over the API's deny")
    # a known name is replaced where it stands
    r, doc = call(d, "POST", "/v1/rules", dict(NO_ADMIN, action="allow"))
    expect(r, doc, 200, what="POST again")
    r, doc = call(d, "GET", "/v1/rules")
    expect(r, doc, 200, what="GET")
    check_eq([x["name"] for x in doc["rules"]], ["no-admin", "deny-first"],
             "order kept")
    check_eq([x["name"] for x in doc["config"]], ["file-first"], "config")
    check_eq(doc["builtin"], ["builtin:registries-read-only",
                              "builtin:git-receive-pack"], "builtin")
    r = ask(t, "insp.test", d.up.port, "GET", "/admin/x")
    check_eq(r.status, 200, "replaced by an allow")
    r, doc = call(d, "GET", "/v1/rules/no-admin")
    expect(r, doc, 200, what="GET one")
    check_eq(doc["action"], "allow", "the replaced rule")
    # PUT: the whole list
    r, doc = call(d, "PUT", "/v1/rules", {"rules": [
        NO_ADMIN, {"name": "no-delete", "hosts": ["insp.test"],
                   "methods": ["DELETE"], "action": "deny"}]})
    expect(r, doc, 200, what="PUT")
    check_eq([x["name"] for x in doc["rules"]], ["no-admin", "no-delete"],
             "after PUT")
    r = ask(t, "insp.test", d.up.port, "DELETE", "/thing")
    check_eq(r.header("X-Sluice-Rule"), "no-delete", "PUT's rule")
    r, doc = call(d, "DELETE", "/v1/rules/no-admin")
    expect(r, doc, 200, what="DELETE")
    r = ask(t, "insp.test", d.up.port, "GET", "/admin/y")
    check_eq(r.status, 200, "deleted: passes on the same tunnel")
    r, doc = call(d, "DELETE", "/v1/rules/no-admin")
    expect(r, doc, 404, "not_found", "DELETE again")
    r, doc = call(d, "DELETE", "/v1/rules/file-first")
    expect(r, doc, 404, "not_found", "the file's rule is not the API's")
    t.close()
    for action, n in (("rule_set", 3), ("rules_replace", 1),
                      ("rule_delete", 1)):
        recs = [x for x in admin_records(d, action)
                if x.get("outcome") == "ok"]
        check_eq(len(recs), n, "%s records" % action)
        check_eq(recs[0].get("who"), "root", "%s: who" % action)
    check_eq(admin_records(d, "rule_delete")[0].get("rule"), "no-admin",
             "the record names the rule")


@S.case
def per_tenant_and_restart(env):
    d = setup(env)
    r, doc = call(d, "POST", "/v1/rules", dict(
        NO_ADMIN, name="acme-no-admin", tenant="acme"))
    expect(r, doc, 201, what="POST acme's")
    ta, tb = tls_to(env, d, "insp.test", 1), tls_to(env, d, "insp.test", 2)
    r = ask(ta, "insp.test", d.up.port, "GET", "/admin/x")
    check_refusal(r, "rule_denied")
    r = ask(tb, "insp.test", d.up.port, "GET", "/admin/x")
    check_eq(r.status, 200, "beta's session: not its rule")
    ta.close()
    tb.close()
    with open(d.config["state_file"]) as f:
        st = json.load(f)
    check_eq([x["name"] for x in st["rules"]], ["acme-no-admin"],
             "in the state file")
    d.stop()
    d2 = setup_again(env, d)
    ta, tb = tls_to(env, d2, "insp.test", 1), tls_to(env, d2, "insp.test", 2)
    r = ask(ta, "insp.test", d2.up.port, "GET", "/admin/x")
    check_refusal(r, "rule_denied")
    check_eq(r.header("X-Sluice-Rule"), "acme-no-admin", "after a restart")
    r = ask(tb, "insp.test", d2.up.port, "GET", "/admin/x")
    check_eq(r.status, 200, "beta's after a restart")
    ta.close()
    tb.close()
    # a configuration that took the name of one of them: no start on a
    # state whose rules would not all be in force
    d2.stop()
    cfg = dict(d.config, rules=[{"name": "acme-no-admin",
                                 "hosts": ["insp.test"], "action": "allow"}])
    d3 = env.sluiced(cfg, name="sluiced3", start=False)
    try:
        d3.start(ready_timeout=10)
    except Fail:
        pass
    else:
        raise Fail("sluiced started with a rule name taken twice")
    check(d3.wait(5) not in (None, 0), "exit status")
    check("acme-no-admin" in d3.stderr() and "rename" in d3.stderr(),
          "the reason: %s" % d3.stderr()[-600:])


@S.case
def reload_keeps_api_rules(env):
    d = setup(env)
    r, doc = call(d, "POST", "/v1/rules", NO_ADMIN)
    expect(r, doc, 201, what="POST")
    t = tls_to(env, d, "insp.test")
    # a reload with a rule of the file in front: the API's still follow
    d.config["rules"] = [{"name": "file-admin-ok", "hosts": ["insp.test"],
                          "paths": ["/admin/ok"], "action": "allow"}]
    d.write_config()
    d.signal(signal.SIGHUP)
    wait_until(lambda: "configuration reloaded" in d.stderr(), 5,
               what="the reload")
    r = ask(t, "insp.test", d.up.port, "GET", "/admin/ok")
    check_eq(r.status, 200, "the file's new rule first")
    r = ask(t, "insp.test", d.up.port, "GET", "/admin/x")
    check_eq(r.header("X-Sluice-Rule"), "no-admin",
             "the API's rule after the reload, same tunnel")
    # a file rule that takes the API rule's name: the reload is refused
    d.config["rules"] = [{"name": "no-admin", "hosts": ["insp.test"],
                          "action": "allow"}]
    d.write_config()
    d.signal(signal.SIGHUP)
    wait_until(lambda: "rename one" in d.stderr(), 5,
               what="the refused reload")
    r = ask(t, "insp.test", d.up.port, "GET", "/admin/x")
    check_eq(r.header("X-Sluice-Rule"), "no-admin", "still in force")
    r = ask(t, "insp.test", d.up.port, "GET", "/admin/ok")
    check_eq(r.status, 200, "the running file's rules kept")
    t.close()


def setup_again(env, d):
    d2 = env.sluiced(d.config, name="sluiced2")
    d2.ctl, d2.up, d2.plain = d.ctl, d.up, d.plain
    return d2


@S.case
def bad_bodies(env):
    d = setup(env, rules=[{"name": "file-rule", "hosts": ["insp.test"],
                           "action": "allow"}])
    ok = {"name": "r", "hosts": ["insp.test"], "action": "deny"}
    for body, status, code, what in (
            (dict(ok, extra=1), 400, "bad_request", "unknown field"),
            (dict(ok, name="../x"), 400, "bad_request", "name"),
            (dict(ok, tenant="a b"), 400, "bad_request", "tenant"),
            (dict(ok, action="maybe"), 400, "bad_request", "action"),
            (dict(ok, hosts=[]), 400, "bad_request", "hosts"),
            (dict(ok, methods=["get"]), 400, "bad_request", "methods[0]"),
            (dict(ok, paths=["admin"]), 400, "bad_request", "paths[0]"),
            (dict(ok, hosts=["never.test"]), 400, "host_not_inspected",
             "never sees"),
            (dict(ok, name="file-rule"), 409, "conflict",
             "configuration has a rule"),
            ([ok], 400, "bad_request", "")):
        r, doc = call(d, "POST", "/v1/rules", body)
        expect(r, doc, status, code, "POST %r" % (body,))
        check(what in doc["error"]["message"], "the reason for %r: %r"
              % (body, doc["error"]["message"]))
    r, doc = call(d, "PUT", "/v1/rules", {"rules": [ok, ok]})
    expect(r, doc, 409, "conflict", "PUT a name twice")
    r, doc = call(d, "PUT", "/v1/rules", {"rules": [ok, dict(ok, x=1)]})
    expect(r, doc, 400, "bad_request", "PUT a bad one")
    check("rules[1]" in doc["error"]["message"], "names the index")
    r, doc = call(d, "PUT", "/v1/rules", {"rules": [
        dict(ok, name="r%d" % i) for i in range(257)]})
    expect(r, doc, 409, "too_many_rules", "PUT 257")
    r, doc = call(d, "GET", "/v1/rules")
    check_eq(doc["rules"], [], "nothing made")
    r, doc = call(d, "GET", "/v1/rules/nope")
    expect(r, doc, 404, "not_found", "GET unknown")


@S.case
def roles_and_tenant_tokens(env):
    d = setup(env, tokens=True)
    tok = {n: v[2] for n, v in TOKENS.items()}
    body = dict(NO_ADMIN, tenant="beta", name="beta-rule")
    for who in ("chat", "acme-app", "audit"):
        r = tls_call(d, "POST", "/v1/rules", body, token=tok[who])
        check_eq(r.status, 403, "%s may not POST a rule" % who)
        r = tls_call(d, "DELETE", "/v1/rules/x", token=tok[who])
        check_eq(r.status, 403, "%s may not DELETE a rule" % who)
        r = tls_call(d, "PUT", "/v1/rules", {"rules": []}, token=tok[who])
        check_eq(r.status, 403, "%s may not PUT rules" % who)
    r = tls_call(d, "POST", "/v1/rules", body, token=tok["ops"])
    check_eq(r.status, 201, "admin POST")
    r = tls_call(d, "POST", "/v1/rules", dict(NO_ADMIN, name="all"),
                 token=tok["ops"])
    check_eq(r.status, 201, "admin POST for every tenant")
    names = {}
    for who in ("ops", "chat", "acme-app", "audit"):
        r = tls_call(d, "GET", "/v1/rules", token=tok[who])
        check_eq(r.status, 200, "%s GET" % who)
        names[who] = [x["name"] for x in json.loads(r.body)["rules"]]
    check_eq(names["ops"], ["beta-rule", "all"], "admin sees all")
    check_eq(names["chat"], ["beta-rule", "all"], "an unbound app too")
    check_eq(names["acme-app"], ["all"], "acme's token: not beta's")
    r = tls_call(d, "GET", "/v1/rules/beta-rule", token=tok["acme-app"])
    check_eq(r.status, 404, "acme's token: beta's rule is none")
    refused = [x for x in read_log(d.log_path) if x.get("event") == "admin"
               and x.get("action") == "rule_set" and
               x.get("outcome") == "forbidden"]
    check(len(refused) >= 3, "refused calls recorded: %r" % refused[:1])


@S.case
def tenant_token_sessions(env):
    """A token bound to a tenant reaches only its tenant's sessions; the
    event stream and metrics, not cut to a tenant, are refused."""
    d = setup(env, tokens=True)
    tok = {n: v[2] for n, v in TOKENS.items()}
    r = tls_call(d, "GET", "/v1/sessions", token=tok["acme-app"])
    check_eq([x["id"] for x in json.loads(r.body)["sessions"]], ["s1"],
             "acme's token lists acme's sessions")
    r = tls_call(d, "GET", "/v1/sessions", token=tok["chat"])
    check_eq(sorted(x["id"] for x in json.loads(r.body)["sessions"]),
             ["s1", "s2"], "an unbound token lists all")
    for method, path, body in (
            ("GET", "/v1/sessions/s2", None),
            ("PATCH", "/v1/sessions/s2", {"tier": "off"}),
            ("DELETE", "/v1/sessions/s2", None),
            ("POST", "/v1/sessions/s2/grants", {"host": "x.test",
                                                 "port": 443}),
            ("DELETE", "/v1/sessions/s2/grants/x.test:443", None)):
        r = tls_call(d, method, path, body, token=tok["acme-app"])
        check_eq(r.status, 404, "%s %s with acme's token" % (method, path))
    r = tls_call(d, "GET", "/v1/sessions/s1", token=tok["acme-app"])
    check_eq(r.status, 200, "its own session")
    r = tls_call(d, "POST", "/v1/sessions/s1/grants",
                 {"host": "x.test", "port": 443}, token=tok["acme-app"])
    check_eq(r.status, 201, "a grant on its own session")
    r = tls_call(d, "POST", "/v1/sessions", {
        "id": "b9", "tenant": "beta", "user": "u", "tier": "off"},
        token=tok["acme-app"])
    check_eq(r.status, 403, "a session of beta by acme's token")
    r = tls_call(d, "POST", "/v1/sessions", {
        "id": "a9", "tenant": "acme", "user": "u", "tier": "off"},
        token=tok["acme-app"])
    check_eq(r.status, 201, "a session of acme by acme's token")
    for path in ("/v1/events", "/v1/metrics"):
        r = tls_call(d, "GET", path, token=tok["acme-app"])
        check(r.status == 403, "%s with acme's token: %d" % (path, r.status))
    r = tls_call(d, "GET", "/v1/health", token=tok["acme-app"])
    check_eq(json.loads(r.body)["caller"], {
        "role": "app", "who": "token:acme-app", "tenant": "acme"},
        "health names the caller's tenant")
    r = tls_call(d, "GET", "/v1/health", token=tok["chat"])
    check("tenant" not in json.loads(r.body)["caller"], "unbound: none")
    r = tls_call(d, "GET", "/v1/prompts", token=tok["acme-app"])
    check_eq((r.status, json.loads(r.body)["prompts"]), (200, []),
             "prompts")
    # beta's session untouched
    r, doc = call(d, "GET", "/v1/sessions/s2")
    check_eq((r.status, doc["tier"], doc["grants"]), (200, "public", []),
             "beta's session as it was")


def sluicectl(d, *args, stdin=None):
    r = subprocess.run(
        [os.path.join(BUILDDIR, "proxy", "sluicectl", "sluicectl"),
         "--socket", d.ctl] + list(args), input=stdin,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    r.out = r.stdout.decode(errors="replace")
    r.err = r.stderr.decode(errors="replace")
    return r


@S.case
def sluicectl_rules(env):
    d = setup(env, rules=[{"name": "file-rule", "hosts": ["insp.test"],
                           "paths": ["/f/*"], "action": "allow"}])
    r = sluicectl(d, "rule", "add", json.dumps(dict(NO_ADMIN,
                                                    tenant="acme")))
    check_eq(r.returncode, 0, "rule add (%s)" % r.err)
    r = sluicectl(d, "rule", "list")
    check_eq(r.returncode, 0, "rule list (%s)" % r.err)
    rows = [x.split() for x in r.out.splitlines()]
    check_eq([x[:4] for x in rows], [
        ["SOURCE", "NAME", "TENANT", "ACTION"],
        ["config", "file-rule", "*", "allow"],
        ["api", "no-admin", "acme", "deny"],
        ["builtin", "builtin:registries-read-only", "*", "deny"],
        ["builtin", "builtin:git-receive-pack", "*", "deny"]],
        "the rules in the order requests meet them:\n%s" % r.out)
    check("/admin/*" in r.out, "the paths shown")
    r = sluicectl(d, "--json", "rule", "show", "no-admin")
    check_eq((r.returncode, json.loads(r.out)["tenant"]), (0, "acme"),
             "rule show --json")
    r = sluicectl(d, "rule", "replace", "-", stdin=json.dumps(
        [NO_ADMIN, dict(NO_ADMIN, name="two")]).encode())
    check_eq(r.returncode, 0, "rule replace from stdin (%s)" % r.err)
    r, doc = call(d, "GET", "/v1/rules")
    check_eq([x["name"] for x in doc["rules"]], ["no-admin", "two"],
             "replaced")
    r = sluicectl(d, "rule", "add", json.dumps(dict(NO_ADMIN,
                                                    hosts=["never.test"])))
    check_eq(r.returncode, 1, "a refused rule is exit 1")
    check("host_not_inspected" in r.err or "never sees" in r.err,
          "the reason shown: %r" % r.err)
    r = sluicectl(d, "rule", "add", "{not json")
    check_eq(r.returncode, 2, "bad JSON is a usage error")
    r = sluicectl(d, "rule", "delete", "two")
    check_eq(r.returncode, 0, "rule delete")
    r = sluicectl(d, "rule", "delete", "two")
    check_eq(r.returncode, 1, "rule delete again: 404")
    r, doc = call(d, "GET", "/v1/rules")
    check_eq([x["name"] for x in doc["rules"]], ["no-admin"], "deleted")


if __name__ == "__main__":
    S.main()
