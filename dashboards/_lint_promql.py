"""The query half of `inferwatch dashboards lint`: what one PromQL expression gets wrong, given its panel.
Which names exist, and whose they are, is `_lint_names`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from functools import lru_cache

import promql_parser

from inferwatch.dashboards._lint_names import HISTOGRAM_SUFFIXES, canonical, known
from inferwatch.dashboards._lint_names import base as _base

__all__ = [
    "PanelContext",
    "query_findings",
    "metric_names",
    "rated_names",
    "selector_filters",
    "parse",
    "le_text",
    "PYTHON_SOURCES",
    "BAD_THINGS",
    "VARIABLE",
]

RANGE_FUNCTIONS = {"rate", "irate", "increase", "delta", "idelta", "deriv", "resets", "changes", "predict_linear"}
RATE_FUNCTIONS = {"rate", "irate", "increase", "delta", "idelta", "deriv"}
# where a series' values do not matter: counting series, presence, a filter's right-hand side
VALUE_BLIND_AGGREGATIONS = {"count", "count_values", "group"}
VALUE_BLIND_FUNCTIONS = {
    "absent",
    "absent_over_time",
    "present_over_time",
    "count_over_time",
    "timestamp",
    "changes",
    "resets",
}
COUNTER_SUFFIXES = ("_total", "_bucket", "_count", "_sum")
TIME_PLOTS = {"timeseries", "graph", "heatmap", "barchart", "trend", "state-timeline"}
TIME_UNITS = {
    "ns": 1e-9,
    "µs": 1e-6,
    "us": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
    "dtdurationms": 1e-3,
    "dtdurations": 1.0,
    "clockms": 1e-3,
    "clocks": 1.0,
}
NAME_SCALES = (
    ("_nanoseconds", 1e-9),
    ("_microseconds", 1e-6),
    ("_milliseconds", 1e-3),
    ("_ms", 1e-3),
    ("_seconds", 1.0),
)
LATENCY_WORDS = re.compile(r"latency|time|duration|ttft|tpot|itl", re.IGNORECASE)
# `[$__interval]` and `[$__range]` stand in as these odd ranges, so the rate rules can tell them from a fixed one
INTERVAL_SENTINEL = timedelta(milliseconds=299_999)
RANGE_SENTINEL = timedelta(milliseconds=299_998)
COUNTING_FUNCTIONS = {"rate", "irate", "increase"}  # only for counters; delta() and deriv() are for gauges
# a DCGM field's unit (engine-metrics.yaml dcgm_units) -> Grafana unit ids of another scale, and what is right
WRONG_UNITS = {
    "percent": ({"percentunit"}, "use the unit percent (0-100), or divide by 100"),
    "ratio": ({"percent"}, "use the unit percentunit (0.0-1.0), or multiply by 100"),
    "MiB": (
        {"bytes", "decbytes", "kbytes", "deckbytes", "gbytes", "decgbytes", "bits", "decbits"},
        "use the unit mbytes (MiB), or multiply by 1048576 for bytes",
    ),
    "MHz": ({"hertz"}, "multiply by 1e6 for hertz, or use the custom unit suffix:MHz"),
    "W": ({"mwatt", "kwatt"}, "use the unit watt"),
}
# a fallback of `or vector(c)` is the good value for panels named like these
BAD_THINGS = re.compile(
    r"fail|error|reject|drop|timeout|abort|preempt|evict|5xx|restart|violation|latency|ttft|"
    r"tpot|queue|waiting|pending",
    re.IGNORECASE,
)
GOOD_THINGS = re.compile(r"success|availab|healthy|ready|uptime|hit.?rat|attain|\bup\b", re.IGNORECASE)
MAX_OPERATORS = 1000  # real queries have tens; the parser segfaults past ~4000
PYTHON_SOURCES = {"vllm", "sglang"}  # prometheus_client writes le as a Python float: "2.0", "+Inf"
# a Grafana variable: ${name}, ${name:format}, ${name.field}, $name, [[name]], not $$hashKey; the name in group 1-3
VARIABLE = re.compile(r"(?<!\$)\$\{([^}:.]+)(?:[:.][^}]*)?\}|(?<!\$)\$(\w+)|\[\[(\w+)(?::\w+)?\]\]")


@dataclass(frozen=True)
class PanelContext:
    """What a query's panel says about it: how it is drawn and in what unit."""

    type: str = "timeseries"
    title: str = ""
    unit: str = ""
    # the colour of each threshold step, (lowest value or None for the base, colour), in order: says what is good
    steps: tuple[tuple[float | None, str], ...] = ()
    vocabulary: bool = False  # the dashboard uses our vocabulary, so `llm_` names are judged
    rated: frozenset[str] = frozenset()  # names the dashboard passes to rate() or increase() somewhere


# --- parsing --------------------------------------------------------------------------------------------------


def parseable(expr: str, bare: str = "1") -> str:
    """Grafana variables out of the way: `$__interval` ranges become a sentinel, other ranges 5m, a variable
    that is part of a name (`${prefix}_requests_total`, `$metric{...}`) a name, other bare ones `bare`,
    quoted ones stay."""
    expr = re.sub(r"\[\s*\$\{?__interval\}?\s*\]", "[299999ms]", expr)
    expr = re.sub(r"\[\s*\$\{?__range\}?\s*\]", "[299998ms]", expr)
    expr = re.sub(r"\[\s*\$\{?\w+(?::\w+)?\}?\s*\]", "[5m]", expr)
    expr = re.sub(r"\[\s*\$\{?\w+(?::\w+)?\}?\s*:", "[5m:", expr)
    expr = re.sub(r":\s*\$\{?\w+(?::\w+)?\}?\s*\]", ":1m]", expr)
    expr = re.sub(r"\boffset\s+-?\$\{?\w+\}?", "offset 5m", expr)

    def one(match):
        before, after = match.string[match.start() - 1 : match.start()], match.string[match.end() : match.end() + 1]
        return "iw_var" if re.match(r"[\w:{]", after) or re.match(r"[\w:]", before) else bare

    out = []
    for part in re.split(r'("(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`)', expr):
        out.append(part if part[:1] in ('"', "'", "`") else VARIABLE.sub(one, part))
    return "".join(out)


def _operators(expr: str) -> int:
    """Operators and parentheses outside strings: promql-parser crashes the process on a few thousand nested."""
    bare = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', "", expr)
    return len(re.findall(r"[-+*/%^(]|\b(?:and|or|unless)\b", bare))


@lru_cache(maxsize=4096)
def parse(expr: str):
    """The expression's syntax tree; a variable that stands for a label (`by ($group)`) is tried as a name. Cached:
    each query is read four times (names, rated names, filters, findings). Never change the tree it returns."""
    if _operators(expr) > MAX_OPERATORS:
        raise ValueError(f"{_operators(expr)} operators and parentheses, more than {MAX_OPERATORS}: not parsed")
    try:
        return promql_parser.parse(parseable(expr))
    except ValueError as err:
        try:
            return promql_parser.parse(parseable(expr, bare="iw_var"))
        except ValueError:
            raise err from None


def _children(node):
    for name in ("lhs", "rhs", "expr", "param", "vector_selector"):
        child = getattr(node, name, None)
        if child is not None and not isinstance(child, (str, int, float)):
            yield child
    yield from getattr(node, "args", None) or []


def _kind(node) -> str:
    return type(node).__name__


def _walk(node, ranged=False, blind=False):
    """Yield (node, inside a range function, value ignored) for every node, parents first (no recursion: a
    chain of a thousand `+` is a tree a thousand deep)."""
    stack = [(node, ranged, blind)]
    while stack:
        node, ranged, blind = stack.pop()
        yield node, ranged, blind
        kind, children = _kind(node), []
        for child in _children(node):
            child_blind = (
                blind
                or (kind == "AggregateExpr" and str(node.op) in VALUE_BLIND_AGGREGATIONS)
                or (kind == "Call" and node.func.name in VALUE_BLIND_FUNCTIONS)
                or (kind == "BinaryExpr" and str(node.op) in ("and", "unless") and child is node.rhs)
            )
            child_ranged = ranged or (kind == "Call" and node.func.name in RANGE_FUNCTIONS) or kind == "MatrixSelector"
            children.append((child, child_ranged, child_blind))
        stack.extend(reversed(children))


def _unparen(node):
    while _kind(node) == "ParenExpr":
        node = node.expr
    return node


def _selectors(node):
    return [n for n, _, _ in _walk(node) if _kind(n) == "VectorSelector" and n.name]


def metric_names(expr: str) -> set[str]:
    """The metric names an expression selects; none when it does not parse."""
    try:
        return {n.name for n in _selectors(parse(expr))}
    except ValueError:
        return set()


def rated_names(expr: str) -> set[str]:
    """Names the query passes to rate(), irate() or increase(): the author knows them to be counters."""
    try:
        tree = parse(expr)
    except ValueError:
        return set()
    return {
        s.name
        for n, _, _ in _walk(tree)
        if _kind(n) == "Call" and n.func.name in COUNTING_FUNCTIONS
        for s in _selectors(n)
    }


def selector_filters(expr: str) -> list[tuple[str, str, dict[str, str]]]:
    """(metric base name, its source, {variable: label it filters}) for every selector of the query. The
    source is the engine for vLLM and SGLang names, else the name's first word (kube, node, envoy...)."""
    try:
        tree = parse(expr)
    except ValueError:
        return []
    out = []
    for selector in _selectors(tree):
        matchers = list(selector.matchers.matchers) + [
            m for group in selector.matchers.or_matchers or [] for m in group
        ]
        used = {(a or b or c).strip(): m.name for m in matchers for a, b, c in VARIABLE.findall(m.value or "")}
        spelled, source = canonical(selector.name)
        if source == "ray":  # Ray's copies of vLLM's metrics, not Ray Serve's own ray_*
            source = "ray_vllm"
        elif source not in ("vllm", "sglang"):
            source = selector.name.split(":", 1)[0] if ":" in selector.name else selector.name.split("_", 1)[0]
        out.append((_base(spelled), source, used))
    return out


def _drops_le(node) -> bool:
    """An aggregation right under histogram_quantile that loses `le`; rate() and friends keep it."""
    node = _unparen(node)
    if _kind(node) != "AggregateExpr":
        return False
    modifier = node.modifier
    if modifier is None:
        return True
    return ("le" in modifier.labels) != ("By" in str(modifier.type))


def _below_aggregations(node):
    """What `sum by (...) (max(...))` aggregates: the node a panel's values come from, unit and all."""
    node = _unparen(node)
    while _kind(node) == "AggregateExpr":
        node = _unparen(node.expr)
    return node


def _numeric_scaling(tree) -> bool:
    return any(
        _kind(n) == "BinaryExpr"
        and str(n.op) in ("*", "/")
        and (_kind(_unparen(n.lhs)) == "NumberLiteral" or _kind(_unparen(n.rhs)) == "NumberLiteral")
        for n, _, _ in _walk(tree)
    )


def _counter_difference(node) -> bool:
    """`a_total - b_total` (started minus finished: how many are in flight) or `x - x offset 1h`."""
    return (
        _kind(node) == "BinaryExpr"
        and str(node.op) == "-"
        and bool(_selectors(node.lhs))
        and bool(_selectors(node.rhs))
    )


# --- the rules ------------------------------------------------------------------------------------------------


def query_findings(expr: str, panel: PanelContext = PanelContext()) -> list[tuple[str, str]]:
    """(rule, message) for everything one expression gets wrong on its panel; an unparseable one is one
    `invalid-promql`."""
    try:
        tree = parse(expr)
    except ValueError as err:
        shown = " ".join(expr.split())
        shown = shown if len(shown) <= 200 else shown[:197] + "..."
        return [("invalid-promql", f"{str(err).splitlines()[0]}: {shown}")]
    found: list[tuple[str, str]] = []
    nodes = list(_walk(tree))
    exempt = {id(s) for n, _, _ in nodes if _counter_difference(n) for s in _selectors(n)}
    for node, ranged, blind in nodes:
        kind = _kind(node)
        if kind == "VectorSelector" and node.name:
            found += _name_findings(node.name, panel)
            if not ranged and not blind and id(node) not in exempt:
                found += _raw_counter(node.name, panel)
        elif kind == "Call":
            found += _call_findings(node, tree, panel)
        elif kind == "AggregateExpr" and str(node.op) in ("avg", "sum"):
            found += _average_of_ratios(node)
        elif kind == "MatrixSelector" and node.range == RANGE_SENTINEL and panel.type in TIME_PLOTS and not blind:
            found.append(
                (
                    "rate-over-range",
                    "[$__range] in a time series: every point covers a window as long as "
                    "the whole time range, reaching back before it (a flattened line); "
                    "use [$__rate_interval], or an instant query in a stat",
                )
            )
    found += _unit_findings(tree, panel) + _missing_as_good(tree, panel) + _le_findings(nodes)
    return sorted(set(found))


def _name_findings(name: str, panel: PanelContext) -> list[tuple[str, str]]:
    """deprecated-metric or unknown-metric for a name of a source we judge."""
    spelled, source = canonical(name)
    if source is None or (source == "vocabulary" and not panel.vocabulary):
        return []
    table = known()
    if table.is_foreign(spelled):
        return []
    stale = table.stale(spelled)
    if stale:
        respell = _respelling(name)
        successor = respell(table.deprecated[stale])
        if successor.startswith("nothing: "):  # removed, not renamed
            return [
                (
                    "deprecated-metric",
                    f"{respell(stale)} is stale, {successor.removeprefix('nothing: ')} and "
                    "nothing replaces it: drop the query",
                )
            ]
        return [("deprecated-metric", f"{respell(stale)} is stale: use {successor}")]
    if not table.exists(spelled):
        return [
            (
                "unknown-metric",
                f"{name} is not a name any {source} release exposes (check the spelling and the _total suffix)",
            )
        ]
    return []


def _respelling(name: str):
    """Engine names written the way this dashboard spells them (`ray_vllm:`, `sglang_`), for messages."""
    for engine, prefixes in (("vllm:", ("ray_vllm:", "ray_vllm_")), ("sglang:", ("sglang_",))):
        for prefix in prefixes:
            if name.startswith(prefix):
                return lambda text, e=engine, p=prefix: re.sub(rf"\b{re.escape(e)}", p, text)
    return lambda text: text


def _raw_counter(name: str, panel: PanelContext) -> list[tuple[str, str]]:
    """counter-without-rate for a counter selected outside any range function: a lifetime total."""
    if not _is_counter(name, panel):
        return []
    if _source(name, panel) is None and (":" in name or panel.type not in TIME_PLOTS):
        return []  # a recording rule; someone else's table of totals
    what = (
        f"{_base(name)}_bucket/_sum/_count are counters"
        if name.endswith(HISTOGRAM_SUFFIXES)
        else f"{name} is a counter"
    )
    return [
        (
            "counter-without-rate",
            f"{what}: shown raw, a lifetime total since the process started; use rate() or increase()",
        )
    ]


def _source(name: str, panel: PanelContext) -> str | None:
    """The source judging `name` on this dashboard: an `llm_` name is ours only where the dashboard uses our
    vocabulary (semantic-router has its own `llm_` names)."""
    source = canonical(name)[1]
    return None if source == "vocabulary" and not panel.vocabulary else source


def _is_counter(name: str, panel: PanelContext) -> bool:
    """A counter by its name: an engine's or our `_total`, any histogram series, someone else's `_total` that the
    dashboard rates elsewhere (else it may be a gauge: semantic-router's `llm_cache_entries_total`); never a gauge
    named like a counter."""
    table = known()
    if (
        not name.endswith(COUNTER_SUFFIXES)
        or {name, canonical(name)[0]} & table.gauges
        or name.startswith(table.state_counters)
    ):
        return False
    return _source(name, panel) is not None or name.endswith(HISTOGRAM_SUFFIXES) or name in panel.rated


def _call_findings(node, tree, panel: PanelContext) -> list[tuple[str, str]]:
    """The rules on one function call: quantile-without-le, rate-over-interval, rate-of-gauge, delta() of a
    counter, sum-rate-as-latency."""
    name = node.func.name
    if name == "histogram_quantile" and len(node.args) > 1 and _drops_le(node.args[1]):
        return [
            (
                "quantile-without-le",
                "histogram_quantile over buckets aggregated without `le`: sum by (le) (rate(x_bucket[...]))",
            )
        ]
    if name not in RATE_FUNCTIONS or not node.args or _kind(node.args[0]) != "MatrixSelector":
        return []
    matrix = node.args[0]
    found = []
    if matrix.range == INTERVAL_SENTINEL:
        found.append(
            (
                "rate-over-interval",
                f"{name}(...[$__interval]) has fewer than two samples when the "
                "step is short: no data or jumps; use [$__rate_interval]",
            )
        )
    selector = matrix.vector_selector.name or ""
    gauge = known().dcgm_units.get(selector) or ("ratio" if canonical(selector)[0] in known().ratio_gauges else None)
    if name in COUNTING_FUNCTIONS and gauge:
        found.append(
            (
                "rate-of-gauge",
                f"{selector} is a gauge ({gauge}): {name}() of it is its slope, not a "
                "throughput; plot it as it is, or avg_over_time() it",
            )
        )
    if name in ("delta", "deriv") and _is_counter(selector, panel):
        found.append(
            (
                "counter-without-rate",
                f"{name}() of the counter {selector}: a restart reads as a drop below zero; use increase() (or rate())",
            )
        )
    has_division = any(_kind(n) == "BinaryExpr" and str(n.op) == "/" for n, _, _ in _walk(tree))
    shown_as_time = panel.unit in TIME_UNITS or LATENCY_WORDS.search(panel.title)
    if (
        name in ("rate", "irate")
        and selector.endswith("_sum")
        and _time_scale(selector)
        and shown_as_time
        and not has_division
    ):
        found.append(
            (
                "sum-rate-as-latency",
                f"{name}({selector}) alone is seconds per second, not a latency: "
                "divide by the rate of _count, or use quantiles",
            )
        )
    return found


def _averaged(node):
    """The nodes whose values an aggregation adds up: not those below a `bool` comparison, whose 0s and 1s it
    counts (`avg(x_sum / x_count > bool 1)` is the share of slow series, no average of ratios)."""
    stack = [node]
    while stack:
        node = stack.pop()
        if _kind(node) == "BinaryExpr" and node.modifier is not None and node.modifier.return_bool:
            continue
        yield node
        stack.extend(_children(node))


def _average_of_ratios(node) -> list[tuple[str, str]]:
    """average-of-ratios for an avg() of ratios or ratio gauges, or a sum() of per-series means."""
    inner = list(_averaged(node.expr))
    # one series over another; over a number (`/ 100`) is scaling, not a ratio
    divisions = [
        n for n in inner if _kind(n) == "BinaryExpr" and str(n.op) == "/" and _selectors(n.lhs) and _selectors(n.rhs)
    ]
    if str(node.op) == "sum":
        means = [
            d
            for d in divisions
            if any(s.name.endswith("_sum") for s in _selectors(d.lhs))
            and any(s.name.endswith("_count") for s in _selectors(d.rhs))
        ]
        return (
            [
                (
                    "average-of-ratios",
                    "sum() of per-series means (_sum / _count) adds averages up: neither a total "
                    "nor a mean; divide sums instead, sum(rate(x_sum)) / sum(rate(x_count))",
                )
            ]
            if means
            else []
        )
    gauge = any(_kind(n) == "VectorSelector" and canonical(n.name or "")[0] in known().ratio_gauges for n in inner)
    if divisions or gauge:
        return [
            (
                "average-of-ratios",
                "avg() of ratios weighs a quiet engine like a busy one: divide sums "
                "instead, sum(rate(a)) / sum(rate(b))",
            )
        ]
    return []


def _time_scale(name: str) -> float | None:
    """The unit in seconds a name carries (`_milliseconds` 1e-3, `_seconds` 1), None when it says none."""
    base = _base(name)
    for suffix, scale in NAME_SCALES:
        if base.endswith(suffix):
            return scale
    return None


def _latency_scale(tree) -> float | None:
    """The time unit of a latency the query computes (a quantile or a mean from a histogram), else None."""
    top = _unparen(tree)
    while _kind(top) == "AggregateExpr" or (
        _kind(top) == "Call" and top.func.name in ("clamp_min", "clamp_max", "label_replace", "sort", "sort_desc")
    ):
        top = _unparen(top.expr if _kind(top) == "AggregateExpr" else top.args[0])
    if _kind(top) == "Call" and top.func.name == "histogram_quantile" and len(top.args) > 1:
        scales = {_time_scale(s.name) for s in _selectors(top.args[1]) if s.name.endswith("_bucket")}
    elif _kind(top) == "BinaryExpr" and str(top.op) == "/":
        sums = {_time_scale(s.name) for s in _selectors(top.lhs) if s.name.endswith("_sum")}
        counts = {s.name for s in _selectors(top.rhs) if s.name.endswith("_count")}
        scales = sums if counts else set()
    else:
        return None
    return scales.pop() if len(scales) == 1 else None


def _unit_findings(tree, panel: PanelContext) -> list[tuple[str, str]]:
    """unit-mismatch: a latency in a time unit of another scale, steps per second as tokens, a DCGM field
    in a unit of another scale; none once the query scales by a number."""
    if _numeric_scaling(tree):
        return []
    found = _dcgm_unit_findings(tree, panel)
    shown = TIME_UNITS.get(panel.unit)
    natural = _latency_scale(tree)
    if shown and natural and shown != natural:
        found.append(
            (
                "unit-mismatch",
                f"the query gives {_unit_name(natural)} but the panel unit is "
                f"{panel.unit!r}: set the unit to {_unit_name(natural)!r} or scale the query",
            )
        )
    top = _below_aggregations(tree)
    if _kind(top) == "Call" and top.func.name in ("rate", "irate") and _kind(top.args[0]) == "MatrixSelector":
        name = top.args[0].vector_selector.name or ""
        says_tokens = "tok" in panel.unit.lower() or "token" in panel.title.lower()
        if name.endswith("_count") and "token" in name and says_tokens and _time_scale(name) is None:
            found.append(
                (
                    "unit-mismatch",
                    f"rate({name}) counts observations (engine steps or requests) per "
                    "second, not tokens: tokens per second is the rate of _sum",
                )
            )
    return found


def _dcgm_unit_findings(tree, panel: PanelContext) -> list[tuple[str, str]]:
    """A DCGM field shown as it is (aggregated at most) in a unit of another scale: MiB as bytes, MHz as Hz, a
    0-1 ratio as percent."""
    top = _below_aggregations(tree)
    if _kind(top) != "VectorSelector" or not top.name:
        return []
    natural = known().dcgm_units.get(top.name)
    if natural is None:
        return []
    wrong, right = WRONG_UNITS.get(natural, (set(), ""))
    if panel.unit in wrong:
        return [("unit-mismatch", f"{top.name} is in {natural} but the panel unit is {panel.unit!r}: {right}")]
    return []


def _missing_as_good(tree, panel: PanelContext) -> list[tuple[str, str]]:
    """`... or vector(0)` on errors or latency (`vector(1)` on successes): when the series are gone (engine down,
    scrape broken) the panel reads the good value instead of No data."""
    top = _unparen(tree)
    if _kind(top) != "BinaryExpr" or str(top.op) != "or":
        return []
    rhs = _unparen(top.rhs)
    if _kind(rhs) != "Call" or rhs.func.name != "vector" or _kind(_unparen(rhs.args[0])) != "NumberLiteral":
        return []
    # Prometheus writes `up` for every target it scrapes, and ALERTS only while an alert is pending or firing:
    # `count(up == 0)` and `count(ALERTS{...})` are empty when nothing is down or firing, not missing
    if all(s.name in ("up", "ALERTS") for s in _selectors(top.lhs)):
        return []
    value = _unparen(rhs.args[0]).val
    good = (value == 0 and BAD_THINGS.search(panel.title)) or (
        value in (1, 100) and GOOD_THINGS.search(panel.title) and not BAD_THINGS.search(panel.title)
    )
    if not good and not _coloured_good(value, panel.steps):
        return []
    return [
        (
            "missing-as-good",
            f"`or vector({value:g})` reads {value:g} when the series are missing (engine down, "
            "scrape broken): missing data shows as the good value; drop it, or fall back only "
            "while the source is scraped: `or 0 * sum(rate(<all outcomes>[5m]))`",
        )
    ]


def _coloured_good(value: float, steps) -> bool:
    """Whether the panel's own thresholds paint `value` green while painting some other value another colour: a
    health panel (a stat of GPUs stuck, 0 green, 1 red) whatever its title says."""
    colours = [colour.lower() for _, colour in steps]
    if not any("green" in c for c in colours) or all("green" in c for c in colours):
        return False
    shown = next(
        (
            c
            for (bound, c) in reversed(list(zip([b for b, _ in steps], colours, strict=True)))
            if bound is None or bound <= value
        ),
        "",
    )
    return "green" in shown


def le_text(text: str) -> str | None:
    """How prometheus_client (vLLM, SGLang) writes the bucket bound `text` in `le` (floatToGoString); None when
    `text` is no number."""
    try:
        value = float(text)
    except ValueError:
        return None
    if value == float("inf"):
        return "+Inf"
    text = repr(value)
    dot = text.find(".")
    if value > 0 and dot > 6:
        mantissa = f"{text[0]}.{text[1:dot]}{text[dot + 1 :]}".rstrip("0.")
        return f"{mantissa}e+0{dot - 1}"
    return text


def _le_findings(nodes) -> list[tuple[str, str]]:
    """`le="2"` on a vLLM or SGLang bucket: prometheus_client writes le="2.0", so the selector matches nothing."""
    found = []
    for node, _, _ in nodes:
        if _kind(node) != "VectorSelector" or canonical(node.name or "")[1] not in PYTHON_SOURCES:
            continue
        for m in node.matchers.matchers:
            if m.name != "le" or str(m.op) not in ("=", "MatchOp.Equal") or "$" in m.value:
                continue
            written = le_text(m.value)
            if written is not None and written != m.value:
                found.append(
                    ("le-format", f'{node.name}{{le="{m.value}"}} matches no series: the engine writes le="{written}"')
                )
    return found


def _unit_name(scale: float) -> str:
    return {1e-9: "ns", 1e-6: "µs", 1e-3: "ms", 1.0: "s"}.get(scale, "s")
