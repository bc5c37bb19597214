"""The simulated vLLM against a real one: every family the simulator exposes, a real vLLM 0.32 exposes with the
same type, label names and histogram buckets (tests/fixtures/real-captures/vllm-0.32.0-cpu-tiny-llama.txt, a
whole /metrics of `vllm serve`). Where they differ on purpose, DIFFERENCES says why. The real-engine step checks
the counters' response to the same events (tests/real_engine)."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from conftest import REAL_CAPTURES
from simtools import simulator

REAL = REAL_CAPTURES / "vllm-0.32.0-cpu-tiny-llama.txt"
# Simulated families that differ from the real engine on purpose: family -> (what differs, why)
DIFFERENCES = {
    **{f"vllm:spec_decode_num_{n}": ("absent", "vLLM exposes speculative decoding only where it is configured; "
                                               "the real engine here runs without a draft model")
       for n in ("drafts", "draft_tokens", "accepted_tokens")},
    **{f"vllm:request_{n}_tokens": ("buckets", "1-2-5 buckets up to --max-model-len: 1,000 on the real engine "
                                               "here, 20,000 for the simulator's larger context")
       for n in ("prompt", "generation")},
}
# Real vLLM 0.32 families the simulator does not expose (yet): nothing downstream reads them, or the simulator's
# engine has no such mechanism. mappings/sources/vllm.yaml maps or ignores each one.
NOT_SIMULATED = {
    "vllm:admission_rejections", "vllm:cache_config_info", "vllm:engine_sleep_state", "vllm:iteration_tokens_total",
    "vllm:estimated_flops_per_gpu", "vllm:estimated_read_bytes_per_gpu", "vllm:estimated_write_bytes_per_gpu",
    "vllm:external_prefix_cache_hits", "vllm:external_prefix_cache_queries", "vllm:mm_cache_hits",
    "vllm:mm_cache_queries", "vllm:num_requests_waiting_by_reason", "vllm:prompt_tokens_by_source",
    "vllm:prompt_tokens_cached", "vllm:prompt_tokens_cached_by_source", "vllm:request_inference_time_seconds",
    "vllm:request_max_num_generation_tokens", "vllm:request_num_preemptions", "vllm:request_params_max_tokens",
    "vllm:request_params_n", "vllm:request_prefill_kv_computed_tokens",
}


def _shapes(text: str) -> dict[str, tuple[str, frozenset, tuple]]:
    """{family: (type, label names, le bounds)} of the vllm: families, _created gauges left out."""
    out: dict[str, tuple[str, frozenset, tuple]] = {}
    for family in text_string_to_metric_families(text):
        if not family.name.startswith("vllm:") or family.name.endswith("_created"):
            continue
        labels = frozenset(k for s in family.samples for k in s.labels if k != "le")
        bounds = tuple(sorted({float(s.labels["le"]) for s in family.samples if "le" in s.labels}))
        out[family.name] = (family.type, labels, bounds)
    return out


def test_every_simulated_vllm_family_has_the_real_engines_shape():
    real = _shapes(REAL.read_text())
    with simulator("vllm", "0.33.0") as (url, _):
        simulated = _shapes(urllib.request.urlopen(url + "/metrics", timeout=30).read().decode())
    assert simulated
    wrong = {}
    for name, shape in simulated.items():
        differs = DIFFERENCES.get(name, (None,))[0]
        if differs == "absent":
            continue
        if name not in real:
            wrong[name] = "not exposed by the real vLLM 0.32"
        elif differs == "buckets":
            real_bounds = real[name][2][:-1]                       # the real ones, +Inf aside: a prefix
            if shape[:2] != real[name][:2] or shape[2][:len(real_bounds)] != real_bounds:
                wrong[name] = f"simulated {shape}, real {real[name]}"
        elif shape != real[name]:
            wrong[name] = f"simulated {shape}, real {real[name]}"
    assert wrong == {}, wrong
    assert sorted(set(real) - set(simulated)) == sorted(NOT_SIMULATED)
