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
RUN = os.path.join(BLD, "sandbox-glue", "executor", "cli", "sluice-run")
# the backends driven directly (--local): the build tree's, not installed
RUN_LOCAL = os.path.join(BLD, "tests", "executor", "sluice-run-local")
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

    def conf_backend(self):
        with open(self.conf) as f:
            return json.load(f).get("backend", "ns")

    def argv(self, *args):
        """The command line of sluice-run with this configuration, in its
        local mode (--local): these scenarios drive the backends directly,
        without sluice-execd (t_run_api.py drives the API mode)."""
        return [RUN_LOCAL, "--local", "--config", self.conf, "--state-dir",
                self.state, "--control", self.ctl] + list(args)

    def __call__(self, *args, stdin=None, timeout=120):
        return subprocess.run(self.argv(*args), input=stdin,
                              stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=timeout)

    def popen_create(self, chat):
        """A create of chat in the background, once the chat's directory
        is there (or the create ended)."""
        p = subprocess.Popen(self.argv("create", "--chat", chat),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=self.create_env(chat))
        wait_until(lambda: os.path.exists(os.path.join(self.state, chat)) or
                   p.poll() is not None, 20, step=0.002,
                   what="chat directory")
        return p

    def create_env(self, chat):
        """The environment of a create of chat: marked, so that what it
        forks (the holder, which shows another command line, the log
        reader) can be found by its environment."""
        return dict(os.environ, SLUICE_TEST_CREATE="%s:%s" % (self.state,
                                                              chat))

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
    # a name with a C1 CSI, a right-to-left override and a zero-width
    # space: escaped as bytes like control characters; JSON in ASCII
    o = run.exec(chat, "touch \"sub/$(printf 'a\\302\\233b\\342\\200\\256c"
                 "\\342\\200\\213d')\"")
    check_eq(o["exit_code"], 0, "bidi name: %r" % o)
    r = run("ls", "--chat", chat, "sub")
    check(r.returncode == 0 and r.stdout.endswith(
          b" a\\302\\233b\\342\\200\\256c\\342\\200\\213d\n"),
          "ls of a bidi name: %r" % r.stdout)
    r, j = run.json("ls", "--chat", chat, "sub")
    check(all(c < 0x80 for c in r.stdout) and j["entries"][0]["name"] ==
          "a\u009bb\u202ec\u200bd", "ls --json of a bidi name: %r" %
          r.stdout)
    o = run.exec(chat, "rm sub/a*")
    check_eq(o["exit_code"], 0, "rm: %r" % o)
    r = run("ls", "--chat", chat, "nosuch")
    check(r.returncode == 1 and b"No such file" in r.stderr,
          "ls nosuch: %d %r" % (r.returncode, r.stderr))
    # out of /workspace is still the sandbox
    r = run("read", "--chat", chat, "../../etc/passwd")
    check(r.returncode == 0 and b"sandbox user" in r.stdout and
          r.stdout != open("/etc/passwd", "rb").read(), "read ../..: %r"
          % r.stdout[:80])
    r = run("read", "--chat", chat, "hs")
    check(r.returncode == 1 and b"host only" not in r.stdout and
          b"symbolic link" in r.stderr,
          "read through a link to a host file: %r %r" % (r.stdout, r.stderr))
    r = run("write", "--chat", chat, "hs", stdin=b"overwritten\n")
    check_eq(open(secret).read(), "host only\n", "host file after write")
    name = "sluice-t-run-escape-%d" % os.getpid()
    r = run("write", "--chat", chat, "../../tmp/" + name, stdin=b"x\n")
    check(r.returncode == 0 and not os.path.exists("/tmp/" + name),
          "write ../../tmp: %r" % r.stderr)
    r = run("read", "--chat", chat, "f.txt")
    check_eq(r.stdout, b"data\n", "read")
    r = run("read", "--chat", chat, "--timeout", "5", "ff")
    check(r.returncode == 1 and b"not a regular file" in r.stderr,
          "read of a fifo: %d %r" % (r.returncode, r.stderr))
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
    # the newest lines, without what a sanitizer build's own runtime
    # adds (ASan's __asan_handle_no_return warning, three lines, when the
    # holder's processes end on a stack it did not make): not the shim's
    tail = [ln for ln in open(log, "rb").read()[-4000:].split(b"\n")
            if not re.match(rb"==\d+==WARNING: ASan|False positive error "
                            rb"reports may follow|For details see https://"
                            rb"github.com/google/sanitizers", ln)]
    newest = b"\n".join(tail)[-300:]
    check(b"connect /run/sluice/proxy.sock" in newest,
          "newest line: %r" % newest)
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


# The calls sandbox-glue/executor/backend/sbx_seccomp.c refuses, as
# (name, x86_64 number, arguments, errno).  Arguments are chosen so that the kernel, were the
# call let through, would mostly answer something else (EFAULT, EINVAL,
# EBADF, a keyring id...) than the filter's EPERM, and would do no harm.
SECCOMP_X86_64 = [
    ("keyctl", 250, (0, -3, 0), "EPERM"),
    ("add_key", 248, (0, 0, 0, 0, 0), "EPERM"),
    ("request_key", 249, (0, 0, 0, 0), "EPERM"),
    ("bpf", 321, (5, 0, 8), "EPERM"),
    ("userfaultfd", 323, (0o2000000 | 1,), "EPERM"),
    ("perf_event_open", 298, (0, 0, -1, -1, 0), "EPERM"),
    ("kexec_load", 246, (0, 0, 0, 0), "EPERM"),
    ("kexec_file_load", 320, (-1, -1, 0, 0, 0), "EPERM"),
    ("init_module", 175, (0, 0, 0), "EPERM"),
    ("finit_module", 313, (-1, 0, 0), "EPERM"),
    ("delete_module", 176, (0, 0), "EPERM"),
    ("iopl", 172, (4,), "EPERM"),
    ("ioperm", 173, (0x10000, 1, 0), "EPERM"),
    ("swapon", 167, (0, 0), "EPERM"),
    ("swapoff", 168, (0,), "EPERM"),
    ("reboot", 169, (0, 0, 0, 0), "EPERM"),
    ("acct", 163, (0,), "EPERM"),
    ("settimeofday", 164, (1, 0), "EPERM"),
    ("clock_settime", 227, (0, 1), "EPERM"),
    ("clock_adjtime", 305, (0, 1), "EPERM"),
    ("syslog", 103, (10, 0, 0), "EPERM"),
    ("quotactl", 179, (0, 0, 0, 0), "EPERM"),
    ("open_by_handle_at", 304, (-1, 0, 0), "EPERM"),
    ("fanotify_init", 300, (0x200, 0), "EPERM"),
    ("mount", 165, (0, 0, 1, 0, 0), "EPERM"),
    ("umount2", 166, (0, 0x100), "EPERM"),
    ("pivot_root", 155, (0, 0), "EPERM"),
    ("move_mount", 429, (-1, 0, -1, 0, 0), "EPERM"),
    ("open_tree", 428, (-1, 0, 0xffffffff), "EPERM"),
    ("fsopen", 430, (0, 0), "EPERM"),
    ("fsmount", 432, (-1, 0, 0), "EPERM"),
    ("fsconfig", 431, (-1, 0, 0, 0, 0), "EPERM"),
    ("fspick", 433, (-1, 0, 0), "EPERM"),
    ("mount_setattr", 442, (-1, 0, 0, 0, 0), "EPERM"),
    ("setns", 308, (-1, 0), "EPERM"),
    ("unshare(NEWUSER)", 272, (0x10000000,), "EPERM"),
    ("unshare(NEWNET)", 272, (0x40000000,), "EPERM"),
    ("unshare(NEWTIME)", 272, (0x80,), "EPERM"),
    ("clone(NEWUSER)", 56, (0x10000000 | 17, 0, 0, 0, 0), "EPERM"),
    ("clone(NEWNS)", 56, (0x20000 | 17, 0, 0, 0, 0), "EPERM"),
    ("clone3", 435, (0, 0), "ENOSYS"),
    ("io_uring_setup", 425, (1, 0), "ENOSYS"),
    ("io_uring_enter", 426, (-1, 0, 0, 0, 0, 0), "ENOSYS"),
    ("io_uring_register", 427, (-1, 0, 0, 0), "ENOSYS"),
    ("personality(ADDR_NO_RANDOMIZE)", 135, (0x0040000,), "EPERM"),
    ("personality(READ_IMPLIES_EXEC)", 135, (0x0400000,), "EPERM"),
    ("socket(AF_NETLINK)", 41, (16, 3, 0), "EAFNOSUPPORT"),
    ("socket(AF_PACKET)", 41, (17, 3, 0), "EAFNOSUPPORT"),
    ("socketpair(AF_VSOCK)", 53, (40, 1, 0, 0), "EAFNOSUPPORT"),
]

SECCOMP_PROBE = """
import ctypes, errno, json, os, socket, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
out = {}
for name, nr, args, _ in json.load(sys.stdin):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    if r == 0 and name.startswith("clone"):
        os._exit(0)             # a child: should never be
    out[name] = errno.errorcode.get(ctypes.get_errno(), "?") if r < 0 \\
        else "returned %d" % r
# what must keep working: threads (clone3 refused, clone used), the
# personality query (passed by the filter; gVisor answers EINVAL), Unix
# and inet sockets
t = threading.Thread(target=lambda: None); t.start(); t.join()
out["thread"] = "ok"
ctypes.set_errno(0)
out["personality query"] = "ok" if libc.syscall(135, ctypes.c_long(
    0xffffffff)) >= 0 or ctypes.get_errno() != errno.EPERM else "refused"
socket.socket(socket.AF_UNIX).close(); socket.socket().close()
out["sockets"] = "ok"
print(json.dumps(out))
"""


def seccomp_refuses(run, chat):
    """Every call of the deny list fails with the filter's errno inside
    the sandbox (x86_64 numbers; elsewhere nothing to check), and what
    programs need still works."""
    if os.uname().machine != "x86_64":
        return
    r = run("exec", "--chat", chat, "--stdin", "--", "python3", "-c",
            SECCOMP_PROBE, stdin=json.dumps(SECCOMP_X86_64).encode())
    check_eq(r.returncode, 0, "seccomp probe: %r" % r.stderr)
    got = json.loads(r.stdout.decode())
    bad = ["%s: %s, want %s" % (n, got.get(n), e)
           for n, _, _, e in SECCOMP_X86_64 if got.get(n) != e]
    check(not bad, "calls not refused as they should be:\n  %s" %
          "\n  ".join(bad))
    check_eq((got["thread"], got["personality query"], got["sockets"]),
             ("ok", "ok", "ok"), "allowed calls")
    # the relay the sandbox talks to is under the filter too
    o = run.exec(chat, "grep '^Seccomp:' /proc/$(pgrep -o -x sluice-shim)"
                 "/status")
    check_eq(o["stdout"].split(), ["Seccomp:", "2"], "shim's seccomp: %r"
             % o)


def files_regular_only(env, run, chat, cap):
    """read and write move regular files only: a planted symbolic link
    (to /dev/zero, the host's /etc/shadow, a file out of /workspace, a
    directory of devices) is refused, so are a fifo and a device, without
    a byte out; read passes at most max_file_bytes (cap) and says it cut
    (exit 8); write neither follows a link nor writes into a fifo.  The
    run's configuration has max_file_bytes = cap."""
    data = bytes(range(256)) * (cap // 256 + 100)
    r = run("write", "--chat", chat, "big", stdin=data)
    check_eq(r.returncode, 0, "write big: %r" % r.stderr)
    r = run("write", "--chat", chat, "exact", stdin=data[:cap])
    check_eq(r.returncode, 0, "write exact: %r" % r.stderr)
    o = run.exec(chat, "ln -s /dev/zero zero && ln -s /etc/shadow shadow && "
                 "ln -s ../etc/passwd outside && ln -s /dev devs && "
                 "mkfifo fifo && ln -s exact wlink")
    check_eq(o["exit_code"], 0, "plant: %r" % o)
    r = run("read", "--chat", chat, "big")
    check(r.returncode == 8 and r.stdout == data[:cap] and
          b"more than %d bytes, cut there" % cap in
          r.stderr, "read of a file over the cap: rc %d, %d bytes, %r" % (
              r.returncode, len(r.stdout), r.stderr))
    r = run("read", "--chat", chat, "exact")
    check(r.returncode == 0 and r.stdout == data[:cap] and r.stderr == b"",
          "read of a file of cap bytes: rc %d, %d bytes, %r" % (
              r.returncode, len(r.stdout), r.stderr))
    for path, why in (("zero", b"symbolic link"), ("shadow", b"symbolic link"),
                      ("outside", b"symbolic link"),
                      ("/workspace/zero", b"symbolic link"),
                      ("devs/zero", b"not a regular file"),
                      ("/dev/zero", b"not a regular file"),
                      ("fifo", b"not a regular file"),
                      ("/workspace", b"not a regular file")):
        r = run("read", "--chat", chat, "--timeout", "10", path)
        check(r.returncode == 1 and r.stdout == b"" and why in r.stderr,
              "read %s: rc %d, %d bytes, %r" % (path, r.returncode,
                                                 len(r.stdout), r.stderr))
    for path, why in (("wlink", b"symbolic link"), ("zero", b"symbolic link"),
                      ("fifo", b"not a regular file"),
                      ("devs/null", b"not a regular file")):
        r = run("write", "--chat", chat, "--timeout", "10", path,
                stdin=b"overwritten\n")
        check(r.returncode == 1 and why in r.stderr, "write %s: rc %d, %r" % (
              path, r.returncode, r.stderr))
    o = run.exec(chat, "cmp -s exact big -n %d && echo same; "
                 "[ -L wlink ] && echo link" % cap)
    check_eq(o["stdout"], "same\nlink\n", "after refused writes: %r" % o)
    # write makes and truncates regular files as the sandbox user
    r = run("write", "--chat", chat, "sub2-new", stdin=b"x\n")
    check_eq(r.returncode, 0, "write new: %r" % r.stderr)
    r = run("write", "--chat", chat, "big", stdin=b"short\n")
    check_eq(r.returncode, 0, "write over: %r" % r.stderr)
    o = run.exec(chat, "cat big sub2-new; stat -c '%a' sub2-new 2>/dev/null "
                 "|| find sub2-new -printf '%m\\n'")
    check_eq(o["stdout"], "short\nx\n644\n", "written files: %r" % o)
