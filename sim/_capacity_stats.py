"""Capacity from steps: where the share of good requests crosses the target, and how sure we are of it.

A step offers one rate for a while and judges each request against the SLO; its *share* is good / judged. The
capacity is the highest rate whose expected share is still at or above the target (DistServe's goodput: the rate
at which a given share of requests meets every objective).

Per rate, the band on its expected share is the wider of two 95 % intervals (each bound one-sided at 97.5 %):
- Wilson's score interval on the requests pooled over its steps, which treats requests as independent;
- Student's t interval on the mean of its steps' shares (two steps or more), which does not: requests of one step
  share one queue and are slow together, so steps that disagree more than independent requests would widen it.
A rate whose lower bound is at or above the target *passes*, one whose upper bound is below it *fails*, others are
*unsure* (the knee itself is unsure however often it is measured). Only rates measured two times or more pass or
fail: one step cannot show how much steps vary.

The interval is [the highest passing rate below the lowest failing one, the lowest failing rate]: the share falls
as the rate rises, so the capacity lies at or above every passing rate and below every failing one. Each bound is
wrong with at most 2.5 % chance per rate that could have misled it (a Bonferroni bound: with several rates just
past the knee, slightly more). The estimate is where the share, made non-increasing in rate (pool-adjacent
violators, weighted by requests), crosses the target, linear between the two rates around the crossing, and kept
inside the interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["RateStats", "Estimate", "rate_stats", "estimate", "wilson", "T975"]

Z975 = 1.959964
# Student's t, 97.5 % quantile, by degrees of freedom (beyond 30: the normal's)
T975 = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
    11: 2.201,
    12: 2.179,
    13: 2.160,
    14: 2.145,
    15: 2.131,
    16: 2.120,
    17: 2.110,
    18: 2.101,
    19: 2.093,
    20: 2.086,
    25: 2.060,
    30: 2.042,
}


@dataclass(frozen=True)
class RateStats:
    """What the steps at one rate say about its share of good requests."""

    rate: float
    steps: int
    judged: int
    good: int
    share: float  # pooled: good / judged
    lower: float
    upper: float
    verdict: str  # pass, fail or unsure


@dataclass(frozen=True)
class Estimate:
    capacity: float | None  # None: no rate was measured on both sides of the target
    lower: float | None  # None when nothing passed (the capacity is below every rate measured)...
    upper: float | None  # ...or nothing failed (above every rate measured)
    status: str  # measured, below-lowest-rate, not-reached, no-data


def wilson(good: int, n: int, z: float = Z975) -> tuple[float, float]:
    if n == 0:
        return 0.0, 1.0
    p = good / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _t(df: int) -> float:
    keys = [k for k in T975 if k <= df]
    return T975[max(keys)] if df <= 30 else Z975


def _band(shares: list[float], good: int, judged: int) -> tuple[float, float]:
    low, high = wilson(good, judged)
    if len(shares) >= 2:
        mean = sum(shares) / len(shares)
        sd = math.sqrt(sum((s - mean) ** 2 for s in shares) / (len(shares) - 1))
        half = _t(len(shares) - 1) * sd / math.sqrt(len(shares))
        low, high = min(low, mean - half), max(high, mean + half)
    return max(0.0, low), min(1.0, high)


def rate_stats(steps: list[tuple[float, int, int]], target: float) -> list[RateStats]:
    """Per rate, ascending, from (rate, judged, good) per step; steps that judged nothing are left out."""
    by_rate: dict[float, list[tuple[int, int]]] = {}
    for rate, judged, good in steps:
        if judged:
            by_rate.setdefault(rate, []).append((judged, good))
    out = []
    for rate in sorted(by_rate):
        runs = by_rate[rate]
        judged, good = sum(j for j, _ in runs), sum(g for _, g in runs)
        lower, upper = _band([g / j for j, g in runs], good, judged)
        verdict = "unsure"
        if len(runs) >= 2 and lower >= target:
            verdict = "pass"
        elif len(runs) >= 2 and upper < target:
            verdict = "fail"
        out.append(RateStats(rate, len(runs), judged, good, good / judged, lower, upper, verdict))
    return out


def _non_increasing(values: list[float], weights: list[float]) -> list[float]:
    """Pool adjacent violators: the closest non-increasing sequence in weighted least squares."""
    blocks: list[list[float]] = []  # [mean, weight, count]
    for v, w in zip(values, weights, strict=True):
        blocks.append([v, w, 1])
        while len(blocks) > 1 and blocks[-2][0] < blocks[-1][0]:
            (v2, w2, c2), (v1, w1, c1) = blocks.pop(), blocks.pop()
            blocks.append([(v1 * w1 + v2 * w2) / (w1 + w2), w1 + w2, c1 + c2])
    return [b[0] for b in blocks for _ in range(int(b[2]))]


def estimate(stats: list[RateStats], target: float) -> Estimate:
    if not stats:
        return Estimate(None, None, None, "no-data")
    failing = [s.rate for s in stats if s.verdict == "fail"]
    upper = min(failing) if failing else None
    passing = [s.rate for s in stats if s.verdict == "pass" and (upper is None or s.rate < upper)]
    lower = max(passing) if passing else None
    fitted = _non_increasing([s.share for s in stats], [s.judged for s in stats])
    below = next((i for i, f in enumerate(fitted) if f < target), None)
    if below is None:
        return Estimate(None, lower, upper, "not-reached" if upper is None else "measured")
    if below == 0:
        capacity = None
    else:
        r0, r1, f0, f1 = stats[below - 1].rate, stats[below].rate, fitted[below - 1], fitted[below]
        capacity = r0 + (r1 - r0) * (f0 - target) / (f0 - f1)
    if capacity is None:
        return Estimate(lower, lower, upper, "below-lowest-rate" if lower is None else "measured")
    capacity = min(max(capacity, lower or 0.0), upper if upper is not None else capacity)
    return Estimate(capacity, lower, upper, "measured")
