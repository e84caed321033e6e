#!/usr/bin/env python3
"""Request rules with real git over inspected HTTPS: a `git http-backend`
CGI upstream on loopback (HTTPS, a test CA, named by dns.hosts, push
enabled on the server's side), git through sluiced as its proxy.  git
clone and fetch work; git push is refused by the built-in
git-receive-pack rule (403 rule_denied) and the upstream never sees it;
with an admin's allow rule for the repository, the same push goes
through."""

import json
import os
import shutil
import ssl
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, check, check_eq, read_log, require_tool,  # noqa: E402
                     wait_until)
from t_inspect import test_ca  # noqa: E402

S = Suite("t_rules_git", time_limit=300)

BACKEND = "/usr/lib/git-core/git-http-backend"


class CGI(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    root = None
    seen = None

    def log_message(self, *a):
        pass

    def _run(self):
        path, _, query = self.path.partition("?")
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        self.seen.append((self.command, self.path))
        env = {"GIT_PROJECT_ROOT": self.root, "GIT_HTTP_EXPORT_ALL": "1",
               "REQUEST_METHOD": self.command, "PATH_INFO": path,
               "QUERY_STRING": query, "REMOTE_ADDR": "127.0.0.1",
               "CONTENT_TYPE": self.headers.get("Content-Type", ""),
               "CONTENT_LENGTH": str(len(body)), "PATH": "/usr/bin:/bin"}
        if self.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
        if self.headers.get("Git-Protocol"):
            env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
        p = subprocess.run([BACKEND], input=body, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=60)
        head, _, out = p.stdout.partition(b"\r\n\r\n")
        if not _:
            head, _, out = p.stdout.partition(b"\n\n")
        status = 200
        hdrs = []
        for line in head.decode("latin-1").splitlines():
            k, _, v = line.partition(":")
            if k.lower() == "status":
                status = int(v.strip().split()[0])
            elif k:
                hdrs.append((k, v.strip()))
        self.send_response(status)
        for k, v in hdrs:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = _run
    do_POST = _run


def git(*args, cwd=None, env=None):
    return subprocess.run(["git"] + list(args), cwd=cwd, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=60)


def setup(env, rules=None):
    require_tool("git")
    if not os.access(BACKEND, os.X_OK):
        from harness import Skip
        raise Skip("no git-http-backend")
    ca_crt, crt, key = test_ca(env, names=("git.test",))
    root = env.path("srv")
    os.makedirs(root)
    r = git("init", "-q", "--bare", "-b", "main",
            os.path.join(root, "repo.git"))
    check_eq(r.returncode, 0, "git init --bare")
    git("-C", os.path.join(root, "repo.git"), "config", "http.receivepack",
        "true")
    # a first commit, pushed locally
    work = env.path("seed")
    git("init", "-q", "-b", "main", work)
    with open(os.path.join(work, "a.txt"), "w") as f:
        f.write("one\n")
    genv = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t",
                GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t",
                HOME=env.dir)
    git("add", ".", cwd=work, env=genv)
    check_eq(git("commit", "-qm", "one", cwd=work, env=genv).returncode, 0,
             "seed commit")
    check_eq(git("push", "-q", os.path.join(root, "repo.git"), "main",
                 cwd=work, env=genv).returncode, 0, "seed push")

    seen = []
    handler = type("H", (CGI,), {"root": root, "seen": seen})
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(crt, key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    # closers run last first: stop the loop, then close
    env.closers.append(srv.server_close)
    env.closers.append(srv.shutdown)
    port = srv.server_address[1]
    cfg = env.config(
        sessions=[{"id": "s1", "tenant": "acme", "user": "alice",
                   "tier": "public", "source": "127.0.0.1"}],
        ports=env.ports(port),
        dns={"hosts": {"git.test": ["127.0.0.1"]}},
        tls={"sni_ports": [443, port]},
        inspect={"hosts": ["git.test"],
                 "ca_cert": env.path("inspect-ca.pem"),
                 "ca_key": env.path("inspect-ca.key"),
                 "upstream_ca_file": ca_crt},
        rules=rules or [])
    d = env.sluiced(cfg)
    genv.update({"GIT_SSL_CAINFO": cfg["inspect"]["ca_cert"],
                 "GIT_TERMINAL_PROMPT": "0",
                 "https_proxy": d.proxy_url(), "HTTPS_PROXY": d.proxy_url()})
    for k in ("no_proxy", "NO_PROXY"):
        genv.pop(k, None)
    url = "https://git.test:%d/repo.git" % port
    return d, url, genv, seen, work


def clone_change(env, url, genv, name):
    dst = env.path(name)
    r = git("-c", "http.proxy=" + genv["https_proxy"], "clone", "-q", url,
            dst, env=genv)
    check_eq(r.returncode, 0, "git clone through sluiced: %s"
             % r.stderr.decode(errors="replace"))
    check(os.path.exists(os.path.join(dst, "a.txt")), "cloned content")
    with open(os.path.join(dst, "b.txt"), "w") as f:
        f.write(name + "\n")
    git("add", ".", cwd=dst, env=genv)
    check_eq(git("commit", "-qm", name, cwd=dst, env=genv).returncode, 0,
             "commit")
    return dst


@S.case
def push_refused_fetch_allowed(env):
    d, url, genv, seen, _ = setup(env)
    dst = clone_change(env, url, genv, "c1")
    r = git("-c", "http.proxy=" + genv["https_proxy"], "fetch", "-q",
            cwd=dst, env=genv)
    check_eq(r.returncode, 0, "git fetch")
    r = git("-c", "http.proxy=" + genv["https_proxy"], "push", "origin",
            "HEAD:main", cwd=dst, env=genv)
    check(r.returncode != 0, "git push refused")
    check(b"403" in r.stderr, "git says 403: %r" % r.stderr)
    check(not any("receive-pack" in p for _, p in seen),
          "the upstream never saw the push: %r" % seen)
    check(any("git-upload-pack" in p for _, p in seen), "fetches went up")
    wait_until(lambda: [x for x in read_log(d.log_path)
                        if x.get("reason") == "rule_denied" and
                        x.get("request_rule") == "builtin:git-receive-pack"],
               5, what="the record of the refused push")
    log = subprocess.run(["git", "--git-dir", os.path.join(
        env.path("srv"), "repo.git"), "log", "--format=%s", "main"],
        stdout=subprocess.PIPE).stdout.decode().split()
    check_eq(log, ["one"], "the server's history is unchanged")


@S.case
def push_allowed_by_a_rule(env):
    d, url, genv, seen, _ = setup(env, rules=[
        {"name": "push-repo", "hosts": ["git.test"],
         "paths": ["/repo.git/*"], "action": "allow"}])
    dst = clone_change(env, url, genv, "c2")
    r = git("-c", "http.proxy=" + genv["https_proxy"], "push", "-q",
            "origin", "HEAD:main", cwd=dst, env=genv)
    check_eq(r.returncode, 0, "git push allowed by the rule: %s"
             % r.stderr.decode(errors="replace"))
    log = subprocess.run(["git", "--git-dir", os.path.join(
        env.path("srv"), "repo.git"), "log", "--format=%s", "main"],
        stdout=subprocess.PIPE).stdout.decode().split()
    check_eq(log, ["c2", "one"], "the push landed")
    check([x for x in read_log(d.log_path)
           if x.get("request_rule") == "push-repo" and
           x.get("decision") == "allow" and
           "git-receive-pack" in (x.get("path") or "")],
          "records name the rule that allowed the push")
    shutil.rmtree(dst, ignore_errors=True)


if __name__ == "__main__":
    S.main()
