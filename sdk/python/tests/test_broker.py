"""The broker (sluiced's control API): sessions, grants, ceilings (admin),
health and metrics, over the Unix socket (role app from the groups) and
TLS with tokens; and the executor over TLS with tenant-bound tokens."""

import ssl

import pytest

import sluice
from conftest import (BROKER, BROKER_URL, CA, EXEC, EXEC_URL, TOKENS, uid)


def test_sessions_and_grants(broker):
    sid = uid("chat")
    s = broker.sessions.create(sid, "acme", "alice", "registries")
    try:
        assert (s.id, s.tenant, s.user, s.tier, s.transport) == (
            sid, "acme", "alice", "registries", "unix")
        assert s.socket and s.socket.endswith("/%s/proxy.sock" % sid)
        assert sid in [x.id for x in broker.sessions.list()]
        assert broker.sessions.get(sid).effective_tier == "registries"
        assert broker.sessions.set_tier(sid, "public").tier == "public"
        with pytest.raises(sluice.ConflictError) as ei:
            broker.sessions.create(sid, "acme", "alice", "off")
        assert ei.value.code == "conflict"
        g = broker.grants.add(sid, "Example.ORG", 8443)
        assert (g.host, g.port) == ("example.org", 8443)
        broker.grants.add(sid, "2001:db8::1", 443)
        assert broker.grants.list(sid) == [
            sluice.Grant("example.org", 8443), sluice.Grant("2001:db8::1", 443)]
        broker.grants.remove(sid, "example.org", 8443)
        broker.grants.remove(sid, "2001:db8::1", 443)
        with pytest.raises(sluice.NotFoundError):
            broker.grants.remove(sid, "example.org", 8443)
        assert broker.grants.list(sid) == []
        with pytest.raises(sluice.BadRequestError):
            broker.sessions.set_tier(sid, "everything")
    finally:
        broker.sessions.delete(sid)
    with pytest.raises(sluice.NotFoundError) as ei:
        broker.sessions.get(sid)
    assert not isinstance(ei.value, sluice.SandboxNotFoundError)


def test_health_roles(broker):
    h = broker.health()
    assert h["status"] == "ok" and h["approvers"] >= 0
    # ceilings and metrics are for admins (and auditors): the app's role
    # on the socket is refused
    with pytest.raises(sluice.ForbiddenError) as ei:
        broker.ceilings.get()
    assert (ei.value.status, ei.value.code) == (403, "forbidden")
    with pytest.raises(sluice.ForbiddenError):
        broker.ceilings.set("off")
    with pytest.raises(sluice.ForbiddenError):
        broker.metrics()


def test_ceilings_admin_over_tls(admin_broker):
    c = admin_broker.ceilings.get()
    assert c.tier == "public"
    t = uid("tenant")
    c = admin_broker.ceilings.set(tenants={t: "registries"})
    assert c.tenants[t] == "registries" and c.source == "api"
    assert c.closed == 0
    c = admin_broker.ceilings.set(tenants={t: None})
    assert t not in c.tenants
    assert "sluice_prompts_pending" in admin_broker.metrics()
    with pytest.raises(ValueError):
        admin_broker.ceilings.set()
    app = sluice.BrokerClient(BROKER_URL, TOKENS["broker_app"], ca_file=CA)
    with pytest.raises(sluice.ForbiddenError):
        app.ceilings.set("off")
    assert app.health()["status"] == "ok"
    with pytest.raises(sluice.UnauthorizedError) as ei:
        sluice.BrokerClient(BROKER_URL, "wrong-token-0123456789",
                            ca_file=CA).health()
    assert (ei.value.status, ei.value.code) == (401, "unauthorized")


def test_executor_over_tls(client, make):
    acme = sluice.SandboxClient(EXEC_URL, TOKENS["exec_acme"], ca_file=CA)
    assert acme.health().broker["ok"]
    mine = acme.sandboxes.create("acme", uid("t"))
    try:
        assert mine.exec(["echo", "tls"]).stdout == "tls\n"
        mine.write("f", b"over tls")
        assert mine.read("f") == b"over tls"
        assert [c.data for c in mine.stream("echo s")
                if isinstance(c, sluice.StreamChunk)] == ["s\n"]
        other = make("globex")
        # another tenant's sandbox answers as a missing one
        with pytest.raises(sluice.SandboxNotFoundError):
            acme.sandboxes.get(other.id)
        with pytest.raises(sluice.ForbiddenError):
            acme.sandboxes.create("globex", "x")
        ids = [s.id for s in acme.sandboxes.list()]
        assert mine.id in ids and other.id not in ids
        admin = sluice.SandboxClient(EXEC_URL, TOKENS["exec_admin"],
                                     ca_file=CA)
        assert other.id in [s.id for s in admin.sandboxes.list()]
    finally:
        mine.destroy()
    with pytest.raises(sluice.UnauthorizedError):
        sluice.SandboxClient(EXEC_URL, "no-such-token-0123456789",
                             ca_file=CA).health()
    # the server's certificate is checked
    with pytest.raises(sluice.SluiceConnectionError) as ei:
        sluice.SandboxClient(EXEC_URL, TOKENS["exec_app"]).health()
    assert "certificate" in str(ei.value).lower()
    ctx = ssl.create_default_context(cafile=CA)
    assert sluice.SandboxClient(EXEC_URL, TOKENS["exec_app"],
                                ssl_context=ctx).health().broker["ok"]


def test_env_defaults(monkeypatch):
    monkeypatch.setenv("SLUICE_EXEC_ADDRESS", EXEC_URL)
    monkeypatch.setenv("SLUICE_EXEC_TOKEN", TOKENS["exec_app"])
    monkeypatch.setenv("SLUICE_BROKER_ADDRESS", BROKER)
    c = sluice.SandboxClient(ca_file=CA)
    assert c.address == EXEC_URL and c.health().broker["ok"]
    assert c.broker.address == BROKER and c.broker.health()["status"] == "ok"
    monkeypatch.setenv("SLUICE_EXEC_ADDRESS", EXEC)
    assert sluice.SandboxClient().address == EXEC
