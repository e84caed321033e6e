#!/usr/bin/env python3
"""Plain HTTP against hostile peers (issue 11): a client that sends its
head a byte at a time."""

import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, check, check_eq, read_response, log)  # noqa: E402

S = Suite("t_http_hostile", time_limit=300)


def setup(env, *servers, **over):
    ports = [s.port for s in servers]
    cfg = env.config(ports=env.ports(*ports),
                     dns={"hosts": {"up.test": ["127.0.0.1"]}}, **over)
    return env.sluiced(cfg)


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])      # utime + stime


def paced_head(d, src, port, prefix_headers):
    """Send a head whose first part (prefix_headers lines of 1000 bytes)
    goes at once and whose last 2000 bytes go one at a time, each in a
    segment of its own.  Returns sluiced's CPU seconds meanwhile."""
    hz = os.sysconf("SC_CLK_TCK")
    head = ("GET http://up.test:%d/ HTTP/1.1\r\nHost: up.test:%d\r\n"
            % (port, port)).encode()
    for i in range(prefix_headers):
        head += b"X-Pad-%02d: " % i + b"p" * 986 + b"\r\n"
    tail = b"".join(b"X-Tail-%d: " % i + b"t" * 987 + b"\r\n"
                    for i in range(2)) + b"\r\n"
    check(len(head) + len(tail) < 32768, "head of %d bytes",
          len(head) + len(tail))
    s = d.connect(src)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(head)
    time.sleep(0.2)
    t0 = cpu_ticks(d.pid)
    for i in range(len(tail)):
        s.send(tail[i:i + 1])
        time.sleep(0.0003)
    r = read_response(s, timeout=30)
    spent = (cpu_ticks(d.pid) - t0) / float(hz)
    check_eq(r.status, 200, "answer to the byte-wise head")
    s.close()
    return spent


@S.case
def bytewise_head_is_linear(env):
    # issue 11, finding 14: each read parsed the head from its start, so
    # 2000 one-byte reads after 28 KiB cost ~2000 parses of 28 KiB
    # (hundreds of ms); resumed, they cost what they cost after a short
    # head
    up = env.http_upstream()
    d = setup(env, up)
    small = paced_head(d, env.src(1), up.port, 0)
    big = paced_head(d, env.src(1), up.port, 28)
    log("sluiced CPU: %.3f s after a short head, %.3f s after 28 KiB"
        % (small, big))
    check(big - small < 0.08,
          "2000 one-byte reads after a 28 KiB head cost %.3f s more CPU "
          "than after a short one", big - small)


if __name__ == "__main__":
    S.main()
