"""sluice: sandboxes, commands, files and network approvals for apps.

::

    from sluice import SandboxClient

    client = SandboxClient()          # /run/sluice-execd/exec.sock
    sb = client.sandboxes.create(tenant_id="acme", user_id="alice")
    try:
        print(sb.exec(["python3", "-c", "print(6 * 7)"]).stdout)   # 42
    finally:
        sb.destroy()

:class:`SandboxClient` talks to sluice-execd(8); ``client.broker`` to
sluiced(8)'s control API (sessions, ceilings, grants, prompts, request
rules, credentials);
:class:`AsyncSandboxClient` is the same on asyncio; :mod:`sluice.webhook`
checks webhook deliveries.
"""

from ._http import __version__
from ._pty import AsyncTerminal, PortResponse, Terminal, TerminalInfo
from .aio import (AsyncBrokerClient, AsyncCommand, AsyncEventStream,
                  AsyncPromptWatch, AsyncSandbox, AsyncSandboxClient)
from .client import (BrokerClient, Command, EventStream, PromptWatch,
                     Sandbox, SandboxClient, Sandboxes)
from .errors import (BackendUnavailableError, BadRequestError,
                     BrokerUnavailableError, BusyError, CommandError,
                     ConflictError, ForbiddenError, InvalidArgumentError,
                     InvalidStateError, NetworkNotPermittedError,
                     NotFoundError, QuotaExceededError, SandboxNotFoundError,
                     SluiceConnectionError, SluiceError, SluiceTimeoutError,
                     TooLargeError, UnauthorizedError)
from .models import (Artifact, ArtifactSkipped, BrokerSession, Ceiling,
                     Change, CommandOutput, CommandStatus, Credential,
                     Rule, RuleList,
                     Doctor, Event, ExecResult, FileEntry, Grant, Health,
                     Limits, Listing, OutputChunk, Prompt, SandboxInfo,
                     StreamChunk, TarResult)
from . import webhook

__all__ = [
    "__version__", "SandboxClient", "Sandboxes", "Sandbox", "Command",
    "BrokerClient", "EventStream", "PromptWatch", "AsyncSandboxClient",
    "AsyncSandbox", "AsyncCommand", "AsyncBrokerClient", "AsyncEventStream",
    "AsyncPromptWatch", "SluiceError", "SluiceConnectionError",
    "BadRequestError", "UnauthorizedError", "ForbiddenError",
    "NetworkNotPermittedError", "NotFoundError", "SandboxNotFoundError",
    "ConflictError", "TooLargeError", "QuotaExceededError", "BusyError",
    "BackendUnavailableError", "BrokerUnavailableError", "CommandError",
    "InvalidArgumentError", "InvalidStateError", "SluiceTimeoutError",
    "Artifact", "ArtifactSkipped", "Change", "BrokerSession", "Ceiling", "CommandOutput", "CommandStatus", "Doctor",
    "Event", "ExecResult", "FileEntry", "Grant", "Health", "Limits",
    "Listing", "OutputChunk", "Prompt", "SandboxInfo", "StreamChunk",
    "TarResult", "Rule", "RuleList", "Credential", "webhook",
    "Terminal", "AsyncTerminal", "TerminalInfo", "PortResponse",
]
