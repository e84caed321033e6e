#!/usr/bin/env python3
"""Credentials (issue 23 step 3): POST /v1/credentials answers a
placeholder and never the value; a request on an inspected TLS leg to
one of the credential's hosts, of a session of its tenant, reaches the
upstream with the real value in inject.header (a client-sent header of
that name is replaced, not merged); a placeholder sent anywhere else
(another host, plain HTTP, another tenant's credential, a path the
credential does not admit, a revoked one) is removed and the value never
sent; rotation keeps the placeholder and changes the value for the next
request; the value is in the credentials file (0600) and in no log,
state file, API answer or diagnostic; a credential for a host never
inspected is refused at POST with the reason.  HTTPS upstreams on
loopback named by dns.hosts, with a test CA."""

import json
import os
import stat
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, check, check_eq, do_connect, read_log,  # noqa: E402
                     wait_until, http_handler, tls_server_ctx,
                     read_response, api_unix, get_request, BUILDDIR)
import subprocess  # noqa: E402
from t_inspect import test_ca  # noqa: E402
import ssl  # noqa: E402

S = Suite("t_credentials", time_limit=300)

VALUE = "npm_Sup3rS3cretValue_0123456789"
VALUE2 = "npm_R0tatedValue_9876543210"


def setup(env, **extra):
    ca_crt, crt, key = test_ca(env, names=("insp.test", "other.test"))
    up = env.server(http_handler, ssl_ctx=tls_server_ctx(crt, key, []))
    plain = env.http_upstream()
    cfg = env.config(
        ports=env.ports(up.port, plain.port),
        dns={"hosts": {"insp.test": ["127.0.0.1"],
                       "other.test": ["127.0.0.1"],
                       "plain.test": ["127.0.0.1"]}},
        tls={"sni_ports": [443, up.port]},
        inspect={"hosts": ["insp.test", "other.test"],
                 "ca_cert": env.path("inspect-ca.pem"),
                 "ca_key": env.path("inspect-ca.key"),
                 "upstream_ca_file": ca_crt},
        credentials={"file": env.path("creds", "credentials.json")},
        **extra)
    d = env.sluiced(cfg)
    d.ctl = os.path.join(cfg["runtime_dir"], "control.sock")
    d.up, d.plain = up, plain
    return d


def tls_to(env, d, host):
    s = d.connect(env.src(1))
    resp, _ = do_connect(s, host, d.up.port)
    check_eq(resp.status, 200, "CONNECT %s" % host)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(d.config["inspect"]["ca_cert"])
    return ctx.wrap_socket(s, server_hostname=host)


def ask(t, host, port, path, headers=(), method="GET"):
    h = "".join("%s: %s\r\n" % kv for kv in headers)
    t.sendall(b"%s %s HTTP/1.1\r\nHost: %s:%d\r\n%s\r\n"
              % (method.encode(), path.encode(), host.encode(), port,
                 h.encode()))
    r = read_response(t)
    check_eq(r.status, 200, "%s %s on %s (%r)" % (method, path, host, r))
    return json.loads(r.body)


def upstream_headers(doc, name):
    return [v for k, v in doc["headers"] if k.lower() == name.lower()]


def post(d, body):
    r = api_unix(d.ctl, "POST", "/v1/credentials", body)
    return r, (json.loads(r.body) if r.body else None)


def cred(name="npm", value=VALUE, **over):
    b = {"name": name, "tenant": "acme", "hosts": ["insp.test"],
         "inject": {"header": "Authorization", "format": "Bearer {}"},
         "value": value}
    b.update(over)
    return b


def no_value_anywhere(env, d, values):
    """The values are in the credentials file only."""
    cf = d.config["credentials"]["file"]
    for root, _, files in os.walk(env.dir):
        for f in files:
            p = os.path.join(root, f)
            if p == cf or not os.path.isfile(p):
                continue
            try:
                data = open(p, "rb").read()
            except OSError:
                continue
            for v in values:
                check(v.encode() not in data, "%s carries a value" % p)
    for v in values:
        check(v not in d.stderr(), "a value in sluiced's stderr")


@S.case
def credential_reaches_only_its_host(env):
    d = setup(env)
    port = d.up.port
    r, doc = post(d, cred())
    check_eq(r.status, 201, "POST (%r)" % r.body)
    ph = doc["placeholder"]
    check(ph.startswith("sluice-cred:npm:") and len(ph) == 16 + 32,
          "placeholder %r" % ph)
    check("value" not in doc and VALUE not in r.body.decode(),
          "the answer has no value")
    cf = d.config["credentials"]["file"]
    check_eq(stat.S_IMODE(os.stat(cf).st_mode), 0o600, "credentials file mode")
    check(VALUE.encode() in open(cf, "rb").read(), "the value is kept")
    for path in ("/v1/credentials", "/v1/credentials/npm"):
        g = api_unix(d.ctl, "GET", path)
        check_eq(g.status, 200, "GET %s" % path)
        check(VALUE not in g.body.decode() and ph in g.body.decode(),
              "GET %s shows the placeholder, not the value" % path)

    # the inspected leg to its host: the value, in place of the client's
    t = tls_to(env, d, "insp.test")
    doc = ask(t, "insp.test", port, "/pkg",
              headers=(("Authorization", "Bearer " + ph),))
    check_eq(upstream_headers(doc, "Authorization"), ["Bearer " + VALUE],
             "the upstream gets the value")
    # a client-sent header of that name is replaced, not merged; the
    # placeholder in another header puts the value in inject.header
    doc = ask(t, "insp.test", port, "/pkg2",
              headers=(("Authorization", "Basic Zm9vOmJhcg=="),
                       ("X-Npm-Token", ph)))
    check_eq(upstream_headers(doc, "Authorization"), ["Bearer " + VALUE],
             "replaced, not merged")
    check_eq(upstream_headers(doc, "X-Npm-Token"), [], "the placeholder")
    # without a placeholder nothing is put in
    doc = ask(t, "insp.test", port, "/anon",
              headers=(("Authorization", "Basic Zm9vOmJhcg=="),))
    check_eq(upstream_headers(doc, "Authorization"), ["Basic Zm9vOmJhcg=="],
             "a request without the placeholder is left alone")
    t.close()

    # another inspected host: the placeholder is removed, no value
    t = tls_to(env, d, "other.test")
    doc = ask(t, "other.test", port, "/x",
              headers=(("Authorization", "Bearer " + ph),
                       ("X-Other", "keep")))
    check_eq(upstream_headers(doc, "Authorization"), [], "removed")
    check_eq(upstream_headers(doc, "X-Other"), ["keep"], "others kept")
    # a forged secret is not the credential
    doc = ask(t, "other.test", port, "/y",
              headers=(("X-K", ph[:-1] + ("0" if ph[-1] != "0" else "1")),))
    check_eq(upstream_headers(doc, "X-K"), [], "a forged one removed")
    t.close()
    # plain HTTP: removed as well
    s = d.connect(env.src(1))
    s.sendall(get_request("http://plain.test:%d/p" % d.plain.port,
                          headers=(("Authorization", "Bearer " + ph),)))
    r = read_response(s)
    check_eq(r.status, 200, "plain GET")
    doc = json.loads(r.body)
    check_eq(upstream_headers(doc, "Authorization"), [], "plain: removed")
    s.close()
    seen = json.dumps(d.up.events + d.plain.events)
    check(ph not in seen, "the placeholder never reached an upstream")
    check(seen.count(VALUE) == 2, "the value went up twice, to insp.test")

    recs = wait_until(lambda: [x for x in read_log(d.log_path)
                               if x.get("event") == "decision" and
                               x.get("credential") == "npm"], 5,
                      what="records naming the credential")
    check_eq(sorted(x["path"] for x in recs), ["/pkg", "/pkg2"],
             "requests the value went into")
    check(wait_until(lambda: [x for x in read_log(d.log_path)
                              if x.get("placeholders_removed") and
                              x.get("path") == "/p"], 5,
                     what="plain record"), "placeholders_removed")
    check([x for x in read_log(d.log_path) if x.get("event") == "admin"
           and x.get("action") == "credential_set" and
           x.get("credential") == "npm"], "the admin record")
    # sluicectl log query --credential
    q = subprocess.run([os.path.join(BUILDDIR, "proxy", "sluicectl",
                                     "sluicectl"), "--json", "log", "query",
                        "--credential", "npm", "--event", "decision",
                        "--file", d.log_path], stdout=subprocess.PIPE,
                       timeout=20)
    check_eq(q.returncode, 0, "sluicectl log query")
    check_eq(sorted(json.loads(x)["path"] for x in
                    q.stdout.decode().splitlines() if x.strip()),
             ["/pkg", "/pkg2"], "log query --credential npm")
    no_value_anywhere(env, d, [VALUE])


@S.case
def scope_rotation_restart_delete(env):
    d = setup(env)
    port = d.up.port
    # only GET under /ok/, for tenant acme
    r, doc = post(d, cred(methods=["GET"], paths=["/ok/*"]))
    check_eq(r.status, 201, "POST")
    ph = doc["placeholder"]
    r, beta = post(d, cred(name="beta-key", tenant="beta", value="beta_" +
                           VALUE))
    check_eq(r.status, 201, "POST beta")
    t = tls_to(env, d, "insp.test")
    h = (("Authorization", "Bearer " + ph),)
    doc = ask(t, "insp.test", port, "/ok/a", headers=h)
    check_eq(upstream_headers(doc, "Authorization"), ["Bearer " + VALUE],
             "in scope")
    doc = ask(t, "insp.test", port, "/other", headers=h)
    check_eq(upstream_headers(doc, "Authorization"), [], "path out of scope")
    doc = ask(t, "insp.test", port, "/ok/a", headers=h, method="DELETE")
    check_eq(upstream_headers(doc, "Authorization"), [],
             "method out of scope")
    # another tenant's credential is not this session's
    doc = ask(t, "insp.test", port, "/ok/a",
              headers=(("Authorization", "Bearer " + beta["placeholder"]),))
    check_eq(upstream_headers(doc, "Authorization"), [], "other tenant")
    # rotation: the same placeholder, the new value for the next request
    r, doc2 = post(d, cred(value=VALUE2, methods=["GET"], paths=["/ok/*"]))
    check_eq(r.status, 200, "rotation")
    check_eq(doc2["placeholder"], ph, "the placeholder stays")
    doc = ask(t, "insp.test", port, "/ok/b", headers=h)
    check_eq(upstream_headers(doc, "Authorization"), ["Bearer " + VALUE2],
             "the rotated value on the same connection")
    t.close()
    # a restart keeps it
    d.stop()
    d2 = env.sluiced(d.config, name="sluiced2")
    d2.ctl, d2.up = d.ctl, d.up
    t = tls_to(env, d2, "insp.test")
    doc = ask(t, "insp.test", port, "/ok/c", headers=h)
    check_eq(upstream_headers(doc, "Authorization"), ["Bearer " + VALUE2],
             "after a restart")
    r = api_unix(d2.ctl, "DELETE", "/v1/credentials/npm")
    check_eq(r.status, 200, "DELETE")
    doc = ask(t, "insp.test", port, "/ok/d", headers=h)
    check_eq(upstream_headers(doc, "Authorization"), [], "revoked: removed")
    t.close()
    check_eq(api_unix(d2.ctl, "GET", "/v1/credentials/npm").status, 404,
             "gone")
    no_value_anywhere(env, d2, [VALUE, VALUE2, "beta_" + VALUE])


@S.case
def refused_at_post(env):
    d = setup(env)
    for body, what in (
            (cred(hosts=["never.test"]), "not inspected"),
            (cred(hosts=["*.test"]), "not inspected"),
            (cred(hosts=["insp.test", "10.0.0.1"]),
             "hosts[1]: expected a host name or *.suffix, with an "
             "optional :port"),
            (cred(hosts=["insp.test:99999"]), "hosts[0]: expected a host"),
            (cred(hosts=[5]), "hosts[0]: expected a host"),
            (cred(value="a\r\nX-Evil: 1"), "value"),
            (cred(inject={"header": "Authorization", "format": "Bearer"}),
             "inject.format"),
            (cred(inject={"header": "Bad Header"}), "inject.header"),
            (cred(name="../x"), "name"),
            (dict(cred(), extra=1), "unknown field")):
        r, doc = post(d, body)
        check_eq(r.status, 400, "refused: %r" % (body,))
        msg = doc["error"]["message"]
        check(what in msg, "the reason for %r: %r" % (body, msg))
        check(VALUE not in r.body.decode(), "no value in a refusal")
    check_eq(json.loads(api_unix(d.ctl, "GET", "/v1/credentials").body),
             {"credentials": []}, "nothing made")
    no_value_anywhere(env, d, [VALUE])


TOKENS = {"chat": ("app", None, "chat-token-0123456789abcdef"),
          "acme-app": ("app", "acme", "acme-token-0123456789abcdef"),
          "acme-audit": ("auditor", "acme", "audit-token-0123456789abcdef")}


@S.case
def tenant_bound_tokens(env):
    """A token bound to a tenant manages only that tenant's credentials;
    a credential injects only in sessions of its tenant."""
    from harness import free_port, require_tool, sluiced_path
    from t_api import make_ca, make_leaf, write_token, tls_call
    require_tool("openssl")
    ca = make_ca(env, "srv")
    crt, key = make_leaf(env, ca, "server", True)
    port = free_port()
    toks = []
    for n, (role, tenant, t) in TOKENS.items():
        e = {"name": n, "role": role, "token_file": write_token(env, n, t)}
        if tenant:
            e["tenant"] = tenant
        toks.append(e)
    control = {"tcp": "127.0.0.1:%d" % port, "tls_cert": crt,
               "tls_key": key, "tokens": toks}
    # an admin token bound to a tenant is refused at load
    bad = env.path("bad.json")
    with open(bad, "w") as f:
        json.dump({"control": dict(control, tokens=[
            {"name": "x", "role": "admin", "tenant": "acme",
             "token_file": toks[0]["token_file"]}])}, f)
    c = subprocess.run([sluiced_path(), "--check-config", bad],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=20)
    check(c.returncode != 0 and b"cannot be bound to a tenant" in c.stderr,
          "admin token with a tenant: %r" % c.stderr)
    d = setup(env, control=control, sessions=[
        {"id": "s1", "tenant": "acme", "user": "alice", "tier": "public",
         "source": env.src(1)},
        {"id": "s2", "tenant": "beta", "user": "bob", "tier": "public",
         "source": env.src(2)}])
    d.tls_port, d.server_ca = port, ca[0]
    tok = {n: v[2] for n, v in TOKENS.items()}

    def tcall(who, method, path, body=None):
        r = tls_call(d, method, path, body, token=tok[who])
        return r, (json.loads(r.body) if r.body else None)

    # beta's, made on the Unix socket (root: admin)
    r, beta = post(d, cred(name="beta-key", tenant="beta",
                           value="beta_" + VALUE))
    check_eq(r.status, 201, "admin POST for beta")
    r, doc = tcall("acme-app", "POST", "/v1/credentials",
                   cred(name="mine", tenant="beta"))
    check_eq(r.status, 403, "acme's token sets no credential of beta")
    check_eq(doc["error"]["code"], "forbidden", "code")
    r, doc = tcall("acme-app", "POST", "/v1/credentials",
                   cred(name="beta-key", value=VALUE2))
    check_eq(r.status, 409, "acme's token replaces none of beta's (%r)"
             % (doc,))
    r, mine = tcall("acme-app", "POST", "/v1/credentials", cred())
    check_eq(r.status, 201, "acme's token sets acme's")
    r, doc = tcall("acme-app", "GET", "/v1/credentials")
    check_eq([x["name"] for x in doc["credentials"]], ["npm"],
             "acme's token lists acme's only")
    r, doc = tcall("acme-app", "GET", "/v1/credentials/beta-key")
    check_eq(r.status, 404, "beta's is none to acme's token")
    r, doc = tcall("acme-app", "DELETE", "/v1/credentials/beta-key")
    check_eq(r.status, 404, "acme's token deletes none of beta's")
    r, doc = tcall("chat", "GET", "/v1/credentials")
    check_eq(sorted(x["name"] for x in doc["credentials"]),
             ["beta-key", "npm"], "an unbound app token lists every one")
    r, doc = tcall("acme-audit", "GET", "/v1/credentials")
    check_eq(r.status, 403, "an auditor reads no credentials")
    # beta's still there, unchanged
    r, doc = tcall("chat", "GET", "/v1/credentials/beta-key")
    check_eq((r.status, doc["placeholder"]), (200, beta["placeholder"]),
             "beta's kept")
    # injection: acme's only in acme's session, beta's only in beta's
    port_up = d.up.port
    for src, ph, want in (
            (1, mine["placeholder"], ["Bearer " + VALUE]),
            (2, mine["placeholder"], []),
            (2, beta["placeholder"], ["Bearer beta_" + VALUE]),
            (1, beta["placeholder"], [])):
        s = d.connect(env.src(src))
        resp, _ = do_connect(s, "insp.test", port_up)
        check_eq(resp.status, 200, "CONNECT")
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.load_verify_locations(d.config["inspect"]["ca_cert"])
        t = ctx.wrap_socket(s, server_hostname="insp.test")
        doc = ask(t, "insp.test", port_up, "/x",
                  headers=(("Authorization", "Bearer " + ph),))
        check_eq(upstream_headers(doc, "Authorization"), want,
                 "session %d with %s" % (src, ph.split(":")[1]))
        t.close()
    r, doc = tcall("acme-app", "DELETE", "/v1/credentials/npm")
    check_eq(r.status, 200, "acme's token deletes acme's")
    recs = [x for x in read_log(d.log_path) if x.get("event") == "admin"
            and x.get("action") == "credential_set" and
            x.get("who") == "token:acme-app"]
    check_eq([x.get("outcome") for x in recs], ["ok"],
             "one set by acme's token recorded")
    no_value_anywhere(env, d, [VALUE, VALUE2, "beta_" + VALUE])


if __name__ == "__main__":
    S.main()
