"""The promtool test shipped beside the autoscaling rules (pure): synthetic engines whose p90s sit over, inside
and under the knobs' band, a new replica's cold start, and a replica idle while the others queue. Expectations
are comparisons, not float values, so they hold for any spec thresholds and knobs: promtool compares floats
exactly, and a p90 interpolated inside a bucket is not exact in binary."""

from __future__ import annotations

from inferwatch.autoscale._rules import Knobs, _alerts, objectives
from inferwatch.slo import Spec
from inferwatch.yamlio import dump_yaml

__all__ = ["promtool_test"]

EVAL = "70m"  # the pods of the start are over the cold-start lookback by then; the new one is not
NS = 'namespace="ml"'


def _bands(knobs: Knobs) -> dict[str, float]:
    """The pressure each model is given: over the band, inside it, under it."""
    over = (knobs.scale_up + 1) / 2 if knobs.scale_up < 1 else knobs.scale_up * 1.25
    return {"hot": over, "band": (knobs.scale_up + knobs.scale_down) / 2, "cool": knobs.scale_down / 2}


def _engine(model: str, pod: str, ttft: float, tpot: float, metrics: dict[str, str]) -> list[dict]:
    """Every request in one bucket whose bound puts the p90 at the given seconds (p90 = 0.9 x the bound)."""
    labels = f'{NS}, model="{model}", pod="{pod}"'
    series = []
    for kind, seconds in (("ttft", ttft), ("tpot", tpot)):
        bound = f"{seconds / 0.9:.6g}"
        series += [
            {"series": f'{metrics[kind]}_bucket{{{labels}, le="{le}"}}', "values": "0+100x90"} for le in (bound, "+Inf")
        ]
    return series + [
        {"series": f"llm_requests_running{{{labels}}}", "values": "3+0x90"},
        {"series": f"llm_requests_waiting{{{labels}}}", "values": "1+0x90"},
        {"series": f"llm_requests_finished_total{{{labels}}}", "values": "0+10x90"},
    ]


def promtool_test(spec: Spec, knobs: Knobs, rules_file: str) -> str:
    """A promtool test file for `rules_file` (render_autoscaling(spec, knobs)), next to it in tests/."""
    slis = objectives(spec)
    if set(slis) != {"ttft", "tpot"}:
        raise ValueError(f"{spec.file}: the autoscaling test needs a TTFT and a TPOT objective")
    metrics = {kind: sli.metric for kind, sli in slis.items()}
    threshold = {kind: float(sli.threshold) for kind, sli in slis.items()}
    series: list[dict] = []
    for model, pressure in _bands(knobs).items():
        for pod in ("a", "b"):
            series += _engine(
                model,
                f"{model}-{pod}",
                pressure * threshold["ttft"],
                _bands(knobs)["cool"] * threshold["tpot"],
                metrics,
            )
    new, idle = f'{NS}, model="hot", pod="hot-new"', f'{NS}, model="hot", pod="hot-idle"'
    series += [
        {"series": f"llm_requests_running{{{new}}}", "values": "_x20 1+0x60"},  # first scraped at 20m
        {"series": f"llm_requests_finished_total{{{new}}}", "values": "_x20 0 0 0 1+1x57"},  # served at 23m
        {"series": f"llm_requests_running{{{idle}}}", "values": "0+0x90"},
        {"series": f"llm_requests_waiting{{{idle}}}", "values": "20+0x90"},
        {"series": f"llm_requests_finished_total{{{idle}}}", "values": "5+0x90"},
    ]

    def holds(expr: str, labels: str) -> dict:
        return {"expr": expr, "eval_time": EVAL, "exp_samples": [{"labels": f"{{{labels}}}", "value": 1}]}

    cases = [
        holds(f'llm_autoscale:slo_pressure{{model="hot"}} > bool {knobs.scale_up:g}', f'{NS}, model="hot"'),
        holds('llm_autoscale:scaling_signal{model="hot"} == bool llm_autoscale:slo_pressure', f'{NS}, model="hot"'),
        holds(f'llm_autoscale:slo_pressure{{model="band"}} > bool {knobs.scale_down:g}', f'{NS}, model="band"'),
        holds(f'llm_autoscale:slo_pressure{{model="band"}} < bool {knobs.scale_up:g}', f'{NS}, model="band"'),
        holds(f'llm_autoscale:scaling_signal{{model="band"}} == bool {knobs.scale_up:g}', f'{NS}, model="band"'),
        holds(f'llm_autoscale:slo_pressure{{model="cool"}} < bool {knobs.scale_down:g}', f'{NS}, model="cool"'),
        holds('llm_autoscale:scaling_signal{model="cool"} == bool llm_autoscale:slo_pressure', f'{NS}, model="cool"'),
        {
            "expr": 'llm_autoscale:replicas{model="hot"}',
            "eval_time": EVAL,
            "exp_samples": [{"labels": f'llm_autoscale:replicas{{{NS}, model="hot"}}', "value": 4}],
        },
        {
            "expr": 'llm_autoscale:running_per_replica{model="band"}',
            "eval_time": EVAL,
            "exp_samples": [{"labels": f'llm_autoscale:running_per_replica{{{NS}, model="band"}}', "value": 3}],
        },
        {
            "expr": "llm_autoscale:cold_start_seconds",
            "eval_time": EVAL,
            "exp_samples": [{"labels": f"llm_autoscale:cold_start_seconds{{{new}}}", "value": 180}],
        },
    ]
    idle_rule = next(r for r in _alerts(knobs) if r["alert"] == "LLMReplicaIdleWhileOthersQueue")
    fired_by = 2 + knobs.seconds("scale_down_delay") // 60 + 5  # the 5m rate, then its `for`
    annotations = {
        k: v.replace("{{ $labels.pod }}", "hot-idle").replace("{{ $labels.model }}", "hot")
        for k, v in idle_rule["annotations"].items()
    }
    alerts = [
        {"eval_time": "3m", "alertname": "LLMReplicaIdleWhileOthersQueue", "exp_alerts": []},
        {
            "eval_time": f"{fired_by}m",
            "alertname": "LLMReplicaIdleWhileOthersQueue",
            "exp_alerts": [
                {
                    "exp_labels": {"severity": "warning", "namespace": "ml", "model": "hot", "pod": "hot-idle"},
                    "exp_annotations": annotations,
                }
            ],
        },
        {"eval_time": f"{fired_by}m", "alertname": "LLMScaleUpStalled", "exp_alerts": []},
    ]
    return (
        "# Generated by `inferwatch build` with the autoscaling rules (autoscale/_promtest.py); do not edit.\n"
        + dump_yaml(
            {
                "rule_files": [f"../{rules_file}"],
                "evaluation_interval": "30s",
                "tests": [
                    {"interval": "1m", "input_series": series, "promql_expr_test": cases, "alert_rule_test": alerts}
                ],
            }
        )
    )
