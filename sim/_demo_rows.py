"""The demo's answer to "and after is it slow?": are the overview's goodput, cost and autoscaling rows live?

Each panel of those rows is asked of the demo's Prometheus with the dashboard's own queries, once per model
(its `$model` and `$engine`), as Grafana would. A panel that needs a part the demo does not run (the headroom
panel reads a capacity sweep's rules) is named with the command that fills it, not counted as missing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from importlib.resources import files

# the overview's rows the demo vouches for, by the start of their titles (and the headroom panel, named)
ROWS = ("Goodput", "Cost", "Autoscaling")
NOT_IN_DEMO = {"With a capacity sweep only": "fills after `inferwatch capacity sweep --rules FILE` is loaded"}


def rows_live(
    query: Callable[[str], list[dict]],
    engines: dict[str, str],
    say: Callable[[str], None],
    patience_s: float = 60.0,
) -> bool:
    """Say, per panel of ROWS, whether it has data for every model of `engines` (model -> engine); True when
    every panel the demo can fill has. Rates and the rules' windows may need a few more evaluations after the
    last phase began, so a panel without data is asked again for up to `patience_s`."""
    from inferwatch.dashboards import panel_has_data, panel_needs, panels_by_row

    # the checked-in board (its drift test keeps it equal to what the code generates), read as package data
    board = json.loads(files("inferwatch.dashboards").joinpath("serving-overview.json").read_text())
    panels = [
        (next((r for r in ROWS if row.startswith(r)), "Capacity"), panel)
        for row, panel in panels_by_row(board)
        if row.startswith(ROWS) or panel_needs(panel) in NOT_IN_DEMO
    ]

    def missing(panel: dict) -> list[str]:
        return [
            model
            for model, engine in engines.items()
            if not panel_has_data(query, panel, {"model": model, "engine": engine})
        ]

    waiting = [p for _, p in panels if panel_needs(p) not in NOT_IN_DEMO]
    deadline = time.monotonic() + patience_s
    while waiting and time.monotonic() < deadline:
        waiting = [p for p in waiting if missing(p)]
        if waiting:
            time.sleep(2)
    say("\n== the overview's rows after 'is it slow?' (serving-overview.json, its own queries, per model)")
    for row, panel in panels:
        note = NOT_IN_DEMO.get(panel_needs(panel) or "")
        if note:
            state = f"n/a     {panel['title']}: {note}"
        elif panel in waiting:
            state = f"NO DATA {panel['title']} (for {', '.join(missing(panel))})"
        else:
            state = f"live    {panel['title']}"
        say(f"  {row:<12} {state}")
    return not waiting
