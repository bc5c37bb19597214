"""`inferwatch triage --alert NAME`: from the alert that paged to the verdict in one command. Two generated
incidents (tests/incident_library.py) in a real Prometheus beside the `ALERTS_FOR_STATE` series a rule would
have written for them: the alert's newest activation sets the window, its labels the model."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from incident_library import INCIDENT, T0, case_series, library
from triage_tools import NEEDS_PROMETHEUS, series_of, series_prometheus

from inferwatch.triage._window import iso

pytestmark = [pytest.mark.xdist_group("triage-alert"), NEEDS_PROMETHEUS]

CASES = {c.cls + ":" + "/".join(c.expect): c for c in library(0)}
QUEUE, DECODE = CASES["kind:queueing"], CASES["kind:slow-decode"]
ACTIVE = {QUEUE.model: T0 + 240, DECODE.model: T0 + 60}  # when each alert went active


def _alert_series(model: str, since: float) -> dict:
    at = [int(t * 1000) for t in range(int(since), INCIDENT[1] + 1, 30)]
    return series_of(
        {
            "__name__": "ALERTS_FOR_STATE",
            "alertname": "LLMSlow",
            "model": model,
            "namespace": "llm",
            "severity": "page",
        },
        at,
        [f"{since:.0f}"] * len(at),
    )


@pytest.fixture(scope="module")
def base():
    series = [s for case in (QUEUE, DECODE) for s in case_series(case)]
    series += [_alert_series(model, at) for model, at in ACTIVE.items()]
    with tempfile.TemporaryDirectory(prefix="triage-alert-") as tmp:
        with series_prometheus(series, Path(tmp)) as url:
            yield url


def _triage(base: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "inferwatch",
            "triage",
            "--prometheus",
            base,
            "--end",
            str(INCIDENT[1]),
            "--json",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_newest_alert_sets_the_window_and_the_model(base):
    done = _triage(base, "--alert", "LLMSlow")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert [m["model"] for m in report["models"]] == [QUEUE.model]
    assert report["models"][0]["kinds"][0]["kind"] == "queueing"
    assert report["start"] == iso(ACTIVE[QUEUE.model] - 300)  # five minutes before it went active
    assert report["end"] == iso(INCIDENT[1])


def test_a_label_matcher_picks_one_alert_of_several(base):
    done = _triage(base, "--alert", "LLMSlow", "--alert-match", f"model={DECODE.model}")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert [m["model"] for m in report["models"]] == [DECODE.model]
    assert report["models"][0]["kinds"][0]["kind"] == "slow-decode"


def test_an_alert_that_never_fired_is_one_clear_error(base):
    done = _triage(base, "--alert", "LLMNoSuchAlert")
    assert done.returncode == 1
    assert 'no alert {alertname="LLMNoSuchAlert"} was active' in done.stderr
    assert "Traceback" not in done.stderr
