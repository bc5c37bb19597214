"""Read an SLO spec file into a typed `Spec`, collecting every problem with its line and field.

The format (version 1) may grow but not break; unknown keys are errors, so a
typo never silently drops a setting.
"""

from __future__ import annotations

import difflib
import re
from fractions import Fraction

from inferwatch.durations import format_duration, parse_duration
from inferwatch.errors import Problem, SpecError
from inferwatch.slo._buckets import threshold_problem
from inferwatch.slo._model import EngineRef, LatencySLI, Matcher, Objective, RatioSLI, Spec, Tier
from inferwatch.slo._selector import parse_selector
from inferwatch.slo._tables import bucket_tables, builtin_slis, default_tiers
from inferwatch.slo._values import label_name_problem, matcher_problem, show, text_problem, value_problem
from inferwatch.yamlio import Positions, Problems, load_document

__all__ = ["load_spec", "parse_spec", "SPEC_KEYS", "OBJECTIVE_KEYS"]

SPEC_KEYS = (
    "version",
    "service",
    "description",
    "window",
    "selector",
    "engines",
    "group_by",
    "source",
    "labels",
    "annotations",
    "runbook_url",
    "alerting",
    "objectives",
)
OBJECTIVE_KEYS = (
    "name",
    "sli",
    "description",
    "threshold",
    "target",
    "metric",
    "selector",
    "total",
    "good",
    "bad",
    "length_is_bad",
    "labels",
    "annotations",
    "runbook_url",
)
ALERTING_KEYS = ("min_bad_events", "missing_data_for")
MIN_WINDOW, MAX_WINDOW = parse_duration("7d"), parse_duration("90d")
# missing data waits at least one evaluation and ends well inside the hour a vanished series is still named
MIN_MISSING_FOR, MAX_MISSING_FOR = parse_duration("1m"), parse_duration("30m")
MAX_MIN_BAD_EVENTS = 1_000_000
MAX_TARGET = Fraction(999999, 1000000)  # a smaller budget than one bad request in a million cannot be measured
MAX_NAME = 63  # names become file, rule-group and Kubernetes object names
SOURCES = ("engine", "frontdoor")
CUSTOM_SLIS = ("latency", "ratio")
# Labels that would make one SLO per request or per process: refused in group_by.
UNBOUNDED_LABELS = {"request_id", "trace_id", "span_id", "id", "pid", "le", "uuid", "session_id", "user"}
# Labels of one scrape target: an SLO per replica churns with every restart and says nothing about users.
REPLICA_LABELS = {"instance", "target"}
RESERVED_LABELS = {"service", "slo", "tier", "severity", "long_window", "short_window", "alertname"}
PROMQL_NUMBERS = {"inf", "nan"}  # lexed as numbers in `by (...)`, so never a grouping label
_NAME = re.compile(r"[a-z0-9]([a-z0-9_.-]*[a-z0-9])?\Z")
_TEMPLATE = re.compile(r"\{\{\s*(.*?)\s*\}\}")
_LABEL_TEMPLATE = re.compile(r"\$labels\.[a-zA-Z_][a-zA-Z0-9_]*\Z")


def load_spec(path) -> Spec:
    """Parse and validate one spec file; SpecError lists every problem."""
    loaded = load_document(path)
    return parse_spec(loaded.data, loaded.file, loaded.positions)


def parse_spec(doc, file: str = "<spec>", positions: Positions | None = None) -> Spec:
    """A loaded spec (plain data, `positions` where load_document found each part) into a Spec."""
    c = Problems(file, positions)
    if not isinstance(doc, dict):
        raise SpecError([Problem(file, None, "", "an SLO spec is a mapping with service, window and objectives")])
    c.unknown_keys(doc, SPEC_KEYS, "")
    version = doc.get("version", 1)
    if version != 1 or isinstance(version, bool):
        c.add(doc, "version", f"unsupported version {show(version)}; this inferwatch reads version 1")
    service = _name(c, doc, "service", "service")
    window = _window(c, doc)
    source = doc.get("source", "engine")
    if not isinstance(source, str) or source not in SOURCES:
        c.add(doc, "source", f"{show(source)} is not a source; use one of {', '.join(SOURCES)}")
        source = "engine"
    selector = _selector_map(c, doc, "selector")
    engines = _engines(c, doc)
    group_by = _group_by(c, doc)
    labels = _string_map(c, doc, "labels")
    _reserved(c, doc, "labels", labels, group_by)
    min_bad, missing_for = _alerting(c, doc)
    _optional_text(c, doc, "description")
    objectives = _objectives(
        c,
        doc,
        source,
        engines,
        dict(_string_map(c, doc, "annotations", multiline=True)),
        _runbook(c, doc, ""),
        group_by,
        selector,
    )
    if c.problems:
        raise SpecError(c.problems)
    return Spec(
        file=file,
        service=service,
        window=window,
        objectives=objectives,
        selector=selector,
        engines=engines,
        group_by=group_by,
        source=source,
        labels=tuple(sorted(labels.items())),
        min_bad_events=min_bad,
        missing_data_for=missing_for,
        tiers=_tiers(window),
    )


def _name(c: Problems, node: dict, key: str, field: str) -> str:
    value = node.get(key)
    if value is None:
        c.add(node, field, "missing; give a short name such as chat")
        return "invalid"
    if not isinstance(value, str) or not _NAME.match(value):
        c.add(node, field, f"{show(value)} is not a name: lower-case letters, digits, '-', '_' and '.'")
        return "invalid"
    if len(value) > MAX_NAME:
        c.add(
            node,
            field,
            f"is {len(value)} characters long; at most {MAX_NAME}, since it becomes part of file, "
            "rule-group and Kubernetes object names",
        )
        return "invalid"
    return value


def _optional_text(c: Problems, node: dict, key: str, field: str | None = None) -> str:
    if key not in node:
        return ""
    problem = text_problem(node[key])
    if problem:
        c.add(node, field or key, problem)
        return ""
    return str(node[key])


def _runbook(c: Problems, node: dict, inherited: str, field: str = "runbook_url") -> str:
    if "runbook_url" not in node:
        return inherited
    url = _optional_text(c, node, "runbook_url", field)
    if url and re.search(r"[\s\x00-\x1f\x7f\ud800-\udfff]", url):
        c.add(node, field, f"{url!r} is not a URL: no spaces or control characters")
        return inherited
    return url


def _reserved(c: Problems, node: dict, field: str, labels: dict[str, str], group_by=()) -> None:
    """Alert labels the compiler sets, or that would overwrite a group's own value."""
    where = node.get("labels")
    for name in sorted(RESERVED_LABELS & set(labels)):
        c.add(where, f"{field}.{name}", "is set by the compiler on every alert; choose another label")
    for name in sorted(set(group_by) & set(labels)):
        c.add(
            where,
            f"{field}.{name}",
            "is a group_by label: each alert carries its group's own value; choose another label",
        )


def _window(c: Problems, doc: dict) -> Fraction:
    raw = doc.get("window", "28d")
    try:
        window = parse_duration(raw, units="d w")
    except ValueError:
        c.add(doc, "window", f"{show(raw)} is not a window such as 28d or 4w")
        return parse_duration("28d")
    if window % 60:
        c.add(doc, "window", f"{raw} is not a whole number of minutes; the rules count events per minute")
        return parse_duration("28d")
    if not MIN_WINDOW <= window <= MAX_WINDOW:
        c.add(
            doc,
            "window",
            f"{raw} is outside 7d to 90d: shorter windows leave too few events for a "
            "budget, longer ones react too slowly; 28d is the usual choice",
        )
    return window


def _string_map(
    c: Problems, node: dict, key: str, multiline: bool = False, field: str | None = None, empty: bool = False
) -> dict[str, str]:
    """label_name: text pairs; text is a string or a whole number, on one line unless `multiline`, and not
    empty unless `empty` (Prometheus drops an alert's labels and annotations whose value is empty)."""
    field = field or key
    value = node.get(key) or {}
    if not isinstance(value, dict):
        c.add(node, field, "must be a mapping of label_name: value")
        return {}
    out = {}
    for name, item in value.items():
        problem = label_name_problem(name) or value_problem(item, multiline, empty)
        if problem:
            c.add(value, f"{field}.{name}", problem)
            continue
        out[name] = str(item)
    return out


def _selector_map(c: Problems, node: dict, key: str, field: str | None = None) -> tuple[Matcher, ...]:
    """A `selector:` mapping: equality matchers added to every series of the SLI; `le` is the threshold's."""
    field = field or key
    pairs = _string_map(c, node, key, field=field, empty=True)  # `model: ""` selects series without a model
    if "le" in pairs:
        c.add(
            node[key],
            f"{field}.le",
            "le is set from the threshold; select buckets with sli: latency and "
            "threshold, or name them in a ratio SLI's good: selector",
        )
        pairs.pop("le")
    return tuple(Matcher(k, "=", v) for k, v in pairs.items())


def _engines(c: Problems, doc: dict) -> tuple[EngineRef, ...]:
    raw = doc.get("engines", ["vllm", "sglang"])
    if not isinstance(raw, list):
        c.add(doc, "engines", "must be a list such as [vllm, sglang] or [vllm@0.10.2]")
        return ()
    engines = []
    for i, item in enumerate(raw):
        if not isinstance(item, str):
            c.add(doc, f"engines[{i}]", f"{show(item)} is not an engine such as vllm or vllm@0.10.2")
            continue
        name, _, version = item.partition("@")
        if name not in bucket_tables():
            c.add(doc, f"engines[{i}]", f"unknown engine {name!r}; known: {', '.join(bucket_tables())}")
        elif version and not re.match(r"\d+(\.\d+)*\Z", version):
            c.add(doc, f"engines[{i}]", f"{version!r} is not a release such as 0.10.2")
        else:
            engines.append(EngineRef(name, version or None))
    return tuple(engines)


def _group_by(c: Problems, doc: dict) -> tuple[str, ...]:
    raw = doc.get("group_by", [])
    if not isinstance(raw, list):
        c.add(doc, "group_by", "must be a list of labels such as [model]")
        return ()
    good, seen = [], set()
    for label in raw:
        problem = label_name_problem(label)
        if problem:
            c.add(doc, "group_by", problem)
        elif label.lower() in PROMQL_NUMBERS:
            c.add(
                doc,
                "group_by",
                f"{label!r} reads as a number in PromQL's by (...); rename the label at scrape time to group by it",
            )
        elif label in UNBOUNDED_LABELS:
            c.add(
                doc,
                "group_by",
                f"{label!r} has a value per request or process: one SLO each would be "
                "unbounded; group by model, engine or namespace instead",
            )
        elif label in REPLICA_LABELS:
            c.add(
                doc,
                "group_by",
                f"{label!r} names one scrape target: an SLO per replica churns with every "
                "restart and is not what users feel; group by model, job or namespace instead",
            )
        elif label in ("service", "slo"):
            c.add(doc, "group_by", f"{label!r} is set by the compiler itself")
        elif label in seen:
            c.add(doc, "group_by", f"{label!r} is listed twice")
        else:
            good.append(label)
        if isinstance(label, str):
            seen.add(label)
    return tuple(good)


def _alerting(c: Problems, doc: dict) -> tuple[int, Fraction]:
    node = doc.get("alerting") or {}
    if not isinstance(node, dict):
        c.add(doc, "alerting", "must be a mapping")
        return 1, Fraction(120)
    c.unknown_keys(node, ALERTING_KEYS, "alerting.")
    min_bad = node.get("min_bad_events", 1)
    if not isinstance(min_bad, int) or isinstance(min_bad, bool) or not 1 <= min_bad <= MAX_MIN_BAD_EVENTS:
        c.add(node, "alerting.min_bad_events", f"{show(min_bad)} must be a whole number from 1 to {MAX_MIN_BAD_EVENTS}")
        min_bad = 1
    raw = node.get("missing_data_for", "2m")
    try:
        missing_for = parse_duration(raw, units="s m h")
    except ValueError:
        c.add(node, "alerting.missing_data_for", f"{show(raw)} is not a duration such as 2m or 90s")
        return min_bad, Fraction(120)
    if missing_for.denominator != 1 or not MIN_MISSING_FOR <= missing_for <= MAX_MISSING_FOR:
        c.add(
            node,
            "alerting.missing_data_for",
            f"{raw} must be whole seconds from 1m to 30m: the rules are "
            "evaluated every minute, and a vanished series is named for an hour",
        )
        missing_for = Fraction(120)
    return min_bad, missing_for


def _tiers(window: Fraction) -> tuple[Tier, ...]:
    return tuple(t for t in default_tiers() if t.long < window)


def _target(c: Problems, node: dict, field: str) -> Fraction:
    raw = node.get("target")
    if raw is None:
        c.add(node, field, "missing; give the share of good events, e.g. 99% or 0.99")
        return Fraction(99, 100)
    text = str(raw).strip()
    try:
        if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
            raise ValueError
        value = Fraction(text[:-1].strip()) / 100 if text.endswith("%") else Fraction(text)
    except ValueError:
        c.add(node, field, f"{show(raw)} is not a target such as 99.5% or 0.995")
        return Fraction(99, 100)
    if not text.endswith("%") and value > 1:
        c.add(node, field, f"{raw!r} is over 1; write percentages with a % sign, e.g. {raw}%")
    elif value > 1:
        c.add(node, field, f"{raw} is over 100%; a target is the share of good events, e.g. 99.9%")
    elif value == 1:
        c.add(
            node,
            field,
            f"{raw} leaves no error budget: every alert would fire on the first bad request; "
            "targets are below 100%, e.g. 99.9%",
        )
    elif value <= 0:
        c.add(node, field, f"{raw} must be above 0%")
    elif value > MAX_TARGET:
        c.add(
            node,
            field,
            f"{raw} leaves less than one bad request in a million as the budget, too few to measure; at most 99.9999%",
        )
    else:
        return value
    return Fraction(99, 100)


def _threshold(c: Problems, node: dict, field: str) -> Fraction:
    raw = node.get("threshold")
    if raw is None:
        c.add(node, field, "missing; a latency SLI needs a threshold such as 1s or 100ms")
        return Fraction(1)
    try:
        threshold = parse_duration(raw, units="ms s m")
    except ValueError:
        c.add(node, field, f"{show(raw)} is not a threshold such as 1s, 500ms or 0.1 (seconds)")
        return Fraction(1)
    if (threshold * 1000).denominator != 1:
        c.add(node, field, f"{raw} is finer than a millisecond; thresholds are whole milliseconds, e.g. 1ms or 0.25s")
        return Fraction(1)
    return threshold


def _selector(c: Problems, node: dict, key: str, field: str):
    raw = node.get(key)
    if not isinstance(raw, str):
        c.add(node, field, 'must be a selector such as llm_requests_finished_total{finished_reason="stop"}')
        return None
    try:
        selector = parse_selector(raw)
    except ValueError as err:
        c.add(node, field, str(err))
        return None
    return selector if _matchers_ok(c, node, field, selector, allow_le=True) else None


def _matchers_ok(c: Problems, node: dict, field: str, selector, allow_le: bool) -> bool:
    for m in selector.matchers:
        problem = matcher_problem(m, allow_le)
        if problem:
            c.add(node, field, f"{selector.render()}: {problem}")
            return False
    return True


def _annotations(c: Problems, node: dict, field: str, inherited: dict[str, str]) -> dict[str, str]:
    merged = dict(inherited)
    merged.update(_string_map(c, node, "annotations", multiline=True, field=f"{field}.annotations"))
    for key, text in merged.items():
        for template in _TEMPLATE.findall(text):
            if not _LABEL_TEMPLATE.match(template):
                c.add(
                    node,
                    f"{field}.annotations.{key}",
                    f"{{{{ {template} }}}}: only {{{{ $labels.NAME }}}} "
                    "templates are allowed, so the generated tests can check the text",
                )
        if "{{" in _TEMPLATE.sub("", text):
            c.add(
                node,
                f"{field}.annotations.{key}",
                "{{ without a closing }}: only {{ $labels.NAME }} templates are allowed",
            )
    return merged


def _objectives(
    c: Problems, doc: dict, source: str, engines, annotations, runbook_url, group_by, selector
) -> tuple[Objective, ...]:
    raw = doc.get("objectives")
    if not isinstance(raw, list) or not raw:
        c.add(doc, "objectives", "missing; list at least one objective with name, sli and target")
        return ()
    objectives, seen = [], set()
    for i, node in enumerate(raw):
        field = f"objectives[{i}]"
        if not isinstance(node, dict):
            c.add(doc, field, "must be a mapping with name, sli and target")
            continue
        c.unknown_keys(node, OBJECTIVE_KEYS, field + ".")
        name = _name(c, node, "name", field + ".name")
        if name in seen:
            c.add(node, field + ".name", f"{name!r} is used twice; objective names are unique per service")
        seen.add(name)
        kind, sli = _sli(c, node, field, source, engines)
        if sli is not None:
            _contradiction(c, node, field, selector, sli, group_by)
        target = _target(c, node, field + ".target")
        labels = _string_map(c, node, "labels", field=field + ".labels")
        _reserved(c, node, field + ".labels", labels, group_by)
        objectives.append(
            Objective(
                name=name,
                kind=kind,
                sli=sli,
                target=target,
                labels=tuple(sorted(labels.items())),
                annotations=tuple(sorted(_annotations(c, node, field, annotations).items())),
                runbook_url=_runbook(c, node, runbook_url, field + ".runbook_url"),
                description=_optional_text(c, node, "description", field + ".description"),
            )
        )
    return tuple(objectives)


def _contradiction(c: Problems, node: dict, field: str, selector: tuple[Matcher, ...], sli, group_by) -> None:
    """Two equality matchers on one label (the spec's selector, the objective's, the SLI's) match nothing; a
    ratio whose good or bad events fix a group_by label to another value than its total never meets it."""
    parts = (
        [sli.matchers]
        if isinstance(sli, LatencySLI)
        else [s.matchers for s in (sli.total, sli.good, *sli.bad) if s is not None]
    )
    groups: dict[str, str] = {}
    for matchers in parts:
        values: dict[str, str] = {}
        for m in (*selector, *matchers):
            if m.op == "=" and values.setdefault(m.label, m.value) != m.value:
                c.add(
                    node,
                    field,
                    f"{m.label}={values[m.label]!r} and {m.label}={m.value!r} together match no "
                    "series; keep one of them",
                )
                return
        for label in set(group_by) & set(values):
            if groups.setdefault(label, values[label]) != values[label]:
                c.add(
                    node,
                    field,
                    f"group_by {label}: the total's {label}={groups[label]!r} and the other "
                    f"selector's {label}={values[label]!r} are never in one group",
                )
                return


def _sli(c: Problems, node: dict, field: str, source: str, engines):
    builtins = builtin_slis()[source]
    kind = node.get("sli")
    known = tuple(builtins) + CUSTOM_SLIS
    elsewhere = [
        other for other, slis in builtin_slis().items() if other != source and isinstance(kind, str) and kind in slis
    ]
    if kind not in known and elsewhere:
        c.add(
            node,
            field + ".sli",
            f"the {kind} SLI is measured only with source: {' or '.join(elsewhere)} "
            f"(this spec's source is {source}); with source {source} use one of "
            f"{', '.join(known)}",
        )
        return "invalid", None
    if not isinstance(kind, str) or kind not in known:
        close = difflib.get_close_matches(str(kind), known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        c.add(
            node,
            field + ".sli",
            f"{'missing' if kind is None else show(kind) + ' is not an SLI'}: use one of {', '.join(known)}{hint}",
        )
        return "invalid", None
    extra = _selector_map(c, node, "selector", field + ".selector")
    if kind in builtins:
        definition = _builtin_definition(c, node, field, kind, builtins[kind])
        for key in ("metric", "total", "good", "bad"):
            if key in node:
                c.add(
                    node,
                    f"{field}.{key}",
                    f"the built-in {kind} SLI sets its own metrics; use sli: latency or sli: ratio for your own",
                )
    elif "length_is_bad" in node:
        c.add(
            node,
            f"{field}.length_is_bad",
            f"only the built-in answered SLI counts length stops; a {kind} SLI "
            "says what is bad with its own good or bad selectors",
        )
    else:
        definition = (
            {"latency": node.get("metric")}
            if kind == "latency"
            else {"ratio": {"total": node.get("total"), "good": node.get("good"), "bad": node.get("bad")}}
        )
    if "latency" in definition:
        return kind, _latency_sli(c, node, field, definition, extra, source, engines)
    return kind, _ratio_sli(c, node, field, definition, extra, kind in builtins)


def _builtin_definition(c: Problems, node: dict, field: str, kind: str, builtin: dict) -> dict:
    """A built-in SLI's definition, with its `length_is_bad` variant where the objective opts in: a stop at the
    length limit is the client's budget (answered, by default), bad only where a team says so."""
    definition = {k: v for k, v in builtin.items() if k != "length_is_bad"}
    opt_in = node.get("length_is_bad", False)
    if not isinstance(opt_in, bool):
        c.add(node, f"{field}.length_is_bad", f"{show(opt_in)} must be true or false")
    elif opt_in and "length_is_bad" not in builtin:
        c.add(
            node,
            f"{field}.length_is_bad",
            f"the {kind} SLI has no length stops to count: only sli: answered takes length_is_bad",
        )
    elif opt_in:
        variant = builtin["length_is_bad"]
        definition["ratio"] = {**definition["ratio"], **variant.get("ratio", {})}
        definition["means"] = variant.get("means", definition.get("means"))
    return definition


def _latency_sli(c, node, field, definition, extra, source, engines) -> LatencySLI:
    try:
        if not isinstance(definition["latency"], str):
            raise ValueError
        selector = parse_selector(definition["latency"])
    except ValueError as err:
        detail = f"{err}; " if str(err) else ""
        c.add(
            node,
            field + ".metric",
            f"{detail}a latency SLI needs metric: a histogram's name, optionally with "
            'matchers, e.g. llm_request_queue_time_seconds{role="decode"}',
        )
        selector = parse_selector("invalid")
    if not _matchers_ok(c, node, field + ".metric", selector, allow_le=False):
        selector = parse_selector("invalid")
    threshold = _threshold(c, node, field + ".threshold")
    # the front door's own bucket table (slo/buckets.yaml `sources:`) stands in for the engines'
    message = threshold_problem(
        engines if source == "engine" else (EngineRef(source, None),), selector.metric, threshold
    )
    if message:
        c.add(node, field + ".threshold", message)
    exclude = tuple(Matcher(k, "!=", v) for k, v in (definition.get("exclude") or {}).items())
    means = definition.get("means", f"{selector.metric} observations within {{threshold}}")
    return LatencySLI(
        selector.metric,
        threshold,
        selector.matchers + extra + exclude,
        means.replace("{threshold}", format_duration(threshold)),
    )


def _ratio_sli(c, node, field, definition, extra, builtin: bool) -> RatioSLI | None:
    ratio = definition["ratio"]
    where = (lambda key: f"{field}.sli") if builtin else (lambda key: f"{field}.{key}")
    total = _selector(c, ratio if builtin else node, "total", where("total"))
    good = bad = None
    if ratio.get("good") is not None:
        good = _selector(c, ratio if builtin else node, "good", where("good"))
    raw_bad = ratio.get("bad")
    if raw_bad is not None:
        items = raw_bad if isinstance(raw_bad, list) else [raw_bad]
        bad = tuple(_selector(c, _stand_in(c, {"bad": item}, node), "bad", where("bad")) for item in items)
    if (good is None) == (bad is None):
        c.add(node, field, "a ratio SLI needs total and exactly one of good or bad")
        return None
    # built-in only: events that are neither good nor bad (SGLang counts a client's disconnect as an abort)
    exclude = (
        tuple(
            _selector(c, _stand_in(c, {"exclude": item}, node), "exclude", where("exclude"))
            for item in ratio.get("exclude") or ()
        )
        if builtin
        else ()
    )
    if total is None or (bad and None in bad) or None in exclude:
        return None
    add = lambda s: s.with_matchers(*extra)  # noqa: E731 - the objective's selector joins every term
    return RatioSLI(
        total=add(total),
        good=add(good) if good else None,
        bad=tuple(add(b) for b in bad or ()),
        means=definition.get("means", f"events of {total.metric} that were good"),
        exclude=tuple(add(e) for e in exclude),
    )


def _stand_in(c: Problems, made: dict, node: dict) -> dict:
    """A mapping made up around one item, reported at the line of the objective it belongs to."""
    c.positions.same_place(made, node)
    return made


def builtin_sli(kind: str, source: str = "engine") -> RatioSLI:
    """A built-in ratio SLI (answered, goodput) as slis.yaml defines it for `source`: the selectors other parts
    (the front door's goodput judge, canary, the dashboards) count the same events by."""
    sli = (
        parse_spec(
            {
                "version": 1,
                "service": "builtin",
                "source": source,
                "objectives": [{"name": kind, "sli": kind, "target": "99%"}],
            },
            f"<built-in {kind} SLI>",
        )
        .objectives[0]
        .sli
    )
    if not isinstance(sli, RatioSLI):
        raise ValueError(f"{kind} is a latency SLI: its threshold is the spec's")
    return sli
