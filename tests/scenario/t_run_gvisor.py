#!/usr/bin/env python3
"""sluice-run with the gvisor backend (runsc --network=none), as root:
curl, python and pip in a real gVisor sandbox reach a loopback upstream
only through the broker; direct connects to non-loopback addresses fail
and the host's loopback is not the sandbox's; another chat's socket is out
of reach and each sandbox has its own host uid; the seccomp deny list
applies to commands and the shim; the shim's log on the
host is bounded; a timeout kills the whole process tree (setsid double fork
included) and keeps background jobs; output to a file keeps its offset;
write, read and ls work as under the ns backend; the cgroups presets v1
and v2 work like auto; gc suspends (runsc pause) and the
next command resumes; destroy leaves no runsc container, process, cgroup,
mount, socket or broker session behind; and a missing runsc is named.

Skips (77) when not root or when runsc is not installed (Debian package
runsc); fails then under SLUICE_TEST_STRICT=1."""

import errno
import json
import os
import re
import shutil
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, Skip, check, check_eq, api_unix,  # noqa: E402
                     wait_until, log)
from t_clients import PKG  # noqa: E402
import runlib  # noqa: E402
import execdlib  # noqa: E402
from runlib import (RUN, Runner, files_fds_env, no_tty,  # noqa: E402
                    log_is_bounded, hello_upstream,
                    reaches_only_through_broker, background_survives,
                    timeout_kills_tree, seccomp_refuses,
                    files_regular_only)

S = Suite("t_run_gvisor", time_limit=600)

EX_BACKEND = 7


def runsc():
    return shutil.which("runsc") or next(
        (p for p in ("/usr/sbin/runsc", "/usr/bin/runsc")
         if os.access(p, os.X_OK)), None)


def preflight():
    if os.geteuid() != 0:
        raise Skip("needs root")
    if not os.path.exists(RUN):
        raise Skip("sluice-run not built")
    if runsc() is None:
        raise Skip("runsc not installed (Debian package runsc)")


def start(env, upstream_port=None, **run_cfg):
    run_cfg.setdefault("backend", "gvisor")
    return runlib.start(env, preflight, upstream_port, **run_cfg)


def runsc_list(root):
    r = subprocess.run([runsc(), "--root", root, "list", "--quiet"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=30)
    return r.stdout.decode().split()


def runsc_procs(root):
    """Host processes of the runsc instance whose state is under root
    (the sandbox, the gofer, any runsc client)."""
    found = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if ("--root=" + root).encode() in argv or (
                b"--root" in argv and root.encode() in argv):
            found.append(int(p))
    return found


def host_cgroups(run, chat):
    """The host cgroups runsc made for chat's sandbox of this run, in any
    hierarchy: named for the chat and the hash of its state directory
    (sbx_dir_hash), so another run's sandbox of the same name is not
    taken for it."""
    name = "sluice-gvisor-%s.%08x" % (chat, execdlib.fnv1a32(
        os.path.join(run.state, chat)))
    found = []
    for top in ("/sys/fs/cgroup", ) + tuple(
            "/sys/fs/cgroup/" + c for c in os.listdir("/sys/fs/cgroup")):
        try:
            names = os.listdir(top)
        except OSError:
            continue
        found += [os.path.join(top, n) for n in names if n == name]
    return found


@S.case
def network_only_through_broker(env):
    port = hello_upstream(env)
    d, run = start(env, port)
    r = run.create("net1", "--tenant", "acme", "--user", "alice")
    check(b"backend gvisor" in r.stdout, "create: %r", r.stdout)
    # the upstream is on the HOST's loopback: gVisor's loopback is its own
    reaches_only_through_broker(run, "net1", port)
    o = run.exec("net1", "python3 -m pip install --no-cache-dir "
                 "--disable-pip-version-check --no-input --retries 0 "
                 "--timeout 15 --trusted-host pypi.test --index-url "
                 "http://pypi.test:%d/simple/ --target /workspace/site %s"
                 % (port, PKG), timeout=240)
    check(o["exit_code"] == 0, "pip install: %r", o)
    o = run.exec("net1", "PYTHONPATH=/workspace/site python3 -c "
                 "'import %s; print(%s.VALUE)'" % (PKG, PKG))
    check_eq(o["stdout"], "42\n", "installed package")
    o = run.exec("net1", "id -un; env | sort")
    check(o["stdout"].startswith("user\n"), "user: %r", o["stdout"][:40])
    check("PIP_PROXY=http://127.0.0.1:3128" in o["stdout"], "env: %r", o)
    # direct connects leave nowhere: loopback is the only device (listed
    # from /proc: netlink sockets are refused, see seccomp_deny_list)
    o = run.exec("net1", "python3 -c '\n"
                 "import socket, errno\n"
                 "print(sorted(l.split(\":\")[0].strip() for l in\n"
                 "             open(\"/proc/net/dev\").readlines()[2:]))\n"
                 "for fam, addr in ((socket.AF_INET, (\"192.0.2.1\", 80)),\n"
                 "                  (socket.AF_INET6, (\"2001:db8::1\", 80))):\n"
                 "    s = socket.socket(fam); s.settimeout(5)\n"
                 "    try:\n"
                 "        s.connect(addr); print(\"connected\")\n"
                 "    except OSError as e:\n"
                 "        print(errno.errorcode.get(e.errno, e))\n"
                 "'")
    lines = o["stdout"].split("\n")
    check_eq(lines[0], "['lo']", "network devices")
    check(all(x in ("ENETUNREACH", "EHOSTUNREACH") for x in lines[1:3]),
          "direct connects: %r", o)
    # another chat's socket is not visible, and not ours to use
    run.create("net2", "--tenant", "acme", "--user", "bob")
    other = d.session_socket("net1")
    o = run.exec("net2", "python3 -c '\n"
                 "import os, socket, errno\n"
                 "s = socket.socket(socket.AF_UNIX)\n"
                 "try:\n"
                 "    s.connect(\"%s\"); print(\"connected\")\n"
                 "except OSError as e: print(errno.errorcode[e.errno])\n"
                 "print(os.listdir(\"/run/sluice\"))\n"
                 "'" % other)
    check_eq(o["stdout"], "ENOENT\n['proxy.sock']\n", "other chat's socket")
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


def connect_as(path, uid, gid):
    """errno name of connecting to the Unix socket path as uid:gid on the
    host, or "connected".  Through an O_PATH fd: the test's directories
    are root's 0700, and only the socket's own owner and mode are in
    question."""
    fd = os.open(path, os.O_PATH)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        res = b"?"
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            s = socket.socket(socket.AF_UNIX)
            try:
                s.connect("/proc/self/fd/%d" % fd)
                res = b"connected"
            except OSError as e:
                res = errno.errorcode.get(e.errno, "?").encode()
        finally:
            os.write(w, res)
            os._exit(0)
    os.close(w)
    os.close(fd)
    res = os.read(r, 64).decode()
    os.close(r)
    os.waitpid(pid, 0)
    return res


@S.case
def per_sandbox_uids(env):
    """Each gVisor sandbox's user is its own unprivileged host uid (from
    the slot's range, as under the ns backend): not 1000, which may be a
    real account of the host, and not another sandbox's; it owns the
    workspace and the session socket, which a host uid 1000 and the other
    sandbox's uid cannot use."""
    d, run = start(env)
    uids = {}
    for c in ("u1", "u2"):
        _, o = run.json("create", "--chat", c)
        run.chats.append(c)
        uids[c] = (o["host_uid"], o["host_gid"], o["workspace"])
    u1, u2 = uids["u1"][0], uids["u2"][0]
    check(u1 != u2, "two sandboxes share uid %d" % u1)
    for c, (u, g, ws) in uids.items():
        check(u >= 65536 and g >= 65536, "%s: low uid %d:%d" % (c, u, g))
        o = run.exec(c, "id -u; id -g; id -un; echo $HOME; python3 -c "
                     "'import os; print(os.stat(\"/workspace\").st_uid, "
                     "os.stat(\"/home/user\").st_uid)'; touch f")
        check_eq(o["stdout"], "%d\n%d\nuser\n/home/user\n%d %d\n" %
                 (u, g, u, u), "%s: identity inside" % c)
        check_eq((os.stat(ws).st_uid, os.stat(os.path.join(ws, "f")).st_uid),
                 (u, u), "%s: workspace owner on the host" % c)
        sock = d.session_socket(c)
        check_eq(os.stat(sock).st_uid, u, "%s: socket owner" % c)
        check_eq(connect_as(sock, u, g), "connected", "%s: own uid" % c)
        check(connect_as(sock, 1000, 1000) != "connected",
              "%s: host uid 1000 reaches the socket" % c)
    check(connect_as(d.session_socket("u2"), u1, uids["u1"][1]) !=
          "connected", "u1's uid reaches u2's socket")
    # the ns backend's ranges come from the same slots: no overlap
    _, o = run.json("create", "--chat", "n1", "--backend", "ns")
    run.chats.append("n1")
    lo, hi = o["uid_base"], o["uid_base"] + o["uid_count"]
    check(not any(lo <= u < hi for u, _, _ in uids.values()),
          "gvisor uid in the ns range %d-%d: %r" % (lo, hi, uids))


@S.case
def init_log_is_bounded(env):
    d, run = start(env)
    run.create("lg")
    log_is_bounded(env, run, "lg", timeout=400)


@S.case
def timeout_kills_the_tree(env):
    d, run = start(env)
    run.create("p1")
    background_survives(run, "p1")
    timeout_kills_tree(run, "p1", 20)
    o = run.exec("p1", "head -c 200000 /dev/zero | tr '\\0' a",
                 "--output-cap", "1000")
    check(len(o["stdout"]) == 1000 and o["stdout_truncated"] is True,
          "cap: %r", {k: v for k, v in o.items() if k != "stdout"})
    o = run.exec("p1", "exit 3")
    check_eq(o["exit_code"], 3, "exit status")
    # the command cannot leave its group, and has no capabilities
    o = run.exec("p1", "for g in /sys/fs/cgroup/memory /sys/fs/cgroup/"
                 "memory/sluice; do echo $$ > $g/cgroup.procs && "
                 "echo left $g; done 2>/dev/null; grep CapBnd "
                 "/proc/self/status; ulimit -c")
    check_eq(o["stdout"], "CapBnd:\t0000000000000000\n0\n", "group, caps")


@S.case
def streams_to_files(env):
    """write/read pass sluice-run's own fds; a regular file among them
    must keep its offset (gVisor would write it from 0).  With cgroups
    off in sluice-run's configuration runsc leaves the host's alone."""
    d, run = start(env, cgroups=False)
    r = run.create("f1")
    check(b"cgroups are off" in r.stdout, "note: %r", r.stdout)
    check(not host_cgroups(run, "f1"), "host cgroups made: %r" %
          host_cgroups(run, "f1"))
    r = run("write", "--chat", "f1", "f.txt", stdin=b"data line\n")
    check_eq(r.returncode, 0, "write")
    out = env.path("out.txt")
    with open(out, "w") as f:
        f.write("first\n")
    with open(out, "a") as f:
        r = subprocess.run(run.argv("read", "--chat", "f1", "f.txt"),
                           stdout=f, stderr=f, timeout=60)
    check_eq(r.returncode, 0, "read")
    check_eq(open(out).read(), "first\ndata line\n", "appended output")


@S.case
def files_ls_cgroup_presets(env):
    """write, read and ls as under the ns backend (ls does not use ls -l,
    whose statx(AT_NO_AUTOMOUNT) runsc 20221219 refuses); no host fd,
    no host environment, no controlling terminal; and the "cgroups" presets "v1" and "v2" work
    like auto (runsc picks the host's hierarchy itself)."""
    d, run = start(env, cgroups="v1")
    _, o = run.json("create", "--chat", "l1")
    run.chats.append("l1")
    check(o.get("cgroup") not in ("v1", "v2"), "record cgroup: %r" % o)
    files_fds_env(env, run, "l1", uid=o["host_uid"])
    with open(run.conf) as f:
        conf = json.load(f)
    conf["cgroups"] = "v2"
    with open(run.conf, "w") as f:
        json.dump(conf, f)
    _, o = run.json("create", "--chat", "l2")
    run.chats.append("l2")
    check(o.get("cgroup") not in ("v1", "v2"), "record cgroup: %r" % o)
    o = run.exec("l2", "echo ok")
    check_eq(o["stdout"], "ok\n", "exec with cgroups v2")
    no_tty(run, "l2")
    for c in ("l1", "l2"):
        r = run("destroy", "--chat", c)
        check_eq(r.returncode, 0, "destroy %s: %r" % (c, r.stderr))
        check(not host_cgroups(run, c), "host cgroups left: %r" %
              host_cgroups(run, c))
    run.chats = []


@S.case
def gc_suspend_and_destroy(env):
    d, run = start(env)
    run.create("g1", "--tenant", "t1", "--user", "u1")
    root = os.path.join(run.state, "g1", "runsc")
    ids = runsc_list(root)
    # the id carries a hash of the state directory: runsc ids are
    # host-wide, and two state directories may hold the same chat name
    check(len(ids) == 1 and re.match(r"^sluice-g1\.[0-9a-f]{8}$", ids[0]),
          "runsc list: %r" % ids)
    run.exec("g1", "sleep 300 >/dev/null 2>&1 &")
    r, o = run.json("gc", "--idle-after", "0", "--remove-after", "3600")
    check_eq(o["suspended"], ["g1"], "suspended")
    st = subprocess.run([runsc(), "--root", root, "state", ids[0]],
                        stdout=subprocess.PIPE, timeout=30)
    check_eq(json.loads(st.stdout)["status"], "paused", "runsc state")
    o = run.exec("g1", "pgrep -c sleep")
    check_eq(o["stdout"], "1\n", "resumed with its background job")
    _, lst = run.json("list")
    pid = lst["sandboxes"][0]["init_pid"]
    check(os.path.exists("/proc/%d" % pid), "sandbox pid %d" % pid)
    check(runsc_procs(root), "no runsc process found for %s" % root)
    with open(os.path.join(run.state, "g1", "record.json")) as f:
        cg = json.load(f).get("cgroup")
    log("g1's host cgroup: %r" % cg)
    if cg:
        # the name host_cgroups looks for is the one runsc was given
        check(host_cgroups(run, "g1") and all(
            p.endswith(cg) for p in host_cgroups(run, "g1")),
            "host cgroups of %s: %r" % (cg, host_cgroups(run, "g1")))
    mem = [p for p in host_cgroups(run, "g1") if "/memory/" in p]
    if mem:
        with open(os.path.join(mem[0], "memory.limit_in_bytes")) as f:
            check_eq(int(f.read()), 2048 << 20, "memory limit")
    r = run("destroy", "--chat", "g1")
    check_eq(r.returncode, 0, "destroy: %r" % r.stderr)
    run.chats = []
    wait_until(lambda: not runsc_procs(root), 10, what="runsc processes "
               "to end")
    check(not os.path.exists("/proc/%d" % pid) or
          open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[0]
          == "Z", "sandbox process %d still runs" % pid)
    check(not os.path.exists(root) or not runsc_list(root),
          "runsc container left")
    check(not os.path.exists(os.path.join(run.state, "g1")), "state dir")
    check(not os.path.exists(d.session_socket("g1")), "socket left")
    check(run.state not in open("/proc/self/mountinfo").read(),
          "mounts left on the host")
    check(not host_cgroups(run, "g1"), "host cgroups left: %r" %
          host_cgroups(run, "g1"))
    check_eq(api_unix(run.ctl, "GET", "/v1/sessions/g1").status, 404,
             "broker session after destroy")


@S.case
def missing_runsc_is_named(env):
    # SLUICE_RUNSC hides the installed runsc; without one installed the
    # whole file is a skip, so that a machine without runsc says so
    preflight()
    os.makedirs(env.path("run"))
    d = type("D", (), {"config": {"runtime_dir": env.path("run")}})()
    run = Runner(env, d, backend="gvisor")
    saved = os.environ.get("SLUICE_RUNSC")
    os.environ["SLUICE_RUNSC"] = env.path("no-such-runsc")
    try:
        r = run("create", "--chat", "m1")
    finally:
        if saved is None:
            del os.environ["SLUICE_RUNSC"]
        else:
            os.environ["SLUICE_RUNSC"] = saved
    check(r.returncode == EX_BACKEND and b"runsc not found: install the "
          b"Debian package runsc" in r.stderr, "missing runsc: rc %d %r" %
          (r.returncode, r.stderr))
    check(not os.path.exists(os.path.join(run.state, "m1")), "state left")


if __name__ == "__main__":
    S.main()
