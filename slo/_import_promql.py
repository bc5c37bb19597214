"""Read the event counts out of Sloth and OpenSLO PromQL: which counters are the total, the bad and the good events.

Queries are parsed (promql-parser), not matched with regexes, so spacing, `increase` for `rate`, `sum by (...)`,
`or vector(0)`, several added error counters and `total - good` forms are all recognized; anything else is
refused with the reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

import promql_parser

from inferwatch.promql import escape_label_value

__all__ = ["QueryError", "events_sli", "good_sli", "bad_sli", "reads_as_success", "WINDOW_TEMPLATE"]

WINDOW_TEMPLATE = re.compile(r"\{\{\s*\.window\s*\}\}")
_ANY_TEMPLATE = re.compile(r"\{\{.*?\}\}", re.S)
_OPS = {"Equal": "=", "NotEqual": "!=", "Re": "=~", "NotRe": "!~"}
_SUM_FORM = "sum(rate(counter[{{.window}}]))"


class QueryError(ValueError):
    """A query is not a sum of counters' rates; the message says what it is instead."""


@dataclass(frozen=True)
class Counter:
    """One `sum(rate(name{matchers}[w]))` term."""

    name: str
    matchers: tuple[tuple[str, str, str], ...]  # (label, op, value) in the order written
    by: tuple[str, ...] = ()

    def key(self) -> tuple:
        return self.name, frozenset(self.matchers)

    def selector(self, drop: str | None = None) -> str:
        parts = [f'{label}{op}"{escape_label_value(value)}"' for label, op, value in self.matchers if label != drop]
        return self.name + (f"{{{', '.join(parts)}}}" if parts else "")

    def le(self) -> str | None:
        return next((v for label, op, v in self.matchers if label == "le" and op == "="), None)

    def histogram_total(self) -> tuple | None:
        """`x_count{m}` and `x_bucket{m, le="+Inf"}` both count every observation of histogram x: its key."""
        if self.name.endswith("_count"):
            return self.name[: -len("_count")], frozenset(self.matchers)
        if self.name.endswith("_bucket") and self.le() in ("+Inf", "Inf", "+inf", "inf"):
            return self.name[: -len("_bucket")], frozenset(m for m in self.matchers if m[0] != "le")
        return None


def _parse(query: str) -> object:
    text = WINDOW_TEMPLATE.sub("5m", str(query))
    other = _ANY_TEMPLATE.search(text)
    if other:
        raise QueryError(f"uses the template {other.group(0)}; only {{{{.window}}}} can be filled in")
    if not text.strip():
        raise QueryError("is empty")
    try:
        return promql_parser.parse(text)
    except (ValueError, TypeError) as err:
        reason = str(err).strip().splitlines()[0] if str(err).strip() else "syntax error"
        raise QueryError(f"is not PromQL that Prometheus accepts ({reason})") from None


def _unwrap(expr):
    while isinstance(expr, promql_parser.ParenExpr):
        expr = expr.expr
    return expr


def _is_number(expr, value: float) -> bool:
    expr = _unwrap(expr)
    return isinstance(expr, promql_parser.NumberLiteral) and expr.val == value


def _is_number_vector(expr, value: float) -> bool:
    expr = _unwrap(expr)
    return (
        isinstance(expr, promql_parser.Call)
        and expr.func.name == "vector"
        and len(expr.args) == 1
        and _is_number(expr.args[0], value)
    )


def _is_zero_vector(expr) -> bool:
    return _is_number_vector(expr, 0)


def _terms(expr, sign: int, bare_ok: bool, out: list) -> None:
    """Flatten `a + b - c` into [(+1, a), (+1, b), (-1, c)] of counters."""
    expr = _unwrap(expr)
    if isinstance(expr, promql_parser.BinaryExpr):
        op = str(expr.op)
        if op == "or" and _is_zero_vector(expr.rhs):
            return _terms(expr.lhs, sign, bare_ok, out)  # `or vector(0)`: no error series means zero errors
        if op in ("+", "-") and (expr.modifier is None or not expr.modifier.return_bool):
            if _is_number(expr.rhs, 0):  # `+ 0`, `- 0`: adds nothing
                return _terms(expr.lhs, sign, bare_ok, out)
            if op == "+" and _is_number(expr.lhs, 0):
                return _terms(expr.rhs, sign, bare_ok, out)
            _terms(expr.lhs, sign, bare_ok, out)
            return _terms(expr.rhs, sign if op == "+" else -sign, bare_ok, out)
        raise QueryError(f"combines series with {op!r}; only + and - of counters are event counts")
    out.append((sign, _counter(expr, bare_ok)))


def _counter(expr, bare_ok: bool) -> Counter:
    by: tuple[str, ...] = ()
    if isinstance(expr, promql_parser.AggregateExpr):
        if str(expr.op) != "sum":
            raise QueryError(f"aggregates with {expr.op}(); only sum() of counters counts events")
        if expr.modifier is not None:
            if "Without" in str(expr.modifier.type):
                raise QueryError("sums `without (...)`; write `sum by (...)` or a plain sum()")
            by = tuple(sorted(expr.modifier.labels))
        expr = _unwrap(expr.expr)
        if not by and not bare_ok and isinstance(expr, promql_parser.VectorSelector):
            raise QueryError("sums raw counter values; use sum(rate(counter[{{.window}}]))")
    elif not bare_ok:
        raise QueryError(f"is {_describe(expr)}, not {_SUM_FORM}")
    if isinstance(expr, promql_parser.Call) and expr.func.name in ("rate", "increase"):
        matrix = _unwrap(expr.args[0]) if expr.args else None
        if not isinstance(matrix, promql_parser.MatrixSelector):
            raise QueryError(f"takes {expr.func.name}() of an expression; only of a counter selector")
        expr = matrix.vector_selector
    elif isinstance(expr, promql_parser.Call):
        raise QueryError(f"uses {expr.func.name}(); only rate() or increase() of counters count events")
    elif not (bare_ok and isinstance(expr, promql_parser.VectorSelector)):
        raise QueryError(f"is {_describe(expr)}, not {_SUM_FORM}")
    return _selector(expr, by)


def _describe(expr) -> str:
    if isinstance(expr, promql_parser.Call):
        return f"a call of {expr.func.name}()"
    if isinstance(expr, promql_parser.AggregateExpr):
        return f"an aggregation with {expr.op}()"
    if isinstance(expr, promql_parser.VectorSelector):
        return f"the bare selector {str(expr).removesuffix('{}')}"
    if isinstance(expr, promql_parser.NumberLiteral):
        return f"the number {expr.val:g}"
    return f"a {type(expr).__name__}"


def _unanchored(regex: str) -> str:
    """Prometheus anchors every regex matcher (`^(?:R)$`), so a leading `^` and a trailing `$` match what they would
    without them: `^5..$` is written `5..`, the form whose values the generated tests can invent (rhobs writes
    `code=~"^5..$"`). Flags (`(?m)`, under which they differ) and an escaped `\\$` are left as written."""
    if "(?" in regex:
        return regex
    if regex.startswith("^") and regex[1:2] not in ("*", "+", "?", "{"):
        regex = regex[1:]
    body = regex[:-1]
    if regex.endswith("$") and (len(body) - len(body.rstrip("\\"))) % 2 == 0:
        regex = body
    return regex


def _selector(vs, by: tuple[str, ...]) -> Counter:
    if vs.offset is not None or vs.at is not None:
        raise QueryError("uses offset or @; an SLI counts the events of now")
    if vs.matchers.or_matchers:
        raise QueryError("uses `or` inside a selector; give one selector per counter")
    matchers, name = [], vs.name
    for m in vs.matchers.matchers:
        op = _OPS[str(m.op).rsplit(".", 1)[-1].split("(")[0]]
        if m.name == "__name__" and op == "=" and not name:
            name = m.value
        else:
            matchers.append((m.name, op, _unanchored(m.value) if op in ("=~", "!~") else m.value))
    if not name:
        raise QueryError("selects no metric by name")
    return Counter(name, tuple(matchers), by)


def _without_nan_guard(expr):
    """`(total > 0) or vector(1)` counts what `total` counts: a guard against 0/0 in Sloth's ratio (a NaN that
    poisons its 30d sums), which our rules need not (no events, no ratio). Only ever taken off a total query."""
    expr = _unwrap(expr)
    if isinstance(expr, promql_parser.BinaryExpr) and str(expr.op) == "or" and _is_number_vector(expr.rhs, 1):
        lhs = _unwrap(expr.lhs)
        if (
            isinstance(lhs, promql_parser.BinaryExpr)
            and str(lhs.op) == ">"
            and _is_number(lhs.rhs, 0)
            and (lhs.modifier is None or not lhs.modifier.return_bool)
        ):
            return lhs.lhs
    return expr


def _counters(query: str, what: str, bare_ok: bool) -> tuple[list[Counter], list[Counter]]:
    """(added counters, subtracted counters) of a query; QueryError names which query is wrong."""
    terms: list = []
    try:
        expr = _parse(query)
        _terms(_without_nan_guard(expr) if what == "total query" else expr, 1, bare_ok, terms)
    except QueryError as err:
        raise QueryError(f"{what} {err}") from None
    return [c for s, c in terms if s > 0], [c for s, c in terms if s < 0]


def _total(query: str, bare_ok: bool) -> Counter:
    plus, minus = _counters(query, "total query", bare_ok)
    if len(plus) != 1 or minus:
        raise QueryError(
            f"total query adds or subtracts {len(plus) + len(minus)} counters; inferwatch's total is one counter"
        )
    return plus[0]


def _same(a: Counter, b: Counter) -> bool:
    return a.key() == b.key() or (a.histogram_total() is not None and a.histogram_total() == b.histogram_total())


def _threshold(le: str) -> str | None:
    try:
        value = Decimal(le)
    except InvalidOperation:
        return None
    if not value.is_finite() or value <= 0 or (value * 1000) % 1:
        return None  # our thresholds are whole milliseconds; a finer bucket stays a ratio
    return f"{value.normalize():f}s"


def _good_or_latency(good: Counter, total: Counter) -> dict:
    """Good events out of total: a latency SLI when good is the histogram's bucket of total, else a ratio."""
    if _same(good, total):
        raise QueryError("good and total count the same events: the SLI would always be 100%")
    base, le = good.name[: -len("_bucket")], good.le()
    if (
        good.name.endswith("_bucket")
        and le
        and base.endswith("_seconds")
        and _threshold(le)
        and total.histogram_total() == (base, frozenset(m for m in good.matchers if m[0] != "le"))
    ):
        return {
            "sli": "latency",
            "metric": good.selector(drop="le").replace(good.name, base, 1),
            "threshold": _threshold(le),
        }
    flipped = _complement(good, total)
    if flipped:
        return {"sli": "ratio", "total": total.selector(), "bad": flipped.selector()}
    return {"sli": "ratio", "total": total.selector(), "good": good.selector()}


_NEGATION = {"!~": "=~", "!=": "="}


def _complement(good: Counter, total: Counter) -> Counter | None:
    """`total{l!~"R"}` as good is exactly `total{l=~"R"}` as bad: the form our alerts and generated tests count."""
    extra = set(good.matchers) - set(total.matchers)
    if good.name != total.name or not set(total.matchers) <= set(good.matchers) or len(extra) != 1:
        return None
    label, op, value = extra.pop()
    if op not in _NEGATION or any(m[0] == label for m in total.matchers):
        return None
    return Counter(total.name, (*total.matchers, (label, _NEGATION[op], value)), total.by)


_TIME_UNITS = ("seconds", "milliseconds", "ms", "microseconds", "us", "nanoseconds", "ns")


def _fast_bucket(counter: Counter) -> bool:
    """A bucket of a histogram of durations at a finite bound above 0: the observations at or under it, the fast
    ones. (A bucket of another histogram may count bad events: `tokens_bucket{le="0"}`, empty answers.)"""
    if not counter.name.endswith("_bucket"):
        return False
    base = counter.name.removesuffix("_bucket")
    try:
        bound = Decimal(counter.le() or "")
    except InvalidOperation:
        return False
    return (
        bound.is_finite()
        and bound > 0
        and (base.rsplit("_", 1)[-1] in _TIME_UNITS or base.endswith(("_duration", "_latency")))
    )


def _no_fast_errors(plus: list[Counter], minus: list[Counter], what: str) -> None:
    """Refuse bad events that count fast requests: a Sloth error query written as the good events' query (a
    latency SLO that would burn its budget exactly while requests are fast), or good minus total (never > 0)."""
    fast = next((c for c in plus if _fast_bucket(c)), None)
    if fast is None:
        return
    base, le = fast.name.removesuffix("_bucket"), fast.le()
    slow = f"{fast.selector(drop='le').replace(fast.name, base + '_count', 1)} - {fast.selector()}"
    histogram = (base, frozenset(m for m in fast.matchers if m[0] != "le"))
    if any(c.histogram_total() == histogram for c in minus):
        raise QueryError(
            f"{what} is {fast.selector()} minus all observations: the fast ones minus all, the "
            f"negative of the slow ones, so it never alerts; the slow ones are {slow}"
        )
    raise QueryError(
        f"{what} counts {fast.selector()}, the observations at or under {le} (the fast ones): good "
        f"events, not errors; the slow ones are {slow}"
    )


# words that name a good outcome, as a label's name (`accurate="true"`), a label's value (`status="success"`) or a
# word of a counter's name (`checks_passed_total`), unless the name also has a word of failure
# (`x_success_failures_total`); and the labels that hold HTTP statuses
_SUCCESS_WORDS = frozenset(
    {"success", "successes", "successful", "succeeded", "ok", "correct", "accurate", "valid", "passed", "healthy"}
)
_FAILURE_WORDS = frozenset({"fail", "failed", "failure", "failures", "error", "errors", "bad"})
_TRUE = frozenset({"true", "1", "yes"})
_STATUS_LABELS = frozenset(
    {
        "code",
        "status",
        "status_code",
        "http_status",
        "http_code",
        "response_code",
        "http_status_code",
        "http_response_status_code",
    }
)
_HTTP_SUCCESS = re.compile(r"2(?:\d\d|\.\.|\d\.|xx|\[0-9\]\[0-9\]|\\d\{2\}|\\d\\d)", re.I)


def _says_success(counter: Counter) -> str | None:
    """What in `counter` names successes, if anything: a matcher (`code=~"2.."`, `status="ok"`, `accurate="true"`)
    or a word of its name (`jobs_succeeded_total`). Negated matchers count the rest, so they say nothing."""
    for label, op, value in counter.matchers:
        if op not in ("=", "=~"):
            continue
        values = [v.strip().lower() for v in value.split("|")] if op == "=~" else [value.lower()]
        word = label.lower().removeprefix("is_")
        if (
            all(v in _SUCCESS_WORDS for v in values)
            or (word in _SUCCESS_WORDS and all(v in _TRUE for v in values))
            or (label.lower() in _STATUS_LABELS and all(_HTTP_SUCCESS.fullmatch(v) for v in values))
        ):
            return f'{label}{op}"{value}"'
    words = set(counter.name.lower().removesuffix("_total").split("_"))
    if words & _SUCCESS_WORDS and not words & _FAILURE_WORDS:
        return f"the name {counter.name}"
    return None


def reads_as_success(query: str, what: str) -> str | None:
    """A note when the bad (error) events of `query` are named as successes: imported as written, since only the
    names say so (roller counts `..._success_total` as errors, AI-Infra `accurate="true"`), but worth a look."""
    try:
        plus, _ = _counters(query, what, bare_ok=True)
    except QueryError:
        return None
    for counter in plus:
        if (said := _says_success(counter)) is not None:
            return (
                f"{what} {counter.selector()} counts what {said} calls successes; imported as the bad events, "
                "as written: if these are the good events, write good: in place of bad: in the spec"
            )
    return None


def _group_by(counters: list[Counter]) -> tuple[str, ...]:
    groupings = {c.by for c in counters}
    if len(groupings) > 1:
        raise QueryError(
            "sums by different labels in its queries: "
            + ", ".join(f"by ({', '.join(g)})" if g else "no grouping" for g in sorted(groupings))
        )
    return groupings.pop()


def events_sli(error_query: str, total_query: str) -> tuple[dict, tuple[str, ...]]:
    """Sloth's events SLI -> (our SLI keys, group_by labels)."""
    total = _total(total_query, bare_ok=False)
    plus, minus = _counters(error_query, "error query", bare_ok=False)
    _no_fast_errors(plus, minus, "error query")
    group_by = _group_by([total, *plus, *minus])
    if not minus:
        if any(_same(c, total) for c in plus):
            raise QueryError(
                "error query counts the total itself: every event would be an error (Sloth refuses "
                "identical error and total queries)"
            )
        bad = [c.selector() for c in plus]
        return {"sli": "ratio", "total": total.selector(), "bad": bad[0] if len(bad) == 1 else bad}, group_by
    if len(plus) == 1 and len(minus) == 1 and _same(plus[0], total):
        return _good_or_latency(minus[0], total), group_by  # errors = total - good
    raise QueryError(
        "error query subtracts counters other than total - good; write it as a sum of "
        "error counters, or as total minus good events"
    )


def bad_sli(bad_query: str, total_query: str, bare_ok: bool) -> tuple[dict, tuple[str, ...]]:
    """OpenSLO's ratioMetric with bad and total."""
    total = _total(total_query, bare_ok)
    plus, minus = _counters(bad_query, "bad query", bare_ok)
    _no_fast_errors(plus, minus, "bad query")
    if minus:
        raise QueryError("bad query subtracts counters; give the bad events as a sum of counters")
    if any(_same(c, total) for c in plus):
        raise QueryError("bad query counts the total itself: every event would be bad")
    bad = [c.selector() for c in plus]
    return (
        {"sli": "ratio", "total": total.selector(), "bad": bad[0] if len(bad) == 1 else bad},
        _group_by([total, *plus]),
    )


def good_sli(good_query: str, total_query: str, bare_ok: bool) -> tuple[dict, tuple[str, ...]]:
    """OpenSLO's ratioMetric with good and total."""
    total = _total(total_query, bare_ok)
    plus, minus = _counters(good_query, "good query", bare_ok)
    if len(plus) != 1 or minus:
        raise QueryError("good query adds or subtracts several counters; inferwatch's good events are one counter")
    return _good_or_latency(plus[0], total), _group_by([total, plus[0]])
