#!/usr/bin/env python3
"""Resolution through a fake DNS server: success, NXDOMAIN, SERVFAIL,
NODATA, timeout, private-only answers, mixed answers where only the
admitted address may be dialed, and dns.hosts precedence."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, check, check_eq, do_connect, read_response,  # noqa: E402
                     decisions, get_request, check_refusal, as_list, addr_only,
                     http_handler)

S = Suite("t_dns")


def setup(env, records, allow=("127.0.0.0/8",), hosts=None, timeout_ms=2000,
          up_host="127.0.0.1", extra_ports=()):
    dns = env.dns(records)
    up = env.http_upstream(up_host)
    cfg = env.config(ports=env.ports(up.port, *extra_ports),
                     allow_cidrs=list(allow),
                     dns={"servers": [dns.addr], "hosts": hosts or {},
                          "timeout_ms": timeout_ms})
    d = env.sluiced(cfg)
    return d, dns, up


def connect(env, d, host, port):
    s = d.connect(env.src(1))
    resp, _ = do_connect(s, host, port, timeout=15)
    return s, resp


@S.case
def resolved_by_server(env):
    d, dns, up = setup(env, {"a.test": {"A": ["127.0.0.1"]}})
    s, resp = connect(env, d, "a.test", up.port)
    check_eq(resp.status, 200, "CONNECT to a name from the DNS server")
    s.close()
    check(dns.query_count("a.test") >= 1, "the DNS server was not asked")
    dec = decisions(d.log_path, host="a.test")[0]
    check_eq([addr_only(a) for a in as_list(dec.get("addrs"))], ["127.0.0.1"], "addrs")
    check_eq(addr_only(dec.get("dialed")), "127.0.0.1", "dialed")
    # plain HTTP resolves the same way
    s = d.connect(env.src(1))
    s.sendall(get_request("http://a.test:%d/x" % up.port))
    check_eq(read_response(s).status, 200, "GET through the DNS server")
    s.close()


@S.case
def nxdomain(env):
    d, dns, up = setup(env, {"nx.test": "NXDOMAIN"})
    s, resp = connect(env, d, "nx.test", up.port)
    check_refusal(resp, "dns_failed", "NXDOMAIN")
    check_eq(resp.status, 502, "status")
    s.close()
    check(decisions(d.log_path, reason="dns_failed"), "no dns_failed record")
    check(dns.query_count("nx.test") >= 1, "server not asked")


@S.case
def servfail_and_nodata(env):
    d, dns, up = setup(env, {"sf.test": "SERVFAIL", "nodata.test": {"A": []},
                             "mx.test": {}})
    for host in ("sf.test", "nodata.test", "unknown-name.test"):
        s, resp = connect(env, d, host, up.port)
        check_refusal(resp, "dns_failed", host)
        s.close()


@S.case
def dns_timeout(env):
    d, dns, up = setup(env, {"slow.test": "drop"}, timeout_ms=800)
    t0 = time.monotonic()
    s, resp = connect(env, d, "slow.test", up.port)
    el = time.monotonic() - t0
    check_refusal(resp, "dns_timeout", "dropped queries")
    check_eq(resp.status, 504, "status")
    check(el >= 0.5, "answered after %.2fs, before the DNS deadline", el)
    check(el < 6.0, "answered only after %.2fs (timeout_ms 800)", el)
    s.close()
    check(dns.query_count("slow.test") >= 1, "server not asked")
    # the daemon still serves other names meanwhile / afterwards
    check(d.alive(), "sluiced died")


@S.case
def dns_timeout_does_not_block_others(env):
    d, dns, up = setup(env, {"slow.test": "drop", "a.test": {"A": ["127.0.0.1"]}},
                       timeout_ms=3000)
    slow = d.connect(env.src(1))
    from harness import connect_head, read_head
    slow.sendall(connect_head("slow.test", up.port))
    time.sleep(0.2)
    t0 = time.monotonic()
    s, resp = connect(env, d, "a.test", up.port)
    check_eq(resp.status, 200, "CONNECT while another query hangs")
    check(time.monotonic() - t0 < 2.0, "waited for the hanging query")
    s.close()
    r, _ = read_head(slow, timeout=10)
    check_eq(r.header("X-Sluice-Reason"), "dns_timeout", "hanging query's answer")
    slow.close()


@S.case
def private_only_answers(env):
    # loopback and RFC 1918 with no allow_cidrs: private_address, and the
    # log keeps every resolved address
    d, dns, up = setup(env, {"priv.test": {"A": ["127.0.0.1", "10.0.0.7"],
                                           "AAAA": ["::1", "fd00::1"]}}, allow=())
    s, resp = connect(env, d, "priv.test", up.port)
    check_refusal(resp, "private_address", "private-only answers")
    s.close()
    dec = decisions(d.log_path, host="priv.test")
    check(dec, "no decision record for priv.test")
    addrs = sorted(addr_only(a) for a in as_list(dec[-1].get("addrs")))
    check_eq(addrs, sorted(["127.0.0.1", "10.0.0.7", "::1", "fd00::1"]), "logged addrs")
    check(not dec[-1].get("dialed"), "dialed %r", dec[-1].get("dialed"))
    check_eq(up.accept_count(), 0, "upstream connections")


@S.case
def mixed_answers_dial_only_admitted(env):
    # 127.0.0.3 (not admitted) comes first; only 127.0.0.2 is inside
    # allow_cidrs.  A trap listens on 127.0.0.3 at the same port.
    d, dns, up = setup(env, {"mixed.test": {"A": ["127.0.0.3", "127.0.0.2"],
                                            "AAAA": ["::1"]}},
                       allow=("127.0.0.2/32",), up_host="127.0.0.2")
    trap = env.server(http_handler, "127.0.0.3", up.port)
    for i in range(3):
        s, resp = connect(env, d, "mixed.test", up.port)
        check_eq(resp.status, 200, "CONNECT #%d to a mixed name" % i)
        s.sendall(b"GET /m HTTP/1.1\r\nHost: mixed.test\r\n\r\n")
        check_eq(read_response(s).status, 200, "request through the tunnel")
        s.close()
    check_eq(trap.accept_count(), 0, "connections to the refused address")
    check_eq(up.accept_count(), 3, "connections to the admitted address")
    for dec in decisions(d.log_path, host="mixed.test"):
        check_eq(addr_only(dec.get("dialed")), "127.0.0.2", "dialed")
        addrs = sorted(addr_only(a) for a in as_list(dec.get("addrs")))
        check_eq(addrs, ["127.0.0.2", "127.0.0.3", "::1"], "addrs (all resolved)")


@S.case
def mixed_answers_admitted_one_down(env):
    # the admitted address refuses: upstream_failed, never a fallback to
    # the refused address that does listen
    d, dns, up = setup(env, {"mixed.test": {"A": ["127.0.0.3", "127.0.0.2"]}},
                       allow=("127.0.0.2/32",), up_host="127.0.0.3")
    s, resp = connect(env, d, "mixed.test", up.port)
    check_refusal(resp, "upstream_failed", "admitted address refuses")
    s.close()
    check_eq(up.accept_count(), 0, "connections to the refused address")


@S.case
def hosts_map_first(env):
    # dns.hosts answers without asking the server (which would say 10/8)
    d, dns, up = setup(env, {"pinned.test": {"A": ["10.0.0.1"]}},
                       hosts={"pinned.test": ["127.0.0.1"]})
    s, resp = connect(env, d, "pinned.test", up.port)
    check_eq(resp.status, 200, "CONNECT to a dns.hosts name")
    s.close()
    check_eq(dns.query_count("pinned.test"), 0, "queries for a dns.hosts name")


@S.case
def hosts_map_classified(env):
    # dns.hosts answers are still classified
    d, dns, up = setup(env, {}, allow=(), hosts={"pinned.test": ["127.0.0.1"]})
    s, resp = connect(env, d, "pinned.test", up.port)
    check_refusal(resp, "private_address", "dns.hosts loopback answer")
    s.close()


if __name__ == "__main__":
    S.main()
