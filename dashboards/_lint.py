"""`inferwatch dashboards lint`: the anti-patterns seen in public LLM-serving dashboards.

Works on anyone's Grafana dashboard (JSON, schema v2, Kubernetes YAML: `_lint_read`) and never
raises on it: a file that is not a dashboard is one finding. Queries are judged in `_lint_promql`,
names in `_lint_names`; this module walks panels and variables. Every finding names the panel,
the rule and what to do instead; our own dashboards must have none.

    counter-without-rate      a counter or histogram series plotted raw: a lifetime total, not a rate
    quantile-without-le       histogram_quantile over buckets aggregated without `le`
    sum-rate-as-latency       rate(<latency>_sum) plotted alone: seconds per second, not a latency
    average-of-ratios         avg() of a ratio or of an engine-computed ratio gauge: unweighted; sum() of means
    rate-over-interval        rate(...[$__interval]): too few samples on short steps; $__rate_interval
    rate-over-range           [$__range] in a time series: every point a window as long as the whole view
    rate-of-gauge             rate() of a gauge (a DCGM field, an engine ratio): a slope, not a throughput
    unit-mismatch             a seconds histogram shown in ms (or the reverse), steps per second shown as tokens,
                              a DCGM field in a unit of another scale (MiB as bytes, MHz as Hz, 0-1 as percent)
    missing-as-good           `or vector(0)` (a 0 for No data) where the title says errors, latency, or the panel's
                              thresholds paint the fallback green: dead reads healthy
    le-format                 le="2" on a vLLM or SGLang bucket, which the engine writes le="2.0": matches nothing
    deprecated-metric         a name the engine renamed or removed (also through _bucket/_sum/_count)
    unknown-metric            a vLLM, SGLang, DCGM or vocabulary name that does not exist
    invalid-promql            the query does not parse
    angular-panel             graph/singlestat and other Angular panels, gone in Grafana 12
    old-schema                schemaVersion below 36
    hard-coded-datasource     a datasource uid that is not a variable
    legacy-datasource         a datasource given as a string, not {type, uid}
    loki-on-prometheus-datasource   a Loki query whose datasource is a Prometheus data source variable: Grafana
                              lists only Prometheus data sources in it, so no Loki can ever be picked
    undefined-variable        $var used but not defined
    unused-variable           a variable defined but never used
    ignored-variable          a filter variable most panels reading the same series ignore
    invalid-json, not-a-dashboard   the file cannot be linted
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace

from inferwatch.dashboards._lint_names import known
from inferwatch.dashboards._lint_promql import (
    BAD_THINGS,
    PYTHON_SOURCES,
    VARIABLE,
    PanelContext,
    le_text,
    metric_names,
    query_findings,
    rated_names,
    selector_filters,
)
from inferwatch.dashboards._lint_read import _dicts, _map, _text, from_v2, read_dashboards

__all__ = ["Finding", "lint_dashboard", "lint_file", "RULES", "from_v2"]

RULES = (
    "counter-without-rate",
    "quantile-without-le",
    "sum-rate-as-latency",
    "average-of-ratios",
    "rate-over-interval",
    "rate-over-range",
    "rate-of-gauge",
    "unit-mismatch",
    "missing-as-good",
    "le-format",
    "deprecated-metric",
    "unknown-metric",
    "invalid-promql",
    "angular-panel",
    "old-schema",
    "hard-coded-datasource",
    "legacy-datasource",
    "loki-on-prometheus-datasource",
    "undefined-variable",
    "unused-variable",
    "ignored-variable",
    "invalid-json",
    "not-a-dashboard",
)
FILE_RULES = ("invalid-json", "not-a-dashboard")  # about the file, not a dashboard in it
ANGULAR = {
    "graph",
    "singlestat",
    "table-old",
    "grafana-piechart-panel",
    "grafana-worldmap-panel",
    "grafana-clock-panel",
}
BUILTIN_VARIABLES = re.compile(r"__\w*|timeFilter|interval|\d\w*")
BUILTIN_DATASOURCES = {"grafana", "__expr__", "-- grafana --", "-- mixed --", "-- dashboard --", "default"}
NOT_PROMQL = re.compile(
    r"loki|elastic|influx|tempo|jaeger|mysql|postgres|mssql|cloudwatch|graphite|opensearch|"
    r"testdata|__expr__|grafana",
    re.IGNORECASE,
)
# LogQL, not PromQL: a line filter or parser stage (`|= "x"`, `| json`), or `!=` / `!~` of a string right after a
# stream selector (PromQL compares no strings); quoted text removed first
LOGQL = re.compile(
    r"\|\s*(?:[=~]|json\b|logfmt\b|pattern\b|regexp\b|unpack\b|line_format\b|label_format\b|"
    r"unwrap\b|decolorize\b|drop\b|keep\b|__error__\b)|\}\s*![=~]\s*[\"`]"
)
FILTER_VARIABLES = {"query"}  # label_values() filters; custom ones are often thresholds (le="$slo")
NOT_FILTERS = {"le", "quantile", "__name__"}
ENGINE_SOURCES = {"vllm", "sglang", "ray_vllm"}
TARGET_LABELS = {"job", "instance", "pod", "namespace", "cluster", "service", "node", "container", "endpoint"}


@dataclass(frozen=True)
class Finding:
    """One problem: the file (file:key for a ConfigMap), the panel or `variable x` (empty: the dashboard), the
    rule and what to do instead. Printed as `file: panel "title": rule: message`."""

    file: str
    panel: str
    rule: str
    message: str

    def __str__(self) -> str:
        where = (
            self.panel
            if self.panel.startswith("variable ")
            else f'panel "{self.panel}"'
            if self.panel
            else "file"
            if self.rule in FILE_RULES
            else "dashboard"
        )
        return f"{self.file}: {where}: {self.rule}: {self.message}"


def lint_file(path) -> list[Finding]:
    """Lint one file: dashboard JSON (classic or schema v2), or Kubernetes YAML holding dashboards (a ConfigMap's
    `*.json` keys, a GrafanaDashboard, a Helm template of them); every such file of a folder; standard input for
    `-`. Anything that is not a dashboard is a finding, never an exception."""
    found = []
    for label, board, rule, problem in read_dashboards(path):
        if board is None:
            found.append(Finding(label, "", rule, problem))
            continue
        try:
            found += lint_dashboard(board, label)
        except RecursionError:  # panels or queries nested thousands deep
            found.append(Finding(label, "", "not-a-dashboard", "nested too deeply to lint"))
    return found


# --- walking a dashboard ------------------------------------------------------------------------------------


def _panels(board: dict):
    """Every panel that can hold queries: top-level, inside collapsed rows, and in old `rows` (schemaVersion < 16)."""
    for panel in _dicts(board.get("panels")):
        yield panel
        yield from _dicts(panel.get("panels"))  # a collapsed row's panels
    for old_row in _dicts(board.get("rows")):  # schemaVersion < 16
        yield from _dicts(old_row.get("panels"))


def _field_config(panel: dict, key: str):
    """fieldConfig.defaults or .overrides of a panel, None where a mangled export has something else there."""
    config = panel.get("fieldConfig")
    return config.get(key) if isinstance(config, dict) else None


def _unit(panel: dict) -> str:
    """The panel's display unit wherever its Grafana version keeps it (fieldConfig, Angular yaxes or format)."""
    defaults = _field_config(panel, "defaults")
    unit = defaults.get("unit") if isinstance(defaults, dict) else None
    if not unit and _dicts(panel.get("yaxes")):  # Angular graph
        unit = _dicts(panel.get("yaxes"))[0].get("format")
    if not unit:
        unit = panel.get("format")  # Angular singlestat
    return unit if isinstance(unit, str) else ""


def _steps(panel: dict) -> tuple[tuple[float | None, str], ...]:
    """The absolute threshold steps of a panel as (value, colour), base first; none in percentage mode or where an
    export has something else there."""
    defaults = _field_config(panel, "defaults")
    thresholds = defaults.get("thresholds") if isinstance(defaults, dict) else None
    if not isinstance(thresholds, dict) or thresholds.get("mode", "absolute") != "absolute":
        return ()
    steps = []
    for step in _dicts(thresholds.get("steps")):
        value, colour = step.get("value"), step.get("color")
        if not isinstance(colour, str) or not (value is None or isinstance(value, (int, float))):
            return ()
        steps.append((None if value is None else float(value), colour))
    return tuple(steps)


def _overrides_unit(panel: dict) -> bool:
    return "unit" in json.dumps(_field_config(panel, "overrides") or [])


def _uses(value) -> set[str]:
    text = value if isinstance(value, str) else json.dumps(value)
    return {(a or b or c).strip() for a, b, c in VARIABLE.findall(text)}


def _datasource_kind(ds, variables: dict) -> str:
    """'promql' when a target's expr is PromQL (or may be), else 'other'."""
    if isinstance(ds, dict):
        kind, uid = _text(ds.get("type")), _text(ds.get("uid"))
        if kind and kind not in ("prometheus", "datasource") and "prometheus" not in kind:
            return "other"
        ds = uid
    if isinstance(ds, str):
        names = _uses(ds)
        for name in names:
            query = variables.get(name, {}).get("query")
            if (
                variables.get(name, {}).get("type") == "datasource"
                and isinstance(query, str)
                and query
                and query != "prometheus"
            ):
                return "other"
        if not names and NOT_PROMQL.search(ds):
            return "other"
    return "promql"


def _is_logql(expr: str) -> bool:
    return bool(LOGQL.search(re.sub(r'"(?:[^"\\]|\\.)*"|`[^`]*`', '""', expr)))


def _loki_on_prometheus(ds, expr: str, variables: dict) -> str | None:
    """The message when a Loki query (a `loki` datasource type, or LogQL) names a datasource variable of Prometheus
    data sources, else None."""
    kind, uid = (_text(ds.get("type")), _text(ds.get("uid"))) if isinstance(ds, dict) else ("", _text(ds))
    if kind != "loki" and not _is_logql(expr):
        return None
    for name in sorted(_uses(uid)):
        var = variables.get(name, {})
        if var.get("type") == "datasource" and _text(var.get("query")) == "prometheus":
            return (
                f"a Loki query on ${name}, a data source variable of Prometheus data sources: Grafana offers no "
                f"Loki there; give Loki a variable of its own (type datasource, query loki) and use it"
            )
    return None


def _datasource_finding(ds, title: str) -> tuple[str, str, str] | None:
    """(where, rule, message) for a datasource that is fixed or a legacy string, else None."""
    if ds is None or ds == "":
        return None
    if isinstance(ds, str):
        if ds.lower() in BUILTIN_DATASOURCES:
            return None
        if _uses(ds):
            return (
                title,
                "legacy-datasource",
                f'datasource {ds!r} is a string; current Grafana writes {{"type": "prometheus", "uid": "{ds}"}}',
            )
        return (title, "hard-coded-datasource", f"datasource {ds!r} is fixed: use a datasource variable")
    if not isinstance(ds, dict):
        return None
    uid, kind = str(ds.get("uid") or ""), _text(ds.get("type"))
    if not uid or _uses(uid) or uid.lower() in BUILTIN_DATASOURCES or kind in ("grafana", "__expr__", "datasource"):
        return None
    return (title, "hard-coded-datasource", f"datasource uid {uid!r} is fixed: use ${{datasource}}")


# --- the dashboard ------------------------------------------------------------------------------------------


@dataclass
class _Panel:
    title: str
    uses: set[str]  # every variable its queries, title and links reference
    filters: list[tuple[str, str, dict]]  # (metric, source, {variable: label}) per selector


def lint_dashboard(board: dict, file: str = "<dashboard>") -> list[Finding]:
    """Every finding on one classic-shape dashboard dict (from_v2 converts schema v2); never raises on odd values."""
    found: list[tuple[str, str, str]] = []
    try:
        schema = int(board.get("schemaVersion") or 0)
    except (TypeError, ValueError):
        schema = 0
    if "schemaVersion" in board and schema < 36:  # hand-written JSON without one: no claim
        found.append(
            (
                "",
                "old-schema",
                f"schemaVersion {board.get('schemaVersion')} predates Grafana 9; export it "
                "again from a current Grafana",
            )
        )
    templating = _map(board.get("templating"))
    variables = {v["name"]: v for v in _dicts(templating.get("list")) if isinstance(v.get("name"), str)}
    inputs = {v["name"] for v in _dicts(board.get("__inputs")) if isinstance(v.get("name"), str)}
    panels = list(_panels(board))
    exprs = [_text(t.get("expr")) for panel in panels for t in _dicts(panel.get("targets"))]
    vocabulary = any(name in known().vocabulary for expr in exprs for name in metric_names(expr))
    rated = frozenset().union(*(rated_names(expr) for expr in exprs))
    seen: list[_Panel] = []
    for panel in panels:
        found += _panel_findings(panel, variables, PanelContext(vocabulary=vocabulary, rated=rated), seen)
    for name, var in variables.items():
        problem = _datasource_finding(var.get("datasource"), f"variable {name}")
        found += [problem] if problem else []
    found += _variable_findings(board, variables, inputs, seen)
    unique = dict.fromkeys(Finding(file, title, rule, message) for title, rule, message in found)
    return list(unique)


def _panel_findings(panel: dict, variables: dict, board: PanelContext, seen: list[_Panel]):
    """Findings of one panel and its PromQL targets (Loki, expressions and other datasources skipped); records
    what the panel's queries use and filter in `seen` for the variable rules."""
    kind = _text(panel.get("type")) or "panel"
    title = _text(panel.get("title")).strip() or f"untitled {kind} #{panel.get('id', '?')}"
    found = []
    if _text(panel.get("type")) in ANGULAR:
        found.append(
            (
                title,
                "angular-panel",
                f"{panel['type']} is an Angular panel, removed in Grafana 12: use timeseries or stat",
            )
        )
    targets = _dicts(panel.get("targets"))
    problems = [_datasource_finding(panel.get("datasource"), title)] + [
        _datasource_finding(t.get("datasource"), title) for t in targets
    ]
    found += [p for p in problems if p][:1]  # one per panel: its targets repeat the panel's
    context = replace(
        board,
        type=_text(panel.get("type")),
        title=title,
        unit="" if _overrides_unit(panel) else _unit(panel),
        steps=_steps(panel),
    )
    found += _no_value(panel, title)
    filters, uses = [], _uses([title, panel.get("datasource"), panel.get("links"), panel.get("repeat")])
    for target in targets:
        ds = target.get("datasource") or panel.get("datasource")
        loki = _loki_on_prometheus(ds, _text(target.get("expr")), variables)
        if loki:
            found.append((title, "loki-on-prometheus-datasource", loki))
            continue
        if _datasource_kind(ds, variables) == "other" or "expression" in target:
            continue  # Loki, server-side expressions ($A + $B), ...
        uses |= _uses({k: v for k, v in target.items() if k != "alias"})  # InfluxDB's $tag_x, $col
        expr = _text(target.get("expr"))
        if expr.strip():
            filters += selector_filters(expr)
            # an instant query draws one value per series even in a bar chart: a snapshot, as a stat or table
            snapshot = target.get("instant") is True and target.get("range") is not True
            found += [
                (title, rule, message)
                for rule, message in query_findings(expr, replace(context, type="instant") if snapshot else context)
            ]
    seen.append(_Panel(title, uses, filters))
    return found


def _no_value(panel: dict, title: str) -> list[tuple[str, str, str]]:
    """A "No value" text of 0 on errors or latency: a dead engine reads as no errors."""
    defaults = _field_config(panel, "defaults")
    defaults = defaults if isinstance(defaults, dict) else {}
    shown = str(defaults.get("noValue", "")).strip().rstrip("%").strip()
    if shown in ("0", "0.0") and BAD_THINGS.search(title) and _dicts(panel.get("targets")):
        return [
            (
                title,
                "missing-as-good",
                f'"No value" reads {defaults["noValue"]!r}: when the series are missing '
                "the panel shows no errors; leave No value as it is",
            )
        ]
    return []


def _variable_findings(board: dict, variables: dict, inputs: set[str], panels: list[_Panel]):
    """Variables used but not defined, defined but unused, ignored by most panels, or filling `le` wrongly."""
    found = []
    # what is used anywhere (broad: descriptions, links, other variables), and what is referenced in queries
    definitions = {
        name: {k: v for k, v in var.items() if k not in ("name", "current", "options")}
        for name, var in variables.items()
    }
    everywhere = _uses({k: v for k, v in board.items() if k != "templating"}) | _uses(list(definitions.values()))
    everywhere |= {_text(p.get("repeat")) for p in _panels(board)} | {
        _text(r.get("repeat")) for r in _dicts(board.get("rows"))
    }
    referenced: dict[str, list[str]] = {}  # variable -> where it is referenced
    places = (
        [(f'panel "{p.title}"', p.uses) for p in panels]
        + [("the dashboard title or links", _uses([board.get("title"), board.get("links")]))]
        + [
            (f"variable {name}", _uses([var.get("query"), var.get("definition"), var.get("datasource")]))
            for name, var in variables.items()
        ]
    )
    for place, names in places:
        for name in names:
            referenced.setdefault(name, []).append(place)
    defined = set(variables) | inputs
    for name in sorted(set(referenced) - defined):
        if name and not BUILTIN_VARIABLES.fullmatch(name) and re.fullmatch(r"\w+", name):
            found.append(("", "undefined-variable", _undefined(name, referenced[name], sorted(variables))))
    for name, var in sorted(variables.items()):
        if var.get("type") != "adhoc" and name not in everywhere:
            found.append((f"variable {name}", "unused-variable", "defined but no panel or variable uses it"))
    found += _ignored_variables(variables, panels) + _le_variables(variables, panels)
    return found


def _undefined(name: str, places: list[str], variables: list[str]) -> str:
    where = places[0] + (f" and {len(places) - 1} more" if len(places) > 1 else "")
    have = ", ".join(f"${v}" for v in variables[:6]) + (", ..." if len(variables) > 6 else "")
    return f"${name} is used ({where}) but not defined: define it, or use " + (
        f"one of {have}" if have else "no variable"
    )


def _le_variables(variables: dict, panels: list[_Panel]):
    """A custom variable that fills `le` of vLLM or SGLang buckets with a bound spelled otherwise than the engine
    writes it (`1` for "1.0"): that choice selects no bucket."""
    found = []
    for name, var in sorted(variables.items()):
        sources = {
            source
            for p in panels
            for _, source, used in p.filters
            if used.get(name) == "le" and source in PYTHON_SOURCES
        }
        if not sources or var.get("type") not in ("custom", "constant", "textbox"):
            continue
        values = [v.split(" : ")[-1].strip() for v in _text(var.get("query")).split(",")]
        wrong = [(v, le_text(v)) for v in values if le_text(v) not in (None, v)]
        if wrong:
            found.append(
                (
                    f"variable {name}",
                    "le-format",
                    f"${name} fills le of {'/'.join(sorted(sources))} buckets, "
                    f'which the engine writes le="{wrong[0][1]}": '
                    f'"{wrong[0][0]}" selects no bucket',
                )
            )
    return found


def _depends(variables: dict) -> dict[str, set[str]]:
    """For each variable, every variable whose value it narrows to (job -> instance -> ...), itself included."""
    direct = {
        name: _uses([var.get("query"), var.get("definition")]) & set(variables) for name, var in variables.items()
    }
    closure = {}
    for name in variables:
        todo, seen = [name], set()
        while todo:
            current = todo.pop()
            if current not in seen:
                seen.add(current)
                todo += [other for other, deps in direct.items() if current in deps]
        closure[name] = seen
    return closure


def _ignored_variables(variables: dict, panels: list[_Panel]):
    """A filter most panels ignore on series it applies to: the selection silently changes nothing there
    (SGLang's dashboard: $model_name on the heatmaps only). A target label (job, pod, ...) or an engine's
    label applies to every series of that source; any other label only to the metric it was used on."""
    found = []
    closure = _depends(variables)
    for name, var in sorted(variables.items()):
        if _text(var.get("type")) not in FILTER_VARIABLES:
            continue
        narrowing = closure[name]
        groups, users = set(), []
        for panel in panels:
            for metric, source, used in panel.filters:
                labels = {label for variable, label in used.items() if variable in narrowing} - NOT_FILTERS
                if labels:
                    wide = source in ENGINE_SOURCES or labels & TARGET_LABELS
                    groups.add(("source", source) if wide else ("metric", metric))
            if any(set(used) & narrowing for _, _, used in panel.filters):  # any use counts as using it
                users.append(panel)
        using = {id(p) for p in users}  # by identity: comparing panels by value is quadratic
        ignoring = [
            p
            for p in panels
            if id(p) not in using
            and any(("source", source) in groups or ("metric", metric) in groups for metric, source, _ in p.filters)
        ]
        if users and len(ignoring) >= 2 * len(users):  # two thirds of them or more
            found.append(
                (
                    f"variable {name}",
                    "ignored-variable",
                    f"${name} filters {len(users)} of {len(users) + len(ignoring)} panels reading the same "
                    f'series; the others ("{ignoring[0].title}", ...) ignore the selection',
                )
            )
    return found
