"""Sandboxes: create, get, list, set_network, destroy, errors, quotas."""

import pytest

import sluice
from conftest import BROKER, EXEC, uid


def test_seed_flow(client):
    """The twenty lines of an app (seed 004's shape)."""
    sb = client.sandboxes.create(tenant_id="acme", user_id=uid("alice"))
    try:
        r = sb.exec(["python3", "-c", "print(6 * 7)"])
        assert (r.stdout, r.exit_code, r.ok) == ("42\n", 0, True)
        assert sb.write("data.txt", b"some content") == 12
        assert sb.read("data.txt") == b"some content"
        assert [e.path for e in sb.list("*.txt")] == ["data.txt"]
    finally:
        sb.destroy()
    with pytest.raises(sluice.SandboxNotFoundError) as ei:
        sb.exec(["true"])
    assert ei.value.status == 404 and ei.value.code == "not_found"
    with pytest.raises(sluice.SandboxNotFoundError):
        client.sandboxes.get(sb.id)


def test_create_get_list(client, make, broker):
    user = uid("bob")
    sb = make("acme", user, id=uid("sb"), network="public",
              limits={"memory_mb": 256, "timeout_s": 30})
    i = sb.last_info
    assert (i.tenant, i.user, i.state, i.tier, i.backend) == (
        "acme", user, "running", "public", "ns")
    assert (i.limits.memory_mb, i.limits.timeout_s) == (256, 30)
    assert i.raw["network"]["broker"] == "ok"
    # the broker session exists, with the sandbox's tier
    assert broker.sessions.get(sb.session).tier == "public"
    other = make("globex", user, limits=sluice.Limits(pids=100))
    assert other.info().limits.pids == 100
    assert client.sandboxes.get(sb.id).last_info.id == sb.id
    ids = {s.id for s in client.sandboxes.list(user=user)}
    assert ids == {sb.id, other.id}
    assert [s.id for s in client.sandboxes.list(tenant="globex", user=user)
            ] == [other.id]
    # the tier follows to sluiced
    assert sb.set_network("off").tier == "off"
    assert broker.sessions.get(sb.session).tier == "off"
    assert sb.info().tier == "off"
    # a random id by default
    assert make().id.startswith("sbx-")


def test_default_tier_is_the_daemons(client, make, broker):
    """No network given: the SDK sends no tier and the daemon's default
    (the administrator's "tier", off unless set) applies."""
    sb = make()
    assert sb.last_info.tier == "off"
    assert sb.info().tier == "off"
    assert broker.sessions.get(sb.session).tier == "off"
    assert make(network="registries").last_info.tier == "registries"


def test_create_errors(client, make):
    sb = make()
    with pytest.raises(sluice.ConflictError) as ei:
        client.sandboxes.create("acme", "x", id=sb.id)
    assert (ei.value.status, ei.value.code) == (409, "exists")
    with pytest.raises(sluice.BadRequestError) as ei:
        client.sandboxes.create("acme", "x", limits={"memory_mb": 99999})
    assert (ei.value.field, ei.value.max) == ("memory_mb", 4096)
    with pytest.raises(ValueError):
        client.sandboxes.create("acme", "x", id="../etc")
    with pytest.raises(sluice.BadRequestError):
        client.sandboxes.create("acme", "x", network="everything")


def test_quota(client, make):
    """per_user is 3 in the test world: the 4th is refused with its
    scope, limit and use."""
    user = uid("q")
    for _ in range(3):
        make("acme", user)
    with pytest.raises(sluice.QuotaExceededError) as ei:
        client.sandboxes.create("acme", user)
    e = ei.value
    assert (e.status, e.code, e.scope, e.limit, e.in_use) == (
        429, "quota_exceeded", "user", 3, 3)
    assert isinstance(e, sluice.SluiceError) and e.message


def test_destroy(client, make, broker):
    sb = make()
    sb.destroy(archive=False)
    with pytest.raises(sluice.NotFoundError):
        broker.sessions.get(sb.session)
    with pytest.raises(sluice.SandboxNotFoundError):
        sb.destroy()


def test_discard_archive(client, make):
    """Clear of a sandbox that is gone (removed by age): only its
    archive is left, and discard_archive drops it by id."""
    sb = make()
    sb.write("keep.txt", "x")
    sb.destroy()                        # archived: the sandbox is gone
    d = client.sandboxes.discard_archive(sb.id)
    assert (d["id"], d["deleted"], d["archive"]) == (sb.id, False,
                                                     "discarded")
    with pytest.raises(sluice.SandboxNotFoundError):
        client.sandboxes.discard_archive(sb.id)
    again = client.sandboxes.create("acme", sb.last_info.user, id=sb.id)
    try:
        assert "keep.txt" not in again.exec("ls -A /workspace").stdout
    finally:
        again.destroy(archive=False)


def test_context_manager(client):
    with client.sandboxes.create("acme", uid("cm")) as sb:
        assert sb.exec("echo $((2+3))").stdout == "5\n"
    with pytest.raises(sluice.SandboxNotFoundError):
        sb.info()


def test_health_doctor(client):
    assert client.healthz() == {"ok": True, "image_ready": True}
    h = client.health()
    assert h.broker["ok"] is True
    assert {b["name"] for b in h.backends} >= {"ns", "gvisor"}
    assert h.capacity["sandboxes"]["limit"] == 40
    d = client.doctor()
    assert d.ok and d.problems == [], d.problems
    bad = sluice.SandboxClient(EXEC + ".nothing").doctor()
    assert not bad.ok and "does not answer" in bad.problems[0]


def test_node(client):
    n = client.node()
    assert n["draining"] is False and n["capacity"]["cpus"] >= 1
    assert n["capacity"]["sandboxes_limit"] == 40 and n["host"]
    # a drain is the admin's: an app is refused
    with pytest.raises(sluice.ForbiddenError):
        client.set_draining(True)
    assert client.node()["draining"] is False


def test_unreachable():
    with pytest.raises(sluice.SluiceConnectionError) as ei:
        sluice.SandboxClient("/nonexistent/exec.sock").sandboxes.list()
    assert ei.value.status is None and isinstance(ei.value, ConnectionError)
    with pytest.raises(sluice.SluiceConnectionError):
        sluice.BrokerClient(BROKER + ".nothing").health()


def test_addresses():
    with pytest.raises(ValueError):
        sluice.SandboxClient("http://127.0.0.1:1")
    with pytest.raises(ValueError):
        sluice.SandboxClient(EXEC, token="a-token-on-a-socket")
    assert sluice.SandboxClient("unix:" + EXEC).address == EXEC


def _subscribers(client) -> int:
    for line in client.metrics().splitlines():
        if line.startswith("sluice_execd_event_subscribers "):
            return int(float(line.split()[1]))
    raise AssertionError("no sluice_execd_event_subscribers")


def test_metrics_and_events(client, make):
    import threading
    from conftest import wait_for
    text = client.metrics()
    assert "# TYPE sluice_execd_sandboxes_created_total counter" in text
    base = _subscribers(client)
    seen: list = []
    sid = uid("ev")

    def read() -> None:
        for ev, data in client.events(idle_timeout=60):
            seen.append((ev, data))
            if ev == "sandbox" and data.get("id") == sid:
                return      # leaving closes the stream
    t = threading.Thread(target=read, daemon=True)
    t.start()
    # subscribed once the executor counts one more reader
    wait_for(lambda: _subscribers(client) > base, what="the subscription")
    sb = make(id=sid)
    t.join(60)
    assert not t.is_alive(), seen
    ev, data = seen[-1]
    assert data["what"] == "created" and data["id"] == sb.id, seen
    assert isinstance(data["ts_ms"], int)
