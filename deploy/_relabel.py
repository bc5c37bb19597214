"""Prometheus relabeling, applied in Python to the series a mapping reads, so doctor can say what a scrape job's
`metric_relabel_configs` (or a monitor's `metricRelabelings`) do to them before any sample is scraped.

Semantics follow Prometheus' `model/relabel`: regexes are anchored, `source_labels` are joined by `separator`,
`replacement` expands `$1`, `${1}` and `$name`, an empty result of `replace` removes the target label. A regex that
Python cannot compile, or an action Prometheus does not know, makes the whole list unknown (`apply` answers False),
never a guess.
"""

from __future__ import annotations

import re
from typing import Literal

__all__ = ["apply", "snake", "samples"]

_CAMEL = {"sourceLabels": "source_labels", "targetLabel": "target_label"}
_EXPAND = re.compile(r"\$(?:\$|\{(\w+)\}|(\w+))")


def snake(config: dict) -> dict:
    """A ServiceMonitor's camelCase relabeling as Prometheus spells it; actions lower-cased (the CRD takes both)."""
    out = {_CAMEL.get(k, k): v for k, v in config.items()}
    if isinstance(out.get("action"), str):
        out["action"] = out["action"].lower()
    return out


def _expand(template: str, match: re.Match) -> str:
    """`replacement` (or a `target_label`) with `$1`, `${1}`, `$name` filled from `match`; `$$` is a dollar."""

    def one(found: re.Match) -> str:
        if found.group(0) == "$$":
            return "$"
        name = found.group(1) or found.group(2)
        try:
            value = match.group(int(name)) if name.isdigit() else match.group(name)
        except IndexError:
            return ""
        return value or ""

    return _EXPAND.sub(one, template)


def _value(config: dict, labels: dict[str, str]) -> str:
    """The `source_labels` values joined by `separator`, which the regex is matched against."""
    sources = config.get("source_labels")
    if not isinstance(sources, list):
        sources = []
    return str(config.get("separator", ";")).join(labels.get(str(n), "") for n in sources)


def _keep_or_drop(config: dict, regex: re.Pattern, labels: dict[str, str]) -> dict[str, str] | None:
    keep = config["action"] == "keep"
    return labels if (regex.match(_value(config, labels)) is not None) == keep else None


def _keep_or_drop_equal(config: dict, regex: re.Pattern, labels: dict[str, str]) -> dict[str, str] | None:
    same = _value(config, labels) == labels.get(str(config.get("target_label", "")), "")
    return labels if same == (config["action"] == "keepequal") else None


def _label_drop_or_keep(config: dict, regex: re.Pattern, labels: dict[str, str]) -> dict[str, str]:
    drop = config["action"] == "labeldrop"
    return {k: v for k, v in labels.items() if (regex.match(k) is None) == drop}


def _label_map(config: dict, regex: re.Pattern, labels: dict[str, str]) -> dict[str, str]:
    out = dict(labels)
    for key, val in labels.items():
        found = regex.match(key)
        if found:
            out[_expand(str(config.get("replacement", "$1")), found)] = val
    return out


def _case(config: dict, regex: re.Pattern, labels: dict[str, str]) -> dict[str, str]:
    value = _value(config, labels)
    return {
        **labels,
        str(config.get("target_label", "")): value.lower() if config["action"] == "lowercase" else value.upper(),
    }


def _hashmod(config: dict, regex: re.Pattern, labels: dict[str, str]) -> dict[str, str]:
    """Any bucket will do: doctor asks what happens to a series' name and labels, not to which shard it goes."""
    return {**labels, str(config.get("target_label", "")): "0"}


def _replace(config: dict, regex: re.Pattern, labels: dict[str, str]) -> dict[str, str]:
    found = regex.match(_value(config, labels))
    if found is None:
        return labels
    name = _expand(str(config.get("target_label", "")), found)
    result = _expand(str(config.get("replacement", "$1")), found)
    out = dict(labels)
    if result:
        out[name] = result
    else:
        out.pop(name, None)
    return out


# every action Prometheus knows; another one makes the whole list unreadable
_ACTIONS = {
    "replace": _replace,
    "keep": _keep_or_drop,
    "drop": _keep_or_drop,
    "keepequal": _keep_or_drop_equal,
    "dropequal": _keep_or_drop_equal,
    "labeldrop": _label_drop_or_keep,
    "labelkeep": _label_drop_or_keep,
    "labelmap": _label_map,
    "lowercase": _case,
    "uppercase": _case,
    "hashmod": _hashmod,
}


def _compiled(configs: list[dict]) -> list[tuple[dict, re.Pattern]] | None:
    """(config with its action spelled out, anchored regex) per step; None when one cannot be read."""
    steps = []
    for config in configs:
        if not isinstance(config, dict):
            return None
        config = snake(config)
        config.setdefault("action", "replace")
        if not isinstance(config["action"], str) or config["action"] not in _ACTIONS:
            return None
        pattern = config.get("regex", "(.*)")
        if isinstance(pattern, (bool, list, dict)) or pattern is None:
            return None  # Prometheus reads a regex from a scalar only
        try:
            regex = re.compile(f"^(?:{pattern})$")
        except re.error:
            return None
        steps.append((config, regex))
    return steps


def apply(configs: list[dict], labels: dict[str, str]) -> dict[str, str] | None | Literal[False]:
    """The series' labels (with `__name__`) after `configs`; None when dropped; False when the list cannot be read
    (an unknown action, a regex Python does not take), as doctor then says nothing rather than guess."""
    steps = _compiled(configs)
    if steps is None:
        return False
    for config, regex in steps:
        after = _ACTIONS[config["action"]](config, regex, labels)
        if after is None:
            return None
        labels = after
    return labels


def samples(mapping) -> list[tuple[str, dict[str, str], dict[str, str]]]:
    """(common name, one series as the source exposes it, {label the mapping reads: the name it renames it to})
    for each entry: the preferred source name, histograms as a `_bucket` series, labels from its label rules."""
    out = []
    for entry in mapping.entries:
        labels, needed = {}, {}
        for rule in (*mapping.labels, *entry.labels):
            key = rule.target if rule.target in rule.candidates else rule.candidates[0]
            labels[key], needed[key] = "x", rule.target
        for key, value in entry.match:
            labels[key] = value
        name = entry.sources[0] + ("_bucket" if entry.type == "histogram" else "")
        if entry.type == "histogram":
            labels["le"], needed["le"] = "1", "le"
        out.append((entry.name, {"__name__": name, **labels}, needed))
    return out
