"""The simulator calibrated against the real vLLM, live: the calibration load script (tests/calibration.py) runs on
the shared real engine and on `inferwatch simulate`'s vLLM 0.32.0 with the same cap and queue, and their families,
label sets, buckets, HTTP statuses and counter changes per event must agree, beside what
tests/fixtures/calibration/vllm-0.32.0/differences.yaml lists with its reason. The live run must also still match
the recording the fast suite checks the simulator against (re-record with tests/record_calibration.py).

The preemption event needs an engine of its own (few KV blocks, ~40 s to start), and the rejection's boundary is
not the same from run to run on the real engine (calibration.LIVE_EVENTS): both are compared in the recording.
"""

from __future__ import annotations

import json

import pytest

import calibration
from engines import SHARED_FLAGS, engine_url  # noqa: F401 - the fixture
from test_sim_calibration import RECORDED, differences, shape_differences

pytestmark = pytest.mark.real_engine


@pytest.fixture(scope="module")
def runs(engine_url, request):  # noqa: F811 - the fixture above
    if request.config.getoption("--engine-url"):
        pytest.skip("the script needs the shared engine's flags (" + " ".join(SHARED_FLAGS) + "); --engine-url "
                    "names an engine started with its own")
    assert SHARED_FLAGS == calibration.SHARED_REAL, "the shared engine's flags are the script's"
    real = calibration.run(engine_url, "tiny-llama", calibration.LIVE_EVENTS)
    real_metrics = calibration.metrics(engine_url)
    with calibration.simulated(calibration.SHARED_SIM) as url:
        simulated = calibration.run(url, "tiny-llama", calibration.LIVE_EVENTS)
        simulated_metrics = calibration.metrics(url)
    return {"real": real, "simulated": simulated, "real_metrics": real_metrics,
            "simulated_metrics": simulated_metrics}


def test_the_simulator_moves_its_counters_as_the_real_engine(runs):
    assert calibration.compare(runs["real"], runs["simulated"], differences()) == []


def test_the_simulator_has_the_real_families_labels_and_buckets(runs):
    real = calibration.shapes(runs["real_metrics"])
    assert shape_differences(real, calibration.shapes(runs["simulated_metrics"]), differences()) == {}


def test_the_recording_is_what_the_real_engine_does(runs):
    """The fast suite's recorded deltas, against this run: a changed engine (or script) needs a new recording."""
    recorded = json.loads((RECORDED / "deltas.json").read_text())
    shared = {event: recorded[event] for event in calibration.LIVE_EVENTS}
    assert calibration.compare(runs["real"], shared, differences()) == [], \
        "re-record with python tests/record_calibration.py"
