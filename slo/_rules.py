"""Compile a Spec into Prometheus rule groups, in stages: SLI counts, windows, burn-rate alerts, missing data.

Every objective gets two groups: one evaluated every minute (`interval: 1m`) with the counts, the tier windows
and the alerts, and a long-window group evaluated every 10 minutes.

1. SLI counts. Good and total events of the last minute, summed over the
   objective's series (`llm_slo:good:increase1m`, `llm_slo:total:increase1m`).
   A series scraped too rarely for a one-minute `increase` counts at its
   5-minute rate instead, so nothing is lost at a 1m scrape interval; but only while its
   last sample is under 90 s old, so a dead engine stops counting within one
   scrape interval instead of adding phantom requests for five minutes.
2. Windows. One series per tier window, its error ratio (`llm_slo:error_ratio:<W>`), shared by every tier
   that uses the window: the per-minute counts summed with `sum_over_time` (a `W-30s` range holds exactly
   W/1m samples on Prometheus 2 and 3), event-weighted and cheap, but only for the groups whose counts were
   recorded at least 90% of W ago (`llm_slo:total:increase1m offset 0.9W`, one sample per group). Until then
   (a fresh deployment, a renamed objective, a changed group_by) the window is read from the raw counters,
   `increase(raw[W])`, as Sloth does: inline for windows up to 6h, and for longer ones every 10 minutes in
   the long-window group (`llm_slo:error_ratio_raw:<W>`, recorded only while the recording is short). A
   few minutes of recording never stand for a day. Burn rates and the remaining budget are derived in the
   dashboard queries; the objective's constants are recorded once per objective, not per group; the SLI
   over the SLO window (`llm_slo:sli:ratio`, dashboards only) is summed every 10 minutes. A window without
   events records nothing rather than NaN.
3. Burn-rate alerts, one per tier (`LLMErrorBudgetBurn`), each needing enough
   events in its long window that `min_bad_events` bad requests cannot fire it. The page tiers compute their
   windows themselves and read no record of the same evaluation (`reads_counts_inline`): on vmalert, which sees
   a record one evaluation late, a page reads the same data as on Prometheus. Where the long window is no
   tier's short window, the guard is the window ratio's own denominator (`>= N`, recorded and raw alike: no
   ratio at all below N events), so the alert sums nothing inline; elsewhere (6h) the alert sums the
   per-minute counts of its long window. A tier with a `history` in tiers.yaml (the tickets: 2h) fires only for
   groups whose raw series reach back that far: on a fresh deployment a few minutes never stand for days.
4. Missing data (`LLMSLIDataMissing`): no raw series at all, events without the
   good-event series (a latency threshold with no bucket), a target that
   served the SLI now failing its scrape, or a group whose series vanished.
5. Label templates. An annotation's `{{ $labels.X }}` is rendered by Prometheus from the labels of the alert's
   expression only (the group_by labels; a page read from the raw counters carries no service or slo), not from
   the rule's own labels. So where X is a label the rule sets (service, slo, tier, severity, the user's labels,
   alertname) or one that every series of the SLI holds at one
   value (an equality matcher of its total, which Pyrra puts on its alerts), the value is written out; any
   other X would render empty and is a warning.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from fractions import Fraction

from inferwatch.durations import format_duration
from inferwatch.slo._burn import BASE, TierMath, decimal, tier_math, tier_windows
from inferwatch.slo._model import LatencySLI, Matcher, Objective, RatioSLI, Selector, Spec
from inferwatch.slo._selector import le_matcher

__all__ = [
    "RuleSet",
    "compile_spec",
    "window_name",
    "BURN_ALERT",
    "MISSING_ALERT",
    "DEFAULT_RUNBOOKS",
    "runbook_url",
    "record",
    "literal",
    "LITERAL_BRACES",
    "ratio_ref",
    "raw_fallback_inline",
    "long_group_name",
    "TOTAL_1M",
    "GOOD_1M",
    "SLI_RATIO",
    "COVERAGE",
    "LONG_INTERVAL",
    "INLINE_FALLBACK_MAX",
    "folded_guard",
    "guarded_windows",
    "reads_counts_inline",
    "records_read_now",
    "record_hops",
    "triage_command",
]

BURN_ALERT = "LLMErrorBudgetBurn"
MISSING_ALERT = "LLMSLIDataMissing"
DEFAULT_RUNBOOKS = "https://github.com/inferwatch/inferwatch/blob/main/alerts/RUNBOOKS.md"
MISSING_LOOKBACK = "1h"  # a vanished source or group is named this long; then it is just "absent"
MISSING_SECONDS = Fraction(3600)  # the same, in seconds
HISTORY_LOOKBACK = "1h"  # a tier's history guard takes any sample this long before its history
FRESH_SECONDS = 90  # the 5m-rate fallback counts a series only while its last sample is this recent:
# one 1m scrape interval plus slack for a late scrape
TOTAL_1M, GOOD_1M = "llm_slo:total:increase1m", "llm_slo:good:increase1m"
SLI_RATIO = "llm_slo:sli:ratio"
COVERAGE = Fraction(9, 10)  # a window is read from the recorded counts once they reach back this share of it
LONG_INTERVAL = Fraction(600)  # the long-window group's interval
INLINE_FALLBACK_MAX = Fraction(6 * 3600)  # windows up to this read the raw counters inline while not covered


@dataclass
class RuleSet:
    """What one spec compiles to: rule groups, Alertmanager inhibit rules, and warnings for the user."""

    spec: Spec
    groups: list[dict]
    inhibit_rules: list[dict]
    warnings: list[str] = field(default_factory=list)

    def objective_groups(self, objective: Objective) -> list[dict]:
        """The objective's long-window group and its every-minute group, in that order."""
        names = (long_group_name(self.spec, objective), f"inferwatch-slo-{self.spec.service}-{objective.name}")
        return [g for g in self.groups if g["name"] in names]


def window_name(seconds) -> str:
    """`28d`, `6h`, `30m`: the window as it appears in record names and labels."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return format_duration(seconds)


LITERAL_BRACES = '{{ "{{" }}'


def literal(text: str) -> str:
    """User text as Go template text that prints itself: Prometheus expands alert labels and annotations as
    templates, so a selector value or URL holding {{ query `up` }} would otherwise run whenever the alert
    renders. `}}` outside an action is plain text already."""
    return text.replace("{{", LITERAL_BRACES)


def record(quantity: str, window: str) -> str:
    return f"llm_slo:{quantity}:{window}"


def runbook_url(base: str, alert: str) -> str:
    return f"{DEFAULT_RUNBOOKS}#{alert.lower()}" if not base else literal(f"{base.rstrip('/')}/{alert}")


def _user_labels(spec: Spec, objective: Objective) -> dict[str, str]:
    """The spec's and the objective's alert labels, as literal text (label values are templates too)."""
    return {k: literal(v) for k, v in (*spec.labels, *objective.labels)}


def long_group_name(spec: Spec, objective: Objective) -> str:
    return f"inferwatch-slo-{spec.service}-{objective.name}-long"


def compile_spec(spec: Spec) -> RuleSet:
    """Pure: the spec in, every group and inhibit rule out. Per objective the long-window group comes first
    (the generated promtool tests evaluate it first too, with `group_eval_order`)."""
    groups, warnings = [], []
    for objective in spec.objectives:
        maths = [tier_math(spec, objective, tier) for tier in spec.tiers]
        for m in maths:
            if not m.fires:
                warnings.append(
                    f"{spec.file}: {objective.name}: tier {m.tier.name} left out: at target "
                    f"{decimal(objective.target * 100)}% it would need an error ratio of {decimal(m.threshold)}, "
                    "more than a total outage"
                )
        alerts = [_burn_alert(spec, objective, m) for m in maths if m.fires] + [_missing_alert(spec, objective)]
        warnings += _write_out_labels(spec, objective, alerts)
        rules = _sli_rules(spec, objective) + _window_rules(spec, objective) + alerts
        groups.append(
            {
                "name": long_group_name(spec, objective),
                "interval": format_duration(LONG_INTERVAL),
                "rules": _long_rules(spec, objective),
            }
        )
        groups.append(
            {
                "name": f"inferwatch-slo-{spec.service}-{objective.name}",
                "interval": format_duration(BASE),
                "rules": rules,
            }
        )
    return RuleSet(spec, groups, _inhibit_rules(spec), warnings)


# --- helpers ----------------------------------------------------------------------------------------------


def _ident(spec: Spec, objective: Objective) -> dict[str, str]:
    return {"service": spec.service, "slo": objective.name}


def _ref(spec: Spec, objective: Objective, name: str) -> str:
    """A recorded series of this objective, e.g. llm_slo:error_ratio:1h{service="chat", slo="responsive"}."""
    return Selector(name, tuple(Matcher(k, "=", v) for k, v in _ident(spec, objective).items())).render()


def _sum(spec: Spec, inner: str) -> str:
    by = f" by ({', '.join(spec.group_by)})" if spec.group_by else ""
    return f"sum{by} ({inner})"


def _count(spec: Spec, selector: Selector) -> str:
    """Events of the last minute, per group: a 1m increase, or the 5m rate where a 1m window holds one sample.

    The fallback is joined to the series' own freshness on all its labels (both sides drop only the metric
    name), so one dead engine stops counting while its live neighbours in the same group go on; `on ()`
    would let any fresh series keep every stale one counting. Fresh is two conditions, each meaning the same
    in PromQL and MetricsQL: `and x`, the series itself, is gone at once after a staleness marker on both
    (MetricsQL's `timestamp(x)` alone would still return the last real sample's time for 90 s: phantom
    requests on VictoriaMetrics), and the timestamp bounds a series that ends without a marker."""
    text = selector.render()
    return _sum(
        spec,
        f"increase({text}[1m])\n  or (rate({text}[5m]) * 60 and {text} and (time() - timestamp({text}) < "
        f"{FRESH_SECONDS}))",
    )


def _raw_counter(window: str):
    """Events of a whole window per group, read from the raw counters: the fallback while the recorded
    per-minute counts do not reach back far enough."""
    return lambda spec, selector: _sum(spec, f"increase({selector.render()}[{window}])")


def _zero(spec: Spec, total: Selector) -> str:
    """0 for every group with a total series now: one instant selector, for a counter not created yet."""
    by = f" by ({', '.join(spec.group_by)})" if spec.group_by else ""
    return f"0 * group{by} ({total.render()})"


def _total_selector(spec: Spec, objective: Objective) -> Selector:
    sli = objective.sli
    if isinstance(sli, LatencySLI):
        return Selector(sli.metric + "_count", spec.selector + sli.matchers)
    return sli.total.with_matchers(*spec.selector)


def _less(spec: Spec, total: Selector, selectors, count) -> str:
    """`- count` of each selector; a counter not created yet counts 0 for every group with a total series now (an
    instant selector: the subtraction keeps only the groups the total counted, so this never adds a group, and
    the total's count is not evaluated again per counter)."""
    zero = _zero(spec, total.with_matchers(*spec.selector))
    return "".join(f"\n  - ({count(spec, s.with_matchers(*spec.selector))}\n     or {zero})" for s in selectors)


def _total_expr(spec: Spec, objective: Objective, count=_count) -> str:
    """Events per group: the total's count, less the events that are neither good nor bad (`exclude`)."""
    total = count(spec, _total_selector(spec, objective))
    sli = objective.sli
    if isinstance(sli, LatencySLI) or not sli.exclude:
        return total
    return f"clamp_min(\n  {total}{_less(spec, sli.total, sli.exclude, count)},\n  0\n)"


def _good_expr(spec: Spec, objective: Objective, count=_count) -> str:
    sli = objective.sli
    if isinstance(sli, LatencySLI):
        return count(
            spec, Selector(sli.metric + "_bucket", spec.selector + sli.matchers + (le_matcher(sli.threshold),))
        )
    assert isinstance(sli, RatioSLI)
    if sli.good is not None:
        # a good counter not created yet means no good events, never "no data"
        return f"{count(spec, sli.good.with_matchers(*spec.selector))}\nor {_total_expr(spec, objective, count)} * 0"
    total = count(spec, _total_selector(spec, objective))
    return f"clamp_min(\n  {total}{_less(spec, sli.total, sli.exclude + sli.bad, count)},\n  0\n)"


def _recording(spec: Spec, objective: Objective, name: str, expr: str) -> dict:
    return {"record": name, "expr": expr, "labels": _ident(spec, objective)}


def _on(spec: Spec) -> str:
    return f"on ({', '.join(spec.group_by)})"


# --- stage 1: SLI counts -----------------------------------------------------------------------------------


def _sli_rules(spec: Spec, objective: Objective) -> list[dict]:
    rules = [
        _recording(spec, objective, TOTAL_1M, _total_expr(spec, objective)),
        _recording(spec, objective, GOOD_1M, _good_expr(spec, objective)),
        _recording(spec, objective, "llm_slo:objective:ratio", f"vector({decimal(objective.target)})"),
    ]
    if isinstance(objective.sli, LatencySLI):
        rules.append(
            _recording(spec, objective, "llm_slo:threshold:seconds", f"vector({decimal(objective.sli.threshold)})")
        )
    return rules


# --- stage 2: windows --------------------------------------------------------------------------------------


def _span(seconds) -> str:
    """The range that holds exactly seconds/1m per-minute samples: W-30s (Prometheus 2 and 3 alike)."""
    return format_duration(seconds - BASE / 2)


def guarded_windows(spec: Spec) -> list:
    """The windows that carry their tiers' min_events guard in their own error ratio: the long window of a tier
    and the short window of none (1h, 1d, 3d with the default tiers; 6h is both)."""
    shorts = {tier.short for tier in spec.tiers}
    return sorted({tier.long for tier in spec.tiers} - shorts)


def folded_guard(spec: Spec, objective: Objective, seconds) -> int | None:
    """The min_events guard folded into a window's error ratio (its denominator `>= N` instead of `> 0`), for a
    window that is the long window of a tier and the short window of none: the tier then reads no ratio at all
    until the window holds N events, so its alert sums no counts inline. N is the least min_events of the tiers
    with this long window (a tier that needs more keeps its own inline guard). None: the window keeps `> 0` (a
    short window must not lose events a longer tier's guard already counted)."""
    if seconds not in guarded_windows(spec):
        return None
    needs = [
        m.min_events for m in (tier_math(spec, objective, t) for t in spec.tiers) if m.fires and m.tier.long == seconds
    ]
    return min(needs) if needs else None


def _enough(spec: Spec, objective: Objective, seconds) -> str:
    guard = folded_guard(spec, objective, seconds)
    return f">= {guard}" if guard else "> 0"  # a guard of 0 events: still no ratio (NaN) without events


def _recorded_ratio(spec: Spec, objective: Objective, seconds) -> str:
    good, total = (f"sum_over_time({_ref(spec, objective, name)}[{_span(seconds)}])" for name in (GOOD_1M, TOTAL_1M))
    return f"clamp(1 - {good} / ({total} {_enough(spec, objective, seconds)}), 0, 1)"


def _raw_ratio(spec: Spec, objective: Objective, seconds) -> str:
    """The window's error ratio from the raw counters, each read once: the costly side of the fallback. A bad or
    good counter not created yet counts 0 for every group whose total series exist now (an instant selector,
    not a second scan of the window)."""
    count = _raw_counter(window_name(seconds))
    sli, total_selector = objective.sli, _total_selector(spec, objective)
    zero = _zero(spec, total_selector)
    total = f"({_total_expr(spec, objective, count)} {_enough(spec, objective, seconds)})"
    if isinstance(sli, LatencySLI):
        ratio = f"1 - {_good_expr(spec, objective, count)}\n  / {total}"
    elif sli.good is not None:
        ratio = f"1 - ({count(spec, sli.good.with_matchers(*spec.selector))} or {zero})\n  / {total}"
    else:
        bad = "\n  + ".join(f"({count(spec, b.with_matchers(*spec.selector))} or {zero})" for b in sli.bad)
        ratio = f"(\n  {bad}\n)\n  / {total}"
    return f"clamp(\n  {ratio},\n  0, 1\n)"


def _covered(spec: Spec, objective: Objective, seconds) -> str:
    """Present for the groups whose per-minute counts began at least COVERAGE of the window ago: O(1), one
    sample per group."""
    return f"{_ref(spec, objective, TOTAL_1M)} offset {format_duration(seconds * COVERAGE)}"


def raw_fallback_inline(seconds) -> bool:
    """Windows up to 6h fall back to the raw counters in the same rule, every minute; longer ones in the
    objective's long-window group, every 10 minutes, and only while their recording is short."""
    return seconds <= INLINE_FALLBACK_MAX


def _window_rules(spec: Spec, objective: Objective) -> list[dict]:
    """One error ratio per tier window, read from the recorded per-minute counts where they cover the
    window, else from the raw counters."""
    rules = []
    for seconds in tier_windows(spec):
        covered = _covered(spec, objective, seconds)
        recorded = f"{_recorded_ratio(spec, objective, seconds)}\n  and {_on(spec)} {covered}"
        if raw_fallback_inline(seconds):
            expr = f"{recorded}\nor {_on(spec)}\n{_raw_ratio(spec, objective, seconds)}"
        else:
            expr = recorded
        rules.append(_recording(spec, objective, record("error_ratio", window_name(seconds)), expr))
    return rules


def _long_rules(spec: Spec, objective: Objective) -> list[dict]:
    """The long-window group: the raw-counter error ratio of each window over 6h while its recording is short,
    and the SLI over the SLO window (dashboards only)."""
    rules = [
        _recording(
            spec,
            objective,
            record("error_ratio_raw", window_name(seconds)),
            f"{_raw_ratio(spec, objective, seconds)}\nunless {_on(spec)} {_covered(spec, objective, seconds)}",
        )
        for seconds in tier_windows(spec)
        if not raw_fallback_inline(seconds)
    ]
    good, total = (
        f"sum_over_time({_ref(spec, objective, name)}[{_span(spec.window)}])" for name in (GOOD_1M, TOTAL_1M)
    )
    rules.append(_recording(spec, objective, SLI_RATIO, f"clamp({good} / ({total} > 0), 0, 1)"))
    return rules


def ratio_ref(spec: Spec, objective: Objective, seconds) -> str:
    """What an alert or a dashboard reads as the error ratio of a tier window."""
    ratio = _ref(spec, objective, record("error_ratio", window_name(seconds)))
    if raw_fallback_inline(seconds):
        return ratio
    raw = _ref(spec, objective, record("error_ratio_raw", window_name(seconds)))
    return f"({ratio} or last_over_time({raw}[{format_duration(2 * LONG_INTERVAL)}]))"


def reads_counts_inline(tier) -> bool:
    """A tier whose windows all fall back to the raw counters inline (both up to 6h: the page tiers) computes its
    windows in its own expression, reading no record of the same evaluation: the recorded per-minute counts of
    the minutes before this one (`offset` half a minute: this evaluation's own count is left out on every
    ruler), this minute's count from the raw counters beside them, and, while the counts do not cover the
    window yet, the raw window itself. A ruler that evaluates each rule on what the previous ones wrote only
    once it is stored (vmalert: remote write, then the query API) sees a record one evaluation late; a page
    reads the same data there as on Prometheus, so it comes at most one interval apart (the rulers' phases).
    Slower tiers read the recorded window ratios (two hops: they wait hours anyway)."""
    return raw_fallback_inline(tier.long) and raw_fallback_inline(tier.short)


def records_read_now(expr: str, records) -> set[str]:
    """The names among `records` that `expr` reads at its own evaluation's instant: each one a record written in
    the same evaluation on Prometheus and one evaluation late on vmalert (a hop). A read through `offset` takes
    earlier evaluations' records, the same on both."""
    read = set()
    for name in records:
        pattern = re.escape(name) + r"(?![\w:])(?:\{[^}]*\})?(?:\[[^\]]*\])?(\s+offset\b)?"
        if any(match.group(1) is None for match in re.finditer(pattern, expr)):
            read.add(name)
    return read


def record_hops(expr: str, records: dict[str, str]) -> int:
    """How many records deep `expr` reads at its own instant, `records` being its group's {record: expression}:
    the evaluations a ruler that sees a record one evaluation late (vmalert) lags behind Prometheus on it."""
    return max((1 + record_hops(records[name], records) for name in records_read_now(expr, records)), default=0)


def _fresh_sum(spec: Spec, objective: Objective, name: str, now: str, seconds, alone: bool = False) -> str:
    """A window's events, W/1m minutes, as fresh on every ruler as the raw counters: the recorded counts of the
    W/1m - 1 minutes before this one (`[W-1m] offset 30s`, which leaves out a count stamped now on Prometheus and
    takes the previous evaluation's whatever its jitter) plus this minute's count computed here; a group with no
    count now (its series vanished) keeps its recorded minutes, as the recorded window does; `alone`: a group with
    no earlier record (the first minute after a deployment) has this minute's count (the ratios need no such case:
    they read these sums only once the counts cover the window)."""
    recorded = (
        f"sum_over_time({_ref(spec, objective, name)}[{format_duration(seconds - BASE)}] "
        f"offset {format_duration(BASE / 2)})"
    )
    first = f"\n  or {_on(spec)} (\n  {now}\n)" if alone else ""
    return f"({recorded} + {_on(spec)} (\n  {now}\n)\n  or {_on(spec)} {recorded}{first})"


def _fresh_ratio(spec: Spec, objective: Objective, seconds) -> str:
    """The window's error ratio from fresh sums (`_fresh_sum`): on Prometheus exactly the recorded ratio of this
    evaluation, sums over sums."""
    good = _fresh_sum(spec, objective, GOOD_1M, _good_expr(spec, objective), seconds)
    total = _fresh_sum(spec, objective, TOTAL_1M, _total_expr(spec, objective), seconds)
    return f"clamp(1 - {good}\n  / ({total} {_enough(spec, objective, seconds)}), 0, 1)"


def _alert_ratio(spec: Spec, objective: Objective, seconds, inline: bool) -> str:
    """The window's error ratio as an alert reads it: the recorded ratio, or (inline) the fresh ratio where the
    per-minute counts cover the window, else the raw counters' ratio, both computed here: on Prometheus the values
    the window's record holds in the same evaluation."""
    if not inline:
        return ratio_ref(spec, objective, seconds)
    fresh = f"{_fresh_ratio(spec, objective, seconds)}\n  and {_on(spec)} {_covered(spec, objective, seconds)}"
    return f"(\n  {fresh}\n  or {_on(spec)}\n  {_raw_ratio(spec, objective, seconds)}\n)"


# --- stage 3: burn-rate alerts -----------------------------------------------------------------------------


def _group_phrase(spec: Spec) -> str:
    return "".join(f" {label}={{{{ $labels.{label} }}}}" for label in spec.group_by)


def triage_command(alert: str, matchers: list[tuple[str, str]]) -> str:
    """The `inferwatch triage --alert` command an alert's annotation carries, to be pasted as it is: this
    Prometheus (`$externalURL`, its --web.external-url; where a Thanos or Mimir ruler evaluates the rules, give
    the URL it is queried at instead), the alert's name, and a label matcher for each label that tells this alert
    from the others (`VALUE` may be a `{{ $labels.x }}` template), each shell-quoted."""
    picks = "".join(f" --alert-match {_shell_template(label, value)}" for label, value in matchers)
    return f"inferwatch triage --prometheus {{{{ $externalURL }}}} --alert {alert}{picks}"


def _shell_template(label: str, value: str) -> str:
    """`'label=value'` for the shell: a template value is single-quoted as it stands (Prometheus fills it in),
    a literal one is quoted by shlex and its braces kept from the template engine."""
    if value.startswith("{{ $labels."):
        return f"'{label}={value}'"
    return literal(shlex.quote(f"{label}={value}"))


def _triage_hint(spec: Spec, objective: Objective, tier: str) -> str:
    """How to ask `inferwatch triage` about this alert: its name and the labels that pick it (the spec's service,
    the objective, the tier, and the group's labels)."""
    fixed = [("service", spec.service), ("slo", objective.name), ("tier", tier)]
    command = triage_command(BURN_ALERT, fixed + [(label, f"{{{{ $labels.{label} }}}}") for label in spec.group_by])
    if "model" not in spec.group_by:  # the alert names no model: the one the selector fixes, else every model
        model = next((m.value for m in spec.selector if m.label == "model" and m.op == "="), None)
        command += f" --model {literal(shlex.quote(model))}" if model else ""
    return command


def _rounded(factor) -> str:
    """A burn factor for people: three significant digits (13.4, 0.933), never 0.933333."""
    return f"{float(factor):.3g}"


def _burn_phrase(factor) -> str:
    """'13.4x too fast' above the sustainable rate; a slow tier's factor under 1 is no 'too fast'."""
    if factor > 1:
        return f"{_rounded(factor)}x too fast"
    return f"at {_rounded(factor)}x the sustainable rate"


def _history_guard(spec: Spec, objective: Objective, m: TierMath) -> str:
    """The tier fires only for groups whose raw SLI series reach back its history (tiers.yaml): any sample in the
    hour before that. Read from the raw series, not our records, so installing the rules on a
    Prometheus that has the engines' history holds nothing back, and a ruler that sees records late (vmalert)
    reads it as Prometheus does."""
    by = ", ".join(spec.group_by)
    raw = _total_selector(spec, objective).render()
    return (
        f"and {_on(spec)} group by ({by}) (last_over_time({raw}[{HISTORY_LOOKBACK}] "
        f"offset {format_duration(m.history)}))"
    )


def _burn_alert(spec: Spec, objective: Objective, m: TierMath) -> dict:
    long_w, short_w = window_name(m.tier.long), window_name(m.tier.short)
    threshold = decimal(m.threshold)
    inline = reads_counts_inline(m.tier)
    both = f"and {_on(spec)}" if inline else "and"  # inline, a window read from the raw counters has no service/slo
    expr = (
        f"{_alert_ratio(spec, objective, m.tier.long, inline)} > {threshold}\n"
        f"{both} {_alert_ratio(spec, objective, m.tier.short, inline)} > {threshold}"
    )
    guard = folded_guard(spec, objective, m.tier.long)
    if guard is None or guard < m.min_events:  # not folded into the long window's ratio: summed here
        if inline:
            total = _fresh_sum(spec, objective, TOTAL_1M, _total_expr(spec, objective), m.tier.long, alone=True)
        else:
            total = f"sum_over_time({_ref(spec, objective, TOTAL_1M)}[{_span(m.tier.long)}])"
        expr += f"\n{both} {total} >= {m.min_events}"
    if m.history:
        expr += f"\n{_history_guard(spec, objective, m)}"
    annotations = {
        "summary": f"{spec.service}/{objective.name}{_group_phrase(spec)}: error budget burning "
        f"{_burn_phrase(m.factor)} ({m.tier.name})",
        "description": (
            f"Objective: {decimal(objective.target * 100)}% of {objective.sli.means} over "
            f"{window_name(spec.window)}. Over the last {long_w} and {short_w} more than "
            f"{decimal(m.threshold * 100)}% of events were bad (burn rate over {_rounded(m.factor)}x): "
            f"{decimal(m.tier.budget_percent)}% of the error budget is gone in {long_w}, all of it in "
            f"{window_name(m.exhaustion)}. What kind of slow or broken: "
            f"`{_triage_hint(spec, objective, m.tier.name)}`."
        ),
        "runbook_url": runbook_url(objective.runbook_url, BURN_ALERT),
    }
    annotations.update(dict(objective.annotations))
    labels = {
        **_ident(spec, objective),
        "tier": m.tier.name,
        "severity": m.tier.severity,
        "long_window": long_w,
        "short_window": short_w,
        **_user_labels(spec, objective),
    }
    return {"alert": BURN_ALERT, "expr": expr, "labels": labels, "annotations": annotations}


# --- stage 4: missing data ---------------------------------------------------------------------------------


def _missing_alert(spec: Spec, objective: Objective) -> dict:
    """Reads no record of its own evaluation, as the pages (`reads_counts_inline`): this minute's counts are
    computed here (on Prometheus the values of the records beside them), the earlier minutes' read through
    `offset` half a minute, so a ruler that sees a record one evaluation late (vmalert) pages on the same data."""
    total, good = _total_expr(spec, objective), _good_expr(spec, objective)
    earlier = (
        f"max_over_time({_ref(spec, objective, TOTAL_1M)}[{format_duration(MISSING_SECONDS - BASE / 2)}] "
        f"offset {format_duration(BASE / 2)})"
    )
    raw = _total_selector(spec, objective).render()
    by = f"group by ({', '.join(dict.fromkeys([*spec.group_by, 'job', 'instance', 'target']))})"
    # the sources that served the SLI within the hour and serve it no more, from the raw series
    gone = f"({by} (last_over_time({raw}[{MISSING_LOOKBACK}]))\n    unless {by} ({raw}))"
    # "no series at all" reads the raw series, not our records: a ruler that sees its records an evaluation
    # late (vmalert) or a fresh deployment must not page before the first record exists; `group` drops the
    # selector's equality labels, so the alert keeps the labels it always had
    expr = (
        f"group(absent_over_time({raw}[{MISSING_LOOKBACK}]))\n"
        f"or ((\n  {total}\n) unless {_on(spec)} (\n  {good}\n))\n"
        f"or ({gone}\n    and on (job, instance) (up == 0))\n"
        f"or ({gone}\n    and on (job, instance, target) (inferwatch_exporter_target_up == 0))\n"
        f"or ({earlier} unless {_on(spec)} (\n  {total}\n))"
    )
    annotations = {
        "summary": f"{spec.service}/{objective.name}{_group_phrase(spec)}: SLI data missing",
        "description": (
            f"The series behind {spec.service}/{objective.name} ({literal(_total_selector(spec, objective).render())}) "
            "are absent, vanished within the last hour, lack the good-event series (for a latency SLI: no bucket "
            "at the threshold), or their scrape target is down. Until they are back the "
            "burn-rate alerts of this objective cannot fire: treat it as an outage, not as good news."
        ),
        "runbook_url": runbook_url(objective.runbook_url, MISSING_ALERT),
    }
    # the user's own summary and description speak of the burn; keep ours for missing data
    annotations.update({k: v for k, v in objective.annotations if k not in ("summary", "description")})
    labels = {**_ident(spec, objective), "severity": "critical", **_user_labels(spec, objective)}
    return {
        "alert": MISSING_ALERT,
        "expr": expr,
        "for": format_duration(spec.missing_data_for),
        "labels": labels,
        "annotations": annotations,
    }


def _inhibit_rules(spec: Spec) -> list[dict]:
    """A faster tier silences the slower ones of the same objective (and group)."""
    names = [t.name for t in spec.tiers]
    return [
        {
            "source_matchers": [f'alertname="{BURN_ALERT}"', f'service="{spec.service}"', f'tier="{name}"'],
            "target_matchers": [
                f'alertname="{BURN_ALERT}"',
                f'service="{spec.service}"',
                f'tier=~"{"|".join(names[i + 1 :])}"',
            ],
            "equal": ["service", "slo", *spec.group_by],
        }
        for i, name in enumerate(names[:-1])
    ]


# --- stage 5: label templates in annotations -----------------------------------------------------------------

_LABEL_ACTION = re.compile(r"\{\{\s*\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}")


def _fixed_labels(spec: Spec, objective: Objective) -> dict[str, str]:
    """The labels every series of the objective's total holds at one value: its equality matchers."""
    return {m.label: m.value for m in _total_selector(spec, objective).matchers if m.op == "="}


def _write_out_labels(spec: Spec, objective: Objective, alerts: list[dict]) -> list[str]:
    """Write out each annotation's `{{ $labels.X }}` whose X the alert's expression does not carry but whose
    value is known: a label the rule sets (Prometheus sets those after rendering the annotations) or one fixed
    by the SLI's selectors. Warns of the X that render empty on every alert of the objective."""
    carried = {BURN_ALERT: set(spec.group_by), MISSING_ALERT: set(spec.group_by)}
    fixed = {k: literal(v) for k, v in _fixed_labels(spec, objective).items()}
    written: set[tuple[str, str]] = set()  # (annotation, label) written out on at least one alert
    unknown: set[tuple[str, str]] = set()  # (annotation, label) left to render empty on at least one alert
    for rule in alerts:
        known = {**fixed, **rule["labels"], "alertname": rule["alert"]}
        for key, text in rule["annotations"].items():

            def write(match, key=key, carried=carried[rule["alert"]], known=known):
                label = match.group(1)
                if label in carried:
                    return match.group(0)
                (written if label in known else unknown).add((key, label))
                return known.get(label, match.group(0))

            rule["annotations"][key] = _LABEL_ACTION.sub(write, text)
    return [
        f"{spec.file}: {objective.name}: annotations.{key}: {{{{ $labels.{label} }}}} renders empty: the "
        f'alerts carry no {label} label; select one {label} with {label}="..." in the SLI\'s selectors, or '
        f"add it to group_by for an SLO per {label}"
        for key, label in sorted(unknown - written)
    ]
