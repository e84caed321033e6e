"""The asyncio client: the surface of :mod:`sluice.client` with ``await``
and ``async for``, on the standard library's asyncio streams."""

from __future__ import annotations

import asyncio
import random
import ssl
import time
from typing import (Any, AsyncGenerator, AsyncIterator, Mapping, Optional,
                    Sequence, Union)

from . import _calls as C
from ._http import AsyncTransport, Body, SSEParser, as_bytes
from ._pty import AsyncTerminal, PortResponse, Terminal, TerminalInfo
from .client import (DEFAULT_BROKER_ADDRESS, DEFAULT_EXEC_ADDRESS, _Seen,
                     _addr, _event, _fatal, _token, doctor_of)
from .errors import (CommandError, SluiceConnectionError,
                     SluiceError, SluiceTimeoutError)
from .models import (BrokerSession, Ceiling, CommandOutput, CommandStatus,
                     Credential, Decision, Doctor, Event, ExecResult, Grant,
                     Health, Limits, Listing, Prompt, Rule, RuleAction,
                     RuleList, SandboxInfo, StreamChunk, TarResult)

__all__ = ["AsyncSandboxClient", "AsyncSandboxes", "AsyncSandbox",
           "AsyncCommand", "AsyncBrokerClient", "AsyncEventStream",
           "AsyncPromptWatch"]


class AsyncSandboxClient:
    """:class:`~sluice.SandboxClient` on asyncio: the same arguments, every
    call a coroutine, ``stream`` and ``watch`` async iterators."""

    def __init__(self, address: Optional[str] = None,
                 token: Optional[str] = None, *,
                 broker: Optional[str] = None,
                 broker_token: Optional[str] = None,
                 ca_file: Optional[str] = None,
                 ssl_context: Optional[ssl.SSLContext] = None,
                 timeout: float = 60.0, create_timeout: float = 120.0) -> None:
        addr = _addr(address, "SLUICE_EXEC_ADDRESS", DEFAULT_EXEC_ADDRESS)
        self._t = AsyncTransport(addr, _token(token, addr,
                                              "SLUICE_EXEC_TOKEN"),
                                 timeout, ca_file, ssl_context, broker=False)
        self._create_timeout = create_timeout
        self._broker_args = (broker, broker_token, ca_file, ssl_context)
        self._broker: Optional[AsyncBrokerClient] = None
        self.sandboxes = AsyncSandboxes(self)

    @property
    def address(self) -> str:
        return str(self._t.address)

    @property
    def broker(self) -> "AsyncBrokerClient":
        if self._broker is None:
            a, t, ca, ctx = self._broker_args
            self._broker = AsyncBrokerClient(a, t, ca_file=ca,
                                             ssl_context=ctx)
        return self._broker

    async def health(self) -> Health:
        return await self._t.call(C.health())

    async def node(self) -> dict[str, Any]:
        """:meth:`sluice.SandboxClient.node`."""
        return await self._t.call(C.node())

    async def set_draining(self, on: bool) -> dict[str, Any]:
        """:meth:`sluice.SandboxClient.set_draining`."""
        return await self._t.call(C.set_draining(on))

    async def healthz(self) -> dict[str, Any]:
        """:meth:`sluice.SandboxClient.healthz`."""
        try:
            return await self._t.call(C.healthz())
        except SluiceError as e:
            if e.status != 503:
                raise
            return C.healthz_503(e)

    async def doctor(self) -> Doctor:
        try:
            return doctor_of(await self.health(), None)
        except SluiceError as e:
            return doctor_of(None, e)

    async def metrics(self) -> str:
        return await self._t.call(C.metrics())

    async def events(self, idle_timeout: Optional[float] = None
                     ) -> AsyncIterator[tuple[str, Any]]:
        """``async for event, data in client.events()``; see
        :meth:`sluice.SandboxClient.events`."""
        s = await self._t.open(C.events(), read_timeout=idle_timeout)
        parser = SSEParser()
        try:
            async for data in s.chunks():
                for _id, ev, text in parser.feed(data):
                    yield C.event_of(ev, text)
        finally:
            s.close()

    async def close(self) -> None:
        """Nothing stays open between calls; for ``async with``."""

    async def __aenter__(self) -> "AsyncSandboxClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


class AsyncSandboxes:
    def __init__(self, client: AsyncSandboxClient) -> None:
        self._c = client

    async def create(self, tenant_id: str, user_id: str,
                     id: Optional[str] = None, network: Optional[str] = None,
                     profile: Optional[str] = None,
                     limits: Union[Limits, Mapping[str, int], None] = None,
                     backend: Optional[str] = None) -> "AsyncSandbox":
        """See :meth:`sluice.Sandboxes.create`; never retried."""
        body = C.create_body(tenant_id, user_id, id, network, profile, limits,
                             backend)
        info = await self._c._t.call(C.sandbox_create(
            body, self._c._create_timeout))
        return AsyncSandbox(self._c, info)

    async def get(self, id: str) -> "AsyncSandbox":
        return AsyncSandbox(self._c, await self._c._t.call(C.sandbox_get(id)))

    async def list(self, tenant: Optional[str] = None,
                   user: Optional[str] = None) -> list["AsyncSandbox"]:
        return [AsyncSandbox(self._c, i) for i in
                await self._c._t.call(C.sandbox_list(tenant, user))]

    async def discard_archive(self, id: str) -> dict[str, Any]:
        """:meth:`sluice.client.Sandboxes.discard_archive`."""
        return await self._c._t.call(C.sandbox_delete(id, False))


class AsyncSandbox:
    """:class:`~sluice.Sandbox` on asyncio (``async with`` destroys it)."""

    def __init__(self, client: AsyncSandboxClient, info: SandboxInfo) -> None:
        self._c = client
        self._t = client._t
        self.id = info.id
        self.session = info.session     # sluiced's session (Sandbox)
        self.last_info = info

    def __repr__(self) -> str:
        return "<AsyncSandbox %s %s/%s %s>" % (
            self.id, self.last_info.tenant, self.last_info.user,
            self.last_info.state)

    async def __aenter__(self) -> "AsyncSandbox":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.destroy()

    async def info(self) -> SandboxInfo:
        self.last_info = await self._t.call(C.sandbox_get(self.id))
        return self.last_info

    async def set_network(self, tier: str) -> SandboxInfo:
        self.last_info = await self._t.call(C.sandbox_patch(self.id, tier))
        return self.last_info

    async def exec(self, cmd: C.Cmd, timeout_s: Optional[int] = None,
                   env: Optional[Mapping[str, str]] = None,
                   cwd: Optional[str] = None,
                   stdin: Union[str, bytes, None] = None, *,
                   output_cap: Optional[int] = None,
                   output_cap_total: Optional[int] = None,
                   binary: bool = False) -> ExecResult:
        body = C.command_body(cmd, timeout_s, env, cwd, stdin, output_cap,
                              binary, output_cap_total)
        return await self._t.call(C.exec_(self.id, body, C.exec_wait_s(
            timeout_s, self.last_info.limits)))

    async def stream(self, cmd: C.Cmd, timeout_s: Optional[int] = None,
                     env: Optional[Mapping[str, str]] = None,
                     cwd: Optional[str] = None,
                     stdin: Union[str, bytes, None] = None, *,
                     binary: bool = False
                     ) -> AsyncIterator[Union[StreamChunk, ExecResult]]:
        """``async for item in sb.stream(cmd)``: chunks, then the result."""
        body = C.command_body(cmd, timeout_s, env, cwd, stdin, None, binary)
        s = await self._t.open(C.exec_stream(self.id, body),
                               read_timeout=C.exec_wait_s(
                                   timeout_s, self.last_info.limits))
        parser = SSEParser()
        out: dict[str, list[bytes]] = {"stdout": [], "stderr": []}
        try:
            async for data in s.chunks():
                for _id, ev, text in parser.feed(data):
                    ev, d = C.stream_event(ev, text)
                    if ev in ("stdout", "stderr"):
                        b = C.chunk_bytes(d, binary)
                        out[ev].append(b)
                        yield StreamChunk(ev, b.decode("utf-8", "replace"), b)  # type: ignore[arg-type]
                    elif ev == "exit":
                        yield ExecResult.from_json(d, b"".join(out["stdout"]),
                                                   b"".join(out["stderr"]))
                        return
        finally:
            s.close()
        raise SluiceConnectionError("sluice-execd: the stream of a command "
                                    "ended before its exit event",
                                    code="connection_failed")

    async def start(self, cmd: C.Cmd, timeout_s: Optional[int] = None,
                    env: Optional[Mapping[str, str]] = None,
                    cwd: Optional[str] = None,
                    stdin: Union[str, bytes, None] = None) -> "AsyncCommand":
        body = C.command_body(cmd, timeout_s, env, cwd, stdin)
        d = await self._t.call(C.command_start(self.id, body))
        return AsyncCommand(self, str(d.get("id")), str(d.get("status")))

    async def commands(self) -> list[CommandStatus]:
        return await self._t.call(C.command_list(self.id))

    async def command(self, id: str) -> "AsyncCommand":
        st = await self._t.call(C.command_get(self.id, id))
        c = AsyncCommand(self, st.id, st.status)
        c.last = st
        return c

    async def install(self, packages: Union[str, Sequence[str]],
                      manager: str = "pip", *,
                      timeout_s: Optional[int] = None,
                      check: bool = True) -> ExecResult:
        body = C.install_body(packages, manager, timeout_s)
        r = await self._t.call(C.install(self.id, body, C.exec_wait_s(
            timeout_s, self.last_info.limits)))
        if check and not r.ok:
            tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
            raise CommandError("%s install failed (exit %d): %s" % (
                manager, r.exit_code, " / ".join(tail)), r)
        return r

    async def cancel(self, all: bool = False) -> int:
        return await self._t.call(C.cancel(self.id, all))

    async def destroy(self, archive: bool = True) -> None:
        await self._t.call(C.sandbox_delete(self.id, archive))

    async def write(self, path: str, data: Body) -> int:
        d = await self._t.call(C.file_write(self.id, path, as_bytes(data)))
        return int(d.get("size") or 0)

    async def read(self, path: str, offset: Optional[int] = None,
                   length: Optional[int] = None) -> bytes:
        return await self._t.call(C.file_read(self.id, path, offset, length))

    async def read_text(self, path: str, encoding: str = "utf-8") -> str:
        return (await self.read(path)).decode(encoding, "replace")

    async def list(self, glob: str = "*", recursive: bool = False,
                   path: Optional[str] = None) -> Listing:
        return await self._t.call(C.files_list(self.id, path, glob,
                                               recursive))

    async def edit(self, path: str, old: str, new: str) -> None:
        await self._t.call(C.edit(self.id, path, old, new))

    async def remove(self, path: str) -> None:
        await self._t.call(C.file_delete(self.id, path))

    async def put_tar(self, data_or_path: C.TarSource, dir: str = "."
                      ) -> TarResult:
        return await self._t.call(C.archive_put(self.id, dir, C.tar_bytes(
            data_or_path)))

    async def get_tar(self, dir: str = ".") -> bytes:
        return await self._t.call(C.archive_get(self.id, dir))

    # terminals and ports

    def _sync(self) -> Any:
        """A blocking view of this sandbox for the terminal's thread."""
        from ._http import Transport

        class _SB:
            pass
        sb = _SB()
        t = self._t
        sb._t = Transport(str(t.address), t.token, t.timeout,  # type: ignore[attr-defined]
                          None, t._ctx, False)
        sb.id = self.id  # type: ignore[attr-defined]
        return sb

    async def terminal(self, command: Optional[str] = None, *,
                       cols: Optional[int] = None, rows: Optional[int] = None,
                       cwd: Optional[str] = None,
                       env: Optional[Mapping[str, str]] = None,
                       attach: bool = True) -> AsyncTerminal:
        """:meth:`sluice.Sandbox.terminal` on asyncio."""
        t = AsyncTerminal(Terminal(self._sync(), TerminalInfo.of(
            await self._t.call(C.pty_start(self.id, command, cwd, env, cols,
                                           rows)))))
        return await t.attach() if attach else t

    async def terminal_of(self, id: str) -> AsyncTerminal:
        """:meth:`sluice.Sandbox.terminal_of` on asyncio."""
        return AsyncTerminal(Terminal(self._sync(), TerminalInfo.of(
            await self._t.call(C.pty_get(self.id, id)))))

    def port_url(self, port: int, path: str = "/") -> str:
        """:meth:`sluice.Sandbox.port_url`."""
        return str(self._t.address) + C.port_path(self.id, port, path)

    async def fetch(self, port: int, path: str = "/", method: str = "GET",
                    body: Optional[Body] = None,
                    headers: Optional[Mapping[str, str]] = None,
                    timeout: Optional[float] = None) -> PortResponse:
        """:meth:`sluice.Sandbox.fetch` on asyncio."""
        return await self._t.call(C.port_fetch(
            self.id, port, path, method,
            as_bytes(body) if body is not None else None, headers, timeout))


class AsyncCommand:
    """:class:`~sluice.Command` on asyncio."""

    def __init__(self, sandbox: AsyncSandbox, id: str, status: str) -> None:
        self.sandbox = sandbox
        self.id = id
        self.status = status
        self.last: Optional[CommandStatus] = None
        self._next = [0, 0]

    def __repr__(self) -> str:
        return "<AsyncCommand %s in %s: %s>" % (self.id, self.sandbox.id,
                                                self.status)

    def _seen(self, st: CommandStatus) -> CommandStatus:
        self.last = st
        self.status = st.status
        return st

    async def refresh(self) -> CommandStatus:
        return self._seen(await self.sandbox._t.call(C.command_get(
            self.sandbox.id, self.id)))

    async def output(self, offset: Optional[int] = None, *,
                     stdout_offset: Optional[int] = None,
                     stderr_offset: Optional[int] = None,
                     binary: bool = False) -> CommandOutput:
        so = stdout_offset if stdout_offset is not None else (
            offset if offset is not None else self._next[0])
        se = stderr_offset if stderr_offset is not None else (
            offset if offset is not None else self._next[1])
        o = await self.sandbox._t.call(C.command_output(
            self.sandbox.id, self.id, so, se, binary))
        self._next = [o.stdout.next, o.stderr.next]
        self._seen(o.status)
        return o

    async def wait(self, timeout: Optional[float] = None,
                   poll_s: float = 0.2) -> CommandStatus:
        end = None if timeout is None else time.monotonic() + timeout
        delay = min(0.05, poll_s)
        while True:
            st = await self.refresh()
            if st.status != "running":
                return st
            if end is not None and time.monotonic() + delay > end:
                raise SluiceTimeoutError("command %s still running after "
                                         "%ss" % (self.id, timeout))
            await asyncio.sleep(delay)
            delay = min(delay * 2, poll_s)

    async def stop(self) -> None:
        await self.sandbox._t.call(C.command_stop(self.sandbox.id, self.id))


class AsyncEventStream:
    """:class:`~sluice.EventStream` on asyncio: ``async for event in
    broker.events()``."""

    def __init__(self, t: AsyncTransport, last_event_id: Optional[int] = None,
                 reconnect: bool = True, reconnects: Optional[int] = None,
                 idle_timeout: float = 60.0, markers: bool = False) -> None:
        self._t = t
        self.last_event_id = last_event_id
        self._reconnect = reconnect
        self._max = reconnects
        self._idle = idle_timeout
        self._markers = markers
        self._stream: Any = None
        self._pre: Any = None
        self._closed = False
        self.connects = 0
        self._it = self._run()

    def __aiter__(self) -> "AsyncEventStream":
        return self

    async def __anext__(self) -> Event:
        return await self._it.__anext__()

    async def _open(self) -> Any:
        extra = {}
        if self.last_event_id is not None:
            extra["Last-Event-ID"] = str(self.last_event_id)
        s = await self._t.open(C.b_events(), extra, self._idle)
        self.connects += 1
        return s

    async def connect(self) -> "AsyncEventStream":
        """Open the stream now (see :meth:`sluice.EventStream.connect`)."""
        if self._stream is None and self._pre is None and not self._closed:
            self._pre = await self._open()
        return self

    async def aclose(self) -> None:
        self._closed = True
        for s in (self._stream, self._pre):
            if s is not None:
                s.close()
        await self._it.aclose()

    async def __aenter__(self) -> "AsyncEventStream":
        return await self.connect()

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def _run(self) -> AsyncGenerator[Event, None]:
        fails = 0
        delay = 0.1
        while not self._closed:
            try:
                if self._pre is not None:
                    self._stream, self._pre = self._pre, None
                else:
                    self._stream = await self._open()
                fails, delay = 0, 0.1
                if self._markers:
                    yield Event(None, "connected", {"connects": self.connects})
                parser = SSEParser()
                async for data in self._stream.chunks():
                    for ev_id, ev, text in parser.feed(data):
                        e = _event(ev_id, ev, text)
                        if e.id is not None:
                            self.last_event_id = e.id
                        yield e
            except SluiceError as e:
                if self._closed:
                    return
                if _fatal(e) or not self._reconnect:
                    raise
                fails += 1
                if self._max is not None and fails > self._max:
                    raise
            finally:
                if self._stream is not None:
                    self._stream.close()
                    self._stream = None
            if self._closed or not self._reconnect:
                return
            await asyncio.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 5.0)


class AsyncPromptWatch:
    """:class:`~sluice.PromptWatch` on asyncio: ``async for prompt in
    broker.prompts.watch(): await prompt.allow_once()``."""

    def __init__(self, broker: "AsyncBrokerClient", pending: bool = True,
                 session: Optional[str] = None,
                 last_event_id: Optional[int] = None,
                 reconnects: Optional[int] = None,
                 idle_timeout: float = 60.0) -> None:
        self._b = broker
        self._pending = pending
        self._session = session
        self._seen = _Seen()
        self.events = AsyncEventStream(broker._t, last_event_id,
                                       reconnects=reconnects,
                                       idle_timeout=idle_timeout,
                                       markers=True)
        self._it = self._run()

    def _want(self, p: Prompt) -> bool:
        return ((self._session is None or p.session == self._session) and
                p.state == "pending" and self._seen.add(p.id))

    async def _run(self) -> AsyncGenerator[Prompt, None]:
        async for e in self.events:
            if e.type == "connected" and e.id is None:
                for p in (await self._b.prompts.list()
                          if self._pending else []):
                    if self._want(p):
                        yield p
            elif e.type == "prompt" and isinstance(e.data, dict):
                p = C.prompt_of(e.data, self._b._answer)
                if self._want(p):
                    yield p

    def __aiter__(self) -> "AsyncPromptWatch":
        return self

    async def __anext__(self) -> Prompt:
        return await self._it.__anext__()

    async def connect(self) -> "AsyncPromptWatch":
        """Open the stream now: from here on the app is an approver
        (``async with ... watch() as w`` does it)."""
        await self.events.connect()
        return self

    async def aclose(self) -> None:
        await self.events.aclose()
        await self._it.aclose()

    async def __aenter__(self) -> "AsyncPromptWatch":
        return await self.connect()

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


class _Sessions:
    def __init__(self, b: "AsyncBrokerClient") -> None:
        self._t = b._t

    async def list(self) -> list[BrokerSession]:
        return await self._t.call(C.b_sessions())

    async def get(self, id: str) -> BrokerSession:
        return await self._t.call(C.b_session_get(id))

    async def create(self, id: str, tenant: str = "", user: str = "",
                     tier: str = "off", *, socket: Optional[str] = None,
                     source: Optional[str] = None,
                     vsock_cid: Optional[int] = None) -> BrokerSession:
        return await self._t.call(C.b_session_create(
            id, tenant, user, tier, socket, source, vsock_cid))

    async def set_tier(self, id: str, tier: str) -> BrokerSession:
        return await self._t.call(C.b_session_tier(id, tier))

    async def delete(self, id: str) -> None:
        await self._t.call(C.b_session_delete(id))


class _Grants:
    def __init__(self, b: "AsyncBrokerClient") -> None:
        self._t = b._t

    async def list(self, session: str) -> list[Grant]:
        return (await self._t.call(C.b_session_get(session))).grants

    async def add(self, session: str, host: str, port: int) -> Grant:
        return await self._t.call(C.b_grant_add(session, host, port))

    async def remove(self, session: str, host: str, port: int) -> None:
        await self._t.call(C.b_grant_remove(session, host, port))


class _Ceilings:
    def __init__(self, b: "AsyncBrokerClient") -> None:
        self._t = b._t

    async def get(self) -> Ceiling:
        return await self._t.call(C.b_ceiling_get())

    async def set(self, tier: Optional[str] = None,
                  tenants: Optional[Mapping[str, Optional[str]]] = None, *,
                  close_exceeding: bool = False) -> Ceiling:
        return await self._t.call(C.b_ceiling_set(tier, tenants,
                                                  close_exceeding))


class _Rules:
    def __init__(self, b: "AsyncBrokerClient") -> None:
        self._t = b._t

    async def list(self) -> RuleList:
        """The API's rules in order, the configuration's and the built-in
        names (every role)."""
        return await self._t.call(C.b_rules())

    async def get(self, name: str) -> Rule:
        """One of the API's rules (:class:`NotFoundError` for none)."""
        return await self._t.call(C.b_rule_get(name))

    async def add(self, name: str, hosts: Union[str, Sequence[str]],
                  action: RuleAction, *, tenant: Optional[str] = None,
                  methods: Optional[Sequence[str]] = None,
                  paths: Optional[Sequence[str]] = None) -> Rule:
        """Append a rule after the API's others, or replace the API's rule
        of that name where it stands (admin).  ``tenant`` None: every
        tenant's sessions."""
        return await self._t.call(C.b_rule_put(C.rule_body(Rule(
            name=name, hosts=C.strs_arg("hosts", hosts), action=action,
            tenant=tenant, methods=C.strs_arg("methods", methods or []),
            paths=C.strs_arg("paths", paths or [])))))

    async def put(self, rule: C.RuleLike) -> Rule:
        """:meth:`add` of a :class:`Rule` (or a dict in the API's shape)."""
        return await self._t.call(C.b_rule_put(C.rule_body(rule)))

    async def replace(self, rules: Sequence[C.RuleLike]) -> RuleList:
        """The API's whole list, checked whole (admin); ``[]`` removes
        them all."""
        return await self._t.call(C.b_rules_replace(rules))

    async def delete(self, name: str) -> None:
        """Remove one of the API's rules (admin)."""
        await self._t.call(C.b_rule_delete(name))


class _Credentials:
    def __init__(self, b: "AsyncBrokerClient") -> None:
        self._t = b._t

    async def list(self) -> list[Credential]:
        """The credentials (a caller bound to a tenant: its own), never a
        value."""
        return await self._t.call(C.b_creds())

    async def get(self, name: str) -> Credential:
        return await self._t.call(C.b_cred_get(name))

    async def set(self, name: str, *, tenant: str,
                  hosts: Union[str, Sequence[str]], value: str,
                  header: str = "Authorization",
                  format: Optional[str] = None,
                  methods: Optional[Sequence[str]] = None,
                  paths: Optional[Sequence[str]] = None) -> Credential:
        """Set a credential, or replace the one of that name (rotation:
        its placeholder stays); every host must be inspected by sluiced.
        ``format`` has ``{}`` where the value goes (sluiced's default:
        the value alone).  The value is never sent back."""
        return await self._t.call(C.b_cred_set(
            name, tenant, hosts, value, header, format, methods, paths))

    async def delete(self, name: str) -> None:
        """Revoke it: its placeholder is removed from then on."""
        await self._t.call(C.b_cred_delete(name))


class _Prompts:
    def __init__(self, b: "AsyncBrokerClient") -> None:
        self._b = b
        self._t = b._t

    async def list(self) -> list[Prompt]:
        return [C.prompt_of(p, self._b._answer)
                for p in await self._t.call(C.b_prompts())]

    async def get(self, id: str) -> Prompt:
        return C.prompt_of(await self._t.call(C.b_prompt_get(id)),
                           self._b._answer)

    async def answer(self, id: str, decision: Decision) -> Prompt:
        return C.prompt_of(await self._t.call(C.b_prompt_answer(id, decision)),
                           self._b._answer)

    def watch(self, *, pending: bool = True, session: Optional[str] = None,
              last_event_id: Optional[int] = None,
              reconnects: Optional[int] = None,
              idle_timeout: float = 60.0) -> AsyncPromptWatch:
        return AsyncPromptWatch(self._b, pending, session, last_event_id,
                                reconnects, idle_timeout)


class AsyncBrokerClient:
    """:class:`~sluice.BrokerClient` on asyncio."""

    def __init__(self, address: Optional[str] = None,
                 token: Optional[str] = None, *,
                 ca_file: Optional[str] = None,
                 ssl_context: Optional[ssl.SSLContext] = None,
                 timeout: float = 30.0) -> None:
        addr = _addr(address, "SLUICE_BROKER_ADDRESS", DEFAULT_BROKER_ADDRESS)
        self._t = AsyncTransport(addr, _token(token, addr,
                                              "SLUICE_BROKER_TOKEN"),
                                 timeout, ca_file, ssl_context, broker=True)
        self.sessions = _Sessions(self)
        self.grants = _Grants(self)
        self.ceilings = _Ceilings(self)
        self.prompts = _Prompts(self)
        self.rules = _Rules(self)
        self.credentials = _Credentials(self)

    @property
    def address(self) -> str:
        return str(self._t.address)

    async def _answer(self, p: Prompt, decision: Decision) -> Prompt:
        n = await self.prompts.answer(p.id, decision)
        p.state = n.state
        return n

    async def health(self) -> dict[str, Any]:
        return await self._t.call(C.b_health())

    async def metrics(self) -> str:
        return await self._t.call(C.b_metrics())

    def events(self, last_event_id: Optional[int] = None, *,
               reconnect: bool = True, reconnects: Optional[int] = None,
               idle_timeout: float = 60.0) -> AsyncEventStream:
        return AsyncEventStream(self._t, last_event_id, reconnect, reconnects,
                                idle_timeout)
