"""Pyrra `ServiceLevelObjective` resources (pyrra.dev/v1alpha1) into draft objectives.

A Pyrra SLO is one objective with no service: the SLO's name serves as both. Ratio and latency indicators
carry over (their `grouping` becomes group_by); native-histogram and bool-gauge indicators are refused.
"""

from __future__ import annotations

import copy
import re

from inferwatch.slo._import_base import (
    Draft,
    Notes,
    annotation_map,
    join,
    keys_text,
    label_map,
    listing,
    mapping,
    name_of,
    percent,
    text_of,
    window_of,
)
from inferwatch.slo._import_promql import QueryError, bad_sli, good_sli, reads_as_success

__all__ = ["read_pyrra"]

_KNOWN = {"description", "target", "window", "indicator", "alerting"}
_PREFIX = "pyrra.dev/"  # Pyrra puts these metadata labels and annotations on its alerts, the prefix cut off


def read_pyrra(doc: dict, where: str, notes: Notes) -> list[Draft]:
    meta, spec = mapping(doc.get("metadata")), doc.get("spec")
    name = name_of(notes, meta, "name", join(where, "metadata.name"), "SLO")
    path = join(where, "spec")
    if not isinstance(spec, dict):
        raise notes.refuse(doc, path, "missing: a ServiceLevelObjective has a spec with target, window and indicator")
    objective: dict[str, object] = {"name": name}
    if spec.get("description"):
        objective["description"] = " ".join(text_of(spec["description"]).split())
    sli, group_by = _indicator(spec, f"{path}.indicator", notes)
    target = percent(spec.get("target")) if spec.get("target") is not None else None
    if target is None:
        raise notes.refuse(
            spec, f"{path}.target", f'{text_of(spec.get("target"))!r}: a target such as "99.9" is required'
        )
    match = re.fullmatch(r"(\d+)\s*([a-zA-Z])", text_of(spec.get("window")).strip())
    window = window_of(notes, spec, f"{path}.window", *(match.groups() if match else (spec.get("window"), "?")))
    labels, service = _labels(meta, join(where, "metadata.labels"), notes)
    annotations = _annotations(meta, join(where, "metadata.annotations"), notes)
    if annotations:
        objective["annotations"] = annotations
    if service is None:
        service = name
        notes.add(meta, join(where, "metadata.name"), f"Pyrra SLOs have no service: service {name} named after the SLO")
    _alerting(spec.get("alerting"), f"{path}.alerting", notes)
    for key in sorted(set(spec) - _KNOWN, key=str):
        if spec[key]:
            notes.add(
                spec,
                f"{path}.{key}",
                f"{text_of(spec[key])[:40]!r} not carried over: a setting of Pyrra's own rule generation",
            )
    return [
        Draft(
            service, {**objective, **sli, "target": target}, spec, path, window=window, group_by=group_by, labels=labels
        )
    ]


def _labels(meta: dict, field: str, notes: Notes) -> tuple[dict, str | None]:
    """Alert labels (Pyrra's `pyrra.dev/NAME` ones) and the service `pyrra.dev/service` names, if any."""
    raw = meta.get("labels")
    if not isinstance(raw, dict):
        return label_map(notes, meta, "labels", field), None
    service = None
    if raw.get(f"{_PREFIX}service") is not None:
        service = name_of(notes, raw, f"{_PREFIX}service", f"{field}.{_PREFIX}service", "service")
    rest = copy.copy(raw)  # keeps the lines its notes point at
    rest.pop(f"{_PREFIX}service", None)
    _others(rest, meta, field, "labels", notes)
    return label_map(notes, {"labels": rest}, "labels", field, _PREFIX), service


def _annotations(meta: dict, field: str, notes: Notes) -> dict:
    """Alert annotations: Pyrra's `pyrra.dev/NAME` ones, whose templates are only `{{ $labels.NAME }}`."""
    _others(meta.get("annotations"), meta, field, "annotations", notes)
    return {k: " ".join(v.split()) for k, v in annotation_map(notes, meta, "annotations", field, _PREFIX).items()}


def _others(raw, meta: dict, field: str, what: str, notes: Notes) -> None:
    others = [k for k in raw if not text_of(k).startswith(_PREFIX)] if isinstance(raw, dict) else []
    if others:
        notes.add(
            meta,
            field,
            f"({keys_text(others)}) not carried over: {what} of the Kubernetes resource, not "
            f"of alerts (Pyrra passes on only {_PREFIX}NAME {what})",
        )


def _indicator(spec: dict, path: str, notes: Notes) -> tuple[dict, tuple[str, ...]]:
    indicator = spec.get("indicator")
    if not isinstance(indicator, dict):
        indicator = {}
    for unsupported in ("latencyNative", "bool_gauge"):
        if indicator.get(unsupported):
            raise notes.refuse(
                indicator,
                f"{path}.{unsupported}",
                f"a {unsupported} indicator is not a count of events in counters; give a ratio or latency indicator",
            )
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
    if "bad" in sli and (hint := reads_as_success(queries[part], "errors metric")):
        notes.check(body, f"{path}.{kind}.{part}.metric", hint)
    grouping = listing(body.get("grouping"))
    return sli, tuple(sorted(set(group_by) | {text_of(g) for g in grouping}))


def _alerting(alerting, path: str, notes: Notes) -> None:
    if not isinstance(alerting, dict):
        return
    for key in ("disabled", "burnrates", "absent"):
        value = alerting.get(key)
        if value is not None and value is not (key != "disabled"):
            notes.add(
                alerting,
                f"{path}.{key}",
                f"{text_of(value)} not carried over: inferwatch generates every "
                "burn-rate tier and the missing-data alert; silence them in "
                "Alertmanager",
            )
    for key in ("name", "absentName", "severities"):
        if alerting.get(key):
            notes.add(
                alerting,
                f"{path}.{key}",
                "not carried over: inferwatch alerts are LLMErrorBudgetBurn and "
                "LLMSLIDataMissing, with tier and severity labels",
            )
