"""Sloth `prometheus/v1` specs and `PrometheusServiceLevel` resources into draft objectives.

Both spell the same fields (snake_case in prometheus/v1, camelCase in the CRD). Only those field names are
translated; label, annotation and plugin keys are the user's and are kept as written. A key that is no Sloth
field is noted, since Sloth ignores it too.
"""

from __future__ import annotations

from inferwatch.slo._import_base import (
    Draft,
    Notes,
    Refused,
    annotation_map,
    join,
    label_map,
    listing,
    mapping,
    name_of,
    percent,
    text_of,
)
from inferwatch.slo._import_promql import QueryError, events_sli, reads_as_success

__all__ = ["read_sloth"]

_OPAQUE = "opaque"  # the user's keys (labels, annotations, plugin options and config): never renamed
_SCALAR = "scalar"
# Each Sloth node kind: its fields (prometheus/v1 spelling) and what each holds; the CRD spells them camelCase.
_SCHEMA: dict[str, dict] = {
    "spec": {"version": _SCALAR, "service": _SCALAR, "labels": _OPAQUE, "slo_plugins": "plugins", "slos": ["slo"]},
    "slo": {
        "name": _SCALAR,
        "description": _SCALAR,
        "objective": _SCALAR,
        "plugins": "plugins",
        "labels": _OPAQUE,
        "sli": "sli",
        "alerting": "alerting",
    },
    "sli": {"raw": "raw", "events": "events", "plugin": "sli_plugin"},
    "raw": {"error_ratio_query": _SCALAR},
    "events": {"error_query": _SCALAR, "total_query": _SCALAR},
    "sli_plugin": {"id": _SCALAR, "options": _OPAQUE},
    "alerting": {
        "name": _SCALAR,
        "labels": _OPAQUE,
        "annotations": _OPAQUE,
        "page_alert": "alert",
        "ticket_alert": "alert",
    },
    "alert": {"disable": _SCALAR, "labels": _OPAQUE, "annotations": _OPAQUE},
    "plugins": {"overridePrevious": _SCALAR, "chain": ["plugin"]},
    "plugin": {"id": _SCALAR, "config": _OPAQUE, "priority": _SCALAR},
}
_PLUGINS = {
    "sloth.dev/contrib/info_labels/v1": "adds labels to Sloth's SLO info metric; inferwatch records none (put "
    "alert labels under labels:)",
    "sloth.dev/contrib/rule_intervals/v1": "sets Sloth's rule group intervals; inferwatch evaluates its alert "
    "groups each minute and its long-window groups every 10 minutes",
    "sloth.dev/contrib/denominator_corrected_rules/v1": "weighs burn rates by traffic; inferwatch keeps low "
    "traffic from paging with alerting.min_bad_events",
    "sloth.dev/contrib/error_budget_exhausted_alert/v1": "alerts on a spent budget; inferwatch records "
    "llm_slo:sli:ratio (the SLI over the SLO window) to "
    "alert on",
    "sloth.dev/contrib/remove_labels/v1": "removes labels from Sloth's rules",
    "sloth.dev/contrib/validate_victoria_metrics/v1": "validates MetricsQL; inferwatch writes PromQL",
}
_CORE = "a stage of Sloth's own rule generation; inferwatch generates its own rules"


def _camel(key: str) -> str:
    first, *rest = key.split("_")
    return first + "".join(part[:1].upper() + part[1:] for part in rest)


class _Fields:
    """Sloth's field names as one flavour spells them."""

    def __init__(self, crd: bool):
        self.crd = crd

    def __call__(self, key: str) -> str:
        return _camel(key) if self.crd else key

    def other(self, key: str) -> str:
        return key if self.crd else _camel(key)


def _check(node, kind, path: str, spell: _Fields, notes: Notes) -> None:
    """Note keys that are no Sloth field (Sloth ignores them); refuse a field of the wrong shape, as Sloth does."""
    if isinstance(kind, list):
        if not isinstance(node, list):
            raise notes.refuse(node, path, f"must be a list, not {text_of(node)!r}")
        for i, item in enumerate(node):
            _check(item, kind[0], f"{path}[{i}]", spell, notes)
        return
    if kind == _SCALAR or node is None:
        if isinstance(node, (dict, list)):
            raise notes.refuse(node, path, "must be a single value, not a mapping or list")
        return
    if not isinstance(node, dict):
        raise notes.refuse(node, path, f"must be a mapping, not {text_of(node)!r}")
    if kind == _OPAQUE:
        return
    fields = {spell(k): (k, v) for k, v in _SCHEMA[kind].items()}
    others = {spell.other(k): spell(k) for k in _SCHEMA[kind]}
    for key, value in node.items():
        where = join(path, str(key))
        if key in fields:
            _check(value, fields[key][1], where, spell, notes)
        else:
            flavour = "PrometheusServiceLevel" if spell.crd else "prometheus/v1"
            hint = f" (it spells it {others[key]})" if key in others else ""
            notes.add(node, where, f"is no {flavour} field{hint}: Sloth ignores it; not carried over")


def read_sloth(doc: dict, where: str, notes: Notes, crd: bool) -> list[Draft]:
    """Draft objectives of one Sloth document; Refused when the document itself is invalid for Sloth."""
    spell = _Fields(crd)
    spec, path = (doc.get("spec"), join(where, "spec")) if crd else (doc, where)
    if not isinstance(spec, dict):  # a CRD's: a plain Sloth document is its own spec
        raise notes.refuse(doc, path, "missing: a PrometheusServiceLevel has spec.service and spec.slos")
    if crd:
        for key in sorted(set(doc) - {"apiVersion", "kind", "metadata", "spec", "status"}, key=str):
            notes.add(
                doc, join(where, str(key)), "is no PrometheusServiceLevel field: Sloth ignores it; not carried over"
            )
    field = lambda key: join(path, spell(key))  # noqa: E731
    _check(spec, "spec", path, spell, notes)
    service = name_of(notes, spec, spell("service"), field("service"), "service")
    slos = spec.get(spell("slos"))
    if not slos:
        raise notes.refuse(spec, field("slos"), "at least one SLO is required (as Sloth requires)")
    labels = label_map(notes, spec, spell("labels"), field("labels"))
    _plugins(spec.get(spell("slo_plugins")), field("slo_plugins"), spell, notes)
    drafts = []
    for i, slo in enumerate(slos):
        try:
            if not isinstance(slo, dict):
                raise notes.refuse(spec, f"{field('slos')}[{i}]", "must be a mapping with name, objective and sli")
            drafts.append(_objective(slo, f"{field('slos')}[{i}]", service, labels, spell, notes))
        except Refused as refused:
            notes.items += refused.problems
    return drafts


def _plugins(plugins, path: str, spell: _Fields, notes: Notes) -> None:
    plugins = mapping(plugins)
    for i, plugin in enumerate(listing(plugins.get("chain"))):
        plugin_id = text_of(mapping(plugin).get("id")) or "(no id)"
        hint = _PLUGINS.get(
            plugin_id, _CORE if plugin_id.startswith("sloth.dev/core/") else "inferwatch runs no Sloth plugins"
        )
        notes.add(
            plugin if isinstance(plugin, dict) else plugins,
            f"{path}.chain[{i}].id",
            f"Sloth plugin {plugin_id} not carried over: {hint}",
        )
    if plugins.get("overridePrevious"):
        notes.add(
            plugins,
            f"{path}.overridePrevious",
            "replaces Sloth's default rule generation; inferwatch generates its own rules",
        )


def _objective(slo, path: str, service: str, labels: dict, spell: _Fields, notes: Notes) -> Draft:
    field = lambda *keys: ".".join([path, *map(spell, keys)])  # noqa: E731
    objective: dict[str, object] = {"name": name_of(notes, slo, spell("name"), field("name"), "SLO")}
    if slo.get(spell("description")):
        objective["description"] = text_of(slo[spell("description")]).strip()
    target = _target(slo, field("objective"), spell, notes)
    sli, group_by = _sli(mapping(slo.get(spell("sli"))), field("sli"), spell, notes, slo)
    objective.update(sli)
    objective["target"] = target
    alerting = mapping(slo.get(spell("alerting")))
    objective_labels = {
        **labels,
        **label_map(notes, slo, spell("labels"), field("labels")),
        **label_map(notes, alerting, spell("labels"), field("alerting", "labels")),
    }
    annotations = annotation_map(notes, alerting, spell("annotations"), field("alerting", "annotations"))
    if annotations:
        objective["annotations"] = annotations
    _alerting(alerting, field("alerting"), text_of(objective["name"]), spell, notes)
    _plugins(slo.get(spell("plugins")), field("plugins"), spell, notes)
    return Draft(service, objective, slo, field("name"), group_by=group_by, labels=objective_labels)


def _target(slo, path: str, spell: _Fields, notes: Notes) -> str:
    raw = slo.get(spell("objective"))
    target = percent(raw) if raw is not None and not isinstance(raw, bool) else None
    if target is None or not 0 < float(target[:-1]) <= 100:
        raise notes.refuse(
            slo, path, f"{text_of(raw)!r}: the objective must be a percentage >0 and <=100 (as Sloth requires)"
        )
    return target


def _sli(sli: dict, path: str, spell: _Fields, notes: Notes, slo) -> tuple[dict, tuple[str, ...]]:
    kinds = [k for k in ("events", "raw", "plugin") if sli.get(spell(k))]
    if len(kinds) != 1:
        message = "at least one SLI type is required" if not kinds else "only one SLI type is allowed"
        raise notes.refuse(sli or slo, path, f"{message} (events, raw or plugin), as Sloth requires")
    body = sli[spell(kinds[0])]
    if kinds[0] == "raw":
        query = " ".join(text_of(body.get(spell("error_ratio_query"))).split())
        raise notes.refuse(
            sli,
            f"{path}.{spell('raw')}",
            f"an error-ratio query ({_short(query)}) cannot be "
            "split into events; inferwatch counts good and total events: give sli.events "
            "(error and total queries)",
        )
    if kinds[0] == "plugin":
        raise notes.refuse(
            sli,
            f"{path}.{spell('plugin')}",
            f"Sloth SLI plugin {text_of(body.get('id'))} "
            "writes its queries when Sloth runs; give them as sli.events (error and total queries)",
        )
    error, total = body.get(spell("error_query")), body.get(spell("total_query"))
    if not error or not total:
        missing = spell("error_query") if not error else spell("total_query")
        raise notes.refuse(
            body, f"{path}.{spell('events')}.{missing}", "missing: events need an error and a total query"
        )
    try:
        events = events_sli(text_of(error), text_of(total))
    except QueryError as err:
        raise notes.refuse(body, f"{path}.{spell('events')}", f"{err}; not carried over") from None
    if "bad" in events[0] and (hint := reads_as_success(text_of(error), "error query")):
        notes.check(body, f"{path}.{spell('events')}.{spell('error_query')}", hint)
    return events


def _short(query: str, limit: int = 60) -> str:
    return query if len(query) <= limit else query[: limit - 3] + "..."


def _alerting(alerting: dict, path: str, name: str, spell: _Fields, notes: Notes) -> None:
    if alerting.get("name"):
        notes.add(
            alerting,
            f"{path}.name",
            f"alert name {text_of(alerting['name'])} not carried over: inferwatch "
            f"alerts are LLMErrorBudgetBurn and LLMSLIDataMissing, with slo={name}",
        )
    for kind, tier in (("page_alert", "page (critical)"), ("ticket_alert", "ticket (warning)")):
        sub = mapping(alerting.get(spell(kind)))
        where = f"{path}.{spell(kind)}"
        if sub.get("disable"):
            notes.add(
                sub,
                f"{where}.disable",
                f"every tier is generated; silence the {tier} tiers in Alertmanager (match tier and severity)",
            )
        for part in ("labels", "annotations"):
            if isinstance(sub.get(part), dict) and sub[part]:
                shown = ", ".join(f"{k}={text_of(v)}" for k, v in sub[part].items())
                notes.add(
                    sub,
                    f"{where}.{part}",
                    f"({shown}) not carried over: inferwatch labels every alert with "
                    f"tier and severity; route the {tier} tiers on those",
                )
