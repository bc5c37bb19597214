"""The canary comparisons as rollout analyses: an Argo Rollouts AnalysisTemplate and Flagger MetricTemplates,
from the same table as `inferwatch canary` (signals.yaml, engine source), in PromQL.

A latency query is the canary's mean over the stable mean (fails above 1 + the latency tolerance). A share
query is a one-sided Wald statistic: how many standard errors the canary's bad share lies above (1 + the share
tolerance) times the stable share (fails above Z_ALPHA): a ratio of two small shares alone is noise (13 errors
against 7 in 2,400 requests is 1.9x). Each returns nothing unless both sides counted at least `min_requests`
in the window: Argo Rollouts reads an empty result as inconclusive; Flagger, which has none, halts the analysis
on it (a failed check), never passes it.

Sides, by pod name (no relabeling needed): Argo Rollouts names a ReplicaSet's pods `<rollout>-<hash>-<id>`
and gives the hashes as arguments; Flagger runs the canary as `<target>-<hash>-<id>` and the stable version as
`<target>-primary-<hash>-<id>`.
"""

from __future__ import annotations

from inferwatch.canary._compare import Settings, _selector, parse_selector, signals
from inferwatch.slo import Selector, builtin_sli
from inferwatch.yamlio import dump_yaml

__all__ = ["analysis_template", "metric_templates", "render_templates", "Z_ALPHA"]

DEFAULTS = Settings()
Z_ALPHA = 2.33  # one-sided, alpha 0.01: the share metrics fail above it
ARGO = {
    "model": "{{args.model}}",
    "canary": 'pod=~".+-{{args.canary-hash}}-[a-z0-9]+"',
    "stable": 'pod=~".+-{{args.stable-hash}}-[a-z0-9]+"',
    "window": "{{args.window}}",
}
FLAGGER = {
    "model": "{{ variables.model }}",
    "canary": 'pod=~"{{ target }}-[0-9a-z]+-[0-9a-z]+"',
    "stable": 'pod=~"{{ target }}-primary-[0-9a-z]+-[0-9a-z]+"',
    "window": "{{ interval }}",
}


def _increase(selector: Selector, side: dict, which: str, namespace: str = "") -> str:
    # the templating placeholders are not PromQL: the side's matcher goes in as text, after the escaped ones
    extra = [f'model="{side["model"]}"', side[which]] + ([namespace] if namespace else [])
    inner = selector.render()
    body = inner[inner.index("{") + 1 : -1] + ", " if "{" in inner else ""
    return f"sum(increase({selector.metric}{{{body}{', '.join(extra)}}}[{side['window']}]))"


def _guarded(expr: str, counts: tuple[str, str], minimum: int) -> str:
    return f"(\n  {expr}\n)\nand on () ({counts[0]} >= {minimum})\nand on () ({counts[1]} >= {minimum})"


def _queries(side: dict, settings: Settings, namespace: str = "") -> dict[str, tuple[str, float, str]]:
    """{signal: (query, the highest passing value, what it means)} for the engine's signals."""
    out = {}
    for name, d in signals()["sources"]["engine"].items():
        per: dict[str, dict[str, str]] = {which: {} for which in ("canary", "stable")}
        if "histogram" in d:
            matchers = parse_selector(d["matchers"], "signals.yaml") if d.get("matchers") else ()
            for which in per:
                per[which]["num"] = _increase(Selector(d["histogram"] + "_sum", matchers), side, which, namespace)
                per[which]["den"] = _increase(Selector(d["histogram"] + "_count", matchers), side, which, namespace)
            mean_c, mean_s = (f"({per[w]['num']} / {per[w]['den']})" for w in ("canary", "stable"))
            expr, limit, means = (
                f"{mean_c}\n  /\n  {mean_s}",
                1 + settings.latency_tolerance,
                f"canary mean {d['means']} over the stable mean",
            )
        else:
            if d["bad"] == "answered":
                sli = builtin_sli("answered", "engine")
                bad, total = list(sli.bad), sli.total
            else:
                bad, total = [_selector(d["bad"])], _selector(d["of"])
            for which in per:
                per[which]["den"] = _increase(total, side, which, namespace)
                bad_sum = " + ".join(f"({_increase(b, side, which, namespace)} or vector(0))" for b in bad)
                per[which]["num"] = f"({bad_sum})"
            pc, ps = (f"({per[w]['num']} / {per[w]['den']})" for w in ("canary", "stable"))
            k = 1 + settings.share_tolerance
            variance = (
                f"{pc} * (1 - {pc}) / {per['canary']['den']}\n    + {k * k:g} * {ps} * (1 - {ps}) / "
                f"{per['stable']['den']}"
            )
            expr = f"({pc} - {k:g} * {ps})\n  /\n  sqrt(clamp_min(\n    {variance}, 1e-12))"
            limit, means = (
                Z_ALPHA,
                (
                    f"how far the canary's share of {d['means']} is over {k:g}x the stable share, "
                    f"in standard errors (fails over {Z_ALPHA})"
                ),
            )
        out[name] = (_guarded(expr, (per["canary"]["den"], per["stable"]["den"]), settings.min_requests), limit, means)
    return out


def analysis_template(
    settings: Settings = DEFAULTS,
    address: str = "http://prometheus-operated.monitoring:9090",
    name: str = "inferwatch-canary",
) -> dict:
    """An Argo Rollouts AnalysisTemplate: one metric per signal, inconclusive on too little traffic."""
    metrics = [
        {
            "name": signal,
            "interval": "5m",
            "count": 3,
            "failureLimit": 1,
            "inconclusiveLimit": 2,
            "successCondition": f"len(result) > 0 && result[0] <= {limit:g}",
            "failureCondition": f"len(result) > 0 && result[0] > {limit:g}",
            "provider": {"prometheus": {"address": "{{args.prometheus}}", "query": query, "timeout": 30}},
        }
        for signal, (query, limit, _) in _queries(ARGO, settings).items()
    ]
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "AnalysisTemplate",
        "metadata": {
            "name": name,
            "annotations": {
                "inferwatch.dev/what": "inferwatch canary's comparisons: the canary over the stable ReplicaSet, "
                "by pod name; empty (inconclusive) below the sample guard"
            },
        },
        "spec": {
            "args": [
                {"name": "model"},
                {"name": "canary-hash"},
                {"name": "stable-hash"},
                {"name": "window", "value": settings.window},
                {"name": "prometheus", "value": address},
            ],
            "metrics": metrics,
        },
    }


def metric_templates(
    settings: Settings = DEFAULTS,
    address: str = "http://prometheus-operated.monitoring:9090",
    prefix: str = "inferwatch-canary",
) -> list[dict]:
    """Flagger MetricTemplates, one per signal; the Canary sets `thresholdRange.max` and the model variable."""
    return [
        {
            "apiVersion": "flagger.app/v1beta1",
            "kind": "MetricTemplate",
            "metadata": {
                "name": f"{prefix}-{signal}",
                "annotations": {"inferwatch.dev/what": means, "inferwatch.dev/threshold-range-max": f"{limit:g}"},
            },
            "spec": {"provider": {"type": "prometheus", "address": address}, "query": query},
        }
        for signal, (query, limit, means) in _queries(FLAGGER, settings, 'namespace="{{ namespace }}"').items()
    ]


def render_templates(
    settings: Settings = DEFAULTS, address: str = "http://prometheus-operated.monitoring:9090"
) -> dict[str, str]:
    """{file name: YAML}: the Argo Rollouts template and the Flagger templates, each with a banner saying how."""
    argo = (
        "# Generated by inferwatch (canary/_templates.py). Argo Rollouts: reference it from a Rollout's "
        "analysis with\n# args model, canary-hash (valueFrom podTemplateHashValue: Latest) and stable-hash "
        "(Stable).\n"
    )
    flagger = (
        "# Generated by inferwatch (canary/_templates.py). Flagger: reference each from a Canary's "
        "analysis.metrics\n# with templateRef, templateVariables {model: NAME} and thresholdRange.max as "
        "its annotation says.\n"
    )
    return {
        "argo-rollouts-analysistemplate.yaml": argo + dump_yaml(analysis_template(settings, address)),
        "flagger-metrictemplates.yaml": flagger
        + "---\n".join(dump_yaml(t) for t in metric_templates(settings, address)),
    }
