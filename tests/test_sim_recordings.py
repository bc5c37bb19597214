"""The recorded incidents of tests/fixtures/triage/ load into a real Prometheus (tests/triage_tools.py), and
each model's signals move from baseline to incident the way its kind says: what the triage tests stand on."""

from __future__ import annotations

import math
import time

import pytest
from triage_tools import FIXTURES, SIGNALS, load_manifest, recorded_prometheus, window_means

# kind -> (signal, test, bound): "x>" the incident over the baseline above bound, "x<" below it, ">" / "<" the
# incident's own value; loose on purpose (a re-recording moves the numbers), tight enough to name the kind
EXPECTED = {
    "none": [
        ("TTFT", "x<", 1.5),
        ("TPOT", "x<", 1.3),
        ("e2e", "x<", 1.5),
        ("TTFT (front door)", "x<", 1.5),
        ("answered share (front door)", ">", 0.99),
        ("waiting", "<", 0.1),
        ("preemptions/s", "<", 1e-9),
    ],
    "queueing": [
        ("running / cap", ">", 0.6),
        ("waiting", ">", 0.3),
        ("queue time", "x>", 10),
        ("TTFT", "x>", 3),
        ("TPOT", "x<", 1.3),
        ("prompt tokens/request", "x<", 1.3),
    ],
    "long-prompts": [
        ("prompt tokens/request", "x>", 2),
        ("TTFT", "x>", 1.8),
        ("waiting", "<", 0.3),
        ("TPOT", "x<", 1.3),
    ],
    "prefix-cache-loss": [
        ("prefix-cache hit ratio", "<", 0.05),
        ("prompt tokens/request", "x<", 1.2),
        ("prompt tokens/request", "x>", 0.8),
        ("TTFT", "x>", 1.3),
        ("TPOT", "x<", 1.3),
    ],
    "kv-pressure": [
        ("KV cache", "x>", 5),
        ("KV cache (max)", ">", 0.9),
        ("preemptions/s", ">", 0.01),
        ("e2e", "x>", 1.2),
        ("running / cap", "<", 0.5),
        ("prompt tokens/request", "x<", 1.3),
    ],
    "slow-decode": [
        ("TPOT", "x>", 3),
        ("ITL", "x>", 3),
        ("preemptions/s", "<", 1e-9),
        ("spec acceptance", "x>", 0.9),
        ("spec acceptance", "x<", 1.1),
    ],
    "spec-decode-collapse": [("spec acceptance", "x<", 0.4), ("TPOT", "x>", 1.5), ("waiting", "<", 0.3)],
    "thinking": [
        ("TTFT (front door)", "x>", 5),
        ("TTFT", "x<", 1.5),
        ("first chunk (front door)", "x<", 1.5),
        ("reasoning tokens/request (front door)", ">", 100),
    ],
    "long-outputs": [("output tokens/request", "x>", 2), ("e2e", "x>", 1.8), ("TTFT", "x<", 1.3), ("TPOT", "x<", 1.3)],
    "gpu-not-computing": [
        ("GPU-Util", ">", 0.9),
        ("GPU SM active", "x<", 0.5),
        ("GPU tensor active", "x<", 0.5),
        ("TPOT", "x>", 1.5),
    ],
    "errors": [("answered share (front door)", "<", 0.95)],
    "not-the-engine": [
        ("TTFT (front door)", "x>", 5),
        ("duration (front door)", "x>", 1.3),
        ("TTFT", "x<", 1.3),
        ("TPOT", "x<", 1.3),
        ("queue time", "x<", 2),
    ],
    "missing-data": [("engine series samples", "absent", None), ("requests/s (front door)", ">", 0.5)],
}
# signals some releases do not have (vLLM 0.10.2 has no TPOT histogram, SGLang no prefill time): a model whose
# engine lacks one in both windows skips that check
OPTIONAL = {"TPOT", "prefill time", "queue time", "preemptions/s", "spec acceptance"}
FOLDERS = [f for f in (FIXTURES, FIXTURES / "swapped") if (f / "manifest.yaml").exists()]


@pytest.fixture(scope="module", params=FOLDERS, ids=[f.name for f in FOLDERS])
def recorded(request):
    started = time.monotonic()
    with recorded_prometheus(request.param) as (base, manifest):
        loaded = time.monotonic() - started
        baseline = window_means(base, manifest["baseline"]["start"], manifest["baseline"]["end"])
        incident = window_means(base, manifest["incident"]["start"], manifest["incident"]["end"])
        yield manifest, baseline, incident, loaded


@pytest.mark.parametrize("folder", FOLDERS, ids=[f.name for f in FOLDERS])
def test_manifest_names_a_kind_for_every_model_and_windows_in_order(folder):
    manifest = load_manifest(folder)
    assert set(manifest["models"].values()) == set(EXPECTED)
    assert (
        manifest["start"]
        <= manifest["baseline"]["start"]
        < manifest["baseline"]["end"]
        <= manifest["incident"]["start"]
        < manifest["incident"]["end"]
        <= manifest["end"]
    )
    assert set(manifest["ran"]["models"]) == set(manifest["models"])


def test_loads_with_every_model(recorded):
    manifest, baseline, _, loaded = recorded
    print(f"loaded in {loaded:.1f} s")  # measured, not asserted: no test depends on the machine's speed
    assert set(baseline["TTFT (front door)"]) == set(manifest["models"])
    assert set(baseline["TTFT"]) == set(manifest["models"])  # every engine has baseline data
    assert set(baseline["GPU-Util"]) == set(manifest["models"])  # and a GPU, joined on its pod


@pytest.mark.parametrize("model", list(load_manifest()["models"]))
def test_each_models_signals_move_as_its_kind_says(recorded, model):
    manifest, baseline, incident, _ = recorded
    for signal, test, bound in EXPECTED[manifest["models"][model]]:
        assert signal in SIGNALS
        before, after = baseline[signal].get(model), incident[signal].get(model)
        if before is None and after is None and signal in OPTIONAL:
            continue
        if test == "absent":
            assert before and not after, (signal, before, after)
            continue
        assert before is not None and after is not None and not math.isnan(after), (signal, before, after)
        value = after / before if test.startswith("x") else after
        ok = value > bound if test.endswith(">") else value < bound
        assert ok, f"{model}: {signal} baseline {before:.4g} incident {after:.4g}: want {test} {bound}"
