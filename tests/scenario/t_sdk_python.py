#!/usr/bin/env python3
"""The Python SDK (sdk/python) against the real sluiced and sluice-execd:
its pytest suite (sdk/python/tests) run as an unprivileged uid, over the
daemons' Unix sockets (roles from the uid's groups) and their TLS
listeners (bearer tokens).  See sdklib.py for the world it runs in.

Skips (77) without root, user namespaces, or a Python 3.11+ with pytest
that nobody can run (Debian: apt-get install python3-pytest); fails then
under SLUICE_TEST_STRICT=1."""

import os
import sys
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Suite, Skip, SRCDIR  # noqa: E402
import sdklib  # noqa: E402

S = Suite("t_sdk_python", time_limit=600)
PROBE = ["-c", "import sys, pytest; sys.exit(sys.version_info < (3, 11))"]


def find_python():
    seen = []
    for p in (os.environ.get("PYTHON3"), "/usr/bin/python3", "python3"):
        if not p or p in seen:
            continue
        seen.append(p)
        if sdklib.runs_as_nobody([p] + PROBE):
            return p
    raise Skip("no Python 3.11+ with pytest that nobody can run "
               "(apt-get install python3-pytest)")


@S.case
def pytest_suite(env):
    sdklib.preflight()
    py = find_python()
    d, x, e, home = sdklib.world(env, 1300000000)
    tree = sdklib.copy_tree(os.path.join(SRCDIR, "sdk", "python"),
                            os.path.join(home, "python"))
    junit = os.path.join(home, "junit.xml")
    e["PYTHONPATH"] = os.path.join(tree, "src")
    argv = [py, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfEs",
            "--durations=5",
            "--junitxml", junit, os.path.join(tree, "tests")]
    if os.environ.get("SLUICE_SDK_K"):      # a subset, by pytest -k
        argv += ["-k", os.environ["SLUICE_SDK_K"]]
    if os.environ.get("SLUICE_SDK_S"):      # show what the tests print
        argv += ["-s"]
    rc, out = sdklib.run_runner(env, argv, e, home, tree)
    n = f = s = 0
    if os.path.exists(junit):
        root = ET.parse(junit).getroot()
        for ts in ([root] if root.tag == "testsuite" else
                   root.findall("testsuite")):
            tests = int(ts.get("tests", 0))
            f += int(ts.get("failures", 0)) + int(ts.get("errors", 0))
            s += int(ts.get("skipped", 0))
            n += tests
        n -= f + s
    sdklib.judge("pytest", rc, n, f, s, sdklib.junit_failures(junit), out,
                 logs=[d.log_path, x.conf["log"]["path"]])


if __name__ == "__main__":
    S.main()
