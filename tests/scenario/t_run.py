#!/usr/bin/env python3
"""sluice-run with the ns backend, as root: curl, python and pip in a real
sandbox reach a loopback upstream only through the broker; direct
connects, packet and netlink sockets and another chat's socket are out of
reach; background processes survive between commands; timeout and cancel
kill the whole process tree (setsid double fork included); output is
capped; quotas name the full scope; gc suspends and removes by age; and
destroy leaves no process, cgroup, socket or broker session behind.

Each case starts its own sluiced and uses its own state directory.  Skips
(77) when not root or without user namespaces; fails then under
SLUICE_TEST_STRICT=1."""

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, Skip, Fail, check, check_eq,  # noqa: E402
                     api_unix, wait_until)
from t_clients import make_index, serve, PKG  # noqa: E402

S = Suite("t_run", time_limit=500)

BLD = os.environ.get("SLUICE_BUILDDIR", ".")
RUN = os.path.join(BLD, "sandbox-glue", "sluice-run")
SHIM = os.path.abspath(os.path.join(BLD, "sandbox-glue", "sluice-shim"))


def preflight():
    if os.geteuid() != 0:
        raise Skip("needs root")
    if not os.path.exists(RUN):
        raise Skip("sluice-run not built")
    r = subprocess.run(["unshare", "-U", "-m", "-p", "-n", "-f", "true"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        raise Skip("no user namespaces: %s" % r.stderr.decode().strip())


class Runner:
    """sluice-run against one sluiced and one state directory."""

    def __init__(self, env, d, **cfg):
        # the sandbox's root (mapped to an unprivileged uid) must be able
        # to traverse to its state directory and to the session socket
        for p in (os.path.dirname(env.dir), env.dir):
            os.chmod(p, 0o711)
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

    def __call__(self, *args, stdin=None, timeout=120):
        cmd = [RUN, "--config", self.conf, "--state-dir", self.state,
               "--control", self.ctl] + list(args)
        return subprocess.run(cmd, input=stdin, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=timeout)

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


def start(env, upstream_port=None, **run_cfg):
    preflight()
    ports = [443, 80] + ([upstream_port] if upstream_port else [])
    cfg = env.config(sessions=[], ceiling="registries",
                     registries=["pypi.test"],
                     ports={"registries": ports, "public": ports},
                     allow_cidrs=["127.0.0.1/32"],
                     dns={"hosts": {"pypi.test": ["127.0.0.1"]}})
    d = env.sluiced(cfg)
    return d, Runner(env, d, **run_cfg)


@S.case
def network_only_through_broker(env):
    root = env.path("www")
    os.makedirs(root)
    make_index(root)
    with open(os.path.join(root, "hello.txt"), "w") as f:
        f.write("hello from the host's loopback\n")
    port = serve(env, root)
    d, run = start(env, port)
    run.create("net1", "--tenant", "acme", "--user", "alice")
    url = "http://pypi.test:%d/hello.txt" % port
    o = run.exec("net1", "curl -sS --max-time 10 %s" % url)
    check_eq(o["stdout"], "hello from the host's loopback\n", "curl body")
    o = run.exec("net1", "python3 -c 'import urllib.request as u; "
                 "print(u.urlopen(\"%s\", timeout=10).read().decode(), "
                 "end=\"\")'" % url)
    check_eq(o["stdout"], "hello from the host's loopback\n", "python body")
    # the upstream is on the HOST's loopback: no way but the broker
    o = run.exec("net1", "curl -sS --noproxy '*' --max-time 5 "
                 "http://127.0.0.1:%d/hello.txt" % port)
    check(o["exit_code"] != 0, "direct loopback reached the host: %r", o)
    # pip: clean env (no host PIP_*), proxy from sluice-run's settings
    o = run.exec("net1", "python3 -m pip install --no-cache-dir "
                 "--disable-pip-version-check --no-input --retries 0 "
                 "--timeout 15 --trusted-host pypi.test --index-url http://pypi.test:%d/simple/ "
                 "--target /workspace/site %s" % (port, PKG), timeout=180)
    check(o["exit_code"] == 0, "pip install: %r", o)
    o = run.exec("net1", "PYTHONPATH=/workspace/site python3 -c "
                 "'import %s; print(%s.VALUE)'" % (PKG, PKG))
    check_eq(o["stdout"], "42\n", "installed package")
    o = run.exec("net1", "env | sort")
    check("PIP_PROXY=http://127.0.0.1:3128" in o["stdout"], "env: %r", o)
    check("REQUESTS_CA_BUNDLE" not in o["stdout"], "host env leaked")
    # direct connects leave nowhere: no device but loopback
    o = run.exec("net1", "python3 -c '\n"
                 "import socket, errno\n"
                 "s = socket.socket()\n"
                 "try:\n"
                 "    s.connect((\"192.0.2.1\", 80)); print(\"connected\")\n"
                 "except OSError as e: print(errno.errorcode[e.errno])\n"
                 "for f in (socket.AF_PACKET, socket.AF_NETLINK):\n"
                 "    try:\n"
                 "        socket.socket(f, socket.SOCK_RAW); print(\"open\")\n"
                 "    except OSError as e: print(errno.errorcode[e.errno])\n"
                 "'")
    check_eq(o["stdout"], "ENETUNREACH\nEAFNOSUPPORT\nEAFNOSUPPORT\n",
             "direct connect / packet / netlink")
    # another chat's socket is not visible, and not ours to use
    run.create("net2", "--tenant", "acme", "--user", "bob")
    other = d.session_socket("net1")
    o = run.exec("net2", "python3 -c '\n"
                 "import socket, errno\n"
                 "s = socket.socket(socket.AF_UNIX)\n"
                 "try:\n"
                 "    s.connect(\"%s\"); print(\"connected\")\n"
                 "except OSError as e: print(errno.errorcode[e.errno])\n"
                 "'; ls /run/sluice" % other)
    check_eq(o["stdout"], "ENOENT\nproxy.sock\n", "other chat's socket")
    recs = [r for r in open(d.log_path) if '"decision"' in r]
    check(any('"session":"net1"' in r for r in recs),
          "no decision record for net1")


@S.case
def processes_limits_cancel(env):
    d, run = start(env)
    run.create("p1")
    o = run.exec("p1", "nohup sleep 300 >/dev/null 2>&1 & echo $! > bg.pid")
    check_eq(o["exit_code"], 0, "background start")
    o = run.exec("p1", "kill -0 $(cat bg.pid) && echo alive; pwd")
    check_eq(o["stdout"], "alive\n/workspace\n", "background survives")
    # a background job that keeps writing to the command's stdout does
    # not die of a broken pipe once the command has returned
    o = run.exec("p1", "(while :; do echo tick; sleep 0.1; done) & "
                 "echo $! > ticker.pid; echo started")
    check("started" in o["stdout"] and o["duration_ms"] < 5000,
          "ticker: %r", o)
    time.sleep(0.5)
    o = run.exec("p1", "kill -0 $(cat ticker.pid) && echo alive && "
                 "kill $(cat ticker.pid)")
    check_eq(o["stdout"], "alive\n", "writer survives its command")
    # timeout: the command, a child and a setsid double-forked grandchild
    t0 = time.monotonic()
    r, o = run.json("exec", "--chat", "p1", "--timeout", "2", "--",
                    "/bin/sh", "-c", "setsid sh -c 'sleep 400 & echo $! > "
                    "dbl.pid; wait' & sleep 200 & wait")
    check(time.monotonic() - t0 < 15, "timeout took too long")
    check(o["timed_out"] is True and r.returncode == 124, "timeout: %r", o)
    o = run.exec("p1", "sleep 0.3; kill -0 $(cat dbl.pid) 2>/dev/null && "
                 "echo alive || echo dead; pgrep -c sleep")
    check_eq(o["stdout"], "dead\n1\n", "tree killed, background kept")
    r = run("exec", "--chat", "p1", "--timeout", "1681", "--", "true")
    check_eq(r.returncode, 2, "timeout above 28 min refused")
    # output cap: kept, drained, said plainly
    o = run.exec("p1", "head -c 200000 /dev/zero | tr '\\0' a; echo e >&2",
                 "--output-cap", "1000")
    check(len(o["stdout"]) == 1000 and o["stdout_truncated"] is True and
          o["stderr_truncated"] is False and o["exit_code"] == 0,
          "cap: %r", {k: v for k, v in o.items() if k != "stdout"})
    r = run("exec", "--chat", "p1", "--output-cap", "10", "--",
            "seq", "1", "10000")
    check(b"stdout truncated" in r.stderr and len(r.stdout) == 10,
          "text mode truncation: %r", r.stderr)
    # the default cap is 64 KiB
    o = run.exec("p1", "head -c 100000 /dev/zero | tr '\\0' b")
    check(len(o["stdout"]) == 65536, "default cap %d" % len(o["stdout"]))
    # cancel from another invocation
    p = subprocess.Popen([RUN, "--json", "--config", run.conf, "--state-dir",
                          run.state, "--control", run.ctl, "exec", "--chat",
                          "p1", "--", "sh", "-c", "setsid sleep 500 & "
                          "sleep 500"], stdout=subprocess.PIPE)
    wait_until(lambda: len(os.listdir(os.path.join(run.state, "p1",
               "run"))) > 0, 10, what="running command")
    r = run("cancel", "--chat", "p1")
    check_eq(r.returncode, 0, "cancel")
    out, _ = p.communicate(timeout=20)
    o = json.loads(out)
    check(o["cancelled"] is True, "cancelled: %r", o)
    o = run.exec("p1", "pgrep -c sleep")
    check_eq(o["stdout"], "1\n", "only the background sleep left")
    # write / read / ls
    r = run("write", "--chat", "p1", "notes/../f.txt", stdin=b"data\n")
    check(r.returncode != 0, "write into a missing directory succeeded")
    r = run("write", "--chat", "p1", "f.txt", stdin=b"data\n")
    check_eq(r.returncode, 0, "write")
    r = run("read", "--chat", "p1", "f.txt")
    check_eq(r.stdout, b"data\n", "read")
    r = run("ls", "--chat", "p1")
    check(b"f.txt" in r.stdout, "ls: %r" % r.stdout)
    r = run("exec", "--chat", "nosuch", "--", "true")
    check_eq(r.returncode, 125, "exec in a missing sandbox")


@S.case
def quotas_gc_destroy(env):
    d, run = start(env, max_per_tenant=3, max_per_user=2)
    run.create("q1", "--tenant", "t1", "--user", "u1")
    run.create("q2", "--tenant", "t1", "--user", "u1")
    r = run("create", "--chat", "q3", "--tenant", "t1", "--user", "u1")
    check(r.returncode == 4 and b"user u1" in r.stderr and
          b"max_per_user" in r.stderr, "user quota: %r", r.stderr)
    run.create("q3", "--tenant", "t1", "--user", "u2")
    r = run("create", "--chat", "q4", "--tenant", "t1", "--user", "u3")
    check(r.returncode == 4 and b"tenant t1" in r.stderr and
          b"max_per_tenant" in r.stderr, "tenant quota: %r", r.stderr)
    check(not os.path.exists(os.path.join(run.state, "q4")), "q4 left")
    r = run("create", "--chat", "q1")
    check_eq(r.returncode, 6, "create twice")
    # gc: suspend idle ones (next exec resumes), remove old ones
    run.exec("q1", "sleep 300 >/dev/null 2>&1 &")
    r, o = run.json("gc", "--idle-after", "0", "--remove-after", "3600")
    check_eq(sorted(o["suspended"]), ["q1", "q2", "q3"], "suspended")
    _, lst = run.json("list")
    check(all(s["state"] == "suspended" for s in lst["sandboxes"]),
          "list: %r", lst)
    o = run.exec("q1", "pgrep -c sleep")
    check_eq(o["stdout"], "1\n", "resumed with its background job")
    _, lst = run.json("list")
    st = {s["chat"]: s for s in lst["sandboxes"]}
    check_eq(st["q1"]["state"], "running", "q1 resumed")
    time.sleep(1.1)
    r, o = run.json("gc", "--idle-after", "3600", "--remove-after", "1")
    check_eq(sorted(o["removed"]), ["q1", "q2", "q3"], "removed")
    # nothing left behind
    for c, s in st.items():
        pid = s["init_pid"]
        check(not os.path.exists("/proc/%d" % pid) or
              open("/proc/%d/stat" % pid).read().split()[2] == "Z",
              "holder of %s still runs" % c)
        check(not os.path.exists(os.path.join(run.state, c)), "state of %s"
              % c)
        check(not os.path.exists(d.session_socket(c)), "socket of %s" % c)
        check_eq(api_unix(run.ctl, "GET", "/v1/sessions/%s" % c).status,
                 404, "broker session of %s" % c)
    r = run.json("list")[1]
    check_eq(r["sandboxes"], [], "list after gc")
    # destroy: the same, explicitly, with a background process running
    run.chats = []
    run.create("dz", "--tenant", "t1", "--user", "u1")
    run.exec("dz", "setsid sleep 300 >/dev/null 2>&1 &")
    _, lst = run.json("list")
    pid = lst["sandboxes"][0]["init_pid"]
    ns = os.readlink("/proc/%d/ns/pid" % pid)
    r = run("destroy", "--chat", "dz")
    check_eq(r.returncode, 0, "destroy")
    left = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                if os.readlink("/proc/%s/ns/pid" % p) == ns and \
                        open("/proc/%s/stat" % p).read().rsplit(")", 1)[
                            1].split()[0] != "Z":
                    left.append(p)
            except OSError:
                pass
    check(not left, "processes left in the sandbox: %r" % left)
    check(not os.path.exists(os.path.join(run.state, "dz")), "state dir")
    check(not os.path.exists(d.session_socket("dz")), "socket left")
    mounts = open("/proc/self/mountinfo").read()
    check(run.state not in mounts, "mounts left on the host")
    cg = [x for x in os.listdir("/sys/fs/cgroup/freezer/sluice-run")
          if x.startswith("dz.")] if os.path.isdir(
          "/sys/fs/cgroup/freezer/sluice-run") else []
    check(not cg, "cgroups left: %r" % cg)
    resp = api_unix(run.ctl, "GET", "/v1/sessions/dz")
    check_eq(resp.status, 404, "broker session after destroy")
    r = run("destroy", "--chat", "dz")
    check_eq(r.returncode, 3, "destroy twice")


def sandbox_pids(init_pid):
    """Host pids of the live processes in init_pid's pid namespace."""
    ns = os.readlink("/proc/%d/ns/pid" % init_pid)
    out = {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            if os.readlink("/proc/%s/ns/pid" % p) != ns:
                continue
            st = open("/proc/%s/stat" % p).read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if st[0] != "Z":
            out[int(p)] = st[0]
    return out


@S.case
def without_cgroups(env):
    """Where cgroups are not usable: process trees are found through
    /proc, and suspension is SIGSTOP."""
    d, run = start(env, cgroups=False)
    r = run.create("nc")
    check(b"cgroups off" in r.stdout, "note: %r" % r.stdout)
    run.exec("nc", "nohup sleep 300 >/dev/null 2>&1 &")
    r, o = run.json("exec", "--chat", "nc", "--timeout", "2", "--",
                    "/bin/sh", "-c", "setsid sh -c 'sleep 400 & echo $! > "
                    "dbl.pid; wait' & sleep 200 & wait")
    check(o["timed_out"] is True, "timeout: %r", o)
    o = run.exec("nc", "sleep 0.3; kill -0 $(cat dbl.pid) 2>/dev/null && "
                 "echo alive || echo dead; pgrep -c sleep")
    check_eq(o["stdout"], "dead\n1\n", "tree killed, background kept")
    init = run.json("list")[1]["sandboxes"][0]["init_pid"]
    r, o = run.json("gc", "--idle-after", "0")
    check_eq(o["suspended"], ["nc"], "suspended")
    states = sandbox_pids(init)
    check(states.pop(init, None) is not None, "holder gone")
    check(states and all(v == "T" for v in states.values()),
          "not stopped: %r" % states)
    o = run.exec("nc", "pgrep -c sleep")
    check_eq(o["stdout"], "1\n", "resumed")
    states = sandbox_pids(init)
    check(all(v != "T" for v in states.values()), "still stopped: %r"
          % states)


@S.case
def fail_closed_without_sluiced(env):
    preflight()
    os.makedirs(env.path("run"))
    d = type("D", (), {"config": {"runtime_dir": env.path("run")}})()
    run = Runner(env, d)
    r = run("create", "--chat", "nb")
    check(r.returncode == 5 and b"cannot reach sluiced" in r.stderr,
          "no sluiced: rc %d %r" % (r.returncode, r.stderr))
    check(not os.path.exists(os.path.join(run.state, "nb")), "state left")


if __name__ == "__main__":
    S.main()
