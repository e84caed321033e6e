#!/usr/bin/env python3
"""The connection log held against a hostile app and a hostile sandbox
(issue 11): strings the app supplies are sanitised like the sandbox's
wherever they are shown; admin changes are written to the log before they
take effect and refused (503) when the disk is full, with no torn record
left behind; refusals are rate limited and folded per session; grants per
session are capped and their records carry the change; the chain can be
keyed (a MAC from a signer process) and anchored (sluicectl log verify
--anchor)."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, Skip, Fail, check, check_eq, api_unix,  # noqa: E402
                     read_response, read_head, read_body, get_request,
                     read_log,
                     verify_chain, wait_until, BUILDDIR, STRICT)

S = Suite("t_log_safety", time_limit=420)

# Raw, a terminal acts on these: none may leave sluiced or sluicectl.
RAW_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029"
                           "\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")
HOSTILE_USER = "ev\u202eil\u200b\u009bname"
SANITISED_USER = "ev?il??name"


def raw_clean(data, what):
    """data (bytes) as received holds no raw control, bidi or zero-width
    character."""
    text = data.decode("utf-8", "replace")
    m = RAW_FORBIDDEN.search(text)
    check(m is None, "%s: raw %r in %r", what, m and m.group(0),
          text[max(0, (m.start() if m else 0) - 40):][:120])


def ctl_path():
    p = os.path.join(BUILDDIR, "proxy", "sluicectl", "sluicectl")
    if not os.access(p, os.X_OK):
        raise Fail("sluicectl not built at %s" % p)
    return p


def sluicectl(*args, timeout=30):
    e = dict(os.environ)
    for k in ("SLUICE_CONTROL_SOCKET", "SLUICE_TOKEN"):
        e.pop(k, None)
    return subprocess.run([ctl_path()] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                          env=e, timeout=timeout)


def control_for_caller():
    """Root is admin on the control socket; another uid must be named."""
    return {} if os.geteuid() == 0 else {"admin_uids": [os.getuid()]}


def setup(env, sessions=None, **over):
    up = env.http_upstream()
    cfg = env.config(sessions=sessions if sessions is not None else [],
                     ports=env.ports(up.port),
                     dns={"hosts": {"up.test": ["127.0.0.1"],
                                    "bad.test": ["127.0.0.1"],
                                    "ask.test": ["127.0.0.1"]}},
                     state_file=env.path("state.json"),
                     control=control_for_caller(), **over)
    d = env.sluiced(cfg)
    d.ctl = os.path.join(cfg["runtime_dir"], "control.sock")
    return d, up


def call(d, method, path, body=None):
    return api_unix(d.ctl, method, path, body)


class Events:
    """GET /v1/events held open: the raw bytes, and its presence makes
    sluiced ask instead of refusing."""

    def __init__(self, ctl):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(10)
        self.sock.connect(ctl)
        self.sock.sendall(b"GET /v1/events HTTP/1.1\r\nHost: x\r\n"
                          b"Accept: text/event-stream\r\n\r\n")
        head, rest = read_head(self.sock)
        check_eq(head.status, 200, "event stream")
        self.data = bytearray(rest)
        self.lock = threading.Lock()
        self.stop = False
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        self.sock.settimeout(0.3)
        for _ in range(100000):
            if self.stop:
                return
            try:
                d = self.sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                return
            if not d:
                return
            with self.lock:
                self.data += d

    def raw(self):
        with self.lock:
            return bytes(self.data)

    def close(self):
        self.stop = True
        self.t.join(2)
        self.sock.close()


# ---------------------------------------------------------------------------
# Finding 18: app-supplied strings

@S.case
def app_strings_sanitised(env):
    """A user name with RLO, ZWSP and CSI (U+009B) is sanitised where every
    session is made: the API's answers, the event stream, prompts, the log
    records and the state file show '?' instead."""
    d, up = setup(env, ceiling="public")
    ev = Events(d.ctl)
    try:
        r = call(d, "POST", "/v1/sessions", {"id": "u1", "tenant": "acme",
                                             "user": HOSTILE_USER,
                                             "tier": "registries"})
        check_eq(r.status, 201, "create (%r)" % r.body[:200])
        raw_clean(r.body, "POST /v1/sessions")
        check_eq(r.json["user"], SANITISED_USER, "user as created")
        r = call(d, "GET", "/v1/sessions")
        raw_clean(r.body, "GET /v1/sessions")
        check_eq(r.json["sessions"][0]["user"], SANITISED_USER, "listed user")

        # a request the tier does not admit raises a prompt naming the user
        s = d.connect_unix("u1")
        s.sendall(get_request("http://ask.test:%d/x" % up.port))

        def prompt():
            r = call(d, "GET", "/v1/prompts")
            return r if r.json["prompts"] else None
        r = wait_until(prompt, 10, what="a prompt")
        raw_clean(r.body, "GET /v1/prompts")
        check_eq(r.json["prompts"][0]["user"], SANITISED_USER, "prompt user")
        r = call(d, "POST", "/v1/prompts/%s" % r.json["prompts"][0]["id"],
                 {"decision": "allow_once"})
        check_eq(r.status, 200, "answer")
        check_eq(read_response(s).status, 200, "allowed once")
        s.close()
        wait_until(lambda: b"prompt_resolved" in ev.raw(), 5,
                   what="prompt_resolved event")
        raw_clean(ev.raw(), "event stream")
        check(SANITISED_USER.encode() in ev.raw(), "user in the events")

        # sluicectl's text and JSON views of it
        for args in (("session", "list"), ("--json", "session", "show", "u1")):
            p = sluicectl("--socket", d.ctl, *args)
            check_eq(p.returncode, 0, "sluicectl %s (%r)" % (args, p.stderr))
            raw_clean(p.stdout, "sluicectl %s" % " ".join(args))
    finally:
        ev.close()
    check_eq(d.stop(), 0, "exit status")
    with open(env.path("state.json"), "rb") as f:
        state = f.read()
    raw_clean(state, "state file")
    users = [r.get("user") for r in read_log(d.log_path) if "user" in r]
    check(users and all(u in (SANITISED_USER, None) for u in users),
          "users in the log: %r", users)
    with open(d.log_path, "rb") as f:
        raw_clean(f.read(), "log file")
    # the harness's chain check also refuses any such character decoded



class RawAPI:
    """A stand-in control API on a Unix socket that answers every request
    with body (raw bytes, as a hostile or broken server might)."""

    def __init__(self, env, body):
        self.path = env.path("api.sock")
        self.body = body
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(self.path)
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.stop = False
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()
        env.closers.append(self.close)

    def _run(self):
        for _ in range(100000):
            if self.stop:
                return
            try:
                c, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            try:
                c.settimeout(5)
                buf = b""
                while b"\r\n\r\n" not in buf and len(buf) < 65536:
                    d = c.recv(65536)
                    if not d:
                        break
                    buf += d
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/"
                          b"json\r\nContent-Length: %d\r\nConnection: "
                          b"close\r\n\r\n" % len(self.body) + self.body)
            except OSError:
                pass
            finally:
                c.close()

    def close(self):
        self.stop = True
        self.t.join(2)
        self.sock.close()


@S.case
def sluicectl_escapes(env):
    """sluicectl shows nothing a terminal would act on, whatever the server
    or the log file holds: tables and fields are sanitised, and the --json
    views (the API's body, the log's lines) carry such characters as
    \\uXXXX escapes, still the same JSON."""
    doc = {"id": "u1", "tenant": "acme", "user": HOSTILE_USER + "\x1b[2J",
           "tier": "public", "transport": "unix", "socket": "/x",
           "grants": [], "counters": {}}
    body = json.dumps(doc, ensure_ascii=False).encode()
    api = RawAPI(env, body)
    for args in (("session", "show", "u1"), ("--json", "session", "show",
                                              "u1")):
        p = sluicectl("--socket", api.path, *args)
        check_eq(p.returncode, 0, "sluicectl %s (%r)" % (args, p.stderr))
        raw_clean(p.stdout, "sluicectl %s" % " ".join(args))
        if args[0] == "--json":
            check_eq(json.loads(p.stdout)["user"], doc["user"],
                     "--json: the same JSON")
    # a log line holding them raw (sluiced writes them escaped)
    lg = env.path("hostile.jsonl")
    rec = {"ts": "2024-05-01T10:00:00.000Z", "seq": 1, "event": "decision",
           "session": "u1", "user": HOSTILE_USER, "host": "a\u202eb.test",
           "prev": "0" * 64}
    with open(lg, "wb") as f:
        f.write(json.dumps(rec, ensure_ascii=False).encode() + b"\n")
    for args in (("log", "query", "--log", lg),
                 ("--json", "log", "query", "--log", lg)):
        p = sluicectl(*args)
        check_eq(p.returncode, 0, "sluicectl %s (%r)" % (args, p.stderr))
        raw_clean(p.stdout, "sluicectl %s" % " ".join(args))
        check(b"u1" in p.stdout, "the record shown: %r" % p.stdout)
        if args[0] == "--json":
            check_eq(json.loads(p.stdout)["user"], HOSTILE_USER,
                     "log --json: the same JSON")


# ---------------------------------------------------------------------------
# Finding 8: refusal records

def read_responses(sock, k):
    """k pipelined answers (what one read brings of the next is kept)."""
    out, rest = [], b""
    for _ in range(k):
        r, rest = read_head(sock, pre=rest)
        r.body, rest = read_body(sock, r, rest)
        out.append(r)
    return out


def flood(d, src, n, per_conn, host="bad.test"):
    """n refused plain-HTTP requests, per_conn pipelined on each keep-alive
    connection; returns the answers' reasons."""
    reasons = []
    while len(reasons) < n:
        k = min(per_conn, n - len(reasons))
        s = d.connect(src)
        s.sendall(get_request("http://%s/x" % host) * k)
        reasons += [r.sluice_reason for r in read_responses(s, k)]
        s.close()
    return reasons


def metric(d, name):
    r = call(d, "GET", "/v1/metrics")
    for line in r.body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise Fail("no %s in the metrics" % name)


@S.case
def refusals_rate_limited(env):
    """300 refusals of one session in a burst: a token bucket per session
    (log.refusals_per_s, log.refusal_burst) lets a few records through
    and folds the rest into refusals_folded records that count them by
    reason; the answers and the decision counters are those of every
    refusal."""
    d, up = setup(env, sessions=[{"id": "s1", "tenant": "acme",
                                  "user": "alice", "tier": "public",
                                  "source": env.src(1)}],
                  deny_hosts=["bad.test"],
                  log={"refusals_per_s": 5, "refusal_burst": 10})
    t0 = time.monotonic()
    got = flood(d, env.src(1), 300, 50)
    elapsed = time.monotonic() - t0
    check_eq(set(got), {"admin_deny"}, "answers")
    # connections that name no session share one bucket
    got = flood(d, env.src(9), 40, 1, host="up.test")
    check_eq(set(got), {"session_unknown"}, "unknown source")

    def folded(sid):
        return [r for r in read_log(d.log_path)
                if r.get("event") == "refusals_folded" and
                r.get("session") == sid]
    wait_until(lambda: folded("s1") and folded(None), 5,
               what="refusals_folded records")
    check_eq(metric(d, 'sluice_decisions_total{decision="deny",'
                    'reason="admin_deny"}'), 300, "decisions counted")
    check_eq(d.stop(), 0, "exit status")
    recs = read_log(d.log_path)
    one = [r for r in recs if r.get("event") == "decision" and
           r.get("session") == "s1"]
    fo = folded("s1")
    check(len(one) <= 10 + 5 * (elapsed + 2) + 1,
          "%d refusal records of s1 in %.1f s (burst 10, 5/s)", len(one),
          elapsed)
    check_eq(len(one) + sum(r["folded"] for r in fo), 300,
             "records + folded")
    check_eq(sum(r["reasons"].get("admin_deny", 0) for r in fo),
             sum(r["folded"] for r in fo), "folded by reason")
    check(all(r["tenant"] == "acme" and r["user"] == "alice" and
              re.match(r"^\d{4}-\d\d-\d\dT", r["since"]) for r in fo),
          "refusals_folded fields: %r", fo[:1])
    nob = [r for r in recs if r.get("event") == "decision" and
           r.get("reason") == "session_unknown"]
    check_eq(len(nob) + sum(r["folded"] for r in folded(None)), 40,
             "no-session records + folded")
    check(len(nob) <= 10 + 5 * (elapsed + 4) + 1, "%d no-session records",
          len(nob))


@S.case
def connection_closed_after_refusals(env):
    """limits.max_refusals_per_conn: the request after that many refusals
    on one keep-alive connection is answered 429 too_many_refusals and the
    connection closed."""
    d, up = setup(env, sessions=[{"id": "s1", "tenant": "acme",
                                  "user": "alice", "tier": "public",
                                  "source": env.src(1)}],
                  deny_hosts=["bad.test"],
                  limits={"max_refusals_per_conn": 3})
    s = d.connect(env.src(1))
    s.sendall(get_request("http://bad.test/x") * 5)
    got = [(r.status, r.sluice_reason, (r.header("Connection") or "").lower())
           for r in read_responses(s, 4)]
    check_eq(got, [(403, "admin_deny", "keep-alive")] * 3 +
             [(429, "too_many_refusals", "close")], "answers")
    s.settimeout(5)
    check_eq(s.recv(4096), b"", "closed after the answer")
    s.close()
    # a new connection starts afresh
    check_eq(flood(d, env.src(1), 2, 2), ["admin_deny"] * 2, "new connection")
    check(any(r.get("reason") == "too_many_refusals"
              for r in read_log(d.log_path)), "too_many_refusals record")


@S.case
def low_space_warned(env):
    """log.min_free_bytes above what the log's file system has free: a
    warning on standard error, log.low_space in /v1/health and
    sluice_log_low_space 1, before the disk is full."""
    d, up = setup(env, log={"min_free_bytes": 1 << 49})
    h = call(d, "GET", "/v1/health").json
    check(h["log"]["low_space"] is True and
          isinstance(h["log"]["free_bytes"], int) and
          h["log"]["free_bytes"] < 1 << 49, "health.log: %r", h["log"])
    check_eq(metric(d, "sluice_log_low_space"), 1, "sluice_log_low_space")
    check(metric(d, "sluice_log_free_bytes") > 0, "sluice_log_free_bytes")
    wait_until(lambda: "below log.min_free_bytes" in d.stderr(), 5,
               what="the low-space warning")
    check_eq(d.stop(), 0, "exit status")
    d2, _ = setup(env, log={"min_free_bytes": 0})
    h = call(d2, "GET", "/v1/health").json
    check(h["log"]["low_space"] is False, "health.log: %r", h["log"])
    check_eq(metric(d2, "sluice_log_low_space"), 0, "sluice_log_low_space")

# ---------------------------------------------------------------------------
# Finding 16: grants per session

@S.case
def grants_capped_and_logged_as_changes(env):
    """limits.max_grants_per_session caps a session's grants (409
    too_many_grants, nothing changes), and each grant record names the
    change and the count after it: its size does not grow with the list."""
    d, up = setup(env, limits={"max_grants_per_session": 5})
    r = call(d, "POST", "/v1/sessions", {"id": "g1", "tenant": "acme",
                                         "user": "alice", "tier": "off"})
    check_eq(r.status, 201, "create")
    hosts = ["%s%d.test" % (("h" * 60 + ".") * 4, i) for i in range(6)]
    for h in hosts[:5]:
        r = call(d, "POST", "/v1/sessions/g1/grants", {"host": h, "port": 443})
        check_eq(r.status, 201, "grant %s..." % h[-8:])
    r = call(d, "POST", "/v1/sessions/g1/grants", {"host": hosts[5],
                                                   "port": 443})
    check(r.status == 409 and r.json["error"]["code"] == "too_many_grants",
          "sixth grant: %d %r", r.status, r.body[:200])
    g = call(d, "GET", "/v1/sessions/g1").json["grants"]
    check_eq(len(g), 5, "grants after the refused one")
    # granting what is there already changes nothing, so it is no refusal
    r = call(d, "POST", "/v1/sessions/g1/grants", {"host": hosts[0],
                                                   "port": 443})
    check_eq(r.status, 200, "a grant the session has")
    r = call(d, "DELETE", "/v1/sessions/g1/grants/%s:443" % hosts[0])
    check_eq(r.status, 200, "remove one")
    r = call(d, "POST", "/v1/sessions/g1/grants", {"host": hosts[5],
                                                   "port": 443})
    check_eq(r.status, 201, "a grant with room again")

    recs = [x for x in read_log(d.log_path) if x.get("event") == "admin" and
            x.get("action") in ("grant_add", "grant_remove")]
    check_eq([x["action"] for x in recs], ["grant_add"] * 5 +
             ["grant_remove", "grant_add"], "grant records")
    for i, x in enumerate(recs):
        check("before" not in x and "after" not in x,
              "grant record %d carries the lists: %r", i, sorted(x))
        check_eq(x["grant"]["port"], 443, "grant record %d port" % i)
    check_eq([x["grants"] for x in recs], [1, 2, 3, 4, 5, 4, 5],
             "counts after each change")
    check_eq([x["grant"]["host"] for x in recs],
             hosts[:5] + [hosts[0], hosts[5]], "hosts of the changes")
    with open(d.log_path, "rb") as f:
        lines = [ln for ln in f.read().split(b"\n")
                 if b'"action":"grant_' in ln]
    sizes = [len(ln) for ln in lines]
    check(max(sizes) - min(sizes) < 64, "grant record sizes grow with the "
          "list: %r", sizes)

# ---------------------------------------------------------------------------
# Finding 10: a keyed, anchored chain

def write_key(env, name="mac.key", mode=0o600):
    path = env.path(name)
    key = os.urandom(32)
    with open(path, "wb") as f:
        f.write(key)
    os.chmod(path, mode)
    return path, key


def lines_of(path):
    with open(path, "rb") as f:
        return f.read().split(b"\n")[:-1]


def write_lines(path, lines):
    with open(path, "wb") as f:
        f.write(b"".join(ln + b"\n" for ln in lines))


def rechain(lines, prev, seq):
    """Renumber and rechain lines as someone without the key would: seq,
    prev and hash made right again, the macs left as they were."""
    import hashlib
    out = []
    for ln in lines:
        m = re.match(rb'^(.*),"hash":"([0-9a-f]{64})"(,"mac":"[0-9a-f]{64}")?}$',
                     ln)
        check(m, "not a record: %r" % ln[:80])
        body, mac = m.group(1), m.group(3) or b""
        body = re.sub(rb'"seq":\d+,', b'"seq":%d,' % seq, body, count=1)
        body = re.sub(rb'"prev":"[0-9a-f]{64}"$', b'"prev":"%s"' % prev, body)
        h = hashlib.sha256(body).hexdigest().encode()
        out.append(body + b',"hash":"' + h + b'"' + mac + b"}")
        prev, seq = h, seq + 1
    return out


def verify(path, *args):
    p = sluicectl("--json", "log", "verify", "--file", path, *args)
    doc = json.loads(p.stdout) if p.stdout.strip() else {}
    return p.returncode, doc


def proc_children(pid):
    kids = []
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/children" % (pid, t)) as f:
                kids += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return kids


def proc_status(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def memory_holds(pid, needle):
    """Whether needle is anywhere in the readable memory of pid (root)."""
    with open("/proc/%d/maps" % pid) as f:
        maps = f.read().splitlines()
    with open("/proc/%d/mem" % pid, "rb", 0) as mem:
        for m in maps:
            addr, perms = m.split()[:2]
            if perms[0] != "r" or m.endswith("[vvar]") or \
                    m.endswith("[vsyscall]"):
                continue
            lo, hi = (int(x, 16) for x in addr.split("-"))
            if hi - lo > 1 << 30:
                continue
            try:
                mem.seek(lo)
                if needle in mem.read(hi - lo):
                    return True
            except (OSError, ValueError, OverflowError):
                continue
    return False


@S.case
def keyed_log_and_anchors(env):
    """log.mac_key_file: a signer process of its own reads the key (the
    proxy never holds it) and every record carries a mac; sluicectl log
    verify --key finds a record removed and the chain made right again,
    --anchor SEQ:HASH (the head /v1/health shows) finds a cut head, a cut
    tail and a rewrite; each start and reopen names the head it follows."""
    key_path, key = write_key(env)
    sessions = [{"id": "s1", "tenant": "acme", "user": "alice",
                 "tier": "public", "source": env.src(1)}]
    d, up = setup(env, sessions=sessions, deny_hosts=["bad.test"],
                  log={"mac_key_file": key_path})
    for host in ("up.test", "bad.test", "up.test", "bad.test"):
        s = d.connect(env.src(1))
        s.sendall(get_request("http://%s:%d/k" % (host, up.port),
                              headers=[("Connection", "close")]))
        read_response(s)
        s.close()
    check_eq(call(d, "PUT", "/v1/ceiling", {"tier": "registries"}).status, 200,
             "an admin change")
    h = call(d, "GET", "/v1/health").json["log"]
    recs = read_log(d.log_path)
    check_eq((h["keyed"], h["seq"], h["hash"]),
             (True, recs[-1]["seq"], recs[-1]["hash"]), "health.log head")
    check_eq(metric(d, "sluice_log_last_seq"), recs[-1]["seq"], "metric seq")
    r = call(d, "GET", "/v1/metrics")
    check(('sluice_log_head_info{seq="%d",hash="%s"} 1' %
           (recs[-1]["seq"], recs[-1]["hash"])).encode() in r.body,
          "sluice_log_head_info")
    mid = "%d:%s" % (h["seq"], h["hash"])
    start = [x for x in recs if x.get("action") == "start"][0]
    check_eq((start["anchor_seq"], start["anchor_hash"], start["keyed"]),
             (0, "0" * 64, True), "start record of a new log")
    check(all(re.match("^[0-9a-f]{64}$", x.get("mac", "")) for x in recs),
          "a record without a mac")

    # the key never entered the proxy process; a child holds it
    if os.geteuid() == 0:
        check(not memory_holds(d.pid, key), "the key is in the proxy's "
              "memory")
        kids = [k for k in proc_children(d.pid)
                if proc_status(k).get("Name") == "sluiced-sign"]
        check_eq(len(kids), 1, "one signer process")
        st = proc_status(kids[0])
        check_eq((st["CapEff"], st["CapPrm"], st["NoNewPrivs"]),
                 ("0000000000000000", "0000000000000000", "1"),
                 "the signer's privileges")
        check(memory_holds(kids[0], key), "the signer holds the key")
    elif STRICT:
        raise Fail("the memory checks need root")

    # a restart continues the signed chain, its start naming the head
    check_eq(d.stop(), 0, "exit status")
    last = read_log(d.log_path)[-1]
    d2, _ = setup(env, sessions=sessions, deny_hosts=["bad.test"],
                  log={"mac_key_file": key_path})
    d.skip_chain = True
    start = [x for x in read_log(d2.log_path)
             if x.get("action") == "start"][-1]
    check_eq((start["anchor_seq"], start["anchor_hash"]),
             (last["seq"], last["hash"]), "start record after a restart")
    # a rotation: the reopen record names the old file's last record
    old = d2.log_path + ".1"
    os.rename(d2.log_path, old)
    last = read_log(old)[-1]
    d2.signal(signal.SIGHUP)
    wait_until(lambda: any(x.get("action") == "reload"
                           for x in read_log(d2.log_path)), 5,
               what="the reload record")
    first = read_log(d2.log_path)[0]
    check_eq((first["action"], first["anchor_seq"], first["anchor_hash"],
              first["prev"]), ("reopen", last["seq"], last["hash"],
                               last["hash"]), "the reopen record")
    check_eq(d2.stop(), 0, "exit status")
    d2.chain_paths = [old, d2.log_path]

    rc, doc = verify(old, "--key", key_path)
    check(rc == 0 and doc["macs"] == doc["records"] > 0, "verify --key: %r"
          % doc)
    rc, doc = verify(d2.log_path, "--key", key_path, "--prev", last["hash"])
    check(rc == 0 and doc["macs"] == doc["records"], "the new file: %r" % doc)
    other, _ = write_key(env, "other.key")
    rc, doc = verify(old, "--key", other)
    check(rc == 1 and "mac does not match" in doc["error"],
          "another key: %r" % doc)
    rc, doc = verify(old, "--anchor", mid)
    check(rc == 0 and doc["anchors"] == 1, "the anchor: %r" % doc)

    lines = lines_of(old)
    n_mid = int(mid.split(":")[0])
    # a record removed and the rest rechained: only the key (or an
    # anchor after it) sees it
    side = env.path("rechained.jsonl")
    write_lines(side, lines[:2] + rechain(lines[3:], json.loads(
        lines[1])["hash"].encode(), json.loads(lines[2])["seq"]))
    rc, doc = verify(side)
    check_eq(rc, 0, "a rechained log without the key verifies (%r)" % doc)
    rc, doc = verify(side, "--key", key_path)
    check(rc == 1 and doc["line"] == 3 and "mac does not match" in
          doc["error"], "rechained, with the key: %r" % doc)
    rc, doc = verify(side, "--anchor", mid)
    check(rc == 1 and "does not have the anchor's hash" in doc["error"],
          "rechained, with the anchor: %r" % doc)
    # the head cut
    write_lines(side, lines[n_mid:])
    check_eq(verify(side)[0], 0, "a cut head verifies alone")
    rc, doc = verify(side, "--anchor", mid)
    check(rc == 1 and "the file begins at seq" in doc["error"],
          "cut head: %r" % doc)
    # the tail cut
    write_lines(side, lines[:n_mid - 1])
    check_eq(verify(side)[0], 0, "a cut tail verifies alone")
    rc, doc = verify(side, "--anchor", mid)
    check(rc == 1 and "the file ends at seq" in doc["error"],
          "cut tail: %r" % doc)
    # the text output names the head for the next anchor
    p = sluicectl("log", "verify", "--file", old, "--key", key_path)
    check(b"mac(s) verified" in p.stdout and
          ("last record seq %d hash %s" % (last["seq"], last["hash"])
           ).encode() in p.stdout, "verify text: %r" % p.stdout)


@S.case
def signer_refuses_and_fails_closed(env):
    """A key the proxy's user could read is refused at start; a signer
    that is gone means no record and no connection (log_unavailable)."""
    bad, _ = write_key(env, "loose.key", 0o644)
    cfg = env.config(log={"mac_key_file": bad})
    d = env.sluiced(cfg, start=False)
    try:
        d.start(ready_timeout=5)
        raise Fail("sluiced started with a key others may read")
    except Fail as e:
        if "started with" in str(e):
            raise
    wait_until(lambda: not d.alive() and "no access for group and others"
               in d.stderr(), 5, what="sluiced to exit saying why")
    short = env.path("short.key")
    with open(short, "wb") as f:
        f.write(b"x" * 8)
    os.chmod(short, 0o600)
    d = env.sluiced(env.config(log={"mac_key_file": short}), start=False,
                    name="short")
    try:
        d.start(ready_timeout=5)
        raise Fail("sluiced started with an 8-byte key")
    except Fail as e:
        if "started with" in str(e):
            raise
    wait_until(lambda: not d.alive() and "at least 32 wanted" in
               d.stderr(), 5, what="sluiced to exit on a short key")

    key_path, _ = write_key(env)
    d, up = setup(env, sessions=[{"id": "s1", "tenant": "acme",
                                  "user": "alice", "tier": "public",
                                  "source": env.src(1)}],
                  log={"mac_key_file": key_path})
    kids = [k for k in proc_children(d.pid)
            if proc_status(k).get("Name") == "sluiced-sign"]
    check_eq(len(kids), 1, "one signer process")
    os.kill(kids[0], signal.SIGKILL)    # sluiced's child, by its pid
    time.sleep(0.3)
    s = d.connect(env.src(1))
    s.sendall(get_request("http://up.test:%d/x" % up.port,
                          headers=[("Connection", "close")]))
    r = read_response(s)
    s.close()
    check_eq((r.status, r.sluice_reason), (503, "log_unavailable"),
             "a request with no signer")
    wait_until(lambda: "log signer: no mac" in d.stderr(), 5,
               what="the signer error on stderr")

# ---------------------------------------------------------------------------
# Finding 7: the disk full under the log

def mntns_ino():
    return os.stat("/proc/self/ns/mnt").st_ino


@S.case
def disk_full_admin_changes(env):
    """The log on a 256 KiB tmpfs, filled up: every admin change is refused
    with 503 log_unavailable and not made (GET shows the old state), the
    file ends on a whole record (the short write was cut back) and
    verifies; with room again the next change is logged on the chain."""
    if os.geteuid() != 0:
        raise Skip("needs root for a mount namespace of its own")
    for t in ("unshare", "mount"):
        if subprocess.run(["which", t], stdout=subprocess.DEVNULL).returncode:
            raise Skip("%s not installed" % t)
    try:
        r = subprocess.run(["unshare", "-m", "--propagation", "private",
                            sys.executable, os.path.abspath(__file__),
                            "--mnt-child", str(mntns_ino())],
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=180)
    except subprocess.TimeoutExpired:
        raise Fail("the disk-full child did not finish in 180 s")
    err = r.stderr.decode(errors="replace")
    if r.returncode != 0 and err.startswith("unshare:"):
        raise Skip("no mount namespace: %s" % err.strip())
    if r.returncode == 77:
        raise Skip("disk-full child: %s" % err.strip().splitlines()[-1:])
    check(r.returncode == 0, "disk-full child failed (%d):\n%s",
          r.returncode, err[-6000:])


def fill(path):
    """Write path until the file system is full (bounded)."""
    chunk = b"x" * 65536
    with open(path, "wb", buffering=0) as f:
        for size in (65536, 4096, 512, 1):
            for _ in range(10000):
                try:
                    f.write(chunk[:size])
                except OSError:
                    break


def expect_503(r, what):
    check(r.status == 503 and isinstance(r.json, dict) and
          r.json.get("error", {}).get("code") == "log_unavailable",
          "%s: %d %r, want 503 log_unavailable", what, r.status, r.body[:300])


def whole_records(path):
    with open(path, "rb") as f:
        data = f.read()
    check(data.endswith(b"\n"), "the log ends in a partial line: %r",
          data[-120:])
    return verify_chain([path])


def until_refused(d, what, attempt, unchanged, tries=100):
    """attempt(i) until it is refused with 503 log_unavailable.  While the
    disk is full a change that fits in the page the log still has is
    made and logged: each success must add one record, the refusal none,
    and unchanged() checks the refused change did not happen."""
    n = len(whole_records(d.log_path))
    for i in range(tries):
        r = attempt(i)
        after = len(whole_records(d.log_path))
        if r.status in (200, 201):
            check_eq(after, n + 1, "%s %d: records for a change made" %
                     (what, i))
            n = after
            continue
        expect_503(r, what)
        check_eq(after, n, "%s: records for a refused change" % what)
        unchanged(i)
        return i
    raise Fail("%s: never refused in %d tries on a full disk" % (what, tries))


def disk_full_child(env, mnt):
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k,mode=0755",
                    "tmpfs", mnt], check=True, timeout=10)
    try:
        d, up = setup(env, log={"path": os.path.join(mnt, "conn.jsonl")})
        r = call(d, "POST", "/v1/sessions", {"id": "k0", "tenant": "acme",
                                             "user": "alice",
                                             "tier": "public"})
        check_eq(r.status, 201, "create k0")
        fill(os.path.join(mnt, "filler"))

        def grants(sid="k0"):
            r = call(d, "GET", "/v1/sessions/%s" % sid)
            check_eq(r.status, 200, "GET %s" % sid)
            return sorted(g["host"] for g in r.json["grants"])

        granted = []

        def grant(i):
            r = call(d, "POST", "/v1/sessions/k0/grants",
                     {"host": "g%03d.test" % i, "port": 443})
            if r.status == 201:
                granted.append("g%03d.test" % i)
            return r
        until_refused(d, "grant add", grant,
                      lambda i: check_eq(grants(), granted, "grants"), 400)

        def create(i):
            return call(d, "POST", "/v1/sessions", {
                "id": "k%d" % (i + 1), "tenant": "acme", "user": "bob",
                "tier": "public"})

        def not_created(i):
            sid = "k%d" % (i + 1)
            check_eq(call(d, "GET", "/v1/sessions/%s" % sid).status, 404,
                     "%s after a refused create" % sid)
            check(not os.path.exists(d.session_socket(sid)),
                  "%s's socket left behind" % sid)
        until_refused(d, "session create", create, not_created)

        tiers = ["registries", "public"]

        def ceiling(i):
            return call(d, "PUT", "/v1/ceiling", {"tier": tiers[i % 2]})

        def ceiling_kept(i):
            check_eq(call(d, "GET", "/v1/ceiling").json["tier"],
                     tiers[(i + 1) % 2] if i else "public",
                     "ceiling after a refused set")
        until_refused(d, "ceiling set", ceiling, ceiling_kept)

        def tier(i):
            return call(d, "PATCH", "/v1/sessions/k0",
                        {"tier": ["off", "public"][i % 2]})

        def tier_kept(i):
            check_eq(call(d, "GET", "/v1/sessions/k0").json["tier"],
                     ["off", "public"][(i + 1) % 2] if i else "public",
                     "tier after a refused change")
        until_refused(d, "set tier", tier, tier_kept)

        removed = []

        def remove(i):
            r = call(d, "DELETE", "/v1/sessions/k0/grants/%s:443"
                     % granted[i])
            if r.status == 200:
                removed.append(granted[i])
            return r
        until_refused(d, "grant remove", remove, lambda i: check_eq(
            grants(), sorted(set(granted) - set(removed)), "grants"))
        # k0's record holds all its grants: bigger than any page left
        until_refused(d, "session delete", lambda i: call(
            d, "DELETE", "/v1/sessions/k0"), lambda i: grants(), 1)

        # what the API says is what the state file and the log say
        with open(env.path("state.json")) as f:
            state = json.load(f)
        st = dict((s["id"], s) for s in state["sessions"])
        live = call(d, "GET", "/v1/sessions").json["sessions"]
        check_eq(sorted(st), sorted(s["id"] for s in live),
                 "sessions in the state file")
        check_eq(sorted(g["host"] for g in st["k0"]["grants"]), grants(),
                 "grants in the state file")
        p = sluicectl("log", "verify", "--file", d.log_path)
        check_eq(p.returncode, 0, "sluicectl log verify: %r" % p.stdout)

        # room again: the next change is logged on the same chain
        os.unlink(os.path.join(mnt, "filler"))
        r = call(d, "POST", "/v1/sessions/k0/grants",
                 {"host": "after.test", "port": 443})
        check_eq(r.status, 201, "grant with room again (%r)" % r.body[:200])
        recs = whole_records(d.log_path)
        check_eq(recs[-1].get("action"), "grant_add", "the last record")
        check_eq(recs[-1]["seq"], recs[-2]["seq"] + 1, "seq continues")
        check_eq(d.stop(), 0, "exit status")
        whole_records(d.log_path)
    finally:
        for dd in env.daemons:
            try:
                dd.stop(timeout=5)
            except Exception:
                pass
        subprocess.run(["umount", "-l", mnt], timeout=10)


def mnt_child(host_ino):
    """Inside a mount namespace of its own: the case's daemon and a tmpfs
    that nobody outside sees."""
    import tempfile
    import traceback
    from harness import Env
    if mntns_ino() == host_ino:
        sys.stderr.write("refusing: still in the host mount namespace\n")
        return 1
    root = tempfile.mkdtemp(prefix="sluice-t_log_safety-mnt.")
    env = Env(root, "disk_full")
    mnt = env.path("logfs")
    os.mkdir(mnt)
    try:
        disk_full_child(env, mnt)
        return 0
    except Skip as e:
        sys.stderr.write("%s\n" % e)
        return 77
    except Exception:
        sys.stderr.write(traceback.format_exc())
        for d in env.daemons:
            sys.stderr.write("--- sluiced stderr:\n%s\n" % d.stderr())
        return 1
    finally:
        env.close()
        subprocess.run(["rm", "-rf", root], timeout=30)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--mnt-child":
        sys.exit(mnt_child(int(sys.argv[2])))
    S.main()
