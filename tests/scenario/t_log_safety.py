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
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, Skip, Fail, check, check_eq, api_unix,  # noqa: E402
                     read_response, read_head, get_request, read_log,
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

if __name__ == "__main__":
    S.main()
