"""The simulated vLLM 0.32.0 against a real one, under the same load script (tests/calibration.py): the families,
their types, label names and buckets, the HTTP statuses the clients got, and each counter's change per event (a
length stop, a stop string, a client's cancel mid-stream, a rejection by a full engine, a preemption), as the real
engine gave them when recorded (tests/fixtures/calibration/vllm-0.32.0/, by tests/record_calibration.py). What
differs on purpose is listed with its reason in differences.yaml there. The real-engine step runs the same
comparison live (tests/real_engine/test_real_calibration.py).
"""

from __future__ import annotations

import json

import calibration
import pytest
import yaml
from conftest import FIXTURES

RECORDED = FIXTURES / "calibration" / f"vllm-{calibration.RELEASE}"


def differences() -> dict:
    return yaml.safe_load((RECORDED / "differences.yaml").read_text())


def shape_differences(real: dict, simulated: dict, listed: dict) -> dict[str, str]:
    """{family: what differs} between two calibration.shapes(), beside what `listed` (differences.yaml) says."""
    wrong = {}
    for name, shape in simulated.items():
        differs = listed["shapes"].get(name, [None])[0]
        if differs == "absent":
            continue
        if name not in real:
            wrong[name] = "not exposed by the real engine"
        elif differs == "buckets":
            real_bounds = real[name]["buckets"][:-1]  # the real ones, +Inf aside: a prefix
            if (shape["type"], shape["labels"]) != (real[name]["type"], real[name]["labels"]) or shape["buckets"][
                : len(real_bounds)
            ] != real_bounds:
                wrong[name] = f"simulated {shape}, real {real[name]}"
        elif shape != real[name]:
            wrong[name] = f"simulated {shape}, real {real[name]}"
    unlisted = sorted(set(real) - set(simulated) - set(listed["not_simulated"]))
    gone = sorted(set(listed["not_simulated"]) - set(real))
    for name in unlisted:
        wrong[name] = "real, not simulated, and not listed under not_simulated"
    for name in gone:
        wrong[name] = "listed under not_simulated, but the real engine has no such family"
    return wrong


def test_every_simulated_family_has_the_real_engines_shape():
    real = calibration.shapes((RECORDED / "metrics.txt").read_text())
    with calibration.simulated(calibration.SHARED_SIM) as url:
        simulated = calibration.shapes(calibration.metrics(url))
    assert simulated
    assert shape_differences(real, simulated, differences()) == {}


@pytest.fixture(scope="module")
def simulated_run() -> dict:
    return calibration.run_simulated()


def test_every_event_moves_the_simulators_counters_as_the_real_engines(simulated_run):
    recorded = json.loads((RECORDED / "deltas.json").read_text())
    assert set(recorded) == set(calibration.EVENTS)
    assert calibration.compare(recorded, simulated_run, differences()) == []


def test_a_client_that_leaves_moves_no_finished_counter_in_0_32(simulated_run):
    """vLLM V1 drops a request whose client left without counting it anywhere as finished or aborted; the HTTP
    response was already 200, and counts as 2xx."""
    deltas = simulated_run["client_cancel"]["deltas"]
    assert not [k for k in deltas if k.startswith("vllm:request_success")]
    assert deltas["http_requests_total{handler=/v1/chat/completions,method=POST,status=2xx}"] == 1


def test_a_full_engine_refuses_with_503_and_counts_the_rejection(simulated_run):
    event = simulated_run["rejection"]
    assert event["statuses"] == [200] * calibration.QUEUED + [503]
    assert event["deltas"]["vllm:admission_rejections_total{reason=max_num_queued_reqs}"] == 1
