"""The options models of `inferwatch simulate`, `load`, `demo`, `capacity sweep` and `capacity compare`: one field
per flag, with its help and its check, from which the flags and sim/README.md's tables are made
(inferwatch/options.py). Light to import: `inferwatch --help` builds the flags from it.

A check that reads two flags (--engine-version against --engine, --pod with --gpus, demo's --canary with
--engine) is the command's, after each field's own."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, dataclass
from pathlib import Path

from inferwatch.options import option

__all__ = [
    "SimulateOptions",
    "LoadOptions",
    "DemoOptions",
    "SweepOptions",
    "CapacityCompareOptions",
    "ENGINE_VERSIONS",
    "positive_seconds",
]

# the releases of sim/releases.yaml, spelled out so that --help need not read it (a test keeps them in step)
ENGINE_VERSIONS = "vllm 0.33.0, 0.32.0, 0.10.2, 0.7.3; sglang 0.5.23, 0.5.2, 0.4.4"


def _one_of(*choices: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in choices:
            raise ValueError(f"{text!r}: use {', '.join(choices[:-1])} or {choices[-1]}")
        return text

    return parse


def _between(low: float, high: float | None, valid: str) -> Callable[[float], float]:
    """A number from `low` to `high` (None: no bound); ValueError `VALUE: <valid>`."""

    def parse(value: float) -> float:
        if value < low or (high is not None and value > high):
            raise ValueError(f"{value}: {valid}")
        return value

    return parse


def _listen(text: str) -> tuple[str, int]:
    from inferwatch._urls import listen_address

    return listen_address(text, "127.0.0.1:8000")


def positive_seconds(text: str) -> float:
    """A duration above 0 (ms, s, m, h) in seconds; ValueError with an example."""
    from inferwatch.durations import parse_duration

    value = float(parse_duration(text, units="ms s m h"))
    if value <= 0:
        raise ValueError(f"{text!r} must be above 0, e.g. 30s")
    return value


def _above_zero(value: float) -> float:
    if value <= 0:
        raise ValueError("must be above 0")
    return value


def _openai_server(text: str) -> str:
    from inferwatch._urls import openai_server_url

    return openai_server_url(text)


@dataclass(frozen=True)
class SimulateOptions:
    """`inferwatch simulate`'s flags; an out-of-range value is `error: --flag VALUE: what is valid`, exit 1."""

    engine: str = option(
        "vllm", "vllm or sglang: whose API and /metrics to imitate.", metavar="ENGINE", parse=_one_of("vllm", "sglang")
    )
    engine_version: str | None = option(
        None,
        f"Release whose metric names, labels and buckets to expose: {ENGINE_VERSIONS} (default: the first, the "
        "newest).",
        metavar="VERSION",
    )
    model: str = option("llama-3-8b", "The served model name.", metavar="NAME")
    listen: tuple[str, int] = option(
        ("127.0.0.1", 8000), "Where to serve.", metavar="HOST:PORT", parse=_listen, shown="127.0.0.1:8000"
    )
    scenario: str = option(
        "normal",
        "normal, or a kind of trouble: queueing, long-prompts, prefix-cache-loss, kv-pressure, slow-decode, "
        "spec-decode-collapse, thinking, long-outputs, gpu-not-computing (or gpu-stall), not-the-engine, errors, "
        "truncation, broken-tools, flaky-metrics or metrics-down; switch later with POST /admin/scenario.",
        metavar="SCENARIO",
    )
    max_num_seqs: int = option(32, "Concurrency cap.", metavar="N", kind=int)
    kv_cache_tokens: int = option(32768, "KV-cache capacity in tokens.", metavar="N", kind=int)
    max_num_queued_reqs: int = option(
        0,
        "Refuse (503) a request arriving while N are running or waiting, as vLLM's --max-num-queued-reqs; 0: no limit.",
        metavar="N",
        kind=int,
        parse=_between(0, None, "use 0 (no limit) or more"),
    )
    decode_step: float = option(0.02, "Seconds per decode step at batch size 1.", metavar="SECONDS", kind=float)
    reasoning: int = option(0, "Hidden reasoning tokens before visible text.", metavar="N", kind=int)
    seed: int | None = option(None, "Random seed, for repeatable runs.", metavar="N", kind=int)
    gpus: int = option(
        0,
        "Also serve N simulated GPUs on /metrics (gpu_* series following this engine).",
        metavar="N",
        kind=int,
        parse=_between(0, 64, "use 0 to 64"),
    )
    pod: str | None = option(
        None,
        "The workload the --gpus name as using them (namespace, pod, container labels, as the NVML exporter writes "
        "them), so they join the engine's series on pod; default: pod $HOSTNAME (the pod name in Kubernetes), "
        "namespace $POD_NAMESPACE.",
        metavar="[NAMESPACE/]POD[/CONTAINER]",
    )
    keep_pace: float = option(
        0.0,
        "Make up steps a busy host wakes late, up to SECONDS behind, so the modelled engine keeps its speed (the demo "
        "uses 2); 0: each late wake-up slows it.",
        metavar="SECONDS",
        kind=float,
        parse=_between(0, 60, "use 0 to 60 seconds"),
    )


@dataclass(frozen=True)
class LoadOptions:
    """`inferwatch load`'s flags; a wrong value is a usage error naming the flag, exit 2."""

    target: str = option(
        MISSING,
        "An OpenAI-compatible server: http://HOST:PORT, its OpenAI base URL http://HOST:PORT/v1, or HOST:PORT.",
        metavar="URL",
        parse=_openai_server,
    )
    rate: float = option(2.0, "Requests per second (Poisson arrivals).", metavar="R", kind=float, parse=_above_zero)
    duration: float = option(
        30.0, "How long to send, e.g. 30s or 5m.", metavar="DURATION", parse=positive_seconds, shown="30s"
    )
    timeout: float = option(
        120.0,
        "Give up on a request after this long; one without response headers after 10s fails at once.",
        metavar="DURATION",
        parse=positive_seconds,
        shown="120s",
    )
    model: str | None = option(None, "Model to ask (default: the first of /v1/models).", metavar="NAME")
    prompt_tokens: int = option(200, "Mean prompt length in words.", metavar="N", kind=int)
    max_tokens: int = option(512, "max_tokens of each request.", metavar="N", kind=int)
    output_tokens: int | None = option(
        None,
        "Draw each request's max_tokens around this mean (outputs then mostly end at the length limit, as in "
        "fixed-length benchmarks).",
        metavar="N",
        kind=int,
    )
    prefix_share: float = option(0.3, "Share of requests with a shared system prompt.", metavar="SHARE", kind=float)
    tool_share: float = option(0.0, "Share of requests offering a tool.", metavar="SHARE", kind=float)
    as_json: bool = option(False, "Print the summary as JSON.", flag="--json", kind=bool)
    seed: int | None = option(None, "Random seed.", metavar="N", kind=int)


@dataclass(frozen=True)
class DemoOptions:
    """`inferwatch demo`'s flags; which go together (--canary, --no-install with --engine) the command checks."""

    headless: bool = option(False, "No live screen; exit 1 if the expected alerts did not fire.", kind=bool)
    short: bool = option(False, "A compressed script (under 2 minutes) for CI.", kind=bool)
    workdir: str | None = option(None, "Keep Prometheus data and logs here.", metavar="DIR")
    engine: str = option(
        "sim",
        "sim (two simulated engines) or vllm-real (a real vLLM CPU build serving a tiny local model; installed once, "
        "~670 MB, 2-3 min).",
        metavar="ENGINE",
        parse=_one_of("sim", "vllm-real"),
    )
    no_install: bool = option(
        False, "With --engine vllm-real: refuse instead of installing vLLM when it is not yet.", kind=bool
    )
    canary: bool = option(
        False,
        "The canary story instead: one stable version and three canaries (equal, slower, too quiet) under load, each "
        "judged by `inferwatch canary`; exit 1 unless they pass, fail and read inconclusive.",
        kind=bool,
    )


@dataclass(frozen=True)
class SweepOptions:
    """`inferwatch capacity sweep`'s flags; a wrong value is a usage error naming the flag (exit 2), the bounds
    of the numbers checked by click; --max-rate under --start-rate the command refuses."""

    target: str = option(
        MISSING,
        "An OpenAI-compatible server: an engine, a front door, the simulator (http://HOST:PORT[/v1]).",
        metavar="URL",
        parse=_openai_server,
    )
    slo: tuple[Path, ...] = option(
        (),
        "SLO spec(s) with source: frontdoor whose objectives judge each request (repeatable); default the embedded "
        "slo/defaults-frontdoor.yaml (TTFT 1s, TPOT 100ms, answered).",
        metavar="FILE",
        kind=Path,
        repeatable=True,
    )
    goodput_target: float = option(
        0.9,
        "Share of good requests a step needs (DistServe's attainment).",
        flag="--good-share",
        metavar="SHARE",
        kind=float,
        min=0.01,
        max=0.999,
    )
    start_rate: float = option(1.0, "First step's requests/s.", metavar="R", kind=float, min=0.001)
    growth: float = option(2.0, "Ramp factor between steps.", metavar="X", kind=float, min=1.1)
    max_rate: float = option(1000.0, "Never offer more than this.", metavar="R", kind=float)
    step_duration: float = option(
        60.0,
        "Arrivals per step; long enough for a growing queue to break the TTFT objective.",
        metavar="DURATION",
        parse=positive_seconds,
        shown="60s",
    )
    step_requests: int = option(2000, "Most requests a step sends.", metavar="N", kind=int, min=1)
    repeats: int = option(3, "Steps per rate near the knee.", metavar="N", kind=int, min=2, max=30)
    precision: float = option(
        0.1,
        "Stop refining when the interval is narrower than this share of its upper end.",
        metavar="SHARE",
        kind=float,
        min=0.01,
        max=1.0,
    )
    max_steps: int = option(20, "Most steps in all.", metavar="N", kind=int, min=1, max=500)
    replicas: int = option(
        1, "Replicas behind --target: the capacity per replica is the capacity over N.", metavar="N", kind=int, min=1
    )
    model: str | None = option(None, "Model to ask (default: the first of /v1/models).", metavar="NAME")
    prompt_tokens: int = option(200, "Mean prompt length in words.", metavar="N", kind=int)
    max_tokens: int = option(512, "max_tokens of each request.", metavar="N", kind=int)
    output_tokens: int | None = option(None, "Draw each request's max_tokens around this mean.", metavar="N", kind=int)
    prefix_share: float = option(0.3, "Share with a shared system prompt.", metavar="SHARE", kind=float)
    timeout: float = option(
        120.0, "Give up on a request after this long.", metavar="DURATION", parse=positive_seconds, shown="120s"
    )
    seed: int | None = option(None, "Random seed.", metavar="N", kind=int)
    json_out: Path | None = option(
        None,
        "Write the result (rates, steps, capacity, interval, SLO, settings, version, time).",
        metavar="FILE",
        kind=Path,
    )
    plot: Path | None = option(
        None, "Plot TTFT, TPOT and goodput against the offered rate.", metavar="FILE.png", kind=Path
    )
    rules: Path | None = option(
        None,
        "Write a Prometheus rule file with the capacity per replica "
        "(llm_capacity:requests_per_second_per_replica{model}) for the overview's headroom panel.",
        metavar="FILE",
        kind=Path,
    )
    compare_to: Path | None = option(
        None,
        "Compare with an earlier result; exit 1 when capacity is lower beyond both intervals.",
        flag="--compare",
        metavar="OLD.json",
        kind=Path,
    )


@dataclass(frozen=True)
class CapacityCompareOptions:
    """`inferwatch capacity compare`'s flags (its two results are arguments)."""

    as_json: bool = option(False, "Print JSON.", flag="--json", kind=bool)
