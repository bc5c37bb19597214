"""A CostSpec into recording rules (pure). Every record is a sum over sums: dollars an hour from the GPUs
allocated now, divided by what those dollars bought over WINDOW.

The GPU series (gpu_memory_used_bytes: NVML and dcgm-exporter both serve it) carry the `namespace` and `pod`
holding each GPU; the engine series carry `namespace`, `pod` and `model`; the two join on (namespace, pod), as
triage joins them. A GPU is counted once per (pod, uuid) however many MIG instances or processes show it, and
whole: a GPU shared by pods (MIG, time-slicing) is charged in full to each.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

from inferwatch.cost._spec import CostSpec
from inferwatch.promql import escape_label_value
from inferwatch.yamlio import dump_yaml

__all__ = ["RECORDS", "WINDOW", "compile_cost", "render_cost"]

GPU_SERIES = "gpu_memory_used_bytes"  # one per GPU (or MIG instance) on every GPU source
GPU_LABELS = "namespace, pod, uuid, gpu_model, hostname"
ENGINE_SERIES = "llm_requests_running"  # one per engine and model: which pod serves which model
CACHED_PROMPT_TOKENS = ("llm_prompt_tokens_cached_total", "llm_prefix_cache_hit_tokens_total")
WINDOW = "1h"  # what the dollars bought: tokens and good requests over this window
GROUP = "inferwatch-cost"
INTERVAL = "1m"

# record -> what it holds (README's table is this one); the order is the evaluation order
RECORDS = {
    "llm_cost:gpu_dollars_per_hour": "per GPU (namespace, pod, uuid, gpu_model, hostname): its price, overhead "
    "included",
    "llm_cost:unpriced_gpus": "GPUs of a model the price table does not list (no default), by gpu_model",
    "llm_cost:pod_dollars_per_hour": "per pod holding GPUs",
    "llm_cost:unallocated_dollars_per_hour": "GPUs no pod holds",
    "llm_cost:model_share": "per (namespace, pod, model): the share of the pod's cost a model carries (1 / the "
    "models the pod serves)",
    "llm_cost:model_dollars_per_hour": "per model: the GPUs of the pods serving it",
    "llm_cost:idle_dollars_per_hour": "per pod: GPUs allocated to a pod that finished no request in 5m (an engine "
    "with no traffic, or a pod with no engine series at all)",
    "llm_cost:dollars_per_million_output_tokens": f"per model: its cost over {WINDOW} / the tokens it generated",
    "llm_cost:dollars_per_million_prompt_tokens_computed": f"per model: its cost over {WINDOW} / the prompt tokens "
    "it computed (cache hits excluded where the engine "
    "counts them)",
    "llm_cost:dollars_per_good_request": f"per model: its cost over {WINDOW} / the front door's good requests "
    "(goodput)",
}


def _number(value: Fraction) -> str:
    return f"{float(value):.10g}"


def _gpu_prices(spec: CostSpec) -> str:
    """Each GPU's price: the first by_label rule that matches, else its model's, else the default."""
    branches = [(f'{rule.label}=~"{escape_label_value(rule.match)}"', rule.gpu_hour) for rule in spec.by_label]
    branches += [(f'gpu_model="{escape_label_value(model)}"', price) for model, price in spec.gpu_hour]
    if spec.default is not None:
        branches.append(("", spec.default))
    terms = [
        f"group by ({GPU_LABELS}) ({GPU_SERIES}{{{m}}}) * {_number(p)}"
        if m
        else f"group by ({GPU_LABELS}) ({GPU_SERIES}) * {_number(p)}"
        for m, p in branches
    ]
    body = "\n  or ".join(terms)
    return f"(\n  {body}\n)" + (f" * {_number(1 + spec.overhead)}" if spec.overhead else "")


def _per_million(cost: str, tokens: str) -> str:
    return f"avg_over_time({cost}[{WINDOW}])\n/ on (model)\n({tokens} * 3600 / 1e6 > 0)"


def _expressions(spec: CostSpec) -> dict[str, str]:
    rate = lambda metric: f"sum by (model) (rate({metric}[{WINDOW}]))"  # noqa: E731 - one shape, five uses
    prompt = rate("llm_prompt_tokens_total")
    # vLLM 0.32+ counts cached prompt tokens; SGLang (and older vLLM) count prefix-cache hit tokens: per model the
    # first that exists, else 0 (an engine that counts neither computed every prompt token)
    cached = f"({' or '.join(rate(m) for m in CACHED_PROMPT_TOKENS)} or 0 * {prompt})"
    served = f"group by (namespace, pod, model) ({ENGINE_SERIES})"
    return {
        "llm_cost:gpu_dollars_per_hour": _gpu_prices(spec),
        "llm_cost:unpriced_gpus": f"count by (gpu_model) (group by (uuid, gpu_model) ({GPU_SERIES}) unless on "
        "(uuid) llm_cost:gpu_dollars_per_hour)",
        "llm_cost:pod_dollars_per_hour": 'sum by (namespace, pod) (llm_cost:gpu_dollars_per_hour{pod!=""})',
        "llm_cost:unallocated_dollars_per_hour": 'sum(llm_cost:gpu_dollars_per_hour{pod=""})',
        "llm_cost:model_share": f"{served}\n/ on (namespace, pod) group_left\ncount by (namespace, pod) ({served})",
        "llm_cost:model_dollars_per_hour": "sum by (model) (\n  llm_cost:model_share\n  * on (namespace, pod) "
        "group_left llm_cost:pod_dollars_per_hour\n)",
        "llm_cost:idle_dollars_per_hour": "llm_cost:pod_dollars_per_hour\nunless on (namespace, pod)\n(sum by "
        "(namespace, pod) (rate(llm_requests_finished_total[5m])) > 0)",
        "llm_cost:dollars_per_million_output_tokens": _per_million(
            "llm_cost:model_dollars_per_hour", rate("llm_generation_tokens_total")
        ),
        "llm_cost:dollars_per_million_prompt_tokens_computed": _per_million(
            "llm_cost:model_dollars_per_hour", f"({prompt} - {cached})"
        ),
        "llm_cost:dollars_per_good_request": f"avg_over_time(llm_cost:model_dollars_per_hour[{WINDOW}])\n/ on (model)\n"
        f"({rate('llm_frontdoor_goodput_good_requests_total')} * 3600 > 0)",
    }


def compile_cost(spec: CostSpec) -> dict:
    """One rule group of RECORDS, each labelled with the currency."""
    exprs = _expressions(spec)
    rules = [
        {"record": name, "expr": exprs[name], "labels": {"currency": spec.currency}}
        if name not in ("llm_cost:unpriced_gpus", "llm_cost:model_share")
        else {"record": name, "expr": exprs[name]}
        for name in RECORDS
    ]
    return {"groups": [{"name": GROUP, "interval": INTERVAL, "rules": rules}]}


def render_cost(spec: CostSpec, generator: str = "inferwatch cost compile") -> str:
    banner = (
        f"# Generated by `{generator}` from {Path(spec.file).name}; do not edit by hand.\n"
        "# What serving costs (llm_cost:*): load with `rule_files`; the overview dashboard's cost row reads "
        "it.\n"
    )
    return banner + dump_yaml(compile_cost(spec))
