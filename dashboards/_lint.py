"""`inferwatch dashboards lint`: the anti-patterns seen in public LLM-serving dashboards.

Works on anyone's Grafana dashboard JSON. Every finding names the panel, the
rule and what to do instead; our own dashboards must have none.

    counter-without-rate      a counter or histogram series plotted raw: a lifetime total, not a rate
    quantile-without-le       histogram_quantile over buckets not summed `by (le)`
    sum-rate-as-latency       rate(<histogram>_sum) plotted alone: seconds per second, not a latency
    average-of-ratios         avg() of a ratio or of an engine-computed ratio gauge: unweighted
    deprecated-metric         a name the engine renamed or removed
    unknown-metric            an engine, DCGM or vocabulary name that does not exist
    invalid-promql            the query does not parse
    angular-panel             graph/singlestat and other Angular panels, gone in Grafana 12
    old-schema                schemaVersion below 36
    hard-coded-datasource     a datasource uid that is not a variable
    legacy-datasource         a datasource given as a string, not {type, uid}
    undefined-variable        $var used but not defined
    unused-variable           a variable defined but never used
    single-select-variable    a filter variable that cannot select several or All
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import promql_parser
import yaml

from inferwatch.dashboards._build import HERE

__all__ = ["Finding", "lint_dashboard", "lint_file", "known_metrics", "RULES"]

RULES = ("counter-without-rate", "quantile-without-le", "sum-rate-as-latency", "average-of-ratios",
         "deprecated-metric", "unknown-metric", "invalid-promql", "angular-panel", "old-schema",
         "hard-coded-datasource", "legacy-datasource", "undefined-variable", "unused-variable",
         "single-select-variable")
ANGULAR = {"graph", "singlestat", "table-old", "grafana-piechart-panel", "grafana-worldmap-panel", "grafana-clock-panel"}
RANGE_FUNCTIONS = {"rate", "irate", "increase", "delta", "idelta", "deriv", "resets", "changes", "predict_linear"}
COUNTER_SUFFIXES = ("_total", "_bucket", "_count", "_sum")
JUDGED_PREFIXES = ("vllm:", "sglang:", "DCGM_", "llm_", "gpu_", "inferwatch_")
ENGINE_RATIO_GAUGES = {"sglang:cache_hit_rate", "sglang:gen_throughput", "sglang:spec_accept_rate",
                       "sglang:spec_accept_length", "vllm:spec_decode_draft_acceptance_rate",
                       "vllm:gpu_prefix_cache_hit_rate", "llm_spec_decode_acceptance_ratio"}
BUILTIN_VARIABLES = re.compile(r"__\w+|timeFilter|interval")
_VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)(?::\w+)?\]\]")


@dataclass(frozen=True)
class Finding:
    file: str
    panel: str
    rule: str
    message: str

    def __str__(self) -> str:
        where = self.panel if self.panel.startswith("variable ") else f'panel "{self.panel}"' if self.panel \
            else "dashboard"
        return f"{self.file}: {where}: {self.rule}: {self.message}"


@lru_cache(maxsize=None)
def known_metrics() -> tuple[frozenset[str], dict[str, str]]:
    """(every name we know exists, {stale name: what replaces it})."""
    from inferwatch.mappings import load_catalog, load_mappings

    doc = yaml.safe_load((HERE / "engine-metrics.yaml").read_text(encoding="utf-8"))
    names = set(doc["known"])
    deprecated = dict(doc["deprecated"])
    catalog = load_catalog()
    names |= set(catalog.metrics)
    for mapping in load_mappings(catalog=catalog):
        for entry in mapping.entries:
            sources = list(entry.sources)
            names |= set(sources)
            for old in sources[1:]:
                deprecated.setdefault(old, sources[0])
    names |= {n + s for n in list(names) for s in ("_bucket", "_count", "_sum", "_total")}
    names |= {"up", "ALERTS", "ALERTS_FOR_STATE", "inferwatch_exporter_target_up", "inferwatch_exporter_build_info"}
    return frozenset(names), deprecated


# --- PromQL -------------------------------------------------------------------------------------------------

def _parseable(expr: str) -> str:
    """Grafana variables out of the way: ranges become 5m, bare variables a number, quoted ones stay."""
    expr = re.sub(r"\[\s*\$\{?\w+\}?\s*\]", "[5m]", expr)
    expr = re.sub(r"\[\s*\$\{?\w+\}?\s*:", "[5m:", expr)
    out = []
    for part in re.split(r'("(?:[^"\\]|\\.)*")', expr):
        out.append(part if part.startswith('"') else _VARIABLE.sub("1", part))
    return "".join(out)


def _children(node):
    for name in ("lhs", "rhs", "expr", "param", "vector_selector"):
        child = getattr(node, name, None)
        if child is not None and not isinstance(child, (str, int, float)):
            yield child
    for arg in getattr(node, "args", None) or []:
        yield arg


def _walk(node, inside_range=False):
    """Yield (node, inside a range function) for every node."""
    yield node, inside_range
    kind = type(node).__name__
    for child in _children(node):
        ranged = inside_range or (kind == "Call" and node.func.name in RANGE_FUNCTIONS) or kind == "MatrixSelector"
        yield from _walk(child, ranged)


def _unparen(node):
    while type(node).__name__ == "ParenExpr":
        node = node.expr
    return node


def _keeps_le(node) -> bool:
    node = _unparen(node)
    if type(node).__name__ != "AggregateExpr":
        return type(node).__name__ == "Call" and node.func.name in ("label_replace",)
    modifier = node.modifier
    if modifier is None:
        return False
    return ("le" in modifier.labels) == ("By" in str(modifier.type))


def _query_findings(expr: str) -> list[tuple[str, str]]:
    try:
        tree = promql_parser.parse(_parseable(expr))
    except ValueError as err:
        return [("invalid-promql", f"{err}: {expr}")]
    names, deprecated = known_metrics()
    found, nodes = [], list(_walk(tree))
    has_division = any(type(n).__name__ == "BinaryExpr" and str(n.op) == "/" for n, _ in nodes)
    for node, ranged in nodes:
        kind = type(node).__name__
        if kind == "VectorSelector" and node.name:
            name = node.name
            if name in deprecated:
                found.append(("deprecated-metric", f"{name} is stale: use {deprecated[name]}"))
            elif name.startswith(JUDGED_PREFIXES) and ":" not in name.removeprefix("vllm:").removeprefix("sglang:") \
                    and name not in names:
                found.append(("unknown-metric", f"{name} is not exposed by any known engine, exporter or the "
                                                "common vocabulary"))
            recorded = ":" in name and not name.startswith(("vllm:", "sglang:"))
            if not ranged and name.endswith(COUNTER_SUFFIXES) and not recorded:
                found.append(("counter-without-rate", f"{name} is a counter: plotted raw it is a lifetime total "
                                                      "since the process started; use rate() or increase()"))
        elif kind == "Call" and node.func.name == "histogram_quantile" and len(node.args) > 1:
            if not _keeps_le(node.args[1]):
                found.append(("quantile-without-le", "histogram_quantile needs buckets summed `by (le, ...)`: "
                                                     "sum by (le) (rate(x_bucket[...]))"))
        elif kind == "Call" and node.func.name in ("rate", "increase", "irate") and not has_division:
            selector = getattr(node.args[0], "vector_selector", None)
            if selector is not None and (selector.name or "").endswith("_sum"):
                found.append(("sum-rate-as-latency", f"rate({selector.name}) alone is seconds per second, not a "
                                                     "latency: divide by the rate of _count, or use quantiles"))
        elif kind == "AggregateExpr" and str(node.op) == "avg":
            inner = list(_walk(node.expr))
            if any(type(n).__name__ == "BinaryExpr" and str(n.op) == "/" for n, _ in inner) or any(
                    type(n).__name__ == "VectorSelector" and n.name in ENGINE_RATIO_GAUGES for n, _ in inner):
                found.append(("average-of-ratios", "avg() of ratios weighs a quiet engine like a busy one: "
                                                   "divide sums instead, sum(rate(a)) / sum(rate(b))"))
    return sorted(set(found))


# --- the dashboard ------------------------------------------------------------------------------------------

def _panels(board: dict):
    for panel in board.get("panels", []):
        yield panel
        yield from panel.get("panels", [])
    for old_row in board.get("rows", []):                 # schemaVersion < 16
        yield from old_row.get("panels", [])


def _datasource_findings(ds, title: str) -> list[tuple[str, str, str]]:
    if ds is None:
        return []
    if isinstance(ds, str):
        if _VARIABLE.search(ds):
            return [(title, "legacy-datasource", f"datasource {ds!r} is a string; current Grafana writes "
                                                 '{"type": "prometheus", "uid": "${datasource}"}')]
        return [(title, "hard-coded-datasource", f"datasource {ds!r} is fixed: use a datasource variable")]
    uid = str(ds.get("uid", ""))
    if uid and not _VARIABLE.search(uid) and not uid.startswith("-- ") and ds.get("type") != "grafana":
        return [(title, "hard-coded-datasource", f"datasource uid {uid!r} is fixed: use ${{datasource}}")]
    return []


def lint_dashboard(board: dict, file: str = "<dashboard>") -> list[Finding]:
    found: list[tuple[str, str, str]] = []
    if int(board.get("schemaVersion") or 0) < 36:
        found.append(("", "old-schema", f"schemaVersion {board.get('schemaVersion')} predates Grafana 9; export it "
                                        "again from a current Grafana"))
    variables = {v.get("name"): v for v in board.get("templating", {}).get("list", [])}
    used: set[str] = set()
    for panel in _panels(board):
        title = panel.get("title", "")
        if panel.get("type") in ANGULAR:
            found.append((title, "angular-panel", f"{panel['type']} is an Angular panel, removed in Grafana 12: "
                                                  "use timeseries or stat"))
        found += _datasource_findings(panel.get("datasource"), title)
        used |= _uses(json.dumps({k: v for k, v in panel.items() if k != "panels"}))
        for target in panel.get("targets", []):
            found += _datasource_findings(target.get("datasource"), title)
            if target.get("expr"):
                found += [(title, rule, message) for rule, message in _query_findings(target["expr"])]
    for name, var in variables.items():
        found += _datasource_findings(var.get("datasource"), f"variable {name}")
        used |= _uses(json.dumps({k: v for k, v in var.items() if k not in ("name", "current", "options")}))
        if var.get("type") == "query" and not var.get("multi") and not var.get("includeAll"):
            found.append((f"variable {name}", "single-select-variable", "filters should be multi-select with All"))
    used |= _uses(json.dumps([board.get("title"), board.get("links", [])]))
    for name in sorted(used - set(variables)):
        if not BUILTIN_VARIABLES.fullmatch(name):
            found.append(("", "undefined-variable", f"${name} is used but not defined"))
    for name in sorted(set(variables) - used):
        found.append(("", "unused-variable", f"${name} is defined but no panel or variable uses it"))
    return [Finding(file, title, rule, message) for title, rule, message in found]


def _uses(text: str) -> set[str]:
    return {a or b or c for a, b, c in _VARIABLE.findall(text)}


def lint_file(path) -> list[Finding]:
    try:
        board = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        return [Finding(str(path), "", "invalid-json", str(err))]
    if "dashboard" in board and "panels" not in board:        # an API export wraps the dashboard
        board = board["dashboard"]
    return lint_dashboard(board, str(path))
