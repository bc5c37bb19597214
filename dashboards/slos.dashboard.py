"""SLOs: for each objective the compiler produced, its target, current SLI, error budget and burn rates.

Reads the compiler's recorded series (llm_slo:*), labelled service, slo and the
spec's group_by labels (model for the embedded defaults). The rules record one
error ratio per tier window and the SLI over the SLO window; burn rates and the
remaining budget are derived here, against the objective's target, which is
recorded once per objective (llm_slo:objective:ratio).
"""

from inferwatch.dashboards import Selector, dashboard, row, stat, target, timeseries, variable

slo = Selector(("service", "slo", "model"))
EACH = "{{service}}/{{slo}} {{model}}"
WINDOWS = ("5m", "30m", "1h", "6h", "1d", "3d")  # the burn-rate tiers' windows (slo/tiers.yaml)
RAW_FALLBACK = ("1d", "3d")  # windows over 6h: read from the raw counters every 10m until the recording covers them
FIRING = (
    'ALERTS{alertname=~"LLMErrorBudgetBurn|LLMSLIDataMissing", alertstate="firing", service=~"$service", '
    'slo=~"$slo", model=~"$model"}'
)
BUDGET = '(1 - llm_slo:objective:ratio{service=~"$service", slo=~"$slo"})'
# the SLI over the SLO window is summed every 10 minutes: look back two evaluations
SLI = f"last_over_time({slo('llm_slo:sli:ratio')}[20m])"
REMAINING = f"1 - (1 - {SLI}) / on (service, slo) group_left () {BUDGET}"


def error_ratio(window: str) -> str:
    recorded = slo(f"llm_slo:error_ratio:{window}")
    if window not in RAW_FALLBACK:
        return recorded
    return f"({recorded} or last_over_time({slo(f'llm_slo:error_ratio_raw:{window}')}[20m]))"


def burn_rate(window: str) -> str:
    return f"{error_ratio(window)} / on (service, slo) group_left () {BUDGET}"


dashboard = dashboard(
    uid="inferwatch-slos",
    title="LLM SLOs",
    description="Objectives, SLIs, error budgets, burn rates and burn alerts from inferwatch's SLO rules.",
    variables=[
        variable("service", "label_values(llm_slo:objective:ratio, service)"),
        variable("slo", 'label_values(llm_slo:objective:ratio{service=~"$service"}, slo)', label="SLO"),
        variable("model", 'label_values(llm_slo:total:increase1m{service=~"$service", slo=~"$slo"}, model)'),
    ],
    panels=[
        row("Objectives"),
        stat(
            "Target",
            'min(llm_slo:objective:ratio{service=~"$service", slo=~"$slo"})',
            width=4,
            description="llm_slo:objective:ratio: the objective's target share of good events (lowest shown).",
        ),
        stat(
            "Lowest SLI over the SLO window",
            f"min({SLI})",
            width=4,
            description="llm_slo:sli:ratio: good events over all events across the SLO window (event-weighted), "
            "summed every 10 minutes from the recorded per-minute counts: until the rules have run "
            "for a whole SLO window it covers the time since they were deployed.",
        ),
        stat(
            "Lowest error budget remaining",
            f"min({REMAINING})",
            width=4,
            thresholds=((0.25, "orange"), (0.5, "green")),
            description="1 - (1 - SLI) / (1 - target) over the SLO window: 1 means untouched, 0 spent, below 0 "
            "overspent.",
        ),
        timeseries(
            "SLI over the SLO window",
            [target(SLI, EACH)],
            unit="percentunit",
            width=12,
            description="llm_slo:sli:ratio per objective and group (since deployment until the "
            "rules have run for a whole SLO window).",
        ),
        timeseries(
            "Error budget remaining",
            [target(REMAINING, EACH)],
            unit="percentunit",
            description="1 - (1 - SLI) / (1 - target) per objective and group.",
        ),
        row("Burn rate"),
        timeseries(
            "Burn rate per window",
            [target(burn_rate(w), f"{w} {EACH}") for w in WINDOWS],
            unit="x",
            description="llm_slo:error_ratio:<window> divided by the error budget (1 - target); "
            "1 spends the budget exactly over the SLO window. Each window reads the raw "
            "counters until the recorded per-minute counts reach back 90% of it "
            "(1d and 3d: llm_slo:error_ratio_raw:<window>, every 10 minutes). A "
            "window that is only ever a tier's long one (1h, 1d, 3d with "
            "slo/tiers.yaml's tiers) records no ratio while it holds fewer events "
            "than its tier's min_events: a gap there is too little traffic to judge, "
            "not a good burn rate.",
        ),
        timeseries(
            "Error ratio, 5m and 1h",
            [target(error_ratio(w), f"{w} {EACH}") for w in ("5m", "1h")],
            unit="percentunit",
            description="llm_slo:error_ratio:5m and :1h, the page tier's windows. The 1h ratio is "
            "absent (a gap, not 0) while the hour holds fewer events than the page tier's "
            "min_events.",
        ),
        row("Alerts"),
        timeseries(
            "Burn and missing-data alerts firing",
            [
                target(f"count({FIRING}) or vector(0)", "firing"),
                target(f"sum by (alertname, slo, tier, model) ({FIRING})", "{{alertname}} {{slo}} {{tier}} {{model}}"),
            ],
            width=24,
            description="ALERTS of LLMErrorBudgetBurn (by tier) and LLMSLIDataMissing for the selected "
            "objectives; 0 when none fires.",
        ),
    ],
)
