#!/usr/bin/env python3
"""sluice-execd's storage: what sandboxes and archives may take of the
host's disk, and how an archive is restored (issue 20, points 4, 5, 10),
with the real sluiced and real ns sandboxes, ages of seconds:

- restore_helper_exec: the restore's child is not a fork of the daemon
  that parses the archive with the daemon's memory: it execs
  `sluice-execd --restore-helper` (its cmdline says so) as the
  sandbox's host uid, and the SHA-256 digest of the daemon's bearer
  token is nowhere in its memory; the restore still works;

- disk_admission: the state dir on a small tmpfs of the suite's own
  (mounted in the suite's own mount namespace, unmounted by the case's
  teardown, gone with the namespace on any exit): a create is admitted
  while its disk_mb, the workspaces' bytes not yet allocated and
  quotas.disk_reserve_mb fit in the free space (else 503
  backend_unavailable, reason disk_full, with the figures); the image
  is allocated (fallocate; no hole punched by mke2fs); GET /v1/health
  and /v1/metrics show the headroom; with the host file system full (a
  file of the test filled it), a sandbox filling its workspace to its
  quota and another one writing both work, their ext4s stay read-write.

- archive_limits: an archive is removed once restored; a tenant's
  archives held to lifecycle.archive_max_count_per_tenant and
  archive_max_bytes_per_tenant (a reload), the oldest evicted first and
  audited (archive_evict); orphaned files (a tar without its committed
  JSON, ids with dots, temporary files) swept once a minute old, young
  ones and committed archives (new and old naming) kept; archives
  expire after lifecycle.archive_max_age; health and metrics (per
  tenant) show them.

Skips (77) without root or user namespaces."""

import ctypes
import hashlib
import json
import os
import subprocess
import socket  # noqa: F401
import threading
import time

import sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, Fail, check, check_eq, log,  # noqa: E402
                     wait_until)
import t_execd as X  # noqa: E402
import t_execd_life as L  # noqa: E402

S = Suite("t_execd_store", time_limit=600)

HOST_UID0 = 1200000000 + 1000   # uid_base + slot 0's SBX_UID


def _uid_of(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for ln in f:
                if ln.startswith("Uid:"):
                    return int(ln.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


MEM_SCAN_MAX = 1 << 30
MEM_SCAN_STEP = 16 << 20


def _mem_has(pid, needle):
    """Whether needle is in a readable mapping of pid (None: unreadable,
    the process gone)."""
    try:
        with open("/proc/%d/maps" % pid) as f:
            maps = f.read().splitlines()
        mem = os.open("/proc/%d/mem" % pid, os.O_RDONLY)
    except OSError:
        return None
    try:
        for ln in maps:
            f = ln.split()
            if len(f) < 2 or not f[1].startswith("r"):
                continue
            if len(f) >= 6 and f[5] in ("[vvar]", "[vsyscall]"):
                continue
            lo, hi = (int(v, 16) for v in f[0].split("-"))
            # a sanitizer build maps terabytes of shadow it never
            # touches: past 1 GiB a mapping is not the daemon's heap
            if hi - lo > MEM_SCAN_MAX:
                continue
            # in pieces (overlapping by the needle's length), so that no
            # read needs the whole mapping in this process at once
            at = lo
            while at < hi:
                n = min(MEM_SCAN_STEP, hi - at)
                try:
                    data = os.pread(mem, n + len(needle) - 1
                                    if at + n < hi else n, at)
                except OSError:
                    break
                if needle in data:
                    return True
                at += n
        return False
    finally:
        os.close(mem)


class Watch:
    """Processes running as uid, seen by a thread that scans /proc: for
    each, its cmdline and whether needle is in its memory (looked at
    once its cmdline names the restore helper)."""

    def __init__(self, uid, needle):
        self.uid, self.needle = uid, needle
        self.seen = {}
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stop.is_set():
            for d in os.listdir("/proc"):
                if not d.isdigit() or _uid_of(int(d)) != self.uid:
                    continue
                pid = int(d)
                try:
                    with open("/proc/%d/cmdline" % pid, "rb") as f:
                        cmd = f.read().split(b"\0")
                except OSError:
                    continue
                s = self.seen.setdefault(pid, {"cmds": set(), "mem": None,
                                               "mem_fork": None})
                line = b" ".join(cmd).strip()
                s["cmds"].add(line)
                if b"--restore-helper" in cmd and s["mem"] is None:
                    s["mem"] = _mem_has(pid, self.needle)
                elif b"sluice-execd" in line and s["mem_fork"] is None:
                    # a fork of the daemon (before its exec, or the old
                    # restore child): logged, not judged
                    s["mem_fork"] = _mem_has(pid, self.needle)
            time.sleep(0.002)

    def close(self):
        self.stop.set()
        self.t.join(5)


@S.case
def restore_helper_exec(env):
    X.preflight()
    crt, key = env.cert(("execd.test",))
    tokf = env.path("acme.tok")
    tok = "tok-acme-%s" % os.urandom(12).hex()
    with open(tokf, "w") as f:
        f.write(tok + "\n")
    os.chmod(tokf, 0o600)
    digest = hashlib.sha256(tok.encode()).digest()
    port = X.free_port()
    d, ctl, x = L.life_start(env, lifecycle={"idle_after": 0,
                                             "remove_after": 0},
                             limits={"inodes": 131072},
                             tcp={"listen": "127.0.0.1:%d" % port,
                                  "tls_cert": crt, "tls_key": key,
                                  "tokens": [{"name": "acme-app",
                                              "file": tokf, "role": "app",
                                              "tenant": "acme"}]})
    check(_mem_has(x.proc.pid, digest), "the daemon holds the token's "
          "digest (what the restore must not)")
    # an archive of many entries: its restore takes a while to watch
    n = 60000
    ms = [L.member("d%03d/f%05d" % (i // 1000, i), data=b"")
          for i in range(n)]
    ms.append(L.member("ok.txt", data=b"fine\n"))
    L.place(x, "rh1", L.tar_bytes(ms))
    w = Watch(HOST_UID0, digest)
    env.closers.append(w.close)
    b = X.create(x, "rh1")
    w.close()
    check_eq(b["restored_from"]["files"], n + 1, "restored: %r" %
             {k: v for k, v in b["restored_from"].items()
              if k != "skipped"})
    o = X.ex(x, "rh1", {"shell": "cat ok.txt; stat -c %u d059/f59999"})
    check_eq(o["stdout"], "fine\n1000\n", "restored content: %r" % o)
    log("processes of the sandbox's uid during the restore: %r" %
        {p: (sorted(s["cmds"]), s["mem"], s["mem_fork"])
         for p, s in w.seen.items()})
    helpers = [s for s in w.seen.values()
               if any(b"--restore-helper" in c for c in s["cmds"])]
    check(helpers, "the restore ran in an exec'd helper (cmdlines seen: "
          "%r)" % [sorted(s["cmds"]) for s in w.seen.values()])
    check(all(s["mem"] is False for s in helpers), "the token's digest "
          "is not in the helper's memory: %r" % [s["mem"] for s in
                                                  helpers])


MiB = 1 << 20


def own_mount_ns():
    """This process in a mount namespace of its own whose mounts do not
    propagate to the host's (before any thread: unshare refuses
    CLONE_NEWNS in a threaded process): what the cases mount goes with
    it whatever way the suite ends."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(0x00020000) != 0:          # CLONE_NEWNS
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS)")
    subprocess.run(["mount", "--make-rprivate", "/"], check=True)


def small_fs(env, name, mib):
    """A tmpfs of mib MiB at env.path(name), unmounted at teardown."""
    p = env.path(name)
    os.makedirs(p, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%dm,mode=0711" %
                    mib, "tmpfs", p], check=True)

    def umount():
        # after the daemon's teardown (closers run last first): its
        # sandboxes' mounts of it are gone by then
        if any(ln.split()[4] == p for ln in open("/proc/self/mountinfo")):
            r = subprocess.run(["umount", p], capture_output=True)
            if r.returncode != 0:
                subprocess.run(["umount", "-l", p], capture_output=True)
    env.closers.insert(0, umount)
    return p


def allocated(path):
    st = os.stat(path)
    return st.st_blocks * 512, st.st_size


@S.case
def disk_admission(env):
    X.preflight()
    root = small_fs(env, "small", 128)
    problems = []

    def soft(cond, what):
        # every check is made (the old code fails more than one)
        if not cond:
            log("PROBLEM: %s" % what)
            problems.append(what)
    d, ctl, x = L.life_start(env, state_dir=os.path.join(root, "state"),
                             lifecycle={"idle_after": 0, "remove_after": 0},
                             quotas={"disk_reserve_mb": 16})
    lim = {"disk_mb": 40, "inodes": 4096}
    X.create(x, "w1", limits=lim)
    X.create(x, "w2", limits=lim)
    for sid in ("w1", "w2"):
        a, size = allocated(os.path.join(x.state_dir, L.K(sid),
                                         "workspace.img"))
        soft(a >= size, "%s's image allocated: %d of %d bytes" % (sid, a,
                                                                  size))
    st = os.statvfs(root)
    log("free after two creates: %d MiB" % (st.f_bavail * st.f_frsize
                                            // MiB))
    # a third one does not fit with the reserve: refused, with figures
    r = x.app("POST", "/v1/sandboxes", {"id": "w3", "tenant": "acme",
                                        "user": "alice", "limits": lim},
              timeout=120)
    log("third create: %s %s" % (r.status, r.body[:600]))
    e = (r.json or {}).get("error") or {}
    soft(r.status == 503 and e.get("code") == "backend_unavailable" and
         e.get("reason") == "disk_full" and e.get("needed_bytes") ==
         40 * MiB and e.get("reserve_bytes") == 16 * MiB and
         isinstance(e.get("free_bytes"), int),
         "third create refused 503 disk_full with figures: %r" % r)
    soft(not os.path.exists(os.path.join(x.state_dir, L.K("w3"))) or
         r.status == 201, "nothing left of the refused create")
    # health and metrics show the headroom
    h = X.root_call(x.sock, "GET", "/v1/health").json or {}
    sto = h.get("storage") or {}
    log("health storage: %s" % json.dumps(sto))
    soft(sto.get("workspaces_bytes") == (80 * MiB if r.status != 201
                                         else 120 * MiB) and
         sto.get("reserve_bytes") == 16 * MiB and
         isinstance(sto.get("free_bytes"), int) and
         "headroom_bytes" in sto and "archives_bytes" in sto,
         "health storage: %r" % sto)
    try:
        m = X.metrics(x)
    except Fail as ex:
        m = {}
        soft(False, "metrics: %s" % ex)
    soft(m.get('sluice_execd_storage_bytes{what="free"}') ==
         sto.get("free_bytes") and
         m.get('sluice_execd_storage_bytes{what="reserve"}') == 16 * MiB,
         "metrics storage: %r" % {k: v for k, v in m.items()
                                  if "storage" in k})
    # the host file system full: a file of the test takes what is left
    filler = os.path.join(root, "filler")
    env.closers.append(lambda: os.path.exists(filler) and
                       os.unlink(filler))
    with open(filler, "wb") as f:
        try:
            for _ in range(256):
                f.write(b"\0" * MiB)
                f.flush()
        except OSError:
            pass
    st = os.statvfs(root)
    log("host file system full: %d KiB free" % (st.f_bavail * st.f_frsize
                                                  // 1024))
    # w1 fills its workspace to its quota; w2 writes and reads back
    o = x.app("POST", "/v1/sandboxes/w1/exec", {
        "shell": "dd if=/dev/urandom of=big bs=1M count=64 2>&1;"
        " sync; echo synced=$?; grep ' /workspace ' /proc/mounts"},
        timeout=120)
    log("w1 fill: %r" % o)
    soft(o.status == 200 and "No space left" in o.json["stdout"] and
         "synced=0" in o.json["stdout"] and " rw," in o.json["stdout"], "w1 fills its own quota, its ext4 "
         "stays read-write: %r" % o)
    o = x.app("POST", "/v1/sandboxes/w2/exec", {
        "shell": "head -c 30000000 /dev/urandom > f && sync && "
        "sha256sum f | cut -c1-16 && echo 3 > /proc/sys/vm/drop_caches "
        "2>/dev/null; cat f | sha256sum | cut -c1-16; echo rc=$?; "
        "grep ' /workspace ' /proc/mounts"}, timeout=120)
    log("w2 write: %r" % o)
    out = o.json["stdout"].split("\n") if o.status == 200 else []
    soft(len(out) >= 4 and out[0] == out[1] and out[2] == "rc=0" and
         " rw," in out[3], "w2 writes 30 MB while the host file system "
         "is full: %r" % o)
    os.unlink(filler)
    for sid in ("w1", "w2"):
        a, size = allocated(os.path.join(x.state_dir, L.K(sid),
                                         "workspace.img"))
        soft(a >= size, "%s's image still allocated: %d of %d" % (sid, a,
                                                                  size))
    if problems:
        raise Fail("; ".join(problems))


def tars(x):
    d = x.conf["lifecycle"]["archive_dir"]
    try:
        return sorted(n for n in os.listdir(d))
    except OSError:
        return []


def evictions(x):
    return [((r.get("detail") or {}).get("reason"), r.get("sandbox") or
             r.get("id"), (r.get("detail") or {}).get("file"))
            for r in L.audit(x) if r.get("action") == "archive_evict"]


@S.case
def archive_limits(env):
    X.preflight()
    problems = []

    def soft(cond, what):
        if not cond:
            log("PROBLEM: %s" % what)
            problems.append(what)
    d, ctl, x = L.life_start(env, lifecycle={
        "idle_after": 0, "remove_after": 0,
        "archive_max_count_per_tenant": 2, "archive_max_age": 0})
    lim = {"disk_mb": 16, "inodes": 1024}
    adir = x.conf["lifecycle"]["archive_dir"]

    def cycle(sid, data):
        X.create(x, sid, limits=lim)
        X.ex(x, sid, {"shell": "head -c %d /dev/urandom > data" % data})
        r = x.app("DELETE", "/v1/sandboxes/%s" % sid, timeout=60)
        check_eq(r.status, 200, "delete %s: %r" % (sid, r))
        time.sleep(1.1)         # archived times (seconds) apart
    # removal after a successful restore
    cycle("a1", 1000)
    X.create(x, "a1", limits=lim)
    soft(not any(n.startswith("a1.") for n in tars(x)), "a1's archive "
         "removed once restored: %r" % tars(x))
    check_eq(x.app("DELETE", "/v1/sandboxes/a1", timeout=60).status, 200,
             "delete a1")
    time.sleep(1.1)
    # count quota: the third archive of acme evicts the oldest
    cycle("a2", 200000)
    cycle("a3", 300000)
    left = tars(x)
    log("archives: %r" % left)
    soft(not any(n.startswith("a1.") for n in left) and
         any(n.startswith("a2.") for n in left) and
         any(n.startswith("a3.") for n in left),
         "count quota: the oldest (a1) evicted: %r" % left)
    soft(("quota_count", "a1", None) in [(a, b, None) for a, b, _ in
                                         evictions(x)],
         "eviction audited: %r" % evictions(x))
    try:
        m = X.metrics(x)
    except Exception as ex:    # noqa: BLE001
        m = {}
        soft(False, "metrics: %r" % ex)
    sizes = {n.split(".")[0]: os.path.getsize(os.path.join(adir, n))
             for n in left if n.endswith(".tar.zst")}
    soft(m.get('sluice_execd_archives{tenant="acme"}') == len(sizes) and
         m.get('sluice_execd_archive_bytes{tenant="acme"}') ==
         sum(sizes.values()), "metrics per tenant: %r / %r" % (
             {k: v for k, v in m.items() if "archive" in k}, sizes))
    h = X.root_call(x.sock, "GET", "/v1/health").json or {}
    soft((h.get("storage") or {}).get("archives_count") == len(sizes),
         "health archives: %r" % h.get("storage"))
    # bytes quota (a reload): the oldest goes until the rest fits
    if "a2" in sizes and "a3" in sizes:
        L.reload(x, archive_max_bytes_per_tenant=sizes["a3"] +
                 sizes["a2"] - 1)
        try:
            wait_until(lambda: not any(n.startswith("a2.")
                                       for n in tars(x)), 10,
                       what="a2 evicted by the bytes quota")
        except Fail as ex:
            soft(False, str(ex))
        soft(any(n.startswith("a3.") for n in tars(x)), "a3 kept: %r" %
             tars(x))
        soft(any(a == "quota_bytes" and b == "a2" for a, b, _ in
                 evictions(x)), "bytes eviction audited: %r" % evictions(x))
    # orphans: a tar without its committed JSON (ids with dots), a temp
    # file; old ones go, a young one and committed archives stay
    os.makedirs(adir, mode=0o700, exist_ok=True)
    old = time.time() - 3600

    def put(name, data=b"x" * 100, mtime=old):
        p = os.path.join(adir, name)
        with open(p, "wb") as f:
            f.write(data)
        os.utime(p, (mtime, mtime))
    put("o.1.0123456789ab.tar.zst")
    put("o.2.tar.zst")
    put("o.3.tar.zst.tmp")
    put("o.4.json.tmp")
    put("y.5.0123456789ab.tar.zst", mtime=time.time())
    tar = L.tar_bytes([L.member("k", data=b"k")])
    put("k.v.%s.tar.zst" % hashlib.sha256(tar).hexdigest()[:12], tar)
    # named as before ids were per tenant (by the id alone)
    L.place(x, "k.v", tar, key="k.v", tenant="other",
            file="k.v.%s.tar.zst" % hashlib.sha256(tar).hexdigest()[:12])
    put("l.w.tar.zst", tar)
    L.place(x, "l.w", tar, key="l.w", tenant="other")
    L.reload(x, archive_max_age=30, archive_max_bytes_per_tenant=0)
    try:
        wait_until(lambda: not {"o.1.0123456789ab.tar.zst", "o.2.tar.zst",
                                "o.3.tar.zst.tmp", "o.4.json.tmp"} &
                   set(tars(x)), 20, what="orphans swept (%r)" % tars(x))
    except Fail as ex:
        soft(False, str(ex))
    left = set(tars(x))
    soft({"y.5.0123456789ab.tar.zst", "k.v.json", "l.w.json",
          "l.w.tar.zst"} <= left and any(n.startswith("k.v.") and
                                         n.endswith(".tar.zst")
                                         for n in left),
         "young orphans and committed archives kept: %r" % sorted(left))
    soft(any(a == "orphan" and f == "o.1.0123456789ab.tar.zst"
             for a, _, f in evictions(x)), "orphan removal audited: %r" %
         evictions(x))
    # expiry: an age of seconds
    L.reload(x, archive_max_age=2)
    try:
        wait_until(lambda: not any(n.endswith(".json") for n in tars(x)),
                   15, what="archives expired (%r)" % tars(x))
    except Fail as ex:
        soft(False, str(ex))
    soft(any(a == "expired" and b == "a3" for a, b, _ in evictions(x)),
         "expiry audited: %r" % evictions(x))
    m = X.metrics(x)
    soft(m.get('sluice_execd_lifecycle_total{what="archive_expired"}', 0)
         >= 1 and m.get('sluice_execd_lifecycle_total{what='
                        '"archive_evicted"}', 0) >= 2 and
         m.get('sluice_execd_lifecycle_total{what="archive_orphan"}', 0)
         >= 4, "eviction metrics: %r" % {k: v for k, v in m.items()
                                         if "archive" in k})
    if problems:
        raise Fail("; ".join(problems))


@S.case
def archives_of_before(env):
    """Archives of a tenant made before ids were per tenant (named by
    the id alone, no "key") are renamed to their keys at start, and a
    create of the id by that tenant restores them; a tenant-less one
    stays as it is."""
    d, ctl, x = L.life_start(env, lifecycle={"idle_after": 0,
                                             "remove_after": 0})
    tar = L.tar_bytes([L.member("k", data=b"k")])
    dig = hashlib.sha256(tar).hexdigest()[:12]
    adir = x.conf["lifecycle"]["archive_dir"]
    os.makedirs(adir, mode=0o700, exist_ok=True)
    with open(os.path.join(adir, "k.v.%s.tar.zst" % dig), "wb") as f:
        f.write(tar)
    L.place(x, "k.v", tar, key="k.v", tenant="other",
            file="k.v.%s.tar.zst" % dig)
    os.unlink(os.path.join(adir, "k.v.tar.zst"))    # place()'s, unnamed
    L.place(x, "l.w", tar, key="l.w", tenant="other")
    L.place(x, "n.t", tar, key="n.t", tenant="", user="")
    x.halt()
    x.start()
    left = set(tars(x))
    kv, lw = L.K("k.v", "other"), L.K("l.w", "other")
    check({kv + ".json", kv + ".%s.tar.zst" % dig, lw + ".json",
           lw + ".tar.zst", "n.t.json", "n.t.tar.zst"} == left,
          "archives of before adopted: %r" % sorted(left))
    for sid in ("k.v", "l.w"):
        r = x.app("POST", "/v1/sandboxes", {"id": sid, "tenant": "other",
                                            "user": "alice"}, timeout=120)
        check(r.status == 201 and (r.json.get("restored_from") or {}).get(
            "files") == 1, "other's %s restored: %r" % (sid, r))
    r = x.app("POST", "/v1/sandboxes", {"id": "n.t"}, timeout=120)
    check(r.status == 201 and (r.json.get("restored_from") or {}).get(
        "files") == 1, "the tenant-less n.t restored: %r" % r)

if __name__ == "__main__":
    own_mount_ns()
    S.main()
