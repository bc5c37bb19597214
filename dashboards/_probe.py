"""A dashboard's panels asked of a live Prometheus: does each have data, the way Grafana would query it?

Grafana's own variables get what a dashboard over a 15 s scrape gets (`$__rate_interval` 1m); every other
variable gets the value given for it, else `.*` (the dashboards match variables with `=~`). Shared by the demo,
which says whether the rows after "is it slow?" are live, and by the tests that check every panel has data.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

# Grafana's built-in variables, as on a dashboard over a 15 s scrape interval
RANGES = {"__rate_interval": "1m", "__range": "5m", "__interval": "15s"}

# a panel whose description holds one of these reads a part a stack may not run, and must read that part's series
PANEL_NEEDS = {
    "Front door only": "llm_frontdoor_",
    "With cost rules only": "llm_cost:",
    "With a capacity sweep only": "llm_capacity:",
}


def substitute_variables(expr: str, values: dict[str, str]) -> str:
    """`expr` with `$name` and `${name}` replaced: Grafana's ranges, then `values`, else `.*`."""

    def one(match: re.Match) -> str:
        name = match.group(1) or match.group(2)
        return RANGES.get(name, values.get(name, ".*"))

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", one, expr)


def panel_needs(panel: dict) -> str | None:
    """The optional part a panel reads (a key of PANEL_NEEDS), or None when any engine stack feeds it."""
    return next((note for note in PANEL_NEEDS if note in panel.get("description", "")), None)


def panels_by_row(board: dict) -> Iterator[tuple[str, dict]]:
    """(row title, panel) for each panel of a dashboard's flat panel list ("" before the first row)."""
    title = ""
    for panel in board["panels"]:
        if panel["type"] == "row":
            title = panel["title"]
        else:
            yield title, panel


def has_data(query: Callable[[str], list[dict]], expr: str) -> bool:
    """True when an instant query's answer holds a number (NaN and infinities are what a panel cannot draw)."""
    return any(r["value"][1] not in ("NaN", "+Inf", "-Inf") for r in query(expr))


def panel_has_data(query: Callable[[str], list[dict]], panel: dict, values: dict[str, str]) -> bool:
    """True when one of the panel's queries, with `values` for its variables, has data."""
    return any(has_data(query, substitute_variables(t["expr"], values)) for t in panel.get("targets", []))
