"""The world the SDK test suites run in: the real sluiced and sluice-execd
(as root, as deployed), a loopback web server and a PyPI-like registry
behind sluiced's resolver map, and a test runner (pytest, node --test)
started as an UNPRIVILEGED user: nobody with the socket's group and the
app role's group on both daemons, as an app's service user would be.
TLS listeners of both daemons take bearer tokens (admin, app, an app
token bound to a tenant); the runner gets their addresses, tokens and CA
in SLUICE_TEST_* variables.

The runner's own result decides: its counts are read from its report
(JUnit XML for pytest, TAP for node), no test run is a failure, and a
skipped test is a failure under SLUICE_TEST_STRICT=1."""

import json
import os
import pwd
import shutil
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Skip, Fail, check, log, free_port,  # noqa: E402
                     BUILDDIR, SRCDIR, STRICT, VERBOSE, api_unix)

EXECD = os.path.join(BUILDDIR, "sandbox-glue", "executor", "sluice-execd")
SHIM = os.path.abspath(os.path.join(BUILDDIR, "sandbox-glue", "shim",
                                    "sluice-shim"))
NOBODY = 65534
G_SOCK, G_APP, G_AUD = 4250, 4252, 4253
TOKENS = {
    "exec_admin": "exec-admin-token-0123456789abcdef",
    "exec_app": "exec-app-token-0123456789abcdef",
    "exec_acme": "exec-acme-token-0123456789abcdef",
    "broker_admin": "broker-admin-token-0123456789abcdef",
    "broker_app": "broker-app-token-0123456789abcdef",
}


def preflight():
    if os.geteuid() != 0:
        raise Skip("needs root (sandboxes, and a client of another uid)")
    if not os.access(EXECD, os.X_OK):
        raise Skip("sluice-execd not built")
    r = subprocess.run(["unshare", "-U", "-m", "-p", "-n", "-f", "true"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        raise Skip("no user namespaces: %s" % r.stderr.decode().strip())


def as_nobody(groups):
    def drop():
        os.setgroups(groups)
        os.setgid(NOBODY)
        os.setuid(NOBODY)
    return drop


def runs_as_nobody(argv):
    """argv exits 0 when run as nobody (an interpreter nobody can use)."""
    try:
        r = subprocess.run(argv, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=60,
                           preexec_fn=as_nobody([]), cwd="/")
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


def make_tls(directory):
    """A self-signed certificate for localhost and 127.0.0.1."""
    key = os.path.join(directory, "tls.key")
    crt = os.path.join(directory, "tls.crt")
    r = subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
         "-keyout", key, "-out", crt, "-days", "2", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,DNS:hook.test,IP:127.0.0.1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    if r.returncode != 0:
        raise Skip("openssl req: %s" % r.stderr.decode(errors="replace"))
    os.chmod(crt, 0o644)
    return crt, key


class WebServer:
    """http.server on 127.0.0.1 serving a directory (the chats' web)."""

    def __init__(self, root):
        import functools
        import http.server
        self.root = root
        os.makedirs(root, exist_ok=True)

        class H(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *a):
                pass
        self.srv = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), functools.partial(H, directory=root))
        self.port = self.srv.server_address[1]
        self.t = threading.Thread(target=self.srv.serve_forever,
                                  kwargs={"poll_interval": 0.2}, daemon=True)
        self.t.start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


class Execd:
    def __init__(self, env, conf):
        self.env = env
        self.conf = conf
        self.path = env.path("execd.json")
        self.lines = []
        self.ready = threading.Event()
        self.proc = None
        self.sock = os.path.join(conf["runtime_dir"], "exec.sock")

    def start(self):
        with open(self.path, "w") as f:
            json.dump(self.conf, f, indent=1)
        self.proc = subprocess.Popen([EXECD, "-c", self.path, "-v"],
                                     stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        threading.Thread(target=self._drain, daemon=True).start()
        if not self.ready.wait(15):
            raise Fail("sluice-execd not ready:\n%s" % self.stderr())
        self.env.closers.append(self.stop)

    def _drain(self):
        for _ in range(10 ** 7):
            line = self.proc.stderr.readline()
            if not line:
                return
            t = line.decode("utf-8", "replace").rstrip("\n")
            if len(self.lines) < 50000:
                self.lines.append(t)
            if VERBOSE:
                log("[execd] %s" % t)
            if "ready:" in t:
                self.ready.set()

    def stderr(self):
        return "\n".join(self.lines[-60:])

    def stop(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        # what a failed run left behind goes with the daemon's state dir;
        # sandboxes are deleted by root first so no mount stays
        try:
            import socket as so
            s = so.socket(so.AF_UNIX, so.SOCK_STREAM)
            s.settimeout(30)
            s.connect(self.sock)
            s.sendall(b"GET /v1/sandboxes HTTP/1.1\r\nHost: x\r\n"
                      b"Connection: close\r\n\r\n")
            data = b""
            for _ in range(1000):
                d = s.recv(65536)
                if not d:
                    break
                data += d
            s.close()
            body = data.split(b"\r\n\r\n", 1)[1]
            if b"chunked" in data.split(b"\r\n\r\n", 1)[0].lower():
                body = body.split(b"\r\n", 1)[1].rsplit(b"\r\n0\r\n", 1)[0]
            for b in json.loads(body).get("sandboxes", []):
                log("sluice-execd: sandbox %s left by the tests: deleting"
                    % b["id"])
                s = so.socket(so.AF_UNIX, so.SOCK_STREAM)
                s.settimeout(60)
                s.connect(self.sock)
                s.sendall(("DELETE /v1/sandboxes/%s HTTP/1.1\r\nHost: x\r\n"
                           "Connection: close\r\n\r\n" % b["id"]).encode())
                for _ in range(1000):
                    if not s.recv(65536):
                        break
                s.close()
        except (OSError, ValueError, IndexError) as e:
            log("listing sandboxes at the end: %r" % e)
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        if self.proc.returncode not in (0, None):
            log("sluice-execd exited %s:\n%s" % (self.proc.returncode,
                                                 self.stderr()))


def world(env, uid_base):
    """Start everything; returns the SLUICE_TEST_* environment.  uid_base
    keeps this executor's sandbox uids apart from those of another one
    that make -j may run at the same time."""
    preflight()
    os.chmod(os.path.dirname(env.dir), 0o711)
    os.chmod(env.dir, 0o711)
    crt, key = make_tls(env.dir)
    for name, tok in TOKENS.items():
        p = env.path(name + ".tok")
        with open(p, "w") as f:
            f.write(tok + "\n")
        os.chmod(p, 0o600)

    web = WebServer(env.path("web"))
    env.closers.append(web.close)
    for name in ("index.html", "one", "two", "late"):
        with open(os.path.join(web.root, name), "w") as f:
            f.write("hello from web.test\n")
    sys.path.insert(0, os.path.join(SRCDIR, "demo"))
    import registry
    reg_root = env.path("registry")
    registry.make_index(reg_root)
    reg = WebServer(reg_root)
    env.closers.append(reg.close)

    ctl_port = free_port()
    hook_port = free_port()
    secret = env.path("webhook.secret")
    with open(secret, "w") as f:
        f.write("sdk-webhook-secret-0123456789\n")
    os.chmod(secret, 0o600)
    cfg = env.config(
        webhook={"url": "https://hook.test:%d/hook" % hook_port,
                 "secret_file": secret, "ca_file": crt,
                 "hosts": {"hook.test": ["127.0.0.1"]}},
        sessions=[], ceiling="public",
        ports={"registries": [80, 443, reg.port],
               "public": [80, 443, web.port, reg.port]},
        dns={"hosts": {"web.test": ["127.0.0.1"], "pypi.org": ["127.0.0.1"],
                       "other.test": ["127.0.0.1"]}, "timeout_ms": 2000},
        prompt={"timeout_s": 60, "deny_quiet_s": 0},
        # socket_group takes a name only: the roles (gids) guard it
        control={"socket_mode": "0666", "app_gids": [G_APP],
                 "auditor_gids": [G_AUD],
                 "tcp": "127.0.0.1:%d" % ctl_port, "tls_cert": crt,
                 "tls_key": key,
                 "tokens": [{"name": "admin", "role": "admin",
                             "token_file": env.path("broker_admin.tok")},
                            {"name": "app", "role": "app",
                             "token_file": env.path("broker_app.tok")}]})
    d = env.sluiced(cfg)
    ctl = os.path.join(cfg["runtime_dir"], "control.sock")
    os.chmod(cfg["runtime_dir"], 0o711)

    exec_port = free_port()
    x = Execd(env, {
        "runtime_dir": env.path("xrun"),
        "state_dir": env.path("xstate"),
        "control_socket": ctl,
        "shim": SHIM,
        "tier": "registries",
        "uid_base": uid_base, "slots": 64,
        "socket": {"group": str(G_SOCK), "mode": "0660"},
        "roles": {"app": {"groups": [G_APP]},
                  "auditor": {"groups": [G_AUD]}},
        "max_file_bytes": 1 << 20,
        "ring_bytes": 4096,
        "limits_max": {"timeout_s": 300, "memory_mb": 4096},
        "quotas": {"per_user": 3, "per_tenant": 20, "sandboxes": 40},
        "tcp": {"listen": "127.0.0.1:%d" % exec_port, "tls_cert": crt,
                "tls_key": key,
                "tokens": [{"name": "admin", "role": "admin",
                            "file": env.path("exec_admin.tok")},
                           {"name": "app", "role": "app",
                            "file": env.path("exec_app.tok")},
                           {"name": "acme", "role": "app", "tenant": "acme",
                            "file": env.path("exec_acme.tok")}]},
    })
    x.start()
    check(api_unix(ctl, "GET", "/v1/health").status == 200, "sluiced health")

    home = env.path("home")
    os.makedirs(home)
    os.chown(home, NOBODY, NOBODY)
    for src, name in ((key, "hook.key"), (secret, "webhook.secret"),
                      (os.path.join(SRCDIR, "sandbox-glue", "executor",
                                    "openapi.json"), "openapi.json")):
        shutil.copy(src, os.path.join(home, name))
        os.chown(os.path.join(home, name), NOBODY, NOBODY)
    tokfile = env.path("tokens.json")
    with open(tokfile, "w") as f:
        json.dump(TOKENS, f)
    os.chown(tokfile, NOBODY, NOBODY)
    os.chmod(tokfile, 0o600)
    e = {
        "SLUICE_TEST_EXEC": x.sock,
        "SLUICE_TEST_BROKER": ctl,
        "SLUICE_TEST_EXEC_URL": "https://127.0.0.1:%d" % exec_port,
        "SLUICE_TEST_BROKER_URL": "https://127.0.0.1:%d" % ctl_port,
        "SLUICE_TEST_CA": crt,
        "SLUICE_TEST_TOKENS": tokfile,
        "SLUICE_TEST_WEB": "http://web.test:%d/" % web.port,
        "SLUICE_TEST_WEB_ROOT": web.root,
        "SLUICE_TEST_INDEX": "http://pypi.org:%d/simple/" % reg.port,
        "SLUICE_TEST_STATE": x.conf["state_dir"],
        "SLUICE_TEST_TMP": home,
        "SLUICE_TEST_OPENAPI": os.path.join(home, "openapi.json"),
        "SLUICE_TEST_HOOK_PORT": str(hook_port),
        "SLUICE_TEST_HOOK_KEY": os.path.join(home, "hook.key"),
        "SLUICE_TEST_HOOK_SECRET": os.path.join(home, "webhook.secret"),
    }
    return d, x, e, home


def run_runner(env, argv, extra_env, home, cwd, timeout=480):
    """argv as nobody in the app's groups; returns (rc, output)."""
    envp = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home,
            "LANG": "C.UTF-8", "TMPDIR": home,
            "PYTHONDONTWRITEBYTECODE": "1", "NO_COLOR": "1"}
    envp.update(extra_env)
    log("runner (as nobody, groups %d %d): %s" % (G_SOCK, G_APP,
                                                    " ".join(argv)))
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         env=envp, cwd=cwd,
                         preexec_fn=as_nobody([G_SOCK, G_APP]))
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate(timeout=10)
        log(out.decode("utf-8", "replace"))
        raise Fail("the runner took over %ds" % timeout)
    text = out.decode("utf-8", "replace")
    sys.stdout.write(text)
    sys.stdout.flush()
    log("runner exited %d after %.0fs" % (p.returncode,
                                          time.monotonic() - t0))
    return p.returncode, text


def judge(what, rc, npass, nfail, nskip):
    """Fail unless the runner passed and ran tests; skips fail when
    strict."""
    log("%s: %d passed, %d failed, %d skipped (exit %d)" % (
        what, npass, nfail, nskip, rc))
    check(npass + nfail > 0, "%s ran no test (exit %d)" % (what, rc))
    check(rc == 0 and nfail == 0, "%s: %d failed (exit %d)" % (what, nfail,
                                                              rc))
    if nskip and STRICT:
        raise Fail("%s: %d skipped, and SLUICE_TEST_STRICT=1" % (what, nskip))


def copy_tree(src, dst):
    """A copy nobody can read (and the runner may write its caches in)."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(
        "__pycache__", "node_modules", "*.tgz", ".pytest_cache"))
    for root, dirs, files in os.walk(dst):
        os.chown(root, NOBODY, NOBODY)
        for f in files:
            os.chown(os.path.join(root, f), NOBODY, NOBODY)
    return dst


def nobody_name():
    return pwd.getpwuid(NOBODY).pw_name
