"""The approval half: a sandbox asks for a host its tier does not admit,
sluiced raises a prompt, the app's watch shows it and answers it; the
watch resumes with Last-Event-ID after its connection drops; a webhook
receiver checks sluiced's signature with sluice.webhook.verify."""

import http.server
import json
import os
import queue
import ssl
import threading
import time

import pytest

import sluice
from conftest import BROKER, CA, ENV, EXEC, WEB, uid, wait_for

WEB_PORT = int(WEB.rsplit(":", 1)[1].strip("/"))


class Collector:
    """Iterates a watch in a thread; items arrive in a queue."""

    def __init__(self, it):
        self.it = it
        self.q = queue.Queue()
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        try:
            for x in self.it:
                self.q.put(x)
        except Exception as e:      # noqa: BLE001
            self.q.put(e)

    def get(self, timeout=30):
        try:
            x = self.q.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("nothing came in %ss" % timeout) from None
        if isinstance(x, Exception):
            raise x
        return x

    def close(self):
        self.it.close()
        self.t.join(10)


def curl(sb, path="/", max_time=60):
    return sb.start(["curl", "-sS", "--max-time", str(max_time),
                     WEB.rstrip("/") + path])


def test_proxy_env(sandbox):
    r = sandbox.exec("echo $HTTP_PROXY")
    assert r.stdout.startswith("http://127.0.0.1:")


def test_allow_once_deny_allow_chat(make, client):
    sb = make(network="registries")
    b = client.broker
    w = Collector(b.prompts.watch(session=sb.session))
    try:
        cmd = curl(sb)
        p = w.get()
        assert isinstance(p, sluice.Prompt)
        assert (p.session, p.tenant, p.host, p.port, p.method, p.path,
                p.tier, p.ceiling, p.state) == (
            sb.session, "acme", "web.test", WEB_PORT, "GET", "/", "registries",
            "public", "pending")
        assert p.id.startswith("p-") and p.expires_in_s > 0
        assert p.target == "web.test:%d" % WEB_PORT
        assert [x.id for x in b.prompts.list()].count(p.id) == 1
        assert b.prompts.get(p.id).state == "pending"
        n = p.allow_once()
        assert n.state == "allow_once" and p.state == "allow_once"
        st = cmd.wait(timeout=60)
        assert st.exit_code == 0
        assert cmd.output(0).stdout.data == "hello from web.test\n"
        with pytest.raises(sluice.ConflictError):
            p.deny()                            # the first answer won
        # allow_once: the next request asks again; deny refuses it
        cmd = curl(sb)
        p = w.get()
        p.deny()
        cmd.wait(timeout=60)
        out = cmd.output(0).stdout.data
        assert "user_denied" in out and "hello" not in out
        # allow_chat grants the host and port: no prompt afterwards
        cmd = curl(sb)
        w.get().allow_chat()
        cmd.wait(timeout=60)
        assert cmd.output(0).stdout.data == "hello from web.test\n"
        assert sluice.Grant("web.test", WEB_PORT) in b.grants.list(sb.session)
        r = sb.exec(["curl", "-sS", "--max-time", "20", WEB])
        assert r.stdout == "hello from web.test\n"
        with pytest.raises(sluice.NotFoundError):
            b.prompts.get("p-0000000000000000")
    finally:
        w.close()


def test_watch_shows_pending(make, client):
    """A prompt raised before the watch started is shown first."""
    sb = make(network="registries")
    b = client.broker
    cmd = curl(sb, "/late")
    try:
        pid = wait_for(lambda: [p.id for p in b.prompts.list()
                                if p.session == sb.session], 20, "the prompt")[0]
    except AssertionError:
        raise AssertionError("no prompt; the command: %r %r" % (
            cmd.refresh(), cmd.output(0))) from None
    w = Collector(b.prompts.watch(session=sb.session))
    try:
        p = w.get()
        assert p.id == pid and p.path == "/late"
        p.deny()
        cmd.wait(timeout=60)
    finally:
        w.close()


def test_watch_resumes_with_last_event_id(make, forwarder):
    """The stream drops; a prompt is raised meanwhile; the watch comes
    back with Last-Event-ID and sluiced replays it (pending=False: the
    replay is the only way it can come)."""
    f = forwarder(BROKER)
    b = sluice.BrokerClient(f.path)
    direct = sluice.BrokerClient(BROKER)
    sb = make(network="registries")
    watch = b.prompts.watch(session=sb.session, pending=False)
    w = Collector(watch)
    try:
        wait_for(lambda: any(h.startswith(b"GET /v1/events") for h in
                             f.heads), 10, "the watch to connect")
        c1 = curl(sb, "/one")
        p1 = w.get()
        assert p1.path == "/one"
        p1.allow_once()
        c1.wait(timeout=60)
        seen_id = watch.events.last_event_id
        assert seen_id is not None
        f.pause()
        c2 = curl(sb, "/two")
        p2id = wait_for(lambda: [p.id for p in direct.prompts.list()
                                 if p.session == sb.session], 20,
                        "the prompt while the watch is away")[0]
        n = len(f.heads)
        f.resume()
        p2 = w.get()
        assert p2.id == p2id and p2.path == "/two"
        resumed = [h for h in f.heads[n:] if h.startswith(b"GET /v1/events")]
        assert resumed and (b"Last-Event-ID: %d" % seen_id) in resumed[0], \
            resumed
        assert watch.events.connects >= 2
        p2.allow_once()
        c2.wait(timeout=60)
        assert c2.output(0).stdout.data == "hello from web.test\n"
    finally:
        w.close()


def test_events_stream(make, client):
    b = client.broker
    ev = b.events()
    w = Collector(ev)
    try:
        wait_for(lambda: b.health()["approvers"] >= 1, 10, "the subscriber")
        sb = make()
        while True:
            e = w.get()
            if e.type == "session" and e.data.get("session", {}).get(
                    "id") == sb.session:
                break
        assert e.data["action"] == "create" and isinstance(e.id, int)
        sb.destroy()
        for _ in range(50):
            e = w.get()
            if e.type == "session" and e.data.get("action") == "delete":
                break
        assert ev.last_event_id == e.id
    finally:
        w.close()
    # a later stream from that id replays what came after it
    later = Collector(b.events(last_event_id=e.id - 1))
    try:
        assert later.get().id == e.id
    finally:
        later.close()


class Hook(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.got.append((dict(self.headers), body))
        reply = json.dumps(self.server.reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *a):
        pass


@pytest.fixture
def hook():
    srv = http.server.ThreadingHTTPServer(
        ("127.0.0.1", int(ENV["SLUICE_TEST_HOOK_PORT"])), Hook)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(CA, ENV["SLUICE_TEST_HOOK_KEY"])
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    srv.got = []
    srv.reply = {}
    t = threading.Thread(target=srv.serve_forever,
                         kwargs={"poll_interval": 0.1}, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_webhook_verify(make, client, hook):
    with open(ENV["SLUICE_TEST_HOOK_SECRET"], "rb") as f:
        secret = f.read()
    sb = make(network="registries")
    # the receiver answers the prompt: allow_once
    hook.reply = {"decision": "allow_once"}
    r = sb.exec(["curl", "-sS", "--max-time", "60", WEB])
    assert r.stdout == "hello from web.test\n", r
    h, body = wait_for(lambda: [g for g in hook.got if json.loads(g[1])
                                ["session"] == sb.session], 30,
                                "a delivery")[0]
    ts, sig = h["X-Sluice-Timestamp"], h["X-Sluice-Signature"]
    assert h["X-Sluice-Event"] == "prompt"
    assert h["X-Sluice-Delivery"] == json.loads(body)["id"]
    assert sluice.webhook.verify(secret, ts, body, sig)
    assert sluice.webhook.verify(secret.decode(), int(ts), body, sig)
    assert sluice.webhook.sign(secret, ts, body) == sig
    assert not sluice.webhook.verify(secret, ts, body + b" ", sig)
    assert not sluice.webhook.verify(b"another secret", ts, body, sig)
    assert not sluice.webhook.verify(secret, str(int(ts) + 1), body, sig)
    assert not sluice.webhook.verify(secret, ts, body, sig[:-1] + "0"
                                     if sig[-1] != "0" else sig[:-1] + "1")
    assert not sluice.webhook.verify(secret, ts, body, None)
    assert not sluice.webhook.verify(secret, "x", body, sig)
    # too old for the default tolerance, fine without one
    late = int(ts) + 3600
    assert not sluice.webhook.verify(secret, ts, body, sig, now=late)
    assert sluice.webhook.verify(secret, ts, body, sig, tolerance_s=None,
                                 now=late)
    rec = client.broker.prompts.get(json.loads(body)["id"])
    assert rec.state == "allow_once"


def test_connect_makes_an_approver(client):
    b = client.broker
    before = b.health()["approvers"]
    w = b.prompts.watch()
    assert b.health()["approvers"] == before          # lazy
    with w:                                           # connects
        assert w.events.connects == 1
        assert b.health()["approvers"] == before + 1
    wait_for(lambda: b.health()["approvers"] == before, 10, "the close")
    ev = b.events().connect()
    assert b.health()["approvers"] == before + 1
    ev.close()


def test_idle_stream_reconnects(client):
    """A stream silent for longer than idle_timeout (no event, no ping) is
    taken for dead and opened again, from where it was."""
    ev = client.broker.events(idle_timeout=0.5).connect()
    w = Collector(ev)
    try:
        wait_for(lambda: ev.connects >= 3, 10, "reconnects")
    finally:
        w.close()
