"""Canary against stable over one window, from Prometheus: each signal of signals.yaml for both sides (sums
over sums of increase()), then a verdict per signal and for the whole.

A latency signal fails when the canary's share of requests over the stable side's p90 bucket bound is higher
by the one-sided test (p < alpha) and its mean is more than `latency_tolerance` above the stable mean. A share
fails when it is higher by the test and more than `share_tolerance` above the stable share (relatively), and
at least `min_bad` bad events more than the stable share predicts. Too few requests on either side, or a
traffic mix that differs (prompt length, prefix-cache hits: TTFT depends on both), read inconclusive rather
than pass or fail.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib.resources import files

import promql_parser

from inferwatch.canary._stats import bound_at_or_over, one_sided_p, share_over
from inferwatch.errors import InferwatchError
from inferwatch.slo import Matcher, Selector, builtin_sli
from inferwatch.triage import bucket_quantile
from inferwatch.yamlio import safe_load

__all__ = ["Settings", "Finding", "Report", "compare", "parse_selector", "SelectorError", "signals"]

_OPS = {"MatchOp.Equal": "=", "MatchOp.NotEqual": "!=", "MatchOp.Re": "=~", "MatchOp.NotRe": "!~"}
PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"
EXIT = {PASS: 0, FAIL: 1, INCONCLUSIVE: 3}


class SelectorError(InferwatchError):
    exit_code = 2


@dataclass(frozen=True)
class Settings:
    window: str = "30m"
    alpha: float = 0.01  # the one-sided test's significance level
    min_requests: int = 100  # per side and signal, else inconclusive
    latency_tolerance: float = 0.10  # a canary mean this much above the stable mean is a regression
    share_tolerance: float = 0.5  # a bad share this much above the stable one (relatively) is a regression
    min_bad: int = 3  # and this many bad events more than the stable share predicts
    mix_tolerance: float = 0.25  # prompt length or cache hits this much apart: latency inconclusive


@dataclass(frozen=True)
class Finding:
    signal: str
    means: str
    kind: str  # latency or share
    stable: float | None
    canary: float | None
    ratio: float | None
    p_value: float | None
    n_stable: float
    n_canary: float
    verdict: str
    why: str
    detail: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Report:
    model: str
    source: str
    window: str
    at: float | None
    verdict: str
    findings: tuple[Finding, ...]
    mix: tuple[Finding, ...]
    skipped: tuple[str, ...]  # signals with no series on either side, and why

    @property
    def exit_code(self) -> int:
        return EXIT[self.verdict]


@lru_cache(maxsize=1)
def signals() -> dict:
    return safe_load((files("inferwatch.canary") / "signals.yaml").read_text(encoding="utf-8"))


def parse_selector(text: str, flag: str) -> tuple[Matcher, ...]:
    """`version="v2"` or `{version="v2", pod=~"x-.*"}` into matchers; SelectorError naming the flag."""
    body = text.strip()
    body = body[1:-1] if body.startswith("{") and body.endswith("}") else body
    try:
        parsed = promql_parser.parse("x{" + body + "}")
        if not isinstance(parsed, promql_parser.VectorSelector):
            raise ValueError("not one selector")
        matchers = tuple(
            Matcher(m.name, _OPS[str(m.op)], m.value) for m in parsed.matchers.matchers if m.name != "__name__"
        )
    except (ValueError, KeyError, AttributeError) as err:
        raise SelectorError(
            f"{flag} {text!r}: not a label selector ({err}); write e.g. 'version=\"v2\"' or 'pod=~\"llama-7d9f.*\"'"
        ) from None
    if not matchers:
        raise SelectorError(f"{flag} {text!r}: selects nothing apart; give at least one matcher, e.g. 'version=\"v2\"'")
    return matchers


def _selector(text: str) -> Selector:
    parsed = promql_parser.parse(text)
    assert isinstance(parsed, promql_parser.VectorSelector) and parsed.name, text  # signals.yaml's own
    return Selector(
        parsed.name,
        tuple(Matcher(m.name, _OPS[str(m.op)], m.value) for m in parsed.matchers.matchers if m.name != "__name__"),
    )


class _Side:
    """One side's queries: everything summed over the window at `at`, restricted to the model and selector."""

    def __init__(self, client, model: str, matchers: tuple[Matcher, ...], settings: Settings, at: float | None):
        self.client, self.extra, self.settings, self.at = (
            client,
            (Matcher("model", "=", model), *matchers),
            settings,
            at,
        )

    def _increase(self, selector: Selector, by: str = "") -> list[dict]:
        grouping = f" by ({by})" if by else ""
        expr = f"sum{grouping} (increase({selector.render(*self.extra)}[{self.settings.window}]))"
        return self.client.query(expr, self.at)

    def count(self, selector: Selector) -> float | None:
        rows = self._increase(selector)
        return float(rows[0]["value"][1]) if rows else None

    def buckets(self, histogram: str, matchers: tuple[Matcher, ...]) -> list[tuple[float, float]]:
        rows = self._increase(Selector(histogram + "_bucket", matchers), by="le")
        merged: dict[float, float] = {}
        for row in rows:  # le="1" and le="1.0" are one bound
            le = float(row["metric"].get("le", "nan"))
            if not math.isnan(le):
                merged[le] = merged.get(le, 0.0) + float(row["value"][1])
        return sorted(merged.items())


def _bad_and_total(side: _Side, definition: dict, source: str) -> tuple[float | None, float | None]:
    if definition["bad"] == "answered":
        sli = builtin_sli("answered", source)
        total = side.count(sli.total)
        if total is not None:
            total -= sum(side.count(e) or 0.0 for e in sli.exclude)
        if sli.good is not None:
            good = side.count(sli.good)
            return (None if total is None else total - (good or 0.0)), total
        return (None if total is None else sum(side.count(b) or 0.0 for b in sli.bad)), total
    if definition["bad"] == "not_good":
        judged = side.count(Selector("llm_frontdoor_goodput_judged_requests_total"))
        good = side.count(Selector("llm_frontdoor_goodput_good_requests_total"))
        return (None if judged is None else judged - (good or 0.0)), judged
    total = side.count(_selector(definition["of"]))
    bad = side.count(_selector(definition["bad"]))
    return (0.0 if bad is None and total is not None else bad), total


def _enough(n_stable: float, n_canary: float, settings: Settings) -> str:
    short = [f"{name} {n:.0f}" for name, n in (("stable", n_stable), ("canary", n_canary)) if n < settings.min_requests]
    return f"too few requests ({', '.join(short)}; --min-requests {settings.min_requests})" if short else ""


def _latency(name: str, definition: dict, stable: _Side, canary: _Side, settings: Settings) -> Finding | None:
    matchers = tuple(parse_selector(definition["matchers"], "signals.yaml") if definition.get("matchers") else ())
    hist = definition["histogram"]
    sb, cb = stable.buckets(hist, matchers), canary.buckets(hist, matchers)
    if not sb and not cb:
        return None
    n_s, n_c = (sb[-1][1] if sb else 0.0), (cb[-1][1] if cb else 0.0)
    sum_s = stable.count(Selector(hist + "_sum", matchers)) or 0.0
    sum_c = canary.count(Selector(hist + "_sum", matchers)) or 0.0
    mean_s = sum_s / n_s if n_s > 0 else None
    mean_c = sum_c / n_c if n_c > 0 else None
    base = dict(
        signal=name,
        means=definition["means"],
        kind="latency",
        stable=mean_s,
        canary=mean_c,
        n_stable=n_s,
        n_canary=n_c,
        p_value=None,
        ratio=None,
    )
    if short := _enough(n_s, n_c, settings):
        return Finding(**base, verdict=INCONCLUSIVE, why=short)
    assert mean_c is not None  # both sides counted requests (_enough)
    ratio = mean_c / mean_s if mean_s else math.inf
    p90_s = bucket_quantile(0.9, sb)
    bound = bound_at_or_over(sb, p90_s if p90_s is not None else 0.0)
    if bound is None:
        return Finding(**base, verdict=INCONCLUSIVE, why="the histogram has no finite bucket to compare at")
    over_s, _ = share_over(sb, bound)
    over_c, _ = share_over(cb, bound)
    p = one_sided_p(over_c, n_c, over_s, n_s)
    detail = {
        "p90_stable": p90_s,
        "p90_canary": bucket_quantile(0.9, cb),
        "bound": bound,
        "over_bound_stable": over_s / n_s,
        "over_bound_canary": over_c / n_c,
    }
    base.update(ratio=ratio, p_value=p, detail=detail)
    if p < settings.alpha and ratio > 1 + settings.latency_tolerance:
        return Finding(
            **base,
            verdict=FAIL,
            why=f"mean {ratio:.2f}x the stable one; {over_c / n_c:.1%} of requests "
            f"over {bound:g}s against {over_s / n_s:.1%} (p={p:.2g})",
        )
    return Finding(
        **base,
        verdict=PASS,
        why=f"mean {ratio:.2f}x the stable one (tolerance "
        f"{1 + settings.latency_tolerance:.2f}x); over {bound:g}s: {over_c / n_c:.1%} against "
        f"{over_s / n_s:.1%} (p={p:.2g})",
    )


def _share(
    name: str, definition: dict, stable: _Side, canary: _Side, settings: Settings, source: str
) -> Finding | None:
    bad_s, n_s = _bad_and_total(stable, definition, source)
    bad_c, n_c = _bad_and_total(canary, definition, source)
    if n_s is None and n_c is None:
        return None
    bad_s, n_s, bad_c, n_c = bad_s or 0.0, n_s or 0.0, bad_c or 0.0, n_c or 0.0
    share_s = bad_s / n_s if n_s > 0 else None
    share_c = bad_c / n_c if n_c > 0 else None
    base = dict(
        signal=name,
        means=definition["means"],
        kind="share",
        stable=share_s,
        canary=share_c,
        n_stable=n_s,
        n_canary=n_c,
        p_value=None,
        ratio=None,
    )
    if short := _enough(n_s, n_c, settings):
        return Finding(**base, verdict=INCONCLUSIVE, why=short)
    assert share_s is not None and share_c is not None
    ratio = share_c / share_s if share_s > 0 else (math.inf if share_c > 0 else 1.0)
    p = one_sided_p(bad_c, n_c, bad_s, n_s)
    excess = bad_c - share_s * n_c
    base.update(ratio=ratio, p_value=p)
    words = f"{share_c:.2%} against {share_s:.2%} (p={p:.2g})"
    if p < settings.alpha and ratio > 1 + settings.share_tolerance and excess >= settings.min_bad:
        return Finding(**base, verdict=FAIL, why=words)
    return Finding(**base, verdict=PASS, why=words)


def _mix(name: str, definition: dict, stable: _Side, canary: _Side, settings: Settings) -> Finding | None:
    if "mean" in definition:
        num, den = Selector(definition["mean"] + "_sum"), Selector(definition["mean"] + "_count")
    else:
        num, den = _selector(definition.get("share") or definition["ratio"]), _selector(definition["of"])
    values = []
    for side in (stable, canary):
        a, b = side.count(num), side.count(den)
        values.append(a / b if a is not None and b else None)
    if values[0] is None or values[1] is None:
        return None
    ratio = values[1] / values[0] if values[0] else (1.0 if not values[1] else math.inf)
    apart = abs(ratio - 1) > settings.mix_tolerance
    return Finding(
        name,
        definition["means"],
        "mix",
        values[0],
        values[1],
        ratio,
        None,
        0.0,
        0.0,
        FAIL if apart else PASS,
        f"canary {ratio:.2f}x the stable side" + (f": more than {settings.mix_tolerance:.0%} apart" if apart else ""),
    )


def compare(
    client,
    model: str,
    canary: tuple[Matcher, ...],
    stable: tuple[Matcher, ...],
    source: str = "engine",
    settings: Settings = Settings(),
    at: float | None = None,
) -> Report:
    """The canary's signals against the stable side's over `settings.window` ending at `at` (now)."""
    table = signals()
    old, new = (_Side(client, model, m, settings, at) for m in (stable, canary))
    findings, skipped = [], []
    for name, definition in table["sources"][source].items():
        finding = (
            _latency(name, definition, old, new, settings)
            if "histogram" in definition
            else _share(name, definition, old, new, settings, source)
        )
        if finding is None:
            skipped.append(f"{name}: no series on either side")
        else:
            findings.append(finding)
    mix = [f for name, d in table["mix"][source].items() if (f := _mix(name, d, old, new, settings))]
    apart = [m.signal for m in mix if m.verdict == FAIL]
    if apart:
        findings = [
            replace(
                f,
                verdict=INCONCLUSIVE,
                why=f"{f.why}; but the traffic mix differs ({', '.join(apart)}), so the difference may be the mix's",
            )
            if f.kind == "latency" and f.verdict == FAIL
            else f
            for f in findings
        ]
    verdicts = {f.verdict for f in findings}
    verdict = FAIL if FAIL in verdicts else INCONCLUSIVE if (INCONCLUSIVE in verdicts or not findings) else PASS
    return Report(model, source, settings.window, at, verdict, tuple(findings), tuple(mix), tuple(skipped))
