"""Who is calling, as a bounded label: a trusted gateway's header, else a salted hash of the API key, else
`anonymous`; past `max` distinct values, `other`."""

from __future__ import annotations

import hashlib
import hmac

__all__ = ["caller_of", "api_key", "hashed_key", "encodable", "LabelCap", "ANONYMOUS", "OTHER"]

ANONYMOUS, OTHER = "anonymous", "other"
LONGEST = 256  # characters of a label value; longer ones are `other`


def caller_of(headers, header: str | None, salt: str) -> str:
    """The caller of a request; `header` is honoured only when configured (clients could set it themselves)."""
    if header:
        name = headers.get(header, "").strip()
        if name:
            return name[:64]
    key = api_key(headers)
    return hashed_key(key, salt) if key else ANONYMOUS


def api_key(headers) -> str:
    """The request's API key (`Authorization: Bearer KEY`, or the header's whole value); empty when none."""
    auth = headers.get("Authorization", "")
    scheme, _, key = auth.partition(" ")
    return key.strip() if scheme.lower() == "bearer" else auth.strip()


def hashed_key(key: str, salt: str) -> str:
    """`key-` and 12 hex digits of the key's salted HMAC: a caller's name that does not reveal the key."""
    # a header's bytes that are not UTF-8 come as surrogates (aiohttp reads headers with surrogateescape)
    return "key-" + hmac.new(salt.encode(), key.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()[:12]


def encodable(text: str) -> str:
    """`text` with what UTF-8 cannot encode (a lone surrogate: a header byte that is not UTF-8, a `\\ud800` in the
    request's JSON) as `?`: one such label value would make every later /metrics page fail to encode."""
    return text if text.isascii() else text.encode("utf-8", "replace").decode("utf-8")


class LabelCap:
    """The first `limit` distinct values keep their name, later ones become `other` (the series stay bounded);
    so does a value longer than LONGEST characters, which no model id is: a client's 1 MB `model` would otherwise
    add some 32 MB to every /metrics page."""

    __slots__ = ("limit", "_seen", "_free")

    def __init__(self, limit: int, free=(ANONYMOUS, OTHER)):
        self.limit, self._free = limit, frozenset(free)
        self._seen: set[str] = set()

    def __call__(self, value: str) -> str:
        if len(value) > LONGEST:
            return OTHER
        value = encodable(value)
        if value in self._seen or value in self._free:
            return value
        if len(self._seen) < self.limit:
            self._seen.add(value)
            return value
        return OTHER
