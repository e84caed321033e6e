#!/usr/bin/env python3
"""Real pip and real npm through inspected registries (issue 23): a
PyPI-like simple index and an npm registry stand-in, HTTPS on loopback
with a test CA (named through dns.hosts, verified by sluiced through
inspect.upstream_ca_file), both in inspect.hosts; the clients trust
only sluiced's inspection CA.  pip install and npm install pass, each
of their requests decided and logged on its own (inspected records
with method and path); a request rule added through the control API
for the tenant denies PUT on the npm registry, so npm publish fails
with 403 naming the rule and the registry never sees the PUT; with the
rule deleted, the built-in read-only rule of the registry list still
refuses it.  in_a_sandbox: the same from inside a real sandbox of
sluice-execd (needs root and user namespaces, else 77)."""

import hashlib
import http.server
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, Skip, check, check_eq, read_log,  # noqa: E402
                     api_unix, wait_until)
from t_inspect import test_ca  # noqa: E402
from t_clients import pip_available, serve  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "demo"))
from registry import PKG, make_index  # noqa: E402

S = Suite("t_pkg_inspect", time_limit=500)

NPM_PKG = "sluice-left-pad"


def npm_tarball(version):
    """An npm package tarball (package/package.json, package/index.js)."""
    files = {
        "package/package.json": json.dumps({
            "name": NPM_PKG, "version": version, "main": "index.js",
            "license": "MIT"}).encode(),
        "package/index.js": b"module.exports = (s, n) => "
                            b"String(s).padStart(n);\n",
    }
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data in files.items():
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            ti.mtime = 0
            ti.mode = 0o644
            tf.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


class NpmRegistry(http.server.BaseHTTPRequestHandler):
    """GET /<pkg> (the packument), GET /<pkg>/-/<pkg>-<v>.tgz, and PUT
    /<pkg> (a publish: noted, answered 201)."""
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _send(self, status, body, ctype="application/json"):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        st = self.server.st
        st["seen"].append(("GET", self.path))
        tgz = st["tgz"]
        if self.path in ("/" + NPM_PKG, "/" + NPM_PKG + "/"):
            base = "https://npm.test:%d" % st["port"]
            doc = {"name": NPM_PKG, "dist-tags": {"latest": "1.0.0"},
                   "versions": {"1.0.0": {
                       "name": NPM_PKG, "version": "1.0.0",
                       "main": "index.js",
                       "dist": {
                           "tarball": "%s/%s/-/%s-1.0.0.tgz" % (
                               base, NPM_PKG, NPM_PKG),
                           "shasum": hashlib.sha1(tgz).hexdigest(),
                           "integrity": st["integrity"]}}}}
            self._send(200, json.dumps(doc).encode())
        elif self.path == "/%s/-/%s-1.0.0.tgz" % (NPM_PKG, NPM_PKG):
            self._send(200, tgz, "application/octet-stream")
        else:
            self._send(404, b'{"error":"not found"}')

    def do_PUT(self):
        n = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(n)
        self.server.st["seen"].append(("PUT", self.path))
        self._send(201, b'{"ok":true}')


def npm_serve(env, crt, key, handler=None):
    import base64
    import ssl
    tgz = npm_tarball("1.0.0")
    st = {"seen": [], "tgz": tgz, "integrity": "sha512-" + base64.b64encode(
        hashlib.sha512(tgz).digest()).decode()}
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                          handler or NpmRegistry)
    srv.daemon_threads = True
    srv.st = st
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(crt, key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    st["port"] = srv.server_address[1]
    t = threading.Thread(target=srv.serve_forever,
                         kwargs={"poll_interval": 0.1}, daemon=True)
    t.start()

    def close():
        srv.shutdown()
        srv.server_close()
    env.closers.append(close)
    return st


def clean_env(env, home):
    """The machine's settings for pip and npm must not decide what the
    test sees: no PIP_* or npm_config_*, no CA bundles, a fresh HOME."""
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("PIP_", "npm_config_", "NPM_CONFIG_"))
         and k not in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
                       "SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS",
                       "HTTP_PROXY", "HTTPS_PROXY", "http_proxy",
                       "https_proxy", "NO_PROXY", "no_proxy")}
    os.makedirs(home, exist_ok=True)
    e["HOME"] = home
    e["PIP_CONFIG_FILE"] = os.devnull
    return e


def setup(env, pyport, npmport, ca_crt):
    cfg = env.config(
        sessions=[{"id": "pkg", "tenant": "acme", "user": "alice",
                   "tier": "registries", "source": "127.0.0.1"}],
        ceiling="registries",
        registries=["pypi.test", "npm.test"],
        ports={"registries": [443, 80, pyport, npmport],
               "public": [443, 80]},
        allow_cidrs=["127.0.0.1/32"],
        dns={"hosts": {"pypi.test": ["127.0.0.1"],
                       "npm.test": ["127.0.0.1"]}},
        tls={"sni_ports": [443, pyport, npmport]},
        inspect={"hosts": ["pypi.test", "npm.test"],
                 "ca_cert": env.path("inspect-ca.pem"),
                 "ca_key": env.path("inspect-ca.key"),
                 "upstream_ca_file": ca_crt})
    d = env.sluiced(cfg)
    d.ctl = os.path.join(cfg["runtime_dir"], "control.sock")
    return d


def inspected(d, host, **match):
    return [x for x in read_log(d.log_path) if x.get("event") == "decision"
            and x.get("host") == host and x.get("inspected") is True
            and all(x.get(k) == v for k, v in match.items())]


def npm(env, d, ev, proxy, cwd, *args, timeout=180):
    cmd = ["npm", "--registry", "https://npm.test:%d/" % d.npm["port"],
           "--proxy", proxy, "--https-proxy", proxy,
           "--cafile", d.config["inspect"]["ca_cert"],
           "--cache", env.path("npm-cache"), "--userconfig",
           env.path("npmrc"), "--no-audit", "--no-fund",
           "--no-update-notifier", "--fetch-retries", "0",
           "--loglevel", "http"] + list(args)
    return subprocess.run(cmd, cwd=cwd, env=ev, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                          timeout=timeout)


def out(r):
    return (r.stdout.decode(errors="replace")[-1500:] + "\n" +
            r.stderr.decode(errors="replace")[-1500:])


@S.case
def pip_and_npm_install_publish_refused(env):
    pip_available()
    if shutil.which("npm") is None:
        raise Skip("npm is not installed (apt-get install npm)")
    ca_crt, crt, key = test_ca(env, names=("pypi.test", "npm.test"))
    root = env.path("www")
    make_index(root)
    pyport = serve(env, root, tls=(crt, key))
    st = npm_serve(env, crt, key)
    d = setup(env, pyport, st["port"], ca_crt)
    d.npm = st
    proxy = "http://127.0.0.1:%d" % d.tcp_addr[1]
    home = env.path("home")
    ev = clean_env(env, home)
    with open(env.path("npmrc"), "w") as f:
        f.write("//npm.test:%d/:_authToken=sluice-test-token\n" % st["port"])

    # pip: the index and the wheel through the inspected tunnel, trusting
    # only sluiced's inspection CA
    target = env.path("site")
    r = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-cache-dir",
         "--disable-pip-version-check", "--no-input", "--retries", "0",
         "--timeout", "20", "--proxy", proxy, "--index-url",
         "https://pypi.test:%d/simple/" % pyport,
         "--cert", d.config["inspect"]["ca_cert"], "--target", target, PKG],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL, timeout=180, env=ev)
    check(r.returncode == 0, "pip install: %s", out(r))
    check(os.path.exists(os.path.join(target, PKG, "__init__.py")),
          "pip installed nothing in %s" % target)
    wait_until(lambda: inspected(d, "pypi.test", method="GET",
                                 decision="allow"), 5,
               what="pip's inspected GET records")
    paths = [x.get("path") for x in inspected(d, "pypi.test", method="GET")]
    check(any(p.startswith("/simple/") for p in paths) and
          any(p.endswith(".whl") for p in paths),
          "pip's index and wheel requests each logged: %r" % paths)

    # the rule, through the control API, for this tenant
    r = api_unix(d.ctl, "POST", "/v1/rules", {
        "name": "no-npm-publish", "tenant": "acme", "hosts": ["npm.test"],
        "methods": ["PUT"], "action": "deny"})
    check_eq(r.status, 201, "POST /v1/rules (%r)" % r.body)

    # npm install: the packument and the tarball, GETs, pass
    proj = env.path("proj")
    os.makedirs(proj)
    with open(os.path.join(proj, "package.json"), "w") as f:
        json.dump({"name": "app", "version": "1.0.0", "private": True}, f)
    r = npm(env, d, ev, proxy, proj, "install", NPM_PKG)
    check(r.returncode == 0, "npm install: %s", out(r))
    check(os.path.exists(os.path.join(proj, "node_modules", NPM_PKG,
                                      "index.js")),
          "npm installed nothing: %s" % out(r))
    check(("GET", "/%s/-/%s-1.0.0.tgz" % (NPM_PKG, NPM_PKG)) in st["seen"],
          "the tarball came from the registry: %r" % st["seen"])
    check(inspected(d, "npm.test", method="GET", decision="allow"),
          "npm's inspected GET records")

    # npm publish: PUT refused by the tenant's rule, never upstream
    pub = env.path("pub")
    os.makedirs(pub)
    with open(os.path.join(pub, "package.json"), "w") as f:
        json.dump({"name": "sluice-leak", "version": "1.0.0",
                   "license": "MIT"}, f)
    with open(os.path.join(pub, "index.js"), "w") as f:
        f.write("module.exports = 'workspace secrets';\n")
    r = npm(env, d, ev, proxy, pub, "publish")
    check(r.returncode != 0, "npm publish went through: %s" % out(r))
    check(b"403" in r.stderr + r.stdout, "npm shows the 403: %s" % out(r))
    check(not [s for s in st["seen"] if s[0] == "PUT"],
          "the registry saw a PUT: %r" % st["seen"])
    recs = inspected(d, "npm.test", method="PUT")
    check(recs and all(x.get("reason") == "rule_denied" and
                       x.get("request_rule") == "no-npm-publish"
                       for x in recs),
          "the PUT's record names the rule: %r" % recs)

    # without the tenant's rule, the registry list is still read-only
    r = api_unix(d.ctl, "DELETE", "/v1/rules/no-npm-publish")
    check_eq(r.status, 200, "DELETE the rule")
    r = npm(env, d, ev, proxy, pub, "publish")
    check(r.returncode != 0, "npm publish went through: %s" % out(r))
    check(not [s for s in st["seen"] if s[0] == "PUT"],
          "the registry saw a PUT: %r" % st["seen"])
    recs = inspected(d, "npm.test", method="PUT",
                     request_rule="builtin:registries-read-only")
    check(recs and recs[0].get("reason") == "rule_denied",
          "the built-in rule refused it: %r" % recs)


@S.case
def in_a_sandbox(env):
    """The same inside a real sandbox of sluice-execd: its pip and npm
    take the proxy and the CA bundle (the inspection CA) from the
    environment the executor gives every command, with no flag."""
    from t_execd import create, ex, preflight, Execd, _backend
    preflight()
    if shutil.which("npm") is None:
        raise Skip("npm is not installed (apt-get install npm)")
    os.chmod(os.path.dirname(env.dir), 0o711)
    os.chmod(env.dir, 0o711)
    ca_crt, crt, key = test_ca(env, names=("pypi.test", "npm.test"))
    root = env.path("www")
    make_index(root)
    pyport = serve(env, root, tls=(crt, key))
    st = npm_serve(env, crt, key)
    cfg = env.config(
        sessions=[], ceiling="public", registries=["pypi.test", "npm.test"],
        ports=env.ports(pyport, st["port"]),
        dns={"hosts": {"pypi.test": ["127.0.0.1"],
                       "npm.test": ["127.0.0.1"]}},
        tls={"sni_ports": [443, pyport, st["port"]]},
        inspect={"hosts": ["pypi.test", "npm.test"],
                 "ca_cert": env.path("inspect-ca.pem"),
                 "ca_key": env.path("inspect-ca.key"),
                 "upstream_ca_file": ca_crt})
    d = env.sluiced(cfg)
    ctl = os.path.join(cfg["runtime_dir"], "control.sock")
    xo = {"backend": _backend["name"]} if _backend["name"] else {}
    x = Execd(env, ctl, **xo).start()
    r = api_unix(ctl, "POST", "/v1/rules", {
        "name": "no-npm-publish", "tenant": "acme", "hosts": ["npm.test"],
        "methods": ["PUT"], "action": "deny"})
    check_eq(r.status, 201, "POST /v1/rules (%r)" % r.body)
    create(x, "pkg", network={"tier": "registries"})

    def sh(cmd):
        return ex(x, "pkg", {"shell": cmd, "timeout_s": 120}, timeout=150)

    o = sh("python3 -m pip install --no-cache-dir --disable-pip-version-check"
           " --no-input --retries 0 --timeout 20 --index-url "
           "https://pypi.test:%d/simple/ --target /workspace/site %s && "
           "test -f /workspace/site/%s/__init__.py"
           % (pyport, PKG, PKG))
    check_eq(o["exit_code"], 0, "pip install in the sandbox: %s"
             % (o["stdout"][-800:] + o["stderr"][-800:]))
    reg = "https://npm.test:%d/" % st["port"]
    o = sh("mkdir -p /workspace/proj && cd /workspace/proj && "
           "echo '{\"name\":\"app\",\"version\":\"1.0.0\","
           "\"private\":true}' > package.json && "
           "npm install --registry %s --no-audit --no-fund "
           "--no-update-notifier --fetch-retries 0 %s && "
           "test -f node_modules/%s/index.js" % (reg, NPM_PKG, NPM_PKG))
    check_eq(o["exit_code"], 0, "npm install in the sandbox: %s"
             % (o["stdout"][-800:] + o["stderr"][-800:]))
    o = sh("mkdir -p /workspace/pub && cd /workspace/pub && "
           "echo '{\"name\":\"sluice-leak\",\"version\":\"1.0.0\","
           "\"license\":\"MIT\"}' > package.json && "
           "echo '//npm.test:%d/:_authToken=t0ken' > .npmrc && "
           "npm publish --registry %s --no-update-notifier "
           "--fetch-retries 0" % (st["port"], reg))
    check(o["exit_code"] != 0, "npm publish went through in the sandbox")
    check("403" in o["stdout"] + o["stderr"], "npm shows the 403: %s"
          % (o["stdout"][-800:] + o["stderr"][-800:]))
    check(not [q for q in st["seen"] if q[0] == "PUT"],
          "the registry saw a PUT: %r" % st["seen"])
    recs = [q for q in read_log(d.log_path) if q.get("event") == "decision"
            and q.get("host") == "npm.test" and q.get("method") == "PUT"]
    check(recs and all(q.get("request_rule") == "no-npm-publish" and
                       q.get("inspected") is True for q in recs),
          "the PUT's inspected record names the rule: %r" % recs)
    check(inspected(d, "pypi.test", method="GET", decision="allow") and
          inspected(d, "npm.test", method="GET", decision="allow"),
          "the installs' requests, inspected and logged")


if __name__ == "__main__":
    S.main()
