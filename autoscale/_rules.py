"""Autoscaling signals as recording rules and alerts (pure), from the SLO spec's latency objectives and the
knobs (knobs.yaml), so the autoscaler, the dashboards and the pager read the same thresholds.

Per (namespace, model), over the replicas serving it (pods with engine series):
  demand, which leads:  requests and generated tokens per second per replica
  load, which lags:     waiting and running requests per replica, KV-cache usage
  SLO pressure:         max(p90 TTFT / TTFT objective, p90 TPOT / TPOT objective), smoothed: 1 is the objective
Cold starts: per new pod, the seconds from its first sample to its first finished request; alerts when a
scale-up stalls (replicas wanted but unavailable, or a replica up and receiving nothing while others queue).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from importlib.resources import files
from pathlib import Path

from inferwatch.durations import format_duration, parse_duration
from inferwatch.slo import LatencySLI, Spec
from inferwatch.yamlio import dump_yaml, safe_load

__all__ = ["Knobs", "load_knobs", "objectives", "compile_autoscaling", "render_autoscaling", "RECORDS", "ALERTS"]

BY = "namespace, model"
ENGINE = "llm_requests_running"  # one series per engine and model: which pods serve which model
GROUP = "inferwatch-autoscaling"
COLD_START_LOOKBACK = "1h"  # a pod first seen longer ago than this is not new
RECORDS = {
    "llm_autoscale:replicas": "pods serving the model (with engine series)",
    "llm_autoscale:requests_per_second_per_replica": "finished requests a second, per replica",
    "llm_autoscale:generation_tokens_per_second_per_replica": "generated tokens a second, per replica",
    "llm_autoscale:waiting_per_replica": "requests waiting, per replica",
    "llm_autoscale:running_per_replica": "requests running, per replica",
    "llm_autoscale:kv_cache_usage_ratio": "mean KV-cache usage over the replicas",
    "llm_autoscale:slo_pressure_raw": "max(p90 TTFT / objective, p90 TPOT / objective), by signal",
    "llm_autoscale:slo_pressure": "the pressure, max over the signals, averaged over the knobs' window: the "
    "scaling signal",
    "llm_autoscale:scaling_signal": "the pressure with the knobs' band folded in: itself above scale_up or under "
    "scale_down, exactly scale_up between (hold): what KEDA and the HPA target",
    "llm_autoscale:cold_start_seconds": "per pod first seen in the last hour: first sample to first finished request",
}
ALERTS = ("LLMScaleUpStalled", "LLMReplicaIdleWhileOthersQueue")


@dataclass(frozen=True)
class Knobs:
    min_replicas: int = 1
    max_replicas: int = 8
    scale_up: float = 0.8
    scale_down: float = 0.5
    window: str = "5m"
    rate_window: str = "2m"
    scale_up_stabilization: str = "0s"
    scale_down_delay: str = "10m"
    waiting_per_replica: float = 4
    concurrency_per_replica: int = 32

    def seconds(self, name: str) -> int:
        value = str(getattr(self, name)).strip()
        return 0 if value in ("0", "0s") else int(parse_duration(value))


def load_knobs(overrides: dict | None = None) -> Knobs:
    """knobs.yaml's defaults, with `overrides` (the deploy config's autoscaling section) on top."""
    table = safe_load((files("inferwatch.autoscale") / "knobs.yaml").read_text(encoding="utf-8"))
    table.pop("version", None)
    knobs = Knobs(**{**table, **(overrides or {})})
    if not 0 < knobs.scale_down < knobs.scale_up:
        raise ValueError(f"scale_down {knobs.scale_down} must be above 0 and under scale_up {knobs.scale_up}")
    if not 1 <= knobs.min_replicas <= knobs.max_replicas:
        raise ValueError(
            f"min_replicas {knobs.min_replicas} must be 1 or more and at most max_replicas {knobs.max_replicas}"
        )
    return knobs


def objectives(spec: Spec) -> dict[str, LatencySLI]:
    """The spec's TTFT and TPOT objectives (the first of each): the thresholds pressure is measured against."""
    found: dict[str, LatencySLI] = {}
    for objective in spec.objectives:
        if objective.kind in ("ttft", "tpot") and isinstance(objective.sli, LatencySLI):
            found.setdefault(objective.kind, objective.sli)
    return found


def _number(value: Fraction | float) -> str:
    return f"{float(value):.10g}"


def _selector(sli: LatencySLI, suffix: str) -> str:
    matchers = ", ".join(m.render() for m in sli.matchers)
    return f"{sli.metric}{suffix}" + (f"{{{matchers}}}" if matchers else "")


def _per_replica(expr: str) -> str:
    return f"{expr}\n/ on ({BY}) group_left\nllm_autoscale:replicas"


def _expressions(spec: Spec, knobs: Knobs) -> dict[str, str]:
    rate = knobs.rate_window
    pressure = []
    for kind, sli in objectives(spec).items():
        quantile = f"histogram_quantile(0.9, sum by ({BY}, le) (rate({_selector(sli, '_bucket')}[{rate}])))"
        # `>= 0` drops NaN: a quantile of a window with no requests is NaN, and one NaN sample would make the
        # smoothed pressure NaN for a whole window after traffic comes back
        pressure.append(
            f'label_replace(\n  {quantile}\n  / {_number(sli.threshold)} >= 0,\n  "signal", "{kind}", "", "")'
        )
    new_pod = f"min_over_time(timestamp(group by ({BY}, pod) ({ENGINE}))[{COLD_START_LOOKBACK}:30s])"
    first_done = (
        f"min_over_time(timestamp(sum by ({BY}, pod) (llm_requests_finished_total) > 0)[{COLD_START_LOOKBACK}:30s])"
    )
    return {
        "llm_autoscale:replicas": f"count by ({BY}) (group by ({BY}, pod) ({ENGINE}))",
        "llm_autoscale:requests_per_second_per_replica": _per_replica(
            f"sum by ({BY}) (rate(llm_requests_finished_total[{rate}]))"
        ),
        "llm_autoscale:generation_tokens_per_second_per_replica": _per_replica(
            f"sum by ({BY}) (rate(llm_generation_tokens_total[{rate}]))"
        ),
        "llm_autoscale:waiting_per_replica": _per_replica(f"sum by ({BY}) (llm_requests_waiting)"),
        "llm_autoscale:running_per_replica": _per_replica(f"sum by ({BY}) ({ENGINE})"),
        "llm_autoscale:kv_cache_usage_ratio": f"avg by ({BY}) (llm_kv_cache_usage_ratio)",
        "llm_autoscale:slo_pressure_raw": "\nor\n".join(pressure) if pressure else "vector(0) unless vector(0)",
        "llm_autoscale:slo_pressure": (
            f"max by ({BY}) (avg_over_time(llm_autoscale:slo_pressure_raw[{knobs.window}]))"
        ),
        "llm_autoscale:scaling_signal": (
            f"llm_autoscale:slo_pressure > {_number(knobs.scale_up)}\n"
            f"or llm_autoscale:slo_pressure < {_number(knobs.scale_down)}\n"
            f"or llm_autoscale:slo_pressure * 0 + {_number(knobs.scale_up)}"
        ),
        # the first sample inside the lookback is the pod's first only when it came after the lookback began
        "llm_autoscale:cold_start_seconds": f"({first_done} - {new_pod})\nand on ({BY}, pod)\n({new_pod} > time() - "
        f"{int(parse_duration(COLD_START_LOOKBACK)) - 60})",
    }


def _alerts(knobs: Knobs) -> list[dict]:
    delay = format_duration(Fraction(max(600, knobs.seconds("scale_down_delay"))))
    return [
        {
            "alert": "LLMScaleUpStalled",
            "expr": "kube_deployment_status_replicas_unavailable * on (namespace, deployment) group_left "
            "kube_deployment_spec_replicas > 0\nand on (namespace) (sum by (namespace) "
            "(llm_requests_waiting) > 0)",
            "for": "10m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "Deployment {{ $labels.namespace }}/{{ $labels.deployment }} has wanted "
                "replicas unavailable for 10 minutes while requests wait",
                "description": "A scale-up is stuck: pods pending (no GPU free, image pull, quota) or "
                "not ready (model still loading). Needs kube-state-metrics.",
                "runbook_url": "https://github.com/inferwatch/inferwatch/blob/main/alerts/"
                "RUNBOOKS.md#llmscaleupstalled",
            },
        },
        {
            "alert": "LLMReplicaIdleWhileOthersQueue",
            "expr": f"(sum by ({BY}, pod) (rate(llm_requests_finished_total[5m])) == 0\n"
            f"  and on ({BY}, pod) sum by ({BY}, pod) ({ENGINE}) == 0)\n"
            f"and on ({BY}) (llm_autoscale:waiting_per_replica > {_number(knobs.waiting_per_replica)})",
            "for": delay,
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "Replica {{ $labels.pod }} of {{ $labels.model }} finished nothing for "
                f"{delay} while the model's other replicas queue",
                "description": "A replica is up but receives no traffic: the Service or router does "
                "not send it any (readiness, endpoints, a router's stale list).",
                "runbook_url": "https://github.com/inferwatch/inferwatch/blob/main/alerts/"
                "RUNBOOKS.md#llmreplicaidlewhileothersqueue",
            },
        },
    ]


def compile_autoscaling(spec: Spec, knobs: Knobs = Knobs()) -> dict:
    exprs = _expressions(spec, knobs)
    return {
        "groups": [
            {
                "name": GROUP,
                "interval": "30s",
                "rules": [{"record": name, "expr": exprs[name]} for name in RECORDS] + _alerts(knobs),
            }
        ]
    }


def render_autoscaling(spec: Spec, knobs: Knobs = Knobs(), generator: str = "inferwatch build") -> str:
    return (
        f"# Generated by `{generator}` from {Path(spec.file).name} and autoscale/knobs.yaml; do not edit by hand.\n"
        "# Autoscaling signals (llm_autoscale:*) and scale-up alerts; the KEDA and HPA renders read them.\n"
        + dump_yaml(compile_autoscaling(spec, knobs))
    )
