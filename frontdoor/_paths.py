"""Which request paths the front door forwards: normalized before routing, then matched against an allowlist.

An engine's server answers more than its API (vLLM's own /metrics, SGLang's
admin endpoints), and engines read a path decoded (`%2e%2e` is `..`) and with
dot segments resolved, so `/v1/../metrics` or `/%6detrics` reach what `/metrics`
reaches. The front door routes on the path as the engine will read it: decoded,
repeated slashes as one; a dot segment, a backslash or a NUL in it (no API path
has one) is refused outright.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

__all__ = ["DEFAULT_ALLOWED", "normalized", "allowed", "parse_allowed"]

DEFAULT_ALLOWED = ("/v1/*", "/health", "/version")
_SLASHES = re.compile(r"/{2,}")


def normalized(path: str) -> tuple[str, str] | None:
    """(the path to route on, the path to forward) from a request's path as sent (no query), or None when it
    must be refused. The forwarded path is the one sent, repeated slashes as one, still encoded."""
    sent = _SLASHES.sub("/", path) if "//" in path else path
    routed = unquote(sent, errors="surrogateescape") if "%" in sent else sent
    if "\\" in routed or "\x00" in routed:
        return None
    if "." in routed and any(part in (".", "..") for part in routed.split("/")):
        return None
    return _SLASHES.sub("/", routed), sent


def allowed(path: str, patterns: tuple[str, ...]) -> bool:
    """Whether `path` (normalized) matches one pattern: `/v1/*` every path under /v1/, else the path itself."""
    for pattern in patterns:
        if pattern.endswith("/*") and path.startswith(pattern[:-1]) or path == pattern:
            return True
    return False


def parse_allowed(texts: list[str]) -> tuple[str, ...]:
    """Patterns from --allow-path: `/PATH` or `/PREFIX/*`; ValueError names the first bad one."""
    for text in texts:
        if (
            not text.startswith("/")
            or "*" in text[:-1]
            or (text.endswith("*") and not text.endswith("/*"))
            or normalized(text.rstrip("*")) is None
        ):
            raise ValueError(f"{text!r} is not /PATH or /PREFIX/*, e.g. /v1/* or /health")
    return tuple(dict.fromkeys(texts))
