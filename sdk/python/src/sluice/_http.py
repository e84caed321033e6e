"""HTTP/1.1 to the daemons: a Unix socket or https with a bearer token.

The sync side uses http.client (with a Unix-socket connection class); the
async side speaks the same requests over asyncio streams.  Both open one
connection per call, so nothing ever reuses a connection the daemon may
have closed: a call whose connection drops before its answer is complete
is retried once when it is a GET (a read), never otherwise: a create or a
command is not sent twice.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
import ssl
import urllib.parse
from dataclasses import dataclass, field
from typing import (Any, AsyncIterator, Callable, Generic, Iterator, Mapping,
                    Optional, TypeVar, Union)

from .errors import (InvalidArgumentError, SluiceConnectionError,
                     SluiceError, error_from)

__version__ = "0.1.0"
USER_AGENT = "sluice-python/" + __version__
T = TypeVar("T")

# A read that stops short or a connection closed under us: what a retry
# of an idempotent read may cure.  A refused connect or a timeout is not.
_DROPPED = (ConnectionResetError, BrokenPipeError, ConnectionAbortedError,
            http.client.RemoteDisconnected, http.client.IncompleteRead,
            asyncio.IncompleteReadError)
MAX_HEAD = 65536


@dataclass(frozen=True)
class Address:
    """Where a daemon listens: a Unix socket path, or host and port of an
    https URL (with the path prefix it may have)."""

    unix: Optional[str] = None
    host: str = "localhost"
    port: int = 443
    prefix: str = ""

    @classmethod
    def parse(cls, address: str) -> "Address":
        if address.startswith("unix:"):
            p = address[5:]
            if p.startswith("//"):
                p = p[2:]
            return cls(unix=p)
        if "://" not in address:
            return cls(unix=address)
        u = urllib.parse.urlsplit(address)
        if u.scheme != "https":
            raise InvalidArgumentError("%s: a daemon's TCP listener is https only "
                             "(or give a Unix socket path)" % address)
        if not u.hostname:
            raise InvalidArgumentError("%s: no host" % address)
        return cls(host=u.hostname, port=u.port or 443,
                   prefix=u.path.rstrip("/"))

    def __str__(self) -> str:
        if self.unix is not None:
            return self.unix
        h = "[%s]" % self.host if ":" in self.host else self.host
        return "https://%s:%d%s" % (h, self.port, self.prefix)


@dataclass
class Response:
    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> Optional[str]:
        n = name.lower()
        for k, v in self.headers:
            if k.lower() == n:
                return v
        return None

    def json(self) -> Any:
        try:
            return json.loads(self.body.decode("utf-8")) if self.body else None
        except (ValueError, UnicodeDecodeError) as e:
            raise SluiceError("answer is not JSON: %s" % e,
                              status=self.status, code="bad_answer") from None


@dataclass
class Call(Generic[T]):
    """One request and how to read its answer."""

    method: str
    path: str                       # with its query, below the prefix
    parse: Callable[[Response], T]
    body: Optional[bytes] = None
    ctype: Optional[str] = None
    headers: dict[str, str] = field(default_factory=dict)
    sandbox: bool = False           # names one sandbox (its 404)
    timeout: Optional[float] = None  # None: the client's
    # the port proxy: an answer marked X-Sluice-Upstream is the
    # server's in the sandbox, whatever its status, never an error
    upstream: bool = False

    @property
    def retry(self) -> bool:
        return self.method == "GET"


def json_call(method: str, path: str, parse: Callable[[Response], T],
              body: Optional[Mapping[str, Any]] = None, **kw: Any) -> Call[T]:
    data = None
    ctype = None
    if body is not None:
        data = json.dumps(body, separators=(",", ":")).encode("utf-8")
        ctype = "application/json"
    return Call(method, path, parse, data, ctype, **kw)


def q(s: str) -> str:
    """One path segment, percent-encoded."""
    return urllib.parse.quote(s, safe="")


def query(**kv: Any) -> str:
    items = [(k, v) for k, v in kv.items() if v is not None]
    return "?" + urllib.parse.urlencode(items) if items else ""


def tls_context(ca_file: Optional[str], ssl_context: Optional[ssl.SSLContext]
                ) -> ssl.SSLContext:
    if ssl_context is not None:
        return ssl_context
    return ssl.create_default_context(cafile=ca_file)


class SSEParser:
    """Server-Sent Events from bytes as they come; ``feed`` returns the
    events completed by the bytes, each ``(id, event, data)``."""

    MAX = 16 << 20

    def __init__(self) -> None:
        self._buf = b""
        self._id: Optional[str] = None
        self._event = ""
        self._data: list[str] = []
        self.last_id: Optional[str] = None

    def feed(self, data: bytes) -> list[tuple[Optional[str], str, str]]:
        self._buf += data
        if len(self._buf) > self.MAX:
            raise SluiceError("event stream: a line over %d bytes" % self.MAX,
                              code="bad_answer")
        out: list[tuple[Optional[str], str, str]] = []
        while True:
            i = self._buf.find(b"\n")
            if i < 0:
                return out
            line = self._buf[:i].rstrip(b"\r").decode("utf-8", "replace")
            self._buf = self._buf[i + 1:]
            if line == "":
                if self._data or self._event:
                    if self._id is not None:
                        self.last_id = self._id
                    out.append((self._id, self._event or "message",
                                "\n".join(self._data)))
                self._id, self._event, self._data = None, "", []
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if name == "data":
                self._data.append(value)
            elif name == "event":
                self._event = value
            elif name == "id" and "\0" not in value:
                self._id = value


class _UnixHTTPConnection(http.client.HTTPConnection):
    """http.client over a Unix stream socket."""

    def __init__(self, path: str, timeout: Optional[float]) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(self.timeout)
            s.connect(self._path)
        except BaseException:
            s.close()
            raise
        self.sock = s


class _Base:
    def __init__(self, address: str, token: Optional[str], timeout: float,
                 ca_file: Optional[str], ssl_context: Optional[ssl.SSLContext],
                 broker: bool) -> None:
        self.address = Address.parse(address)
        if token is not None and self.address.unix is not None:
            raise InvalidArgumentError("a token is for an https address; on a Unix "
                             "socket the daemon takes your uid and groups")
        self.token = token
        self.timeout = timeout
        self.broker = broker
        self.name = "sluiced" if broker else "sluice-execd"
        self._ctx = (tls_context(ca_file, ssl_context)
                     if self.address.unix is None else None)

    def _headers(self, call: Call[Any], extra: Mapping[str, str] = {}
                 ) -> dict[str, str]:
        h = {"Host": self.address.host if self.address.unix is None
             else "localhost", "User-Agent": USER_AGENT,
             "Accept": "application/json", "Connection": "close"}
        if self.token is not None:
            h["Authorization"] = "Bearer " + self.token
        if call.ctype:
            h["Content-Type"] = call.ctype
        if call.body is not None or call.method in ("POST", "PUT", "PATCH"):
            h["Content-Length"] = str(len(call.body or b""))
        h.update(call.headers)
        h.update(extra)
        return h

    def _fail(self, e: BaseException) -> SluiceConnectionError:
        return SluiceConnectionError("%s at %s: %s" % (
            self.name, self.address, e or type(e).__name__),
            code="connection_failed")

    def _check(self, call: Call[Any], r: Response) -> Response:
        if call.upstream and r.header("X-Sluice-Upstream") == "1":
            return r
        if r.status >= 400:
            raise error_from(r.status, r.body, broker=self.broker,
                             sandbox=call.sandbox)
        return r


class Transport(_Base):
    """Blocking calls (http.client)."""

    def _conn(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        a = self.address
        if a.unix is not None:
            return _UnixHTTPConnection(a.unix, timeout)
        return http.client.HTTPSConnection(a.host, a.port, timeout=timeout,
                                           context=self._ctx)

    def _send(self, call: Call[Any], timeout: Optional[float],
              extra: Mapping[str, str] = {}
              ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse,
                         Optional[socket.socket]]:
        c = self._conn(timeout)
        try:
            c.putrequest(call.method, self.address.prefix + call.path,
                         skip_host=True, skip_accept_encoding=True)
            for k, v in self._headers(call, extra).items():
                c.putheader(k, v)
            c.endheaders(call.body)
            # http.client forgets the socket of a "Connection: close"
            # answer; a stream keeps it, to be shut from another thread
            sock = c.sock
            return c, c.getresponse(), sock
        except BaseException:
            c.close()
            raise

    def call(self, call: Call[T]) -> T:
        timeout = call.timeout if call.timeout is not None else self.timeout
        for attempt in (0, 1):
            try:
                c, resp, _ = self._send(call, timeout)
                try:
                    body = resp.read()
                finally:
                    c.close()
                r = Response(resp.status, resp.getheaders(), body)
                break
            except _DROPPED as e:
                if call.retry and attempt == 0:
                    continue
                raise self._fail(e) from e
            except (OSError, http.client.HTTPException) as e:
                raise self._fail(e) from e
        return call.parse(self._check(call, r))

    def open(self, call: Call[Any], extra: Mapping[str, str] = {},
             read_timeout: Optional[float] = None) -> "Stream":
        """Send call and read the head of its answer: a 2xx answer is a
        :class:`Stream` of its body, an error answer raises."""
        try:
            c, resp, sock = self._send(call, read_timeout, extra)
        except (OSError, http.client.HTTPException) as e:
            raise self._fail(e) from e
        if resp.status >= 400:
            try:
                body = resp.read()
            except (OSError, http.client.HTTPException):
                body = b""
            finally:
                c.close()
            self._check(call, Response(resp.status, resp.getheaders(), body))
        return Stream(self, c, resp, sock)


class Stream:
    """The body of an answer as its bytes come (``chunks``); ``close``
    ends the connection."""

    def __init__(self, t: Transport, c: http.client.HTTPConnection,
                 resp: http.client.HTTPResponse,
                 sock: Optional[socket.socket]) -> None:
        self._t, self._resp, self._sock = t, resp, sock
        self._c: Optional[http.client.HTTPConnection] = c
        self.status = resp.status
        self.headers = resp.getheaders()

    def chunks(self) -> Iterator[bytes]:
        try:
            while True:
                try:
                    data = self._resp.read1(65536)
                except (OSError, http.client.HTTPException) as e:
                    raise self._t._fail(e) from e
                if not data:
                    return
                yield data
        finally:
            self.close()

    def close(self) -> None:
        c, self._c = self._c, None
        sock, self._sock = self._sock, None
        if sock is not None:
            # another thread may be blocked reading: shut the socket
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if c is not None:
            c.close()
            self._resp.close()


class AsyncTransport(_Base):
    """The same calls on asyncio streams."""

    async def _open(self, timeout: Optional[float]
                    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        a = self.address
        if a.unix is not None:
            fut = asyncio.open_unix_connection(a.unix, limit=MAX_HEAD * 2)
        else:
            fut = asyncio.open_connection(a.host, a.port, ssl=self._ctx,
                                          server_hostname=a.host,
                                          limit=MAX_HEAD * 2)
        return await asyncio.wait_for(fut, timeout)

    async def _send(self, call: Call[Any], timeout: Optional[float],
                    extra: Mapping[str, str] = {}
                    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter,
                               int, list[tuple[str, str]]]:
        rd, wr = await self._open(timeout)
        try:
            head = "%s %s HTTP/1.1\r\n" % (call.method,
                                          self.address.prefix + call.path)
            head += "".join("%s: %s\r\n" % kv
                            for kv in self._headers(call, extra).items())
            wr.write(head.encode("latin-1") + b"\r\n" + (call.body or b""))
            await asyncio.wait_for(wr.drain(), timeout)
            raw = await asyncio.wait_for(rd.readuntil(b"\r\n\r\n"), timeout)
            lines = raw.decode("latin-1").split("\r\n")
            parts = lines[0].split(" ", 2)
            if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or \
                    not parts[1].isdigit():
                raise http.client.BadStatusLine(lines[0])
            hdrs = []
            for ln in lines[1:]:
                if ln:
                    k, _, v = ln.partition(":")
                    hdrs.append((k.strip(), v.strip()))
            return rd, wr, int(parts[1]), hdrs
        except BaseException:
            wr.close()
            raise

    @staticmethod
    async def _body(rd: asyncio.StreamReader, hdrs: list[tuple[str, str]],
                    timeout: Optional[float]) -> AsyncIterator[bytes]:
        h = {k.lower(): v for k, v in hdrs}
        if "chunked" in h.get("transfer-encoding", "").lower():
            while True:
                line = await asyncio.wait_for(rd.readuntil(b"\r\n"), timeout)
                n = int(line.split(b";")[0].strip() or b"0", 16)
                if n == 0:
                    for _ in range(100):        # trailers, then the end
                        t = await asyncio.wait_for(rd.readuntil(b"\r\n"),
                                                   timeout)
                        if t == b"\r\n":
                            break
                    return
                while n > 0:
                    data = await asyncio.wait_for(rd.read(min(n, 65536)),
                                                  timeout)
                    if not data:
                        raise asyncio.IncompleteReadError(b"", n)
                    n -= len(data)
                    yield data
                await asyncio.wait_for(rd.readexactly(2), timeout)
        elif "content-length" in h:
            n = int(h["content-length"])
            while n > 0:
                data = await asyncio.wait_for(rd.read(min(n, 65536)), timeout)
                if not data:
                    raise asyncio.IncompleteReadError(b"", n)
                n -= len(data)
                yield data
        else:
            while True:
                data = await asyncio.wait_for(rd.read(65536), timeout)
                if not data:
                    return
                yield data

    async def call(self, call: Call[T]) -> T:
        timeout = call.timeout if call.timeout is not None else self.timeout
        for attempt in (0, 1):
            try:
                rd, wr, status, hdrs = await self._send(call, timeout)
                try:
                    body = b"".join([d async for d in
                                     self._body(rd, hdrs, timeout)])
                finally:
                    wr.close()
                r = Response(status, hdrs, body)
                break
            except _DROPPED as e:
                if call.retry and attempt == 0:
                    continue
                raise self._fail(e) from e
            except (OSError, http.client.HTTPException, ValueError,
                    asyncio.LimitOverrunError, asyncio.TimeoutError) as e:
                raise self._fail(e) from e
        return call.parse(self._check(call, r))

    async def open(self, call: Call[Any], extra: Mapping[str, str] = {},
                   read_timeout: Optional[float] = None) -> "AsyncStream":
        try:
            rd, wr, status, hdrs = await self._send(call, read_timeout, extra)
        except (OSError, http.client.HTTPException, ValueError,
                asyncio.LimitOverrunError, asyncio.TimeoutError,
                asyncio.IncompleteReadError) as e:
            raise self._fail(e) from e
        if status >= 400:
            try:
                data = b"".join([d async for d in
                                 self._body(rd, hdrs, read_timeout)])
            except (OSError, ValueError, asyncio.TimeoutError,
                    asyncio.IncompleteReadError):
                data = b""
            finally:
                wr.close()
            self._check(call, Response(status, hdrs, data))
        return AsyncStream(self, rd, wr, status, hdrs, read_timeout)


class AsyncStream:
    """The body of an answer as its bytes come (``async for`` over
    ``chunks()``); ``close`` ends the connection."""

    def __init__(self, t: AsyncTransport, rd: asyncio.StreamReader,
                 wr: asyncio.StreamWriter, status: int,
                 hdrs: list[tuple[str, str]], timeout: Optional[float]
                 ) -> None:
        self._t, self._rd, self._wr = t, rd, wr
        self.status, self.headers, self._timeout = status, hdrs, timeout

    async def chunks(self) -> AsyncIterator[bytes]:
        try:
            async for data in self._t._body(self._rd, self.headers,
                                            self._timeout):
                yield data
        except (OSError, ValueError, asyncio.TimeoutError,
                asyncio.IncompleteReadError) as e:
            raise self._t._fail(e) from e
        finally:
            self.close()

    def close(self) -> None:
        if not self._wr.is_closing():
            self._wr.close()


Body = Union[bytes, bytearray, memoryview, str]


def as_bytes(data: Body) -> bytes:
    if isinstance(data, str):
        return data.encode("utf-8")
    return bytes(data)
