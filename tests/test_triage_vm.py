"""`inferwatch triage` gives the same numbers on Prometheus and on VictoriaMetrics for the same samples (issue 25):
one real Prometheus and one real VictoriaMetrics take the same synthetic fleet by remote write (the shapes
tests/bench_triage.py generates: a healthy hour, then a kind of slow per model; scrapes jittered, one replica
restarting, one front door's target vanishing with a staleness marker), and triage reads both.

`rate()` does not answer alike on the two (Prometheus extrapolates inside its window, MetricsQL starts at the
sample before it): the first case shows it on these samples, so the others prove something. Triage reads
counters as the differences of their last samples (triage/_increase.py), which both answer identically: every
signal's reading, in both windows, is the same number on both stores, and so is the verdict.
"""

from __future__ import annotations

import math
import random
import re
import time
import urllib.parse
import urllib.request

import pytest
from bench_triage import history
from conftest import need
from promtools import wait_for
from vmtools import STALE, prometheus_receiver, remote_write, victoria_metrics

from inferwatch.triage import Connection, Window, headline, triage
from inferwatch.triage._increase import exact_rates, reads, roll, steps_per_window

INTERVAL = 10.0  # s between scrapes; every sample within 50 minutes, which an empty Prometheus head takes
START = (int(time.time()) // 60) * 60 - 55 * 60
ONSET = START + 30 * 60  # a healthy half hour, then each model's kind
END = START + 50 * 60
FLEET = {
    "m-queue": "queueing",
    "m-decode": "slow-decode",
    "m-long": "long-outputs",
    "m-errors": "errors",
    "m-quiet": "quiet",
}
PODS = {"m-queue": (2, 2), "m-decode": (2, 1)}
LINE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})? (?P<value>\S+) (?P<t>\S+)$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"')


def _series() -> list[tuple[dict[str, str], list[tuple[float, object]]]]:
    """The fleet's samples for remote write: each scrape's timestamp jittered (a scraper's own clock), replica
    m-decode-1 restarting mid-incident (its counters from 0 again), and m-quiet's front door vanishing ten minutes
    before the end with a staleness marker."""
    rng = random.Random(25)
    out: dict[tuple, list[tuple[float, object]]] = {}
    for line in history(FLEET, START, ONSET, END, INTERVAL, PODS, seed=25).splitlines():
        m = LINE.match(line)
        if m is None:
            continue
        labels = {"__name__": m["name"], **dict(LABEL.findall(m["labels"] or ""))}
        out.setdefault(tuple(sorted(labels.items())), []).append((float(m["t"]), float(m["value"])))
    restart = ONSET + 10 * 60
    series = []
    for key, samples in out.items():
        labels = dict(key)
        jitter = rng.uniform(0, 0.3 * INTERVAL)
        samples = [(t + jitter + rng.uniform(-0.05, 0.05) * INTERVAL, v) for t, v in samples]
        counter = re.search(r"_(total|count|sum|bucket)$", labels["__name__"])
        if counter and labels.get("pod") == "m-decode-1":
            at_restart = next((v for t, v in samples if t >= restart), 0.0)
            samples = [(t, v - at_restart if t >= restart else v) for t, v in samples]
        if labels.get("model") == "m-quiet" and "pod" not in labels:  # the front door's series
            samples = [(t, v) for t, v in samples if t < END - 600] + [(END - 600 + 1, STALE)]
        series.append((labels, samples))
    return series


def _count(base: str) -> int:
    query = {"match[]": '{__name__=~".+"}', "start": f"{START - 60}", "end": f"{END + 60}"}
    with urllib.request.urlopen(f"{base}/api/v1/series?" + urllib.parse.urlencode(query), timeout=10) as resp:
        import json

        return len(json.load(resp)["data"])


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """{'prometheus': URL, 'victoriametrics': URL}, both holding the fleet's samples."""
    work = tmp_path_factory.mktemp("stores")
    series = _series()
    with (
        victoria_metrics(need("victoria-metrics"), work / "vm", "-search.latencyOffset=1s") as vm,
        prometheus_receiver(need("prometheus"), work / "prom") as prom,
    ):
        for base in (prom, vm):
            for i in range(0, len(series), 200):
                remote_write(base, series[i : i + 200])
        urllib.request.urlopen(vm + "/internal/force_flush", timeout=10).close()
        wait_for(lambda: _count(vm) == _count(prom) == len(series))
        yield {"prometheus": prom, "victoriametrics": vm}


def _range(base: str, promql: str, start: float, end: float, step: float) -> dict[tuple, list[float]]:
    import json

    query = {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step}", "nocache": "1"}
    with urllib.request.urlopen(f"{base}/api/v1/query_range?" + urllib.parse.urlencode(query), timeout=30) as resp:
        result = json.load(resp)["data"]["result"]
    return {tuple(sorted(r["metric"].items())): [float(v) for _, v in r["values"]] for r in result}


def test_rate_differs_on_the_two_stores_and_the_exact_read_does_not(stores):
    """On the same samples `rate()` answers differently at most steps; triage's read of the same counters is the
    same number at every step."""
    promql = 'sum by (model) (rate(llm_request_duration_seconds_count{model="m-decode"}[40s]))'
    args = (ONSET - 600, END, 10)
    rated = {side: _range(base, promql, *args) for side, base in stores.items()}
    apart = [
        (a, b)
        for a, b in zip(*(next(iter(r.values())) for r in rated.values()), strict=True)
        if not math.isclose(a, b, rel_tol=1e-9)
    ]
    assert len(apart) > len(next(iter(rated["prometheus"].values()))) // 2, apart
    exact = {side: _range(base, exact_rates(promql, 10), *args) for side, base in stores.items()}
    assert exact["prometheus"].keys() == exact["victoriametrics"].keys() != set()
    for key, values in exact["prometheus"].items():
        assert values == pytest.approx(exact["victoriametrics"][key], rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("since", [20 * 60, 5 * 60])
def test_triage_reads_the_same_numbers_on_both_stores(stores, since):
    """Every signal of every model, baseline and incident, and the verdicts: the same on both stores."""
    reports = {
        side: triage(Connection(base), Window(END - since, END), "1h", tuple(sorted(FLEET)))
        for side, base in stores.items()
    }
    prom, vm = reports["prometheus"], reports["victoriametrics"]
    assert prom.step == vm.step and prom.rate_window == vm.rate_window
    for a, b in zip(prom.verdicts, vm.verdicts, strict=True):
        assert a.unit == b.unit
        for which in ("baseline", "incident"):
            ra, rb = getattr(a, which), getattr(b, which)
            assert ra.keys() == rb.keys(), (a.unit, which)
            for signal in ra:
                x, y = ra[signal], rb[signal]
                same = x.state == y.state and (
                    x.value == y.value or (x.value is not None and math.isclose(x.value, y.value, rel_tol=1e-9))
                )
                assert same, (a.unit, which, signal, x, y)
        assert headline(a) == headline(b)
    tops = {v.model: (v.findings[0].kind if v.findings else None) for v in prom.verdicts}
    # the kinds are read, not only alike: each model's own (a queue is long enough to name at 5 minutes too)
    assert tops["m-queue"] == "queueing" and tops["m-errors"] == "errors" and tops["m-decode"] == "slow-decode"


# --- the read itself, without a store ------------------------------------------------------------------------------


def test_a_rate_becomes_the_difference_of_last_samples_and_resets_a_drop():
    rate = exact_rates('sum by (model) (rate(llm_x_total{model="a}b"}[60s]))', 12)
    now, before = (
        'last_over_time(llm_x_total{model="a}b"}[60s])',
        'last_over_time(llm_x_total{model="a}b"}[60s] offset 12s)',
    )
    assert rate == f"sum by (model) (({now} - {before} * ({now} >= bool {before})))"
    assert exact_rates("resets(llm_x_total{}[60s])", 12) == (
        "(last_over_time(llm_x_total{}[60s]) < bool last_over_time(llm_x_total{}[60s] offset 12s))"
    )
    assert exact_rates("max by (model) (last_over_time(llm_kv{}[30s]))", 12).startswith("max by (model) (last_over")
    assert reads(rate) is None and reads("rate(x{}[1m])") == "rate" and reads("resets(x{}[1m])") == "resets"


def test_steps_roll_into_rates_over_the_window_with_gaps_adding_nothing():
    import numpy as np

    # per-step increases at 10 s steps (one step missing), rolled over 3 steps, kept from t=20
    block = np.array([[0, 1.0], [10, 2.0], [20, 3.0], [40, 4.0], [50, 5.0]])
    rolled = roll(block, 10.0, 3, 20.0)
    assert rolled[:, 0].tolist() == [20, 40, 50]
    assert rolled[:, 1].tolist() == pytest.approx([6 / 30, 7 / 30, 9 / 30])
    assert roll(block, 10.0, 3, 0.0, per_second=False)[:, 1].tolist() == [1, 3, 6, 7, 9]
    assert steps_per_window(60, 12) == 5 and steps_per_window(288, 288) == 1
