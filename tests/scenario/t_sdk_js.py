#!/usr/bin/env python3
"""The JavaScript SDK (sdk/js) against the real sluiced and sluice-execd:
its node --test suite (sdk/js/test) run as an unprivileged uid, over the
daemons' Unix sockets (roles from the uid's groups) and their TLS
listeners (bearer tokens).  See sdklib.py for the world it runs in.

Skips (77) without root, user namespaces, or Node 18+ that nobody can
run (Debian: apt-get install nodejs); fails then under
SLUICE_TEST_STRICT=1."""

import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Suite, Skip, SRCDIR  # noqa: E402
import sdklib  # noqa: E402

S = Suite("t_sdk_js", time_limit=600)
PROBE = ["-e", "process.exit(Number(process.versions.node.split('.')[0]) "
         ">= 18 ? 0 : 1)"]


def find_node():
    n = shutil.which("node") or shutil.which("nodejs")
    if n and sdklib.runs_as_nobody([n] + PROBE):
        return n
    raise Skip("no Node 18+ that nobody can run (apt-get install nodejs)")


@S.case
def node_test_suite(env):
    sdklib.preflight()
    node = find_node()
    d, x, e, home = sdklib.world(env, 1310000000)
    tree = sdklib.copy_tree(os.path.join(SRCDIR, "sdk", "js"),
                            os.path.join(home, "js"))
    tests = sorted(os.path.join("test", f) for f in
                   os.listdir(os.path.join(tree, "test"))
                   if f.endswith(".test.js"))
    argv = [node, "--test", "--test-reporter=tap"]
    if os.environ.get("SLUICE_SDK_K"):      # a subset, by name pattern
        argv += ["--test-name-pattern", os.environ["SLUICE_SDK_K"]]
    if os.environ.get("SLUICE_SDK_S"):      # show what the examples print
        e["SLUICE_SDK_S"] = "1"
    rc, out = sdklib.run_runner(env, argv + tests, e, home, tree)

    def count(name):
        m = re.findall(r"^# %s (\d+)$" % name, out, re.M)
        return int(m[-1]) if m else 0
    sdklib.judge("node --test", rc, count("pass"), count("fail")
                 + count("cancelled"), count("skipped") + count("todo"),
                 [f.replace(tree + "/", "sdk/js/") for f in
                  sdklib.tap_failures(out)], out,
                 logs=[d.log_path, x.conf["log"]["path"]])


if __name__ == "__main__":
    S.main()
