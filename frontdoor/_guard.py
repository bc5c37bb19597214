"""Bounds on the front door's client connections, so a flood degrades the flooder first.

aiohttp alone lets a connection hold an unfinished request head of up to 128
lines of 8,190 bytes (about 1 MB) for as long as its keep-alive timeout (3,630 s),
and accepts connections without limit: 300 slow heads took a door from 61 MB to
540 MB, 1,100 idle connections locked every other client out. Here each
connection is admitted against a global limit and one per client address; a
request head has `head_timeout` from its first byte and `max_head` bytes, and a
connection with no request waits `keepalive_timeout` at most (aiohttp's own
timer after a response; from the connection's start, this one's too, as
aiohttp before 3.10 had none there). Each refusal or close is
counted by reason (`llm_frontdoor_refused_total`).

While a request is handled, what the client sends ahead on the same connection
(HTTP/1.1 pipelining) is bounded too: at most `max_pipelined` parsed requests
wait, and the bytes that come meanwhile may be the request's body (`max_body`)
and that many heads (`max_head` each), no more; past either the connection is
closed. A body the handler has not read yet is held back by aiohttp's own flow
control (it stops reading the socket).

The guard reads aiohttp's RequestHandler from the inside (`_messages`, the queue
its parser fills, `_handle_request` and `_process_keepalive`; the Server's
`_loop` and `_kwargs`): a head is complete when the parser queued a message, and
the connection waits for the next head again once its requests are handled.
`check_aiohttp()` fails at start-up, with the version to use, when an aiohttp
release no longer has them, so the bounds can never be silently off.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from typing import cast

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from inferwatch.frontdoor._config import Limits

__all__ = ["ConnectionGuard", "GuardedSite", "check_aiohttp", "fit_open_files", "SPARE_FILES"]

# what the process holds besides client connections and their upstream sockets: listeners, the access log, the
# upstreams' /v1/models refresh, the admin listener's scrapes
SPARE_FILES = 64

# each reason given to on_refused is a key of _metrics.REFUSED (llm_frontdoor_refused_total's `reason`)
_BUSY_TEXT = b"too many connections to the front door; retry\n"
_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
    b"Connection: close\r\n\r\n%s" % (len(_BUSY_TEXT), _BUSY_TEXT)
)


class ConnectionGuard:
    """Counts open connections, globally and per address, and refusals by reason (`on_refused(reason)`)."""

    def __init__(self, limits: Limits, on_refused: Callable[[str], None], max_body: int = 1 << 20):
        self.limits, self.on_refused = limits, on_refused
        # the bytes one connection may send while a request of it is handled: its body and the heads sent ahead
        self.max_ahead = max_body + limits.max_pipelined * limits.max_head
        self.open = 0
        self.by_address: Counter[str] = Counter()

    def admit(self, address: str) -> str | None:
        """None when a connection from `address` may open (and is counted open), else the reason it may not."""
        if self.open >= self.limits.max_connections:
            return "connections"
        if self.by_address[address] >= self.limits.max_client_connections:
            return "client_connections"
        self.open += 1
        self.by_address[address] += 1
        return None

    def release(self, address: str) -> None:
        self.open -= 1
        self.by_address[address] -= 1
        if not self.by_address[address]:
            del self.by_address[address]


class _GuardedHandler(RequestHandler):
    """aiohttp's connection handler, admitted by the guard, its heads bounded in time and size."""

    __slots__ = ("_guard", "_address", "_refused", "_head_bytes", "_head_timer", "_busy", "_idle_timer", "_ahead_bytes")

    def __init__(self, manager, guard: ConnectionGuard, **kwargs):
        super().__init__(manager, **kwargs)
        self._guard, self._address, self._refused = guard, "", False
        self._head_bytes, self._busy = 0, False
        self._head_timer: asyncio.TimerHandle | None = None
        self._idle_timer: asyncio.TimerHandle | None = None
        self._ahead_bytes = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        peer = transport.get_extra_info("peername")
        self._address = str(peer[0]) if isinstance(peer, (tuple, list)) and peer else ""
        reason = self._guard.admit(self._address)
        if reason is not None:
            self._refused = True
            self._guard.on_refused(reason)
            # a socket's transport writes; uvloop's are not registered as asyncio.WriteTransport (no isinstance)
            cast(asyncio.WriteTransport, transport).write(_BUSY)
            transport.close()
            return
        super().connection_made(transport)
        self._idle_timer = self._loop.call_later(self._guard.limits.keepalive_timeout, self._idle_expired)

    def connection_lost(self, exc: BaseException | None) -> None:
        if self._refused:
            return
        self._refused = True  # released once
        self._guard.release(self._address)
        self._stop_head_timer()
        self._stop_idle_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self._busy or self.transport is None:
            self._ahead_bytes += len(data)
            super().data_received(data)
            if self._busy and (
                len(self._messages) > self._guard.limits.max_pipelined or self._ahead_bytes > self._guard.max_ahead
            ):
                self._refuse("pipelined")
            return
        first = not self._head_bytes
        if first and data:
            self._stop_idle_timer()  # a head began: the head timeout bounds it now
        self._head_bytes += len(data)
        super().data_received(data)
        if self._messages:  # the head is complete (a body may follow)
            self._busy, self._head_bytes, self._ahead_bytes = True, 0, 0
            self._stop_head_timer()
        elif self._head_bytes > self._guard.limits.max_head:
            self._refuse("head_too_large")
        elif first and data:
            self._head_timer = self._loop.call_later(self._guard.limits.head_timeout, self._head_expired)

    async def _handle_request(self, request, start_time, request_handler):
        try:
            return await super()._handle_request(request, start_time, request_handler)
        finally:
            self._busy = bool(self._messages)  # a pipelined request already parsed is handled next
            if not self._busy:
                self._ahead_bytes = 0

    def _head_expired(self) -> None:
        self._head_timer = None
        if not self._busy and self._head_bytes and self.transport is not None:
            self._refuse("head_timeout")

    def _idle_expired(self) -> None:
        self._idle_timer = None
        if not self._busy and not self._head_bytes and self.transport is not None:
            self._refuse("idle_timeout")

    def _stop_idle_timer(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None

    def _process_keepalive(self) -> None:
        was_open = self.transport is not None
        super()._process_keepalive()
        if was_open and self.transport is None:
            self._guard.on_refused("idle_timeout")

    def _refuse(self, reason: str) -> None:
        self._stop_head_timer()
        self._guard.on_refused(reason)
        self.force_close()

    def _stop_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None


class GuardedSite(web.TCPSite):
    """A TCP site whose connections go through `guard`; the runner's keepalive_timeout is the idle limit."""

    def __init__(self, runner: web.BaseRunner, host: str, port: int, guard: ConnectionGuard):
        super().__init__(runner, host, port)
        self._guard = guard

    async def start(self) -> None:
        await web.BaseSite.start(self)
        server, guard = self._runner.server, self._guard
        assert server is not None

        def handler() -> _GuardedHandler:
            return _GuardedHandler(server, guard, loop=server._loop, **server._kwargs)

        self._server = await asyncio.get_running_loop().create_server(
            handler,
            self._host,
            self._port,
            backlog=self._backlog,
            reuse_address=self._reuse_address,
            reuse_port=self._reuse_port,
        )
        self._bound_port = self._server.sockets[0].getsockname()[1] if self._server.sockets else self._port


def check_aiohttp() -> None:
    """Raise RuntimeError when this aiohttp lacks the internals the guard reads (see the module's docstring)."""
    import aiohttp
    from aiohttp.web_server import Server

    missing = [name for name in ("_messages",) if name not in getattr(RequestHandler, "__slots__", ())]
    missing += [
        name
        for name in ("_handle_request", "_process_keepalive", "force_close")
        if not callable(getattr(RequestHandler, name, None))
    ]
    source = Server.__init__.__code__.co_names
    missing += [f"Server.{name}" for name in ("_loop", "_kwargs") if name not in source]
    if missing:
        raise RuntimeError(
            f"aiohttp {aiohttp.__version__} has no {', '.join(missing)}: the front door's connection "
            f"limits cannot work with it; install an aiohttp release from 3.9 to 3.14"
        )


def fit_open_files(limits: Limits, open_files: int) -> Limits:
    """`limits` with at most as many client connections as `open_files` allows: two sockets each (the client's
    and its upstream's) and SPARE_FILES for the rest. Past it, accept() would fail for everyone at once (EMFILE)
    instead of the flooder getting a 503."""
    import dataclasses

    most = max(1, (open_files - SPARE_FILES) // 2)
    if limits.max_connections <= most:
        return limits
    return dataclasses.replace(
        limits, max_connections=most, max_client_connections=min(limits.max_client_connections, most)
    )
