#!/usr/bin/env python3
"""sluice-execd, batch files (issue 24 point 7): PUT and GET
/v1/sandboxes/{id}/archive?path=DIR.

round_trip: a tar of subdirectories, an empty directory, a symbolic link
and a 5 MiB file PUT under up/ (made), the counts answered, the files the
sandbox user's, their SHA-256 inside the sandbox; GET of up/ gives the
same tree back (the link as a link, the file's SHA-256); a gzip body
too; a second PUT merges (a file replaced, the rest kept); a directory
of the archive where a file is: 409, nothing changed; GET of a missing
directory, of a file, of a link the sandbox planted to /etc: 404.

hostile: absolute names, "..", a link then a file through it, a device,
a fifo, hard links to /etc/passwd or to a name not made: each 400
naming the entry, nothing written (the workspace's listing unchanged,
no staging directory left).

limits: a body over max_archive_bytes: 413; a gzip body that expands
past it: 413; a tar larger than the workspace's quota: 413, nothing
left half-written.

Skips (77) without root or user namespaces."""

import gzip
import hashlib
import io
import os
import sys
import tarfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Suite, check, check_eq  # noqa: E402
import execdlib  # noqa: E402
from t_execd import start, create, ex, check_err  # noqa: E402

S = Suite("t_execd_tar", time_limit=600)

MAXA = 12 << 20


def tar_of(entries, fmt=tarfile.PAX_FORMAT):
    """entries: (name, kind, data/target); kind file, dir, sym, hard,
    chr, fifo."""
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w", format=fmt) as t:
        for name, kind, v in entries:
            i = tarfile.TarInfo(name)
            i.mtime = 1700000000
            i.mode = 0o755 if kind == "dir" else 0o644
            if kind == "file":
                i.size = len(v)
                t.addfile(i, io.BytesIO(v))
                continue
            i.type = {"dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE,
                      "hard": tarfile.LNKTYPE, "chr": tarfile.CHRTYPE,
                      "fifo": tarfile.FIFOTYPE}[kind]
            if kind in ("sym", "hard"):
                i.linkname = v
            if kind == "chr":
                i.devmajor, i.devminor = 1, 3
            t.addfile(i)
    return b.getvalue()


def put(x, sid, data, path="up", client=None):
    return (client or x.app)("PUT", "/v1/sandboxes/%s/archive?path=%s"
                             % (sid, path), raw=data,
                             headers=[("Content-Type", "application/x-tar")],
                             timeout=120)


def listing(ws):
    out = []
    for root, dirs, files in os.walk(ws):
        for n in dirs + files:
            p = os.path.join(root, n)
            st = os.lstat(p)
            out.append((os.path.relpath(p, ws), st.st_mode, st.st_size,
                        st.st_mtime_ns))
    return sorted(out)


@S.case
def round_trip(env):
    d, ctl, x = start(env, max_archive_bytes=MAXA)
    create(x, "t1")
    ws = os.path.join(x.conf["state_dir"], execdlib.key("acme", "t1"),
                      "workspace")
    big = os.urandom(5 << 20)
    want = hashlib.sha256(big).hexdigest()
    data = tar_of([("a/", "dir", None), ("a/b/c.txt", "file", b"hello\n"),
                   ("a/empty/", "dir", None), ("a/link", "sym", "b/c.txt"),
                   ("big.bin", "file", big),
                   ("./top.txt", "file", b"top\n")])
    r = put(x, "t1", data)
    check_eq(r.status, 200, "put: %r" % r)
    check_eq({k: r.json[k] for k in ("files", "dirs", "links", "bytes")},
             {"files": 3, "dirs": 3, "links": 1,
              "bytes": len(big) + 10}, "counts: %r" % r.json)
    check_eq(r.json["path"], "up", "path")
    st = os.lstat(os.path.join(ws, "up", "a", "b", "c.txt"))
    check(st.st_uid == os.lstat(ws).st_uid and st.st_uid >= 1000000,
          "owner: %d" % st.st_uid)
    check(os.path.islink(os.path.join(ws, "up", "a", "link")), "a link")
    check(os.path.isdir(os.path.join(ws, "up", "a", "empty")), "empty dir")
    check_eq([n for n in os.listdir(ws) if n.startswith(".sluice-tar")], [],
             "no staging directory left")
    o = ex(x, "t1", {"shell": "sha256sum up/big.bin; cat up/a/link"})
    check(o["stdout"].startswith(want) and "hello" in o["stdout"],
          "inside: %r" % o)
    # back as a tar
    r = x.app("GET", "/v1/sandboxes/t1/archive?path=up", timeout=120)
    check(r.status == 200 and r.header("Content-Type") ==
          "application/x-tar", "get: %r" % r)
    t = tarfile.open(fileobj=io.BytesIO(r.body))
    m = {i.name.rstrip("/"): i for i in t.getmembers()}
    check_eq(sorted(m), ["a", "a/b", "a/b/c.txt", "a/empty", "a/link",
                         "big.bin", "top.txt"], "names")
    check(m["a/link"].issym() and m["a/link"].linkname == "b/c.txt",
          "link kept as a link")
    check(m["a/empty"].isdir(), "empty dir kept")
    check_eq(hashlib.sha256(t.extractfile("big.bin").read()).hexdigest(),
             want, "sha256 of the 5 MiB file")
    check_eq(t.extractfile("a/b/c.txt").read(), b"hello\n", "small file")
    # the whole workspace
    r = x.app("GET", "/v1/sandboxes/t1/archive", timeout=120)
    names = [i.name for i in tarfile.open(fileobj=io.BytesIO(r.body))]
    check("up/a/b/c.txt" in names, "whole workspace: %r" % names[:10])
    # gzip, and a merge: one file replaced, the rest kept
    r = put(x, "t1", gzip.compress(tar_of([("a/b/c.txt", "file", b"new\n"),
                                           ("a/b/d.txt", "file", b"d\n")])))
    check_eq(r.status, 200, "gzip put: %r" % r)
    with open(os.path.join(ws, "up", "a", "b", "c.txt"), "rb") as f:
        check_eq(f.read(), b"new\n", "replaced")
    check(os.path.exists(os.path.join(ws, "up", "big.bin")) and
          os.path.exists(os.path.join(ws, "up", "a", "b", "d.txt")),
          "merged")
    # a directory of the archive where up/ has a file: 409, nothing
    before = listing(ws)
    r = put(x, "t1", tar_of([("new.txt", "file", b"n"),
                             ("top.txt/", "dir", None),
                             ("top.txt/x", "file", b"x")]))
    check_err(r, 409, "conflict", "dir over a file")
    check_eq(listing(ws), before, "nothing written after a conflict")
    # a path that is a file; not a tar
    check_err(put(x, "t1", tar_of([("f", "file", b"f")]),
                  path="up/top.txt/sub"), 409, "conflict",
              "path under a file")
    check_eq(listing(ws), before, "nothing written after a bad path")
    check_err(put(x, "t1", b"not a tar at all" * 100), 400, "bad_request",
              "not a tar")
    check_err(put(x, "t1", data, path="/etc"), 400, "bad_request",
              "an absolute path outside /workspace")
    # GETs that find nothing
    check_err(x.app("GET", "/v1/sandboxes/t1/archive?path=nope"), 404,
              "not_found", "missing dir")
    check_err(x.app("GET", "/v1/sandboxes/t1/archive?path=up/top.txt"), 404,
              "not_found", "a file")
    ex(x, "t1", {"shell": "ln -s /etc escape; ln -s ../../../../../etc up/e2"})
    r = x.app("GET", "/v1/sandboxes/t1/archive?path=escape")
    check_err(r, 404, "not_found", "a planted link to /etc")
    r = x.app("GET", "/v1/sandboxes/t1/archive?path=up/e2")
    check_err(r, 404, "not_found", "a planted climbing link")
    r = x.app("GET", "/v1/sandboxes/t1/archive?path=up")
    m = {i.name: i for i in tarfile.open(fileobj=io.BytesIO(r.body))}
    check(m["e2"].issym(), "a link in the tree is sent as a link")
    # a put through a planted link stays in the workspace
    r = put(x, "t1", tar_of([("passwd", "file", b"mine\n")]), path="escape")
    check_err(r, 404, "not_found", "put under a link to nowhere inside")
    ex(x, "t1", {"shell": "mkdir etc"})
    r = put(x, "t1", tar_of([("passwd", "file", b"mine\n")]), path="escape")
    check_eq(r.status, 200, "put under a planted link: %r" % r)
    check(os.path.exists(os.path.join(ws, "etc", "passwd")) and
          open("/etc/passwd", "rb").read() != b"mine\n",
          "resolved inside the workspace")
    # the auditor may not
    check_eq(x.auditor("GET", "/v1/sandboxes/t1/archive").status, 403,
             "auditor")


@S.case
def hostile(env):
    d, ctl, x = start(env, max_archive_bytes=MAXA)
    create(x, "h1")
    ws = os.path.join(x.conf["state_dir"], execdlib.key("acme", "h1"),
                      "workspace")
    x.app("PUT", "/v1/sandboxes/h1/files/keep.txt", raw=b"k")
    ok = ("ok.txt", "file", b"ok")
    cases = [
        ("absolute", [ok, ("/etc/evil", "file", b"x")], "/etc/evil"),
        ("dotdot", [ok, ("../evil", "file", b"x")], "../evil"),
        ("dotdot deep", [ok, ("a/../../evil", "file", b"x")],
         "a/../../evil"),
        ("link then file", [ok, ("l", "sym", "/etc"),
                            ("l/passwd", "file", b"x")], "l/passwd"),
        ("relative link then file", [ok, ("l", "sym", "."),
                                     ("l/x", "file", b"x")], "l/x"),
        ("device", [ok, ("null", "chr", None)], "null"),
        ("fifo", [ok, ("p", "fifo", None)], "p"),
        ("hard link out", [ok, ("pw", "hard", "/etc/passwd")], "pw"),
        ("hard link climbing", [ok, ("pw", "hard", "../../x")], "pw"),
        ("hard link to nothing made", [ok, ("pw", "hard", "keep.txt")],
         "pw"),
    ]
    before = listing(ws)
    for what, ents, entry in cases:
        r = put(x, "h1", tar_of(ents, fmt=tarfile.GNU_FORMAT), path="in")
        check_err(r, 400, "bad_request", what)
        check_eq(r.json["error"].get("entry"), entry, "%s: entry" % what)
        check_eq(listing(ws), before, "%s: nothing written" % what)
    check(os.path.exists("/etc/passwd") and not os.path.exists("/etc/evil"),
          "host untouched")


@S.case
def limits(env):
    d, ctl, x = start(env, max_archive_bytes=MAXA)
    create(x, "q1", limits={"disk_mb": 8})
    ws = os.path.join(x.conf["state_dir"], execdlib.key("acme", "q1"),
                      "workspace")
    before = listing(ws)
    # larger than the workspace (8 MB), within max_archive_bytes
    data = tar_of([("small", "file", b"s"),
                   ("big", "file", os.urandom(10 << 20))])
    check_err(put(x, "q1", data), 413, "too_large", "over the quota")
    check_eq(listing(ws), before, "nothing left after the quota")
    ex(x, "q1", {"shell": "head -c 4000000 /dev/zero > after"})
    # over max_archive_bytes: the body
    r = put(x, "q1", b"\0" * (MAXA + 1))
    check_err(r, 413, "too_large", "body over max_archive_bytes")
    r = put(x, "q1", b"\0" * (MAXA + (4 << 20)))
    check_eq(r.status, 413, "far over max_archive_bytes")
    # over it once uncompressed
    bomb = gzip.compress(tar_of([("z", "file", b"\0" * (MAXA + 4096))]))
    check(len(bomb) < MAXA, "bomb small")
    check_err(put(x, "q1", bomb), 413, "too_large", "expands past the max")
    os.unlink(os.path.join(ws, "after"))
    check_eq(listing(ws), before, "nothing left after the limits")


if __name__ == "__main__":
    S.main()
