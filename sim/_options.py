"""The options models of `inferwatch simulate`, `inferwatch load` and `inferwatch demo`: one field per flag, with
its help and its check, from which the flags and sim/README.md's tables are made (inferwatch/options.py). Light to
import: `inferwatch --help` builds the flags from it.

A check that reads two flags (--engine-version against --engine, --pod with --gpus, demo's --canary with
--engine) is the command's, after each field's own."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, dataclass

from inferwatch.options import option

__all__ = ["SimulateOptions", "LoadOptions", "DemoOptions", "ENGINE_VERSIONS", "positive_seconds"]

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
