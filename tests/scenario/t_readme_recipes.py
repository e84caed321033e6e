#!/usr/bin/env python3
"""README.md's Quick start and Recipes run as written: every Python block
marked with an HTML comment "<!-- recipe: NAME -->" before it is run
against the real sluiced and sluice-execd (sdklib.py's world: the
daemons as deployed, a PyPI stand-in and a web site behind sluiced's
resolver map) as an UNPRIVILEGED app, nobody in the socket's and the
app role's groups, with the Python SDK of this tree.  The daemons'
addresses come in SLUICE_EXEC_ADDRESS and SLUICE_BROKER_ADDRESS (what
SandboxClient() reads), the registry in PIP_INDEX, the web site in
WEB_URL.  A block marked "<!-- output: NAME -->" after a recipe is what
it must print.  The recipes named in EXPECTED must all be there.

Skips (77) without root, user namespaces or a Python 3.11+ that nobody
can run; fails then under SLUICE_TEST_STRICT=1."""

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Suite, Skip, Fail, check, log, SRCDIR  # noqa: E402
import sdklib  # noqa: E402

S = Suite("t_readme_recipes", time_limit=600)
EXPECTED = {"quickstart", "localai", "aivory", "chathub", "aice"}
BLOCK = re.compile(r"<!-- (recipe|output): ([\w-]+) -->\n```(\w*)\n(.*?)\n```",
                   re.S)


def blocks():
    """{name: (code, output or None)} of README.md."""
    with open(os.path.join(SRCDIR, "README.md"), encoding="utf-8") as f:
        text = f.read()
    code, out = {}, {}
    for kind, name, lang, body in BLOCK.findall(text):
        if kind == "recipe":
            check(lang == "python", "recipe %s: a ```python block" % name)
            check(name not in code, "recipe %s: twice" % name)
            code[name] = body + "\n"
        else:
            out[name] = body + "\n"
    check(set(code) >= EXPECTED, "README.md lacks recipes %s" % sorted(
        EXPECTED - set(code)))
    check(set(out) <= set(code), "outputs without a recipe: %s" % sorted(
        set(out) - set(code)))
    return {n: (c, out.get(n)) for n, c in code.items()}


def find_python():
    for p in (os.environ.get("PYTHON3"), "/usr/bin/python3", "python3"):
        if p and sdklib.runs_as_nobody([p, "-c", "import sys; sys.exit("
                                        "sys.version_info < (3, 11))"]):
            return p
    raise Skip("no Python 3.11+ that nobody can run")


@S.case
def recipes(env):
    todo = blocks()
    sdklib.preflight()
    py = find_python()
    d, x, e, home = sdklib.world(env, 1320000000)
    tree = sdklib.copy_tree(os.path.join(SRCDIR, "sdk", "python", "src"),
                            os.path.join(home, "sdk"))
    extra = {"SLUICE_EXEC_ADDRESS": e["SLUICE_TEST_EXEC"],
             "SLUICE_BROKER_ADDRESS": e["SLUICE_TEST_BROKER"],
             "PIP_INDEX": e["SLUICE_TEST_INDEX"],
             "WEB_URL": e["SLUICE_TEST_WEB"], "PYTHONPATH": tree}
    failed = []
    for name, (code, want) in sorted(todo.items()):
        path = os.path.join(home, "recipe_%s.py" % name)
        with open(path, "w") as f:
            f.write(code)
        os.chown(path, sdklib.NOBODY, sdklib.NOBODY)
        log("recipe %s" % name)
        # stderr goes with stdout: a recipe prints nothing there when
        # it works
        rc, out = sdklib.run_runner(env, [py, path], extra, home, home,
                                    timeout=240)
        if rc != 0:
            failed.append("%s: exit %d: %s" % (name, rc, out.strip()[-600:]))
        elif want is not None and out != want:
            failed.append("%s: printed %r, the README shows %r" % (
                name, out, want))
    for f in failed:
        log("FAILED recipe %s" % f)
    if failed:
        raise Fail("%d of %d recipes failed: %s" % (
            len(failed), len(todo), "; ".join(f.split(":")[0]
                                              for f in failed)))


if __name__ == "__main__":
    S.main()
