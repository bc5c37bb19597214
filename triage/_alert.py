"""`inferwatch triage --alert NAME`: the incident window and the models from the alert that paged.

Prometheus keeps, for every alert it evaluates, `ALERTS_FOR_STATE{alertname, <the alert's labels>}` whose value is
the Unix time the alert went active (pending). The newest such moment within LOOKBACK before `end` starts the
incident, less LEAD (the condition held for a rate window before the rule saw it); the incident ends at `end`
(now). The alert's `model` labels are the models judged (each in every deployment it has; an alert without one,
such as a GPU's, judges every model). `--baseline auto` then takes the same window a day earlier, else the hour that
ends where the incident begins: before the onset the alert saw.
"""

from __future__ import annotations

import re

from inferwatch.errors import InferwatchError
from inferwatch.promql import escape_label_value
from inferwatch.triage._window import Window, iso

__all__ = ["AlertIncident", "alert_incident", "LEAD", "LOOKBACK", "MIN_WINDOW"]

LEAD = 300.0  # seconds before the alert went active that the incident starts
MIN_WINDOW = 600.0  # an incident shorter than this has too few samples to judge
LOOKBACK = "1d"  # how far back an alert's last activation is looked for
MATCHER = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"?(.*?)"?\s*$')


class AlertIncident(tuple):
    """(Window, models as --model values): what the alert says to judge."""

    @property
    def window(self) -> Window:
        return self[0]

    @property
    def models(self) -> tuple[str, ...]:
        return self[1]


def _selector(name: str, matchers: list[str]) -> str:
    parts = [f'alertname="{escape_label_value(name)}"']
    for text in matchers:
        match = MATCHER.fullmatch(text)
        if match is None:
            raise InferwatchError(
                f'--alert-match {text!r}: give a label matcher, e.g. model=llama-3-8b or namespace=~"team-.*"'
            )
        parts.append(f'{match[1]}{match[2]}"{escape_label_value(match[3])}"')
    return "{" + ", ".join(parts) + "}"


def alert_incident(client, name: str, matchers: list[str], end: float) -> AlertIncident:
    """The incident an alert describes: its last activation before `end` (within LOOKBACK) to `end`, and the
    models its labels name. InferwatchError when no such alert was active, naming what was looked for."""
    selector = _selector(name, matchers)
    rows = client.query(f"last_over_time(ALERTS_FOR_STATE{selector}[{LOOKBACK}])", end)
    if not rows:
        raise InferwatchError(
            f"no alert {selector} was active in the {LOOKBACK} before {iso(end)} "
            "(ALERTS_FOR_STATE has no series): check the name, the matchers, and that this "
            "Prometheus evaluates the alert (a Thanos or Mimir ruler's alerts are in its own store)"
        )
    active = [float(row["value"][1]) for row in rows if "value" in row]
    started = max(active)  # the newest activation: the page on-call is looking at
    models = tuple(sorted({row["metric"].get("model", "") for row in rows if float(row["value"][1]) == started} - {""}))
    start = min(started - LEAD, end - MIN_WINDOW)
    return AlertIncident((Window(start, end), models))
