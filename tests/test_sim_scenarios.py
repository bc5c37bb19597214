"""Each scenario moves the signals of its kind of slow and leaves the others: the engine model driven on a virtual
clock (deterministic, in milliseconds), the HTTP-side scenarios (not-the-engine, metrics-down) on a live
simulator, and the simulated GPUs of gpu-not-computing."""

from __future__ import annotations

import json
import random
import time
import urllib.error
import urllib.request
from dataclasses import replace
from functools import cache

import pytest
from simtools import FAST, simulator

from inferwatch.sim import Engine, EngineParams, LoadConfig, default_release, with_scenario
from inferwatch.sim._engine import WORDS
from inferwatch.sim._load import _body

# what the recorded incidents' users send (tests/record_triage.py): a long shared system prompt for most
LOAD = LoadConfig("http://unused", rate=1.0, prompt_tokens=200, prefix_share=0.7, prefix_tokens=768, max_tokens=2048)


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def drive(
    scenario: str, seconds: float = 240, cap: int = 16, rate: float = 1.0, seed: int = 1, engine: str = "vllm"
) -> dict[str, float]:
    """Poisson arrivals for `seconds` of virtual time on an engine in `scenario`: its signals, as means."""
    clock, rng = Clock(), random.Random(seed)
    params = with_scenario(EngineParams(max_num_seqs=cap), scenario)
    eng = Engine(engine, default_release(engine), "m", params, seed=seed, clock=clock)
    prefix = " ".join(rng.choice(WORDS) for _ in range(LOAD.prefix_tokens))
    config = replace(LOAD, rate=rate)
    end, arrival = clock.now + seconds, clock.now + rng.expovariate(rate)
    gauges = {"running": 0.0, "waiting": 0.0, "kv": 0.0, "full_cap": 0.0}
    kv_max = 0.0
    while clock.now < end:
        while arrival <= clock.now:
            body = _body(config, "m", rng, prefix)
            eng.submit(eng.new_request(body["messages"][0]["content"], body["max_tokens"], True))
            arrival += rng.expovariate(rate)
        if not eng.running and not eng.waiting:
            clock.now = arrival
            continue
        step = eng.begin_step()
        clock.now += step
        eng.end_step(step)
        for key, value in (
            ("running", len(eng.running)),
            ("waiting", len(eng.waiting)),
            ("kv", eng.kv_used / eng.params.kv_cache_tokens),
            ("full_cap", len(eng.running) >= cap),
        ):
            gauges[key] += value * step
        kv_max = max(kv_max, eng.kv_used / eng.params.kv_cache_tokens)
    return {**{k: v / seconds for k, v in gauges.items()}, "kv_max": kv_max, **_means(eng)}


def _means(eng: Engine) -> dict[str, float]:
    """Means of the engine's own histograms and counters, as triage reads them."""
    got: dict[str, float] = {}
    for metric in eng.metrics.registry.collect():
        for s in metric.samples:
            got[s.name] = got.get(s.name, 0.0) + s.value
    mean = lambda n: got[f"vllm:{n}_sum"] / max(1.0, got[f"vllm:{n}_count"])  # noqa: E731
    return {
        "ttft": mean("time_to_first_token_seconds"),
        "tpot": mean("request_time_per_output_token_seconds"),
        "itl": mean("inter_token_latency_seconds"),
        "e2e": mean("e2e_request_latency_seconds"),
        "queue": mean("request_queue_time_seconds"),
        "prompt": mean("request_prompt_tokens"),
        "output": mean("request_generation_tokens"),
        "hit_ratio": got["vllm:prefix_cache_hits_total"] / got["vllm:prefix_cache_queries_total"],
        "preemptions": got.get("vllm:num_preemptions_total", 0.0),
        "acceptance": got["vllm:spec_decode_num_accepted_tokens_total"]
        / got["vllm:spec_decode_num_draft_tokens_total"],
        "requests": got["vllm:e2e_request_latency_seconds_count"],
    }


@cache
def run(scenario: str, cap: int = 16) -> dict[str, float]:
    return drive(scenario, cap=cap)


def change(scenario: str, cap: int = 16) -> dict[str, float]:
    """Each signal in `scenario` over the same signal in normal, same seed and arrivals."""
    normal, incident = run("normal", cap), run(scenario, cap)
    return {k: (incident[k] / normal[k] if normal[k] else (1.0 if not incident[k] else float("inf"))) for k in normal}


def test_normal_is_a_light_healthy_engine():
    n = run("normal")
    assert 0.5 < n["running"] < 4 and n["waiting"] < 0.05 and n["kv"] < 0.15 and n["preemptions"] == 0
    assert n["ttft"] < 0.1 and 0.005 < n["tpot"] < 0.02 and 0.6 < n["hit_ratio"] < 0.8
    assert 0.5 < n["acceptance"] < 0.7 and 180 < n["requests"] < 300


def test_queueing_fills_the_cap_and_waits():
    c, q = change("queueing", cap=8), run("queueing", cap=8)
    assert q["full_cap"] > 0.3 and q["waiting"] > 0.5
    assert c["queue"] > 10 and c["ttft"] > 3
    assert 0.8 < c["prompt"] < 1.25 and 0.8 < c["output"] < 1.25 and 0.9 < c["acceptance"] < 1.1


def test_long_prompts_lengthen_prefill_not_the_queue():
    c, i = change("long-prompts"), run("long-prompts")
    assert 2.5 < c["prompt"] < 3.5 and c["ttft"] > 2
    assert i["waiting"] < 0.2 and i["preemptions"] == 0 and 0.8 < c["output"] < 1.25
    assert c["hit_ratio"] < 0.5  # the same cached prefix is a smaller share of longer prompts


def test_prefix_cache_loss_same_prompts_no_hits():
    c, i = change("prefix-cache-loss"), run("prefix-cache-loss")
    assert i["hit_ratio"] == 0 and 0.9 < c["prompt"] < 1.1 and c["ttft"] > 1.3
    assert i["waiting"] < 0.1 and 0.9 < c["tpot"] < 1.25 and i["preemptions"] == 0


def test_kv_pressure_fills_the_cache_and_preempts():
    c, i = change("kv-pressure"), run("kv-pressure")
    # requests are large beside this cache: it runs full, then one waits while the other finishes
    assert i["kv_max"] > 0.9 and i["kv"] > 0.3 and i["preemptions"] > 0.05 * i["requests"]
    # preempted requests wait mid-answer (TPOT a little up, e2e a lot); they wait below the cap: memory, not slots
    assert c["e2e"] > 1.5 and c["tpot"] > 1.05 and i["waiting"] > 0.5 and i["full_cap"] == 0
    assert 0.9 < c["prompt"] < 1.1 and 0.9 < c["output"] < 1.1 and 0.9 < c["acceptance"] < 1.1


def test_slow_decode_slows_each_step_at_the_batch_it_has():
    c, i = change("slow-decode"), run("slow-decode")
    assert c["tpot"] > 3 and c["itl"] > 3 and i["preemptions"] == 0 and 0.9 < c["acceptance"] < 1.1
    # the batch grows with the open-loop arrivals, and explains little of the step: 2 % a request
    assert c["itl"] > 0.8 * 5 * (1 + 0.02 * (i["running"] - 1)) / (1 + 0.02 * (run("normal")["running"] - 1))
    assert i["full_cap"] < 0.05 and 0.9 < c["prompt"] < 1.1


def test_spec_decode_collapse_lowers_acceptance_and_raises_tpot():
    c, i = change("spec-decode-collapse"), run("spec-decode-collapse")
    assert i["acceptance"] < 0.2 and c["tpot"] > 1.5 and 0.9 < c["itl"] < 1.1  # same steps, fewer tokens each
    assert i["preemptions"] == 0 and i["waiting"] < 0.1 and 0.9 < c["prompt"] < 1.1


def test_thinking_generates_hidden_tokens_engine_ttft_normal():
    c = change("thinking")
    assert c["output"] > 3 and c["ttft"] < 1.3 and c["tpot"] < 1.3 and 0.9 < c["prompt"] < 1.1


def test_long_outputs_lengthen_answers_not_tokens():
    c, i = change("long-outputs"), run("long-outputs")
    assert c["output"] > 2.5 and c["e2e"] > 2 and c["ttft"] < 1.3 and c["tpot"] < 1.2
    assert i["waiting"] < 0.1 and i["preemptions"] == 0


def test_gpu_not_computing_slows_steps_like_gpu_stall():
    c = change("gpu-not-computing")
    assert with_scenario(EngineParams(), "gpu-not-computing") == with_scenario(EngineParams(), "gpu-stall")
    assert c["tpot"] > 2 and 0.9 < c["prompt"] < 1.1 and 0.9 < c["acceptance"] < 1.1


@pytest.mark.parametrize("scenario", ["not-the-engine", "metrics-down", "errors"])
def test_scenarios_outside_the_engine_leave_its_latencies_alone(scenario):
    c = change(scenario)
    for signal in ("ttft", "tpot", "queue", "prompt", "hit_ratio", "acceptance"):
        assert 0.8 < c[signal] < 1.25, (signal, c[signal])


def _post(base: str, body: dict, path: str = "/v1/chat/completions") -> bytes:
    request = urllib.request.Request(
        base + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=30) as resp:
        return resp.read()


def test_not_the_engine_delays_requests_before_the_engines_clock():
    with simulator(params=replace(FAST, output_tokens_mean=5)) as (base, sim):
        _post(base, {"scenario": "not-the-engine"}, "/admin/scenario")
        sim.engine.params = replace(sim.engine.params, ingress_delay_s=0.2)  # scaled down, as FAST is
        started = time.monotonic()
        _post(base, {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True})
        seen = time.monotonic() - started
        ttft = [
            s
            for m in sim.engine.metrics.registry.collect()
            for s in m.samples
            if s.name == "vllm:time_to_first_token_seconds_sum"
        ][0].value
    assert seen >= 0.1 and ttft < 0.05  # the client waited; the engine's clock never saw it


def test_metrics_down_fails_every_scrape_while_serving():
    with simulator() as (base, sim):
        _post(base, {"scenario": "metrics-down"}, "/admin/scenario")
        sim.engine.rng.seed(5)
        for _ in range(4):
            try:
                urllib.request.urlopen(base + "/metrics", timeout=0.3)
                raise AssertionError("/metrics answered")
            except (urllib.error.HTTPError, OSError):
                pass
        assert b"choices" in _post(base, {"model": "m", "messages": [{"role": "user", "content": "hi"}]})


def test_simulate_help_names_every_scenario():
    import typing

    from inferwatch.sim import scenarios
    from inferwatch.sim._cli import simulate

    text = typing.get_type_hints(simulate, include_extras=True)["scenario"].__metadata__[0].help
    assert [name for name in scenarios() if name not in text] == []
