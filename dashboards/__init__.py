"""Dashboards as code: grafanalib definitions written against the common vocabulary, shipped as modern
Grafana JSON, linted, and checked for empty panels against real series.

    from inferwatch.dashboards import Selector, ENGINE_FILTERS, dashboard, timeseries, target, ...
    # in my.dashboard.py: dashboard = dashboard(uid=..., title=..., panels=[...], variables=engine_variables())
    inferwatch dashboards build my.dashboard.py -o out/
    build()     # {file name: JSON text} of the built-in dashboards, as `inferwatch build` writes them
"""

from inferwatch import _lazy

__all__ = [
    "STREAMED",
    "Selector",
    "ENGINE_FILTERS",
    "GPU_FILTERS",
    "RATE",
    "target",
    "timeseries",
    "stat",
    "row",
    "quantiles",
    "variable",
    "datasource_variable",
    "engine_variables",
    "dashboard",
    "ratio",
    "rate_sum",
    "spec_acceptance_targets",
    "grid",
    "modern",
    "SCHEMA_VERSION",
    "DATASOURCE_REF",
    "attainment",
    "FRESH",
    "LatencyObjective",
    "latency_objective",
    "slo_specs",
    "LOKI",
    "loki_variable",
    "textbox",
    "logs",
    "PANEL_NEEDS",
    "substitute_variables",
    "panel_needs",
    "panels_by_row",
    "has_data",
    "panel_has_data",
    "build",
    "load_dashboard",
    "render_json",
    "PanelContext",
    "query_findings",
    "metric_names",
    "register",
]

# loaded on first use: the panels pull in grafanalib, which `inferwatch --help` never needs
_LAZY = {
    name: module
    for module, names in {
        "_cli": ("register",),
        "_build": ("build", "load_dashboard", "render_json"),
        "_lint_promql": ("PanelContext", "metric_names", "query_findings"),
        "_modern": ("DATASOURCE_REF", "SCHEMA_VERSION", "modern"),
        "_panels": (
            "ENGINE_FILTERS",
            "FRESH",
            "GPU_FILTERS",
            "LOKI",
            "RATE",
            "STREAMED",
            "Selector",
            "attainment",
            "dashboard",
            "datasource_variable",
            "engine_variables",
            "grid",
            "logs",
            "loki_variable",
            "quantiles",
            "rate_sum",
            "ratio",
            "spec_acceptance_targets",
            "row",
            "stat",
            "target",
            "textbox",
            "timeseries",
            "variable",
        ),
        "_objectives": ("LatencyObjective", "latency_objective", "slo_specs"),
        "_probe": ("PANEL_NEEDS", "has_data", "panel_has_data", "panel_needs", "panels_by_row", "substitute_variables"),
    }.items()
    for name in names
}

__getattr__ = _lazy.lazy_attributes(__name__, _LAZY)
