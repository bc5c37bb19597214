"""One bounded GET: the body of a URL whole, or an error, never a cut body parsed as if complete."""

from __future__ import annotations

import urllib.request

__all__ = ["TooLarge", "get_capped", "one_line"]


class TooLarge(ValueError):
    """The body is over the limit; nothing of it is returned."""


def get_capped(url: str, timeout: float, limit: int) -> bytes:
    """The body at `url`, read up to `limit` bytes plus one: a longer body raises TooLarge (a ValueError), so an
    endpoint streaming without end cannot exhaust memory. Network failures are urllib's (OSError, HTTPException)."""
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        body = resp.read(limit + 1)
    if len(body) > limit:
        raise TooLarge(f"body is over {limit} bytes")
    return body


def one_line(what: object) -> str:
    """`what` as text for one log line: quoted with escapes when it holds a line break or a control character,
    as a server that does not speak HTTP sends them."""
    text = str(what)
    return text if text.isprintable() else repr(text)
