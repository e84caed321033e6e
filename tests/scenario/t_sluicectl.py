#!/usr/bin/env python3
"""sluicectl: the log commands on real files (verify finds a removed, an
edited and a reordered record and names the line; query filters; tail -n
and tail -f across a rotation), usage errors and exit codes, the HTTP and
TLS client against a stand-in API server (error messages, request bodies,
bearer token, certificate checks), and, once sluiced serves the control
API, every command against the real daemon."""

import hashlib
import json
import os
import select
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, check, check_eq, BUILDDIR, SRCDIR,  # noqa: E402
                     ZERO_HASH, Fail, do_connect, check_refusal,
                     free_port, make_cert, _read_request, wait_until,
                     read_log, read_response)

S = Suite("t_sluicectl")

EX_OK, EX_REFUSED, EX_USAGE, EX_UNREACHABLE, EX_SERVER = 0, 1, 2, 3, 4


def ctl_path():
    p = os.path.join(BUILDDIR, "proxy", "sluicectl", "sluicectl")
    if not os.access(p, os.X_OK):
        raise Fail("sluicectl not built at %s" % p)
    return p


def ctl(*args, env=None, timeout=30):
    e = dict(os.environ)
    for k in ("SLUICE_CONTROL_SOCKET", "SLUICE_TOKEN"):
        e.pop(k, None)
    e.update(env or {})
    try:
        r = subprocess.run([ctl_path()] + list(args), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                           env=e, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Fail("sluicectl %s did not finish" % " ".join(args))
    r.out = r.stdout.decode("utf-8", "replace")
    r.err = r.stderr.decode("utf-8", "replace")
    return r


def expect(r, code, what):
    check(r.returncode == code, "%s: exit %d, want %d\nstdout: %s\nstderr: %s",
          what, r.returncode, code, r.out[-600:], r.err[-600:])
    return r


# ---------------------------------------------------------------------------
# Logs written by the chain rule of proxy/lib/clog.h

def chain_lines(recs, prev=ZERO_HASH, seq0=1):
    out = []
    for i, r in enumerate(recs):
        d = {"ts": r["ts"], "seq": seq0 + i, "event": r["event"]}
        d.update({k: v for k, v in r.items() if k not in ("ts", "event")})
        d["prev"] = prev
        body = json.dumps(d, separators=(",", ":"))[:-1]
        h = hashlib.sha256(body.encode()).hexdigest()
        out.append(body + ',"hash":"%s"}\n' % h)
        prev = h
    return out, prev


def rec(ts, event="decision", **kw):
    r = {"ts": ts, "event": event}
    r.update(kw)
    return r


SAMPLE = [
    rec("2024-05-01T09:59:59.999Z", session="s1", tenant="acme",
        method="CONNECT", host="pypi.org", port=443, decision="allow",
        reason=None),
    rec("2024-05-01T10:00:00.000Z", session="s2", tenant="beta",
        method="GET", host="evil.test", port=80, decision="deny",
        reason="admin_deny"),
    rec("2024-05-01T23:59:59.000Z", "close", session="s1", tenant="acme",
        bytes_up=10, bytes_down=20, duration_ms=3, reason="eof"),
    rec("2024-05-02T00:00:00.000Z", session="s1", tenant="acme",
        method="CONNECT", host="Files.Example", port=443, decision="deny",
        reason="above_ceiling"),
    rec("2024-05-03T08:00:00.000Z", session="s3", tenant="acme",
        method="CONNECT", host="x\u202e\u200b\u0007.test", port=443,
        decision="deny", reason="network_off"),
    rec("2024-05-03T09:00:00.000Z", "admin", action="ceiling_set",
        who="uid:0", decision=None, reason=None),
]


def write_log(env, recs=SAMPLE, name="conn.jsonl"):
    lines, last = chain_lines(recs)
    path = env.path(name)
    with open(path, "w") as f:
        f.writelines(lines)
    return path, lines, last


# ---------------------------------------------------------------------------
# log verify

@S.case
def verify_intact_and_removed(env):
    path, lines, _ = write_log(env)
    r = expect(ctl("log", "verify", "--file", path), EX_OK, "verify intact")
    check("%d record" % len(lines) in r.out, "count missing: %r", r.out)
    r = expect(ctl("--json", "--log", path, "log", "verify"), EX_OK, "json")
    doc = json.loads(r.out)
    check_eq((doc["ok"], doc["records"]), (True, len(lines)), "json verify")
    # remove the third record
    with open(path, "w") as f:
        f.writelines(lines[:2] + lines[3:])
    r = expect(ctl("log", "verify", "--file", path), EX_REFUSED, "removed")
    check("line 3" in r.out and "removed" in r.out,
          "verify does not name line 3 as removed: %r", r.out)
    r = expect(ctl("--json", "log", "verify", "--file", path), EX_REFUSED,
               "removed json")
    doc = json.loads(r.out)
    check_eq((doc["ok"], doc["line"]), (False, 3), "json bad line")


@S.case
def verify_edited_and_reordered(env):
    path, lines, _ = write_log(env)
    edited = list(lines)
    edited[3] = edited[3].replace('"port":443', '"port":444')
    check(edited[3] != lines[3], "edit did not apply")
    with open(path, "w") as f:
        f.writelines(edited)
    r = expect(ctl("log", "verify", "--file", path), EX_REFUSED, "edited")
    check("line 4" in r.out and "hash" in r.out,
          "verify does not name line 4 as changed: %r", r.out)
    swapped = [lines[0], lines[2], lines[1]] + lines[3:]
    with open(path, "w") as f:
        f.writelines(swapped)
    r = expect(ctl("log", "verify", "--file", path), EX_REFUSED, "reordered")
    check("line 2" in r.out, "verify does not name line 2: %r", r.out)
    # a torn last line (a crash mid-write) is reported, not a failure
    with open(path, "w") as f:
        f.writelines(lines)
        f.write('{"ts":"2024')
    r = expect(ctl("log", "verify", "--file", path), EX_OK, "torn")
    check("line %d" % (len(lines) + 1) in r.out and "skipped" in r.out,
          "torn line: %r", r.out)
    # so is a torn fragment the next record continues the chain across
    with open(path, "w") as f:
        f.writelines(lines[:2] + ['{"ts":"2024-05-01T1\n'] + lines[2:])
    r = expect(ctl("log", "verify", "--file", path), EX_OK, "fragment")
    check("line 3" in r.out and "1 torn fragment(s)" in r.out,
          "fragment: %r", r.out)
    r = expect(ctl("--json", "log", "verify", "--file", path), EX_OK,
               "fragment --json")
    doc = json.loads(r.out)
    check_eq((doc["ok"], doc["records"], doc["fragments"],
              doc["notes"][0]["line"]), (True, len(lines), 1, 3),
             "fragment --json")
    # but a fragment where a record is missing is not a torn write
    with open(path, "w") as f:
        f.writelines(lines[:2] + ['{"ts":"2024-05-01T1\n'] + lines[3:])
    r = expect(ctl("log", "verify", "--file", path), EX_REFUSED,
               "fragment for a record")
    check("line 3: not a record" in r.out, "fragment for a record: %r",
          r.out)
    expect(ctl("log", "verify", "--file", env.path("missing")), EX_REFUSED,
           "missing file")


@S.case
def verify_prev(env):
    path, lines, last = write_log(env)
    expect(ctl("log", "verify", "--file", path, "--prev", ZERO_HASH), EX_OK,
           "zero prev")
    r = expect(ctl("log", "verify", "--file", path, "--prev", "1" * 64),
               EX_REFUSED, "wrong prev")
    check("line 1" in r.out, "wrong prev names line 1: %r", r.out)
    expect(ctl("log", "verify", "--file", path, "--prev", "xyz"), EX_USAGE,
           "bad prev")
    # a rotated file continues from the last hash of the one before
    more, _ = chain_lines([rec("2024-06-01T00:00:00.000Z", session="s1")],
                          prev=last, seq0=len(lines) + 1)
    p2 = env.path("conn2.jsonl")
    with open(p2, "w") as f:
        f.writelines(more)
    expect(ctl("log", "verify", "--file", p2, "--prev", last), EX_OK,
           "rotated with prev")
    expect(ctl("log", "verify", "--file", p2, "--prev", ZERO_HASH),
           EX_REFUSED, "rotated with zero prev")


# ---------------------------------------------------------------------------
# log query

def query(path, *filters):
    r = expect(ctl("--json", "log", "query", "--file", path, *filters),
               EX_OK, "query %s" % (filters,))
    return r.out.splitlines(True)


@S.case
def query_filters(env):
    path, lines, _ = write_log(env)
    check_eq(query(path), lines, "no filter: every line byte for byte")
    check_eq(query(path, "--session", "s1"), [lines[0], lines[2], lines[3]],
             "--session s1")
    check_eq(query(path, "--tenant", "beta"), [lines[1]], "--tenant")
    check_eq(query(path, "--decision", "deny", "--tenant", "acme"),
             [lines[3], lines[4]], "deny and acme")
    check_eq(query(path, "--reason", "admin_deny"), [lines[1]], "--reason")
    check_eq(query(path, "--host", "files.example"), [lines[3]],
             "--host ignores case")
    check_eq(query(path, "--event", "close"), [lines[2]], "--event")
    check_eq(query(path, "--event", "nothing"), [], "no match")
    # time prefixes: --until a day includes the whole day
    check_eq(query(path, "--since", "2024-05-01T10", "--until", "2024-05-01"),
             [lines[1], lines[2]], "one day from 10:00")
    check_eq(query(path, "--since", "2024-05-02"), lines[3:], "--since day")
    check_eq(query(path, "--until", "2024-05-01T09:59:59.999Z"), [lines[0]],
             "--until exact")
    check_eq(query(path, "--since", "2024-05-03T08:00:00.000Z",
                   "--until", "2024-05-03T08"), [lines[4]], "one hour")
    for bad in ("yesterday", "2024/05/01", "2024-05-01 10:00"):
        expect(ctl("log", "query", "--file", path, "--since", bad), EX_USAGE,
               "bad --since %r" % bad)
    # text mode: a header, one row per record, nothing unsanitised
    r = expect(ctl("log", "query", "--file", path, "--session", "s3"), EX_OK,
               "text query")
    rows = r.out.splitlines()
    check_eq(len(rows), 2, "header + one row: %r" % rows)
    check(rows[0].split()[:3] == ["TIME", "SEQ", "EVENT"], "header %r", rows[0])
    check("network_off" in rows[1] and "s3" in rows[1], "row %r", rows[1])
    for ch in ("\u202e", "\u200b", "\x07"):
        check(ch not in r.out, "unsanitised %r in text output", ch)
    # a line that is not a record is reported and skipped
    with open(path, "a") as f:
        f.write("not json\n")
    r = expect(ctl("--json", "log", "query", "--file", path), EX_OK,
               "query past junk")
    check_eq(r.out.splitlines(True), lines, "junk skipped")
    check("line %d" % (len(lines) + 1) in r.err, "junk reported: %r", r.err)
    expect(ctl("log", "query", "--file", env.path("nope")), EX_REFUSED,
           "missing log")


# ---------------------------------------------------------------------------
# log tail

@S.case
def tail_lines(env):
    many = [rec("2024-05-01T10:%02d:00.000Z" % i, session="s%d" % i,
                decision="allow") for i in range(25)]
    path, lines, _ = write_log(env, many)
    r = expect(ctl("--json", "log", "tail", "-n", "3", "--file", path), EX_OK,
               "tail -n 3")
    check_eq(r.out.splitlines(True), lines[-3:], "last 3")
    r = expect(ctl("--json", "log", "tail", "--file", path), EX_OK, "tail")
    check_eq(r.out.splitlines(True), lines[-10:], "default 10")
    r = expect(ctl("--json", "log", "tail", "-n", "100", "--file", path),
               EX_OK, "tail -n 100")
    check_eq(r.out.splitlines(True), lines, "more than there are")
    r = expect(ctl("--json", "log", "tail", "-n", "0", "--file", path), EX_OK,
               "tail -n 0")
    check_eq(r.out, "", "-n 0")
    # a record being written (no newline yet) is not shown
    with open(path, "a") as f:
        f.write('{"ts":"2024-05-01T11:00:00.000Z","seq":26')
    r = expect(ctl("--json", "log", "tail", "-n", "2", "--file", path), EX_OK,
               "torn tail")
    check_eq(r.out.splitlines(True), lines[-2:], "torn line hidden")
    r = expect(ctl("log", "tail", "-n", "2", "--file", path), EX_OK, "text")
    check_eq(len(r.out.splitlines()), 3, "header + 2 rows")
    expect(ctl("log", "tail", "-n", "-1", "--file", path), EX_USAGE, "-n -1")
    expect(ctl("log", "tail", "-n", "x", "--file", path), EX_USAGE, "-n x")


class LineReader:
    """Lines from a child's stdout, read by a thread (bounded waits)."""

    def __init__(self, f):
        self.lines = []
        self.lock = threading.Lock()
        self.t = threading.Thread(target=self._run, args=(f,), daemon=True)
        self.t.start()

    def _run(self, f):
        for _ in range(100000):
            ln = f.readline()
            if not ln:
                return
            with self.lock:
                self.lines.append(ln.decode())

    def wait(self, n, timeout=10.0):
        def enough():
            with self.lock:
                return list(self.lines) if len(self.lines) >= n else None
        return wait_until(enough, timeout, what="%d lines from tail -f" % n)


@S.case
def tail_follow_rotation(env):
    first = [rec("2024-05-01T10:00:0%d.000Z" % i, session="a%d" % i)
             for i in range(3)]
    lines, last = chain_lines(first)
    path = env.path("conn.jsonl")
    with open(path, "w") as f:
        f.writelines(lines)
    p = subprocess.Popen([ctl_path(), "--json", "log", "tail", "-f", "-n",
                          "1", "--file", path], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        rd = LineReader(p.stdout)
        check_eq(rd.wait(1), lines[-1:], "initial tail")
        more, last = chain_lines([rec("2024-05-01T10:01:00.000Z",
                                      session="b1")], prev=last, seq0=4)
        # written in two pieces: the record shows up whole, once
        with open(path, "a") as f:
            f.write(more[0][:20])
            f.flush()
            time.sleep(0.5)
            f.write(more[0][20:])
        check_eq(rd.wait(2), lines[-1:] + more, "appended record")
        # rotation: the path now names a new file
        os.rename(path, path + ".1")
        rot, _ = chain_lines([rec("2024-05-01T10:02:00.000Z", session="c1"),
                              rec("2024-05-01T10:02:01.000Z", session="c2")],
                             prev=last, seq0=5)
        with open(path, "w") as f:
            f.writelines(rot)
        check_eq(rd.wait(4), lines[-1:] + more + rot, "after rotation")
        check(p.poll() is None, "tail -f exited early")
    finally:
        if p.poll() is None:
            os.kill(p.pid, signal.SIGTERM)
        try:
            rc = p.wait(5)
        except subprocess.TimeoutExpired:
            os.kill(p.pid, signal.SIGKILL)
            p.wait(5)
            raise Fail("tail -f ignored SIGTERM")
    check_eq(rc, 0, "tail -f exit after SIGTERM")


# ---------------------------------------------------------------------------
# usage and reachability

@S.case
def usage_errors(env):
    sock = env.path("none.sock")
    r = expect(ctl(), EX_USAGE, "no command")
    check("usage" in r.err, "usage text on stderr")
    r = expect(ctl("--help"), EX_OK, "--help")
    check("session create" in r.out, "help lists commands")
    r = expect(ctl("--version"), EX_OK, "--version")
    check(r.out.startswith("sluicectl "), "version %r", r.out)
    bad = [
        ("frobnicate",),
        ("session",),
        ("session", "show"),
        ("session", "show", "bad/id"),
        ("session", "show", "a" * 65),
        ("session", "create", "c1", "--tenant", "t", "--user", "u"),
        ("session", "create", "c1", "--tenant", "t", "--user", "u",
         "--tier", "everything"),
        ("session", "create", "c1", "--tenant", "t", "--user", "u",
         "--tier", "public", "--source", "127.0.0.9", "--vsock-cid", "3"),
        ("session", "create", "c1", "--tenant", "t", "--user", "u",
         "--tier", "public", "--vsock-cid", "-3"),
        ("session", "set-tier", "c1"),
        ("session", "list", "--tenant", "x"),
        ("ceiling", "set"),
        ("ceiling", "set", "max"),
        ("ceiling", "clear"),
        ("ceiling", "get", "--close-exceeding"),
        ("grant", "add", "c1", "pypi.org"),
        ("grant", "add", "c1", "pypi.org:0"),
        ("grant", "add", "c1", "pypi.org:99999"),
        ("grant", "add", "c1", ":443"),
        ("grant", "remove", "c1", "a b:443"),
        ("grant", "list", "c1", "pypi.org:443"),
        ("log", "tail", "--session", "x"),
        ("log", "verify", "--since", "2024"),
        ("log", "frob"),
        ("--tenant", "x", "health"),
        ("--url", "http://127.0.0.1:1", "health"),
        ("--url", "https://127.0.0.1:1", "--socket", sock, "health"),
        ("--token-file", env.path("t"), "health"),
        ("--url", "https://127.0.0.1:1", "--token-file", env.path("none"),
         "health"),
        ("--no-such-option", "health"),
        ("console", "extra"),
        ("console", "--port", "70000"),
        ("console", "--port", "-1"),
        ("console", "--port", "x"),
        ("console", "--tenant", "x"),
        ("--json", "console"),
        ("--url", "https://127.0.0.1:1", "console"),
        ("health", "--port", "1"),
        ("health", "--exec-socket", "/x"),
    ]
    # a console port that is taken: said, and exit 2
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    try:
        r = expect(ctl("--socket", sock, "console", "--port",
                       str(taken.getsockname()[1]), timeout=10), EX_USAGE,
                   "console on a port in use")
        check("cannot listen" in r.err, "message: %r", r.err)
    finally:
        taken.close()
    for args in bad:
        expect(ctl("--socket", sock, *args) if "--url" not in args and
               "--token-file" not in args else ctl(*args), EX_USAGE,
               " ".join(args))


@S.case
def unreachable(env):
    r = expect(ctl("--socket", env.path("none.sock"), "health"),
               EX_UNREACHABLE, "missing socket")
    check("cannot reach" in r.err, "message: %r", r.err)
    expect(ctl("health", env={"SLUICE_CONTROL_SOCKET": env.path("x.sock")}),
           EX_UNREACHABLE, "socket from the environment")
    port = free_port()
    expect(ctl("--url", "https://127.0.0.1:%d" % port, "health"),
           EX_UNREACHABLE, "refused TCP port")


# ---------------------------------------------------------------------------
# A stand-in for the API: records requests, answers from a table

class FakeAPI:
    def __init__(self, env, routes, tls=None):
        self.routes = routes          # (method, path) -> bytes or callable
        self.requests = []
        self.lock = threading.Lock()
        self.stop_ev = threading.Event()
        if tls is None:
            self.path = env.path("api.sock")
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.bind(self.path)
        else:
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.sock.bind(("127.0.0.1", 0))
            self.port = self.sock.getsockname()[1]
        self.tls = tls
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()
        env.closers.append(self.close)

    def _run(self):
        for _ in range(10 ** 6):
            if self.stop_ev.is_set():
                return
            try:
                c, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            # a thread each: an event stream stays open while other
            # requests come and go
            threading.Thread(target=self._conn, args=(c,),
                             daemon=True).start()

    def _conn(self, c):
        c.settimeout(5)
        try:
            if self.tls is not None:
                c = self.tls.wrap_socket(c, server_side=True)
            self._serve(c)
        except (OSError, ssl.SSLError):
            pass
        finally:
            c.close()

    def _serve(self, c):
        req = _read_request(c, bytearray(), timeout=5)
        if req is None:
            return
        method, target, _v, headers, body = req
        with self.lock:
            self.requests.append({"method": method, "path": target,
                                  "headers": dict((k.lower(), v)
                                                  for k, v in headers),
                                  "body": body})
        ans = self.routes.get((method, target))
        if isinstance(ans, EventFeed):
            ans.serve(c, self.requests[-1]["headers"], self.stop_ev)
            return
        if callable(ans):
            ans = ans(body)
        if ans is None:
            ans = reply(404, {"error": {"code": "not_found",
                                        "message": "no route %s" % target}})
        c.sendall(ans)

    def last(self):
        with self.lock:
            return self.requests[-1]

    def close(self):
        self.stop_ev.set()
        try:
            self.sock.close()
        except OSError:
            pass
        self.t.join(2)


class EventFeed:
    """GET /v1/events: Server-Sent Events in chunked framing, each event
    cut across two chunks (and some with CRLF line ends) so that the
    client must reassemble lines.  A connection gets what is pushed after
    it connects, or the replay after its Last-Event-ID.  drop() ends the
    open connections."""

    def __init__(self):
        self.cond = threading.Condition()
        self.events = []              # (id, type, json text)
        self.gen = 0
        self.conns = []               # headers of each connection

    def push(self, typ, doc):
        with self.cond:
            self.events.append((len(self.events) + 1, typ, json.dumps(doc)))
            self.cond.notify_all()
            return len(self.events)

    def drop(self):
        with self.cond:
            self.gen += 1
            self.cond.notify_all()

    def connections(self):
        with self.cond:
            return list(self.conns)

    def serve(self, c, headers, stop_ev):
        with self.cond:
            self.conns.append(headers)
            gen = self.gen
            last = headers.get("last-event-id")
            sent = int(last) if last is not None else len(self.events)
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n")
        for _ in range(100000):
            with self.cond:
                if gen != self.gen or stop_ev.is_set():
                    return
                todo = self.events[sent:]
                if not todo:
                    self.cond.wait(0.3)
                    todo = self.events[sent:]
                if gen != self.gen:
                    return
                sent += len(todo)
            out = b": ping\n\n" if not todo else b""
            for eid, typ, data in todo:
                nl = "\r\n" if eid % 2 else "\n"
                out += ("id: %d%sevent: %s%sdata: %s%s%s" % (
                    eid, nl, typ, nl, data, nl, nl)).encode()
            cut = len(out) // 2 + 1
            for piece in (out[:cut], out[cut:]):
                if piece:
                    c.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))


def reply(status, doc, reason="X"):
    body = json.dumps(doc).encode()
    return (b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n"
            % (status, reason.encode(), len(body)) + body)


def chunked(status, doc):
    body = json.dumps(doc).encode()
    a, b = body[:7], body[7:]
    return (b"HTTP/1.1 %d OK\r\nTransfer-Encoding: chunked\r\n\r\n" % status
            + b"%x\r\n%s\r\n%x;x=y\r\n%s\r\n0\r\n\r\n" % (len(a), a, len(b), b))


def session_doc(sid, **kw):
    d = {"id": sid, "tenant": "acme", "user": "alice", "tier": "public",
         "ceiling": "registries", "effective_tier": "registries",
         "transport": "unix", "socket": "/run/sluice/sessions/%s/proxy.sock"
         % sid, "source": None, "vsock_cid": None, "from_config": False,
         "connections": 2, "grants": [{"host": "files.test", "port": 443}],
         "counters": {"allowed": 5, "denied": 1, "bytes_up": 10,
                      "bytes_down": 20}}
    d.update(kw)
    return d


@S.case
def fake_api_commands(env):
    health = {"status": "ok", "version": "0.1.0", "uptime_s": 12,
              "listeners": 2, "sessions": 1, "connections": 0, "tunnels": 0,
              "log": {"path": "/x", "healthy": True, "records": 3,
                      "failures": 0},
              "firewall": {"status": "off"}, "ceiling": "off"}
    ceil = {"tier": "registries", "tenants": {"acme": "off"}}
    routes = {
        ("GET", "/v1/health"): chunked(200, health),
        ("GET", "/v1/ceiling"): reply(200, ceil),
        ("PUT", "/v1/ceiling"): reply(200, dict(ceil, closed=2)),
        ("GET", "/v1/sessions"): reply(200, {"sessions": [
            session_doc("chat-1"), session_doc("s1", transport="tcp",
                                               socket=None,
                                               source="127.0.0.5",
                                               from_config=True)]}),
        ("GET", "/v1/sessions/chat-1"): reply(200, session_doc("chat-1")),
        ("POST", "/v1/sessions"): reply(409, {"error": {
            "code": "conflict", "message": "session chat-1 exists"}},
            "Conflict"),
        ("PATCH", "/v1/sessions/chat-1"): reply(200, session_doc(
            "chat-1", tier="off")),
        ("DELETE", "/v1/sessions/chat-1"): reply(200, {"deleted": "chat-1"}),
        ("POST", "/v1/sessions/chat-1/grants"): reply(201, {
            "session": "chat-1", "host": "pypi.org", "port": 443}),
        ("DELETE", "/v1/sessions/chat-1/grants/%3A%3A1:8443"): reply(200, {
            "session": "chat-1", "host": "::1", "port": 8443,
            "removed": True}),
        ("GET", "/v1/sessions/boom"): reply(500, {"error": {
            "code": "internal", "message": "state file: disk full"}}),
        ("GET", "/v1/sessions/junk"): b"HTTP/1.1 200 OK\r\n"
        b"Content-Length: 5\r\n\r\nhello",
        ("GET", "/v1/sessions/cut"): b"HTTP/1.1 200 OK\r\n"
        b"Content-Length: 50\r\n\r\n{\"id\":",
        # answers read as jsonstrict.h says: one object and nothing else
        ("GET", "/v1/sessions/twice"): b"HTTP/1.1 200 OK\r\n"
        b"Content-Length: 27\r\n\r\n{\"id\":\"twice\",\"id\":\"other\"}",
        ("GET", "/v1/sessions/nul"): b"HTTP/1.1 200 OK\r\n"
        b"Content-Length: 17\r\n\r\n{\"id\":\"nul\"}\0junk",
    }
    api = FakeAPI(env, routes)
    s = ["--socket", api.path]

    r = expect(ctl(*s, "health"), EX_OK, "health")
    check("status" in r.out and "log.healthy" in r.out, "health %r", r.out)
    r = expect(ctl(*s, "--json", "health"), EX_OK, "health --json")
    check_eq(json.loads(r.out), health, "chunked body as is")
    check_eq(api.last()["method"], "GET", "health method")

    r = expect(ctl(*s, "ceiling"), EX_OK, "ceiling")
    check("global" in r.out and "registries" in r.out and "acme" in r.out,
          "ceiling table %r", r.out)
    r = expect(ctl(*s, "ceiling", "set", "off", "--close-exceeding"), EX_OK,
               "ceiling set")
    check_eq(json.loads(api.last()["body"]),
             {"tier": "off", "close_exceeding": True}, "PUT body")
    check("closed 2" in r.out, "closed count shown: %r", r.out)
    expect(ctl(*s, "ceiling", "set", "public", "--tenant", "acme"), EX_OK,
           "tenant ceiling")
    check_eq(json.loads(api.last()["body"]), {"tenants": {"acme": "public"}},
             "tenant PUT body")
    expect(ctl(*s, "ceiling", "clear", "--tenant", "acme"), EX_OK, "clear")
    check_eq(json.loads(api.last()["body"]), {"tenants": {"acme": None}},
             "clear PUT body")

    r = expect(ctl(*s, "session", "list"), EX_OK, "list")
    rows = r.out.splitlines()
    check_eq(len(rows), 3, "header + 2 sessions")
    check(rows[0].split()[0] == "ID" and rows[1].split()[0] == "chat-1",
          "list table %r", rows)
    check("127.0.0.5" in rows[2] and "config" in rows[2], "row %r", rows[2])
    # aligned: every row's second column starts at the same offset
    starts = {len(x) - len(x[len(x.split()[0]):].lstrip()) for x in rows}
    check_eq(len(starts), 1, "aligned columns %r" % rows)

    r = expect(ctl(*s, "session", "show", "chat-1"), EX_OK, "show")
    check("files.test:443" in r.out and "counters.denied" in r.out,
          "show %r", r.out)
    r = expect(ctl("session", "create", "chat-1", "--tenant", "acme",
                   "--user", "alice", "--tier", "public", "--socket",
                   "/tmp/x.sock", env={"SLUICE_CONTROL_SOCKET": api.path}),
               EX_REFUSED, "create conflict")
    check_eq(r.err.strip(), "sluicectl: 409 conflict: session chat-1 exists",
             "error message")
    check_eq(json.loads(api.last()["body"]),
             {"id": "chat-1", "tenant": "acme", "user": "alice",
              "tier": "public", "socket": "/tmp/x.sock"}, "POST body")
    expect(ctl(*s, "session", "create", "v1", "--tenant", "acme", "--user",
               "bob", "--tier", "off", "--vsock-cid", "7"), EX_REFUSED,
           "create vsock")
    check_eq(json.loads(api.last()["body"]).get("vsock_cid"), 7, "vsock_cid")
    expect(ctl(*s, "session", "set-tier", "chat-1", "off"), EX_OK, "set-tier")
    check_eq((api.last()["method"], json.loads(api.last()["body"])),
             ("PATCH", {"tier": "off"}), "PATCH")
    r = expect(ctl(*s, "session", "delete", "chat-1"), EX_OK, "delete")
    check("chat-1" in r.out, "delete output %r", r.out)

    expect(ctl(*s, "grant", "add", "chat-1", "pypi.org:443"), EX_OK, "grant")
    check_eq(json.loads(api.last()["body"]), {"host": "pypi.org", "port": 443},
             "grant body")
    expect(ctl(*s, "grant", "remove", "chat-1", "[::1]:8443"), EX_OK,
           "grant remove v6")
    r = expect(ctl(*s, "--json", "grant", "list", "chat-1"), EX_OK, "list")
    check_eq(json.loads(r.out)["grants"], [{"host": "files.test",
                                             "port": 443}], "grant list")
    r = expect(ctl(*s, "grant", "list", "chat-1"), EX_OK, "grant list text")
    check(r.out.split() == ["HOST", "PORT", "files.test", "443"],
          "grant table %r", r.out)

    r = expect(ctl(*s, "session", "show", "boom"), EX_SERVER, "500")
    check("500 internal: state file: disk full" in r.err, "500 msg %r", r.err)
    expect(ctl(*s, "session", "show", "nobody"), EX_REFUSED, "404")
    expect(ctl(*s, "session", "show", "junk"), EX_SERVER, "not JSON")
    expect(ctl(*s, "session", "show", "cut"), EX_SERVER, "short body")
    r = expect(ctl(*s, "session", "show", "twice"), EX_SERVER, "a key twice")
    check("duplicate object key" in r.err, "a key twice: %r", r.err)
    r = expect(ctl(*s, "session", "show", "nul"), EX_SERVER, "a NUL byte")
    check("NUL byte" in r.err, "a NUL byte: %r", r.err)
    h = api.last()["headers"]
    check("authorization" not in h, "no token on the socket")


@S.case
def fake_api_tls(env):
    crt, key = make_cert(env.dir, ["localhost"])
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(crt, key)
    routes = {("GET", "/v1/ceiling"): reply(200, {"tier": "off",
                                                   "tenants": {}})}
    api = FakeAPI(env, routes, tls=sctx)
    url = "https://localhost:%d" % api.port
    tok = env.path("token")
    with open(tok, "w") as f:
        f.write("s3cret-token\n")
    expect(ctl("--url", url, "--cacert", crt, "--token-file", tok, "ceiling"),
           EX_OK, "TLS with token file")
    check_eq(api.last()["headers"].get("authorization"), "Bearer s3cret-token",
             "bearer from file")
    check_eq(api.last()["headers"].get("host"), "localhost:%d" % api.port,
             "Host header")
    expect(ctl("--url", url, "--cacert", crt, "ceiling",
               env={"SLUICE_TOKEN": "env-token"}), EX_OK, "token from env")
    check_eq(api.last()["headers"].get("authorization"), "Bearer env-token",
             "bearer from env")
    n = len(api.requests)
    r = expect(ctl("--url", url, "ceiling"), EX_UNREACHABLE,
               "unknown CA")
    check("certificate" in r.err, "says why: %r", r.err)
    # the certificate names localhost, not 127.0.0.1
    expect(ctl("--url", "https://127.0.0.1:%d" % api.port, "--cacert", crt,
               "ceiling"), EX_UNREACHABLE, "name mismatch")
    check_eq(len(api.requests), n, "no request sent without a verified server")
    other = os.path.join(env.dir, "o")
    os.mkdir(other)
    ocrt, okey = make_cert(other, ["localhost"])
    expect(ctl("--url", url, "--cacert", ocrt, "ceiling"), EX_UNREACHABLE,
           "wrong CA")
    expect(ctl("--url", url, "--cacert", env.path("nope.pem"), "ceiling"),
           EX_USAGE, "unreadable CA file")


# ---------------------------------------------------------------------------
# prompts: list, answer and the watch approver against a stand-in API

def prompt_doc(pid, **kw):
    d = {"id": pid, "session": "chat-1", "tenant": "acme", "user": "alice",
         "host": "files.test", "port": 443, "method": "CONNECT",
         "path": None, "tier": "registries", "ceiling": "public",
         "created": "2024-05-01T10:00:00Z",
         "expires": "2024-05-01T10:01:30Z", "expires_in_s": 85,
         "waiting": 1, "state": "pending"}
    d.update(kw)
    return d


class PromptAPI:
    """The prompt routes of the API over a table of pending prompts."""

    def __init__(self, env, pending, tls=None):
        self.pending = dict((p["id"], p) for p in pending)
        self.lock = threading.Lock()
        self.feed = EventFeed()
        routes = PromptRoutes(self)
        self.api = FakeAPI(env, routes, tls=tls)
        self.path = getattr(self.api, "path", None)

    def raise_prompt(self, doc):
        with self.lock:
            self.pending[doc["id"]] = doc
        return self.feed.push("prompt", doc)

    def resolve(self, pid, answer="deny", by="uid:0"):
        with self.lock:
            self.pending.pop(pid, None)
        return self.feed.push("prompt_resolved", {
            "id": pid, "session": "chat-1", "host": "files.test",
            "port": 443, "answer": answer, "by": by, "latency_ms": 5})

    def answers(self):
        return [(r["path"].rsplit("/", 1)[1], json.loads(r["body"]))
                for r in self.api.requests if r["method"] == "POST"]


class PromptRoutes(dict):
    def __init__(self, pa):
        super().__init__()
        self.pa = pa

    def get(self, key, default=None):
        method, path = key
        pa = self.pa
        if key == ("GET", "/v1/events"):
            return pa.feed
        if key == ("GET", "/v1/prompts"):
            with pa.lock:
                return reply(200, {"prompts": list(pa.pending.values())})
        if method == "POST" and path.startswith("/v1/prompts/"):
            pid = path[len("/v1/prompts/"):]

            def answer(body):
                dec = json.loads(body)["decision"]
                with pa.lock:
                    p = pa.pending.pop(pid, None)
                if p is None:
                    if pid.startswith("p-gone"):
                        return reply(404, {"error": {
                            "code": "not_found",
                            "message": "no prompt %s" % pid}})
                    return reply(409, {"error": {
                        "code": "conflict",
                        "message": "prompt %s already answered" % pid}})
                return reply(200, dict(p, state=dec))
            return answer
        return default


@S.case
def prompts_list_answer(env):
    pa = PromptAPI(env, [prompt_doc("p-1a"), prompt_doc(
        "p-2b", host="::1", port=8443, method="GET", path="/x",
        waiting=3, expires_in_s=125)])
    s = ["--socket", pa.path]
    r = expect(ctl(*s, "prompts", "list"), EX_OK, "list")
    rows = [x.split() for x in r.out.splitlines()]
    check_eq(rows[0], ["ID", "SESSION", "METHOD", "HOST:PORT", "WAITING",
                       "EXPIRES", "IN"], "header")
    check_eq(rows[1], ["p-1a", "chat-1", "CONNECT", "files.test:443", "1",
                       "1m25s"], "row 1")
    check_eq(rows[2], ["p-2b", "chat-1", "GET", "[::1]:8443", "3", "2m05s"],
             "row 2 (IPv6 in brackets)")
    r = expect(ctl(*s, "--json", "prompts", "list"), EX_OK, "list --json")
    check_eq([p["id"] for p in json.loads(r.out)["prompts"]],
             ["p-1a", "p-2b"], "json list")
    r = expect(ctl(*s, "prompts", "answer", "p-1a", "allow_chat"), EX_OK,
               "answer")
    check_eq(pa.answers()[-1], ("p-1a", {"decision": "allow_chat"}), "POST")
    check(any(x.split() == ["state", "allow_chat"]
              for x in r.out.splitlines()), "resulting prompt %r", r.out)
    r = expect(ctl(*s, "prompts", "answer", "p-1a", "deny"), EX_REFUSED,
               "answered twice")
    check_eq(r.err.strip(), "sluicectl: 409 conflict: prompt p-1a already "
             "answered", "409 message")
    r = expect(ctl(*s, "prompts", "answer", "p-gone1", "deny"), EX_REFUSED,
               "unknown")
    check("404 not_found" in r.err, "404 message %r", r.err)
    r = expect(ctl(*s, "--json", "prompts", "answer", "p-2b", "allow_once"),
               EX_OK, "answer --json")
    check_eq(json.loads(r.out)["state"], "allow_once", "json answer")
    n = len(pa.api.requests)
    for bad in (("prompts",), ("prompts", "answer", "p-1"),
                ("prompts", "answer", "p-1", "allow"),
                ("prompts", "answer", "p/1", "deny"),
                ("prompts", "answer", "..", "deny"),
                ("prompts", "list", "x"), ("prompts", "list", "--yes-all"),
                ("prompts", "watch", "--yes-all", "--deny-all"),
                ("prompts", "watch", "now")):
        expect(ctl(*s, *bad), EX_USAGE, " ".join(bad))
    check_eq(len(pa.api.requests), n, "no request on usage errors")
    expect(ctl("--socket", env.path("none.sock"), "prompts", "list"),
           EX_UNREACHABLE, "list unreachable")


class Watcher:
    """sluicectl prompts watch driven through pipes."""

    def __init__(self, args):
        e = dict(os.environ)
        e.pop("SLUICE_CONTROL_SOCKET", None)
        self.p = subprocess.Popen([ctl_path()] + list(args),
                                  stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=e)
        self.out = LineReader(self.p.stdout)

    def lines(self):
        with self.out.lock:
            return list(self.out.lines)

    def expect_line(self, text, timeout=10.0):
        def seen():
            return [x for x in self.lines() if text in x]
        return wait_until(seen, timeout, what="watch output %r (have %r)"
                          % (text, self.lines()[-8:]))[0]

    def key(self, k):
        self.p.stdin.write(k.encode() + b"\n")
        self.p.stdin.flush()

    def finish(self, timeout=10):
        try:
            return self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(self.p.pid, signal.SIGKILL)
            self.p.wait(5)
            raise Fail("watch did not exit; output %r" % self.lines())

    def stop(self):
        if self.p.poll() is None:
            os.kill(self.p.pid, signal.SIGKILL)
            self.p.wait(5)


@S.case
def prompts_watch_keys(env):
    pa = PromptAPI(env, [prompt_doc("p-1a")])
    w = Watcher(["--socket", pa.path, "prompts", "watch"])
    env.closers.append(w.stop)
    line = w.expect_line("prompt p-1a:")
    for part in ("session chat-1", "tenant acme", "user alice",
                 "CONNECT files.test:443", "waiting 1", "expires in 1m2"):
        check(part in line, "%r not in %r", part, line)
    w.expect_line("watching for prompts (1 pending)")
    w.expect_line("answer p-1a?")
    wait_until(lambda: len(pa.feed.connections()) == 1, 5, what="stream")
    w.key("o")
    w.expect_line("p-1a: allow_once")
    check_eq(pa.answers(), [("p-1a", {"decision": "allow_once"})], "o")

    pa.raise_prompt(prompt_doc("p-2b", method="GET", path="/simple/x",
                               waiting=2))
    line = w.expect_line("prompt p-2b:")
    check("GET files.test:443 /simple/x waiting 2" in line, "%r", line)
    w.expect_line("answer p-2b?")
    w.key("c")
    w.expect_line("p-2b: allow_chat")
    check_eq(pa.answers()[-1], ("p-2b", {"decision": "allow_chat"}), "c")

    # resolved elsewhere: it goes away and the next one is asked about
    pa.raise_prompt(prompt_doc("p-3c"))
    pa.raise_prompt(prompt_doc("p-4d"))
    w.expect_line("answer p-3c?")
    pa.resolve("p-3c", "deny", "webhook")
    w.expect_line("p-3c: resolved elsewhere: deny by webhook")
    w.expect_line("answer p-4d?")
    w.key("s")
    w.expect_line("p-4d: skipped")
    w.key("d")
    w.expect_line("no prompt to answer")
    check(all(a[0] not in ("p-3c", "p-4d") for a in pa.answers()),
          "no answer for a resolved or skipped prompt: %r", pa.answers())

    # a dropped stream: reconnect with Last-Event-ID, missed events replayed
    last = pa.feed.push("denied", {"session": "chat-1", "host": "x.test",
                                   "port": 443, "method": "CONNECT",
                                   "reason": "above_ceiling"})
    time.sleep(0.5)
    pa.feed.drop()
    pa.raise_prompt(prompt_doc("p-5e", host="pypi.org"))
    wait_until(lambda: len(pa.feed.connections()) == 2, 10,
               what="reconnect")
    check_eq(pa.feed.connections()[1].get("last-event-id"), str(last),
             "Last-Event-ID on reconnect")
    w.expect_line("answer p-5e?")
    w.key("d")
    w.expect_line("p-5e: deny")
    check_eq(pa.answers()[-1], ("p-5e", {"decision": "deny"}), "d")
    # answered elsewhere before our key: the 409 is shown, and it goes
    pa.raise_prompt(prompt_doc("p-6f"))
    w.expect_line("answer p-6f?")
    with pa.lock:
        pa.pending.pop("p-6f")
    w.key("o")
    w.expect_line("p-6f: allow_once refused: 409 conflict")
    w.key("q")
    check_eq(w.finish(), 0, "exit after q")
    prompts = [x for x in w.lines() if x.startswith("prompt ")]
    check_eq(len(prompts), 6, "each prompt shown once: %r" % prompts)


@S.case
def prompts_watch_auto(env):
    pa = PromptAPI(env, [prompt_doc("p-1a"), prompt_doc("p-2b")])
    w = Watcher(["--socket", pa.path, "prompts", "watch", "--yes-all"])
    env.closers.append(w.stop)
    w.p.stdin.close()      # no keys: --yes-all needs none
    w.expect_line("p-2b: allow_once")
    wait_until(lambda: len(pa.feed.connections()) == 1, 5, what="stream")
    pa.raise_prompt(prompt_doc("p-3c"))
    w.expect_line("p-3c: allow_once")
    check_eq(sorted(pa.answers()), [(i, {"decision": "allow_once"}) for i in
                                    ("p-1a", "p-2b", "p-3c")], "all allowed")
    check(w.p.poll() is None, "--yes-all exited at stdin EOF")
    os.kill(w.p.pid, signal.SIGTERM)
    check_eq(w.finish(), 0, "exit after SIGTERM")

    pa.raise_prompt(prompt_doc("p-8b"))
    w = Watcher(["--socket", pa.path, "prompts", "watch", "--deny-all"])
    env.closers.append(w.stop)
    w.p.stdin.close()
    w.expect_line("p-8b: deny")
    check_eq(pa.answers()[-1], ("p-8b", {"decision": "deny"}), "deny-all")
    os.kill(w.p.pid, signal.SIGINT)
    check_eq(w.finish(), 0, "exit after SIGINT")


@S.case
def prompts_watch_unreachable(env):
    r = expect(ctl("--socket", env.path("none.sock"), "prompts", "watch",
                   "--yes-all"), EX_UNREACHABLE, "no sluiced")
    check("cannot reach" in r.err, "message %r", r.err)
    # sluiced goes away for good: bounded retries, then exit 3
    pa = PromptAPI(env, [])
    w = Watcher(["--socket", pa.path, "prompts", "watch"])
    env.closers.append(w.stop)
    wait_until(lambda: len(pa.feed.connections()) == 1, 5, what="stream")
    # the first list must be done, or its cut answer is a server error
    w.expect_line("watching for prompts")
    pa.api.close()
    pa.feed.drop()
    t0 = time.monotonic()
    check_eq(w.finish(timeout=20), EX_UNREACHABLE, "exit when gone")
    check(time.monotonic() - t0 < 15, "gave up in bounded time")
    err = w.p.stderr.read().decode()
    # under load the last attempt can die in the list request instead of
    # the stream: either way it said it retried and why it stopped
    check("reconnecting" in err and ("giving up" in err or
          "cannot reach" in err), "stderr %r", err)
    # the stream refused (a role without events): exit 1 at once
    routes = {("GET", "/v1/events"): reply(403, {"error": {
        "code": "forbidden", "message": "role auditor"}})}
    os.unlink(pa.path)
    api = FakeAPI(env, routes)
    r = expect(ctl("--socket", api.path, "prompts", "watch", "--yes-all"),
               EX_REFUSED, "403 stream")
    check("403 forbidden: role auditor" in r.err, "message %r", r.err)


@S.case
def prompts_watch_tls(env):
    crt, key = make_cert(env.dir, ["localhost"])
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(crt, key)
    pa = PromptAPI(env, [prompt_doc("p-1a")], tls=sctx)
    url = "https://localhost:%d" % pa.api.port
    w = Watcher(["--url", url, "--cacert", crt, "prompts", "watch"])
    env.closers.append(w.stop)
    w.expect_line("answer p-1a?")
    wait_until(lambda: len(pa.feed.connections()) == 1, 5, what="stream")
    pa.raise_prompt(prompt_doc("p-2b"))
    w.expect_line("prompt p-2b:")
    w.key("d")
    w.expect_line("p-1a: deny")
    w.key("o")
    w.expect_line("p-2b: allow_once")
    w.key("q")
    check_eq(w.finish(), 0, "exit")


@S.case
def prompts_watch_tty(env):
    """On a terminal: no echo, no line buffering, one key answers, the
    countdown is redrawn, and the terminal is restored on SIGTERM."""
    import pty
    import termios
    pa = PromptAPI(env, [prompt_doc("p-1a", expires_in_s=30)])
    master, slave = pty.openpty()
    before = termios.tcgetattr(slave)
    e = dict(os.environ)
    e.pop("SLUICE_CONTROL_SOCKET", None)
    p = subprocess.Popen([ctl_path(), "--socket", pa.path, "prompts",
                          "watch"], stdin=slave, stdout=slave,
                         stderr=subprocess.PIPE, env=e)
    env.closers.append(lambda: p.poll() is None and p.kill())
    buf = bytearray()

    def screen_has(text):
        for _ in range(100):
            r, _w, _x = select.select([master], [], [], 0)
            if not r:
                break
            buf.extend(os.read(master, 65536))
        return text.encode() in buf

    try:
        wait_until(lambda: screen_has("answer p-1a"), 10, what="screen")
        attrs = termios.tcgetattr(slave)
        check(not attrs[3] & termios.ICANON and not attrs[3] & termios.ECHO,
              "raw mode while watching")
        # the countdown moves without any event
        wait_until(lambda: screen_has("28s"), 5, what="countdown")
        os.write(master, b"d")     # one key, no Enter
        wait_until(lambda: len(pa.answers()) == 1, 5, what="answer")
        check_eq(pa.answers()[0], ("p-1a", {"decision": "deny"}), "d key")
        check(b"\x1b[2J" in buf, "screen redrawn")
        os.kill(p.pid, signal.SIGTERM)
        check_eq(p.wait(10), 0, "exit after SIGTERM")
        after = termios.tcgetattr(slave)
        check_eq(after[3], before[3], "terminal modes restored")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(5)
        os.close(master)
        os.close(slave)


# ---------------------------------------------------------------------------
# The real sluiced: its own log, and the control API once it is served

@S.case
def real_log(env):
    cfg = env.config(ports=env.ports(), deny_hosts=["bad.test"])
    d = env.sluiced(cfg)
    s = d.connect(env.src(1))
    resp, _ = do_connect(s, "bad.test", 443)
    check_refusal(resp, "admin_deny")
    s.close()
    wait_until(lambda: any(r.get("host") == "bad.test"
                           for r in read_log(d.log_path)), 5,
               what="deny record")
    expect(ctl("log", "verify", "--file", d.log_path), EX_OK, "verify live")
    r = expect(ctl("--json", "log", "query", "--log", d.log_path, "--host",
                   "bad.test", "--decision", "deny"), EX_OK, "query live")
    recs = [json.loads(x) for x in r.out.splitlines()]
    check(len(recs) >= 1 and all(x["reason"] == "admin_deny" for x in recs),
          "query result %r", recs)
    r = expect(ctl("log", "tail", "-n", "1", "--file", d.log_path), EX_OK,
               "tail live")
    check_eq(len(r.out.splitlines()), 2, "header + 1")


def control_socket(d):
    return os.path.join(d.config["runtime_dir"], "control.sock")


def api_daemon(env, **over):
    cfg = env.config(ports=env.ports(), **over)
    d = env.sluiced(cfg)
    sock = control_socket(d)
    wait_until(lambda: os.path.exists(sock), 5, what="control socket")
    return d, ["--socket", sock]


def api_sessions(env):
    # --socket names a path outside runtime_dir: an admin's, under a
    # configured prefix
    d, s = api_daemon(env, listen={"socket_prefixes": [env.dir]})
    r = expect(ctl(*s, "--json", "health"), EX_OK, "health")
    check(json.loads(r.out)["status"] in ("ok", "degraded"), "health %r", r.out)
    expect(ctl(*s, "health"), EX_OK, "health text")
    sock = env.path("chat-1.sock")
    r = expect(ctl("--json", *s, "session", "create", "chat-1", "--tenant",
                   "acme", "--user", "alice", "--tier", "public", "--socket",
                   sock), EX_OK, "create")
    check_eq(json.loads(r.out)["socket"], sock, "socket in the answer")
    check(os.path.exists(sock), "session socket made before the answer")
    r = expect(ctl(*s, "session", "create", "chat-1", "--tenant", "acme",
                   "--user", "alice", "--tier", "public"), EX_REFUSED, "dup")
    check(r.err.startswith("sluicectl: 409 "), "409 message %r", r.err)
    r = expect(ctl(*s, "session", "list"), EX_OK, "list")
    check("chat-1" in r.out and "s1" in r.out, "list %r", r.out)
    expect(ctl(*s, "session", "set-tier", "chat-1", "registries"), EX_OK,
           "set-tier")
    r = expect(ctl(*s, "--json", "session", "show", "chat-1"), EX_OK, "show")
    check_eq(json.loads(r.out)["tier"], "registries", "tier after PATCH")
    expect(ctl(*s, "grant", "add", "chat-1", "pypi.org:443"), EX_OK, "grant")
    r = expect(ctl(*s, "--json", "grant", "list", "chat-1"), EX_OK, "grants")
    check_eq(json.loads(r.out)["grants"], [{"host": "pypi.org", "port": 443}],
             "grant listed")
    expect(ctl(*s, "grant", "remove", "chat-1", "pypi.org:443"), EX_OK,
           "grant remove")
    expect(ctl(*s, "session", "delete", "chat-1"), EX_OK, "delete")
    check(not os.path.exists(sock), "socket removed on delete")
    r = expect(ctl(*s, "session", "show", "chat-1"), EX_REFUSED, "gone")
    check(r.err.startswith("sluicectl: 404 "), "404 message %r", r.err)
    expect(ctl("log", "verify", "--file", d.log_path), EX_OK, "log verifies")
    r = expect(ctl("--json", "log", "query", "--file", d.log_path,
                   "--session", "chat-1"), EX_OK, "admin records")
    check(len(r.out.splitlines()) >= 1, "admin records for chat-1")


def api_ceiling(env):
    d, s = api_daemon(env)
    expect(ctl(*s, "ceiling", "set", "registries", "--tenant", "acme"),
           EX_OK, "tenant ceiling")
    r = expect(ctl(*s, "--json", "ceiling", "get"), EX_OK, "get")
    check_eq(json.loads(r.out)["tenants"].get("acme"), "registries", "tenant")
    r = expect(ctl(*s, "ceiling"), EX_OK, "text")
    check("tenant acme" in r.out, "table %r", r.out)
    expect(ctl(*s, "ceiling", "clear", "--tenant", "acme"), EX_OK, "clear")
    r = expect(ctl(*s, "--json", "ceiling", "set", "off", "--close-exceeding"),
               EX_OK, "off")
    doc = json.loads(r.out)
    check_eq((doc["tier"], doc.get("closed")), ("off", 0), "off, none closed")
    check("acme" not in doc.get("tenants", {}), "tenant cleared")


def api_prompts_watch(env):
    """sluicectl prompts watch as the approver of the real sluiced: a held
    request is shown and let through by one key."""
    up = env.http_upstream()
    cfg = env.config(sessions=[{"id": "c1", "tenant": "acme",
                                "user": "alice", "tier": "registries"}],
                     ceiling="public", registries=["reg.test"],
                     ports=env.ports(up.port),
                     dns={"hosts": {"ask.test": ["127.0.0.1"]}},
                     prompt={"timeout_s": 30, "deny_quiet_s": 3})
    d = env.sluiced(cfg)
    sock = control_socket(d)
    wait_until(lambda: os.path.exists(sock), 5, what="control socket")
    w = Watcher(["--socket", sock, "prompts", "watch"])
    env.closers.append(w.stop)
    w.expect_line("watching for prompts (0 pending)")
    result = {}

    def client():
        c = socket.socket(socket.AF_UNIX)
        c.settimeout(40)
        try:
            c.connect(d.session_socket("c1"))
            c.sendall(b"GET http://ask.test:%d/ok HTTP/1.1\r\nHost: "
                      b"ask.test:%d\r\nConnection: close\r\n\r\n"
                      % (up.port, up.port))
            result["resp"] = read_response(c, timeout=40)
        except Exception as e:      # reported below
            result["err"] = e
        finally:
            c.close()
    t = threading.Thread(target=client, daemon=True)
    t.start()
    line = w.expect_line("answer p-")
    pid = line.split()[1].rstrip("?")
    shown = w.expect_line("prompt %s:" % pid)
    check("session c1 tenant acme user alice" in shown and
          "GET ask.test:%d" % up.port in shown, "prompt line %r", shown)
    r = expect(ctl("--socket", sock, "prompts", "list"), EX_OK, "list")
    check(pid in r.out, "list shows %s: %r", pid, r.out)
    check(t.is_alive(), "the request was answered before the key")
    w.key("o")
    w.expect_line("%s: allow_once" % pid)
    t.join(20)
    check("err" not in result, "client: %r", result.get("err"))
    check_eq(result["resp"].status, 200, "request after o")
    r = expect(ctl("--socket", sock, "prompts", "answer", pid, "deny"),
               EX_REFUSED, "answered already")
    check(r.err.startswith("sluicectl: 409 "), "409 %r", r.err)
    w.key("q")
    check_eq(w.finish(), 0, "exit after q")


S.case(api_sessions)
S.case(api_ceiling)
S.case(api_prompts_watch)

if __name__ == "__main__":
    S.main()
