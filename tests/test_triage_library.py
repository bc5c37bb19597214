"""`inferwatch triage` on the generated incident library (tests/incident_library.py): 41 labelled cases shaped
the way production looks, played into real Prometheus servers through `promtool tsdb create-blocks-from
openmetrics`, judged with `--baseline auto`.

The score is printed (run with -s, or read it in a failure) and must stay above the bar; no forbidden kind
(any kind on a healthy model, missing-data on a rollout, slow-decode on long outputs) may reach 0.5. The
classes issue 28 fixed must each be right in every case. The rules were not tuned to these cases: the slow
sweep draws libraries from other seeds, and a failure there is reported with the signals, not fixed by moving a
threshold onto one case.
"""

from __future__ import annotations

import pytest
from incident_library import CLASSES, library
from library_score import result, served, table, verdicts
from triage_tools import NEEDS_PROMETHEUS

pytestmark = NEEDS_PROMETHEUS

BAR = 0.9  # the issue's: at least 90 % right top kind on incidents the team has not seen
# the classes whose every case must be right: what on-call suffered most (issue 28, §1)
FIXED = (
    "rollout",
    "restart",
    "crash-loop",
    "bad-replica",
    "sglang-shipped",
    "dcgm-default",
    "kv-reasoning",
    "healthy",
    "absolute",
    "onset",
)
SWEEP = (5, 6, 7)  # measured: 111 of 111 right, no forbidden kind at 0.5 (triage/README.md)


def _results(seeds):
    cases = [c for seed in seeds for c in library(seed)]
    with served(cases) as urls:
        judged = verdicts(cases, urls)
    return [result(c, judged[c.model]) for c in cases]


@pytest.fixture(scope="module")
def results():
    return _results((0,))


def test_the_library_covers_every_class_on_both_engines_and_namings():
    cases = library(0)
    assert len(cases) >= 30
    assert {c.cls for c in cases} == set(CLASSES)
    assert {c.engine for c in cases} == {"vllm", "sglang"}
    assert {c.raw for c in cases} == {True, False}
    assert {c.door for c in cases} == {True, False}
    assert {c.gpu for c in cases} >= {"vocab", "dcgm", "dcgm-default", "none"}
    assert {c.scrape for c in cases} >= {30, 60}


def test_the_library_is_drawn_from_its_seed():
    assert library(0) == library(0)
    assert library(0) != library(1)


def test_triage_scores_above_the_bar(results):
    report = table(results)
    print("\n" + report)
    right = sum(r.right for r in results)
    assert right >= BAR * len(results), report
    assert not [r.case.name for r in results if r.forbidden], report


@pytest.mark.parametrize("cls", FIXED)
def test_every_case_of_a_fixed_class_is_right(results, cls):
    wrong = [
        f"{r.case.name}: expected {'/'.join(r.case.expect) or 'none'}, got {r.got}"
        for r in results
        if r.case.cls == cls and not r.right
    ]
    assert not wrong, "; ".join(wrong)


def test_triage_beats_the_naive_classifier(results):
    assert sum(r.right for r in results) > sum(r.naive_right for r in results)


@pytest.mark.slow
def test_libraries_of_other_seeds_score_above_the_bar():
    results = _results(SWEEP)
    report = table(results)
    print("\n" + report)
    assert sum(r.right for r in results) >= BAR * len(results), report
    assert not [r.case.name for r in results if r.forbidden], report
