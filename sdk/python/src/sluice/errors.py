"""The errors of the sluice SDK: one class per API code.

Every answer of sluice-execd(8) and of sluiced(8)'s control API that is
not a success carries ``{"error": {"code": ..., "message": ..., ...}}``;
:func:`error_from` turns it into the class of its code, so an app can
``except QuotaExceededError as e: e.scope, e.limit, e.in_use``.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

__all__ = [
    "SluiceError", "SluiceConnectionError", "BadRequestError",
    "UnauthorizedError", "ForbiddenError", "NetworkNotPermittedError",
    "NotFoundError", "SandboxNotFoundError", "ConflictError",
    "TooLargeError", "QuotaExceededError", "BusyError",
    "BackendUnavailableError", "BrokerUnavailableError", "CommandError",
    "InvalidArgumentError", "InvalidStateError", "SluiceTimeoutError",
    "error_from",
]


class SluiceError(Exception):
    """Base of every error the SDK raises.

    ``status`` is the HTTP status (None when no answer came), ``code`` the
    API's error code (``"quota_exceeded"``, ...), ``message`` its text and
    ``details`` the whole error object the API sent.
    """

    status: Optional[int]
    code: Optional[str]
    message: str
    details: Mapping[str, Any]

    def __init__(self, message: str, *, status: Optional[int] = None,
                 code: Optional[str] = None,
                 details: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = dict(details or {})

    def __str__(self) -> str:
        if self.status is None:
            return self.message
        return "%s %s: %s" % (self.status, self.code, self.message)


class SluiceConnectionError(SluiceError, ConnectionError):
    """The daemon could not be reached, or the connection broke before an
    answer came (no status, code ``"connection_failed"``)."""


class InvalidArgumentError(SluiceError, ValueError):
    """An argument the SDK refuses before it calls anything (no status,
    code ``"invalid_argument"``): a sandbox id that is not one, an empty
    command, an ``http://`` address.  Also a ``ValueError``, so an
    ``except ValueError`` written before it existed still catches it."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="invalid_argument")


class InvalidStateError(SluiceError, RuntimeError):
    """An object the SDK cannot use for the call (code
    ``"invalid_state"``): a :class:`~sluice.Prompt` made by hand, not read
    through a client, cannot be answered.  Also a ``RuntimeError``."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="invalid_state")


class SluiceTimeoutError(SluiceError, TimeoutError):
    """``Command.wait(timeout=...)`` ran out (code ``"timeout"``); the
    command goes on.  Also a ``TimeoutError``."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="timeout")


class BadRequestError(SluiceError):
    """400 ``bad_request``: a field, path or body the API refused;
    ``field`` and ``max`` name a limit above the administrator's maximum."""

    @property
    def field(self) -> Optional[str]:
        v = self.details.get("field")
        return v if isinstance(v, str) else None

    @property
    def max(self) -> Optional[int]:
        v = self.details.get("max")
        return v if isinstance(v, int) else None


class UnauthorizedError(SluiceError):
    """401 ``unauthorized``: TCP without a valid bearer token."""


class ForbiddenError(SluiceError):
    """403 ``forbidden``: the caller's role (or its token's tenant) may
    not make this call."""


class NetworkNotPermittedError(SluiceError):
    """403 ``network_not_permitted``: sluiced refused the network the call
    needs (``install`` in a sandbox whose effective tier is off).
    ``tier`` is the sandbox's own tier, ``ceiling`` its tenant's ceiling
    and ``effective_tier`` the lower of the two (None where the answer
    did not say: sluiced had no session for the sandbox)."""

    @property
    def tier(self) -> Optional[str]:
        v = self.details.get("tier")
        return v if isinstance(v, str) else None

    @property
    def ceiling(self) -> Optional[str]:
        v = self.details.get("ceiling")
        return v if isinstance(v, str) else None

    @property
    def effective_tier(self) -> Optional[str]:
        v = self.details.get("effective_tier")
        return v if isinstance(v, str) else None


class NotFoundError(SluiceError):
    """404 ``not_found``: no such sandbox, command, file, session, grant or
    prompt."""


class SandboxNotFoundError(NotFoundError):
    """404 on a sandbox call because the sandbox is gone (destroyed, or
    never made)."""


class ConflictError(SluiceError):
    """409 ``exists`` (an id in use) or ``conflict`` (an edit whose old
    text is missing or not unique, a directory not empty, a prompt
    already answered)."""


class TooLargeError(SluiceError):
    """413 ``too_large``: a body or file above the daemon's limit (read a
    large file with a range)."""


class QuotaExceededError(SluiceError):
    """429 ``quota_exceeded``: ``scope`` (``global``, ``tenant``, ``user``,
    ``creates`` or ``sandbox``) hit its ``limit`` with ``in_use``."""

    @property
    def scope(self) -> Optional[str]:
        v = self.details.get("scope")
        return v if isinstance(v, str) else None

    @property
    def limit(self) -> Optional[int]:
        v = self.details.get("limit")
        return v if isinstance(v, int) else None

    @property
    def in_use(self) -> Optional[int]:
        v = self.details.get("in_use")
        return v if isinstance(v, int) else None


class BusyError(SluiceError):
    """429 ``busy``: the sandbox is running its one foreground command."""


class BackendUnavailableError(SluiceError):
    """503 ``backend_unavailable``: the sandbox backend cannot serve the
    call (the executor drains, the sandbox's processes are gone)."""


class BrokerUnavailableError(SluiceError):
    """503 ``broker_unavailable`` from the executor (sluiced did not
    answer), or ``unavailable`` from sluiced itself (it drains)."""


class CommandError(SluiceError):
    """A command the SDK ran for you (``install``) failed; ``result`` is its
    :class:`~sluice.ExecResult`."""

    def __init__(self, message: str, result: Any) -> None:
        super().__init__(message, code="command_failed")
        self.result = result


_BY_CODE: dict[str, type[SluiceError]] = {
    "bad_request": BadRequestError,
    "unauthorized": UnauthorizedError,
    "forbidden": ForbiddenError,
    "network_not_permitted": NetworkNotPermittedError,
    "not_found": NotFoundError,
    "exists": ConflictError,
    "conflict": ConflictError,
    "too_large": TooLargeError,
    "payload_too_large": TooLargeError,      # sluiced's name for it
    "quota_exceeded": QuotaExceededError,
    "busy": BusyError,
    "backend_unavailable": BackendUnavailableError,
    "broker_unavailable": BrokerUnavailableError,
}

_BY_STATUS: dict[int, type[SluiceError]] = {
    400: BadRequestError, 401: UnauthorizedError, 403: ForbiddenError,
    404: NotFoundError, 409: ConflictError, 413: TooLargeError,
}


def error_from(status: int, body: bytes, *, broker: bool = False,
               sandbox: bool = False) -> SluiceError:
    """The error of an answer with this status and body.

    ``broker`` says the answer came from sluiced (whose 503 is
    ``unavailable``); ``sandbox`` that the call named one sandbox, so its
    404 for that sandbox is :class:`SandboxNotFoundError`.
    """
    import json
    err: dict[str, Any] = {}
    try:
        doc = json.loads(body.decode("utf-8")) if body else None
        if isinstance(doc, dict) and isinstance(doc.get("error"), dict):
            err = doc["error"]
    except (ValueError, UnicodeDecodeError):
        pass
    code = err.get("code") if isinstance(err.get("code"), str) else None
    msg = err.get("message") if isinstance(err.get("message"), str) else None
    if msg is None:
        text = body.decode("utf-8", "replace").strip()
        msg = text[:300] if text else "HTTP %d" % status
    cls = _BY_CODE.get(code or "")
    if cls is None:
        if status == 503:
            cls = BrokerUnavailableError if broker else BackendUnavailableError
        else:
            cls = _BY_STATUS.get(status, SluiceError)
    if (cls is NotFoundError and sandbox and not broker and
            msg.startswith("no sandbox ")):
        cls = SandboxNotFoundError
    if code is None:
        code = {400: "bad_request", 401: "unauthorized", 403: "forbidden",
                404: "not_found", 409: "conflict", 413: "too_large",
                503: "unavailable"}.get(status, "http_%d" % status)
    return cls(msg, status=status, code=code, details=err)
