#!/usr/bin/env python3
"""AF_VSOCK listener: a session keyed by the peer CID.  The listener is
checked wherever the kernel has vsock; a full request through it runs only
where vsock loopback (CID 1) works.  Nothing ever connects to CID 2, the
host side of a real VM."""

import os
import random
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, Skip, check, check_eq, get_request,  # noqa: E402
                     read_response, log)

S = Suite("t_vsock")
VMADDR_CID_LOCAL = 1


def vsock_usable():
    try:
        s = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
    except (OSError, AttributeError) as e:
        raise Skip("no AF_VSOCK here: %s" % e)
    s.close()


@S.case
def vsock_listener_and_cid(env):
    vsock_usable()
    up = env.http_upstream()
    port = random.randint(20000, 60000)
    cfg = env.config(
        sessions=[{"id": "vm1", "tier": "public", "vsock_cid": VMADDR_CID_LOCAL},
                  {"id": "tcp1", "tier": "public", "source": env.src(1)}],
        listen={"tcp": cfg_tcp(env), "vsock_port": port},
        ports=env.ports(up.port), dns={"hosts": {"up.test": ["127.0.0.1"]}})
    d = env.sluiced(cfg)
    check("vsock" not in d.stderr().lower() or "error" not in d.stderr().lower(),
          "vsock listener error: %s", d.stderr())
    # the port is taken by sluiced's listener now
    probe = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
    try:
        probe.bind((socket.VMADDR_CID_ANY, port))
        bound = True
    except OSError:
        bound = False
    finally:
        probe.close()
    check(not bound, "vsock port %d is not held by sluiced", port)
    # loopback CID 1 exists only with vsock_loopback
    s = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
    s.settimeout(1.0)
    try:
        s.connect((VMADDR_CID_LOCAL, port))
    except OSError as e:
        log("vsock loopback unavailable (%s): listener checked only" % e)
        s.close()
        return
    s.settimeout(5.0)
    s.sendall(get_request("http://up.test:%d/ok" % up.port))
    r = read_response(s)
    s.close()
    check_eq(r.status, 200, "request over vsock from CID 1")


def cfg_tcp(env):
    return env.config()["listen"]["tcp"]


if __name__ == "__main__":
    S.main()
