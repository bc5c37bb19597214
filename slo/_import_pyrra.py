"""Pyrra `ServiceLevelObjective` resources (pyrra.dev/v1alpha1) into draft objectives.

A Pyrra SLO is one objective with no service: the SLO's name serves as both. Ratio and latency indicators
carry over (their `grouping` becomes group_by); native-histogram and bool-gauge indicators are refused.
"""

from __future__ import annotations

import re

from inferwatch.slo._import_base import (_LABEL, _LABEL_TEMPLATE, _TEMPLATE, RESERVED_LABELS, Draft, Notes, join,
                                         keys_text, listing, mapping, name_of, percent, text_of, window_of)
from inferwatch.slo._import_promql import QueryError, bad_sli, good_sli

__all__ = ["read_pyrra"]

_KNOWN = {"description", "target", "window", "indicator", "alerting"}
_PREFIX = "pyrra.dev/"      # Pyrra puts these metadata labels and annotations on its alerts, the prefix cut off
_OURS = {"summary", "description", "runbook_url"}


def read_pyrra(doc: dict, where: str, notes: Notes) -> list[Draft]:
    meta, spec = mapping(doc.get("metadata")), doc.get("spec")
    name = name_of(notes, meta, "name", join(where, "metadata.name"), "SLO")
    path = join(where, "spec")
    if not isinstance(spec, dict):
        raise notes.refuse(doc, path, "missing: a ServiceLevelObjective has a spec with target, window and indicator")
    objective = {"name": name}
    if spec.get("description"):
        objective["description"] = " ".join(text_of(spec["description"]).split())
    sli, group_by = _indicator(spec, f"{path}.indicator", notes)
    target = percent(spec.get("target")) if spec.get("target") is not None else None
    if target is None:
        raise notes.refuse(spec, f"{path}.target", f"{text_of(spec.get('target'))!r}: a target such as \"99.9\" is "
                                                   "required")
    match = re.fullmatch(r"(\d+)\s*([a-zA-Z])", text_of(spec.get("window")).strip())
    window = window_of(notes, spec, f"{path}.window", *(match.groups() if match else (spec.get("window"), "?")))
    labels, service = _labels(meta, join(where, "metadata.labels"), notes)
    annotations = _annotations(meta, join(where, "metadata.annotations"), notes)
    if annotations:
        objective["annotations"] = annotations
    if service is None:
        service = name
        notes.add(meta, join(where, "metadata.name"), f"Pyrra SLOs have no service: service {name} named after the "
                                                      "SLO")
    _alerting(spec.get("alerting"), f"{path}.alerting", notes)
    for key in sorted(set(spec) - _KNOWN, key=str):
        if spec[key]:
            notes.add(spec, f"{path}.{key}", f"{text_of(spec[key])[:40]!r} not carried over: a setting of Pyrra's "
                                             "own rule generation")
    return [Draft(service, {**objective, **sli, "target": target}, spec, path, window=window, group_by=group_by,
                  labels=labels)]


def _labels(meta: dict, field: str, notes: Notes) -> tuple[dict, str | None]:
    """Alert labels (Pyrra's `pyrra.dev/NAME` ones) and the service `pyrra.dev/service` names, if any."""
    raw, labels, service = meta.get("labels"), {}, None
    if not isinstance(raw, dict):
        return labels, service
    for key, value in raw.items():
        name, where = text_of(key)[len(_PREFIX):], f"{field}.{text_of(key)}"
        if not text_of(key).startswith(_PREFIX):
            continue
        if isinstance(value, (dict, list)) or value is None:
            notes.add(raw, where, f"is a {type(value).__name__}, not a label value; not carried over")
        elif name == "service":
            service = name_of(notes, raw, key, where, "service")
        elif not _LABEL.match(name):
            notes.add(raw, where, f"{name!r} is not a Prometheus label name; not carried over")
        elif name in RESERVED_LABELS:
            notes.add(raw, where, f"{text_of(value)!r} not carried over: inferwatch sets the {name} label itself "
                                  "(route on tier and severity)")
        else:
            labels[name] = text_of(value)
    others = [k for k in raw if not text_of(k).startswith(_PREFIX)]
    if others:
        notes.add(meta, field, f"({keys_text(others)}) not carried over: labels of the Kubernetes resource, not "
                               f"of alerts (Pyrra passes on only {_PREFIX}NAME labels)")
    return labels, service


def _annotations(meta: dict, field: str, notes: Notes) -> dict:
    """Alert annotations: Pyrra's `pyrra.dev/NAME` ones, whose templates are only `{{ $labels.NAME }}`."""
    raw, out = meta.get("annotations"), {}
    if not isinstance(raw, dict):
        return out
    for key, value in raw.items():
        name, where = text_of(key)[len(_PREFIX):], f"{field}.{text_of(key)}"
        if not text_of(key).startswith(_PREFIX):
            continue
        if isinstance(value, (dict, list)) or value is None:
            notes.add(raw, where, f"is a {type(value).__name__}, not an annotation value; not carried over")
        elif not _LABEL.match(name):
            notes.add(raw, where, f"{name!r} is not an annotation name; not carried over")
        elif name in _OURS:
            notes.add(raw, where, f"not carried over: inferwatch writes the {name} annotation itself")
        elif not all(_LABEL_TEMPLATE.match(t) for t in _TEMPLATE.findall(text_of(value))):
            notes.add(raw, where, "uses templates other than {{ $labels.NAME }}; not carried over")
        else:
            out[name] = " ".join(text_of(value).split())
    others = [k for k in raw if not text_of(k).startswith(_PREFIX)]
    if others:
        notes.add(meta, field, f"({keys_text(others)}) not carried over: annotations of the Kubernetes resource, "
                               f"not of alerts (Pyrra passes on only {_PREFIX}NAME annotations)")
    return out


def _indicator(spec: dict, path: str, notes: Notes) -> tuple[dict, tuple[str, ...]]:
    indicator = spec.get("indicator") if isinstance(spec.get("indicator"), dict) else {}
    for kind in ("latencyNative", "bool_gauge"):
        if indicator.get(kind):
            raise notes.refuse(indicator, f"{path}.{kind}", f"a {kind} indicator is not a count of events in "
                                                            "counters; give a ratio or latency indicator")
    kind = next((k for k in ("ratio", "latency") if isinstance(indicator.get(k), dict)), None)
    if kind is None:
        raise notes.refuse(spec, path, "missing: give a ratio (errors, total) or latency (success, total) indicator")
    body, part = indicator[kind], "errors" if kind == "ratio" else "success"
    queries = {}
    for key in (part, "total"):
        metric = body.get(key).get("metric") if isinstance(body.get(key), dict) else None
        if not metric:
            raise notes.refuse(body, f"{path}.{kind}.{key}.metric", "missing: a selector of a counter")
        queries[key] = text_of(metric)
    try:
        reader = bad_sli if kind == "ratio" else good_sli
        sli, group_by = reader(queries[part], queries["total"], bare_ok=True)
    except QueryError as err:
        raise notes.refuse(body, f"{path}.{kind}", f"{err}; not carried over") from None
    grouping = listing(body.get("grouping"))
    return sli, tuple(sorted(set(group_by) | {text_of(g) for g in grouping}))


def _alerting(alerting, path: str, notes: Notes) -> None:
    if not isinstance(alerting, dict):
        return
    for key in ("disabled", "burnrates", "absent"):
        value = alerting.get(key)
        if value is not None and value is not (key != "disabled"):
            notes.add(alerting, f"{path}.{key}", f"{text_of(value)} not carried over: inferwatch generates every "
                                                 "burn-rate tier and the missing-data alert; silence them in "
                                                 "Alertmanager")
    for key in ("name", "absentName", "severities"):
        if alerting.get(key):
            notes.add(alerting, f"{path}.{key}", "not carried over: inferwatch alerts are LLMErrorBudgetBurn and "
                                                 "LLMSLIDataMissing, with tier and severity labels")
