"""sluiced's request rules and credentials through the SDK: rules listed
(every role), added, replaced where they stand, replaced whole and
deleted (admin; the app's role is refused 403), credentials set, rotated
(the placeholder stays), listed and deleted with their value never in an
answer; a token bound to a tenant reaches only its tenant's; sluiced's
refusals come back as the error classes with its status and code."""

import asyncio
import json
import uuid

import pytest

import sluice
from conftest import BROKER_URL, CA, TOKENS, uid


def acme_broker() -> sluice.BrokerClient:
    """An app token bound to tenant acme (control.tokens[].tenant)."""
    return sluice.BrokerClient(BROKER_URL, TOKENS["broker_acme"], ca_file=CA)


def refused(cls, status, code, call, *a, **kw):
    with pytest.raises(cls) as e:
        call(*a, **kw)
    assert isinstance(e.value, sluice.SluiceError)
    assert (e.value.status, e.value.code) == (status, code), str(e.value)
    return e.value


def test_rules_round_trip(admin_broker, broker):
    n1, n2, n3 = uid("r1"), uid("r2"), uid("r3")
    rules = admin_broker.rules
    try:
        r1 = rules.add(n1, ["insp.test"], "deny", tenant="acme",
                       methods=["PUT"], paths=["/pub/*"])
        assert r1 == sluice.Rule(name=n1, hosts=["insp.test"], action="deny",
                                 tenant="acme", methods=["PUT"],
                                 paths=["/pub/*"])
        r2 = rules.put(sluice.Rule(n2, ["*.insp.test:443"], "prompt"))
        assert (r2.tenant, r2.methods, r2.paths, r2.action) == (
            None, [], [], "prompt")
        r3 = rules.put({"name": n3, "hosts": ["insp.test"],
                        "action": "allow", "methods": ["GET"]})
        assert r3.methods == ["GET"] and r3.tenant is None

        # every role reads them: the app, over the socket
        lst = broker.rules.list()
        assert isinstance(lst, sluice.RuleList)
        assert [r.name for r in lst.rules] == [n1, n2, n3]
        assert lst.rules[0] == r1 and lst.config == []
        assert lst.builtin and all(isinstance(b, str) for b in lst.builtin)
        assert broker.rules.get(n2) == r2

        # a POST of a known name replaces it where it stands
        r1b = rules.add(n1, "insp.test", "allow", tenant="acme")
        assert (r1b.action, r1b.methods, r1b.paths) == ("allow", [], [])
        assert [r.name for r in rules.list().rules] == [n1, n2, n3]
        assert rules.get(n1) == r1b

        # writes are the admin's: the app's role is refused
        e = refused(sluice.ForbiddenError, 403, "forbidden",
                    broker.rules.add, uid("r"), ["insp.test"], "deny")
        assert e.message
        refused(sluice.ForbiddenError, 403, "forbidden",
                broker.rules.delete, n1)
        refused(sluice.ForbiddenError, 403, "forbidden",
                broker.rules.replace, [])
        assert [r.name for r in rules.list().rules] == [n1, n2, n3]

        # sluiced's refusals, with their code and the field named
        e = refused(sluice.BadRequestError, 400, "host_not_inspected",
                    rules.add, uid("r"), ["never.test"], "deny")
        assert "never.test" in e.message
        e = refused(sluice.BadRequestError, 400, "bad_request",
                    rules.add, uid("r"), ["insp.test"], "maybe")
        assert "action" in e.message
        e = refused(sluice.BadRequestError, 400, "bad_request",
                    rules.put, {"name": uid("r"), "action": "deny"})
        assert "hosts" in e.message
        e = refused(sluice.ConflictError, 409, "conflict", rules.replace,
                    [sluice.Rule(n1, ["insp.test"], "deny"),
                     {"name": n1, "hosts": ["insp.test"], "action": "allow"}])
        assert "rules[1]" in e.message
        bad = uid("r")
        e = refused(sluice.BadRequestError, 400, "host_not_inspected",
                    rules.replace, [r2, sluice.Rule(bad, ["x.test"], "deny")])
        assert bad in e.message and "x.test" in e.message
        # a refused list changed nothing
        assert [r.name for r in rules.list().rules] == [n1, n2, n3]
        refused(sluice.NotFoundError, 404, "not_found", rules.get, "no-such")
        with pytest.raises(sluice.InvalidArgumentError):
            rules.replace(r1)           # one rule is not a list

        # the whole list, in the order given
        got = rules.replace([r3, {"name": n1, "hosts": ["insp.test"],
                                  "action": "deny", "tenant": "beta"}])
        assert [r.name for r in got.rules] == [n3, n1]
        assert got.rules[1].tenant == "beta"
        # a token bound to acme sees those for every tenant and its own
        acme = acme_broker()
        assert [r.name for r in acme.rules.list().rules] == [n3]
        refused(sluice.NotFoundError, 404, "not_found", acme.rules.get, n1)
        refused(sluice.ForbiddenError, 403, "forbidden", acme.rules.delete,
                n3)

        rules.delete(n3)
        refused(sluice.NotFoundError, 404, "not_found", rules.get, n3)
        refused(sluice.NotFoundError, 404, "not_found", rules.delete, n3)
        assert [r.name for r in rules.list().rules] == [n1]
    finally:
        admin_broker.rules.replace([])
    assert admin_broker.rules.list().rules == []


def test_credentials_round_trip(admin_broker, broker):
    name, other = uid("npm"), uid("beta")
    value = "npm_" + uuid.uuid4().hex
    value2 = "npm_" + uuid.uuid4().hex
    acme = acme_broker()
    try:
        c = broker.credentials.set(
            name, tenant="acme", hosts=["insp.test"], value=value,
            header="Authorization", format="Bearer {}", methods=["GET"],
            paths=["/ok/*"])
        assert isinstance(c, sluice.Credential)
        assert (c.name, c.tenant, c.hosts, c.header, c.format, c.methods,
                c.paths) == (name, "acme", ["insp.test"], "Authorization",
                             "Bearer {}", ["GET"], ["/ok/*"])
        assert c.placeholder.startswith("sluice-cred:%s:" % name)
        assert isinstance(c.updated, int) and c.updated > 0
        # write-only: no answer carries the value
        assert value not in json.dumps(c.raw) and "value" not in c.raw
        assert value not in repr(c)
        lst = broker.credentials.list()
        assert [x for x in lst if x.name == name] == [c]
        assert value not in json.dumps([x.raw for x in lst])
        assert broker.credentials.get(name) == c
        assert admin_broker.credentials.get(name) == c

        # rotation: the same name replaced, the placeholder kept; format
        # left out is the value alone, methods and paths any
        c2 = admin_broker.credentials.set(name, tenant="acme",
                                          hosts="insp.test", value=value2,
                                          header="X-Token")
        assert c2.placeholder == c.placeholder
        assert (c2.header, c2.format, c2.methods, c2.paths) == (
            "X-Token", "{}", [], [])
        assert value2 not in json.dumps(c2.raw)

        # refusals, with the field or the reason named
        e = refused(sluice.BadRequestError, 400, "bad_request",
                    broker.credentials.set, uid("c"), tenant="acme",
                    hosts=["never.test"], value=value)
        assert "not inspected" in e.message
        e = refused(sluice.BadRequestError, 400, "bad_request",
                    broker.credentials.set, uid("c"), tenant="acme",
                    hosts=["insp.test"], value=value, format="Bearer")
        assert "inject.format" in e.message
        e = refused(sluice.BadRequestError, 400, "bad_request",
                    broker.credentials.set, uid("c"), tenant="acme",
                    hosts=["insp.test"], value=value, header="Bad Header")
        assert "inject.header" in e.message
        assert value not in str(e) and value not in json.dumps(e.details)
        refused(sluice.NotFoundError, 404, "not_found",
                broker.credentials.get, "no-such")
        with pytest.raises(sluice.InvalidArgumentError):
            broker.credentials.set(uid("c"), tenant="acme",
                                   hosts=["insp.test"], value=None)

        # a token bound to acme: its tenant's only
        assert [x.name for x in acme.credentials.list()
                if x.name == name] == [name]
        admin_broker.credentials.set(other, tenant="beta",
                                     hosts=["insp.test"], value=value)
        assert other not in [x.name for x in acme.credentials.list()]
        refused(sluice.NotFoundError, 404, "not_found",
                acme.credentials.get, other)
        refused(sluice.NotFoundError, 404, "not_found",
                acme.credentials.delete, other)
        refused(sluice.ForbiddenError, 403, "forbidden",
                acme.credentials.set, uid("c"), tenant="beta",
                hosts=["insp.test"], value=value)
        # names are one namespace: acme cannot take beta's
        refused(sluice.ConflictError, 409, "conflict",
                acme.credentials.set, other, tenant="acme",
                hosts=["insp.test"], value=value)
        assert admin_broker.credentials.get(other).tenant == "beta"

        acme.credentials.delete(name)
        refused(sluice.NotFoundError, 404, "not_found",
                broker.credentials.get, name)
        refused(sluice.NotFoundError, 404, "not_found",
                broker.credentials.delete, name)
    finally:
        for n in (name, other):
            try:
                admin_broker.credentials.delete(n)
            except sluice.NotFoundError:
                pass
    assert not [x for x in admin_broker.credentials.list()
                if x.name in (name, other)]


def test_async_rules_and_credentials():
    async def go():
        admin = sluice.AsyncBrokerClient(BROKER_URL, TOKENS["broker_admin"],
                                         ca_file=CA)
        app = sluice.AsyncBrokerClient(BROKER_URL, TOKENS["broker_app"],
                                       ca_file=CA)
        n, c = uid("ar"), uid("ac")
        try:
            r = await admin.rules.add(n, ["insp.test"], "deny",
                                      methods=["DELETE"])
            assert r.name == n and r.methods == ["DELETE"]
            assert [x.name for x in (await app.rules.list()).rules] == [n]
            assert await app.rules.get(n) == r
            with pytest.raises(sluice.ForbiddenError) as e:
                await app.rules.delete(n)
            assert (e.value.status, e.value.code) == (403, "forbidden")
            got = await admin.rules.replace([sluice.Rule(n, ["insp.test"],
                                                         "allow")])
            assert [x.action for x in got.rules] == ["allow"]
            await admin.rules.delete(n)
            with pytest.raises(sluice.NotFoundError):
                await app.rules.get(n)

            cr = await app.credentials.set(c, tenant="acme",
                                           hosts=["*.insp.test"],
                                           value="async-secret-value")
            assert cr.placeholder.startswith("sluice-cred:%s:" % c)
            assert "async-secret-value" not in json.dumps(cr.raw)
            assert (await app.credentials.get(c)) == cr
            assert c in [x.name for x in await app.credentials.list()]
            with pytest.raises(sluice.BadRequestError) as e:
                await app.credentials.set(c, tenant="acme",
                                          hosts=["elsewhere.test"],
                                          value="x")
            assert (e.value.status, e.value.code) == (400, "bad_request")
            await app.credentials.delete(c)
            with pytest.raises(sluice.NotFoundError):
                await app.credentials.get(c)
        finally:
            await admin.rules.replace([])
            try:
                await admin.credentials.delete(c)
            except sluice.NotFoundError:
                pass
    asyncio.run(asyncio.wait_for(go(), 120))
