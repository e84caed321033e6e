#!/usr/bin/env python3
"""Prompts delivered by the webhook to an HTTPS receiver on 127.0.0.1
(a CA and a server certificate for hooks.test made with the openssl CLI;
webhook.hosts maps hooks.test to 127.0.0.1).  The receiver checks the
signature, the timestamp and the headers of every delivery.  Cases: a
signed delivery when a prompt is raised; a receiver answering allow_once
lets the waiting client through; a receiver that is down, then up, gets
the prompt by a retry; a wrong CA fails every attempt with a diagnostic
line and the prompt times out to a refusal; answers that are not exactly
one JSON object (a NUL and more after it, a key twice, text after it)
decide nothing; a receiver that never ends its header section, and many
answers that stall half sent, leave sluiced's memory bounded and fail
their attempts with a diagnostic line."""

import hashlib
import hmac
import http.server
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, check, check_eq, read_response,  # noqa: E402
                     check_refusal, read_log, decisions, wait_until,
                     require_tool, free_port, vmrss_kib, TCPServer,
                     _read_request, log)

S = Suite("t_webhook", time_limit=240)

SECRET = "wh-test-secret-7f3a"


def openssl(*args):
    r = subprocess.run(["openssl"] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    check(r.returncode == 0, "openssl %s: %s", args[0],
          r.stderr.decode(errors="replace"))


def make_ca(env, name):
    key, crt = env.path(name + ".key"), env.path(name + ".pem")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key,
            "-out", crt, "-days", "2", "-subj", "/CN=%s" % name,
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    return crt, key


def make_server_cert(env, ca, name="hooks.test"):
    ca_crt, ca_key = ca
    key, csr, crt = (env.path("srv.key"), env.path("srv.csr"),
                     env.path("srv.pem"))
    ext = env.path("srv.ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=DNS:%s\n" % name)
    openssl("req", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key,
            "-out", csr, "-subj", "/CN=%s" % name)
    openssl("x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key,
            "-set_serial", "7", "-out", crt, "-days", "2", "-extfile", ext)
    return crt, key


class Receiver:
    """HTTPS on 127.0.0.1:port; records each delivery with the result of
    its checks; answers with self.answer (status, JSON body)."""

    def __init__(self, crt, key, port=0, answer=(200, {})):
        self.deliveries = []
        self.lock = threading.Lock()
        self.answer = answer
        rcv = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(n) if 0 < n <= 1 << 20 else b""
                rcv.record(self.path, self.headers, body)
                status, obj = rcv.answer
                # bytes go out as they are: answers no JSON encoder makes
                data = obj if isinstance(obj, bytes) else \
                    json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), H)
        self.httpd.daemon_threads = True
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(crt, key)
        self.sni = []
        ctx.sni_callback = lambda s, name, c: self.sni.append(name)
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket,
                                            server_side=True)
        self.port = self.httpd.server_address[1]
        self.t = threading.Thread(target=self.httpd.serve_forever,
                                  kwargs={"poll_interval": 0.1}, daemon=True)
        self.t.start()

    def record(self, path, headers, body):
        ts = headers.get("X-Sluice-Timestamp", "")
        sig = headers.get("X-Sluice-Signature", "")
        want = "sha256=" + hmac.new(SECRET.encode(), ts.encode() + b"." + body,
                                    hashlib.sha256).hexdigest()
        try:
            obj = json.loads(body)
        except ValueError:
            obj = None
        d = {
            "path": path,
            "sig_ok": hmac.compare_digest(sig, want),
            "ts_ok": ts.isdigit() and abs(time.time() - int(ts)) < 60,
            "event": headers.get("X-Sluice-Event"),
            "delivery": headers.get("X-Sluice-Delivery"),
            "ctype": headers.get("Content-Type"),
            "host": headers.get("Host"),
            "prompt": obj,
        }
        with self.lock:
            self.deliveries.append(d)

    def got(self):
        with self.lock:
            return list(self.deliveries)

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def check_delivery(d, r, port):
    check(d["sig_ok"], "bad signature in %r", d)
    check(d["ts_ok"], "bad timestamp in %r", d)
    check_eq(d["event"], "prompt", "X-Sluice-Event")
    check_eq(d["ctype"], "application/json", "Content-Type")
    check_eq(d["path"], "/hook?k=1", "request path")
    check_eq(d["host"], "hooks.test:%d" % port, "Host")
    p = d["prompt"]
    check(isinstance(p, dict), "body is not a JSON object")
    check_eq(d["delivery"], p.get("id"), "X-Sluice-Delivery")
    check_eq((p.get("session"), p.get("host"), p.get("state")),
             ("c1", "ask.test", "pending"), "prompt fields")
    check("hooks.test" in r.sni, "SNI %r" % r.sni)


def setup(env, port, ca_file, timeout_s=30, hosts=(), sids=("c1",)):
    require_tool("openssl")
    up = env.http_upstream()
    secret = env.path("hook.secret")
    with open(secret, "w") as f:
        f.write(SECRET + "\n")
    names = {"ask.test": ["127.0.0.1"]}
    names.update((h, ["127.0.0.1"]) for h in hosts)
    cfg = env.config(
        sessions=[{"id": sid, "tenant": "acme", "user": "alice",
                   "tier": "registries"} for sid in sids],
        ceiling="public", registries=["reg.test"], ports=env.ports(up.port),
        dns={"hosts": names},
        prompt={"timeout_s": timeout_s, "deny_quiet_s": 0},
        webhook={"url": "https://hooks.test:%d/hook?k=1" % port,
                 "secret_file": secret, "ca_file": ca_file,
                 "timeout_ms": 1500,
                 "hosts": {"hooks.test": ["127.0.0.1"]}})
    d = env.sluiced(cfg)
    d.ctl = os.path.join(cfg["runtime_dir"], "control.sock")
    return d, up


class Waiter(threading.Thread):
    """One GET through the session socket, held by the prompt."""

    def __init__(self, d, port, host="ask.test", sid="c1"):
        super().__init__(daemon=True)
        self.resp, self.err = None, None
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(30)
        self.sock.connect(d.session_socket(sid))
        self.port = port
        self.host = host.encode()
        self.start()

    def run(self):
        try:
            self.sock.sendall(b"GET http://%s:%d/ok HTTP/1.1\r\n"
                              b"Host: %s:%d\r\nConnection: close\r\n\r\n"
                              % (self.host, self.port, self.host, self.port))
            self.resp = read_response(self.sock, timeout=30)
        except Exception as e:          # reported by the case
            self.err = e
        finally:
            self.sock.close()

    def finish(self, timeout=20):
        self.join(timeout)
        check(not self.is_alive(), "the client still waits")
        check(self.err is None, "client error: %r", self.err)
        return self.resp


def stderr_lines(d, text):
    return [l for l in d.stderr().splitlines() if text in l]


@S.case
def signed_delivery(env):
    ca = make_ca(env, "ca")
    r = Receiver(*make_server_cert(env, ca))
    env.closers.append(r.close)
    d, up = setup(env, r.port, ca[0], timeout_s=3)
    w = Waiter(d, up.port)
    wait_until(lambda: r.got(), 10, what="a delivery")
    check_delivery(r.got()[0], r, r.port)
    # no decision in the answer: the prompt stays pending, then expires
    resp = w.finish()
    check_refusal(resp, "prompt_timeout")
    check_eq(len(r.got()), 1, "deliveries after a 2xx")
    check(stderr_lines(d, "attempt 1 delivered (HTTP 200"),
          "no delivery line:\n%s" % d.stderr())
    check(SECRET not in d.stderr(), "the secret is in the diagnostics")


@S.case
def receiver_answers_allow_once(env):
    ca = make_ca(env, "ca")
    r = Receiver(*make_server_cert(env, ca),
                 answer=(200, {"decision": "allow_once"}))
    env.closers.append(r.close)
    d, up = setup(env, r.port, ca[0])
    w = Waiter(d, up.port)
    resp = w.finish()
    check_eq(resp.status, 200, "held request after the webhook's allow_once")
    check_eq(len(r.got()), 1, "deliveries")
    check_delivery(r.got()[0], r, r.port)
    pid = r.got()[0]["prompt"]["id"]
    ans = [x for x in read_log(d.log_path) if x.get("event") ==
           "prompt_answer"]
    check(len(ans) == 1 and ans[0].get("who") == "webhook" and
          ans[0].get("answer") == "allow_once" and ans[0].get("prompt") == pid,
          "prompt_answer records %r", ans)
    check(decisions(d.log_path, decision="allow", host="ask.test",
                    answer="allow_once"), "an allow record by the prompt")


@S.case
def down_then_up_retries(env):
    ca = make_ca(env, "ca")
    crt, key = make_server_cert(env, ca)
    port = free_port()
    d, up = setup(env, port, ca[0])
    w = Waiter(d, up.port)
    wait_until(lambda: stderr_lines(d, "attempt 2 failed"), 10,
               what="two failed attempts")
    check(stderr_lines(d, "cannot connect to 127.0.0.1 port %d" % port),
          "no connect diagnostic:\n%s" % d.stderr())
    r = None
    for _ in range(20):     # the port was free a moment ago; bounded
        try:
            r = Receiver(crt, key, port=port,
                         answer=(200, {"decision": "allow_once"}))
            break
        except OSError:
            time.sleep(0.1)
    check(r is not None, "cannot bind the receiver's port")
    env.closers.append(r.close)
    # backoff doubles from 0.5 s with jitter: a few seconds at most
    resp = w.finish(timeout=25)
    check_eq(resp.status, 200, "held request after a retried delivery")
    check_eq(len(r.got()), 1, "deliveries once up")
    check_delivery(r.got()[0], r, port)
    # the line is written before the answer releases the request, but
    # sluiced's stderr reaches the harness through a pipe: wait for it
    deadline = time.monotonic() + 5
    while not stderr_lines(d, "delivered (HTTP 200") and \
            time.monotonic() < deadline:
        time.sleep(0.05)
    check(stderr_lines(d, "delivered (HTTP 200"), "no delivery line")


@S.case
def wrong_ca_times_out(env):
    ca = make_ca(env, "ca")
    other = make_ca(env, "other-ca")
    r = Receiver(*make_server_cert(env, ca),
                 answer=(200, {"decision": "allow_once"}))
    env.closers.append(r.close)
    d, up = setup(env, r.port, other[0], timeout_s=2)
    w = Waiter(d, up.port)
    resp = w.finish()
    check_refusal(resp, "prompt_timeout")
    check_eq(len(r.got()), 0, "requests that reached the receiver")
    lines = stderr_lines(d, "certificate verify failed")
    check(lines, "no TLS diagnostic:\n%s" % d.stderr())
    # one line per attempt, and none after the prompt was done
    n = len(stderr_lines(d, "webhook: prompt "))
    time.sleep(1.5)
    check_eq(len(stderr_lines(d, "webhook: prompt ")), n,
             "attempt lines after the timeout")


@S.case
def lenient_answers_decide_nothing(env):
    ca = make_ca(env, "ca")
    r = Receiver(*make_server_cert(env, ca))
    env.closers.append(r.close)
    d, up = setup(env, r.port, ca[0], timeout_s=2)
    # each would have allowed the request had sluiced read it leniently
    answers = [
        ("a NUL and more after it",
         b'{"decision":"allow_once"}\x00{"decision":"deny"}'),
        ("a key twice", b'{"decision":"deny","decision":"allow_once"}'),
        ("text after the object", b'{"decision":"allow_once"} {"x":1}'),
    ]
    for i, (what, body) in enumerate(answers):
        r.answer = (200, body)
        resp = Waiter(d, up.port).finish()
        check_refusal(resp, "prompt_timeout", what)
        check_eq(len(r.got()), i + 1, "deliveries after %s" % what)
    wait_until(lambda: len(stderr_lines(d, "ignoring the answer, it is not "
                                        "one JSON object")) == 3, 5,
               what="a diagnostic line per refused answer")
    check(not [x for x in read_log(d.log_path)
               if x.get("event") == "prompt_answer" and
               x.get("answer") != "timeout"],
          "a prompt was answered by a refused answer")
    check(not decisions(d.log_path, decision="allow", host="ask.test"),
          "a request was allowed")


def server_ctx(crt, key):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(crt, key)
    return ctx


ENDLESS_MAX = 400 << 20      # what one connection may send, at most


def endless_headers(server, conn, peer):
    """A 200 whose header section never ends."""
    _read_request(conn, bytearray(), timeout=10)
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
    chunk = (b"X-Pad: " + b"a" * 1000 + b"\r\n") * 64
    sent, deadline = 0, time.monotonic() + 4
    try:
        while sent < ENDLESS_MAX and time.monotonic() < deadline:
            conn.sendall(chunk)
            sent += len(chunk)
    except OSError:
        pass
    server.record(("sent", sent))


@S.case
def endless_header_section(env):
    ca = make_ca(env, "ca")
    crt, key = make_server_cert(env, ca)
    srv = TCPServer(endless_headers, ssl_ctx=server_ctx(crt, key),
                    conn_timeout=5)
    env.closers.append(srv.close)
    d, up = setup(env, srv.port, ca[0], timeout_s=8)
    base = peak = vmrss_kib(d.pid)
    w = Waiter(d, up.port)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and \
            not stderr_lines(d, "attempt 2 failed"):
        peak = max(peak, vmrss_kib(d.pid))
        time.sleep(0.02)
    log_lines = stderr_lines(d, "failed after")
    check(len(log_lines) >= 2, "no two failed attempts:\n%s", d.stderr())
    for l in log_lines[:2]:
        check("response header section longer than 8192 bytes" in l,
              "attempt line %r", l)
    log("VmRSS %d KiB before the prompt, %d KiB at most after" % (base, peak))
    # unbounded, the 1.5 s attempt alone held hundreds of MiB
    check(peak - base < 32 << 10, "VmRSS grew from %d to %d KiB",
          base, peak)
    check_refusal(w.finish(), "prompt_timeout")
    check(d.alive(), "sluiced died")


def half_answer(server, conn, peer):
    """A 200 with most of its body, then nothing until sluiced hangs up."""
    _read_request(conn, bytearray(), timeout=10)
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 65000\r\n\r\n" + b" " * 60000)
    try:
        conn.recv(1)
    except OSError:
        pass


@S.case
def stalled_answers_share_a_bound(env):
    # 81 attempts holding 60 kB each pass the 4 MiB that answers in
    # flight may hold together; the attempts past it fail at once, the
    # others at their deadline.  27 prompts in each of three chats: a
    # chat may have 32 pending.
    ca = make_ca(env, "ca")
    crt, key = make_server_cert(env, ca)
    srv = TCPServer(half_answer, ssl_ctx=server_ctx(crt, key),
                    conn_timeout=10)
    env.closers.append(srv.close)
    hosts = ["h%d.ask.test" % i for i in range(81)]
    sids = ("c1", "c2", "c3")
    d, up = setup(env, srv.port, ca[0], timeout_s=4, hosts=hosts, sids=sids)
    ws = [Waiter(d, up.port, host=h, sid=sids[i % 3])
          for i, h in enumerate(hosts)]
    for w in ws:
        check_refusal(w.finish(), "prompt_timeout")
    over = stderr_lines(d, "answers in flight hold more than 4194304 bytes")
    log("%d attempt lines, %d for the shared bound" % (
        len(stderr_lines(d, "failed after")), len(over)))
    check(over, "no attempt failed for the shared bound:\n%s",
          "\n".join(stderr_lines(d, "webhook:")[:20]))
    check([l for l in stderr_lines(d, "failed after") if "timed out" in l],
          "no attempt within the bound ran to its deadline")
    check(d.alive(), "sluiced died")


if __name__ == "__main__":
    S.main()
