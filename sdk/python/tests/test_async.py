"""AsyncSandboxClient and AsyncBrokerClient: the same surface on asyncio,
over the Unix sockets and TLS."""

import asyncio

import pytest

import sluice
from conftest import BROKER, BROKER_URL, CA, EXEC, EXEC_URL, PIP_CONF, TOKENS, WEB, uid


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 120))


def test_async_sandbox():
    async def go():
        c = sluice.AsyncSandboxClient(EXEC, broker=BROKER)
        assert (await c.health()).broker["ok"]
        assert (await c.doctor()).ok
        user = uid("a")
        async with await c.sandboxes.create("acme", user,
                                            network="registries") as sb:
            assert isinstance(sb, sluice.AsyncSandbox)
            r = await sb.exec(["python3", "-c", "print(6 * 7)"])
            assert (r.stdout, r.exit_code) == ("42\n", 0)
            assert [s.id for s in await c.sandboxes.list(user=user)] == [sb.id]
            assert (await c.sandboxes.get(sb.id)).id == sb.id
            assert (await sb.info()).tier == "registries"
            # files
            assert await sb.write("d/a.txt", "hello world") == 11
            await sb.edit("d/a.txt", "world", "there")
            assert await sb.read_text("d/a.txt") == "hello there"
            assert await sb.read("d/a.txt", offset=6, length=5) == b"there"
            assert (await sb.list("*.txt", recursive=True)).paths == [
                "d/a.txt"]
            await sb.remove("d/a.txt")
            with pytest.raises(sluice.NotFoundError):
                await sb.read("d/a.txt")
            # batch files
            import io
            import tarfile
            b = io.BytesIO()
            with tarfile.open(fileobj=b, mode="w") as t:
                i = tarfile.TarInfo("s/x.txt")
                i.size = 2
                t.addfile(i, io.BytesIO(b"xy"))
            tr = await sb.put_tar(b.getvalue(), dir="up")
            assert (tr.path, tr.files, tr.bytes) == ("up", 1, 2)
            got = tarfile.open(fileobj=io.BytesIO(await sb.get_tar("up")))
            assert got.extractfile("s/x.txt").read() == b"xy"
            # stream
            items = [i async for i in sb.stream("echo a; echo b >&2")]
            assert [(i.stream, i.data) for i in items[:-1]] == [
                ("stdout", "a\n"), ("stderr", "b\n")]
            assert items[-1].exit_code == 0 and items[-1].stdout == "a\n"
            # background
            cmd = await sb.start("echo one; sleep 0.3; echo two")
            st = await cmd.wait(timeout=20)
            assert st.exit_code == 0 and cmd.status == "exited"
            assert (await cmd.output()).stdout.data == "one\ntwo\n"
            assert (await cmd.output()).stdout.data == ""
            assert cmd.id in [x.id for x in await sb.commands()]
            assert (await sb.command(cmd.id)).status == "exited"
            srv = await sb.start(["sleep", "600"])
            await srv.stop()
            assert (await srv.wait(timeout=20)).signal is not None
            # busy, cancel
            long = asyncio.ensure_future(sb.exec(["sleep", "60"]))
            for _ in range(200):
                if (await sb.info()).usage.get("foreground"):
                    break
                await asyncio.sleep(0.05)
            with pytest.raises(sluice.BusyError):
                await sb.exec(["true"])
            assert await sb.cancel() == 1
            assert (await long).cancelled
            bg = await sb.start(["sleep", "600"])
            assert await sb.cancel(all=True) == 1
            assert (await bg.wait(timeout=20)).cancelled
            # install, network, errors
            assert (await sb.exec(PIP_CONF)).ok
            r = await sb.install("sluicedemo")
            assert r.ok
            assert (await sb.set_network("off")).tier == "off"
            with pytest.raises(sluice.NetworkNotPermittedError):
                await sb.install("sluicedemo")
            with pytest.raises(sluice.ConflictError):
                await c.sandboxes.create("acme", user, id=sb.id)
        with pytest.raises(sluice.SandboxNotFoundError):
            await sb.exec(["true"])
        with pytest.raises(sluice.SluiceConnectionError):
            await sluice.AsyncSandboxClient(EXEC + ".x").health()
    run(go())


def test_async_tls_and_quota():
    async def go():
        c = sluice.AsyncSandboxClient(EXEC_URL, TOKENS["exec_acme"],
                                      ca_file=CA)
        user = uid("aq")
        made = []
        try:
            for _ in range(3):
                made.append(await c.sandboxes.create("acme", user))
            with pytest.raises(sluice.QuotaExceededError) as ei:
                await c.sandboxes.create("acme", user)
            assert (ei.value.scope, ei.value.limit, ei.value.in_use) == (
                "user", 3, 3)
            with pytest.raises(sluice.ForbiddenError):
                await c.sandboxes.create("globex", user)
            r = await made[0].exec("echo tls")
            assert r.stdout == "tls\n"
        finally:
            for sb in made:
                await sb.destroy()
        with pytest.raises(sluice.UnauthorizedError):
            await sluice.AsyncSandboxClient(
                EXEC_URL, "bad-token-0123456789abcdef", ca_file=CA).health()
    run(go())


def test_async_prompts():
    async def go():
        c = sluice.AsyncSandboxClient(EXEC, broker=BROKER)
        b = c.broker
        assert (await b.health())["status"] == "ok"
        async with await c.sandboxes.create("acme", uid("ap")) as sb:
            watch = b.prompts.watch(session=sb.session)
            cmd = await sb.start(["curl", "-sS", "--max-time", "60", WEB])
            async for p in watch:
                assert p.host == "web.test" and p.session == sb.session
                n = await p.allow_chat()
                assert n.state == "allow_chat"
                break
            await watch.aclose()
            await cmd.wait(timeout=60)
            assert (await cmd.output()).stdout.data == "hello from web.test\n"
            assert sluice.Grant("web.test", int(WEB.rsplit(":", 1)[1]
                                                .strip("/"))) in \
                await b.grants.list(sb.session)
            # sessions and events
            sid = uid("as")
            before = (await b.health())["approvers"]
            ev = await b.events().connect()     # open now: nothing is missed
            assert (await b.health())["approvers"] == before + 1

            async def created():
                async for e in ev:
                    if e.type == "session" and e.data["session"]["id"] == sid:
                        return e
            s = await b.sessions.create(sid, "acme", "bob", "off")
            assert s.tier == "off"
            task = asyncio.ensure_future(created())
            e = await asyncio.wait_for(task, 20)
            assert e.data["action"] == "create" and ev.last_event_id == e.id
            await ev.aclose()
            assert (await b.sessions.set_tier(sid, "registries")).tier == \
                "registries"
            assert sid in [x.id for x in await b.sessions.list()]
            await b.grants.add(sid, "example.org", 443)
            await b.grants.remove(sid, "example.org", 443)
            await b.sessions.delete(sid)
            with pytest.raises(sluice.NotFoundError):
                await b.sessions.get(sid)
            with pytest.raises(sluice.ForbiddenError):
                await b.ceilings.get()
        admin = sluice.AsyncBrokerClient(BROKER_URL, TOKENS["broker_admin"],
                                         ca_file=CA)
        assert (await admin.ceilings.get()).tier == "public"
        assert "sluice_" in await admin.metrics()
        t = uid("t")
        assert (await admin.ceilings.set(tenants={t: "off"})).tenants[t] == \
            "off"
        await admin.ceilings.set(tenants={t: None})
    run(go())


def test_async_metrics_and_events():
    async def subscribers(c) -> int:
        for line in (await c.metrics()).splitlines():
            if line.startswith("sluice_execd_event_subscribers "):
                return int(float(line.split()[1]))
        raise AssertionError("no sluice_execd_event_subscribers")

    async def go():
        c = sluice.AsyncSandboxClient(EXEC, broker=BROKER)
        assert "sluice_execd_commands_started_total" in await c.metrics()
        base = await subscribers(c)
        sid = uid("aev")

        async def read():
            async for ev, data in c.events(idle_timeout=60):
                if ev == "sandbox" and data.get("id") == sid:
                    return data
        task = asyncio.ensure_future(read())
        for _ in range(400):
            if await subscribers(c) > base:
                break
            await asyncio.sleep(0.05)
        sb = await c.sandboxes.create("acme", uid("a"), id=sid)
        try:
            data = await asyncio.wait_for(task, 60)
            assert data["what"] == "created" and data["tenant"] == "acme"
        finally:
            await sb.destroy()
    run(go())
