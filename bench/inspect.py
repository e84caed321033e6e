#!/usr/bin/env python3
"""bench/inspect.py: what TLS inspection costs (issue 23), on loopback.

One sluiced, one nginx HTTPS origin with two names of one test CA:
plain.bench (an opaque CONNECT tunnel) and insp.bench (in inspect.hosts:
sluiced terminates the client's TLS with a leaf of its inspection CA and
opens its own, verified, to nginx).  The client (this script, Python's
ssl) trusts the test CA and the inspection CA and measures, interleaved
over --reps rounds so that a shared machine's load falls on both alike:

  keep-alive: --requests sequential GET /1k on one TLS connection, each
    timed; the median per request, and sluiced's CPU (utime+stime from
    /proc) over them divided by their number;
  new connection: --conns times connect, CONNECT, TLS handshake, one GET
    with Connection: close, close; the median (the leaf is cached after
    the warm-up, as in steady use);
  direct: the same against nginx without sluiced, for scale.

The figures: the median added per keep-alive request by inspection over
a plain tunnel (goal: at most 1 ms; DESIGN.md), the added cost of a new
inspected connection, and sluiced's CPU per request both ways.  Written
to OUTDIR/results-inspect.md and .json.  Everything listens on 127.0.0.1
and is stopped by the PID this script recorded.

    bench/run.sh --inspect [--reps 5] [--requests 2000] [--conns 200]
"""

import argparse
import json
import os
import shutil
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time

NAMES = ("insp.bench", "plain.bench")


def log(msg):
    sys.stderr.write("bench-inspect: %s\n" % msg)
    sys.stderr.flush()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_port(port, secs, proc):
    end = time.monotonic() + secs
    while time.monotonic() < end:
        if proc.poll() is not None:
            return False
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def cpu_secs(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    hz = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / hz


def openssl(*args):
    subprocess.run(["openssl"] + list(args), check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def make_certs(d):
    ca_key, ca = os.path.join(d, "ca.key"), os.path.join(d, "ca.pem")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:P-256", "-nodes", "-keyout", ca_key, "-out",
            ca, "-days", "2", "-subj", "/CN=sluice bench origin CA",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign")
    key, csr, crt = (os.path.join(d, n) for n in ("o.key", "o.csr", "o.pem"))
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
            "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=" + NAMES[0])
    ext = os.path.join(d, "ext.cnf")
    with open(ext, "w") as f:
        f.write("subjectAltName=%s\nbasicConstraints=CA:FALSE\n"
                "extendedKeyUsage=serverAuth\n"
                % ",".join("DNS:" + n for n in NAMES))
    openssl("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key,
            "-CAcreateserial", "-out", crt, "-days", "2", "-extfile", ext)
    return ca, crt, key


class Daemon:
    def __init__(self, name, argv, cpu):
        if shutil.which("taskset"):
            argv = ["taskset", "-c", str(cpu)] + argv
        self.name = name
        self.err = open(os.path.join(TMP, name + ".err"), "wb")
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                     stdout=self.err, stderr=self.err)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.err.close()


def start_nginx(crt, key, port):
    root = os.path.join(TMP, "nginx")
    www = os.path.join(root, "www")
    for d in (os.path.join(root, "logs"), os.path.join(root, "tmp"), www):
        os.makedirs(d)
    with open(os.path.join(www, "1k"), "wb") as f:
        f.write(os.urandom(1024))
    conf = os.path.join(root, "nginx.conf")
    with open(conf, "w") as f:
        f.write("""daemon off;
master_process off;
worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/error.log crit;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  keepalive_requests 100000000;
  keepalive_timeout 300s;
  client_body_temp_path {root}/tmp;
  proxy_temp_path {root}/tmp;
  fastcgi_temp_path {root}/tmp;
  uwsgi_temp_path {root}/tmp;
  scgi_temp_path {root}/tmp;
  default_type application/octet-stream;
  server {{
    listen 127.0.0.1:{port} ssl;
    ssl_certificate {crt};
    ssl_certificate_key {key};
    root {www};
  }}
}}
""".format(root=root, www=www, port=port, crt=crt, key=key))
    d = Daemon("nginx", [shutil.which("nginx") or "/usr/sbin/nginx", "-p",
                         root, "-c", conf, "-e",
                         os.path.join(root, "error.log")], 1)
    if not wait_port(port, 15, d.proc):
        raise SystemExit("bench-inspect: nginx did not start")
    return d


def start_sluiced(exe, ca, oport, port):
    root = os.path.join(TMP, "sluiced")
    run = os.path.join(root, "run")
    os.makedirs(run, mode=0o700)
    cfg = {
        "runtime_dir": run,
        "state_file": os.path.join(root, "state.json"),
        "ceiling": "public",
        "listen": {"tcp": ["127.0.0.1:%d" % port]},
        "sessions": [{"id": "bench", "tenant": "bench", "tier": "public",
                      "source": "127.0.0.1"}],
        "ports": {"public": [oport, 443, 80]},
        "allow_cidrs": ["127.0.0.1/32"],
        "dns": {"hosts": {n: ["127.0.0.1"] for n in NAMES}},
        "tls": {"sni_ports": [443, oport]},
        "inspect": {"hosts": [NAMES[0]],
                    "ca_cert": os.path.join(root, "inspect-ca.pem"),
                    "ca_key": os.path.join(root, "inspect-ca.key"),
                    "upstream_ca_file": ca},
        "credentials": {"file": os.path.join(root, "credentials.json")},
        "log": {"path": os.path.join(root, "conn.jsonl")},
        "user": "root" if os.geteuid() == 0 else "sluice",
    }
    conf = os.path.join(root, "sluiced.json")
    with open(conf, "w") as f:
        json.dump(cfg, f)
    d = Daemon("sluiced", [exe, "-c", conf], 0)
    if not wait_port(port, 15, d.proc):
        d.stop()
        raise SystemExit("bench-inspect: sluiced did not start:\n" +
                         open(os.path.join(TMP, "sluiced.err")).read()[-2000:])
    # the sluiced process itself (taskset execs it: the same pid)
    d.pid = d.proc.pid
    d.inspect_ca = cfg["inspect"]["ca_cert"]
    return d


class Conn:
    """One TLS connection to NAME:oport, through sluiced or direct."""

    def __init__(self, ctx, name, oport, via=None):
        if via is not None:
            s = socket.create_connection(("127.0.0.1", via), 10)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s.sendall(b"CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n"
                      % (name.encode(), oport, name.encode(), oport))
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = s.recv(4096)
                if not chunk:
                    raise OSError("sluiced closed the CONNECT")
                head += chunk
            if not head.startswith((b"HTTP/1.1 200", b"HTTP/1.0 200")):
                raise OSError("CONNECT: %r" % head[:200])
        else:
            s = socket.create_connection(("127.0.0.1", oport), 10)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.s = ctx.wrap_socket(s, server_hostname=name)
        self.buf = b""
        self.req = (b"GET /1k HTTP/1.1\r\nHost: %s:%d\r\n\r\n"
                    % (name.encode(), oport))

    def get(self, close=False):
        self.s.sendall(self.req if not close else
                       self.req[:-2] + b"Connection: close\r\n\r\n")
        while b"\r\n\r\n" not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                raise OSError("connection closed before a head")
            self.buf += chunk
        head, _, rest = self.buf.partition(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200"):
            raise OSError("answer: %r" % head[:200])
        n = 0
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                n = int(v)
        while len(rest) < n:
            chunk = self.s.recv(65536)
            if not chunk:
                raise OSError("connection closed in a body")
            rest += chunk
        self.buf = rest[n:]

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass


def keepalive(ctx, name, oport, via, n, pid):
    c = Conn(ctx, name, oport, via)
    for _ in range(min(200, n)):
        c.get()
    t = []
    cpu0 = cpu_secs(pid) if pid else 0.0
    for _ in range(n):
        a = time.perf_counter_ns()
        c.get()
        t.append(time.perf_counter_ns() - a)
    cpu = (cpu_secs(pid) - cpu0) / n if pid else None
    c.close()
    return statistics.median(t) / 1e6, cpu


def new_conns(ctx, name, oport, via, n):
    t = []
    for i in range(n + 10):
        a = time.perf_counter_ns()
        c = Conn(ctx, name, oport, via)
        c.get(close=True)
        c.close()
        if i >= 10:          # warm-up: the leaf is made and cached
            t.append(time.perf_counter_ns() - a)
    return statistics.median(t) / 1e6


def main():
    global TMP
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluiced", required=True)
    ap.add_argument("--outdir", required=True)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--conns", type=int, default=200)
    ap.add_argument("--keep-tmp", action="store_true")
    a = ap.parse_args()
    if shutil.which("nginx") is None and not os.path.exists("/usr/sbin/nginx"):
        raise SystemExit("bench-inspect: nginx is needed (apt-get install "
                         "nginx-light)")
    TMP = tempfile.mkdtemp(prefix="sluice-bench-inspect.")
    daemons = []
    try:
        ca, crt, key = make_certs(TMP)
        oport, sport = free_port(), free_port()
        daemons.append(start_nginx(crt, key, oport))
        sl = start_sluiced(a.sluiced, ca, oport, sport)
        daemons.append(sl)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.load_verify_locations(ca)
        ctx.load_verify_locations(sl.inspect_ca)
        # the same protocol on every leg: sluiced offers http/1.1 only
        ctx.set_alpn_protocols(["http/1.1"])
        res = {k: [] for k in ("direct_ka", "tunnel_ka", "insp_ka",
                               "tunnel_cpu", "insp_cpu", "direct_new",
                               "tunnel_new", "insp_new")}
        for rep in range(a.reps):
            log("round %d of %d" % (rep + 1, a.reps))
            m, _ = keepalive(ctx, NAMES[1], oport, None, a.requests, None)
            res["direct_ka"].append(m)
            m, cpu = keepalive(ctx, NAMES[1], oport, sport, a.requests,
                               sl.pid)
            res["tunnel_ka"].append(m)
            res["tunnel_cpu"].append(cpu)
            m, cpu = keepalive(ctx, NAMES[0], oport, sport, a.requests,
                               sl.pid)
            res["insp_ka"].append(m)
            res["insp_cpu"].append(cpu)
            res["direct_new"].append(new_conns(ctx, NAMES[1], oport, None,
                                               a.conns))
            res["tunnel_new"].append(new_conns(ctx, NAMES[1], oport, sport,
                                               a.conns))
            res["insp_new"].append(new_conns(ctx, NAMES[0], oport, sport,
                                             a.conns))
        med = {k: statistics.median(v) for k, v in res.items()}
        rows = [
            ("Keep-alive GET 1 KiB, median per request (ms)",
             med["direct_ka"], med["tunnel_ka"], med["insp_ka"]),
            ("New connection: CONNECT, TLS, GET, close, median (ms)",
             med["direct_new"], med["tunnel_new"], med["insp_new"]),
            ("sluiced CPU per keep-alive request (µs)", None,
             med["tunnel_cpu"] * 1e6, med["insp_cpu"] * 1e6),
        ]
        added = med["insp_ka"] - med["tunnel_ka"]
        lines = [
            "| TLS inspection (%d rounds of %d keep-alive requests and %d "
            "new connections, medians) | direct | tunnel | inspected | "
            "inspected - tunnel |" % (a.reps, a.requests, a.conns),
            "|---|---:|---:|---:|---:|",
        ]
        for name, d, t, i in rows:
            lines.append("| %s | %s | %.3f | %.3f | %+.3f |" % (
                name, "-" if d is None else "%.3f" % d, t, i, i - t))
        lines.append("")
        lines.append("Added per keep-alive request by inspection: %.3f ms "
                     "(goal: at most 1 ms; %s)." % (
                         added, "met" if added <= 1.0 else "NOT met"))
        text = "\n".join(lines) + "\n"
        print(text)
        with open(os.path.join(a.outdir, "results-inspect.md"), "w") as f:
            f.write(text)
        with open(os.path.join(a.outdir, "results-inspect.json"), "w") as f:
            json.dump({"args": vars(a), "runs": res, "medians": med,
                       "added_ms_per_request": added}, f, indent=2)
    finally:
        for d in reversed(daemons):
            d.stop()
        if not a.keep_tmp:
            shutil.rmtree(TMP, ignore_errors=True)


TMP = None

if __name__ == "__main__":
    main()
