"""Who is calling, as a bounded label: a trusted gateway's header, else a salted hash of the API key, else
`anonymous`; past `max` distinct values, `other`."""

from __future__ import annotations

import hashlib
import hmac

__all__ = ["caller_of", "LabelCap", "ANONYMOUS", "OTHER"]

ANONYMOUS, OTHER = "anonymous", "other"


def caller_of(headers, header: str | None, salt: str) -> str:
    """The caller of a request; `header` is honoured only when configured (clients could set it themselves)."""
    if header:
        name = headers.get(header, "").strip()
        if name:
            return name[:64]
    auth = headers.get("Authorization", "")
    scheme, _, key = auth.partition(" ")
    key = key.strip() if scheme.lower() == "bearer" else auth.strip()
    if not key:
        return ANONYMOUS
    return "key-" + hmac.new(salt.encode(), key.encode(), hashlib.sha256).hexdigest()[:12]


class LabelCap:
    """The first `limit` distinct values keep their name, later ones become `other` (the series stay bounded)."""

    __slots__ = ("limit", "_seen", "_free")

    def __init__(self, limit: int, free=(ANONYMOUS, OTHER)):
        self.limit, self._seen, self._free = limit, set(), frozenset(free)

    def __call__(self, value: str) -> str:
        if value in self._seen or value in self._free:
            return value
        if len(self._seen) < self.limit:
            self._seen.add(value)
            return value
        return OTHER
