"""Typed answers of the executor and of the broker.

Each class is built from the API's JSON with ``from_json`` and keeps that
JSON in ``raw``, so a field the API adds later is still at hand.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, Optional

__all__ = [
    "Limits", "SandboxInfo", "Change", "Artifact", "ArtifactSkipped",
    "ExecResult", "OutputChunk", "StreamChunk",
    "CommandStatus", "CommandOutput", "FileEntry", "Listing", "Health",
    "Doctor", "BrokerSession", "Grant", "Ceiling", "Prompt", "Event",
    "Rule", "RuleList", "Credential",
]

Tier = Literal["off", "registries", "public"]
Decision = Literal["allow_once", "allow_chat", "deny"]


def _i(v: Any) -> Optional[int]:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _s(v: Any) -> Optional[str]:
    return v if isinstance(v, str) else None


def _b(v: Any) -> bool:
    return v is True


def _o(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _l(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


@dataclass(frozen=True)
class Limits:
    """A sandbox's limits (see sluice-execd(8)); None where not given."""

    memory_mb: Optional[int] = None
    pids: Optional[int] = None
    cpu_pct: Optional[int] = None
    tmp_mb: Optional[int] = None
    home_mb: Optional[int] = None
    fsize_mb: Optional[int] = None
    nofile: Optional[int] = None
    nproc: Optional[int] = None
    timeout_s: Optional[int] = None
    output_cap: Optional[int] = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Limits":
        return cls(**{k: _i(d.get(k)) for k in cls.__dataclass_fields__})

    def to_json(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__
                if getattr(self, k) is not None}


@dataclass(frozen=True)
class SandboxInfo:
    """GET /v1/sandboxes/{id}: what the executor knows of a sandbox."""

    id: str
    tenant: str
    user: str
    state: str
    backend: str
    profile: str
    image: str          # the root image's sha256; "" the host's /usr
    tier: str
    broker: str
    session: str        # sluiced's session of it (its prompts, grants)
    limits: Limits
    usage: Mapping[str, Any]
    created: str
    last_used: str
    note: str
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "SandboxInfo":
        net = _o(d.get("network"))
        lim = _o(d.get("limits"))
        use = _o(d.get("usage"))
        return cls(id=_s(d.get("id")) or "", tenant=_s(d.get("tenant")) or "",
                   user=_s(d.get("user")) or "",
                   state=_s(d.get("state")) or "",
                   backend=_s(d.get("backend")) or "",
                   profile=_s(d.get("profile")) or "",
                   image=_s(d.get("image")) or "",
                   tier=_s(net.get("tier")) or "",
                   broker=_s(net.get("broker")) or "",
                   session=_s(net.get("session")) or _s(d.get("id")) or "",
                   limits=Limits.from_json(lim), usage=dict(use),
                   created=_s(d.get("created")) or "",
                   last_used=_s(d.get("last_used")) or "",
                   note=_s(d.get("note")) or "", raw=dict(d))


@dataclass(frozen=True)
class Change:
    """An entry under /workspace a command created, modified or deleted
    (``change``); ``type`` is file, directory, symlink or other, ``size``
    in bytes (before, for a deleted one)."""

    path: str
    change: str
    type: str
    size: int

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Change":
        return cls(path=_s(d.get("path")) or "",
                   change=_s(d.get("change")) or "",
                   type=_s(d.get("type")) or "", size=_i(d.get("size")) or 0)


@dataclass(frozen=True)
class Artifact:
    """A regular file a command created or modified under
    /workspace/outputs: its path (relative to /workspace), size and
    SHA-256 (hex).  Read its bytes with ``sb.read(path)``."""

    path: str
    size: int
    sha256: str

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Artifact":
        return cls(path=_s(d.get("path")) or "", size=_i(d.get("size")) or 0,
                   sha256=_s(d.get("sha256")) or "")


@dataclass(frozen=True)
class ArtifactSkipped:
    """A file under outputs/ left out of ``artifacts`` by a limit:
    ``limit`` is ``file_bytes``, ``count`` or ``total_bytes`` (the
    daemon's ``artifacts`` settings); the file stays in the workspace."""

    path: str
    size: int
    limit: str

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ArtifactSkipped":
        return cls(path=_s(d.get("path")) or "", size=_i(d.get("size")) or 0,
                   limit=_s(d.get("limit")) or "")


def _changes(d: Mapping[str, Any]) -> dict[str, Any]:
    """The workspace fields of a command's result or status."""
    return {
        "changed": [Change.from_json(c) for c in _l(d.get("changed"))
                    if isinstance(c, dict)],
        "changed_truncated": _b(d.get("changed_truncated")),
        "artifacts": [Artifact.from_json(a) for a in _l(d.get("artifacts"))
                      if isinstance(a, dict)],
        "artifacts_skipped": [ArtifactSkipped.from_json(a) for a in
                              _l(d.get("artifacts_skipped"))
                              if isinstance(a, dict)],
    }


@dataclass(frozen=True)
class ExecResult:
    """How a command ended, with its output.

    ``stdout``/``stderr`` are text (invalid UTF-8 shows as U+FFFD); with
    ``binary=True`` the exact bytes are in ``stdout_raw``/``stderr_raw``.
    A signal death is ``exit_code`` 128+N with ``signal`` N.
    ``changed`` is what the command did to /workspace (``changed_truncated``:
    the workspace had too many entries to compare, so only outputs/ was),
    ``artifacts`` the files it made under /workspace/outputs and
    ``artifacts_skipped`` those a limit left out.  ``output_dropped``
    is the bytes of both streams not in the answer when ``exec`` was
    given ``output_cap_total`` (None otherwise).
    """

    id: str
    exit_code: int
    signal: Optional[int]
    timed_out: bool
    oom_killed: bool
    cancelled: bool
    duration_ms: int
    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool
    stdout_raw: bytes = field(repr=False)
    stderr_raw: bytes = field(repr=False)
    raw: Mapping[str, Any] = field(repr=False, compare=False)
    changed: list[Change] = field(default_factory=list, repr=False)
    changed_truncated: bool = field(default=False, repr=False)
    artifacts: list[Artifact] = field(default_factory=list, repr=False)
    artifacts_skipped: list[ArtifactSkipped] = field(default_factory=list,
                                                     repr=False)
    output_dropped: Optional[int] = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        """Exit code 0, not timed out, cancelled or OOM-killed."""
        return (self.exit_code == 0 and not self.timed_out and
                not self.cancelled and not self.oom_killed)

    @classmethod
    def from_json(cls, d: Mapping[str, Any], stdout: Optional[bytes] = None,
                  stderr: Optional[bytes] = None) -> "ExecResult":
        def out(k: str, given: Optional[bytes]) -> tuple[str, bytes]:
            if given is not None:
                return given.decode("utf-8", "replace"), given
            v = d.get(k)
            if not isinstance(v, str):
                return "", b""
            if d.get("encoding") == "base64":
                raw = base64.b64decode(v)
                return raw.decode("utf-8", "replace"), raw
            return v, v.encode("utf-8", "surrogatepass")
        so, sob = out("stdout", stdout)
        se, seb = out("stderr", stderr)
        ec = _i(d.get("exit_code"))
        return cls(id=_s(d.get("id")) or "",
                   exit_code=ec if ec is not None else -1,
                   signal=_i(d.get("signal")), timed_out=_b(d.get("timed_out")),
                   oom_killed=_b(d.get("oom_killed")),
                   cancelled=_b(d.get("cancelled")),
                   duration_ms=_i(d.get("duration_ms")) or 0,
                   stdout=so, stderr=se,
                   stdout_truncated=_b(d.get("stdout_truncated")),
                   stderr_truncated=_b(d.get("stderr_truncated")),
                   stdout_raw=sob, stderr_raw=seb, raw=dict(d),
                   output_dropped=_i(d.get("output_dropped")),
                   **_changes(d))


@dataclass(frozen=True)
class StreamChunk:
    """Output of a streamed command as it came: ``stream`` is ``"stdout"``
    or ``"stderr"``, ``data`` its text (``data_raw`` the bytes)."""

    stream: Literal["stdout", "stderr"]
    data: str
    data_raw: bytes = field(repr=False)


@dataclass(frozen=True)
class OutputChunk:
    """One stream of a background command's output: the bytes from
    ``offset`` to ``next``.  An ``offset`` above the one asked for means
    the ring had dropped the bytes between."""

    offset: int
    next: int
    data: str
    data_raw: bytes = field(repr=False)

    @classmethod
    def from_json(cls, d: Any, base64_: bool = False) -> "OutputChunk":
        d = d if isinstance(d, dict) else {}
        v = d.get("data") if isinstance(d.get("data"), str) else ""
        raw = base64.b64decode(v) if base64_ else v.encode(
            "utf-8", "surrogatepass")
        return cls(offset=_i(d.get("offset")) or 0,
                   next=_i(d.get("next")) or 0,
                   data=raw.decode("utf-8", "replace") if base64_ else v,
                   data_raw=raw)


@dataclass(frozen=True)
class CommandStatus:
    """A command's status: ``status`` is ``"running"`` or ``"exited"``."""

    id: str
    status: str
    background: bool
    argv: list[str]
    started: Optional[str]
    ended: Optional[str]
    exit_code: Optional[int]
    signal: Optional[int]
    timed_out: bool
    cancelled: bool
    oom_killed: bool
    stdout_bytes: int
    stderr_bytes: int
    raw: Mapping[str, Any] = field(repr=False, compare=False)
    # once exited: what it did to the workspace, as in ExecResult
    changed: list[Change] = field(default_factory=list, repr=False)
    changed_truncated: bool = field(default=False, repr=False)
    artifacts: list[Artifact] = field(default_factory=list, repr=False)
    artifacts_skipped: list[ArtifactSkipped] = field(default_factory=list,
                                                     repr=False)

    @property
    def running(self) -> bool:
        return self.status == "running"

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "CommandStatus":
        argv = _l(d.get("argv"))
        return cls(id=_s(d.get("id")) or "", status=_s(d.get("status")) or "",
                   background=_b(d.get("background")),
                   argv=[a for a in argv if isinstance(a, str)],
                   started=_s(d.get("started")), ended=_s(d.get("ended")),
                   exit_code=_i(d.get("exit_code")), signal=_i(d.get("signal")),
                   timed_out=_b(d.get("timed_out")),
                   cancelled=_b(d.get("cancelled")),
                   oom_killed=_b(d.get("oom_killed")),
                   stdout_bytes=_i(d.get("stdout_bytes")) or 0,
                   stderr_bytes=_i(d.get("stderr_bytes")) or 0, raw=dict(d),
                   **_changes(d))


@dataclass(frozen=True)
class CommandOutput:
    """GET .../commands/{cid}/output: the status and each stream's chunk."""

    status: CommandStatus
    stdout: OutputChunk
    stderr: OutputChunk

    @classmethod
    def from_json(cls, d: Mapping[str, Any], base64_: bool = False
                  ) -> "CommandOutput":
        return cls(status=CommandStatus.from_json(d),
                   stdout=OutputChunk.from_json(d.get("stdout"), base64_),
                   stderr=OutputChunk.from_json(d.get("stderr"), base64_))


@dataclass(frozen=True)
class FileEntry:
    """One entry of a listing; ``type`` is file, dir, symlink, fifo, socket,
    char, block or other; ``mode`` octal text such as ``"0644"``."""

    path: str
    type: str
    size: int
    mode: str
    mtime: int
    target: Optional[str] = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "FileEntry":
        return cls(path=_s(d.get("path")) or "", type=_s(d.get("type")) or "",
                   size=_i(d.get("size")) or 0, mode=_s(d.get("mode")) or "",
                   mtime=_i(d.get("mtime")) or 0, target=_s(d.get("target")))


@dataclass(frozen=True)
class TarResult:
    """What ``put_tar`` extracted under ``path``: regular files, directories
    made, links (symbolic and hard) and the bytes of file data."""

    path: str
    files: int
    dirs: int
    links: int
    bytes: int

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "TarResult":
        return cls(path=_s(d.get("path")) or "", files=_i(d.get("files")) or 0,
                   dirs=_i(d.get("dirs")) or 0, links=_i(d.get("links")) or 0,
                   bytes=_i(d.get("bytes")) or 0)


class Listing(list[FileEntry]):
    """A directory listing: a list of :class:`FileEntry` with ``path`` (the
    directory) and ``truncated`` (the executor stopped at its limit)."""

    def __init__(self, entries: list[FileEntry], path: str = "",
                 truncated: bool = False) -> None:
        super().__init__(entries)
        self.path = path
        self.truncated = truncated

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Listing":
        ents = _l(d.get("entries"))
        return cls([FileEntry.from_json(e) for e in ents
                    if isinstance(e, dict)], _s(d.get("path")) or "",
                   _b(d.get("truncated")))

    @property
    def paths(self) -> list[str]:
        return [e.path for e in self]


@dataclass(frozen=True)
class Health:
    """GET /v1/health of the executor."""

    ok: bool
    version: str
    default_backend: str
    backends: list[Mapping[str, Any]]
    broker: Mapping[str, Any]
    capacity: Mapping[str, Any]
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Health":
        bk = _l(d.get("backends"))
        br = _o(d.get("broker"))
        cap = _o(d.get("capacity"))
        return cls(ok=_b(d.get("ok")), version=_s(d.get("version")) or "",
                   default_backend=_s(d.get("default_backend")) or "",
                   backends=[b for b in bk if isinstance(b, dict)],
                   broker=dict(br), capacity=dict(cap), raw=dict(d))


@dataclass(frozen=True)
class Doctor:
    """What :meth:`SandboxClient.doctor` found: ``ok`` and one line per
    problem, each saying what to do."""

    ok: bool
    problems: list[str]
    health: Optional[Health]


@dataclass(frozen=True)
class Grant:
    """A host and port granted to a broker session."""

    host: str
    port: int

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Grant":
        return cls(host=_s(d.get("host")) or "", port=_i(d.get("port")) or 0)


@dataclass(frozen=True)
class BrokerSession:
    """A session of sluiced (one chat): its tier, ceiling and grants."""

    id: str
    tenant: str
    user: str
    tier: str
    ceiling: str
    effective_tier: str
    transport: str
    socket: Optional[str]
    from_config: bool
    connections: int
    grants: list[Grant]
    counters: Mapping[str, Any]
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "BrokerSession":
        gr = _l(d.get("grants"))
        co = _o(d.get("counters"))
        return cls(id=_s(d.get("id")) or "", tenant=_s(d.get("tenant")) or "",
                   user=_s(d.get("user")) or "", tier=_s(d.get("tier")) or "",
                   ceiling=_s(d.get("ceiling")) or "",
                   effective_tier=_s(d.get("effective_tier")) or "",
                   transport=_s(d.get("transport")) or "",
                   socket=_s(d.get("socket")),
                   from_config=_b(d.get("from_config")),
                   connections=_i(d.get("connections")) or 0,
                   grants=[Grant.from_json(g) for g in gr
                           if isinstance(g, dict)],
                   counters=dict(co), raw=dict(d))


@dataclass(frozen=True)
class Ceiling:
    """The global ceiling and each tenant's (``source``: api or config)."""

    tier: str
    tenants: Mapping[str, str]
    source: str
    closed: Optional[int] = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False,
                                   compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Ceiling":
        t = _o(d.get("tenants"))
        return cls(tier=_s(d.get("tier")) or "",
                   tenants={k: v for k, v in t.items() if isinstance(v, str)},
                   source=_s(d.get("source")) or "",
                   closed=_i(d.get("closed")), raw=dict(d))


def _strs(v: Any) -> list[str]:
    return [x for x in _l(v) if isinstance(x, str)]


RuleAction = Literal["allow", "deny", "prompt"]


@dataclass(frozen=True)
class Rule:
    """A request rule of sluiced (see sluiced(8), *Request rules*): the
    requests to ``hosts`` (``*.suffix`` patterns, an optional ``:port``)
    with one of ``methods`` and a path matching one of ``paths`` (both
    empty: any) are allowed, denied or prompted.  ``tenant`` None: every
    tenant's sessions."""

    name: str
    hosts: list[str]
    action: str
    tenant: Optional[str] = None
    methods: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Rule":
        return cls(name=_s(d.get("name")) or "", hosts=_strs(d.get("hosts")),
                   action=_s(d.get("action")) or "",
                   tenant=_s(d.get("tenant")),
                   methods=_strs(d.get("methods")),
                   paths=_strs(d.get("paths")))

    def to_json(self) -> dict[str, Any]:
        """The body sluiced takes (``tenant`` null: every tenant)."""
        return {"name": self.name, "tenant": self.tenant,
                "hosts": list(self.hosts), "methods": list(self.methods),
                "paths": list(self.paths), "action": self.action}


@dataclass(frozen=True)
class RuleList:
    """``GET /v1/rules``: the control API's rules in order (``rules``),
    the configuration's (``config``, before them; changed in the file
    only) and the built-in rules' names (``builtin``, after them).  A
    caller bound to a tenant sees, of the API's, those for every tenant
    and its own."""

    rules: list[Rule]
    config: list[Rule]
    builtin: list[str]

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "RuleList":
        return cls(rules=[Rule.from_json(r) for r in _l(d.get("rules"))
                          if isinstance(r, dict)],
                   config=[Rule.from_json(r) for r in _l(d.get("config"))
                           if isinstance(r, dict)],
                   builtin=_strs(d.get("builtin")))


@dataclass(frozen=True)
class Credential:
    """A credential of sluiced (see sluiced(8), *Credentials*), never its
    value (write-only): a sandbox of ``tenant`` sends ``placeholder`` in a
    header and sluiced sends ``header: format`` with the value in its
    place, on an inspected leg to one of ``hosts`` with one of
    ``methods`` and a path matching ``paths`` (empty: any).  ``updated``
    is when it was last set (Unix seconds)."""

    name: str
    tenant: str
    hosts: list[str]
    header: str
    format: str
    methods: list[str]
    paths: list[str]
    placeholder: str
    updated: Optional[int]
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False,
                                   compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Credential":
        inj = _o(d.get("inject"))
        return cls(name=_s(d.get("name")) or "",
                   tenant=_s(d.get("tenant")) or "",
                   hosts=_strs(d.get("hosts")),
                   header=_s(inj.get("header")) or "",
                   format=_s(inj.get("format")) or "",
                   methods=_strs(d.get("methods")),
                   paths=_strs(d.get("paths")),
                   placeholder=_s(d.get("placeholder")) or "",
                   updated=_i(d.get("updated")), raw=dict(d))


@dataclass(frozen=True)
class Event:
    """One Server-Sent Event of sluiced's stream: ``id`` counts up from 1
    within a sluiced process, ``type`` is prompt, prompt_resolved, denied,
    session or ceiling, ``data`` the parsed JSON."""

    id: Optional[int]
    type: str
    data: Any


@dataclass
class Prompt:
    """A pending network prompt: a sandbox asked for ``host``:``port`` that
    its tier does not admit but its ceiling does.  Answer it with
    :meth:`allow_once`, :meth:`allow_chat` or :meth:`deny` (on an async
    client each returns an awaitable)."""

    id: str
    session: str
    tenant: str
    user: str
    host: str
    port: int
    method: str
    path: Optional[str]
    tier: str
    ceiling: str
    created: str
    expires: str
    expires_in_s: int
    waiting: int
    state: str
    raw: Mapping[str, Any] = field(repr=False, compare=False)
    _answer: Any = field(default=None, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any], answer: Any = None) -> "Prompt":
        return cls(id=_s(d.get("id")) or "", session=_s(d.get("session")) or "",
                   tenant=_s(d.get("tenant")) or "",
                   user=_s(d.get("user")) or "", host=_s(d.get("host")) or "",
                   port=_i(d.get("port")) or 0,
                   method=_s(d.get("method")) or "", path=_s(d.get("path")),
                   tier=_s(d.get("tier")) or "",
                   ceiling=_s(d.get("ceiling")) or "",
                   created=_s(d.get("created")) or "",
                   expires=_s(d.get("expires")) or "",
                   expires_in_s=_i(d.get("expires_in_s")) or 0,
                   waiting=_i(d.get("waiting")) or 0,
                   state=_s(d.get("state")) or "", raw=dict(d),
                   _answer=answer)

    @property
    def target(self) -> str:
        """``host:port`` (IPv6 in brackets)."""
        h = "[%s]" % self.host if ":" in self.host else self.host
        return "%s:%d" % (h, self.port)

    def answer(self, decision: Decision) -> Any:
        """Answer with ``decision``; returns the prompt as sluiced now has
        it (an awaitable of it on an async client).  A prompt already
        answered or expired raises :class:`~sluice.ConflictError`."""
        if self._answer is None:
            from .errors import InvalidStateError
            raise InvalidStateError("this prompt was not read through a "
                                    "client")
        return self._answer(self, decision)

    def allow_once(self) -> Any:
        """Let the waiting connections through; the next one asks again."""
        return self.answer("allow_once")

    def allow_chat(self) -> Any:
        """Let them through and grant the chat this host and port."""
        return self.answer("allow_chat")

    def deny(self) -> Any:
        """Refuse them (``user_denied``); sluiced does not ask again for
        this host and port for its quiet period."""
        return self.answer("deny")
