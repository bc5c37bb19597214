"""SLOs: for each objective the compiler produced, its target, current SLI, error budget and burn rates.

Reads the compiler's recorded series (llm_slo:*), labelled service, slo and the
spec's group_by labels (model for the embedded defaults).
"""

from inferwatch.dashboards import Selector, dashboard, row, stat, target, timeseries, variable

slo = Selector(("service", "slo", "model"))
EACH = "{{service}}/{{slo}} {{model}}"
WINDOWS = ("5m", "30m", "1h", "6h", "1d", "3d")          # the burn-rate tiers' windows (slo/tiers.yaml)
FIRING = ('ALERTS{alertname=~"LLMErrorBudgetBurn|LLMSLIDataMissing", alertstate="firing", service=~"$service", '
          'slo=~"$slo", model=~"$model"}')

dashboard = dashboard(
    uid="inferwatch-slos",
    title="LLM SLOs",
    description="Objectives, SLIs, error budgets, burn rates and burn alerts from inferwatch's SLO rules.",
    variables=[variable("service", "label_values(llm_slo:objective:ratio, service)"),
               variable("slo", 'label_values(llm_slo:objective:ratio{service=~"$service"}, slo)', label="SLO"),
               variable("model", 'label_values(llm_slo:sli:ratio{service=~"$service", slo=~"$slo"}, model)')],
    panels=[
        row("Objectives"),
        stat("Target", 'min(llm_slo:objective:ratio{service=~"$service", slo=~"$slo"})', width=4,
             description="llm_slo:objective:ratio: the objective's target share of good events (lowest shown)."),
        stat("Lowest SLI over the SLO window", f"min({slo('llm_slo:sli:ratio')})", width=4,
             description="llm_slo:sli:ratio: good events over all events across the SLO window (event-weighted)."),
        stat("Lowest error budget remaining", f"min({slo('llm_slo:error_budget_remaining:ratio')})", width=4,
             thresholds=((0.25, "orange"), (0.5, "green")),
             description="llm_slo:error_budget_remaining:ratio: 1 means untouched, 0 spent, below 0 overspent."),
        timeseries("SLI over the SLO window", [target(slo("llm_slo:sli:ratio"), EACH)], unit="percentunit",
                   width=12, description="llm_slo:sli:ratio per objective and group."),
        timeseries("Error budget remaining", [target(slo("llm_slo:error_budget_remaining:ratio"), EACH)],
                   unit="percentunit", description="llm_slo:error_budget_remaining:ratio per objective and group."),
        row("Burn rate"),
        timeseries("Burn rate per window", [target(slo(f"llm_slo:burn_rate:{w}"), f"{w} {EACH}") for w in WINDOWS],
                   unit="x", description="llm_slo:burn_rate:<window>: error ratio over the window divided by the error "
                                         "budget; 1 spends the budget exactly over the SLO window."),
        timeseries("Error ratio, 5m and 1h", [target(slo(f"llm_slo:error_ratio:{w}"), f"{w} {EACH}")
                                              for w in ("5m", "1h")], unit="percentunit",
                   description="llm_slo:error_ratio:5m and :1h, the page tier's windows."),
        row("Alerts"),
        timeseries("Burn and missing-data alerts firing", [
            target(f"count({FIRING}) or vector(0)", "firing"),
            target(f"sum by (alertname, slo, tier, model) ({FIRING})", "{{alertname}} {{slo}} {{tier}} {{model}}")],
            width=24, description="ALERTS of LLMErrorBudgetBurn (by tier) and LLMSLIDataMissing for the selected "
                                  "objectives; 0 when none fires."),
    ])
