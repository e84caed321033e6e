#!/usr/bin/env python3
"""t_relay_chaos with transparent mode in the mix: a bounded share of the
seeded streams reach sluiced the way a sandbox that ignores HTTP_PROXY
does, redirected by sluiced's own nftables table (nat prerouting, TCP 80
and 443 to the transparent listener), the rest come to its TCP listener
as t_relay_chaos's do.  Transparent streams are plain HTTP in origin form
with every body framing, Host headers that are missing, doubled, differ
between pipelined requests or name a host with no listener, no route or
a full accept queue; TLS ClientHellos with SNI (whole, cut at random,
followed by random bytes, without SNI), garbage on 443, and the
transparent port dialled directly.  They are written in random pieces,
ended at random (close, reset, half-close, a read of the answer), from
the addresses of a public session, a session that asks (its prompts
answered at random or left to time out) and an address with no session,
against the hostile upstreams of t_relay_chaos on ports 80 and 443,
while the grants allow_chat gave are taken back at random (closing what
relays under them).

Everything runs in network namespaces the test makes: the test
re-executes itself under `unshare -n` (sluiced, its table and the
upstreams live there) and makes a second namespace for the sandbox,
joined by a veth pair; the client sockets of transparent streams are
made in it (setns of the worker thread, only while the socket is
made).  Nothing touches the host's ruleset, links or routes: the case
refuses to run when its namespace is the host's, and the namespaces go
with their processes.

Skips (77) without root, unshare, ip, veth or nf_tables support, or when
sluiced cannot apply its table; fails then under SLUICE_TEST_STRICT=1.
SLUICE_CHAOS_SEED, SLUICE_CHAOS_N and SLUICE_CHAOS_TP_SHARE (the share
of transparent streams, default 0.5) replay or widen a run; a failure
prints the seed and the iteration that preceded it."""

import ctypes
import os
import random
import socket
import ssl
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, Skip, Fail, check, check_eq, api_unix,  # noqa: E402
                     read_response, get_request, log, read_log, free_port,
                     wait_until, STRICT)
import t_relay_chaos as chaos  # noqa: E402

S = Suite("t_relay_chaos_transparent", time_limit=420)

SEED = int(os.environ.get("SLUICE_CHAOS_SEED", "20261206"))
N = int(os.environ.get("SLUICE_CHAOS_N", "500"))
SHARE = min(1.0, max(0.0, float(os.environ.get("SLUICE_CHAOS_TP_SHARE",
                                                "0.5"))))
WORKERS = 6
TIME_BUDGET = 120.0          # seconds of traffic at most

INSIDE = "SLUICE_CHAOS_TP_INSIDE"
HOST_NS = "SLUICE_CHAOS_TP_HOST_NETNS"
CLONE_NEWNET = 0x40000000

# Addresses of the test's namespaces only (TEST-NET-2 and a private /24)
BROKER_IP = "10.200.0.1"
SB_PUB, SB_ASK, SB_NONE = "10.200.0.2", "10.200.0.3", "10.200.0.4"
UP_NET = "198.51.100."
UP_BASE = 10                 # behaviour i listens on 198.51.100.(10+i)
HOLE_IP = UP_NET + "40"      # 80 and 443 accept nothing (full queue)
REFUSE_IP = UP_NET + "41"    # an address with nothing listening: RST
NOROUTE_IP = UP_NET + "42"   # in dns.hosts, on no link: unreachable


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _setns(fd):
    if _libc().setns(fd, CLONE_NEWNET) != 0:
        e = ctypes.get_errno()
        raise OSError(e, "setns: %s" % os.strerror(e))


class SandboxNetns:
    """The sandbox's namespace, held by a sleeping child of the test
    (killed by its pid at the end, which takes the namespace and its end
    of the veth pair with it)."""

    def __init__(self):
        self.proc = subprocess.Popen(["unshare", "-n", "sleep", "100000"],
                                     stdin=subprocess.DEVNULL)
        me = os.readlink("/proc/self/ns/net")
        ns = "/proc/%d/ns/net" % self.proc.pid
        # until unshare has switched the child's namespace
        wait_until(lambda: self._readlink(ns) not in (None, me), 5,
                   what="the sandbox namespace")
        self.fd = os.open(ns, os.O_RDONLY)

    @staticmethod
    def _readlink(p):
        try:
            return os.readlink(p)
        except OSError:
            return None

    def run(self, *argv):
        r = subprocess.run(["nsenter", "-t", str(self.proc.pid), "-n"] +
                           list(argv), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=20)
        if r.returncode != 0:
            raise Fail("in the sandbox namespace: %s: %s" % (
                " ".join(argv), r.stdout.decode(errors="replace")))

    def socket(self, family=socket.AF_INET):
        """A TCP socket of the sandbox's namespace: the calling thread
        joins it for the socket() call only."""
        home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        try:
            _setns(self.fd)
            try:
                return socket.socket(family, socket.SOCK_STREAM)
            finally:
                _setns(home)
        finally:
            os.close(home)

    def close(self):
        try:
            os.close(self.fd)
        except OSError:
            pass
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


def ip(*argv):
    r = subprocess.run(["ip"] + list(argv), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=20)
    return r.returncode, r.stdout.decode(errors="replace").strip()


class Hole:
    """A port that never accepts: a listener whose queue the test filled
    (the kernel drops further SYNs), so a dial to it times out."""

    def __init__(self, host, port):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.sock.listen(0)
        self.fill = []
        for _ in range(4):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            try:
                s.connect((host, port))
            except OSError:
                pass
            self.fill.append(s)

    def close(self):
        for s in self.fill + [self.sock]:
            s.close()


# ---------------------------------------------------------------------------
# Transparent client streams

def names():
    """The upstream names: b<i>.test for behaviour i, and the three
    addresses with nothing that answers."""
    m = {"b%d.test" % i: UP_NET + str(UP_BASE + i)
         for i in range(len(chaos.BEHAVIOURS))}
    m.update({"hole.test": HOLE_IP, "refuse.test": REFUSE_IP,
              "noroute.test": NOROUTE_IP})
    return m


def pick_name(rnd, hosts):
    if rnd.random() < 0.1:
        return rnd.choice(["hole.test", "refuse.test", "noroute.test",
                           "unknown.test", "127.0.0.1", "[::1]",
                           UP_NET + "11", "b1.test.", "B3.TEST",
                           "x" * 300])
    return rnd.choice(sorted(hosts))


def tp_http_request(rnd, hosts):
    """One origin-form request as a client that dials the origin sends
    it, or something near it."""
    name = pick_name(rnd, hosts)
    k = rnd.randrange(14)
    if k == 0:                              # no Host
        return b"GET / HTTP/1.1\r\n\r\n"
    if k == 1:                              # two Hosts
        return ("GET / HTTP/1.1\r\nHost: %s\r\nHost: %s\r\n\r\n" % (
            name, pick_name(rnd, hosts))).encode()
    if k == 2:                              # absolute form, another host
        return ("GET http://%s/ HTTP/1.1\r\nHost: %s\r\n\r\n" % (
            pick_name(rnd, hosts), name)).encode()
    if k == 3:                              # CONNECT on port 80
        return ("CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n"
                % (name, name)).encode()
    if k == 4:
        return bytes(rnd.getrandbits(8) for _ in range(rnd.randint(1, 300)))
    if k == 5:                              # HTTP/1.0, no Host
        return b"GET /old HTTP/1.0\r\n\r\n"
    if k == 6:                              # a port in Host
        return ("GET / HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (
            name, rnd.choice([80, 443, 8080, 0, 65536]))).encode()
    method = rnd.choice(["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH"])
    hdrs, body = chaos.pick_body(rnd)
    if method in ("GET", "HEAD") and rnd.random() < 0.5:
        hdrs, body = [], b""
    if rnd.random() < 0.1:
        hdrs.append("Connection: close")
    if rnd.random() < 0.05:
        hdrs.append("Expect: 100-continue")
    head = "%s /%d HTTP/1.1\r\nHost: %s\r\n" % (method, rnd.randrange(1000),
                                                name)
    head += "".join(h + "\r\n" for h in hdrs) + "\r\n"
    return head.encode() + body


def client_hello(sni):
    """The first flight of a real TLS client for sni (None: no SNI)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    o = ctx.wrap_bio(inc, out, server_hostname=sni)
    try:
        o.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


def tp_tls_stream(rnd, hosts):
    k = rnd.randrange(8)
    if k == 0:
        return bytes(rnd.getrandbits(8) for _ in range(rnd.randint(1, 400)))
    if k == 1:                              # plain HTTP on 443
        return tp_http_request(rnd, hosts)
    if k == 2:
        hello = client_hello(None)
    else:
        name = pick_name(rnd, hosts)
        try:
            hello = client_hello(name.strip("[]"))
        except (ValueError, ssl.SSLError, UnicodeError):
            hello = client_hello("b0.test")
    if k == 3:                              # cut short
        return hello[:rnd.randint(0, len(hello))]
    if k == 4:                              # a record header that lies
        return hello[:3] + bytes([0x40, 0x00]) + hello[5:]
    if k == 5:                              # two hellos
        return hello + hello
    tail = bytes(rnd.getrandbits(8) for _ in range(rnd.choice(
        [0, 0, 1, 50, 2000])))
    return hello + tail


def tp_client(rnd, sbns, hosts, tp_port):
    """One transparent stream: from the sandbox, to an origin's 80 or 443
    (the table redirects it), or to the transparent port itself."""
    src = rnd.choice([SB_PUB, SB_PUB, SB_ASK, SB_ASK, SB_NONE])
    k = rnd.random()
    if k < 0.05:
        dst, port, tls = BROKER_IP, tp_port, False
    else:
        tls = rnd.random() < 0.45
        port = 443 if tls else 80
        # the address dialled: usually the name's, at times another one
        # (sluiced dials what the name resolves to, never this)
        dst = rnd.choice(sorted(set(hosts.values())) + [REFUSE_IP])
    if tls:
        data = tp_tls_stream(rnd, hosts)
    else:
        data = b"".join(tp_http_request(rnd, hosts) for _ in range(
            1 + (rnd.random() < 0.3) * rnd.randint(1, 3)))
        if rnd.random() < 0.3:
            data = data[:rnd.randint(0, len(data))]
    s = sbns.socket()
    try:
        s.settimeout(3)
        s.bind((src, 0))
        s.connect((dst, port))
        pos = 0
        while pos < len(data):
            n = rnd.choice([1, 2, 7, 64, 1500, len(data)])
            s.sendall(data[pos:pos + n])
            pos += n
            if rnd.random() < 0.2:
                time.sleep(rnd.choice([0, 0.001, 0.01, 0.05]))
        end = rnd.randrange(5)
        if end == 0:
            return
        if end == 1:
            chaos._linger0(s)
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


class Revoker:
    """Takes a random grant of the asking sessions back now and then
    (what allow_chat gave): the chat's connections to it close while
    they relay, and the next request asks again."""

    def __init__(self, ctl, rnd, sessions):
        self.ctl, self.rnd, self.sessions = ctl, rnd, sessions
        self.stop = False
        self.revoked = 0
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        while not self.stop:
            time.sleep(self.rnd.choice([0.05, 0.2, 0.5]))
            sid = self.rnd.choice(self.sessions)
            try:
                r = api_unix(self.ctl, "GET", "/v1/sessions/" + sid,
                             timeout=3)
                grants = (r.json or {}).get("grants") or []
                if not grants:
                    continue
                g = self.rnd.choice(grants)
                r = api_unix(self.ctl, "DELETE", "/v1/sessions/%s/grants/"
                             "%s:%d" % (sid, g["host"], g["port"]),
                             timeout=3)
                self.revoked += r.status == 200
            except (OSError, ValueError, KeyError, TypeError):
                pass

    def close(self):
        self.stop = True
        self.t.join(5)


# ---------------------------------------------------------------------------
# The world

def links(sbns):
    """The veth pair, the upstream addresses on a dummy link (or lo), the
    sandbox's addresses and route."""
    rc, out = ip("link", "set", "lo", "up")
    if rc != 0:
        raise Skip("ip link set lo up: %s" % out)
    rc, out = ip("link", "add", "tpc0", "type", "veth", "peer", "name",
                 "tpc1")
    if rc != 0:
        raise Skip("no veth: %s" % out)
    updev = "lo"
    if ip("link", "add", "tpup0", "type", "dummy")[0] == 0:
        updev = "tpup0"
        ip("link", "set", "tpup0", "up")
    for argv in (("addr", "add", BROKER_IP + "/24", "dev", "tpc0"),
                 ("link", "set", "tpc0", "up"),
                 ("link", "set", "tpc1", "netns", str(sbns.proc.pid))):
        rc, out = ip(*argv)
        if rc != 0:
            raise Fail("ip %s: %s" % (" ".join(argv), out))
    for i in list(range(len(chaos.BEHAVIOURS))) + [40, 41]:
        n = i if i >= 40 else UP_BASE + i
        rc, out = ip("addr", "add", "%s%d/32" % (UP_NET, n), "dev", updev)
        if rc != 0:
            raise Fail("ip addr add %s%d: %s" % (UP_NET, n, out))
    sbns.run("ip", "link", "set", "lo", "up")
    for a in (SB_PUB, SB_ASK, SB_NONE):
        sbns.run("ip", "addr", "add", a + "/24", "dev", "tpc1")
    sbns.run("ip", "link", "set", "tpc1", "up")
    sbns.run("ip", "route", "add", "default", "via", BROKER_IP)


def in_own_netns():
    here = os.readlink("/proc/self/ns/net")
    host = os.environ.get(HOST_NS)
    return bool(here and host and here != host)


@S.case
def transparent_streams(env):
    if not in_own_netns():
        raise Fail("not in a network namespace of the test's own "
                   "(run it as a script: it re-executes under unshare -n)")
    sbns = SandboxNetns()
    env.closers.append(sbns.close)
    links(sbns)

    # the upstreams: t_relay_chaos's behaviours, each on an address of
    # its own at 80 and 443 (transparent), and on loopback (the proxy
    # streams)
    hosts = names()
    tp_servers = []
    for i, b in enumerate(chaos.BEHAVIOURS):
        for port in (80, 443):
            tp_servers.append(env.server(b, host=UP_NET + str(UP_BASE + i),
                                         port=port))
    for port in (80, 443):
        h = Hole(HOLE_IP, port)
        env.closers.append(h.close)
    lo_servers = [env.server(b) for b in chaos.BEHAVIOURS]
    hole = chaos.Blackhole()
    env.closers.append(hole.close)
    ports = [s.port for s in lo_servers] + [hole.port, chaos.refuse_port()]

    tp_port = free_port()
    sessions = [
        {"id": "pub", "tenant": "acme", "user": "alice", "tier": "public",
         "source": env.src(1)},
        {"id": "ask", "tenant": "acme", "user": "bob", "tier": "registries",
         "source": env.src(2)},
        {"id": "tp-pub", "tenant": "acme", "user": "carol",
         "tier": "public", "source": SB_PUB},
        # b*.test are no registries: every request asks the approver
        {"id": "tp-ask", "tenant": "acme", "user": "dave",
         "tier": "registries", "source": SB_ASK},
    ]
    dns = dict(hosts)
    dns["up.test"] = "127.0.0.1"
    cfg = env.config(
        sessions=sessions, ports=env.ports(*ports),
        listen={"transparent": ["%s:%d" % (BROKER_IP, tp_port)]},
        allow_cidrs=["127.0.0.0/8", UP_NET + "0/24"],
        dns={"hosts": {k: [v] for k, v in dns.items()},
             "servers": ["127.0.0.1:5353"]},
        prompt={"timeout_s": 1, "deny_quiet_s": 0},
        limits={"connect_timeout_ms": 400, "head_timeout_ms": 800,
                "idle_timeout_s": 3},
        firewall={"enabled": True, "sandbox_subnets": ["10.200.0.0/24"]})
    try:
        d = env.sluiced(cfg)
    except Fail as e:
        if any(w in str(e).lower() for w in ("nf_tables", "netlink",
                                             "firewall", "nft")):
            raise Skip("sluiced cannot apply its table here: %s"
                       % str(e).splitlines()[0])
        raise
    ctl = os.path.join(cfg["runtime_dir"], "control.sock")
    appr = chaos.RandomApprover(ctl, random.Random(SEED ^ 0x7a7a))
    env.closers.append(appr.close)
    rev = Revoker(ctl, random.Random(SEED ^ 0x3c3c), ["ask", "tp-ask"])
    env.closers.append(rev.close)

    # the redirect works before the chaos: a clean request through it
    ok_name = "b%d.test" % chaos.BEHAVIOURS.index(chaos.up_ok)

    def clean_tp(what):
        s = sbns.socket()
        s.settimeout(5)
        s.bind((SB_PUB, 0))
        s.connect((hosts[ok_name], 80))
        s.sendall(b"GET / HTTP/1.1\r\nHost: %s\r\n\r\n" % ok_name.encode())
        r = read_response(s)
        s.close()
        check_eq(r.status, 200, "a clean transparent request %s" % what)
        check_eq(r.body, b"hello", "its body %s" % what)
    clean_tp("before the run")

    lock = threading.Lock()
    state = {"next": 0, "done": 0, "tp": 0, "last": None}
    t_end = time.monotonic() + TIME_BUDGET

    def worker(w):
        for _ in range(N):
            with lock:
                i = state["next"]
                if i >= N or time.monotonic() > t_end or not d.alive():
                    return
                state["next"] += 1
            rnd = random.Random("%d:%d" % (SEED, i))
            tp = rnd.random() < SHARE
            try:
                if tp:
                    tp_client(rnd, sbns, hosts, tp_port)
                else:
                    chaos.one_client(rnd, d, env.src(rnd.choice([1, 1, 2, 3])),
                                     ports)
            except OSError:
                pass
            with lock:
                state["done"] += 1
                state["tp"] += tp
                state["last"] = i

    threads = [threading.Thread(target=worker, args=(w,), daemon=True)
               for w in range(WORKERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIME_BUDGET + 30)
    rev.close()
    log("seed %d: %d streams (%d transparent), %d prompt answers, %d "
        "grants taken back" % (SEED, state["done"], state["tp"],
                               appr.answered, rev.revoked))
    check(d.alive(), "sluiced died (seed %d, near iteration %s):\n%s",
          SEED, state["last"], d.stderr())
    check(state["done"] >= min(N, 100), "only %d streams ran", state["done"])
    check("AddressSanitizer" not in d.stderr(), "ASan report:\n%s",
          d.stderr())
    # the transparent streams went through the redirect: their records
    # carry the original destination
    recs = [r for r in read_log(d.log_path) if r.get("orig_dst")]
    kinds = {}
    for r in recs:
        k = "%s %s %s" % (r.get("event"), r.get("decision") or r.get("outcome")
                          or "", r.get("reason") or "")
        kinds[k] = kinds.get(k, 0) + 1
    log("%d records with orig_dst (%d of them prompted): %s" % (
        len(recs), sum(1 for r in recs if r.get("prompt")), ", ".join(
            "%s: %d" % kv for kv in sorted(kinds.items()))))
    check(SHARE == 0 or len(recs) >= min(20, state["tp"] // 4),
          "only %d records of transparent connections for %d streams",
          len(recs), state["tp"])
    # still whole: health answers, a clean exchange goes through both ways
    r = api_unix(ctl, "GET", "/v1/health")
    check_eq(r.status, 200, "health after the run")
    clean_tp("after the run")
    ok = lo_servers[chaos.BEHAVIOURS.index(chaos.up_ok)]
    s = d.connect(env.src(1))
    s.sendall(get_request("http://up.test:%d/" % ok.port))
    r = read_response(s)
    check_eq(r.status, 200, "a clean proxy request after the run")
    s.close()
    appr.close()


def reexec_in_netns():
    """Outside: skip unless root and the tools are there, then run this
    script again under `unshare -n` with the host namespace recorded."""
    def skip(why):
        print("t_relay_chaos_transparent: %s" % why, file=sys.stderr)
        sys.exit(1 if STRICT else 77)
    if os.geteuid() != 0:
        skip("needs root (network namespaces, nftables)")
    for t in ("unshare", "nsenter", "ip"):
        if subprocess.run(["sh", "-c", "command -v %s" % t],
                          stdout=subprocess.DEVNULL).returncode != 0:
            skip("no %s" % t)
    try:
        host = os.readlink("/proc/self/ns/net")
    except OSError:
        skip("no netns")
    if subprocess.run(["unshare", "-n", "true"], stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL).returncode != 0:
        skip("unshare -n not permitted")
    os.environ[HOST_NS] = host
    os.environ[INSIDE] = "1"
    sys.stdout.flush()
    os.execvp("unshare", ["unshare", "-n", sys.executable,
                          os.path.abspath(__file__)] + sys.argv[1:])


if __name__ == "__main__":
    if os.environ.get(INSIDE) != "1":
        reexec_in_netns()
    S.main()
