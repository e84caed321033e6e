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
import ipaddress
import json
import os
import platform
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

PROXY_CPU = "0"
LOAD_CPU = "1"
GIB = 1 << 30
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024
ORIGIN_NAME = "origin.bench.test"
TARGETS = ["direct", "sluiced", "tinyproxy", "squid", "ats"]
PEERS = ["tinyproxy", "squid", "ats"]
# --scale: label, key, format, higher is better
SCALE_ROWS = [
    ("7. RSS per idle tunnel (KiB, {sidle:,} held)", "s_idle_kib", "%.1f",
     False),
    ("7. ... idle tunnels that failed or were dropped", "s_idle_err",
     "%.0f", False),
    ("8. 1,000 sessions x 1 active tunnel (MB/s, all)", "s_sess_mbps",
     "%.0f", True),
    ("8. ... tunnels that failed", "s_sess_err", "%.0f", False),
    ("9. 1,000 prompts answered at once: answer to first byte p50 (ms)",
     "s_prompt_p50", "%.1f", False),
    ("9. ... p99 (ms)", "s_prompt_p99", "%.1f", False),
    ("10. Keep-alive GET p99, c=50 (ms)", "s_ka50_p99", "%.2f", False),
    ("10. Keep-alive GET p99, c=500 (ms)", "s_ka500_p99", "%.2f", False),
    ("10. ... req/s at c=500", "s_ka500_rps", "%.0f", True),
    ("11. System calls per keep-alive request", "sys_ka", "%.1f", False),
    ("11. System calls per short tunnel", "sys_tunnels", "%.1f", False),
]
SCALE_IDLE = 10000
SCALE_SESSIONS = 1000
SCALE_SRC = "127.1.0.1"     # session i comes from 127.1.0.1 + i


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

    def __init__(self, name, argv, cpu, tmp, ready_word=None, env=None):
        self.name = name
        self.out_path = os.path.join(tmp, name + ".out")
        self.out = open(self.out_path, "wb")
        # taskset execs the command: the PID is the daemon's own
        self.proc = subprocess.Popen(["taskset", "-c", cpu] + argv,
                                     stdin=subprocess.DEVNULL,
                                     stdout=self.out, stderr=self.out,
                                     start_new_session=True,
                                     env=dict(os.environ, **(env or {})))
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
        self.scale_idle_n = SCALE_IDLE
        self.results = {t: {} for t in TARGETS}
        self.notes = []

    # -------------------------------------------------------------- setup
    def start(self, name, argv, port, ready_word=None, cpu=PROXY_CPU,
              env=None):
        d = Daemon(name, argv, cpu, self.tmp, ready_word, env)
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
        for name, size in (("big1g", GIB), ("big256m", 256 << 20),
                           ("2m", 2 << 20)):
            with open(os.path.join(www, name), "wb") as f:
                f.truncate(size)
        self.origin_port = free_port()
        conf = os.path.join(root, "nginx.conf")
        with open(conf, "w") as f:
            f.write("""daemon off;
master_process off;
worker_processes 1;
worker_rlimit_nofile 65536;
pid {root}/nginx.pid;
error_log {root}/error.log crit;
events {{ worker_connections 30000; multi_accept on; }}
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
        for name in ("big1g", "big256m", "2m"):
            with open(os.path.join(www, name), "rb") as f:
                while f.read(8 << 20):
                    pass

    def start_sluiced(self, port, rep, sessions=0, tier="public"):
        """sessions: 0 for the one session "bench" (127.0.0.1), else that
        many, session i from SCALE_SRC + i, in tier."""
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
                          "source": "127.0.0.1"}] if not sessions else
            [{"id": "s%d" % i, "tier": tier,
              "source": str(ipaddress.IPv4Address(SCALE_SRC) + i)}
             for i in range(sessions)],
            "ports": {"public": [self.origin_port, 443, 80]},
            "allow_cidrs": ["127.0.0.1/32"],
            "dns": {"hosts": {ORIGIN_NAME: ["127.0.0.1"]}},
            "log": {"path": os.path.join(root, "conn.jsonl")},
            # as root: keep it (the 0700 run dir); the drop costs nothing
            # per request, so the figures are the same either way
            "user": "root" if os.geteuid() == 0 else "sluice",
            # room for the 10,000 idle tunnels of --scale
            "limits": {"max_conns_total": 30000,
                       "max_conns_per_session": 30000},
        }
        with open(conf, "w") as f:
            json.dump(cfg, f, indent=1)
        d = self.start("sluiced-%d" % rep, [exe, "-c", conf], port,
                       ready_word="ready")
        return d, "%s:%d" % (ORIGIN_NAME, self.origin_port)

    def start_tinyproxy(self, port, rep, **_):
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
MaxClients 12000
Allow 127.0.0.0/8
ConnectPort {origin}
PidFile "{root}/tinyproxy.pid"
LogLevel Critical
DisableViaHeader Yes
""".format(port=port, origin=self.origin_port, root=root))
        d = self.start("tinyproxy-%d" % rep,
                       ["tinyproxy", "-d", "-c", conf], port)
        return d, "127.0.0.1:%d" % self.origin_port

    def start_squid(self, port, rep, **_):
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
max_filedescriptors 65536
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

    def start_ats(self, port, rep, **_):
        """Apache Traffic Server as a forward proxy: one exec thread, no
        cache, no logs, its whole layout (runroot) in the run's dir."""
        exe = shutil.which("traffic_server")
        if exe is None or not os.path.isdir("/etc/trafficserver"):
            self.notes.append("ats: not installed")
            return None, None
        root = os.path.join(self.tmp, "ats-%d" % rep)
        etc = os.path.join(root, "etc")
        # the packaged defaults for the files records.config does not
        # replace (body_factory, ip_allow.yaml: loopback may use every
        # method, CONNECT included)
        shutil.copytree("/etc/trafficserver", etc)
        for d in ("run", "log", "cache", "var"):
            os.makedirs(os.path.join(root, d))
        for name in ("remap.config", "storage.config"):
            open(os.path.join(etc, name), "w").close()   # no remap, no disk
        with open(os.path.join(root, "runroot.yaml"), "w") as f:
            f.write("prefix: {r}\nexec_prefix: /usr\nbindir: /usr/bin\n"
                    "sbindir: /usr/sbin\nsysconfdir: {r}/etc\n"
                    "datadir: /usr/share/trafficserver\n"
                    "includedir: /usr/include\n"
                    "libdir: /usr/lib/trafficserver\n"
                    "libexecdir: /usr/lib/trafficserver/modules\n"
                    "localstatedir: {r}/var\nruntimedir: {r}/run\n"
                    "logdir: {r}/log\ncachedir: {r}/cache\n"
                    .format(r=root))
        recs = [
            # stay the user that started it (#-1): the run dir is ours
            ("admin.user_id", "STRING", "#-1"),
            ("http.server_ports", "STRING",
             "%d:ipv4:ip-in=127.0.0.1" % port),
            ("exec_thread.autoconfig", "INT", "0"),
            ("exec_thread.limit", "INT", "1"),
            ("exec_thread.affinity", "INT", "0"),
            ("accept_threads", "INT", "0"),
            ("task_threads", "INT", "1"),
            ("cache.threads_per_disk", "INT", "1"),
            ("http.cache.http", "INT", "0"),
            ("cache.ram_cache.size", "INT", "0"),
            ("log.logging_enabled", "INT", "0"),
            ("url_remap.remap_required", "INT", "0"),
            ("reverse_proxy.enabled", "INT", "0"),
            ("http.connect_ports", "STRING", str(self.origin_port)),
            ("http.insert_request_via_str", "INT", "0"),
            ("http.insert_response_via_str", "INT", "0"),
            ("http.insert_client_ip", "INT", "0"),
            ("http.insert_squid_x_forwarded_for", "INT", "0"),
            ("http.keep_alive_no_activity_timeout_in", "INT", "300"),
            ("http.keep_alive_no_activity_timeout_out", "INT", "300"),
            ("http.transaction_no_activity_timeout_in", "INT", "300"),
            ("http.transaction_no_activity_timeout_out", "INT", "300"),
            ("net.connections_throttle", "INT", "60000"),
            ("net.max_connections_in", "INT", "60000"),
            ("diags.debug.enabled", "INT", "0"),
        ]
        # Debian 12's ATS 9.2 reads records.config (records.yaml is 10.x)
        with open(os.path.join(etc, "records.config"), "w") as f:
            for k, t, v in recs:
                f.write("CONFIG proxy.config.%s %s %s\n" % (k, t, v))
        d = self.start("ats-%d" % rep, [exe, "--run-root=" + root], port,
                       env={"TS_RUNROOT": root})
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

    KEYS = ("bulk1", "bulk8", "tunnels", "ka_rps", "ka_p50", "ka_p99",
            "cpu_gib", "idle_kib")

    def run_targets(self, targets):
        """Repetition by repetition, every target in turn: a load that
        others put on the machine meanwhile falls on all of them alike,
        which keeps the ratios honest on a shared host."""
        reps = {t: {k: [] for k in self.KEYS} for t in targets}
        errors = dict.fromkeys(targets, 0)
        for rep in range(self.args.reps):
            for t in targets:
                log("%s: repetition %d of %d" % (t, rep + 1,
                                                   self.args.reps))
                errors[t] += self.one_rep(t, rep, reps[t],
                                          rep == self.args.reps - 1)
                time.sleep(0.5)
        for t in targets:
            if errors[t]:
                self.notes.append("%s: %d failed requests or tunnels over "
                                  "the run" % (t, errors[t]))
            self.results[t].update({k: statistics.median(v)
                                    for k, v in reps[t].items() if v})
            self.results[t]["_raw"] = reps[t]

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

    # --------------------------------------------------------- syscalls
    def syscalls(self, targets):
        """System calls per keep-alive request and per short tunnel:
        strace -c -f attached to a fresh proxy over a fixed count (the
        connections' setup included, spread over the count)."""
        if shutil.which("strace") is None:
            self.notes.append("syscalls: strace not installed")
            return
        n = self.args.syscall_count
        for t in targets:
            port = free_port()
            d, authority = getattr(self, "start_" + t)(port, 90)
            if d is None:
                continue
            via = "127.0.0.1:%d" % port
            try:
                for label, mode, conc in (("ka", "ka", 50),
                                          ("tunnels", "tunnels", 50)):
                    out = os.path.join(self.tmp, "strace-%s-%s" % (t, label))
                    st = subprocess.Popen(["strace", "-c", "-f", "-q", "-o",
                                           out, "-p", str(d.pid)],
                                          stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL)
                    time.sleep(1.0)     # attached to every thread
                    try:
                        r = self.loadgen(via, authority, mode, "/1k", conc,
                                         count=n, secs=60)
                    finally:
                        st.send_signal(signal.SIGINT)
                        st.wait(timeout=30)
                    calls, top = self.strace_total(out)
                    done = r["ops"] if r["ops"] else 1
                    key = "sys_" + label
                    self.results[t][key] = calls / done
                    shutil.copy(out, os.path.join(
                        self.args.outdir, "strace-%s-%s.txt" % (t, label)))
                    log("%s: %.1f system calls per %s (%s)" % (
                        t, calls / done, "request" if label == "ka"
                        else "tunnel", ", ".join(top)))
            except (subprocess.SubprocessError, ValueError, OSError,
                    KeyError) as e:
                self.notes.append("%s: syscall count failed: %s" % (t, e))
            finally:
                self.stop(d)

    @staticmethod
    def strace_total(path):
        """(total calls, the five most frequent as "name N") of a
        strace -c summary."""
        total, rows = 0, []
        with open(path) as f:
            for ln in f:
                parts = ln.split()
                if len(parts) < 5 or not parts[3].isdigit():
                    continue
                if parts[-1] == "total":
                    total = int(parts[3])
                else:
                    rows.append((int(parts[3]), parts[-1]))
        rows.sort(reverse=True)
        return total, ["%s %d" % (nm, c) for c, nm in rows[:5]]

    # ------------------------------------------------------------ scale
    def scale(self, targets):
        """The --scale figures, one repetition each, each bounded in
        time by the load generator's -d and a timeout around it."""
        dur = self.args.duration
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if soft != resource.RLIM_INFINITY and \
                soft < 2 * SCALE_IDLE + 100:
            # a proxy holds two descriptors a tunnel: where the hard
            # limit cannot be raised (no CAP_SYS_RESOURCE), hold fewer
            self.scale_idle_n = (soft - 100) // 2
            self.notes.append("idle tunnels: %d held, not %d: "
                              "RLIMIT_NOFILE is %d here" % (
                                  self.scale_idle_n, SCALE_IDLE, soft))
        # figure by figure, every target in turn: a load that others put
        # on the machine meanwhile falls on all of them alike
        for t in targets:
            if t != "direct":
                self.scale_idle(t)
        for t in targets:
            self.scale_sessions(t)
        for t in targets:
            self.scale_ka(t, dur)
        if "sluiced" in targets:
            self.scale_prompts()

    def fresh(self, t, rep, **kw):
        """(daemon, via, authority) of a freshly started target; daemon
        None for direct."""
        if t == "direct":
            via = "127.0.0.1:%d" % self.origin_port
            return None, via, via
        port = free_port()
        d, authority = getattr(self, "start_" + t)(port, rep, **kw)
        if d is None:
            raise OSError("%s did not start" % t)
        return d, "127.0.0.1:%d" % port, authority

    def scale_idle(self, t):
        n = self.scale_idle_n
        d = None
        try:
            d, via, authority = self.fresh(t, 100)
            before = rss_kib(d.pid)
            argv = ["taskset", "-c", LOAD_CPU, self.args.loadgen, "-m",
                    "idle", "-P", "-t", via, "-a", authority, "-n", str(n),
                    "-c", "200", "-d", "120"]
            p = subprocess.Popen(argv, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE)
            try:
                line = p.stdout.readline().decode().split()
                got = int(line[1]) if len(line) == 2 and \
                    line[0] == "ready" else 0
                time.sleep(2.0)
                after = rss_kib(d.pid)
            finally:
                p.stdin.close()
                out = p.stdout.read().decode()
                p.wait(timeout=130)
            res = json.loads(out.strip().splitlines()[-1])
            if got:
                self.results[t]["s_idle_kib"] = (after - before) / got
            # not established, or dropped during the hold
            self.results[t]["s_idle_err"] = (n - got) + \
                max(0, got - res["established"])
            if self.results[t]["s_idle_err"]:
                self.notes.append(
                    "%s: idle tunnels: %d failed to dial, %d cut, %d "
                    "answered other than 200 (last errno %d)" % (
                        t, res["err_dial"], res["err_cut"],
                        res["err_answer"], res["last_errno"]))
        except (subprocess.SubprocessError, ValueError, OSError,
                IndexError, KeyError) as e:
            self.notes.append("%s: 10,000 idle tunnels failed: %s" % (t, e))
        finally:
            if d:
                self.stop(d)

    def scale_sessions(self, t):
        """1,000 sessions (sources 127.1.0.1 and on), one tunnel each,
        all moving a 2 MiB body at once."""
        d = None
        try:
            d, via, authority = self.fresh(t, 101, sessions=SCALE_SESSIONS)
            argv = ["taskset", "-c", LOAD_CPU, self.args.loadgen, "-m",
                    "bulk", "-t", via, "-a", authority, "-u", "/2m", "-c",
                    str(SCALE_SESSIONS), "-b", SCALE_SRC, "-d", "60"]
            if d:
                argv.append("-P")
            out = subprocess.run(argv, stdout=subprocess.PIPE, timeout=90,
                                 check=True).stdout.decode()
            r = json.loads(out.strip().splitlines()[-1])
            self.results[t]["s_sess_mbps"] = r["mb_per_s"]
            self.results[t]["s_sess_err"] = r["errors"] + \
                (SCALE_SESSIONS - r["ops"] - r["errors"])
        except (subprocess.SubprocessError, ValueError, OSError,
                IndexError, KeyError) as e:
            self.notes.append("%s: 1,000 sessions failed: %s" % (t, e))
        finally:
            if d:
                self.stop(d)

    def scale_ka(self, t, dur):
        d = None
        try:
            d, via, authority = self.fresh(t, 102)
            for conc, key in ((50, "s_ka50"), (500, "s_ka500")):
                r = self.loadgen(via, authority, "ka", "/1k", conc,
                                 secs=dur)
                self.results[t][key + "_p99"] = r["p99_us"] / 1000.0
                self.results[t][key + "_rps"] = r["ops_per_s"]
                if r["errors"]:
                    self.notes.append("%s: %d errors in keep-alive GET at "
                                      "c=%d" % (t, r["errors"], conc))
        except (subprocess.SubprocessError, ValueError, OSError,
                IndexError, KeyError) as e:
            self.notes.append("%s: keep-alive at c=500 failed: %s" % (t, e))
        finally:
            if d:
                self.stop(d)

    def scale_prompts(self):
        """1,000 sessions of a lower tier than the ceiling each CONNECT
        once: 1,000 prompts pending.  An event-stream subscriber makes
        sluiced ask; the answers (allow_once) go in one burst, pipelined
        on one control connection; the figure is the time from the
        burst's start to each client's first byte (its 200)."""
        n = SCALE_SESSIONS
        d = ev = None
        try:
            d, via, authority = self.fresh("sluiced", 103, sessions=n,
                                           tier="registries")
            ctl = os.path.join(self.tmp, "sluiced-103", "run",
                               "control.sock")
            ev = socket.socket(socket.AF_UNIX)
            ev.settimeout(10)
            ev.connect(ctl)
            ev.sendall(b"GET /v1/events HTTP/1.1\r\nHost: x\r\n"
                       b"Accept: text/event-stream\r\n\r\n")
            if b" 200 " not in ev.recv(4096):
                raise OSError("no event stream")
            # an approver reads its events: a stream nobody reads would
            # fill and be dropped, and sluiced would stop asking
            threading.Thread(target=self.drain, args=(ev,),
                             daemon=True).start()
            argv = ["taskset", "-c", LOAD_CPU, self.args.loadgen, "-m",
                    "hold", "-P", "-t", via, "-a", authority, "-n", str(n),
                    "-b", SCALE_SRC, "-d", "60"]
            p = subprocess.Popen(argv, stdout=subprocess.PIPE)
            try:
                line = p.stdout.readline().decode().split()
                if len(line) != 2 or line[0] != "sent":
                    raise OSError("the load generator did not send")
                ids = []
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    js = self.ctl_call(ctl, b"GET /v1/prompts HTTP/1.1\r\n"
                                       b"Host: x\r\nConnection: close"
                                       b"\r\n\r\n")
                    ids = [x["id"] for x in json.loads(js)["prompts"]]
                    if len(ids) >= n:
                        break
                    time.sleep(0.2)
                body = b'{"decision":"allow_once"}'
                burst = b"".join(
                    b"POST /v1/prompts/%s HTTP/1.1\r\nHost: x\r\n"
                    b"Content-Type: application/json\r\n"
                    b"Content-Length: %d\r\n\r\n%s"
                    % (i.encode(), len(body), body) for i in ids)
                t0 = time.monotonic_ns()
                self.ctl_burst(ctl, burst, len(ids))
                out = p.communicate(timeout=90)[0].decode()
            finally:
                if p.poll() is None:
                    p.kill()
                    p.wait(timeout=10)
            lines = out.strip().splitlines()
            first = json.loads(lines[-1])["first_ns"]
            lat = sorted((f - t0) / 1e6 for f in first if f > 0)
            if lat:
                self.results["sluiced"]["s_prompt_p50"] = \
                    lat[len(lat) // 2]
                self.results["sluiced"]["s_prompt_p99"] = \
                    lat[min(len(lat) - 1, (len(lat) * 99) // 100)]
            if len(ids) < n or len(lat) < n:
                self.notes.append("prompts: %d pending of %d, %d answered "
                                  "through" % (len(ids), n, len(lat)))
        except (subprocess.SubprocessError, ValueError, OSError,
                IndexError, KeyError) as e:
            self.notes.append("sluiced: 1,000 prompts failed: %s" % e)
        finally:
            if ev:
                ev.close()
            if d:
                self.stop(d)

    @staticmethod
    def drain(sock):
        """Read and drop what sock sends until it closes (bounded)."""
        sock.settimeout(1.0)
        for _ in range(100000):
            try:
                if not sock.recv(1 << 16):
                    return
            except socket.timeout:
                continue
            except OSError:
                return

    @staticmethod
    def ctl_call(path, req):
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(10)
        s.connect(path)
        try:
            s.sendall(req)
            buf = b""
            for _ in range(100000):
                b = s.recv(1 << 16)
                if not b:
                    break
                buf += b
        finally:
            s.close()
        return buf.split(b"\r\n\r\n", 1)[1].decode()

    @staticmethod
    def ctl_burst(path, burst, n):
        """Send n pipelined requests at once; wait for n answers."""
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(30)
        s.connect(path)
        try:
            s.sendall(burst)
            buf, got = b"", 0
            deadline = time.monotonic() + 60
            while got < n and time.monotonic() < deadline:
                b = s.recv(1 << 16)
                if not b:
                    break
                buf += b
                got = buf.count(b"HTTP/1.1 ")
        finally:
            s.close()
        if got < n:
            raise OSError("%d of %d answers acknowledged" % (got, n))

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
    ROWS = [
        # label, key, format, higher is better
        ("1. Bulk, 1 CONNECT tunnel, 1 GiB (MB/s)", "bulk1", "%.0f", True),
        ("1. Bulk, 8 tunnels x 256 MiB (MB/s)", "bulk8", "%.0f", True),
        ("2. New tunnels/s, c=50, 1 KiB GET", "tunnels", "%.0f", True),
        ("3. Keep-alive GET 1 KiB, c=50 (req/s)", "ka_rps", "%.0f", True),
        ("3. ... p50 latency (ms)", "ka_p50", "%.2f", False),
        ("3. ... p99 latency (ms)", "ka_p99", "%.2f", False),
        ("4. RSS per idle tunnel (KiB, {idle} held)", "idle_kib", "%.1f",
         False),
        ("5. Proxy CPU s per GiB relayed", "cpu_gib", "%.2f", False),
        ("6. Policy decision, 100k-host list (ns)", "decide_ns", "%.0f",
         False),
    ]

    def best_peer(self, key, higher):
        """The peer with the best median of key: (name, value)."""
        got = [(t, self.results[t][key]) for t in PEERS
               if self.results[t].get(key) is not None]
        if not got:
            return None, None
        return (max if higher else min)(got, key=lambda tv: tv[1])

    def scale_rows(self):
        """Rows of the --scale figures that some target has."""
        return [r for r in SCALE_ROWS
                if any(r[1] in self.results[t] for t in TARGETS)]

    def table(self):
        """Each cell: value (ratio to direct); the last column is
        sluiced's ratio to the best peer of that row (> 1 is ahead for
        rates, < 1 for times and sizes)."""
        rows = self.ROWS + self.scale_rows()
        head = ["Figure"] + TARGETS + ["sluiced / best peer"]
        lines = []
        for label, key, fmt, higher in rows:
            base = self.results["direct"].get(key)
            cells = [label.format(idle=self.args.idle,
                                  sidle=self.scale_idle_n)]
            for t in TARGETS:
                v = self.results[t].get(key)
                if v is None:
                    cells.append("-")
                elif t == "direct" or not base:
                    cells.append(fmt % v)
                else:
                    cells.append("%s (%.2f)" % (fmt % v, v / base))
            peer, pv = self.best_peer(key, higher)
            sv = self.results["sluiced"].get(key)
            if sv is None or not pv:
                cells.append("-")
            else:
                cells.append("%.2f (%s)" % (sv / pv, peer))
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
                "Median of %d runs; (ratio) = value / direct; the last "
                "column is sluiced / the best of the peers (tinyproxy, "
                "squid, ats) on that row.  "
                "tinyproxy, squid and Apache Traffic Server (ats) are "
                "Debian's, one process each (ATS: one exec thread), no "
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
    ap.add_argument("--scale", action="store_true",
                    help="also the scale figures (10,000 idle tunnels, "
                    "1,000 sessions, 1,000 prompts, c=500)")
    ap.add_argument("--scale-only", action="store_true",
                    help="the --scale figures alone (implies --scale)")
    ap.add_argument("--syscalls", action="store_true",
                    help="also system calls per request and per tunnel "
                    "(strace -c)")
    ap.add_argument("--syscall-count", type=int, default=5000)
    ap.add_argument("--keep-tmp", action="store_true")
    args = ap.parse_args()
    args.scale = args.scale or args.scale_only
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
        targets = args.targets.split(",")
        for t in targets:
            if t not in TARGETS:
                raise SystemExit("bench: unknown target " + t)
        if not args.scale_only:
            b.run_targets(targets)
            b.policy_bench()
        if args.syscalls:
            b.syscalls([t for t in targets if t != "direct"])
        if args.scale:
            b.scale([t for t in targets if t != "direct"] +
                    (["direct"] if "direct" in targets else []))
    finally:
        b.stop_all()
        if not args.keep_tmp:
            shutil.rmtree(b.tmp, ignore_errors=True)
    b.render()
    log("done in %.0f s" % (time.monotonic() - t0))


if __name__ == "__main__":
    main()
