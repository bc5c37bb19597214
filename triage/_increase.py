"""Counter rates that Prometheus and VictoriaMetrics answer alike: a counter's increase per step, read as the
difference of its last samples, summed over the rate window here.

`rate()` does not mean the same on the two stores: Prometheus extrapolates the samples inside the window to its
edges, MetricsQL starts at the last sample before the window and does not extrapolate, so the same samples give
rates apart by a few percent at every step and more where a window holds few scrapes (issue 25). What both answer
identically is `last_over_time` (the last raw sample at or before each step) and arithmetic on it. So every
`rate(SELECTOR[W])` of a query becomes, per series,

    L - Lo * (L >= bool Lo)    with L = last_over_time(SELECTOR[W]), Lo = the same `offset STEP`

the counter's increase over the step (its new value where it dropped: a restart counts from 0), summed by the
query's own aggregation. A series without a sample a step earlier (new in the window) adds nothing, as in rate().
`roll()` then sums the steps of each rate window on this side: the increase over the window, exactly the sample
differences, no extrapolation, over the window's length: the rate both stores give the same numbers for.
`resets(SELECTOR[W])` (MetricsQL also counts a drop from the sample before the window) becomes `L < bool Lo`, a
drop within the step, and its steps are summed into the window's count the same way.
"""

from __future__ import annotations

import math
import re

__all__ = ["RATE", "exact_rates", "reads", "steps_per_window", "roll"]

# rate(SELECTOR[RANGE]) or resets(...), with a quoted matcher value read whole (a model named `a}b`)
RATE = re.compile(
    r'\b(?P<func>rate|resets)\((?P<sel>[A-Za-z_:][A-Za-z0-9_:]*\{(?:[^{}"]|"(?:[^"\\]|\\.)*")*\}|\{(?:[^{}"]|"(?:[^"\\]|\\.)*")*\})'
    r"\[(?P<range>[0-9a-z$]+)\]\)"
)


def exact_rates(promql: str, step: float) -> str:
    """`promql` with every `rate(SELECTOR[W])` read as the selector's increase over one step, every
    `resets(SELECTOR[W])` as whether it dropped within the step (see the module)."""

    def one(match: re.Match) -> str:
        now = f"last_over_time({match['sel']}[{match['range']}])"
        before = f"last_over_time({match['sel']}[{match['range']}] offset {_seconds(step)})"
        if match["func"] == "resets":
            return f"({now} < bool {before})"
        return f"({now} - {before} * ({now} >= bool {before}))"

    return RATE.sub(one, promql)


def reads(promql: str) -> str | None:
    """What a query's per-step values add up to over a rate window: "rate" (increases, per second), "resets"
    (a count), None when it reads neither (its values are used as they are)."""
    found = {m["func"] for m in RATE.finditer(promql)}
    if len(found) > 1:
        raise ValueError(f"a query reads both rate() and resets(): {promql[:120]}")
    return found.pop() if found else None


def _seconds(step: float) -> str:
    return f"{int(step)}s" if float(step).is_integer() else f"{int(round(step * 1000))}ms"


def steps_per_window(window: float, step: float) -> int:
    """How many steps a rate window spans (rate_window makes it a whole number of them)."""
    return max(1, int(math.ceil(window / step - 1e-9)))


def roll(block, step: float, k: int, keep_from: float, per_second: bool = True):
    """One series' per-step increases ((n, 2) array of time, value) as rates over `k` steps, each the increases of
    its window summed (a step without a value adds 0) over the window's length (`per_second`; else the sum, a
    count); rows before `keep_from` (the steps whose window lies before the one asked for) left out."""
    import numpy as np

    t, v = block[:, 0], block[:, 1]
    j = np.rint((t - t[0]) / step).astype(np.int64)
    dense = np.zeros(int(j[-1]) + 1)
    dense[j] = np.nan_to_num(v)
    total = np.concatenate(([0.0], np.cumsum(dense)))
    rates = (total[j + 1] - total[np.maximum(j + 1 - k, 0)]) / (k * step if per_second else 1.0)
    keep = t >= keep_from - 1e-6
    return np.column_stack((t[keep], rates[keep]))
