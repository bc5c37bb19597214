"""What the compiled rules must do, computed independently of them from a scenario's exact counts.

The recording rules sum per-minute increases; with one sample per minute in a
test, minute m's increase is exactly the counter's change from m-1 to m, so
the window over (t-W, t] is a plain sum here. Generated tests compare
promtool's evaluation of the real rules with these numbers.
"""

from __future__ import annotations

from fractions import Fraction

from inferwatch.slo._burn import BASE, TierMath

__all__ = ["Counts"]


class Counts:
    """Per-minute events and bad events of a scenario (index 0 is minute 1), with prefix sums."""

    def __init__(self, totals: list[Fraction], bads: list[Fraction]):
        self.minutes = len(totals)
        self._total, self._bad = [Fraction(0)], [Fraction(0)]
        for t, b in zip(totals, bads, strict=True):
            self._total.append(self._total[-1] + t)
            self._bad.append(self._bad[-1] + b)

    def window(self, t: int, window) -> tuple[Fraction, Fraction]:
        """(events, bad events) in (t - window, t]; minute 0 has no increase."""
        end, start = min(t, self.minutes), max(0, t - int(window // BASE))
        if start >= end:
            return Fraction(0), Fraction(0)
        return self._total[end] - self._total[start], self._bad[end] - self._bad[start]

    def error_ratio(self, t: int, window) -> Fraction | None:
        total, bad = self.window(t, window)
        return None if total == 0 else bad / total

    def firing(self, maths: list[TierMath], t: int) -> list[TierMath]:
        """The tiers whose alert fires at minute t."""
        out = []
        for m in maths:
            ratios = [r for w in (m.tier.long, m.tier.short) if (r := self.error_ratio(t, w)) is not None]
            # the scenario's series start at minute 0: a tier fires once they reach back its history
            if (
                m.fires
                and len(ratios) == 2
                and min(ratios) > m.threshold
                and t * BASE >= m.history
                and self.window(t, m.tier.long)[0] >= m.min_events
            ):
                out.append(m)
        return out
