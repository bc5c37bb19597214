"""Turn grafanalib's output (schemaVersion 12, string datasources, legacy keys) into what Grafana 10.4-13 exports.

Each gap is one step below: datasource objects instead of strings, refIds and ids,
no legacy keys, current panel options.
The result validates against the grafana-foundation-sdk dashboard JSON Schema.
"""

from __future__ import annotations

import itertools
import json
import string

from grafanalib import core

__all__ = ["modern", "SCHEMA_VERSION", "DATASOURCE_REF", "LOKI_REF"]

SCHEMA_VERSION = 41
DATASOURCE_REF = {"type": "prometheus", "uid": "${datasource}"}
LOKI_REF = {"type": "loki", "uid": "${loki}"}
_REFS = {"${loki}": LOKI_REF}  # a datasource grafanalib wrote as a string -> its ref (else Prometheus)
_DASHBOARD_DROP = {"rows", "style", "hideControls", "sharedCrosshair", "__inputs", "__requires", "gnetId", "version"}
_TARGET_KEEP = {"expr", "legendFormat", "refId", "datasource", "instant", "range", "hide", "interval", "format"}
_PANEL_DROP = {
    "maxDataPoints",
    "span",
    "minSpan",
    "error",
    "editable",
    "height",
    "hideTimeOverride",
    "timeShift",
    "timeFrom",
    "repeat",
    "transparent",
    "cacheTimeout",
    "interval",
    "links",
    "repeatDirection",
    "maxPerRow",
}
_VARIABLE_KEEP = {
    "name",
    "label",
    "type",
    "query",
    "datasource",
    "current",
    "multi",
    "includeAll",
    "allValue",
    "refresh",
    "sort",
    "hide",
    "options",
    "regex",
    "definition",
    "description",
    "skipUrlSync",
}


def _drop_nulls(value):
    """Grafana writes absent settings as absent, not null (the schema agrees)."""
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


class _Encoder(json.JSONEncoder):
    """grafanalib objects know their own JSON."""

    def default(self, obj):
        return obj.to_json_data() if hasattr(obj, "to_json_data") else super().default(obj)


def _plain(obj) -> dict:
    return json.loads(json.dumps(obj.to_json_data(), cls=_Encoder))


def _ref(datasource) -> dict:
    return dict(_REFS.get(datasource, DATASOURCE_REF))


def _target(raw: dict, ref: str) -> dict:
    out = {k: v for k, v in raw.items() if k in _TARGET_KEEP and v not in (None, "")}
    out["refId"] = ref
    out["datasource"] = _ref(raw.get("datasource"))
    out.pop("hide", None)
    if out["datasource"]["type"] == "loki":  # Loki's dataquery: queryType, not the deprecated instant/range
        out.pop("instant", None)
        out.pop("format", None)
        out.update({"queryType": "range", "editorMode": "code"})
        return out
    instant = bool(raw.get("instant"))
    out["instant"], out["range"] = instant, not instant
    return out


def _panel(raw: dict, ids) -> dict:
    panel = {k: v for k, v in raw.items() if k not in _PANEL_DROP and v is not None}
    panel["id"] = panel_id = next(ids)
    if panel.get("type") == "row":
        return {
            "type": "row",
            "id": panel_id,
            "title": panel.get("title", ""),
            "gridPos": panel["gridPos"],
            "collapsed": bool(raw.get("collapsed")),
            "panels": [_panel(p, ids) for p in raw.get("panels", [])],
        }
    panel["datasource"] = _ref(raw.get("datasource"))
    panel["targets"] = [_target(t, string.ascii_uppercase[i]) for i, t in enumerate(raw.get("targets", []))]
    if panel.get("type") == "logs":  # the options current Grafana requires of a logs panel
        panel["options"].setdefault("showLogContextToggle", True)
    if panel.get("type") == "timeseries":
        panel.setdefault("options", {}).setdefault("legend", {})["showLegend"] = True
    if panel.get("type") == "stat":
        options = panel.setdefault("options", {})
        options["reduceOptions"] = {"calcs": ["lastNotNull"], "fields": "", "values": False}
        options.update({"wideLayout": True, "showPercentChange": False, "percentChangeColorMode": "standard"})
    if not panel.get("transformations"):
        panel.pop("transformations", None)
    panel = _drop_nulls(panel)
    defaults = panel.get("fieldConfig", {}).get("defaults", {})
    if defaults.get("noValue") == "none":
        defaults.pop("noValue")
    steps = defaults.get("thresholds", {}).get("steps", [])
    for i, step in enumerate(steps):  # the base step has value null; grafanalib writes "null"
        steps[i] = {"color": step["color"], "value": None if i == 0 else float(step["value"])}
    if defaults.get("thresholds") and not steps:
        defaults["thresholds"]["steps"] = [{"color": "green", "value": None}]
    return panel


def _variable(raw: dict) -> dict:
    var = {k: v for k, v in raw.items() if k in _VARIABLE_KEEP and v is not None}
    if var.get("type") == "datasource":
        var.update(
            {
                "query": var.get("query") or "prometheus",
                "refresh": 1,
                "current": {"text": "", "value": ""},
                "options": [],
                "hide": 0,
            }
        )
        var.pop("datasource", None)
        return var
    if var.get("type") == "textbox":
        value = var.get("query", "")
        var.update(
            {
                "query": value,
                "current": {"text": value, "value": value},
                "options": [{"selected": True, "text": value, "value": value}],
                "hide": 0,
            }
        )
        for key in ("datasource", "multi", "includeAll", "allValue", "refresh", "sort", "regex", "definition"):
            var.pop(key, None)
        return var
    var["datasource"] = dict(DATASOURCE_REF)
    var["definition"] = var.get("query", "")
    var["query"] = var.get("query", "")
    var["current"] = {"selected": True, "text": ["All"], "value": ["$__all"]}
    var["options"] = []
    var["refresh"] = 2
    return var


def modern(dashboard: core.Dashboard) -> dict:
    """The dashboard as current Grafana JSON: schemaVersion 41, datasource refs, explicit refIds and ids."""
    raw = _plain(dashboard)
    out = {k: v for k, v in raw.items() if k not in _DASHBOARD_DROP and v is not None}
    out["schemaVersion"] = SCHEMA_VERSION
    out["graphTooltip"] = 1  # shared crosshair
    out["editable"] = True
    out["fiscalYearStartMonth"] = 0
    out["id"] = None
    ids = itertools.count(1)  # top-level panels first, then those of collapsed rows
    top = [(p, next(ids)) for p in raw.get("panels", [])]
    out["panels"] = [_panel(p, itertools.chain([i], ids)) for p, i in top]
    out["templating"] = {"list": [_variable(v) for v in raw.get("templating", {}).get("list", [])]}
    out["annotations"] = {
        "list": [
            {
                "builtIn": 1,
                "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                "enable": True,
                "hide": True,
                "iconColor": "rgba(0, 211, 255, 1)",
                "name": "Annotations & Alerts",
                "type": "dashboard",
            }
        ]
    }
    out["timepicker"] = {}
    out["links"] = [{k: v for k, v in link.items() if k != "url" or v} for link in raw.get("links", [])]
    return out
