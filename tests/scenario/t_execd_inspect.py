#!/usr/bin/env python3
"""sluice-execd and sluiced's TLS inspection and credentials (issue 23,
points 2 and 4), with real sandboxes:

trust_and_credentials: with inspection on for a loopback HTTPS upstream
(a test CA for it, named through dns.hosts and inspect.upstream_ca_file),
GET /v1/inspect/ca answers the inspection CA; a sandbox's commands have
SSL_CERT_FILE, REQUESTS_CA_BUNDLE, NODE_EXTRA_CA_CERTS, GIT_SSL_CAINFO,
PIP_CERT and CURL_CA_BUNDLE naming /run/sluice/ca.pem (the host's anchors
and the inspection CA), so curl and Python's urllib reach
https://insp.test:PORT/ without a flag (a bundle removed is made again at
a reload, SIGHUP); a create naming a credential of
its tenant gives its commands SLUICE_CRED_<NAME>=<placeholder>, and a
request carrying it arrives upstream with the real value; a credential
that is not sluiced's or not of the tenant is refused (400).

inspection_off: GET /v1/inspect/ca is 404 not_found; a sandbox's commands
have none of the variables and no /run/sluice/ca.pem.

Skips (77) without root or user namespaces."""

import json
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, check, check_eq, http_handler,  # noqa: E402
                     tls_server_ctx, api_unix, wait_until)
from t_execd import (create, ex, check_err, preflight,  # noqa: E402
                     Execd, _backend, K)
from t_inspect import test_ca  # noqa: E402

S = Suite("t_execd_inspect", time_limit=600)

VALUE = "npm_Sbx5ecretValue_0123456789"
CA_VARS = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
           "GIT_SSL_CAINFO", "PIP_CERT", "CURL_CA_BUNDLE")


def start(env, inspect=True):
    preflight()
    os.chmod(os.path.dirname(env.dir), 0o711)
    os.chmod(env.dir, 0o711)
    over = {}
    if inspect:
        ca_crt, crt, key = test_ca(env, names=("insp.test",))
        up = env.server(http_handler, ssl_ctx=tls_server_ctx(crt, key, []))
        over = dict(
            ports=env.ports(up.port),
            dns={"hosts": {"insp.test": ["127.0.0.1"]}},
            tls={"sni_ports": [443, up.port]},
            inspect={"hosts": ["insp.test"],
                     "ca_cert": env.path("inspect-ca.pem"),
                     "ca_key": env.path("inspect-ca.key"),
                     "upstream_ca_file": ca_crt},
            credentials={"file": env.path("creds", "credentials.json")})
    else:
        up = None
    cfg = env.config(sessions=[], ceiling="public", **over)
    d = env.sluiced(cfg)
    d.up = up
    ctl = os.path.join(cfg["runtime_dir"], "control.sock")
    xo = {"backend": _backend["name"]} if _backend["name"] else {}
    x = Execd(env, ctl, **xo).start()
    return d, ctl, x


def own_placeholder(ph, sid, tenant="acme"):
    """The sandbox's own placeholder of credential placeholder ph: the
    secret HMAC-SHA256(ph's secret, "sluice-cred:" + the session),
    cut to 32 hex digits (sluiced(8), Credentials)."""
    import hashlib
    import hmac
    head, secret = ph.rsplit(":", 1)
    return head + ":" + hmac.new(
        secret.encode(), b"sluice-cred:" + K(sid, tenant).encode(),
        hashlib.sha256).hexdigest()[:32]


def env_of(x, sid):
    o = ex(x, sid, {"cmd": ["env"]})
    check_eq(o["exit_code"], 0, "env: %r" % o)
    return dict(line.split("=", 1) for line in o["stdout"].splitlines()
                if "=" in line)


@S.case
def trust_and_credentials(env):
    d, ctl, x = start(env)
    port = d.up.port
    r = api_unix(ctl, "GET", "/v1/inspect/ca")
    check_eq(r.status, 200, "GET /v1/inspect/ca")
    ca = open(d.config["inspect"]["ca_cert"]).read()
    check_eq(r.body.decode(), ca, "the inspection CA")
    # credentials: one of acme, one of beta
    for name, tenant in (("npm", "acme"), ("beta-key", "beta")):
        r = api_unix(ctl, "POST", "/v1/credentials", {
            "name": name, "tenant": tenant, "hosts": ["insp.test"],
            "inject": {"header": "Authorization", "format": "Bearer {}"},
            "value": VALUE})
        check_eq(r.status, 201, "POST credential %s: %r" % (name, r))
    ph = json.loads(api_unix(ctl, "GET", "/v1/credentials/npm").body)[
        "placeholder"]
    for creds, what in ((["nosuch"], "no such credential"),
                        (["beta-key"], "another tenant's"),
                        (["npm", "npm"], "twice"),
                        ("npm", "not an array")):
        r = x.app("POST", "/v1/sandboxes", {"id": "bad", "tenant": "acme",
                                            "credentials": creds},
                  timeout=120)
        check_err(r, 400, "bad_request", "credentials %s" % what)
    check_eq(x.sandboxes(), [], "nothing left by the refused creates")

    create(x, "s1", credentials=["npm"])
    e = env_of(x, "s1")
    for v in CA_VARS:
        check_eq(e.get(v), "/run/sluice/ca.pem", v)
    mine = own_placeholder(ph, "s1")
    check(mine != ph, "the sandbox's placeholder is its own")
    check_eq(e.get("SLUICE_CRED_NPM"), mine, "the placeholder")
    check(VALUE not in json.dumps(e), "no value in the environment")
    o = ex(x, "s1", {"shell": "grep -c 'BEGIN CERTIFICATE' "
                     "/run/sluice/ca.pem; tail -c %d /run/sluice/ca.pem"
                     % len(ca.encode())})
    check(int(o["stdout"].split("\n", 1)[0]) >= 2 and
          o["stdout"].split("\n", 1)[1] == ca,
          "the bundle: the anchors, then the inspection CA: %r"
          % o["stdout"][:200])
    # curl and Python, no flag
    o = ex(x, "s1", {"cmd": ["curl", "-sS", "--max-time", "20",
                              "https://insp.test:%d/curl" % port]},
           timeout=60)
    check_eq(o["exit_code"], 0, "curl: %r" % o)
    check_eq(json.loads(o["stdout"])["path"], "/curl", "curl's answer")
    o = ex(x, "s1", {"cmd": [
        "python3", "-c", "import urllib.request,sys;sys.stdout.write("
        "urllib.request.urlopen('https://insp.test:%d/py',timeout=20)"
        ".read().decode())" % port]}, timeout=60)
    check_eq(o["exit_code"], 0, "python3: %r" % o)
    check_eq(json.loads(o["stdout"])["path"], "/py", "urllib's answer")
    # the placeholder becomes the value upstream
    o = ex(x, "s1", {"shell": "curl -sS --max-time 20 -H \"Authorization: "
                     "Bearer $SLUICE_CRED_NPM\" https://insp.test:%d/cred"
                     % port}, timeout=60)
    check_eq(o["exit_code"], 0, "curl with the placeholder: %r" % o)
    got = [v for k, v in json.loads(o["stdout"])["headers"]
           if k.lower() == "authorization"]
    check_eq(got, ["Bearer " + VALUE], "the upstream gets the value")
    # a reload (and a start) makes the sandboxes' bundles again
    sdir = os.path.join(d.config["runtime_dir"], "sessions", K("s1"))
    os.unlink(os.path.join(sdir, "ca.pem"))
    check("SSL_CERT_FILE" not in env_of(x, "s1"), "no bundle, no variable")
    x.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: os.path.exists(os.path.join(sdir, "ca.pem")), 20,
               what="the bundle made again at the reload")
    check_eq(env_of(x, "s1").get("CURL_CA_BUNDLE"), "/run/sluice/ca.pem",
             "after the reload")
    # a sandbox without credentials: the trust, no placeholder
    create(x, "s2")
    e = env_of(x, "s2")
    check_eq(e.get("SSL_CERT_FILE"), "/run/sluice/ca.pem", "s2 trust")
    check(not [k for k in e if k.startswith("SLUICE_CRED_")],
          "s2: no credential")
    # s1's placeholder from s2 (same tenant): removed, nothing put in;
    # the credential's own placeholder works there
    for p, want in ((mine, []), (ph, ["Bearer " + VALUE])):
        o = ex(x, "s2", {"shell": "curl -sS --max-time 20 -H "
                         "'Authorization: Bearer %s' https://insp.test:%d/x"
                         % (p, port)}, timeout=60)
        check_eq(o["exit_code"], 0, "curl from s2: %r" % o)
        got = [v for k, v in json.loads(o["stdout"])["headers"]
               if k.lower() == "authorization"]
        check_eq(got, want, "s2 sending %s" % ("s1's placeholder"
                                              if p == mine else "the "
                                              "credential's own"))
    for sid in ("s1", "s2"):
        check_eq(x.app("DELETE", "/v1/sandboxes/" + sid,
                       timeout=60).status, 200, "delete " + sid)


@S.case
def inspection_off(env):
    d, ctl, x = start(env, inspect=False)
    r = api_unix(ctl, "GET", "/v1/inspect/ca")
    check_eq(r.status, 404, "GET /v1/inspect/ca without inspection")
    check_eq(json.loads(r.body)["error"]["code"], "not_found", "its code")
    create(x, "s1")
    e = env_of(x, "s1")
    for v in CA_VARS:
        check(v not in e, "%s not set" % v)
    o = ex(x, "s1", {"shell": "test -e /run/sluice/ca.pem; echo $?"})
    check_eq(o["stdout"].strip(), "1", "no bundle")
    check_eq(x.app("DELETE", "/v1/sandboxes/s1", timeout=60).status, 200,
             "delete")


if __name__ == "__main__":
    S.main()
