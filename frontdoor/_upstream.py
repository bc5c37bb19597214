"""The front door's own HTTP/1.1 client for the metered paths: the pieces of each read of the answer are handed
to the relay from the socket's read callback, so relaying a chunk wakes no task.

Why not aiohttp's client: it queues each read for a task to await, one task wakeup and a second parse per chunk.
Here httptools (llhttp) parses the response and appends each decoded piece to `conn.pieces` itself (its
`on_body` is the list's own `append`: no Python frame per piece), and the relay's `flush` takes them after each
read (tests/bench_frontdoor.py measures both). Everything else the front door forwards (GET, HEAD, uploads,
websockets) still goes through aiohttp's client, which knows those cases; this one only sends a request whose
whole body is in memory and reads one response.

    pool = UpstreamPool(connect_timeout=10)
    conn = await pool.send(url, "POST", path, headers, body, idle_timeout)   # returns at the headers
    conn.start(flush)              # flush() after each read: it takes (and clears) conn.pieces
    ended = await conn.wait()      # "complete", "broken", "timeout" or "paused" (see `pause`)
    conn.finish()                  # back to the pool when complete and reusable, else closed

Connections are kept per scheme, host and port and closed after `keepalive` seconds idle. One that the
upstream closed while idle is retried once on a new connection when nothing came back on it (the request
cannot have been answered), as aiohttp does.

What is not an answer is Unreachable (a 502 to the client), and its connection is closed: bytes that are not
HTTP, a head (1xx included) over 64 KiB, a 101 (no upgrade is ever asked for) or a status outside 100-599,
framing llhttp refuses (two Content-Lengths, Content-Length with Transfer-Encoding). Bytes after the end of an
answer (more than its Content-Length, a second answer) are not passed on and the connection is not kept. A
body that ends with the connection ends "broken", not "complete", when the connection is reset.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from urllib.parse import urlsplit

import httptools

from inferwatch.frontdoor._idle import IdleWatch

__all__ = ["UpstreamPool", "Connection", "Unreachable", "Silent"]

_INFORMATIONAL = range(100, 200)
_MAX_HEAD = 64 * 1024  # status lines and headers of one answer, 1xx included: more is not an engine's answer


class Unreachable(ConnectionError):
    """No connection to the upstream, or it closed one before answering."""


class Silent(TimeoutError):
    """The upstream did not connect within the connect timeout, or sent nothing for the idle timeout."""


class Connection(asyncio.Protocol):
    """One connection to an upstream, one request and response at a time; its own httptools callbacks."""

    def __init__(self, pool: UpstreamPool, key: tuple):
        self.pool, self.key = pool, key
        self.transport: asyncio.Transport | None = None
        self.status, self.reason = 0, ""
        self.headers: list[tuple[str, str]] = []
        self.received = 0  # bytes read for this request's answer: the idle watch's clock
        self.ended: str | None = None  # "complete", "broken", "timeout": the response is over
        self.paused = False  # reading held until the client takes what it has
        self.reused = False
        self.pieces: list[bytes] = []  # the body's pieces read and not yet taken by the relay's flush
        # set for each request (`_send`); None between requests
        self._parser: httptools.HttpResponseParser | None = None
        self._flush: Callable[[], None] | None = None
        self._waiter: asyncio.Future[str] | None = None
        self._head: asyncio.Future[None] | None = None
        self._watch: IdleWatch | None = None
        self._idle: asyncio.TimerHandle | None = None  # the keep-alive timer while the connection waits in the pool
        self._until_close = self._informational = self._keep = False

    # --- asyncio.Protocol --------------------------------------------------------------------------------------

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self._parser is None:  # bytes on an idle connection: nothing can be trusted on it
            self._close()
            return
        self.received += len(data)
        try:
            self._parser.feed_data(data)
            if self.status == 0 and self.received > _MAX_HEAD:  # still no answer's head: the headers' size
                raise httptools.HttpParserError(f"the answer's head is over {_MAX_HEAD} bytes")
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as err:
            self._keep = False  # bytes after a complete answer too: the connection cannot be trusted
            self._end("broken", err)
        finally:
            if self._flush is not None:
                self._flush()

    def eof_received(self) -> None:
        return None  # close our side too

    def connection_lost(self, exc) -> None:
        self.transport = None
        self.pool.forget(self)
        if self._parser is not None and self.ended is None:  # a reset is no end, even of an unsized body
            self._end("complete" if self._until_close and exc is None else "broken", exc)

    # --- httptools callbacks ---------------------------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self.ended is not None:  # a second answer to one request: the upstream is out of step
            raise ValueError("bytes after the end of the answer")

    def on_status(self, reason: bytes) -> None:
        self.reason = reason.decode("latin-1")

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.decode("latin-1"), value.decode("latin-1")))

    def on_headers_complete(self) -> None:
        if self._parser is None or self._head is None:  # the parser calls back only within a request
            return
        status = self._parser.get_status_code()
        if status == 101 or not 100 <= status < 600:  # no upgrade was asked for; no status HTTP has
            raise ValueError(f"status {status} is no answer to this request")
        if status in _INFORMATIONAL:  # "100 Continue", "103 Early Hints": the answer follows
            self.headers, self._informational = [], True
            return
        self.status = status
        codings = ",".join(v for n, v in self.headers if n.lower() == "transfer-encoding").lower()
        sized = any(n.lower() == "content-length" for n, _ in self.headers)
        # the body ends when the connection does: no length, or codings that do not end in chunked (RFC 9112 6.3)
        self._until_close = (
            status not in (204, 304) and not codings.rstrip(" \t,").endswith("chunked") and (bool(codings) or not sized)
        )
        if not self._head.done():
            self._head.set_result(None)

    def on_message_complete(self) -> None:
        if self._informational:
            self._informational = False
            return
        # read now: the parser resets for a next message
        self._keep = self._parser is not None and self._parser.should_keep_alive()
        self._end("complete")

    # --- the relay's side --------------------------------------------------------------------------------------

    def _send(self, head: bytes, body: bytes, idle_timeout: float | None) -> None:
        transport = self.transport
        if transport is None:  # lost between the pool and here
            raise Unreachable("the connection closed before the request was sent")
        self._parser = parser = httptools.HttpResponseParser(_Callbacks(self))
        # as tolerant as aiohttp's client, which read these answers before: lines that end in LF alone, spaces
        # after a chunk's size (both framing the upstream alone decides; nothing of the request's)
        parser.set_dangerous_leniencies(lenient_optional_cr_before_lf=True, lenient_spaces_after_chunk_size=True)
        self.status, self.reason, self.headers, self.received, self.ended, self._keep = 0, "", [], 0, None, False
        self.pieces.clear()  # those that come with the headers wait there for the relay
        self._head = asyncio.get_running_loop().create_future()
        transport.write(head + body if len(body) < 65536 else head)
        if len(body) >= 65536:
            transport.write(body)
        self._watch = IdleWatch(
            idle_timeout, lambda: (self.ended is not None, self.received, self.paused), lambda: self._end("timeout")
        )

    async def head(self) -> None:
        """Until the response's status and headers; Unreachable or Silent when they do not come."""
        if self._head is not None:
            await self._head

    def start(self, flush) -> None:
        """Call `flush()` now, for the pieces that came with the headers, and after each read from now on; it
        takes the read's pieces from `self.pieces` (one read often holds several, when the upstream is ahead)."""
        flush()
        self._flush = flush

    async def wait(self) -> str:
        """How the response ended, or "paused" when `pause` held reading (call `resume` and wait again)."""
        if self.ended:
            return self.ended
        if self.paused:
            return "paused"
        self._waiter = waiter = asyncio.get_running_loop().create_future()
        try:
            return await waiter
        finally:
            self._waiter = None

    def pause(self) -> None:
        """Stop reading from the upstream (the client is behind); `wait` returns "paused". Once the answer is
        over there is nothing left to hold, and the connection stays fit to keep."""
        if not self.paused and self.ended is None and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()
            self._wake("paused")

    def abort(self) -> None:
        """The client is gone: close the connection now (the engine aborts the request); `wait` returns "aborted"."""
        self._end("aborted")

    def resume(self) -> None:
        if self.paused:
            self.paused = False
            if self.transport is not None:
                self.transport.resume_reading()

    def finish(self) -> None:
        """The answer is over: a complete one leaves the connection for the next, anything else closes it."""
        if self._watch is not None:
            self._watch.cancel()
        reusable = self.ended == "complete" and self._keep and not self._until_close and not self.paused
        self._parser = self._flush = None
        self.pieces.clear()
        if reusable and self.transport is not None and not self.transport.is_closing():
            self.pool.keep(self)
        else:
            self._close()

    # --- internals ---------------------------------------------------------------------------------------------

    def _end(self, how: str, err: BaseException | None = None) -> None:
        if self.ended is not None:
            return
        self.ended = how
        if how != "complete":
            self._close()
        if self._head is not None and not self._head.done():
            stale = how == "broken" and self.reused and self.received == 0
            self._head.set_exception(
                _Stale()
                if stale
                else Silent("no answer")
                if how == "timeout"
                else Unreachable(f"closed before answering{f': {err}' if err else ''}")
            )
        self._wake(how)

    def _wake(self, how: str) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(how)

    def _close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class _Callbacks:
    """What the parser calls: the connection's methods, but `on_body` is `conn.pieces.append` itself. httptools
    looks its callbacks up once, on the object it is given, so the connection cannot be that object."""

    __slots__ = ("on_message_begin", "on_status", "on_header", "on_headers_complete", "on_body", "on_message_complete")

    def __init__(self, conn: Connection):
        self.on_message_begin, self.on_status, self.on_header = conn.on_message_begin, conn.on_status, conn.on_header
        self.on_headers_complete, self.on_message_complete = conn.on_headers_complete, conn.on_message_complete
        self.on_body = conn.pieces.append


class _Stale(Unreachable):
    """A kept connection the upstream had closed: nothing was answered, so the request may go again."""


class UpstreamPool:
    """Kept-alive connections to the upstreams, by scheme, host and port."""

    def __init__(self, connect_timeout: float | None, keepalive: float = 15.0):
        self.connect_timeout, self.keepalive = connect_timeout, keepalive
        self._idle: dict[tuple, list[Connection]] = {}
        self._tls: ssl.SSLContext | None = None

    async def send(
        self, base_url: str, method: str, path: str, headers, body: bytes, idle_timeout: float | None
    ) -> Connection:
        """Send one request (`headers`: (name, value) pairs, no Host or Content-Length) and wait for the
        answer's headers. Unreachable when no connection can be made or it closes first; Silent on a timeout."""
        url = urlsplit(base_url)
        tls = url.scheme == "https"
        key = (tls, url.hostname, url.port or (443 if tls else 80))
        lines = [f"{method} {url.path.rstrip('/')}{path} HTTP/1.1", f"Host: {url.netloc.rpartition('@')[2]}"]
        lines += [f"{name}: {value}" for name, value in headers]
        lines.append(f"Content-Length: {len(body)}\r\n\r\n")
        head = "\r\n".join(lines).encode("utf-8", "surrogateescape")
        for attempt in range(2):  # the retry goes on a new connection: the next kept one may be stale too
            conn = (self._kept(key) if attempt == 0 else None) or await self._connect(key)
            conn._send(head, body, idle_timeout)
            try:
                await conn.head()
                return conn
            except _Stale:
                conn.finish()
            except BaseException:
                conn.finish()
                raise
        raise Unreachable("the upstream closed two connections before answering")

    def keep(self, conn: Connection) -> None:
        self._idle.setdefault(conn.key, []).append(conn)
        conn._idle = asyncio.get_running_loop().call_later(self.keepalive, conn._close)

    def forget(self, conn: Connection) -> None:
        kept = self._idle.get(conn.key)
        if kept and conn in kept:
            kept.remove(conn)
        if conn._idle:
            conn._idle.cancel()
            conn._idle = None

    def close(self) -> None:
        for kept in list(self._idle.values()):
            for conn in list(kept):
                conn._close()
        self._idle.clear()

    def _kept(self, key: tuple) -> Connection | None:
        kept = self._idle.get(key)
        while kept:
            conn = kept.pop()
            if conn._idle is not None:
                conn._idle.cancel()
                conn._idle = None
            if conn.transport is not None and not conn.transport.is_closing():
                conn.reused = True
                return conn
        return None

    async def _connect(self, key: tuple) -> Connection:
        tls, host, port = key
        if tls and self._tls is None:
            self._tls = ssl.create_default_context()  # the system's CAs; SSL_CERT_FILE points elsewhere
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.connect_timeout):
                _, conn = await loop.create_connection(
                    lambda: Connection(self, key), host, port, ssl=self._tls if tls else None
                )
        except TimeoutError:
            raise Silent(f"no connection within {self.connect_timeout:g}s") from None
        except (OSError, ssl.SSLError) as err:
            raise Unreachable(err.strerror or str(err)) from None
        return conn
