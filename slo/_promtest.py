"""Generate `promtool test rules` cases for every objective of a compiled spec.

Each objective gets the same scenarios, each built from exact per-minute
counts (`_series.py`) whose expected outcome comes from `_oracle.py`, never
from the rules under test:

- a total outage fires the fastest page tier within its predicted detection
  time, and every tier that fired resolves within its short window of recovery;
- a slow burn fires a ticket but no page;
- an error rate at half the budget (or half the slowest tier's burn) fires nothing;
- zero traffic records no NaN and fires nothing;
- every window's error ratio reads the same from the raw counters (the first minutes: the fallback while the
  recording is short) and from the recorded per-minute counts;
- one bad request in an hour of ten requests does not page;
- series that vanish (with or without a staleness marker) stop counting within
  one scrape interval, and they, a failing scrape target and no series at all
  each fire LLMSLIDataMissing exactly when `missing_data_for` has passed;
- every spelling of the threshold's bucket (`le="1"`, `le="1.0"`) is counted.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from inferwatch.durations import format_duration, format_seconds
from inferwatch.slo._burn import BASE, TierMath, decimal, tier_math, tier_windows
from inferwatch.slo._model import LatencySLI, Objective
from inferwatch.slo._oracle import Counts
from inferwatch.slo._rules import (
    BURN_ALERT,
    LITERAL_BRACES,
    MISSING_ALERT,
    RuleSet,
    folded_guard,
    raw_fallback_inline,
    record,
    window_name,
)
from inferwatch.slo._selector import le_spellings
from inferwatch.slo._series import Segment, Source, group_labels, input_series, per_minute, scrape_labels, series_name

__all__ = ["promtool_tests", "GeneratorError"]

HEALTHY_BEFORE = 65  # minutes of clean traffic before an outage, so the 1h window is full


class GeneratorError(AssertionError):
    """The oracle disagrees with a property the generated tests are meant to prove: a compiler bug."""


def promtool_tests(ruleset: RuleSet, objective: Objective, rule_file: str) -> dict:
    """The promtool test document for one objective, whose group alone is in `rule_file` (a path relative to
    the test file).

    Raises SeriesError when no input series can satisfy the SLI's selectors.
    """
    # promtool evaluates every group at every step, in an arbitrary order unless told: the long-window group
    # first, so the alerts read its fallbacks of the same minute
    order = [g["name"] for g in ruleset.objective_groups(objective)]
    return {
        "rule_files": [rule_file],
        "evaluation_interval": "1m",
        "group_eval_order": order,
        "tests": _Objective(ruleset, objective).tests(),
    }


def _minutes(seconds) -> int:
    return math.ceil(Fraction(seconds) / BASE)


_ACTION = re.compile(
    re.escape(LITERAL_BRACES) + r"|\{\{\s*\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}|(\{\{\s*\$externalURL\s*\}\})"
)
# the Prometheus URL the tests render in the triage command (`$externalURL`): each test group sets it
EXTERNAL_URL = "http://prometheus:9090"


def _expand(text: str, labels: dict[str, str]) -> str:
    """What Prometheus renders: the only actions in generated rules are $labels, $externalURL and literal braces."""
    return _ACTION.sub(
        lambda m: EXTERNAL_URL if m.group(2) else ("{{" if m.group(1) is None else labels.get(m.group(1), "")), text
    )


class _Objective:
    """The scenarios of one objective, with the rules it compiled to."""

    def __init__(self, ruleset: RuleSet, objective: Objective):
        spec = ruleset.spec
        self.spec, self.objective = spec, objective
        self.maths = [m for m in (tier_math(spec, objective, t) for t in spec.tiers) if m.fires]
        group = next(g for g in ruleset.groups if g["name"] == f"inferwatch-slo-{spec.service}-{objective.name}")
        self.alerts = {(r["alert"], r["labels"].get("tier")): r for r in group["rules"] if "alert" in r}
        self.ident = {"service": spec.service, "slo": objective.name, **group_labels(spec, objective)}
        self.rate = Fraction(100)
        while any(self.rate * _minutes(m.tier.long) < 2 * m.min_events for m in self.maths):
            self.rate *= 10

    # --- building blocks ------------------------------------------------------------------------------

    def _alert(self, name: str, tier: str | None, expr_labels: dict[str, str]) -> dict:
        rule = self.alerts[(name, tier)]
        return {
            "exp_labels": {**expr_labels, **{k: _expand(v, expr_labels) for k, v in rule["labels"].items()}},
            "exp_annotations": {k: _expand(v, expr_labels) for k, v in rule["annotations"].items()},
        }

    def _burn_check(self, t: int, tiers: list[TierMath]) -> dict:
        return {
            "eval_time": f"{t}m",
            "alertname": BURN_ALERT,
            "exp_alerts": [self._alert(BURN_ALERT, m.tier.name, self.ident) for m in tiers],
        }

    def _missing_check(self, t: int, *expr_labels: dict[str, str]) -> dict:
        return {
            "eval_time": f"{t}m",
            "alertname": MISSING_ALERT,
            "exp_alerts": [self._alert(MISSING_ALERT, None, labels) for labels in expr_labels],
        }

    def _case(
        self, name: str, segments, checks: list[dict], sources=(Source(),), stale=False, extra=(), exprs=()
    ) -> dict:
        case = {
            "name": f"{self.spec.service}/{self.objective.name}: {name}",
            "interval": "1m",
            "external_url": EXTERNAL_URL,
            "input_series": input_series(self.spec, self.objective, segments, sources, stale) + list(extra),
            "alert_rule_test": checks,
        }
        if exprs:
            case["promql_expr_test"] = list(exprs)
        return case

    def _sample(self, name: str, t: int, value) -> dict:
        samples = [] if value is None else [{"labels": series_name(name, self.ident), "value": float(value)}]
        sel = ", ".join(f'{k}="{v}"' for k, v in (("service", self.spec.service), ("slo", self.objective.name)))
        return {"expr": f"{name}{{{sel}}}", "eval_time": f"{t}m", "exp_samples": samples}

    def _present(self, name: str, t: int) -> dict:
        sel = ", ".join(f'{k}="{v}"' for k, v in (("service", self.spec.service), ("slo", self.objective.name)))
        return {"expr": f"count({name}{{{sel}}})", "eval_time": f"{t}m", "exp_samples": [{"labels": "{}", "value": 1}]}

    def _steady(self, name: str, error_ratio: Fraction, minutes: int, checks_at, want, rate=None) -> dict:
        rate = rate or self.rate
        segments = [Segment(minutes, rate, rate * error_ratio)]
        counts = Counts(*per_minute(segments))
        checks = []
        for t in checks_at:
            tiers = counts.firing(self.maths, t)
            if not want(tiers):
                raise GeneratorError(
                    f"{self.objective.name}: {name}: at {t}m the oracle fires {[m.tier.name for m in tiers]}"
                )
            checks.append(self._burn_check(t, tiers))
        checks.append(self._missing_check(max(checks_at)))
        return self._case(name, segments, checks)

    # --- scenarios --------------------------------------------------------------------------------------

    def tests(self) -> list[dict]:
        cases = [self._counting(), self._zero_traffic(), self._low_traffic(), *self._missing()]
        if self.maths:
            cases += [self._outage(), self._half_budget()]
            slow = self._slow_burn()
            if slow:
                cases.append(slow)
        return cases

    def _outage(self) -> dict:
        fastest = self.maths[0]
        predicted = _minutes(fastest.detection(Fraction(1)))
        rate = self.rate  # enough events by the predicted time, when a slow tier's long window is not full
        while rate * min(_minutes(fastest.tier.long), HEALTHY_BEFORE + predicted) < fastest.min_events:
            rate *= 10
        before = [Segment(HEALTHY_BEFORE, rate)]
        outage = before + [Segment(predicted + 10, rate, rate)]
        counts = Counts(*per_minute(outage))
        fired_at = next(
            (t for t in range(HEALTHY_BEFORE, counts.minutes + 1) if fastest in counts.firing(self.maths, t)),
            counts.minutes + 1,
        )
        if fired_at > HEALTHY_BEFORE + predicted + 1:
            raise GeneratorError(
                f"{self.objective.name}: outage fires at {fired_at}m, predicted by {HEALTHY_BEFORE + predicted + 1}m"
            )
        recovered = counts.minutes
        fired = {m.tier.name: m for t in range(HEALTHY_BEFORE, recovered + 1) for m in counts.firing(self.maths, t)}
        end = recovered + max(_minutes(m.tier.short) for m in fired.values()) + 1
        segments = outage + [Segment(end - recovered, rate)]
        counts = Counts(*per_minute(segments))
        times = {HEALTHY_BEFORE, fired_at - 1, fired_at}
        times |= {recovered + _minutes(m.tier.short) for m in fired.values()}
        checks = []
        for t in sorted(times):
            tiers = counts.firing(self.maths, t)
            for m in fired.values():
                if t >= recovered + _minutes(m.tier.short) and m in tiers:
                    raise GeneratorError(
                        f"{self.objective.name}: {m.tier.name} still fires {t - recovered}m after recovery"
                    )
            checks.append(self._burn_check(t, tiers))
        name = (
            f"total outage fires {fastest.tier.name} within {format_seconds(fastest.detection(Fraction(1)))} "
            f"(at {fired_at - HEALTHY_BEFORE}m), and each tier resolves within its short window"
        )
        return self._case(name, segments, checks)

    def _slow_burn(self) -> dict | None:
        pages = [m.factor for m in self.maths if m.tier.severity == "critical"]
        tickets = [m.factor for m in self.maths if m.tier.severity != "critical"]
        if not pages or not tickets or max(tickets) >= min(pages):
            return None
        burn = (max(tickets) + min(pages)) / 2
        if burn * self.objective.budget >= 1:
            return None
        rate = self.rate  # enough events in 3 hours for the ticket tiers' min_events, not just in their windows
        while any(
            rate * min(180, _minutes(m.tier.long)) < m.min_events for m in self.maths if m.tier.severity != "critical"
        ):
            rate *= 10
        return self._steady(
            f"a {decimal(burn)}x burn opens a ticket but does not page",
            burn * self.objective.budget,
            180,
            [180],
            lambda tiers: tiers and all(m.tier.severity != "critical" for m in tiers),
            rate,
        )

    def _half_budget(self) -> dict:
        """Errors at half the budget, or at half the slowest tier's burn where a short SLO window makes a
        ticket tier fire below 1x (7d: 0.233x over 3d)."""
        burn = min([Fraction(1, 2)] + [m.factor / 2 for m in self.maths])
        name = "half the budget" if burn == Fraction(1, 2) else f"{decimal(burn)}x the budget"
        return self._steady(
            f"errors at {name} fire nothing", burn * self.objective.budget, 180, [60, 120, 180], lambda tiers: not tiers
        )

    def _zero_traffic(self) -> dict:
        checks = [self._burn_check(t, []) for t in (60, 120)] + [self._missing_check(120)]
        exprs = [self._sample(name, 120, None) for name in self._ratio_names()]
        exprs.append(self._sample(record("total", "increase1m"), 120, 0))
        return self._case(
            "zero traffic records no NaN and fires nothing", [Segment(120, Fraction(0))], checks, exprs=exprs
        )

    def _ratio_names(self) -> list[str]:
        """The error ratio of every tier window, as recorded in the first hours (the raw fallback above 6h)."""
        return [
            record("error_ratio" if raw_fallback_inline(w) else "error_ratio_raw", window_name(w))
            for w in tier_windows(self.spec)
        ]

    def _low_traffic(self) -> dict:
        segments = []
        for i in range(10):
            segments += [Segment(5, Fraction(0)), Segment(1, Fraction(1), Fraction(1 if i == 4 else 0))]
        counts = Counts(*per_minute(segments))
        checks = []
        for t in (30, 31, 45, 60):
            tiers = counts.firing(self.maths, t)
            if any(m.tier.severity == "critical" for m in tiers):
                raise GeneratorError(f"{self.objective.name}: one bad request in ten pages at {t}m")
            checks.append(self._burn_check(t, tiers))
        return self._case("one bad request in an hour of ten requests does not page", segments, checks)

    def _missing(self) -> list[dict]:
        """Missing data, each firing exactly when `missing_data_for` has passed since the data went."""
        healthy, last = [Segment(30, self.rate)], 30
        wait = _minutes(self.spec.missing_data_for)

        def fires(gone: int, *expected: dict[str, str]) -> list[dict]:
            return [
                self._missing_check(last),
                self._missing_check(gone + wait - 1),
                self._missing_check(gone + wait, *expected),
            ]

        # a target that leaves service discovery: Prometheus writes staleness markers at the next scrape
        vanish = self._case(
            "series that vanish stop counting at once and fire LLMSLIDataMissing",
            healthy,
            fires(last + 1, self.ident) + [self._burn_check(last + 1 + wait, [])],
            stale=True,
            exprs=self._stop_counting(counted_until=last),
        )
        # no staleness marker (a Prometheus restart, a remote-write gap): the series just ends; the 5m-rate
        # fallback may count one more minute, as for a scrape that is merely late, then nothing
        ends = self._case(
            "series that end without a staleness marker stop counting within one scrape interval",
            healthy,
            fires(last + 2, self.ident),
            exprs=self._stop_counting(counted_until=last + 1),
        )
        # two engines of one group, one ends: the live one goes on counting, the dead one stops (its freshness
        # is matched per series; `on ()` would let the live one keep the dead one counting)
        half = self.rate / 2
        dead, live = (Source(instance=f"engine-{i}:8000", share=Fraction(1, 2)) for i in range(2))
        total = record("total", "increase1m")
        one = self._case(
            "of two engines one ends: only the live one counts",
            healthy,
            [self._missing_check(last + 2 + wait)],
            sources=(dead,),
            extra=input_series(self.spec, self.objective, [Segment(last + 10, self.rate)], (live,)),
            exprs=[
                self._sample(total, last, self.rate),
                self._sample(total, last + 2, half),
                self._sample(total, last + 9, half),
            ],
        )
        engine = scrape_labels(self.spec, self.objective)
        down = self._case(
            "a failing scrape target fires LLMSLIDataMissing",
            healthy,
            fires(last + 1, {**self.ident, **engine}, self.ident),
            stale=True,
            extra=[{"series": series_name("up", engine), "values": f"1x{last} 0x{wait + 10}"}],
        )
        source = Source(instance="exporter:9400", target="engine-0")
        exporter = scrape_labels(self.spec, self.objective, source)
        behind = self._case(
            "an engine failing behind the normalizing exporter fires LLMSLIDataMissing",
            healthy,
            fires(last + 1, {**self.ident, **exporter}, self.ident),
            sources=(source,),
            stale=True,
            extra=[
                {
                    "series": series_name("up", {k: v for k, v in exporter.items() if k != "target"}),
                    "values": f"1x{last + wait + 10}",
                },
                {"series": series_name("inferwatch_exporter_target_up", exporter), "values": f"1x{last} 0x{wait + 10}"},
            ],
        )
        ident = {"service": self.spec.service, "slo": self.objective.name}
        never = {
            "name": f"{self.spec.service}/{self.objective.name}: no series at all fires LLMSLIDataMissing",
            "interval": "1m",
            "external_url": EXTERNAL_URL,
            "input_series": [{"series": series_name("up", engine), "values": "1x10"}],
            "alert_rule_test": [self._missing_check(wait - 1), self._missing_check(wait, ident)],
        }
        return [vanish, ends, one, down, behind, never]

    def _stop_counting(self, counted_until: int) -> list[dict]:
        """The per-minute counts exist through `counted_until` and not a minute longer, so no phantom
        requests are recorded; the 5m error ratio then goes from real minutes to nothing, never to a 0 made of
        phantom good events. (Presence is checked with count(): a 5m-rate value is not exact in floats.)"""
        last_real = counted_until + _minutes(300) - 1
        return [
            self._present(record("total", "increase1m"), counted_until),
            self._sample(record("total", "increase1m"), counted_until + 1, None),
            self._sample(record("good", "increase1m"), counted_until + 1, None),
            self._present(record("error_ratio", "5m"), last_real),
            self._sample(record("error_ratio", "5m"), last_real + 1, None),
        ]

    def _counting(self) -> dict:
        """Good and total with a quarter of events bad, over two targets (latency: both `le` spellings); every
        window's ratio reads the same from the raw counters and the recorded ones; then, after a clean hour, the
        1h window holds exactly 60 minutes (a 61st would bring back the bad quarter)."""
        spellings = le_spellings(self.objective.sli.threshold) if isinstance(self.objective.sli, LatencySLI) else [""]
        sources = tuple(
            Source(instance=f"engine-{i}:8000", le=i, share=Fraction(1, len(spellings))) for i in range(len(spellings))
        )
        shown = " and ".join(f'le="{s}"' for s in spellings) if spellings != [""] else "good and total"
        windows = tier_windows(self.spec)
        window = Fraction(3600) if 3600 in windows else windows[0]
        clean = _minutes(window)
        # enough events in the first 10 minutes for every window whose ratio carries its tiers' min_events guard
        rate = self.rate
        while any(rate * 10 < (folded_guard(self.spec, self.objective, w) or 0) for w in windows):
            rate *= 10
        segments = [Segment(10, rate, rate / 4), Segment(clean, rate)]
        counts = Counts(*per_minute(segments))
        exprs = [
            self._sample(record("total", "increase1m"), 10, rate),
            self._sample(record("good", "increase1m"), 10, rate * 3 / 4),
            self._sample(record("error_ratio", "5m"), 3, Fraction(1, 4)),
        ]  # from the raw counters
        # every window's ratio, from the recorded counts (5m) or the raw counters, reads the same quarter
        exprs += [self._sample(name, 10, Fraction(1, 4)) for name in self._ratio_names()]
        end = 10 + clean
        total, bad = counts.window(end, window)
        assert bad == 0 and total == clean * rate
        sel = ", ".join(f'{k}="{v}"' for k, v in (("service", self.spec.service), ("slo", self.objective.name)))
        exprs += [
            self._sample(record("error_ratio", window_name(window)), end, 0),
            # the alerts' min_events guard sums the same minutes
            {
                "expr": f"sum_over_time({record('total', 'increase1m')}{{{sel}}}[{format_duration(window - 30)}])",
                "eval_time": f"{end}m",
                "exp_samples": [{"labels": series_name("", self.ident), "value": float(total)}],
            },
        ]
        return self._case(
            f"{shown} are all counted, each minute once",
            segments,
            [self._burn_check(10, counts.firing(self.maths, 10))],
            sources=sources,
            exprs=exprs,
        )
