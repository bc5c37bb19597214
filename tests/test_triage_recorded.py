"""`inferwatch triage` on recorded incidents (tests/fixtures/triage/, recorded from the simulator by
tests/record_triage.py and replayed into a real Prometheus by tests/triage_tools.py): for every model the kind
its scenario produces comes first; the quiet model and the harmless traffic doubling give nothing wrong.

The rules were not tuned to these numbers: a failure here is reported with the signals, not fixed by moving a
threshold onto the recording."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from triage_tools import FIXTURES, load_manifest, recorded_prometheus

pytestmark = [pytest.mark.xdist_group("triage-recorded"),
              pytest.mark.skipif(not (FIXTURES / "manifest.yaml").exists(), reason="no recording yet")]

MODELS = load_manifest()["models"] if (FIXTURES / "manifest.yaml").exists() else {}


@pytest.fixture(scope="module")
def verdicts():
    """The whole command's JSON over the recorded incident, every model at once, the recorded baseline."""
    with recorded_prometheus() as (base, manifest):
        incident, baseline = manifest["incident"], manifest["baseline"]
        done = subprocess.run([sys.executable, "-m", "inferwatch", "triage", "--prometheus", base,
                               "--start", str(incident["start"]), "--end", str(incident["end"]),
                               "--baseline", f"{baseline['start']}/{baseline['end']}", "--json"],
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return {m["model"]: m for m in json.loads(done.stdout)["models"]}


def _explain(verdict: dict) -> str:
    return "; ".join(f"{k['kind']} {k['confidence']}: " + ", ".join(
        f"{e['signal']} {e['baseline']}->{e['incident']}" for e in k["evidence"]) for k in verdict["kinds"]) or "none"


@pytest.mark.parametrize("model", sorted(MODELS))
def test_the_recorded_kind_comes_first(verdicts, model):
    expected = MODELS[model]
    kinds = [k["kind"] for k in verdicts[model]["kinds"]]
    if expected == "none":
        assert kinds == [], f"{model}: expected nothing wrong, got {_explain(verdicts[model])}"
    else:
        assert kinds[:1] == [expected], f"{model}: expected {expected} first, got {_explain(verdicts[model])}"


def test_every_model_of_the_recording_has_a_verdict(verdicts):
    assert set(verdicts) == set(MODELS)
