"""Prometheus-style durations (`500ms`, `5m`, `28d`), parsed exactly and printed back the way Prometheus writes them.

Seconds are `Fraction`s so that windows and thresholds never pick up float
artifacts on their way into rules.
"""

from __future__ import annotations

import re
from fractions import Fraction

__all__ = ["parse_duration", "format_duration", "format_seconds"]

_UNITS = {
    "ms": Fraction(1, 1000),
    "s": Fraction(1),
    "m": Fraction(60),
    "h": Fraction(3600),
    "d": Fraction(86400),
    "w": Fraction(604800),
    None: Fraction(1),
}
_PART = re.compile(r"([0-9]*\.?[0-9]+)(ms|s|m|h|d|w)?")


def parse_duration(value, units: str = "ms s m h d w") -> Fraction:
    """Seconds from `5`, `2.5`, `'500ms'`, `'1h30m'` or `'28d'`; a bare number is seconds.

    Raises ValueError with an example when the text is not a positive duration
    made of the allowed `units`.
    """
    allowed = set(units.split()) | {None}
    if isinstance(value, bool):
        value = str(value)
    if isinstance(value, (int, float)):
        seconds = Fraction(str(value))
    else:
        text, seconds, pos = str(value).strip(), Fraction(0), 0
        for match in _PART.finditer(text):
            if match.start() != pos or match.group(2) not in allowed or (match.group(2) is None and pos):
                break
            seconds += Fraction(match.group(1)) * _UNITS[match.group(2)]
            pos = match.end()
        if not text or pos != len(text):
            seconds = Fraction(-1)
    if seconds <= 0:
        example = " or ".join(f"5{u}" for u in units.split()[:3])
        what = "is not more than zero: give" if seconds == 0 else "is not"  # '0s' parses, but means nothing
        raise ValueError(f"{value!r} {what} a duration such as {example}")
    return seconds


def format_duration(seconds) -> str:
    """Prometheus' own spelling: 90 -> `1m30s`, 86400 -> `1d`, 0.1 -> `100ms`."""
    ms = Fraction(seconds) * 1000
    if ms.denominator != 1 or ms <= 0:
        raise ValueError(f"{seconds} s is not a whole number of milliseconds")
    left, out = int(ms), ""
    for unit, size in (("w", 604_800_000), ("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1)):
        if left >= size:
            out += f"{left // size}{unit}"
            left %= size
    return out


def format_seconds(seconds) -> str:
    """A human duration for reports, to the second: `8m04s`, `3h21m36s`, `52s`."""
    total = round(float(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"
