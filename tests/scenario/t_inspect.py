#!/usr/bin/env python3
"""TLS inspection (inspect.hosts): an inspected GET through curl gets the
upstream's answer; the client sees a leaf for exactly the CONNECT name
issued by the inspection CA (and fails without trusting that CA); the
requests inside are each decided and logged; an upstream whose
certificate does not verify is 502 upstream_tls; the CA is made at the
first start (key 0600) and printed by --print-inspect-ca; a CA key that
group or others may read, or a certificate that does not match its key,
refuses the start.  Upstreams are on loopback, named by dns.hosts, with
a test CA of their own (inspect.upstream_ca_file)."""

import http.client
import json
import os
import socket
import ssl
import stat
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, check, check_eq, curl, curl_status, do_connect,  # noqa: E402
                     read_log, wait_until, http_handler, tls_server_ctx,
                     make_cert, check_refusal, read_response, sluiced_path,
                     Fail)

S = Suite("t_inspect")


def openssl(*args):
    r = subprocess.run(["openssl"] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    check(r.returncode == 0, "openssl %s: %s", args[0],
          r.stderr.decode(errors="replace"))
    return r.stdout


def test_ca(env, names=("insp.test", "other.test")):
    """A CA for the upstreams, and a leaf of it for names (insp.test and
    other.test; the upstream sluiced verifies)."""
    d = env.path("upca")
    os.makedirs(d, exist_ok=True)
    ca_key, ca_crt = os.path.join(d, "ca.key"), os.path.join(d, "ca.pem")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:P-256", "-nodes", "-keyout", ca_key, "-out",
            ca_crt, "-days", "2", "-subj", "/CN=sluice test upstream CA",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign")
    key, csr, crt = (os.path.join(d, n) for n in ("up.key", "up.csr",
                                                    "up.pem"))
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
            "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=insp.test")
    ext = os.path.join(d, "ext.cnf")
    with open(ext, "w") as f:
        f.write("subjectAltName=%s\n" % ",".join("DNS:" + n for n in names) +
                "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key,
            "-CAcreateserial", "-out", crt, "-days", "2", "-extfile", ext)
    return ca_crt, crt, key


def setup(env, extra_inspect=None, start=True):
    ca_crt, crt, key = test_ca(env)
    seen = []
    good = env.server(http_handler, ssl_ctx=tls_server_ctx(crt, key, seen))
    # a certificate of no CA sluiced trusts
    bad_crt, bad_key = make_cert(env.dir, ["bad.test"])
    bad = env.server(http_handler,
                     ssl_ctx=tls_server_ctx(bad_crt, bad_key, []))
    hosts = {"insp.test": ["127.0.0.1"], "other.test": ["127.0.0.1"],
             "bad.test": ["127.0.0.1"]}
    insp = {"hosts": ["insp.test", "bad.test"],
            "ca_cert": env.path("inspect-ca.pem"),
            "ca_key": env.path("inspect-ca.key"),
            "upstream_ca_file": ca_crt}
    insp.update(extra_inspect or {})
    cfg = env.config(ports=env.ports(good.port, bad.port),
                     dns={"hosts": hosts},
                     tls={"sni_ports": [443, good.port, bad.port]},
                     inspect=insp)
    d = env.sluiced(cfg, start=start)
    return d, good, bad, ca_crt


def inner_ctx(ca):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(ca)
    return ctx


@S.case
def inspected_get_through_curl(env):
    d, good, _, _ = setup(env)
    ca = d.config["inspect"]["ca_cert"]
    st = os.stat(d.config["inspect"]["ca_key"])
    check_eq(stat.S_IMODE(st.st_mode), 0o600, "mode of the made CA key")
    out = subprocess.run([sluiced_path(), "--print-inspect-ca", "-c",
                          d.conf_path], stdout=subprocess.PIPE, timeout=20)
    check_eq(out.returncode, 0, "--print-inspect-ca exit")
    check_eq(out.stdout.decode(), open(ca).read(), "--print-inspect-ca")

    url = "https://insp.test:%d/hello?x=1" % good.port
    r = curl(["-x", d.proxy_url(), "--cacert", ca, "-w", "\n%{http_code}",
              url], src=env.src(1))
    body, code = curl_status(r.stdout)
    check_eq(code, 200, "status (stderr %r)" % r.stderr)
    doc = json.loads(body)
    check_eq(doc["path"], "/hello?x=1", "path the upstream saw")
    check_eq(doc["host"], "insp.test:%d" % good.port, "Host upstream")
    check(doc["tls"], "the upstream leg is TLS")
    check(not any(k.lower() == "proxy-connection" for k, _ in doc["headers"]),
          "no hop-by-hop header upstream")
    # without trusting the inspection CA the client refuses the leaf
    r = curl(["-x", d.proxy_url(), url], src=env.src(1))
    check_eq(r.returncode, 60, "curl exit without the CA (stderr %r)"
             % r.stderr)
    # the CONNECT and the request each have a decision, marked inspected
    recs = wait_until(lambda: [x for x in read_log(d.log_path)
                               if x.get("event") == "decision" and
                               x.get("inspected") and
                               x.get("method") == "GET"], 5,
                      what="the inspected GET's decision")
    check_eq(recs[0].get("path"), "/hello?x=1", "path in the record")
    check_eq(recs[0].get("decision"), "allow", "decision")
    check(any(x.get("event") == "decision" and x.get("method") == "CONNECT"
              and x.get("inspected") for x in read_log(d.log_path)),
          "an inspected CONNECT record")


@S.case
def leaf_for_exactly_the_name(env):
    d, good, _, _ = setup(env)
    ca = d.config["inspect"]["ca_cert"]
    s = d.connect(env.src(1))
    resp, rest = do_connect(s, "insp.test", good.port)
    check_eq(resp.status, 200, "CONNECT")
    ctx = inner_ctx(ca)
    ctx.set_alpn_protocols(["h2", "http/1.1"])
    t = ctx.wrap_socket(s, server_hostname="insp.test")
    cert = t.getpeercert()
    check_eq(dict(x[0] for x in cert["subject"]).get("commonName"),
             "insp.test", "leaf CN")
    check_eq(cert.get("subjectAltName"), (("DNS", "insp.test"),), "leaf SAN")
    issuer = dict(x[0] for x in cert["issuer"])
    check(issuer.get("commonName", "").startswith("sluice inspection CA"),
          "issued by the inspection CA: %r" % issuer)
    check_eq(t.selected_alpn_protocol(), "http/1.1", "ALPN")
    # keep-alive: two requests on one inspected connection, each decided
    for path in ("/one", "/two"):
        t.sendall(b"GET %s HTTP/1.1\r\nHost: insp.test:%d\r\n\r\n"
                  % (path.encode(), good.port))
        r = read_response(t)
        check_eq(r.status, 200, "status of %s" % path)
        check_eq(json.loads(r.body)["path"], path, "path")
    # a request naming another host inside the tunnel is 421
    t.sendall(b"GET /x HTTP/1.1\r\nHost: other.test:%d\r\n\r\n" % good.port)
    r = read_response(t)
    check_refusal(r, "host_mismatch")
    t.close()
    paths = [x.get("path") for x in read_log(d.log_path)
             if x.get("event") == "decision" and x.get("inspected") and
             x.get("decision") == "allow" and x.get("method") == "GET"]
    check_eq(paths, ["/one", "/two"], "allowed inspected requests")
    # the leaf is made once per name (the upstream keeps one connection)
    check_eq(good.accept_count(), 1, "upstream connections")


@S.case
def sni_naming_another_host_is_closed(env):
    d, good, _, _ = setup(env)
    s = d.connect(env.src(1))
    resp, _ = do_connect(s, "insp.test", good.port)
    check_eq(resp.status, 200, "CONNECT")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        t = ctx.wrap_socket(s, server_hostname="other.test")
        t.sendall(b"GET / HTTP/1.1\r\nHost: other.test\r\n\r\n")
        got = t.recv(100)
        check_eq(got, b"", "answer to a mismatched SNI")
    except (ssl.SSLError, OSError):
        pass
    wait_until(lambda: [x for x in read_log(d.log_path)
                        if x.get("reason") == "sni_mismatch"], 5,
               what="a close record with sni_mismatch")
    check_eq(len(good.events), 0, "requests that reached the upstream")


@S.case
def upstream_that_does_not_verify_is_502(env):
    d, _, bad, _ = setup(env)
    s = d.connect(env.src(1))
    resp, _ = do_connect(s, "bad.test", bad.port)
    check_refusal(resp, "upstream_tls")
    check_eq(resp.status, 502, "status")
    check(b"did not verify" in resp.body, "body says why: %r" % resp.body)
    s.close()
    wait_until(lambda: [x for x in read_log(d.log_path)
                        if x.get("reason") == "upstream_tls" and
                        x.get("event") == "decision"], 5,
               what="a decision record with upstream_tls")
    # the same through curl
    ca = d.config["inspect"]["ca_cert"]
    r = curl(["-x", d.proxy_url(), "--cacert", ca,
              "https://bad.test:%d/" % bad.port], src=env.src(1))
    check(r.returncode != 0, "curl through a bad upstream succeeded")
    check(b"502" in r.stderr, "curl saw the 502: %r" % r.stderr)


@S.case
def uninspected_hosts_stay_tunnels(env):
    d, good, _, _ = setup(env)
    # other.test is not inspected: the client sees the upstream's own
    # certificate (of the test CA), not a leaf of the inspection CA
    s = d.connect(env.src(1))
    resp, _ = do_connect(s, "other.test", good.port)
    check_eq(resp.status, 200, "CONNECT")
    up_ca = d.config["inspect"]["upstream_ca_file"]
    t = inner_ctx(up_ca).wrap_socket(s, server_hostname="other.test")
    issuer = dict(x[0] for x in t.getpeercert()["issuer"])
    check_eq(issuer.get("commonName"), "sluice test upstream CA", "issuer")
    t.close()


def start_fails(env, d, want):
    try:
        d.start(ready_timeout=10)
    except Fail as e:
        check(want in str(e), "start refused, but not for %r: %s" % (want, e))
        return
    raise Fail("sluiced started with %s" % want)


@S.case
def bad_ca_files_refuse_the_start(env):
    d, _, _, _ = setup(env)
    ca, key = d.config["inspect"]["ca_cert"], d.config["inspect"]["ca_key"]
    d.stop()
    # a key group or others may read
    os.chmod(key, 0o640)
    d2 = env.sluiced(dict(d.config), name="groupkey", start=False)
    start_fails(env, d2, "no access for group and others")
    os.chmod(key, 0o600)
    # a certificate of another key
    other_key = env.path("other.key")
    openssl("genpkey", "-algorithm", "EC", "-pkeyopt",
            "ec_paramgen_curve:P-256", "-out", other_key)
    os.chmod(other_key, 0o600)
    cfg = dict(d.config)
    cfg["inspect"] = dict(cfg["inspect"], ca_key=other_key)
    d3 = env.sluiced(cfg, name="mismatch", start=False)
    start_fails(env, d3, "does not match")
    # one of the two files alone
    cfg["inspect"] = dict(cfg["inspect"], ca_key=env.path("missing.key"))
    d4 = env.sluiced(cfg, name="half", start=False)
    start_fails(env, d4, "give both files")
    # the CA the first start made is used again, not remade
    d5 = env.sluiced(dict(d.config), name="again")
    check_eq(open(ca).read(), open(d.config["inspect"]["ca_cert"]).read(),
             "the CA after a restart")
    d5.stop()


@S.case
def bad_inspect_hosts_are_refused_at_load(env):
    for bad in ("10.0.0.1", "insp.test:443", "INSP.test", "*.", "a..b"):
        path = env.path("bad.json")
        with open(path, "w") as f:
            json.dump({"inspect": {"hosts": [bad]}}, f)
        r = subprocess.run([sluiced_path(), "--check-config", path],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=20)
        check(r.returncode != 0, "inspect.hosts %r accepted" % bad)
        check(b"inspect.hosts" in r.stderr and b"bad inspected host"
              in r.stderr, "the message for %r: %r" % (bad, r.stderr))


if __name__ == "__main__":
    S.main()
