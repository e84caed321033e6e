#!/usr/bin/env python3
"""Prompts that hold the connection (issue: approvals): allow_once lets the
waiting clients through and the next connection asks again; 20 parallel
connections raise one prompt; allow_chat grants for later connections and
survives a restart; deny and its quiet period; timeout; a client that goes
away; two prompts answered out of order; the no-approver case; a ceiling
lowered with a prompt pending; curl waiting through a prompt of several
seconds.  The approver is an event-stream subscriber on the control
socket."""

import json
import os
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Suite, check, check_eq, api_unix, read_response,  # noqa: E402
                     read_head, read_body,
                     check_refusal, read_log, decisions, wait_until,
                     require_tool, log)

S = Suite("t_prompts", time_limit=300)


class Approver:
    """Holds GET /v1/events open on the control socket and collects the
    events; its presence is what makes sluiced ask instead of refusing."""

    def __init__(self, ctl):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(10)
        self.sock.connect(ctl)
        self.sock.sendall(b"GET /v1/events HTTP/1.1\r\nHost: x\r\n"
                          b"Accept: text/event-stream\r\n\r\n")
        self.events = []
        self.lock = threading.Lock()
        self.stop = False
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()
        wait_until(lambda: self.ready, 5, what="event stream head")

    ready = False

    def _run(self):
        buf = b""
        self.sock.settimeout(0.5)
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
            buf += d
            if not self.ready and b"\r\n\r\n" in buf:
                head, buf = buf.split(b"\r\n\r\n", 1)
                self.ready = b" 200 " in head.split(b"\r\n")[0]
            # the body is chunked: pull event blocks out of it loosely
            while b"\n\n" in buf:
                block, buf = buf.split(b"\n\n", 1)
                ev, data = None, None
                for line in block.split(b"\n"):
                    line = line.strip(b"\r")
                    if line.startswith(b"event:"):
                        ev = line[6:].strip().decode()
                    elif line.startswith(b"data:"):
                        data = line[5:].strip()
                if ev and data:
                    try:
                        with self.lock:
                            self.events.append((ev, json.loads(data)))
                    except ValueError:
                        pass

    def prompts(self):
        with self.lock:
            return [d for e, d in self.events if e == "prompt"]

    def close(self):
        self.stop = True
        self.sock.close()


def setup(env, tier="registries", ceiling="public", timeout_s=30, quiet_s=3,
          extra_sessions=()):
    up = env.http_upstream()
    sessions = [{"id": "c1", "tenant": "acme", "user": "alice",
                 "tier": tier}] + list(extra_sessions)
    cfg = env.config(sessions=sessions, ceiling=ceiling,
                     registries=["reg.test"],
                     ports=env.ports(up.port),
                     dns={"hosts": {"reg.test": ["127.0.0.1"],
                                    "ask.test": ["127.0.0.1"],
                                    "two.test": ["127.0.0.1"]}},
                     prompt={"timeout_s": timeout_s, "deny_quiet_s": quiet_s})
    d = env.sluiced(cfg)
    d.ctl = os.path.join(cfg["runtime_dir"], "control.sock")
    return d, up


def session_sock(d, sid="c1"):
    return d.session_socket(sid)


class Waiter(threading.Thread):
    """One client request through the session socket, on its own thread."""

    def __init__(self, d, host, port, connect=False, sid="c1"):
        super().__init__(daemon=True)
        self.d, self.host, self.port = d, host, port
        self.connect_ = connect
        self.sid = sid
        self.resp = None
        self.err = None
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(40)
        self.sock.connect(session_sock(d, sid))
        self.start()

    def run(self):
        try:
            if self.connect_:
                self.sock.sendall(b"CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n"
                                  % (self.host.encode(), self.port,
                                     self.host.encode(), self.port))
            else:
                self.sock.sendall(b"GET http://%s:%d/ok HTTP/1.1\r\nHost: %s:%d\r\n"
                                  b"Connection: close\r\n\r\n"
                                  % (self.host.encode(), self.port,
                                     self.host.encode(), self.port))
            r, rest = read_head(self.sock, timeout=40)
            # a CONNECT 200 has no body; a refusal has one
            r.body, r.leftover = read_body(
                self.sock, r, rest, 40,
                head_req=self.connect_ and r.status == 200)
            self.resp = r
        except Exception as e:          # reported by the test
            self.err = e
        finally:
            try:
                self.sock.close()
            except OSError:
                pass


def pending(d):
    r = api_unix(d.ctl, "GET", "/v1/prompts")
    check_eq(r.status, 200, "GET /v1/prompts")
    return r.json["prompts"]


def wait_prompts(d, n, timeout=5):
    wait_until(lambda: len(pending(d)) == n, timeout,
               what="%d pending prompt(s)" % n)
    return pending(d)


def answer(d, pid, decision, status=200):
    r = api_unix(d.ctl, "POST", "/v1/prompts/%s" % pid, {"decision": decision})
    check_eq(r.status, status, "answer %s %s" % (pid, decision))
    return r.json


def done(ws, timeout=20):
    for w in ws:
        w.join(timeout)
        check(not w.is_alive(), "a client still waits")
        check(w.err is None, "client error: %r", w.err)


@S.case
def allow_once_then_asks_again(env):
    d, up = setup(env)
    a = Approver(d.ctl)
    try:
        w = Waiter(d, "ask.test", up.port)
        ps = wait_prompts(d, 1)
        p = ps[0]
        check_eq((p["session"], p["host"], p["port"], p["method"]),
                 ("c1", "ask.test", up.port, "GET"), "prompt fields")
        check(p["expires_in_s"] > 0 and p["waiting"] == 1, "prompt %r", p)
        wait_until(lambda: any(x["id"] == p["id"] for x in a.prompts()), 3,
                   what="the prompt event")
        time.sleep(0.3)
        check(w.is_alive(), "the client was answered before the prompt")
        answer(d, p["id"], "allow_once")
        done([w])
        check_eq(w.resp.status, 200, "held request after allow_once")
        answer(d, p["id"], "deny", status=409)
        # the next connection asks again
        w2 = Waiter(d, "ask.test", up.port)
        ps2 = wait_prompts(d, 1)
        check(ps2[0]["id"] != p["id"], "a new prompt")
        answer(d, ps2[0]["id"], "allow_once")
        done([w2])
        allowed = decisions(d.log_path, decision="allow", host="ask.test")
        check(len(allowed) == 2 and all(r.get("rule") == "prompt" and
              r.get("answer") == "allow_once" and r.get("prompt")
              for r in allowed), "allow records %r", allowed)
        recs = [r for r in read_log(d.log_path)
                if r.get("event") in ("prompt", "prompt_answer")]
        check_eq(len(recs), 4, "prompt and prompt_answer records")
    finally:
        a.close()


@S.case
def twenty_connections_one_prompt(env):
    d, up = setup(env)
    a = Approver(d.ctl)
    try:
        ws = [Waiter(d, "ask.test", up.port, connect=(i % 2 == 0))
              for i in range(20)]
        wait_until(lambda: pending(d) and pending(d)[0]["waiting"] == 20, 10,
                   what="20 waiters on one prompt")
        check_eq(len(pending(d)), 1, "prompts for 20 connections")
        first = pending(d)[0]
        answer(d, first["id"], "allow_once")
        # allow_once releases what the approver was shown (the first
        # request's method and path); the other kind asks on its own,
        # all ten of them on one new prompt
        shown = [w for i, w in enumerate(ws)
                 if (i % 2 == 0) == (first["method"] == "CONNECT")]
        others = [w for w in ws if w not in shown]
        done(shown)
        check(all(w.resp.status == 200 for w in shown),
              "statuses %r", [w.resp.status for w in shown])
        wait_until(lambda: pending(d) and pending(d)[0]["waiting"] == 10, 10,
                   what="10 waiters on the second prompt")
        second = pending(d)[0]
        check(second["id"] != first["id"] and
              second["method"] != first["method"], "second prompt %r", second)
        answer(d, second["id"], "allow_once")
        done(others)
        check(all(w.resp.status == 200 for w in others),
              "statuses %r", [w.resp.status for w in others])
    finally:
        a.close()


class RawWaiter(threading.Thread):
    """Sends req (bytes) on the session socket and reads one answer."""

    def __init__(self, d, req, sid="c1"):
        super().__init__(daemon=True)
        self.req = req
        self.resp = None
        self.err = None
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(40)
        self.sock.connect(session_sock(d, sid))
        self.start()

    def run(self):
        try:
            self.sock.sendall(self.req)
            r, rest = read_head(self.sock, timeout=40)
            r.body, r.leftover = read_body(self.sock, r, rest, 40)
            self.resp = r
        except Exception as e:          # reported by the test
            self.err = e
        finally:
            try:
                self.sock.close()
            except OSError:
                pass


@S.case
def allow_once_releases_only_what_was_shown(env):
    """Issue 11, finding 11: "Allow once" for a prompt shown as GET
    /index.html must not release POST /upload requests that joined it."""
    d, up = setup(env)
    a = Approver(d.ctl)
    try:
        hp = b"ask.test:%d" % up.port
        get = RawWaiter(d, b"GET http://" + hp + b"/index.html HTTP/1.1\r\n"
                        b"Host: " + hp + b"\r\nConnection: close\r\n\r\n")
        p = wait_prompts(d, 1)[0]
        check_eq((p["method"], p["path"]), ("GET", "/index.html"),
                 "what the approver is shown")
        body = b"secret=" + b"x" * 64
        posts = [RawWaiter(d, b"POST http://" + hp + b"/upload HTTP/1.1\r\n"
                           b"Host: " + hp + b"\r\nContent-Length: %d\r\n"
                           b"Connection: close\r\n\r\n" % len(body) + body)
                 for _ in range(5)]
        wait_until(lambda: pending(d)[0]["waiting"] == 6, 10,
                   what="the posts joining the prompt")
        answer(d, p["id"], "allow_once")
        done([get])
        check_eq(get.resp.status, 200, "the shown GET")
        # the posts ask again, as what they are
        wait_until(lambda: pending(d) and pending(d)[0]["id"] != p["id"], 10,
                   what="a prompt for the posts")
        q = pending(d)[0]
        check_eq((q["method"], q["path"], q["waiting"]), ("POST", "/upload", 5),
                 "the second prompt")
        seen = [e["path"] for e in up.events]
        check("/upload" not in seen, "a post reached the upstream: %r", seen)
        answer(d, q["id"], "deny")
        done(posts)
        check(all(w.resp.status == 403 for w in posts),
              "post statuses %r", [w.resp.status for w in posts])
        seen = [e["path"] for e in up.events]
        check_eq(seen, ["/index.html"], "what the upstream saw")
    finally:
        a.close()


@S.case
def allow_chat_grants_and_survives_restart(env):
    d, up = setup(env)
    a = Approver(d.ctl)
    try:
        w = Waiter(d, "ask.test", up.port)
        p = wait_prompts(d, 1)[0]
        answer(d, p["id"], "allow_chat")
        done([w])
        check_eq(w.resp.status, 200, "held request after allow_chat")
        w2 = Waiter(d, "ask.test", up.port)
        done([w2])
        check_eq(w2.resp.status, 200, "later request, no prompt")
        check_eq(len(pending(d)), 0, "no new prompt")
        s = api_unix(d.ctl, "GET", "/v1/sessions/c1").json
        check({"host": "ask.test", "port": up.port} in s["grants"],
              "grant %r", s["grants"])
    finally:
        a.close()
    d.stop()
    d2 = env.sluiced(d.config)
    d2.ctl = d.ctl
    w3 = Waiter(d2, "ask.test", up.port)
    done([w3])
    check_eq(w3.resp.status, 200, "after a restart, without an approver")
    check(decisions(d2.log_path, host="ask.test", rule="grant"),
          "a decision by the grant after the restart")


@S.case
def deny_and_quiet_period(env):
    d, up = setup(env, quiet_s=2)
    a = Approver(d.ctl)
    try:
        w = Waiter(d, "ask.test", up.port)
        p = wait_prompts(d, 1)[0]
        answer(d, p["id"], "deny")
        done([w])
        check_refusal(w.resp, "user_denied", "denied prompt")
        t0 = time.monotonic()
        w2 = Waiter(d, "ask.test", up.port)
        done([w2])
        check_refusal(w2.resp, "user_denied", "within the quiet period")
        wait_until(lambda: any(e == "denied" and dd.get("reason") ==
                               "user_denied" and dd.get("host") == "ask.test"
                               for e, dd in list(a.events)), 3,
                   what="a denied event for the quiet refusal")
        check(time.monotonic() - t0 < 2, "the quiet refusal waited")
        check_eq(len(pending(d)), 0, "no prompt in the quiet period")
        time.sleep(2.2)
        w3 = Waiter(d, "ask.test", up.port)
        p3 = wait_prompts(d, 1)[0]
        answer(d, p3["id"], "allow_once")
        done([w3])
        check_eq(w3.resp.status, 200, "after the quiet period")
    finally:
        a.close()


@S.case
def timeout_denies(env):
    d, up = setup(env, timeout_s=1)
    a = Approver(d.ctl)
    try:
        t0 = time.monotonic()
        w = Waiter(d, "ask.test", up.port, connect=True)
        done([w])
        check_refusal(w.resp, "prompt_timeout", "unanswered prompt")
        el = time.monotonic() - t0
        check(0.8 < el < 5, "answered after %.1fs (timeout 1s)", el)
        check(any(r.get("answer") == "timeout" for r in read_log(d.log_path)
                  if r.get("event") == "prompt_answer"), "timeout record")
    finally:
        a.close()


@S.case
def client_goes_away(env):
    d, up = setup(env)
    a = Approver(d.ctl)
    try:
        w1 = Waiter(d, "ask.test", up.port)
        w2 = Waiter(d, "ask.test", up.port)
        wait_until(lambda: pending(d) and pending(d)[0]["waiting"] == 2, 5,
                   what="two waiters")
        w1.sock.shutdown(socket.SHUT_RDWR)
        wait_until(lambda: pending(d)[0]["waiting"] == 1, 5,
                   what="the first client withdrew")
        p = pending(d)[0]
        answer(d, p["id"], "allow_once")
        done([w2])
        check_eq(w2.resp.status, 200, "the remaining client")
        # a prompt with no waiters left stays answerable, and allow_chat
        # still grants
        w3 = Waiter(d, "two.test", up.port)
        p3 = wait_prompts(d, 1)[0]
        w3.sock.shutdown(socket.SHUT_RDWR)
        wait_until(lambda: pending(d)[0]["waiting"] == 0, 5,
                   what="no waiter")
        answer(d, p3["id"], "allow_chat")
        w4 = Waiter(d, "two.test", up.port)
        done([w4])
        check_eq(w4.resp.status, 200, "granted with nobody waiting")
    finally:
        a.close()


@S.case
def out_of_order_answers(env):
    d, up = setup(env)
    a = Approver(d.ctl)
    try:
        w1 = Waiter(d, "ask.test", up.port)
        w2 = Waiter(d, "two.test", up.port)
        ps = wait_prompts(d, 2)
        by_host = {p["host"]: p for p in ps}
        answer(d, by_host["two.test"]["id"], "deny")
        done([w2])
        check_refusal(w2.resp, "user_denied", "second prompt, answered first")
        check(w1.is_alive(), "the first client was answered too")
        answer(d, by_host["ask.test"]["id"], "allow_once")
        done([w1])
        check_eq(w1.resp.status, 200, "first prompt, answered second")
    finally:
        a.close()


@S.case
def no_approver(env):
    d, up = setup(env)
    w = Waiter(d, "ask.test", up.port)
    done([w])
    check_refusal(w.resp, "no_approver", "nobody to ask")
    check_eq(len(pending(d)), 0, "no prompt raised")


@S.case
def ceiling_lowered_with_prompt_pending(env):
    d, up = setup(env)
    a = Approver(d.ctl)
    try:
        w = Waiter(d, "ask.test", up.port)
        wait_prompts(d, 1)
        r = api_unix(d.ctl, "PUT", "/v1/ceiling", {"tier": "registries"})
        check_eq(r.status, 200, "lower the ceiling")
        done([w])
        check_refusal(w.resp, "above_ceiling", "prompt under a lowered ceiling")
        check_eq(len(pending(d)), 0, "the prompt is resolved")
        # sluiced's own deny starts no quiet period: raised again, the
        # same request asks again instead of user_denied
        r = api_unix(d.ctl, "PUT", "/v1/ceiling", {"tier": "public"})
        check_eq(r.status, 200, "raise the ceiling")
        w2 = Waiter(d, "ask.test", up.port)
        p2 = wait_prompts(d, 1)[0]
        answer(d, p2["id"], "allow_once")
        done([w2])
        check_eq(w2.resp.status, 200, "asked again after the ceiling rose")
    finally:
        a.close()


@S.case
def tier_lowered_with_prompt_pending(env):
    d, up = setup(env)
    r = api_unix(d.ctl, "POST", "/v1/sessions",
                 {"id": "c2", "tenant": "acme", "user": "bob",
                  "tier": "registries"})
    check_eq(r.status, 201, "create c2")
    a = Approver(d.ctl)
    try:
        w = Waiter(d, "ask.test", up.port, sid="c2")
        wait_prompts(d, 1)
        r = api_unix(d.ctl, "PATCH", "/v1/sessions/c2", {"tier": "off"})
        check_eq(r.status, 200, "lower the tier")
        done([w])
        check_refusal(w.resp, "tier_lowered", "prompt under a lowered tier")
        check_eq(len(pending(d)), 0, "the prompt is resolved")
    finally:
        a.close()


@S.case
def curl_waits_through_a_prompt(env):
    require_tool("curl")
    up = env.http_upstream()
    cfg = env.config(
        sessions=[{"id": "c1", "tenant": "acme", "user": "alice",
                   "tier": "registries", "source": env.src(1)}],
        ceiling="public", registries=["reg.test"], ports=env.ports(up.port),
        dns={"hosts": {"ask.test": ["127.0.0.1"]}},
        prompt={"timeout_s": 30, "deny_quiet_s": 5})
    d = env.sluiced(cfg)
    d.ctl = os.path.join(cfg["runtime_dir"], "control.sock")
    a = Approver(d.ctl)
    try:
        host, port = d.tcp_addr
        proc = subprocess.Popen(
            ["curl", "-sS", "--max-time", "30", "--interface", env.src(1),
             "-x", "http://%s:%d" % (host, port), "-o", "/dev/null",
             "-w", "%{http_code}", "http://ask.test:%d/ok" % up.port],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        p = wait_prompts(d, 1)[0]
        time.sleep(4)       # a person takes a while to answer
        check(proc.poll() is None, "curl gave up while waiting")
        answer(d, p["id"], "allow_once")
        out, err = proc.communicate(timeout=20)
        check_eq(out, b"200", "curl after a 4 s prompt (stderr %r)" % err)
    finally:
        a.close()


if __name__ == "__main__":
    S.main()
