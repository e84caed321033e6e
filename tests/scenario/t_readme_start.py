#!/usr/bin/env python3
"""sluiced starts from README's control-plane example (issue 24, point 1):
the control socket's group is one the unprivileged proxy user is not in
("nogroup" for user "daemon"), which stopped the start with
"control.sock: Operation not permitted" after --check-config said OK.
The proxy keeps the socket groups of its configuration after the drop;
the app (uid 65534) then reaches the control API as the app role."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, Skip, check, check_eq, sluiced_path,  # noqa: E402
                     wait_until, log)

S = Suite("t_readme_start", time_limit=120)
TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def readme_control_block():
    with open(os.path.join(TOP, "README.md")) as f:
        text = f.read()
    m = re.search(r"The outputs below are from a run with\s+`([^`]*)`",
                  text, re.S)
    check(m is not None, "README's control-plane example not found")
    return json.loads("{" + m.group(1).replace("\n", " ") + "}")


@S.case
def control_socket_group_of_readme(env):
    import grp
    import pwd
    if os.geteuid() != 0:
        raise Skip("needs root")
    try:
        user = pwd.getpwnam("daemon")
        group = grp.getgrnam("nogroup")
    except KeyError:
        raise Skip("no user daemon or group nogroup")
    for tool in ("setpriv", "curl"):
        if shutil.which(tool) is None:
            raise Skip("no %s" % tool)
    ctl = readme_control_block()["control"]
    check_eq(ctl.get("socket_group"), "nogroup", "README's socket_group")
    members = set(os.getgrouplist("daemon", user.pw_gid))
    check(group.gr_gid not in members, "daemon is in nogroup already: "
          "the test would prove nothing")
    base = tempfile.mkdtemp(prefix="readme.", dir="/tmp")
    env.closers.append(lambda: shutil.rmtree(base, ignore_errors=True))
    os.chmod(base, 0o755)
    os.chown(base, user.pw_uid, user.pw_gid)
    cfg = {"runtime_dir": os.path.join(base, "run"),
           "state_file": os.path.join(base, "state.json"),
           "log": {"path": os.path.join(base, "conn.jsonl")},
           "user": "daemon",
           "control": ctl}
    path = os.path.join(base, "sluiced.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    r = subprocess.run([sluiced_path(), "--check-config", path],
                       capture_output=True, text=True, timeout=30)
    check_eq(r.returncode, 0, "--check-config: %s" % r.stderr)
    p = subprocess.Popen([sluiced_path(), "-c", path],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)

    def stop():
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
    env.closers.append(stop)
    sock = os.path.join(base, "run", "control.sock")
    try:
        wait_until(lambda: os.path.exists(sock) or p.poll() is not None, 15,
                   what="the control socket")
    except Exception:
        pass
    if p.poll() is not None:
        err = p.stderr.read().decode(errors="replace")
        check(False, "sluiced exited %s: %s", p.returncode, err[-800:])
    st = os.stat(sock)
    check_eq(st.st_gid, group.gr_gid, "control socket's group")
    out = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
         "curl", "-s", "--unix-socket", sock, "http://localhost/v1/health"],
        capture_output=True, text=True, timeout=30)
    check_eq(out.returncode, 0, "curl as uid 65534: %s" % out.stderr)
    health = json.loads(out.stdout)
    log("caller: %r" % health.get("caller"))
    check_eq((health.get("caller") or {}).get("role"), "app",
             "the app's role")
    stop()


if __name__ == "__main__":
    S.main()
