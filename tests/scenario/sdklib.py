"""The world the SDK test suites run in: the real sluiced and sluice-execd
(as root, as deployed), a loopback web server and a PyPI-like registry
behind sluiced's resolver map, and a test runner (pytest, node --test)
started as an UNPRIVILEGED user: nobody with the socket's group and the
app role's group on both daemons, as an app's service user would be.
TLS listeners of both daemons take bearer tokens (admin, app, an app
token bound to a tenant); the runner gets their addresses, tokens and CA
in SLUICE_TEST_* variables.  sluice-execd is execdlib's: its sandboxes
go at teardown even when it died, and nothing of them may be left.

The runner's own result decides: its counts are read from its report
(JUnit XML for pytest, TAP for node), no test run is a failure, and a
skipped test is a failure under SLUICE_TEST_STRICT=1."""

import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Skip, Fail, check, log, free_port,  # noqa: E402
                     BUILDDIR, SRCDIR, STRICT, api_unix)
import execdlib  # noqa: E402

EXECD = os.path.join(BUILDDIR, "sandbox-glue", "executor", "execd",
                     "sluice-execd")
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
    "broker_acme": "broker-acme-token-0123456789abcdef",
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
        # request rules and credentials take inspected hosts only; the
        # CA is made at start (no request to insp.test is ever made)
        inspect={"hosts": ["insp.test", "*.insp.test"],
                 "ca_cert": env.path("inspect-ca.pem"),
                 "ca_key": env.path("inspect-ca.key")},
        credentials={"file": env.path("creds", "credentials.json")},
        # socket_group takes a name only: the roles (gids) guard it
        control={"socket_mode": "0666", "app_gids": [G_APP],
                 "auditor_gids": [G_AUD],
                 "tcp": "127.0.0.1:%d" % ctl_port, "tls_cert": crt,
                 "tls_key": key,
                 "tokens": [{"name": "admin", "role": "admin",
                             "token_file": env.path("broker_admin.tok")},
                            {"name": "app", "role": "app",
                             "token_file": env.path("broker_app.tok")},
                            {"name": "acme", "role": "app",
                             "tenant": "acme",
                             "token_file": env.path("broker_acme.tok")}]})
    d = env.sluiced(cfg)
    ctl = os.path.join(cfg["runtime_dir"], "control.sock")
    os.chmod(cfg["runtime_dir"], 0o711)

    exec_port = free_port()
    x = execdlib.Execd(env, {
        "runtime_dir": env.path("xrun"),
        "state_dir": env.path("xstate"),
        "control_socket": ctl,
        "shim": SHIM,
        # no "tier": the daemon's default (off), as deployed; what
        # needs the network asks for its tier
        "uid_base": uid_base, "slots": 64,
        "socket": {"group": str(G_SOCK), "mode": "0660"},
        "roles": {"app": {"groups": [G_APP]},
                  "auditor": {"groups": [G_AUD]}},
        "max_file_bytes": 1 << 20,
        "ring_bytes": 4096,
        "log": {"path": env.path("xaudit", "execd.jsonl")},
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
                                    "execd", "openapi.json"), "openapi.json")):
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


def _first_lines(text, n=3, width=300):
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return " / ".join(lines[:n])[:width]


def junit_failures(path):
    """"file::case: message" of each failed or erroring case in pytest's
    JUnit XML (none when it is missing or unreadable)."""
    import xml.etree.ElementTree as ET
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return []
    out = []
    for tc in root.iter("testcase"):
        for kind in ("failure", "error"):
            for f in tc.findall(kind):
                where = (tc.get("classname") or "").replace(".", "/")
                where = "%s.py::%s" % (where, tc.get("name")) if where \
                    else tc.get("name")
                # the message attribute is pytest's one-line summary; the
                # text's last "file:line: Error" line says where
                text = f.text or ""
                loc = [ln.strip() for ln in text.splitlines()
                       if re.match(r"^\S+\.py:\d+: ", ln.strip())]
                msg = _first_lines(f.get("message") or text)
                out.append("%s: %s%s%s" % (
                    where, "" if kind == "failure" else "error: ", msg,
                    " (at %s)" % loc[-1].split(": ", 1)[0] if loc else ""))
    return out


def tap_failures(out):
    """"file > test > subtest: error (at location)" of each failed test
    in node --test's TAP output (subtests, not the parents that failed
    because of them)."""
    res = []
    stack = []          # (indent, name) of the subtests open
    said = []           # error lines printed since the last test
    lines = out.splitlines()
    i = 0
    for _ in range(len(lines) + 1):
        if i >= len(lines):
            break
        ln = lines[i]
        ind = len(ln) - len(ln.lstrip(" "))
        body = ln.strip()
        i += 1
        m = re.match(r"^# Subtest: (.*)$", body)
        if m:
            stack = [e for e in stack if e[0] < ind] + [(ind, m.group(1))]
            continue
        m = re.match(r"^# (\w*Error\b.*)$", body)
        if m:           # what a file that did not load printed
            said.append(m.group(1))
            continue
        m = re.match(r"^not ok \d+ - (.*?)(\s+# .*)?$", body)
        if not m:
            if re.match(r"^ok \d+ - ", body):
                stack = [e for e in stack if e[0] < ind]
                said = []
            continue
        path = [n for d, n in stack if d < ind] + [m.group(1)]
        stack = [e for e in stack if e[0] < ind]
        # the YAML block: "---" ... "..." two spaces further in
        info, key, block = {}, None, []
        if i < len(lines) and lines[i].strip() == "---":
            i += 1
            for _ in range(10000):
                if i >= len(lines) or lines[i].strip() == "...":
                    i += 1
                    break
                y = lines[i]
                yi = len(y) - len(y.lstrip(" "))
                i += 1
                if key is not None and (yi > ind + 2 or not y.strip()):
                    block.append(y.strip())
                    continue
                if key is not None:
                    info[key] = "\n".join(block)
                    key, block = None, []
                km = re.match(r"^(\w+): (.*)$", y.strip())
                if not km:
                    continue
                if km.group(2) in ("|-", "|", ">-", ">"):
                    key = km.group(1)
                else:
                    info[km.group(1)] = km.group(2).strip("'\"")
            if key is not None:
                info[key] = "\n".join(block)
        if info.get("failureType") == "subtestsFailed":
            said = []
            continue
        loc = info.get("location", "")
        err = info.get("error") or info.get("failureType") or "failed"
        if err == "test failed" and said:
            # a test file whose process failed: what it printed says why
            err = "%s: %s" % (err, said[-1])
        res.append("%s: %s%s" % (" > ".join(path), _first_lines(err),
                                 " (at %s)" % loc if loc else ""))
        said = []
    return res


def judge(what, rc, npass, nfail, nskip, failures=(), out="", logs=()):
    """Fail unless the runner passed and ran tests; skips fail when
    strict.  failures (the failed cases with their messages) are logged
    one a line and named in the failure, so that a CI log shows which
    case failed; without them the tail of the runner's output is.  On a
    failure the end of each file in logs (the daemons' logs) is shown
    too: the case's directory goes with the case."""
    log("%s: %d passed, %d failed, %d skipped (exit %d)" % (
        what, npass, nfail, nskip, rc))
    for f in failures:
        log("%s: FAILED %s" % (what, f))
    if (rc != 0 or nfail) and not failures and out:
        log("%s: the end of its output:\n%s" % (
            what, "\n".join(out.rstrip("\n").splitlines()[-40:])))
    if rc != 0 or nfail:
        for p in logs:
            try:
                with open(p, errors="replace") as f:
                    tail = f.read().splitlines()[-60:]
            except OSError as e:
                tail = ["(%s)" % e]
            log("%s: the end of %s:\n%s" % (what, os.path.basename(p),
                "\n".join(ln[:600] for ln in tail)))
    check(npass + nfail > 0, "%s ran no test (exit %d)" % (what, rc))
    check(rc == 0 and nfail == 0, "%s: %d failed (exit %d)%s" % (
        what, nfail, rc, ": " + "; ".join(failures) if failures else ""))
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
