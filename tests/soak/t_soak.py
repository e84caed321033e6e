#!/usr/bin/env python3
"""Soak: three tenants of one sluice-execd, one of them hostile.

The real sluiced and sluice-execd (as tests/scenario/t_execd.py starts
them, through harness.py and execdlib.py) with a TCP+TLS listener and
three app tokens bound to the tenants "a", "b" (polite) and "evil"
(hostile).  Each polite tenant loops, on a new TLS connection per
request: create a sandbox, run three short commands (echo, python3 -c,
sh -c) checking their output, PUT and GET a small file checking its
bytes, delete the sandbox.  Two phases:

  quiet    the polite loops alone (SLUICE_SOAK_SECONDS / 2, default 60 s)
  hostile  the same loops while tenant evil, in a process of its own
           (python -u t_soak.py --evil CONF; so that its threads do not
           share the measuring client's interpreter), for
           SLUICE_SOAK_SECONDS (default 120 s):
           - slow readers: GETs of a 32 MiB file of its own, and execs
             with 64 MiB of output (answer and event stream), on sockets
             with a small receive buffer that it never reads;
           - floods: every few seconds a burst of concurrent execs and
             creates (at most BURST_EXECS + BURST_CREATES at once);
           - id probing: GET, DELETE, exec, files and create on the ids
             that a and b use (live and deleted; it is handed them, as a
             guess or a leak would give them) and on ids that never
             existed, plus its own list and ?tenant=a: a foreign id must
             be answered as a missing one is, and nothing of a or b may
             change;
           - disk filling: a sandbox of the largest disk_mb allowed
             filled with dd past its quota (again and again), and
             creates until its tenant quota refuses them;
           - tokenless bodies: TLS connections without a token that send
             a request head with a 1 GiB Content-Length and then body
             bytes slowly, and plain TCP connections that stall in the
             TLS handshake;
           - GET /v1/events with its token: any event of tenant a or b
             is a cross-tenant leak (ids are per tenant: an event of
             evil's own sandbox named like one of theirs is evil's).

Measured: p50/p99 of the polite create, exec, put, get and delete in each
phase; the VmRSS of sluice-execd and sluiced every second (peak per
phase, and after the hostile tenant has left); the polite tenants'
errors (any answer not 2xx, a lost or wrong output or file, a
connection that failed); the hostile findings.

Verdict (each a line of the table, PASS or FAIL):
  - polite p99 in the hostile phase <= max(P99_FACTOR x quiet p99,
    quiet p99 + P99_FLOOR_MS), per operation;
  - peak RSS of sluice-execd <= RSS_MAX_EXECD_MIB, of sluiced <=
    RSS_MAX_SLUICED_MIB;
  - no polite error;
  - no cross-tenant leak (event, list) and no foreign id answered
    differently from a missing one.

Everything is bounded in count and time, on 127.0.0.1 only; every
sandbox is deleted at the end and the harness's teardown checks that
nothing is left (harness.Leak).  Only the processes it started are
stopped, by PID.  Not part of make check: make check-soak runs it.

Environment: SLUICE_SOAK_SECONDS (hostile phase; quiet is half of it,
at least 5 s; 20 makes a short run of about a minute).
Skips (77) without root or user namespaces."""

import json
import os
import random
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "scenario"))
from harness import (Suite, Skip, Fail, log, read_response,  # noqa: E402
                     free_port, vmrss_kib, api_unix, BUILDDIR)
import execdlib  # noqa: E402

# ---------------------------------------------------------------------------
# the bounds the verdict holds the daemons to

RSS_MAX_EXECD_MIB = 256
RSS_MAX_SLUICED_MIB = 128
P99_FACTOR = 2.0
P99_FLOOR_MS = 20.0

SOAK_S = max(5.0, float(os.environ.get("SLUICE_SOAK_SECONDS") or 120))
# the hostile tenant's attacks; SLUICE_SOAK_ATTACKS=tokenless,slow (say)
# runs only those, to tell which one a figure comes from
ATTACKS = ("slow", "flood", "probe", "disk", "tokenless", "events")
ATTACKS_ON = tuple(a.strip() for a in (
    os.environ.get("SLUICE_SOAK_ATTACKS") or ",".join(ATTACKS)).split(",")
    if a.strip())
QUIET_S = max(5.0, SOAK_S / 2)
HOSTILE_S = SOAK_S

TENANTS = ("a", "b")
EVIL = "evil"
PREFIX = {"a": "soakA", "b": "soakB"}
OPS = ("create", "exec", "put", "get", "delete")
# the polite commands and what they print
CMDS = [({"cmd": ["echo", "hello"]}, "hello\n"),
        ({"cmd": ["python3", "-c", "print(6*7)"]}, "42\n"),
        ({"shell": "echo $((2+3)); ls /workspace >/dev/null"}, "5\n")]
MAX_ITERS = 100000          # per polite loop and phase: the deadline ends it
THINK_S = 0.05              # between two polite iterations

# the hostile tenant's bounds
SLOW_GETS = 16              # unread GETs of BIG_BYTES
BIG_BYTES = 32 << 20
BIG_OUT = 64 << 20          # output of an unread exec
UNREAD_EXECS = 3            # answer not read
UNREAD_STREAMS = 2          # event stream not read
BURST_EVERY_S = 4.0
BURST_EXECS = 16
BURST_CREATES = 8
TOKENLESS_TLS = 32          # TLS, no token, 1 GiB Content-Length, slow body
TOKENLESS_PLAIN = 16        # plain TCP stalled in the handshake
DRIBBLE = 32 << 10          # body bytes per connection every DRIBBLE_S
DRIBBLE_S = 0.5
DRIBBLE_MAX = 32 << 20      # body bytes per connection at most
RECONNECTS_MAX = 256        # tokenless connections made again, in all
FILL_DISK_MB = 256
FILL_EVERY_S = 15.0
PROBE_EVERY_S = 0.5
PROBE_IDS = 6               # foreign ids per probe round
SPREE_MAX = 12              # creates until the tenant quota refuses

QUOTAS = {"sandboxes": 64, "per_tenant": 8, "per_user": 4, "creates": 4}
LIMITS = {"disk_mb": 64, "inodes": 4096, "timeout_s": 120}
LIMITS_MAX = {"disk_mb": FILL_DISK_MB, "timeout_s": 1680,
              "output_cap": BIG_OUT, "memory_mb": 4096}

EXECD = os.path.join(BUILDDIR, "sandbox-glue", "executor", "execd",
                     "sluice-execd")
SHIM = os.path.abspath(os.path.join(BUILDDIR, "sandbox-glue", "shim",
                                    "sluice-shim"))
HOSTNAME = "execd.test"


# ---------------------------------------------------------------------------
# the client: one TLS connection per request

class Resp:
    def __init__(self, status, body):
        self.status = status
        self.body = body
        try:
            self.json = json.loads(body.decode()) if body else None
        except (ValueError, UnicodeDecodeError):
            self.json = None

    def code(self):
        if isinstance(self.json, dict) and isinstance(
                self.json.get("error"), dict):
            return self.json["error"].get("code")
        return None

    def __repr__(self):
        return "<%d %r>" % (self.status, self.body[:200])


def request_bytes(method, path, token=None, body=None, raw=None,
                  headers=()):
    data = raw if raw is not None else (
        json.dumps(body).encode() if body is not None else b"")
    lines = ["%s %s HTTP/1.1" % (method, path), "Host: execd",
             "Connection: close"]
    if data or method in ("POST", "PUT", "PATCH"):
        lines.append("Content-Length: %d" % len(data))
    if data and raw is None:
        lines.append("Content-Type: application/json")
    if token:
        lines.append("Authorization: Bearer " + token)
    lines += ["%s: %s" % kv for kv in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data


# Each tenant's client from an address of its own, as each app's backend
# has in a deployment: the listener's per-peer cap is per address.
SOURCES = {"a": "127.0.0.2", "b": "127.0.0.3", "evil": "127.0.0.4"}


class Api:
    def __init__(self, port, cafile, src="127.0.0.1"):
        self.port = port
        self.src = src
        self.ctx = ssl.create_default_context(cafile=cafile)

    def connect(self, rcvbuf=0, timeout=60.0):
        raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            if rcvbuf:
                raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            raw.settimeout(timeout)
            raw.bind((self.src, 0))
            raw.connect(("127.0.0.1", self.port))
            return self.ctx.wrap_socket(raw, server_hostname=HOSTNAME)
        except BaseException:
            raw.close()
            raise

    def call(self, token, method, path, body=None, raw=None, headers=(),
             timeout=60.0):
        s = self.connect(timeout=timeout)
        try:
            s.sendall(request_bytes(method, path, token, body, raw,
                                    headers))
            r = read_response(s, timeout)
            return Resp(r.status, r.body)
        finally:
            s.close()


def pct(xs, p):
    """Nearest rank (bench/exec.py's): p99 of 50 samples is the largest."""
    if not xs:
        return None
    s = sorted(xs)
    k = max(1, -(-len(s) * p // 100))
    return s[int(k) - 1]


# ---------------------------------------------------------------------------
# the polite tenants

class Polite:
    """One polite tenant's loop; latencies in ms per phase and op."""

    def __init__(self, api, tenant, token, ids_file, ids_lock):
        self.api = api
        self.tenant = tenant
        self.token = token
        self.ids_file = ids_file
        self.ids_lock = ids_lock
        self.lat = {}           # (phase, op) -> [ms]
        self.errors = []        # (phase, op, what)
        self.iters = {}

    def err(self, phase, op, what):
        self.errors.append((phase, op, what))
        if len(self.errors) <= 20:
            log("polite %s, %s, %s: %s" % (self.tenant, phase, op, what))

    def timed(self, phase, op, *a, **kw):
        t0 = time.monotonic()
        try:
            r = self.api.call(self.token, *a, **kw)
        except (OSError, Fail, ssl.SSLError) as e:
            self.err(phase, op, "connection: %r" % e)
            return None
        self.lat.setdefault((phase, op), []).append(
            (time.monotonic() - t0) * 1000.0)
        return r

    def run(self, phase, deadline, stop):
        n = 0
        while time.monotonic() < deadline and not stop.is_set() and \
                n < MAX_ITERS:
            n += 1
            self.iteration(phase, n)
            time.sleep(THINK_S)
        self.iters[phase] = n

    def iteration(self, phase, n):
        sid = "%s-%s%d-%s" % (PREFIX[self.tenant], phase[0], n,
                              os.urandom(3).hex())
        with self.ids_lock:
            with open(self.ids_file, "a") as f:
                f.write(sid + "\n")
        r = self.timed(phase, "create", "POST", "/v1/sandboxes",
                       {"id": sid, "network": {"tier": "registries"}},
                       timeout=120)
        if r is None:
            return
        if r.status != 201:
            e = (r.json or {}).get("error") or {}
            self.err(phase, "create", "%d %s%s" % (
                r.status, r.code(), " scope %s" % e["scope"]
                if isinstance(e, dict) and e.get("scope") else ""))
            return
        if (r.json or {}).get("tenant") != self.tenant:
            self.err(phase, "create", "tenant %r" % (r.json or {}).get(
                "tenant"))
        for body, want in CMDS:
            r = self.timed(phase, "exec", "POST",
                           "/v1/sandboxes/%s/exec" % sid, body)
            if r is None:
                continue
            if r.status != 200:
                self.err(phase, "exec", "%d %s" % (r.status, r.code()))
            elif (r.json or {}).get("exit_code") != 0 or \
                    (r.json or {}).get("stdout") != want:
                self.err(phase, "exec", "lost: exit %r stdout %r stderr %r"
                         % ((r.json or {}).get("exit_code"),
                            (r.json or {}).get("stdout"),
                            ((r.json or {}).get("stderr") or "")[:200]))
        data = os.urandom(4096)
        path = "/v1/sandboxes/%s/files/soak/data.bin" % sid
        r = self.timed(phase, "put", "PUT", path, raw=data)
        if r is not None and r.status != 201:
            self.err(phase, "put", "%d %s" % (r.status, r.code()))
        r = self.timed(phase, "get", "GET", path)
        if r is not None:
            if r.status != 200:
                self.err(phase, "get", "%d %s" % (r.status, r.code()))
            elif r.body != data:
                self.err(phase, "get", "lost: %d bytes back, not the %d "
                         "put" % (len(r.body), len(data)))
        r = self.timed(phase, "delete", "DELETE",
                       "/v1/sandboxes/%s?archive=discard" % sid,
                       timeout=120)
        if r is not None and r.status != 200:
            self.err(phase, "delete", "%d %s" % (r.status, r.code()))


# ---------------------------------------------------------------------------
# the hostile tenant (its own process)

class Evil:
    def __init__(self, conf):
        self.conf = conf
        self.api = Api(conf["port"], conf["cafile"], SOURCES["evil"])
        self.tok = conf["token"]
        self.deadline = time.monotonic() + conf["seconds"]
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.socks = []         # held open, never read, closed at the end
        self.mine = set()       # its sandboxes
        self.f = {              # what it saw
            "statuses": {},     # "what status code" -> count
            "probe_foreign": {},    # op -> {answer: count}
            "probe_missing": {},    # op -> {answer: count}
            "probe_foreign_2xx": [],
            "list_foreign": [],
            "events_status": None,
            "events_bytes": 0,
            "events_total": 0,
            "events_foreign": 0,
            "events_foreign_sample": [],
            "tokenless_conns": 0,
            "tokenless_bytes": 0,
            "tokenless_closed_by_server": 0,
            "tokenless_stalled": 0,
            "tokenless_answers": {},
            "plain_conns": 0,
            "plain_closed_by_server": 0,
            "slow_gets": 0,
            "unread_execs": 0,
            "fills": 0,
            "fill_answers": {},
            "spree_created": 0,
            "spree_refused": None,
            "bursts": 0,
            "errors": [],
        }

    def left(self):
        return self.deadline - time.monotonic()

    def count(self, what, r):
        k = "%s %s %s" % (what, r.status if r else "exc",
                          (r.code() if r else "") or "")
        with self.lock:
            self.f["statuses"][k] = self.f["statuses"].get(k, 0) + 1

    def call(self, what, *a, **kw):
        kw.setdefault("timeout", 60.0)
        try:
            r = self.api.call(self.tok, *a, **kw)
        except (OSError, Fail, ssl.SSLError) as e:
            with self.lock:
                if len(self.f["errors"]) < 50:
                    self.f["errors"].append("%s: %r" % (what, e))
            r = None
        self.count(what, r)
        return r

    def create(self, sid, user="u0", **extra):
        body = {"id": sid, "user": user, "network": {"tier": "off"}}
        body.update(extra)
        r = self.call("create", "POST", "/v1/sandboxes", body, timeout=120)
        if r is not None and r.status == 201:
            with self.lock:
                self.mine.add(sid)
        return r

    def hold(self, s):
        with self.lock:
            self.socks.append(s)

    def send_unread(self, what, method, path, body=None, headers=()):
        """A request on a socket with a small receive buffer, never read."""
        try:
            s = self.api.connect(rcvbuf=4096, timeout=30)
            s.sendall(request_bytes(method, path, self.tok, body,
                                    headers=headers))
        except (OSError, ssl.SSLError) as e:
            with self.lock:
                self.f["errors"].append("%s: %r" % (what, e))
            return False
        self.hold(s)
        return True

    # -- slow readers
    def slow_readers(self):
        r = self.create("evil-big", "u0", limits={"disk_mb": 64})
        if r is None or r.status != 201:
            return
        self.call("exec", "POST", "/v1/sandboxes/evil-big/exec", {
            "shell": "head -c %d /dev/urandom > /workspace/big" % BIG_BYTES,
            "timeout_s": 60})
        for _ in range(SLOW_GETS):
            if self.stop.is_set():
                return
            if self.send_unread("slow get", "GET",
                                "/v1/sandboxes/evil-big/files/big"):
                self.f["slow_gets"] += 1
            time.sleep(0.1)
        # execs whose answer is never read: one foreground command per
        # sandbox, so each in a sandbox of its own
        tmo = min(LIMITS_MAX["timeout_s"], int(self.conf["seconds"]) + 120)
        shell = "yes 0123456789abcdefghijklmnopqrstuvwxyz | head -c %d" % \
            BIG_OUT
        for i in range(UNREAD_EXECS + UNREAD_STREAMS):
            if self.stop.is_set():
                return
            sid = "evil-out%d" % i
            r = self.create(sid, "u1" if i < 3 else "u2")
            if r is None or r.status != 201:
                continue
            hdr = [("Accept", "text/event-stream")] if i >= UNREAD_EXECS \
                else []
            if self.send_unread("unread exec", "POST",
                                "/v1/sandboxes/%s/exec" % sid,
                                {"shell": shell, "output_cap": BIG_OUT,
                                 "timeout_s": tmo}, hdr):
                self.f["unread_execs"] += 1

    # -- disk filling and the create spree
    def disk(self):
        r = self.create("evil-disk", "u3", limits={"disk_mb": FILL_DISK_MB})
        if r is None or r.status != 201:
            return
        n = 0
        while not self.stop.is_set() and self.left() > 5 and n < 64:
            n += 1
            r = self.call("fill", "POST", "/v1/sandboxes/evil-disk/exec", {
                "shell": "dd if=/dev/zero of=/workspace/fill%d bs=1M "
                         "count=%d 2>&1 | grep -c 'No space left'"
                         % (n % 2, FILL_DISK_MB + 16),
                "timeout_s": 120}, timeout=180)
            self.f["fills"] += 1
            k = "dd %s" % ("exc" if r is None else (
                "ENOSPC" if (r.json or {}).get("stdout") == "1\n" else
                "%d %r" % (r.status, ((r.json or {}).get("stdout") or
                                      "")[:40])))
            # full: a PUT must be refused too
            p = self.call("put full", "PUT",
                          "/v1/sandboxes/evil-disk/files/more.bin",
                          raw=b"x" * (1 << 20))
            k2 = "PUT %s" % (p.status if p else "exc")
            for k in (k, k2):
                self.f["fill_answers"][k] = self.f["fill_answers"].get(
                    k, 0) + 1
            self.stop.wait(min(FILL_EVERY_S, max(0.0, self.left() - 5)))
            self.call("unfill", "POST", "/v1/sandboxes/evil-disk/exec", {
                "shell": "rm -f /workspace/fill%d" % ((n + 1) % 2)})

    def spree(self):
        # after the sandboxes of the other attacks are made
        self.stop.wait(min(15.0, max(0.0, self.left() / 4)))
        for i in range(SPREE_MAX):
            if self.stop.is_set():
                return
            r = self.create("evil-sp%d" % i, "u%d" % (4 + i // 3))
            if r is not None and r.status == 429:
                self.f["spree_refused"] = "%s scope %s" % (
                    r.code(), (r.json or {}).get("error", {}).get("scope"))
                return
            if r is not None and r.status == 201:
                self.f["spree_created"] += 1

    # -- floods
    def floods(self):
        n = 0
        while not self.stop.is_set() and self.left() > 3 and n < 1000:
            n += 1
            with self.lock:
                targets = sorted(self.mine) or ["evil-none"]
            ts = []
            for i in range(BURST_EXECS):
                sid = targets[i % len(targets)]
                ts.append(threading.Thread(target=self.call, args=(
                    "flood exec", "POST", "/v1/sandboxes/%s/exec" % sid,
                    {"cmd": ["true"]}), daemon=True))
            for i in range(BURST_CREATES):
                ts.append(threading.Thread(target=self.flood_create, args=(
                    "evil-fl%d-%d" % (n, i), "u%d" % (8 + i % 4)),
                    daemon=True))
            for t in ts:
                t.start()
            for t in ts:
                t.join(180)
            self.f["bursts"] += 1
            self.stop.wait(BURST_EVERY_S)

    def flood_create(self, sid, user):
        r = self.create(sid, user)
        if r is not None and r.status == 201:
            d = self.call("delete", "DELETE",
                          "/v1/sandboxes/%s?archive=discard" % sid,
                          timeout=120)
            if d is not None and d.status == 200:
                with self.lock:
                    self.mine.discard(sid)

    # -- id probing
    def foreign_ids(self):
        try:
            with open(self.conf["ids_file"]) as f:
                ids = [ln.strip() for ln in f if ln.strip()]
        except OSError:
            return []
        # the newest ones are live, the older ones deleted
        pick = ids[-PROBE_IDS // 2:] + random.sample(
            ids, min(len(ids), PROBE_IDS - PROBE_IDS // 2))
        return pick

    def probe_ops(self, sid):
        return [
            ("get", ("GET", "/v1/sandboxes/%s" % sid), {}),
            ("delete", ("DELETE", "/v1/sandboxes/%s" % sid), {}),
            ("delete discard", ("DELETE",
                                "/v1/sandboxes/%s?archive=discard" % sid), {}),
            ("exec", ("POST", "/v1/sandboxes/%s/exec" % sid),
             {"body": {"cmd": ["true"]}}),
            ("file get", ("GET", "/v1/sandboxes/%s/files/soak/data.bin"
                          % sid), {}),
            ("file put", ("PUT", "/v1/sandboxes/%s/files/soak/data.bin"
                          % sid), {"raw": b"evil"}),
            ("commands", ("GET", "/v1/sandboxes/%s/commands" % sid), {}),
            ("patch", ("PATCH", "/v1/sandboxes/%s" % sid),
             {"body": {"network": {"tier": "public"}}}),
        ]

    def probe_one(self, key, sid):
        for op, a, kw in self.probe_ops(sid):
            r = self.call("probe " + op, *a, **kw)
            ans = "%s %s" % (r.status, r.code() or "") if r else "exc"
            with self.lock:
                d = self.f[key].setdefault(op, {})
                d[ans] = d.get(ans, 0) + 1
                if key == "probe_foreign" and r is not None and \
                        200 <= r.status < 300 and \
                        len(self.f["probe_foreign_2xx"]) < 20:
                    self.f["probe_foreign_2xx"].append("%s %s: %s" % (
                        op, sid, ans))

    def probes(self):
        n = 0
        while not self.stop.is_set() and self.left() > 2 and n < 10000:
            n += 1
            for sid in self.foreign_ids():
                self.probe_one("probe_foreign", sid)
                # the same shape of id, never used
                self.probe_one("probe_missing", "%s-x%d-%s" % (
                    sid.split("-")[0], n, os.urandom(3).hex()))
            # create on a foreign id: whatever the answer, nothing of its
            # owner may change (one made is deleted)
            for sid in self.foreign_ids()[:2]:
                r = self.create(sid, "u7")
                if r is not None and r.status == 201:
                    self.call("delete", "DELETE",
                              "/v1/sandboxes/%s?archive=discard" % sid)
                    with self.lock:
                        self.mine.discard(sid)
                k = "create foreign %s %s" % (r.status if r else "exc",
                                              r.code() if r else "")
                with self.lock:
                    self.f["statuses"][k] = self.f["statuses"].get(k, 0) + 1
            for q in ("", "?tenant=a", "?tenant=b"):
                r = self.call("list" + q, "GET", "/v1/sandboxes" + q)
                if r is not None and r.status == 200:
                    for b in (r.json or {}).get("sandboxes", []):
                        if b.get("tenant") != EVIL and \
                                len(self.f["list_foreign"]) < 20:
                            self.f["list_foreign"].append(
                                "%s %s" % (q or "list", b.get("id")))
            self.stop.wait(PROBE_EVERY_S)

    # -- tokenless bodies
    def tokenless(self, i):
        made = 0
        while not self.stop.is_set() and self.left() > 1:
            with self.lock:
                if self.f["tokenless_conns"] >= TOKENLESS_TLS + \
                        RECONNECTS_MAX:
                    return
                self.f["tokenless_conns"] += 1
            made += 1
            try:
                s = self.api.connect(timeout=5)
            except (OSError, ssl.SSLError):
                self.stop.wait(1)
                continue
            sent = 0
            try:
                s.sendall(("POST /v1/sandboxes HTTP/1.1\r\nHost: execd\r\n"
                           "Content-Type: application/json\r\n"
                           "Content-Length: %d\r\n\r\n" % (1 << 30)).encode())
                chunk = b"[" * DRIBBLE
                while not self.stop.is_set() and self.left() > 1 and \
                        sent < DRIBBLE_MAX:
                    s.settimeout(5)
                    s.sendall(chunk)
                    sent += len(chunk)
                    with self.lock:
                        self.f["tokenless_bytes"] += len(chunk)
                    self.stop.wait(DRIBBLE_S)
                if sent >= DRIBBLE_MAX:
                    self.hold(s)
                    return
            except socket.timeout:
                # the server stopped reading: it is stalled, held open
                with self.lock:
                    self.f["tokenless_stalled"] += 1
                self.hold(s)
                return
            except (OSError, ssl.SSLError):
                # closed by the server: what did it say?
                with self.lock:
                    self.f["tokenless_closed_by_server"] += 1
                try:
                    s.settimeout(2)
                    head = s.recv(200)
                    k = head.split(b"\r\n", 1)[0].decode("latin-1")[:40] \
                        or "eof"
                except (OSError, ssl.SSLError):
                    k = "reset"
                with self.lock:
                    a = self.f["tokenless_answers"]
                    a[k] = a.get(k, 0) + 1
                s.close()
                self.stop.wait(1)
                continue
            s.close()
            return

    def plain(self):
        """Plain TCP connections that stall in the TLS handshake."""
        socks = []
        for _ in range(TOKENLESS_PLAIN):
            try:
                s = socket.create_connection(
                    ("127.0.0.1", self.conf["port"]), timeout=5,
                    source_address=(SOURCES["evil"], 0))
                s.sendall(b"\x16\x03\x01\x02\x00")     # a ClientHello's head
                socks.append(s)
                self.f["plain_conns"] += 1
            except OSError:
                pass
        while not self.stop.is_set() and self.left() > 1:
            self.stop.wait(1)
        for s in socks:
            try:
                s.settimeout(0.01)
                if s.recv(1) == b"":
                    self.f["plain_closed_by_server"] += 1
            except socket.timeout:
                pass
            except OSError:
                self.f["plain_closed_by_server"] += 1
            s.close()

    # -- the event stream
    def events(self):
        try:
            s = self.api.connect(timeout=5)
            s.sendall(request_bytes("GET", "/v1/events", self.tok))
        except (OSError, ssl.SSLError) as e:
            self.f["errors"].append("events: %r" % e)
            return
        buf = bytearray()
        head = None
        tail = b""
        while not self.stop.is_set() and self.left() > 0.5:
            try:
                b = s.recv(1 << 16)
            except socket.timeout:
                continue
            except (OSError, ssl.SSLError):
                break
            if not b:
                break
            self.f["events_bytes"] += len(b)
            if head is None:
                buf += b
                if b"\r\n\r\n" not in buf:
                    continue
                h, _, rest = bytes(buf).partition(b"\r\n\r\n")
                head = h
                try:
                    self.f["events_status"] = int(h.split(b" ")[1])
                except (IndexError, ValueError):
                    self.f["events_status"] = -1
                b = rest
            # the lines "data: {...}" (chunk framing only splits them)
            data = tail + b
            lines = data.split(b"\n")
            tail = lines.pop()[-65536:]
            for ln in lines:
                ln = ln.rstrip(b"\r")
                if not ln.startswith(b"data: "):
                    continue
                self.f["events_total"] += 1
                try:
                    ev = json.loads(ln[6:].decode())
                except (ValueError, UnicodeDecodeError):
                    continue
                # ids are per tenant: evil's own sandbox of an id of a's
                # or b's (its creates on foreign ids make them) is evil's;
                # an event of another tenant is the leak
                if ev.get("tenant") != EVIL:
                    self.f["events_foreign"] += 1
                    if len(self.f["events_foreign_sample"]) < 3:
                        self.f["events_foreign_sample"].append(
                            {k: ev.get(k) for k in ("what", "id", "sandbox",
                                                    "tenant", "user")})
        s.close()

    def run(self):
        on = self.conf["attacks"]
        work = ([self.events] if "events" in on else []) + \
            ([self.slow_readers] if "slow" in on else []) + \
            ([self.disk, self.spree] if "disk" in on else []) + \
            ([self.floods] if "flood" in on else []) + \
            ([self.probes] if "probe" in on else []) + \
            ([self.plain] + [lambda i=i: self.tokenless(i)
                             for i in range(TOKENLESS_TLS)]
             if "tokenless" in on else [])
        ts = [threading.Thread(target=self.guard, args=(w,), daemon=True)
              for w in work]
        for t in ts:
            t.start()
        while self.left() > 0:
            time.sleep(min(1.0, max(0.0, self.left())))
        self.stop.set()
        for t in ts:
            t.join(max(1.0, 150 - (time.monotonic() - self.deadline)))
        with self.lock:
            socks, self.socks = self.socks, []
        self.f["held_sockets"] = len(socks)
        for s in socks:
            try:
                s.close()
            except OSError:
                pass
        # its sandboxes go (the test's teardown deletes whatever is left)
        t0 = time.monotonic()
        for sid in sorted(self.mine):
            self.call("cleanup delete", "DELETE",
                      "/v1/sandboxes/%s?archive=discard" % sid, timeout=120)
        self.f["cleanup_s"] = round(time.monotonic() - t0, 1)
        self.f["still_running_threads"] = sum(1 for t in ts if t.is_alive())
        return self.f

    def guard(self, fn):
        try:
            fn()
        except Exception as e:      # noqa: B902 - reported, not fatal
            with self.lock:
                self.f["errors"].append("%s: %r" % (getattr(
                    fn, "__name__", "work"), e))


def evil_main(conf_path):
    with open(conf_path) as f:
        conf = json.load(f)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(3))
    out = Evil(conf).run()
    tmp = conf["out"] + ".tmp"
    with open(tmp, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
    os.rename(tmp, conf["out"])
    return 0


# ---------------------------------------------------------------------------
# the case

class Sampler:
    """VmRSS of each daemon every second: peak per phase."""

    def __init__(self, pids):
        self.pids = pids        # name -> pid
        self.phase = "setup"
        self.peak = {}          # (phase, name) -> KiB
        self.last = {}
        self.fds = {}           # (phase, name) -> peak open fds
        self.load = {}          # phase -> load average (1 min) at its end
        self.timeline = []      # (phase, KiB of each daemon)
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def sample(self):
        self.timeline.append((self.phase, {}))
        for name, pid in self.pids.items():
            try:
                kib = vmrss_kib(pid)
                nfd = len(os.listdir("/proc/%d/fd" % pid))
            except (OSError, Fail):
                continue
            k = (self.phase, name)
            self.last[name] = kib
            self.timeline[-1][1][name] = kib
            self.peak[k] = max(self.peak.get(k, 0), kib)
            self.fds[k] = max(self.fds.get(k, 0), nfd)

    def run(self):
        for _ in range(100000):
            self.sample()
            if self.stop.wait(1.0):
                return

    def set(self, phase):
        self.sample()
        if self.phase in ("quiet", "hostile"):
            self.load[self.phase] = os.getloadavg()[0]
        self.phase = phase
        self.sample()


def preflight():
    if os.geteuid() != 0:
        raise Skip("needs root")
    if not os.access(EXECD, os.X_OK):
        raise Skip("sluice-execd not built")
    r = subprocess.run(["unshare", "-U", "-m", "-p", "-n", "-f", "true"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        raise Skip("no user namespaces: %s" % r.stderr.decode().strip())


S = Suite("t_soak", time_limit=int(QUIET_S + HOSTILE_S + 600))


def ms(v):
    return "-" if v is None else "%.1f" % v


@S.case
def soak(env):
    preflight()
    bad = [a for a in ATTACKS_ON if a not in ATTACKS]
    if bad or not ATTACKS_ON:
        raise Fail("SLUICE_SOAK_ATTACKS: %s: not among %s" % (
            ",".join(bad) or "none", ",".join(ATTACKS)))
    os.chmod(os.path.dirname(env.dir), 0o711)
    os.chmod(env.dir, 0o711)
    cfg = env.config(sessions=[], ceiling="public")
    d = env.sluiced(cfg)
    ctl = os.path.join(cfg["runtime_dir"], "control.sock")
    crt, _key = env.cert((HOSTNAME,))
    tok = {}
    for t in TENANTS + (EVIL,):
        tok[t] = "tok-%s-%s" % (t, os.urandom(16).hex())
        p = env.path("%s.tok" % t)
        with open(p, "w") as f:
            f.write(tok[t] + "\n")
        os.chmod(p, 0o600)
    port = free_port()
    conf = {
        "runtime_dir": env.path("xrun"),
        "state_dir": env.path("xstate"),
        "control_socket": ctl,
        "shim": SHIM,
        "uid_base": 1450000000,         # apart from the other suites'
        "slots": 64,
        "limits": LIMITS,
        "limits_max": LIMITS_MAX,
        "quotas": QUOTAS,
        "tcp": {"listen": "127.0.0.1:%d" % port, "tls_cert": crt,
                "tls_key": _key,
                "tokens": [{"name": "tenant-%s" % t,
                            "file": env.path("%s.tok" % t),
                            "role": "app", "tenant": t}
                           for t in TENANTS + (EVIL,)]},
        "log": {"path": env.path("xaudit", "execd.jsonl")},
    }
    x = execdlib.Execd(env, conf, verbose=False).start()
    api = Api(port, crt)
    ids_file = env.path("polite-ids.txt")
    ids_lock = threading.Lock()
    polite = {t: Polite(Api(port, crt, SOURCES.get(t, "127.0.0.1")), t,
                        tok[t], ids_file, ids_lock)
              for t in TENANTS}
    samp = Sampler({"sluice-execd": x.proc.pid, "sluiced": d.pid})
    stop = threading.Event()
    evil_proc = None
    running = []
    try:
        log("soak: quiet %.0f s, hostile %.0f s (SLUICE_SOAK_SECONDS=%g)"
            % (QUIET_S, HOSTILE_S, SOAK_S))
        # a warm-up iteration each, not counted
        for p in polite.values():
            p.iteration("warmup", 0)
        samp.set("quiet")

        def phase(name, seconds):
            dl = time.monotonic() + seconds
            ts = [threading.Thread(target=p.run, args=(name, dl, stop),
                                   daemon=True) for p in polite.values()]
            for t in ts:
                t.start()
            running[:] = ts
            return ts

        for t in phase("quiet", QUIET_S):
            t.join(QUIET_S + 300)
        log("soak: quiet phase done: %s" % ", ".join(
            "%s %d iterations" % (t, p.iters.get("quiet", 0))
            for t, p in polite.items()))
        samp.set("hostile")
        evil_conf = {"port": port, "cafile": crt, "token": tok[EVIL],
                     "seconds": HOSTILE_S, "ids_file": ids_file,
                     "attacks": ATTACKS_ON,
                     "out": env.path("evil.json")}
        with open(env.path("evil-conf.json"), "w") as f:
            json.dump(evil_conf, f)
        evil_proc = subprocess.Popen(
            [sys.executable, "-u", os.path.abspath(__file__), "--evil",
             env.path("evil-conf.json")], stdin=subprocess.DEVNULL)
        for t in phase("hostile", HOSTILE_S):
            t.join(HOSTILE_S + 300)
        log("soak: hostile phase done; waiting for the hostile tenant to "
            "clean up")
        try:
            evil_proc.wait(240)
        except subprocess.TimeoutExpired:
            log("soak: the hostile client did not end: SIGTERM %d"
                % evil_proc.pid)
            evil_proc.terminate()
            try:
                evil_proc.wait(10)
            except subprocess.TimeoutExpired:
                evil_proc.kill()
                evil_proc.wait(10)
        samp.set("after")
        for _ in range(5):
            time.sleep(1)
            samp.sample()
    finally:
        stop.set()
        for t in running:
            t.join(150)     # an iteration under way ends before teardown
        if evil_proc is not None and evil_proc.poll() is None:
            evil_proc.kill()
            evil_proc.wait(10)
        samp.stop.set()
        samp.t.join(5)
    try:
        with open(env.path("evil.json")) as f:
            ev = json.load(f)
    except (OSError, ValueError):
        ev = None
    left = api_unix(x.sock, "GET", "/v1/sandboxes", timeout=30)
    left_ids = [b["id"] for b in (left.json or {}).get("sandboxes", [])]
    report(polite, samp, ev, x, d, left_ids)


def report(polite, samp, ev, x, d, left_ids):
    out = []
    fails = []
    w = out.append
    w("")
    w("sluice soak: tenants a, b polite; evil hostile; quiet %.0f s, "
      "hostile %.0f s; %d cores, load average %s at the end of the quiet "
      "phase, %s of the hostile one" % (
          QUIET_S, HOSTILE_S, os.cpu_count() or 0,
          ms(samp.load.get("quiet")), ms(samp.load.get("hostile"))))
    if ATTACKS_ON != ATTACKS:
        w("a partial soak: the hostile tenant's attacks are only %s "
          "(SLUICE_SOAK_ATTACKS)" % ",".join(ATTACKS_ON))
    w("")
    w("| polite op | quiet n | quiet p50 | quiet p99 | hostile n | "
      "hostile p50 | hostile p99 | allowed p99 | verdict |")
    w("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for op in OPS:
        q = sum((p.lat.get(("quiet", op), []) for p in polite.values()), [])
        h = sum((p.lat.get(("hostile", op), []) for p in polite.values()),
                [])
        q99, h99 = pct(q, 99), pct(h, 99)
        allowed = None if q99 is None else max(P99_FACTOR * q99,
                                               q99 + P99_FLOOR_MS)
        ok = allowed is not None and h99 is not None and h99 <= allowed
        if not ok:
            fails.append("%s p99 %s ms in the hostile phase, allowed %s"
                         % (op, ms(h99), ms(allowed)))
        w("| %s | %d | %s | %s | %d | %s | %s | %s | %s |" % (
            op, len(q), ms(pct(q, 50)), ms(q99), len(h), ms(pct(h, 50)),
            ms(h99), ms(allowed), "PASS" if ok else "FAIL"))
    w("")
    w("| daemon | RSS quiet peak | RSS hostile peak | RSS after | bound | "
      "fds quiet / hostile peak | verdict |")
    w("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for name, bound in (("sluice-execd", RSS_MAX_EXECD_MIB),
                        ("sluiced", RSS_MAX_SLUICED_MIB)):
        pk = max(samp.peak.get((ph, name), 0) for ph in
                 ("setup", "quiet", "hostile", "after"))
        ok = pk <= bound * 1024
        if not ok:
            fails.append("%s peak RSS %.1f MiB > %d MiB" % (
                name, pk / 1024.0, bound))
        w("| %s | %.1f MiB | %.1f MiB | %.1f MiB | %d MiB | %d / %d | %s |"
          % (name, samp.peak.get(("quiet", name), 0) / 1024.0,
             samp.peak.get(("hostile", name), 0) / 1024.0,
             samp.last.get(name, 0) / 1024.0, bound,
             samp.fds.get(("quiet", name), 0),
             samp.fds.get(("hostile", name), 0), "PASS" if ok else "FAIL"))
    for name in ("sluice-execd", "sluiced"):
        hos = [v[name] for ph, v in samp.timeline
               if ph == "hostile" and name in v]
        aft = [v[name] for ph, v in samp.timeline
               if ph == "after" and name in v]
        step = max(1, -(-len(hos) // 12))
        w("RSS of %s (MiB) every %d s of the hostile phase: %s; after it: "
          "%s" % (name, step, " ".join("%.0f" % (k / 1024.0)
                                       for k in hos[::step]) or "-",
                  " ".join("%.0f" % (k / 1024.0) for k in aft[:1] + aft[-1:])
                  or "-"))
    w("")
    errs = sum((p.errors for p in polite.values()), [])
    kinds = {}
    for ph, op, what in errs:
        if what.startswith("lost"):
            what = "lost"
        elif what.startswith("connection"):
            what = what.split("(")[0]
        k = "%s %s: %s" % (ph, op, what)
        kinds[k] = kinds.get(k, 0) + 1
    iters = ", ".join("%s %d/%d" % (t, p.iters.get("quiet", 0),
                                     p.iters.get("hostile", 0))
                      for t, p in polite.items())
    w("polite iterations (quiet/hostile): %s" % iters)
    w("polite errors: %d%s" % (len(errs), "" if not kinds else " (" + "; ".join(
        "%s x%d" % kv for kv in sorted(kinds.items(), key=lambda kv: -kv[1]
                                       )[:8]) + ")"))
    if errs:
        fails.append("%d polite errors" % len(errs))
    if ev is None:
        fails.append("the hostile client left no report")
        w("hostile tenant: NO REPORT")
    else:
        foreign = {}
        for op, ans in ev["probe_foreign"].items():
            miss = ev["probe_missing"].get(op, {})
            diff = sorted(set(ans) - set(miss))
            if diff:
                foreign[op] = "%s vs missing %s" % (
                    ",".join(diff), ",".join(sorted(miss)))
        w("cross-tenant events seen by evil: %d of %d (subscription %s)%s"
          % (ev["events_foreign"], ev["events_total"], ev["events_status"],
             (" e.g. %s" % json.dumps(ev["events_foreign_sample"][:1]))
             if ev["events_foreign_sample"] else ""))
        if ev["events_foreign"]:
            fails.append("%d events of tenants a/b reached evil"
                         % ev["events_foreign"])
        w("foreign ids answered unlike missing ones: %s" % (
            "; ".join("%s: %s" % kv for kv in sorted(foreign.items()))
            or "none"))
        if foreign:
            fails.append("foreign ids answered unlike missing ones (%s)"
                         % ", ".join(sorted(foreign)))
        if ev["probe_foreign_2xx"]:
            fails.append("foreign ids answered 2xx: %s" % "; ".join(
                ev["probe_foreign_2xx"][:3]))
            w("foreign ids answered 2xx: %s" % "; ".join(
                ev["probe_foreign_2xx"]))
        if ev["list_foreign"]:
            fails.append("evil's list showed %s" % "; ".join(
                ev["list_foreign"][:3]))
        w("evil's lists showing a/b: %s" % ("; ".join(ev["list_foreign"])
                                            or "none"))
        w("hostile load: %d unread GETs of %d MiB, %d unread execs of %d "
          "MiB, %d bursts of %d execs + %d creates, %d disk fills (%s), "
          "create spree %d made then %s, tokenless TLS %d conns / %.1f MiB "
          "sent / %d closed by the server (%s) / %d stalled, plain %d (%d "
          "closed by the server), held %s sockets, cleanup %s s, client "
          "errors %d" % (
              ev["slow_gets"], BIG_BYTES >> 20, ev["unread_execs"],
              BIG_OUT >> 20, ev["bursts"], BURST_EXECS, BURST_CREATES,
              ev["fills"], ", ".join("%s x%d" % kv for kv in sorted(
                  ev["fill_answers"].items())) or "-",
              ev["spree_created"], ev["spree_refused"],
              ev["tokenless_conns"], ev["tokenless_bytes"] / 1048576.0,
              ev["tokenless_closed_by_server"], ", ".join(
                  "%s x%d" % kv for kv in sorted(
                      ev["tokenless_answers"].items())) or "-",
              ev["tokenless_stalled"], ev["plain_conns"],
              ev["plain_closed_by_server"], ev.get("held_sockets"),
              ev.get("cleanup_s"), len(ev["errors"])))
        top = sorted(ev["statuses"].items(), key=lambda kv: -kv[1])
        w("hostile answers: %s" % "; ".join("%s x%d" % kv for kv in top[:24]))
        for e in ev["errors"][:5]:
            w("hostile client error: %s" % e)
        if ev["errors"]:
            log("hostile client errors: %s" % "\n  ".join(ev["errors"]))
    for name, proc in (("sluice-execd", x.proc), ("sluiced", d.proc)):
        if proc.poll() is not None:
            fails.append("%s exited (%s) during the soak" % (
                name, proc.returncode))
    w("sandboxes left before teardown: %s" % (", ".join(left_ids) or
                                              "none"))
    w("")
    w("checks failed: %d%s" % (len(fails), "" if not fails else
                               "\n  - " + "\n  - ".join(fails)))
    print("\n".join(out))
    sys.stdout.flush()
    if fails:
        raise Fail("soak: %d checks failed: %s" % (len(fails),
                                                    "; ".join(fails)))


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--evil":
        sys.exit(evil_main(sys.argv[2]))
    S.main()
