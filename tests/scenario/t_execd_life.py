#!/usr/bin/env python3
"""sluice-execd's lifecycle and command quotas, with the real sluiced and
real ns sandboxes, driven as an unprivileged app (t_execd.py's client),
with ages of seconds in the test configuration:

- an unused sandbox is suspended (its cgroup frozen: cgroup.events says
  frozen 1; GET shows "suspended" and does not resume it), the next call
  (exec) resumes it and works, GET says "running" again; events
  suspended / resumed / removed and audit records suspend / resume /
  remove (reason idle), metrics;
- unused for remove_after it is archived (<archive_dir>/<id>.<sha12>.tar.zst,
  whose SHA-256 the metadata <id>.json names) and removed (404, the
  broker session gone); a create of the same id by its tenant and user
  restores the files (content, a directory, a link, the owner), another
  user is refused 403;
- DELETE by default archives (delete then create restores); DELETE
  ?archive=discard drops the archive (create then starts empty), also
  for an id whose sandbox is gone;
- a corrupt archive (one byte changed) is refused (409, archive corrupt,
  nothing left behind);
- a hostile archive placed in archive_dir with its checksum (entries
  "../x", absolute, a link to /tmp followed by an entry through it, a
  hard link to /etc/shadow, a device, a fifo) makes nothing outside the
  workspace; the good entries (and a relative link climbing out) are
  restored and the rest named as skipped;
- a restore whose skipped names would say 600 KB finishes in seconds
  (names cut, 100 named, all counted); a 15 TiB sparse file and hard
  links archive small and fast and restore; UTF-8 and non-UTF-8 names
  archive in the C locale; a too-deep directory is named;
- a suspended sandbox stays suspended across a daemon restart and
  resumes on use; last_used is in the record;
- while a delete archives the workspace, calls that would change it
  (PUT and DELETE of files, edit, exec) are refused 409 conflict, and
  the archive holds what was there (its SHA-256 as the metadata says);
- an archive that cannot be written (archive_dir a file) leaves the
  sandbox "stopped" (its sandbox and broker session gone, the reason in
  GET, not counted running, no change taken), its removal by age tried
  again less and less often; DELETE ?archive=discard removes it, nothing
  left; archive_dir keeps its value across a reload;
- an archive whose metadata does not read: create 409 and discard agree
  (a caller bound to no tenant discards it);
- running commands per host and per tenant: 429 quota_exceeded with
  scope global / tenant, limit and in_use.

Skips (77) without root or user namespaces."""

import hashlib
import io
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import tarfile
import threading
import time

import sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, Fail, check, check_eq, log,  # noqa: E402
                     wait_until)
import t_execd as X  # noqa: E402
import execdlib  # noqa: E402

S = Suite("t_execd_life", time_limit=420)


def state(x, sid):
    r = x.auditor("GET", "/v1/sandboxes/%s" % sid)
    return r.json["state"] if r.status == 200 else r.status


def K(sid, tenant="acme"):
    """The host's name of a case's sandbox (X.create's tenant: acme)."""
    return execdlib.key(tenant, sid)


def record(x, sid, tenant="acme"):
    with open(os.path.join(x.conf["state_dir"], K(sid, tenant),
                           "record.json")) as f:
        return json.load(f)


def frozen(x, sid):
    """Whether the sandbox's holder is frozen as its cgroup says (v2:
    cgroup.events' frozen; v1: the freezer's freezer.state), None where
    the sandbox has no cgroup."""
    rec = record(x, sid)
    with open("/proc/%d/cgroup" % rec["init_pid"]) as f:
        lines = [ln.strip().split(":", 2) for ln in f]
    if rec["cgroup"].startswith("v2:"):
        path = [p for h, c, p in lines if h == "0"][0]
        with open(rec["cgroup"][3:] + path + "/cgroup.events") as f:
            return dict(ln.split() for ln in f)["frozen"] == "1"
    if rec["cgroup"] == "v1":
        path = [p for h, c, p in lines if "freezer" in c.split(",")][0]
        with open("/sys/fs/cgroup/freezer" + path + "/freezer.state") as f:
            return f.read().strip() == "FROZEN"
    return None


def archive_files(x, sid, key=None):
    """The archive file its metadata names ("file": <id>.<sha12>.tar.zst;
    the old "tar.zst" is <id>.tar.zst) and the metadata."""
    d = x.conf["lifecycle"]["archive_dir"]
    key = key or K(sid)
    mp = os.path.join(d, key + ".json")
    name = key + ".tar.zst"
    try:
        with open(mp) as f:
            fn = json.load(f).get("file")
        if fn and fn != "tar.zst":
            name = fn
    except (OSError, ValueError):
        pass
    return os.path.join(d, name), mp


def archive_tars(x, sid):
    d = x.conf["lifecycle"]["archive_dir"]
    return sorted(n for n in os.listdir(d) if n.startswith(K(sid) + ".") and
                  n.endswith(".tar.zst"))


def audit(x):
    out = []
    with open(x.conf["log"]["path"]) as f:
        for ln in f:
            out.append(json.loads(ln))
    return out


def audit_actions(x, sid):
    return [r.get("action") for r in audit(x) if r.get("sandbox") == sid or
            r.get("id") == sid]


class Events:
    """GET /v1/events as root, read by a thread."""

    def __init__(self, x):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(x.sock)
        self.s.settimeout(1)
        self.s.sendall(b"GET /v1/events HTTP/1.1\r\nHost: x\r\n\r\n")
        self.got = bytearray()
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stop.is_set():
            try:
                b = self.s.recv(1 << 16)
            except socket.timeout:
                continue
            except OSError:
                break
            if not b:
                break
            self.got.extend(b)

    def list(self):
        body = bytes(self.got).partition(b"\r\n\r\n")[2]
        data, _ = X.dechunk_partial(body)
        return [(n, p.get("what"), p) for n, p in X.sse_events(data)]

    def close(self):
        self.stop.set()
        try:
            self.s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.t.join(5)
        self.s.close()


def reload(x, **lifecycle):
    x.conf["lifecycle"] = dict(x.conf["lifecycle"], **lifecycle)
    x.write()
    n = len(x.lines)
    x.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: any("reload: configuration" in ln
                           for ln in x.lines[n:]), 10, what="reload")


def life_start(env, **over):
    arch = env.path("xarchive")
    lc = dict({"idle_after": 2, "remove_after": 7, "archive_dir": arch},
              **over.pop("lifecycle", {}))
    return X.start(env, lifecycle=lc, **over)


@S.case
def suspend_resume_remove_restore(env):
    d, ctl, x = life_start(env)
    ev = Events(x)
    env.closers.append(ev.close)
    X.create(x, "l1")
    check_eq(x.app("PUT", "/v1/sandboxes/l1/files/keep.txt",
                   raw=b"kept\n").status, 201, "put")
    o = X.ex(x, "l1", {"shell": "mkdir -p d/e && printf deep > d/e/f && "
                       "ln -s keep.txt lnk && chmod 640 keep.txt"})
    check_eq(o["exit_code"], 0, "files made: %r" % o)
    # unused: suspended, its cgroup frozen; GET only looks
    wait_until(lambda: state(x, "l1") == "suspended", 10,
               what="suspended (%r)" % state(x, "l1"))
    fz = frozen(x, "l1")
    check(fz in (True, None), "frozen after suspend: %r" % fz)
    if fz is None:
        log("no cgroup v2 group for the sandbox: frozen not checked")
    time.sleep(1.2)
    check_eq(x.auditor("GET", "/v1/sandboxes/l1/commands").status, 200,
             "list commands")
    check_eq(state(x, "l1"), "suspended", "GET does not resume")
    check(record(x, "l1")["suspended"], "suspended in the record")
    m = X.metrics(x)
    check_eq(m["sluice_execd_sandboxes_suspended"], 1, "metric suspended")
    # the next call resumes it
    o = X.ex(x, "l1", {"shell": "cat keep.txt; cat d/e/f"})
    check_eq((o["exit_code"], o["stdout"]), (0, "kept\ndeep"), "exec "
             "after suspend: %r" % o)
    check_eq(state(x, "l1"), "running", "running again")
    check(frozen(x, "l1") in (False, None), "thawed")
    # suspended again, then removed by age: archived first
    wait_until(lambda: state(x, "l1") == 404, 20,
               what="removed by age (%r)" % state(x, "l1"))
    tar, meta = archive_files(x, "l1")
    check(os.path.exists(tar) and os.path.exists(meta), "archive made")
    with open(meta) as f:
        mj = json.load(f)
    with open(tar, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    check_eq((mj["id"], mj["tenant"], mj["user"], mj["reason"],
              mj["sha256"]), ("l1", "acme", "alice", "idle", digest),
             "archive metadata: %r" % mj)
    check_eq(mj["file"], "%s.%s.tar.zst" % (K("l1"), digest[:12]),
             "named by its digest: %r" % mj)
    check_eq(archive_tars(x, "l1"), [mj["file"]], "one archive file")
    check_eq(X.session(ctl, "l1").status, 404, "broker session removed")
    check(not os.path.exists(os.path.join(x.conf["state_dir"], K("l1"))),
          "state dir removed")
    whats = [(n, w) for n, w, p in ev.list() if p.get("id") == "l1"]
    check(("sandbox", "suspended") in whats and
          ("sandbox", "resumed") in whats, "events: %r" % whats)
    rm = [p for n, w, p in ev.list() if w == "removed" and
          p.get("id") == "l1"]
    check(rm and rm[0]["reason"] == "idle" and
          rm[0]["archive"]["sha256"] == digest, "removed event: %r" % rm)
    acts = [(r.get("action"), (r.get("detail") or {}).get("reason"))
            for r in audit(x) if "l1" in json.dumps(r)]
    for want in (("suspend", "idle"), ("resume", None), ("remove", "idle")):
        check(any(a == want[0] and (want[1] is None or rs == want[1])
                  for a, rs in acts), "audit %r in %r" % (want, acts))
    m = X.metrics(x)
    check(m['sluice_execd_lifecycle_total{what="suspended"}'] >= 2 and
          m['sluice_execd_lifecycle_total{what="removed_idle"}'] == 1 and
          m['sluice_execd_lifecycle_total{what="archived"}'] == 1,
          "lifecycle metrics: %r" % m)
    v = subprocess.run([X.SLUICECTL, "log", "verify", "--file",
                        x.conf["log"]["path"]], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT)
    check_eq(v.returncode, 0, "audit chain: %s" % v.stdout.decode())
    # no more ages for the rest
    reload(x, idle_after=0, remove_after=0)
    # another user of the same tenant may not take the archive
    r = x.app("POST", "/v1/sandboxes", {"id": "l1", "tenant": "acme",
                                        "user": "mallory"}, timeout=120)
    X.check_err(r, 403, "forbidden", "archive of another user")
    # its owner gets the files back
    b = X.create(x, "l1")
    log("restored create: %s" % json.dumps(b, separators=(",", ":")))
    rf = b.get("restored_from")
    check(rf and rf["sha256"] == digest and rf["files"] == 2 and
          rf["skipped"] == [], "restored_from: %r" % rf)
    o = X.ex(x, "l1", {"shell": "cat keep.txt; cat d/e/f; readlink lnk; "
                       "stat -c '%u %a' keep.txt"})
    check_eq(o["stdout"], "kept\ndeepkeep.txt\n1000 640\n",
             "restored content: %r" % o)
    check_eq(x.auditor("GET", "/v1/sandboxes/l1").json["restored_from"]
             ["sha256"], digest, "GET shows restored_from")
    cr = [r for r in audit(x) if r.get("action") == "create" and
          "restored_from" in json.dumps(r)]
    check(cr, "audit of the restore")
    # DELETE by default archives: delete then create restores
    X.ex(x, "l1", {"shell": "echo v2 > keep.txt"})
    r = x.app("DELETE", "/v1/sandboxes/l1", timeout=60)
    check(r.status == 200 and r.json["archive"]["sha256"], "delete keeps "
          "an archive: %r" % r)
    log("delete: %s" % r.body.decode())
    tar2, _ = archive_files(x, "l1")
    check(tar2 != tar and archive_tars(x, "l1") == [os.path.basename(tar2)],
          "the older archive file removed: %r" % archive_tars(x, "l1"))
    X.create(x, "l1")
    check_eq(X.ex(x, "l1", {"shell": "cat keep.txt"})["stdout"], "v2\n",
             "delete then create restores")
    # ?archive=discard: nothing kept, the next create is empty
    r = x.app("DELETE", "/v1/sandboxes/l1?archive=discard", timeout=60)
    check(r.status == 200 and r.json["archive"] == "discarded",
          "discard: %r" % r)
    check(archive_tars(x, "l1") == [] and not os.path.exists(meta),
          "archive gone after discard")
    b = X.create(x, "l1")
    check(b["restored_from"] is None, "nothing restored: %r" % b)
    r = x.app("GET", "/v1/sandboxes/l1/files")
    check_eq([e["path"] for e in r.json["entries"]
              if e["path"] != "lost+found"], [], "empty workspace: %r" % r)
    # discard of an id whose sandbox is gone
    check_eq(x.app("DELETE", "/v1/sandboxes/l1", timeout=60).status, 200,
             "delete (archive)")
    check(os.path.exists(meta), "archived")
    r = x.app("DELETE", "/v1/sandboxes/l1?archive=discard")
    check(r.status == 200 and r.json["deleted"] is False and
          r.json["archive"] == "discarded", "discard a gone one: %r" % r)
    check(not os.path.exists(meta), "its archive gone")
    X.check_err(x.app("DELETE", "/v1/sandboxes/l1?archive=discard"), 404,
                "not_found", "nothing left to discard")


def tar_bytes(members):
    bio = io.BytesIO()
    with tarfile.open(fileobj=bio, mode="w:gz") as t:
        for ti, data in members:
            t.addfile(ti, io.BytesIO(data) if data is not None else None)
    return bio.getvalue()


def member(name, kind=tarfile.REGTYPE, data=b"", link="", mode=0o644):
    ti = tarfile.TarInfo(name)
    ti.type = kind
    ti.mode = mode
    ti.mtime = int(time.time())
    if kind == tarfile.REGTYPE:
        ti.size = len(data)
        return ti, data
    if kind == tarfile.DIRTYPE:
        ti.mode = 0o755
    ti.linkname = link
    if kind in (tarfile.CHRTYPE, tarfile.BLKTYPE):
        ti.devmajor, ti.devminor = 1, 3
    return ti, None


def place(x, sid, data, key=None, **meta):
    """An archive of acme's sid (key: named so, as before ids were per
    tenant)."""
    tar, mp = archive_files(x, sid, key)
    os.makedirs(os.path.dirname(tar), mode=0o700, exist_ok=True)
    with open(tar, "wb") as f:
        f.write(data)
    m = {"id": sid, "tenant": "acme", "user": "alice", "archived":
         int(time.time()), "reason": "delete", "file": "tar.zst",
         "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    m.update(meta)
    with open(mp, "w") as f:
        json.dump(m, f)


@S.case
def corrupt_and_hostile_archives(env):
    d, ctl, x = life_start(env, lifecycle={"idle_after": 0,
                                           "remove_after": 0})
    # a corrupt archive: one byte changed
    X.create(x, "c1")
    x.app("PUT", "/v1/sandboxes/c1/files/a.txt", raw=b"a" * 1000)
    check_eq(x.app("DELETE", "/v1/sandboxes/c1", timeout=60).status, 200,
             "delete c1")
    tar, meta = archive_files(x, "c1")
    with open(tar, "r+b") as f:
        f.seek(os.path.getsize(tar) // 2)
        c = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([c[0] ^ 0xff]))
    r = x.app("POST", "/v1/sandboxes", {"id": "c1", "tenant": "acme",
                                        "user": "alice",
                                        "network": {"tier": "off"}},
              timeout=120)
    X.check_err(r, 409, "conflict", "corrupt archive")
    log("corrupt: %s" % r.body.decode())
    check(r.json["error"].get("archive") == "corrupt" and
          "SHA-256" in r.json["error"]["message"], "says why: %r" % r)
    check(not os.path.exists(os.path.join(x.conf["state_dir"], K("c1"))),
          "nothing left of the refused create")
    check_eq(X.session(ctl, "c1").status, 404, "no broker session left")
    check_eq(X.mounts_of(x.conf["state_dir"]), [], "no mount left")
    # the way out: discard, then create starts empty
    check_eq(x.app("DELETE", "/v1/sandboxes/c1?archive=discard").status,
             200, "discard corrupt")
    check(X.create(x, "c1")["restored_from"] is None, "fresh c1")
    # a hostile archive, checksum and metadata all in order
    tag = "sluice-life-%d" % os.getpid()
    for p in ("/tmp/" + tag + "-abs", "/tmp/" + tag + "-through"):
        if os.path.lexists(p):
            os.unlink(p)
    bad = tar_bytes([
        member("ok.txt", data=b"fine\n"),
        member("sub", tarfile.DIRTYPE),
        member("sub/good.txt", data=b"good\n"),
        member("../escape.txt", data=b"x"),
        member("sub/../../escape2.txt", data=b"x"),
        member("/tmp/" + tag + "-abs", data=b"x"),
        member("out", tarfile.SYMTYPE, link="../../../../etc"),
        member("sub/up", tarfile.SYMTYPE, link="../ok.txt"),
        member("pylink", tarfile.SYMTYPE, link="/usr/bin/python3"),
        member("tmpl", tarfile.SYMTYPE, link="/tmp"),
        member("tmpl/" + tag + "-through", data=b"x"),
        member("hl", tarfile.LNKTYPE, link="/etc/shadow"),
        member("dev", tarfile.CHRTYPE),
        member("fifo", tarfile.FIFOTYPE),
        member("suid", data=b"#!/bin/sh\n", mode=0o4755),
    ])
    place(x, "h1", bad)
    b = X.create(x, "h1")
    rf = b["restored_from"]
    skipped = {s["path"]: s["why"] for s in rf["skipped"]}
    log("skipped: %r" % skipped)
    for p in ("../escape.txt", "sub/../../escape2.txt", "/tmp/%s-abs" % tag,
              "tmpl/%s-through" % tag, "hl", "dev", "fifo"):
        check(p in skipped, "%s skipped: %r" % (p, skipped))
    # a relative link climbing out is kept like an absolute one: the
    # restore writes through no link, the host resolves none
    for p in ("ok.txt", "sub/good.txt", "sub/up", "pylink", "tmpl", "suid",
              "out"):
        check(p not in skipped, "%s restored: %r" % (p, skipped))
    sd = os.path.join(x.conf["state_dir"], K("h1"))
    for p in ("/tmp/%s-abs" % tag, "/tmp/%s-through" % tag,
              os.path.join(sd, "escape.txt"), os.path.join(sd, "escape2.txt"),
              os.path.join(x.conf["state_dir"], "escape2.txt")):
        check(not os.path.lexists(p), "nothing made outside: %s" % p)
    o = X.ex(x, "h1", {"shell": "cat ok.txt sub/good.txt sub/up; "
                       "readlink pylink tmpl out; ls -A | sort | tr '\\n' ' '; "
                       "stat -c '%u %a' ok.txt suid | tr '\n' ' '"})
    check_eq(o["stdout"], "fine\ngood\nfine\n/usr/bin/python3\n/tmp\n"
             "../../../../etc\nok.txt out pylink sub suid tmpl 1000 644 1000 "
             "755 ", "restored entries: %r" % o)
    # the archive's tenant and user are checked
    place(x, "h2", tar_bytes([member("x", data=b"x")]), tenant="other")
    X.check_err(x.app("POST", "/v1/sandboxes", {"id": "h2", "tenant": "acme",
                                                "user": "alice"},
                      timeout=120), 403, "forbidden", "other tenant")
    # a file that is no tar
    place(x, "h3", b"not a tar at all" * 10)
    r = x.app("POST", "/v1/sandboxes", {"id": "h3", "tenant": "acme",
                                        "user": "alice"}, timeout=120)
    X.check_err(r, 409, "conflict", "not a tar")
    check(not os.path.exists(os.path.join(x.conf["state_dir"], K("h3"))),
          "nothing left of h3")


@S.case
def restore_long_results(env):
    """A hostile archive whose skipped entries would say 600 KB (150 hard
    links with 4 KB names, a name of invalid UTF-8) restores in seconds:
    the result is read to its end, each name cut to 256 bytes of valid
    UTF-8, 100 named and all counted; a UTF-8 name read in the daemon's C
    locale is restored."""
    d, ctl, x = life_start(env, lifecycle={"idle_after": 0,
                                           "remove_after": 0})
    deep = "/".join("d%03d" % i + "x" * 240 for i in range(16))
    ms = [member("ok.txt", data=b"fine\n")]
    for i in range(150):
        ms.append(member("%s/l%d" % (deep, i), tarfile.LNKTYPE,
                         link="/etc/passwd"))
    ms.append(member("../bad\udcff", data=b"x"))
    place(x, "m1", tar_bytes(ms))
    t0 = time.time()
    r = x.app("POST", "/v1/sandboxes", {"id": "m1", "tenant": "acme",
                                        "user": "alice"}, timeout=60)
    took = time.time() - t0
    check(r.status == 201, "restore with long results: %r" % r)
    check(took < 30, "in seconds: %.1f" % took)
    rf = r.json["restored_from"]
    check_eq(rf["skipped_count"], 151, "all counted")
    check_eq(len(rf["skipped"]), 100, "100 named")
    check(all(len(s["path"].encode()) <= 256 for s in rf["skipped"]),
          "names cut: %r" % max(len(s["path"]) for s in rf["skipped"]))
    check_eq(X.ex(x, "m1", {"shell": "cat ok.txt"})["stdout"], "fine\n",
             "restored")
    # a name of invalid UTF-8 is named, as valid UTF-8
    place(x, "m2", tar_bytes([member("../bad\udcff", data=b"x"),
                              member("../c\x01d", data=b"x"),
                              member("ok.txt", data=b"ok\n")]))
    b = X.create(x, "m2")
    sk = b["restored_from"]["skipped"]
    check_eq([s["path"] for s in sk], ["../bad?", "../c?d"],
             "names of invalid UTF-8 and control characters: %r" % sk)
    # a UTF-8 name (Python writes it as pax UTF-8)
    place(x, "m3", tar_bytes([member("caf\u00e9.txt", data=b"cafe\n")]))
    b = X.create(x, "m3")
    check_eq(b["restored_from"]["files"], 1, "UTF-8 name restored: %r" % b)
    check_eq(X.ex(x, "m3", {"shell": "cat caf\u00e9.txt"})["stdout"],
             "cafe\n", "its content")


@S.case
def archive_sparse_links_names(env):
    """A 15 TiB sparse file, one of 5000 extents and a 1 TiB hole, and a
    1 MiB file with 60 more hard links archive fast and small (holes not
    read, links as links) and restore
    (the links one inode); names in UTF-8 and in no encoding archive in
    the daemon's C locale; a relative link climbing out is kept; a
    directory deeper than 128 is named in the metadata.  Made from the
    host: the sandbox's RLIMIT_FSIZE stops a 15 TiB truncate."""
    d, ctl, x = life_start(env, lifecycle={"idle_after": 0,
                                           "remove_after": 0})
    X.create(x, "s1")
    ws = os.path.join(x.conf["state_dir"], K("s1"), "workspace")
    with open(os.path.join(ws, "sparse"), "wb") as f:
        for size in (15 << 40, 15 << 30):
            try:
                f.truncate(size)
                break
            except OSError:
                continue
        f.seek(0, 2)
        f.write(b"end")
    size = os.path.getsize(os.path.join(ws, "sparse"))
    # 5000 data extents, then a hole to 1 TiB (or 1 GiB): mapped whole
    with open(os.path.join(ws, "many"), "wb") as f:
        for i in range(5000):
            f.seek(i * 65536)
            f.write(b"%d" % (i % 10))
        for msize in (1 << 40, 1 << 30):
            try:
                f.truncate(msize)
                break
            except OSError:
                continue
    with open(os.path.join(ws, "big"), "wb") as f:
        f.write(os.urandom(1 << 20))
    for i in range(1, 61):
        os.link(os.path.join(ws, "big"), os.path.join(ws, "big%d" % i))
    with open(os.path.join(ws, "caf\u00e9.txt"), "wb") as f:
        f.write(b"cafe")
    with open(os.path.join(ws.encode(), b"bad\xff.txt"), "wb") as f:
        f.write(b"bad")
    os.makedirs(os.path.join(ws, "venv", "bin"))
    os.symlink("../../../usr/bin/python3", os.path.join(ws, "venv", "bin",
                                                         "python"))
    os.makedirs(os.path.join(ws, *(["d"] * 130)))
    t0 = time.time()
    r = x.app("DELETE", "/v1/sandboxes/s1", timeout=60)
    took = time.time() - t0
    check(r.status == 200, "archived: %r" % r)
    check(took < 30, "fast: %.1f s" % took)
    tar, meta = archive_files(x, "s1")
    check(os.path.getsize(tar) < 4 << 20, "small: %d" %
          os.path.getsize(tar))
    with open(meta) as f:
        mj = json.load(f)
    log("metadata: %s" % json.dumps(mj)[:600])
    check(any("deeper" in s["why"] for s in mj.get("skipped", [])),
          "the deep directory named: %r" % mj.get("skipped"))
    b = X.create(x, "s1")
    log("restored: %s" % json.dumps(b["restored_from"])[:600])
    o = X.ex(x, "s1", {"shell":
                       "stat -c %h big; cmp big big60 && echo same; "
                       "stat -c %s sparse; tail -c 3 sparse; echo; "
                       "du -k sparse | cut -f1; cat caf\u00e9.txt; echo; "
                       "cat \"$(printf 'bad\\377.txt')\"; echo; "
                       "readlink venv/bin/python; "
                       "stat -c %s many; dd if=many bs=65536 skip=4999 "
                       "count=1 2>/dev/null | head -c 1; echo; "
                       "du -k many | cut -f1"}, timeout=60)
    out = o["stdout"].split("\n")
    check_eq(out[:3], ["61", "same", str(size)], "links and size: %r" % o)
    check_eq(out[3], "end", "the sparse file's data: %r" % o)
    check(int(out[4]) < 1024, "restored sparse: %r" % out[4])
    check_eq(out[5:8], ["cafe", "bad", "../../../usr/bin/python3"],
             "names and the link: %r" % o)
    check_eq(out[8:10], [str(msize), "9"], "many extents: %r" % o)
    check(int(out[10]) < 64 << 10, "many extents, sparse: %r" % out[10])


@S.case
def restart_keeps_suspended(env):
    d, ctl, x = life_start(env, lifecycle={"idle_after": 2,
                                           "remove_after": 0})
    X.create(x, "r1")
    wait_until(lambda: state(x, "r1") == "suspended", 10, what="suspended")
    pid = record(x, "r1")["init_pid"]
    x.halt()
    x.start()
    check_eq(state(x, "r1"), "suspended", "suspended after a restart")
    check_eq(record(x, "r1")["init_pid"], pid, "same sandbox")
    check(frozen(x, "r1") in (True, None), "still frozen")
    o = X.ex(x, "r1", {"shell": "echo up"})
    check_eq(o["stdout"], "up\n", "resumed on use after a restart")
    check_eq(state(x, "r1"), "running", "running")
    check(abs(record(x, "r1")["last_used"] - time.time()) < 5,
          "last_used saved: %r" % record(x, "r1")["last_used"])


@S.case
def command_quotas(env):
    d, ctl, x = life_start(env, lifecycle={"idle_after": 0,
                                           "remove_after": 0},
                           quotas={"commands": 2, "commands_per_tenant": 1})
    X.create(x, "q1", tenant="acme", user="a")
    X.create(x, "q2", tenant="acme", user="b")
    X.create(x, "q3", tenant="other", user="c")
    X.create(x, "q4", tenant="third", user="d")
    r = x.app("POST", "/v1/sandboxes/q1/commands", {"shell": "sleep 60"})
    check_eq(r.status, 202, "background in q1: %r" % r)
    c1 = r.json["id"]
    # acme runs one: a second in acme (foreground, other sandbox) refused
    r = x.app("POST", "/v1/sandboxes/q2/exec", {"shell": "true"})
    X.check_err(r, 429, "quota_exceeded", "tenant command quota")
    check_eq((r.json["error"]["scope"], r.json["error"]["limit"],
              r.json["error"]["in_use"], r.json["error"]["resource"]),
             ("tenant", 1, 1, "commands"), "tenant fields: %r" % r)
    r = x.app("POST", "/v1/sandboxes/q1/commands", {"shell": "sleep 60"})
    X.check_err(r, 429, "quota_exceeded", "tenant quota, background")
    r = x.app("POST", "/v1/sandboxes/q3/commands", {"shell": "sleep 60"})
    check_eq(r.status, 202, "other tenant: %r" % r)
    c3 = r.json["id"]
    # two run on the host: the global quota
    r = x.app("POST", "/v1/sandboxes/q4/exec", {"shell": "true"})
    X.check_err(r, 429, "quota_exceeded", "global command quota")
    check_eq((r.json["error"]["scope"], r.json["error"]["limit"],
              r.json["error"]["in_use"]), ("global", 2, 2),
             "global fields: %r" % r)
    m = X.metrics(x)
    check_eq((m['sluice_execd_quota_limit{scope="commands"}'],
              m['sluice_execd_quota_in_use{scope="commands"}']), (2, 2),
             "metrics")
    # stopped: room again
    for sid, cid in (("q1", c1), ("q3", c3)):
        check_eq(x.app("POST", "/v1/sandboxes/%s/commands/%s/stop" %
                       (sid, cid)).status, 202, "stop")
    wait_until(lambda: X.metrics(x)[
        'sluice_execd_quota_in_use{scope="commands"}'] == 0, 20,
        what="stopped")
    check_eq(X.ex(x, "q2", {"shell": "echo ok"})["stdout"], "ok\n",
             "acme again")
    check_eq(X.ex(x, "q4", {"shell": "echo ok"})["stdout"], "ok\n",
             "the host again")


@S.case
def no_change_while_deleting(env):
    d, ctl, x = life_start(env, lifecycle={"idle_after": 0,
                                           "remove_after": 0})
    X.create(x, "e1")
    # a workspace big enough that archiving it takes a while
    o = X.ex(x, "e1", {"shell": "head -c 400M /dev/urandom > big && "
                       "echo ok > small.txt"}, timeout=120)
    check_eq(o["exit_code"], 0, "big file: %r" % o)
    res = {}

    def delete():
        res["r"] = x.app("DELETE", "/v1/sandboxes/e1", timeout=180)

    t = threading.Thread(target=delete, daemon=True)
    t.start()
    # The delete's worker writes the archive in its own process: stopped
    # (SIGSTOP, by the pid the daemon logs as it forks it, watched for
    # closely), the delete cannot end while the calls are made, however
    # fast this machine archives.
    pids = []
    deadline = time.monotonic() + 20
    while not pids and time.monotonic() < deadline:
        pids = re.findall(r"worker delete started \(pid (\d+)\)",
                          x.stderr(400))
        if not pids:
            time.sleep(0.005)
    check(pids, "the delete's worker in the log")
    wpid = int(pids[-1])
    os.kill(wpid, signal.SIGSTOP)
    try:
        check_eq(state(x, "e1"), "deleting", "the state while the worker "
                 "is held")
        got = [x.app("PUT", "/v1/sandboxes/e1/files/late.txt",
                     raw=b"late\n"),
               x.app("DELETE", "/v1/sandboxes/e1/files/small.txt"),
               x.app("POST", "/v1/sandboxes/e1/edit", {"path": "small.txt",
                                                       "old": "ok",
                                                       "new": "ko"}),
               x.app("POST", "/v1/sandboxes/e1/exec", {"shell": "touch x"})]
        still = state(x, "e1")
    finally:
        os.kill(wpid, signal.SIGCONT)
    t.join(180)
    check(still == "deleting", "the delete outlasted the calls: %r" % still)
    for r, what in zip(got, ("put", "delete file", "edit", "exec")):
        X.check_err(r, 409, "conflict", "%s while deleting" % what)
    check_eq(res["r"].status, 200, "delete: %r" % res.get("r"))
    tar, meta = archive_files(x, "e1")
    with open(meta) as f:
        mj = json.load(f)
    with open(tar, "rb") as f:
        check_eq(hashlib.sha256(f.read()).hexdigest(), mj["sha256"],
                 "the archive is the one its metadata names")
    # what it holds: the workspace as the delete found it
    b = X.create(x, "e1")
    check_eq(b["restored_from"]["files"], 2, "restored: %r" % b)
    o = X.ex(x, "e1", {"shell": "ls; cat small.txt; stat -c %s big"})
    check_eq(o["stdout"], "big\nsmall.txt\nok\n%d\n" % (400 << 20),
             "restored workspace: %r" % o)
    check_eq(x.app("DELETE", "/v1/sandboxes/e1?archive=discard",
                   timeout=120).status, 200, "delete e1")


@S.case
def archive_fails_stopped(env):
    arch = env.path("xarchive")
    d, ctl, x = life_start(env, lifecycle={"idle_after": 0,
                                           "remove_after": 0})
    # archive_dir is not changed by a reload (restart only)
    X.create(x, "k0")
    reload(x, archive_dir=env.path("xarchive2"))
    check_eq(x.app("DELETE", "/v1/sandboxes/k0", timeout=60).status, 200,
             "delete k0")
    check(os.path.exists(os.path.join(arch, K("k0") + ".json")) and not
          os.path.exists(env.path("xarchive2")), "archive_dir kept across "
          "a reload")
    # archive_dir a file: no archive can be written
    for n in os.listdir(arch):
        os.unlink(os.path.join(arch, n))
    os.rmdir(arch)
    with open(arch, "w") as f:
        f.write("not a directory\n")
    env.closers.append(lambda: os.path.isfile(arch) and os.unlink(arch))
    X.create(x, "k1")
    check_eq(x.app("PUT", "/v1/sandboxes/k1/files/a.txt",
                   raw=b"a\n").status, 201, "put")
    n0 = len(x.lines)
    reload(x, archive_dir=arch, remove_after=1)
    wait_until(lambda: state(x, "k1") == "stopped", 20,
               what="stopped (%r)" % state(x, "k1"))
    t0 = time.time()
    r = x.auditor("GET", "/v1/sandboxes/k1")
    log("stopped: %s" % r.body.decode())
    check(r.json["reason"] and "archive failed" in r.json["reason"],
          "the reason in GET: %r" % r.json)
    m = X.metrics(x)
    check_eq((m['sluice_execd_sandboxes{state="running"}'],
              m['sluice_execd_sandboxes{state="stopped"}']), (0, 1),
             "not counted running")
    check_eq(X.session(ctl, "k1").status, 404, "broker session gone")
    X.check_err(x.app("PUT", "/v1/sandboxes/k1/files/b.txt", raw=b"b"),
                409, "conflict", "no change to a stopped one")
    X.check_err(x.app("POST", "/v1/sandboxes/k1/exec", {"shell": "true"}),
                409, "conflict", "no command in a stopped one")
    # its removal by age is tried again, less and less often
    time.sleep(max(0, 5 - (time.time() - t0)))
    # (the first by age; then the failed archive's own retries)
    tries = [ln for ln in x.lines[n0:] if K("k1") + ": unused" in ln or
             K("k1") + ": its archive failed: trying again" in ln]
    log("removal tries in ~5 s: %d" % len(tries))
    check(2 <= len(tries) <= 4, "backed off: %d tries: %r" %
          (len(tries), tries))
    check_eq(state(x, "k1"), "stopped", "still stopped")
    # the way out
    reload(x, remove_after=0)
    # a restarted daemon knows it stopped (not a dead one); it starts
    # only on an archive_dir that is a directory of its own
    x.halt()
    os.unlink(arch)
    os.mkdir(arch, 0o700)
    x.start()
    r = x.auditor("GET", "/v1/sandboxes/k1")
    check(r.json["state"] == "stopped" and "archive failed" in
          r.json["reason"], "stopped after a restart: %r" % r.json)
    r = x.app("DELETE", "/v1/sandboxes/k1?archive=discard", timeout=60)
    check(r.status == 200 and r.json["archive"] == "discarded",
          "discard a stopped one: %r" % r)
    check_eq(state(x, "k1"), 404, "gone")
    check(not os.path.exists(os.path.join(x.conf["state_dir"], K("k1"))),
          "state dir removed")
    check_eq(X.mounts_of(x.conf["state_dir"]), [], "no mount left")


@S.case
def corrupt_metadata_owner(env):
    X.preflight()
    crt, key = env.cert(("execd.test",))
    tokf = env.path("acme.tok")
    tok = "tok-acme-%s" % os.urandom(12).hex()
    with open(tokf, "w") as f:
        f.write(tok + "\n")
    os.chmod(tokf, 0o600)
    port = X.free_port()
    d, ctl, x = life_start(env, lifecycle={"idle_after": 0,
                                           "remove_after": 0},
                           tcp={"listen": "127.0.0.1:%d" % port,
                                "tls_cert": crt, "tls_key": key,
                                "tokens": [{"name": "acme-app",
                                            "file": tokf, "role": "app",
                                            "tenant": "acme"}]})
    ctx = ssl.create_default_context(cafile=crt)

    def tls(method, path, body=None):
        raw = socket.create_connection(("127.0.0.1", port), timeout=30)
        s = ctx.wrap_socket(raw, server_hostname="execd.test")
        try:
            return X._exchange(s, method, path, body, [
                ("Authorization", "Bearer " + tok)], None, 90)
        finally:
            s.close()
    tar, meta = archive_files(x, "m1")
    os.makedirs(os.path.dirname(tar), mode=0o700, exist_ok=True)
    with open(tar, "wb") as f:
        f.write(b"x" * 100)
    with open(meta, "w") as f:
        f.write("{not json")
    # a caller of one tenant: create and discard say the same (whose it
    # is is not known: not restored, not dropped by this caller)
    r = tls("POST", "/v1/sandboxes", {"id": "m1", "user": "alice"})
    X.check_err(r, 409, "conflict", "bound create, corrupt metadata")
    r2 = tls("DELETE", "/v1/sandboxes/m1?archive=discard")
    X.check_err(r2, 409, "conflict", "bound discard, corrupt metadata")
    check(r.json["error"]["message"] == r2.json["error"]["message"] and
          r2.json["error"].get("archive") == "corrupt" and
          "bound to no tenant" in r2.json["error"]["message"],
          "one answer: %r / %r" % (r, r2))
    check(os.path.exists(meta), "not dropped by a bound caller")
    r = x.app("POST", "/v1/sandboxes", {"id": "m1", "tenant": "acme",
                                        "user": "alice"}, timeout=120)
    X.check_err(r, 409, "conflict", "create with corrupt metadata")
    check(r.json["error"].get("archive") == "corrupt" and
          "archive=discard" in r.json["error"]["message"], "says how: %r" %
          r)
    # what create says works: the discard (no tenant bound: the unix
    # socket's app)
    # (ids are per tenant: the tenant named)
    r = x.app("DELETE", "/v1/sandboxes/m1?archive=discard&tenant=acme")
    check(r.status == 200 and r.json["archive"] == "discarded",
          "discard corrupt metadata: %r" % r)
    check(not os.path.exists(meta) and not os.path.exists(tar), "gone")


@S.case
def gvisor_suspend(env):
    """gVisor: runsc pause when unused, runsc resume on the next call."""
    if not X.runsc_works():
        from harness import Skip
        raise Skip("runsc not installed")
    d, ctl, x = life_start(env, lifecycle={"idle_after": 3,
                                           "remove_after": 0})
    r = x.app("POST", "/v1/sandboxes", {"id": "g1", "backend": "gvisor",
                                        "network": {"tier": "off"}},
              timeout=180)
    if r.status == 503 and r.code() == "backend_unavailable":
        from harness import Skip
        raise Skip("gvisor does not run here: %s" %
                   r.json["error"]["message"])
    check_eq(r.status, 201, "gvisor create: %r" % r)
    check_eq(x.app("PUT", "/v1/sandboxes/g1/files/g.txt",
                   raw=b"gvisor kept\n").status, 201, "gvisor put")
    wait_until(lambda: state(x, "g1") == "suspended", 20,
               what="gvisor suspended (%r)" % state(x, "g1"))
    check(record(x, "g1", "")["suspended"], "in the record")
    o = X.ex(x, "g1", {"shell": "echo awake"}, timeout=120)
    check_eq(o["stdout"], "awake\n", "gvisor exec after suspend: %r" % o)
    check_eq(state(x, "g1"), "running", "gvisor running again")
    # its workspace archived by DELETE and restored by the next create
    check_eq(x.app("DELETE", "/v1/sandboxes/g1", timeout=120).status, 200,
             "gvisor delete (archived)")
    r = x.app("POST", "/v1/sandboxes", {"id": "g1", "backend": "gvisor",
                                        "network": {"tier": "off"}},
              timeout=180)
    check(r.status == 201 and r.json["restored_from"]["files"] == 1,
          "gvisor restore: %r" % r)
    o = X.ex(x, "g1", {"shell": "cat g.txt; stat -c %u g.txt"}, timeout=120)
    check_eq(o["stdout"].split("\n")[0], "gvisor kept",
             "gvisor restored file: %r" % o)
    check_eq(x.app("DELETE", "/v1/sandboxes/g1?archive=discard",
                   timeout=120).status, 200, "gvisor delete")


if __name__ == "__main__":
    S.main()
