"""Fixtures of the SDK tests: the daemons tests/scenario/t_sdk_python.py
started (their addresses in SLUICE_TEST_*), clients over the Unix sockets
and over TLS with tokens, sandboxes that are destroyed after each test,
and a socket forwarder that can cut or drop connections."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from typing import Any, Callable, Iterator, Optional

import pytest

import sluice

ENV = os.environ


def _need() -> None:
    if "SLUICE_TEST_EXEC" not in ENV:
        pytest.skip("run through tests/scenario/t_sdk_python.py (make check "
                    "TESTS=tests/scenario/t_sdk_python.py): it starts the "
                    "daemons", allow_module_level=True)


_need()
TOKENS: dict[str, str] = json.load(open(ENV["SLUICE_TEST_TOKENS"]))
EXEC = ENV["SLUICE_TEST_EXEC"]
BROKER = ENV["SLUICE_TEST_BROKER"]
EXEC_URL = ENV["SLUICE_TEST_EXEC_URL"]
BROKER_URL = ENV["SLUICE_TEST_BROKER_URL"]
CA = ENV["SLUICE_TEST_CA"]
WEB = ENV["SLUICE_TEST_WEB"]
INDEX = ENV["SLUICE_TEST_INDEX"]
TMP = ENV["SLUICE_TEST_TMP"]


PIP_CONF = ("mkdir -p ~/.config/pip && printf '[global]\\nindex-url = %s\\n"
            "trusted-host = pypi.org\\n' > ~/.config/pip/pip.conf" % INDEX)
"""A shell command pointing the sandbox's pip at the test registry."""


def uid(prefix: str = "py") -> str:
    return "%s-%s" % (prefix, uuid.uuid4().hex[:10])


def wait_for(pred: Callable[[], Any], timeout: float = 20.0,
             what: str = "condition") -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("timed out waiting for %s" % what)


@pytest.fixture
def client() -> sluice.SandboxClient:
    return sluice.SandboxClient(EXEC, broker=BROKER)


@pytest.fixture
def broker() -> sluice.BrokerClient:
    return sluice.BrokerClient(BROKER)


@pytest.fixture
def admin_broker() -> sluice.BrokerClient:
    return sluice.BrokerClient(BROKER_URL, TOKENS["broker_admin"], ca_file=CA)


class Made:
    """Sandboxes made by a test, destroyed after it."""

    def __init__(self, client: sluice.SandboxClient) -> None:
        self.client = client
        self.ids: list[str] = []

    def __call__(self, tenant: str = "acme", user: Optional[str] = None,
                 **kw: Any) -> sluice.Sandbox:
        sb = self.client.sandboxes.create(tenant, user or uid("u"), **kw)
        self.ids.append(sb.id)
        return sb

    def cleanup(self) -> None:
        for i in self.ids:
            try:
                self.client.sandboxes.get(i).destroy(archive=False)
            except sluice.NotFoundError:
                pass


@pytest.fixture
def make(client: sluice.SandboxClient) -> Iterator[Made]:
    m = Made(client)
    yield m
    m.cleanup()


@pytest.fixture
def sandbox(make: Made) -> sluice.Sandbox:
    return make(network="registries")


class Forwarder:
    """A Unix socket in front of a daemon's.  ``pause()`` cuts what is
    open and closes new connections at once until ``resume()``;
    ``drop_answer`` forwards requests but closes before the answer;
    ``heads`` are the request heads seen."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.path = os.path.join(TMP, "fwd-%s.sock" % uuid.uuid4().hex[:8])
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(self.path)
        self.srv.listen(16)
        self.srv.settimeout(0.2)
        self.paused = False
        self.drop_answer = 0        # how many answers to drop
        self.drop_request = 0       # how many requests to cut unanswered
        self.heads: list[bytes] = []
        self.open: list[socket.socket] = []
        self.lock = threading.Lock()
        self.stop = False
        self.t = threading.Thread(target=self._accept, daemon=True)
        self.t.start()

    def _accept(self) -> None:
        end = time.monotonic() + 600
        while not self.stop and time.monotonic() < end:
            try:
                c, _ = self.srv.accept()
            except (socket.timeout, OSError):
                continue
            if self.paused:
                c.close()
                continue
            threading.Thread(target=self._serve, args=(c,),
                             daemon=True).start()

    def _serve(self, c: socket.socket) -> None:
        up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            up.connect(self.target)
        except OSError:
            c.close()
            return
        with self.lock:
            self.open += [c, up]
            drop_req = self.drop_request > 0
            if drop_req:
                self.drop_request -= 1
            drop_ans = not drop_req and self.drop_answer > 0
            if drop_ans:
                self.drop_answer -= 1
        head = b""
        c.settimeout(30)
        try:
            while b"\r\n\r\n" not in head and len(head) < 65536:
                d = c.recv(65536)
                if not d:
                    break
                head += d
            self.heads.append(head.split(b"\r\n\r\n")[0])
            if drop_req:
                raise OSError("cut before forwarding")
            up.sendall(head)
            threading.Thread(target=self._pump, args=(c, up),
                             daemon=True).start()
            if drop_ans:
                # the daemon gets the whole request and answers; the client
                # gets nothing: the connection drops
                up.settimeout(120)
                got = b""
                while b"\r\n\r\n" not in got:
                    d = up.recv(65536)
                    if not d:
                        break
                    got += d
                raise OSError("cut before the answer")
            self._pump(up, c)
        except OSError:
            pass
        finally:
            for s in (c, up):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                try:
                    s.close()
                except OSError:
                    pass

    @staticmethod
    def _pump(a: socket.socket, b: socket.socket) -> None:
        try:
            a.settimeout(None)
            while True:
                d = a.recv(65536)
                if not d:
                    break
                b.sendall(d)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def pause(self) -> None:
        self.paused = True
        with self.lock:
            for s in self.open:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self.open = []

    def resume(self) -> None:
        self.paused = False

    def close(self) -> None:
        self.stop = True
        self.pause()
        self.t.join(2)
        self.srv.close()
        try:
            os.unlink(self.path)
        except OSError:
            pass


@pytest.fixture
def forwarder() -> Iterator[Callable[[str], Forwarder]]:
    made: list[Forwarder] = []

    def mk(target: str) -> Forwarder:
        f = Forwarder(target)
        made.append(f)
        return f
    yield mk
    for f in made:
        f.close()
