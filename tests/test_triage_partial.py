"""Triage on partial data, as pure functions (no Prometheus; tests/test_triage_library.py plays whole incidents):
a clause whose signals are not measured lowers the confidence and says so, restarts are counted over the window,
a rollout's replaced replicas are not missing, and a model's finding names the one replica that causes it."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from inferwatch.errors import SpecError
from inferwatch.triage import Finding, Reading, Window, judge, load_kinds, load_signals, parse_kinds, summarise
from inferwatch.triage._triage import _named

SIGNALS = load_signals()
NAMES = [s.name for s in SIGNALS]
FLOORS = {s.name: s.floor for s in SIGNALS}
KINDS = load_kinds()


def _stalled(with_sm: bool) -> tuple[dict, dict]:
    """A GPU held by a kernel that does not compute: GPU-Util up, the pipes' activity halved, power down."""
    base = {
        "gpu_util": Reading(0.85),
        "tensor_active": Reading(0.3),
        "dram_active": Reading(0.3),
        "gpu_power": Reading(450.0),
        "sm_clock": Reading(1.98e9),
        "tpot_mean": Reading(0.015),
        "generation_throughput": Reading(2000.0),
    }
    inc = {
        "gpu_util": Reading(0.99),
        "tensor_active": Reading(0.12),
        "dram_active": Reading(0.13),
        "gpu_power": Reading(250.0),
        "sm_clock": Reading(1.97e9),
        "tpot_mean": Reading(0.04),
        "generation_throughput": Reading(1200.0),
    }
    if with_sm:
        base["sm_active"], inc["sm_active"] = Reading(0.6), Reading(0.2)
    return base, inc


def test_without_sm_activity_gpu_not_computing_is_named_from_the_pipes_at_lower_confidence():
    full = {f.kind: f for f in judge(KINDS, *_stalled(True), FLOORS)}["gpu-not-computing"]
    partial = {f.kind: f for f in judge(KINDS, *_stalled(False), FLOORS)}["gpu-not-computing"]
    assert full.confidence == 1.0
    assert 0.6 <= partial.confidence < full.confidence
    missing = [e for e in partial.evidence if e.condition.endswith("(not measured)")]
    assert [e.signal for e in missing] == ["sm_active"] and missing[0].baseline is None


def test_an_unmeasured_score_outside_zero_to_one_is_refused_with_its_field():
    doc = {"kinds": {"k": {"summary": "s", "when": [{"if": "ttft_mean up >= 2x", "unmeasured": 2}]}}}
    with pytest.raises(SpecError) as err:
        parse_kinds(doc, "mine.yaml", NAMES)
    assert "kinds.k.when[0].unmeasured" in str(err.value)


def _frame(rows):
    return pd.DataFrame(rows, columns=["signal", "part", "model", "pod", "le", "t", "v"])


def test_restarts_are_counted_once_over_the_window():
    # resets() over a 40 s rate window read every 10 s: each restart is in four steps' windows
    window, step = Window(0, 200), 10.0
    resets = {t: 1.0 for t in (50, 60, 70, 80, 130, 140, 150, 160)}
    rows = [("restarts", "value", "m", "a", math.nan, float(t), resets.get(t, 0.0)) for t in range(40, 210, 10)]
    out = summarise(_frame(rows), SIGNALS, window, step, lookback=40.0)
    assert out[("m", "a")]["restarts"].value == pytest.approx(2.0)
    assert out[("m", None)]["restarts"].value == pytest.approx(2.0)


def test_a_rollouts_replaced_replicas_are_not_missing():
    # a-old serves until 50, a-new from 60 on; b throughout: as many replicas at the end as at the start
    window, step = Window(0, 100), 10.0
    rows = [("engine_series", "presence", "m", "a-old", math.nan, float(t), 1.0) for t in range(0, 60, 10)]
    rows += [("engine_series", "presence", "m", "a-new", math.nan, float(t), 1.0) for t in range(60, 110, 10)]
    rows += [("engine_series", "presence", "m", "b", math.nan, float(t), 1.0) for t in range(0, 110, 10)]
    out = summarise(_frame(rows), SIGNALS, window, step)
    assert out[("m", "a-old")]["engine_series"].value == 1.0
    assert out[("m", "a-new")]["engine_series"].value == 1.0
    gone = summarise(_frame([r for r in rows if r[3] != "a-new"]), SIGNALS, window, step)
    assert gone[("m", "a-old")]["engine_series"].value == pytest.approx(6 / 11)  # left, not replaced


def test_a_model_finding_names_the_one_replica_that_shows_it():
    errors = Finding("errors", 1.0, ())
    pods = {"p-0": (Finding("errors", 1.0, (), pod="p-0"),), "p-1": (Finding("queueing", 0.7, (), pod="p-1"),)}
    assert _named(errors, pods).pod == "p-0"
    pods["p-2"] = (Finding("errors", 0.8, (), pod="p-2"),)
    assert _named(errors, pods).pod is None  # two replicas show it: the model's, not one pod's


def test_a_day_before_that_hides_the_incident_gives_way_to_the_hour_before():
    from inferwatch.triage._triage import Verdict, _second_look

    hour = Window(0, 3600)
    quiet, found = Verdict("m", ()), Verdict("m", (Finding("queueing", 0.8, ()),))
    assert _second_look([quiet], [found], hour)[0].findings == found.findings
    assert _second_look([quiet], [found], hour)[0].baseline_window == hour
    kept = Verdict("m", (Finding("spec-decode-collapse", 0.9, ()),))  # a drift the hour before hides
    assert _second_look([kept], [quiet], hour) == [kept]
    short = Verdict("m", (), not_enough_data="too few requests")
    assert _second_look([short], [found], hour) == [short]
