"""A dropped connection: reads are retried once, a create or a command
never (a timeout cannot make two sandboxes or run a command twice)."""

import pytest

import sluice
from conftest import EXEC, uid


def test_reads_retried_once(client, forwarder, sandbox):
    f = forwarder(EXEC)
    c = sluice.SandboxClient(f.path)
    f.drop_request = 1
    assert sandbox.id in [s.id for s in c.sandboxes.list()]
    assert len(f.heads) == 2
    sb = c.sandboxes.get(sandbox.id)
    sandbox.write("r.txt", b"again")
    f.heads.clear()
    f.drop_answer = 1                      # the daemon answered, we lost it
    assert sb.read("r.txt") == b"again"
    assert len(f.heads) == 2
    f.heads.clear()
    f.drop_request = 2                     # once only
    with pytest.raises(sluice.SluiceConnectionError):
        sb.info()
    assert len(f.heads) == 2


def test_create_and_exec_not_retried(client, forwarder, make):
    f = forwarder(EXEC)
    c = sluice.SandboxClient(f.path)
    user = uid("once")
    f.drop_answer = 1
    with pytest.raises(sluice.SluiceConnectionError) as ei:
        c.sandboxes.create("acme", user)
    assert ei.value.code == "connection_failed" and ei.value.status is None
    assert len(f.heads) == 1
    made = client.sandboxes.list(user=user)
    assert len(made) == 1                  # the one request made one
    make.ids.append(made[0].id)
    sb = c.sandboxes.get(made[0].id)
    f.heads.clear()
    f.drop_answer = 1
    with pytest.raises(sluice.SluiceConnectionError):
        sb.exec("echo x >> once.txt")
    assert len(f.heads) == 1
    assert made[0].read("once.txt") == b"x\n"
    f.heads.clear()
    f.drop_request = 1
    with pytest.raises(sluice.SluiceConnectionError):
        sb.write("w.txt", b"1")
    assert len(f.heads) == 1
