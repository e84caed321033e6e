"""sluice-execd under test, and what its sandboxes leave on the machine.

Every scenario that starts sluice-execd (t_execd.py, the SDK suites
through sdklib.py, the browser console) starts it through Execd here, so
that every exit path takes its sandboxes down, whether or not the daemon
is still alive at the end:

1. stop() (Env.close calls it first, while sluiced still answers):
   a daemon found dead is started again on the same configuration and
   state directory (it adopts the sandboxes whose records are there) and
   every sandbox is DELETEd through its API, then the daemon is stopped;
2. check() (the env's last closer): whatever is still there is looked
   for: processes of the test (a marker in their environment, which
   every process the daemon forks carries; a cwd or root under the
   test's directory; membership of a cgroup named for one of its
   sandboxes), mounts under the test's directory, loop devices backed by
   files there, cgroups named for its sandboxes (sluice-run/<id>.<hash>,
   sluice-gvisor-<id>.<hash>: the hash of the sandbox's directory, so
   another run's groups are never taken for ours).  When the API could
   not be used (the restart failed), the last resort takes them down:
   the holders the records name (their start time checked), the marked
   processes, the mounts, loop devices and groups.  Then the check is
   made again and the case FAILS (harness.Leak) when anything is left,
   when the daemon deleted its sandboxes yet something was left (a bug
   of the daemon, reaped so that it does not pile up), or when the
   daemon died during the case without the case killing it (kill()).

Run as a program it does step 2 for a directory whose processes carry
the marker (tests/scenario/t_demo.sh):
    execdlib.py check --root DIR [--state STATE_DIR]...
exits 1 (after reaping) when something was left."""

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Fail, Leak, log, api_unix, BUILDDIR,  # noqa: E402
                     VERBOSE)

EXECD = os.path.join(BUILDDIR, "sandbox-glue", "executor", "execd",
                     "sluice-execd")
# the environment variable every process of a test's executor carries:
# forked children keep the environment, and /proc/PID/environ shows it
MARK = "SLUICE_TEST_OWNER"
CG = "/sys/fs/cgroup"


def fnv1a32(s):
    """sbx_dir_hash (sandbox-glue/executor/backend/sbx_util.c)."""
    h = 2166136261
    for c in s.encode():
        h = ((h ^ c) * 16777619) & 0xffffffff
    return h


def _under(path, root):
    return path == root or path.startswith(root.rstrip("/") + "/")


def _read(path, mode="r"):
    try:
        with open(path, mode) as f:
            return f.read()
    except OSError:
        return None


def proc_start(pid):
    """Field 22 of /proc/PID/stat (0 when gone or a zombie), as
    sbx_proc_start."""
    s = _read("/proc/%d/stat" % pid)
    if not s or ")" not in s:
        return 0
    f = s.rsplit(")", 1)[1].split()
    if len(f) < 20 or f[0] == "Z":
        return 0
    return int(f[19])


# ---------------------------------------------------------------------------
# what is there

def _group_parents():
    """Directories that hold sandboxes' groups: sluice-run/ in every
    hierarchy (v1 controllers, the unified one, a v2 root) and the tops
    where the gvisor backend's sluice-gvisor-* groups go."""
    runs, tops = [], [CG]
    try:
        subs = sorted(os.listdir(CG))
    except OSError:
        subs = []
    for s in subs:
        p = os.path.join(CG, s)
        if os.path.isdir(p) and not os.path.islink(p):
            tops.append(p)
    for t in tops:
        if os.path.isdir(os.path.join(t, "sluice-run")):
            runs.append(os.path.join(t, "sluice-run"))
    return runs, tops


def cgroups_of(state_dirs):
    """The groups named for a sandbox of one of these state directories:
    <id>.<hash> where hash is sbx_dir_hash("<state_dir>/<id>")."""
    def ours(name):
        m = re.match(r"^([A-Za-z0-9._-]{1,64})\.([0-9a-f]{8})$", name)
        return m is not None and any(
            fnv1a32("%s/%s" % (sd, m.group(1))) == int(m.group(2), 16)
            for sd in state_dirs)
    out = []
    runs, tops = _group_parents()
    for r in runs:
        for n in sorted(os.listdir(r)):
            if ours(n) and os.path.isdir(os.path.join(r, n)):
                out.append(os.path.join(r, n))
    for t in tops:
        for n in sorted(os.listdir(t)):
            if n.startswith("sluice-gvisor-") and ours(n[14:]) and \
                    os.path.isdir(os.path.join(t, n)):
                out.append(os.path.join(t, n))
    return out


def _cg_names(groups):
    return {"/" + os.path.basename(g) for g in groups}


def procs_of(root, groups, exclude=(), starts=None):
    """{pid: why} of processes that belong to the test: the marker for
    root in their environment, a cwd or root under it, or membership of
    one of its groups.  starts, a dict, gets each one's start time as
    read before the checks (what a kill checks against)."""
    starts = {} if starts is None else starts
    mark = ("%s=%s" % (MARK, root)).encode()
    names = _cg_names(groups)
    me = os.getpid()
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == me or int(d) in exclude:
            continue
        pid = int(d)
        start = proc_start(pid)
        if start == 0:
            continue            # gone, or a zombie: holds nothing
        why = []
        env = _read("/proc/%d/environ" % pid, "rb")
        if env and mark in env.split(b"\0"):
            why.append("environ")
        for ln in ("cwd", "root"):
            try:
                t = os.readlink("/proc/%d/%s" % (pid, ln))
            except OSError:
                continue
            if _under(t, root):
                why.append("%s %s" % (ln, t))
        cg = _read("/proc/%d/cgroup" % pid) or ""
        for line in cg.splitlines():
            path = line.split(":", 2)[-1]
            if any(("/" + p) in names for p in path.split("/") if p):
                why.append("cgroup %s" % path)
                break
        if why:
            cmd = (_read("/proc/%d/cmdline" % pid, "rb") or b"")
            out[pid] = "%s (%s)" % (cmd.replace(b"\0", b" ").decode(
                "utf-8", "replace").strip()[:120], ", ".join(why))
            starts[pid] = start
    return out


def _unescape(s):
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), s)


def mounts_of(root):
    """Mount points at or under root (this mount namespace's view)."""
    out = []
    for line in (_read("/proc/self/mountinfo") or "").splitlines():
        f = line.split()
        if len(f) > 4 and _under(_unescape(f[4]), root):
            out.append(_unescape(f[4]))
    return out


def loops_of(root):
    """{"/dev/loopN": backing file} for devices backed by files under
    root."""
    out = {}
    try:
        devs = sorted(os.listdir("/sys/block"))
    except OSError:
        devs = []
    for d in devs:
        b = _read("/sys/block/%s/loop/backing_file" % d)
        if b is None:
            continue
        b = b.rstrip("\n")
        if b.endswith(" (deleted)"):
            b = b[:-10]
        if _under(b, root):
            out["/dev/" + d] = b
    return out


def leftovers(root, state_dirs, exclude=()):
    """A list of lines, one per thing of the test still on the machine."""
    groups = cgroups_of(state_dirs)
    left = ["process %d: %s" % kv for kv in
            sorted(procs_of(root, groups, exclude).items())]
    left += ["mount %s" % m for m in mounts_of(root)]
    left += ["loop device %s (%s)" % kv for kv in sorted(
        loops_of(root).items())]
    left += ["cgroup %s" % g for g in groups]
    return left


# ---------------------------------------------------------------------------
# the last resort

def _records(state_dirs):
    for sd in state_dirs:
        try:
            ids = sorted(os.listdir(sd))
        except OSError:
            continue
        for i in ids:
            d = os.path.join(sd, i)
            try:
                with open(os.path.join(d, "record.json")) as f:
                    r = json.load(f)
            except (OSError, ValueError):
                r = {}
            yield d, r


def _kill_checked(pid, start, why):
    """SIGKILL pid if it still is the process of that start time."""
    if pid > 0 and start and proc_start(pid) == start:
        log("last resort: SIGKILL %d (%s)" % (pid, why))
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _detach_checked(dev, root):
    import fcntl
    try:
        fd = os.open(dev, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        b = _read("/sys/block/%s/loop/backing_file" % os.path.basename(dev))
        b = (b or "").rstrip("\n")
        if b.endswith(" (deleted)"):
            b = b[:-10]
        if _under(b, root):
            log("last resort: detaching %s (%s)" % (dev, b))
            try:
                fcntl.ioctl(fd, 0x4C01)         # LOOP_CLR_FD
            except OSError:
                pass
    finally:
        os.close(fd)


def _thaw(groups):
    for g in groups:
        for sub, _, _ in os.walk(g):
            for f, v in (("freezer.state", "THAWED"), ("cgroup.freeze", "0")):
                try:
                    with open(os.path.join(sub, f), "w") as fh:
                        fh.write(v)
                except OSError:
                    pass


def reap(root, state_dirs, exclude=()):
    """Take down what the test's sandboxes left, without their daemon:
    only the processes the records name (start time checked) or that are
    provably the test's (procs_of), only mounts under root, only loop
    devices backed there, only groups named for its sandboxes."""
    groups = cgroups_of(state_dirs)
    _thaw(groups)
    for d, r in _records(state_dirs):
        _kill_checked(int(r.get("init_pid") or 0),
                      int(r.get("init_start") or 0), "holder of %s" % d)
        lp = (_read(os.path.join(d, "log.pid")) or "").split()
        if len(lp) == 2 and lp[0].isdigit() and lp[1].isdigit():
            _kill_checked(int(lp[0]), int(lp[1]), "log reader of %s" % d)
    for _ in range(3):
        starts = {}
        found = procs_of(root, groups, exclude, starts)
        if not found:
            break
        for pid, why in sorted(found.items()):
            _kill_checked(pid, starts[pid], why)
        for _ in range(100):
            if not procs_of(root, groups, exclude):
                break
            time.sleep(0.05)
    for g in groups:
        for f in ("cgroup.kill",):
            try:
                with open(os.path.join(g, f), "w") as fh:
                    fh.write("1")
            except OSError:
                pass
    for m in sorted(mounts_of(root), key=len, reverse=True):
        r = subprocess.run(["umount", m], capture_output=True, text=True,
                           timeout=30)
        if r.returncode != 0:
            log("last resort: umount %s: %s; detaching" % (
                m, r.stderr.strip()))
            subprocess.run(["umount", "-l", m], capture_output=True,
                           timeout=30)
        else:
            log("last resort: unmounted %s" % m)
    # the workspaces' devices clear themselves once their last mount is
    # gone (autoclear), which may take a moment; one still bound is
    # detached through an fd opened first, so that the device checked is
    # the one detached (a device freed meanwhile may be another's now)
    for dev in loops_of(root):
        _detach_checked(dev, root)
    for _ in range(150):
        if not loops_of(root):
            break
        time.sleep(0.1)
    for _ in range(50):
        groups = cgroups_of(state_dirs)
        if not groups:
            break
        for g in groups:
            for sub, _, _ in sorted(os.walk(g), key=lambda w: -len(w[0])):
                try:
                    os.rmdir(sub)
                except OSError:
                    pass
        time.sleep(0.1)


# ---------------------------------------------------------------------------
# the daemon

def key(tenant, sid):
    """The host's name of sandbox sid of tenant (its state dir, sluiced's
    session, its archive): sid without a tenant, else its first 55
    characters, "." and 8 hex digits of SHA-256(tenant NUL sid)."""
    if not tenant:
        return sid
    return "%s.%s" % (sid[:55], hashlib.sha256(
        tenant.encode() + b"\0" + sid.encode()).hexdigest()[:8])


class Execd:
    """One sluice-execd of a case.  conf is its configuration (written
    to conf_path at each start); its audit log goes under the env's
    directory unless conf names one."""

    skip_chain = True               # its audit log is checked by its tests

    def __init__(self, env, conf, conf_path=None, name="sluice-execd",
                 verbose=True):
        self.env = env
        self.conf = conf
        self.conf.setdefault("log", {"path": env.path("xaudit",
                                                      "execd.jsonl")})
        self.conf_path = conf_path or env.path("execd.json")
        self.name = name
        self.verbose = verbose
        self.proc = None
        self.lines = []
        self.lock = threading.Lock()
        self.ready = threading.Event()
        self.killed = False         # the case killed it on purpose
        self.api_clean = False      # stop() deleted every sandbox
        self.problems = []
        self._stopped = self._checked = False
        # stopped first (sluiced still answers the deletes), checked last
        env.daemons.insert(0, self)
        env.closers.insert(0, self.check)

    @property
    def sock(self):
        return os.path.join(self.conf["runtime_dir"], "exec.sock")

    @property
    def state_dir(self):
        return self.conf["state_dir"]

    def write(self):
        with open(self.conf_path, "w") as f:
            json.dump(self.conf, f, indent=1)

    def start(self, ready_timeout=15.0):
        self.write()
        self.ready.clear()
        self._stopped = self._checked = False
        argv = [EXECD, "-c", self.conf_path] + (["-v"] if self.verbose
                                                else [])
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=dict(os.environ, **{MARK: self.env.dir}))
        threading.Thread(target=self._drain, args=(self.proc,),
                         daemon=True).start()
        deadline = time.monotonic() + ready_timeout
        while not self.ready.wait(0.05):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                time.sleep(0.1)
                raise Fail("%s not ready (exit %s):\n%s" % (
                    self.name, self.proc.poll(), self.stderr()))
        return self

    def _drain(self, proc):
        f = proc.stderr
        for _ in range(10 ** 7):
            line = f.readline()
            if not line:
                return
            t = line.decode("utf-8", "replace").rstrip("\n")
            with self.lock:
                if len(self.lines) < 50000:
                    self.lines.append(t)
            if VERBOSE:
                log("[%s] %s" % (self.name, t))
            if "ready:" in t:
                self.ready.set()

    def stderr(self, n=80):
        with self.lock:
            return "\n".join(self.lines[-n:])

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        """SIGKILL, as a crash would: the sandboxes stay (the case says
        so: teardown does not count it as a crash)."""
        self.killed = True
        if self.alive():
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait(10)

    def halt(self, timeout=20.0):
        """SIGTERM and wait (SIGKILL past timeout); the exit status."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                log("%s did not drain in %.0fs: SIGKILL" % (self.name,
                                                            timeout))
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode

    def sandboxes(self):
        """Directories under the state dir: a record (adopted on start)
        or what a killed create left."""
        try:
            # ".archive" and the like are the daemon's: no sandbox id
            # starts with a dot
            return sorted(n for n in os.listdir(self.state_dir)
                          if not n.startswith("."))
        except OSError:
            return []

    def delete_all(self, budget=90.0):
        """DELETE every sandbox the daemon lists (as root); one busy
        (creating, deleting) is asked again.  True when none is left."""
        deadline = time.monotonic() + budget
        for _ in range(200):
            r = api_unix(self.sock, "GET", "/v1/sandboxes", timeout=30)
            ids = [(b["id"], b.get("tenant", "")) for b in
                   (r.json or {}).get("sandboxes", [])]
            if r.status == 200 and not ids:
                return True
            if r.status != 200 or time.monotonic() > deadline:
                log("%s: listing sandboxes: %s" % (self.name, r.status))
                return False
            for i, t in ids:
                log("%s: sandbox %s left by the case: deleting" % (
                    self.name, i))
                # discard: a case's workspace is not kept as an archive;
                # ids are per tenant: the tenant named
                d = api_unix(self.sock, "DELETE",
                             "/v1/sandboxes/%s?archive=discard&tenant=%s"
                             % (i, t), timeout=60)
                if d.status not in (200, 404, 409):
                    log("%s: DELETE %s: %s %r" % (self.name, i, d.status,
                                                  d.body[:300]))
            time.sleep(0.2)
        return False

    def stop(self, timeout=None):
        """Teardown, step 1: every sandbox deleted through the API (the
        daemon restarted first when it is dead), then the daemon
        stopped.  Idempotent."""
        if self._stopped:
            return self.proc.returncode if self.proc else None
        self._stopped = True
        self.api_clean = False
        if self.proc is not None and not self.alive():
            rc = self.proc.returncode
            if rc != 0 and not self.killed:
                self.problems.append("%s died during the case (exit %s)"
                                     % (self.name, rc))
                log("%s died during the case (exit %s):\n%s" % (
                    self.name, rc, self.stderr()))
        try:
            if not self.alive() and self.sandboxes():
                log("%s is not running and %s holds %s: starting it again "
                    "to delete them" % (self.name, self.state_dir,
                                        ", ".join(self.sandboxes())))
                try:
                    self.start()
                except Fail as e:
                    log("restarting %s: %s" % (self.name, e))
                    if not self.killed:
                        self.problems.append("%s did not start again to "
                                             "delete its sandboxes"
                                             % self.name)
                    self._stopped = True
            if self.alive():
                self.api_clean = self.delete_all()
            elif not self.sandboxes():
                self.api_clean = True
        except (OSError, ValueError, KeyError, TypeError, Fail) as e:
            log("%s: deleting the sandboxes: %r" % (self.name, e))
        finally:
            self._stopped = True
            rc = self.halt()
            if rc not in (0, None):
                log("%s exited %s:\n%s" % (self.name, rc, self.stderr()))
        return rc

    def _exclude(self):
        """Live processes of the env's other daemons (their own teardown
        stops them) and the case's helpers."""
        return {d.proc.pid for d in self.env.daemons
                if d is not self and getattr(d, "proc", None) is not None
                and d.proc.poll() is None}

    def check(self):
        """Teardown, step 2: nothing of the case is left (after the last
        resort where the API could not be used); harness.Leak if
        something is.  Idempotent."""
        if self._checked:
            return
        self._checked = True
        if not self._stopped:
            self.stop()
        root, sds = self.env.dir, [self.state_dir]
        left = leftovers(root, sds, self._exclude())
        problems = list(self.problems)
        if left:
            log("%s: LEFT BEHIND after %s:\n  %s" % (
                self.env.name, "its sandboxes were deleted" if
                self.api_clean else "the daemon could not delete them",
                "\n  ".join(left)))
            if self.api_clean:
                problems.append("left behind though %s deleted every "
                                "sandbox: %s" % (self.name, "; ".join(left)))
            reap(root, sds, self._exclude())
            still = leftovers(root, sds, self._exclude())
            if still:
                log("%s: STILL LEFT after the last resort:\n  %s" % (
                    self.env.name, "\n  ".join(still)))
                problems.append("left on the machine: %s" % "; ".join(still))
        if problems:
            raise Leak("; ".join(problems))


def main(argv):
    """execdlib.py check --root DIR [--state STATE_DIR]..."""
    import argparse
    p = argparse.ArgumentParser(prog="execdlib.py")
    p.add_argument("what", choices=["check"])
    p.add_argument("--root", required=True)
    p.add_argument("--state", action="append", default=[])
    a = p.parse_args(argv)
    root = os.path.abspath(a.root)
    sds = [os.path.abspath(s) for s in a.state]
    left = leftovers(root, sds, {os.getppid()})
    if not left:
        print("nothing left under %s" % root)
        return 0
    print("LEFT BEHIND:\n  %s" % "\n  ".join(left))
    reap(root, sds, {os.getppid()})
    still = leftovers(root, sds, {os.getppid()})
    if still:
        print("STILL LEFT after the last resort:\n  %s" % "\n  ".join(still))
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
