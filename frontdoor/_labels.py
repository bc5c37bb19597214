"""Which models and callers become label values: only known ones, so no client can mint series or crowd real
callers and models out.

A model is known when the configuration routes it or an upstream lists it on
its /v1/models (`Models.listed`, refreshed); a caller when a trusted gateway's
header names it, the keys file names it, or an upstream accepted its API key (a
2xx answer). Anything else is counted as `other`: junk model names and junk keys
(which the engine answers 401 or 404) land there and never take a known one's
place. Each set is bounded (`--max-models`, `--max-callers`); the keys file's
callers are the operator's own, all of them known.
"""

from __future__ import annotations

from inferwatch.frontdoor._caller import ANONYMOUS, LONGEST, OTHER, api_key, encodable, hashed_key

__all__ = ["Models", "Callers", "UNKNOWN", "load_keys"]

UNKNOWN = "unknown"  # a request that names no model (or left before its body was read)


class Models:
    """Model label values: the routes' models, then those the upstreams list, `limit` at most; else `other`."""

    def __init__(self, routed: tuple[str, ...], limit: int):
        self.routed, self.limit = tuple(dict.fromkeys(routed)), limit
        self._by_upstream: dict[str, tuple[str, ...]] = {}
        self.known: frozenset[str] = frozenset(m for m in self.routed if len(m) <= LONGEST)

    def listed(self, upstream: str, ids) -> None:
        """What `upstream` serves now (its /v1/models ids); the known set is rebuilt, routes first."""
        self._by_upstream[upstream] = tuple(i for i in ids if isinstance(i, str) and 0 < len(i) <= LONGEST)
        known = dict.fromkeys(m for m in self.routed if len(m) <= LONGEST)
        for models in self._by_upstream.values():
            for model in models:
                if len(known) >= max(self.limit, len(self.routed)):
                    break
                known[model] = None
        self.known = frozenset(known)

    def __call__(self, model: str | None) -> str:
        if not model:
            return UNKNOWN
        return encodable(model) if model in self.known else OTHER


class Callers:
    """Caller names and their label values. `name` is who the request says it is (for the access log); `label`
    is that name when it is known, `anonymous` without a key, else `other`; `accept` makes a hashed key known
    once an upstream answered it 2xx (at most `limit` such, and gateway names, first come)."""

    def __init__(self, header: str | None, salt: str, limit: int, keys: dict[str, str] | None = None):
        self.header, self.salt, self.limit = header, salt, limit
        self.keys = keys or {}  # API key -> caller, from --callers-file
        self._listed = frozenset(self.keys.values())
        self._learned: set[str] = set()

    def name(self, headers) -> str:
        if self.header:
            name = headers.get(self.header, "").strip()[:64]
            if name:
                self._learn(encodable(name))  # a trusted gateway's word
                return name
        key = api_key(headers)
        if not key:
            return ANONYMOUS
        if self.keys:
            return self.keys.get(key, OTHER)
        return hashed_key(key, self.salt)

    def label(self, name: str) -> str:
        if name in self._listed or name == ANONYMOUS:
            return name
        name = encodable(name)
        return name if name in self._learned else OTHER

    def accept(self, name: str) -> None:
        """An upstream accepted this caller's key: from now on it is labelled by its name."""
        if not self.keys and name.startswith("key-"):
            self._learn(name)

    def _learn(self, name: str) -> None:
        if name not in self._learned and len(self._learned) < self.limit and name not in (ANONYMOUS, OTHER):
            self._learned.add(name)


def load_keys(path: str) -> dict[str, str]:
    """API key -> caller from a YAML file of `CALLER: KEY` or `CALLER: [KEY, ...]`; ValueError names the file and
    the entry at fault."""
    from inferwatch.errors import InferwatchError
    from inferwatch.yamlio import load_document

    try:
        doc = load_document(path).data
    except InferwatchError as err:  # unreadable, over the input cap, not UTF-8, invalid YAML: it says where
        raise ValueError(str(err)) from None
    if not isinstance(doc, dict) or not doc:
        raise ValueError(f"{path}: expected a mapping of caller names to API keys, e.g. `search: sk-...`")
    keys: dict[str, str] = {}
    for caller, value in doc.items():
        listed = value if isinstance(value, list) else [value]
        if not isinstance(caller, str) or not 0 < len(caller) <= 64 or caller in (ANONYMOUS, OTHER):
            raise ValueError(f"{path}: caller {caller!r}: a name of 1 to 64 characters (not anonymous or other)")
        for key in listed:
            if not isinstance(key, str) or not key.strip():
                raise ValueError(f"{path}: caller {caller!r}: each key must be a non-empty string")
            if keys.get(key.strip(), caller) != caller:
                raise ValueError(f"{path}: caller {caller!r}: a key of {keys[key.strip()]!r} too")
            keys[key.strip()] = caller
    return keys
