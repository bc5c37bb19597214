"""Read one target's answer whole, or say why not, bounded in bytes and CPU.

`StreamReader.read(n)` returns what is buffered so far, not the body: a body
that arrives in pieces was served cut. Here the body is read until its end,
`Content-Length` is honoured, an early end is `truncated`, and reading stops at
the size limit (`too_large`). Compressed bodies are inflated here, never more
than the limit, so a gzip bomb costs a few milliseconds, not a core.
"""

from __future__ import annotations

import zlib

import aiohttp

from inferwatch.exporters._config import MAX_BODY_BYTES

__all__ = ["FetchError", "ERROR_KINDS", "MAX_BODY_BYTES", "read_body", "decode_text"]

# The bounded set of error kinds: a label value, so a target cannot make the series churn.
ERROR_KINDS = {
    "connect": "no connection, or it broke before an answer",
    "timeout": "no complete answer within --timeout, or not ready before the scrape's deadline",
    "http": "an HTTP status other than 200, or an unsupported Content-Encoding",
    "truncated": "the body ended before its Content-Length, its last chunk or its last newline",
    "too_large": f"the body (inflated) is over --max-body ({MAX_BODY_BYTES} bytes unless set)",
    "parse": "not UTF-8, not the Prometheus text format, or nothing in it Prometheus could read",
    "internal": "a bug in the exporter (logged with its traceback)",
}
_WBITS = {"gzip": zlib.MAX_WBITS | 16, "x-gzip": zlib.MAX_WBITS | 16, "deflate": zlib.MAX_WBITS}


class FetchError(Exception):
    """A target's answer that cannot be served; `kind` is one of ERROR_KINDS."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message


class _Inflater:
    """zlib with a ceiling on the output: never inflates more than `limit` bytes in all."""

    def __init__(self, encoding: str, limit: int):
        self.encoding = encoding
        self.limit = limit
        self.out = bytearray()
        self._z = zlib.decompressobj(_WBITS[encoding])
        self._started = False

    def feed(self, chunk: bytes) -> None:
        if not self._started and self.encoding == "deflate" and chunk and (chunk[0] & 0x0F) != 8:
            self._z = zlib.decompressobj(-zlib.MAX_WBITS)  # raw deflate, as some servers send it
        self._started = True
        try:
            data = self._z.decompress(chunk, self.limit - len(self.out) + 1)
        except zlib.error as err:
            raise FetchError("parse", f"corrupt {self.encoding} body: {err}") from None
        self.out += data
        if len(self.out) > self.limit or self._z.unconsumed_tail:
            raise FetchError("too_large", f"body inflates to over {self.limit} bytes (--max-body)")

    def finish(self) -> bytes:
        if not self._z.eof:
            raise FetchError("truncated", f"{self.encoding} stream ended early")
        return bytes(self.out)


async def read_body(resp: aiohttp.ClientResponse, limit: int = MAX_BODY_BYTES) -> bytes:
    """The whole body of `resp` (raw, auto_decompress off), inflated, or FetchError."""
    encoding = resp.headers.get("Content-Encoding", "identity").strip().lower() or "identity"
    if encoding != "identity" and encoding not in _WBITS:
        raise FetchError("http", f"unsupported Content-Encoding {encoding!r}")
    length = resp.content_length
    if encoding == "identity" and length is not None and length > limit:
        raise FetchError("too_large", f"Content-Length {length} is over {limit} bytes (--max-body)")
    inflater = _Inflater(encoding, limit) if encoding != "identity" else None
    # A body without Content-Length ends when the connection closes; aiohttp ends it the same way on a reset, so
    # watch the connection's own close: an error there (a TCP RST) means the body was cut, as the front door's
    # client reads it. The future is aiohttp's public `ResponseHandler.closed` (3.9+), made before the read.
    closed = _close_of(resp) if length is None else None
    raw = bytearray()
    received = 0
    try:
        while chunk := await resp.content.readany():
            received += len(chunk)
            if inflater is not None:
                inflater.feed(chunk)
                if received > limit:
                    raise FetchError("too_large", f"compressed body is over {limit} bytes (--max-body)")
            else:
                raw += chunk
                if len(raw) > limit:
                    raise FetchError("too_large", f"body is over {limit} bytes (--max-body)")
    except aiohttp.ClientPayloadError as err:
        raise FetchError("truncated", f"body ended early after {received} bytes: {err}") from None
    if length is not None and received < length:
        raise FetchError("truncated", f"body ended after {received} of {length} bytes")
    if closed is not None and closed.done() and not closed.cancelled() and closed.exception() is not None:
        raise FetchError(
            "truncated",
            f"connection reset after {received} bytes of a body without Content-Length: {closed.exception()}",
        )
    return inflater.finish() if inflater is not None else bytes(raw)


def _close_of(resp: aiohttp.ClientResponse):
    """The future aiohttp sets when the response's connection closes (an exception when it was not clean)."""
    connection = resp.connection
    protocol = getattr(connection, "protocol", None)
    return getattr(protocol, "closed", None)


def decode_text(body: bytes) -> str:
    """The body as text; the format ends every line with a newline, so a body without one was cut."""
    if body and not body.endswith(b"\n"):
        raise FetchError("truncated", "body does not end with a newline (cut inside its last line)")
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as err:
        raise FetchError("parse", f"not UTF-8 text: {err.reason} at byte {err.start}") from None
