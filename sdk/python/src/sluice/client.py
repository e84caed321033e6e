"""The blocking client: sandboxes, commands and files on sluice-execd(8),
and the broker (sluiced(8)'s control API) for sessions, ceilings, grants
and the network prompts of the chats."""

from __future__ import annotations

import os
import random
import ssl
import time
from collections import OrderedDict
from typing import (Any, Iterator, Mapping, Optional, Sequence,
                    Union)

from . import _calls as C
from ._http import Body, SSEParser, Transport, as_bytes
from ._pty import PortResponse, Terminal
from .errors import (CommandError, SluiceConnectionError,
                     SluiceError, SluiceTimeoutError)
from .models import (BrokerSession, Ceiling, CommandOutput, CommandStatus,
                     Credential, Decision, Doctor, Event, ExecResult,
                     FileEntry, Grant, Health, Limits, Listing, Prompt, Rule,
                     RuleAction, RuleList, SandboxInfo, StreamChunk,
                     TarResult)

__all__ = ["SandboxClient", "Sandboxes", "Sandbox", "Command",
           "BrokerClient", "EventStream", "PromptWatch",
           "DEFAULT_EXEC_ADDRESS", "DEFAULT_BROKER_ADDRESS", "doctor_of"]

DEFAULT_EXEC_ADDRESS = "/run/sluice-execd/exec.sock"
DEFAULT_BROKER_ADDRESS = "/run/sluice/control.sock"


def _addr(given: Optional[str], env: str, default: str) -> str:
    return given if given is not None else os.environ.get(env, default)


def _token(given: Optional[str], address: str, env: str) -> Optional[str]:
    if given is not None or "://" not in address:
        return given
    return os.environ.get(env) or None


def doctor_of(h: Optional[Health], err: Optional[BaseException]) -> Doctor:
    """What is wrong, from the executor's health (or why it was not had)."""
    if h is None:
        return Doctor(False, ["sluice-execd does not answer: %s" % err], None)
    p: list[str] = []
    dflt = [b for b in h.backends if b.get("name") == h.default_backend]
    if dflt and not dflt[0].get("ok"):
        p.append("the default backend %s cannot run here: %s" % (
            h.default_backend, dflt[0].get("reason")))
    if not h.broker.get("ok"):
        p.append("sluiced does not answer sluice-execd on its control "
                 "socket (%s): sandboxes cannot be created" %
                 (h.broker.get("reason") or h.broker.get("socket") or "?"))
    sb = h.capacity.get("sandboxes")
    if isinstance(sb, dict) and sb.get("left") == 0:
        p.append("no sandbox left: the host's %s are in use (quotas."
                 "sandboxes)" % sb.get("limit"))
    return Doctor(not p, p, h)


class SandboxClient:
    """A client of sluice-execd.

    ``address`` is the executor's Unix socket (default
    ``$SLUICE_EXEC_ADDRESS`` or ``/run/sluice-execd/exec.sock``; the daemon
    takes your uid and groups as your role) or an ``https://`` URL, then
    with ``token`` (default ``$SLUICE_EXEC_TOKEN``).  ``broker`` and
    ``broker_token`` are sluiced's control API likewise (default
    ``$SLUICE_BROKER_ADDRESS`` or ``/run/sluice/control.sock``).
    ``ca_file`` or ``ssl_context`` verify https servers; ``timeout`` bounds
    each call that is not a command (those wait for the command's
    deadline).
    """

    def __init__(self, address: Optional[str] = None,
                 token: Optional[str] = None, *,
                 broker: Optional[str] = None,
                 broker_token: Optional[str] = None,
                 ca_file: Optional[str] = None,
                 ssl_context: Optional[ssl.SSLContext] = None,
                 timeout: float = 60.0, create_timeout: float = 120.0) -> None:
        addr = _addr(address, "SLUICE_EXEC_ADDRESS", DEFAULT_EXEC_ADDRESS)
        self._t = Transport(addr, _token(token, addr, "SLUICE_EXEC_TOKEN"),
                            timeout, ca_file, ssl_context, broker=False)
        self._create_timeout = create_timeout
        self._broker_args = (broker, broker_token, ca_file, ssl_context)
        self._broker: Optional[BrokerClient] = None
        self.sandboxes = Sandboxes(self)

    @property
    def address(self) -> str:
        return str(self._t.address)

    @property
    def broker(self) -> "BrokerClient":
        """sluiced's control API: sessions, ceilings, grants, prompts."""
        if self._broker is None:
            a, t, ca, ctx = self._broker_args
            self._broker = BrokerClient(a, t, ca_file=ca, ssl_context=ctx)
        return self._broker

    def health(self) -> Health:
        """GET /v1/health: backends, broker, capacity."""
        return self._t.call(C.health())

    def node(self) -> dict[str, Any]:
        """GET /v1/node (auditor): what a fleet places sandboxes by:
        ``host``, ``version``, ``backends``, ``capacity`` (slots,
        sandboxes, cpus, memory, disk headroom), ``draining`` and, while
        draining, ``remaining`` (see docs/scale.md)."""
        return self._t.call(C.node())

    def set_draining(self, on: bool) -> dict[str, Any]:
        """PUT /v1/node (admin): ``on`` True drains the node (creates get
        503 backend_unavailable, reason draining; each sandbox is
        archived and removed at its next idle point), False ends it.
        Returns ``{"draining", "remaining"?}``."""
        return self._t.call(C.set_draining(on))

    def healthz(self) -> dict[str, Any]:
        """GET /healthz, a load balancer's probe (no role or token
        needed): ``{"ok", "image_ready"}``, ``ok`` False when no sandbox
        can be made now (its 503)."""
        try:
            return self._t.call(C.healthz())
        except SluiceError as e:
            if e.status != 503:
                raise
            return C.healthz_503(e)

    def doctor(self) -> Doctor:
        """The health, read as a list of problems with what to do."""
        try:
            return doctor_of(self.health(), None)
        except SluiceError as e:
            return doctor_of(None, e)

    def metrics(self) -> str:
        """GET /v1/metrics: the Prometheus text (auditor)."""
        return self._t.call(C.metrics())

    def events(self, idle_timeout: Optional[float] = None
               ) -> Iterator[tuple[str, Any]]:
        """GET /v1/events (auditor): ``(event, data)`` as they happen,
        ``sandbox`` (created, removed) and ``command`` (started, exited),
        data a dict.  It is not resumed: a reader that fell behind gets
        ``("dropped", ...)`` and the iteration ends, as it does when the
        daemon drains.  ``idle_timeout`` bounds a silence (None: none)."""
        s = self._t.open(C.events(), read_timeout=idle_timeout)
        parser = SSEParser()
        try:
            for data in s.chunks():
                for _id, ev, text in parser.feed(data):
                    yield C.event_of(ev, text)
        finally:
            # leaving the loop early closes the connection at once
            s.close()

    def close(self) -> None:
        """Nothing stays open between calls; for ``with`` blocks."""

    def __enter__(self) -> "SandboxClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Sandboxes:
    """``client.sandboxes``: create, get and list sandboxes."""

    def __init__(self, client: SandboxClient) -> None:
        self._c = client

    def create(self, tenant_id: str, user_id: str, id: Optional[str] = None,
               network: Optional[str] = None, profile: Optional[str] = None,
               limits: Union[Limits, Mapping[str, int], None] = None,
               backend: Optional[str] = None) -> "Sandbox":
        """Create a sandbox (and its broker session) for one chat.

        ``id`` defaults to a random ``sbx-...``; ``network`` is the tier
        (off, registries, public) under the administrator's ceiling, by
        default none is sent and the daemon's ``tier`` applies (off unless
        the administrator set another);
        ``limits`` at most the administrator's maxima (more is a
        :class:`~sluice.BadRequestError` naming ``field`` and ``max``).
        Never retried: a timeout cannot create two.  Raises
        :class:`~sluice.QuotaExceededError`, :class:`~sluice.ConflictError`
        (the id exists), :class:`~sluice.BrokerUnavailableError`.
        """
        body = C.create_body(tenant_id, user_id, id, network, profile, limits,
                             backend)
        info = self._c._t.call(C.sandbox_create(body, self._c._create_timeout))
        return Sandbox(self._c, info)

    def get(self, id: str) -> "Sandbox":
        """The sandbox ``id``; :class:`~sluice.SandboxNotFoundError` when
        there is none."""
        return Sandbox(self._c, self._c._t.call(C.sandbox_get(id)))

    def list(self, tenant: Optional[str] = None,
             user: Optional[str] = None) -> list["Sandbox"]:
        """The sandboxes you may see, of one tenant and/or user."""
        return [Sandbox(self._c, i)
                for i in self._c._t.call(C.sandbox_list(tenant, user))]

    def discard_archive(self, id: str) -> dict[str, Any]:
        """Clear ``id`` by its id alone: its archive is removed (a sandbox
        removed by age leaves only that), and a sandbox still there is
        destroyed without one.  The answer: ``{"id", "deleted" (whether
        a sandbox was destroyed), "archive": "discarded"}``;
        :class:`~sluice.SandboxNotFoundError` when there is neither."""
        return self._c._t.call(C.sandbox_delete(id, False))


class Sandbox:
    """One chat's sandbox: commands, packages and files in /workspace.

    ``with client.sandboxes.create(...) as sb:`` destroys it at the end.
    """

    def __init__(self, client: SandboxClient, info: SandboxInfo) -> None:
        self._c = client
        self._t = client._t
        self.id = info.id
        # the broker's session of the sandbox (prompts, grants): ids are
        # per tenant, sluiced's session ids unique on the host
        self.session = info.session
        self.last_info = info

    def __repr__(self) -> str:
        return "<Sandbox %s %s/%s %s>" % (self.id, self.last_info.tenant,
                                          self.last_info.user,
                                          self.last_info.state)

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.destroy()

    def info(self) -> SandboxInfo:
        """GET the sandbox: state, tier, limits, usage."""
        self.last_info = self._t.call(C.sandbox_get(self.id))
        return self.last_info

    def set_network(self, tier: str) -> SandboxInfo:
        """Change the network tier (the broker session follows)."""
        self.last_info = self._t.call(C.sandbox_patch(self.id, tier))
        return self.last_info

    # commands

    def exec(self, cmd: C.Cmd, timeout_s: Optional[int] = None,
             env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None,
             stdin: Union[str, bytes, None] = None, *,
             output_cap: Optional[int] = None,
             output_cap_total: Optional[int] = None,
             binary: bool = False) -> ExecResult:
        """Run ``cmd`` (argv list, or a shell command line string) and
        return how it ended with its output.  One foreground command at a
        time: :class:`~sluice.BusyError` otherwise.

        ``output_cap`` caps each stream, ``output_cap_total`` the whole
        answer (stdout and stderr together, what came first kept), both
        in bytes; with the latter the result's ``output_dropped`` is the
        bytes left out (a UTF-8 character the cap cuts is left out
        whole)."""
        body = C.command_body(cmd, timeout_s, env, cwd, stdin, output_cap,
                              binary, output_cap_total)
        return self._t.call(C.exec_(self.id, body, C.exec_wait_s(
            timeout_s, self.last_info.limits)))

    def stream(self, cmd: C.Cmd, timeout_s: Optional[int] = None,
               env: Optional[Mapping[str, str]] = None,
               cwd: Optional[str] = None,
               stdin: Union[str, bytes, None] = None, *,
               binary: bool = False
               ) -> Iterator[Union[StreamChunk, ExecResult]]:
        """Run ``cmd`` and yield its output as it comes, a
        :class:`~sluice.StreamChunk` at a time, then the
        :class:`~sluice.ExecResult` (with all the output)."""
        body = C.command_body(cmd, timeout_s, env, cwd, stdin, None, binary)
        s = self._t.open(C.exec_stream(self.id, body), read_timeout=C.exec_wait_s(
            timeout_s, self.last_info.limits))
        parser = SSEParser()
        out: dict[str, list[bytes]] = {"stdout": [], "stderr": []}
        try:
            for data in s.chunks():
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
            # leaving the loop early closes the connection (the command
            # runs on to its deadline; cancel() stops it)
            s.close()
        raise SluiceConnectionError("sluice-execd: the stream of a command "
                                    "ended before its exit event",
                                    code="connection_failed")

    def start(self, cmd: C.Cmd, timeout_s: Optional[int] = None,
              env: Optional[Mapping[str, str]] = None,
              cwd: Optional[str] = None,
              stdin: Union[str, bytes, None] = None) -> "Command":
        """Start ``cmd`` in the background (a server, a watcher): it has a
        deadline only with ``timeout_s``.  Returns its
        :class:`Command`."""
        body = C.command_body(cmd, timeout_s, env, cwd, stdin)
        d = self._t.call(C.command_start(self.id, body))
        return Command(self, str(d.get("id")), str(d.get("status")))

    def commands(self) -> list[CommandStatus]:
        """The running commands and the newest finished ones."""
        return self._t.call(C.command_list(self.id))

    def command(self, id: str) -> "Command":
        """The command ``id`` (as returned by :meth:`start`)."""
        st = self._t.call(C.command_get(self.id, id))
        c = Command(self, st.id, st.status)
        c.last = st
        return c

    def install(self, packages: Union[str, Sequence[str]],
                manager: str = "pip", *, timeout_s: Optional[int] = None,
                check: bool = True) -> ExecResult:
        """Install packages with pip (to the sandbox user's site, which
        ``python3`` finds) or npm (``node_modules`` in /workspace), through
        the broker (POST /install: the executor runs the manager).  A
        sandbox whose effective tier is off raises
        :class:`~sluice.NetworkNotPermittedError`, a name that is not a
        bare package name :class:`~sluice.BadRequestError`; with
        ``check``, a failed install raises :class:`~sluice.CommandError`
        with its result."""
        body = C.install_body(packages, manager, timeout_s)
        r = self._t.call(C.install(self.id, body, C.exec_wait_s(
            timeout_s, self.last_info.limits)))
        if check and not r.ok:
            tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
            raise CommandError("%s install failed (exit %d): %s" % (
                manager, r.exit_code, " / ".join(tail)), r)
        return r

    def cancel(self, all: bool = False) -> int:
        """Kill the foreground command's whole tree (and with ``all`` every
        background command's); returns how many were cancelled."""
        return self._t.call(C.cancel(self.id, all))

    def destroy(self, archive: bool = True) -> None:
        """Destroy the sandbox, its broker session and its directory.
        ``archive``: the executor keeps an archive of the workspace that
        a create of the same id (same tenant and user) restores; False:
        none, and an earlier archive of the id is removed."""
        self._t.call(C.sandbox_delete(self.id, archive))

    # files (paths relative to /workspace, or /workspace/...)

    def write(self, path: str, data: Body) -> int:
        """Write a file (parents made); returns its size."""
        d = self._t.call(C.file_write(self.id, path, as_bytes(data)))
        return int(d.get("size") or 0)

    def read(self, path: str, offset: Optional[int] = None,
             length: Optional[int] = None) -> bytes:
        """A regular file's bytes, or ``length`` of them from ``offset``.
        Above the executor's max_file_bytes: :class:`~sluice.TooLargeError`
        (read a range)."""
        return self._t.call(C.file_read(self.id, path, offset, length))

    def read_text(self, path: str, encoding: str = "utf-8") -> str:
        return self.read(path).decode(encoding, "replace")

    def list(self, glob: str = "*", recursive: bool = False,
             path: Optional[str] = None) -> Listing:
        """The entries of ``path`` (default /workspace) whose name, or path
        below it when ``glob`` holds a slash, matches ``glob``."""
        return self._t.call(C.files_list(self.id, path, glob, recursive))

    def edit(self, path: str, old: str, new: str) -> None:
        """Replace the one occurrence of ``old`` with ``new``;
        :class:`~sluice.ConflictError` when it is missing or not unique."""
        self._t.call(C.edit(self.id, path, old, new))

    def remove(self, path: str) -> None:
        """Delete a file, a link or an empty directory."""
        self._t.call(C.file_delete(self.id, path))

    def put_tar(self, data_or_path: C.TarSource, dir: str = ".") -> TarResult:
        """Extract a tar (bytes of a tar, tar.gz or tar.zst; or the path of
        a tar file, or of a directory, sent as a tar of its contents) under
        ``dir`` of the workspace (made if missing), in one call.  All or
        nothing: a refused entry (absolute, ``..``, a device, through a
        link, a hard link outside) is a :class:`~sluice.BadRequestError`
        naming it, and nothing is written."""
        return self._t.call(C.archive_put(self.id, dir, C.tar_bytes(
            data_or_path)))

    def get_tar(self, dir: str = ".") -> bytes:
        """``dir`` of the workspace as a tar: files, directories and
        symbolic links (as links)."""
        return self._t.call(C.archive_get(self.id, dir))

    # terminals and ports

    def terminal(self, command: Optional[str] = None, *,
                 cols: Optional[int] = None, rows: Optional[int] = None,
                 cwd: Optional[str] = None,
                 env: Optional[Mapping[str, str]] = None,
                 attach: bool = True) -> "Terminal":
        """A shell on a pty in the sandbox (``bash -i``, or ``bash -c
        command``), as the sandbox user; attached at once unless
        ``attach=False``.  See :class:`~sluice.Terminal`."""
        from ._pty import Terminal, TerminalInfo
        t = Terminal(self, TerminalInfo.of(self._t.call(C.pty_start(
            self.id, command, cwd, env, cols, rows))))
        return t.attach() if attach else t

    def terminal_of(self, id: str) -> "Terminal":
        """A terminal started earlier (its session id), not attached."""
        from ._pty import Terminal, TerminalInfo
        return Terminal(self, TerminalInfo.of(self._t.call(C.pty_get(
            self.id, id))))

    def port_url(self, port: int, path: str = "/") -> str:
        """The URL of ``port`` inside the sandbox through the executor's
        port proxy (``/v1/sandboxes/{id}/ports/{port}``); it takes the
        executor's token, as every call does."""
        return str(self._t.address) + C.port_path(self.id, port, path)

    def fetch(self, port: int, path: str = "/", method: str = "GET",
              body: Optional[Body] = None,
              headers: Optional[Mapping[str, str]] = None,
              timeout: Optional[float] = None) -> "PortResponse":
        """An HTTP request to the server on 127.0.0.1:``port`` inside the
        sandbox, through the executor (the sandbox needs no network
        device).  The server's answer, whatever its status; sluice's own
        errors (nothing listening: ``bad_gateway``) raise."""
        return self._t.call(C.port_fetch(
            self.id, port, path, method,
            as_bytes(body) if body is not None else None, headers, timeout))


class Command:
    """A background command: ``output()``, ``wait()``, ``stop()``;
    ``status`` is the last status seen (running, exited)."""

    def __init__(self, sandbox: Sandbox, id: str, status: str) -> None:
        self.sandbox = sandbox
        self.id = id
        self.status = status
        self.last: Optional[CommandStatus] = None
        self._next = [0, 0]

    def __repr__(self) -> str:
        return "<Command %s in %s: %s>" % (self.id, self.sandbox.id,
                                           self.status)

    def _seen(self, st: CommandStatus) -> CommandStatus:
        self.last = st
        self.status = st.status
        return st

    def refresh(self) -> CommandStatus:
        """GET the command's status."""
        return self._seen(self.sandbox._t.call(C.command_get(
            self.sandbox.id, self.id)))

    def output(self, offset: Optional[int] = None, *,
               stdout_offset: Optional[int] = None,
               stderr_offset: Optional[int] = None,
               binary: bool = False) -> CommandOutput:
        """Output from ``offset`` (both streams; by default where the last
        call ended, so successive calls return what is new).  The ring
        keeps the last bytes only: a chunk whose ``offset`` is above the
        one asked for says that the bytes between were dropped."""
        so = stdout_offset if stdout_offset is not None else (
            offset if offset is not None else self._next[0])
        se = stderr_offset if stderr_offset is not None else (
            offset if offset is not None else self._next[1])
        o = self.sandbox._t.call(C.command_output(self.sandbox.id, self.id,
                                                  so, se, binary))
        self._next = [o.stdout.next, o.stderr.next]
        self._seen(o.status)
        return o

    def wait(self, timeout: Optional[float] = None,
             poll_s: float = 0.2) -> CommandStatus:
        """Until the command has exited; :class:`~sluice.SluiceTimeoutError`
        (a ``TimeoutError``) after ``timeout`` seconds (the command goes
        on)."""
        end = None if timeout is None else time.monotonic() + timeout
        delay = min(0.05, poll_s)
        while True:
            st = self.refresh()
            if st.status != "running":
                return st
            if end is not None and time.monotonic() + delay > end:
                raise SluiceTimeoutError("command %s still running after "
                                         "%ss" % (self.id, timeout))
            time.sleep(delay)
            delay = min(delay * 2, poll_s)

    def stop(self) -> None:
        """Kill the command and everything it started."""
        self.sandbox._t.call(C.command_stop(self.sandbox.id, self.id))


# ---------------------------------------------------------------- broker

class _Seen:
    """Ids already yielded, the newest 4096."""

    def __init__(self) -> None:
        self._d: OrderedDict[str, None] = OrderedDict()

    def add(self, k: str) -> bool:
        if k in self._d:
            return False
        self._d[k] = None
        if len(self._d) > 4096:
            self._d.popitem(last=False)
        return True


def _event(ev_id: Optional[str], ev: str, text: str) -> Event:
    _, d = C.stream_event(ev, text)
    return Event(int(ev_id) if ev_id and ev_id.isdigit() else None, ev, d)


def _fatal(e: SluiceError) -> bool:
    """An answer that a reconnect will not change."""
    return e.status is not None and e.status not in (502, 503, 504)


class EventStream:
    """sluiced's event stream (GET /v1/events) as an iterator of
    :class:`~sluice.Event`, resumed after a dropped connection with
    ``Last-Event-ID`` (the events sluiced still keeps are replayed).

    ``last_event_id`` is the last id seen; ``reconnects`` bounds the
    reconnections in a row (None: no bound); ``idle_timeout`` is how long
    a silent connection (no event, no ping) is trusted.  With
    ``markers`` an event of type ``connected`` (id None) follows each
    (re)connection.
    """

    def __init__(self, t: Transport, last_event_id: Optional[int] = None,
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

    def __iter__(self) -> "EventStream":
        return self

    def __next__(self) -> Event:
        return next(self._it)

    def _open(self) -> Any:
        extra = {}
        if self.last_event_id is not None:
            extra["Last-Event-ID"] = str(self.last_event_id)
        s = self._t.open(C.b_events(), extra, self._idle)
        self.connects += 1
        return s

    def connect(self) -> "EventStream":
        """Open the stream now rather than at the first ``next()``: from
        here on the client counts as an approver, and what happens is
        kept for the iteration."""
        if self._stream is None and self._pre is None and not self._closed:
            self._pre = self._open()
        return self

    def close(self) -> None:
        """Stop: the iteration ends (also from another thread)."""
        self._closed = True
        for s in (self._stream, self._pre):
            if s is not None:
                s.close()

    def __enter__(self) -> "EventStream":
        return self.connect()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _run(self) -> Iterator[Event]:
        fails = 0
        delay = 0.1
        while not self._closed:
            try:
                if self._pre is not None:
                    self._stream, self._pre = self._pre, None
                else:
                    self._stream = self._open()
                fails, delay = 0, 0.1
                if self._markers:
                    yield Event(None, "connected", {"connects": self.connects})
                parser = SSEParser()
                for data in self._stream.chunks():
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
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 5.0)


class PromptWatch:
    """``for prompt in broker.prompts.watch():`` the prompts of the chats
    as they are raised, each answerable with ``allow_once()``,
    ``allow_chat()`` or ``deny()``.

    While a watch is connected it counts as an approver: without one (and
    without a webhook) sluiced refuses a prompt at once (no_approver).
    With ``pending`` the prompts already waiting come first, and again
    after each reconnect, so none is missed; none is yielded twice.
    ``session`` keeps one chat's prompts only.
    """

    def __init__(self, broker: "BrokerClient", pending: bool = True,
                 session: Optional[str] = None,
                 last_event_id: Optional[int] = None,
                 reconnects: Optional[int] = None,
                 idle_timeout: float = 60.0) -> None:
        self._b = broker
        self._pending = pending
        self._session = session
        self._seen = _Seen()
        self.events = EventStream(broker._t, last_event_id,
                                  reconnects=reconnects,
                                  idle_timeout=idle_timeout, markers=True)
        self._it = self._run()

    def _want(self, p: Prompt) -> bool:
        return ((self._session is None or p.session == self._session) and
                p.state == "pending" and self._seen.add(p.id))

    def _run(self) -> Iterator[Prompt]:
        for e in self.events:
            if e.type == "connected" and e.id is None:
                # the stream is open: what waits already, then the new
                for p in self._b.prompts.list() if self._pending else []:
                    if self._want(p):
                        yield p
            elif e.type == "prompt" and isinstance(e.data, dict):
                p = C.prompt_of(e.data, self._b._answer)
                if self._want(p):
                    yield p

    def __iter__(self) -> "PromptWatch":
        return self

    def __next__(self) -> Prompt:
        return next(self._it)

    def connect(self) -> "PromptWatch":
        """Open the stream now: from here on the app counts as an
        approver (a prompt raised with none is refused at once), so start
        what may ask after this.  ``with ... watch() as w`` does it."""
        self.events.connect()
        return self

    def close(self) -> None:
        self.events.close()

    def __enter__(self) -> "PromptWatch":
        return self.connect()

    def __exit__(self, *exc: Any) -> None:
        self.close()


class _Sessions:
    def __init__(self, b: "BrokerClient") -> None:
        self._t = b._t

    def list(self) -> list[BrokerSession]:
        return self._t.call(C.b_sessions())

    def get(self, id: str) -> BrokerSession:
        return self._t.call(C.b_session_get(id))

    def create(self, id: str, tenant: str = "", user: str = "",
               tier: str = "off", *, socket: Optional[str] = None,
               source: Optional[str] = None,
               vsock_cid: Optional[int] = None) -> BrokerSession:
        """A session (a chat) with its transport: by default a socket of
        its own under sluiced's runtime directory."""
        return self._t.call(C.b_session_create(id, tenant, user, tier, socket,
                                               source, vsock_cid))

    def set_tier(self, id: str, tier: str) -> BrokerSession:
        return self._t.call(C.b_session_tier(id, tier))

    def delete(self, id: str) -> None:
        self._t.call(C.b_session_delete(id))


class _Grants:
    def __init__(self, b: "BrokerClient") -> None:
        self._t = b._t

    def list(self, session: str) -> list[Grant]:
        return self._t.call(C.b_session_get(session)).grants

    def add(self, session: str, host: str, port: int) -> Grant:
        """Let the chat reach host:port (as far as its ceiling admits)."""
        return self._t.call(C.b_grant_add(session, host, port))

    def remove(self, session: str, host: str, port: int) -> None:
        """Take the grant back; the chat's connections to it close."""
        self._t.call(C.b_grant_remove(session, host, port))


class _Ceilings:
    def __init__(self, b: "BrokerClient") -> None:
        self._t = b._t

    def get(self) -> Ceiling:
        return self._t.call(C.b_ceiling_get())

    def set(self, tier: Optional[str] = None,
            tenants: Optional[Mapping[str, Optional[str]]] = None, *,
            close_exceeding: bool = False) -> Ceiling:
        """Set the global ceiling and/or tenants' (None removes a tenant's);
        admin only.  ``close_exceeding`` closes what the new ceilings no
        longer admit."""
        return self._t.call(C.b_ceiling_set(tier, tenants, close_exceeding))


class _Rules:
    def __init__(self, b: "BrokerClient") -> None:
        self._t = b._t

    def list(self) -> RuleList:
        """The API's rules in order, the configuration's and the built-in
        names (every role)."""
        return self._t.call(C.b_rules())

    def get(self, name: str) -> Rule:
        """One of the API's rules (:class:`NotFoundError` for none)."""
        return self._t.call(C.b_rule_get(name))

    def add(self, name: str, hosts: Union[str, Sequence[str]],
            action: RuleAction, *, tenant: Optional[str] = None,
            methods: Optional[Sequence[str]] = None,
            paths: Optional[Sequence[str]] = None) -> Rule:
        """Append a rule after the API's others, or replace the API's rule
        of that name where it stands (admin).  ``tenant`` None: every
        tenant's sessions."""
        return self._t.call(C.b_rule_put(C.rule_body(Rule(
            name=name, hosts=C.strs_arg("hosts", hosts), action=action,
            tenant=tenant, methods=C.strs_arg("methods", methods or []),
            paths=C.strs_arg("paths", paths or [])))))

    def put(self, rule: C.RuleLike) -> Rule:
        """:meth:`add` of a :class:`Rule` (or a dict in the API's shape)."""
        return self._t.call(C.b_rule_put(C.rule_body(rule)))

    def replace(self, rules: Sequence[C.RuleLike]) -> RuleList:
        """The API's whole list, checked whole (admin); ``[]`` removes
        them all."""
        return self._t.call(C.b_rules_replace(rules))

    def delete(self, name: str) -> None:
        """Remove one of the API's rules (admin)."""
        self._t.call(C.b_rule_delete(name))


class _Credentials:
    def __init__(self, b: "BrokerClient") -> None:
        self._t = b._t

    def list(self) -> list[Credential]:
        """The credentials (a caller bound to a tenant: its own), never a
        value."""
        return self._t.call(C.b_creds())

    def get(self, name: str) -> Credential:
        return self._t.call(C.b_cred_get(name))

    def set(self, name: str, *, tenant: str,
            hosts: Union[str, Sequence[str]], value: str,
            header: str = "Authorization", format: Optional[str] = None,
            methods: Optional[Sequence[str]] = None,
            paths: Optional[Sequence[str]] = None) -> Credential:
        """Set a credential, or replace the one of that name (rotation:
        its placeholder stays); every host must be inspected by sluiced.
        ``format`` has ``{}`` where the value goes (sluiced's default:
        the value alone).  The value is never sent back."""
        return self._t.call(C.b_cred_set(name, tenant, hosts, value, header,
                                         format, methods, paths))

    def delete(self, name: str) -> None:
        """Revoke it: its placeholder is removed from then on."""
        self._t.call(C.b_cred_delete(name))


class _Prompts:
    def __init__(self, b: "BrokerClient") -> None:
        self._b = b
        self._t = b._t

    def list(self) -> list[Prompt]:
        """The pending prompts."""
        return [C.prompt_of(p, self._b._answer)
                for p in self._t.call(C.b_prompts())]

    def get(self, id: str) -> Prompt:
        return C.prompt_of(self._t.call(C.b_prompt_get(id)), self._b._answer)

    def answer(self, id: str, decision: Decision) -> Prompt:
        return C.prompt_of(self._t.call(C.b_prompt_answer(id, decision)),
                           self._b._answer)

    def watch(self, *, pending: bool = True, session: Optional[str] = None,
              last_event_id: Optional[int] = None,
              reconnects: Optional[int] = None,
              idle_timeout: float = 60.0) -> PromptWatch:
        """The prompts as they are raised; see :class:`PromptWatch`."""
        return PromptWatch(self._b, pending, session, last_event_id,
                           reconnects, idle_timeout)


class BrokerClient:
    """sluiced's control API (role app or admin on its socket, or a token
    on its https listener): ``sessions``, ``grants``, ``ceilings``
    (admin), ``prompts``, ``rules`` (writes: admin), ``credentials``
    (admin, app) and ``events()``."""

    def __init__(self, address: Optional[str] = None,
                 token: Optional[str] = None, *,
                 ca_file: Optional[str] = None,
                 ssl_context: Optional[ssl.SSLContext] = None,
                 timeout: float = 30.0) -> None:
        addr = _addr(address, "SLUICE_BROKER_ADDRESS", DEFAULT_BROKER_ADDRESS)
        self._t = Transport(addr, _token(token, addr, "SLUICE_BROKER_TOKEN"),
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

    def _answer(self, p: Prompt, decision: Decision) -> Prompt:
        n = self.prompts.answer(p.id, decision)
        p.state = n.state
        return n

    def health(self) -> dict[str, Any]:
        """GET /v1/health of sluiced (status, approvers, firewall, ...)."""
        return self._t.call(C.b_health())

    def metrics(self) -> str:
        """The Prometheus text (admin, auditor)."""
        return self._t.call(C.b_metrics())

    def events(self, last_event_id: Optional[int] = None, *,
               reconnect: bool = True, reconnects: Optional[int] = None,
               idle_timeout: float = 60.0) -> EventStream:
        """Every event (prompt, prompt_resolved, denied, session,
        ceiling); see :class:`EventStream`."""
        return EventStream(self._t, last_event_id, reconnect, reconnects,
                           idle_timeout)
