"""`inferwatch slo explain`: per objective and tier, what fires when, in plain numbers."""

from __future__ import annotations

from fractions import Fraction

from inferwatch.durations import format_duration, format_seconds
from inferwatch.slo._burn import decimal, tier_math, tier_windows
from inferwatch.slo._model import Spec
from inferwatch.slo._rules import COVERAGE, LONG_INTERVAL, guarded_windows, raw_fallback_inline, window_name

__all__ = ["explain", "explain_rows", "COLUMNS"]

COLUMNS = (
    "tier",
    "severity",
    "long / short",
    "burn factor",
    "fires above",
    "budget spent",
    "min events",
    "detect outage",
    "detect 10x",
    "reset",
)


def _when(value: Fraction | None) -> str:
    return "never" if value is None else format_seconds(value)


def explain_rows(spec: Spec, objective) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for tier in spec.tiers:
        m = tier_math(spec, objective, tier)
        ten_x = min(10 * objective.budget, Fraction(1))
        rows.append(
            (
                tier.name,
                tier.severity,
                f"{window_name(tier.long)} / {window_name(tier.short)}",
                f"{decimal(m.factor)}x",
                f"{decimal(m.threshold * 100)}%" if m.fires else "unreachable",
                f"{decimal(tier.budget_percent)}%",
                str(m.min_events),
                _when(m.detection(Fraction(1)) if m.fires else None),
                _when(m.detection(ten_x) if m.fires else None),
                format_seconds(m.reset()) if m.fires else "-",
            )
        )
    return rows


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def explain(spec: Spec) -> str:
    scope = ", ".join(str(e) for e in spec.engines) if spec.source == "engine" else "the front door"
    selector = ", ".join(m.render() for m in spec.selector) or "all series"
    lines = [
        f"{spec.service}: window {window_name(spec.window)}, source {spec.source} ({scope}); "
        f"selector {selector}" + (f"; one SLO per {', '.join(spec.group_by)}" if spec.group_by else "")
    ]
    for objective in spec.objectives:
        budget = objective.budget
        lines += [
            "",
            f"{objective.name} ({objective.kind}): {decimal(objective.target * 100)}% of {objective.sli.means}",
            f"  error budget {decimal(budget * 100)}% of events: "
            f"{decimal(budget * spec.window / 60)} minutes of total outage per {window_name(spec.window)}",
        ]
        lines += _table([COLUMNS] + explain_rows(spec, objective))
    bad = "1 bad request" if spec.min_bad_events == 1 else f"{spec.min_bad_events} bad requests"
    lines += [
        "",
        "Reading the table:",
        "  fires above   error ratio both windows must exceed (burn factor x error budget)",
        "  budget spent  share of the whole error budget gone when the tier fires",
        f"  min events    events the long window needs before the tier may fire, so {bad} alone cannot",
        "  detect        time from the start of a total outage (or a 10x burn) to firing, windows clean before",
        "  reset         time from the end of a long total outage until the alert clears",
        "  The rules count whole minutes: add up to 1m to each time. LLMSLIDataMissing fires "
        f"{window_name(spec.missing_data_for)} after the series vanish or their target fails its scrape.",
    ]
    lines += ["", *_after_deployment(spec)]
    return "\n".join(lines) + "\n"


def _after_deployment(spec: Spec) -> list[str]:
    """What the rules read in the first hours and days after they are deployed (or an objective is renamed,
    or group_by changes): the raw counters, until their own per-minute recording covers each window."""

    def covered(windows) -> str:
        return ", ".join(f"{window_name(w)} after {format_duration(w * COVERAGE)}" for w in windows)

    inline = [w for w in tier_windows(spec) if raw_fallback_inline(w)]
    later = [w for w in tier_windows(spec) if not raw_fallback_inline(w)]
    lines = [
        "After deployment (also after renaming an objective or changing group_by):",
        "  Every tier sees its whole window from the first minute: until the rules' own per-minute counts",
        "  reach back 90% of a window, it is read from the raw counters (increase over the window, as Sloth",
        "  does), so a burst in the first minutes is weighed against days of history, not against minutes.",
    ]
    if inline:
        lines.append(f"  Read every minute; from the recorded counts once covered: {covered(inline)}.")
    if later:
        lines.append(
            f"  Read from the raw counters every {format_duration(LONG_INTERVAL)} until covered (a tier on "
            f"them may fire up to {format_duration(LONG_INTERVAL)} late meanwhile): {covered(later)}."
        )
    folded = guarded_windows(spec)
    summed = sorted({t.long for t in spec.tiers} - set(folded))
    if folded:
        lines.append(
            f"  Min events of the tiers on {', '.join(window_name(w) for w in folded)}: counted in the "
            "window's own ratio, from the raw counters too until covered."
        )
    if summed:
        lines.append(
            f"  Min events of the tiers on {', '.join(window_name(w) for w in summed)}: the events since "
            "deployment until the long window is covered: a tier may wait for them, never fire on fewer."
        )
    lines += [
        "  Where Prometheus holds less raw history than a window (a new model, a short retention), the",
        "  window holds what there is, as with any rules on raw counters.",
        f"  The SLI over the {window_name(spec.window)} SLO window (dashboards only) counts the time since "
        f"deployment until {window_name(spec.window)} have passed.",
    ]
    return lines
