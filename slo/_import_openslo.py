"""OpenSLO `openslo/v1`, `openslo/v1alpha` and `openslo.com/v2alpha` documents into draft objectives.

SLOs find their SLI inline or by reference (`indicatorRef`, v2alpha's `sliRef`), and a metric source's type
inline or through its `DataSource`. Only Prometheus-compatible sources are read; any other is refused by name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from inferwatch.slo._import_base import (
    DEFAULT_DAYS,
    Draft,
    Notes,
    Refused,
    join,
    keys_text,
    mapping,
    name_of,
    percent,
    text_of,
    window_of,
)
from inferwatch.slo._import_promql import QueryError, bad_sli, good_sli, reads_as_success

__all__ = ["read_openslo", "OPENSLO_VERSIONS"]

OPENSLO_VERSIONS = ("openslo/v1", "openslo/v1alpha", "openslo.com/v2alpha")
# The same schema under a Kubernetes API group: osko (github.com/oskoperator/osko) serves openslo/v1 as openslo.com/v1.
_ALIASES = {"openslo.com/v1": "openslo/v1"}
PROMETHEUS_SOURCES = {"prometheus", "amazonprometheus", "thanos", "cortex", "mimir", "sloth"}
_ALERTING = {"AlertPolicy", "AlertCondition", "AlertNotificationTarget"}
_V1ALPHA_UNITS = {"minute": "m", "hour": "h", "day": "d", "week": "w", "month": "M", "quarter": "Q", "year": "Y"}


@dataclass(frozen=True)
class _Keys:
    """How an OpenSLO version names an SLO's service and SLI."""

    service: str
    indicator: str
    indicator_ref: str


_KEYS = {
    "openslo/v1": _Keys("service", "indicator", "indicatorRef"),
    "openslo.com/v2alpha": _Keys("serviceRef", "sli", "sliRef"),
}


class _Index:
    """The file's named documents by kind, so references resolve."""

    def __init__(self, docs: list[tuple[str, dict]]):
        self.by_kind: dict[str, dict[str, tuple[str, dict]]] = {}
        for where, doc in docs:
            name = text_of(mapping(doc.get("metadata")).get("name"))
            self.by_kind.setdefault(text_of(doc.get("kind")), {})[name] = (where, doc)
        self.used: set[tuple[str, str]] = set()

    def get(self, kind: str, name) -> dict | None:
        found = self.by_kind.get(kind, {}).get(text_of(name))
        if found:
            self.used.add((kind, text_of(name)))
        return found[1] if found else None


def read_openslo(docs: list[tuple[str, dict]], notes: Notes, services: dict[str, str]) -> list[Draft]:
    """Draft objectives of a file's OpenSLO documents; fills `services` with {service: description}."""
    index, drafts = _Index(docs), []
    for where, doc in docs:
        kind, prefix = text_of(doc.get("kind")), where
        if _api(doc) not in OPENSLO_VERSIONS:
            notes.add(
                doc,
                join(prefix, "apiVersion"),
                f"{doc.get('apiVersion')} is not read (only "
                f"{', '.join(OPENSLO_VERSIONS + tuple(_ALIASES))}): {kind} not "
                "carried over",
            )
        elif kind == "SLO":
            reader = _slo_v1alpha if _api(doc) == "openslo/v1alpha" else _slo_v1
            try:
                drafts += reader(doc, prefix, index, notes)
            except Refused as refused:
                notes.items += refused.problems
    for where, doc in docs:
        if _api(doc) in OPENSLO_VERSIONS and text_of(doc.get("kind")) != "SLO":
            _other(doc, where, index, notes, services)
    if not index.by_kind.get("SLO"):
        kinds = sorted({text_of(d.get("kind")) or "?" for _, d in docs})
        notes.add(
            docs[0][1],
            "",
            f"OpenSLO {', '.join(kinds)} only: there is no SLO in this file, so nothing "
            "is imported (an SLO names its service, SLI, objectives and window)",
        )
    return drafts


def _api(doc: dict):
    """The document's OpenSLO version, an alias read as the version it names."""
    api = doc.get("apiVersion")
    return _ALIASES.get(api, api) if isinstance(api, str) else api


def _other(doc: dict, prefix: str, index: _Index, notes: Notes, services: dict[str, str]) -> None:
    kind = text_of(doc.get("kind"))
    name, spec = text_of(mapping(doc.get("metadata")).get("name")), mapping(doc.get("spec"))
    where = f"{prefix} {kind} {name}".strip()
    if kind == "Service":
        if spec.get("description"):
            services[re.sub(r"[^a-z0-9_.-]+", "-", name.lower()).strip("-_.")] = text_of(spec["description"])
        slo_specs = [mapping(d.get("spec")) for _, d in index.by_kind.get("SLO", {}).values()]
        named = {text_of(s.get("service", s.get("serviceRef"))) for s in slo_specs}
        if name not in named:
            notes.add(
                doc,
                "",
                f"{where}: a Service only describes a service; no SLO of this file names it, so "
                "nothing of it is imported",
            )
    elif kind in ("SLI", "DataSource"):
        if (kind, name) not in index.used:
            notes.add(doc, "", f"{where}: used by no SLO of this file; not carried over")
    elif kind in _ALERTING:
        notes.add(
            doc,
            "",
            f"{where}: not carried over: inferwatch alerts on the SRE Workbook's multiwindow "
            "burn-rate tiers and on missing data; route notifications in Alertmanager",
        )
    else:
        notes.add(doc, "", f"{where}: an OpenSLO {kind or 'document without kind'} is not read")


def _slo_v1(doc: dict, prefix: str, index: _Index, notes: Notes) -> list[Draft]:
    """openslo/v1 and openslo.com/v2alpha, which renames service, indicator and metricSource."""
    keys = _KEYS[_api(doc)]
    meta, spec = mapping(doc.get("metadata")), doc.get("spec")
    name = name_of(notes, meta, "name", join(prefix, "metadata.name"), "SLO")
    path = join(prefix, "spec")
    if not isinstance(spec, dict):
        raise notes.refuse(doc, path, "missing: an SLO has a spec with service, indicator and objectives")
    service = name_of(notes, spec, keys.service, f"{path}.{keys.service}", "service")
    objectives = spec.get("objectives")
    if not isinstance(objectives, list) or not objectives or not all(isinstance(o, dict) for o in objectives):
        raise notes.refuse(spec, f"{path}.objectives", "missing: an SLO needs a list of objectives with a target")
    own = [_has_indicator(o, keys) for o in objectives]
    shared = None if all(own) else _indicator_v1(spec, path, keys, index, notes)  # refuses the SLO once
    _metadata(meta, prefix, notes)
    _unknown(spec, _SLO_KEYS | {keys.service, keys.indicator, keys.indicator_ref}, path, notes)
    for i, target in enumerate(objectives):
        _unknown(target, _OBJECTIVE_KEYS | {keys.indicator, keys.indicator_ref}, f"{path}.objectives[{i}]", notes)
    window = _window_v1(spec, path, notes)
    _budgeting(spec, path, notes)
    if spec.get("alertPolicies"):
        notes.add(
            spec,
            f"{path}.alertPolicies",
            "not carried over: inferwatch alerts on the SRE Workbook's multiwindow burn-rate tiers and on missing data",
        )
    drafts = []
    for i, target in enumerate(objectives):
        field = f"{path}.objectives[{i}]"
        try:
            sli, group_by = _indicator_v1(target, field, keys, index, notes) if own[i] or shared is None else shared
            objective = _objective(name, i, len(objectives), target, spec, field, notes)
            drafts.append(
                Draft(
                    service,
                    {**objective, **sli, "target": objective.pop("target")},
                    target,
                    field,
                    window=window,
                    group_by=group_by,
                )
            )
        except Refused as refused:
            notes.items += refused.problems
    return drafts


_SLO_KEYS = {"description", "timeWindow", "budgetingMethod", "objectives", "alertPolicies"}
_OBJECTIVE_KEYS = {
    "displayName",
    "op",
    "value",
    "target",
    "targetPercent",
    "timeSliceTarget",
    "timeSliceWindow",
    "compositeWeight",
}


def _unknown(node: dict, known: set[str], path: str, notes: Notes) -> None:
    for key in node:
        if key not in known:
            notes.add(node, f"{path}.{key}", "is no OpenSLO field: not carried over")


def _has_indicator(node: dict, keys: _Keys) -> bool:
    return keys.indicator in node or keys.indicator_ref in node


def _objective(name: str, i: int, count: int, target: dict, spec: dict, field: str, notes: Notes) -> dict:
    objective = {"name": name if count == 1 else f"{name}-{i}"}
    description = target.get("displayName") or spec.get("description")
    if description:
        objective["description"] = " ".join(text_of(description).split())
    if target.get("targetPercent") is not None:
        value = percent(target["targetPercent"])
    else:
        value = percent(target.get("target"), scale=100) if target.get("target") is not None else None
    if value is None or (target.get("targetPercent") is None and float(value[:-1]) > 100):
        raise notes.refuse(
            target,
            f"{field}.target",
            f"{text_of(target.get('target'))!r}: an objective needs a "
            "target between 0 and 1, e.g. 0.999 (or targetPercent: 99.9)",
        )
    objective["target"] = value
    if target.get("value") is not None and "op" in target:
        notes.add(
            target,
            f"{field}.value",
            f"{target.get('op')} {text_of(target['value'])} not carried over: "
            "a threshold applies to thresholdMetric SLIs, not to ratios",
        )
    return objective


def _metadata(meta: dict, prefix: str, notes: Notes) -> None:
    for key in ("labels", "annotations"):
        if meta.get(key):
            shown = keys_text(meta[key])
            notes.add(
                meta,
                join(prefix, f"metadata.{key}"),
                f"({shown}) not carried over: OpenSLO metadata sorts SLOs; put alert labels under labels:",
            )


def _first_window(spec: dict, key: str, path: str, notes: Notes) -> tuple[dict, str] | None:
    """The first of the spec's `key` windows and its field path (a note when there are more); None for none."""
    windows = spec.get(key) or []
    windows = [windows] if isinstance(windows, dict) else windows
    if not isinstance(windows, list) or not windows or not isinstance(windows[0], dict):
        return None
    if len(windows) > 1:
        notes.add(spec, f"{path}.{key}", f"{len(windows)} windows: the first is used")
    return windows[0], f"{path}.{key}[0]"


def _window_v1(spec: dict, path: str, notes: Notes) -> int:
    first = _first_window(spec, "timeWindow", path, notes)
    if first is None:
        return _no_window(spec, f"{path}.timeWindow", notes)
    window, field = first
    duration = text_of(window.get("duration")).strip()
    match = re.fullmatch(r"(\d+)\s*([a-zA-Z])", duration)
    days = window_of(notes, window, f"{field}.duration", *(match.groups() if match else (duration, "?")))
    _calendar(window, window.get("isRolling", True), field, duration, notes)
    return days


def _no_window(spec: dict, field: str, notes: Notes) -> int:
    notes.add(spec, field, f"missing: the SLO names no window; {DEFAULT_DAYS}d used")
    return DEFAULT_DAYS


def _calendar(window: dict, rolling, field: str, shown: str, notes: Notes) -> None:
    if rolling is False or window.get("calendar"):
        notes.add(
            window,
            f"{field}.isRolling",
            f"calendar window {shown} not carried over: alerts and budget use a rolling window of the same length",
        )


def _budgeting(spec: dict, path: str, notes: Notes) -> None:
    method = text_of(spec.get("budgetingMethod") or "Occurrences")
    if method != "Occurrences":
        notes.add(
            spec,
            f"{path}.budgetingMethod",
            f"{method} not carried over: inferwatch budgets by events (Occurrences); time-slice targets are dropped",
        )


def _indicator_v1(node: dict, path: str, keys: _Keys, index: _Index, notes: Notes) -> tuple[dict, tuple]:
    indicator, field = node.get(keys.indicator), f"{path}.{keys.indicator}"
    if indicator is None and node.get(keys.indicator_ref) is not None:
        indicator, field = index.get("SLI", node[keys.indicator_ref]), f"{path}.{keys.indicator_ref}"
        if indicator is None:
            raise notes.refuse(node, field, f"{text_of(node[keys.indicator_ref])!r}: no SLI of that name in this file")
    sli_spec = indicator.get("spec") if isinstance(indicator, dict) else None
    if not isinstance(sli_spec, dict):
        raise notes.refuse(
            node, field, f"missing: an SLO needs an SLI ({keys.indicator} inline, or {keys.indicator_ref})"
        )
    if "thresholdMetric" in sli_spec:
        raise notes.refuse(
            sli_spec,
            f"{field}.spec.thresholdMetric",
            "a threshold on one metric's value is not a "
            "count of good events; inferwatch SLIs are ratios of events (give a ratioMetric)",
        )
    ratio = sli_spec.get("ratioMetric")
    if not isinstance(ratio, dict):
        raise notes.refuse(sli_spec, f"{field}.spec", "has no ratioMetric: inferwatch SLIs are ratios of events")
    where = f"{field}.spec.ratioMetric"
    if "raw" in ratio:
        raise notes.refuse(
            ratio, f"{where}.raw", "a precomputed ratio cannot be split into events; give good (or bad) and total"
        )
    _counter_flag(ratio, "counter", where, notes)
    queries = {
        key: _query_v1(ratio.get(key), f"{where}.{key}", index, notes)
        for key in ("good", "bad", "total")
        if key in ratio
    }
    return _ratio(queries, ratio, where, notes)


def _counter_flag(ratio: dict, key: str, where: str, notes: Notes) -> None:
    if ratio.get(key) is False:
        raise notes.refuse(
            ratio,
            f"{where}.{key}",
            "false: the queries return event counts per interval, not "
            "counters; inferwatch counts events with rate() of counters",
        )


def _ratio(queries: dict, ratio: dict, where: str, notes: Notes) -> tuple[dict, tuple[str, ...]]:
    if "total" not in queries or ("good" in queries) == ("bad" in queries):
        raise notes.refuse(ratio, where, "needs total and exactly one of good or bad")
    try:
        if "good" in queries:
            return good_sli(queries["good"], queries["total"], bare_ok=True)
        sli = bad_sli(queries["bad"], queries["total"], bare_ok=True)
    except QueryError as err:
        raise notes.refuse(ratio, where, f"{err}; not carried over") from None
    if hint := reads_as_success(queries["bad"], "bad query"):
        notes.check(ratio, f"{where}.bad", hint)
    return sli


def _query_v1(metric, field: str, index: _Index, notes: Notes) -> str:
    """v1: {metricSource: {type | metricSourceRef, spec: {query}}}; v2alpha: {dataSourceRef, spec: {query}}."""
    if isinstance(metric, dict) and isinstance(metric.get("metricSource"), dict):
        source, field = metric["metricSource"], field + ".metricSource"
    elif isinstance(metric, dict) and ("dataSourceRef" in metric or "dataSource" in metric):
        source = metric.get("dataSource") if isinstance(metric.get("dataSource"), dict) else metric
    else:
        raise notes.refuse(metric, field, "has no metricSource with a type and a query")
    kind, ref = source.get("type"), source.get("metricSourceRef", source.get("dataSourceRef"))
    if kind is None and ref is not None:
        data_source = index.get("DataSource", ref)
        kind = mapping(mapping(data_source).get("spec")).get("type")
        if data_source is None:
            raise notes.refuse(
                source,
                f"{field}.type",
                f"unknown: no DataSource {text_of(ref)!r} in this file says "
                "which kind of source the query is for (add type: Prometheus)",
            )
    spec = mapping(source.get("spec")) or mapping(metric.get("spec"))
    return _prometheus_query(source, field, kind, spec.get("query", spec.get("promql")), notes)


def _prometheus_query(node, field: str, kind, query, notes: Notes) -> str:
    if kind is None:
        raise notes.refuse(node, f"{field}.type", "missing: say which metric source (Prometheus) the query is for")
    if re.sub(r"[^a-z]", "", text_of(kind).lower()) not in PROMETHEUS_SOURCES:
        raise notes.refuse(
            node,
            f"{field}.type",
            f"{text_of(kind)} is not a Prometheus source: inferwatch "
            "compiles PromQL for Prometheus, so this SLO cannot be imported",
        )
    if not query or not text_of(query).strip():
        raise notes.refuse(node, f"{field}.spec.query", "missing: a Prometheus source needs a query")
    return text_of(query)


def _slo_v1alpha(doc: dict, prefix: str, index: _Index, notes: Notes) -> list[Draft]:
    meta, spec = mapping(doc.get("metadata")), doc.get("spec")
    name = name_of(notes, meta, "name", join(prefix, "metadata.name"), "SLO")
    path = join(prefix, "spec")
    if not isinstance(spec, dict):
        raise notes.refuse(doc, path, "missing: an SLO has a spec with service and objectives")
    service = name_of(notes, spec, "service", f"{path}.service", "service")
    window = _window_v1alpha(spec, path, notes)
    _budgeting(spec, path, notes)
    objectives, drafts = spec.get("objectives"), []
    if not isinstance(objectives, list) or not objectives:
        raise notes.refuse(spec, f"{path}.objectives", "missing: an SLO needs at least one objective with a target")
    for i, target in enumerate(objectives):
        field = f"{path}.objectives[{i}]"
        try:
            if not isinstance(target, dict):
                raise notes.refuse(objectives, field, "must be a mapping with a target")
            sli, group_by = _ratio_v1alpha(target, spec, field, path, notes)
            objective = _objective(name, i, len(objectives), target, spec, field, notes)
            drafts.append(
                Draft(
                    service,
                    {**objective, **sli, "target": objective.pop("target")},
                    target,
                    field,
                    window=window,
                    group_by=group_by,
                )
            )
        except Refused as refused:
            notes.items += refused.problems
    return drafts


def _ratio_v1alpha(target: dict, spec: dict, field: str, path: str, notes: Notes) -> tuple[dict, tuple[str, ...]]:
    ratio = target.get("ratioMetrics")
    if not isinstance(ratio, dict):
        if isinstance(spec.get("indicator"), dict) and "thresholdMetric" in spec["indicator"]:
            raise notes.refuse(
                spec["indicator"],
                f"{path}.indicator.thresholdMetric",
                "a threshold on one "
                "metric's value is not a count of good events; inferwatch SLIs are ratios of events "
                "(give ratioMetrics)",
            )
        raise notes.refuse(target, f"{field}.ratioMetrics", "missing: inferwatch SLIs are ratios of events")
    where = f"{field}.ratioMetrics"
    _counter_flag(ratio, "incremental", where, notes)
    queries = {}
    for key in ("good", "bad", "total"):
        metric = ratio.get(key)
        if isinstance(metric, dict):
            queries[key] = _prometheus_query(metric, f"{where}.{key}", metric.get("source"), metric.get("query"), notes)
        elif key in ratio:
            raise notes.refuse(ratio, f"{where}.{key}", "must be a mapping with source, queryType and query")
    return _ratio(queries, ratio, where, notes)


def _window_v1alpha(spec: dict, path: str, notes: Notes) -> int:
    first = _first_window(spec, "timeWindows", path, notes)
    if first is None:
        return _no_window(spec, f"{path}.timeWindows", notes)
    window, field = first
    unit = _V1ALPHA_UNITS.get(text_of(window.get("unit")).lower(), "?")
    days = window_of(notes, window, f"{field}.count", window.get("count", 1), unit)
    _calendar(
        window,
        window.get("isRolling", True),
        field,
        f"{text_of(window.get('count'))} {text_of(window.get('unit'))}",
        notes,
    )
    return days
