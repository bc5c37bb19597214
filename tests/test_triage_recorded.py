"""`inferwatch triage` on recorded incidents (tests/fixtures/triage/ and each variant below it, recorded from the
simulator by tests/record_triage.py and replayed into a real Prometheus by tests/triage_tools.py): for every model
the kind its scenario produces comes first; the quiet model and the harmless traffic doubling give nothing wrong.

The rules were not tuned to these numbers: a failure here is reported with the signals, not fixed by moving a
threshold onto the recording."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from triage_tools import FIXTURES, load_manifest, recorded_prometheus

pytestmark = [
    pytest.mark.skipif(not (FIXTURES / "manifest.yaml").exists(), reason="no recording yet"),
]

FOLDERS = sorted(path.parent for path in FIXTURES.rglob("manifest.yaml"))
CASES = [(folder, model) for folder in FOLDERS for model in sorted(load_manifest(folder)["models"])]


def _triage(folder) -> dict:
    """The whole command's JSON over a recorded incident, every model at once, the recorded baseline."""
    with recorded_prometheus(folder) as (base, manifest):
        incident, baseline = manifest["incident"], manifest["baseline"]
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "inferwatch",
                "triage",
                "--prometheus",
                base,
                "--start",
                str(incident["start"]),
                "--end",
                str(incident["end"]),
                "--baseline",
                f"{baseline['start']}/{baseline['end']}",
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    return {m["model"]: m for m in json.loads(done.stdout)["models"]}


@pytest.fixture(scope="module")
def verdicts():
    """verdicts(folder): each recording replayed and judged once."""
    judged: dict = {}

    def of(folder) -> dict:
        if folder not in judged:
            judged[folder] = _triage(folder)
        return judged[folder]

    return of


def _explain(verdict: dict) -> str:
    return (
        "; ".join(
            f"{k['kind']} {k['confidence']}: "
            + ", ".join(f"{e['signal']} {e['baseline']}->{e['incident']}" for e in k["evidence"])
            for k in verdict["kinds"]
        )
        or "none"
    )


@pytest.mark.parametrize("folder, model", CASES, ids=[f"{f.relative_to(FIXTURES)}:{m}" for f, m in CASES])
def test_the_recorded_kind_comes_first(verdicts, folder, model):
    expected = load_manifest(folder)["models"][model]
    verdict = verdicts(folder)[model]
    kinds = [k["kind"] for k in verdict["kinds"]]
    if expected == "none":
        assert kinds == [], f"{model}: expected nothing wrong, got {_explain(verdict)}"
    else:
        assert kinds[:1] == [expected], f"{model}: expected {expected} first, got {_explain(verdict)}"


@pytest.mark.parametrize("folder", FOLDERS, ids=[str(f.relative_to(FIXTURES)) for f in FOLDERS])
def test_every_model_of_a_recording_has_a_verdict(verdicts, folder):
    assert set(verdicts(folder)) == set(load_manifest(folder)["models"])
