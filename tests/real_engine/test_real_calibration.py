"""The simulator calibrated against the real vLLM, live: the calibration load script (tests/calibration.py) runs
every event (a length stop, a stop string, a client's cancel, a rejection by a full engine, a preemption) on the
real engines and on `inferwatch simulate`'s vLLM 0.32.0 with the same flags (the shared engine's cap and queue; the
pressure engine's few KV blocks), and their families, label sets, buckets, HTTP statuses and counter changes per
event must agree, beside what tests/fixtures/calibration/vllm-0.32.0/differences.yaml lists with its reason. The
live run must also still match the recording the fast suite checks the simulator against (re-record with
tests/record_calibration.py).
"""

from __future__ import annotations

import json

import calibration
import pytest
from engines import PRESSURE_FLAGS, SHARED_FLAGS, engine_url, pressure_url  # noqa: F401 - the fixtures
from test_sim_calibration import RECORDED, differences, shape_differences

pytestmark = pytest.mark.real_engine


@pytest.fixture(scope="module")
def runs(engine_url, pressure_url, request):  # noqa: F811 - the fixtures above
    if request.config.getoption("--engine-url"):
        pytest.skip(
            "the script needs the shared engine's flags (" + " ".join(SHARED_FLAGS) + "); --engine-url "
            "names an engine started with its own"
        )
    assert SHARED_FLAGS == calibration.SHARED_REAL, "the shared engine's flags are the script's"
    assert PRESSURE_FLAGS == calibration.PRESSURE_REAL, "the pressure engine's flags are the script's"
    real = calibration.run(engine_url, "tiny-llama", calibration.SHARED_EVENTS)
    real_metrics = calibration.metrics(engine_url)
    real.update(calibration.run(pressure_url, "tiny-llama", calibration.PRESSURE_EVENTS))
    with calibration.simulated(calibration.SHARED_SIM) as url:
        simulated = calibration.run(url, "tiny-llama", calibration.SHARED_EVENTS)
        simulated_metrics = calibration.metrics(url)
    with calibration.simulated(calibration.PRESSURE_SIM) as url:
        simulated.update(calibration.run(url, "tiny-llama", calibration.PRESSURE_EVENTS))
    return {"real": real, "simulated": simulated, "real_metrics": real_metrics, "simulated_metrics": simulated_metrics}


def test_the_simulator_moves_its_counters_as_the_real_engine(runs):
    assert set(runs["real"]) == set(calibration.EVENTS)
    assert calibration.compare(runs["real"], runs["simulated"], differences()) == []


def test_the_simulator_has_the_real_families_labels_and_buckets(runs):
    real = calibration.shapes(runs["real_metrics"])
    assert shape_differences(real, calibration.shapes(runs["simulated_metrics"]), differences()) == {}


def test_the_recording_is_what_the_real_engine_does(runs):
    """The fast suite's recorded deltas, against this run: a changed engine (or script) needs a new recording."""
    recorded = json.loads((RECORDED / "deltas.json").read_text())
    assert calibration.compare(runs["real"], recorded, differences()) == [], (
        "re-record with python tests/record_calibration.py"
    )
