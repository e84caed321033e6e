#!/usr/bin/env python3
"""CONNECT tunnels allowed: raw python, http.client, urllib, curl, a Unix
session socket, early data, canonical hosts, next address on failure; and
refused to plain-HTTP ports (connect_plain_port), whose Host only the
forwarder checks."""

import http.client
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, check, check_eq, curl, curl_status, do_connect,  # noqa: E402
                     read_response, decisions, wait_close, addr_only,
                     as_list, get_request, read_head, read_body,
                     transport_kind, check_refusal, is_closed)

S = Suite("t_connect")


def setup(env, hosts=None, **over):
    up = env.http_upstream()
    h = {"up.test": ["127.0.0.1"]}
    h.update(hosts or {})
    cfg = env.config(ports=env.ports(up.port), dns={"hosts": h}, **over)
    d = env.sluiced(cfg)
    return d, up


def tunnel_get(sock, host, port, path="/"):
    sock.sendall(("GET %s HTTP/1.1\r\nHost: %s:%d\r\n\r\n"
                  % (path, host, port)).encode())
    r = read_response(sock)
    check_eq(r.status, 200, "status through the tunnel")
    return json.loads(r.body)


@S.case
def connect_raw_python(env):
    d, up = setup(env)
    s = d.connect(env.src(1))
    resp, rest = do_connect(s, "up.test", up.port)
    check_eq(resp.status, 200, "CONNECT status")
    check_eq(rest, b"", "bytes after the 200 head")
    doc = tunnel_get(s, "up.test", up.port, "/hello?x=1")
    check_eq(doc["path"], "/hello?x=1", "path seen upstream")
    check_eq(doc["host"], "up.test:%d" % up.port, "Host seen upstream")
    # a second request through the same tunnel: it is a byte pipe
    doc = tunnel_get(s, "up.test", up.port, "/again")
    check_eq(doc["path"], "/again", "second request in the tunnel")
    s.close()
    rec = wait_close(d.log_path, up.port)
    dec = decisions(d.log_path, method="CONNECT", host="up.test")
    check_eq(len(dec), 1, "decision records for the tunnel")
    dec = dec[0]
    for k, v in (("session", "s1"), ("tenant", "acme"), ("user", "alice"),
                 ("port", up.port), ("tier", "public"), ("ceiling", "public"),
                 ("decision", "allow"), ("rule", "public")):
        check_eq(dec.get(k), v, "decision.%s" % k)
    check(transport_kind(dec) == "tcp", "decision.transport %r",
          dec.get("transport"))
    check_eq([addr_only(a) for a in as_list(dec.get("addrs"))], ["127.0.0.1"],
             "decision.addrs")
    check_eq(addr_only(dec.get("dialed")), "127.0.0.1", "decision.dialed")
    check(rec.get("bytes_up", 0) > 0 and rec.get("bytes_down", 0) > 0,
          "close record counts bytes: %r", rec)
    check(isinstance(rec.get("duration_ms"), int), "close.duration_ms %r",
          rec.get("duration_ms"))


@S.case
def connect_curl(env):
    d, up = setup(env)
    r = curl(["-p", "-x", d.proxy_url(), "-w", "\n%{http_code}",
              "http://up.test:%d/curl-tunnel" % up.port], src=env.src(1))
    check_eq(r.returncode, 0, "curl exit (stderr %r)" % r.stderr)
    body, code = curl_status(r.stdout)
    check_eq(code, 200, "curl status")
    check_eq(json.loads(body)["path"], "/curl-tunnel", "path upstream")
    check(decisions(d.log_path, method="CONNECT", decision="allow"),
          "no CONNECT allow record")


@S.case
def connect_http_client(env):
    d, up = setup(env)
    host, port = d.tcp_addr
    c = http.client.HTTPConnection(host, port, timeout=10,
                                   source_address=(env.src(1), 0))
    c.set_tunnel("up.test", up.port)
    c.request("GET", "/via-http-client", headers={"X-Test": "1"})
    r = c.getresponse()
    check_eq(r.status, 200, "http.client status")
    doc = json.loads(r.read())
    check_eq(doc["path"], "/via-http-client", "path")
    # keep-alive inside the tunnel
    c.request("GET", "/second")
    r = c.getresponse()
    check_eq(json.loads(r.read())["path"], "/second", "second path")
    c.close()


@S.case
def connect_unix_session(env):
    up = env.http_upstream()
    cfg = env.config(
        sessions=[{"id": "u1", "tenant": "acme", "user": "bob", "tier": "public"}],
        ports=env.ports(up.port), dns={"hosts": {"up.test": ["127.0.0.1"]}})
    d = env.sluiced(cfg)
    path = d.session_socket("u1")
    check(os.path.exists(path), "session socket %s missing", path)
    s = d.connect_unix("u1")
    resp, _ = do_connect(s, "up.test", up.port)
    check_eq(resp.status, 200, "CONNECT over the Unix socket")
    check_eq(tunnel_get(s, "up.test", up.port, "/unix")["path"], "/unix", "path")
    s.close()
    # plain HTTP over the same socket
    s = d.connect_unix("u1")
    s.sendall(get_request("http://up.test:%d/unix-plain" % up.port))
    r = read_response(s)
    check_eq(r.status, 200, "plain HTTP over the Unix socket")
    s.close()
    dec = decisions(d.log_path, session="u1", decision="allow")
    check_eq(len(dec), 2, "allow records for u1")
    check_eq(transport_kind(dec[0]), "unix", "transport %r" % dec[0].get("transport"))
    check_eq(dec[0].get("user"), "bob", "user")


@S.case
def connect_early_data_kept(env):
    d, up = setup(env)
    s = d.connect(env.src(1))
    early = b"GET /early HTTP/1.1\r\nHost: up.test:%d\r\n\r\n" % up.port
    resp, rest = do_connect(s, "up.test", up.port, extra=early)
    check_eq(resp.status, 200, "CONNECT status")
    # the upstream's answer to the early request follows the 200
    r, rest2 = read_head(s, pre=rest)
    r.body, _ = read_body(s, r, rest2)
    check_eq(r.status, 200, "answer to the early request")
    check_eq(json.loads(r.body)["path"], "/early", "early request reached upstream")
    s.close()


@S.case
def connect_canonical_host(env):
    d, up = setup(env)
    s = d.connect(env.src(1))
    resp, _ = do_connect(s, "UP.Test.", up.port)
    check_eq(resp.status, 200, "CONNECT to UP.Test.")
    s.close()
    dec = decisions(d.log_path, method="CONNECT")
    check_eq(dec[-1].get("host"), "up.test", "logged canonical host")


@S.case
def connect_next_address(env):
    # 127.0.0.4:P refuses (nothing there), 127.0.0.1:P serves: the proxy
    # must move on to the next checked address.
    d, up = setup(env, hosts={"two.test": ["127.0.0.4", "127.0.0.1"]})
    s = d.connect(env.src(1))
    resp, _ = do_connect(s, "two.test", up.port)
    check_eq(resp.status, 200, "CONNECT with a refusing first address")
    check_eq(tunnel_get(s, "two.test", up.port)["path"], "/", "path")
    s.close()
    dec = decisions(d.log_path, host="two.test")[-1]
    check_eq(sorted(addr_only(a) for a in as_list(dec.get("addrs"))),
             ["127.0.0.1", "127.0.0.4"], "addrs")
    check_eq(addr_only(dec.get("dialed")), "127.0.0.1", "dialed")


@S.case
def connect_ipv4_literal(env):
    d, up = setup(env)
    s = d.connect(env.src(1))
    resp, _ = do_connect(s, "127.0.0.1", up.port)
    check_eq(resp.status, 200, "CONNECT to an admitted literal")
    s.close()
    dec = decisions(d.log_path, host="127.0.0.1")
    check(dec and addr_only(dec[-1].get("dialed")) == "127.0.0.1",
          "literal dialed: %r", dec)


@S.case
def connect_many_sequential(env):
    # bounded: 40 short tunnels, each a full round trip
    d, up = setup(env)
    for i in range(40):
        s = d.connect(env.src(1))
        resp, _ = do_connect(s, "up.test", up.port)
        check_eq(resp.status, 200, "CONNECT #%d" % i)
        check_eq(tunnel_get(s, "up.test", up.port, "/n%d" % i)["path"],
                 "/n%d" % i, "path #%d" % i)
        s.close()
    wait_close(d.log_path, up.port)
    check(d.alive(), "sluiced died")


@S.case
def connect_plain_port_refused(env):
    # a tunnel to port 80 of an admitted name carries requests whose Host
    # nobody checks: any virtual host behind that name's front end.
    # Refused by default, before any decision, resolution or dial.
    d, up = setup(env)
    s = d.connect(env.src(1))
    resp, _ = do_connect(s, "up.test", 80)
    check_refusal(resp, "connect_plain_port", "CONNECT up.test:80")
    check(is_closed(s, 5.0), "connection open after the refusal")
    s.close()
    dec = decisions(d.log_path, method="CONNECT", port=80)
    check_eq(len(dec), 1, "decision records")
    check_eq(dec[0].get("decision"), "deny", "decision")
    check_eq(dec[0].get("reason"), "connect_plain_port", "reason")
    check_eq(as_list(dec[0].get("addrs")), [], "addrs (nothing resolved)")


@S.case
def connect_plain_ports_configured(env):
    # tls.plain_http_ports names the plain-HTTP ports; plain HTTP to them
    # still goes through the forwarder, with its Host check
    up = env.http_upstream()
    cfg = env.config(ports=env.ports(up.port),
                     dns={"hosts": {"up.test": ["127.0.0.1"]}},
                     tls={"plain_http_ports": [up.port]})
    d = env.sluiced(cfg)
    s = d.connect(env.src(1))
    resp, _ = do_connect(s, "up.test", up.port)
    check_refusal(resp, "connect_plain_port", "CONNECT up.test:%d" % up.port)
    s.close()
    check_eq(up.accept_count(), 0, "connections the upstream saw")
    s = d.connect(env.src(1))
    s.sendall(get_request("http://up.test:%d/fwd" % up.port))
    r = read_response(s)
    check_eq(r.status, 200, "absolute-form request to the same port")
    check_eq(json.loads(r.body)["path"], "/fwd", "path upstream")
    s.sendall(get_request("http://up.test:%d/vhost" % up.port,
                          host_header="other.test:%d" % up.port))
    check_refusal(read_response(s), "host_mismatch", "another Host")
    s.close()
    # 80 is no longer in the list: a CONNECT there is decided as usual
    # (and fails to dial, nothing listens there)
    s = d.connect(env.src(1))
    resp, _ = do_connect(s, "up.test", 80)
    check(resp.sluice_reason != "connect_plain_port",
          "CONNECT :80 with 80 not listed: %r", resp)
    s.close()


if __name__ == "__main__":
    S.main()
