"""Terminals (Sandbox.terminal: a shell on a pty over a WebSocket) and
ports (Sandbox.fetch, port_url: the executor's port proxy), over the
Unix socket and over https with a tenant-bound token."""

import time

import pytest

import sluice

from conftest import CA, EXEC_URL, TOKENS


def test_terminal(sandbox):
    t = sandbox.terminal(cols=100, rows=30)
    assert t.attached and t.id
    t.send("echo py-$((6*7))\n")
    t.read_until("py-42")
    t.send("stty size\n")
    t.read_until("30 100")
    t.resize(120, 40)
    t.send("stty size\n")
    t.read_until("40 120")
    t.send("sleep 30; echo late-$((1+1))\n")
    time.sleep(0.7)
    t.send("\x03")
    t.send("echo back-$((2+3))\n")
    assert b"late-2" not in t.read_until("back-5", timeout=10)
    info = t.info()
    assert info.running and info.attached and (info.cols, info.rows) == (
        120, 40)
    # detach, output made meanwhile is replayed from the offset
    t.send("sleep 1; echo away-$((3*3))\n")
    t.read_until("echo away-")
    time.sleep(0.2)
    t.read(0.2)
    seen = t.offset
    t.detach()
    assert not t.attached
    time.sleep(2)
    assert not t.info().attached
    t2 = sandbox.terminal_of(t.id).attach(since=seen)
    t2.read_until("away-9", timeout=5)
    # a second client: refused, or taking over
    with pytest.raises(sluice.ConflictError):
        sandbox.terminal_of(t.id).attach()
    t3 = sandbox.terminal_of(t.id).attach(takeover=True)
    end = time.monotonic() + 10
    while t2.attached and time.monotonic() < end:
        t2.read(1)
    assert not t2.attached and t2.close_code == 4001
    assert [e["code"] for e in t2.errors] == ["TAKEN_OVER"]
    t3.send("exit 4\n")
    while t3.attached:
        t3.read(1)
    assert t3.exit_code == 4
    assert t3.info().exit_code == 4


def test_terminal_command_and_kill(sandbox):
    t = sandbox.terminal("test -t 0 && echo tty-yes; sleep 60", attach=False)
    assert not t.attached
    t.attach(since=0)
    t.read_until("tty-yes")
    assert t.kill().session_id == t.id
    for _ in range(100):
        if not t.info().running:
            break
        time.sleep(0.1)
    assert not t.info().running
    with pytest.raises(sluice.BadRequestError):
        sandbox.terminal(cols=0)


def test_ports(sandbox):
    sandbox.write("site/index.txt", b"from the sandbox\n")
    sandbox.start("cd site && exec python3 -m http.server 8000 "
                  "--bind 127.0.0.1")
    for _ in range(100):
        try:
            r = sandbox.fetch(8000, "/index.txt")
            break
        except sluice.SluiceError as e:
            assert e.code == "bad_gateway"
            time.sleep(0.1)
    assert r.status == 200 and r.body == b"from the sandbox\n"
    assert r.header("X-Sluice-Upstream") is None
    # the server's own 404 and 501 are answers, not errors
    assert sandbox.fetch(8000, "/missing").status == 404
    assert sandbox.fetch(8000, "/x", method="POST", body=b"d").status == 501
    with pytest.raises(sluice.SluiceError) as e:
        sandbox.fetch(8009)
    assert e.value.code == "bad_gateway"
    with pytest.raises(sluice.InvalidArgumentError):
        sandbox.fetch(70000)
    assert sandbox.port_url(8000, "a").endswith(
        "/v1/sandboxes/%s/ports/8000/a" % sandbox.id)


def test_over_https(make):
    c = sluice.SandboxClient(EXEC_URL, TOKENS["exec_acme"], ca_file=CA)
    sb = make("acme")
    mine = c.sandboxes.get(sb.id)
    t = mine.terminal()
    t.send("echo https-$((4*4))\n")
    t.read_until("https-16")
    t.detach()
    mine.write("p/x.txt", b"x\n")
    mine.start("cd p && exec python3 -m http.server 8001 --bind 127.0.0.1")
    for _ in range(100):
        try:
            r = mine.fetch(8001, "/x.txt")
            break
        except sluice.SluiceError:
            time.sleep(0.1)
    assert r.status == 200 and r.body == b"x\n"
    assert mine.port_url(8001).startswith(EXEC_URL)


def test_async_terminal_and_fetch():
    import asyncio
    from conftest import EXEC, BROKER, uid

    async def go():
        c = sluice.AsyncSandboxClient(EXEC, broker=BROKER)
        async with await c.sandboxes.create("acme", uid("u")) as sb:
            t = await sb.terminal(rows=20, cols=70)
            assert isinstance(t, sluice.AsyncTerminal) and t.attached
            await t.send("stty size; echo aio-$((5*5))\n")
            got = await t.read_until("aio-25")
            assert b"20 70" in got
            await t.detach()
            assert not (await t.info()).attached
            await sb.write("w/i.txt", b"aio\n")
            await sb.start("cd w && exec python3 -m http.server 8003 "
                           "--bind 127.0.0.1")
            for _ in range(100):
                try:
                    r = await sb.fetch(8003, "/i.txt")
                    break
                except sluice.SluiceError:
                    await asyncio.sleep(0.1)
            assert (r.status, r.body) == (200, b"aio\n")
            assert (await t.kill()).session_id == t.id
    asyncio.run(asyncio.wait_for(go(), 120))
