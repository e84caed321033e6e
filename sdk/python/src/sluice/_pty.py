"""Terminals (a shell on a pty in a sandbox, over a WebSocket) and the
port proxy's answers: sluice-execd(8)'s ``/v1/sandboxes/{id}/pty`` and
``/v1/sandboxes/{id}/ports/{port}``.

The WebSocket is a small RFC 6455 client here (masked frames, the
server's fragments and control frames), on the same Unix socket or TLS
connection as every call.  The protocol is OpenSandbox's: binary frames
0x01 (output), 0x02 (the wrapper's stderr), 0x03 (a replay: 8-byte
offset, then bytes); JSON text messages ``connected``, ``exit``,
``error``; input as 0x00 and bytes, ``resize`` and ``signal`` as JSON.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import struct
import time
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from .errors import (SluiceConnectionError, SluiceError, SluiceTimeoutError,
                     error_from)

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
MAX_FRAME = 16 << 20


@dataclass
class PortResponse:
    """The answer of the server listening on a port inside the sandbox,
    as it sent it (its status is not an error of sluice's)."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> Optional[str]:
        n = name.lower()
        for k, v in self.headers:
            if k.lower() == n:
                return v
        return None

    def text(self, encoding: str = "utf-8") -> str:
        return self.body.decode(encoding, "replace")

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8"))


@dataclass
class TerminalInfo:
    """``GET /v1/sandboxes/{id}/pty/{sid}``."""

    session_id: str
    running: bool
    output_offset: int
    oldest_offset: int
    attached: bool
    cols: Optional[int] = None
    rows: Optional[int] = None
    exit_code: Optional[int] = None
    raw: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, d: dict[str, Any]) -> "TerminalInfo":
        return cls(str(d.get("session_id", "")), bool(d.get("running")),
                   int(d.get("output_offset") or 0),
                   int(d.get("oldest_offset") or 0), bool(d.get("attached")),
                   d.get("cols"), d.get("rows"), d.get("exit_code"), d)


class Terminal:
    """A terminal of a sandbox (``Sandbox.terminal()``): ``attach`` opens
    the WebSocket; then ``send``, ``resize``, ``signal``, ``read`` /
    ``read_until``; ``detach`` leaves the shell running (its output kept
    for a replay with ``attach(since=offset)``); ``kill`` ends it.

    ``offset`` is the offset of the next output byte (counted from the
    terminal's first byte), ``exit_code`` set once the shell ended.
    """

    def __init__(self, sandbox: Any, info: TerminalInfo) -> None:
        self._sb = sandbox
        self._t = sandbox._t
        self.id = info.session_id
        self.sandbox_id = sandbox.id
        self.last_info = info
        self.offset = info.output_offset
        self.exit_code: Optional[int] = None
        self.close_code: Optional[int] = None
        self.errors: list[dict[str, Any]] = []
        self._sock: Optional[socket.socket] = None
        self._buf = b""
        self._out = b""

    def __repr__(self) -> str:
        return "<Terminal %s of %s>" % (self.id, self.sandbox_id)

    def __enter__(self) -> "Terminal":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.detach()

    # state

    def info(self) -> TerminalInfo:
        from . import _calls as C
        self.last_info = TerminalInfo.of(self._t.call(C.pty_get(
            self.sandbox_id, self.id)))
        return self.last_info

    def kill(self) -> TerminalInfo:
        """End the shell and everything it started (DELETE)."""
        from . import _calls as C
        self.last_info = TerminalInfo.of(self._t.call(C.pty_delete(
            self.sandbox_id, self.id)))
        return self.last_info

    # the WebSocket

    @property
    def attached(self) -> bool:
        return self._sock is not None

    def attach(self, since: Optional[int] = None, takeover: bool = False,
               timeout: float = 30.0) -> "Terminal":
        """Open the WebSocket.  ``since``: the output from that offset is
        replayed first (read it with ``read``); ``takeover``: a client
        attached already is closed, else :class:`~sluice.ConflictError`.
        """
        from ._http import query, q
        t = self._t
        path = "%s/v1/sandboxes/%s/pty/%s/ws%s" % (
            t.address.prefix, q(self.sandbox_id), q(self.id),
            query(since=since, takeover=1 if takeover else None))
        key = base64.b64encode(os.urandom(16)).decode()
        c = t._conn(timeout)
        try:
            c.connect()
            s = c.sock
            h = ("GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: %s\r\n"
                 "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                 "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n" % (
                     path, t.address.host if t.address.unix is None
                     else "localhost", "sluice-python", key))
            if t.token is not None:
                h += "Authorization: Bearer %s\r\n" % t.token
            s.sendall((h + "\r\n").encode())
            buf = b""
            while b"\r\n\r\n" not in buf:
                d = s.recv(65536)
                if not d:
                    raise SluiceConnectionError(
                        "terminal %s: the connection ended before the "
                        "answer" % self.id, code="connection_failed")
                buf += d
                if len(buf) > 65536:
                    raise SluiceError("terminal: an answer head over 64 "
                                      "KiB", code="bad_answer")
            head, rest = buf.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            status = int(lines[0].split()[1])
            hd = {}
            for ln in lines[1:]:
                k, _, v = ln.partition(":")
                hd[k.strip().lower()] = v.strip()
            if status != 101:
                n = int(hd.get("content-length", "0") or 0)
                while len(rest) < n:
                    d = s.recv(65536)
                    if not d:
                        break
                    rest += d
                raise error_from(status, rest[:n], sandbox=True)
            want = base64.b64encode(hashlib.sha1(key.encode() + GUID)
                                    .digest()).decode()
            if hd.get("sec-websocket-accept") != want:
                raise SluiceError("terminal: a wrong Sec-WebSocket-Accept",
                                  code="bad_answer")
        except OSError as e:
            c.close()
            raise t._fail(e) from e
        except BaseException:
            c.close()
            raise
        self._sock, self._buf, self._out = s, rest, b""
        self.close_code = None
        # the connected message: where the live output continues
        while True:
            m = self._frame(timeout)
            if m is None:
                raise SluiceConnectionError("terminal %s: closed at once"
                                            % self.id,
                                            code="connection_failed")
            if m == "connected":
                break
        return self

    def _send(self, op: int, payload: bytes) -> None:
        if self._sock is None:
            raise SluiceError("terminal %s is not attached" % self.id,
                              code="not_attached")
        n = len(payload)
        if n < 126:
            h = struct.pack("!BB", 0x80 | op, 0x80 | n)
        elif n < 65536:
            h = struct.pack("!BBH", 0x80 | op, 0x80 | 126, n)
        else:
            h = struct.pack("!BBQ", 0x80 | op, 0x80 | 127, n)
        k = os.urandom(4)
        masked = bytes(b ^ k[i & 3] for i, b in enumerate(payload))
        try:
            self._sock.sendall(h + k + masked)
        except OSError as e:
            raise self._t._fail(e) from e

    def send(self, data: Union[str, bytes]) -> None:
        """Keys for the shell (a str is sent as UTF-8; ``"\\x03"`` is
        Ctrl-C)."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        self._send(2, b"\x00" + data)

    def resize(self, cols: int, rows: int) -> None:
        self._send(1, json.dumps({"type": "resize", "cols": cols,
                                  "rows": rows}).encode())

    def signal(self, sig: Union[str, int] = "INT") -> None:
        """A signal to the terminal's foreground process group."""
        self._send(1, json.dumps({"type": "signal", "signal": sig}).encode())

    def _fill(self, n: int, deadline: float) -> bool:
        assert self._sock is not None
        while len(self._buf) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self._sock.settimeout(left)
            try:
                d = self._sock.recv(65536)
            except socket.timeout:
                return False
            except OSError as e:
                raise self._t._fail(e) from e
            if not d:
                raise EOFError
            self._buf += d
        return True

    def _frame(self, timeout: float) -> Optional[str]:
        """One frame read and handled: "output", "connected", "exit",
        "close", "" (other), None (nothing within timeout or gone)."""
        if self._sock is None:
            return None
        deadline = time.monotonic() + timeout
        try:
            if not self._fill(2, deadline):
                return None
            b1 = self._buf[1]
            n, hl = b1 & 0x7f, 2
            if n == 126:
                if not self._fill(4, deadline):
                    return None
                n, hl = struct.unpack("!H", self._buf[2:4])[0], 4
            elif n == 127:
                if not self._fill(10, deadline):
                    return None
                n, hl = struct.unpack("!Q", self._buf[2:10])[0], 10
            if n > MAX_FRAME:
                raise SluiceError("terminal: a frame over 16 MiB",
                                  code="bad_answer")
            if not self._fill(hl + n, deadline):
                return None
        except EOFError:
            self._gone()
            return "close"
        op = self._buf[0] & 0x0f
        p, self._buf = self._buf[hl:hl + n], self._buf[hl + n:]
        if op == 2 and p[:1] == b"\x01":
            self._out += p[1:]
            self.offset += len(p) - 1
            return "output"
        if op == 2 and p[:1] == b"\x03" and len(p) >= 9:
            self._out += p[9:]
            return "output"
        if op == 2 and p[:1] == b"\x02":
            self._out += p[1:]
            return "output"
        if op == 1:
            try:
                m = json.loads(p)
            except ValueError:
                return ""
            ty = m.get("type")
            if ty == "connected":
                self.offset = int(m.get("offset") or 0)
                return "connected"
            if ty == "exit":
                self.exit_code = m.get("exit_code")
                return "exit"
            if ty == "error":
                self.errors.append(m)
            return ""
        if op == 9:
            self._send(10, p)
            return ""
        if op == 8:
            self.close_code = (struct.unpack("!H", p[:2])[0]
                               if len(p) >= 2 else 1005)
            try:
                self._send(8, p[:2])
            except SluiceError:
                pass
            self._gone()
            return "close"
        return ""

    def _gone(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
        self._sock = None

    def read(self, timeout: float = 1.0) -> bytes:
        """The output that came within ``timeout`` (b"" none; the shell's
        end or a takeover detaches: see ``exit_code``, ``close_code``)."""
        deadline = time.monotonic() + timeout
        while not self._out and self._sock is not None:
            left = deadline - time.monotonic()
            if left <= 0 or self._frame(left) is None:
                break
        out, self._out = self._out, b""
        return out

    def read_until(self, pattern: Union[str, bytes], timeout: float = 30.0
                   ) -> bytes:
        """Output up to and including ``pattern``;
        :class:`~sluice.SluiceTimeoutError` with what came
        when it does not within ``timeout``."""
        if isinstance(pattern, str):
            pattern = pattern.encode("utf-8")
        got = b""
        deadline = time.monotonic() + timeout
        while pattern not in got:
            left = deadline - time.monotonic()
            if left <= 0 or (self._sock is None and not self._out):
                raise SluiceTimeoutError("terminal %s: %r did not come (got "
                                         "%r)" % (self.id, pattern,
                                                  got[-300:]))
            got += self.read(min(left, 1.0))
        i = got.index(pattern) + len(pattern)
        self._out = got[i:] + self._out
        return got[:i]

    def detach(self) -> None:
        """Close the WebSocket; the shell runs on."""
        if self._sock is None:
            return
        try:
            self._send(8, struct.pack("!H", 1000))
            deadline = time.monotonic() + 5
            while self._sock is not None and time.monotonic() < deadline:
                if self._frame(deadline - time.monotonic()) is None:
                    break
        except SluiceError:
            pass
        self._gone()


class AsyncTerminal:
    """:class:`Terminal` on asyncio: the same calls, awaited (each runs
    the blocking terminal in a worker thread, so the loop never waits on
    its socket)."""

    def __init__(self, term: Terminal) -> None:
        self._term = term
        self.id = term.id
        self.sandbox_id = term.sandbox_id

    def __repr__(self) -> str:
        return "<AsyncTerminal %s of %s>" % (self.id, self.sandbox_id)

    @property
    def offset(self) -> int:
        return self._term.offset

    @property
    def exit_code(self) -> Optional[int]:
        return self._term.exit_code

    @property
    def close_code(self) -> Optional[int]:
        return self._term.close_code

    @property
    def errors(self) -> list[dict[str, Any]]:
        return self._term.errors

    @property
    def attached(self) -> bool:
        return self._term.attached

    async def info(self) -> TerminalInfo:
        import asyncio
        return await asyncio.to_thread(self._term.info)

    async def kill(self) -> TerminalInfo:
        import asyncio
        return await asyncio.to_thread(self._term.kill)

    async def attach(self, since: Optional[int] = None, takeover: bool = False,
                     timeout: float = 30.0) -> "AsyncTerminal":
        import asyncio
        await asyncio.to_thread(self._term.attach, since, takeover, timeout)
        return self

    async def send(self, data: Union[str, bytes]) -> None:
        import asyncio
        await asyncio.to_thread(self._term.send, data)

    async def resize(self, cols: int, rows: int) -> None:
        import asyncio
        await asyncio.to_thread(self._term.resize, cols, rows)

    async def signal(self, sig: Union[str, int] = "INT") -> None:
        import asyncio
        await asyncio.to_thread(self._term.signal, sig)

    async def read(self, timeout: float = 1.0) -> bytes:
        import asyncio
        return await asyncio.to_thread(self._term.read, timeout)

    async def read_until(self, pattern: Union[str, bytes],
                         timeout: float = 30.0) -> bytes:
        import asyncio
        return await asyncio.to_thread(self._term.read_until, pattern,
                                       timeout)

    async def detach(self) -> None:
        import asyncio
        await asyncio.to_thread(self._term.detach)
