"""The simulated engine's parameters and the scenarios that change them (scenarios.yaml)."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from functools import cache
from importlib.resources import files

import yaml

from inferwatch.errors import InferwatchError

__all__ = ["EngineParams", "scenarios", "with_scenario"]


@dataclass(frozen=True)
class EngineParams:
    """A small model of an inference engine; times in seconds, sizes in tokens."""

    max_num_seqs: int = 32  # the concurrency cap (vLLM --max-num-seqs, SGLang --max-running-requests)
    kv_cache_tokens: int = 32768  # KV-cache capacity
    prefill_tokens_per_s: float = 20000.0
    decode_step_s: float = 0.02  # one decode step at batch size 1
    decode_batch_slope: float = 0.02  # each extra running request slows a step by this share
    max_model_len: int = 8192
    max_num_queued_reqs: int = 0  # vLLM --max-num-queued-reqs: a request arriving while this many are in the
    # engine (running and waiting, as vLLM 0.32 counts) gets 503; 0: no limit
    spec_tokens: int = 2  # draft tokens proposed per step (0: no speculative decoding)
    spec_acceptance: float = 0.7  # chance each draft token is accepted
    prefix_block: int = 16  # prefix-cache block size
    output_tokens_mean: int = 120  # mean visible output length when the client gives no bound
    reasoning_tokens: int = 0  # hidden reasoning tokens before visible text
    error_share: float = 0.0  # requests that fail inside the engine (5xx, finished_reason error)
    abort_share: float = 0.0  # requests the engine aborts
    truncate_share: float = 0.0  # requests cut at a short length limit
    broken_tool_share: float = 0.0  # tool calls whose arguments are not valid JSON
    metrics_fault_share: float = 0.0  # /metrics answers that fail (500, hang or 404)
    # Prompts and output lengths come from clients, which a scenario cannot change: these two scale what the
    # engine is given and generates, as when a RAG retriever starts adding more context after the client's text,
    # or users (a new prompt template) ask for longer answers. The returned usage counts what the engine did.
    prompt_scale: float = 1.0  # the engine sees each prompt this many times as long (more words appended)
    prefix_caching: bool = True  # False: no prompt finds its prefix cached (a flushed or disabled cache,
    # or a router that stops sending a shared prefix to the replica holding it)
    ingress_delay_s: float = 0.0  # a slow path in front of the engine (gateway, auth, tokenizer service):
    # each API request waits about this long before the engine sees it, so
    # the engine's clocks start after it; only a front door measures it
    gpu_stall: bool = False  # with --gpus: GPU-Util stays near 1 while SM and tensor activity collapse


@cache
def scenarios() -> dict[str, dict]:
    return yaml.safe_load(files("inferwatch.sim").joinpath("scenarios.yaml").read_text(encoding="utf-8"))["scenarios"]


def with_scenario(base: EngineParams, name: str) -> EngineParams:
    """`base` with the scenario's overrides; an unknown name is a clear error."""
    table = scenarios()
    if name not in table:
        raise InferwatchError(f"unknown scenario {name!r}; use one of {', '.join(table)}")
    known = {f.name for f in fields(EngineParams)}
    overrides = table[name] or {}
    unknown = set(overrides) - known
    if unknown:
        raise InferwatchError(f"scenarios.yaml: {name}: unknown parameters {', '.join(sorted(unknown))}")
    return replace(base, **overrides)
