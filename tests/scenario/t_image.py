#!/usr/bin/env python3
"""sluice-run on images, as root, on both backends: a sandbox of profile
minimal has the image as its read-only root, and nothing of the host's
/usr, /usr/local, /opt or /home shows (a tool only the host has is absent);
PID 1's command line and the sandbox's mountinfo name no host path;
python3 and curl inside reach a loopback upstream only through the broker;
the record, create's answer and list carry the profile and the image's
digest; the shim must be static; destroy leaves no mount and no loop
device (the loop fallback, forced, included); a rebuilt profile leaves
running sandboxes on their image, new ones get the new image, an image in
use is refused to image rm and goes with its last sandbox; a profile
without an image is refused with image_missing, a profile the tenant may
not use with profile_forbidden (exit 9).

The minimal image comes from SLUICE_IMAGE_CACHE (default
/var/cache/sluice-images) when that directory exists, outside the clone,
keyed by the profile's inputs (sluice-run image build --cached: a second
or so when it holds one, a build otherwise), else it is built into this
run's directory (90 to 135 s here; mmdebstrap from the host's Debian
sources).

Skips (77) when not root, without user namespaces, mmdebstrap, mkfs.erofs
or sluice-shim-static, and the gVisor cases without runsc; fails then
under SLUICE_TEST_STRICT=1."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, Skip, check, check_eq, log,  # noqa: E402
                     wait_until)
import runlib  # noqa: E402
from runlib import (RUN, hello_upstream,  # noqa: E402
                    reaches_only_through_broker)

S = Suite("t_image", time_limit=1500)

BLD = os.path.abspath(os.environ.get("SLUICE_BUILDDIR", "."))
SRC = os.path.abspath(os.environ.get("SLUICE_SRCDIR", "."))
PROFILES = os.path.join(SRC, "sandbox-glue", "executor", "image",
                        "profiles")
SHIM_STATIC = os.path.join(BLD, "sandbox-glue", "shim", "sluice-shim-static")
CACHE = os.environ.get("SLUICE_IMAGE_CACHE", "/var/cache/sluice-images")
EX_IMAGE = 9

# tools of a build host that no image of profile minimal has
HOST_ONLY = ["/usr/bin/gcc", "/usr/bin/make", "/usr/bin/mmdebstrap",
             "/usr/bin/mkfs.erofs", "/usr/sbin/runsc", "/usr/bin/docker",
             "/usr/bin/autoreconf", "/usr/bin/pkg-config", "/usr/bin/nft"]

_store = {}


def preflight(gvisor=False):
    if os.geteuid() != 0:
        raise Skip("needs root")
    if not os.path.exists(RUN):
        raise Skip("sluice-run not built")
    if not os.access(SHIM_STATIC, os.X_OK):
        raise Skip("sluice-shim-static not built (no static libc)")
    for tool, pkg in (("mmdebstrap", "mmdebstrap"),
                      ("mkfs.erofs", "erofs-utils")):
        if shutil.which(tool) is None:
            raise Skip("%s not installed (apt-get install %s)" % (tool, pkg))
    r = subprocess.run(["unshare", "-U", "-m", "-p", "-n", "-f", "true"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        raise Skip("no user namespaces: %s" % r.stderr.decode().strip())
    if gvisor and runlib_runsc() is None:
        raise Skip("runsc not installed (Debian package runsc)")


def runlib_runsc():
    return shutil.which("runsc") or next(
        (p for p in ("/usr/sbin/runsc", "/usr/bin/runsc")
         if os.access(p, os.X_OK)), None)


def image_conf(store, **extra):
    c = {"image_dir": store, "profiles_dir": PROFILES,
         "shim_static": SHIM_STATIC}
    c.update(extra)
    return c


def minimal_store(env):
    """The store with the minimal image (built once per run at most)."""
    if "dir" in _store:
        return _store["dir"]
    if os.path.isdir(CACHE):
        d = CACHE
    else:
        d = os.path.join(S.root, "images")
        os.makedirs(d, exist_ok=True)
    conf = env.path("build.json")
    with open(conf, "w") as f:
        json.dump(image_conf(d), f)
    t0 = time.monotonic()
    r = subprocess.run([RUN, "--config", conf, "--state-dir",
                        env.path("bstate"), "--json", "image", "build",
                        "--cached", "minimal"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=1200)
    took = time.monotonic() - t0
    if r.returncode != 0:
        raise Skip("cannot build the minimal image: %s" %
                   r.stderr.decode().strip()[-400:])
    o = json.loads(r.stdout.decode())
    log("minimal image %s in %s: %s in %.1f s (%d bytes)" % (
        o["digest"][:12], d, "cached" if o["cached"] else "built", took,
        o["size"]))
    _store.update(dir=d, digest=o["digest"])
    return d


def own_store(env):
    """A store of this case's own holding a copy of the minimal image:
    the users and loop devices of its file are this case's alone, even
    when other runs share the cache."""
    src, x = minimal_store(env), _store["digest"]
    store = env.path("store")
    os.makedirs(os.path.join(store, "profiles"))
    shutil.copy(image_file(src, x), image_file(store, x))
    shutil.copy(os.path.join(src, x + ".json"), os.path.join(store,
                                                             x + ".json"))
    with open(os.path.join(store, "profiles", "minimal"), "w") as f:
        f.write(x + "\n")
    return store


def loops_of(path):
    """Loop devices whose backing file is path."""
    out = []
    for n in os.listdir("/sys/block"):
        try:
            with open("/sys/block/%s/loop/backing_file" % n) as f:
                if f.read().strip() == path:
                    out.append(n)
        except OSError:
            pass
    return out


def image_file(store, digest):
    return os.path.join(store, digest + ".erofs")


def start(env, gvisor=False, upstream_port=None, **cfg):
    store = cfg.pop("image_dir", None) or own_store(env)
    if gvisor:
        cfg.setdefault("backend", "gvisor")
    conf = image_conf(store)
    conf.update(cfg)
    d, run = runlib.start(env, lambda: preflight(gvisor), upstream_port,
                          **conf)
    return store, d, run


def host_hidden(run, chat, store):
    """Nothing of the host's /usr, /usr/local, /opt, /home; no host path
    in PID 1's command line nor in the sandbox's mountinfo."""
    present = [p for p in HOST_ONLY if os.path.exists(p)]
    check(present, "no host-only tool to look for")
    o = run.exec(chat, "for p in %s; do [ -e $p ] && echo $p; done; "
                 "find /usr/local/bin /opt /home -mindepth 1 -maxdepth 1; "
                 "echo --; "
                 "tr '\\0' ' ' < /proc/1/cmdline; echo; echo --; "
                 "cat /proc/1/mountinfo; echo --; cat /proc/self/mountinfo"
                 % " ".join(present))
    check_eq(o["exit_code"], 0, "look around: %r" % o)
    parts = o["stdout"].split("--\n")
    lines = parts[0].splitlines()
    check(not any(p in lines for p in present),
          "host tools visible: %r" % lines)
    check_eq(sorted(x for x in lines if x not in present),
             ["/home/user", "/opt/sluice"], "/usr/local/bin, /opt, /home")
    cmdline = parts[1].strip()
    for bad in (store, BLD, SRC, run.state, "sluice-run", "--config"):
        check(bad not in cmdline, "PID 1's command line: %r" % cmdline)
    if run.conf_backend() == "ns":
        check_eq(cmdline, "sbx-init", "PID 1 of the ns backend")
    for mi in (parts[2], parts[3]):
        for bad in (store, BLD, SRC, "/usr/lib/sluice"):
            check(bad not in mi, "%s in the sandbox's mountinfo:\n%s" % (
                  bad, mi))
        roots = [ln.split()[3] + " " + ln.split()[4]
                 for ln in mi.splitlines() if len(ln.split()) > 4]
        check(not any(r.split()[0].startswith(("/usr", "/opt", "/home"))
                      for r in roots), "host trees bound in: %r" % roots)


def common(env, gvisor):
    port = hello_upstream(env)
    store, d, run = start(env, gvisor, port)
    digest = _store["digest"]
    img = image_file(store, digest)
    r, o = run.json("create", "--chat", "im1", "--profile", "minimal")
    check_eq(r.returncode, 0, "create: %r" % r.stderr)
    run.chats.append("im1")
    check_eq((o["profile"], o["image"], o["image_path"]),
             ("minimal", digest, img), "create's answer")
    with open(os.path.join(run.state, "im1", "record.json")) as f:
        rec = json.load(f)
    check_eq((rec["profile"], rec["image"]), ("minimal", digest), "record")
    check_eq(rec["shim"], SHIM_STATIC, "the static shim")
    _, lst = run.json("list")
    check_eq((lst["sandboxes"][0]["profile"], lst["sandboxes"][0]["image"]),
             ("minimal", digest), "list")
    host_hidden(run, "im1", store)
    reaches_only_through_broker(run, "im1", port)
    o = run.exec("im1", "id -un; id -u; touch /usr/x 2>/dev/null || "
                 "echo usr-ro; touch /x 2>/dev/null || echo root-ro; "
                 "touch /tmp/x ~/x /workspace/x && echo rw; "
                 "cat /etc/hostname; [ -s /etc/resolv.conf ] || echo nodns")
    uid = "1000" if not gvisor else str(rec["host_uid"])
    check_eq(o["stdout"], "user\n%s\nusr-ro\nroot-ro\nrw\nsandbox\nnodns\n"
             % uid, "identity and mounts: %r" % o)
    r = run("write", "--chat", "im1", "f.txt", stdin=b"data\n")
    check_eq(r.returncode, 0, "write: %r" % r.stderr)
    r = run("read", "--chat", "im1", "f.txt")
    check_eq(r.stdout, b"data\n", "read")
    _, li = run.json("image", "list")
    check_eq([(i["digest"], i["users"]) for i in li["images"]
              if i["digest"] == digest], [(digest, 1)], "image list users")
    r = run("image", "rm", "minimal")
    check(r.returncode == EX_IMAGE and b"image_in_use" in r.stderr,
          "image rm in use: %d %r" % (r.returncode, r.stderr))
    return store, run, img


def gone(run, chat, img):
    r = run("destroy", "--chat", chat)
    check_eq(r.returncode, 0, "destroy: %r" % r.stderr)
    run.chats.remove(chat)
    mi = open("/proc/self/mountinfo").read()
    check(run.state not in mi, "mounts left on the host:\n%s" % mi)
    # the loop device, if any, clears itself once the mount is gone
    t0 = time.monotonic()
    while loops_of(img) and time.monotonic() - t0 < 10:
        time.sleep(0.05)
    check_eq(loops_of(img), [], "loop devices left")
    check(not os.path.exists(os.path.join(run.state, chat)), "state left")


@S.case
def ns_image_root(env):
    store, run, img = common(env, False)
    gone(run, "im1", img)
    _, li = run.json("image", "list")
    check_eq([i["users"] for i in li["images"]
              if i["digest"] == _store["digest"]], [0], "users after")


@S.case
def gvisor_image_root(env):
    preflight(gvisor=True)
    store, run, img = common(env, True)
    check(os.path.join(run.state, "im1") in
          open("/proc/self/mountinfo").read(), "no rootfs mount on the host")
    # the image has the agent's mount point (/dev/sluice-agent): its
    # agent listens, so commands fork inside rather than by runsc exec
    check(os.path.exists(os.path.join(run.state, "im1", "agent",
                                      "agent.sock")),
          "the agent's socket in an image's gVisor sandbox")
    gone(run, "im1", img)


@S.case
def loop_fallback(env):
    """SLUICE_IMAGE_MOUNT=loop: what a kernel without file-backed EROFS
    mounts; the loop device goes with the sandbox on both backends."""
    os.environ["SLUICE_IMAGE_MOUNT"] = "loop"
    try:
        store, d, run = start(env)
        img = image_file(store, _store["digest"])
        before = loops_of(img)
        run.create("lp1", "--profile", "minimal")
        check_eq(len(loops_of(img)) - len(before), 1, "a loop device")
        o = run.exec("lp1", "python3 -c 'print(6*7)'")
        check_eq(o["stdout"], "42\n", "python3 on the loop device")
        gone(run, "lp1", img)
        if runlib_runsc() is not None:
            r = run("create", "--chat", "lp2", "--profile", "minimal",
                    "--backend", "gvisor")
            check_eq(r.returncode, 0, "gvisor create: %r" % r.stderr)
            run.chats.append("lp2")
            check_eq(len(loops_of(img)) - len(before), 1, "gvisor's loop")
            gone(run, "lp2", img)
    finally:
        del os.environ["SLUICE_IMAGE_MOUNT"]


@S.case
def rebuild_and_refusals(env):
    """A new image for a profile (here the same file system with one more
    block after it: another digest) leaves running sandboxes on theirs;
    an image in use is kept until its last sandbox is gone."""
    store = own_store(env)
    x = _store["digest"]
    _, d, run = start(env, image_dir=store)
    run.create("old", "--profile", "minimal")
    # the rebuild
    tmp = os.path.join(store, "new.tmp")
    shutil.copy(image_file(store, x), tmp)
    with open(tmp, "ab") as f:
        f.write(b"\0" * 4096)
    y = subprocess.run(["sha256sum", tmp], stdout=subprocess.PIPE
                       ).stdout.decode().split()[0]
    os.rename(tmp, image_file(store, y))
    with open(os.path.join(store, "profiles", "minimal"), "w") as f:
        f.write(y + "\n")
    r, o = run.json("create", "--chat", "new", "--profile", "minimal")
    check_eq((r.returncode, o.get("image")), (0, y), "new sandbox, new image")
    run.chats.append("new")
    o = run.exec("old", "python3 -c 'print(6*7)'")
    check_eq(o["stdout"], "42\n", "the old sandbox still runs")
    with open(os.path.join(run.state, "old", "record.json")) as f:
        check_eq(json.load(f)["image"], x, "the old sandbox's image")
    r = run("image", "rm", x[:12])
    check(r.returncode == EX_IMAGE and b"image_in_use" in r.stderr,
          "rm of the old image in use: %d %r" % (r.returncode, r.stderr))
    r = run("gc")
    check(os.path.exists(image_file(store, x)), "gc removed an image in use")
    gone(run, "old", image_file(store, x))
    check(not os.path.exists(image_file(store, x)),
          "the replaced image outlived its last sandbox")
    check(os.path.exists(image_file(store, y)), "the newest image went")
    gone(run, "new", image_file(store, y))
    check(os.path.exists(image_file(store, y)), "the profile's image went")
    r = run("image", "rm", "minimal")
    check_eq(r.returncode, 0, "image rm: %r" % r.stderr)
    check(not os.path.exists(image_file(store, y)), "rm left the file")
    r = run("create", "--chat", "none", "--profile", "minimal")
    check(r.returncode == EX_IMAGE and b"image_missing" in r.stderr and
          not os.path.exists(os.path.join(run.state, "none")),
          "create without an image: %d %r" % (r.returncode, r.stderr))
    r = run("create", "--chat", "none", "--profile", "nosuch")
    check(r.returncode == EX_IMAGE and b"image_missing" in r.stderr,
          "create of an unknown profile: %d %r" % (r.returncode, r.stderr))


@S.case
def profiles_and_shim(env):
    store, d, run = start(env, tenant_profiles={"acme": ["minimal"],
                                                "*": ["host"]})
    r = run("create", "--chat", "t1", "--tenant", "acme", "--profile",
            "host")
    check(r.returncode == EX_IMAGE and b"profile_forbidden" in r.stderr,
          "acme on host: %d %r" % (r.returncode, r.stderr))
    r = run("create", "--chat", "t1", "--tenant", "other", "--profile",
            "minimal")
    check(r.returncode == EX_IMAGE and b"profile_forbidden" in r.stderr,
          "other on minimal: %d %r" % (r.returncode, r.stderr))
    run.create("t1", "--tenant", "acme", "--profile", "minimal")
    run.create("t2", "--tenant", "other")       # profile "host"
    _, lst = run.json("list")
    check_eq(sorted((s["chat"], s["profile"], s["image"])
                    for s in lst["sandboxes"]),
             [("t1", "minimal", _store["digest"]), ("t2", "host", "")],
             "profiles in list")
    # an image's sandbox needs a static shim
    conf = dict(json.load(open(run.conf)), shim_static=runlib.SHIM)
    with open(run.conf, "w") as f:
        json.dump(conf, f)
    r = run("create", "--chat", "t3", "--tenant", "acme", "--profile",
            "minimal")
    check(r.returncode == 1 and b"not a static executable" in r.stderr,
          "dynamic shim: %d %r" % (r.returncode, r.stderr))


@S.case
def execd_profiles(env):
    """sluice-execd makes a sandbox of profile minimal on its image: the
    answer, GET, the audit record and health name the profile and the
    digest; tenant_profiles refuses (403 forbidden, profile_forbidden), a
    profile without an image is 503 backend_unavailable (image_missing)
    and leaves nothing; delete leaves no mount and no loop device."""
    import t_execd as X
    preflight()
    store = own_store(env)
    digest = _store["digest"]
    img = image_file(store, digest)
    d, ctl, x = X.start(env, image_dir=store, shim_static=SHIM_STATIC,
                        tenant_profiles={"acme": ["minimal", "host"],
                                         "*": ["host"]})
    r = x.app("POST", "/v1/sandboxes", {"id": "xp0", "tenant": "other",
                                        "profile": "minimal"})
    X.check_err(r, 403, "forbidden", "other on minimal")
    check_eq(r.json["error"].get("reason"), "profile_forbidden", "reason")
    r = x.app("POST", "/v1/sandboxes", {"id": "xp0", "tenant": "acme",
                                        "profile": "base"})
    check_eq(r.status, 403, "base is not in acme's list: %r" % r)
    os.makedirs(env.path("unbuilt"))
    x.conf.update(image_dir=env.path("unbuilt"))
    x.halt()
    x.start()
    r = x.app("POST", "/v1/sandboxes", {"id": "xp0", "tenant": "acme",
                                        "profile": "minimal"})
    X.check_err(r, 503, "backend_unavailable", "no image")
    check_eq(r.json["error"].get("reason"), "image_missing", "reason")
    check_eq(x.app("GET", "/v1/sandboxes/xp0").status, 404, "nothing left")
    # whether shim_static is a static executable is read with the
    # configuration (start, SIGHUP), not at every create: a static shim
    # put in place later is used after a reload
    shim = env.path("shim-static")
    shutil.copy(runlib.SHIM, shim)
    x.conf.update(image_dir=store, shim_static=shim)
    x.halt()
    x.start()
    for when in ("a dynamic shim", "the static one, before the reload"):
        r = x.app("POST", "/v1/sandboxes", {"id": "xp0", "tenant": "acme",
                                            "profile": "minimal"})
        X.check_err(r, 503, "backend_unavailable", when)
        check_eq(r.json["error"].get("reason"), "shim_static", when)
        shutil.copy(SHIM_STATIC, shim)
    n = len(x.lines)
    x.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: any("applied" in ln for ln in x.lines[n:]), 10,
               what="reload applied")
    X.create(x, "xp0", profile="minimal")
    check_eq(x.app("DELETE", "/v1/sandboxes/xp0").status, 200, "delete xp0")
    x.conf.update(shim_static=SHIM_STATIC)
    x.halt()
    x.start()
    o = X.create(x, "xp1", profile="minimal")
    check_eq((o["profile"], o["image"]), ("minimal", digest), "create")
    g = x.app("GET", "/v1/sandboxes/xp1").json
    check_eq((g["profile"], g["image"]), ("minimal", digest), "GET")
    with open(os.path.join(x.conf["state_dir"], o["network"]["session"],
                           "record.json")) as f:
        rec = json.load(f)
    check_eq((rec["profile"], rec["image"], rec["shim"]),
             ("minimal", digest, SHIM_STATIC), "record")
    o = X.ex(x, "xp1", {"shell": "test -e /usr/bin/gcc && echo gcc; "
                                 "python3 -c 'print(6*7)'; "
                                 "touch /usr/x 2>/dev/null || echo ro"})
    check_eq((o["exit_code"], o["stdout"]), (0, "42\nro\n"),
             "inside the image: %r" % o)
    o = X.create(x, "xp2", tenant="other")
    check_eq((o["profile"], o["image"]), ("host", None), "default profile")
    h = x.app("GET", "/v1/health").json
    check("minimal" in h["profiles"] and "host" in h["profiles"],
          "health profiles: %r" % h["profiles"])
    check_eq([i["users"] for i in h["images"] if i["digest"] == digest],
             [1], "health images")
    for sid in ("xp1", "xp2"):
        check_eq(x.app("DELETE", "/v1/sandboxes/%s" % sid).status, 200,
                 "delete %s" % sid)
    mi = open("/proc/self/mountinfo").read()
    check(x.conf["state_dir"] not in mi, "mounts left:\n%s" % mi)
    t0 = time.monotonic()
    while loops_of(img) and time.monotonic() - t0 < 10:
        time.sleep(0.05)
    check_eq(loops_of(img), [], "loop devices left")
    with open(x.conf["log"]["path"]) as f:
        recs = [json.loads(line) for line in f]
    made = [r for r in recs if r.get("action") == "create" and
            r.get("status") == 201 and r.get("sandbox") == "xp1"]
    check_eq([(r["detail"]["profile"], r["detail"]["image"]) for r in made],
             [("minimal", digest)], "audit record of the create")
    ran = [(r["sandbox"], r["image"]) for r in recs
           if r.get("event") == "command"]
    check_eq(ran, [("xp1", digest)], "audit record of the command")


if __name__ == "__main__":
    S.main()
