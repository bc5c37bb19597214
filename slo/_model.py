"""The typed SLO spec the compiler works from: frozen dataclasses, built only by `_spec.py`."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from inferwatch.promql import escape_label_value

__all__ = ["Matcher", "Selector", "LatencySLI", "RatioSLI", "Tier", "Objective", "Spec", "EngineRef"]


@dataclass(frozen=True)
class Matcher:
    """One PromQL label matcher: `label op "value"` with op one of = != =~ !~."""

    label: str
    op: str
    value: str

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a series with `labels` passes, as PromQL reads it: a missing label is "", regexes anchored."""
        value = labels.get(self.label, "")
        hit = re.fullmatch(self.value, value) is not None if "~" in self.op else value == self.value
        return hit != self.op.startswith("!")

    def render(self) -> str:
        return f'{self.label}{self.op}"{escape_label_value(self.value)}"'


@dataclass(frozen=True)
class Selector:
    """A vector selector: a metric name and its matchers."""

    metric: str
    matchers: tuple[Matcher, ...] = ()

    def render(self, *extra: Matcher) -> str:
        matchers = self.matchers + extra
        return self.metric + ("{" + ", ".join(m.render() for m in matchers) + "}" if matchers else "")

    def with_matchers(self, *extra: Matcher, suffix: str = "") -> Selector:
        return Selector(self.metric + suffix, self.matchers + extra)


@dataclass(frozen=True)
class LatencySLI:
    """Good events: observations of a histogram at or under `threshold` seconds."""

    metric: str  # histogram base name, without _bucket / _count
    threshold: Fraction
    matchers: tuple[Matcher, ...] = ()
    means: str = ""


@dataclass(frozen=True)
class RatioSLI:
    """Good events counted directly (`good`) or as total minus the sum of `bad`. Events of `exclude` are neither
    good nor bad (a client that gave up): they leave the total before anything is divided by it."""

    total: Selector
    good: Selector | None = None
    bad: tuple[Selector, ...] = ()
    means: str = ""
    exclude: tuple[Selector, ...] = ()


@dataclass(frozen=True)
class Tier:
    """One multiwindow burn-rate alert: spend `budget_percent` of the budget in `long`, confirmed over `short`."""

    name: str
    severity: str
    budget_percent: Fraction
    long: Fraction  # seconds
    short: Fraction
    history: Fraction | None = None  # seconds of SLI data the tier needs behind it before it fires


@dataclass(frozen=True)
class EngineRef:
    """An engine whose bucket tables a latency threshold must fit; `version` None means its current release."""

    name: str
    version: str | None = None

    def __str__(self) -> str:
        return f"{self.name}@{self.version}" if self.version else self.name


@dataclass(frozen=True)
class Objective:
    name: str
    kind: str  # ttft, tpot, answered, latency or ratio
    sli: LatencySLI | RatioSLI
    target: Fraction
    labels: tuple[tuple[str, str], ...] = ()
    annotations: tuple[tuple[str, str], ...] = ()
    runbook_url: str = ""
    description: str = ""

    @property
    def budget(self) -> Fraction:
        return 1 - self.target


@dataclass(frozen=True)
class Spec:
    file: str
    service: str
    window: Fraction  # seconds
    objectives: tuple[Objective, ...]
    selector: tuple[Matcher, ...] = ()
    engines: tuple[EngineRef, ...] = ()
    group_by: tuple[str, ...] = ()
    source: str = "engine"
    labels: tuple[tuple[str, str], ...] = ()
    min_bad_events: int = 1
    missing_data_for: Fraction = Fraction(120)
    tiers: tuple[Tier, ...] = field(default=())
