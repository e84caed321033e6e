#!/usr/bin/env python3
"""Package managers' own configuration carries a credential's placeholder
(issue 23 point 4): a real sandbox of sluice-execd (ns backend) created
with credentials "for" npm and pip gets /run/sluice/npmrc and
/run/sluice/pip.conf (the sandbox user's, 0600, placeholders only) named
by NPM_CONFIG_USERCONFIG and PIP_CONFIG_FILE; an unmodified `pip install`
and `npm install` (no token, no index, no registry on the command line)
reach loopback HTTPS registries that answer 401 without the real token:
sluiced finds npm's Bearer placeholder and pip's placeholder inside the
base64 of its Basic header, on the inspected leg, and sends the real
Bearer token and the real user:password.  `npm publish`, allowed by a
tenant's rule, arrives with the real token.  The values are in no file
of the case but sluiced's credentials file, in no answer, environment,
sandbox file or stderr, and no upstream ever sees a placeholder;
pip's placeholder sent in a Basic header to the npm registry is removed
there.  gvisor_npm_and_pip: the same in a gVisor sandbox.

Skips (77) without root, user namespaces, pip or npm (gvisor_*: runsc,
or a gVisor that does not run here)."""

import base64
import functools
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, Skip, check, check_eq, read_log,  # noqa: E402
                     api_unix)
from t_inspect import test_ca  # noqa: E402
from t_clients import Quiet, pip_available  # noqa: E402
from t_credentials import no_value_anywhere  # noqa: E402
from t_execd_inspect import own_placeholder  # noqa: E402
from t_pkg_inspect import NpmRegistry, NPM_PKG, npm_serve  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "demo"))
from registry import PKG, make_index  # noqa: E402

S = Suite("t_pkg_cred", time_limit=600)

NPM_VALUE = "npm_Pkg5ecretT0ken_0123456789abcdef"
PIP_USER, PIP_PASS = "acme-ci", "PyP1_S3cretPassw0rd_9876"
PIP_VALUE = PIP_USER + ":" + PIP_PASS
PIP_B64 = base64.b64encode(PIP_VALUE.encode()).decode()


class AuthIndex(Quiet):
    """The simple index and its files, only with the real Basic
    user:password (401 otherwise); every Authorization noted."""

    def do_GET(self):
        a = self.headers.get("Authorization")
        self.server.st["seen"].append((self.path, a))
        if a != "Basic " + PIP_B64:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="pypi"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        super().do_GET()


def pypi_serve(env, root, crt, key):
    import http.server
    import ssl
    import threading
    srv = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(AuthIndex, directory=root))
    srv.daemon_threads = True
    srv.st = {"seen": []}
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(crt, key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever,
                     kwargs={"poll_interval": 0.1}, daemon=True).start()

    def close():
        srv.shutdown()
        srv.server_close()
    env.closers.append(close)
    return srv.server_address[1], srv.st


class AuthNpm(NpmRegistry):
    """The npm stand-in, only with the real Bearer token (401
    otherwise); every Authorization noted."""

    def _auth(self, method):
        a = self.headers.get("Authorization")
        self.server.st["auth"].append((method, self.path, a))
        if a != "Bearer " + NPM_VALUE:
            n = int(self.headers.get("Content-Length") or 0)
            if n:
                self.rfile.read(n)
            self._send(401, b'{"error":"unauthorized"}')
            return False
        return True

    def do_GET(self):
        if self._auth("GET"):
            super().do_GET()

    def do_PUT(self):
        if self._auth("PUT"):
            super().do_PUT()


def out(o):
    return o["stdout"][-1200:] + "\n" + o["stderr"][-1200:]


@S.case
def npm_and_pip_take_placeholders(env):
    run(env, _backend_name())


@S.case
def gvisor_npm_and_pip(env):
    """The same in a gVisor sandbox (its /run/sluice is a gofer mount of
    the same session directory)."""
    from t_execd import runsc_works
    if not runsc_works():
        raise Skip("runsc not installed")
    run(env, "gvisor")


def _backend_name():
    from t_execd import _backend
    return _backend["name"]


def run(env, backend):
    from t_execd import create, ex, preflight, Execd
    preflight()
    pip_available()
    if shutil.which("npm") is None:
        raise Skip("npm is not installed (apt-get install npm)")
    os.chmod(os.path.dirname(env.dir), 0o711)
    os.chmod(env.dir, 0o711)
    ca_crt, crt, key = test_ca(env, names=("pypi.test", "npm.test"))
    root = env.path("www")
    make_index(root)
    pyport, pyst = pypi_serve(env, root, crt, key)
    st = npm_serve(env, crt, key, AuthNpm)
    st["auth"] = []
    cfg = env.config(
        sessions=[], ceiling="public", registries=["pypi.test", "npm.test"],
        ports=env.ports(pyport, st["port"]),
        dns={"hosts": {"pypi.test": ["127.0.0.1"],
                       "npm.test": ["127.0.0.1"]}},
        tls={"sni_ports": [443, pyport, st["port"]]},
        inspect={"hosts": ["pypi.test", "npm.test"],
                 "ca_cert": env.path("inspect-ca.pem"),
                 "ca_key": env.path("inspect-ca.key"),
                 "upstream_ca_file": ca_crt},
        credentials={"file": env.path("creds", "credentials.json")})
    d = env.sluiced(cfg)
    ctl = os.path.join(cfg["runtime_dir"], "control.sock")
    x = Execd(env, ctl).start()

    answers = []
    for body in ({"name": "npm-acme", "tenant": "acme", "hosts": ["npm.test"],
                  "inject": {"header": "Authorization",
                             "format": "Bearer {}"},
                  "value": NPM_VALUE},
                 {"name": "pypi-acme", "tenant": "acme",
                  "hosts": ["pypi.test"],
                  "inject": {"header": "Authorization", "format": "Basic"},
                  "value": PIP_VALUE}):
        r = api_unix(ctl, "POST", "/v1/credentials", body)
        check_eq(r.status, 201, "POST credential %s: %r" % (body["name"], r))
        answers.append(r.body.decode())
    r = api_unix(ctl, "POST", "/v1/credentials", {
        "name": "bad-basic", "tenant": "acme", "hosts": ["pypi.test"],
        "inject": {"header": "Authorization", "format": "Basic"},
        "value": "no-colon-here"})
    check_eq(r.status, 400, "a Basic value without user: %r" % r)
    creds = json.loads(api_unix(ctl, "GET", "/v1/credentials").body)
    answers.append(json.dumps(creds))
    ph = {c["name"]: own_placeholder(c["placeholder"], "pkg")
          for c in creds["credentials"]}

    npm_idx = "https://npm.test:%d/" % st["port"]
    pip_idx = "https://pypi.test:%d/simple/" % pyport
    # refused: a credential whose inject is not what the client sends,
    # an unknown "for", an index with a user-pass
    for cr, what in (([{"name": "npm-acme", "for": "pip"}], "npm's as pip"),
                     ([{"name": "pypi-acme", "for": "npm"}], "pip's as npm"),
                     ([{"name": "npm-acme", "for": "cargo"}], "for cargo"),
                     ([{"name": "npm-acme", "index": npm_idx}],
                      "index without for"),
                     ([{"name": "npm-acme", "for": "npm",
                        "index": "https://u:p@npm.test/"}], "user in index")):
        r = x.app("POST", "/v1/sandboxes", {"id": "bad", "tenant": "acme",
                                            "credentials": cr}, timeout=120)
        check_eq(r.status, 400, "create with %s: %r" % (what, r))
        answers.append(json.dumps(r.json))
    check_eq(x.sandboxes(), [], "nothing left by the refused creates")

    # a tenant's rule lets this sandbox publish to its registry
    r = api_unix(ctl, "POST", "/v1/rules", {
        "name": "acme-publish", "tenant": "acme", "hosts": ["npm.test"],
        "methods": ["PUT"], "action": "allow"})
    check_eq(r.status, 201, "POST /v1/rules (%r)" % r.body)
    more = {"backend": backend} if backend else {}
    r = x.app("POST", "/v1/sandboxes", dict(
        {"id": "probe", "tenant": "acme", "network": {"tier": "public"}},
        **more), timeout=180)
    if r.status == 503 and r.code() == "backend_unavailable":
        raise Skip("%s does not run here: %s" % (backend, r.json["error"]
                                                  ["message"]))
    check_eq(r.status, 201, "create a %s sandbox: %r" % (backend, r))
    check_eq(x.app("DELETE", "/v1/sandboxes/probe", timeout=120).status,
             200, "delete the probe")
    answers.append(json.dumps(create(
        x, "pkg", network={"tier": "registries"}, **more,
        credentials=[{"name": "npm-acme", "for": "npm", "index": npm_idx},
                     {"name": "pypi-acme", "for": "pip",
                      "index": pip_idx}])))

    def sh(cmd):
        o = ex(x, "pkg", {"shell": cmd, "timeout_s": 120}, timeout=150)
        answers.append(json.dumps(o))
        return o

    # the sandbox's view: placeholders only, its own files, 0600
    o = sh("env; echo ==; cat /run/sluice/npmrc; echo ==; "
           "cat /run/sluice/pip.conf; echo ==; "
           "python3 -c 'import os, sys\n"
           "for p in sys.argv[1:]: s = os.stat(p); "
           "print(s.st_uid, \"%o\" % (s.st_mode & 0o7777))' "
           "/run/sluice/npmrc /run/sluice/pip.conf; id -u")
    check_eq(o["exit_code"], 0, "the sandbox's view: %s" % out(o))
    envs, npmrc, pipconf, stats = o["stdout"].split("==\n")
    ev = dict(ln.split("=", 1) for ln in envs.splitlines() if "=" in ln)
    check_eq(ev.get("NPM_CONFIG_USERCONFIG"), "/run/sluice/npmrc",
             "npm's userconfig")
    check_eq(ev.get("PIP_CONFIG_FILE"), "/run/sluice/pip.conf",
             "pip's config file")
    check_eq(ev.get("SLUICE_CRED_NPM_ACME"), ph["npm-acme"], "npm's var")
    check_eq(ev.get("SLUICE_CRED_PYPI_ACME"), ph["pypi-acme"], "pip's var")
    check_eq(npmrc, "registry=%s\n//npm.test:%d/:_authToken=%s\n"
             % (npm_idx, st["port"], ph["npm-acme"]), "the npmrc")
    check_eq(pipconf, "[global]\nindex-url = https://sluice:%s@pypi.test:%d"
             "/simple/\n" % (ph["pypi-acme"].replace(":", "%3A"), pyport),
             "the pip.conf")
    lines = stats.split()
    uid = lines[-1]
    check_eq(lines[:4], [uid, "600", uid, "600"],
             "the files are the sandbox user's, 0600: %r" % stats)

    # unmodified pip install: the index and the wheel, each with the
    # real user:password upstream
    o = sh("python3 -m pip install --no-cache-dir --disable-pip-version-check"
           " --no-input --retries 0 --timeout 20 --target /workspace/site "
           "%s && test -f /workspace/site/%s/__init__.py" % (PKG, PKG))
    check_eq(o["exit_code"], 0, "pip install in the sandbox: %s" % out(o))
    check(pyst["seen"] and all(a == "Basic " + PIP_B64
                               for _, a in pyst["seen"]),
          "every request pip made arrived with the real user:password: %r"
          % pyst["seen"])
    check(any(p.endswith(".whl") for p, _ in pyst["seen"]),
          "the wheel came from the index: %r" % pyst["seen"])

    # unmodified npm install and npm publish
    o = sh("mkdir -p /workspace/proj && cd /workspace/proj && "
           "echo '{\"name\":\"app\",\"version\":\"1.0.0\","
           "\"private\":true}' > package.json && "
           "npm install --no-audit --no-fund --no-update-notifier "
           "--fetch-retries 0 %s && test -f node_modules/%s/index.js"
           % (NPM_PKG, NPM_PKG))
    check_eq(o["exit_code"], 0, "npm install in the sandbox: %s" % out(o))
    o = sh("mkdir -p /workspace/pub && cd /workspace/pub && "
           "echo '{\"name\":\"sluice-pub\",\"version\":\"1.0.0\","
           "\"license\":\"MIT\"}' > package.json && "
           "npm publish --no-update-notifier --fetch-retries 0")
    check_eq(o["exit_code"], 0, "npm publish in the sandbox: %s" % out(o))
    check(("PUT", "/sluice-pub") in st["seen"],
          "the registry took the publish: %r" % st["seen"])
    check(st["auth"] and all(a == "Bearer " + NPM_VALUE
                             for _, _, a in st["auth"]),
          "every request npm made arrived with the real token: %r"
          % st["auth"])
    check(any(m == "GET" and p.endswith(".tgz") for m, p, _ in st["auth"]),
          "the tarball came with the token: %r" % st["auth"])

    # the records name the credentials
    recs = [q for q in read_log(d.log_path) if q.get("event") == "decision"
            and q.get("inspected") is True and q.get("method") != "CONNECT"]
    for host, name in (("pypi.test", "pypi-acme"), ("npm.test", "npm-acme")):
        mine = [q for q in recs if q.get("host") == host]
        check(mine and all(q.get("credential") == name for q in mine),
              "%s's records name %s: %r" % (host, name, mine))

    # pip's placeholder in a Basic header to another host: removed there
    n = len(st["auth"])
    o = sh("curl -sS --max-time 20 -u \"sluice:$SLUICE_CRED_PYPI_ACME\" "
           "-o /dev/null -w '%%{http_code}' %s%s" % (npm_idx, NPM_PKG))
    check_eq(o["stdout"], "401", "the placeholder elsewhere: %s" % out(o))
    check_eq(st["auth"][n:], [("GET", "/" + NPM_PKG, None)],
             "npm.test saw no Authorization at all")
    last = [q for q in read_log(d.log_path) if q.get("event") == "decision"
            and q.get("method") == "GET" and q.get("host") == "npm.test"][-1]
    check(last.get("credential") is None and
          last.get("placeholders_removed") == 1,
          "its record: no credential, one placeholder removed: %r" % last)

    # no placeholder upstream, no value anywhere but the credentials file
    for _, a in pyst["seen"]:
        check("sluice-cred" not in (a or ""), "a placeholder upstream")
    for _, _, a in st["auth"]:
        check("sluice-cred" not in (a or ""), "a placeholder upstream")
    for a in answers:
        for v in (NPM_VALUE, PIP_PASS, PIP_B64):
            check(v not in a, "a value in an answer")
    check_eq(x.app("DELETE", "/v1/sandboxes/pkg", timeout=60).status, 200,
             "delete")
    no_value_anywhere(env, d, [NPM_VALUE, PIP_PASS, PIP_B64])
    for v in (NPM_VALUE, PIP_PASS, PIP_B64):
        check(v not in x.stderr(), "a value in sluice-execd's stderr")


if __name__ == "__main__":
    S.main()
