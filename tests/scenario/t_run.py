#!/usr/bin/env python3
"""sluice-run with the ns backend, as root: curl, python and pip in a real
sandbox reach a loopback upstream only through the broker; direct
connects, packet and netlink sockets and another chat's socket are out of
reach; background processes survive between commands; timeout and cancel
kill the whole process tree (setsid double fork included); output is
capped; quotas name the full scope; gc suspends and removes by age;
destroy leaves no process, cgroup, socket or broker session behind and
follows no link out of the workspace; write/read/ls stay inside the
sandbox (ls in a fixed format); commands get no host fd, no controlling
terminal, no host environment, no x32 calls and none of the seccomp deny
list; --workspace takes only a new or empty directory under
workspace_root and gives it back; an interrupted or killed
create and a killed exec leave nothing stuck; a replaced lock file is
not trusted.

Each case starts its own sluiced and uses its own state directory.  Skips
(77) when not root or without user namespaces; fails then under
SLUICE_TEST_STRICT=1."""

import fcntl
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, Skip, check, check_eq,  # noqa: E402
                     api_unix, wait_until)
from t_clients import PKG  # noqa: E402
import runlib  # noqa: E402
from runlib import (RUN, RUN_LOCAL, Runner, files_fds_env, no_tty,  # noqa: E402
                    log_is_bounded, hello_upstream,
                    reaches_only_through_broker, background_survives,
                    timeout_kills_tree, seccomp_refuses,
                    files_regular_only)

S = Suite("t_run", time_limit=500)


def preflight():
    if os.geteuid() != 0:
        raise Skip("needs root")
    if not os.path.exists(RUN):
        raise Skip("sluice-run not built")
    r = subprocess.run(["unshare", "-U", "-m", "-p", "-n", "-f", "true"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        raise Skip("no user namespaces: %s" % r.stderr.decode().strip())


def start(env, upstream_port=None, **run_cfg):
    return runlib.start(env, preflight, upstream_port, **run_cfg)


@S.case
def network_only_through_broker(env):
    port = hello_upstream(env)
    d, run = start(env, port)
    run.create("net1", "--tenant", "acme", "--user", "alice")
    # the upstream is on the HOST's loopback: no way but the broker
    reaches_only_through_broker(run, "net1", port)
    # pip: clean env (no host PIP_*), proxy from sluice-run's settings
    # into ~/.local (the system is read-only); kept for the next command
    o = run.exec("net1", "python3 -m pip install --no-cache-dir "
                 "--disable-pip-version-check --no-input --retries 0 "
                 "--timeout 15 --trusted-host pypi.test --index-url "
                 "http://pypi.test:%d/simple/ %s" % (port, PKG), timeout=180)
    check(o["exit_code"] == 0, "pip install: %r", o)
    o = run.exec("net1", "python3 -c 'import %s; print(%s.VALUE)'" % (
        PKG, PKG))
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
                 "for f in (socket.AF_PACKET, socket.AF_NETLINK, 40):\n"
                 "    try:\n"
                 "        socket.socket(f, socket.SOCK_RAW); print(\"open\")\n"
                 "    except OSError as e: print(errno.errorcode[e.errno])\n"
                 "'")
    check_eq(o["stdout"], "ENETUNREACH\nEAFNOSUPPORT\nEAFNOSUPPORT\n"
             "EAFNOSUPPORT\n", "direct connect / packet / netlink / vsock")
    if os.uname().machine == "x86_64":
        # x32 calls (bit 30) are refused whatever they are: socket()
        # through the x32 table would skip the family check
        o = run.exec("net1", "python3 -c '\n"
                     "import ctypes, errno\n"
                     "libc = ctypes.CDLL(None, use_errno=True)\n"
                     "r = libc.syscall(0x40000000 | 41, 16, 3, 0)\n"
                     "print(r, errno.errorcode[ctypes.get_errno()])\n"
                     "'")
        check_eq(o["stdout"], "-1 ENOSYS\n", "x32 socket()")
    # who and where the command is
    o = run.exec("net1", "id -u; pwd; grep -E '^(CapEff|CapBnd|NoNewPrivs|"
                 "Seccomp):' /proc/self/status | tr -s '\t ' ' '; "
                 "touch /usr/x 2>/dev/null || echo usr-ro; "
                 "touch /x 2>/dev/null || echo root-ro; "
                 "touch /tmp/x ~/x /workspace/x && echo rw; "
                 "unshare -U true 2>/dev/null || echo no-userns; "
                 "ls /sys 2>/dev/null | wc -l; ip -o link 2>/dev/null | "
                 "wc -l || true")
    lines = o["stdout"].splitlines()
    check_eq(lines[:10], ["1000", "/workspace",
                          "CapEff: 0000000000000000",
                          "CapBnd: 0000000000000000", "NoNewPrivs: 1",
                          "Seccomp: 2", "usr-ro", "root-ro", "rw",
                          "no-userns"], "identity and mounts")
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
def seccomp_deny_list(env):
    """The calls a sandbox never needs (keyrings, bpf, userfaultfd, perf,
    kexec, modules, mounts, namespaces, ports, swap, reboot, the clock,
    io_uring, address-space personalities, other socket families) are
    refused inside with EPERM (ENOSYS, EAFNOSUPPORT), the process lives
    on, threads and sockets work."""
    d, run = start(env)
    run.create("sc")
    seccomp_refuses(run, "sc")


@S.case
def read_write_regular_only(env):
    d, run = start(env, max_file_bytes=100000)
    run.create("rw")
    files_regular_only(env, run, "rw", 100000)


@S.case
def workspace_only_under_its_root(env):
    """--workspace hands a host directory to the sandbox user, so: none
    without workspace_root in the configuration (a root-owned directory
    named keeps its owner); under it only a new directory (made, removed
    on destroy) or an empty one (handed over, given back on destroy with
    its owner, group and mode, the files made in it too); a non-empty
    one, a symbolic link, a path out of the root, a root that others may
    write and a root that is / or a system directory are refused."""
    d, run = start(env)
    victim = env.path("victim")
    os.makedirs(victim)
    os.chmod(victim, 0o755)

    def unchanged(path, want, what):
        st = os.lstat(path)
        check_eq((st.st_uid, st.st_gid, st.st_mode & 0o7777), want, what)
    r = run("create", "--chat", "w0", "--workspace", victim)
    check(r.returncode == 2 and b"no workspace_root" in r.stderr,
          "--workspace without workspace_root: rc %d %r" % (r.returncode,
                                                           r.stderr))
    unchanged(victim, (0, 0, 0o755), "a directory refused")
    check(not os.path.exists(os.path.join(run.state, "w0")), "state left")
    for bad in ("/", "/etc/ws", "/usr"):
        r = Runner(env, d, workspace_root=bad)("create", "--chat", "w0",
                                               "--workspace", "x")
        check(r.returncode == 2 and b"workspace_root" in r.stderr,
              "workspace_root %s: rc %d %r" % (bad, r.returncode, r.stderr))
    root = env.path("wsroot")
    os.makedirs(root)
    os.chmod(root, 0o755)
    run = Runner(env, d, workspace_root=root)
    full = os.path.join(root, "full")
    os.makedirs(full)
    with open(os.path.join(full, "k"), "w") as f:
        f.write("k")
    os.symlink(victim, os.path.join(root, "ln"))
    loose = os.path.join(root, "loose")
    os.makedirs(os.path.join(loose, "x"))
    os.chmod(loose, 0o777)
    for ws, why in ((victim, b"not under workspace_root"),
                    ("../victim", b"not under workspace_root"),
                    ("ln", b"a symbolic link"),
                    ("full", b"not empty"),
                    ("loose/x", b"must be root's and not writable"),
                    ("..", b"not a directory name")):
        r = run("create", "--chat", "w1", "--workspace", ws)
        check(r.returncode == 2 and why in r.stderr,
              "--workspace %s: rc %d %r" % (ws, r.returncode, r.stderr))
    unchanged(victim, (0, 0, 0o755), "the link's target")
    unchanged(full, (0, 0, 0o755), "a non-empty directory")
    check(not os.path.exists(os.path.join(run.state, "w1")), "state left")
    # a new one: the sandbox's, removed on destroy
    r, o = run.json("create", "--chat", "w2", "--workspace", "new")
    check_eq(r.returncode, 0, "create in a new directory: %r" % r.stderr)
    new = os.path.join(root, "new")
    check_eq((o["workspace"], os.stat(new).st_uid), (new, o["host_uid"]),
             "new workspace")
    check_eq(run("destroy", "--chat", "w2").returncode, 0, "destroy w2")
    check(not os.path.exists(new), "a made workspace is removed")
    # an empty one: handed over, then given back as it was
    given = os.path.join(root, "given")
    os.makedirs(given)
    os.chown(given, 4242, 4343)
    os.chmod(given, 0o2710)
    r, o = run.json("create", "--chat", "w3", "--workspace", given)
    check_eq(r.returncode, 0, "create in an empty directory: %r" % r.stderr)
    check_eq(os.stat(given).st_uid, o["host_uid"], "handed over")
    e = run.exec("w3", "echo data > f && mkdir -p d/e && echo x > d/e/g && "
                 "chmod 4755 f && ln -s %s out && pwd" % victim)
    check_eq(e["stdout"], "/workspace\n", "work in it: %r" % e)
    check_eq(run("destroy", "--chat", "w3").returncode, 0, "destroy w3")
    unchanged(given, (4242, 4343, 0o2710), "given back")
    for f in ("f", "d", "d/e", "d/e/g", "out"):
        st = os.lstat(os.path.join(given, f))
        check_eq((st.st_uid, st.st_gid), (4242, 4343), "owner of %s" % f)
    check_eq(os.stat(os.path.join(given, "f")).st_mode & 0o7000, 0,
             "setuid bit after the hand-back")
    check_eq(open(os.path.join(given, "d", "e", "g")).read(), "x\n",
             "the sandbox's files stay")
    unchanged(victim, (0, 0, 0o755), "a link's target after destroy")


@S.case
def processes_limits_cancel(env):
    d, run = start(env)
    run.create("p1")
    background_survives(run, "p1")
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
    timeout_kills_tree(run, "p1", 15)
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
    p = subprocess.Popen(run.argv("--json", "exec", "--chat", "p1", "--",
                                  "sh", "-c", "setsid sleep 500 & "
                                  "sleep 500"), stdout=subprocess.PIPE)
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
    run.create("p2")
    files_fds_env(env, run, "p2")
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
    keep = env.path("keep")
    os.makedirs(keep)
    with open(os.path.join(keep, "k"), "w") as f:
        f.write("k")
    run.exec("dz", "ln -s %s victim; mkdir d; ln -s %s d/victim" % (keep,
             keep))
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
    check(os.path.exists(os.path.join(keep, "k")), "destroy followed a "
          "link out of the workspace")
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


def tree_and_suspend(env, mode):
    """Timeout kills a command's tree (setsid double fork included) but
    not older background jobs; gc suspends and exec resumes."""
    d, run = start(env, cgroups=mode)
    r, o = run.json("create", "--chat", "tc")
    run.chats.append("tc")
    check(r.returncode == 0, "create: %r" % r.stderr)
    run.exec("tc", "nohup sleep 300 >/dev/null 2>&1 &")
    r, o2 = run.json("exec", "--chat", "tc", "--timeout", "2", "--",
                     "/bin/sh", "-c", "setsid sh -c 'sleep 400 & echo $! > "
                     "dbl.pid; wait' & sleep 200 & wait")
    check(o2["timed_out"] is True, "timeout: %r", o2)
    o2 = run.exec("tc", "sleep 0.3; kill -0 $(cat dbl.pid) 2>/dev/null && "
                  "echo alive || echo dead; pgrep -c sleep")
    check_eq(o2["stdout"], "dead\n1\n", "tree killed, background kept")
    init = o["init_pid"]
    r, o2 = run.json("gc", "--idle-after", "0")
    check_eq(o2["suspended"], ["tc"], "suspended")
    return run, o, init


@S.case
def without_cgroups(env):
    """Where cgroups are not usable: process trees are found through
    /proc, and suspension is SIGSTOP."""
    run, o, init = tree_and_suspend(env, "off")
    check("cgroups off" in o["note"], "note: %r" % o["note"])
    states = sandbox_pids(init)
    check(states.pop(init, None) is not None, "holder gone")
    check(states and all(v == "T" for v in states.values()),
          "not stopped: %r" % states)
    o = run.exec("tc", "pgrep -c sleep")
    check_eq(o["stdout"], "1\n", "resumed")
    states = sandbox_pids(init)
    check(all(v != "T" for v in states.values()), "still stopped: %r"
          % states)


@S.case
def cgroup_v2(env):
    """The v2 code path: /sys/fs/cgroup when it is cgroup2, or the
    unified hierarchy of a hybrid host (which freezes and kills but has
    no controllers).  Hosts with neither have nothing to test here."""
    if not any(os.path.exists(p + "/cgroup.controllers") for p in
               ("/sys/fs/cgroup", "/sys/fs/cgroup/unified")):
        return
    run, o, init = tree_and_suspend(env, "v2")
    check(o["cgroup"].startswith("v2:"), "cgroup: %r" % o["cgroup"])
    grp = [os.path.join(o["cgroup"][3:], "sluice-run", x) for x in
           os.listdir(os.path.join(o["cgroup"][3:], "sluice-run"))
           if x.startswith("tc.")]
    check(len(grp) == 1, "group: %r" % grp)
    check_eq(open(grp[0] + "/cgroup.freeze").read().strip(), "1", "frozen")
    o = run.exec("tc", "pgrep -c sleep")
    check_eq(o["stdout"], "1\n", "resumed")
    check_eq(open(grp[0] + "/cgroup.freeze").read().strip(), "0", "thawed")
    r = run("destroy", "--chat", "tc")
    run.chats = []
    check(r.returncode == 0 and not os.path.exists(grp[0]),
          "group left: %r" % r.stderr)


def creators(run, chat):
    """pids whose command line is a create of chat in run's state dir, or
    that carry the environment of one (Runner.create_env: the holder, a
    fork of create, shows "sbx-init" as its command line)"""
    want = [b"--state-dir", run.state.encode(), b"create", b"--chat",
            chat.encode()]
    mark = ("SLUICE_TEST_CREATE=%s:%s" % (run.state, chat)).encode()
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                argv = f.read().split(b"\0")
            with open("/proc/%s/environ" % pid, "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if all(w in argv for w in want) or mark in env:
            found.append(int(pid))
    return found


def sandbox_cgroups(run, chat):
    """the chat's cgroup v1 directories that exist (sbx_ns.c names them
    <chat>.<FNV-1a of the chat's state directory, 8 hex digits>)"""
    h = 2166136261
    for b in os.path.join(run.state, chat).encode():
        h = ((h ^ b) * 16777619) & 0xffffffff
    name = "%s.%08x" % (chat, h)
    return [d for d in ("/sys/fs/cgroup/%s/sluice-run/%s" % (c, name)
                        for c in ("memory", "pids", "cpu", "freezer"))
            if os.path.isdir(d)]


def children_named(ppid, comm):
    """pids of ppid's children whose name is comm (fast enough to poll
    in a tight loop: only ppid's children are read)"""
    found = []
    try:
        with open("/proc/%d/task/%d/children" % (ppid, ppid)) as f:
            kids = f.read().split()
    except OSError:
        return found
    for pid in kids:
        try:
            with open("/proc/%s/comm" % pid) as f:
                if f.read().strip() == comm:
                    found.append(int(pid))
        except OSError:
            pass
    return found


@S.case
def create_is_not_interrupted(env):
    """SIGINT or SIGTERM during create (once the chat's directory is
    there) neither leaves a directory without a record, which could be
    neither created again nor destroyed, nor a half-made sandbox; after
    a SIGKILL, destroy and create work."""
    d, run = start(env)
    for i, sig in enumerate((signal.SIGINT, signal.SIGTERM)):
        chat = "ci%d" % i
        p = run.popen_create(chat)
        p.send_signal(sig)
        out, err = p.communicate(timeout=60)
        check_eq(p.returncode, 0, "create after %s: %r" % (sig, err))
        r = run("destroy", "--chat", chat)
        check_eq(r.returncode, 0, "destroy: %r" % r.stderr)
        check(not os.path.exists(os.path.join(run.state, chat)),
              "state dir of %s" % chat)
    # SIGKILL cannot be blocked: what it leaves is destroyed, or cleared
    # by the next create
    # "holder": the moment the sandbox's holder exists, before the
    # record can name it (the narrowest window, caught by watching /proc)
    for i, delay in enumerate((0, 0.02, 0.2, "holder")):
        chat = "ck%d" % i
        run.chats.append(chat)          # destroyed at cleanup, pass or fail
        if delay == "holder":
            p = subprocess.Popen(run.argv("create", "--chat", chat),
                                 stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE,
                                 env=run.create_env(chat))
            deadline = time.monotonic() + 20
            while not children_named(p.pid, "sbx-init") and \
                    time.monotonic() < deadline and p.poll() is None:
                time.sleep(0.0005)
            check(p.poll() is None, "create ended before it was killed")
        else:
            p = run.popen_create(chat)
            time.sleep(delay)
        p.kill()
        p.communicate(timeout=60)
        r = run("destroy", "--chat", chat)
        check(r.returncode in (0, 3), "destroy after SIGKILL: %r" % r.stderr)
        # what the killed create started is gone now: a holder the
        # record names by destroy, one made before the record named it
        # with its creator (else it would run on with nothing to find it
        # by); holder and log reader are forks, so they carry create's
        # environment (and the log reader its command line)
        deadline = time.monotonic() + 5
        while creators(run, chat) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = creators(run, chat)
        for pid in left:        # never leave them running, pass or fail
            os.kill(pid, signal.SIGKILL)
        check(not left, "processes of the killed create of %s: %r" %
              (chat, left))
        # groups made before the record named them go too
        left = sandbox_cgroups(run, chat)
        check(not left, "cgroups of the killed create of %s: %r" %
              (chat, left))
        r = run("create", "--chat", chat)
        check_eq(r.returncode, 0, "create after SIGKILL: %r" % r.stderr)
        r = run("destroy", "--chat", chat)
        check_eq(r.returncode, 0, "destroy: %r" % r.stderr)


@S.case
def killed_runner_leaves_no_busy_mark(env):
    """A sluice-run killed while its command runs leaves a run file;
    once the command has ended, gc must not take the sandbox for busy
    for ever (it suspends it), and cancel must not touch it."""
    d, run = start(env)
    run.create("k1")
    p = subprocess.Popen(run.argv("exec", "--chat", "k1", "--", "sleep",
                                  "1"), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    rundir = os.path.join(run.state, "k1", "run")
    wait_until(lambda: os.path.isdir(rundir) and os.listdir(rundir), 20,
               step=0.01, what="run file")
    p.kill()
    p.communicate(timeout=20)
    time.sleep(2)
    r = run("cancel", "--chat", "k1")
    check(r.returncode == 0 and b"cancelled 0 commands" in r.stdout,
          "cancel: %r" % r.stdout)
    r, o = run.json("gc", "--idle-after", "0")
    check_eq(o["suspended"], ["k1"], "gc after a killed sluice-run")
    check_eq(os.listdir(rundir), [], "run files")


@S.case
def lock_follows_the_file(env):
    """A waiter whose lock file was replaced meanwhile (destroy removes
    the chat's directory with its lock held; create makes a new one)
    must lock the new file, not go on with the old one."""
    d, run = start(env)
    run.create("lk")
    lockp = os.path.join(run.state, "lk", "lock")
    old = os.open(lockp, os.O_RDWR)
    fcntl.flock(old, fcntl.LOCK_EX)
    p = subprocess.Popen(run.argv("exec", "--chat", "lk", "--", "touch",
                                  "ran"),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(0.5)
    os.rename(lockp, lockp + ".old")
    new = os.open(lockp, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(new, fcntl.LOCK_EX)
    os.close(old)
    time.sleep(1)
    ran = os.path.join(run.state, "lk", "workspace", "ran")
    early = os.path.exists(ran)
    os.close(new)
    out, err = p.communicate(timeout=60)
    os.unlink(lockp + ".old")
    check(not early, "exec went on with a replaced lock file")
    check(p.returncode == 0 and os.path.exists(ran), "exec after the "
          "lock: %r" % err)


@S.case
def no_controlling_terminal(env):
    d, run = start(env)
    run.create("tt")
    no_tty(run, "tt")


@S.case
def fail_closed_without_sluiced(env):
    preflight()
    os.makedirs(env.path("run"))
    d = type("D", (), {"config": {"runtime_dir": env.path("run")}})()
    run = Runner(env, d)
    r = run("create", "--chat", "nb")
    check(r.returncode == 5 and b"cannot reach sluiced" in r.stderr,
          "no sluiced: rc %d %r" % (r.returncode, r.stderr))
    # a write that fails early (no such sandbox) leaves nothing reading
    # its stdin, which may be a terminal that never says EOF
    rd, wr = os.pipe()
    r = subprocess.run(run.argv("write", "--chat", "nb", "f"), stdin=rd,
                       stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=30)
    os.close(rd)
    check_eq(r.returncode, 3, "write without a sandbox: %r" % r.stderr)

    def no_reader():
        try:
            os.write(wr, b"x")
            return False
        except BrokenPipeError:
            return True
    try:
        wait_until(no_reader, 5, what="stdin copier to end")
    finally:
        os.close(wr)
    # chat ids name directories: no "..", no ".lock", nothing too long
    for bad in ("..", ".lock", "../x", "a/b", "-x", "x" * 65, ""):
        r = run("create", "--chat", bad)
        check(r.returncode == 2 and b"bad chat id" in r.stderr,
              "chat id %r: rc %d %r" % (bad, r.returncode, r.stderr))
    check(not os.path.exists(os.path.join(run.state, "nb")), "state left")


@S.case
def init_log_is_bounded(env):
    d, run = start(env)
    run.create("lg")
    log_is_bounded(env, run, "lg")


@S.case
def names_safe_on_a_terminal(env):
    """--user and --tier are checked at create (UTF-8 without control
    characters, as sluiced wants users; tiers are names), and list prints
    what a record holds with control characters (C1 too), bidirectional
    and invisible characters, backslashes and bytes that are not UTF-8
    escaped (\\ooo), JSON output the same strings, in ASCII."""
    preflight()
    os.makedirs(env.path("run"))
    d = type("D", (), {"config": {"runtime_dir": env.path("run")}})()
    run = Runner(env, d)
    for bad in ("a\x1b[2Jb", "bell\x07", "del\x7f", "c1\u009b",
                "x" * 129):
        r = run("create", "--chat", "nm", "--user", bad)
        check(r.returncode == 2 and b"bad user" in r.stderr,
              "user %r: rc %d %r" % (bad, r.returncode, r.stderr))
    r = subprocess.run([RUN_LOCAL, "--local", "--state-dir", run.state,
                        "--control",
                        run.ctl, "create", "--chat", "nm", "--user",
                        b"\xff\xfe"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=30)
    check(r.returncode == 2 and b"bad user" in r.stderr,
          "user not UTF-8: rc %d %r" % (r.returncode, r.stderr))
    r = run("create", "--chat", "nm", "--tier", "reg\x1b[0m")
    check(r.returncode == 2 and b"bad tier" in r.stderr,
          "tier: rc %d %r" % (r.returncode, r.stderr))
    check(not os.path.exists(os.path.join(run.state, "nm")), "state left")
    # a record holding such names (an older sluice-run's): list escapes
    user = "\x1b]0;owned\x07\u009b31m Zo\u00eb \\ end \u202efdp.exe\u200b"
    os.makedirs(os.path.join(run.state, "nm"), mode=0o711)
    with open(os.path.join(run.state, "nm", "record.json"), "w") as f:
        json.dump({"chat": "nm", "tenant": "t\r\nFAKE", "user": user,
                   "tier": "registries", "backend": "ns\x08\x08",
                   "dir": os.path.join(run.state, "nm"), "slot": 0}, f)
    r = run("list")
    check_eq(r.returncode, 0, "list: %r" % r.stderr)
    out = r.stdout
    check(not any(c < 0x20 and c != 0x0a or c == 0x7f for c in out) and
          b"\xc2\x9b" not in out and out.count(b"\n") == 2,
          "list prints control characters: %r" % out)
    check(b"\\033]0;owned\\007\\302\\23331m Zo\xc3\xab \\134 end "
          b"\\342\\200\\256fdp.exe\\342\\200\\213" in out and
          b"t\\015\\012FAKE" in out and b"ns\\010\\010" in out,
          "list escapes: %r" % out)
    r, o = run.json("list")
    check(all(c < 0x80 for c in r.stdout), "list --json not ASCII: %r" %
          r.stdout)
    check_eq((o["sandboxes"][0]["user"], o["sandboxes"][0]["tenant"]),
             (user, "t\r\nFAKE"), "list --json")


if __name__ == "__main__":
    S.main()
