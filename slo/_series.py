"""Synthetic input series for generated promtool tests: counters that match an SLI's selectors exactly.

A scenario is a list of `Segment`s (minutes, events per minute, bad events per
minute). From it come both the promtool input series and, in `_model.py`, the
exact counts the recording rules must see, so expectations never come from
the rules under test.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from inferwatch.slo._burn import decimal
from inferwatch.slo._model import LatencySLI, Matcher, Objective, RatioSLI, Selector, Spec
from inferwatch.slo._selector import le_spellings

__all__ = [
    "Segment",
    "Source",
    "per_minute",
    "input_series",
    "group_labels",
    "scrape_labels",
    "series_name",
    "SeriesError",
]

GROUP_VALUE = "g1"
_NON_MATCHING = ("stop", "200", "ok", "other", "x")
_SOURCE_LABELS = ("instance", "pod", "replica")


class SeriesError(ValueError):
    """No series can satisfy the SLI's selectors (e.g. contradictory matchers)."""


@dataclass(frozen=True)
class Segment:
    minutes: int
    total: Fraction  # events per minute
    bad: Fraction = Fraction(0)


@dataclass(frozen=True)
class Source:
    """One scrape target in a scenario; `le` picks the bucket spelling it exposes."""

    instance: str = "engine-0:8000"
    target: str = ""  # the normalizing exporter's label for the engine behind it
    le: int = 0  # index into le_spellings(threshold)
    share: Fraction = Fraction(1)


def per_minute(segments: list[Segment]) -> tuple[list[Fraction], list[Fraction]]:
    """Events and bad events of each minute m = 1..N (minute m is the increase from m-1 to m)."""
    totals, bads = [], []
    for seg in segments:
        totals += [seg.total] * seg.minutes
        bads += [seg.bad] * seg.minutes
    return totals, bads


def _values(increments: list[Fraction], stale: bool) -> str:
    """promtool notation for a counter starting at 0 with these per-minute increments; `stale` ends it with a
    staleness marker, as Prometheus writes when a target fails or leaves service discovery."""
    parts, value, i = ["0"], Fraction(0), 0
    while i < len(increments):
        j = i
        while j < len(increments) and increments[j] == increments[i]:
            j += 1
        step = increments[i]
        parts.append(f"{decimal(value + step)}+{decimal(step)}x{j - i - 1}")
        value += step * (j - i)
        i = j
    if stale:
        parts.append("stale")
    return " ".join(parts)


def _literal(pattern: str) -> str | None:
    """A value the regex fully matches, found among its literal alternatives."""
    candidates = [alt.strip("()") for alt in pattern.split("|")]
    candidates += [c.replace(".*", "").replace(".+", "x") for c in candidates]  # `/api/v1/query.*`
    candidates += [c.replace(".", "0") for c in candidates]
    for candidate in candidates:
        if re.fullmatch(pattern, candidate) and not re.search(r"[\\\[\]*+?{}()^$]", candidate):
            return candidate
    return None


def _satisfy(matchers: tuple[Matcher, ...]) -> dict[str, str]:
    labels: dict[str, str] = {}
    for m in matchers:
        if m.op == "=":
            value = m.value
        elif m.op == "=~":
            literal = _literal(m.value)
            if literal is None:
                raise SeriesError(f'cannot invent a value for {m.label}=~"{m.value}"')
            value = literal
        else:
            continue
        if labels.get(m.label, value) != value:
            raise SeriesError(f"contradictory matchers on {m.label}")
        labels[m.label] = value  # "" (the label absent) included, so nothing overrides it
    return labels


def _matches(matchers: tuple[Matcher, ...], labels: dict[str, str]) -> bool:
    return all(m.matches(labels) for m in matchers)


def _named(m: Matcher) -> tuple[str, ...]:
    """The value a negative matcher fails on (`code!="0"`: "0"; `code!~"5.."`: one its regex matches), if any."""
    value = m.value if m.op == "!=" else _literal(m.value) if m.op == "!~" else None
    return () if value is None else (value,)


def _avoiding(base: dict[str, str], selector: Selector, total: Selector) -> dict[str, str]:
    """Labels that match `total` but not `selector` (the other half of a ratio)."""
    if selector.metric != total.metric:
        return dict(base)
    for m in selector.matchers:
        if m.label in base and base[m.label] != "":
            continue
        for value in (*_named(m), *_NON_MATCHING):
            labels = {**base, m.label: value}
            if _matches(total.matchers, labels) and not _matches(selector.matchers, labels):
                return labels
    raise SeriesError(f"cannot build a series that matches {total.render()} but not {selector.render()}")


def series_name(metric: str, labels: dict[str, str]) -> str:
    """`metric{a="b"}` in promtool's series notation, values escaped as PromQL strings; an empty value is a
    label the series does not have."""
    body = ", ".join(Matcher(k, "=", v).render() for k, v in sorted(labels.items()) if v)
    return f"{metric}{{{body}}}"


def _primary(spec: Spec, objective: Objective) -> tuple[Matcher, ...]:
    """The matchers every event series of the objective satisfies: the spec's and the total's."""
    sli = objective.sli
    return spec.selector + (sli.matchers if isinstance(sli, LatencySLI) else sli.total.matchers)


def _constrained(spec: Spec, objective: Objective) -> set[str]:
    sli = objective.sli
    selectors = (
        [sli.matchers]
        if isinstance(sli, LatencySLI)
        else [s.matchers for s in (sli.total, sli.good, *sli.bad) if s is not None]
    )
    return {m.label for ms in [spec.selector, *selectors] for m in ms} | set(spec.group_by)


def group_labels(spec: Spec, objective: Objective) -> dict[str, str]:
    """The group of every scenario: `g1` for each group_by label, unless a selector fixes its value."""
    fixed = _satisfy(_primary(spec, objective))
    return {label: fixed.get(label, GROUP_VALUE) for label in spec.group_by if fixed.get(label) != ""}


def scrape_labels(spec: Spec, objective: Objective, source: Source = Source()) -> dict[str, str]:
    """`job`, `instance` (and the exporter's `target`) of a source's series: ours unless the SLI's selectors
    or group_by fix them."""
    fixed = {**_satisfy(_primary(spec, objective)), **group_labels(spec, objective)}
    labels = {"job": fixed.get("job", "llm"), "instance": fixed.get("instance", source.instance)}
    target = fixed.get("target", source.target)  # a selector on `target` pins every series to that engine
    if target:
        labels["target"] = target
    return labels


def _source_label(spec: Spec, objective: Objective) -> str:
    """The label that tells two sources of one scenario apart: `instance`, unless a selector fixes it."""
    constrained = _constrained(spec, objective)
    return next((label for label in _SOURCE_LABELS if label not in constrained), "inferwatch_test_source")


def input_series(
    spec: Spec, objective: Objective, segments: list[Segment], sources=(Source(),), stale: bool = False
) -> list[dict]:
    """promtool input_series for one scenario, split across `sources` by their share."""
    totals, bads = per_minute(segments)
    series = []
    for source in sources:
        base = {**_satisfy(spec.selector), **group_labels(spec, objective), **scrape_labels(spec, objective, source)}
        base[_source_label(spec, objective)] = source.instance
        total = [t * source.share for t in totals]
        bad = [b * source.share for b in bads]
        good = [t - b for t, b in zip(total, bad, strict=True)]
        for metric, labels, incs in _counters(objective, base, total, good, bad, source):
            series.append({"series": series_name(metric, labels), "values": _values(incs, stale)})
    return series


def _counters(objective: Objective, base: dict[str, str], total, good, bad, source: Source):
    sli = objective.sli
    if isinstance(sli, LatencySLI):
        labels = {**base, **_satisfy(sli.matchers)}
        spelling = le_spellings(sli.threshold)
        le = spelling[min(source.le, len(spelling) - 1)]
        return [(sli.metric + "_count", labels, total), (sli.metric + "_bucket", {**labels, "le": le}, good)]
    assert isinstance(sli, RatioSLI)
    total_labels = {**base, **_satisfy(sli.total.matchers)}
    part = sli.good if sli.good is not None else sli.bad[0]
    part_labels = {**base, **_satisfy(part.matchers)}
    part_counts = good if sli.good is not None else bad
    other_counts = bad if sli.good is not None else good
    if part.metric == sli.total.metric and _matches(sli.total.matchers, part_labels):
        # one metric split in two: the events that match `part` and the rest
        return [
            (part.metric, part_labels, part_counts),
            (sli.total.metric, _avoiding(total_labels, part, sli.total), other_counts),
        ]
    return [(sli.total.metric, total_labels, total), (part.metric, part_labels, part_counts)]
