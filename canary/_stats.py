"""The arithmetic of a canary verdict, pure: where a share over a bucket bound stands, and a one-sided exact test
(is the canary's share of bad events higher than the stable version's?). Quantiles from bucket counts are
triage's `bucket_quantile`, as Prometheus interpolates them."""

from __future__ import annotations

import math

__all__ = ["share_over", "bound_at_or_over", "one_sided_p"]

Buckets = list[tuple[float, float]]  # (le, cumulative count), sorted by le, +Inf last


def bound_at_or_over(buckets: Buckets, value: float) -> float | None:
    """The smallest finite bucket bound at or over `value` (the highest finite one when none is)."""
    finite = [le for le, _ in buckets if not math.isinf(le)]
    if not finite:
        return None
    return next((le for le in finite if le >= value), finite[-1])


def share_over(buckets: Buckets, bound: float) -> tuple[float, float]:
    """(observations over `bound`, all observations)."""
    total = buckets[-1][1] if buckets else 0.0
    within = next((count for le, count in buckets if le == bound), 0.0)
    return max(0.0, total - within), total


def _log_choose(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def one_sided_p(bad_canary: float, n_canary: float, bad_stable: float, n_stable: float) -> float:
    """P-value of "the canary's bad share is no higher than the stable one's": Fisher's exact test, one-sided
    (the hypergeometric tail of seeing this many bad events or more on the canary side, given the total bad),
    exact for the few bad events a healthy service has. Counts from increase() are rounded. 1.0 when the counts
    cannot tell (no events, or none bad)."""
    a, n1, b, n2 = (round(x) for x in (bad_canary, n_canary, bad_stable, n_stable))
    a, b = min(max(a, 0), n1), min(max(b, 0), n2)
    if n1 <= 0 or n2 <= 0 or a + b == 0:
        return 1.0
    total, bad = n1 + n2, a + b
    denominator = _log_choose(total, n1)
    top = min(bad, n1)
    terms = [_log_choose(bad, k) + _log_choose(total - bad, n1 - k) - denominator for k in range(a, top + 1)]
    peak = max(terms)
    return min(1.0, math.exp(peak) * sum(math.exp(t - peak) for t in terms))
