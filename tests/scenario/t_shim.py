#!/usr/bin/env python3
"""sluice-shim in front of a real sluiced session socket: curl through it
(plain HTTP and CONNECT), refusals passed through unchanged, half-close in
both directions, a missing socket (log line, closed client, shim lives),
the connection limit, a slow consumer with bounded memory, SIGTERM, the
command line, and vsock mode failing cleanly (never towards CID 2)."""

import hashlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, Fail, Skip, check, check_eq, curl,  # noqa: E402
                     curl_status, do_connect, read_head, read_body,
                     read_response, recv_exact, recv_until_eof, is_closed,
                     check_refusal, echo_handler, free_port, get_request,
                     pattern_digest, vmrss_kib, wait_until, log, BUILDDIR)

S = Suite("t_shim", time_limit=300)

EX_OK, EX_RUNTIME, EX_USAGE = 0, 1, 2
N_UP = 50000
N_DOWN = 100000


def shim_path():
    p = os.path.join(BUILDDIR, "sandbox-glue", "shim", "sluice-shim")
    if not os.access(p, os.X_OK):
        raise Fail("sluice-shim not built at %s" % p)
    return p


def limit_fds(n):
    if n is None:
        return None

    def apply():
        import resource
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))
    return apply


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Shim:
    """One sluice-shim process; stderr drained into lines by a thread."""

    def __init__(self, env, args, listen=True, nofile=None):
        self.port = free_port()
        argv = [shim_path()]
        if listen:
            argv += ["-l", "127.0.0.1:%d" % self.port]
        self.proc = subprocess.Popen(argv + list(args), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE,
                                     preexec_fn=limit_fds(nofile))
        env.closers.append(self.stop)
        self.lines = []
        self.lock = threading.Lock()
        threading.Thread(target=self._drain, daemon=True).start()
        if listen:
            wait_until(lambda: self.has("listening on") or not self.alive(),
                       10, what="sluice-shim to listen")
            check(self.alive(), "sluice-shim exited: %s", self.stderr())

    def _drain(self):
        for _ in range(10 ** 6):
            line = self.proc.stderr.readline()
            if not line:
                return
            with self.lock:
                self.lines.append(line.decode("utf-8", "replace").rstrip("\n"))

    def has(self, text):
        with self.lock:
            return [ln for ln in self.lines if text in ln]

    def stderr(self):
        with self.lock:
            return "\n".join(self.lines[-50:])

    def alive(self):
        return self.proc.poll() is None

    def connect(self, timeout=10.0):
        return socket.create_connection(("127.0.0.1", self.port), timeout)

    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def stop(self, timeout=10.0):
        """SIGTERM; returns the exit code (SIGKILL after timeout)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
                raise Fail("sluice-shim ignored SIGTERM for %.0fs" % timeout)
        return self.proc.returncode


def setup(env, *servers, tier="public", shim_args=()):
    """sluiced with one Unix-socket session (no source: its socket goes
    under runtime_dir), an HTTP upstream as up.test, and a shim in front
    of the session socket.  Returns (daemon, upstream, shim)."""
    up = env.http_upstream()
    ports = [up.port] + [s.port for s in servers]
    cfg = env.config(sessions=[{"id": "s1", "tenant": "acme", "user": "alice",
                                "tier": tier}],
                     ports=env.ports(*ports),
                     dns={"hosts": {"up.test": ["127.0.0.1"]}})
    d = env.sluiced(cfg)
    sock = d.session_socket("s1")
    wait_until(lambda: os.path.exists(sock), 5, what="the session socket")
    shim = Shim(env, ["-u", sock] + list(shim_args))
    return d, up, shim


@S.case
def command_line(env):
    exe = shim_path()

    def run(*args):
        return subprocess.run([exe] + list(args), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=10)
    r = run("--help")
    check_eq(r.returncode, EX_OK, "--help exit")
    check(b"-l, --listen" in r.stdout and b"Exit status" in r.stdout,
          "--help text: %r", r.stdout[:200])
    r = run("--version")
    check_eq(r.returncode, EX_OK, "--version exit")
    check(r.stdout.startswith(b"sluice-shim "), "--version: %r", r.stdout)
    for bad in (["-x"], ["-l", "localhost:80"], ["-l", "127.0.0.1"],
                ["-l", "[::1]"], ["-l", "::1:80"], ["-m", "0"], ["-c", "1"],
                ["-v", "x"], ["-u", "/a", "-v", "5"], ["extra"]):
        r = run(*bad)
        check_eq(r.returncode, EX_USAGE, "exit for %r" % (bad,))
        check(r.stderr.startswith(b"sluice-shim") or b"usage" in r.stderr,
              "no message for %r: %r", bad, r.stderr)
    # a listener that cannot be opened is a runtime error
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen(1)
    try:
        r = run("-l", "127.0.0.1:%d" % blocker.getsockname()[1], "-u", "/x")
    finally:
        blocker.close()
    check_eq(r.returncode, EX_RUNTIME, "exit for a taken port")
    check(b"in use" in r.stderr, "taken port message: %r", r.stderr)


@S.case
def curl_plain_and_connect(env):
    d, up, shim = setup(env)
    r = curl(["-x", shim.url(), "-w", "\n%{http_code}",
              "http://up.test:%d/hello" % up.port])
    body, code = curl_status(r.stdout)
    check_eq(code, 200, "plain HTTP status (stderr %r)" % r.stderr)
    check('"path": "/hello"' in body, "upstream echo: %r", body[:200])
    r = curl(["-x", shim.url(), "-p", "-w", "\n%{http_code}",
              "http://up.test:%d/tunnelled" % up.port])
    body, code = curl_status(r.stdout)
    check_eq(code, 200, "through CONNECT (stderr %r)" % r.stderr)
    check('"path": "/tunnelled"' in body, "tunnel echo: %r", body[:200])
    # a 1 MiB body arrives intact
    r = curl(["-x", shim.url(), "http://up.test:%d/big?n=1048576" % up.port])
    check_eq(hashlib.sha256(r.stdout).hexdigest(), pattern_digest(1048576),
             "1 MiB body")
    check_eq(up.accept_count(), 3, "upstream connections")
    check(shim.has("listening on 127.0.0.1:%d" % shim.port), "start line: %s",
          shim.stderr())
    check_eq(shim.stop(), EX_OK, "exit after SIGTERM")


@S.case
def listen_fd(env):
    """-L takes an inherited listening socket (what the ns backend's
    holder passes): a connection made before the shim starts waits in
    its backlog and is relayed once it does; a socket that does not
    listen, or no descriptor, is refused."""
    up = env.http_upstream()
    cfg = env.config(sessions=[{"id": "s1", "tenant": "acme", "user": "alice",
                                "tier": "public"}],
                     ports=env.ports(up.port),
                     dns={"hosts": {"up.test": ["127.0.0.1"]}})
    d = env.sluiced(cfg)
    sock = d.session_socket("s1")
    wait_until(lambda: os.path.exists(sock), 5, what="the session socket")
    lis = socket.socket()
    lis.bind(("127.0.0.1", 0))
    lis.listen(8)
    port = lis.getsockname()[1]
    early = socket.create_connection(("127.0.0.1", port), 10)
    p = subprocess.Popen([shim_path(), "-L", str(lis.fileno()), "-u", sock],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, pass_fds=(lis.fileno(),))
    try:
        lis.close()     # the shim's copy is the listener now
        resp = read_response_or_fail(early, get_request(
            "http://up.test:%d/early" % up.port))
        check_eq(resp.status, 200, "the early connection's status")
        check(b"/early" in resp.body, "the early connection: %r",
              resp.body[:200])
        early.close()
        r = curl(["-x", "http://127.0.0.1:%d" % port, "-w", "\n%{http_code}",
                  "http://up.test:%d/later" % up.port])
        body, code = curl_status(r.stdout)
        check_eq(code, 200, "a later connection (stderr %r)" % r.stderr)
    finally:
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=10)
    check_eq(p.returncode, EX_OK, "exit after SIGTERM")
    check(b"listening on 127.0.0.1:%d" % port in err, "start line: %r", err)
    # not listening: a runtime error; not a descriptor number: usage
    plain = socket.socket()
    try:
        r = subprocess.run([shim_path(), "-L", str(plain.fileno()), "-u", "/x"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           pass_fds=(plain.fileno(),), timeout=10)
    finally:
        plain.close()
    check_eq(r.returncode, EX_RUNTIME, "exit for a socket that does not listen")
    check(b"not a listening TCP socket" in r.stderr, "message: %r", r.stderr)
    for bad in ("x", "2", "-1"):
        r = subprocess.run([shim_path(), "-L", bad, "-u", "/x"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=10)
        check_eq(r.returncode, EX_USAGE, "exit for -L %s" % bad)


@S.case
def refusals_pass_through(env):
    d, up, shim = setup(env)
    # port 9 is not in ports{}: sluiced refuses, the shim relays it as is
    for req in (get_request("http://up.test:9/x"),
                b"CONNECT up.test:9 HTTP/1.1\r\nHost: up.test:9\r\n\r\n"):
        s = shim.connect()
        resp = read_response_or_fail(s, req)
        check_refusal(resp, "port_not_allowed", req.split(b" ")[0].decode())
        s.close()
    r = curl(["-x", shim.url(), "-D", "-", "-o", "/dev/null",
              "http://up.test:9/x"])
    check(b" 403 " in r.stdout.split(b"\r\n")[0], "curl status: %r", r.stdout[:80])
    check(b"X-Sluice-Reason: port_not_allowed" in r.stdout, "curl headers: %r",
          r.stdout)
    check_eq(up.accept_count(), 0, "upstream connections")


def read_response_or_fail(s, req):
    s.sendall(req)
    return read_response(s)


def reply_after_eof(server, conn, peer):
    """Read to the client's FIN, answer a digest and N_DOWN bytes, close."""
    h = hashlib.sha256()
    n = 0
    for _ in range(100000):
        c = conn.recv(65536)
        if not c:
            break
        h.update(c)
        n += len(c)
    conn.sendall(b"%08d%s" % (n, h.hexdigest().encode()) + b"d" * N_DOWN)
    conn.shutdown(socket.SHUT_WR)


def send_then_read(server, conn, peer):
    """Send N_DOWN bytes and FIN first, then read what still comes."""
    conn.sendall(b"u" * N_DOWN)
    conn.shutdown(socket.SHUT_WR)
    h = hashlib.sha256()
    n = 0
    for _ in range(100000):
        try:
            c = conn.recv(65536)
        except OSError:
            break
        if not c:
            break
        h.update(c)
        n += len(c)
    server.record(("after_fin", n, h.hexdigest()))


@S.case
def half_close_client_first(env):
    srv = env.server(reply_after_eof)
    d, up, shim = setup(env, srv)
    s = shim.connect()
    resp, _ = do_connect(s, "up.test", srv.port)
    check_eq(resp.status, 200, "CONNECT")
    data = os.urandom(N_UP)
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
    got, eof, reset = recv_until_eof(s, limit=N_DOWN + 1000, timeout=10)
    check(eof and not reset, "no clean EOF (reset=%s)", reset)
    check_eq(len(got), 8 + 64 + N_DOWN, "bytes after our FIN")
    check_eq(int(got[:8]), N_UP, "bytes upstream saw")
    check_eq(got[8:72].decode(), hashlib.sha256(data).hexdigest(), "digest")
    s.close()


@S.case
def half_close_upstream_first(env):
    srv = env.server(send_then_read)
    d, up, shim = setup(env, srv)
    s = shim.connect()
    resp, rest = do_connect(s, "up.test", srv.port)
    check_eq(resp.status, 200, "CONNECT")
    got = rest + recv_exact(s, N_DOWN - len(rest), timeout=10)
    check_eq(got, b"u" * N_DOWN, "upstream bytes")
    more, eof, reset = recv_until_eof(s, limit=1000, timeout=5)
    check(eof and not reset and more == b"", "no clean EOF from upstream "
          "(eof=%s reset=%s extra=%d)", eof, reset, len(more))
    # our direction is still open
    data = os.urandom(N_UP)
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
    ev = wait_until(lambda: [e for e in srv.events if e[0] == "after_fin"], 10,
                    what="the upstream to get our bytes after its FIN")[0]
    check_eq(ev[1], N_UP, "bytes after the upstream's FIN")
    check_eq(ev[2], hashlib.sha256(data).hexdigest(), "digest")
    s.close()


@S.case
def echo_many_at_once(env):
    echo = env.server(echo_handler)
    d, up, shim = setup(env, echo)
    socks = []
    for i in range(20):
        s = shim.connect()
        resp, _ = do_connect(s, "up.test", echo.port)
        check_eq(resp.status, 200, "CONNECT %d" % i)
        socks.append(s)
    for i, s in enumerate(socks):
        msg = b"%d:" % i + os.urandom(3000)
        s.sendall(msg)
        check_eq(recv_exact(s, len(msg)), msg, "echo %d" % i)
    for s in socks:
        s.close()


@S.case
def socket_missing(env):
    path = env.path("no", "proxy.sock")
    shim = Shim(env, ["-u", path])
    for _ in range(2):
        s = shim.connect()
        s.sendall(b"GET http://up.test/ HTTP/1.1\r\nHost: up.test\r\n\r\n")
        check(is_closed(s, timeout=5), "client connection not closed")
        s.close()
    want = "sluice-shim: connect %s: No such file or directory" % path
    wait_until(lambda: len(shim.has(want)) >= 2, 5, what="two log lines %r" % want)
    check(shim.alive(), "sluice-shim died")
    # the socket appears later: the same shim now relays
    up = env.http_upstream()
    cfg = env.config(sessions=[{"id": "s1", "tier": "public", "socket": path}],
                     ports=env.ports(up.port),
                     dns={"hosts": {"up.test": ["127.0.0.1"]}})
    os.makedirs(os.path.dirname(path), exist_ok=True)
    env.sluiced(cfg)
    s = shim.connect()
    resp = read_response_or_fail(s, get_request("http://up.test:%d/ok" % up.port))
    check_eq(resp.status, 200, "status once the socket exists")
    s.close()
    check_eq(shim.stop(), EX_OK, "exit after SIGTERM")


@S.case
def connection_limit(env):
    echo = env.server(echo_handler)
    d, up, shim = setup(env, echo, shim_args=["-m", "2"])
    held = []
    for i in range(2):
        s = shim.connect()
        resp, _ = do_connect(s, "up.test", echo.port)
        check_eq(resp.status, 200, "CONNECT %d" % i)
        held.append(s)
    s = shim.connect()
    check(is_closed(s, timeout=5), "third connection not closed")
    s.close()
    wait_until(lambda: shim.has("refused 127.0.0.1:"), 5, what="a refusal line")
    held.pop().close()

    def third_works():
        t = shim.connect()
        try:
            resp, _ = do_connect(t, "up.test", echo.port)
            return resp.status == 200
        except (Fail, OSError):
            return False
        finally:
            t.close()
    wait_until(third_works, 5, step=0.2, what="a slot after one closed")
    for s in held:
        s.close()


@S.case
def out_of_fds_pauses(env):
    # 10 fds: stdio, the listener, three relays; the fourth accept gets
    # EMFILE and must pause instead of spinning on the pending connection
    echo = env.server(echo_handler)
    up = env.http_upstream()
    cfg = env.config(sessions=[{"id": "s1", "tier": "public"}],
                     ports=env.ports(up.port, echo.port),
                     dns={"hosts": {"up.test": ["127.0.0.1"]}})
    d = env.sluiced(cfg)
    shim = Shim(env, ["-u", d.session_socket("s1")], nofile=10)
    held = []
    for i in range(3):
        s = shim.connect()
        resp, _ = do_connect(s, "up.test", echo.port)
        check_eq(resp.status, 200, "CONNECT %d" % i)
        held.append(s)
    waiting = shim.connect()
    waiting.sendall(b"CONNECT up.test:%d HTTP/1.1\r\nHost: up.test\r\n\r\n"
                    % echo.port)
    wait_until(lambda: shim.has("Too many open files"), 5,
               what="an EMFILE log line")
    cpu0 = cpu_seconds(shim.proc.pid)
    time.sleep(2.0)
    used = cpu_seconds(shim.proc.pid) - cpu0
    check(used < 0.5, "sluice-shim used %.2fs of CPU in 2s without fds", used)
    check(len(shim.has("Too many open files")) <= 5, "EMFILE logged %d times "
          "in 2s", len(shim.has("Too many open files")))
    held.pop().close()
    resp, _ = read_head(waiting, timeout=10)
    check_eq(resp.status, 200, "the waiting connection once an fd is free")
    waiting.sendall(b"ping")
    check_eq(recv_exact(waiting, 4), b"ping", "echo")
    for s in held + [waiting]:
        s.close()


@S.case
def slow_consumer_bounded(env):
    total = 64 * 1024 * 1024
    d, up, shim = setup(env)
    pid = shim.proc.pid
    rss0 = vmrss_kib(pid)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    s.settimeout(30)
    s.connect(("127.0.0.1", shim.port))
    resp, _ = do_connect(s, "up.test", up.port)
    check_eq(resp.status, 200, "CONNECT")
    s.sendall(b"GET /big?n=%d HTTP/1.1\r\nHost: up.test\r\n\r\n" % total)
    peak = rss0
    deadline = time.monotonic() + 3.0
    for _ in range(100):
        if time.monotonic() >= deadline:
            break
        time.sleep(0.2)
        peak = max(peak, vmrss_kib(pid))
    log("shim VmRSS %d KiB before, peak %d KiB while the client slept"
        % (rss0, peak))
    check(peak - rss0 < 2048, "sluice-shim grew by %d KiB", peak - rss0)
    r, rest = read_head(s, timeout=30)
    check_eq(r.status, 200, "status")
    h = hashlib.sha256(rest)
    got = len(rest)
    deadline = time.monotonic() + 120
    while got < total:
        check(time.monotonic() < deadline, "body incomplete (%d/%d)", got, total)
        c = s.recv(min(1 << 20, total - got))
        check(c, "EOF after %d of %d bytes", got, total)
        h.update(c)
        got += len(c)
    check_eq(h.hexdigest(), pattern_digest(total), "the 64 MiB body")
    s.close()


@S.case
def sigterm_with_open_relays(env):
    echo = env.server(echo_handler)
    d, up, shim = setup(env, echo)
    s = shim.connect()
    resp, _ = do_connect(s, "up.test", echo.port)
    check_eq(resp.status, 200, "CONNECT")
    t0 = time.monotonic()
    check_eq(shim.stop(timeout=5), EX_OK, "exit after SIGTERM")
    check(time.monotonic() - t0 < 3, "slow to stop")
    check(recv_until_eof(s, timeout=5)[1], "relay not closed on stop")
    s.close()
    check(d.alive(), "sluiced died")


@S.case
def sigint_stops(env):
    shim = Shim(env, ["-u", env.path("x.sock")])
    shim.proc.send_signal(signal.SIGINT)
    check_eq(shim.proc.wait(5), EX_OK, "exit after SIGINT")


@S.case
def vsock_fails_cleanly(env):
    # CID 1 is the local loopback; without vsock_loopback the connect fails
    # or times out (bounded by the kernel's 2 s or the shim's 10 s).  CID 2,
    # the host of a real VM, is never used here.
    try:
        socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM).close()
        have_vsock = True
    except (OSError, AttributeError):
        have_vsock = False
    port = 40000 + os.getpid() % 20000
    shim = Shim(env, ["-v", str(port), "-c", "1"])
    check(shim.has("relaying to vsock 1:%d" % port), "start line: %s",
          shim.stderr())
    s = shim.connect()
    s.sendall(b"GET http://up.test/ HTTP/1.1\r\nHost: up.test\r\n\r\n")
    t0 = time.monotonic()
    closed = is_closed(s, timeout=15)
    s.close()
    if not closed:
        # something answered on vsock loopback without closing: the relay
        # was made, which is fine, but cannot be checked further here
        raise Skip("vsock loopback port %d answered" % port)
    log("vsock connect ended after %.1fs" % (time.monotonic() - t0))
    wait_until(lambda: shim.has("connect vsock 1:%d: " % port), 5,
               what="a vsock log line (have_vsock=%s)" % have_vsock)
    check(shim.alive(), "sluice-shim died")
    check_eq(shim.stop(), EX_OK, "exit after SIGTERM")


if __name__ == "__main__":
    S.main()
