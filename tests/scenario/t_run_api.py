#!/usr/bin/env python3
"""sluice-run as the command line of sluice-execd: the real binary, run
as an UNPRIVILEGED uid (nobody) in the executor's app group, against the
real sluice-execd and sluiced (t_execd.py's start() and Execd), for
every verb of its API mode: health and doctor, create, list, get, exec
(exit status, stdout and stderr apart, stdin, env, cwd, timeout 124,
output as it comes: the first line of `echo a; sleep 1; echo b` is read
before the command ends), busy and cancel, background start, commands,
output (--follow), stop; write, read (cut at max_file_bytes, exit 8),
ls (glob, recursive), edit (409 conflict), rm; tier (sluiced's session
follows), install refused at tier off; destroy (--discard, also of an
id whose sandbox is gone: its archive alone).  Errors are
"sluice-run: CODE: message (fields)" with the stable exit statuses of
sluice-run(1): 404 -> 3, 409 exists -> 6, 429 quota_exceeded -> 4 (scope,
limit and in_use in the message), 429 busy -> 10, 400 -> 2, 403
profile_forbidden -> 9, 409 conflict -> 11, 403 network_not_permitted
-> 12, 413 -> 14, 403 for a caller in no role -> 13, 503
broker_unavailable -> 5 with sluiced stopped, an unreachable socket ->
15; every --json output parses.  SIGINT to an exec cancels its command
(137, "cancelled") in seconds.  fake_daemon scripts the daemon for an
early 413 after a failed write (14), a stream without its exit event
(125), SIGINT before the answer's head (out in the grace, by the
signal), SIGINT while running (the stop names the start event's id) and
a second SIGINT while the cancel hangs (out at once).

Skips (77) without root or user namespaces (t_execd.preflight)."""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, check, check_eq, wait_until,  # noqa: E402
                     BUILDDIR)
import t_execd as X  # noqa: E402

S = Suite("t_run_api", time_limit=600)

RUN = os.path.join(BUILDDIR, "sandbox-glue", "executor", "cli",
                   "sluice-run")
RUN_LOCAL = os.path.join(BUILDDIR, "tests", "executor", "sluice-run-local")


def as_nobody(groups):
    def drop():
        os.setgroups(groups)
        os.setgid(X.NOBODY)
        os.setuid(X.NOBODY)
    return drop


class Cli:
    """sluice-run --socket x.sock as nobody with groups."""

    def __init__(self, x, groups):
        self.x = x
        self.groups = groups

    def argv(self, *args):
        return [RUN, "--socket", self.x.sock] + list(args)

    def __call__(self, *args, stdin=b"", timeout=120, env=None):
        return subprocess.run(self.argv(*args), input=stdin,
                              stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=timeout,
                              preexec_fn=as_nobody(self.groups),
                              env=env or {"PATH": "/usr/bin:/bin"})

    def popen(self, *args):
        return subprocess.Popen(self.argv(*args), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE,
                                preexec_fn=as_nobody(self.groups),
                                env={"PATH": "/usr/bin:/bin"})

    def ok(self, *args, **kw):
        r = self(*args, **kw)
        check(r.returncode == 0, "%s: rc %d: %r %r", args, r.returncode,
              r.stdout[-300:], r.stderr[-600:])
        return r

    def json(self, *args, rc=0, **kw):
        r = self("--json", *args, **kw)
        check_eq(r.returncode, rc, "%s: %r" % (args, r.stderr[-600:]))
        try:
            return json.loads(r.stdout.decode())
        except ValueError:
            raise X.Fail("%s: no JSON: %r" % (args, r.stdout[:300]))

    def fails(self, rc, code, *args, **kw):
        """args fail with exit status rc and the API's code on stderr."""
        r = self(*args, **kw)
        err = r.stderr.decode("utf-8", "replace")
        check(r.returncode == rc and err.startswith("sluice-run: %s: " %
                                                    code),
              "%s: want rc %d %s, got rc %d %r", args, rc, code,
              r.returncode, err)
        return err


@S.case
def verbs(env):
    d, ctl, x = X.start(env, quotas={"per_user": 2},
                        tenant_profiles={"*": ["host"]})
    app = Cli(x, [X.G_SOCK, X.G_APP])
    # health, doctor; --json parses
    r = app.ok("health")
    out = r.stdout.decode()
    check("backend ns (default): ok" in out and "broker " in out and
          "kvm: not usable" in out, "health: %r" % out)
    h = app.json("health")
    check(h["ok"] and {b["name"] for b in h["backends"]} >= {"ns", "kvm"},
          "health --json: %r" % h)
    app.ok("doctor")
    # the socket from the environment, not --socket
    r = subprocess.run([RUN, "health"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60,
                       preexec_fn=as_nobody(app.groups),
                       env={"SLUICE_EXEC_SOCKET": x.sock})
    check_eq(r.returncode, 0, "SLUICE_EXEC_SOCKET: %r" % r.stderr)
    # create; 409 exists; 400 above a maximum; 429 quota with its scope
    r = app.ok("create", "--chat", "r1", "--tenant", "acme", "--user",
               "alice", "--tier", "public", "--limit", "memory_mb=256",
               "--timeout", "30")
    check_eq(r.stdout.decode(), "r1: running on ns, profile host, tier "
             "public\n", "create text")
    o = app.json("create", "--id", "r2", "--tenant", "acme", "--user",
                 "alice")
    check(o["id"] == "r2" and o["state"] == "running", "create --json: %r"
          % o)
    check_eq(X.session(ctl, "r1").json["tier"], "public", "broker session")
    g = app.json("get", "--chat", "r1")
    check_eq((g["limits"]["memory_mb"], g["limits"]["timeout_s"]), (256, 30),
             "limits")
    app.fails(6, "exists", "create", "--chat", "r1", "--tenant", "acme")
    err = app.fails(2, "bad_request", "create", "--chat", "r9", "--limit",
                    "memory_mb=99999")
    check("field memory_mb" in err and "max 4096" in err, "fields: %r" % err)
    # a profile the tenant may not use: 403, and the local mode's 9
    err = app.fails(9, "forbidden", "create", "--chat", "r9", "--profile",
                    "minimal")
    check("reason profile_forbidden" in err, "reason: %r" % err)
    err = app.fails(4, "quota_exceeded", "create", "--chat", "r3",
                    "--tenant", "acme", "--user", "alice")
    check("scope user" in err and "limit 2" in err and "in_use 2" in err,
          "quota fields: %r" % err)
    err = app.fails(4, "quota_exceeded", "--json", "create", "--chat", "r3",
                    "--tenant", "acme", "--user", "alice")
    e = json.loads(app("--json", "create", "--chat", "r3", "--tenant",
                       "acme", "--user", "alice").stdout)["error"]
    check_eq((e["code"], e["scope"]), ("quota_exceeded", "user"),
             "error --json")
    # list, get
    out = app.ok("list").stdout.decode().splitlines()
    check(out[0].split()[:4] == ["ID", "TENANT", "USER", "STATE"] and
          sorted(x.split()[0] for x in out[1:]) == ["r1", "r2"],
          "list: %r" % out)
    ids = sorted(b["id"] for b in app.json("list", "--tenant", "acme",
                                           "--user", "alice")["sandboxes"])
    check_eq(ids, ["r1", "r2"], "list --json")
    check_eq(app.json("list", "--user", "bob")["sandboxes"], [],
             "list of another user")
    out = app.ok("status", "--chat", "r1").stdout.decode()
    check("id: r1\n" in out and "state: running\n" in out and
          "tier=public" in out, "get: %r" % out)
    app.fails(3, "not_found", "get", "--chat", "nosuch")
    app.fails(3, "not_found", "exec", "--chat", "nosuch", "--", "true")
    # exec: status, the streams apart, stdin, env, cwd
    r = app("exec", "--chat", "r1", "--", "sh", "-c",
            "echo out; echo err >&2; exit 3")
    check((r.returncode, r.stdout, r.stderr) == (3, b"out\n", b"err\n"),
          "exec: %r" % r)
    o = app.json("exec", "--chat", "r1", "--shell", "printf 'x\\0y'; "
                 "exit 5", rc=5)
    check(o["exit_code"] == 5 and o["stdout"] == "x\x00y" and
          "duration_ms" in o and "changed" in o, "exec --json: %r" % o)
    r = app("exec", "--chat", "r1", "--shell", "printf '\\377\\000\\n'")
    check_eq(r.stdout, b"\xff\x00\n", "bytes in text mode")
    r = app("exec", "--chat", "r1", "--stdin", "--", "cat",
            stdin=b"hello\nworld\n")
    check_eq((r.returncode, r.stdout), (0, b"hello\nworld\n"), "stdin")
    # stdin past max_body_bytes (64 KiB here): 413, its JSON error or,
    # past twice the limit, libevent's page (fake_daemon: one that
    # closes before reading the body)
    for size in (70000, 4 << 20):
        r = app("exec", "--chat", "r1", "--stdin", "--", "cat",
                stdin=b"x" * size)
        check(r.returncode == 14 and (b": too_large: " in r.stderr or
                                      b"HTTP 413" in r.stderr),
              "stdin of %d bytes: rc %d %r", size, r.returncode, r.stderr)
    app.ok("exec", "--chat", "r1", "--", "mkdir", "-p", "sub")
    r = app.ok("exec", "--chat", "r1", "--env", "GREET=hi there", "--cwd",
               "sub", "--shell", "echo \"$GREET\"; pwd")
    check_eq(r.stdout, b"hi there\n/workspace/sub\n", "env and cwd")
    t0 = time.monotonic()
    r = app("exec", "--chat", "r1", "--timeout", "2", "--", "sleep", "60")
    check(r.returncode == 124 and b"timed out" in r.stderr and
          time.monotonic() - t0 < 20, "timeout: %r" % r)
    # output as it comes
    p = app.popen("exec", "--chat", "r1", "--shell", "echo a; sleep 1; "
                  "echo b")
    t0 = time.monotonic()
    first = p.stdout.readline()
    early = p.poll() is None
    took = time.monotonic() - t0
    rest, _ = p.communicate(timeout=60)
    check(first == b"a\n" and early and rest == b"b\n" and
          p.returncode == 0, "streamed: %r %r after %.2f s, %r rc %s" % (
              first, early, took, rest, p.returncode))
    # busy, then cancel: the foreground command dies, its exec says so
    p = app.popen("exec", "--chat", "r1", "--", "sleep", "60")
    wait_until(lambda: app.json("get", "--chat", "r1")["usage"]
               ["foreground"], 20, what="the foreground command")
    app.fails(10, "busy", "exec", "--chat", "r1", "--", "true")
    r = app.ok("cancel", "--chat", "r1")
    check_eq(r.stdout, b"cancelled 1\n", "cancel")
    _, err = p.communicate(timeout=30)
    check(p.returncode == 137 and b"cancelled" in err, "cancelled exec: "
          "%s %r" % (p.returncode, err))
    # Ctrl-C: sluice-run cancels its command (the start event's id) and
    # exits with the result in seconds; nothing is left running
    def fg():
        return app.json("get", "--chat", "r1")["usage"]["foreground"]
    p = app.popen("exec", "--chat", "r1", "--", "sleep", "60")
    wait_until(fg, 20, what="the foreground command")
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=30)
    took = time.monotonic() - t0
    check(p.returncode == 137 and b"cancelled" in err and took < 5,
          "SIGINT: rc %s after %.1f s: %r" % (p.returncode, took, err))
    check(not fg(), "no foreground command after SIGINT")
    # background: start, commands, output --follow, stop, cancel --all
    cid = app.ok("start", "--chat", "r1", "--shell", "echo x; sleep 1; "
                 "echo y >&2; echo z").stdout.decode().strip()
    check(cid != "", "start: an id")
    out = app.ok("commands", "--chat", "r1").stdout.decode()
    check(cid in out and "STATUS" in out, "commands: %r" % out)
    r = app.ok("output", "--chat", "r1", "--follow", cid, timeout=60)
    check_eq((r.stdout, r.stderr), (b"x\nz\n", b"y\n"), "output --follow")
    c = app.json("commands", "--chat", "r1", cid)
    check_eq((c["status"], c["exit_code"]), ("exited", 0), "commands CID")
    o = app.json("output", "--chat", "r1", "--offset", "2", cid)
    check_eq(o["stdout"]["data"], "z\n", "output --offset --json")
    cid2 = app.json("start", "--chat", "r1", "--", "sleep", "300")["id"]
    check_eq(app.ok("stop", "--chat", "r1", cid2).stdout.decode(),
             "%s: stopped\n" % cid2, "stop")
    wait_until(lambda: app.json("commands", "--chat", "r1", cid2)
               ["status"] == "exited", 20, what="stopped command")
    app.json("start", "--chat", "r1", "--", "sleep", "300")
    check_eq(app.json("cancel", "--chat", "r1", "--all"), {"cancelled": 1},
             "cancel --all")
    app.fails(3, "not_found", "output", "--chat", "r1", "c999")
    # files
    app.ok("write", "--chat", "r1", "f.txt", stdin=b"data\n")
    app.ok("write", "--chat", "r1", "sub/deep/g.txt", stdin=b"\x00\xff")
    check_eq(app.ok("read", "--chat", "r1", "f.txt").stdout, b"data\n",
             "read")
    check_eq(app.ok("read", "--chat", "r1", "/workspace/sub/deep/g.txt")
             .stdout, b"\x00\xff", "read binary, absolute path")
    app.fails(3, "not_found", "read", "--chat", "r1", "nosuch")
    lines = app.ok("ls", "--chat", "r1").stdout.decode().splitlines()
    names = [x.split()[-1] for x in lines]
    check("f.txt" in names and "sub" in names and
          any(x.startswith("-rw-") and x.endswith(" f.txt") for x in lines)
          and any(x.startswith("d") for x in lines), "ls: %r" % lines)
    o = app.json("ls", "--chat", "r1", "--recursive", "--glob", "*.txt")
    check_eq(sorted(e["path"] for e in o["entries"]),
             ["f.txt", "sub/deep/g.txt"], "ls --recursive --glob")
    app.ok("edit", "--chat", "r1", "--old", "data", "--new", "DATA",
           "f.txt")
    check_eq(app.ok("read", "--chat", "r1", "f.txt").stdout, b"DATA\n",
             "edited")
    app.fails(11, "conflict", "edit", "--chat", "r1", "--old", "nothere",
              "--new", "x", "f.txt")
    app.ok("rm", "--chat", "r1", "f.txt")
    app.fails(3, "not_found", "read", "--chat", "r1", "f.txt")
    # a file over max_file_bytes (1 MiB here): that much, and exit 8
    app.ok("exec", "--chat", "r1", "--shell", "head -c 1200000 /dev/zero "
           "| tr '\\0' q > big")
    r = app("read", "--chat", "r1", "big")
    check(r.returncode == 8 and r.stdout == b"q" * (1 << 20) and
          b"more than 1048576 bytes, cut there" in r.stderr,
          "read cut: rc %d, %d bytes, %r" % (r.returncode, len(r.stdout),
                                             r.stderr))
    app.fails(14, "too_large", "write", "--chat", "r1", "big2",
              stdin=b"x" * ((1 << 20) + 1))
    # tier: sluiced follows; install at tier off is refused
    check_eq(app.ok("tier", "--chat", "r1", "off").stdout,
             b"r1: tier off\n", "tier")
    check_eq(X.session(ctl, "r1").json["tier"], "off", "broker tier")
    app.fails(12, "network_not_permitted", "install", "--chat", "r1",
              "--manager", "pip", "requests")
    # roles: a caller in no role; no access to the socket; no daemon
    norole = Cli(x, [X.G_SOCK])
    norole.fails(13, "forbidden", "list")
    r = Cli(x, [])("list")
    check(r.returncode == 15 and b"exec.sock" in r.stderr,
          "no access to the socket: %r" % r)
    r = app("--socket", env.path("none.sock"), "list")
    check_eq(r.returncode, 15, "no daemon: %r" % r.stderr)
    # the installed sluice-run makes no sandbox itself, even for root
    r = subprocess.run([RUN, "--local", "list"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    check(r.returncode == 2 and b"sluice-execd's" in r.stderr,
          "--local refused: %r" % r)
    # the build tree's backend driver is root's only
    r = subprocess.run([RUN_LOCAL, "--local", "list"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=60, preexec_fn=as_nobody(app.groups))
    check(r.returncode == 1 and b"must run as root" in r.stderr,
          "--local as nobody: %r" % r)
    r = app("--state-dir", "/tmp", "list")
    check(r.returncode == 2 and b"sluice-run-local" in r.stderr,
          "local option: %r" % r)
    # destroy
    check_eq(app.ok("destroy", "--chat", "r2").stdout, b"r2: destroyed\n",
             "destroy")
    app.fails(3, "not_found", "get", "--chat", "r2")
    # Clear of a sandbox that is gone: its archive alone, by id
    check_eq(app.ok("destroy", "--chat", "r2", "--discard").stdout,
             b"r2: archive discarded (no sandbox)\n", "discard the archive")
    app.fails(3, "not_found", "destroy", "--chat", "r2", "--discard")
    o = app.json("destroy", "--chat", "r1", "--discard")
    check(o["deleted"] is True, "destroy --json: %r" % o)
    check_eq(X.session(ctl, "r1").status, 404, "broker session gone")
    check_eq(app.json("list")["sandboxes"], [], "none left")


@S.case
def broker_unavailable(env):
    d, ctl, x = X.start(env)
    app = Cli(x, [X.G_SOCK, X.G_APP])
    d.stop()
    err = app.fails(5, "broker_unavailable", "create", "--chat", "b1",
                    "--tier", "public")
    check("sluiced" in err or "control" in err, "message: %r" % err)
    check_eq(app.json("list")["sandboxes"], [], "nothing left")
    r = app("doctor")
    check(r.returncode == 1 and b"broker" in r.stdout and
          b"unreachable" in r.stdout, "doctor without sluiced: %r" % r)


class FakeExecd:
    """A Unix socket playing sluice-execd for what the real one will not
    do on cue: serve(conn, line, body) answers each request (its request
    line and body), on a thread of its own.  Bounded: every socket has a
    timeout, close() ends it."""

    def __init__(self, env, serve):
        self.path = env.path("fake.sock")
        self.serve = serve
        self.lines = []
        self.done = threading.Event()
        if os.path.exists(self.path):
            os.unlink(self.path)
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.bind(self.path)
        self.s.listen(8)
        self.s.settimeout(0.2)
        self.conns = []
        self.t = threading.Thread(target=self._loop, daemon=True)
        self.t.start()
        env.closers.append(self.close)

    def _loop(self):
        while not self.done.is_set():
            try:
                c, _ = self.s.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            c.settimeout(30)
            self.conns.append(c)
            threading.Thread(target=self._one, args=(c,),
                             daemon=True).start()

    def _one(self, c):
        try:
            buf = b""
            while b"\r\n\r\n" not in buf and len(buf) < 65536:
                b = c.recv(65536)
                if not b:
                    return
                buf += b
            head, _, rest = buf.partition(b"\r\n\r\n")
            line = head.split(b"\r\n")[0].decode()
            self.lines.append(line)
            n = 0
            for h in head.split(b"\r\n")[1:]:
                k, _, v = h.partition(b":")
                if k.strip().lower() == b"content-length":
                    n = int(v)
            self.serve(c, line, rest, n)
        except OSError:
            pass
        finally:
            c.close()

    def read_body(self, c, rest, n):
        while len(rest) < n:
            b = c.recv(65536)
            if not b:
                break
            rest += b
        return rest

    def close(self):
        self.done.set()
        self.s.close()
        self.t.join(5)
        for c in self.conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def json_answer(status, obj):
    b = json.dumps(obj).encode()
    return (b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n" %
            (status, len(b))) + b


SSE_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Connection: close\r\n\r\n")


def run_root(sock, *args, stdin=b"", timeout=60):
    return subprocess.run([RUN, "--socket", sock] + list(args), input=stdin,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=timeout)


def popen_root(sock, *args):
    return subprocess.Popen([RUN, "--socket", sock] + list(args),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


@S.case
def fake_daemon(env):
    """sluice-run against a scripted daemon: an early refusal, a stream
    without its exit event, and interruptions (SIGINT) while the answer
    has not come, while the command runs and while the cancel hangs."""
    # an early 413 whose sender closes before reading the body: the
    # refusal is read after the failed write (exit 14, not 15)
    def refuse(c, line, rest, n):
        c.sendall(json_answer(413, {"error": {"code": "too_large",
                  "message": "the body is larger than 65536 bytes"}}))
    f = FakeExecd(env, refuse)
    r = run_root(f.path, "exec", "--chat", "f1", "--stdin", "--", "cat",
                 stdin=b"x" * (4 << 20))
    check(r.returncode == 14 and r.stderr.startswith(
        b"sluice-run: too_large: "), "early 413: rc %d %r", r.returncode,
        r.stderr)
    f.close()

    # a stream that ends cleanly without an exit event: 125, and the
    # message says no more than that
    def no_exit(c, line, rest, n):
        f.read_body(c, rest, n)
        c.sendall(SSE_HEAD + b'event: start\ndata: {"id":"c1"}\n\n')
    f = FakeExecd(env, no_exit)
    r = run_root(f.path, "exec", "--chat", "f1", "--", "true")
    check_eq((r.returncode, r.stderr), (125, b"sluice-run: the command's "
             b"result was lost\n"), "stream without an exit event")
    f.close()

    # SIGINT before the answer's head: out in the grace (3 s), not after
    # the call's timeout, by the signal
    def silent(c, line, rest, n):
        f.read_body(c, rest, n)
        f.done.wait(60)
    f = FakeExecd(env, silent)
    p = popen_root(f.path, "exec", "--chat", "f1", "--", "sleep", "60")
    wait_until(lambda: f.lines, 20, what="the request")
    time.sleep(0.3)
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    try:
        _, err = p.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        raise X.Fail("SIGINT before the head: still running after 10 s")
    took = time.monotonic() - t0
    check(p.returncode == -signal.SIGINT and took < 6 and
          b"interrupted" in err, "SIGINT before the head: rc %s after %.1f "
          "s: %r", p.returncode, took, err)
    f.close()

    # SIGINT while the command runs: its id (the start event's) is
    # stopped, not whichever command is in the foreground; the result
    # is awaited
    stopped = threading.Event()

    def running(c, line, rest, n):
        f.read_body(c, rest, n)
        if line.startswith("POST /v1/sandboxes/f1/exec "):
            c.sendall(SSE_HEAD + b'event: start\ndata: {"id":"c7"}\n\n')
            stopped.wait(30)
            c.sendall(b'event: exit\ndata: {"id":"c7","exit_code":137,'
                      b'"signal":9,"cancelled":true}\n\n')
        else:
            c.sendall(json_answer(202, {"id": "c7", "status": "running"}))
            stopped.set()
    f = FakeExecd(env, running)
    p = popen_root(f.path, "exec", "--chat", "f1", "--", "sleep", "60")
    wait_until(lambda: f.lines, 20, what="the request")
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=20)
    check(p.returncode == 137 and b"cancelled" in err, "cancelled: rc %s %r",
          p.returncode, err)
    check_eq(f.lines[1:], ["POST /v1/sandboxes/f1/commands/c7/stop HTTP/1.1"],
             "the cancel names the command")
    f.close()

    # a cancel that hangs: a second SIGINT ends sluice-run at once
    def hang(c, line, rest, n):
        f.read_body(c, rest, n)
        if line.startswith("POST /v1/sandboxes/f1/exec "):
            c.sendall(SSE_HEAD + b'event: start\ndata: {"id":"c8"}\n\n')
        f.done.wait(60)
    f = FakeExecd(env, hang)
    p = popen_root(f.path, "exec", "--chat", "f1", "--", "sleep", "60")
    wait_until(lambda: f.lines, 20, what="the request")
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    wait_until(lambda: len(f.lines) > 1, 10, what="the cancel")
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    try:
        p.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        raise X.Fail("a second SIGINT: still running after 10 s")
    check(p.returncode == -signal.SIGINT and time.monotonic() - t0 < 2,
          "second SIGINT: rc %s after %.1f s", p.returncode,
          time.monotonic() - t0)
    f.close()


if __name__ == "__main__":
    S.main()
