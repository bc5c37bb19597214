"""Burn-rate arithmetic per objective and tier, in exact fractions (the SRE Workbook, chapter 5).

factor     = budget_percent / 100 * slo_window / long_window
threshold  = factor * (1 - target)         error ratio over both windows that fires the tier
min_events = ceil(min_bad_events / threshold) events in the long window before the tier may fire,
             so that `min_bad_events` bad requests alone can never fire it
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from inferwatch.slo._model import Objective, Spec, Tier

__all__ = ["TierMath", "tier_math", "decimal", "windows", "tier_windows"]

BASE = Fraction(60)  # the recorded per-minute counts; also the rule groups' interval


@dataclass(frozen=True)
class TierMath:
    tier: Tier
    factor: Fraction
    threshold: Fraction
    min_events: int

    @property
    def fires(self) -> bool:
        """False when even a total outage cannot push the error ratio over the threshold."""
        return self.threshold < 1

    @property
    def exhaustion(self) -> Fraction:
        """Seconds until the whole budget is gone at exactly this tier's burn rate: long window / budget share."""
        return self.tier.long * 100 / self.tier.budget_percent

    def detection(self, error_ratio: Fraction) -> Fraction | None:
        """Seconds from the start of a steady error ratio to firing (both windows were clean before)."""
        if error_ratio <= self.threshold:
            return None
        return self.threshold / error_ratio * self.tier.long

    @property
    def history(self) -> Fraction:
        """Seconds of the SLI's raw series a tier needs behind it before it may fire (tiers.yaml `history`, 0 where
        none is set): on a fresh deployment every window holds the same few minutes, and a two-minute blip would
        read as days of burn."""
        return self.tier.history or Fraction(0)

    def reset(self, error_ratio: Fraction = Fraction(1)) -> Fraction:
        """Seconds from the end of a long steady error ratio until the short window drops under the threshold."""
        return self.tier.short * max(Fraction(0), 1 - self.threshold / error_ratio)


def tier_math(spec: Spec, objective: Objective, tier: Tier) -> TierMath:
    factor = tier.budget_percent / 100 * spec.window / tier.long
    threshold = factor * objective.budget
    return TierMath(tier, factor, threshold, math.ceil(spec.min_bad_events / threshold))


def tier_windows(spec: Spec) -> list[Fraction]:
    """The tiers' windows, shortest first, each shared by every tier that uses it."""
    return sorted({w for tier in spec.tiers for w in (tier.long, tier.short)})


def windows(spec: Spec) -> list[Fraction]:
    """Every window the rules record, shortest first: the tiers' windows and the SLO window."""
    return sorted({spec.window, *tier_windows(spec)})


def decimal(value: Fraction, digits: int = 6) -> str:
    """Exact decimal when the fraction terminates (0.1344), else `digits` significant digits (0.00933333)."""
    value = Fraction(value)
    den = value.denominator
    for prime in (2, 5):
        while den % prime == 0:
            den //= prime
    if den == 1:
        sign, num, scale = "-" if value < 0 else "", abs(value), 0
        while (num * 10**scale).denominator != 1:
            scale += 1
        text = str(int(num * 10**scale)).rjust(scale + 1, "0")
        body = text[:-scale] + "." + text[-scale:] if scale else text
        return sign + body
    return f"{float(value):.{digits}g}"
