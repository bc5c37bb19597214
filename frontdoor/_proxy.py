"""The front door's HTTP side: an OpenAI-compatible reverse proxy that meters what users feel.

    POST /v1/chat/completions, /v1/completions   proxied and metered, streamed or not
    GET  /v1/models                              with several upstreams: the models of them all
    a path --allow-path names                    proxied untouched (default /v1/*, /health, /version)
    anything else                                404, never forwarded
    GET  /metrics on the admin listener          the front door's own series (--metrics-listen)

Paths are routed as the engine will read them (decoded, `//` as `/`; a dot
segment is refused, _paths.py). Client connections are bounded (_guard.py).

Bytes go to the client as they arrive; a copy of each SSE event is parsed for
metering, never re-serialized. The client going away cancels the handler
(`handler_cancellation`), which closes the upstream connection at once, so the
engine aborts the request. The connect has the connect timeout, the wait for the
upstream's headers and each silence between two reads of its body the idle
timeout, a whole stream none.

The per-chunk path is the budget (tests/bench_frontdoor.py): the metered paths
go through the front door's own upstream client (_upstream.py), which hands
the pieces of the answer to `_Sink` in the socket's read callback; it writes
the same bytes to the client's socket and keeps a copy, split and parsed
(orjson) in batches.
No task wakes per chunk, and there is no per-chunk timer, log line or series
update (the idle watch wakes once per quarter of the idle timeout, series are
updated once per request). Other paths go through aiohttp's client untouched.
With --otlp-endpoint, the same per-request update records the OpenTelemetry GenAI
instruments too (_otel.py); the SDK exports them from its own thread.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import socket
import struct
import time
import uuid
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import aiohttp
from aiohttp import web
from aiohttp.http import HttpVersion11
from multidict import CIMultiDict
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from inferwatch.errors import InferwatchError
from inferwatch.frontdoor._accesslog import AccessLog, access_record
from inferwatch.frontdoor._config import FrontdoorConfig, Upstream
from inferwatch.frontdoor._goodput import default_goodput
from inferwatch.frontdoor._guard import SPARE_FILES, ConnectionGuard, GuardedSite, check_aiohttp, fit_open_files
from inferwatch.frontdoor._idle import IdleWatch
from inferwatch.frontdoor._labels import Callers, Models
from inferwatch.frontdoor._meter import Facts, RequestInfo, observe_event, observe_whole, request_info, token_counts
from inferwatch.frontdoor._metrics import FrontdoorMetrics
from inferwatch.frontdoor._otel import OtelView
from inferwatch.frontdoor._outcome import classify
from inferwatch.frontdoor._paths import allowed, normalized
from inferwatch.frontdoor._serve import HTTP_LOG
from inferwatch.frontdoor._sse import SSESplitter
from inferwatch.frontdoor._upstream import Connection, Silent, Unreachable, UpstreamPool

__all__ = ["Frontdoor", "make_app", "admin_app", "start", "serve", "FRONTDOOR", "METERED_PATHS"]

log = logging.getLogger("inferwatch.frontdoor")
# app[FRONTDOOR]: the running front door, for tests and tools
FRONTDOOR: web.AppKey[Frontdoor] = web.AppKey("frontdoor")
# the metered paths, and the gen_ai.operation.name (OpenTelemetry GenAI conventions) of each
METERED_PATHS = {"/v1/chat/completions": "chat", "/v1/completions": "text_completion"}
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
_NOT_FORWARDED = HOP_BY_HOP | {"host", "content-length", "expect"}
_NOT_RETURNED = HOP_BY_HOP | {"content-length"}
_DECODED = frozenset({"gzip", "deflate", "br", "zstd"})  # request codings aiohttp's server decodes as it reads
_SKIP_AUTO = ("User-Agent", "Accept", "Accept-Encoding", "Content-Type")  # forward the client's, or none
_UPSTREAM_DOWN = (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, aiohttp.ClientResponseError)
MAX_METERED_BODY = 64 * 1024 * 1024  # a whole answer larger than this passes through unjudged (an error)
_CLIENT_BEHIND = 256 * 1024  # bytes waiting for the client before reading the upstream pauses
_METER_BATCH = 4 * 1024  # bytes of a stream held for metering at most (per stream, in memory)
_MAX_MODELS_LIST = 4 * 1024 * 1024  # bytes of an upstream's /v1/models read at most
UPSTREAM_KEY_ENV = "INFERWATCH_UPSTREAM_API_KEY"  # the key the front door reads the upstreams' /v1/models with


@dataclass
class _Exchange:
    """One request's bookkeeping; `status` is the upstream's, `code` what the client got."""

    start: float
    operation: str = "chat"  # gen_ai.operation.name of a metered path
    status: int | None = None
    code: int = 499
    ended: str = "complete"
    stream: bool = False
    facts: Facts = field(default_factory=Facts)


def _error(status: int, message: str, kind: str = "invalid_request_error") -> web.Response:
    """An error in OpenAI's shape, so clients show the message."""
    return web.json_response(
        {"error": {"message": message, "type": kind, "param": None, "code": status}}, status=status
    )


def _too_large(limit: int) -> web.Response:
    return _error(413, f"the request body is larger than the front door's limit of {limit} bytes (--max-body)")


def _connection_named(headers) -> set[str]:
    """The headers every `Connection` field names (a message may have several): hop-by-hop, never relayed."""
    return {n.strip().lower() for field in headers.getall("Connection", ()) for n in field.split(",")}


def _not_utf8(request: web.Request) -> bool:
    """Whether a header's value is not UTF-8: forwarded it would reach the engine changed (aiohttp's client
    blanks it), so it is refused instead."""
    for _, value in request.raw_headers:
        if not value.isascii():
            try:
                value.decode("utf-8")
            except UnicodeDecodeError:
                return True
    return False


def _forward_headers(headers, metered: bool) -> CIMultiDict:
    named = _connection_named(headers)
    dropped = _NOT_FORWARDED | named | ({"accept-encoding"} if metered else set())
    if headers.get("Content-Encoding", "").strip().lower() in _DECODED:  # the body read is already decoded
        dropped = dropped | {"content-encoding"}
    return CIMultiDict((k, v) for k, v in headers.items() if k.lower() not in dropped)


def _target(request: web.Request) -> str:
    """The request's path and query as the client wrote them; an absolute-form target (`POST http://host/v1/...`,
    from a client told to use the front door as its HTTP proxy) loses its scheme and host, which name the front
    door or anything else, never the upstream (uvicorn's h11 reads such a target as a path, and 404s)."""
    raw = request.raw_path
    if raw.startswith("/"):
        return raw
    parts = urlsplit(raw)
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def _returned_headers(headers, base: str) -> CIMultiDict:
    """The upstream's headers for the client; a `Location` into the upstream (`base`, its URL) is made relative,
    so a redirect (FastAPI's from `/v1/chat/completions/` to `/v1/chat/completions`) comes back through the front
    door instead of sending the client around it, to an address it may not reach."""
    named = _connection_named(headers)
    out = CIMultiDict((k, v) for k, v in headers.items() if k.lower() not in _NOT_RETURNED | named)
    location = out.get("Location", "")
    if location.startswith(base) and location[len(base) : len(base) + 1] in ("", "/", "?"):
        out["Location"] = "/" + location[len(base) :].lstrip("/")
    return out


_CHUNK_HEADS: dict[int, bytes] = {}  # chunk size -> its size line, for the sizes met (at most 4,096 kept)


def _framed(piece: bytes) -> bytes:
    """One piece as an HTTP/1.1 chunk. A dict lookup of the size line costs less than formatting it, on a cold
    CPU most of all (the 1-stream case of the benchmark)."""
    head = _CHUNK_HEADS.get(len(piece))
    if head is None:
        head = b"%x\r\n" % len(piece)
        if len(_CHUNK_HEADS) < 4096:
            _CHUNK_HEADS[len(piece)] = head
    return head + piece + b"\r\n"


class _Sink:
    """The pieces of a metered answer, in the upstream's read callback: those of one read are written to the
    client's socket together, as they came (in the chunked framing when the client's response has one). A copy
    of each is kept with the time it came and metered in batches (`meter`: every _METER_BATCH bytes, and at the
    end), since on an idle machine the code that runs right after a wakeup runs many times slower than the same
    code run again at once. When the client falls behind, reading the upstream pauses; when it is gone, the
    upstream request is aborted."""

    __slots__ = (
        "client",
        "conn",
        "facts",
        "sse",
        "whole",
        "chunked",
        "splitter",
        "copy",
        "gone",
        "pieces",
        "held",
        "held_bytes",
    )

    def __init__(
        self, client: asyncio.Transport, conn: Connection, facts: Facts, sse: bool, whole: bool, chunked: bool
    ):
        self.client, self.conn, self.facts, self.sse, self.whole = client, conn, facts, sse, whole
        self.chunked, self.splitter, self.copy, self.gone = chunked, SSESplitter(), bytearray(), False
        self.pieces = conn.pieces  # what the parser appended during this read
        self.held: list[tuple[float, bytes]] = []  # (when it came, the bytes of one read), not yet metered
        self.held_bytes = 0

    def flush(self) -> None:
        pieces, client = self.pieces, self.client
        if not pieces:
            return
        now = time.monotonic()
        if client.is_closing():
            self.gone = True
            self.conn.abort()
            pieces.clear()
            return
        read = pieces[0] if len(pieces) == 1 else b"".join(pieces)  # the bytes of this read
        if self.chunked:  # framed as the upstream's pieces came
            client.write(_framed(read) if len(pieces) == 1 else b"".join(map(_framed, pieces)))
        else:
            client.write(read)
        pieces.clear()
        if self.sse:
            self.held.append((now, read))
            self.held_bytes += len(read)
            if self.held_bytes > _METER_BATCH:
                self.meter()
        elif self.whole and len(self.copy) <= MAX_METERED_BODY:
            self.copy += read
        if client.get_write_buffer_size() > _CLIENT_BEHIND:
            self.conn.pause()

    def meter(self) -> None:
        """Fold what is held into the facts, each read at the time it came."""
        held, self.held, self.held_bytes = self.held, [], 0
        if not self.sse:
            return
        facts, feed = self.facts, self.splitter.feed
        try:
            for now, read in held:
                for payload in feed(read):
                    observe_event(facts, payload, now)
        except Exception:  # noqa: BLE001 - a metering bug must not cut the answer; judge it unknown, say so
            log.exception("metering failed; the rest of this answer passes unmetered")
            self.sse = False
            facts.error = "metering failed"


class Frontdoor:
    """Routes, forwards and meters; one per listening front door."""

    def __init__(self, config: FrontdoorConfig):
        self.config = config
        self.metrics = FrontdoorMetrics(OtelView(config.otlp) if config.otlp else None)
        self.goodput = config.goodput or default_goodput()
        self.callers = Callers(config.caller_header, config.caller_salt, config.max_callers, config.callers_file)
        self.models = Models(tuple(m for m, _ in config.routes) + config.models, config.max_models)
        self.guard = ConnectionGuard(
            config.limits, lambda reason: self.metrics.refused.labels(reason).inc(), config.max_body
        )
        self.admin: web.AppRunner | None = None  # the admin listener's runner, once started
        self._models_task: asyncio.Task | None = None
        self.session: aiohttp.ClientSession | None = None
        self.pool = UpstreamPool(config.connect_timeout)
        self.access = AccessLog(config.access_log) if config.access_log else None
        self.timeout = aiohttp.ClientTimeout(total=None, connect=None, sock_connect=config.connect_timeout)

    def _client(self) -> aiohttp.ClientSession:
        """The upstream session: made by `open`, which the app's startup runs before any request."""
        if self.session is None:
            raise RuntimeError("the front door is not open")
        return self.session

    async def open(self) -> None:
        connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=60, enable_cleanup_closed=True)
        self.session = aiohttp.ClientSession(
            connector=connector,
            auto_decompress=False,
            timeout=self.timeout,
            skip_auto_headers=_SKIP_AUTO,
            cookie_jar=aiohttp.DummyCookieJar(),
        )
        if self.config.models_refresh > 0:
            answered = await self.refresh_models()
            self._models_task = asyncio.create_task(self._keep_models(answered))

    async def close(self) -> None:
        if self._models_task:
            self._models_task.cancel()
        if self.admin:
            await self.admin.cleanup()
        self.pool.close()
        if self.session:
            await self.session.close()
        if self.access:
            self.access.close()
        if self.metrics.otel is not None:  # the last export: what came since the one before (in a thread: it
            await asyncio.to_thread(self.metrics.otel.shutdown)  # waits on the collector, at most its timeout)

    # --- the models upstreams serve: the only model label values besides the routes' ---------------------------

    async def refresh_models(self) -> bool:
        """Read each upstream's /v1/models into the known models; whether every upstream answered."""
        key = os.environ.get(UPSTREAM_KEY_ENV)
        headers = {"Authorization": f"Bearer {key}"} if key else {}

        async def one(upstream: Upstream) -> bool:
            try:
                async with (
                    asyncio.timeout(min(self.config.idle_timeout or 10.0, 10.0)),
                    self._client().get(upstream.url + "/v1/models", headers=headers) as resp,
                ):
                    body = bytearray()
                    while len(body) <= _MAX_MODELS_LIST and (chunk := await resp.content.readany()):
                        body += chunk
                    if resp.status != 200 or len(body) > _MAX_MODELS_LIST:
                        raise ValueError(f"status {resp.status}, {len(body)} bytes")
                    data = json.loads(body).get("data")
                    self.models.listed(upstream.name, [m.get("id") for m in data if isinstance(m, dict)])
                    return True
            except (aiohttp.ClientError, TimeoutError, ValueError, AttributeError, TypeError) as err:
                log.debug("upstream %s: /v1/models: %s", upstream.name, err)
                return False

        return all(await asyncio.gather(*(one(u) for u in self.config.upstreams)))

    async def _keep_models(self, ok: bool) -> None:
        """Every --models-refresh (every 5s at most while an upstream does not answer: an engine still loading).

        `ok` is whether the read at start answered: a door started before its engine (a sidecar beside a vLLM
        still loading) tries again in seconds, instead of counting every request as `other` until the next
        refresh (a minute by default; the demo's vLLM door did so for its first 100 s)."""
        while True:
            await asyncio.sleep(self.config.models_refresh if ok else min(5.0, self.config.models_refresh))
            try:
                ok = await self.refresh_models()
            except Exception:  # noqa: BLE001 - the known models stay as they were; say so and try again
                log.exception("reading the upstreams' /v1/models failed")
                ok = False

    # --- endpoints ---------------------------------------------------------------------------------------

    async def own_metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(self.metrics.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def route(self, request: web.Request) -> web.StreamResponse:
        """Every request on the public listener: routed on its normalized path, refused unless allowed."""
        raw = _target(request)
        path, _, query = raw.partition("?")
        routes = normalized(path)
        if routes is None:
            self.metrics.refused.labels("bad_path").inc()
            return _error(400, "the path has a dot segment, a backslash or a NUL; the front door forwards none")
        if _not_utf8(request):
            self.metrics.refused.labels("bad_header").inc()
            return _error(400, "a header's value is not UTF-8; the front door forwards headers unchanged or not at all")
        routed, sent = routes
        target = sent + ("?" + query if query else "")
        if request.method == "POST" and routed in METERED_PATHS:
            return await self._handle(request, True, target, METERED_PATHS[routed])
        if not allowed(routed, self.config.allow_paths):
            self.metrics.refused.labels("path").inc()
            return _error(404, "this path is not forwarded by the front door (--allow-path)")
        if routed == "/v1/models" and request.method == "GET" and len(self.config.upstreams) > 1:
            return await self.list_models(request)
        return await self._handle(request, False, target)

    async def list_models(self, request: web.Request) -> web.Response:
        """With several upstreams, /v1/models lists the models of them all (each upstream's own entries)."""

        async def listed(upstream: Upstream) -> list:
            try:
                async with (
                    asyncio.timeout(self.config.idle_timeout or None),
                    self._client().get(
                        upstream.url + "/v1/models", headers=_forward_headers(request.headers, True)
                    ) as resp,
                ):
                    doc = await resp.json(content_type=None) if resp.status == 200 else {}
                    return [m for m in doc.get("data") or () if isinstance(m, dict)]
            except (aiohttp.ClientError, TimeoutError, ValueError, AttributeError):
                log.warning("upstream %s: /v1/models failed", upstream.name)
                return []

        found = await asyncio.gather(*(listed(u) for u in self.config.upstreams))
        data = list({m.get("id"): m for models in found for m in models}.values())
        if not data and not any(found):
            return _error(502, "no upstream listed its models", "upstream_error")
        return web.json_response({"object": "list", "data": data})

    # --- one request ---------------------------------------------------------------------------------------

    async def _handle(
        self, request: web.Request, metered: bool, target: str, operation: str = "chat"
    ) -> web.StreamResponse:
        ex = _Exchange(time.monotonic(), operation)
        cfg = self.config
        name = self.callers.name(request.headers)
        caller = self.callers.label(name)
        try:
            body = await self._body(request)
        except asyncio.CancelledError:  # the client left while sending its request: counted, unrouted
            ex.ended = "cancelled"
            self._done(request, ex, RequestInfo(), (self.models(None), caller, "none"), metered, name)
            raise
        refused = body if isinstance(body, web.Response) else None
        payload = body if isinstance(body, bytes) else b""
        info = request_info(payload) if payload else RequestInfo()
        upstream = cfg.upstream_for(info.model) or (None if info.model else (cfg.upstreams or (None,))[0])
        labels = (self.models(info.model), caller, upstream.name if upstream else "none")
        ex.stream = info.stream
        gauge = self.metrics.in_flight.labels(*labels) if metered else None
        if gauge:
            gauge.inc()
        try:
            if refused is not None:
                return self._reply(ex, refused, close=True)
            if upstream is None:
                return self._reply(
                    ex,
                    _error(
                        404,
                        f"model {info.model!r} is not served here; this front door "
                        f"routes {', '.join(m for m, _ in cfg.routes)}",
                    ),
                )
            return await self._forward(request, upstream, payload, ex, metered, target)
        except asyncio.CancelledError:
            ex.ended = "cancelled"
            raise
        finally:
            if gauge:
                gauge.dec()
            self._done(request, ex, info, labels, metered, name)

    async def _body(self, request: web.Request) -> bytes | web.Response:
        """The whole request body, or the error that refuses it, with reading stopped there: over the limit
        (413), a body that cannot be decoded (400: a bad gzip), or a client silent
        longer than the idle timeout mid-body (408: a body shorter than its Content-Length, a slowloris)."""
        limit, idle = self.config.max_body, self.config.idle_timeout or None
        if request.content_length is not None and request.content_length > limit:
            return _too_large(limit)
        parts: list[bytes] = []
        size, read = 0, request.content.readany
        try:
            while True:
                async with asyncio.timeout(idle):
                    chunk = await read()
                if not chunk:
                    return b"".join(parts)
                size += len(chunk)
                if size > limit:
                    return _too_large(limit)
                parts.append(chunk)
        except TimeoutError:
            return _error(408, f"the request body stopped coming for {idle:g}s (--idle-timeout)")
        except web.RequestPayloadError as err:
            request.content.feed_eof()  # nothing more to read: aiohttp's lingering read would raise it again
            why = (str(err).strip().splitlines() or [type(err).__name__])[-1].strip()  # aiohttp's last line
            return _error(400, f"the request body cannot be read: {why}")

    @staticmethod
    def _reply(ex: _Exchange, response: web.Response, close: bool = False) -> web.Response:
        ex.status = ex.code = response.status
        if close:
            response.force_close()  # do not read the rest of an oversized body
        return response

    async def _forward(
        self, request: web.Request, upstream: Upstream, body: bytes, ex: _Exchange, metered: bool, target: str
    ) -> web.StreamResponse:
        if metered:
            return await self._forward_metered(request, upstream, body, ex, target)
        try:
            async with asyncio.timeout(self.config.idle_timeout or None):  # until the upstream's headers
                resp = await self._client().request(
                    request.method,
                    upstream.url + target,
                    headers=_forward_headers(request.headers, False),
                    data=body if body or request.method not in ("GET", "HEAD", "OPTIONS") else None,
                    allow_redirects=False,
                )
        except TimeoutError:
            return self._timed_out(ex, upstream)
        except aiohttp.ClientError as err:
            return self._unreachable(ex, upstream, type(err).__name__)
        complete = False
        try:
            out = await self._relay(request, resp, ex, upstream.url)
            complete = ex.ended == "complete"
            return out
        finally:
            if complete:
                resp.release()  # the connection goes back to the pool
            else:
                resp.close()  # the engine sees the client leave and aborts the request

    def _timed_out(self, ex: _Exchange, upstream: Upstream) -> web.Response:
        ex.ended = "timeout"
        return self._reply(ex, _error(504, f"upstream {upstream.name} did not answer in time", "timeout"))

    def _unreachable(self, ex: _Exchange, upstream: Upstream, why: str) -> web.Response:
        ex.ended = "unreachable"
        log.warning("upstream %s: %s", upstream.name, why)
        return self._reply(ex, _error(502, f"upstream {upstream.name} is unreachable", "upstream_error"))

    async def _relay(
        self, request: web.Request, resp: aiohttp.ClientResponse, ex: _Exchange, base: str
    ) -> web.StreamResponse:
        """An unmetered answer, through aiohttp's client: read, write, until the end."""
        ex.status = resp.status
        out = web.StreamResponse(status=resp.status, reason=resp.reason, headers=_returned_headers(resp.headers, base))
        if resp.content_length is not None and "chunked" not in resp.headers.get("Transfer-Encoding", ""):
            out.content_length = resp.content_length
        try:
            await out.prepare(request)
        except ConnectionError:  # the client left before the headers went out
            ex.ended = "cancelled"
            return out
        ex.code = resp.status
        content, taken = resp.content, 0  # taken: bytes the relay has read
        read, write = content.readany, out.write
        # bytes not yet taken (a slow client holds the relay up) are not the upstream's silence: aiohttp stops
        # its socket reads while reading is paused; once the upstream is done, a slow client is not its silence
        limit = self.config.idle_timeout
        watch = IdleWatch(
            limit,
            lambda: (content.is_eof(), content.total_bytes, content.total_bytes != taken),
            lambda: content.set_exception(TimeoutError(f"upstream silent for {limit:g}s")),
        )
        try:
            while True:
                try:
                    chunk = await read()
                except TimeoutError:
                    ex.ended = "timeout"
                    break
                except _UPSTREAM_DOWN:
                    ex.ended = "broken"
                    break
                if not chunk:
                    break
                taken += len(chunk)
                try:
                    await write(chunk)
                except ConnectionError:  # the client went away between two chunks
                    ex.ended = "cancelled"
                    return out
        finally:
            watch.cancel()
        return await self._end_response(request, out, ex)

    async def _forward_metered(
        self, request: web.Request, upstream: Upstream, body: bytes, ex: _Exchange, target: str
    ) -> web.StreamResponse:
        headers = list(_forward_headers(request.headers, True).items())
        try:
            conn = await self.pool.send(upstream.url, request.method, target, headers, body, self.config.idle_timeout)
        except Silent:
            return self._timed_out(ex, upstream)
        except Unreachable as err:
            return self._unreachable(ex, upstream, str(err))
        try:
            return await self._relay_metered(request, conn, ex, upstream.url)
        finally:
            conn.finish()  # a complete answer leaves the connection kept; else the engine aborts

    async def _relay_metered(
        self, request: web.Request, conn: Connection, ex: _Exchange, base: str
    ) -> web.StreamResponse:
        """A metered answer: `_Sink` writes and meters each piece from the upstream's read callback; this task
        only waits for the end, and for a slow client when one holds up the stream."""
        ex.status = status = conn.status
        upstream_headers = CIMultiDict(conn.headers)
        out = web.StreamResponse(
            status=status, reason=conn.reason or None, headers=_returned_headers(upstream_headers, base)
        )
        length = upstream_headers.get("Content-Length")
        if length is not None and length.isdigit() and "Transfer-Encoding" not in upstream_headers:
            out.content_length = int(length)
        elif request.version >= HttpVersion11 and status not in (204, 304):
            out.enable_chunked_encoding()  # as aiohttp would; the sink frames the chunks itself
        try:
            await out.prepare(request)
            await out.write(b"")  # the headers go out now; the body bypasses aiohttp's writer
        except ConnectionError:  # the client left before the headers went out
            ex.ended = "cancelled"
            return out
        ex.code = status
        client = request.transport
        if client is None:
            ex.ended = "cancelled"
            return out
        kind = upstream_headers.get("Content-Type", "").partition(";")[0].strip().lower()
        sse = status == 200 and kind == "text/event-stream"
        whole = status == 200 and not sse
        ex.stream = sse or (ex.stream and not whole)  # judged by what came back, not by what was asked
        sink = _Sink(client, conn, ex.facts, sse, whole, out.chunked)
        try:
            conn.start(sink.flush)
            while (ended := await conn.wait()) == "paused":
                try:
                    await request.writer.drain()  # until the client's socket took most of what waits for it
                except ConnectionError:
                    ex.ended = "cancelled"
                    return out
                conn.resume()
        finally:
            sink.meter()  # what is held, however the answer ended
        if sink.gone or ended == "aborted":
            ex.ended = "cancelled"
            return out
        ex.ended = ended if ended in ("complete", "timeout") else "broken"
        if ex.ended == "complete":
            if whole and len(sink.copy) <= MAX_METERED_BODY:
                observe_whole(ex.facts, sink.copy)
            elif whole or sink.splitter.overflow:
                ex.facts.error = "too large to meter"
        elif not out.chunked and out.content_length is None and (sock := client.get_extra_info("socket")):
            # a body that ends with the connection (an HTTP/1.0 client): a reset is the only sign it was cut
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        return await self._end_response(request, out, ex)

    @staticmethod
    async def _end_response(request: web.Request, out: web.StreamResponse, ex: _Exchange) -> web.StreamResponse:
        if ex.ended != "complete":  # cut the client's response too, so it cannot look whole
            if request.transport is not None:
                request.transport.close()
            return out
        try:
            await out.write_eof()
        except ConnectionError:  # the client left with the last bytes (after [DONE]: still whole)
            ex.ended = "cancelled"
        return out

    def _done(self, request: web.Request, ex: _Exchange, info: RequestInfo, labels, metered: bool, name: str) -> None:
        """Count and log one request; never raises (it runs in `finally`). A caller the upstream accepted (2xx)
        is known from now on, this request included."""
        try:
            if ex.status is not None and 200 <= ex.status < 300:
                self.callers.accept(name)
                labels = (labels[0], self.callers.label(name), labels[2])
            f = ex.facts
            outcome = classify(ex.status, ex.ended, f, ex.stream, info.tools) if metered else None
            prompt, output, reasoning, visible = token_counts(f)
            times = {"duration": time.monotonic() - ex.start}
            if f.first_chunk is not None:
                times["ttfc"] = f.first_chunk - ex.start
            if f.first_visible is not None:
                times["ttft"] = f.first_visible - ex.start
                if visible and visible >= 2 and f.last_event is not None:
                    # to the stream's last event, not the last visible read: tokens that all came in one read (a
                    # fast engine, a batching gateway) are a sample too, or the fast-enough SLO would drop them
                    times["tpot"] = (f.last_event - f.first_visible) / (visible - 1)
            if outcome is not None:  # metered
                self.metrics.record(
                    labels,
                    outcome,
                    ex.code,
                    times,
                    (prompt, output, reasoning),
                    self.goodput.judge(labels, outcome, ex.code, times),
                    ex.operation,
                )
            if self.access:
                self.access.write(
                    access_record(
                        request_id=request.headers.get("X-Request-Id") or uuid.uuid4().hex,
                        caller=name,
                        model=info.model,
                        upstream=labels[2],
                        method=request.method,
                        path=_target(request).partition("?")[0],
                        status=ex.code,
                        outcome=outcome,
                        stream=ex.stream,
                        times=times,
                        tokens=(prompt, output, reasoning),
                    )
                )
        except Exception:  # noqa: BLE001 - metering must never break the response; say so and go on
            log.exception("metering failed")


def make_app(config: FrontdoorConfig) -> web.Application:
    """The public application (every path goes through `Frontdoor.route`); its upstream session and its admin
    listener open and close with it."""
    door = Frontdoor(config)
    app = web.Application(client_max_size=config.max_body)
    app[FRONTDOOR] = door
    app.router.add_route("*", "/{tail:.*}", door.route)

    async def lifecycle(app):
        await door.open()
        yield
        await door.close()

    app.cleanup_ctx.append(lifecycle)
    return app


def admin_app(door: Frontdoor) -> web.Application:
    """The admin listener's application: GET /metrics, nothing else."""
    app = web.Application()
    app.router.add_get("/metrics", door.own_metrics)
    return app


async def start(config: FrontdoorConfig, app: web.Application | None = None) -> web.AppRunner:
    """Bind the public listener (connections bounded by the guard) and the admin one (/metrics) in the running
    loop; the runner's `addresses` say where, `app[FRONTDOOR].admin.addresses` where the metrics are. OSError
    when a bind fails; its `listener` is (flag, address) of the listener that failed."""
    app = app or make_app(config)
    door = app[FRONTDOOR]
    runner = web.AppRunner(
        app,
        access_log=None,
        handler_cancellation=True,
        logger=HTTP_LOG,
        keepalive_timeout=config.limits.keepalive_timeout,
    )
    await runner.setup()
    try:
        listener = ("--listen", f"{config.host}:{config.port}")
        await GuardedSite(runner, config.host, config.port, door.guard).start()
        listener = ("--metrics-listen", f"{config.metrics_host}:{config.metrics_port}")
        door.admin = web.AppRunner(admin_app(door), access_log=None, logger=HTTP_LOG)
        await door.admin.setup()
        await web.TCPSite(door.admin, config.metrics_host, config.metrics_port).start()
    except BaseException as err:
        err.listener = listener  # type: ignore[attr-defined]  # a note for the caller (see _serve.py)
        await runner.cleanup()
        raise
    return runner


def serve(config: FrontdoorConfig) -> None:
    """Serve until SIGINT or SIGTERM; a failed bind or access log is one clear InferwatchError. --max-connections
    is lowered to what the open-files limit allows, with a warning."""
    from inferwatch.frontdoor._serve import raise_open_files_limit, serve_app

    try:
        check_aiohttp()
    except RuntimeError as err:
        raise InferwatchError(str(err)) from None
    files = raise_open_files_limit()
    fitted = fit_open_files(config.limits, files)
    if fitted != config.limits:
        log.warning(
            "--max-connections %d needs about %d open files (two per connection and %d spare), but the "
            "limit is %d (ulimit -n): serving at most %d connections, %d from one address; raise the "
            "limit to allow more",
            config.limits.max_connections,
            2 * config.limits.max_connections + SPARE_FILES,
            SPARE_FILES,
            files,
            fitted.max_connections,
            fitted.max_client_connections,
        )
        config = dataclasses.replace(config, limits=fitted)
    try:
        app = make_app(config)
    except OSError as err:
        raise InferwatchError(f"--access-log {config.access_log}: cannot open: {err.strerror or err}") from None
    upstreams = ([("", config.default)] if config.default else []) + list(config.routes)
    routes = ", ".join(f"{m}={u.url}" if m else u.url for m, u in upstreams).replace("%", "%%")
    metrics = f"{config.metrics_host}:{config.metrics_port}".replace("%", "%%")
    serve_app(
        app,
        config.host,
        config.port,
        "front door on %s:%d to " + routes + f", /metrics on {metrics}",
        handler_cancellation=True,
        starter=lambda: start(config, app),
    )
