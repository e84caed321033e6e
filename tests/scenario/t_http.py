#!/usr/bin/env python3
"""Plain HTTP forwarding: curl, urllib, http.client, raw keep-alive,
hop-by-hop removal, Proxy-Authorization, bodies, per-request decisions."""

import hashlib
import http.client
import json
import os
import sys
import urllib.error

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, check, check_eq, curl, curl_status,  # noqa: E402
                     read_response, decisions, get_request, urllib_opener,
                     check_refusal, pattern_digest, is_closed)

S = Suite("t_http")


def setup(env, **over):
    up = env.http_upstream()
    up2 = env.http_upstream()
    hosts = {"up.test": ["127.0.0.1"], "up2.test": ["127.0.0.1"],
             "bad.test": ["127.0.0.1"]}
    cfg = env.config(ports=env.ports(up.port, up2.port),
                     dns={"hosts": hosts}, deny_hosts=["bad.test"], **over)
    d = env.sluiced(cfg)
    return d, up, up2


def hdr(doc, name):
    vals = [v for k, v in doc["headers"] if k.lower() == name.lower()]
    return vals


@S.case
def http_curl(env):
    d, up, _ = setup(env)
    r = curl(["-x", d.proxy_url(), "-w", "\n%{http_code}",
              "-H", "X-End-To-End: yes",
              "--proxy-user", "sandbox:secret",
              "http://up.test:%d/p/a?q=1" % up.port], src=env.src(1))
    check_eq(r.returncode, 0, "curl exit (stderr %r)" % r.stderr)
    body, code = curl_status(r.stdout)
    check_eq(code, 200, "status")
    doc = json.loads(body)
    check_eq(doc["method"], "GET", "method upstream")
    check_eq(doc["path"], "/p/a?q=1", "origin-form path upstream")
    check_eq(doc["host"], "up.test:%d" % up.port, "Host upstream")
    check_eq(hdr(doc, "X-End-To-End"), ["yes"], "end-to-end header kept")
    check_eq(hdr(doc, "Proxy-Authorization"), [], "Proxy-Authorization upstream")
    check_eq(hdr(doc, "Proxy-Connection"), [], "Proxy-Connection upstream")
    dec = decisions(d.log_path, method="GET", host="up.test")
    check_eq(len(dec), 1, "decision records")
    check_eq(dec[0].get("decision"), "allow", "decision")
    check_eq(dec[0].get("port"), up.port, "port")


@S.case
def http_urllib(env):
    d, up, _ = setup(env)
    op = urllib_opener(d, env.src(1))
    with op.open("http://up.test:%d/urllib" % up.port, timeout=10) as r:
        check_eq(r.status, 200, "urllib status")
        check_eq(json.loads(r.read())["path"], "/urllib", "path")
    # a refusal through urllib: an HTTPError carrying the reason header
    try:
        op.open("http://bad.test:%d/" % up.port, timeout=10)
        check(False, "bad.test was not refused")
    except urllib.error.HTTPError as e:
        check_eq(e.code, 403, "urllib refusal status")
        check_eq(e.headers.get("X-Sluice-Reason"), "admin_deny", "reason")


@S.case
def http_client_keepalive(env):
    d, up, up2 = setup(env)
    host, port = d.tcp_addr
    c = http.client.HTTPConnection(host, port, timeout=10,
                                   source_address=(env.src(1), 0))
    body = os.urandom(100000)
    c.request("POST", "http://up.test:%d/post" % up.port, body=body,
              headers={"Content-Type": "application/octet-stream"})
    r = c.getresponse()
    check_eq(r.status, 200, "POST status")
    doc = json.loads(r.read())
    check_eq(doc["method"], "POST", "method")
    check_eq(doc["body_sha256"], hashlib.sha256(body).hexdigest(), "body upstream")
    c.request("GET", "http://up2.test:%d/other" % up2.port)
    r = c.getresponse()
    check_eq(r.status, 200, "second request to another host")
    doc = json.loads(r.read())
    check_eq(doc["host"], "up2.test:%d" % up2.port, "second Host")
    check_eq(up2.accept_count(), 1, "up2 connections")
    c.close()
    check_eq(len(decisions(d.log_path, method="POST")), 1, "POST decision")
    check_eq(len(decisions(d.log_path, host="up2.test")), 1, "up2 decision")


@S.case
def keepalive_second_request_refused(env):
    d, up, _ = setup(env)
    s = d.connect(env.src(1))
    s.sendall(get_request("http://up.test:%d/first" % up.port))
    r1 = read_response(s)
    check_eq(r1.status, 200, "first request")
    check_eq(json.loads(r1.body)["path"], "/first", "first path")
    s.sendall(get_request("http://bad.test:%d/second" % up.port))
    r2 = read_response(s)
    check_refusal(r2, "admin_deny", "second request on the same connection")
    check(b"bad.test" in r2.body, "refusal body names the host: %r", r2.body)
    s.close()
    paths = [e["path"] for e in up.events if isinstance(e, dict)]
    check_eq(paths, ["/first"], "requests that reached upstream")
    dec = decisions(d.log_path)
    check_eq([x.get("decision") for x in dec], ["allow", "deny"], "decisions")
    check_eq(dec[1].get("reason"), "admin_deny", "second reason")


@S.case
def keepalive_refused_then_allowed(env):
    # a refusal that keeps the connection open must not poison the next one
    d, up, _ = setup(env)
    s = d.connect(env.src(1))
    s.sendall(get_request("http://bad.test:%d/" % up.port))
    r1 = read_response(s)
    check_refusal(r1, "admin_deny", "first request")
    if (r1.header("Connection") or "").lower() == "close":
        check(is_closed(s), "Connection: close but still open")
        return
    s.sendall(get_request("http://up.test:%d/after" % up.port))
    r2 = read_response(s)
    check_eq(r2.status, 200, "request after a refusal")
    s.close()


@S.case
def hop_by_hop_removed(env):
    d, up, _ = setup(env)
    s = d.connect(env.src(1))
    s.sendall(get_request(
        "http://up.test:%d/hop" % up.port,
        headers=[("Connection", "keep-alive, X-Hop"), ("X-Hop", "1"),
                 ("Keep-Alive", "timeout=5"), ("TE", "trailers"),
                 ("Proxy-Connection", "keep-alive"),
                 ("Proxy-Authorization", "Basic Zm9vOmJhcg=="),
                 ("X-Keep", "kept")]))
    r = read_response(s)
    check_eq(r.status, 200, "status")
    doc = json.loads(r.body)
    for h in ("X-Hop", "Keep-Alive", "TE", "Proxy-Connection",
              "Proxy-Authorization"):
        check_eq(hdr(doc, h), [], "%s upstream" % h)
    conn = [v.lower() for v in hdr(doc, "Connection")]
    check(all("x-hop" not in v for v in conn), "Connection upstream %r", conn)
    check_eq(hdr(doc, "X-Keep"), ["kept"], "end-to-end header")
    s.close()


@S.case
def big_and_slow_bodies(env):
    d, up, _ = setup(env)
    s = d.connect(env.src(1))
    n = 5 * 1024 * 1024
    s.sendall(get_request("http://up.test:%d/big?n=%d" % (up.port, n)))
    r = read_response(s, timeout=30)
    check_eq(r.status, 200, "big status")
    check_eq(len(r.body), n, "big length")
    check_eq(hashlib.sha256(r.body).hexdigest(), pattern_digest(n), "big bytes")
    s.sendall(get_request("http://up.test:%d/slow" % up.port))
    r = read_response(s, timeout=10)
    check_eq(r.body, b"slow-piece;" * 5, "slow body")
    s.sendall(get_request("http://up.test:%d/close" % up.port))
    r = read_response(s, timeout=10)
    check_eq(r.body, b"bye\n", "close body")
    s.close()


@S.case
def chunked_request_body(env):
    d, up, _ = setup(env)
    s = d.connect(env.src(1))
    body = b"hello, chunked world" * 100
    chunks = b""
    for i in range(0, len(body), 700):
        part = body[i:i + 700]
        chunks += b"%x\r\n%s\r\n" % (len(part), part)
    chunks += b"0\r\n\r\n"
    s.sendall(("POST http://up.test:%d/chunked HTTP/1.1\r\nHost: up.test:%d\r\n"
               "Transfer-Encoding: chunked\r\n\r\n" % (up.port, up.port)).encode()
              + chunks)
    r = read_response(s)
    check_eq(r.status, 200, "status")
    check_eq(json.loads(r.body)["body_sha256"], hashlib.sha256(body).hexdigest(),
             "chunked body upstream")
    s.close()


@S.case
def http10_client(env):
    d, up, _ = setup(env)
    s = d.connect(env.src(1))
    s.sendall(("GET http://up.test:%d/ten HTTP/1.0\r\nHost: up.test:%d\r\n\r\n"
               % (up.port, up.port)).encode())
    r = read_response(s)
    check_eq(r.status, 200, "HTTP/1.0 status")
    check_eq(json.loads(r.body)["path"], "/ten", "path")
    s.close()


if __name__ == "__main__":
    S.main()
