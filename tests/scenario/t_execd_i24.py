#!/usr/bin/env python3
"""sluice-execd, what a product team trips on (issue 24, the rest):

small_workspaces (point 5): creates with disk_mb 8, 16, 32 and 64 each
give at least 80% of disk_mb free as df shows it inside the sandbox;
below the minimum, or more inodes than the size holds, is 400 naming
the field (never 500 for a caller's value).

one_vocabulary (point 2): sluiced and sluice-execd started from the
same "control" block (socket_mode, app_gids, auditor_gids): the same
caller has the same role on both; a file with both spellings is refused.

healthz (point 8): GET /healthz answers {ok, image_ready} with 200 to a
caller in no role on the Unix socket and to one without a token on TCP
(the gate lets it through), nothing else without a token.

plain_http (point 9): tcp.plain_http off without a certificate is a
configuration error; on, the listener serves plain HTTP with the same
token gate (401 without, 200 with), warns on stderr and in /v1/health.

Skips (77) without root or user namespaces."""

import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, check, check_eq, free_port,  # noqa: E402
                     read_response)
from t_execd import (start, create, ex, check_err, EXECD,  # noqa: E402
                     _exchange, preflight, Execd, Client, G_APP, G_AUD)

S = Suite("t_execd_i24", time_limit=600)


@S.case
def small_workspaces(env):
    d, ctl, x = start(env)
    for mb in (8, 16, 32, 64):
        sid = "w%d" % mb
        b = create(x, sid, limits={"disk_mb": mb})
        check_eq(b["limits"]["disk_mb"], mb, "disk_mb shown")
        o = ex(x, sid, {"shell": "df -Pk /workspace | tail -1; "
                        "df -Pi /workspace | tail -1"})
        check_eq(o["exit_code"], 0, "df: %r" % o)
        lines = o["stdout"].split("\n")
        avail = int(lines[0].split()[3])
        inodes = int(lines[1].split()[1])
        check(avail >= 0.8 * mb * 1024, "disk_mb %d: %d KiB free (%.0f%%)"
              % (mb, avail, avail * 100.0 / (mb * 1024)))
        check(inodes >= 64 and inodes == b["limits"]["inodes"],
              "disk_mb %d: %d inodes, limits say %r" % (mb, inodes,
                                                        b["limits"]))
        # what df says can be written
        o = ex(x, sid, {"shell": "dd if=/dev/zero of=f bs=1k count=%d "
                        "2>&1 >/dev/null; echo rc=$?" % int(0.8 * mb * 1024)},
               timeout=60)
        check("rc=0" in o["stdout"], "80%% written in %d MB: %r" % (mb, o))
        check_eq(x.app("DELETE", "/v1/sandboxes/" + sid,
                       timeout=60).status, 200, "delete " + sid)
    for lim, field in (({"disk_mb": 7}, "disk_mb"),
                       ({"disk_mb": 8, "inodes": 32}, "inodes"),
                       ({"disk_mb": 8, "inodes": 100000}, "inodes")):
        r = x.app("POST", "/v1/sandboxes", {"id": "bad", "limits": lim})
        check_err(r, 400, "bad_request", "limits %r" % lim)
        check_eq(r.json["error"].get("field"), field, "field of %r" % lim)
    # an explicit inode count that fits is kept
    b = create(x, "w8i", limits={"disk_mb": 8, "inodes": 4096})
    check_eq(b["limits"]["inodes"], 4096, "8 MB with 4096 inodes")
    check_eq(x.app("DELETE", "/v1/sandboxes/w8i", timeout=60).status, 200,
             "delete")


def _tokens(env, names):
    tok = {}
    for name in names:
        tok[name] = "tok-%s-%s" % (name, os.urandom(12).hex())
        with open(env.path(name + ".tok"), "w") as f:
            f.write(tok[name] + "\n")
        os.chmod(env.path(name + ".tok"), 0o600)
    return tok


def _tcp(port, ctx=None):
    def call(method, path, body=None, token=None, raw=None, headers=()):
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        if ctx is not None:
            s = ctx.wrap_socket(s, server_hostname="execd.test")
        try:
            h = [("Authorization", "Bearer " + token)] if token else []
            return _exchange(s, method, path, body, h + list(headers), raw,
                             60)
        finally:
            s.close()
    return call


@S.case
def one_vocabulary(env):
    preflight()
    os.chmod(os.path.dirname(env.dir), 0o711)
    os.chmod(env.dir, 0o711)
    # the one block, written the same way in both files
    control = {"socket_mode": "0666", "app_gids": [G_APP],
               "auditor_gids": [G_AUD]}
    cfg = env.config(sessions=[], ceiling="public", control=dict(control))
    d = env.sluiced(cfg)
    ctl = os.path.join(cfg["runtime_dir"], "control.sock")
    os.chmod(cfg["runtime_dir"], 0o711)
    x = Execd(env, ctl)
    del x.conf["roles"], x.conf["socket"]
    x.conf["control"] = dict(control)
    x.start()
    check_eq(oct(os.stat(x.sock).st_mode & 0o777), "0o666", "execd mode")
    check_eq(oct(os.stat(ctl).st_mode & 0o777), "0o666", "sluiced mode")
    for sock, what in ((x.sock, "sluice-execd"), (ctl, "sluiced")):
        aud, app, none = (Client(sock, [G_AUD]), Client(sock, [G_APP]),
                          Client(sock, []))
        check_eq(aud("GET", "/v1/health").status, 200, what + " auditor")
        check_eq(app("GET", "/v1/health").status, 200, what + " app")
        check_eq(none("GET", "/v1/health").status, 403, what + " no role")
    # an auditor may not write on either; an app may on both
    check_eq(Client(x.sock, [G_AUD])("POST", "/v1/sandboxes",
                                     {"id": "v1"}).status, 403,
             "execd auditor create")
    check_eq(Client(ctl, [G_AUD])("POST", "/v1/sessions",
                                  {"id": "v1"}).status, 403,
             "sluiced auditor create")
    r = Client(x.sock, [G_APP])("POST", "/v1/sandboxes",
                                {"id": "v1", "tenant": "acme",
                                 "network": {"tier": "off"}}, timeout=120)
    check_eq(r.status, 201, "execd app create: %r" % r)
    check_eq(Client(x.sock, [G_APP])("DELETE", "/v1/sandboxes/v1?"
                                      "archive=discard").status, 200,
             "delete")
    j = json.loads(subprocess.run([EXECD, "-c", x.conf_path,
                                   "--print-config"], capture_output=True,
                                  timeout=30).stdout)
    check(j["control"]["app_gids"] == [G_APP] and
          j["control"]["socket_mode"] == "0666" and "roles" not in j,
          "--print-config in the one spelling: %r" % j.get("control"))
    # both spellings of one thing: refused, naming both
    for extra, word in (({"roles": {"app": {"groups": [G_APP]}}}, b"roles"),
                        ({"socket": {"mode": "0660"}}, b"socket")):
        p = env.path("both.json")
        with open(p, "w") as f:
            json.dump(dict({"control": control}, **extra), f)
        r = subprocess.run([EXECD, "-c", p, "--check-config"],
                           capture_output=True, timeout=30)
        check(r.returncode == 1 and b"one way" in r.stderr and word in
              r.stderr, "both spellings: %r" % r.stderr)
    # the older spelling alone still works (the other cases use it)


@S.case
def healthz(env):
    crt, key = env.cert(("execd.test",))
    tok = _tokens(env, ("aud",))
    port = free_port()
    d, ctl, x = start(env, tcp={
        "listen": "127.0.0.1:%d" % port, "tls_cert": crt, "tls_key": key,
        "tokens": [{"name": "aud", "file": env.path("aud.tok"),
                    "role": "auditor"}]})
    tls = _tcp(port, ssl.create_default_context(cafile=crt))
    # the Unix socket: a caller in no role
    r = x.norole("GET", "/healthz")
    check_eq((r.status, r.json), (200, {"ok": True, "image_ready": True}),
             "healthz, no role: %r" % r)
    check_err(x.norole("GET", "/v1/health"), 403, "forbidden",
              "health still needs a role")
    # TCP without a token: /healthz only
    r = tls("GET", "/healthz")
    check_eq((r.status, r.json), (200, {"ok": True, "image_ready": True}),
             "healthz, no token: %r" % r)
    check_err(tls("GET", "/v1/health"), 401, "unauthorized",
              "health without a token")
    check_err(tls("GET", "/v1/sandboxes"), 401, "unauthorized",
              "list without a token")
    check_eq(tls("GET", "/healthz", token=tok["aud"]).status, 200,
             "healthz with a token")
    # a body is never passed on without a token
    r = tls("GET", "/healthz", raw=b"x" * 1000)
    check(r.status in (200, 400), "healthz with a body: %r" % r)
    check_eq(tls("POST", "/healthz").status, 401, "POST /healthz")
    # the default profile's image missing: 503, image_ready false
    x.conf["profile"] = "minimal"
    x.conf["image_dir"] = env.path("noimages")
    x.write()
    os.kill(x.proc.pid, signal.SIGHUP)
    time.sleep(1.5)
    r = x.norole("GET", "/healthz")
    check_eq((r.status, r.json), (503, {"ok": False, "image_ready": False}),
             "healthz without the image: %r" % r)


@S.case
def plain_http(env):
    tok = _tokens(env, ("app",))
    port = free_port()
    tcp = {"listen": "127.0.0.1:%d" % port,
           "tokens": [{"name": "app", "file": env.path("app.tok"),
                       "role": "app"}]}
    # off (the default) without a certificate: a configuration error
    p = env.path("plain-off.json")
    with open(p, "w") as f:
        json.dump({"tcp": tcp}, f)
    r = subprocess.run([EXECD, "-c", p, "--check-config"],
                       capture_output=True, timeout=30)
    check(r.returncode == 1 and b"tls_cert and tls_key are required" in
          r.stderr and b"plain_http" in r.stderr, "off: %r" % r.stderr)
    with open(p, "w") as f:
        json.dump({"tcp": dict(tcp, plain_http=True, tls_cert="/x",
                               tls_key="/y")}, f)
    r = subprocess.run([EXECD, "-c", p, "--check-config"],
                       capture_output=True, timeout=30)
    check(r.returncode == 1 and b"plain_http" in r.stderr,
          "plain with a certificate: %r" % r.stderr)
    d, ctl, x = start(env, tcp=dict(tcp, plain_http=True))
    check(any("PLAIN HTTP" in ln and "WITHOUT TLS" in ln for ln in x.lines),
          "a loud warning on stderr")
    call = _tcp(port)
    r = call("GET", "/v1/health")
    check(r.status == 401 and r.code() == "unauthorized",
          "no token: %r" % r)
    check_err(call("GET", "/v1/health", token="tok-wrong-00000000000"),
              401, "unauthorized", "bad token")
    r = call("GET", "/v1/health", token=tok["app"])
    check(r.status == 200 and "plain_http" in r.json.get("warning", ""),
          "health with the warning: %r" % r.json.get("warning"))
    r = call("POST", "/v1/sandboxes", {"id": "p1", "tenant": "acme",
                                       "network": {"tier": "off"}},
             tok["app"])
    check_eq(r.status, 201, "create over plain HTTP: %r" % r)
    r = call("POST", "/v1/sandboxes/p1/exec", {"shell": "echo hi"},
             tok["app"])
    check_eq((r.status, r.json.get("stdout")), (200, "hi\n"), "exec")
    check_eq(call("DELETE", "/v1/sandboxes/p1", token=tok["app"]).status,
             200, "delete")
    # a body without a token is not read
    r = call("POST", "/v1/sandboxes", {"id": "p2"})
    check_eq(r.status, 401, "create without a token")
    j = json.loads(subprocess.run([EXECD, "-c", x.conf_path,
                                   "--print-config"], capture_output=True,
                                  timeout=30).stdout)
    check_eq(j["tcp"]["plain_http"], True, "--print-config")


if __name__ == "__main__":
    S.main()
