"""Where an incident began (triage/_onset.py), and baselines that end before it: the change point on one series,
and, in a real Prometheus, a deployment born inside its incident window whose only normal time is the window's
own before the onset (the demo's page: ten minutes asked, two of them with data)."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from incident_library import INCIDENT, Case, Incident, case_series
from triage_tools import NEEDS_PROMETHEUS, series_prometheus

from inferwatch.triage._onset import find_onset
from inferwatch.triage._triage import BEFORE_ONSET, INSIDE_ONSET
from inferwatch.triage._window import iso

T = np.arange(0.0, 3900.0, 30.0)


def _noisy(seed: int, sigma: float = 0.1) -> np.ndarray:
    return 0.2 * np.exp(np.random.default_rng(seed).normal(0, sigma, len(T)))


def test_a_step_up_is_found_where_it_happens():
    x = _noisy(1)
    x[T >= 3480] *= 8
    assert find_onset(T, x, 0.05) == 3480


def test_a_ramp_is_found_where_it_leaves_the_normal_range_not_at_its_middle():
    x = _noisy(2) * (1 + 6 * np.clip((T - 3000) / 300, 0, 1))
    assert 3000 <= find_onset(T, x, 0.05) <= 3090


@pytest.mark.parametrize("seed", range(5))
def test_noise_and_a_slow_trend_have_no_onset(seed):
    assert find_onset(T, _noisy(seed, 0.3), 0.05) is None
    assert find_onset(T, _noisy(seed) * (1 + 0.3 * T / T[-1]), 0.05) is None


def test_a_fall_a_small_rise_and_a_rise_under_the_floor_are_no_onset():
    x = _noisy(3)
    assert find_onset(T, np.where(T >= 2000, x / 4, x), 0.05) is None  # a recovery
    assert find_onset(T, np.where(T >= 2000, x * 1.3, x), 0.05) is None  # under 1.5x
    assert find_onset(T, np.where(T >= 2000, x * 4, x) / 1000, 0.05) is None  # 0.2 ms to 0.8 ms: noise


def test_a_rise_with_the_data_or_gaps_in_it():
    x = _noisy(4)
    assert find_onset(T, np.where(T >= 60, x * 8, x), 0.05) is None  # no before to speak of
    x = np.where(T >= 3000, x * 8, x)
    x[::3] = np.nan  # unmeasured steps (too few requests) are left out
    assert 2970 <= find_onset(T, x, 0.05) <= 3030


NEEDS = [pytest.mark.xdist_group("triage-onset"), NEEDS_PROMETHEUS]
BORN, ONSET = 1200.0, 1500.0  # seconds after the window's start: the deployment starts, its queue begins


@pytest.mark.xdist_group("triage-onset")
@NEEDS_PROMETHEUS
def test_a_deployment_born_in_its_window_is_judged_against_its_time_before_the_onset():
    """Born 20 minutes into the window, queueing 5 minutes later: no baseline has data, and the window's first 20
    minutes have none either (read as such, it was missing-data at 1.00); the 5 minutes before the onset are its
    baseline and the rest its incident, and the queue is named against them."""
    case = Case(
        "onset-born",
        "onset",
        ("queueing",),
        seed=7,
        scrape=15,
        door=False,
        gpu="none",
        no_yesterday=True,
        born=BORN,
        load=0.5,
        incidents=(Incident(start=ONSET, ramp=30, rate=1.35 / 0.5),),
    )
    with (
        tempfile.TemporaryDirectory(prefix="triage-onset-") as tmp,
        series_prometheus(case_series(case), Path(tmp)) as url,
    ):
        done = subprocess.run(
            [sys.executable, "-m", "inferwatch", "triage", "--prometheus", url, "--json"]
            + ["--start", str(INCIDENT[0]), "--end", str(INCIDENT[1])],
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert done.returncode == 0, done.stderr
    model = json.loads(done.stdout)["models"][0]
    assert [k["kind"] for k in model["kinds"]][:1] == ["queueing"], model
    assert "missing-data" not in [k["kind"] for k in model["kinds"]], model
    onset = model["onset"]["at"]
    assert iso(INCIDENT[0] + ONSET) <= onset <= iso(INCIDENT[0] + ONSET + 120), model["onset"]
    assert model["baseline"]["why"] == INSIDE_ONSET and model["baseline"]["start"] >= iso(INCIDENT[0] + BORN)
    assert model["baseline"]["end"] == model["incident"]["start"] < onset
    assert model["incident"]["end"] == iso(INCIDENT[1]) and model["enough_data"]


@pytest.mark.xdist_group("triage-onset")
@NEEDS_PROMETHEUS
def test_the_issues_queue_since_5m_with_the_hour_before_holding_its_first_2_minutes():
    """Issue 28: a queue of seven minutes, `--since 5m` on a Prometheus younger than a day; the hour before held
    its first two minutes. That baseline now ends before the onset, and the queue is compared with normal."""
    began, since = 1380.0, 1500.0  # the queue, the window asked for: seconds after T0
    case = Case(
        "onset-since-5m",
        "onset",
        ("queueing",),
        seed=11,
        scrape=15,
        gpu="none",
        no_yesterday=True,
        load=0.55,
        incidents=(Incident(start=began, ramp=30, rate=1.3 / 0.55),),
        patience=30.0,
    )
    start, end = INCIDENT[0] + since, INCIDENT[0] + since + 300
    with (
        tempfile.TemporaryDirectory(prefix="triage-onset-") as tmp,
        series_prometheus(case_series(case), Path(tmp)) as url,
    ):
        done = subprocess.run(
            [sys.executable, "-m", "inferwatch", "triage", "--prometheus", url, "--json"]
            + ["--start", str(start), "--end", str(end)],
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    model = report["models"][0]
    assert report["baseline"] == {"start": iso(start - 3600), "end": iso(start)}  # the hour before, as asked
    assert [k["kind"] for k in model["kinds"]][:1] == ["queueing"], model
    assert iso(INCIDENT[0] + began) <= model["onset"]["at"] <= iso(INCIDENT[0] + began + 90), model["onset"]
    assert model["baseline"] == {"start": iso(start - 3600), "end": model["baseline"]["end"], "why": BEFORE_ONSET}
    assert model["baseline"]["end"] < iso(INCIDENT[0] + began)
    assert "incident" not in model  # the incident is the window asked for
