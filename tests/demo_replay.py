"""Replay the demo's recorded series (tests/fixtures/demo/, written by tests/record_demo.py) through `promtool test
rules` with the rule files the demo loads, uncompressed: the shipped rules, timed as in production.

A recording holds every series the rules read, one sample every `step` seconds, over a healthy soak and then
each incident of the demo's script. A replay splices segments of it: a segment repeats as long as asked, each
counter going on from where the last segment left it (by its recorded increments), each gauge as recorded.
"""

from __future__ import annotations

import functools
import gzip
import json
import math
import re
import tempfile
from itertools import pairwise
from pathlib import Path

import yaml
from conftest import FIXTURES

from inferwatch.slo import run_rule_tests

FOLDER = FIXTURES / "demo"
COUNTER = re.compile(r"_(total|bucket|count|sum)$")
SKIP_INCIDENT_S = 60  # an incident's first minute: the switch itself, queues still building


def load() -> tuple[dict, dict]:
    """(soak.yaml, recording) of the fixture."""
    manifest = yaml.safe_load((FOLDER / "soak.yaml").read_text())
    with gzip.open(FOLDER / "recording.json.gz", "rt") as f:
        return manifest, json.load(f)


def phase(manifest: dict, name: str) -> dict:
    return next(p for p in manifest["phases"] if p["phase"] == name)


def segment(recording: dict, start: float, end: float) -> dict[str, list[float | None]]:
    """Every series' samples from `start` to `end` (None where it had none)."""
    t0, step = recording["start"], recording["step"]
    first, last = math.ceil((start - t0) / step), math.floor((end - t0) / step)
    return {
        labels: [None if v is None else float(v) for v in values[first : last + 1]]
        for labels, values in recording["series"].items()
    }


def _repeat(points: list[float | None], n: int, counter: bool, last: float | None) -> list[float | None]:
    """n samples of a series whose recorded `points` repeat: a counter by its increments from `last` (a drop read
    as a restart from 0), a gauge as it was; absent where it was absent before its first sample."""
    lead = next((i for i, v in enumerate(points) if v is not None), len(points))
    present = points[lead:]
    for i, v in enumerate(present):  # a gap holds the value before it
        if v is None:
            present[i] = present[i - 1]
    if not present:
        return [None] * n
    out: list[float | None] = [None] * min(lead, n) if last is None else []
    if not counter:
        return (out + [present[i % len(present)] for i in range(n)])[:n]
    steps = [b - a if b >= a else b for a, b in pairwise(present)] or [0.0]
    value = present[0] if last is None else last
    if last is None:
        out.append(value)
    k = 0
    while len(out) < n:
        value += steps[k % len(steps)]
        k += 1
        out.append(value)
    return out[:n]


def splice(parts: list[tuple[dict[str, list[float | None]], int]]) -> dict[str, list[float | None]]:
    """The series of consecutive (segment, samples) parts, each segment repeated to its length."""
    names = sorted({labels for seg, _ in parts for labels in seg})
    out = {}
    for labels in names:
        counter = bool(COUNTER.search(json.loads(labels)["__name__"]))
        values: list[float | None] = []
        for seg, n in parts:
            last = next((v for v in reversed(values) if v is not None), None) if counter else None
            values += _repeat(seg.get(labels, []), n, counter, last)
        out[labels] = values
    return out


def _promtool_series(labels: str) -> str:
    labels = json.loads(labels)
    name = labels.pop("__name__")
    return name + "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def _values(values: list[float | None]) -> str:
    return " ".join("_" if v is None else f"{v:.6g}" for v in values)


def input_series(series: dict[str, list[float | None]]) -> list[dict]:
    return [
        {"series": _promtool_series(labels), "values": _values(values)}
        for labels, values in series.items()
        if any(v is not None for v in values)
    ]


@functools.lru_cache(maxsize=1)
def rule_texts() -> dict[str, str]:
    """{file name: text} of the rules the demo loads (`inferwatch build`'s and the front-door SLOs), as shipped:
    not compressed. Built once: it renders every artifact."""
    from inferwatch.sim._demo import _rule_files

    with tempfile.TemporaryDirectory() as tmp:
        return {Path(p).name: Path(p).read_text() for p in _rule_files(Path(tmp), compress=False)}


def replay(series: dict, step: float, assertions: list[dict], only: tuple[str, ...] = ()) -> tuple[bool, str]:
    """Run `promtool test rules` on the series (one sample every `step` seconds) with the shipped rules (`only`
    those files, by name, when given), each group evaluated every minute, the SLO rules' long-window groups first
    (as the SLO compiler's own tests order them); `assertions` are promql_expr_test entries."""
    with tempfile.TemporaryDirectory(prefix="inferwatch-demo-replay-") as tmp:
        folder = Path(tmp)
        rules = []
        for name, text in rule_texts().items():
            if not only or name in only:
                rules.append(folder / name)
                rules[-1].write_text(text)
        groups = [g["name"] for path in rules for g in yaml.safe_load(path.read_text())["groups"]]
        order = [g for g in groups if g.endswith("-long")] + [g for g in groups if not g.endswith("-long")]
        test = {
            "rule_files": [p.name for p in rules],
            "evaluation_interval": "1m",
            "group_eval_order": order,
            "tests": [{"interval": f"{step:g}s", "input_series": input_series(series), "promql_expr_test": assertions}],
        }
        (folder / "demo.test.yaml").write_text(yaml.safe_dump(test, sort_keys=False, width=10**6))
        return run_rule_tests([folder / "demo.test.yaml"])


def firing(alert: dict[str, str], since_minutes: int, at_minute: int, fired: bool) -> dict:
    """A promql_expr_test: whether `alert` (alertname and labels) was firing at some evaluation of the
    `since_minutes` before `at_minute`."""
    matchers = ", ".join(f'{k}="{v}"' for k, v in sorted(alert.items()))
    return {
        "expr": f'max(max_over_time(ALERTS{{{matchers}, alertstate="firing"}}[{since_minutes}m]))',
        "eval_time": f"{at_minute}m",
        "exp_samples": [{"labels": "{}", "value": 1}] if fired else [],
    }


def nothing_fired(minutes: int, matchers: str = "") -> dict:
    """A promql_expr_test: no alert (of those `matchers` select) was firing at any evaluation up to `minutes`; a
    failure lists them."""
    selector = ", ".join(m for m in ('alertstate="firing"', matchers) if m)
    return {"expr": f"max_over_time(ALERTS{{{selector}}}[{minutes}m])", "eval_time": f"{minutes}m", "exp_samples": []}


def _increase(seg: dict[str, list[float | None]], metric: str, matchers, group: dict[str, str]) -> float:
    """How much the counters of `metric` matching `matchers` and `group` grew over the segment (a drop is a
    restart from 0)."""
    from inferwatch.slo._series import _matches

    total = 0.0
    for labels, values in seg.items():
        labels = json.loads(labels)
        if (
            labels["__name__"] != metric
            or not _matches(matchers, labels)
            or any(labels.get(k) != v for k, v in group.items())
        ):
            continue
        present = [v for v in values if v is not None]
        total += sum(b - a if b >= a else b for a, b in pairwise(present))
    return total


def error_ratio(spec, objective, seg: dict[str, list[float | None]], group: dict[str, str]) -> float:
    """The objective's error ratio over the segment, from the recorded counters and the spec alone (never from the
    rules under test): bad events over all events."""
    from inferwatch.slo import LatencySLI, Matcher
    from inferwatch.slo._selector import le_spellings

    sli = objective.sli
    if isinstance(sli, LatencySLI):
        matchers = spec.selector + sli.matchers
        total = _increase(seg, sli.metric + "_count", matchers, group)
        le = Matcher("le", "=~", "|".join(re.escape(s) for s in le_spellings(sli.threshold)))
        good = _increase(seg, sli.metric + "_bucket", matchers + (le,), group)
        return 1 - good / total
    total = _increase(seg, sli.total.metric, spec.selector + sli.total.matchers, group) - sum(
        _increase(seg, x.metric, spec.selector + x.matchers, group) for x in sli.exclude
    )
    if sli.good is not None:
        return 1 - _increase(seg, sli.good.metric, spec.selector + sli.good.matchers, group) / total
    return sum(_increase(seg, b.metric, spec.selector + b.matchers, group) for b in sli.bad) / total


def page_detection_minutes(spec, objective, ratio: float) -> int:
    """Minutes from the start of a steady error `ratio` to the first page, as `inferwatch slo explain` states it
    (the fastest page tier's detection, windows clean before), plus the minute the rules count in."""
    from fractions import Fraction

    from inferwatch.slo import tier_math

    maths = [tier_math(spec, objective, tier) for tier in spec.tiers if tier.severity == "critical"]
    times = [t for t in (m.detection(Fraction(ratio)) for m in maths if m.fires) if t is not None]
    return math.ceil(min(times) / 60) + 1 if times else 0
