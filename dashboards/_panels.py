"""Panel helpers over grafanalib for dashboards written against the common vocabulary.

    sel = Selector(ENGINE_FILTERS)            # {namespace=~"$namespace", model=~"$model", ...}
    timeseries("Waiting requests", [target(f"sum by (model, pod) ({sel('llm_requests_waiting')})",
                                           "{{model}} {{pod}}")],
               unit="short", description="...")

Every helper returns grafanalib objects; `inferwatch.dashboards.modern()` turns
the finished dashboard into current Grafana JSON.
"""

from __future__ import annotations

from dataclasses import dataclass

from grafanalib import core

# SGLang gives a non-streamed request its first token only at the end: keep TTFT to streamed requests
STREAMED = 'is_streaming!="false"'

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
    "dashboard",
    "ratio",
    "rate_sum",
    "grid",
    "engine_variables",
    "attainment",
    "FRESH",
    "mean",
    "LOKI",
    "loki_variable",
    "textbox",
    "logs",
]

RATE = "$__rate_interval"
ENGINE_FILTERS = ("namespace", "model", "engine", "pod")
GPU_FILTERS = ("namespace", "pod")
DATASOURCE = "${datasource}"
LOKI = "${loki}"  # Loki queries: a data source variable of their own (loki_variable)


@dataclass(frozen=True)
class Selector:
    """Writes `metric{label=~"$label", ...}` for the dashboard's variables, plus fixed matchers."""

    labels: tuple[str, ...]

    def __call__(self, metric: str, extra: str = "") -> str:
        matchers = [f'{label}=~"${label}"' for label in self.labels] + ([extra] if extra else [])
        return f"{metric}{{{', '.join(matchers)}}}"


def target(expr: str, legend: str = "", instant: bool = False) -> core.Target:
    return core.Target(expr=expr, legendFormat=legend, datasource=DATASOURCE, instant=instant)


def rate_sum(sel: Selector, metric: str, by: str = "model", extra: str = "", window: str = RATE) -> str:
    """`sum by (by) (rate(metric{...}[$__rate_interval]))`: a counter, rated before it is summed."""
    return f"sum by ({by}) (rate({sel(metric, extra)}[{window}]))"


def ratio(numerator: str, denominator: str) -> str:
    """A ratio of sums that reads "no data" rather than NaN when the denominator is zero."""
    return f"{numerator}\n/\n({denominator} > 0)"


def spec_acceptance_targets(sel: Selector) -> list[core.Target]:
    """Speculative decoding's acceptance, as both engines report it: vLLM's counters as a windowed ratio per model,
    and SGLang's own acceptance gauge per engine (its last batch; never averaged across engines)."""
    return [
        target(
            ratio(
                rate_sum(sel, "llm_spec_decode_accepted_tokens_total"),
                rate_sum(sel, "llm_spec_decode_draft_tokens_total"),
            ),
            "{{model}}",
        ),
        target(f"max by (model, pod) ({sel('llm_spec_decode_acceptance_ratio')})", "{{model}} {{pod}} (gauge)"),
    ]


def mean(sel: Selector, histogram: str, by: str = "model", extra: str = "", window: str = RATE) -> str:
    """A histogram's mean over the window: the rate of `_sum` over the rate of `_count`, each summed first (a sum
    over a sum), no data at zero traffic. Exact whatever the buckets, so it belongs beside every quantile of a
    histogram with coarse buckets (vLLM's time per output token: 0.01 then 0.025 s; a p95 stays under 0.025 while
    the time users feel doubles)."""
    return ratio(
        rate_sum(sel, histogram + "_sum", by, extra, window), rate_sum(sel, histogram + "_count", by, extra, window)
    )


FRESH = "5m"  # how recently a count must have grown for an attainment to be shown


def attainment(good: str, total: str, window: str = "$__range") -> str:
    """Share of `total` events that were `good` over `window`, sums over sums; "no data" (never 100 %) unless
    a series of `total` is still scraped and counted something in the last FRESH: range functions keep a
    vanished engine's old samples, the plain selector drops them at its staleness marker."""
    fresh = f"(sum(increase({total}[{FRESH}]) and {total}) > 0)"
    return f"sum(rate({good}[{window}]))\n/\n(sum(rate({total}[{window}])) > 0 and on () {fresh})"


def quantiles(
    sel: Selector, histogram: str, by: str = "model", qs=(0.5, 0.95, 0.99), extra: str = ""
) -> list[core.Target]:
    """p50/p95/p99 of a histogram: buckets rated, then summed by `le`, then the quantile."""
    return [
        target(
            f"histogram_quantile({q}, sum by (le, {by}) (rate({sel(histogram + '_bucket', extra)}[{RATE}])))",
            f"p{int(q * 100)} {{{{{by}}}}}",
        )
        for q in qs
    ]


def timeseries(
    title: str,
    targets: list[core.Target],
    unit: str = "short",
    description: str = "",
    width: int = 12,
    height: int = 8,
    stack: bool = False,
    max_value: float | None = None,
    legend_calcs: tuple[str, ...] = ("lastNotNull", "max"),
) -> core.TimeSeries:
    return core.TimeSeries(
        title=title,
        description=description,
        dataSource=DATASOURCE,
        targets=targets,
        unit=unit,
        gridPos=core.GridPos(h=height, w=width, x=0, y=0),
        stacking={"mode": "normal", "group": "A"} if stack else {},
        legendDisplayMode="table",
        legendPlacement="bottom",
        legendCalcs=list(legend_calcs),
        maxDataPoints=None,
        valueMax=max_value,
        valueMin=0,
        tooltipMode="multi",
    )


def stat(
    title: str,
    expr: str,
    unit: str = "percentunit",
    description: str = "",
    width: int = 4,
    height: int = 4,
    thresholds: tuple = (),
    base_color: str = "green",
) -> core.Stat:
    """A Stat showing the last value (grafanalib would average over the range); `base_color` colours values
    under the first threshold (a neutral "blue" where no value is good or bad in itself)."""
    steps = [core.Threshold(base_color, 0, 0.0)] + [
        core.Threshold(color, i + 1, float(value)) for i, (value, color) in enumerate(thresholds)
    ]
    return core.Stat(
        title=title,
        description=description,
        dataSource=DATASOURCE,
        targets=[target(expr, instant=True)],
        format=unit,
        reduceCalc="lastNotNull",
        gridPos=core.GridPos(h=height, w=width, x=0, y=0),
        thresholdType="absolute",
        thresholds=steps,
        colorMode="value",
        graphMode="none",
        textMode="value",
    )


def logs(title: str, exprs: list[str], description: str = "", width: int = 24, height: int = 12) -> core.Logs:
    """A logs panel of LogQL queries on the Loki data source variable ($loki), newest first, one JSON line each
    with its fields in the details."""
    return core.Logs(
        title=title,
        description=description,
        dataSource=LOKI,
        targets=[core.Target(expr=expr, datasource=LOKI) for expr in exprs],
        gridPos=core.GridPos(h=height, w=width, x=0, y=0),
        showTime=True,
        wrapLogMessages=True,
        enableLogDetails=True,
        sortOrder="Descending",
        dedupStrategy="none",
    )


def row(title: str, collapsed: list | None = None) -> core.RowPanel:
    """A row; with `collapsed` panels, a collapsed row holding them (opened on demand, queried only then)."""
    return core.RowPanel(
        title=title,
        gridPos=core.GridPos(h=1, w=24, x=0, y=0),
        collapsed=collapsed is not None,
        panels=list(collapsed or []),
    )


def datasource_variable() -> core.Template:
    return core.Template(name="datasource", label="Data source", type="datasource", query="prometheus")


def loki_variable() -> core.Template:
    """Loki's own data source variable: `$datasource` lists Prometheus data sources only, so a Loki panel on it
    could never be pointed at a Loki (the linter's `loki-on-prometheus-datasource`)."""
    return core.Template(name="loki", label="Loki", type="datasource", query="loki")


def textbox(name: str, default: str, label: str) -> core.Template:
    """A free-text variable with a default, for what only the user's setup knows (a log stream's job label)."""
    return core.Template(name=name, label=label, type="textbox", query=default, default=default, hide=0)


def variable(name: str, query: str, label: str | None = None) -> core.Template:
    """A multi-select query variable with All (`.*`, so series without the label still match)."""
    return core.Template(
        name=name,
        label=label or name.capitalize(),
        query=query,
        dataSource=DATASOURCE,
        multi=True,
        includeAll=True,
        allValue=".*",
        refresh=2,
        sort=1,
        default="All",
        hide=0,
    )


def engine_variables() -> list[core.Template]:
    """namespace, model, engine and pod, each narrowing the next."""
    base = "llm_requests_running"
    return [
        variable("namespace", f"label_values({base}, namespace)"),
        variable("model", f'label_values({base}{{namespace=~"$namespace"}}, model)'),
        variable("engine", f'label_values({base}{{namespace=~"$namespace", model=~"$model"}}, engine)'),
        variable("pod", f'label_values({base}{{namespace=~"$namespace", model=~"$model", engine=~"$engine"}}, pod)'),
    ]


def grid(panels: list, top: int = 0) -> list:
    """Lay panels out left to right on Grafana's 24-column grid from line `top`, wrapping rows; a row panel starts
    a new line, and a collapsed row's own panels are laid out below it as Grafana places them when it opens."""
    x, y, line_height = 0, top, 0
    for panel in panels:
        pos = panel.gridPos
        if isinstance(panel, core.RowPanel) or x + pos.w > 24:
            x, y = 0, y + line_height
            line_height = 0
        panel.gridPos = core.GridPos(h=pos.h, w=pos.w, x=x, y=y)
        if isinstance(panel, core.RowPanel):
            y += pos.h
            grid(panel.panels, y)
            continue
        x += pos.w
        line_height = max(line_height, pos.h)
    return panels


def dashboard(
    uid: str,
    title: str,
    description: str,
    panels: list,
    variables: list,
    tags=("inferwatch",),
    links: tuple[str, ...] = ("inferwatch",),
) -> core.Dashboard:
    """`$datasource` (Prometheus) first, then `variables`."""
    return core.Dashboard(
        uid=uid,
        title=title,
        description=description,
        tags=list(tags),
        panels=grid(panels),
        templating=core.Templating(list=[datasource_variable(), *variables]),
        timezone="browser",
        time=core.Time("now-3h", "now"),
        refresh="30s",
        links=[
            core.DashboardLink(
                title="inferwatch",
                type="dashboards",
                tags=list(links),
                asDropdown=True,
                includeVars=True,
                keepTime=True,
            )
        ],
    )
