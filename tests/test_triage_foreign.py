"""`inferwatch triage` on incidents shaped like other people's Prometheus, not our own recordings: the engines' own
metric names (vLLM V1 and its older V0 names, SGLang, dcgm-exporter scraped by kube-prometheus without
honorLabels, so a GPU's workload is in `exported_pod`), 60-second scrapes (with GPUs from a stock dcgm-exporter
beside normalized engines), a window shorter than the rate window, no front door and no GPU exporter, and an
engine restart under a new pod name with a minute without scrapes, counters from zero and histogram bounds
written `le="1"` instead of `le="1.0"`.

One real Prometheus holds them all, each at an hour of its own: the main recording (tests/fixtures/triage/)
transformed as those Prometheus servers would hold it, turned into TSDB blocks by promtool. The kind each model
should be named is the recording's manifest: a different Prometheus must not change the verdict."""

from __future__ import annotations

import math
import re
import subprocess
import sys

import pandas as pd
import promql_parser
import pytest
from triage_tools import (
    HOUR_MS,
    NEEDS_PROMETHEUS,
    hour_windows,
    load_manifest,
    own_names,
    series_of,
    series_prometheus,
    shifted,
    times,
    used_series,
)

from inferwatch.dashboards import metric_names
from inferwatch.triage import Connection, Window, load_signals, rate_window, signal_queries, summarise, to_json, triage
from inferwatch.triage._fetch import _frame
from inferwatch.triage._increase import exact_rates
from inferwatch.triage._sources import family_of, translate

pytestmark = NEEDS_PROMETHEUS

MANIFEST = load_manifest()
EXPECTED = MANIFEST["models"]
VARIANTS = {"own-names": 1, "old-names": 2, "60s": 3, "restart": 4, "bare": 5}
QUIET = ("m-quiet", "m-doubling")
SIGNALS = load_signals()
NO_SOURCE = {"llm_max_running_requests"}  # no engine exports it: cap_usage is unmeasured there


def _dcgm_only(series: list[dict]) -> list[dict]:
    """Engines through the normalizing exporter, GPUs from a stock dcgm-exporter: the usual mix."""
    gpus = [s for s in series if s["labels"]["__name__"].startswith("gpu_")]
    return [s for s in series if not s["labels"]["__name__"].startswith("gpu_")] + own_names(gpus, oldest=False)


def _every(series: list[dict], ms: int, phase: int) -> list[dict]:
    """One sample per `ms` (the first of each slot, slots starting at `phase`): a slower scrape."""
    out = []
    for s in series:
        kept, last = [], None
        for t, v in zip(times(s), s["v"], strict=True):
            if last is None or (t - phase) // ms > last:
                kept.append((t, v))
                last = (t - phase) // ms
        out.append(series_of(s["labels"], [t for t, _ in kept], [v for _, v in kept]))
    return out


def _restarted(series: list[dict], at: int, gap: int) -> list[dict]:
    """Every engine restarts at `at` under a new pod name (`<pod>-b`), unscraped for `gap` ms: its counters start
    from zero, its GPU follows it, and the new release writes histogram bounds as Go does (`le="1"`)."""
    out = []
    for s in series:
        name, labels = s["labels"]["__name__"], s["labels"]
        if name.startswith("llm_frontdoor_") or "pod" not in labels:
            out.append(s)
            continue
        counter = name.endswith(("_total", "_sum", "_count", "_bucket"))
        moments, values = times(s), s["v"]
        before = [(t, v) for t, v in zip(moments, values, strict=True) if t < at]
        offset = float(before[-1][1]) if counter and before else 0.0
        after = [
            (t, repr(max(0.0, float(v) - offset)) if counter else v)
            for t, v in zip(moments, values, strict=True)
            if t >= at + gap
        ]
        new = dict(labels, pod=labels["pod"] + "-b")
        if "le" in new and new["le"] != "+Inf":
            new["le"] = f"{float(new['le']):g}"
        for part_labels, part in ((labels, before), (new, after)):
            if part:
                out.append(series_of(part_labels, [t for t, _ in part], [v for _, v in part]))
    return out


@pytest.fixture(scope="module")
def prom(tmp_path_factory):
    recording = used_series(MANIFEST)
    start = MANIFEST["incident"]["start"] * 1000
    variants = {
        "own-names": own_names(recording, oldest=False),
        "old-names": own_names(recording, oldest=True),
        "60s": _every(_dcgm_only(recording), 60_000, 17_000),
        "restart": _restarted(recording, start + 60_000, 60_000),
        "bare": [s for s in recording if not s["labels"]["__name__"].startswith(("gpu_", "llm_frontdoor_"))],
    }
    everything = [s for name, series in variants.items() for s in shifted(series, VARIANTS[name] * HOUR_MS)]
    with series_prometheus(everything, tmp_path_factory.mktemp("triage-foreign")) as base:
        yield base


def _windows(variant: str) -> tuple[Window, str]:
    return hour_windows(MANIFEST, VARIANTS[variant])


def _first_kinds(report) -> dict[str, list[str]]:
    return {v.model: [f.kind for f in v.findings] for v in report.verdicts}


def _cli(prom: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "inferwatch", "triage", "--prometheus", prom, *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _assert_manifest_kinds(kinds: dict[str, list[str]]) -> None:
    assert set(kinds) == set(EXPECTED)
    for model, expected in EXPECTED.items():
        assert kinds[model][:1] == ([] if expected == "none" else [expected]), (model, kinds[model])


def test_the_engines_own_names_and_dcgm_through_kube_prometheus_give_the_same_kinds(prom):
    incident, baseline = _windows("own-names")
    doc = to_json(triage(Connection(prom), incident, baseline))
    assert doc["read_from_sources"] == ["engine", "gpu"] and doc["warnings"] == []
    _assert_manifest_kinds({m["model"]: [k["kind"] for k in m["kinds"]] for m in doc["models"]})
    gpu = next(m for m in doc["models"] if m["model"] == "m-gpu-not-computing")["kinds"][0]["evidence"]
    util = next(e for e in gpu if e["signal"] == "gpu_util")  # DCGM's percent, joined on exported_pod
    assert 0.9 < util["incident"] <= 1.0


def test_older_names_vllm_v0_and_sglang_0_4_give_the_same_kinds(prom):
    incident, baseline = _windows("old-names")
    report = triage(Connection(prom), incident, baseline)
    _assert_manifest_kinds(_first_kinds(report))
    verdict = next(v for v in report.verdicts if v.model == "m-kv-pressure")
    assert verdict.incident["kv_usage_peak"].value > 0.9  # vllm:gpu_cache_usage_perc


def test_scrapes_a_minute_apart_and_gpus_from_dcgm_give_the_same_kinds(prom):
    incident, baseline = _windows("60s")
    report = triage(Connection(prom), incident, baseline)
    assert report.rate_window == incident.seconds == 239  # four scrapes (240 s) would not fit in the window
    assert report.read_from_sources == ("gpu",)
    _assert_manifest_kinds(_first_kinds(report))


def test_a_window_shorter_than_two_scrapes_is_not_enough_data_never_a_wrong_kind(prom):
    incident, baseline = _windows("60s")
    done = _cli(prom, "--since", "100s", "--end", f"{incident.end:.0f}", "--baseline", baseline)
    assert done.returncode == 0, done.stderr
    assert "warning: the incident (100s) is shorter than the rate window (120s" in done.stdout
    headlines = {line.split(":")[0]: line for line in done.stdout.splitlines() if line.startswith("m-")}
    assert set(headlines) == set(EXPECTED)
    for model, line in headlines.items():
        named = re.findall(r"([a-z-]+) \(\d", line)
        assert set(named) <= {EXPECTED[model]}, line  # what the gauges alone show, or nothing
        if not named:
            assert "not enough data (too few requests or samples in the incident" in line, line
    assert "missing-data (1.00)" in headlines["m-missing-data"]


def test_a_restart_under_a_new_pod_name_with_a_minute_unscraped_keeps_the_kinds(prom):
    incident, baseline = _windows("restart")
    report = triage(Connection(prom), incident, baseline)
    kinds = _first_kinds(report)
    for model, expected in EXPECTED.items():
        if model in QUIET:  # the minute without series is said, ranked as low as a finding goes
            assert kinds[model] == ["missing-data"], (model, kinds[model])
            finding = report.verdicts[[v.model for v in report.verdicts].index(model)].findings[0]
            assert finding.confidence == 0.6 and finding.pod is None
        else:
            assert kinds[model][:1] == [expected], (model, kinds[model])
    quiet = next(v for v in report.verdicts if v.model == "m-quiet")
    assert quiet.pods == {}  # neither the old pod nor its replacement is "missing"
    # le="1.0" before, le="1" after: one bucket, so the percentile reads as before
    assert 0.67 < quiet.incident["ttft_p95"].value / quiet.baseline["ttft_p95"].value < 1.5


def test_without_front_door_or_gpu_exporter_what_needs_them_is_never_guessed(prom):
    incident, baseline = _windows("bare")
    report = triage(Connection(prom), incident, baseline)
    kinds = _first_kinds(report)
    # what the engine alone shows: longer answers, slower steps; the front door's and the GPU's kinds unsaid
    unseen = {
        "m-thinking": ["long-outputs"],
        "m-gpu-not-computing": ["slow-decode"],
        "m-not-the-engine": [],
        "m-errors": [],
    }  # SGLang's errors were seen at the front door only
    for model, expected in EXPECTED.items():
        assert kinds[model][:1] == unseen.get(model, [] if expected == "none" else [expected]), (model, kinds[model])
    verdict = next(v for v in report.verdicts if v.model == "m-not-the-engine")
    assert {"door_ttft_mean", "gpu_util"} <= set(verdict.not_measured) and verdict.enough_data


# --- the same rules, without Prometheus ---------------------------------------------------------------------------


def test_only_the_asked_families_are_read_from_their_sources():
    query = (
        'sum by (model) (rate(llm_time_to_first_token_seconds_sum{model=~"a|b"}[60s])) '
        '/ sum by (model) (rate(llm_frontdoor_requests_total{model=~"a|b"}[60s]))'
    )
    assert translate(query, frozenset()) == query
    engine = translate(query, frozenset({"engine"}))
    assert "llm_time_to_first_token_seconds_sum{" not in engine and "llm_frontdoor_requests_total{" in engine
    # the colon name first; the sanitized copy only for a model without it
    assert re.search(
        r'__name__="vllm:time_to_first_token_seconds_sum".* or on \(model_name, model\) '
        r'\(rate\(\{__name__="vllm_time_to_first_token_seconds_sum"',
        engine,
    )
    # SGLang's model is in model_name, or in name before 0.3.6: the first present one decides
    assert 'model_name="", name!="", name=~"a|b"' in engine
    # a matcher on a label the mapping sets picks the source: only vLLM has finished_reason
    finished = translate('rate(llm_requests_finished_total{model!="", engine="vllm"}[1m])', frozenset({"engine"}))
    assert "vllm:request_success_total" in finished and "sglang:" not in finished


@pytest.mark.parametrize("models", [(), ("a.b", 'x"y', "c,d"), ("a}b", "e{f")])
def test_every_selector_of_the_signals_is_read_from_its_sources(models):
    """translate() finds selectors by a regex, not a parser: promql-parser checks that it misses none of
    signals.yaml's (a bare selector, outside a range function, would silently keep its vocabulary name) and that
    what it writes parses, for model names holding quotes, commas and braces."""
    for signal in SIGNALS:
        for part, promql in signal_queries(signal, models, "60s", "38s").items():
            read = translate(promql, frozenset({"engine", "gpu"}))
            promql_parser.parse(read)
            left = {n for n in metric_names(read) if family_of(n)}
            assert left <= NO_SOURCE, (signal.name, part, left)
            for text in (promql, read):  # and as fetched: every rate() and resets() read from last samples
                exact = exact_rates(text, 12)
                promql_parser.parse(exact)
                assert not re.search(r"\b(rate|resets)\(", exact), (signal.name, part)


def test_rates_are_read_only_where_their_window_lies_inside_the_window():
    signals = [s for s in SIGNALS if s.name in ("ttft_mean", "running")]
    window = Window(0, 240)

    def frame(end):
        rows = [("running", "value", "m", "", math.nan, float(t), 2.0) for t in range(0, end + 1, 10)]
        for t in range(0, end + 1, 10):  # the first minute's rates still count the time before
            rows += [
                ("ttft_mean", "num", "m", "", math.nan, float(t), 2.0 if t < 60 else 8.0),
                ("ttft_mean", "den", "m", "", math.nan, float(t), 10.0),
            ]
        return pd.DataFrame(rows, columns=["signal", "part", "model", "pod", "le", "t", "v"])

    assert summarise(frame(240), signals, window, 10.0, lookback=60)[("m", None)]["ttft_mean"].value == 0.8
    assert summarise(frame(240), signals, window, 10.0)[("m", None)]["ttft_mean"].value < 0.7
    short = summarise(frame(50), signals, Window(0, 50), 10.0, lookback=60)[("m", None)]
    assert short["ttft_mean"].state == "few" and short["running"].value == 2.0
    assert rate_window(1, 60, 240) == "240s" and rate_window(1, 60, 150) == "150s" and rate_window(1, 60, 60) == "120s"


def test_le_written_2_or_2_0_is_one_bucket():
    answer = [{"metric": {"model": "m", "le": le}, "values": [[0, "5"]]} for le in ("2", "2.0", "+Inf", "fast")]
    frame = _frame("ttft_p95", "buckets", answer)  # a bound that is no number is left out, not a crash
    assert sorted(frame["le"].unique()) == [2.0, math.inf]
    sums = frame.groupby("le")["v"].sum()
    assert sums[2.0] == 10.0
