"""One bounded GET: the body of a URL whole, or an error, never a cut body parsed as if complete."""

from __future__ import annotations

import http.client
import time
import urllib.request

__all__ = ["TooLarge", "get_capped", "one_line"]


class TooLarge(ValueError):
    """The body is over the limit; nothing of it is returned."""


def get_capped(url: str, timeout: float, limit: int) -> bytes:
    """The body at `url`, whole, within `timeout` seconds in all, read up to `limit` bytes plus one.

    A longer body raises TooLarge (a ValueError), so an endpoint streaming without end cannot exhaust memory; a
    body that trickles past the deadline raises TimeoutError (urllib's timeout is per read, so a byte a second
    would hold the caller for ever); a body that ends under its Content-Length raises IncompleteRead (urllib
    returns the short body). Other network failures are urllib's (OSError, HTTPException)."""
    deadline = time.monotonic() + timeout
    pieces, size = [], 0
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        while size <= limit:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no whole body within {timeout:g}s ({size} bytes read)")
            _read_timeout(resp, left)
            piece = resp.read1(min(65536, limit + 1 - size))
            if not piece:
                break
            pieces.append(piece)
            size += len(piece)
        if size <= limit and resp.length:  # http.client counts down what Content-Length still promises
            raise http.client.IncompleteRead(b"".join(pieces), resp.length)
    if size > limit:
        raise TooLarge(f"body is over {limit} bytes")
    return b"".join(pieces)


def _read_timeout(resp, seconds: float) -> None:
    """Bounds the next read by what is left of the deadline (the socket under urllib's response)."""
    sock = getattr(getattr(resp.fp, "raw", None), "_sock", None)
    if sock is not None:
        sock.settimeout(max(0.001, seconds))


def one_line(what: object) -> str:
    """`what` as text for one log line: quoted with escapes when it holds a line break or a control character,
    as a server that does not speak HTTP sends them."""
    text = str(what)
    return text if text.isprintable() else repr(text)
