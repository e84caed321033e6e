#!/usr/bin/env python3
"""CONNECT to SNI-checked ports: a good handshake (curl -k, urllib, early
ClientHello, fragmented ClientHello) and the closing cases sni_mismatch,
sni_missing, not_tls, ech_refused (Encrypted Client Hello, ESNI), where
no byte may reach the upstream; the checked name in the close record."""

import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, check, check_eq, curl, curl_status, do_connect,  # noqa: E402
                     read_log, wait_until, recorder_handler, client_hello,
                     TLSOverSocket, urllib_opener, insecure_ctx, is_closed,
                     read_head, read_body, decisions, wait_close,
                     hello_with_extension, GREASE_ECH)

S = Suite("t_sni")


def setup(env, tls_extra=None, **over):
    tls = env.tls_upstream(("tls.test",))
    rec = env.server(recorder_handler)
    plain = env.http_upstream()
    hosts = {"tls.test": ["127.0.0.1"], "other.test": ["127.0.0.1"],
             "rec.test": ["127.0.0.1"], "up.test": ["127.0.0.1"]}
    t = {"sni_check": True, "sni_timeout_ms": 1000,
         "sni_ports": [443, tls.port, rec.port]}
    t.update(tls_extra or {})
    cfg = env.config(ports=env.ports(tls.port, rec.port, plain.port),
                     dns={"hosts": hosts}, tls=t, **over)
    d = env.sluiced(cfg)
    return d, tls, rec, plain


def any_record_with_reason(d, reason):
    return [r for r in read_log(d.log_path) if r.get("reason") == reason]


def recorded_bytes(rec, timeout=5.0):
    ev = wait_until(lambda: [e for e in rec.events if e[0] == "bytes"], timeout,
                    what="the recorder upstream to see its connection end")
    return ev[0][2]


def closed_without_upstream_bytes(env, d, rec, payload, reason, host="rec.test"):
    s = d.connect(env.src(1))
    resp, rest = do_connect(s, host, rec.port)
    check_eq(resp.status, 200, "CONNECT %s:%d" % (host, rec.port))
    check_eq(rest, b"", "bytes after 200")
    if payload:
        s.sendall(payload)
    check(is_closed(s, 5.0), "tunnel not closed after a bad first flight (%s)", reason)
    s.close()
    got = recorded_bytes(rec)
    check_eq(len(got), 0, "bytes that reached the upstream (%s)" % reason)
    wait_until(lambda: any_record_with_reason(d, reason), 5,
               what="a log record with reason %s" % reason)


@S.case
def curl_tls_good(env):
    d, tls, _, _ = setup(env)
    r = curl(["-k", "-x", d.proxy_url(), "-w", "\n%{http_code}",
              "https://tls.test:%d/secure" % tls.port], src=env.src(1))
    check_eq(r.returncode, 0, "curl exit (stderr %r)" % r.stderr)
    body, code = curl_status(r.stdout)
    check_eq(code, 200, "status")
    doc = json.loads(body)
    check_eq(doc["path"], "/secure", "path upstream")
    check(doc["tls"], "upstream did not see TLS")
    check_eq(tls.seen_sni, ["tls.test"], "SNI seen by the upstream")
    dec = decisions(d.log_path, host="tls.test", method="CONNECT")
    check(dec and dec[0].get("decision") == "allow", "allow record: %r", dec)


@S.case
def urllib_https_good(env):
    d, tls, _, _ = setup(env)
    op = urllib_opener(d, env.src(1), https_context=insecure_ctx())
    with op.open("https://tls.test:%d/urllib-tls" % tls.port, timeout=10) as r:
        check_eq(r.status, 200, "status")
        check_eq(json.loads(r.read())["path"], "/urllib-tls", "path")


@S.case
def early_client_hello(env):
    # the ClientHello in the same write as the CONNECT head must be kept
    d, tls, _, _ = setup(env)
    s = d.connect(env.src(1))
    t = TLSOverSocket(s, "tls.test")
    hello = t.first_flight()
    resp, rest = do_connect(s, "tls.test", tls.port, extra=hello)
    check_eq(resp.status, 200, "CONNECT status")
    t.feed(rest)
    t.handshake()
    t.sendall(b"GET /early-tls HTTP/1.1\r\nHost: tls.test\r\n\r\n")
    buf = b""
    for _ in range(50):
        buf += t.recv_some()
        if b"/early-tls" in buf:
            break
    check(b"/early-tls" in buf, "no answer through the TLS tunnel: %r", buf[:200])
    s.close()


@S.case
def fragmented_client_hello(env):
    d, tls, _, _ = setup(env)
    s = d.connect(env.src(1))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    t = TLSOverSocket(s, "tls.test")
    hello = t.first_flight()
    resp, rest = do_connect(s, "tls.test", tls.port)
    check_eq(resp.status, 200, "CONNECT status")
    # the record header and a few bytes, a pause, then the rest
    s.sendall(hello[:7])
    time.sleep(0.3)
    s.sendall(hello[7:])
    t.handshake()
    t.sendall(b"GET /frag HTTP/1.1\r\nHost: tls.test\r\n\r\n")
    buf = b""
    for _ in range(50):
        buf += t.recv_some()
        if b"/frag" in buf:
            break
    check(b"/frag" in buf, "no answer after a fragmented ClientHello")
    s.close()


@S.case
def sni_mismatch(env):
    d, _, rec, _ = setup(env)
    closed_without_upstream_bytes(env, d, rec, client_hello("other.test"),
                                  "sni_mismatch")


@S.case
def sni_missing(env):
    d, _, rec, _ = setup(env)
    closed_without_upstream_bytes(env, d, rec, client_hello(None), "sni_missing")


@S.case
def not_tls(env):
    d, _, rec, _ = setup(env)
    closed_without_upstream_bytes(
        env, d, rec, b"GET / HTTP/1.1\r\nHost: rec.test\r\n\r\n" + b"x" * 600,
        "not_tls")


@S.case
def sni_mismatch_early_bytes(env):
    # a bad ClientHello sent together with the CONNECT head: same outcome
    d, _, rec, _ = setup(env)
    s = d.connect(env.src(1))
    resp, rest = do_connect(s, "rec.test", rec.port,
                            extra=client_hello("other.test"))
    check(resp.status in (200,) or resp.sluice_reason == "sni_mismatch",
          "CONNECT answer %r", resp)
    check(is_closed(s, 5.0), "tunnel not closed")
    s.close()
    check_eq(len(recorded_bytes(rec)), 0, "bytes that reached the upstream")
    wait_until(lambda: any_record_with_reason(d, "sni_mismatch"), 5,
               what="sni_mismatch record")


@S.case
def sni_wait_times_out(env):
    # nothing after the 200: closed after tls.sni_timeout_ms, no bytes up
    d, _, rec, _ = setup(env)
    s = d.connect(env.src(1))
    resp, _ = do_connect(s, "rec.test", rec.port)
    check_eq(resp.status, 200, "CONNECT status")
    t0 = time.monotonic()
    check(is_closed(s, 6.0), "tunnel still open without a ClientHello")
    check(time.monotonic() - t0 < 5.0, "closed only after %.1fs",
          time.monotonic() - t0)
    s.close()
    check_eq(len(recorded_bytes(rec)), 0, "bytes that reached the upstream")


@S.case
def allowed_tunnel_logs_sni(env):
    # the allow record of a CONNECT is written before the ClientHello
    # comes: the close record carries the name the tunnel was checked on
    d, tls, _, _ = setup(env)
    r = curl(["-k", "-x", d.proxy_url(), "-o", "/dev/null", "-w",
              "%{http_code}", "https://tls.test:%d/logged" % tls.port],
             src=env.src(1))
    check_eq(r.returncode, 0, "curl exit (stderr %r)" % r.stderr)
    check_eq(r.stdout.strip(), b"200", "status")
    rec = wait_close(d.log_path, tls.port)
    check_eq(rec.get("sni"), "tls.test", "close.sni (record %r)" % rec)
    check_eq(rec.get("host"), "tls.test", "close.host")
    # a tunnel to an unchecked port has no SNI to tell
    d.stop()
    d2, _, _, plain = setup(env)
    s = d2.connect(env.src(1))
    resp, _ = do_connect(s, "up.test", plain.port)
    check_eq(resp.status, 200, "CONNECT to an unchecked port")
    s.close()
    rec = wait_close(d2.log_path, plain.port)
    check("sni" not in rec, "close record of an unchecked tunnel: %r", rec)


def ech_refusal(env, ext_type, at_end):
    d, _, rec, _ = setup(env)
    hello = hello_with_extension(client_hello("rec.test"), ext_type,
                                 GREASE_ECH, at_end=at_end)
    closed_without_upstream_bytes(env, d, rec, hello, "ech_refused")
    r = [x for x in read_log(d.log_path)
         if x.get("event") == "decision" and x.get("reason") == "ech_refused"]
    check_eq(r[-1].get("decision"), "deny", "decision")
    # the outer name matched the CONNECT host: only ECH refused it
    check_eq(r[-1].get("sni"), "rec.test", "sni of the refused hello")


@S.case
def ech_refused(env):
    # the outer SNI names the CONNECT host, the inner (encrypted) one
    # may name anything behind the same front end
    ech_refusal(env, 0xfe0d, False)


@S.case
def esni_refused(env):
    ech_refusal(env, 0xffce, True)


@S.case
def ech_allowed_by_admin(env):
    # tls.allow_ech: the outer name is checked and the hello relayed
    d, _, rec, _ = setup(env, tls_extra={"allow_ech": True})
    hello = hello_with_extension(client_hello("rec.test"), 0xfe0d, GREASE_ECH)
    s = d.connect(env.src(1))
    resp, _ = do_connect(s, "rec.test", rec.port)
    check_eq(resp.status, 200, "CONNECT")
    s.sendall(hello)
    check(not is_closed(s, 1.0), "tunnel closed after an allowed ECH hello")
    s.close()
    check_eq(recorded_bytes(rec), hello, "bytes that reached the upstream")
    rec_close = wait_close(d.log_path, rec.port)
    check_eq(rec_close.get("sni"), "rec.test", "close.sni")
    # and an outer name that differs is still a mismatch
    d.stop()
    d, _, rec, _ = setup(env, tls_extra={"allow_ech": True})
    hello = hello_with_extension(client_hello("other.test"), 0xfe0d,
                                 GREASE_ECH)
    closed_without_upstream_bytes(env, d, rec, hello, "sni_mismatch")


@S.case
def unchecked_port_passes_plain_bytes(env):
    # ports outside tls.sni_ports carry any protocol
    d, _, _, plain = setup(env)
    s = d.connect(env.src(1))
    resp, _ = do_connect(s, "up.test", plain.port)
    check_eq(resp.status, 200, "CONNECT status")
    s.sendall(b"GET /plain HTTP/1.1\r\nHost: up.test\r\n\r\n")
    r, rest = read_head(s)
    r.body, _ = read_body(s, r, rest)
    check_eq(json.loads(r.body)["path"], "/plain", "path")
    s.close()


if __name__ == "__main__":
    S.main()
