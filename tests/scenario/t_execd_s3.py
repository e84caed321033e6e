#!/usr/bin/env python3
"""sluice-execd's archive store in S3-compatible storage (issue 25, point
1): lifecycle.archive_store "s3://bucket/prefix", against a real server
that verifies AWS Signature V4: OpenStack Swift with its s3api
middleware, all in one on loopback, from Debian's packages (swift_s3.py:
s3api checks every request's signature against the key tempauth holds;
a wrong secret is 403 SignatureDoesNotMatch).
Two sluice-execd (two state and runtime directories, one sluiced) share
the store:

- two_hosts: a workspace (a text file, a directory, a link, 20 MiB of
  random bytes: a multipart upload of three parts) archived by host A's
  DELETE is in the store (<key>.json beside <key>.<sha12>.tar.zst under
  the prefix; nothing left in A's archive_dir); a create of the id on
  host B restores it with the files intact, and the store's copy goes;
  another user is refused it (403) as a local one; DELETE
  ?archive=discard on a host where the sandbox never ran removes it
  from the store (then 404); no key's text in either daemon's log; a key
  file others may read is refused at the start, naming the file and
  the mode;
- wrong_key: host A with a wrong secret key: the DELETE fails loudly
  (500, the store's SignatureDoesNotMatch named), the sandbox stays
  "stopped" with that reason, nothing in the store and the workspace
  kept; a create is refused 503 (reason archive_store) while the store
  refuses; the daemon tries the archive again by itself (remove_after
  0: the retry is the archive's own, with backoff) and fails again while
  the key is wrong; the key file fixed (no restart: each request reads
  it), the next retry archives it; host B restores the files;
- expiry_quota: archive_max_count_per_tenant 1: a tenant's second
  archive evicts its first from the store (the other tenant's stays);
  an archive whose metadata says it is older than archive_max_age is
  removed from the store by the sweep at B's start, and B's health and
  metrics count the store's archives as that sweep left them; an
  archive whose file the store lost is refused 409 corrupt and
  discarded;
- drain_to_store: a drained node's idle sandbox goes to the store and
  another node's create takes it up with its files;
- config_errors: a bad bucket, a missing archive_s3, an endpoint that is
  not http(s), a missing key file, a relative or conflicting directory
  are refused with the key's path; a directory is archive_dir.

Skips (77) without root, user namespaces, Swift's servers or boto3
(tools/deps.sh installs them)."""

import hashlib
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, Skip, check, check_eq, log,  # noqa: E402
                     wait_until)
import t_execd as X  # noqa: E402
import swift_s3  # noqa: E402

S = Suite("t_execd_s3", time_limit=600)

BUCKET = "sluice-arch"
PREFIX = "sluice-fleet"


class Store:
    """An all-in-one OpenStack Swift with s3api on loopback (swift_s3.py):
    every S3 request's SigV4 signature is checked against the key
    tempauth holds for the test's user; a wrong secret is
    SignatureDoesNotMatch.  The bucket is made with boto3 (the test's
    own client, to look at the store)."""

    def __init__(self, env):
        try:
            self.swift = swift_s3.SwiftS3(env.path("swift"), log=log)
        except swift_s3.Unavailable as e:
            raise Skip(str(e))
        env.closers.append(self.swift.close)
        self.ep, self.ak, self.sk = (self.swift.ep, self.swift.ak,
                                     self.swift.sk)
        self.s3 = self.swift.client()
        self.s3.create_bucket(Bucket=BUCKET)

    def names(self):
        out, tok = {}, None
        while True:
            kw = {"Bucket": BUCKET, "Prefix": PREFIX + "/"}
            if tok:
                kw["ContinuationToken"] = tok
            r = self.s3.list_objects_v2(**kw)
            for o in r.get("Contents", []):
                out[o["Key"][len(PREFIX) + 1:]] = o["Size"]
            if not r.get("IsTruncated"):
                return out
            tok = r["NextContinuationToken"]


def key_files(env, m, secret=None, name="s3"):
    ak, sk = env.path(name + ".access"), env.path(name + ".secret")
    for p, v in ((ak, m.ak), (sk, secret or m.sk)):
        with open(p, "w") as f:
            f.write(v + "\n")
        os.chmod(p, 0o600)
    return ak, sk


def store_conf(m, ak, sk, **lc):
    return dict({"idle_after": 0, "remove_after": 0,
                 "archive_store": "s3://%s/%s" % (BUCKET, PREFIX),
                 "archive_s3": {"endpoint": m.ep, "region": "us-east-1",
                                "access_key_file": ak,
                                "secret_key_file": sk}}, **lc)


def host(env, ctl, name, lifecycle, start=True):
    """A sluice-execd of its own directories beside the case's sluiced."""
    lc = dict(lifecycle, archive_dir=env.path(name + "-archive"))
    x = X.Execd(env, ctl, runtime_dir=env.path(name + "-run"),
                state_dir=env.path(name + "-state"),
                log={"path": env.path(name + "-audit", "execd.jsonl")},
                lifecycle=lc)
    x.conf_path = env.path(name + ".json")
    x.name = "sluice-execd " + name
    return x.start() if start else x


def two(env, m, lc_a, lc_b=None):
    d, ctl, a = X.start(env, runtime_dir=env.path("a-run"),
                        state_dir=env.path("a-state"),
                        lifecycle=dict(lc_a,
                                       archive_dir=env.path("a-archive")))
    b = host(env, ctl, "b", lc_b or lc_a) if lc_b is not False else None
    return ctl, a, b


def no_secret_logged(m, *xs):
    for x in xs:
        text = "\n".join(x.lines)
        check(m.sk not in text and m.ak not in text,
              "%s's log holds no key" % x.name)
        for dirpath, _, files in os.walk(os.path.dirname(
                x.conf["log"]["path"])):
            for f in files:
                with open(os.path.join(dirpath, f), errors="replace") as fh:
                    t = fh.read()
                check(m.sk not in t, "the audit log holds no secret")


def workspace(x, sid, mib):
    """A text file, a link, a deep directory and mib MiB of random bytes;
    the random file's SHA-256."""
    r = x.app("PUT", "/v1/sandboxes/%s/files/notes/a.txt" % sid,
              raw=b"hello from host A\n")
    check(r.status in (200, 201, 204), "put: %r" % r)
    o = X.ex(x, sid, {"shell": "ln -s notes/a.txt link && mkdir -p d/e && "
                      "echo deep > d/e/f && head -c %dM /dev/urandom > "
                      "big.bin && sha256sum big.bin | cut -c1-64" % mib},
             timeout=120)
    return o["stdout"].strip()


def check_workspace(x, sid, big):
    o = X.ex(x, sid, {"shell": "cat notes/a.txt link d/e/f; readlink link; "
                      "sha256sum big.bin | cut -c1-64"}, timeout=120)
    check_eq(o["stdout"], "hello from host A\nhello from host A\ndeep\n"
             "notes/a.txt\n%s\n" % big, "the restored workspace: %r" % o)


@S.case
def two_hosts(env):
    m = Store(env)
    ak, sk = key_files(env, m)
    lc = store_conf(m, ak, sk)
    ctl, a, b = two(env, m, lc)
    X.create(a, "s1", limits={"disk_mb": 256})
    big = workspace(a, "s1", 20)
    t0 = time.monotonic()
    r = a.app("DELETE", "/v1/sandboxes/s1", timeout=300)
    log("archived to the store in %.1f s: %r" % (time.monotonic() - t0, r))
    check_eq(r.status, 200, "delete (archive) on A: %r" % r)
    k = X.K("s1")
    names = m.names()
    log("the store: %r" % names)
    meta = json.loads(m.s3.get_object(Bucket=BUCKET, Key="%s/%s.json" % (
        PREFIX, k))["Body"].read())
    check(meta["tenant"] == "acme" and meta["user"] == "alice" and
          meta["file"] in names and names[meta["file"]] == meta["bytes"] and
          meta["bytes"] > 2 * (8 << 20), "the store's archive: %r" % meta)
    tar = m.s3.get_object(Bucket=BUCKET, Key="%s/%s" % (
        PREFIX, meta["file"]))["Body"].read()
    check_eq(hashlib.sha256(tar).hexdigest(), meta["sha256"],
             "the multipart upload is the archive")
    # S3's ETag of a multipart object: "<md5 of the parts' md5s>-<parts>"
    etag = m.s3.head_object(Bucket=BUCKET, Key="%s/%s" % (
        PREFIX, meta["file"]))["ETag"]
    check(etag.endswith('-3"'), "uploaded in 3 parts: ETag %s" % etag)
    check_eq(os.listdir(a.conf["lifecycle"]["archive_dir"]), [],
             "nothing left in A's archive_dir")
    # another host of the fleet restores it
    t0 = time.monotonic()
    r = b.app("POST", "/v1/sandboxes", {"id": "s1", "tenant": "acme",
                                        "user": "alice",
                                        "limits": {"disk_mb": 256}},
              timeout=300)
    log("restored from the store in %.1f s" % (time.monotonic() - t0))
    check(r.status == 201 and (r.json.get("restored_from") or {}).get(
        "sha256") == meta["sha256"], "create on B restores: %r" % r)
    check_workspace(b, "s1", big)
    check_eq(m.names(), {}, "the store's copy goes once restored")
    check_eq(sorted(os.listdir(b.conf["lifecycle"]["archive_dir"])), [],
             "nothing left in B's archive_dir")
    # another user of the tenant is refused B's archive as a local one is
    check_eq(b.app("DELETE", "/v1/sandboxes/s1", timeout=300).status, 200,
             "delete on B")
    r = a.app("POST", "/v1/sandboxes", {"id": "s1", "tenant": "acme",
                                        "user": "mallory"}, timeout=120)
    X.check_err(r, 403, "forbidden", "another user's archive")
    check(X.K("s1") + ".json" in m.names(), "and it is still there")
    # "Clear" on a host the sandbox never ran on: the store's copy goes
    r = a.app("DELETE", "/v1/sandboxes/s1?archive=discard", timeout=120)
    check(r.status == 200 and r.json.get("archive") == "discarded",
          "discard from the store: %r" % r)
    check_eq(m.names(), {}, "the store is empty after the discard")
    X.check_err(a.app("DELETE", "/v1/sandboxes/s1?archive=discard",
                      timeout=120), 404, "not_found", "discard again")
    no_secret_logged(m, a, b)
    # a key file others may read: refused at the start, clearly
    os.chmod(sk, 0o644)
    c = host(env, ctl, "c", lc, start=False)
    c.write()
    p = subprocess.run([X.EXECD, "-c", c.conf_path, "--print-config"],
                       capture_output=True, text=True, timeout=30)
    log("0644 key: %s" % p.stderr.strip())
    check(p.returncode != 0 and "secret_key_file" in p.stderr and
          "0644" in p.stderr and m.sk not in p.stderr + p.stdout,
          "a readable key file refused: %r" % p.stderr)
    os.chmod(sk, 0o600)
    p = subprocess.run([X.EXECD, "-c", c.conf_path, "--print-config"],
                       capture_output=True, text=True, timeout=30)
    pc = json.loads(p.stdout)["lifecycle"]
    check(pc["archive_store"] == "s3://%s/%s" % (BUCKET, PREFIX) and
          pc["archive_s3"]["secret_key_file"] == sk and
          m.sk not in p.stdout, "--print-config: %r" % pc)


@S.case
def wrong_key(env):
    m = Store(env)
    ak, sk = key_files(env, m)
    good_ak, good_sk = key_files(env, m, name="good")
    # idle_after 4: the sweep's period is a second (the retries' first
    # wait); remove_after 0: no removal by age, the retry is the
    # archive's own
    ctl, a, b = two(env, m, store_conf(m, ak, sk, idle_after=4),
                    store_conf(m, good_ak, good_sk))
    X.create(a, "w1")
    big = workspace(a, "w1", 1)
    # the key goes wrong (each request reads the file)
    with open(sk, "w") as f:
        f.write("not-the-secret-key-of-this-store\n")
    # a create that cannot ask the store is refused: an empty sandbox
    # archived later would replace the store's archive of its id
    r = a.app("POST", "/v1/sandboxes", {"id": "w2", "tenant": "acme",
                                        "user": "alice"}, timeout=120)
    X.check_err(r, 503, "backend_unavailable", "create without the store")
    check(r.json["error"].get("reason") == "archive_store" and
          "SignatureDoesNotMatch" in r.json["error"]["message"],
          "the store's error named: %r" % r)
    r = a.app("DELETE", "/v1/sandboxes/w1", timeout=120)
    log("wrong key: %r" % r)
    check(r.status == 500 and "SignatureDoesNotMatch" in
          r.json["error"]["message"] and m.sk not in r.body.decode(),
          "the delete fails loudly: %r" % r)
    g = a.app("GET", "/v1/sandboxes/w1")
    check(g.status == 200 and g.json.get("state") == "stopped" and
          "SignatureDoesNotMatch" in json.dumps(g.json),
          "stopped, the store's error named: %r" % g)
    check_eq(m.names(), {}, "nothing in the store")
    ws = os.path.join(a.state_dir, X.K("w1"), "workspace")
    check(os.path.isdir(ws), "the workspace is kept")
    # the daemon tries again by itself, and fails again while the key
    # is wrong: still stopped, still nothing in the store
    wait_until(lambda: sum("archive tried again, failed" in ln
                           for ln in a.lines) >= 2, 30,
               what="two retries of the archive, failed")
    check(a.app("GET", "/v1/sandboxes/w1").json.get("state") == "stopped"
          and m.names() == {} and os.path.isdir(ws),
          "still stopped, kept, nothing in the store")
    # the key fixed on disk (no restart, no reload): the next retry
    # archives it
    with open(sk, "w") as f:
        f.write(m.sk + "\n")
    t0 = time.monotonic()
    wait_until(lambda: a.app("GET", "/v1/sandboxes/w1").status == 404, 60,
               what="the retry's archive")
    log("archived by a retry %.1f s after the key was fixed" % (
        time.monotonic() - t0))
    check(not os.path.exists(ws), "the workspace went with the archive")
    check(X.K("w1") + ".json" in m.names(), "in the store now")
    r = b.app("POST", "/v1/sandboxes", {"id": "w1", "tenant": "acme",
                                        "user": "alice"}, timeout=120)
    check(r.status == 201 and r.json.get("restored_from"),
          "restored on B: %r" % r)
    check_workspace(b, "w1", big)
    no_secret_logged(m, a, b)


@S.case
def expiry_quota(env):
    m = Store(env)
    ak, sk = key_files(env, m)
    ctl, a, _ = two(env, m, store_conf(
        m, ak, sk, archive_max_count_per_tenant=1), lc_b=False)
    for sid, tenant in (("q1", "acme"), ("q2", "acme"), ("o1", "other")):
        X.create(a, sid, tenant=tenant)
        r = a.app("PUT", "/v1/sandboxes/%s/files/x.txt" % sid,
                  raw=sid.encode())
        check(r.status in (200, 201, 204), "put: %r" % r)
        check_eq(a.app("DELETE", "/v1/sandboxes/%s" % sid,
                       timeout=120).status, 200, "delete " + sid)
        time.sleep(1.1)     # "archived" is in seconds: an order
    names = m.names()
    log("after the quota: %r" % names)
    check(X.K("q1") + ".json" not in names and X.K("q2") + ".json" in names
          and X.K("o1", "other") + ".json" in names,
          "acme's oldest evicted from the store, other's kept: %r" % names)
    check_eq(len([n for n in names if n.endswith(".tar.zst")]), 2,
             "the evicted archive's file went too")
    # expiry: an archive made long ago (by its metadata)
    k = X.K("o1", "other")
    meta = json.loads(m.s3.get_object(Bucket=BUCKET, Key="%s/%s.json" % (
        PREFIX, k))["Body"].read())
    meta["archived"] -= 10 * 86400
    m.s3.put_object(Bucket=BUCKET, Key="%s/%s.json" % (PREFIX, k),
                    Body=json.dumps(meta).encode())
    b = host(env, ctl, "b", store_conf(m, ak, sk, archive_max_age=86400))
    # the sweep deletes the metadata, then the tar: wait for both
    wait_until(lambda: not any(n.startswith(k) for n in m.names()), 30,
               what="the expired archive swept from the store")
    names = m.names()
    check(X.K("q2") + ".json" in names and not any(
        n.startswith(k) for n in names), "expired gone, q2 kept: %r" % names)
    # health and metrics show the store's archives as B's sweep left them
    st = X.root_call(b.sock, "GET", "/v1/health").json["storage"]
    q2 = [n for n in names if n.startswith(X.K("q2")) and
          n.endswith(".tar.zst")]
    check(st["archives_count"] == 1 and len(q2) == 1 and
          st["archives_bytes"] == names[q2[0]], "health: %r" % st)
    mt = X.metrics(b)
    check(mt.get('sluice_execd_archives{tenant="acme"}') == 1 and
          'sluice_execd_archives{tenant="other"}' not in mt,
          "metrics: %r" % {k: v for k, v in mt.items() if "archive" in k})
    # the store lost q2's file: refused as a local archive's would be
    m.s3.delete_object(Bucket=BUCKET, Key="%s/%s" % (PREFIX, q2[0]))
    r = b.app("POST", "/v1/sandboxes", {"id": "q2", "tenant": "acme",
                                        "user": "alice"}, timeout=120)
    X.check_err(r, 409, "conflict", "a missing archive file")
    check(r.json["error"].get("archive") == "corrupt", "corrupt: %r" % r)
    check_eq(X.root_call(b.sock, "DELETE", "/v1/sandboxes/q2?archive=discard"
                         "&tenant=acme").status, 200, "discard q2")
    check_eq(m.names(), {}, "nothing left in the store")
    no_secret_logged(m, a, b)


@S.case
def drain_to_store(env):
    """PUT /v1/node {"draining": true} on A: its idle sandbox is archived
    to the store and removed, A reports itself empty, a create there is
    503 draining, and B takes the sandbox up with its files."""
    m = Store(env)
    ak, sk = key_files(env, m)
    ctl, a, b = two(env, m, store_conf(m, ak, sk))
    X.create(a, "d1")
    big = workspace(a, "d1", 2)
    r = X.root_call(a.sock, "PUT", "/v1/node", {"draining": True})
    check(r.status == 200 and r.json["draining"] is True, "drain: %r" % r)
    wait_until(lambda: a.app("GET", "/v1/sandboxes/d1").status == 404, 30,
               what="the drained sandbox archived and removed")
    wait_until(lambda: X.root_call(a.sock, "GET", "/v1/node").json.get(
        "remaining") == 0, 10, what="A empty")
    r = a.app("POST", "/v1/sandboxes", {"id": "d2", "tenant": "acme",
                                        "user": "alice"})
    X.check_err(r, 503, "backend_unavailable", "create on a draining node")
    check(X.K("d1") + ".json" in m.names(), "in the store: %r" % m.names())
    r = b.app("POST", "/v1/sandboxes", {"id": "d1", "tenant": "acme",
                                        "user": "alice"}, timeout=120)
    check(r.status == 201 and r.json.get("restored_from"),
          "B takes it up: %r" % r)
    check_workspace(b, "d1", big)
    check_eq(m.names(), {}, "the store's copy gone")
    check_eq(X.root_call(a.sock, "PUT", "/v1/node",
                         {"draining": False}).status, 200, "undrain A")
    check_eq(b.app("DELETE", "/v1/sandboxes/d1?archive=discard",
                   timeout=120).status, 200, "discard d1 on B")


@S.case
def config_errors(env):
    """The store's configuration refused with the key's place and why."""
    X.preflight()
    ak, sk = env.path("ak"), env.path("sk")
    for p in (ak, sk):
        with open(p, "w") as f:
            f.write("k\n")
        os.chmod(p, 0o600)
    s3 = {"endpoint": "http://127.0.0.1:9", "region": "us-east-1",
          "access_key_file": ak, "secret_key_file": sk}
    for lc, want in (
            ({"archive_store": "s3://Bucket/x", "archive_s3": s3},
             "lifecycle.archive_store: the bucket: a-z"),
            ({"archive_store": "s3://bucket/x"},
             "needs lifecycle.archive_s3"),
            ({"archive_store": "s3://bucket/x",
              "archive_s3": dict(s3, endpoint="ftp://h")},
             "lifecycle.archive_s3.endpoint: http:// or https://"),
            ({"archive_store": "s3://bucket/x",
              "archive_s3": dict(s3, secret_key_file=env.path("none"))},
             "lifecycle.archive_s3.secret_key_file"),
            ({"archive_store": "s3://bucket/x",
              "archive_s3": dict(s3, endpoint="http://h:9000/path")},
             "lifecycle.archive_s3.endpoint: http(s)://host[:port]"),
            ({"archive_store": "relative/dir"}, "an absolute path"),
            ({"archive_store": "/a", "archive_dir": "/b"},
             "archive_dir names another directory"),
            ({"archive_s3": s3}, "only with an archive_store of s3://")):
        p = env.path("bad.json")
        with open(p, "w") as f:
            json.dump({"lifecycle": lc}, f, indent=1)
        r = subprocess.run([X.EXECD, "-c", p, "--check-config"],
                           capture_output=True, text=True, timeout=30)
        check(r.returncode == 1 and want in r.stderr,
              "%r: want %r, got %r" % (lc, want, r.stderr))
    # a directory: today's archive_dir by another name
    with open(p, "w") as f:
        json.dump({"lifecycle": {"archive_store": "/srv/arch"}}, f)
    r = subprocess.run([X.EXECD, "-c", p, "--print-config"],
                       capture_output=True, text=True, timeout=30)
    lc = json.loads(r.stdout)["lifecycle"]
    check(lc["archive_store"] == "/srv/arch" and lc["archive_dir"] ==
          "/srv/arch" and lc.get("archive_s3", 0) is None,
          "a directory (no S3 store: archive_s3 null): %r" % lc)


if __name__ == "__main__":
    S.main()
