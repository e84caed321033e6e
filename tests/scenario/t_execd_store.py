#!/usr/bin/env python3
"""sluice-execd's storage: what sandboxes and archives may take of the
host's disk, and how an archive is restored (issue 20, points 4, 5, 10),
with the real sluiced and real ns sandboxes, ages of seconds:

- restore_helper_exec: the restore's child is not a fork of the daemon
  that parses the archive with the daemon's memory: it execs
  `sluice-execd --restore-helper` (its cmdline says so) as the
  sandbox's host uid, and the SHA-256 digest of the daemon's bearer
  token is nowhere in its memory; the restore still works;

Skips (77) without root or user namespaces."""

import hashlib
import os
import socket  # noqa: F401
import threading
import time

import sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, check, check_eq, log)  # noqa: E402
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
            try:
                data = os.pread(mem, hi - lo, lo)
            except OSError:
                continue
            if needle in data:
                return True
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


if __name__ == "__main__":
    S.main()
