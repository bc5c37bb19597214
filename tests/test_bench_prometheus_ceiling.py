"""The ceiling benchmark (tests/bench_prometheus_ceiling.py) keeps working: its fleet's expositions are valid and
move as live targets do, and its smallest fleet runs end to end on a real Prometheus with the default rules."""

from __future__ import annotations

import time

import pytest
from bench_prometheus_ceiling import measure
from ceiling_fleet import Fleet
from conftest import need
from prometheus_client.parser import text_string_to_metric_families


def _families(body: bytes) -> dict[str, tuple[str, list]]:
    """{family: (type, samples)}; a node's GPUs after the first repeat samples without HELP/TYPE, as the parser
    reads them: one family again, untyped."""
    out: dict[str, tuple[str, list]] = {}
    for family in text_string_to_metric_families(body.decode()):
        kind, samples = out.get(family.name, (family.type, []))
        out[family.name] = (kind if kind != "unknown" else family.type, samples + family.samples)
    return out


def test_every_target_answers_a_valid_exposition_that_moves_like_a_live_one():
    fleet = Fleet(engines=4, models=2)
    assert {t.job for t in fleet.targets} == {"vllm", "sglang", "dcgm", "frontdoor"}
    assert len({t.labels["instance"] for t in fleet.targets}) == len(fleet.targets)
    now = time.time()
    for target in fleet.targets:
        before, after = _families(target.exposition.render(now)), _families(target.exposition.render(now + 60))
        assert before.keys() == after.keys(), target.path
        for name, (kind, samples) in after.items():
            if kind == "counter":
                earlier = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in before[name][1]}
                for s in samples:
                    assert s.value >= earlier[s.name, tuple(sorted(s.labels.items()))], (target.path, s)
            if kind == "histogram":  # cumulative buckets, +Inf equal to _count, per label set
                series: dict[tuple, list[tuple[float, float]]] = {}
                counts = {}
                for s in samples:
                    key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
                    if s.name.endswith("_bucket"):
                        series.setdefault(key, []).append((float(s.labels["le"]), s.value))
                    elif s.name.endswith("_count"):
                        counts[key] = s.value
                for key, buckets in series.items():
                    values = [v for _, v in sorted(buckets)]
                    assert values == sorted(values), (target.path, name, key)
                    assert values[-1] == counts[key], (target.path, name, key)


def test_engines_carry_their_model_and_gpus_their_pod():
    fleet = Fleet(engines=4, models=2)
    engines = {t.labels["pod"]: t for t in fleet.targets if t.job in ("vllm", "sglang")}
    for pod, target in engines.items():
        families = _families(target.exposition.render(time.time())).values()
        models = {s.labels.get("model_name") for _, samples in families for s in samples}
        assert pod.rsplit("-", 1)[0] in models, pod
    gpu_pods = set()
    for target in (t for t in fleet.targets if t.job == "dcgm"):
        for _, samples in _families(target.exposition.render(time.time())).values():
            gpu_pods |= {s.labels["pod"] for s in samples}
    assert gpu_pods == set(engines)
    assert fleet.gpu_count == 2 * 1 + 2 * 2  # models cycle through 1, 2, 4, 8 GPUs an engine


@pytest.mark.slow
def test_smallest_fleet_end_to_end(tmp_path):
    """Every group of the default bundle evaluates, every job's series arrive, and the series formula the
    benchmark prints adds up to Prometheus' head series."""
    need("prometheus")
    r = measure(2, 2, 0, "1s", "1s", "1s", dashboard_minutes=float("inf"), workdir=tmp_path)  # no time budget
    assert r["groups_not_evaluated"] == [] and r["failed"] == []
    per = r["series_per"]
    assert all(per[f"per_{job}"] > 0 for job in ("vllm", "sglang", "dcgm", "frontdoor")), per
    fleet = Fleet(2, 2)
    formula = (
        per["per_vllm"] * fleet.count("vllm")
        + per["per_sglang"] * fleet.count("sglang")
        + (per["per_dcgm"] + per["recorded_per_gpu"]) * fleet.gpu_count
        + per["per_frontdoor"] * fleet.count("frontdoor")
        + per["recorded_per_engine"] * r["engines"]
        + per["recorded_per_model"] * r["models"]
        + per["recorded_rest"]
    )
    assert formula == pytest.approx(r["head_series"], rel=0.02)
    assert r["samples_per_s"] > 0 and r["rss_mib_peak"] > 0 and r["worst_group"]
    boards = r["dashboards"]
    assert set(boards) == {"gpu-activity", "serving-overview", "slos", "which-slow"}
    assert all(not b["errors"] and b["queries"] for b in boards.values()), boards
