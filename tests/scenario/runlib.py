"""Helpers shared by the sluice-run scenarios (t_run.py for the ns
backend, t_run_gvisor.py for gvisor): the Runner of sluice-run against
one sluiced and state directory, a sluiced set up for the sandboxes'
upstream, and the checks both backends must pass alike."""

import fcntl
import json
import os
import re
import subprocess
import termios
import time

from harness import check, check_eq, Fail, api_unix, wait_until
from t_clients import make_index, serve

BLD = os.environ.get("SLUICE_BUILDDIR", ".")
RUN = os.path.join(BLD, "sandbox-glue", "executor", "sluice-run")
SHIM = os.path.abspath(os.path.join(BLD, "sandbox-glue", "shim", "sluice-shim"))


class Runner:
    """sluice-run against one sluiced and one state directory."""

    def __init__(self, env, d, **cfg):
        # env.dir stays 0700: the holder opens what it binds while it
        # still has the host's uid 0
        self.env = env
        self.d = d
        self.state = env.path("state")
        self.ctl = os.path.join(d.config["runtime_dir"], "control.sock")
        conf = {"shim": SHIM}
        conf.update(cfg)
        self.conf = env.path("run.json")
        with open(self.conf, "w") as f:
            json.dump(conf, f)
        self.chats = []
        env.closers.append(self.cleanup)

    def argv(self, *args):
        """The command line of sluice-run with this configuration."""
        return [RUN, "--config", self.conf, "--state-dir", self.state,
                "--control", self.ctl] + list(args)

    def __call__(self, *args, stdin=None, timeout=120):
        return subprocess.run(self.argv(*args), input=stdin,
                              stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=timeout)

    def popen_create(self, chat):
        """A create of chat in the background, once the chat's directory
        is there (or the create ended)."""
        p = subprocess.Popen(self.argv("create", "--chat", chat),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        wait_until(lambda: os.path.exists(os.path.join(self.state, chat)) or
                   p.poll() is not None, 20, step=0.002,
                   what="chat directory")
        return p

    def json(self, *args, **kw):
        r = self("--json", *args, **kw)
        try:
            return r, json.loads(r.stdout.decode())
        except ValueError:
            raise Fail("no JSON from %s: rc %d, stdout %r stderr %r" % (
                args, r.returncode, r.stdout, r.stderr))

    def create(self, chat, *extra):
        r = self("create", "--chat", chat, *extra)
        check(r.returncode == 0, "create %s: rc %d: %s", chat, r.returncode,
              r.stderr.decode())
        self.chats.append(chat)
        return r

    def exec(self, chat, script, *extra, **kw):
        return self.json("exec", "--chat", chat, *extra, "--", "/bin/sh",
                         "-c", script, **kw)[1]

    def cleanup(self):
        for c in self.chats:
            self("destroy", "--chat", c)


LS_LINE = (r"^(?P<mode>[-dlpscb?][-rwxsStT]{9}) (?P<uid>\d+) (?P<gid>\d+) "
           r"(?P<size>\d+) \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ (?P<name>.*)$")


def files_fds_env(env, run, chat, uid=1000):
    """write, read and ls the same way on every backend (ls: a fixed
    format, sorted, names escaped; --json); paths that climb out of
    /workspace or symbolic links to host paths stay inside the sandbox;
    a command holds no fd but 0-2, gets no host fd (stdin is a pipe),
    and none of the caller's environment."""
    secret = env.path("host-secret")
    with open(secret, "w") as f:
        f.write("host only\n")
    r = run("write", "--chat", chat, "f.txt", stdin=b"data\n")
    check_eq(r.returncode, 0, "write: %r" % r.stderr)
    o = run.exec(chat, "chmod 0640 f.txt && mkdir sub && ln -s f.txt link "
                 "&& ln -s %s hs && printf x > \"$(printf 'new\\nl')\" && "
                 "chmod 0644 new*l && mkfifo ff" % secret)
    check_eq(o["exit_code"], 0, "files: %r" % o)
    r = run("ls", "--chat", chat)
    check_eq(r.returncode, 0, "ls: %r" % r.stderr)
    lines = r.stdout.decode().splitlines()
    got = [re.match(LS_LINE, x) for x in lines]
    check(all(got), "ls format: %r" % lines)
    check_eq([m.group("name") for m in got],
             ["f.txt", "ff", "hs -> " + secret, "link -> f.txt",
              "new\\012l", "sub"], "ls names")
    f = got[0]
    check_eq((f.group("mode"), f.group("uid"), f.group("gid"),
              f.group("size")), ("-rw-r-----", str(uid), str(uid), "5"),
             "ls f.txt")
    check(got[1].group("mode").startswith("p") and
          got[5].group("mode").startswith("d"), "ls types: %r" % lines)
    r, j = run.json("ls", "--chat", chat, "sub/..")
    check_eq(r.returncode, 0, "ls --json")
    check_eq([(e["name"], e["type"]) for e in j["entries"]],
             [("f.txt", "file"), ("ff", "fifo"), ("hs", "symlink"),
              ("link", "symlink"), ("new\nl", "file"), ("sub", "dir")],
             "ls --json entries")
    check_eq((j["entries"][0]["mode"], j["entries"][0]["size"],
              j["entries"][0]["uid"], j["entries"][3]["target"]),
             ("0640", 5, uid, "f.txt"), "ls --json fields")
    r = run("ls", "--chat", chat, "f.txt")
    check(r.returncode == 0 and r.stdout.decode().endswith(" f.txt\n"),
          "ls of a file: %r" % r.stdout)
    r = run("ls", "--chat", chat, "sub")
    check(r.returncode == 0 and r.stdout == b"", "ls of an empty dir")
    r = run("ls", "--chat", chat, "nosuch")
    check(r.returncode == 1 and b"No such file" in r.stderr,
          "ls nosuch: %d %r" % (r.returncode, r.stderr))
    # out of /workspace is still the sandbox
    r = run("read", "--chat", chat, "../../etc/passwd")
    check(r.returncode == 0 and b"sandbox user" in r.stdout and
          r.stdout != open("/etc/passwd", "rb").read(), "read ../..: %r"
          % r.stdout[:80])
    r = run("read", "--chat", chat, "hs")
    check(r.returncode == 1 and b"host only" not in r.stdout,
          "read through a link to a host file: %r" % r.stdout)
    r = run("write", "--chat", chat, "hs", stdin=b"overwritten\n")
    check_eq(open(secret).read(), "host only\n", "host file after write")
    name = "sluice-t-run-escape-%d" % os.getpid()
    r = run("write", "--chat", chat, "../../tmp/" + name, stdin=b"x\n")
    check(r.returncode == 0 and not os.path.exists("/tmp/" + name),
          "write ../../tmp: %r" % r.stderr)
    r = run("read", "--chat", chat, "f.txt")
    check_eq(r.stdout, b"data\n", "read")
    r = run("read", "--chat", chat, "--timeout", "2", "ff")
    check_eq(r.returncode, 124, "read of a fifo times out")
    # descriptors and environment of a command
    # (the shell's, listed by its child: ls would list its own too)
    o = run.exec(chat, "python3 -c 'import os; print(sorted(os.listdir("
                 "\"/proc/%d/fd\" % os.getppid())))'; true")
    check_eq(o["stdout"], "['0', '1', '2']\n", "fds of a command: %r" % o)
    with open(secret) as f:
        r = subprocess.run(
            run.argv("exec", "--chat", chat, "--stdin", "--",
                     "sh", "-c", "[ -p /proc/$$/fd/0 ] && echo pipe; cat; env"),
            stdin=f, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60,
            env=dict(os.environ, SLUICE_LEAK_CANARY="leaked"))
    out = r.stdout.decode()
    check(out.startswith("pipe\nhost only\n"),
          "stdin: %r" % out[:80])
    check("SLUICE_LEAK_CANARY" not in out and "HTTPS_PROXY=" in out,
          "environment: %r" % out)


def start(env, preflight, upstream_port=None, **run_cfg):
    """preflight(), then a sluiced whose registries tier reaches
    pypi.test (127.0.0.1) on ports 443, 80 and upstream_port, and a
    Runner with run_cfg for it."""
    preflight()
    ports = [443, 80] + ([upstream_port] if upstream_port else [])
    cfg = env.config(sessions=[], ceiling="registries",
                     registries=["pypi.test"],
                     ports={"registries": ports, "public": ports},
                     allow_cidrs=["127.0.0.1/32"],
                     dns={"hosts": {"pypi.test": ["127.0.0.1"]}})
    d = env.sluiced(cfg)
    return d, Runner(env, d, **run_cfg)


def hello_upstream(env):
    """An HTTP server on the host's loopback with a package index and
    hello.txt; its port."""
    root = env.path("www")
    os.makedirs(root)
    make_index(root)
    with open(os.path.join(root, "hello.txt"), "w") as f:
        f.write("hello from the host's loopback\n")
    return serve(env, root)


def reaches_only_through_broker(run, chat, port):
    """curl and python in chat fetch hello.txt through the broker; a
    direct connect to the host's loopback fails."""
    url = "http://pypi.test:%d/hello.txt" % port
    o = run.exec(chat, "curl -sS --max-time 10 %s" % url)
    check_eq(o["stdout"], "hello from the host's loopback\n", "curl body")
    o = run.exec(chat, "python3 -c 'import urllib.request as u; "
                 "print(u.urlopen(\"%s\", timeout=10).read().decode(), "
                 "end=\"\")'" % url)
    check_eq(o["stdout"], "hello from the host's loopback\n", "python body")
    o = run.exec(chat, "curl -sS --noproxy '*' --max-time 5 "
                 "http://127.0.0.1:%d/hello.txt" % port)
    check(o["exit_code"] != 0, "direct loopback reached the host: %r", o)


def background_survives(run, chat):
    """A background job outlives its command."""
    o = run.exec(chat, "nohup sleep 300 >/dev/null 2>&1 & echo $! > bg.pid")
    check_eq(o["exit_code"], 0, "background start")
    o = run.exec(chat, "kill -0 $(cat bg.pid) && echo alive; pwd")
    check_eq(o["stdout"], "alive\n/workspace\n", "background survives")


def timeout_kills_tree(run, chat, limit):
    """--timeout kills the command, a child and a setsid double-forked
    grandchild within limit seconds, and keeps the background job of
    background_survives."""
    t0 = time.monotonic()
    r, o = run.json("exec", "--chat", chat, "--timeout", "2", "--",
                    "/bin/sh", "-c", "setsid sh -c 'sleep 400 & echo $! > "
                    "dbl.pid; wait' & sleep 200 & wait")
    check(time.monotonic() - t0 < limit, "timeout took too long")
    check(o["timed_out"] is True and r.returncode == 124, "timeout: %r", o)
    o = run.exec(chat, "sleep 0.3; kill -0 $(cat dbl.pid) 2>/dev/null && "
                 "echo alive || echo dead; pgrep -c sleep")
    check_eq(o["stdout"], "dead\n1\n", "tree killed, background kept")


def no_tty(run, chat):
    """sluice-run run from a terminal: a command must not reach it through
    /dev/tty (it could read keys or push input with TIOCSTI)."""
    mfd, sfd = os.openpty()

    def ctty():
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    try:
        p = subprocess.Popen(run.argv("--json", "exec", "--chat", chat,
                                      "--", "sh", "-c",
                                      "(exec 3<>/dev/tty) 2>/dev/null && "
                                      "echo tty || echo none"), stdin=sfd,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             preexec_fn=ctty)
        out, err = p.communicate(timeout=60)
    finally:
        os.close(sfd)
        os.close(mfd)
    check_eq(json.loads(out)["stdout"], "none\n", "/dev/tty in a command")


def log_is_bounded(env, run, chat, n=20000, timeout=120):
    """The shim logs each failed relay to init.log on the host: with the
    broker session gone, n connects inside make n log lines (~70 bytes
    each), and init.log and init.log.1 each stay within 1 MiB, the newest
    lines kept.  destroy ends the log's reader."""
    resp = api_unix(run.ctl, "DELETE", "/v1/sessions/%s" % chat)
    check(resp.status in (200, 204), "delete session: %r" % resp)
    o = run.exec(chat, "python3 -c '\n"
                 "import socket\n"
                 "for i in range(%d):\n"
                 "    s = socket.socket()\n"
                 "    try:\n"
                 "        s.connect((\"127.0.0.1\", 3128)); s.recv(1)\n"
                 "    except OSError:\n"
                 "        pass\n"
                 "    s.close()\n"
                 "print(\"done\")'" % n, "--timeout", str(timeout),
                 timeout=timeout + 30)
    check_eq(o["stdout"], "done\n", "connect loop: %r" % o)
    log = os.path.join(run.state, chat, "init.log")
    wait_until(lambda: os.path.exists(log + ".1"), 10, what="init.log to "
               "be rotated (%d bytes)" % os.path.getsize(log))
    for p in (log, log + ".1"):
        check(os.path.getsize(p) <= 1 << 20, "%s: %d bytes" % (
              p, os.path.getsize(p)))
    check(b"connect /run/sluice/proxy.sock" in open(log, "rb").read()[-300:],
          "newest line: %r" % open(log, "rb").read()[-300:])
    with open(os.path.join(run.state, chat, "log.pid")) as f:
        pid = int(f.read().split()[0])
    check(os.path.exists("/proc/%d" % pid), "log reader %d" % pid)
    r = run("destroy", "--chat", chat)
    check_eq(r.returncode, 0, "destroy: %r" % r.stderr)
    run.chats.remove(chat)
    check(not os.path.exists("/proc/%d" % pid) or
          open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[0]
          == "Z", "log reader %d left" % pid)
    check(not os.path.exists(os.path.join(run.state, chat)), "state left")
