#!/usr/bin/env python3
"""sluice-execd, the executor service, with the real sluiced and real
sandboxes (ns backend; gvisor for a smoke subset where runsc works),
driven over its Unix socket by an UNPRIVILEGED client: a forked child
that drops to nobody with the test's groups (the socket's group and a
role's group), as an app in the app group would.

Covered: health and doctor; roles (no role 403, auditor read-only 403,
app); 404 (route, sandbox, command, file), 405 with Allow, 413 for an
oversized JSON body and an oversized PUT (the error shape in both);
create (201, 409 exists, limits above the admin maximum refused with
field and max, quota_exceeded with scope/limit/in_use), list with
tenant/user filters, get, PATCH of the tier (sluiced's session follows),
delete (broker session and directory gone); exec (exit code, signal,
stdout/stderr, truncation, stdin, env, cwd, timed_out, cancelled, 429
busy, oom_killed from the cgroup), streaming (events as they come, the
exit event) with a slow reader whose daemon RSS stays bounded, a client
that disconnects (killed at its deadline); background commands (202,
list, status, output from an offset with the ring wrapped, stop) and
cancel all; files (list with glob and recursive, get with Range, put
with parents owned by the sandbox user, delete, edit 409 when missing
or not unique) and symlink, /dev/zero, FIFO and other-workspace tricks;
changed and artifacts in results (limits, links, walk cap);
the workspace as a loop-mounted ext4 (ENOSPC past disk_mb and inodes,
df inside, no mount or loop device left by delete or a failed create);
503 broker_unavailable leaving nothing behind (sluiced stopped, or hung
and holding the one create slot: 429 scope creates); per-tenant quota; TLS with bearer tokens
(401, a tenant-bound token sees and makes only its tenant's, 403);
SIGHUP reload (a bad file keeps the old configuration); the OpenAPI
document matches the route table both ways and every documented route
is served; SIGTERM drains; install (400 for anything but names, 403
network_not_permitted at an effective tier off or without a session,
pip from a loopback registry through sluiced; a vanished broker session
made again on the next GET, which shows it); the audit log (a record
per lifecycle action and command, verified by sluicectl log verify);
GET /v1/events (events in order, a slow reader dropped) and /v1/metrics;
the daemon SIGKILLed with sandboxes running background commands: the
teardown starts it again to delete them (adopted), or, when it cannot
start, takes their holders, mounts, loop devices and groups down from
the records; a mount left under the case's dir fails the teardown
(execdlib.py; every case's teardown checks that nothing is left).

Skips (77) without root or user namespaces; fails then under
SLUICE_TEST_STRICT=1."""

import base64
import json
import os
import re
import shutil
import signal
import socket
import ssl
import stat
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, Skip, Fail, check, check_eq, log,  # noqa: E402
                     read_response, api_unix, wait_until, free_port,
                     vmrss_kib, BUILDDIR, SRCDIR)
import execdlib  # noqa: E402
import harness  # noqa: E402

S = Suite("t_execd", time_limit=600)

EXECD = os.path.join(BUILDDIR, "sandbox-glue", "executor", "execd",
                     "sluice-execd")
SLUICECTL = os.path.join(BUILDDIR, "proxy", "sluicectl", "sluicectl")
SHIM = os.path.abspath(os.path.join(BUILDDIR, "sandbox-glue", "shim",
                                    "sluice-shim"))
OPENAPI = os.path.join(SRCDIR, "sandbox-glue", "executor", "execd",
                       "openapi.json")
NOBODY = 65534
G_SOCK, G_APP, G_AUD, G_ADM = 4240, 4242, 4243, 4244


def preflight():
    if os.geteuid() != 0:
        raise Skip("needs root")
    if not os.access(EXECD, os.X_OK):
        raise Skip("sluice-execd not built")
    r = subprocess.run(["unshare", "-U", "-m", "-p", "-n", "-f", "true"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        raise Skip("no user namespaces: %s" % r.stderr.decode().strip())


# ---------------------------------------------------------------------------
# the unprivileged client

class Resp:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body
        try:
            self.json = json.loads(body.decode()) if body else None
        except (ValueError, UnicodeDecodeError):
            self.json = None

    def header(self, name):
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return None

    def code(self):
        return (self.json or {}).get("error", {}).get("code")

    def __repr__(self):
        return "<%d %r>" % (self.status, self.body[:300])


def _request_bytes(method, path, body, headers, raw):
    data = raw if raw is not None else (
        json.dumps(body).encode() if body is not None else b"")
    lines = ["%s %s HTTP/1.1" % (method, path), "Host: execd",
             "Connection: close"]
    if data or method in ("POST", "PUT", "PATCH"):
        lines.append("Content-Length: %d" % len(data))
    if data and raw is None:
        lines.append("Content-Type: application/json")
    lines += ["%s: %s" % kv for kv in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data


def _exchange(sock, method, path, body, headers, raw, timeout):
    sock.settimeout(timeout)
    sock.sendall(_request_bytes(method, path, body, headers, raw))
    r = read_response(sock, timeout)
    return Resp(r.status, list(r.headers), r.body)


def as_user(groups, fn, timeout=60):
    """fn() in a forked child running as nobody with groups; its
    JSON-able result back."""
    rd, wr = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(rd)
            os.setgroups(groups)
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            res = {"ok": fn()}
        except BaseException as e:      # noqa: B902
            res = {"err": repr(e)}
        with os.fdopen(wr, "w") as f:
            json.dump(res, f)
        os._exit(0)
    os.close(wr)
    with os.fdopen(rd) as f:
        deadline = time.monotonic() + timeout
        data = f.read()
    os.waitpid(pid, 0)
    if time.monotonic() > deadline:
        raise Fail("client child took too long")
    res = json.loads(data) if data else {"err": "child died"}
    if "err" in res:
        raise Fail("client as nobody: %s" % res["err"])
    return res["ok"]


class Client:
    """Requests on exec.sock as nobody with the given groups."""

    def __init__(self, sock, groups):
        self.sock = sock
        self.groups = groups

    def __call__(self, method, path, body=None, headers=(), raw=None,
                 timeout=60):
        def go():
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(self.sock)
                r = _exchange(s, method, path, body, headers, raw, timeout)
            finally:
                s.close()
            return [r.status, r.headers, base64.b64encode(r.body).decode()]
        st, hd, b = as_user(self.groups, go, timeout + 10)
        return Resp(st, [tuple(x) for x in hd], base64.b64decode(b))


def root_call(sock, method, path, body=None, headers=(), raw=None,
              timeout=60):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(sock)
        return _exchange(s, method, path, body, headers, raw, timeout)
    finally:
        s.close()


# ---------------------------------------------------------------------------
# the daemons

class Execd(execdlib.Execd):
    """The daemon of a case (execdlib: its sandboxes go at teardown on
    every exit path, and nothing of them may be left)."""

    def __init__(self, env, ctl, **over):
        conf = {
            "runtime_dir": env.path("xrun"),
            "state_dir": env.path("xstate"),
            "control_socket": ctl,
            "shim": SHIM,
            "socket": {"group": str(G_SOCK), "mode": "0660"},
            "roles": {"app": {"groups": [G_APP]},
                      "auditor": {"groups": [G_AUD]}},
            "max_body_bytes": 65536,
            "max_file_bytes": 1 << 20,
            "ring_bytes": 4096,
            "limits_max": {"timeout_s": 120, "memory_mb": 4096},
            "log": {"path": env.path("xaudit/execd.jsonl")},
        }
        for k, v in over.items():
            if isinstance(v, dict) and isinstance(conf.get(k), dict):
                conf[k] = dict(conf[k], **v)
            else:
                conf[k] = v
        super().__init__(env, conf)
        self.app = Client(self.sock, [G_SOCK, G_APP])
        self.auditor = Client(self.sock, [G_SOCK, G_AUD])
        self.norole = Client(self.sock, [G_SOCK])


# the backend the cases' sandboxes get by default ("": the daemon's, ns);
# the gvisor_* cases run a case again with "gvisor"
_backend = {"name": ""}


def start(env, **over):
    preflight()
    if _backend["name"]:
        over.setdefault("backend", _backend["name"])
    # nobody must reach the socket: the suite's and the env's dirs
    os.chmod(os.path.dirname(env.dir), 0o711)
    os.chmod(env.dir, 0o711)
    cfg = env.config(sessions=[], ceiling="public")
    d = env.sluiced(cfg)
    ctl = os.path.join(cfg["runtime_dir"], "control.sock")
    x = Execd(env, ctl, **over).start()
    return d, ctl, x


def K(sid, tenant="acme"):
    """The host's name of a case's sandbox (create's tenant: acme)."""
    return execdlib.key(tenant, sid)


def session(ctl, sid, tenant="acme"):
    return api_unix(ctl, "GET", "/v1/sessions/%s" % K(sid, tenant))


def check_err(r, status, code, what):
    check(r.status == status and r.code() == code and
          isinstance(r.json["error"].get("message"), str),
          "%s: want %d %s, got %r", what, status, code, r)


def create(x, sid, client=None, **body):
    b = {"id": sid, "tenant": "acme", "user": "alice",
         "network": {"tier": "public"}}
    b.update(body)
    r = (client or x.app)("POST", "/v1/sandboxes", b, timeout=120)
    check_eq(r.status, 201, "create %s: %r" % (sid, r))
    return r.json


def ex(x, sid, body, client=None, **kw):
    r = (client or x.app)("POST", "/v1/sandboxes/%s/exec" % sid, body, **kw)
    check_eq(r.status, 200, "exec %r: %r" % (body, r))
    return r.json


# ---------------------------------------------------------------------------

@S.case
def roles_routes_sandboxes(env):
    d, ctl, x = start(env, quotas={"per_user": 2})
    # health as the auditor; kvm named with its reason
    r = x.auditor("GET", "/v1/health")
    check_eq(r.status, 200, "health: %r" % r)
    names = {b["name"]: b for b in r.json["backends"]}
    check(names["ns"]["ok"] and not names["kvm"]["ok"] and
          "kvm" in names["kvm"]["reason"], "backends: %r" % names)
    check(r.json["broker"]["ok"] and r.json["capacity"]["sandboxes"]
          ["in_use"] == 0, "health: %r" % r.json)
    doc = subprocess.run([EXECD, "-c", x.conf_path, "--doctor"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         timeout=60)
    check(doc.returncode == 0 and json.loads(doc.stdout)["broker"]["ok"],
          "--doctor: %r" % doc)
    # no role; auditor may not write; unknown route; method
    check_err(x.norole("GET", "/v1/health"), 403, "forbidden", "no role")
    check_err(x.auditor("POST", "/v1/sandboxes", {"id": "a"}), 403,
              "forbidden", "auditor create")
    check_err(x.app("GET", "/v1/nothing"), 404, "not_found", "route")
    r = x.app("PUT", "/v1/sandboxes")
    check(r.status == 405 and set(r.header("Allow").split(", ")) ==
          {"GET", "POST"}, "405: %r %r" % (r, r.headers))
    check_err(x.app("GET", "/v1/sandboxes/nosuch"), 404, "not_found",
              "no sandbox")
    check_err(x.app("GET", "/v1/sandboxes?bogus=1"), 400, "bad_request",
              "unknown query key")
    # bodies
    check_err(x.app("POST", "/v1/sandboxes", raw=b"{not json",
                    headers=[("Content-Type", "application/json")]),
              400, "bad_request", "bad JSON")
    check_err(x.app("POST", "/v1/sandboxes", {"id": "x", "limits":
                                              {"memory_mb": 99999}}),
              400, "bad_request", "limit above max")
    r = x.app("POST", "/v1/sandboxes", {"id": "x", "limits":
                                        {"memory_mb": 99999}})
    check(r.json["error"]["field"] == "memory_mb" and
          r.json["error"]["max"] == 4096, "limit error fields: %r" % r)
    check_err(x.app("POST", "/v1/sandboxes", {"id": "../x"}), 400,
              "bad_request", "bad id")
    check_err(x.app("POST", "/v1/sandboxes", {"id": "a", "pad": "x" * 70000}),
              413, "too_large", "JSON body over max_body_bytes")
    # create, 409, list, get
    t0 = time.monotonic()
    b = create(x, "s1", limits={"memory_mb": 256, "timeout_s": 30})
    log("create took %.0f ms" % ((time.monotonic() - t0) * 1000))
    check(b["state"] == "running" and b["backend"] == "ns" and
          b["limits"]["memory_mb"] == 256 and b["limits"]["timeout_s"] == 30
          and b["network"]["tier"] == "public", "created: %r" % b)
    check_eq(session(ctl, "s1").json["tier"], "public", "broker session")
    check_err(x.app("POST", "/v1/sandboxes", {"id": "s1", "tenant": "acme"}),
              409, "exists", "create again")
    create(x, "s2", tenant="other", user="bob")
    ids = lambda r: sorted(s["id"] for s in r.json["sandboxes"])  # noqa
    check_eq(ids(x.auditor("GET", "/v1/sandboxes")), ["s1", "s2"], "list")
    check_eq(ids(x.app("GET", "/v1/sandboxes?tenant=acme")), ["s1"],
             "list tenant")
    check_eq(ids(x.app("GET", "/v1/sandboxes?user=bob")), ["s2"],
             "list user")
    check_eq(x.auditor("GET", "/v1/sandboxes/s1").json["id"], "s1", "get")
    # quotas: alice may have two in acme
    create(x, "s3")
    r = x.app("POST", "/v1/sandboxes", {"id": "s4", "tenant": "acme",
                                        "user": "alice"})
    check_err(r, 429, "quota_exceeded", "per-user quota")
    check_eq((r.json["error"]["scope"], r.json["error"]["limit"],
              r.json["error"]["in_use"]), ("user", 2, 2), "quota fields")
    # PATCH the tier: sluiced follows
    r = x.app("PATCH", "/v1/sandboxes/s1", {"network": {"tier": "off"}})
    check(r.status == 200 and r.json["network"]["tier"] == "off",
          "patch: %r" % r)
    check_eq(session(ctl, "s1").json["tier"], "off", "broker tier")
    check_err(x.app("PATCH", "/v1/sandboxes/s1", {"tier": "x"}), 400,
              "bad_request", "patch body")
    # delete: gone from the API, sluiced and the disk
    r = x.app("DELETE", "/v1/sandboxes/s3", timeout=60)
    check(r.status == 200 and r.json["deleted"], "delete: %r" % r)
    check_err(x.app("GET", "/v1/sandboxes/s3"), 404, "not_found",
              "after delete")
    check_eq(session(ctl, "s3").status, 404, "broker session deleted")
    check(not os.path.exists(os.path.join(x.conf["state_dir"], K("s3"))),
          "state dir of s3 left")
    check_err(x.app("DELETE", "/v1/sandboxes/s3"), 404, "not_found",
              "delete again")


@S.case
def commands(env):
    d, ctl, x = start(env)
    create(x, "c1", limits={"memory_mb": 128})
    t0 = time.monotonic()
    o = ex(x, "c1", {"cmd": ["sh", "-c", "echo out; echo err >&2; exit 3"]})
    log("exec round trip %.1f ms (as a forked client)" %
        ((time.monotonic() - t0) * 1000))
    check_eq((o["exit_code"], o["signal"], o["stdout"], o["stderr"],
              o["timed_out"], o["cancelled"], o["oom_killed"]),
             (3, None, "out\n", "err\n", False, False, False), "result")
    for k in ("duration_ms", "stdout_truncated", "stderr_truncated", "id"):
        check(k in o, "result lacks %s: %r" % (k, o))
    o = ex(x, "c1", {"shell": "cat; echo $FOO; pwd; id -u",
                     "stdin": "in put\n", "env": {"FOO": "bar"},
                     "cwd": "sub"})
    # ns: sluice's own chdir; gvisor: env -C, as the sandbox user
    check(o["exit_code"] == 125 and ("chdir" in o["stderr"] or
                                     "cannot change directory" in
                                     o["stderr"]),
          "cwd that does not exist: %r" % o)
    ex(x, "c1", {"shell": "mkdir sub"})
    o = ex(x, "c1", {"shell": "cat; echo $FOO; pwd; id -u",
                     "stdin": "in put\n", "env": {"FOO": "bar"},
                     "cwd": "sub"})
    uid = 1000
    if _backend["name"] == "gvisor":
        # gVisor has no user namespace: the sandbox's host uid
        with open(os.path.join(x.conf["state_dir"], K("c1"),
                               "record.json")) as f:
            uid = json.load(f)["host_uid"]
    check_eq(o["stdout"], "in put\nbar\n/workspace/sub\n%d\n" % uid,
             "stdin env cwd")
    # signal, truncation, non-UTF-8
    o = ex(x, "c1", {"shell": "kill -9 $$"})
    check_eq((o["exit_code"], o["signal"]), (137, 9), "signal")
    o = ex(x, "c1", {"shell": "head -c 5000 /dev/zero | tr '\\0' a; "
                     "printf '\\377x'", "output_cap": 100})
    check(o["stdout"] == "a" * 100 and o["stdout_truncated"],
          "truncated: %r" % o)
    o = ex(x, "c1", {"shell": "printf 'a\\377b'"})
    check_eq(o["stdout"], "a\ufffdb", "invalid UTF-8 as U+FFFD")
    o = ex(x, "c1", {"shell": "printf 'a\\377b'", "encoding": "base64"})
    check_eq(base64.b64decode(o["stdout"]), b"a\xffb", "base64 output")
    # timeout kills the tree (setsid double fork included)
    t0 = time.monotonic()
    o = ex(x, "c1", {"shell": "(setsid sh -c 'sleep 300' &); sleep 300",
                     "timeout_s": 1})
    check(o["timed_out"] and time.monotonic() - t0 < 15, "timeout: %r" % o)
    o = ex(x, "c1", {"shell": "pgrep -c sleep || true"})
    check_eq(o["stdout"].strip(), "0", "tree left after the timeout")
    check_err(x.app("POST", "/v1/sandboxes/c1/exec", {"shell": "true",
                                                      "timeout_s": 100000}),
              400, "bad_request", "timeout above max")
    # OOM: the cgroup says so (where cgroups are there)
    o = ex(x, "c1", {"shell": "python3 -c 'b = bytearray(512 << 20); "
                     "print(len(b))'", "timeout_s": 60})
    note = x.app("GET", "/v1/sandboxes/c1").json["note"]
    if "not set" in note or "no writable cgroup" in note:
        log("no memory limit here (%s): oom_killed not checked" % note)
    else:
        check(o["oom_killed"] and o["exit_code"] != 0, "oom: %r" % o)
    if _backend["name"] == "gvisor":
        # the limit is the whole sandbox's there: it went with the OOM
        check_eq(x.app("GET", "/v1/sandboxes/c1").json["state"], "dead",
                 "gVisor sandbox after an OOM")
        check_eq(x.app("DELETE", "/v1/sandboxes/c1", timeout=60).status,
                 200, "delete the dead sandbox")
        create(x, "c1", limits={"memory_mb": 128})
    # busy: one foreground command at a time; cancel
    res = {}

    def long_exec():
        # root's, in a thread: no fork beside other threads
        res["r"] = root_call(x.sock, "POST", "/v1/sandboxes/c1/exec",
                             {"shell": "sleep 30"})
    t = threading.Thread(target=long_exec)
    t.start()
    wait_until(lambda: "r" in res or x.app("GET", "/v1/sandboxes/c1").json
               ["usage"]["foreground"], 10, what="foreground running")
    check("r" not in res, "the long exec ended: %r" % res.get("r"))
    check_err(x.app("POST", "/v1/sandboxes/c1/exec", {"shell": "true"}),
              429, "busy", "second foreground")
    r = x.app("POST", "/v1/sandboxes/c1/cancel")
    check(r.status == 200 and r.json["cancelled"] == 1, "cancel: %r" % r)
    t.join(30)
    check(res["r"].status == 200 and res["r"].json["cancelled"],
          "cancelled exec: %r" % res.get("r"))
    # background commands
    r = x.app("POST", "/v1/sandboxes/c1/commands",
              {"shell": "for i in $(seq 1 2000); do echo line$i; done; "
               "echo done >&2; sleep 30"})
    check_eq(r.status, 202, "background: %r" % r)
    cid = r.json["id"]
    wait_until(lambda: x.app("GET", "/v1/sandboxes/c1/commands/%s" % cid)
               .json["stderr_bytes"] > 0, 20, what="background output")
    r = x.app("GET", "/v1/sandboxes/c1/commands/%s/output?offset=0" % cid)
    out = r.json["stdout"]
    total = len("".join("line%d\n" % i for i in range(1, 2001)))
    check(out["next"] == total and out["offset"] == total - 4096 and
          out["data"].endswith("line2000\n") and r.json["stderr"]["data"] ==
          "done\n", "ring from 0 (wrapped): %r" % {k: out[k] for k in
                                                  ("offset", "next")})
    r = x.app("GET", "/v1/sandboxes/c1/commands/%s/output?stdout_offset=%d"
              % (cid, total - 9))
    check_eq(r.json["stdout"]["data"], "line2000\n", "output from offset")
    r = x.auditor("GET", "/v1/sandboxes/c1/commands")
    check(any(c["id"] == cid and c["status"] == "running" for c in
              r.json["commands"]), "commands list: %r" % r)
    check_err(x.auditor("GET", "/v1/sandboxes/c1/commands/%s/output" % cid),
              403, "forbidden", "auditor output")
    check_err(x.app("GET", "/v1/sandboxes/c1/commands/nosuch"), 404,
              "not_found", "no command")
    ex(x, "c1", {"shell": "true"})      # beside a background one
    r = x.app("POST", "/v1/sandboxes/c1/commands/%s/stop" % cid)
    check_eq(r.status, 202, "stop: %r" % r)
    wait_until(lambda: x.app("GET", "/v1/sandboxes/c1/commands/%s" % cid)
               .json["status"] == "exited", 20, what="stopped")
    j = x.app("GET", "/v1/sandboxes/c1/commands/%s" % cid).json
    check(j["cancelled"] and j["ended"] and j["exit_code"] is not None,
          "stopped status: %r" % j)
    # cancel all
    ids = [x.app("POST", "/v1/sandboxes/c1/commands",
                 {"shell": "sleep 60"}).json["id"] for _ in range(2)]
    r = x.app("POST", "/v1/sandboxes/c1/cancel", {"all": True})
    check_eq(r.json["cancelled"], 2, "cancel all")
    for i in ids:
        wait_until(lambda: x.app("GET", "/v1/sandboxes/c1/commands/%s" % i)
                   .json["status"] == "exited", 20, what="cancelled bg")
    o = ex(x, "c1", {"shell": "pgrep -c sleep || true"})
    check_eq(o["stdout"].strip(), "0", "processes left after cancel all")
    # a delete while a foreground and a background command run: both
    # end with the sandbox, the exec is answered (cancelled)
    bg = x.app("POST", "/v1/sandboxes/c1/commands",
               {"shell": "sleep 60"}).json["id"]
    res.clear()
    t = threading.Thread(target=long_exec)
    t.start()
    wait_until(lambda: "r" in res or x.app("GET", "/v1/sandboxes/c1").json
               ["usage"]["foreground"], 10, what="foreground running")
    r = x.app("DELETE", "/v1/sandboxes/c1", timeout=60)
    check_eq(r.status, 200, "delete with commands running: %r" % r)
    t.join(30)
    check(res["r"].status == 200 and res["r"].json["cancelled"],
          "exec across a delete: %r" % res.get("r"))
    check_err(x.app("GET", "/v1/sandboxes/c1/commands/%s" % bg), 404,
              "not_found", "background command of a deleted sandbox")


def sse_events(data):
    ev = []
    for block in data.split(b"\n\n"):
        name, payload = None, None
        for line in block.split(b"\n"):
            if line.startswith(b"event: "):
                name = line[7:].decode()
            elif line.startswith(b"data: "):
                payload = json.loads(line[6:])
        if name:
            ev.append((name, payload))
    return ev


def raw_get_chunked(sock_path, groups, req, read_pause=0.0, limit=1 << 27):
    """Send req as nobody; read the whole (chunked) answer."""
    def go():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(sock_path)
        s.settimeout(60)
        s.sendall(req)
        if read_pause:
            time.sleep(read_pause)
        buf = bytearray()
        while len(buf) < limit:
            b = s.recv(1 << 20)
            if not b:
                break
            buf += b
        s.close()
        return base64.b64encode(bytes(buf)).decode()
    return base64.b64decode(as_user(groups, go, 120))


def dechunk(raw):
    head, _, body = raw.partition(b"\r\n\r\n")
    out = b""
    while body:
        line, _, rest = body.partition(b"\r\n")
        n = int(line, 16)
        if n == 0:
            break
        out += rest[:n]
        body = rest[n + 2:]
    return head, out


@S.case
def streaming(env):
    d, ctl, x = start(env, stream_watermark=65536)
    create(x, "st1")
    body = json.dumps({"shell": "for i in 1 2 3; do echo l$i; sleep 0.3; "
                       "done; echo e >&2; exit 4"}).encode()
    req = _request_bytes("POST", "/v1/sandboxes/st1/exec", None,
                         [("Accept", "text/event-stream")], None)
    req = req.replace(b"Content-Length: 0", b"Content-Length: %d" % len(body))
    req = req.replace(b"\r\n\r\n", b"\r\nContent-Type: application/json"
                      b"\r\n\r\n") + body
    head, data = dechunk(raw_get_chunked(x.sock, x.app.groups, req))
    check(b"text/event-stream" in head, "SSE head: %r" % head)
    ev = sse_events(data)
    check_eq([e[0] for e in ev], ["start", "stdout", "stdout", "stdout",
                                  "stderr", "exit"], "events")
    check_eq("".join(e[1]["data"] for e in ev if e[0] == "stdout"),
             "l1\nl2\nl3\n", "streamed stdout")
    check_eq(ev[-1][1]["exit_code"], 4, "exit event")
    # a slow reader: 40 MB streamed, the reader asleep for 4 s first; the
    # daemon reads the command only as fast as the client takes it
    rss0 = vmrss_kib(x.proc.pid)
    body = json.dumps({"shell": "head -c 40000000 /dev/zero | tr '\\0' x",
                       "output_cap": 50000000}).encode()
    req2 = req.split(b"\r\n\r\n")[0].replace(
        b"Content-Length: %d" % len(json.dumps({"shell": "for i in 1 2 3; "
                                                "do echo l$i; sleep 0.3; done; "
                                                "echo e >&2; exit 4"})),
        b"Content-Length: %d" % len(body)) + b"\r\n\r\n" + body
    peak = [rss0]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            try:
                peak[0] = max(peak[0], vmrss_kib(x.proc.pid))
            except Exception:
                return
            time.sleep(0.05)
    th = threading.Thread(target=sample, daemon=True)
    th.start()
    head, data = dechunk(raw_get_chunked(x.sock, x.app.groups, req2,
                                         read_pause=4.0, limit=1 << 28))
    stop.set()
    th.join(2)
    ev = sse_events(data)
    got = sum(len(e[1]["data"]) for e in ev if e[0] == "stdout")
    check(got == 40000000 and ev[-1][0] == "exit" and
          ev[-1][1]["exit_code"] == 0, "slow reader got %d bytes, last %r"
          % (got, ev[-1][0] if ev else None))
    log("daemon RSS %d KiB before, %d KiB peak" % (rss0, peak[0]))
    check(peak[0] - rss0 < 24 * 1024, "daemon RSS grew by %d KiB for a slow "
          "reader" % (peak[0] - rss0))
    # a client that leaves: the command still dies at its deadline
    def leave():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(x.sock)
        s.sendall(_request_bytes("POST", "/v1/sandboxes/st1/exec",
                                 {"shell": "sleep 60", "timeout_s": 2}, (),
                                 None))
        time.sleep(0.3)
        s.close()
        return 1
    as_user(x.app.groups, leave)
    check(x.app("GET", "/v1/sandboxes/st1").json["usage"]["foreground"],
          "the left command runs")
    wait_until(lambda: not x.app("GET", "/v1/sandboxes/st1").json["usage"]
               ["foreground"], 10, what="deadline of a left command")
    o = ex(x, "st1", {"shell": "pgrep -c sleep || true"})
    check_eq(o["stdout"].strip(), "0", "left command's process")


@S.case
def files(env):
    d, ctl, x = start(env)
    create(x, "f1")
    create(x, "f2", user="bob")
    base = "/v1/sandboxes/f1/files/"
    r = x.app("PUT", base + "a/b/c.txt", raw=b"hello world\n")
    check_eq(r.status, 201, "put with parents: %r" % r)
    ws = os.path.join(x.conf["state_dir"], K("f1"), "workspace")
    st = os.lstat(os.path.join(ws, "a", "b", "c.txt"))
    stp = os.lstat(os.path.join(ws, "a"))
    check(st.st_uid == stp.st_uid and st.st_uid >= 1000000 and
          st.st_uid == os.lstat(ws).st_uid, "owner of put files: %d %d"
          % (st.st_uid, stp.st_uid))
    check_eq(x.app("GET", base + "a/b/c.txt").body, b"hello world\n", "get")
    check_eq(x.app("GET", base + "/workspace/a/b/c.txt".lstrip("/")).status,
             404, "workspace/ inside is a path")
    check_eq(x.app("GET", "/v1/sandboxes/f1/files/%2Fworkspace%2Fa%2Fb%2F"
                   "c.txt").body, b"hello world\n", "absolute /workspace")
    r = x.app("GET", base + "a/b/c.txt", headers=[("Range", "bytes=6-10")])
    check(r.status == 206 and r.body == b"world" and
          r.header("Content-Range") == "bytes 6-10/12", "range: %r" % r)
    check_eq(x.app("GET", base + "a/b/c.txt", headers=[("Range",
                                                         "bytes=-3")]).body,
             b"ld\n", "suffix range")
    check_eq(x.app("GET", base + "a/b/c.txt",
                   headers=[("Range", "bytes=50-")]).status, 416, "416")
    # listing
    x.app("PUT", base + "a/d.py", raw=b"x")
    r = x.app("GET", "/v1/sandboxes/f1/files?recursive=1")
    paths = sorted(e["path"] for e in r.json["entries"])
    check_eq(paths, ["a", "a/b", "a/b/c.txt", "a/d.py"], "recursive list")
    e = [e for e in r.json["entries"] if e["path"] == "a/b/c.txt"][0]
    check(e["type"] == "file" and e["size"] == 12 and e["mode"] == "0644"
          and e["mtime"] > 0, "entry: %r" % e)
    r = x.app("GET", "/v1/sandboxes/f1/files?path=a&glob=*.py")
    check_eq([e["path"] for e in r.json["entries"]], ["a/d.py"], "glob")
    r = x.app("GET", "/v1/sandboxes/f1/files?path=a")
    check_eq(sorted(e["path"] for e in r.json["entries"]), ["a/b", "a/d.py"],
             "list a")
    # edit
    r = x.app("POST", "/v1/sandboxes/f1/edit", {"path": "a/b/c.txt",
                                                 "old": "world",
                                                 "new": "there"})
    check(r.status == 200 and x.app("GET", base + "a/b/c.txt").body ==
          b"hello there\n", "edit: %r" % r)
    check_err(x.app("POST", "/v1/sandboxes/f1/edit",
                    {"path": "a/b/c.txt", "old": "nope", "new": "x"}),
              409, "conflict", "edit missing")
    x.app("PUT", base + "dup", raw=b"ab ab")
    check_err(x.app("POST", "/v1/sandboxes/f1/edit",
                    {"path": "dup", "old": "ab", "new": "x"}),
              409, "conflict", "edit not unique")
    # delete
    check_eq(x.app("DELETE", base + "dup").status, 200, "delete")
    check_err(x.app("GET", base + "dup"), 404, "not_found", "deleted file")
    check_err(x.app("DELETE", base + "a"), 409, "conflict",
              "delete of a non-empty directory")
    check_err(x.app("GET", base + "nosuch"), 404, "not_found", "no file")
    # too large
    check_err(x.app("PUT", base + "big", raw=b"x" * (3 << 19)), 413,
              "too_large", "PUT over max_file_bytes")
    ex(x, "f1", {"shell": "head -c 1100000 /dev/zero > big2"})
    check_err(x.app("GET", base + "big2"), 413, "too_large",
              "GET over max_file_bytes")
    check_eq(len(x.app("GET", base + "big2", headers=[("Range",
                                                       "bytes=0-99")]).body),
             100, "a range of a large file")
    # tricks planted by the sandbox
    ws2 = os.path.join(x.conf["state_dir"], K("f2"), "workspace")
    secret = env.path("host-secret")
    with open(secret, "w") as f:
        f.write("host only\n")
    ex(x, "f1", {"shell": "ln -s /etc/shadow shadow; ln -s /dev/zero zero; "
                 "ln -s %s sec; ln -s %s other; mkfifo ff; "
                 "ln -s /etc etc; ln -s .. up; mkdir -p d; "
                 "ln -s /proc/self/root pr" % (secret, ws2)})
    ex(x, "f2", {"shell": "echo bob > mine"})
    for p in ("shadow", "zero", "sec", "pr/etc/shadow", "etc/shadow",
              "other/mine", "up/up/etc/shadow"):
        r = x.app("GET", base + p)
        check(r.status in (400, 403, 404) and b"root:" not in r.body and
              b"host only" not in r.body and b"bob" not in r.body,
              "GET %s: %r" % (p, r))
    t0 = time.monotonic()
    if _backend["name"] == "gvisor":
        # gVisor keeps a FIFO made inside in its own memory: the host's
        # workspace has no such file
        check_err(x.app("GET", base + "ff"), 404, "not_found", "fifo")
    else:
        check_err(x.app("GET", base + "ff"), 400, "bad_request", "fifo")
    check(time.monotonic() - t0 < 5, "a FIFO blocked the read")
    for p in ("sec", "other/mine", "etc/passwd2", "up/x"):
        x.app("PUT", base + p, raw=b"overwritten\n")
    check_eq(open(secret).read(), "host only\n", "host file after PUT")
    check(not os.path.exists("/etc/passwd2"), "PUT through a link to /etc")
    check_eq(open(os.path.join(ws2, "mine")).read(), "bob\n",
             "other workspace after PUT")
    check(os.path.exists(os.path.join(ws, "etc", "passwd2")) or
          x.app("GET", base + "etc/passwd2").status != 200,
          "etc/passwd2 landed inside")
    x.app("DELETE", base + "other")     # the link itself
    check(os.path.exists(os.path.join(ws2, "mine")), "delete followed a link")
    r = x.app("POST", "/v1/sandboxes/f1/edit", {"path": "sec", "old": "host",
                                                 "new": "x"})
    check(r.status in (400, 404) and open(secret).read() == "host only\n",
          "edit through a link: %r" % r)
    r = x.app("GET", "/v1/sandboxes/f1/files?path=up&recursive=1")
    check(r.status in (400, 404) or all(not e["path"].startswith("..")
                                        for e in r.json["entries"]),
          "list through ..: %r" % r)
    check_err(x.app("GET", "/v1/sandboxes/f1/files?path=/etc"), 400,
              "bad_request", "list outside /workspace")


@S.case
def broker_unavailable(env):
    d, ctl, x = start(env)
    d.stop()
    r = x.app("POST", "/v1/sandboxes", {"id": "b1", "network":
                                        {"tier": "public"}}, timeout=60)
    check_err(r, 503, "broker_unavailable", "create without sluiced")
    # dot names are the daemon's own (.ws-templates: the workspace
    # template a create makes once and keeps)
    check_eq([n for n in os.listdir(x.conf["state_dir"])
              if not n.startswith(".")], [], "left in state_dir")
    check_err(x.app("GET", "/v1/sandboxes/b1"), 404, "not_found",
              "after a refused create")
    r = x.app("GET", "/v1/health")
    check(not r.json["broker"]["ok"] and r.json["broker"]["reason"],
          "health without sluiced: %r" % r.json["broker"])


@S.case
def quotas_and_hung_broker(env):
    d, ctl, x = start(env, quotas={"per_tenant": 1, "creates": 1})
    create(x, "q1")
    r = x.app("POST", "/v1/sandboxes", {"id": "q2", "tenant": "acme"})
    check_err(r, 429, "quota_exceeded", "per-tenant quota")
    check_eq((r.json["error"]["scope"], r.json["error"]["limit"],
              r.json["error"]["in_use"]), ("tenant", 1, 1), "tenant quota")
    # a sluiced that accepts and never answers: the create waits for it
    # (bounded by control_timeout_ms) and meanwhile holds the one
    # create slot
    hang = env.path("hang.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(hang)
    srv.listen(8)
    held = []
    stop = threading.Event()

    def hold():
        srv.settimeout(0.2)
        for _ in range(200):
            if stop.is_set():
                return
            try:
                held.append(srv.accept()[0])
            except OSError:
                pass
    th = threading.Thread(target=hold, daemon=True)
    th.start()

    def closer():
        stop.set()
        th.join(5)
        for c in held:
            c.close()
        srv.close()
    env.closers.append(closer)
    x.conf["control_socket"] = hang
    x.conf["control_timeout_ms"] = 2000
    x.write()
    n = len(x.lines)
    x.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: any("applied" in ln for ln in x.lines[n:]), 10,
               what="reload applied")
    res = {}

    def slow_create():
        res["r"] = root_call(x.sock, "POST", "/v1/sandboxes",
                             {"id": "h1", "tenant": "other"}, timeout=30)
    t = threading.Thread(target=slow_create)
    t.start()
    wait_until(lambda: x.app("GET", "/v1/sandboxes/h1").status == 200, 10,
               what="create under way")
    check_eq(x.app("GET", "/v1/sandboxes/h1").json["state"], "creating",
             "state while creating")
    r = x.app("POST", "/v1/sandboxes", {"id": "h2", "tenant": "third"})
    check_err(r, 429, "quota_exceeded", "concurrent creates")
    check_eq((r.json["error"]["scope"], r.json["error"]["in_use"]),
             ("creates", 1), "creates quota")
    check_err(x.app("POST", "/v1/sandboxes/h1/exec", {"shell": "true"}),
              409, "conflict", "exec while creating")
    t.join(30)
    check_err(res["r"], 503, "broker_unavailable", "create against a hung "
              "sluiced")
    check_err(x.app("GET", "/v1/sandboxes/h1"), 404, "not_found",
              "after the failed create")
    check(not os.path.exists(os.path.join(x.conf["state_dir"], K("h1", "other"))),
          "left in state_dir")


def hung_broker(env, x):
    """A sluiced that accepts and never answers, made x's control socket
    (a reload): a create waits for it (control_timeout_ms, 4 s) and
    meanwhile holds a create slot."""
    hang = env.path("hang.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(hang)
    srv.listen(16)
    held = []
    stop = threading.Event()

    def hold():
        srv.settimeout(0.2)
        for _ in range(400):
            if stop.is_set():
                return
            try:
                held.append(srv.accept()[0])
            except OSError:
                pass
    th = threading.Thread(target=hold, daemon=True)
    th.start()

    def closer():
        stop.set()
        th.join(5)
        for c in held:
            c.close()
        srv.close()
    env.closers.append(closer)
    x.conf["control_socket"] = hang
    x.conf["control_timeout_ms"] = 4000
    x.write()
    n = len(x.lines)
    x.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: any("applied" in ln for ln in x.lines[n:]), 10,
               what="reload applied")


@S.case
def creates_per_tenant(env):
    """The creates in flight (quotas.creates) are shared: a tenant holds
    at most quotas.creates_per_tenant of them (by default half), so one
    tenant's flood of creates leaves another tenant's create its slot;
    the refusal is 429 scope tenant, resource creates."""
    d, ctl, x = start(env, quotas={"creates": 4})
    hung_broker(env, x)
    res = {}

    def slow_create(sid, tenant):
        res[sid] = root_call(x.sock, "POST", "/v1/sandboxes",
                             {"id": sid, "tenant": tenant}, timeout=30)
    ts = []
    for i in range(4):
        ts.append(threading.Thread(target=slow_create,
                                   args=("fl%d" % i, "flood")))
        ts[-1].start()
        time.sleep(0.2)
    wait_until(lambda: sum(1 for t in ts if not t.is_alive()) >= 2, 10,
               what="two of the flood's creates refused")
    got = sorted((sid, r.status, r.json["error"].get("scope"),
                  r.json["error"].get("resource"), r.json["error"].get("limit"))
                 for sid, r in list(res.items()))
    check_eq([g[1:] for g in got], [(429, "tenant", "creates", 2)] * 2,
             "the flood's creates past its share: %r" % got)
    # another tenant still creates: it waits for the hung sluiced like
    # the flood's, instead of a 429 at once
    ts.append(threading.Thread(target=slow_create, args=("ot1", "other")))
    ts[-1].start()
    wait_until(lambda: x.app("GET", "/v1/sandboxes/ot1").status == 200, 10,
               what="the other tenant's create under way")
    check_eq(x.app("GET", "/v1/sandboxes/ot1").json["state"], "creating",
             "the other tenant's create")
    m = metrics(x)
    check_eq(m.get('sluice_execd_quota_limit{scope="creates_per_tenant"}'),
             2, "metric: %r" % m)
    for t in ts:
        t.join(30)
    check_err(res["ot1"], 503, "broker_unavailable", "other's create "
              "against a hung sluiced")
    pc = subprocess.run([EXECD, "--print-config", "-c", x.conf_path],
                        stdout=subprocess.PIPE, timeout=30)
    check_eq(json.loads(pc.stdout)["quotas"]["creates_per_tenant"], 2,
             "the default share")


@S.case
def tls_tokens_reload_drain(env):
    preflight()
    crt, key = env.cert(("execd.test",))
    tok = {}
    for name in ("acme", "aud", "admin"):
        tok[name] = "tok-%s-%s" % (name, os.urandom(12).hex())
        with open(env.path(name + ".tok"), "w") as f:
            f.write(tok[name] + "\n")
        os.chmod(env.path(name + ".tok"), 0o600)
    # the auditor's as a Kubernetes Secret volume mounts it: a link to
    # a link into the volume's timestamped directory
    sec = env.path("secret")
    os.makedirs(os.path.join(sec, "..2026_12_06_00_00_00.1"))
    os.rename(env.path("aud.tok"),
              os.path.join(sec, "..2026_12_06_00_00_00.1", "aud.tok"))
    os.symlink("..2026_12_06_00_00_00.1", os.path.join(sec, "..data"))
    os.symlink("secret/..data/aud.tok", env.path("aud.tok"))
    port = free_port()
    d, ctl, x = start(env, tcp={
        "listen": "127.0.0.1:%d" % port, "tls_cert": crt, "tls_key": key,
        "tokens": [{"name": "acme-app", "file": env.path("acme.tok"),
                    "role": "app", "tenant": "acme"},
                   {"name": "aud", "file": env.path("aud.tok"),
                    "role": "auditor"},
                   {"name": "admin", "file": env.path("admin.tok"),
                    "role": "admin"}]})
    ctx = ssl.create_default_context(cafile=crt)

    def tls(method, path, body=None, token=None):
        raw = socket.create_connection(("127.0.0.1", port), timeout=30)
        s = ctx.wrap_socket(raw, server_hostname="execd.test")
        try:
            h = [("Authorization", "Bearer " + token)] if token else []
            return _exchange(s, method, path, body, h, None, 90)
        finally:
            s.close()
    r = tls("GET", "/v1/health")
    check(r.status == 401 and r.code() == "unauthorized" and
          r.header("WWW-Authenticate"), "no token: %r" % r)
    check_err(tls("GET", "/v1/health", token="tok-wrong-0000000000"), 401,
              "unauthorized", "bad token")
    check_eq(tls("GET", "/v1/health", token=tok["aud"]).status, 200,
             "auditor token")
    r = tls("POST", "/v1/sandboxes", {"id": "t1", "tenant": "acme",
                                      "network": {"tier": "off"}},
            tok["acme"])
    check_eq(r.status, 201, "bound token creates its tenant's: %r" % r)
    r = tls("POST", "/v1/sandboxes", {"id": "t2"}, tok["acme"])
    check(r.status == 201 and r.json["tenant"] == "acme",
          "no tenant given: the token's: %r" % r)
    check_err(tls("POST", "/v1/sandboxes", {"id": "t3", "tenant": "other"},
                  tok["acme"]), 403, "forbidden", "other tenant")
    create(x, "o1", tenant="other")
    check_err(tls("GET", "/v1/sandboxes/o1", token=tok["acme"]), 404,
              "not_found", "other tenant's sandbox: as a missing one")
    check_err(tls("POST", "/v1/sandboxes/o1/exec", {"shell": "true"},
                  tok["acme"]), 404, "not_found", "exec in another tenant's")
    check_eq(sorted(b["id"] for b in tls("GET", "/v1/sandboxes",
                                         token=tok["acme"]).json
                    ["sandboxes"]), ["t1", "t2"], "bound token's list")
    check_eq(len(tls("GET", "/v1/sandboxes", token=tok["admin"]).json
                 ["sandboxes"]), 3, "admin sees all")
    o = tls("POST", "/v1/sandboxes/t1/exec", {"shell": "echo tls"},
            tok["acme"])
    check_eq(o.json["stdout"], "tls\n", "exec over TLS")
    # SIGHUP: a bad file keeps the old configuration, a good one applies
    good = dict(x.conf)
    with open(x.conf_path, "w") as f:
        f.write('{"quotas": {"sandboxes": "many"}}')
    n = len(x.lines)
    x.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: any("reload" in ln for ln in x.lines[n:]), 10,
               what="reload line")
    check(any(re.search(r"execd.json:1:\d+: quotas.sandboxes", ln) for ln in
              x.lines[n:]), "reload error with position: %r" % x.lines[n:])
    check_eq(tls("GET", "/v1/health", token=tok["aud"]).status, 200,
             "old configuration kept")
    good["quotas"] = {"sandboxes": 3}
    x.conf = good
    x.write()
    n = len(x.lines)
    x.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: any("applied" in ln for ln in x.lines[n:]), 10,
               what="reload applied")
    r = tls("POST", "/v1/sandboxes", {"id": "t4"}, tok["acme"])
    check_err(r, 429, "quota_exceeded", "new quota")
    check_eq(r.json["error"]["scope"], "global", "quota scope")
    # drain: an exec under way is answered, then the daemon exits
    res = {}

    def slow():
        res["r"] = root_call(x.sock, "POST", "/v1/sandboxes/t1/exec",
                             {"shell": "sleep 1; echo drained"})
    t = threading.Thread(target=slow)
    t.start()
    wait_until(lambda: x.app("GET", "/v1/sandboxes/t1").json["usage"]
               ["foreground"], 10, what="exec under way")
    x.proc.send_signal(signal.SIGTERM)
    t.join(30)
    check(res.get("r") is not None and res["r"].json["stdout"] ==
          "drained\n", "exec across SIGTERM: %r" % res.get("r"))
    check_eq(x.proc.wait(30), 0, "exit status after drain")
    # restarted, it adopts the sandboxes (and cleanup deletes them)
    x.start()
    check_eq(sorted(b["id"] for b in root_call(x.sock, "GET",
                                               "/v1/sandboxes").json
                    ["sandboxes"]), ["o1", "t1", "t2"], "adopted")
    o = ex(x, "t1", {"shell": "echo again"})
    check_eq(o["stdout"], "again\n", "exec after restart")


@S.case
def roles_one_rule(env):
    """One rule for both daemons (proxy/lib/roles.c): uids before groups,
    then admin > app > auditor.  nobody, in execd's and sluiced's app uid
    list and in a group of their admin group lists, is app on both."""
    preflight()
    os.chmod(os.path.dirname(env.dir), 0o711)
    os.chmod(env.dir, 0o711)
    cfg = env.config(sessions=[], ceiling="public", control={
        "socket_mode": "0666", "app_uids": [NOBODY],
        "admin_gids": [G_ADM]})
    env.sluiced(cfg)
    os.chmod(cfg["runtime_dir"], 0o711)
    ctl = os.path.join(cfg["runtime_dir"], "control.sock")
    x = Execd(env, ctl, roles={"app": {"uids": [NOBODY]},
                               "admin": {"groups": [G_ADM]}}).start()
    both = Client(x.sock, [G_SOCK, G_ADM])

    def sluiced_role():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(ctl)
            r = _exchange(s, "GET", "/v1/health", None, (), None, 30)
        finally:
            s.close()
        return json.loads(r.body.decode())["caller"]["role"]
    check_eq(as_user([G_SOCK, G_ADM], sluiced_role), "app", "sluiced role")
    create(x, "r1", client=both, network={"tier": "off"})
    with open(x.conf["log"]["path"]) as f:
        recs = [json.loads(ln) for ln in f]
    check_eq([(r_["action"], r_["role"]) for r_ in recs
              if r_.get("action") == "create"], [("create", "app")],
             "sluice-execd role of the same caller")


def crash_with_sandboxes(env, x, ids):
    """Sandboxes (a loop-mounted workspace each, a background command
    running) and then sluice-execd SIGKILLed; their records.  What a
    crash leaves is checked to be there, so that the teardown's check is
    seen to find it."""
    recs = {}
    for sid in ids:
        create(x, sid, limits={"disk_mb": 16, "inodes": 256})
        r = x.app("POST", "/v1/sandboxes/%s/commands" % sid,
                  {"shell": "echo started; sleep 300"})
        check_eq(r.status, 202, "background command in %s: %r" % (sid, r))
        cid = r.json["id"]
        wait_until(lambda: x.app("GET", "/v1/sandboxes/%s/commands/%s" %
                                 (sid, cid)).json["stdout_bytes"] > 0, 20,
                   what="the background command running")
        with open(os.path.join(x.state_dir, K(sid), "record.json")) as f:
            recs[sid] = json.load(f)
    x.kill()
    left = execdlib.leftovers(env.dir, [x.state_dir], x._exclude())
    log("left by the crash:\n  %s" % "\n  ".join(left))
    for sid, rec in recs.items():
        ws = os.path.join(x.state_dir, K(sid), "workspace")
        check_eq(execdlib.proc_start(rec["init_pid"]), rec["init_start"],
                 "%s: its holder outlives the daemon" % sid)
        check(any(ln.startswith("process %d:" % rec["init_pid"])
                  for ln in left), "the holder of %s is found" % sid)
        check("mount %s" % ws in left, "the workspace of %s is found" % sid)
        check(any(ws + ".img" in ln for ln in left if
                  ln.startswith("loop device")), "its loop device is found")
        if rec["cgroup"]:
            check(any(ln.startswith("cgroup ") and "/%s." % K(sid) in ln for
                      ln in left), "the groups of %s are found" % sid)
    check(any("sleep 300" in ln for ln in left), "the commands are found")
    return recs


def nothing_left(env, x, recs):
    """Seen from outside execdlib too: no holder, mount, loop device."""
    for sid, rec in recs.items():
        ws = os.path.join(x.state_dir, K(sid), "workspace")
        check(execdlib.proc_start(rec["init_pid"]) != rec["init_start"],
              "the holder of %s is gone" % sid)
        check_eq(mounts_of(ws), [], "no mount of %s" % sid)
        check_eq(loops_of(ws + ".img"), [], "no loop device of %s" % sid)
    check_eq(mounts_of(env.dir), [], "no mount under the case's dir")
    check_eq(execdlib.leftovers(env.dir, [x.state_dir], x._exclude()), [],
             "nothing of the case left")


@S.case
def killed_daemon_teardown(env):
    """sluice-execd SIGKILLed while its sandboxes run background
    commands: the teardown starts it again on the same configuration and
    state dir, it adopts them, and they are deleted through the API;
    nothing of them is left.  Something left all the same fails the case
    (and is taken down)."""
    d, ctl, x = start(env)
    recs = crash_with_sandboxes(env, x, ["k1", "k2"])
    n = len(x.lines)
    x.stop()
    check(any("sandbox %s (ns): adopted, running" % K("k1") in ln
              for ln in x.lines[n:]), "adopted on restart: %r" % x.lines[n:])
    check(x.api_clean, "deleted through the API")
    check_eq(x.sandboxes(), [], "state dir emptied")
    # a mount left under the case's dir (as a daemon's bug would) fails
    # the teardown's check, which takes it down
    stray = env.path("stray")
    os.mkdir(stray)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "stray",
                    stray], check=True, timeout=30)
    try:
        x.check()
        raise Fail("the check missed a mount under the case's dir")
    except harness.Leak as e:
        check("mount %s" % stray in str(e), "the mount named: %s" % e)
    nothing_left(env, x, recs)


@S.case
def killed_daemon_last_resort(env):
    """sluice-execd SIGKILLed and unable to start again (its
    configuration broken): the last resort kills the holders the records
    name, unmounts the workspaces, detaches their loop devices and
    removes the groups; nothing is left."""
    d, ctl, x = start(env)
    recs = crash_with_sandboxes(env, x, ["r1"])
    x.conf["uid_base"] = "not a number"
    x.stop()
    check(not x.api_clean and not x.alive(), "the restart failed")
    check_eq(x.sandboxes(), [K("r1")], "the sandbox is still there")
    x.check()
    nothing_left(env, x, recs)


@S.case
def config_cli(env):
    preflight()
    p = env.path("bad.json")
    with open(p, "w") as f:
        f.write('{\n  "limits": {\n    "memory_mb": "lots"\n  }\n}\n')
    r = subprocess.run([EXECD, "-c", p, "--check-config"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    check(r.returncode == 1 and re.search(rb"bad.json:3:18: limits.memory_mb",
                                          r.stderr), "check: %r" % r.stderr)
    with open(p, "w") as f:
        f.write('{"nope": 1}')
    r = subprocess.run([EXECD, "-c", p, "--check-config"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    check(r.returncode == 1 and b"bad.json:1:2: nope: unknown key" in r.stderr,
          "unknown key: %r" % r.stderr)
    r = subprocess.run([EXECD, "--print-config"], stdout=subprocess.PIPE)
    j = json.loads(r.stdout)
    check_eq((j["limits"]["timeout_s"], j["limits_max"]["timeout_s"],
              j["limits"]["output_cap"]), (120, 1680, 65536), "defaults")
    check_eq((j["tcp"]["listen"], j["tcp"]["max_conns"]), ("", 1024),
             "tcp's defaults, printed when it is off")
    # every key is printed: those with no default as null
    check_eq((j["tcp"].get("tls_cert", 0), j["tcp"].get("tls_key", 0),
              j["lifecycle"].get("archive_s3", 0)), (None, None, None),
             "keys with no default")
    printed = os.path.join(os.path.dirname(p), "printed.json")
    with open(printed, "wb") as f:
        f.write(r.stdout)
    r = subprocess.run([EXECD, "-c", printed, "--check-config"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    check_eq(r.returncode, 0, "the printed defaults read back: %r" %
             r.stderr)
    for a in ("--help", "--version"):
        check_eq(subprocess.run([EXECD, a], stdout=subprocess.PIPE)
                 .returncode, 0, a)


def mounts_of(path):
    """findmnt's view of path (the mount points at or under it)."""
    r = subprocess.run(["findmnt", "-rn", "-o", "TARGET"],
                       capture_output=True, text=True, timeout=10)
    return [t for t in r.stdout.split() if t == path or
            t.startswith(path + "/")]


def loops_of(path):
    r = subprocess.run(["losetup", "-a"], capture_output=True, text=True,
                       timeout=10)
    return [ln for ln in r.stdout.splitlines() if path in ln]


@S.case
def workspace_quota(env):
    """The workspace is a file system of its own: bytes and inodes are
    the kernel's limits; df shows them; delete leaves no mount and no
    loop device."""
    d, ctl, x = start(env)
    b = create(x, "q1", limits={"disk_mb": 16, "inodes": 256})
    check_eq((b["limits"]["disk_mb"], b["limits"]["inodes"]), (16, 256),
             "limits shown")
    sdir = os.path.join(x.conf["state_dir"], K("q1"))
    ws = os.path.join(sdir, "workspace")
    img = os.path.join(sdir, "workspace.img")
    check_eq(mounts_of(ws), [ws], "workspace mounted")
    check(len(loops_of(img)) == 1, "one loop device: %r" % loops_of(img))
    st = os.stat(ws)
    check_eq((st.st_uid, oct(st.st_mode & 0o7777)),
             (1200000000 + 1000, "0o750"), "workspace owner and mode")
    o = ex(x, "q1", {"shell": "df -Pk /workspace | tail -1; "
                     "df -Pi /workspace | tail -1; "
                     # a glob, not ls: runsc 20221219's statx() refuses
                     # AT_NO_AUTOMOUNT on a mount point (README)
                     "echo /workspace/* /workspace/.*"})
    check_eq(o["exit_code"], 0, "df: %r" % o)
    kb = int(o["stdout"].split("\n")[0].split()[1])
    inodes = int(o["stdout"].split("\n")[1].split()[1])
    check(kb <= 16 * 1024 and kb > 8 * 1024, "df size %d KiB" % kb)
    check_eq(inodes, 256, "df inodes")
    check("lost+found" not in o["stdout"], "no lost+found: %r" % o)
    # bytes: a write past the size gets ENOSPC
    o = ex(x, "q1", {"shell": "dd if=/dev/zero of=big bs=1M count=40 "
                     "2>&1; echo rc=$?"}, timeout=60)
    check("No space left on device" in o["stdout"] and
          "rc=1" in o["stdout"], "ENOSPC: %r" % o)
    # the files API says so too
    r = x.app("PUT", "/v1/sandboxes/q1/files/more.bin", raw=b"x" * 1000000)
    check_err(r, 413, "too_large", "PUT on a full workspace")
    o = ex(x, "q1", {"shell": "rm big; echo ok"})
    check_eq(o["stdout"], "ok\n", "healthy after ENOSPC")
    # inodes: creating files past the count fails, the sandbox lives
    o = ex(x, "q1", {"shell": "i=0; while [ $i -lt 400 ]; do "
                     "touch f$i || break; i=$((i+1)); done 2>&1; echo n=$i"},
           timeout=60)
    check("n=" in o["stdout"], "inode loop: %r" % o)
    n = int(o["stdout"].rsplit("n=", 1)[1])
    check(200 < n < 256 and "No space left" in o["stdout"],
          "inode exhaustion at %d: %r" % (n, o))
    o = ex(x, "q1", {"shell": "rm -f f*; echo ok"})
    check_eq(o["stdout"], "ok\n", "healthy after inode exhaustion")
    check_eq(x.app("GET", "/v1/health").status, 200, "daemon healthy")
    # the image came from the geometry's template (issue 26 point 2),
    # made once; a second sandbox of that geometry gets a file system
    # of its own, empty, its own user's, nothing of q1's in it
    tdir = os.path.join(x.conf["state_dir"], ".ws-templates")
    check_eq(len(os.listdir(tdir)), 1, "one template: %r" %
             os.listdir(tdir))
    ex(x, "q1", {"shell": "echo secret > mine.txt"})
    create(x, "q4", limits={"disk_mb": 16, "inodes": 256})
    ws4 = os.path.join(x.conf["state_dir"], K("q4"), "workspace")
    check_eq(mounts_of(ws4), [ws4], "q4 workspace mounted")
    check(os.stat(ws4).st_uid != st.st_uid, "q4 has its own uid")
    with open(os.path.join(x.conf["state_dir"], K("q4"),
                           "record.json")) as f:
        host_uid = json.load(f)["host_uid"]
    check_eq(os.stat(ws4).st_uid, host_uid,
             "q4 workspace owned by its sandbox user")
    o = ex(x, "q4", {"shell": "echo /workspace/* /workspace/.*; id -u; "
                     "df -Pi /workspace | tail -1"})
    lines = o["stdout"].split("\n")
    check_eq(lines[0].split(), ["/workspace/*", "/workspace/.",
                                "/workspace/.."], "q4: empty: %r" % o)
    # gVisor's sandbox sees host uids (sbx.h)
    check_eq(lines[1], str(host_uid if _backend["name"] == "gvisor"
                           else 1000), "q4: its user: %r" % o)
    check_eq(int(lines[2].split()[1]), 256, "q4 inodes")
    o = ex(x, "q4", {"shell": "echo w > f; cat f"})
    check_eq(o["stdout"], "w\n", "q4 writes its workspace")
    check_eq(len(os.listdir(tdir)), 1, "the template reused")
    # a command that changes no state does not rewrite the record
    rp = os.path.join(x.conf["state_dir"], K("q4"), "record.json")
    ino = os.stat(rp).st_ino
    ex(x, "q4", {"cmd": ["true"]})
    ex(x, "q4", {"cmd": ["true"]})
    check_eq(os.stat(rp).st_ino, ino, "record not rewritten per command")
    check_eq(x.app("DELETE", "/v1/sandboxes/q4", timeout=60).status, 200,
             "delete q4")
    check_eq(x.app("DELETE", "/v1/sandboxes/q1", timeout=60).status, 200,
             "delete")
    check_eq(mounts_of(ws), [], "no mount left")
    wait_until(lambda: not loops_of(img), 10, what="loop device released")
    check(not os.path.exists(sdir), "directory gone")
    # a create that fails after the mount (sluiced refuses the tier)
    # takes its mount and device down too
    r = x.app("POST", "/v1/sandboxes", {"id": "q2", "limits":
              {"disk_mb": 16}, "network": {"tier": "full"}}, timeout=60)
    check(r.status >= 400, "create refused: %r" % r)
    q2 = os.path.join(x.conf["state_dir"], "q2")
    check_eq(mounts_of(os.path.join(q2, "workspace")), [], "no mount left")
    check(not loops_of(q2), "no loop device left")
    check(not os.path.exists(q2), "nothing left of q2")
    # too small for a file system: refused before anything is made
    check_err(x.app("POST", "/v1/sandboxes", {"id": "q3", "limits":
              {"disk_mb": 4}}), 400, "bad_request", "disk_mb 4")


@S.case
def artifacts_changed(env):
    """A command's result lists what it changed under /workspace and
    the files it made under outputs/ with size and SHA-256, within the
    configured limits; a link is never followed; past the walk cap the
    changes are not guessed."""
    import hashlib
    d, ctl, x = start(env, artifacts={"file_bytes": 4096, "count": 3,
                                      "total_bytes": 10000,
                                      "walk_entries": 300})
    create(x, "a1")
    for n in ("keep.txt", "old.txt", "mod.txt"):
        check_eq(x.app("PUT", "/v1/sandboxes/a1/files/" + n,
                       raw=b"v").status, 201, "put " + n)
    o = ex(x, "a1", {"shell": "mkdir outputs; printf hello > outputs/a.txt; "
                     "head -c 5000 /dev/zero > outputs/big.bin; "
                     "printf 1 > outputs/b; printf 2 > outputs/c; "
                     "printf 3 > outputs/d; ln -s /etc/shadow outputs/l; "
                     "echo x >> mod.txt; rm old.txt; touch new.txt"})
    check_eq(o["exit_code"], 0, "command: %r" % o)
    ch = {c["path"]: (c["change"], c["type"]) for c in o["changed"]}
    check_eq(ch, {"mod.txt": ("modified", "file"),
                  "old.txt": ("deleted", "file"),
                  "new.txt": ("created", "file"),
                  "outputs": ("created", "directory"),
                  "outputs/a.txt": ("created", "file"),
                  "outputs/big.bin": ("created", "file"),
                  "outputs/b": ("created", "file"),
                  "outputs/c": ("created", "file"),
                  "outputs/d": ("created", "file"),
                  "outputs/l": ("created", "symlink")}, "changed")
    check(not o["changed_truncated"], "not truncated")
    check_eq([(a["path"], a["size"], a["sha256"]) for a in o["artifacts"]],
             [("outputs/a.txt", 5, hashlib.sha256(b"hello").hexdigest()),
              ("outputs/b", 1, hashlib.sha256(b"1").hexdigest()),
              ("outputs/c", 1, hashlib.sha256(b"2").hexdigest())],
             "artifacts")
    check_eq([(a["path"], a["limit"]) for a in o["artifacts_skipped"]],
             [("outputs/big.bin", "file_bytes"), ("outputs/d", "count")],
             "skipped")
    # nothing changed: nothing listed
    o = ex(x, "a1", {"shell": "cat keep.txt >/dev/null"})
    check_eq((o["changed"], o["artifacts"]), ([], []), "no change")
    # the per-command total
    o = ex(x, "a1", {"shell": "rm outputs/*; for i in 1 2 3; do "
                     "head -c 4000 /dev/zero > outputs/t$i; done"})
    check_eq([a["path"] for a in o["artifacts"]],
             ["outputs/t1", "outputs/t2"], "total: artifacts")
    check_eq([(a["path"], a["limit"]) for a in o["artifacts_skipped"]],
             [("outputs/t3", "total_bytes")], "total: skipped")
    check("outputs/a.txt" in [c["path"] for c in o["changed"]
                              if c["change"] == "deleted"], "deleted listed")
    # a background command's status carries them too
    r = x.app("POST", "/v1/sandboxes/a1/commands",
              {"shell": "printf bg > outputs/bg"})
    check_eq(r.status, 202, "background: %r" % r)
    cid = r.json["id"]
    st = wait_until(lambda: (lambda j: j if j.get("status") == "exited"
                             else None)(x.app("GET", "/v1/sandboxes/a1/"
                                              "commands/" + cid).json),
                    20, what="background exit")
    check_eq([a["path"] for a in st["artifacts"]], ["outputs/bg"],
             "background artifacts")
    # past the walk cap: outputs/ (walked first) still gives artifacts,
    # the rest is said not computed
    o = ex(x, "a1", {"shell": "mkdir many; cd many; i=0; while [ $i -lt "
                     "400 ]; do : > f$i; i=$((i+1)); done"}, timeout=60)
    o = ex(x, "a1", {"shell": "printf z > outputs/z; touch many/f1"})
    check(o["changed_truncated"], "truncated: %r" % o["changed_truncated"])
    check_eq([a["path"] for a in o["artifacts"]], ["outputs/z"],
             "artifacts past the walk cap")
    check("many/f1" not in [c["path"] for c in o["changed"]],
          "no guess past the cap")
    # "changed": false: the workspace is not walked, the result has
    # neither list (issue 26 point 4); a non-boolean is refused
    o = ex(x, "a1", {"shell": "printf n > outputs/n; echo ok",
                     "changed": False})
    check_eq(o["stdout"], "ok\n", "changed false: ran: %r" % o)
    check("changed" not in o and "artifacts" not in o,
          "changed false: no lists: %r" % sorted(o))
    check_err(x.app("POST", "/v1/sandboxes/a1/exec",
                    {"cmd": ["true"], "changed": "no"}), 400,
              "bad_request", "changed: not a boolean")
    # and the default still lists what that command made
    o = ex(x, "a1", {"shell": "rm outputs/n"})
    check("outputs/n" in [c["path"] for c in o["changed"]
                          if c["change"] == "deleted"],
          "default lists changes again: %r" % o["changed"])


@S.case
def openapi_routes(env):
    d, ctl, x = start(env)
    with open(OPENAPI) as f:
        doc = json.load(f)
    check(doc.get("openapi", "").startswith("3.1"), "OpenAPI 3.1")
    documented = set()
    for path, ops in doc["paths"].items():
        for m in ops:
            if m in ("get", "put", "post", "delete", "patch"):
                documented.add((m.upper(), path))
    out = subprocess.run([EXECD, "--routes"], stdout=subprocess.PIPE,
                         check=True).stdout.decode().split("\n")
    served = set(tuple(ln.split(" ", 1)) for ln in out if ln)
    check_eq(sorted(served - documented), [], "served, not documented")
    check_eq(sorted(documented - served), [], "documented, not served")
    create(x, "o1")
    # the sandbox's own DELETE last, so that every other route meets it
    for m, path in sorted(documented, key=lambda mp: (
            mp == ("DELETE", "/v1/sandboxes/{id}"), mp)):
        if (m, path) == ("GET", "/v1/events"):
            continue            # a stream without end: events_metrics
        p = path.replace("{id}", "o1").replace("{cid}", "c1").replace(
            "{path}", "f")
        body = {} if m in ("POST", "PATCH") else None
        raw = b"x" if m == "PUT" else None
        r = root_call(x.sock, m, p, body=body, raw=raw)
        check(r.status != 405 and not (r.status == 404 and
                                       "no such route" in r.body.decode()),
              "%s %s: %r" % (m, path, r))
        check(r.status < 300 or (r.json and "error" in r.json and
                                 r.json["error"].get("code")),
              "%s %s: error shape: %r" % (m, path, r))


@S.case
def install(env):
    """install: 400 for anything but package names (options, URLs,
    paths, markers, aliases), 403 network_not_permitted when sluiced's
    effective tier for the session is off (or it has no session), and a
    real pip install from a loopback registry through sluiced."""
    import functools
    import http.server
    sys.path.insert(0, os.path.join(SRCDIR, "demo"))
    import registry
    root = env.path("registry")
    registry.make_index(root)
    handler = functools.partial(registry.Quiet, directory=root)
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    srv.daemon_threads = True
    hits = []
    orig = registry.Quiet.do_GET

    def counting(self):
        hits.append(self.path)
        return orig(self)
    registry.Quiet.do_GET = counting
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.2},
                     daemon=True).start()
    env.closers.append(lambda: (srv.shutdown(), srv.server_close(),
                                setattr(registry.Quiet, "do_GET", orig)))
    port = srv.server_address[1]
    preflight()
    os.chmod(os.path.dirname(env.dir), 0o711)
    os.chmod(env.dir, 0o711)
    # pypi.org is loopback to this sluiced: nothing leaves the host
    cfg = env.config(sessions=[], ceiling="public",
                     ports={"registries": [443, 80, port],
                            "public": [443, 80]},
                     dns={"hosts": {"pypi.org": ["127.0.0.1"]},
                          "timeout_ms": 2000})
    d = env.sluiced(cfg)
    ctl = os.path.join(cfg["runtime_dir"], "control.sock")
    x = Execd(env, ctl).start()
    create(x, "i0", network={"tier": "off"})
    create(x, "i1", network={"tier": "registries"})
    url = "/v1/sandboxes/%s/install"
    # names only: never an option, URL, path, marker or alias
    for m, bad in (("pip", "-e"), ("pip", "--index-url=http://x/"),
                   ("pip", "http://x/p.whl"), ("pip", "p @ http://x/"),
                   ("pip", "../p"), ("pip", "p; os_name=='nt'"),
                   ("pip", "p==1 ; x"), ("pip", "p[a,]"), ("pip", "p=1"),
                   ("pip", ""), ("pip", "p -r x"), ("npm", "--global"),
                   ("npm", "git+ssh://h/r"), ("npm", "./dir"),
                   ("npm", "x@npm:y"), ("npm", "x@file:../y"),
                   ("npm", "@scope"), ("npm", "Upper"), ("npm", "x@-g")):
        check_err(x.app("POST", url % "i1", {"manager": m,
                                              "packages": [bad]}),
                  400, "bad_request", "%s %r" % (m, bad))
    for body in ({"manager": "apt", "packages": ["x"]},
                 {"manager": "pip", "packages": []},
                 {"manager": "pip", "packages": "x"},
                 {"manager": "pip", "packages": ["x"], "index": "y"}):
        check_err(x.app("POST", url % "i1", body), 400, "bad_request",
                  "body %r" % body)
    # tier off: no registry
    r = x.app("POST", url % "i0", {"manager": "pip", "packages": ["x"]})
    check_err(r, 403, "network_not_permitted", "tier off")
    check_eq(r.json["error"].get("effective_tier"), "off", "effective")
    check_err(x.app("POST", url % "i0", {"manager": "npm",
                                         "packages": ["left-pad@^1.3"]}),
              403, "network_not_permitted", "npm, tier off")
    # the ceiling lowers the effective tier below the sandbox's own
    check_eq(api_unix(ctl, "PUT", "/v1/ceiling", {"tier": "off"}).status,
             200, "ceiling off")
    r = x.app("POST", url % "i1", {"manager": "pip", "packages": ["x"]})
    check_err(r, 403, "network_not_permitted", "ceiling off")
    # the error names the sandbox's tier and the ceiling that cut it
    check_eq([r.json["error"].get(k) for k in ("tier", "ceiling",
                                               "effective_tier")],
             ["registries", "off", "off"], "tier, ceiling")
    check_eq(api_unix(ctl, "PUT", "/v1/ceiling", {"tier": "public"}).status,
             200, "ceiling public")
    # a vanished session is made again, with the sandbox's tier (off)
    check_eq(api_unix(ctl, "DELETE", "/v1/sessions/" + K("i0")).status in
             (200, 204),
             True, "session deleted")
    r = x.app("POST", url % "i0", {"manager": "pip", "packages": ["x"]})
    check_err(r, 403, "network_not_permitted", "repaired at tier off")
    check_eq(r.json["error"].get("broker"), "repaired", "broker repaired")
    check_eq(session(ctl, "i0").json["tier"], "off", "session made again")
    # a real install through sluiced from the loopback registry
    ex(x, "i1", {"shell": "mkdir -p ~/.config/pip && printf '[global]\\n"
                 "index-url = http://pypi.org:%d/simple/\\n"
                 "trusted-host = pypi.org\\n' > "
                 "~/.config/pip/pip.conf" % port})
    r = x.app("POST", url % "i1", {"manager": "pip",
                                   "packages": ["sluicedemo==1.0"]},
              timeout=180)
    check_eq(r.status, 200, "install: %r" % r)
    o = r.json
    check_eq(o["command"], ["python3", "-m", "pip", "install", "--user",
                            "--no-input", "--disable-pip-version-check",
                            "--progress-bar", "off", "sluicedemo==1.0"],
             "argv")
    check(o["exit_code"] == 0 and o["manager"] == "pip",
          "pip install: %r (registry saw %r)" % (o, hits))
    check(any(h.startswith("/files/sluicedemo") for h in hits),
          "the wheel came from the loopback registry: %r" % hits)
    o = ex(x, "i1", {"cmd": ["python3", "-c",
                             "import sluicedemo; print(sluicedemo.VALUE)"]})
    check_eq(o["stdout"], "42\n", "installed: %r" % o)
    # it went through the broker: sluiced logged the registry's host
    with open(cfg["log"]["path"]) as f:
        check("pypi.org" in f.read(), "sluiced's log names pypi.org")
    # the broker in step: a session that vanished is made again on the
    # next GET, which shows it, and the sandbox reaches the registry
    # through it again
    check_eq(api_unix(ctl, "DELETE", "/v1/sessions/" + K("i1")).status in
             (200, 204),
             True, "session i1 deleted")
    check_eq(session(ctl, "i1").status, 404, "gone from sluiced")
    g = x.app("GET", "/v1/sandboxes/i1").json
    check_eq((g["network"]["broker"], g["network"]["tier"],
              g["network"]["effective_tier"]),
             ("repaired", "registries", "registries"), "GET: %r" % g)
    check_eq(session(ctl, "i1").json["tier"], "registries", "made again")
    g = x.app("GET", "/v1/sandboxes/i1").json
    check_eq(g["network"]["broker"], "ok", "in step again")
    n = len(hits)
    o = ex(x, "i1", {"cmd": ["python3", "-c", "import urllib.request as u; "
                             "print(u.urlopen('http://pypi.org:%d/simple/')"
                             ".status)" % port]}, timeout=60)
    check_eq(o["stdout"], "200\n", "through the repaired session: %r" % o)
    check(len(hits) > n, "the registry was reached")
    # sluiced restarted without its state: the next GET makes the
    # session again, and the sandbox's network works through it
    d.stop()
    if os.path.exists(cfg["state_file"]):
        os.unlink(cfg["state_file"])
    d = env.sluiced(dict(d.config), name="sluiced2")
    check_eq(session(ctl, "i1").status, 404, "sluiced restarted bare")
    g = x.app("GET", "/v1/sandboxes/i1").json
    check_eq(g["network"]["broker"], "repaired", "after a restart: %r" % g)
    n = len(hits)
    o = ex(x, "i1", {"cmd": ["python3", "-c", "import urllib.request as u; "
                             "print(u.urlopen('http://pypi.org:%d/simple/')"
                             ".status)" % port]}, timeout=60)
    check_eq(o["stdout"], "200\n", "after a sluiced restart: %r" % o)
    check(len(hits) > n, "the registry was reached after the restart")
    # sluiced unreachable: GET still answers and says so
    d.stop()
    g = x.app("GET", "/v1/sandboxes/i1").json
    check_eq((g["network"]["broker"], g["network"]["effective_tier"]),
             ("unreachable", None), "GET without sluiced: %r" % g)


@S.case
def audit_log(env):
    """Every lifecycle action and every command is one record of the
    executor's own hash-chained log (the connection log's format), with
    who, tenant, user, argv (capped), cwd, exit, duration, bytes out,
    oom and timeout; sluicectl log verify --file passes, and fails once
    a record is changed."""
    d, ctl, x = start(env)
    path = x.conf["log"]["path"]
    create(x, "au1", tenant="acme", user="bob")
    check_err(x.app("POST", "/v1/sandboxes", {"id": "au1", "tenant": "acme",
                                              "network": {"tier": "off"}}),
              409, "exists", "second create")
    ex(x, "au1", {"shell": "mkdir -p sub; printf 12345; echo e >&2; exit 3"})
    ex(x, "au1", {"cmd": ["sleep", "5"], "timeout_s": 1, "cwd": "sub"})
    ex(x, "au1", {"cmd": ["echo"] + ["w" * 300] * 80})
    r = x.app("POST", "/v1/sandboxes/au1/commands", {"shell": "exit 0"})
    check_eq(r.status, 202, "background")
    wait_until(lambda: x.app("GET", "/v1/sandboxes/au1/commands/" +
                             r.json["id"]).json.get("status") == "exited",
               20, what="background exit")
    check_eq(x.app("PATCH", "/v1/sandboxes/au1",
                   {"network": {"tier": "off"}}).status, 200, "tier")
    check_eq(x.app("DELETE", "/v1/sandboxes/au1", timeout=60).status, 200,
             "delete")
    with open(path) as f:
        recs = [json.loads(ln) for ln in f]
    for rec in recs:
        check(all(k in rec for k in ("seq", "ts", "prev", "hash")),
              "chained record: %r" % rec)
    box = [(r_["action"], r_["status"], r_["code"]) for r_ in recs
           if r_["event"] == "sandbox"]
    check_eq(box, [("create", 201, None), ("create", 409, "exists"),
                   ("tier", 200, None), ("delete", 200, None)],
             "lifecycle records")
    cr = [r_ for r_ in recs if r_["event"] == "sandbox"][0]
    check_eq((cr["who"], cr["role"], cr["sandbox"], cr["tenant"],
              cr["user"]), ("uid:%d" % NOBODY, "app", "au1", "acme", "bob"),
             "create record")
    cmds = [r_ for r_ in recs if r_["event"] == "command"]
    check_eq(len(cmds), 4, "one record per command: %r" % cmds)
    c1, c2, c3, c4 = cmds
    check_eq((c1["who"], c1["role"], c1["tenant"], c1["user"], c1["kind"],
              c1["argv"][:2], c1["cwd"], c1["exit_code"], c1["signal"],
              c1["stdout_bytes"], c1["stderr_bytes"], c1["oom_killed"],
              c1["timed_out"]),
             ("uid:%d" % NOBODY, "app", "acme", "bob", "foreground",
              ["/bin/sh", "-c"], "/workspace", 3, None, 5, 2, False,
              False), "command record")
    check(isinstance(c1["duration_ms"], int) and c1["duration_ms"] >= 0,
          "duration")
    check(all(c["image"] is None for c in cmds), "no image: host's /usr")
    check_eq((c2["argv"], c2["cwd"], c2["timed_out"]),
             (["sleep", "5"], "/workspace/sub", True), "timed out")
    check(c3["argv_truncated"] and len(json.dumps(c3["argv"])) < 4096,
          "argv capped: %d" % len(json.dumps(c3["argv"])))
    check_eq(c4["kind"], "background", "background record")
    v = subprocess.run([SLUICECTL, "log", "verify", "--file", path],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    check_eq(v.returncode, 0, "verify: %s" % v.stdout.decode())
    # a changed record breaks the chain
    with open(path) as f:
        text = f.read()
    bad = env.path("tampered.jsonl")
    with open(bad, "w") as f:
        f.write(text.replace('"exit_code":3', '"exit_code":0', 1))
    v = subprocess.run([SLUICECTL, "log", "verify", "--file", bad],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    check(v.returncode != 0, "tampered log verifies: %s" % v.stdout.decode())


def dechunk_partial(body):
    """The data of the complete chunks of a chunked body so far, and
    whether the terminal chunk came."""
    out = b""
    while True:
        line, sep, rest = body.partition(b"\r\n")
        if not sep:
            return out, False
        n = int(line, 16)
        if n == 0:
            return out, True
        if len(rest) < n + 2:
            return out, False
        out += rest[:n]
        body = rest[n + 2:]


def metrics(x):
    r = root_call(x.sock, "GET", "/v1/metrics")
    check_eq(r.status, 200, "metrics")
    check(r.header("Content-Type").startswith("text/plain"), "text/plain")
    m = {}
    for ln in r.body.decode().split("\n"):
        if ln and not ln.startswith("#"):
            k, v = ln.rsplit(" ", 1)
            m[k] = int(v)
    return m


@S.case
def events_metrics(env):
    """GET /v1/events streams sandbox created/removed and command
    started/exited as they happen; a reader that does not keep up is
    dropped (told so, its stream ended) while the others go on; GET
    /v1/metrics counts sandboxes, commands, quotas and subscribers."""
    d, ctl, x = start(env, events_buffer_bytes=4096,
                      quotas={"per_user": 7})

    def subscribe(rcvbuf=None):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if rcvbuf:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        s.connect(x.sock)
        s.settimeout(30)
        s.sendall(b"GET /v1/events HTTP/1.1\r\nHost: x\r\n\r\n")
        return s
    fast = subscribe()
    got = bytearray()
    stop = threading.Event()

    def reader():
        while not stop.is_set():
            try:
                b = fast.recv(1 << 20)
            except socket.timeout:
                continue
            if not b:
                break
            got.extend(b)
    t = threading.Thread(target=reader, daemon=True)
    t.start()
    slow = subscribe(rcvbuf=4096)
    wait_until(lambda: metrics(x).get("sluice_execd_event_subscribers") == 2,
               10, what="two subscribers")
    m = metrics(x)
    check_eq(m['sluice_execd_quota_limit{scope="user"}'], 7, "quota")
    create(x, "ev1")
    o = ex(x, "ev1", {"shell": "exit 2"})
    check_eq(o["exit_code"], 2, "exec")

    def events():
        head, _, body = bytes(got).partition(b"\r\n\r\n")
        data, _ = dechunk_partial(body)
        return head, sse_events(data)
    wait_until(lambda: len(events()[1]) >= 3, 10, what="three events")
    head, ev = events()
    check(b"text/event-stream" in head, "SSE head: %r" % head)
    check_eq([(n, p["what"]) for n, p in ev[:3]],
             [("sandbox", "created"), ("command", "started"),
              ("command", "exited")], "events in order")
    check_eq((ev[0][1]["id"], ev[0][1]["tenant"], ev[2][1]["sandbox"],
              ev[2][1]["exit_code"], ev[1][1]["id"] == ev[2][1]["id"]),
             ("ev1", "acme", "ev1", 2, True), "event fields: %r" % ev)
    # the slow reader: events it never reads (small ones: a command's
    # event carries no argv), until its socket and events_buffer_bytes
    # are full
    n = 1
    while metrics(x).get("sluice_execd_event_subscribers_dropped_total",
                         0) == 0 and n < 4000:
        for _ in range(50):
            r = root_call(x.sock, "POST", "/v1/sandboxes/ev1/exec",
                          {"cmd": ["true"]})
            check_eq(r.status, 200, "exec true: %r" % r)
            n += 1
    wait_until(lambda: metrics(x).get(
        "sluice_execd_event_subscribers_dropped_total") == 1, 10,
        what="the slow reader dropped (fast got %d bytes, %r)" % (len(got), metrics(x)))
    m = metrics(x)
    check_eq(m["sluice_execd_event_subscribers"], 1, "one left")
    check_eq(m["sluice_execd_commands_started_total"], n, "started")
    check_eq(m["sluice_execd_commands_exited_total"], n, "exited")
    check_eq(m['sluice_execd_sandboxes{state="running"}'], 1, "running")
    check_eq(m['sluice_execd_quota_in_use{scope="global"}'], 1, "in use")
    # the dropped one is told and its stream ends
    raw = bytearray()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        b = slow.recv(1 << 20)
        if not b:
            break
        raw.extend(b)
        if dechunk_partial(bytes(raw).partition(b"\r\n\r\n")[2])[1]:
            break
    data, ended = dechunk_partial(bytes(raw).partition(b"\r\n\r\n")[2])
    check(ended, "the slow stream ended")
    check_eq(sse_events(data)[-1][0], "dropped", "told it was dropped")
    slow.close()
    # the fast one goes on
    check_eq(x.app("DELETE", "/v1/sandboxes/ev1", timeout=60).status, 200,
             "delete")
    wait_until(lambda: ("sandbox", "removed") in [
        (n, p["what"]) for n, p in events()[1]], 10, what="removed event")
    check_eq(metrics(x)["sluice_execd_sandboxes_removed_total"], 1,
             "removed counted")
    stop.set()
    fast.shutdown(socket.SHUT_RDWR)     # wakes the reader's recv
    t.join(5)
    fast.close()
    # a reader that left is noticed at the next event sent to it (as
    # root, from this process: a forked client would hold the socket)
    check_eq(root_call(x.sock, "POST", "/v1/sandboxes", {
        "id": "ev2", "network": {"tier": "off"}}, timeout=60).status, 201,
        "create ev2")
    wait_until(lambda: metrics(x).get("sluice_execd_event_subscribers") == 0,
               10, what="no subscriber left")


def _tokens(env, names):
    tok = {}
    for name in names:
        tok[name] = "tok-%s-%s" % (name, os.urandom(12).hex())
        with open(env.path(name + ".tok"), "w") as f:
            f.write(tok[name] + "\n")
        os.chmod(env.path(name + ".tok"), 0o600)
    return tok


class TlsEvents:
    """GET /v1/events over TLS with a token, read by a thread."""

    def __init__(self, ctx, port, token):
        raw = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.s = ctx.wrap_socket(raw, server_hostname="execd.test")
        self.s.sendall(("GET /v1/events HTTP/1.1\r\nHost: x\r\n"
                        "Authorization: Bearer %s\r\n\r\n" % token)
                       .encode())
        self.s.settimeout(1)
        self.got = bytearray()
        self.stop = threading.Event()
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        while not self.stop.is_set():
            try:
                b = self.s.recv(1 << 16)
            except (socket.timeout, ssl.SSLError):
                continue
            except OSError:
                break
            if not b:
                break
            self.got.extend(b)

    def events(self):
        body = bytes(self.got).partition(b"\r\n\r\n")[2]
        return sse_events(dechunk_partial(body)[0])

    def close(self):
        self.stop.set()
        self.t.join(5)
        self.s.close()


@S.case
def events_tenants(env):
    """GET /v1/events carries the caller's tenant: a token bound to a
    tenant (an auditor's too) hears that tenant's sandboxes and commands
    only, an unbound one every tenant's; a command's event names its
    program (argv[0]'s basename) and the SHA-256 of its argv, never the
    argv itself."""
    import hashlib
    preflight()
    crt, key = env.cert(("execd.test",))
    tok = _tokens(env, ("acme", "oaud", "aud"))
    port = free_port()
    d, ctl, x = start(env, tcp={
        "listen": "127.0.0.1:%d" % port, "tls_cert": crt, "tls_key": key,
        "tokens": [{"name": "acme-app", "file": env.path("acme.tok"),
                    "role": "app", "tenant": "acme"},
                   {"name": "other-aud", "file": env.path("oaud.tok"),
                    "role": "auditor", "tenant": "other"},
                   {"name": "aud", "file": env.path("aud.tok"),
                    "role": "auditor"}]})
    ctx = ssl.create_default_context(cafile=crt)
    subs = {n: TlsEvents(ctx, port, tok[n]) for n in tok}
    try:
        wait_until(lambda: metrics(x).get(
            "sluice_execd_event_subscribers") == 3, 10,
            what="three subscribers")
        create(x, "ea", tenant="acme", user="alice",
               network={"tier": "off"})
        secret = "s3cr3t-%s" % os.urandom(4).hex()
        ex(x, "ea", {"cmd": ["/bin/echo", secret]})
        create(x, "eo", tenant="other", user="bob", network={"tier": "off"})
        ex(x, "eo", {"shell": "true"})
        wait_until(lambda: len(subs["aud"].events()) >= 6, 10,
                   what="six events for the unbound auditor")
        time.sleep(0.3)
        seen = {n: [(e, p.get("id") if e == "sandbox" else p.get("sandbox"),
                     p["what"]) for e, p in sub.events()]
                for n, sub in subs.items()}
        ea = [("sandbox", "ea", "created"), ("command", "ea", "started"),
              ("command", "ea", "exited")]
        eo = [("sandbox", "eo", "created"), ("command", "eo", "started"),
              ("command", "eo", "exited")]
        check_eq(seen["aud"], ea + eo, "unbound auditor hears all")
        check_eq(seen["acme"], ea, "acme's token hears acme only")
        check_eq(seen["oaud"], eo, "other's auditor hears other only")
        for n, sub in subs.items():
            check(secret.encode() not in bytes(sub.got),
                  "argv in %s's events: %r" % (n, bytes(sub.got)))
        st = [p for e, p in subs["aud"].events() if e == "command" and
              p["what"] == "started"][0]
        want = hashlib.sha256(b"".join(a.encode() + b"\0" for a in
                                       ["/bin/echo", secret])).hexdigest()
        check_eq((st.get("program"), st.get("argv_sha256"),
                  st.get("tenant"), "argv" in st),
                 ("echo", want, "acme", False), "started event: %r" % st)
    finally:
        for sub in subs.values():
            sub.close()


@S.case
def ring_budget(env):
    """ring_budget_bytes: the rings of background commands on the host
    stay within one budget; over it, the output of the oldest FINISHED
    commands goes first (their output route says output_dropped), never
    a running command's; /v1/metrics shows the bytes held and dropped."""
    d, ctl, x = start(env, ring_bytes=4096, ring_budget_bytes=16384)
    create(x, "rb1", network={"tier": "off"})
    cmds = "/v1/sandboxes/rb1/commands"

    def bg(shell):
        r = x.app("POST", cmds, {"shell": shell})
        check_eq(r.status, 202, "background: %r" % r)
        return r.json["id"]

    def done(cid):
        wait_until(lambda: x.app("GET", "%s/%s" % (cmds, cid)).json
                   .get("status") == "exited", 20, what="%s exits" % cid)

    def out(cid):
        r = x.app("GET", "%s/%s/output" % (cmds, cid))
        check_eq(r.status, 200, "output of %s: %r" % (cid, r))
        return r.json
    fin = []
    for i in range(3):
        fin.append(bg("echo out%d" % i))
        done(fin[-1])
    # three finished rings (3 x 2 x 4096) > 16384: the oldest went
    o = out(fin[0])
    check_eq((o.get("output_dropped"), o["stdout"]["data"],
              o["stdout"]["offset"], o["stdout_bytes"]),
             (True, "", 5, 5), "oldest finished dropped: %r" % o)
    for i in (1, 2):
        o = out(fin[i])
        check_eq((o.get("output_dropped"), o["stdout"]["data"]),
                 (False, "out%d\n" % i), "kept %d: %r" % (i, o))
    m = metrics(x)
    check_eq((m["sluice_execd_ring_bytes"],
              m["sluice_execd_ring_budget_bytes"],
              m["sluice_execd_ring_dropped_bytes_total"],
              m["sluice_execd_ring_dropped_total"]),
             (16384, 16384, 5, 1), "ring metrics: %r" % m)
    # running commands: finished ones go first, running ones never
    run = [bg("echo run%d; sleep 30" % i) for i in range(3)]
    wait_until(lambda: all(out(c)["stdout"]["data"] == "run%d\n" % i
                           for i, c in enumerate(run)), 10,
               what="running commands' output")
    check(all(out(c).get("output_dropped") for c in fin),
          "every finished one dropped")
    m = metrics(x)
    check_eq((m["sluice_execd_ring_bytes"],
              m["sluice_execd_ring_dropped_total"]), (3 * 8192, 3),
             "running rings over the budget stay: %r" % m)
    r = x.app("POST", "/v1/sandboxes/rb1/cancel", {"all": True})
    check_eq(r.status, 200, "cancel all: %r" % r)


@S.case
def foreign_ids_missing(env):
    """A token bound to a tenant cannot tell another tenant's sandbox id
    from an unused one: every route answers 404 not_found with the very
    body it gives for an id never used."""
    preflight()
    crt, key = env.cert(("execd.test",))
    tok = _tokens(env, ("b",))
    port = free_port()
    d, ctl, x = start(env, tcp={
        "listen": "127.0.0.1:%d" % port, "tls_cert": crt, "tls_key": key,
        "tokens": [{"name": "b-app", "file": env.path("b.tok"),
                    "role": "app", "tenant": "tb"}]})
    ctx = ssl.create_default_context(cafile=crt)

    def tls(method, path, body=None):
        raw = socket.create_connection(("127.0.0.1", port), timeout=30)
        s = ctx.wrap_socket(raw, server_hostname="execd.test")
        try:
            return _exchange(s, method, path, body,
                             [("Authorization", "Bearer " + tok["b"])],
                             None, 90)
        finally:
            s.close()
    create(x, "chat-1", tenant="ta", user="alice", network={"tier": "off"})
    r = x.app("POST", "/v1/sandboxes/chat-1/commands", {"shell": "true"})
    check_eq(r.status, 202, "A's command")
    cid = r.json["id"]
    routes = [("GET", "/v1/sandboxes/%s", None),
              ("PATCH", "/v1/sandboxes/%s", {"network": {"tier": "off"}}),
              ("DELETE", "/v1/sandboxes/%s", None),
              ("DELETE", "/v1/sandboxes/%s?archive=discard", None),
              ("POST", "/v1/sandboxes/%s/exec", {"shell": "true"}),
              ("POST", "/v1/sandboxes/%s/commands", {"shell": "true"}),
              ("GET", "/v1/sandboxes/%s/commands", None),
              ("GET", "/v1/sandboxes/%s/commands/" + cid, None),
              ("GET", "/v1/sandboxes/%s/commands/" + cid + "/output", None),
              ("POST", "/v1/sandboxes/%s/commands/" + cid + "/stop", None),
              ("POST", "/v1/sandboxes/%s/cancel", None),
              ("GET", "/v1/sandboxes/%s/files", None),
              ("GET", "/v1/sandboxes/%s/files/a.txt", None),
              ("PUT", "/v1/sandboxes/%s/files/a.txt", None),
              ("DELETE", "/v1/sandboxes/%s/files/a.txt", None),
              ("POST", "/v1/sandboxes/%s/edit",
               {"path": "a", "old": "x", "new": "y"}),
              ("POST", "/v1/sandboxes/%s/install",
               {"manager": "pip", "packages": ["x"]}),
              ("GET", "/v1/sandboxes/%s/archive?path=a", None),
              ("PUT", "/v1/sandboxes/%s/archive?path=a", None)]
    for m, pat, body in routes:
        got = tls(m, pat % "chat-1", body)
        unused = tls(m, pat % "chat-9", body)
        check(got.status == 404 and got.code() == "not_found",
              "%s %s of another tenant's id: %r" % (m, pat, got))
        check_eq(got.body.replace(b"chat-1", b"chat-9"), unused.body,
                 "%s %s: the body of an unused id" % (m, pat))
    check_eq(x.app("GET", "/v1/sandboxes/chat-1").status, 200,
             "A's sandbox is still there")


@S.case
def ids_per_tenant(env):
    """Ids are per tenant: tenant A's chat-1 and tenant B's are two
    sandboxes (state dirs, sluiced sessions, files of their own); B
    cannot tell A's from an unused id; a caller bound to no tenant names
    the tenant (?tenant=) of an id several hold (400 ambiguous without);
    a restart adopts both; deleting one leaves the other."""
    preflight()
    crt, key = env.cert(("execd.test",))
    tok = _tokens(env, ("a", "b"))
    port = free_port()
    d, ctl, x = start(env, tcp={
        "listen": "127.0.0.1:%d" % port, "tls_cert": crt, "tls_key": key,
        "tokens": [{"name": "a-app", "file": env.path("a.tok"),
                    "role": "app", "tenant": "ta"},
                   {"name": "b-app", "file": env.path("b.tok"),
                    "role": "app", "tenant": "tb"}]})
    ctx = ssl.create_default_context(cafile=crt)

    def tls(who, method, path, body=None, raw=None):
        s_ = socket.create_connection(("127.0.0.1", port), timeout=30)
        s = ctx.wrap_socket(s_, server_hostname="execd.test")
        try:
            return _exchange(s, method, path, body,
                             [("Authorization", "Bearer " + tok[who])],
                             raw, 90)
        finally:
            s.close()
    r = tls("a", "POST", "/v1/sandboxes", {"id": "chat-1", "user": "al",
                                           "network": {"tier": "off"}})
    check_eq((r.status, r.json.get("id"), r.json.get("tenant")),
             (201, "chat-1", "ta"), "A creates chat-1: %r" % r)
    got = tls("b", "GET", "/v1/sandboxes/chat-1")
    unused = tls("b", "GET", "/v1/sandboxes/chat-9")
    check_eq((got.status, got.body.replace(b"chat-1", b"chat-9")),
             (404, unused.body), "B: A's chat-1 as an unused id")
    r = tls("b", "POST", "/v1/sandboxes", {"id": "chat-1", "user": "bo",
                                           "network": {"tier": "off"}})
    check_eq((r.status, r.json.get("id"), r.json.get("tenant")),
             (201, "chat-1", "tb"), "B creates its own chat-1: %r" % r)
    for who in ("a", "b"):
        r = tls(who, "POST", "/v1/sandboxes/chat-1/exec",
                {"shell": "echo %s > who.txt; cat who.txt" % who})
        check_eq((r.status, r.json.get("stdout")), (200, who + "\n"),
                 "%s runs in its chat-1: %r" % (who, r))
    for who in ("a", "b"):
        r = tls(who, "GET", "/v1/sandboxes")
        check_eq([(b["id"], b["tenant"]) for b in r.json["sandboxes"]],
                 [("chat-1", "t" + who)], "%s lists its own" % who)
    # two host names, two sluiced sessions
    ka, kb = execdlib.key("ta", "chat-1"), execdlib.key("tb", "chat-1")
    check(ka != kb and len(ka) <= 64, "keys %s %s" % (ka, kb))
    for k_ in (ka, kb):
        check(os.path.exists(os.path.join(x.state_dir, k_, "record.json")),
              "state dir %s" % k_)
        check_eq(api_unix(ctl, "GET", "/v1/sessions/" + k_).status, 200,
                 "sluiced session %s" % k_)
    # a caller bound to no tenant: ?tenant= for an id two tenants hold
    r = x.app("GET", "/v1/sandboxes/chat-1")
    check_err(r, 400, "bad_request", "ambiguous id")
    check_eq((r.json["error"].get("reason"), r.json["error"].get("tenants")),
             ("ambiguous", 2), "ambiguous: %r" % r)
    r = x.app("GET", "/v1/sandboxes/chat-1?tenant=tb")
    check_eq((r.status, r.json.get("tenant")), (200, "tb"), "?tenant=tb")
    # a restart adopts both
    x.halt()
    x.start()
    for who in ("a", "b"):
        r = tls(who, "POST", "/v1/sandboxes/chat-1/exec",
                {"shell": "cat who.txt"})
        check_eq((r.status, r.json.get("stdout")), (200, who + "\n"),
                 "%s's chat-1 after a restart: %r" % (who, r))
    # deleting B's leaves A's
    r = tls("b", "DELETE", "/v1/sandboxes/chat-1?archive=discard")
    check_eq(r.status, 200, "B deletes its chat-1: %r" % r)
    check_eq(tls("b", "GET", "/v1/sandboxes/chat-1").status, 404,
             "B's is gone")
    r = tls("a", "POST", "/v1/sandboxes/chat-1/exec", {"shell": "cat who.txt"})
    check_eq((r.status, r.json.get("stdout")), (200, "a\n"),
             "A's chat-1 stays: %r" % r)
    check_eq(x.app("GET", "/v1/sandboxes/chat-1").json.get("tenant"), "ta",
             "one left: no ?tenant= needed")


def runsc_works():
    r = subprocess.run(["sh", "-c", "command -v runsc"],
                       stdout=subprocess.PIPE)
    return r.returncode == 0


@S.case
def gvisor_smoke(env):
    preflight()
    if not runsc_works():
        raise Skip("runsc not installed")
    d, ctl, x = start(env)
    r = x.app("POST", "/v1/sandboxes", {"id": "g1", "backend": "gvisor",
                                        "network": {"tier": "public"},
                                        "limits": {"memory_mb": 256}},
              timeout=180)
    if r.status == 503 and r.code() == "backend_unavailable":
        raise Skip("gvisor does not run here: %s" % r.json["error"]
                   ["message"])
    check_eq(r.status, 201, "gvisor create: %r" % r)
    o = ex(x, "g1", {"shell": "echo hi; id -u"}, timeout=120)
    check(o["exit_code"] == 0 and o["stdout"].startswith("hi\n"),
          "gvisor exec: %r" % o)
    check_eq(x.app("PUT", "/v1/sandboxes/g1/files/x.txt", raw=b"g").status,
             201, "gvisor put")
    o = ex(x, "g1", {"shell": "cat x.txt"}, timeout=120)
    check_eq(o["stdout"], "g", "file seen inside gvisor")
    o = ex(x, "g1", {"shell": "sleep 60", "timeout_s": 2}, timeout=120)
    check(o["timed_out"], "gvisor timeout: %r" % o)
    # OOM: the host's cgroup of the sandbox counts the kill
    o = ex(x, "g1", {"shell": "python3 -c 'b = bytearray(768 << 20); "
                     "print(len(b))'", "timeout_s": 60}, timeout=120)
    g = x.app("GET", "/v1/sandboxes/g1").json
    log("gvisor oom: %r; sandbox %s" % (
        {k: o[k] for k in ("exit_code", "signal", "oom_killed")},
        g["state"]))
    if g["limits"]["memory_mb"] and "memory/cpu limits not applied" not in \
            (g["note"] or ""):
        # the limit is the whole sandbox's: the sentry goes, and the
        # sandbox with it (it says so)
        check(o["oom_killed"] and o["exit_code"] != 0, "gvisor oom: %r" % o)
        check_eq(g["state"], "dead", "a gVisor sandbox after an OOM")
    check_eq(x.app("DELETE", "/v1/sandboxes/g1", timeout=120).status, 200,
             "gvisor delete")





def _group_of(x, cid):
    """The command group execd logged for command cid ("a...": the gVisor
    agent's, "c...": a runsc exec's), None if not logged."""
    for line in x.stderr(50000).splitlines():
        m = re.search(r"command %s started \(pid \d+, group (\S+)\)" %
                      re.escape(cid), line)
        if m:
            return m.group(1)
    return None


@S.case
def gvisor_agent(env):
    """gVisor commands go through the in-sandbox agent (one connection to
    <state>/agent/agent.sock, no runsc exec): the group execd logs says
    so.  The sandbox user cannot reach the agent.  Without its socket the
    backend falls back to runsc exec, and commands still run."""
    preflight()
    if not runsc_works():
        raise Skip("runsc not installed")
    d, ctl, x = start(env, backend="gvisor")
    r = x.app("POST", "/v1/sandboxes", {"id": "ga", "tenant": "acme",
                                        "user": "alice",
                                        "network": {"tier": "public"}},
              timeout=180)
    if r.status == 503 and r.code() == "backend_unavailable":
        raise Skip("gvisor does not run here: %s" % r.json["error"]
                   ["message"])
    check_eq(r.status, 201, "gvisor create: %r" % r)
    sock = os.path.join(x.conf["state_dir"], K("ga"), "agent", "agent.sock")
    check(stat.S_ISSOCK(os.lstat(sock).st_mode), "no agent socket %s" % sock)

    def timed(body):
        t0 = time.monotonic()
        o = ex(x, "ga", body, timeout=120)
        return o, (time.monotonic() - t0) * 1000
    ms = []
    for i in range(5):
        o, t = timed({"cmd": ["sh", "-c", "echo out; echo err >&2; exit 3"]})
        ms.append(t)
        check_eq((o["exit_code"], o["stdout"], o["stderr"]),
                 (3, "out\n", "err\n"), "result through the agent")
    g = _group_of(x, o["id"])
    check(g is not None and g.startswith("a"),
          "command not started by the agent: group %r" % g)
    log("exec round trip through the agent: median %.1f ms of %d" %
        (sorted(ms)[len(ms) // 2], len(ms)))
    # commands one after another are one worker's (it is counted idle
    # before the host has the exit, so the next command finds it)
    ppids = {ex(x, "ga", {"shell": "echo $PPID"})["stdout"]
             for i in range(4)}
    check_eq(len(ppids), 1, "workers of four commands in a row: %r" % ppids)
    # stdin echoed back (as much as a request body takes) and output of
    # many frames; env, cwd, exit by signal
    data = "".join("line %06d\n" % i for i in range(4000))
    o = ex(x, "ga", {"cmd": ["cat"], "stdin": data}, timeout=120)
    check(o["exit_code"] == 0 and o["stdout"] == data,
          "stdin echoed: exit %r, %d of %d bytes" % (
              o["exit_code"], len(o["stdout"]), len(data)))
    o = ex(x, "ga", {"shell": "head -c 600000 /dev/zero | tr '\\0' a",
                     "output_cap": 1 << 20}, timeout=120)
    check(o["exit_code"] == 0 and o["stdout"] == "a" * 600000,
          "output of many frames: exit %r, %d bytes" % (
              o["exit_code"], len(o["stdout"])))
    o = ex(x, "ga", {"shell": "echo $FOO; pwd", "env": {"FOO": "bar"},
                     "cwd": "/tmp"})
    check_eq(o["stdout"], "bar\n/tmp\n", "env and cwd")
    o = ex(x, "ga", {"shell": "kill -9 $$"})
    check_eq((o["exit_code"], o["signal"]), (137, 9), "signal")
    o = ex(x, "ga", {"shell": "nosuchcommand-x"})
    check_eq(o["exit_code"], 127, "command not found")
    # nothing of the agent's privileges: no capability can come back, the
    # sandbox's seccomp filter is on
    o = ex(x, "ga", {"shell": "grep -E '^(CapInh|CapBnd|Seccomp):' "
                     "/proc/self/status"})
    check_eq(o["stdout"].split(), ["CapInh:", "0000000000000000",
                                   "CapBnd:", "0000000000000000",
                                   "Seccomp:", "2"], "privileges")
    # runsc starts under the backend's filter that answers its
    # MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED (sbx_gvisor.c): the
    # sandbox's own membarrier(2) is the sentry's, whole (QUERY: GLOBAL,
    # GLOBAL_EXPEDITED and both PRIVATE_EXPEDITED commands; registering
    # and the private barrier work), and runsc logged no failure
    nr = {"x86_64": 324, "aarch64": 283}.get(os.uname().machine)
    if nr is None:
        log("membarrier inside: not checked (no syscall number known "
            "for %s)" % os.uname().machine)
    else:
        o = ex(x, "ga", {"cmd": ["python3", "-c",
                                 "import ctypes\n"
                                 "l = ctypes.CDLL(None, use_errno=True)\n"
                                 "print(*[l.syscall(%d, c, 0) "
                                 "for c in (0, 16, 8, 1)])" % nr]})
        check_eq((o["exit_code"], o["stdout"]), (0, "31 0 0 0\n"),
                 "membarrier inside: %r" % o)
    with open(os.path.join(x.conf["state_dir"], K("ga"), "init.log"),
              errors="replace") as f:
        ilog = f.read()
    check("membarrier" not in ilog, "runsc complained: %r" % ilog[-500:])
    # runsc is started with descriptor 300 open (sbx_gvisor.c,
    # gv_fd_reserve), which its sandbox process keeps: a descriptor
    # table of 512 from the start, and that descriptor an empty pipe
    # with no writer, not a file of the host's
    with open(os.path.join(x.conf["state_dir"], K("ga"), "record.json")) as f:
        spid = json.load(f)["init_pid"]
    with open("/proc/%d/status" % spid) as f:
        fdsize = int(re.search(r"^FDSize:\s*(\d+)", f.read(), re.M).group(1))
    check(fdsize >= 512, "sandbox process's descriptor table: %d" % fdsize)
    check(os.readlink("/proc/%d/fd/300" % spid).startswith("pipe:"),
          "descriptor 300 of the sandbox process: %s" %
          os.readlink("/proc/%d/fd/300" % spid))
    fd = os.open("/proc/%d/fd/300" % spid, os.O_RDONLY | os.O_NONBLOCK)
    try:
        check_eq(os.read(fd, 16), b"", "its pipe has no writer")
    finally:
        os.close(fd)
    # the agent is root inside: its directory is not the sandbox user's
    o = ex(x, "ga", {"shell": "ls /dev/sluice-agent 2>&1; echo rc=$?"})
    check("rc=0" not in o["stdout"], "the sandbox user reaches the "
          "agent's directory: %r" % o["stdout"])
    # a timeout kills the tree through the agent (setsid included)
    o = ex(x, "ga", {"shell": "(setsid sh -c 'sleep 300' &); sleep 300",
                     "timeout_s": 1}, timeout=120)
    check(o["timed_out"], "timeout: %r" % o)
    o = ex(x, "ga", {"shell": "pgrep -c sleep || true"})
    check_eq(o["stdout"].strip(), "0", "tree left after the timeout")
    # a command that leaves a job behind ends when it does
    o = ex(x, "ga", {"shell": "sleep 30 >/dev/null 2>&1 &"}, timeout=60)
    check_eq(o["exit_code"], 0, "background job left")
    # no socket: runsc exec, as before the agent
    os.unlink(sock)
    ms = []
    for i in range(3):
        o, t = timed({"cmd": ["sh", "-c", "echo out; exit 3"]})
        ms.append(t)
        check_eq((o["exit_code"], o["stdout"]), (3, "out\n"),
                 "result through runsc exec")
    g = _group_of(x, o["id"])
    check(g is not None and g.startswith("c"),
          "without the agent's socket: group %r" % g)
    log("exec round trip through runsc exec: median %.1f ms of %d" %
        (sorted(ms)[len(ms) // 2], len(ms)))
    check_eq(x.app("DELETE", "/v1/sandboxes/ga", timeout=120).status, 200,
             "gvisor delete")

@S.case
def gvisor_root_template(env):
    """A gVisor sandbox on the host's root runs on one template shared by
    the sandboxes of the state dir (<state>/.gvisor-root/<signature>,
    bundle/rootfs links to it): its /etc holds the host's entries
    (directories copied, not bound), what others may not read empty, and
    the sandbox's own passwd bound over.  A change of a source (here the
    shim's times) makes a new template for later sandboxes and leaves the
    older one to those made on it.  A template no sandbox links to and
    none picked for a minute goes when a new one is made; a recent one
    stays.  Leftovers of removals cut short (.del-*) go at once, and
    builds whose process is gone (.tmp-<pid>-*).  A template is of one
    boot only (the daemon restarted with another boot id, bound over
    /proc/sys/kernel/random/boot_id in its own mount namespace, makes a
    new one), and is known in use by its name whatever the state dir's
    spelling (the restart's is a symlink).  An /etc file others may read
    that cannot be read (a sysfs file bound into a fake /etc/ssl, read:
    EINVAL) is copied empty with a warning instead of failing the
    create; one others may not read is copied empty."""
    preflight()
    if not runsc_works():
        raise Skip("runsc not installed")
    if shutil.which("unshare") is None:
        raise Skip("unshare (util-linux) not installed")
    shim = env.path("shim", "sluice-shim")
    os.makedirs(os.path.dirname(shim), mode=0o755, exist_ok=True)
    shutil.copy2(SHIM, shim)
    d, ctl, x = start(env, backend="gvisor", shim=shim)
    state = x.conf["state_dir"]
    base = os.path.join(state, ".gvisor-root")

    def make(sid):
        r = x.app("POST", "/v1/sandboxes", {"id": sid, "tenant": "acme",
                                            "user": "alice",
                                            "network": {"tier": "public"}},
                  timeout=180)
        if sid == "t1" and r.status == 503 and \
                r.code() == "backend_unavailable":
            raise Skip("gvisor does not run here: %s" %
                       r.json["error"]["message"])
        check_eq(r.status, 201, "gvisor create %s: %r" % (sid, r))
        link = os.path.join(state, K(sid), "bundle", "rootfs")
        check(os.path.islink(link), "%s: bundle/rootfs is no link" % sid)
        return os.readlink(link)

    def age(p, s):
        t = time.time() - s
        os.utime(p, (t, t))

    t1 = make("t1")
    check_eq(os.path.dirname(t1), base, "template's place: %s" % t1)
    check_eq(make("t2"), t1, "a second sandbox's template")
    # what the sandbox sees is the host's
    with open(os.path.join(state, K("t1"), "record.json")) as f:
        uid = json.load(f)["host_uid"]
    o = ex(x, "t1", {"shell": "id -u; grep '^user:' /etc/passwd | "
                     "cut -d: -f3; cd /etc && find ssl alternatives "
                     "python3 2>/dev/null | sort | sha256sum; "
                     "sha256sum < /etc/ssl/certs/ca-certificates.crt"})
    h = subprocess.run("cd /etc && find ssl alternatives python3 "
                       "2>/dev/null | sort | sha256sum; sha256sum < "
                       "/etc/ssl/certs/ca-certificates.crt", shell=True,
                       stdout=subprocess.PIPE, universal_newlines=True)
    check_eq(o["stdout"], "%d\n%d\n%s" % (uid, uid, h.stdout),
             "/etc inside against the host's")
    for dp, dns, fns in os.walk("/etc/ssl"):
        st = os.lstat(dp)
        mine = os.path.join(t1, os.path.relpath(dp, "/"))
        # (the copy has no set-id or sticky bit)
        check_eq(os.lstat(mine).st_mode & ~0o7000, st.st_mode & ~0o7000,
                 "mode of %s" % mine)
        if st.st_mode & 0o005 != 0o005:
            check_eq(os.listdir(mine), [], "%s: others may not read it, "
                     "copied with its entries" % dp)
            dns[:] = []
    # a source changed: a new template for the next, the old one kept
    # for those on it
    age(shim, 30)
    t3 = make("t3")
    check(t3 != t1 and os.path.dirname(t3) == base,
          "after the shim changed: %s, before %s" % (t3, t1))
    check(os.path.isdir(t1) and os.readlink(os.path.join(
        state, K("t1"), "bundle", "rootfs")) == t1, "t1's template kept")
    o = ex(x, "t3", {"shell": "id -u"})
    check_eq(o["stdout"], "%d\n" % json.load(open(os.path.join(
        state, K("t3"), "record.json")))["host_uid"], "t3 runs")
    # unused for a minute: gone when the next one is made; leftovers of
    # a killed build too; a recent one stays
    for sid in ("t1", "t2", "t3"):
        check_eq(x.app("DELETE", "/v1/sandboxes/" + sid,
                       timeout=120).status, 200, "delete " + sid)
    planted = [os.path.join(base, n) for n in ("f" * 16, ".tmp-1-x",
                                               "e" * 16)]
    for p in planted:
        os.mkdir(p)
    for p in (t1, t3, planted[0], planted[1]):
        age(p, 120)
    age(shim, 60)
    t4 = make("t4")
    check_eq(sorted(os.listdir(base)), sorted([os.path.basename(t4),
                                               "e" * 16]),
             "templates after a new one")
    # a removal cut short: gone at once; a build of a process that is
    # gone too; a recent build of a live process stays
    dead = subprocess.Popen(["true"])
    dead.wait()
    planted = [os.path.join(base, n) for n in (
        ".del-1-0-" + "d" * 16, ".tmp-%d-%s" % (dead.pid, "c" * 16),
        ".tmp-%d-%s" % (os.getpid(), "b" * 16))]
    for p in planted:
        os.makedirs(os.path.join(p, "etc"))
        with open(os.path.join(p, "etc", "f"), "w") as f:
            f.write("x")
    os.utime(os.path.join(base, "e" * 16), None)
    age(shim, 90)
    t5 = make("t5")
    check_eq(sorted(os.listdir(base)), sorted([
        os.path.basename(t4), os.path.basename(t5), "e" * 16,
        os.path.basename(planted[2])]), "templates after leftovers")
    check_eq(x.app("DELETE", "/v1/sandboxes/t5", timeout=120).status, 200,
             "delete t5")
    for p in (t4, t5):
        age(p, 120)

    def restart(state_dir, boot=None, ssl=None):
        # the daemon in its own mount namespace (private: nothing of it
        # reaches the host's), with boot_id and /etc/ssl bound over
        cmds = []
        if boot is not None:
            f = env.path("boot_id-%s" % boot)
            with open(f, "w") as o:
                o.write(boot + "\n")
            cmds.append("mount --bind '%s' /proc/sys/kernel/random/"
                        "boot_id" % f)
        if ssl is not None:
            cmds.append("mount --bind /sys/class/net/lo/speed '%s/speed' "
                        "&& mount --rbind '%s' /etc/ssl" % (ssl, ssl))
        w = env.path("execd-wrap-%d.sh" % len(os.listdir(env.dir)))
        with open(w, "w") as o:
            o.write("#!/bin/sh\nexec unshare -m --propagation private sh "
                    "-c '%s && exec \"$@\"' sh '%s' \"$@\"\n" % (
                        " && ".join(cmds).replace("'", "'\\''"),
                        real))
        os.chmod(w, 0o755)
        x.kill()
        x.killed = False
        x.conf["state_dir"] = state_dir
        execdlib.EXECD = w
        try:
            x.start()
        finally:
            execdlib.EXECD = real

    real = execdlib.EXECD
    # another boot, and the state dir spelled otherwise: a new template;
    # t4's kept (t4 links to it), t5's gone
    alias = env.path("xstate-alias")
    os.symlink(state, alias)
    restart(alias, boot="0f0e0d0c-0b0a-0908-0706-050403020100")
    base = os.path.join(alias, ".gvisor-root")
    t6 = make("t6")
    check(os.path.basename(t6) not in (os.path.basename(t4),
                                       os.path.basename(t5)),
          "another boot's template taken: %s" % t6)
    check_eq(sorted(os.listdir(base)), sorted([
        os.path.basename(t4), os.path.basename(t6), "e" * 16,
        os.path.basename(planted[2])]), "templates after another boot")
    o = ex(x, "t4", {"shell": "head -c 3 /etc/os-release"})
    check_eq(o["stdout"], open("/etc/os-release").read()[:3], "t4 runs")
    # an unreadable /etc entry: copied empty, the create goes on
    ssl = env.path("fake-ssl")
    os.makedirs(ssl)
    for n, mode in (("ok.pem", 0o644), ("secret.key", 0o600),
                    ("speed", 0o644)):
        with open(os.path.join(ssl, n), "w") as o:
            o.write("content of %s\n" % n)
        os.chmod(os.path.join(ssl, n), mode)
    # speed: a sysfs file others may read whose read fails (EINVAL: lo
    # has no speed), bound there in the daemon's namespace only
    restart(alias, boot="0f0e0d0c-0b0a-0908-0706-050403020100",
            ssl=ssl)
    t7 = make("t7")
    got = {n: open(os.path.join(t7, "etc", "ssl", n)).read()
           for n in ("ok.pem", "secret.key", "speed")}
    check_eq(got, {"ok.pem": "content of ok.pem\n", "secret.key": "",
                   "speed": ""}, "the fake /etc/ssl's copy")
    check("/etc/ssl/speed: copied empty" in x.stderr(200),
          "no warning for /etc/ssl/speed:\n%s" % x.stderr(20))
    for sid in ("t4", "t6", "t7"):
        check_eq(x.app("DELETE", "/v1/sandboxes/" + sid,
                       timeout=120).status, 200, "delete " + sid)


@S.case
def ns_agent(env):
    """ns commands go through the holder's agent where the sandbox's
    cgroup is v1 (one connection to /dev/sluice-agent/agent.sock inside,
    reached through /proc/<holder>/root: no setns, no process of the
    daemon: it waits for the exit on the connection): the group execd
    logs says so ("a...").  The same confinement as the setns path; the
    sandbox user cannot reach the agent; a timeout kills the tree; a job
    left behind survives the command and its group; without the socket
    commands enter with setns ("x...") and still run.  (That a running
    command outlives a daemon killed, its connection gone, is
    crash_with_sandboxes's.)"""
    preflight()
    d, ctl, x = start(env)
    r = x.app("POST", "/v1/sandboxes", {"id": "na", "tenant": "acme",
                                        "user": "alice"})
    check_eq(r.status, 201, "ns create: %r" % r)
    with open(os.path.join(x.state_dir, K("na"), "record.json")) as f:
        rec = json.load(f)
    if rec.get("cgroup") != "v1":
        x.app("DELETE", "/v1/sandboxes/na")
        raise Skip("the ns agent needs cgroup v1 (here: %r)" %
                   rec.get("cgroup"))
    sock = "/proc/%d/root/dev/sluice-agent/agent.sock" % rec["init_pid"]
    check(stat.S_ISSOCK(os.lstat(sock).st_mode), "no agent socket %s" % sock)
    for i in range(3):
        o = ex(x, "na", {"cmd": ["sh", "-c", "echo out; echo err >&2; "
                                             "exit 3"]})
        check_eq((o["exit_code"], o["stdout"], o["stderr"]),
                 (3, "out\n", "err\n"), "result through the agent")
    g = _group_of(x, o["id"])
    check(g is not None and g.startswith("a"),
          "command not started by the agent: group %r" % g)
    # commands one after another have one worker (no fork of the holder
    # per command); one beside a running command gets another
    ppids = {ex(x, "na", {"shell": "echo $PPID"})["stdout"]
             for i in range(4)}
    check_eq(len(ppids), 1, "workers of four commands in a row: %r" % ppids)
    r = x.app("POST", "/v1/sandboxes/na/commands",
              {"shell": "echo $PPID; sleep 3"})
    check_eq(r.status, 202, "background command: %r" % r)
    time.sleep(0.5)
    beside = ex(x, "na", {"shell": "echo $PPID"})["stdout"]
    again = ex(x, "na", {"shell": "echo $PPID"})["stdout"]
    check(beside not in ppids and again == beside,
          "a command beside a running one: worker %r (the busy one %r, "
          "next %r)" % (beside, ppids, again))
    # a running command has no process of the daemon standing for it
    def kids():
        k = []
        for t in os.listdir("/proc/%d/task" % x.proc.pid):
            with open("/proc/%d/task/%s/children" % (x.proc.pid, t)) as f:
                k += f.read().split()
        return k
    # (a worker of the daemon's own may come and go: a relay would stay)
    wait_until(lambda: kids() == [], 2,
               what="no child of the daemon while a command runs")
    check(x.app("GET", "/v1/sandboxes/na/commands/%s" % r.json["id"]
                ).json["status"] == "running", "the command still runs")
    wait_until(lambda: x.app("GET", "/v1/sandboxes/na/commands/%s" %
                             r.json["id"]).json["status"] == "exited", 20,
               what="the background command's exit")
    check_eq(x.app("GET", "/v1/sandboxes/na/commands/%s" % r.json["id"]
                   ).json["exit_code"], 0, "its exit code")
    # after commands side by side, the idle workers beyond one retire
    # (5 s) even while commands keep coming one by one
    def agents():
        n = 0
        with open("/proc/%d/task/%d/children" % (rec["init_pid"],
                                                  rec["init_pid"])) as f:
            for p in f.read().split():
                try:
                    with open("/proc/%s/comm" % p) as c:
                        n += c.read().strip() == "sbx-agent"
                except OSError:
                    pass
        return n
    # (3 s: the three overlap even when a loaded machine is slow to
    # start them)
    ids = [x.app("POST", "/v1/sandboxes/na/commands",
                 {"shell": "sleep 3"}).json["id"] for i in range(3)]
    for c in ids:
        wait_until(lambda: x.app("GET", "/v1/sandboxes/na/commands/%s" % c
                                 ).json["status"] == "exited", 20,
                   what="a command side by side")
    most = agents()
    check(most >= 3, "workers after commands side by side: %d" % most)
    t0 = time.monotonic()
    while agents() > 1 and time.monotonic() - t0 < 20:
        ex(x, "na", {"shell": "true"})
        time.sleep(0.5)
    check_eq(agents(), 1, "workers left after %.0f s of one command at a "
             "time (from %d)" % (time.monotonic() - t0, most))
    data = "".join("line %06d\n" % i for i in range(4000))
    o = ex(x, "na", {"cmd": ["cat"], "stdin": data})
    check(o["exit_code"] == 0 and o["stdout"] == data,
          "stdin echoed: exit %r, %d of %d bytes" % (
              o["exit_code"], len(o["stdout"]), len(data)))
    o = ex(x, "na", {"shell": "echo $FOO; pwd; id -u", "env": {"FOO": "bar"},
                     "cwd": "/tmp"})
    check_eq(o["stdout"], "bar\n/tmp\n1000\n", "env, cwd and user")
    o = ex(x, "na", {"shell": "kill -9 $$"})
    check_eq((o["exit_code"], o["signal"]), (137, 9), "signal")
    o = ex(x, "na", {"shell": "nosuchcommand-x"})
    check_eq(o["exit_code"], 127, "command not found")
    o = ex(x, "na", {"shell": "grep -E '^(CapInh|CapPrm|CapEff|CapBnd|"
                     "NoNewPrivs|Seccomp):' /proc/self/status"})
    check_eq(o["stdout"].split(), ["CapInh:", "0000000000000000",
                                   "CapPrm:", "0000000000000000",
                                   "CapEff:", "0000000000000000",
                                   "CapBnd:", "0000000000000000",
                                   "NoNewPrivs:", "1",
                                   "Seccomp:", "2"], "privileges")
    # the command's process is in its own freezer group, within the
    # sandbox's memory group (its accounting and OOM count)
    o = ex(x, "na", {"shell": "cat /proc/self/cgroup"})
    lines = dict(ln.split(":", 2)[1:] for ln in o["stdout"].splitlines())
    fz = lines.get("freezer", "")
    check_eq(fz.rsplit("/", 1)[-1], _group_of(x, o["id"]), "freezer group")
    check_eq(lines.get("memory"), fz.rsplit("/", 1)[0], "memory group")
    o = ex(x, "na", {"shell": "ls /dev/sluice-agent 2>&1; echo rc=$?"})
    check("rc=0" not in o["stdout"], "the sandbox user reaches the "
          "agent's directory: %r" % o["stdout"])
    o = ex(x, "na", {"shell": "(setsid sh -c 'sleep 300' &); sleep 300",
                     "timeout_s": 1}, timeout=60)
    check(o["timed_out"], "timeout: %r" % o)
    o = ex(x, "na", {"shell": "pgrep -c sleep || true"})
    check_eq(o["stdout"].strip(), "0", "tree left after the timeout")
    t0 = time.monotonic()
    o = ex(x, "na", {"shell": "sleep 30 >/dev/null 2>&1 &"}, timeout=60)
    check(o["exit_code"] == 0 and time.monotonic() - t0 < 10,
          "background job left: %r" % o)
    o = ex(x, "na", {"shell": "pgrep -c sleep || true"})
    check_eq(o["stdout"].strip(), "1", "the job left behind runs on")
    # a worker that waited 30 s for a command retires: an idle sandbox
    # is its holder and its shim; the next command makes one again
    check(agents() >= 1, "no worker after a command")
    wait_until(lambda: agents() == 0, 45, what="the idle worker's retirement")
    o = ex(x, "na", {"shell": "echo again"})
    check_eq((o["exit_code"], o["stdout"]), (0, "again\n"),
             "a command after the workers retired")
    check_eq(agents(), 1, "workers after that command")
    # a sandbox at its pids limit: no worker can be made for a command,
    # and the holder says so at once (the daemon waited 10 s for an
    # answer in its loop, for every tenant)
    r = x.app("POST", "/v1/sandboxes", {"id": "np", "tenant": "acme",
                                        "user": "alice",
                                        "limits": {"pids": 24}})
    check_eq(r.status, 201, "create with pids 24: %r" % r)
    r = x.app("POST", "/v1/sandboxes/np/commands", {"cmd": [
        "python3", "-c",
        "import os, time\n"
        "for i in range(64):\n"
        "    try:\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(120)\n"
        "            os._exit(0)\n"
        "    except OSError:\n"
        "        break\n"
        "open('full', 'w').close()\n"
        "time.sleep(120)\n"]})
    check_eq(r.status, 202, "the command that fills pids: %r" % r)
    wait_until(lambda: x.app("GET", "/v1/sandboxes/np/files/full"
                             ).status == 200, 30, what="pids full")
    t0 = time.monotonic()
    r = x.app("POST", "/v1/sandboxes/np/exec", {"shell": "true"},
              timeout=60)
    took = time.monotonic() - t0
    check(r.status != 200 and took < 3,
          "an exec at the pids limit: %r after %.1f s" % (r, took))
    check("pids" in json.dumps(r.json), "the answer names the pids "
          "limit: %r" % r.json)
    check_eq(x.app("DELETE", "/v1/sandboxes/np").status, 200, "delete np")
    os.unlink(sock)
    o = ex(x, "na", {"cmd": ["sh", "-c", "echo out; exit 3"]})
    check_eq((o["exit_code"], o["stdout"]), (3, "out\n"),
             "result through setns")
    g = _group_of(x, o["id"])
    check(g is not None and g.startswith("x"),
          "without the agent's socket: group %r" % g)
    check_eq(x.app("DELETE", "/v1/sandboxes/na").status, 200, "ns delete")


def on_gvisor(fn, suite=None, name=None):
    """The case fn again in suite (this one's by default), every sandbox
    of it on gVisor, named name or gvisor_<fn> (a shorter name where a
    session socket's path under the case's directory would pass
    sun_path's 107 bytes)."""
    def case(env):
        preflight()
        if not runsc_works():
            raise Skip("runsc not installed")
        _backend["name"] = "gvisor"
        try:
            fn(env)
        finally:
            _backend["name"] = ""
    case.__name__ = name or "gvisor_" + fn.__name__
    case.__doc__ = fn.__doc__
    return (suite or S).case(case)


for _fn in (commands, streaming, files, workspace_quota, artifacts_changed):
    on_gvisor(_fn)


if __name__ == "__main__":
    S.main()
