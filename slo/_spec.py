"""Read an SLO spec file into a typed `Spec`, collecting every problem with its line and field.

The format (version 1) may grow but not break; unknown keys are errors, so a
typo never silently drops a setting.
"""

from __future__ import annotations

import difflib
import re
from fractions import Fraction

from inferwatch._yaml import LINE, line_of, load_yaml_file
from inferwatch.durations import format_duration, parse_duration
from inferwatch.errors import Problem, SpecError
from inferwatch.slo._buckets import threshold_problem
from inferwatch.slo._model import EngineRef, LatencySLI, Matcher, Objective, RatioSLI, Spec, Tier
from inferwatch.slo._selector import parse_selector
from inferwatch.slo._tables import bucket_tables, builtin_slis, default_tiers

__all__ = ["load_spec", "parse_spec", "SPEC_KEYS", "OBJECTIVE_KEYS"]

SPEC_KEYS = ("version", "service", "description", "window", "selector", "engines", "group_by", "source", "labels",
             "annotations", "runbook_url", "alerting", "objectives")
OBJECTIVE_KEYS = ("name", "sli", "description", "threshold", "target", "metric", "selector", "total", "good", "bad",
                  "labels", "annotations", "runbook_url")
ALERTING_KEYS = ("min_bad_events", "missing_data_for")
MIN_WINDOW, MAX_WINDOW = parse_duration("7d"), parse_duration("90d")
SOURCES = ("engine", "frontdoor")
CUSTOM_SLIS = ("latency", "ratio")
# Labels that would make one SLO per request or per process: refused in group_by.
UNBOUNDED_LABELS = {"request_id", "trace_id", "span_id", "id", "pid", "le", "uuid", "session_id", "user"}
RESERVED_LABELS = {"service", "slo", "tier", "severity", "long_window", "short_window"}
_NAME = re.compile(r"[a-z0-9]([a-z0-9_.-]*[a-z0-9])?\Z")
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
_TEMPLATE = re.compile(r"\{\{\s*(.*?)\s*\}\}")
_LABEL_TEMPLATE = re.compile(r"\$labels\.[a-zA-Z_][a-zA-Z0-9_]*\Z")


class _Collector:
    """Gathers problems for one file; `check` records one and returns False."""

    def __init__(self, file: str):
        self.file = file
        self.problems: list[Problem] = []

    def add(self, node, field: str, message: str) -> None:
        """Record a problem at the line of the field's own key when the YAML has it."""
        key = re.sub(r"\[\d+\]$", "", field.rsplit(".", 1)[-1])
        self.problems.append(Problem(self.file, line_of(node, key), field, message))

    def unknown_keys(self, node: dict, allowed, where: str) -> None:
        for key in node:
            if key == LINE or key in allowed:
                continue
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(allowed)}"
            self.add(node, f"{where}{key}", f"unknown key{hint}")


def load_spec(path) -> Spec:
    """Parse and validate one spec file; SpecError lists every problem."""
    return parse_spec(load_yaml_file(path), str(path))


def parse_spec(doc, file: str = "<spec>") -> Spec:
    c = _Collector(file)
    if not isinstance(doc, dict):
        raise SpecError([Problem(file, None, "", "an SLO spec is a mapping with service, window and objectives")])
    c.unknown_keys(doc, SPEC_KEYS, "")
    if doc.get("version", 1) != 1:
        c.add(doc, "version", f"unsupported version {doc.get('version')!r}; this inferwatch reads version 1")
    service = _name(c, doc, "service", "service")
    window = _window(c, doc)
    source = doc.get("source", "engine")
    if source not in SOURCES:
        c.add(doc, "source", f"{source!r} is not a source; use one of {', '.join(SOURCES)}")
        source = "engine"
    selector = tuple(Matcher(k, "=", v) for k, v in _string_map(c, doc, "selector").items())
    engines = _engines(c, doc)
    group_by = _group_by(c, doc)
    labels = _string_map(c, doc, "labels")
    _reserved(c, doc, "labels", labels)
    min_bad, missing_for = _alerting(c, doc)
    objectives = _objectives(c, doc, source, engines, dict(_string_map(c, doc, "annotations")),
                             str(doc.get("runbook_url", "")))
    if c.problems:
        raise SpecError(c.problems)
    return Spec(file=file, service=service, window=window, objectives=objectives, selector=selector,
                engines=engines, group_by=group_by, source=source, labels=tuple(sorted(labels.items())),
                min_bad_events=min_bad, missing_data_for=missing_for, tiers=_tiers(window))


def _name(c: _Collector, node: dict, key: str, field: str) -> str:
    value = node.get(key)
    if value is None:
        c.add(node, field, "missing; give a short name such as chat")
        return "invalid"
    if not isinstance(value, str) or not _NAME.match(value):
        c.add(node, field, f"{value!r} is not a name: lower-case letters, digits, '-', '_' and '.'")
        return "invalid"
    return value


def _reserved(c: _Collector, node: dict, field: str, labels: dict[str, str]) -> None:
    for name in RESERVED_LABELS & set(labels):
        c.add(node, f"{field}.{name}", "is set by the compiler on every alert; choose another label")


def _window(c: _Collector, doc: dict) -> Fraction:
    raw = doc.get("window", "28d")
    try:
        window = parse_duration(raw, units="d w")
    except ValueError:
        c.add(doc, "window", f"{raw!r} is not a window such as 28d or 4w")
        return parse_duration("28d")
    if not MIN_WINDOW <= window <= MAX_WINDOW:
        c.add(doc, "window", f"{raw} is outside 7d to 90d: shorter windows leave too few events for a "
                             "budget, longer ones react too slowly; 28d is the usual choice")
    return window


def _string_map(c: _Collector, node: dict, key: str) -> dict[str, str]:
    value = node.get(key) or {}
    if not isinstance(value, dict):
        c.add(node, key, "must be a mapping of label: value")
        return {}
    out = {}
    for name, item in value.items():
        if name == LINE:
            continue
        if not _LABEL.match(str(name)) or isinstance(item, (dict, list)):
            c.add(value, f"{key}.{name}", "must be label_name: value")
            continue
        out[str(name)] = str(item)
    return out


def _engines(c: _Collector, doc: dict) -> tuple[EngineRef, ...]:
    raw = doc.get("engines", ["vllm", "sglang"])
    if not isinstance(raw, list):
        c.add(doc, "engines", "must be a list such as [vllm, sglang] or [vllm@0.10.2]")
        return ()
    engines = []
    for i, item in enumerate(raw):
        name, _, version = str(item).partition("@")
        if name not in bucket_tables():
            c.add(doc, f"engines[{i}]", f"unknown engine {name!r}; known: {', '.join(bucket_tables())}")
        elif version and not re.match(r"\d+(\.\d+)*\Z", version):
            c.add(doc, f"engines[{i}]", f"{version!r} is not a release such as 0.10.2")
        else:
            engines.append(EngineRef(name, version or None))
    return tuple(engines)


def _group_by(c: _Collector, doc: dict) -> tuple[str, ...]:
    raw = doc.get("group_by", [])
    if not isinstance(raw, list):
        c.add(doc, "group_by", "must be a list of labels such as [model]")
        return ()
    for label in raw:
        if not _LABEL.match(str(label)):
            c.add(doc, "group_by", f"{label!r} is not a label name")
        elif label in UNBOUNDED_LABELS:
            c.add(doc, "group_by", f"{label!r} has a value per request or process: one SLO each would be "
                                   "unbounded; group by model, engine or namespace instead")
        elif label in ("service", "slo"):
            c.add(doc, "group_by", f"{label!r} is set by the compiler itself")
    return tuple(str(label) for label in raw)


def _alerting(c: _Collector, doc: dict) -> tuple[int, Fraction]:
    node = doc.get("alerting") or {}
    if not isinstance(node, dict):
        c.add(doc, "alerting", "must be a mapping")
        return 1, Fraction(120)
    c.unknown_keys(node, ALERTING_KEYS, "alerting.")
    min_bad = node.get("min_bad_events", 1)
    if not isinstance(min_bad, int) or isinstance(min_bad, bool) or min_bad < 1:
        c.add(node, "alerting.min_bad_events", f"{min_bad!r} must be a whole number of 1 or more")
        min_bad = 1
    try:
        missing_for = parse_duration(node.get("missing_data_for", "2m"), units="s m h")
    except ValueError as err:
        c.add(node, "alerting.missing_data_for", str(err))
        missing_for = Fraction(120)
    return min_bad, missing_for


def _tiers(window: Fraction) -> tuple[Tier, ...]:
    return tuple(t for t in default_tiers() if t.long < window)


def _target(c: _Collector, node: dict, field: str) -> Fraction:
    raw = node.get("target")
    if raw is None:
        c.add(node, field, "missing; give the share of good events, e.g. 99% or 0.99")
        return Fraction(99, 100)
    text = str(raw).strip()
    try:
        value = Fraction(text[:-1].strip()) / 100 if text.endswith("%") else Fraction(text)
    except ValueError:
        c.add(node, field, f"{raw!r} is not a target such as 99.5% or 0.995")
        return Fraction(99, 100)
    if not text.endswith("%") and value > 1:
        c.add(node, field, f"{raw!r} is over 1; write percentages with a % sign, e.g. {raw}%")
    elif value > 1:
        c.add(node, field, f"{raw} is over 100%; a target is the share of good events, e.g. 99.9%")
    elif value == 1:
        c.add(node, field, f"{raw} leaves no error budget: every alert would fire on the first bad request; "
                           "targets are below 100%, e.g. 99.9%")
    elif value <= 0:
        c.add(node, field, f"{raw} must be above 0%")
    else:
        return value
    return Fraction(99, 100)


def _threshold(c: _Collector, node: dict, field: str) -> Fraction:
    raw = node.get("threshold")
    if raw is None:
        c.add(node, field, "missing; a latency SLI needs a threshold such as 1s or 100ms")
        return Fraction(1)
    try:
        return parse_duration(raw, units="ms s m")
    except ValueError:
        c.add(node, field, f"{raw!r} is not a threshold such as 1s, 500ms or 0.1 (seconds)")
        return Fraction(1)


def _selector(c: _Collector, node: dict, key: str, field: str):
    raw = node.get(key)
    if not isinstance(raw, str):
        c.add(node, field, 'must be a selector such as llm_requests_finished_total{finished_reason="stop"}')
        return None
    try:
        return parse_selector(raw)
    except ValueError as err:
        c.add(node, field, str(err))
        return None


def _annotations(c: _Collector, node: dict, field: str, inherited: dict[str, str]) -> dict[str, str]:
    merged = dict(inherited)
    merged.update(_string_map(c, node, "annotations"))
    for key, text in merged.items():
        for template in _TEMPLATE.findall(text):
            if not _LABEL_TEMPLATE.match(template):
                c.add(node, f"{field}.annotations.{key}", f"{{{{ {template} }}}}: only {{{{ $labels.NAME }}}} "
                      "templates are allowed, so the generated tests can check the text")
    return merged


def _objectives(c: _Collector, doc: dict, source: str, engines, annotations, runbook_url) -> tuple[Objective, ...]:
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
        target = _target(c, node, field + ".target")
        labels = _string_map(c, node, "labels")
        _reserved(c, node, field + ".labels", labels)
        objectives.append(Objective(
            name=name, kind=kind, sli=sli, target=target, labels=tuple(sorted(labels.items())),
            annotations=tuple(sorted(_annotations(c, node, field, annotations).items())),
            runbook_url=str(node.get("runbook_url", runbook_url)), description=str(node.get("description", ""))))
    return tuple(objectives)


def _sli(c: _Collector, node: dict, field: str, source: str, engines):
    builtins = builtin_slis()[source]
    kind = node.get("sli")
    known = tuple(builtins) + CUSTOM_SLIS
    if kind not in known:
        close = difflib.get_close_matches(str(kind), known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        c.add(node, field + ".sli", f"{'missing' if kind is None else repr(kind) + ' is not an SLI'}: "
                                    f"use one of {', '.join(known)}{hint}")
        return "invalid", None
    extra = tuple(Matcher(k, "=", v) for k, v in _string_map(c, node, "selector").items())
    if kind in builtins:
        definition = dict(builtins[kind])
        for key in ("metric", "total", "good", "bad"):
            if key in node:
                c.add(node, f"{field}.{key}", f"the built-in {kind} SLI sets its own metrics; "
                                              "use sli: latency or sli: ratio for your own")
    else:
        definition = {"latency": node.get("metric")} if kind == "latency" else {
            "ratio": {"total": node.get("total"), "good": node.get("good"), "bad": node.get("bad")}}
    if "latency" in definition:
        return kind, _latency_sli(c, node, field, definition, extra, source, engines)
    return kind, _ratio_sli(c, node, field, definition, extra, kind in builtins)


def _latency_sli(c, node, field, definition, extra, source, engines) -> LatencySLI:
    try:
        selector = parse_selector(str(definition["latency"]))
    except ValueError:
        c.add(node, field + ".metric", "a latency SLI needs metric: a histogram's name, optionally with matchers, "
                                       'e.g. llm_request_queue_time_seconds{role="decode"}')
        selector = parse_selector("invalid")
    threshold = _threshold(c, node, field + ".threshold")
    if source == "engine":
        message = threshold_problem(engines, selector.metric, threshold)
        if message:
            c.add(node, field + ".threshold", message)
    exclude = tuple(Matcher(k, "!=", v) for k, v in (definition.get("exclude") or {}).items())
    means = definition.get("means", f"{selector.metric} observations within {{threshold}}")
    return LatencySLI(selector.metric, threshold, selector.matchers + extra + exclude,
                      means.replace("{threshold}", format_duration(threshold)))


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
        bad = tuple(_selector(c, {"bad": item, LINE: line_of(node)}, "bad", where("bad")) for item in items)
    if (good is None) == (bad is None):
        c.add(node, field, "a ratio SLI needs total and exactly one of good or bad")
        return None
    if total is None or (bad and None in bad):
        return None
    add = lambda s: s.with_matchers(*extra)  # noqa: E731 - the objective's selector joins every term
    return RatioSLI(total=add(total), good=add(good) if good else None, bad=tuple(add(b) for b in bad or ()),
                    means=definition.get("means", f"events of {total.metric} that were good"))
