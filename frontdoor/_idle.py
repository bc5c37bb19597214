"""The idle timeout, without a per-chunk timer: one watch per answer that wakes four times per timeout."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ["IdleWatch"]


class IdleWatch:
    """Calls `fail()` when the upstream sent nothing for `limit` seconds (to within a quarter of it); no limit,
    no watch. A timer moved on every read would cost a timer per chunk; this one wakes four times per `limit`
    and asks `state()` for (over, sent, held): `over` ends the watch, `sent` is a count that moves whenever the
    upstream sends, and `held` says the relay itself holds the upstream back (a slow client), which is not the
    upstream's silence. Both relays use it: the front door's own client and aiohttp's."""

    __slots__ = ("_state", "_fail", "_step", "_quiet", "_seen", "_handle")

    def __init__(self, limit: float | None, state: Callable[[], tuple[bool, int, bool]], fail: Callable[[], None]):
        self._state, self._fail, self._step, self._quiet = state, fail, (limit or 0) / 4, 0
        self._seen = state()[1]
        self._handle = asyncio.get_running_loop().call_later(self._step, self._wake) if limit else None

    def _wake(self) -> None:
        over, sent, held = self._state()
        if over:
            return
        self._quiet = 0 if held or sent != self._seen else self._quiet + 1
        self._seen = sent
        if self._quiet >= 4:
            self._fail()
        else:
            self._handle = asyncio.get_running_loop().call_later(self._step, self._wake)

    def cancel(self) -> None:
        if self._handle:
            self._handle.cancel()
