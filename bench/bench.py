#!/usr/bin/env python3
"""sluice benchmark driver (run through bench/run.sh).

Starts an nginx origin and, one at a time, sluiced, tinyproxy and squid,
all on 127.0.0.1 with configs in a temp dir, pinned: the proxy alone on
core 0, the origin and the load generator on core 1.  Each figure is the
median of REPS repetitions and is reported as a ratio to a direct
connection to the origin.  Only PIDs this script started are ever
signalled.
"""
import argparse
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

PROXY_CPU = "0"
LOAD_CPU = "1"
GIB = 1 << 30
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024
ORIGIN_NAME = "origin.bench.test"
TARGETS = ["direct", "sluiced", "tinyproxy", "squid"]


def log(msg):
    print("[bench] " + msg, file=sys.stderr, flush=True)


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, secs, proc=None):
    deadline = time.monotonic() + secs
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def cpu_secs(pid):
    """utime+stime of the whole process (all threads)."""
    with open("/proc/%d/stat" % pid) as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_kib(pid):
    with open("/proc/%d/statm" % pid) as f:
        return int(f.read().split()[1]) * PAGE_KIB


class Daemon:
    """A process we started, pinned to a CPU, stopped by its own PID."""

    def __init__(self, name, argv, cpu, tmp, ready_word=None):
        self.name = name
        self.out_path = os.path.join(tmp, name + ".out")
        self.out = open(self.out_path, "wb")
        # taskset execs the command: the PID is the daemon's own
        self.proc = subprocess.Popen(["taskset", "-c", cpu] + argv,
                                     stdin=subprocess.DEVNULL,
                                     stdout=self.out, stderr=self.out,
                                     start_new_session=True)
        self.pid = self.proc.pid
        self.ready_word = ready_word

    def wait_ready(self, port, secs=15):
        if not wait_port(port, secs, self.proc):
            return False
        if self.ready_word is None:
            return True
        deadline = time.monotonic() + secs
        while time.monotonic() < deadline:
            with open(self.out_path, "rb") as f:
                if self.ready_word.encode() in f.read():
                    return True
            if self.proc.poll() is not None:
                return False
            time.sleep(0.05)
        return False

    def tail(self, n=15):
        try:
            with open(self.out_path, "rb") as f:
                lines = f.read().decode("utf-8", "replace").splitlines()
            return "\n".join(lines[-n:])
        except OSError:
            return ""

    def stop(self):
        if self.proc.poll() is None:
            try:
                os.kill(self.pid, signal.SIGTERM)
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)
            except ProcessLookupError:
                pass
        self.out.close()


class Bench:
    def __init__(self, args):
        self.args = args
        self.tmp = tempfile.mkdtemp(prefix="sluice-bench.")
        os.chmod(self.tmp, 0o755)
        self.daemons = []
        self.results = {t: {} for t in TARGETS}
        self.notes = []

    # -------------------------------------------------------------- setup
    def start(self, name, argv, port, ready_word=None, cpu=PROXY_CPU):
        d = Daemon(name, argv, cpu, self.tmp, ready_word)
        self.daemons.append(d)
        if not d.wait_ready(port):
            log("%s did not come up; its output:\n%s" % (name, d.tail()))
            self.stop(d)
            return None
        return d

    def stop(self, d):
        d.stop()
        if d in self.daemons:
            self.daemons.remove(d)

    def stop_all(self):
        for d in list(self.daemons):
            self.stop(d)

    def start_origin(self):
        root = os.path.join(self.tmp, "nginx")
        www = os.path.join(root, "www")
        os.makedirs(os.path.join(root, "logs"))
        os.makedirs(os.path.join(root, "tmp"))
        os.makedirs(www)
        with open(os.path.join(www, "1k"), "wb") as f:
            f.write(os.urandom(1024))
        # sparse files: page cache after the warm-up read, no disk
        for name, size in (("big1g", GIB), ("big256m", 256 << 20)):
            with open(os.path.join(www, name), "wb") as f:
                f.truncate(size)
        self.origin_port = free_port()
        conf = os.path.join(root, "nginx.conf")
        with open(conf, "w") as f:
            f.write("""daemon off;
master_process off;
worker_processes 1;
worker_rlimit_nofile 20000;
pid {root}/nginx.pid;
error_log {root}/error.log crit;
events {{ worker_connections 10000; multi_accept on; }}
http {{
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 100000000;
  keepalive_timeout 300s;
  client_header_timeout 300s;
  client_body_temp_path {root}/tmp;
  proxy_temp_path {root}/tmp;
  fastcgi_temp_path {root}/tmp;
  uwsgi_temp_path {root}/tmp;
  scgi_temp_path {root}/tmp;
  default_type application/octet-stream;
  server {{
    listen 127.0.0.1:{port} backlog=4096;
    root {www};
  }}
}}
""".format(root=root, www=www, port=self.origin_port))
        d = self.start("nginx", ["nginx", "-p", root, "-c", conf,
                                 "-e", os.path.join(root, "error.log")],
                       self.origin_port, cpu=LOAD_CPU)
        if d is None:
            raise SystemExit("bench: the nginx origin did not start")
        # warm the page cache so the first repetition is not a disk test
        for name in ("big1g", "big256m"):
            with open(os.path.join(www, name), "rb") as f:
                while f.read(8 << 20):
                    pass

    def start_sluiced(self, port, rep):
        exe = self.args.sluiced
        if not exe or not os.access(exe, os.X_OK):
            self.notes.append("sluiced: not built (%s)" % exe)
            return None, None
        root = os.path.join(self.tmp, "sluiced-%d" % rep)
        run = os.path.join(root, "run")
        os.makedirs(run, mode=0o700)
        conf = os.path.join(root, "sluiced.json")
        cfg = {
            "runtime_dir": run,
            "state_file": os.path.join(root, "state.json"),
            "ceiling": "public",
            "listen": {"tcp": ["127.0.0.1:%d" % port]},
            "sessions": [{"id": "bench", "tier": "public",
                          "source": "127.0.0.1"}],
            "ports": {"public": [self.origin_port, 443, 80]},
            "allow_cidrs": ["127.0.0.1/32"],
            "dns": {"hosts": {ORIGIN_NAME: ["127.0.0.1"]}},
            "log": {"path": os.path.join(root, "conn.jsonl")},
            # as root: keep it (the 0700 run dir); the drop costs nothing
            # per request, so the figures are the same either way
            "user": "root" if os.geteuid() == 0 else "sluice",
            "limits": {"max_conns_total": 10000,
                       "max_conns_per_session": 10000},
        }
        with open(conf, "w") as f:
            json.dump(cfg, f, indent=1)
        d = self.start("sluiced-%d" % rep, [exe, "-c", conf], port,
                       ready_word="ready")
        return d, "%s:%d" % (ORIGIN_NAME, self.origin_port)

    def start_tinyproxy(self, port, rep):
        if shutil.which("tinyproxy") is None:
            self.notes.append("tinyproxy: not installed")
            return None, None
        root = os.path.join(self.tmp, "tinyproxy-%d" % rep)
        os.makedirs(root)
        os.chmod(root, 0o777)   # it drops to nobody before the pid file
        conf = os.path.join(root, "tinyproxy.conf")
        with open(conf, "w") as f:
            f.write("""User nobody
Group nogroup
Port {port}
Listen 127.0.0.1
Timeout 600
MaxClients 4096
Allow 127.0.0.1
ConnectPort {origin}
PidFile "{root}/tinyproxy.pid"
LogLevel Critical
DisableViaHeader Yes
""".format(port=port, origin=self.origin_port, root=root))
        d = self.start("tinyproxy-%d" % rep,
                       ["tinyproxy", "-d", "-c", conf], port)
        return d, "127.0.0.1:%d" % self.origin_port

    def start_squid(self, port, rep):
        if shutil.which("squid") is None:
            self.notes.append("squid: not installed")
            return None, None
        root = os.path.join(self.tmp, "squid-%d" % rep)
        os.makedirs(root)
        shutil.chown(root, "proxy", "proxy")  # squid runs as proxy
        conf = os.path.join(root, "squid.conf")
        with open(conf, "w") as f:
            f.write("""http_port 127.0.0.1:{port}
pid_filename {root}/squid.pid
cache_log /dev/null
access_log none
cache_store_log none
logfile_rotate 0
cache deny all
cache_mem 0 MB
coredump_dir {root}
pinger_enable off
workers 1
max_filedescriptors 16384
acl SSL_ports port {origin}
acl Safe_ports port {origin}
acl CONNECT method CONNECT
http_access allow all
shutdown_lifetime 1 seconds
via off
forwarded_for delete
""".format(port=port, origin=self.origin_port, root=root))
        d = self.start("squid-%d" % rep, ["squid", "-N", "-f", conf], port)
        return d, "127.0.0.1:%d" % self.origin_port

    # ----------------------------------------------------------- running
    def loadgen(self, via, authority, mode, path="/1k", conc=1, count=None,
                secs=10.0):
        argv = ["taskset", "-c", LOAD_CPU, self.args.loadgen, "-m", mode,
                "-t", via, "-a", authority, "-u", path, "-c", str(conc),
                "-d", str(secs)]
        if count is not None:
            argv += ["-n", str(count)]
        if via != "127.0.0.1:%d" % self.origin_port:
            argv.append("-P")
        out = subprocess.run(argv, stdout=subprocess.PIPE, timeout=secs + 30,
                             check=True).stdout.decode()
        return json.loads(out.strip().splitlines()[-1])

    def idle_rss(self, d, via, authority):
        """KiB of proxy RSS per idle tunnel (N tunnels held open)."""
        n = self.args.idle
        before = rss_kib(d.pid)
        argv = ["taskset", "-c", LOAD_CPU, self.args.loadgen, "-m", "idle",
                "-P", "-t", via, "-a", authority, "-n", str(n), "-c", "100",
                "-d", "60"]
        p = subprocess.Popen(argv, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE)
        try:
            line = p.stdout.readline().decode().split()
            got = int(line[1]) if len(line) == 2 and line[0] == "ready" \
                else 0
            time.sleep(1.0)     # let the proxy settle its buffers
            after = rss_kib(d.pid)
        finally:
            p.stdin.close()     # EOF tells the load generator to let go
            out = p.stdout.read().decode()
            p.wait(timeout=70)
        res = json.loads(out.strip().splitlines()[-1])
        if got < n:
            self.notes.append("%s: only %d of %d idle tunnels came up"
                              % (d.name, got, n))
        if got == 0:
            return None
        return (after - before) / got, res["established"] < got

    def one_rep(self, target, rep, reps, last):
        """One repetition against a freshly started proxy: idle tunnels
        first, so their RSS is not hidden by heap that bulk transfers
        left behind, then bulk (with CPU), new tunnels, keep-alive."""
        d = None
        if target == "direct":
            via = "127.0.0.1:%d" % self.origin_port
            authority = via
        else:
            port = free_port()
            d, authority = getattr(self, "start_" + target)(port, rep)
            if d is None:
                self.notes.append("%s: did not start (repetition %d)"
                                  % (target, rep + 1))
                return 0
            via = "127.0.0.1:%d" % port
        dur = self.args.duration
        errors = 0
        try:
            if d:
                got = self.idle_rss(d, via, authority)
                if got is not None:
                    reps["idle_kib"].append(got[0])
                    if got[1]:
                        self.notes.append("%s: the proxy closed idle "
                                          "tunnels during the hold" % target)
            c0 = cpu_secs(d.pid) if d else None
            r1 = self.loadgen(via, authority, "bulk", "/big1g", 1, secs=60)
            r8 = self.loadgen(via, authority, "bulk", "/big256m", 8,
                              secs=60)
            if d:
                gib = (r1["bytes"] + r8["bytes"]) / GIB
                if gib > 0:
                    reps["cpu_gib"].append((cpu_secs(d.pid) - c0) / gib)
            reps["bulk1"].append(r1["mb_per_s"])
            reps["bulk8"].append(r8["mb_per_s"])
            if r1["bytes"] < GIB or r8["bytes"] < 8 * (256 << 20):
                self.notes.append("%s: a bulk transfer was cut short"
                                  % target)
            rt = self.loadgen(via, authority, "tunnels", "/1k", 50,
                              count=200000, secs=dur)
            reps["tunnels"].append(rt["ops_per_s"])
            rk = self.loadgen(via, authority, "ka", "/1k", 50, secs=dur)
            reps["ka_rps"].append(rk["ops_per_s"])
            reps["ka_p50"].append(rk["p50_us"] / 1000.0)
            reps["ka_p99"].append(rk["p99_us"] / 1000.0)
            for r in (r1, r8, rt, rk):
                errors += r["errors"]
            if d and d.proc.poll() is not None:
                self.notes.append("%s: exited during the run" % target)
            elif d and last and self.args.perf and target == "sluiced":
                self.perf_profile(d, via, authority)
        except (subprocess.SubprocessError, ValueError, OSError,
                IndexError, KeyError) as e:
            self.notes.append("%s: repetition %d failed: %s"
                              % (target, rep + 1, e))
            if d:
                log("%s output:\n%s" % (target, d.tail()))
        finally:
            if d:
                self.stop(d)
        return errors

    def one_target(self, target):
        log("%s: %d repetitions" % (target, self.args.reps))
        reps = {k: [] for k in ("bulk1", "bulk8", "tunnels", "ka_rps",
                                "ka_p50", "ka_p99", "cpu_gib", "idle_kib")}
        errors = 0
        for rep in range(self.args.reps):
            errors += self.one_rep(target, rep, reps,
                                   rep == self.args.reps - 1)
            time.sleep(0.5)
        if errors:
            self.notes.append("%s: %d failed requests or tunnels over the "
                              "run" % (target, errors))
        self.results[target] = {k: statistics.median(v)
                                for k, v in reps.items() if v}
        self.results[target]["_raw"] = reps

    def perf_profile(self, d, via, authority):
        """Where sluiced spends its CPU in bulk and in new tunnels."""
        if shutil.which("perf") is None:
            return
        for label, mode, path, conc in (("bulk", "bulk", "/big256m", 8),
                                        ("tunnels", "tunnels", "/1k", 50),
                                        ("ka", "ka", "/1k", 50)):
            data = os.path.join(self.tmp, "perf-%s.data" % label)
            rec = subprocess.Popen(["perf", "record", "-q", "-g", "-p",
                                    str(d.pid), "-o", data],
                                   stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
            time.sleep(0.3)
            try:
                self.loadgen(via, authority, mode, path, conc,
                             count=100000, secs=3)
            finally:
                rec.send_signal(signal.SIGINT)
                rec.wait(timeout=30)
            rep = subprocess.run(["perf", "report", "-i", data, "--stdio",
                                  "--no-children", "-g", "none",
                                  "--sort", "dso,sym",
                                  "--percent-limit", "0.5"],
                                 stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, timeout=120)
            path_out = os.path.join(self.args.outdir,
                                    "perf-sluiced-%s.txt" % label)
            with open(path_out, "wb") as f:
                f.write(rep.stdout)
            log("perf profile of sluiced (%s) in %s" % (label, path_out))

    def policy_bench(self):
        exe = self.args.bench_policy
        if not exe or not os.access(exe, os.X_OK):
            self.notes.append("bench_policy: not built")
            return
        vals = []
        for _ in range(self.args.reps):
            out = subprocess.run(["taskset", "-c", PROXY_CPU, exe],
                                 stdout=subprocess.PIPE, timeout=120,
                                 check=True).stdout.decode()
            vals.append(json.loads(out.strip().splitlines()[-1])["ns"])
        self.results["sluiced"]["decide_ns"] = statistics.median(vals)

    # ------------------------------------------------------------ report
    def table(self):
        rows = [
            ("1. Bulk, 1 CONNECT tunnel, 1 GiB (MB/s)", "bulk1", "%.0f"),
            ("1. Bulk, 8 tunnels x 256 MiB (MB/s)", "bulk8", "%.0f"),
            ("2. New tunnels/s, c=50, 1 KiB GET", "tunnels", "%.0f"),
            ("3. Keep-alive GET 1 KiB, c=50 (req/s)", "ka_rps", "%.0f"),
            ("3. ... p50 latency (ms)", "ka_p50", "%.2f"),
            ("3. ... p99 latency (ms)", "ka_p99", "%.2f"),
            ("4. RSS per idle tunnel (KiB, %d held)" % self.args.idle,
             "idle_kib", "%.1f"),
            ("5. Proxy CPU s per GiB relayed", "cpu_gib", "%.2f"),
            ("6. Policy decision, 100k-host list (ns)", "decide_ns", "%.0f"),
        ]
        head = ["Figure"] + TARGETS
        lines = []
        for label, key, fmt in rows:
            base = self.results["direct"].get(key)
            cells = [label]
            for t in TARGETS:
                v = self.results[t].get(key)
                if v is None:
                    cells.append("-")
                elif t == "direct" or not base:
                    cells.append(fmt % v)
                else:
                    cells.append("%s (%.2f)" % (fmt % v, v / base))
            lines.append(cells)
        return head, lines

    def render(self):
        self.notes = list(dict.fromkeys(self.notes))   # once each, in order
        head, lines = self.table()
        widths = [max(len(r[i]) for r in [head] + lines)
                  for i in range(len(head))]
        txt = []
        for r in [head] + lines:
            txt.append("  ".join(c.ljust(widths[i]) if i == 0
                                 else c.rjust(widths[i])
                                 for i, c in enumerate(r)))
        print("\n".join(txt))
        for n in self.notes:
            print("note: " + n)
        md = ["| " + " | ".join(head) + " |",
              "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
        for r in lines:
            md.append("| " + " | ".join(r) + " |")
        cpu = "?"
        try:
            with open("/proc/cpuinfo") as f:
                for ln in f:
                    if ln.startswith("model name"):
                        cpu = ln.split(":", 1)[1].strip()
                        break
        except OSError:
            pass
        text = ("Loopback only, %s, Linux %s, %d cores; proxy pinned on "
                "core 0, nginx origin and load generator on core 1.  "
                "Median of %d runs; (ratio) = value / direct.  "
                "tinyproxy and squid are Debian's, one process each, no "
                "cache, no disk logs; sluiced writes its hash-chained "
                "connection log (two records per request or tunnel) as it "
                "does in production.\n\n" % (cpu, platform.release(),
                                             os.cpu_count() or 0,
                                             self.args.reps)
                + "\n".join(md) + "\n")
        if self.notes:
            text += "\n" + "\n".join("- " + n for n in self.notes) + "\n"
        os.makedirs(self.args.outdir, exist_ok=True)
        with open(os.path.join(self.args.outdir, "results.md"), "w") as f:
            f.write(text)
        with open(os.path.join(self.args.outdir, "results.json"), "w") as f:
            json.dump(self.results, f, indent=1, sort_keys=True)
        log("markdown table in %s" % os.path.join(self.args.outdir,
                                                   "results.md"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--loadgen", required=True)
    ap.add_argument("--sluiced")
    ap.add_argument("--bench-policy")
    ap.add_argument("--outdir", required=True)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--duration", type=float, default=3.0,
                    help="seconds per rate test")
    ap.add_argument("--idle", type=int, default=2000)
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--perf", action="store_true",
                    help="also record a perf profile of sluiced")
    ap.add_argument("--keep-tmp", action="store_true")
    args = ap.parse_args()
    if not 1 <= args.reps <= 9 or not 0.5 <= args.duration <= 30 \
            or not 1 <= args.idle <= 8000:
        raise SystemExit("bench: --reps 1..9, --duration 0.5..30, "
                         "--idle 1..8000")
    # a TERM (timeout, CI) must still stop the daemons we started
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    b = Bench(args)
    t0 = time.monotonic()
    try:
        b.start_origin()
        for t in args.targets.split(","):
            if t not in TARGETS:
                raise SystemExit("bench: unknown target " + t)
            b.one_target(t)
        b.policy_bench()
    finally:
        b.stop_all()
        if not args.keep_tmp:
            shutil.rmtree(b.tmp, ignore_errors=True)
    b.render()
    log("done in %.0f s" % (time.monotonic() - t0))


if __name__ == "__main__":
    main()
