"""Dashboards as code: grafanalib definitions written against the common vocabulary, shipped as modern
Grafana JSON, linted, and checked for empty panels against real series.

    from inferwatch.dashboards import Selector, ENGINE_FILTERS, dashboard, timeseries, target, ...
    # in my.dashboard.py: dashboard = dashboard(uid=..., title=..., panels=[...], variables=engine_variables())
    inferwatch dashboards build my.dashboard.py -o out/
"""

from inferwatch.dashboards._modern import DATASOURCE_REF, SCHEMA_VERSION, modern
from inferwatch.dashboards._panels import (ENGINE_FILTERS, FRESH, GPU_FILTERS, LOKI, RATE, STREAMED, Selector,
                                           attainment, dashboard, datasource_variable, engine_variables, grid, logs,
                                           loki_variable, quantiles, rate_sum, ratio, row, stat, target, textbox,
                                           timeseries, variable)
from inferwatch.dashboards._objectives import LatencyObjective, latency_objective, slo_specs

__all__ = ["STREAMED", "Selector", "ENGINE_FILTERS", "GPU_FILTERS", "RATE", "target", "timeseries", "stat", "row",
           "quantiles", "variable", "datasource_variable", "engine_variables", "dashboard", "ratio", "rate_sum",
           "grid", "modern", "SCHEMA_VERSION", "DATASOURCE_REF", "attainment", "FRESH", "LatencyObjective",
           "latency_objective", "slo_specs", "LOKI", "loki_variable", "textbox", "logs"]
