"""A generated library of labelled incidents, shaped the way production Prometheus holds them, for triage.

    python tests/incident_library.py OUT            # write the fast set's TSDB blocks and labels.json under OUT
    python tests/incident_library.py OUT --seeds 1 2 3

Each case is drawn from parameters and a seed, never hand-tuned: a few replicas of one model behind a fluid
queue model of an engine (arrivals with a daily cycle and noise, prompt and output lengths, a prefix-cache hit
ratio, a concurrency cap and a KV cache, prefill and decode speeds), scraped every 15, 30 or 60 s. The
incident changes some of those parameters by a factor drawn from 1.5-2.5x (or an absolute move for shares),
ramped in over a minute or two. What production adds is drawn too: the engines' own names (vLLM, SGLang) or
the common vocabulary, with or without a front door, a GPU exporter (ours, or dcgm-exporter's default CSV
without SM activity) and the concurrency cap; rollouts to new pod names, restarts and crash loops (counters
from zero), one bad replica of four, a day-ago window that was itself an incident, two causes at once.

A case's label is what on-call should read first: the kinds whose top place counts as right (`expect`; empty
for a healthy model: nothing at 0.5 or more), the pod when one replica is the finding, and the kinds that
must not reach 0.5 (`forbid`). Every case of one library shares one incident window; cases are models of
their own (`c07-queueing-…`), split into stores by GPU naming (triage reads a Prometheus' GPUs under one
naming), each turned into TSDB blocks by `promtool tsdb create-blocks-from openmetrics`.
"""

from __future__ import annotations

import json
import sys
import zlib
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from triage_tools import own_names, series_of  # noqa: E402

__all__ = [
    "Case",
    "Incident",
    "T0",
    "INCIDENT",
    "CLASSES",
    "library",
    "case_series",
    "as_held",
    "store_of",
    "write_store",
    "labels",
]

DAY = 86400
T0 = 1793710800  # 2026-11-03T13:00:00Z: the incident starts (a weekday, midday)
INCIDENT = (T0, T0 + 1800)  # every case's incident window
NAMESPACE = "llm"
TTFT_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
YESTERDAY_END = 5400.0  # seconds after T0 - 1 day when the day before's incidents ended


@dataclass(frozen=True)
class Incident:
    """What changes, and when (seconds from T0): factors multiply an engine parameter, shares are set."""

    start: float = 0.0
    end: float = 1e9
    ramp: float = 90.0
    rate: float = 1.0  # arrivals
    prompt: float = 1.0  # prompt tokens per request
    output: float = 1.0  # output tokens per request
    decode: float = 1.0  # time per decode step
    hit: float | None = None  # prefix-cache hit ratio (set)
    accept: float | None = None  # speculative acceptance (set)
    errors: float | None = None  # share of requests ending in error (set)
    reasoning: float = 1.0  # hidden reasoning tokens (front door)
    door_delay: float = 0.0  # seconds added in front of the engine
    stall: float = 0.0  # share of GPU time lost to host-side stalls (GPU-Util stays high)
    kv: float = 1.0  # KV cache capacity
    pods: tuple[int, ...] = ()  # the replicas it happens on (empty: all)


@dataclass(frozen=True)
class Case:
    name: str
    cls: str  # the class of the library it belongs to (CLASSES)
    expect: tuple[str, ...]  # kinds whose top place is right; () = nothing wrong
    seed: int
    engine: str = "vllm"
    raw: bool = False  # the engines' own names (no normalizing exporter or relabeling)
    door: bool = True
    gpu: str = "vocab"  # vocab, dcgm (dcgm-exporter with SM activity), dcgm-default (without), none
    cap: bool = True  # llm_max_running_requests exported (only with the vocabulary)
    token_histograms: bool = True  # SGLang ships without them (--collect-tokens-histogram)
    pods: int = 2
    scrape: int = 30
    load: float = 0.55  # utilisation of the batch at the daily mean
    rate: float = 1.0  # requests per second per replica at the daily mean
    prompt: float = 1500.0
    output: float = 250.0
    hit: float = 0.6
    accept: float | None = None  # speculative acceptance; None: no speculative decoding
    reasoning: float = 0.0
    preempt: float = 1.0  # preemptions per request when the cache is full, relative (rare on reasoning)
    error_share: float = 0.002
    incidents: tuple[Incident, ...] = ()
    yesterday: tuple[Incident, ...] = ()  # incidents of the day before (offsets from T0 - 1 day)
    rollout: float | None = None  # seconds from T0 at which pods are replaced one by one under new names
    restarts: tuple[tuple[int, float], ...] = ()  # (pod, seconds from T0): restarted under the same name
    gone: tuple[float, float] | None = None  # engine series unscraped over this span (seconds from T0)
    history: float = 0.0  # extra seconds of data before the hour before (a slow drift's)
    no_yesterday: bool = False  # a deployment younger than a day
    born: float | None = None  # seconds from T0 when the deployment started: no series before (younger than an hour)
    patience: float | None = None  # seconds a client waits in the queue before it gives up (None: forever)
    expect_pod: int | None = None
    forbid: tuple[str, ...] = ()
    drift: tuple[str, float, float] = ()  # (parameter, hours before T0 it starts, factor at T0): a slow drift

    @property
    def model(self) -> str:
        return self.name


CLASSES = (
    "healthy",
    "kind",
    "rollout",
    "restart",
    "crash-loop",
    "bad-replica",
    "sglang-shipped",
    "dcgm-default",
    "kv-reasoning",
    "degraded-baseline",
    "slow-drift",
    "absolute",
    "two-causes",
    "missing-data",
    "onset",
)


# --- the engine model --------------------------------------------------------------------------------------------


def _params(case: Case, t: np.ndarray, rng, pod: int, incidents) -> dict[str, np.ndarray]:
    """Each engine parameter over time for one replica: the daily cycle, noise, and the incidents' changes."""
    n = len(t)
    day = 1 + 0.35 * np.sin(2 * np.pi * (t - (T0 - 4 * 3600)) / DAY)  # peak a few hours after T0
    wobble = np.exp(np.convolve(rng.normal(0, 0.08, n), np.ones(6) / 6**0.5, "same"))
    p = {
        "rate": case.rate * day * wobble,
        "prompt": np.full(n, case.prompt),
        "output": np.full(n, case.output),
        "decode": np.full(n, 1.0),
        "hit": np.full(n, case.hit),
        "accept": np.full(n, case.accept or 0.0),
        "errors": np.full(n, case.error_share),
        "reasoning": np.full(n, case.reasoning),
        "door_delay": np.full(n, 0.0),
        "stall": np.full(n, 0.0),
        "kv": np.full(n, 1.0),
    }
    if case.drift:
        what, hours, factor = case.drift
        x = np.clip((t - (T0 - hours * 3600)) / (hours * 3600), 0, None)
        p[what] = p[what] * (1 + (factor - 1) * x) if what != "accept" else p[what] - (p[what] * (1 - factor)) * x
    # yesterday's incidents were over within the hour and a half: today starts from normal
    for inc, at in [(i, T0) for i in incidents] + [
        (replace(i, end=min(i.end, YESTERDAY_END)), T0 - DAY) for i in case.yesterday
    ]:
        if inc.pods and pod not in inc.pods:
            continue
        w = np.clip((t - (at + inc.start)) / max(inc.ramp, 1), 0, 1) * (t < at + inc.end)
        for key in ("rate", "prompt", "output", "decode", "kv"):
            p[key] = p[key] * (1 + (getattr(inc, key) - 1) * w)
        p["reasoning"] = p["reasoning"] + (inc.reasoning - 1) * max(case.reasoning, 200) * w
        for key in ("hit", "accept", "errors"):
            if getattr(inc, key) is not None:
                p[key] = p[key] + (getattr(inc, key) - p[key]) * w
        p["door_delay"] = p["door_delay"] + inc.door_delay * w
        p["stall"] = p["stall"] + inc.stall * w
    return p


def _engine(case: Case, t: np.ndarray, dt: float, p: dict, rng) -> dict[str, np.ndarray]:
    """A fluid queue: per step, the running batch, the queue, and each finished request's mean latencies."""
    n = len(t)
    noise = lambda s=0.04: np.exp(rng.normal(0, s, n))  # noqa: E731 - per-step measurement noise
    spec = 1 + 1.2 * p["accept"]  # tokens per step with speculative decoding
    step0 = 0.012 / spec * (1 + p["stall"] / (1 - np.minimum(p["stall"], 0.9)))
    prefill = p["prompt"] * (1 - p["hit"]) * 0.00012 + 0.02
    # the cap that makes the baseline's load `case.load` at the daily mean
    service0 = (
        0.02
        + case.prompt * (1 - case.hit) * 0.00012
        + (case.output + case.reasoning) * 0.012 * 1.3 / (1 + 1.2 * (case.accept or 0))
    )
    cap = max(4, int(round(case.rate * service0 / case.load)))
    # room for the whole batch with prompts and outputs twice as long: a plain change of length does not fill it
    kv_tokens = cap * (case.prompt + (case.output + case.reasoning) / 2) * 2.2 * p["kv"]
    tokens = p["output"] + p["reasoning"]
    per_req = p["prompt"] + tokens / 2
    kv_cap = kv_tokens / per_req  # requests the cache holds
    slots = np.minimum(cap, kv_cap)
    decode = step0 * p["decode"]
    service = prefill + tokens * decode * (1 + 0.3 * np.minimum(1.0, slots / cap))
    rate, slot_list, service_list = p["rate"].tolist(), slots.tolist(), service.tolist()
    running, waiting_at, served_at = [0.0] * n, [0.0] * n, [0.0] * n
    waiting = 0.0
    for k in range(n):  # the queue is the one state carried from step to step
        if waiting > 0 or rate[k] * service_list[k] >= slot_list[k]:
            running[k] = slot_list[k]
            served = slot_list[k] / service_list[k]
            waiting = max(0.0, waiting + (rate[k] - served) * dt)
            if case.patience is not None:  # clients who waited longer than their patience left: a steady queue
                waiting = min(waiting, served * case.patience)
        else:
            running[k], served = rate[k] * service_list[k], rate[k]
        waiting_at[k], served_at[k] = waiting, served
    out = {"running": np.array(running), "waiting": np.array(waiting_at)}
    served = np.array(served_at)
    out["done"] = served * dt
    out["queue"] = out["waiting"] / np.maximum(served, 1e-6) + 0.005
    out["prefill"] = prefill
    out["tpot"] = decode * (1 + 0.3 * out["running"] / cap)
    out["ttft"] = out["queue"] + prefill
    out["e2e"] = out["ttft"] + tokens * out["tpot"]
    out["kv"] = np.minimum(0.99, out["running"] * per_req / kv_tokens)
    # preempted only when the cache, not the cap, holds the batch back and is full: more often the further the
    # demand outgrows it
    full = (kv_cap < cap) & (out["running"] >= 0.97 * kv_cap)
    demand = (p["rate"] * service + out["waiting"]) / kv_cap
    out["preempt"] = 0.001 + (0.02 + 0.05 * np.clip(demand - 1, 0, 2)) * full * case.preempt
    for key in ("queue", "ttft", "tpot", "e2e", "prefill"):
        out[key] *= noise()
    out["done"] *= noise(0.05)
    out["kv"] = np.clip(out["kv"] * noise(0.02), 0, 0.995)
    out["cap"] = np.full(n, float(cap))
    return out


class _Writer:
    """Series in read_recording's shape, sampled at `keep` times: counters are cumulative sums."""

    def __init__(self, t, keep, labels, starts=None):
        self.t, self.keep, self.labels, self.series = t, keep, labels, []
        # where a process (re)started: its counters count from zero there
        n = len(t)
        starts = np.zeros(n, bool) if starts is None else starts
        self.last_start = np.maximum.accumulate(np.where(starts, np.arange(n), 0))

    def gauge(self, name, values, **labels):
        self._add(name, values, labels)

    def counter(self, name, increments, **labels):
        total = np.cumsum(increments)
        before = np.concatenate([[0.0], total[:-1]])
        self._add(name, total - before[self.last_start], labels)

    def histogram(self, name, done, mean, buckets=()):
        self.counter(name + "_count", done)
        self.counter(name + "_sum", done * mean)
        for le in buckets:
            self.counter(name + "_bucket", done * (1 - np.exp(-le / np.maximum(mean, 1e-6))), le=f"{le}")
        if buckets:
            self.counter(name + "_bucket", done, le="+Inf")

    def _add(self, name, values, labels):
        ms = (self.t[self.keep] * 1000).astype(np.int64).tolist()
        if not ms:
            return
        vals = [f"{v:.6g}" for v in np.asarray(values)[self.keep]]
        self.series.append(series_of({"__name__": name, **self.labels, **labels}, ms, vals))


def _keep(case: Case, t: np.ndarray) -> np.ndarray:
    """The samples Prometheus holds: the windows triage reads, less unscraped spans and a pod's other lives."""
    near = (t >= T0 - 3600 - 900 - case.history) & (t <= INCIDENT[1] + 60)
    day = (t >= T0 - DAY - 900) & (t <= INCIDENT[1] - DAY + 60) & (not case.no_yesterday)
    keep = near | day
    if case.gone is not None:
        keep &= ~((t >= T0 + case.gone[0]) & (t < T0 + case.gone[1]))
    if case.born is not None:
        keep &= t >= T0 + case.born
    return keep


def _lives(case: Case, t: np.ndarray, pod: int) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(pod name, sample mask, where its process restarted) for each name a replica serves under: a rollout
    gives it a new name, a restart under the same name leaves 40 s unscraped and its counters from zero."""
    rng = np.random.default_rng(case.seed * 100 + pod)
    base = f"{case.name}-{rng.integers(0x10000, 0xFFFFF):x}-{pod}"
    lives = [(base, np.ones(len(t), bool))]
    if case.rollout is not None:
        at = T0 + case.rollout + pod * 150
        lives = [(base, t < at), (f"{case.name}-{rng.integers(0x10000, 0xFFFFF):x}-{pod}", t >= at + 45)]
    out = [(name, mask, np.zeros(len(t), bool)) for name, mask in lives]
    name, mask, starts = out[-1]
    for p, at in case.restarts:
        if p == pod and (t >= T0 + at + 40).any():
            mask = mask & ~((t >= T0 + at) & (t < T0 + at + 40))
            starts[np.argmax(t >= T0 + at + 40)] = True
    out[-1] = (name, mask, starts)
    return out


def _replica(case: Case, pod: int, t: np.ndarray, dt: float, p: dict, e: dict) -> list[dict]:
    """Every series of one replica (engine, its GPU), each life with counters from zero."""
    out = []
    keep_all = _keep(case, t)
    for life, (pod_name, live, starts) in enumerate(_lives(case, t, pod)):
        w = _Writer(
            t,
            keep_all & live,
            {
                "model": case.model,
                "engine": case.engine,
                "namespace": NAMESPACE,
                "pod": pod_name,
                "job": f"{NAMESPACE}/{case.engine}",
                "instance": f"10.0.{case.seed % 250}.{zlib.crc32(pod_name.encode()) % 250}:8000",
            },
            starts,
        )
        d = np.where(live, e["done"], 0.0)
        if life:  # a new life warms its prefix cache again within a minute
            start = t[live][0] if live.any() else 0
            cold = np.clip((t - start) / 60, 0, 1)
            p = dict(p, hit=p["hit"] * cold)
        w.gauge("llm_requests_running", e["running"])
        w.gauge("llm_requests_waiting", e["waiting"])
        w.gauge("llm_kv_cache_usage_ratio", e["kv"])
        if case.cap and not case.raw:
            w.gauge("llm_max_running_requests", e["cap"])
        w.histogram("llm_time_to_first_token_seconds", d, e["ttft"], TTFT_BUCKETS)
        w.histogram("llm_time_per_output_token_seconds", d, e["tpot"])
        w.histogram("llm_request_duration_seconds", d, e["e2e"])
        w.histogram("llm_request_queue_time_seconds", d, e["queue"])
        tokens = p["output"] + p["reasoning"]
        w.histogram("llm_inter_token_latency_seconds", d * tokens, e["tpot"])
        if case.engine == "vllm":
            w.histogram("llm_request_prefill_time_seconds", d, e["prefill"])
        if case.token_histograms:
            w.histogram("llm_request_prompt_tokens", d, p["prompt"])
            w.histogram("llm_request_generation_tokens", d, tokens)
        w.counter("llm_prompt_tokens_total", d * p["prompt"])
        w.counter("llm_generation_tokens_total", d * tokens)
        if case.engine == "vllm":
            w.counter("llm_prefix_cache_queried_tokens_total", d * p["prompt"])
        w.counter("llm_prefix_cache_hit_tokens_total", d * p["prompt"] * p["hit"])
        w.counter("llm_preemptions_total", d * e["preempt"])
        if case.engine == "vllm":
            length = 0.03
            for reason, share in (
                ("stop", 1 - length - p["errors"]),
                ("length", np.full(len(t), length)),
                ("abort", p["errors"] * 0.3),
                ("error", p["errors"] * 0.7),
            ):
                w.counter("llm_requests_finished_total", d * share, finished_reason=reason)
            if case.accept is not None:
                drafts = d * tokens / (1 + 1.2 * p["accept"]) * 3
                w.counter("llm_spec_decode_draft_tokens_total", drafts)
                w.counter("llm_spec_decode_accepted_tokens_total", drafts * p["accept"] * 0.8)
        else:
            w.counter("llm_requests_finished_total", d)
            if case.accept is not None:
                w.gauge("llm_spec_decode_acceptance_ratio", p["accept"] * 0.8)
        out += w.series
        if case.gpu != "none":
            out += _gpu(case, t, pod_name, keep_all & live, e, p)
    return out


def _gpu(case: Case, t, pod_name: str, keep, e, p) -> list[dict]:
    """The replica's GPU: busy with its batch; a host-side stall keeps GPU-Util up while the SMs idle."""
    rng = np.random.default_rng(zlib.crc32(f"{case.seed}/{pod_name}".encode()))
    # the SMs work for the tokens made: throughput against what the batch makes at full speed (a throttled GPU
    # spends longer on each); a kernel that holds the GPU without computing keeps GPU-Util up
    peak = e["cap"] / (0.012 / (1 + 1.2 * p["accept"]))
    slow = np.clip(p["decode"], 1, None)  # throttled: clocks down
    busy = np.clip(0.1 + 0.9 * e["done"] / (t[1] - t[0]) * (p["output"] + p["reasoning"]) * slow / peak, 0, 1)
    noise = np.exp(rng.normal(0, 0.03, len(t)))
    w = _Writer(
        t,
        keep,
        {
            "namespace": NAMESPACE,
            "pod": pod_name,
            "gpu": "0",
            "job": "gpu",
            "UUID": f"GPU-{zlib.crc32(pod_name.encode()):08x}",
            "modelName": "NVIDIA H100 80GB HBM3",
            "Hostname": f"node-{zlib.crc32(pod_name.encode()) % 7}",
        },
    )
    w.gauge("gpu_utilization_ratio", np.clip((np.minimum(1, 3 * busy) * 0.9 + 0.1 * p["stall"] / 0.5) * noise, 0, 1))
    if case.gpu in ("vocab", "dcgm"):
        w.gauge("gpu_sm_active_ratio", np.clip(0.8 * busy * noise, 0, 1))
    w.gauge("gpu_tensor_active_ratio", np.clip(0.45 * busy * noise, 0, 1))
    w.gauge("gpu_dram_active_ratio", np.clip(0.5 * busy * noise, 0, 1))
    w.gauge("gpu_power_watts", 120 + 560 * busy / slow * noise)
    w.gauge("gpu_sm_clock_hertz", 1.98e9 / slow * noise**0.2)
    series = w.series
    if case.gpu.startswith("dcgm"):
        series = [dict(s, labels={**s["labels"], "engine": "dcgm"}, raw=True) for s in series]
    return series


def _door(case: Case, t, keep, ps: list[dict], es: list[dict]) -> list[dict]:
    """The front door before the model's replicas: what users see, all replicas together."""
    done = sum(e["done"] for e in es)
    mean = lambda key: sum(e["done"] * e[key] for e in es) / np.maximum(done, 1e-9)  # noqa: E731
    p = ps[0]
    reasoning_time = p["reasoning"] * mean("tpot")
    w = _Writer(
        t,
        keep,
        {"model": case.model, "namespace": NAMESPACE, "job": "frontdoor", "caller": "app", "upstream": case.engine},
    )
    errors = sum(e["done"] * q["errors"] for e, q in zip(es, ps, strict=True)) / np.maximum(done, 1e-9)
    cut = np.zeros(len(t))
    for pod, at in case.restarts:  # a crash cuts the streams in flight; requests sent its way fail until
        down = (t >= T0 + at) & (t < T0 + at + 40)  # the readiness probe takes it out (~20 s)
        cut += (es[pod]["running"] / 40 + ps[pod]["rate"] * 0.5) * down * (t[1] - t[0])
    w.counter("llm_frontdoor_requests_total", done * (1 - errors - 0.03) - 0, outcome="ok")
    w.counter("llm_frontdoor_requests_total", done * errors + cut, outcome="error")
    w.counter("llm_frontdoor_requests_total", done * 0.03, outcome="cancelled")
    w.counter("llm_frontdoor_reasoning_tokens_total", done * p["reasoning"])
    w.counter("llm_frontdoor_prompt_tokens_total", done * p["prompt"])
    w.counter("llm_frontdoor_output_tokens_total", done * (p["output"] + p["reasoning"]))
    w.histogram(
        "llm_frontdoor_time_to_first_token_seconds", done, mean("ttft") + 0.03 + reasoning_time + p["door_delay"]
    )
    w.histogram("llm_frontdoor_time_to_first_chunk_seconds", done, mean("ttft") + 0.03 + p["door_delay"])
    w.histogram("llm_frontdoor_request_duration_seconds", done, mean("e2e") + 0.03 + p["door_delay"])
    w.gauge("llm_frontdoor_requests_in_flight", sum(e["running"] + e["waiting"] for e in es))
    return w.series


def case_series(case: Case) -> list[dict]:
    """Every series of one case, in read_recording's shape (names as its Prometheus would hold them)."""
    return as_held(_case_series(case))


def as_held(series: list[dict]) -> list[dict]:
    """Series marked `raw` under their sources' names (one pass through the mappings for them all)."""
    raw = [s for s in series if s.get("raw")]
    return [s for s in series if not s.get("raw")] + (own_names(raw) if raw else [])


def _case_series(case: Case) -> list[dict]:
    rng = np.random.default_rng(case.seed)
    start = T0 - DAY - 3600 - case.history
    t = np.arange(start, INCIDENT[1] + 120, case.scrape, dtype=float) + rng.integers(0, case.scrape)
    dt = float(case.scrape)
    ps, es, out = [], [], []
    for pod in range(case.pods):
        prng = np.random.default_rng(case.seed * 7 + pod)
        p = _params(case, t, prng, pod, case.incidents)
        e = _engine(case, t, dt, p, prng)
        ps.append(p)
        es.append(e)
        out += _replica(case, pod, t, dt, p, e)
    engine = [s for s in out if s["labels"]["__name__"].startswith("llm_")]
    gpus = [s for s in out if not s["labels"]["__name__"].startswith("llm_")]
    if case.raw:
        engine = [dict(s, raw=True) for s in engine]
    if case.door:
        keep = _keep(replace(case, gone=None), t)
        engine += _door(case, t, keep, ps, es)
    return engine + gpus


# --- the library -------------------------------------------------------------------------------------------------


def _draw(rng, low: float, high: float) -> float:
    return float(rng.uniform(low, high))


def library(seed: int = 0) -> list[Case]:
    """The library for one seed: every class, on both engines, raw and normalized names, with and without front
    door, GPU exporter and cap; effect sizes drawn from 1.5-2.5x."""
    rng = np.random.default_rng(seed)
    cases: list[Case] = []

    def add(cls: str, expect, **kw):
        i = len(cases)
        engine = kw.pop("engine", "vllm" if rng.random() < 0.6 else "sglang")
        raw = kw.pop("raw", bool(rng.random() < 0.5))
        scrape = kw.pop("scrape", int(rng.choice([15, 30, 30, 60])))
        door = kw.pop("door", bool(rng.random() < 0.6))
        gpu = kw.pop("gpu", str(rng.choice(["vocab", "dcgm", "none"])))
        load = kw.pop("load", _draw(rng, 0.4, 0.6))
        name = f"c{seed:02d}{i:02d}-{cls}"
        case = Case(
            name=name,
            cls=cls,
            expect=tuple([expect] if isinstance(expect, str) else expect),
            seed=seed * 1000 + i,
            engine=engine,
            raw=raw,
            door=door,
            gpu=gpu,
            scrape=scrape,
            load=load,
            rate=kw.pop("rate", _draw(rng, 0.5, 3.0)),
            prompt=kw.pop("prompt", _draw(rng, 600, 3000)),
            output=kw.pop("output", _draw(rng, 120, 500)),
            hit=kw.pop("hit", _draw(rng, 0.3, 0.75)),
            **kw,
        )
        cases.append(case)

    f = lambda: _draw(rng, 1.5, 2.5)  # noqa: E731 - an effect size
    at = lambda: _draw(rng, -60, 300)  # noqa: E731 - onset, seconds from the incident's start
    # healthy: nothing at 0.5 or more
    add("healthy", (), forbid=("*",))
    add("healthy", (), incidents=(Incident(start=at(), rate=_draw(rng, 1.4, 1.7)),), load=0.3, forbid=("*",))
    add("healthy", (), rate=0.03, forbid=("*",))  # a quiet model
    add(
        "healthy",
        (),
        incidents=(Incident(start=-1800, ramp=3600, rate=1.5),),
        load=0.3,
        no_yesterday=True,
        forbid=("*",),
    )  # the morning ramp on a new deployment
    # each kind, plainly
    add("kind", "queueing", incidents=(Incident(start=at(), rate=_draw(rng, 1.15, 1.4) / 0.55),), load=0.55)
    add("kind", "long-prompts", incidents=(Incident(start=at(), prompt=f()),), hit=_draw(rng, 0.0, 0.2))
    add(
        "kind",
        "prefix-cache-loss",
        incidents=(Incident(start=at(), hit=_draw(rng, 0.0, 0.15)),),
        hit=_draw(rng, 0.6, 0.85),
        prompt=_draw(rng, 2000, 4000),
    )
    add("kind", "kv-pressure", incidents=(Incident(start=at(), kv=1 / (2 * f()), output=1.3),), load=0.5)
    add("kind", "slow-decode", incidents=(Incident(start=at(), decode=f()),), load=0.3, forbid=("long-outputs",))
    add(
        "kind",
        "spec-decode-collapse",
        incidents=(Incident(start=at(), accept=_draw(rng, 0.1, 0.3)),),
        accept=_draw(rng, 0.6, 0.8),
        engine="vllm",
        load=0.3,
    )
    add(
        "kind",
        "thinking",
        incidents=(Incident(start=at(), reasoning=f()),),
        reasoning=_draw(rng, 300, 600),
        door=True,
        load=0.3,
    )
    add("kind", "long-outputs", incidents=(Incident(start=at(), output=f()),), load=0.25, forbid=("slow-decode",))
    add(
        "kind",
        "gpu-not-computing",
        incidents=(Incident(start=at(), stall=_draw(rng, 0.55, 0.75)),),
        gpu="vocab",
        load=_draw(rng, 0.45, 0.6),
    )
    add("kind", "errors", incidents=(Incident(start=at(), errors=_draw(rng, 0.1, 0.3)),))
    add("kind", "not-the-engine", incidents=(Incident(start=at(), door_delay=_draw(rng, 1.0, 3.0)),), door=True)
    # rollouts and restarts: nothing wrong, never missing-data
    add("rollout", (), rollout=_draw(rng, 60, 600), forbid=("*",), pods=int(rng.choice([2, 3, 4])))
    add("rollout", (), rollout=_draw(rng, 60, 600), forbid=("*",), raw=True, scrape=60)
    add("restart", (), restarts=((0, _draw(rng, 200, 1200)),), forbid=("*",))
    # a crash loop: one replica restarting every few minutes under the same name
    every = _draw(rng, 180, 360)
    add(
        "crash-loop",
        "errors",
        restarts=tuple((0, s) for s in np.arange(_draw(rng, 60, 200), 1700, every)),
        expect_pod=0,
        forbid=("missing-data",),
    )
    # one bad replica of four, the model as a whole moving little
    add(
        "bad-replica",
        "slow-decode",
        pods=4,
        incidents=(Incident(start=at(), decode=f(), pods=(2,)),),
        load=0.3,
        expect_pod=2,
    )
    # SGLang as it ships: no token histograms
    add(
        "sglang-shipped",
        "long-prompts",
        engine="sglang",
        raw=True,
        token_histograms=False,
        incidents=(Incident(start=at(), prompt=f()),),
        hit=_draw(rng, 0.0, 0.2),
    )
    add(
        "sglang-shipped",
        "prefix-cache-loss",
        engine="sglang",
        raw=True,
        token_histograms=False,
        incidents=(Incident(start=at(), hit=_draw(rng, 0.0, 0.15)),),
        hit=_draw(rng, 0.6, 0.85),
        prompt=_draw(rng, 2000, 4000),
    )
    add(
        "sglang-shipped",
        "long-outputs",
        engine="sglang",
        raw=True,
        token_histograms=False,
        incidents=(Incident(start=at(), output=f()),),
        load=0.25,
        forbid=("slow-decode",),
    )
    # dcgm-exporter's default CSV: no SM activity
    add(
        "dcgm-default",
        "gpu-not-computing",
        gpu="dcgm-default",
        incidents=(Incident(start=at(), stall=_draw(rng, 0.55, 0.75)),),
        load=_draw(rng, 0.45, 0.6),
    )
    # KV pressure on a reasoning model: long generations fill the cache, preemptions stay rare per request
    add(
        "kv-reasoning",
        "kv-pressure",
        reasoning=_draw(rng, 1500, 3000),
        output=_draw(rng, 200, 400),
        incidents=(Incident(start=at(), reasoning=f(), kv=0.45),),
        load=0.5,
        preempt=0.15,
    )
    # degraded baselines: yesterday at this hour was itself an incident
    add(
        "degraded-baseline",
        "queueing",
        yesterday=(Incident(start=-600, decode=f()),),
        incidents=(Incident(start=at(), rate=_draw(rng, 1.15, 1.4) / 0.55),),
        load=0.55,
    )
    add(
        "degraded-baseline",
        "queueing",
        yesterday=(Incident(start=-600, rate=1.3 / 0.55),),
        incidents=(Incident(start=-600, rate=1.3 / 0.55),),
        load=0.55,
    )
    # yesterday's throttling at the same hour, as bad as today's: against the day before nothing changed
    k = f()
    add(
        "degraded-baseline",
        "slow-decode",
        yesterday=(Incident(start=-900, decode=k),),
        incidents=(Incident(start=at(), decode=k),),
        load=0.3,
    )
    # a slow drift over six hours: speculative acceptance sliding
    add(
        "slow-drift",
        "spec-decode-collapse",
        engine="vllm",
        accept=_draw(rng, 0.65, 0.8),
        drift=("accept", 6, _draw(rng, 0.3, 0.45)),
        history=5 * 3600,
        load=0.3,
    )
    # the queue began before the window; the hour before already holds it (a deployment younger than a day)
    add(
        "absolute",
        "queueing",
        no_yesterday=True,
        load=0.55,
        incidents=(Incident(start=-240, rate=_draw(rng, 1.2, 1.4) / 0.55),),
    )
    # two causes at once
    add(
        "two-causes",
        ("long-prompts", "queueing"),
        incidents=(Incident(start=at(), prompt=f(), rate=1.3),),
        hit=0.1,
        load=0.5,
    )
    add(
        "two-causes",
        ("prefix-cache-loss", "queueing"),
        incidents=(Incident(start=at(), hit=0.05, rate=1.3),),
        hit=0.75,
        prompt=3000,
        load=0.5,
    )
    # engine series gone while the front door serves
    add("missing-data", "missing-data", gone=(_draw(rng, 120, 600), 1e9), door=True)
    # states bad in themselves, the baseline no better (drawn after the classes above, which stay as they were):
    # an incident running through the whole hour before on a deployment younger than a day, a queue and a full
    # KV cache, and a deployment born into its incident (traffic moved onto it), younger than any baseline. Clients
    # give up after a while, so the queue holds steady instead of growing: the hour before looks as bad as now
    before = lambda: -_draw(rng, 5400, 9000)  # noqa: E731 - an onset before the hour before began
    patience = lambda: _draw(rng, 10, 40)  # noqa: E731 - seconds a client waits before it gives up
    add(
        "absolute",
        "queueing",
        no_yesterday=True,
        load=0.55,
        incidents=(Incident(start=before(), rate=_draw(rng, 1.05, 1.2) / 0.55),),
        patience=patience(),
    )
    add(
        "absolute",
        "kv-pressure",
        no_yesterday=True,
        load=0.5,
        incidents=(Incident(start=before(), kv=1 / (2 * f()), output=1.3),),
        patience=patience(),
    )
    born = -_draw(rng, 120, 900)
    add(
        "absolute",
        "queueing",
        no_yesterday=True,
        born=born,
        load=0.55,
        incidents=(Incident(start=born, ramp=30, rate=_draw(rng, 1.2, 1.4) / 0.55),),
        patience=patience(),
    )
    # busy but healthy, as young: under its cap, nothing waiting. At loads up to 0.68 one replica of seed 6's case
    # queued for real (3.5 waiting, TTFT 1.6 s against its peer's 0.07 s): triage was right, the label was not
    add("healthy", (), no_yesterday=True, born=-_draw(rng, 300, 1200), load=_draw(rng, 0.5, 0.6), forbid=("*",))
    # the onset inside the hour before (drawn after the classes above): a deployment younger than a day, so the
    # hour before is its baseline, and that hour already holds the incident's first 10 to 50 minutes (issue 28: a
    # 7-minute queue, `--since 5m`, the hour before holding its first 2). Compared with it whole, the change is
    # diluted or gone; cut before the onset its series show, it is plain
    inside = lambda: -_draw(rng, 600, 3000)  # noqa: E731 - an onset in the hour before
    add(
        "onset",
        "queueing",
        no_yesterday=True,
        load=0.55,
        incidents=(Incident(start=inside(), rate=_draw(rng, 1.15, 1.4) / 0.55),),
        patience=patience(),
    )
    add("onset", "slow-decode", no_yesterday=True, load=0.3, incidents=(Incident(start=inside(), decode=f()),))
    # with a front door: the simulated SGLang counts finished requests without a reason, so without one its errors
    # are in no series (seed 6 drew that: the label, not triage, was wrong)
    add(
        "onset",
        "errors",
        no_yesterday=True,
        door=True,
        incidents=(Incident(start=inside(), errors=_draw(rng, 0.1, 0.3)),),
    )
    add("onset", "long-prompts", no_yesterday=True, hit=0.1, incidents=(Incident(start=inside(), prompt=f()),))
    return cases


def store_of(case: Case) -> str:
    """The Prometheus a case goes to: triage reads one Prometheus' GPUs under one naming."""
    return "dcgm" if case.gpu.startswith("dcgm") else "vocab"


def write_store(cases: list[Case], work: Path) -> Path:
    """OpenMetrics of `cases` into TSDB blocks under work/data; returns the data folder."""
    from promtools import create_blocks
    from triage_tools import to_openmetrics

    work.mkdir(parents=True, exist_ok=True)
    text = work / "library.om"
    series = as_held([s for case in cases for s in _case_series(case)])
    text.write_text(to_openmetrics(series))
    create_blocks(text, work / "data", timeout=600)
    text.unlink()
    return work / "data"


def labels(case: Case) -> dict:
    """What a case should read as, for labels.json and the scoring."""
    pod = None
    if case.expect_pod is not None:
        pod = _lives(case, np.array([float(T0)]), case.expect_pod)[-1][0]
    return {
        "model": case.model,
        "class": case.cls,
        "expect": list(case.expect),
        "pod": pod,
        "forbid": list(case.forbid),
        "engine": case.engine,
        "raw": case.raw,
        "door": case.door,
        "gpu": case.gpu,
        "scrape": case.scrape,
        "store": store_of(case),
    }


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    args = parser.parse_args(argv)
    cases = [c for seed in args.seeds for c in library(seed)]
    for store in sorted({store_of(c) for c in cases}):
        write_store([c for c in cases if store_of(c) == store], args.out / store)
    (args.out / "labels.json").write_text(
        json.dumps({"incident": list(INCIDENT), "cases": [labels(c) for c in cases]}, indent=1)
    )
    print(f"{len(cases)} cases into {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
