#!/usr/bin/env python3
"""The whole connection state machine under adversarial byte streams
(issue 20, point 1): a deterministic generator (seeded, bounded in count
and time) drives sluiced with client streams built from real and broken
requests (absolute-form exchanges with every body framing, bad trailers,
pipelining, CONNECT tunnels, garbage), written in random pieces and ended
at random stages (close, half-close, reset, or a read of the answer),
against loopback upstreams that answer, stay silent, close, reset, send
garbage or never accept, with prompts answered, denied or left to time
out by an approver that answers at random.  Every close meets every
callback that might still be pending (connect, resolve, prompt answer,
timers).  sluiced must stay up (under ASan in the sanitizer suite, any
use after free aborts it), answer health, relay a clean request at the
end, and leave a log chain that verifies.

SLUICE_CHAOS_SEED and SLUICE_CHAOS_N replay or widen a run; a failure
prints the seed and the iteration that preceded it."""

import json
import os
import random
import socket
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, check, check_eq, api_unix, read_response,  # noqa: E402
                     get_request, log, _read_request, Blackhole, refuse_port,
                     wait_until, silent_handler)

S = Suite("t_relay_chaos", time_limit=420)

SEED = int(os.environ.get("SLUICE_CHAOS_SEED", "20261205"))
N = int(os.environ.get("SLUICE_CHAOS_N", "600"))
WORKERS = 6
TIME_BUDGET = 150.0          # seconds of traffic at most


# ---------------------------------------------------------------------------
# Upstreams: one behaviour per port

def _linger0(conn):
    try:
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                        struct.pack("ii", 1, 0))
    except OSError:
        pass


def up_close(server, conn, peer):
    return


def up_reset(server, conn, peer):
    try:
        conn.settimeout(0.2)
        conn.recv(100)
    except OSError:
        pass
    _linger0(conn)


def _answers(conn, answer, limit=4):
    buf = bytearray()
    for _ in range(limit):
        req = _read_request(conn, buf, timeout=2.0)
        if req is None:
            return
        try:
            conn.sendall(answer)
        except OSError:
            return


def up_ok(server, conn, peer):
    _answers(conn, b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")


def up_chunked(server, conn, peer):
    _answers(conn, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
             b"3\r\nabc\r\n0\r\nX-T: 1\r\n\r\n")


def up_interim(server, conn, peer):
    _answers(conn, b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content"
             b"\r\n\r\n")


def up_until_close(server, conn, peer):
    buf = bytearray()
    if _read_request(conn, buf, timeout=2.0) is None:
        return
    try:
        conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" +
                     b"x" * 3000)
    except OSError:
        pass


def up_garbage(server, conn, peer):
    rnd = random.Random(peer[1])
    try:
        conn.sendall(bytes(rnd.getrandbits(8) for _ in range(rnd.randint(1, 600))))
        conn.settimeout(0.3)
        conn.recv(100)
    except OSError:
        pass


def up_half_head(server, conn, peer):
    buf = bytearray()
    if _read_request(conn, buf, timeout=2.0) is None:
        return
    try:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Len")
    except OSError:
        pass


def up_slow(server, conn, peer):
    buf = bytearray()
    if _read_request(conn, buf, timeout=2.0) is None:
        return
    time.sleep(0.4)
    try:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    except OSError:
        pass


def up_echo(server, conn, peer):
    conn.settimeout(0.3)
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        try:
            d = conn.recv(65536)
        except socket.timeout:
            continue
        except OSError:
            return
        if not d:
            return
        try:
            conn.sendall(d)
        except OSError:
            return


BEHAVIOURS = [silent_handler, up_close, up_reset, up_ok, up_chunked, up_interim,
              up_until_close, up_garbage, up_half_head, up_slow, up_echo]


# ---------------------------------------------------------------------------
# Client streams

def pick_body(rnd):
    """Framing headers and body bytes, valid or not."""
    k = rnd.randrange(9)
    if k == 0:
        return [], b""
    if k == 1:
        n = rnd.randint(0, 40)
        return ["Content-Length: %d" % n], b"b" * n
    if k == 2:                              # shorter than announced
        return ["Content-Length: 50"], b"b" * rnd.randint(0, 49)
    if k == 3:
        return ["Transfer-Encoding: chunked"], b"1\r\nA\r\n0\r\n\r\n"
    if k == 4:                              # the trailer
        return ["Transfer-Encoding: chunked"], (
            b"1\r\nA\r\n0\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n")
    if k == 5:
        return ["Transfer-Encoding: chunked"], b"zz\r\nA\r\n"
    if k == 6:
        return ["Transfer-Encoding: chunked"], b"5\r\nAB"     # cut short
    if k == 7:
        return ["Content-Length: 3", "Transfer-Encoding: chunked"], b"abc"
    return ["Transfer-Encoding: chunked"], (
        b"2\r\nhi\r\n0\r\nX-Ok: 1\r\n\r\n")


def pick_request(rnd, ports):
    k = rnd.randrange(12)
    port = rnd.choice(ports)
    if k == 0:                              # CONNECT, then bytes
        return (("CONNECT up.test:%d HTTP/1.1\r\nHost: up.test:%d\r\n\r\n"
                 % (port, port)).encode() +
                bytes(rnd.getrandbits(8) for _ in range(rnd.randint(0, 200))))
    if k == 1:                              # garbage
        return bytes(rnd.getrandbits(8) for _ in range(rnd.randint(1, 300)))
    if k == 2:                              # a bad line in the head
        return (b"GET http://up.test:%d/ HTTP/1.1\r\nHost up.test\r\n\r\n"
                % port)
    if k == 3:                              # origin form
        return b"GET / HTTP/1.1\r\nHost: up.test\r\n\r\n"
    if k == 4:                              # Host that differs
        return (b"GET http://up.test:%d/ HTTP/1.1\r\nHost: other.test\r\n"
                b"\r\n" % port)
    if k == 5:                              # literal address
        return (b"GET http://127.0.0.1:%d/x HTTP/1.1\r\nHost: 127.0.0.1:%d"
                b"\r\n\r\n" % (port, port))
    method = rnd.choice(["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH"])
    hdrs, body = pick_body(rnd)
    if method in ("GET", "HEAD") and rnd.random() < 0.5:
        hdrs, body = [], b""
    if rnd.random() < 0.1:
        hdrs.append("Connection: close")
    if rnd.random() < 0.05:
        hdrs.append("Expect: 100-continue")
    head = ("%s http://up.test:%d/%d HTTP/1.1\r\nHost: up.test:%d\r\n"
            % (method, port, rnd.randrange(1000), port))
    head += "".join(h + "\r\n" for h in hdrs) + "\r\n"
    return head.encode() + body


def stream(rnd, ports):
    data = b"".join(pick_request(rnd, ports)
                    for _ in range(1 + (rnd.random() < 0.3) * rnd.randint(1, 3)))
    cut = len(data) if rnd.random() < 0.7 else rnd.randint(0, len(data))
    return data[:cut]


def one_client(rnd, d, src, ports):
    s = d.connect(src, timeout=3)
    try:
        data = stream(rnd, ports)
        pos = 0
        while pos < len(data):
            n = rnd.choice([1, 2, 7, 64, 1500, len(data)])
            s.sendall(data[pos:pos + n])
            pos += n
            if rnd.random() < 0.2:
                time.sleep(rnd.choice([0, 0.001, 0.01, 0.05]))
        end = rnd.randrange(5)
        if end == 0:
            return                          # close at once
        if end == 1:
            _linger0(s)                     # reset
            return
        if end == 2:
            s.shutdown(socket.SHUT_WR)
        if end == 3:
            time.sleep(rnd.choice([0.01, 0.1, 0.3]))
            return
        s.settimeout(rnd.choice([0.2, 0.6, 1.5]))
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            if not s.recv(65536):
                break
    except OSError:
        pass
    finally:
        s.close()


# ---------------------------------------------------------------------------
# The approver: answers at random, or lets the prompt time out

class RandomApprover:
    def __init__(self, ctl, rnd):
        self.ctl = ctl
        self.rnd = rnd
        self.stop = False
        self.ready = False
        self.answered = 0
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(10)
        self.sock.connect(ctl)
        self.sock.sendall(b"GET /v1/events HTTP/1.1\r\nHost: x\r\n"
                          b"Accept: text/event-stream\r\n\r\n")
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()
        wait_until(lambda: self.ready, 5, what="event stream head")

    def _answer(self, pid):
        choice = self.rnd.choice(["allow_once", "allow_chat", "deny", None,
                                  "allow_once"])
        if choice is None:
            return
        time.sleep(self.rnd.choice([0, 0.01, 0.2]))
        try:
            api_unix(self.ctl, "POST", "/v1/prompts/%s" % pid,
                     {"decision": choice}, timeout=3)
            self.answered += 1
        except OSError:
            pass

    def _run(self):
        buf = b""
        self.sock.settimeout(0.3)
        for _ in range(100000):
            if self.stop:
                return
            try:
                d = self.sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                return
            if not d:
                return
            buf += d
            if not self.ready and b"\r\n\r\n" in buf:
                head, buf = buf.split(b"\r\n\r\n", 1)
                self.ready = b" 200 " in head.split(b"\r\n")[0]
            while b"\n\n" in buf:
                block, buf = buf.split(b"\n\n", 1)
                ev = data = None
                for line in block.split(b"\n"):
                    line = line.strip(b"\r")
                    if line.startswith(b"event:"):
                        ev = line[6:].strip().decode()
                    elif line.startswith(b"data:"):
                        data = line[5:].strip()
                if ev == "prompt" and data:
                    try:
                        pid = json.loads(data).get("id")
                    except ValueError:
                        continue
                    if pid:
                        threading.Thread(target=self._answer, args=(pid,),
                                         daemon=True).start()

    def close(self):
        self.stop = True
        try:
            self.sock.close()
        except OSError:
            pass


@S.case
def adversarial_streams(env):
    servers = [env.server(b) for b in BEHAVIOURS]
    hole = Blackhole()
    env.closers.append(hole.close)
    refused = refuse_port()
    ports = [s.port for s in servers] + [hole.port, refused]
    sessions = [
        {"id": "pub", "tenant": "acme", "user": "alice", "tier": "public",
         "source": env.src(1)},
        # up.test is not a registry: every request asks the approver
        {"id": "ask", "tenant": "acme", "user": "bob", "tier": "registries",
         "source": env.src(2)},
    ]
    cfg = env.config(sessions=sessions, ports=env.ports(*ports),
                     dns={"hosts": {"up.test": ["127.0.0.1"]}},
                     prompt={"timeout_s": 1, "deny_quiet_s": 0},
                     limits={"connect_timeout_ms": 400,
                             "head_timeout_ms": 800, "idle_timeout_s": 3})
    d = env.sluiced(cfg)
    ctl = os.path.join(cfg["runtime_dir"], "control.sock")
    appr = RandomApprover(ctl, random.Random(SEED ^ 0x5a5a))
    env.closers.append(appr.close)

    lock = threading.Lock()
    state = {"next": 0, "done": 0, "last": None}
    t_end = time.monotonic() + TIME_BUDGET

    def worker(w):
        for _ in range(N):
            with lock:
                i = state["next"]
                if i >= N or time.monotonic() > t_end or not d.alive():
                    return
                state["next"] += 1
            rnd = random.Random("%d:%d" % (SEED, i))
            src = env.src(rnd.choice([1, 1, 2, 3]))
            try:
                one_client(rnd, d, src, ports)
            except OSError:
                pass
            with lock:
                state["done"] += 1
                state["last"] = i

    threads = [threading.Thread(target=worker, args=(w,), daemon=True)
               for w in range(WORKERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIME_BUDGET + 30)
    log("seed %d: %d streams, %d prompt answers" % (SEED, state["done"],
                                                   appr.answered))
    check(d.alive(), "sluiced died (seed %d, near iteration %s):\n%s",
          SEED, state["last"], d.stderr())
    check(state["done"] >= min(N, 100), "only %d streams ran", state["done"])
    check("AddressSanitizer" not in d.stderr(), "ASan report:\n%s",
          d.stderr())
    # still whole: health answers and a clean exchange goes through
    r = api_unix(ctl, "GET", "/v1/health")
    check_eq(r.status, 200, "health after the run")
    ok = servers[BEHAVIOURS.index(up_ok)]
    s = d.connect(env.src(1))
    s.sendall(get_request("http://up.test:%d/" % ok.port))
    r = read_response(s)
    check_eq(r.status, 200, "a clean request after the run")
    s.close()
    appr.close()


if __name__ == "__main__":
    S.main()
