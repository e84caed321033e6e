"""Each API code becomes its class, with the API's fields (the codes no
live test can provoke here: a broker that refuses the executor, a
backend that fails, a draining sluiced)."""

import json

import pytest

import sluice
from sluice.errors import error_from


def body(code, message="m", **kw):
    return json.dumps({"error": dict(code=code, message=message, **kw)}).encode()


@pytest.mark.parametrize("status,code,cls", [
    (400, "bad_request", sluice.BadRequestError),
    (401, "unauthorized", sluice.UnauthorizedError),
    (403, "forbidden", sluice.ForbiddenError),
    (403, "network_not_permitted", sluice.NetworkNotPermittedError),
    (404, "not_found", sluice.NotFoundError),
    (409, "exists", sluice.ConflictError),
    (409, "conflict", sluice.ConflictError),
    (413, "too_large", sluice.TooLargeError),
    (429, "quota_exceeded", sluice.QuotaExceededError),
    (429, "busy", sluice.BusyError),
    (503, "backend_unavailable", sluice.BackendUnavailableError),
    (503, "broker_unavailable", sluice.BrokerUnavailableError),
])
def test_codes(status, code, cls):
    e = error_from(status, body(code, "what happened"))
    assert type(e) is cls and isinstance(e, sluice.SluiceError)
    assert (e.status, e.code, e.message) == (status, code, "what happened")
    assert str(e) == "%d %s: what happened" % (status, code)


def test_fields_and_fallbacks():
    e = error_from(429, body("quota_exceeded", scope="tenant", limit=50,
                             in_use=50))
    assert (e.scope, e.limit, e.in_use) == ("tenant", 50, 50)
    e = error_from(400, body("bad_request", field="pids", max=4096))
    assert (e.field, e.max) == ("pids", 4096)
    # sluiced's own codes
    e = error_from(503, body("unavailable"), broker=True)
    assert type(e) is sluice.BrokerUnavailableError
    e = error_from(413, body("payload_too_large"), broker=True)
    assert type(e) is sluice.TooLargeError
    # a page that is not JSON: the status decides
    e = error_from(413, b"<html>Payload Too Large</html>")
    assert type(e) is sluice.TooLargeError and e.code == "too_large"
    e = error_from(503, b"")
    assert type(e) is sluice.BackendUnavailableError and e.message == "HTTP 503"
    e = error_from(500, body("internal"))
    assert type(e) is sluice.SluiceError and e.code == "internal"
    # the sandbox itself, or something in it
    assert type(error_from(404, body("not_found", "no sandbox x"),
                           sandbox=True)) is sluice.SandboxNotFoundError
    assert type(error_from(404, body("not_found", "a: no such file"),
                           sandbox=True)) is sluice.NotFoundError
    assert type(error_from(404, body("not_found", "no sandbox x"),
                           sandbox=True, broker=True)) is sluice.NotFoundError


def test_webhook_vector():
    # openssl dgst -sha256 -hmac secret over '1700000000.{"id":"p-1"}'
    want = ("sha256=8bfb37ab61093a0fa9ed080745bf15dea2b48453140a29da2a38"
            "29c1b7c17a81")
    assert sluice.webhook.sign(b"secret\n", 1700000000, '{"id":"p-1"}') == want
    assert sluice.webhook.verify("secret", "1700000000", b'{"id":"p-1"}', want,
                                 now=1700000100)
    assert not sluice.webhook.verify("secret", "1700000000", b'{"id":"p-1"}',
                                     want)                       # too old
    assert not sluice.webhook.verify("secret", "17e8", b'{"id":"p-1"}', want,
                                     tolerance_s=None)


def test_install_body():
    from sluice._calls import install_body
    assert install_body(["a", "b"], "pip", None) == {
        "manager": "pip", "packages": ["a", "b"]}
    assert install_body("left-pad", "npm", 30) == {
        "manager": "npm", "packages": ["left-pad"], "timeout_s": 30}
    with pytest.raises(ValueError):
        install_body(["a"], "apt", None)
    with pytest.raises(ValueError):
        install_body([], "pip", None)


# Every route of sluice-execd's OpenAPI document and the SDK call that
# makes it (the JavaScript SDK has the same surface, in camelCase).  A
# route the executor gains fails here until the SDKs have it.
ROUTES = {
    ("GET", "/v1/health"): "client.health, client.doctor",
    ("GET", "/v1/sandboxes"): "sandboxes.list",
    ("POST", "/v1/sandboxes"): "sandboxes.create",
    ("GET", "/v1/sandboxes/{id}"): "sandboxes.get, Sandbox.info",
    ("PATCH", "/v1/sandboxes/{id}"): "Sandbox.set_network",
    ("DELETE", "/v1/sandboxes/{id}"): "Sandbox.destroy",
    ("POST", "/v1/sandboxes/{id}/exec"): "Sandbox.exec, Sandbox.stream",
    ("POST", "/v1/sandboxes/{id}/install"): "Sandbox.install",
    ("GET", "/v1/metrics"): "client.metrics",
    ("GET", "/healthz"): "client.healthz",
    ("GET", "/v1/node"): "client.node",
    ("PUT", "/v1/node"): "client.set_draining",
    ("GET", "/v1/events"): "client.events",
    ("POST", "/v1/sandboxes/{id}/commands"): "Sandbox.start",
    ("GET", "/v1/sandboxes/{id}/commands"): "Sandbox.commands",
    ("GET", "/v1/sandboxes/{id}/commands/{cid}"): "Sandbox.command, "
                                                  "Command.refresh, wait",
    ("GET", "/v1/sandboxes/{id}/commands/{cid}/output"): "Command.output",
    ("POST", "/v1/sandboxes/{id}/commands/{cid}/stop"): "Command.stop",
    ("POST", "/v1/sandboxes/{id}/cancel"): "Sandbox.cancel",
    ("GET", "/v1/sandboxes/{id}/files"): "Sandbox.list",
    ("GET", "/v1/sandboxes/{id}/files/{path}"): "Sandbox.read, read_text",
    ("PUT", "/v1/sandboxes/{id}/files/{path}"): "Sandbox.write",
    ("DELETE", "/v1/sandboxes/{id}/files/{path}"): "Sandbox.remove",
    ("POST", "/v1/sandboxes/{id}/edit"): "Sandbox.edit",
    ("PUT", "/v1/sandboxes/{id}/archive"): "Sandbox.put_tar",
    ("GET", "/v1/sandboxes/{id}/archive"): "Sandbox.get_tar",
    ("POST", "/v1/sandboxes/{id}/pty"): "Sandbox.terminal",
    ("GET", "/v1/sandboxes/{id}/pty/{sid}"): "Sandbox.terminal_of, "
                                             "Terminal.info",
    ("DELETE", "/v1/sandboxes/{id}/pty/{sid}"): "Terminal.kill",
    ("GET", "/v1/sandboxes/{id}/pty/{sid}/ws"): "Terminal.attach",
    ("GET", "/v1/sandboxes/{id}/ports/{port}"): "Sandbox.fetch",
    ("POST", "/v1/sandboxes/{id}/ports/{port}"): "Sandbox.fetch",
    ("PUT", "/v1/sandboxes/{id}/ports/{port}"): "Sandbox.fetch",
    ("PATCH", "/v1/sandboxes/{id}/ports/{port}"): "Sandbox.fetch",
    ("DELETE", "/v1/sandboxes/{id}/ports/{port}"): "Sandbox.fetch",
    ("GET", "/v1/sandboxes/{id}/ports/{port}/"): "Sandbox.fetch",
    ("POST", "/v1/sandboxes/{id}/ports/{port}/"): "Sandbox.fetch",
    ("PUT", "/v1/sandboxes/{id}/ports/{port}/"): "Sandbox.fetch",
    ("PATCH", "/v1/sandboxes/{id}/ports/{port}/"): "Sandbox.fetch",
    ("DELETE", "/v1/sandboxes/{id}/ports/{port}/"): "Sandbox.fetch",
    ("GET", "/v1/sandboxes/{id}/ports/{port}/{path}"): "Sandbox.fetch",
    ("POST", "/v1/sandboxes/{id}/ports/{port}/{path}"): "Sandbox.fetch",
    ("PUT", "/v1/sandboxes/{id}/ports/{port}/{path}"): "Sandbox.fetch",
    ("PATCH", "/v1/sandboxes/{id}/ports/{port}/{path}"): "Sandbox.fetch",
    ("DELETE", "/v1/sandboxes/{id}/ports/{port}/{path}"): "Sandbox.fetch",
}


def test_every_executor_route_has_a_call():
    import os
    with open(os.environ["SLUICE_TEST_OPENAPI"]) as f:
        doc = json.load(f)
    routes = {(m.upper(), p) for p, ops in doc["paths"].items()
              for m in ops if m in ("get", "put", "post", "patch", "delete")}
    assert routes == set(ROUTES), (routes ^ set(ROUTES))
    for names in ROUTES.values():
        for n in names.split(", "):
            cls, _, meth = n.rpartition(".")
            if cls in ("Sandbox", "Command", "Terminal"):
                assert hasattr(getattr(sluice, cls), meth), n
                assert hasattr(getattr(sluice, "Async" + cls), meth), n
            elif cls == "client":
                assert hasattr(sluice.SandboxClient, meth), n
                assert hasattr(sluice.AsyncSandboxClient, meth), n


def test_sdk_errors_are_sluice_errors(client):
    """What the SDK refuses before a call is an InvalidArgumentError: a
    SluiceError (one except clause for everything the SDK raises) and
    still a ValueError."""
    from sluice._calls import install_body
    from conftest import EXEC
    sb = sluice.Sandbox(client, sluice.SandboxInfo.from_json({"id": "x"}))
    refused = [
        lambda: client.sandboxes.create("acme", "x", id="../etc"),
        lambda: client.broker.sessions.create("../etc"),
        lambda: sb.exec([]),
        lambda: sb.read("", 0),
        lambda: sb.read("a.txt", 0, 0),
        lambda: install_body(["a"], "apt", None),
        lambda: install_body([], "pip", None),
        lambda: client.broker.ceilings.set(),
        lambda: client.broker.prompts.answer("p-1", "maybe"),  # type: ignore
        lambda: sluice.SandboxClient("http://127.0.0.1:1"),
        lambda: sluice.SandboxClient("https://"),
        lambda: sluice.SandboxClient(EXEC, token="a-token-on-a-socket"),
        lambda: sluice.AsyncSandboxClient("http://127.0.0.1:1"),
    ]
    for i, call in enumerate(refused):
        with pytest.raises(sluice.InvalidArgumentError) as ei:
            call()
        e = ei.value
        assert isinstance(e, sluice.SluiceError) and isinstance(e, ValueError)
        assert (e.status, e.code) == (None, "invalid_argument"), i
        assert str(e) == e.message and e.message, i
    # a prompt not read through a client cannot be answered
    p = sluice.Prompt.from_json({"id": "p-1"})
    with pytest.raises(sluice.SluiceError) as ei:
        p.allow_once()
    assert isinstance(ei.value, RuntimeError)


def test_wait_timeout_is_a_sluice_error(sandbox):
    cmd = sandbox.start(["sleep", "30"])
    with pytest.raises(sluice.SluiceTimeoutError) as ei:
        cmd.wait(timeout=0.3)
    assert isinstance(ei.value, TimeoutError)
    assert isinstance(ei.value, sluice.SluiceError)
    assert ei.value.code == "timeout"
    cmd.stop()


def test_network_not_permitted_fields():
    e = error_from(403, body("network_not_permitted", tier="off",
                             effective_tier="off", ceiling="public"))
    assert type(e) is sluice.NetworkNotPermittedError
    assert (e.tier, e.effective_tier, e.ceiling) == ("off", "off", "public")
    e = error_from(403, body("network_not_permitted"))
    assert (e.tier, e.effective_tier, e.ceiling) == (None, None, None)
