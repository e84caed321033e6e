#!/usr/bin/env python3
"""Running out of file descriptors: sluiced pauses accepting instead of
spinning on a listener it cannot serve, and serves again once
descriptors come back."""

import os
import resource
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, check, check_eq, get_request, read_response,  # noqa: E402
                     wait_until)

S = Suite("t_fd_limit")


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tick


@S.case
def emfile_pauses_accept(env):
    up = env.http_upstream()
    cfg = env.config(ports=env.ports(up.port),
                     dns={"hosts": {"up.test": ["127.0.0.1"]}})
    d = env.sluiced(cfg)
    pid = d.pid
    nfd = len(os.listdir("/proc/%d/fd" % pid))
    limit = nfd + 8
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (limit, limit))
    clients = []
    try:
        for _ in range(40):
            s = socket.socket()
            s.settimeout(5)
            s.bind((env.src(1), 0))
            s.connect(d.tcp_addr)
            clients.append(s)
        wait_until(lambda: "pausing listeners" in d.stderr(), 5,
                   what="the pause on EMFILE")
        # a listener that spins would burn the whole second
        c0 = cpu_seconds(pid)
        time.sleep(1.5)
        used = cpu_seconds(pid) - c0
        check(used < 0.5, "sluiced used %.2f s of CPU in 1.5 s while out of "
              "descriptors (spinning?)", used)
        check(d.alive(), "sluiced died when out of descriptors")
    finally:
        for s in clients:
            s.close()
    # descriptors come back: a request goes through again
    url = "http://up.test:%d/ok" % up.port
    deadline = time.monotonic() + 15
    status = None
    while time.monotonic() < deadline:
        s = socket.socket()
        s.settimeout(5)
        s.bind((env.src(1), 0))
        try:
            s.connect(d.tcp_addr)
            s.sendall(get_request(url))
            status = read_response(s).status
        except OSError:
            status = None
        finally:
            s.close()
        if status == 200:
            break
        time.sleep(0.3)
    check_eq(status, 200, "a request after descriptors came back")


if __name__ == "__main__":
    S.main()
