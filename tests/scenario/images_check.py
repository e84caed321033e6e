#!/usr/bin/env python3
"""make check-images (not part of make check): builds the profiles named
in SLUICE_CHECK_PROFILES (default "base media") with sluice-run image
build into SLUICE_IMAGE_CACHE (default /var/cache/sluice-images, made if
missing), then in a sandbox of each image, on the ns backend and, where
runsc is installed, on gvisor: imports each Python module of the
profile's check list and runs each of its commands (each tool's
--version, a chart, a spreadsheet, a sound...).  Prints the build time,
the image's size, the size of its files and the number of packages of
each, and every check that failed.  SLUICE_IMAGES_CACHED=1 takes an
image of the same inputs without building.  Needs root and the network
to the Debian mirror (the host's apt sources, or image_sources)."""

import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Suite, Skip, check, log  # noqa: E402
import runlib  # noqa: E402
from runlib import RUN  # noqa: E402

BLD = os.path.abspath(os.environ.get("SLUICE_BUILDDIR", "."))
SRC = os.path.abspath(os.environ.get("SLUICE_SRCDIR", "."))
PROFILES = os.path.join(SRC, "sandbox-glue", "executor", "image",
                        "profiles")
SHIM_STATIC = os.path.join(BLD, "sandbox-glue", "shim", "sluice-shim-static")
STORE = os.environ.get("SLUICE_IMAGE_CACHE", "/var/cache/sluice-images")
WANT = os.environ.get("SLUICE_CHECK_PROFILES", "base media").split()
CACHED = os.environ.get("SLUICE_IMAGES_CACHED") == "1"

S = Suite("images_check", time_limit=5400)
figures = {}


def preflight():
    if os.geteuid() != 0:
        raise Skip("needs root")
    for p in (RUN, SHIM_STATIC):
        if not os.access(p, os.X_OK):
            raise Skip("%s not built" % p)


def conf(env, backend="ns"):
    return {"image_dir": STORE, "profiles_dir": PROFILES,
            "shim_static": SHIM_STATIC, "backend": backend,
            "limits": {"memory_mb": 2048, "tmp_mb": 512}}


def build(env, profile):
    os.makedirs(STORE, exist_ok=True)
    c = env.path("build.json")
    with open(c, "w") as f:
        json.dump(conf(env), f)
    t0 = time.monotonic()
    argv = [RUN, "--config", c, "--state-dir", env.path("bs"), "--json",
            "image", "build"] + (["--cached"] if CACHED else []) + [profile]
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=3600)
    check(r.returncode == 0, "image build %s: %s", profile,
          r.stderr.decode()[-1500:])
    o = json.loads(r.stdout.decode())
    o["wall_s"] = round(time.monotonic() - t0, 1)
    figures[profile] = o
    log("%s: %s" % (profile, json.dumps(o)))
    return o


def checks_of(profile):
    r = subprocess.run([sys.executable, "-c", """
import json, sys
d, name = sys.argv[1:3]
py, cmds, seen = [], [], set()
while name and name not in seen:
    seen.add(name)
    p = json.load(open("%s/%s.json" % (d, name)))
    c = p.get("check", {})
    py = c.get("python", []) + [m for m in py if m not in c.get("python", [])]
    cmds = c.get("commands", []) + [x for x in cmds if x not in c.get("commands", [])]
    name = p.get("extends")
print(json.dumps([py, cmds]))
""", PROFILES, profile], stdout=subprocess.PIPE, check=True)
    return json.loads(r.stdout.decode())


def run_checks(run, profile, backend):
    chat = "chk-%s-%s" % (profile, backend)
    r, o = run.json("create", "--chat", chat, "--profile", profile,
                    "--backend", backend)
    check(r.returncode == 0, "create %s on %s: %s", profile, backend,
          r.stderr.decode())
    run.chats.append(chat)
    py, cmds = checks_of(profile)
    failed, times = [], {}
    for m in py:
        t0 = time.monotonic()
        o = run.exec(chat, "python3 -c 'import %s'" % m, "--timeout", "300",
                     timeout=330)
        times[m] = round(time.monotonic() - t0, 1)
        if o["exit_code"] != 0:
            failed.append("import %s: %s" % (m, o["stderr"][-300:]))
    for c in cmds:
        o = run.exec(chat, c, "--timeout", "300", timeout=330)
        if o["exit_code"] != 0:
            failed.append("%s: exit %d: %s" % (c, o["exit_code"],
                                               o["stderr"][-300:]))
        else:
            log("  %s ok: %s" % (c[:60], o["stdout"].strip().split("\n")[0]
                                 [:80]))
    log("%s on %s: %d imports, %d commands, %d failed; import seconds %s" % (
        profile, backend, len(py), len(cmds), len(failed), json.dumps(times)))
    figures.setdefault(profile, {})["checks_" + backend] = {
        "imports": len(py), "commands": len(cmds), "failed": failed,
        "import_s": times}
    run("destroy", "--chat", chat)
    run.chats.remove(chat)
    check(not failed, "%s on %s:\n  %s" % (profile, backend,
                                            "\n  ".join(failed)))


def make_case(profile):
    def case(env):
        preflight()
        build(env, profile)
        d, run = runlib.start(env, preflight, None, **conf(env))
        run_checks(run, profile, "ns")
        if shutil.which("runsc") or os.access("/usr/sbin/runsc", os.X_OK):
            run_checks(run, profile, "gvisor")
    case.__name__ = "profile_" + profile
    return case


for p in WANT:
    S.case(make_case(p))


@S.case
def figures_table(env):
    for p, f in figures.items():
        print("# %-8s built in %6.1f s (wall %6.1f s), image %7.1f MiB, "
              "files %7.1f MiB, %d packages%s" % (
                  p, f.get("build_ms", 0) / 1000, f.get("wall_s", 0),
                  f.get("size", 0) / 2**20, f.get("tree_bytes", 0) / 2**20,
                  f.get("packages", 0),
                  ", cached" if f.get("cached") else ""))
    sys.stdout.flush()


if __name__ == "__main__":
    S.main()
