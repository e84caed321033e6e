#!/usr/bin/env python3
"""Every policy refusal reachable without prompts: status, X-Sluice-Reason,
one-line text/plain body, and a decision record with the same reason."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, check, check_eq, do_connect, read_response,  # noqa: E402
                     decisions, get_request, check_refusal, refuse_port,
                     as_list, addr_only)

S = Suite("t_refusals")


def setup(env, sessions=None, extra_ports=(), **over):
    up = env.http_upstream()
    dead = refuse_port()
    hosts = {"up.test": ["127.0.0.1"], "pkg.test": ["127.0.0.1"],
             "priv.test": ["10.0.0.1"], "meta.test": ["169.254.169.254"],
             "denyaddr.test": ["127.0.0.9"], "bad.test": ["127.0.0.1"],
             "x.evil.test": ["127.0.0.1"]}
    if sessions is None:
        sessions = [
            {"id": "pub", "tenant": "acme", "user": "alice", "tier": "public",
             "source": env.src(1)},
            {"id": "reg", "tenant": "acme", "user": "bob", "tier": "registries",
             "source": env.src(2)},
            {"id": "off", "tenant": "acme", "user": "carol", "tier": "off",
             "source": env.src(3)},
        ]
    base = dict(ports=env.ports(up.port, dead, *extra_ports), dns={"hosts": hosts},
                registries=["pkg.test"], deny_hosts=["bad.test", "*.evil.test"],
                deny_cidrs=["127.0.0.9/32"], allow_cidrs=["127.0.0.0/8"])
    base.update(over)
    d = env.sluiced(env.config(sessions=sessions, **base))
    return d, up, dead


def connect_refused(d, src, host, port, reason, authority=None):
    s = d.connect(src)
    resp, _ = do_connect(s, host, port, authority=authority)
    what = "CONNECT %s" % (authority or "%s:%s" % (host, port))
    check_refusal(resp, reason, what)
    s.close()
    return resp


def plain_refused(d, src, raw, reason, what):
    s = d.connect(src)
    s.sendall(raw)
    r = read_response(s)
    check_refusal(r, reason, what)
    s.close()
    return r


def logged(d, reason, n=1, **match):
    recs = decisions(d.log_path, reason=reason, **match)
    check(len(recs) >= n, "expected %d decision record(s) with reason %s, log has %r",
          n, reason, [(r.get("host"), r.get("reason")) for r in decisions(d.log_path)])
    return recs


@S.case
def allowed_controls(env):
    # the refusal cases below mean something only if these pass
    d, up, _ = setup(env)
    for src, host in ((env.src(1), "up.test"), (env.src(2), "pkg.test")):
        s = d.connect(src)
        resp, _ = do_connect(s, host, up.port)
        check_eq(resp.status, 200, "CONNECT %s from %s" % (host, src))
        s.close()
    check_eq(decisions(d.log_path, host="pkg.test")[0].get("rule"), "registries",
             "rule for a registry host")


@S.case
def session_unknown(env):
    d, up, _ = setup(env)
    r = connect_refused(d, env.src(99), "up.test", up.port, "session_unknown")
    check_eq(r.status, 403, "status")
    plain_refused(d, env.src(98), get_request("http://up.test:%d/" % up.port),
                  "session_unknown", "GET from an unknown source")
    recs = logged(d, "session_unknown", 2)
    check(all(r.get("decision") == "deny" for r in recs), "decision deny")
    check_eq(up.accept_count(), 0, "upstream connections")


@S.case
def port_not_allowed(env):
    d, up, _ = setup(env)
    connect_refused(d, env.src(1), "up.test", 1, "port_not_allowed")
    connect_refused(d, env.src(1), "up.test", 22, "port_not_allowed")
    plain_refused(d, env.src(1), get_request("http://up.test:25/"),
                  "port_not_allowed", "GET :25")
    logged(d, "port_not_allowed", 3)


@S.case
def admin_deny(env):
    d, up, _ = setup(env)
    r = connect_refused(d, env.src(1), "bad.test", up.port, "admin_deny")
    check(b"bad.test" in r.body, "body names the host: %r", r.body)
    connect_refused(d, env.src(1), "x.evil.test", up.port, "admin_deny")
    connect_refused(d, env.src(1), "127.0.0.9", up.port, "admin_deny")
    # a name whose only address is in deny_cidrs: the admin rule is the
    # reason a user needs to see (not private_address)
    connect_refused(d, env.src(1), "denyaddr.test", up.port, "admin_deny")
    plain_refused(d, env.src(1), get_request("http://bad.test:%d/" % up.port),
                  "admin_deny", "GET bad.test")
    logged(d, "admin_deny", 5)
    check_eq(up.accept_count(), 0, "upstream connections")


@S.case
def admin_deny_beats_registries(env):
    # deny_hosts wins over the registry list (order step 2 before 3)
    d, up, _ = setup(env, deny_hosts=["pkg.test"])
    connect_refused(d, env.src(2), "pkg.test", up.port, "admin_deny")


@S.case
def network_off(env):
    d, up, _ = setup(env, ceiling="off")
    r = connect_refused(d, env.src(1), "up.test", up.port, "network_off")
    check(b"up.test" in r.body, "body names the host: %r", r.body)
    connect_refused(d, env.src(2), "pkg.test", up.port, "network_off")
    plain_refused(d, env.src(1), get_request("http://up.test:%d/" % up.port),
                  "network_off", "GET with ceiling off")
    recs = logged(d, "network_off", 3)
    check_eq(recs[0].get("ceiling"), "off", "logged ceiling")
    check_eq(recs[0].get("tier"), "public", "logged tier")


@S.case
def network_off_by_tenant(env):
    sessions = [{"id": "t1", "tenant": "locked", "user": "u", "tier": "public",
                 "source": env.src(4)},
                {"id": "t2", "tenant": "acme", "user": "u", "tier": "public",
                 "source": env.src(5)}]
    d, up, _ = setup(env, sessions=sessions,
                     tenants={"locked": {"ceiling": "off"}})
    connect_refused(d, env.src(4), "up.test", up.port, "network_off")
    s = d.connect(env.src(5))
    resp, _ = do_connect(s, "up.test", up.port)
    check_eq(resp.status, 200, "other tenant unaffected")
    s.close()


@S.case
def above_ceiling(env):
    d, up, _ = setup(env, ceiling="registries")
    connect_refused(d, env.src(1), "up.test", up.port, "above_ceiling")
    s = d.connect(env.src(1))
    resp, _ = do_connect(s, "pkg.test", up.port)
    check_eq(resp.status, 200, "registry host under a registries ceiling")
    s.close()
    recs = logged(d, "above_ceiling")
    check_eq(recs[0].get("ceiling"), "registries", "logged ceiling")


@S.case
def no_approver(env):
    # session tier registries, ceiling public: a non-registry host is a
    # prompt; with no approver connected it is refused at once
    d, up, _ = setup(env)
    connect_refused(d, env.src(2), "up.test", up.port, "no_approver")
    plain_refused(d, env.src(2), get_request("http://up.test:%d/" % up.port),
                  "no_approver", "GET needing a prompt")
    recs = logged(d, "no_approver", 2)
    check(recs[0].get("decision") in ("prompt", "deny"), "decision %r",
          recs[0].get("decision"))
    # a session at tier off under ceiling public prompts too
    connect_refused(d, env.src(3), "up.test", up.port, "no_approver")
    check_eq(up.accept_count(), 0, "upstream connections")


@S.case
def private_address(env):
    d, up, _ = setup(env, allow_cidrs=[])
    r = connect_refused(d, env.src(1), "up.test", up.port, "private_address")
    check(b"up.test" in r.body, "body names the host: %r", r.body)
    connect_refused(d, env.src(1), "priv.test", up.port, "private_address")
    connect_refused(d, env.src(1), "10.1.2.3", up.port, "private_address")
    connect_refused(d, env.src(1), "127.0.0.1", up.port, "private_address")
    plain_refused(d, env.src(1), get_request("http://up.test:%d/" % up.port),
                  "private_address", "GET to a loopback name")
    recs = logged(d, "private_address", 5)
    rec = [x for x in recs if x.get("host") == "priv.test"][0]
    check_eq([addr_only(a) for a in as_list(rec.get("addrs"))], ["10.0.0.1"],
             "addrs of the refused name")
    check(not rec.get("dialed"), "nothing dialed: %r", rec.get("dialed"))
    check_eq(up.accept_count(), 0, "upstream connections")


@S.case
def metadata_address_not_admitted_by_loopback_cidr(env):
    d, up, _ = setup(env)   # allow_cidrs 127.0.0.0/8 only
    connect_refused(d, env.src(1), "meta.test", up.port, "private_address")
    connect_refused(d, env.src(1), "169.254.169.254", up.port, "private_address")


@S.case
def upstream_failed(env):
    d, up, dead = setup(env)
    r = connect_refused(d, env.src(1), "up.test", dead, "upstream_failed")
    check_eq(r.status, 502, "status")
    plain_refused(d, env.src(1), get_request("http://up.test:%d/" % dead),
                  "upstream_failed", "GET to a refusing port")
    recs = logged(d, "upstream_failed", 2)
    check_eq(recs[0].get("decision"), "deny", "decision")


@S.case
def upstream_timeout(env):
    # a port whose SYNs are dropped: connect_timeout_ms must end the wait
    from harness import Blackhole
    import time
    bh = Blackhole()
    env.closers.append(bh.close)
    d, up, _ = setup(env, extra_ports=(bh.port,), limits={"connect_timeout_ms": 500})
    t0 = time.monotonic()
    r = connect_refused(d, env.src(1), "up.test", bh.port, "upstream_timeout")
    el = time.monotonic() - t0
    check_eq(r.status, 504, "status")
    check(0.4 <= el < 5, "upstream_timeout after %.1fs (connect_timeout_ms 500)", el)
    logged(d, "upstream_timeout")


@S.case
def host_mismatch(env):
    d, up, _ = setup(env)
    plain_refused(d, env.src(1),
                  get_request("http://up.test:%d/" % up.port, host_header="other.test"),
                  "host_mismatch", "Host other.test")
    plain_refused(d, env.src(1),
                  get_request("http://up.test:%d/" % up.port,
                              host_header="up.test:%d" % (up.port + 1)),
                  "host_mismatch", "Host with another port")
    logged(d, "host_mismatch", 2)
    check_eq(up.accept_count(), 0, "upstream connections")


@S.case
def bad_target(env):
    d, up, _ = setup(env)
    p = up.port
    for auth in ("127.1:%d" % p, "0x7f.0.0.1:%d" % p, "2130706433:%d" % p,
                 "0177.0.0.1:%d" % p, "up.test", "up.test:0", "up.test:99999",
                 "up%%2etest:%d" % p, "[up.test]:%d" % p, "user@up.test:%d" % p):
        connect_refused(d, env.src(1), None, None, "bad_target", authority=auth)
    for raw, what in (
            (get_request("gopher://up.test:%d/" % p), "gopher://"),
            (get_request("https://up.test:%d/" % p), "https:// absolute form"),
            (b"GET /origin HTTP/1.1\r\nHost: up.test:%d\r\n\r\n" % p, "origin-form"),
            (get_request("http://127.1:%d/" % p, host_header="127.1:%d" % p),
             "http://127.1"),
            (get_request("http://user:pw@up.test:%d/" % p,
                         host_header="up.test:%d" % p), "userinfo")):
        plain_refused(d, env.src(1), raw, "bad_target", what)
    logged(d, "bad_target", 15)
    check_eq(up.accept_count(), 0, "upstream connections")


@S.case
def bad_request(env):
    d, up, _ = setup(env)
    p = up.port
    u = "http://up.test:%d/" % p
    cases = [
        (("POST %s HTTP/1.1\r\nHost: up.test:%d\r\nContent-Length: 5\r\n"
          "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" % (u, p)).encode(), "CL+TE"),
        (("POST %s HTTP/1.1\r\nHost: up.test:%d\r\nContent-Length: 5\r\n"
          "Content-Length: 6\r\n\r\nhello!" % (u, p)).encode(), "two Content-Lengths"),
        (("POST %s HTTP/1.1\r\nHost: up.test:%d\r\n"
          "Transfer-Encoding: chunked, gzip\r\n\r\n" % (u, p)).encode(),
         "TE not ending in chunked"),
        (("GET %s HTTP/1.1\nHost: up.test:%d\n\n" % (u, p)).encode(), "bare LF"),
        (("GET %s HTTP/1.1\r\nHost: up.test:%d\r\nX-A: 1\r\n folded\r\n\r\n"
          % (u, p)).encode(), "obs-fold"),
        (("GET %s HTTP/1.1\r\nHost : up.test:%d\r\n\r\n" % (u, p)).encode(),
         "space before colon"),
        (("GET %s HTTP/1.1\r\nHost: up.test:%d\r\nX-A: a\x00b\r\n\r\n"
          % (u, p)).encode(), "NUL in a value"),
        (b"GET\r\n\r\n", "request line without target"),
        (("GET %s HTTP/1.1\r\n\r\n" % u).encode(), "no Host"),
    ]
    for raw, what in cases:
        plain_refused(d, env.src(1), raw, "bad_request", what)
    logged(d, "bad_request", len(cases))
    check_eq(up.accept_count(), 0, "upstream connections")


@S.case
def method_not_allowed(env):
    d, up, _ = setup(env)
    for m in ("TRACE", "TRACK"):
        plain_refused(d, env.src(1),
                      get_request("http://up.test:%d/" % up.port, method=m),
                      "method_not_allowed", m)
    logged(d, "method_not_allowed", 2)
    check_eq(up.accept_count(), 0, "upstream connections")


if __name__ == "__main__":
    S.main()
