"""Time windows: --since / --start / --end, --baseline, and the step and rate window of the range queries."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime

from inferwatch.durations import parse_duration
from inferwatch.errors import InferwatchError

__all__ = ["Window", "parse_time", "incident_window", "baseline_choices", "choose_step", "rate_window", "POINTS"]

POINTS = 300  # points per range query: enough to see a shape, cheap for 100 models over a day
MAX_POINTS = 11000  # Prometheus refuses a range query of more points than this
DAY = 86400.0


@dataclass(frozen=True)
class Window:
    start: float  # Unix seconds
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start

    def shifted(self, by: float) -> Window:
        return Window(self.start + by, self.end + by)

    def iso(self) -> dict[str, str]:
        return {"start": iso(self.start), "end": iso(self.end)}


def iso(ts: float) -> str:
    """RFC 3339 in UTC, to the second."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str, flag: str = "--start") -> float:
    """Unix seconds from RFC 3339 (`2026-11-30T10:00:00Z`, an offset, or naive as UTC) or Unix seconds."""
    value = str(text).strip()
    try:
        return float(value)
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InferwatchError(
            f"{flag} {text!r}: not a time; use RFC 3339 (2026-11-30T10:00:00Z) or Unix seconds (1764496800)"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def _duration(text: str, flag: str) -> float:
    """A duration with its unit: a bare number (`--since 30`) is ambiguous (seconds? minutes?) and refused."""
    if text.strip().replace(".", "", 1).isdigit():
        raise InferwatchError(
            f"{flag} {text!r}: give a unit, e.g. {text.strip()}m or {text.strip()}s "
            "(units: s, m, h, d, w; combined: 1h30m)"
        )
    try:
        return float(parse_duration(text, "s m h d w"))
    except ValueError as err:
        raise InferwatchError(f"{flag} {text!r}: {err}") from None


def incident_window(since: str | None, start: str | None, end: str | None, now: float) -> Window:
    """The incident: --since D (D before now, or before --end), or --start/--end (--end defaults to now)."""
    if since is not None and start is not None:
        raise InferwatchError("give --since or --start, not both")
    stop = parse_time(end, "--end") if end is not None else now
    if start is not None:
        begin = parse_time(start, "--start")
    else:
        begin = stop - _duration(since or "30m", "--since")
    if begin >= stop:
        raise InferwatchError(f"the incident window is empty: start {iso(begin)} is not before end {iso(stop)}")
    if stop > now + 60:
        raise InferwatchError(f"--end {iso(stop)} is in the future (now is {iso(now)})")
    return Window(begin, stop)


def baseline_choices(spec: str, incident: Window) -> list[Window]:
    """Candidate baselines, best first: `auto` gives [the same window a day earlier, the hour before];
    `1d` / `7d` / `2w` the same window that much earlier; `1h` / `30m` that long just before the incident;
    `START/END` those times."""
    text = spec.strip()
    if text == "auto":
        return [incident.shifted(-DAY), Window(incident.start - 3600, incident.start)]
    if "/" in text:
        first, _, second = text.partition("/")
        window = Window(parse_time(first, "--baseline"), parse_time(second, "--baseline"))
        if window.start >= window.end:
            raise InferwatchError(f"--baseline {spec!r}: its start is not before its end")
        return [window]
    seconds = _duration(text, "--baseline")
    if text.endswith(("d", "w")):
        return [incident.shifted(-seconds)]
    return [Window(incident.start - seconds, incident.start)]


def choose_step(*windows: Window, fetched: tuple[Window, ...] = ()) -> float:
    """One step for every window, about POINTS points over the longest, whole seconds; and no finer than
    Prometheus' range-query limit (MAX_POINTS) allows over any window `fetched` (one without data, which does
    not set the step, still is queried)."""
    wanted = math.ceil(max(w.seconds for w in windows) / POINTS)
    return float(max(1, wanted, *(math.ceil(w.seconds / MAX_POINTS) for w in fetched)))


def rate_window(step: float, scrape_interval: float, shortest: float | None = None) -> str:
    """rate()'s range: at least four scrapes (so a missed scrape still leaves two samples) and at least a step
    (so consecutive steps tile the window and summed rates count every event once). A window shorter than four
    scrapes (`shortest`, seconds) is rated over its own length, down to two scrapes; below that a rate has too
    few samples and its signals read as too few. A whole number of steps: its rates are the sums of per-step
    increases (_increase)."""
    wanted = 4 * scrape_interval
    if shortest is not None and shortest < wanted:
        wanted = max(shortest, 2 * scrape_interval)
    steps = math.ceil(max(step, wanted) / step - 1e-9)
    return f"{int(math.ceil(steps * step))}s"
