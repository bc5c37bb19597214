"""Prometheus relabeling, applied in Python to the series a mapping reads, so doctor can say what a scrape job's
`metric_relabel_configs` (or a monitor's `metricRelabelings`) do to them before any sample is scraped.

Semantics follow Prometheus' `model/relabel`: regexes are anchored, `source_labels` are joined by `separator`,
`replacement` expands `$1`, `${1}` and `$name`, an empty result of `replace` removes the target label. A regex that
Python cannot compile makes the whole list unknown (`None`), never a guess.
"""

from __future__ import annotations

import re

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



def _compiled(configs: list[dict]):
    steps = []
    for config in configs:
        if not isinstance(config, dict):
            return None
        config = snake(config)
        try:
            regex = re.compile(f"^(?:{config.get('regex', '(.*)')})$")
        except (re.error, TypeError):
            return None
        steps.append((config, regex))
    return steps


def _step(config: dict, regex: re.Pattern, labels: dict[str, str]) -> dict[str, str] | None:
    action = config.get("action", "replace")
    sources = config.get("source_labels") if isinstance(config.get("source_labels"), list) else []
    value = str(config.get("separator", ";")).join(labels.get(str(n), "") for n in sources)
    if action in ("keep", "drop"):
        return labels if (regex.match(value) is not None) == (action == "keep") else None
    if action in ("keepequal", "dropequal"):
        same = value == labels.get(str(config.get("target_label", "")), "")
        return labels if same == (action == "keepequal") else None
    if action in ("labeldrop", "labelkeep"):
        return {k: v for k, v in labels.items() if (regex.match(k) is None) == (action == "labeldrop")}
    if action == "labelmap":
        out = dict(labels)
        for key, val in labels.items():
            found = regex.match(key)
            if found:
                out[_expand(str(config.get("replacement", "$1")), found)] = val
        return out
    target = str(config.get("target_label", ""))
    if action in ("lowercase", "uppercase"):
        return {**labels, target: value.lower() if action == "lowercase" else value.upper()}
    if action == "hashmod":
        return {**labels, target: "0"}
    found = regex.match(value)
    if found is None:
        return labels
    name, result = _expand(target, found), _expand(str(config.get("replacement", "$1")), found)
    out = dict(labels)
    if result:
        out[name] = result
    else:
        out.pop(name, None)
    return out


def apply(configs: list[dict], labels: dict[str, str]) -> dict[str, str] | None | bool:
    """The series' labels (with `__name__`) after `configs`; None when dropped; False when the list cannot be read
    (an unknown action, a regex Python does not take)."""
    steps = _compiled(configs)
    if steps is None:
        return False
    for config, regex in steps:
        if config.get("action", "replace") not in _ACTIONS:
            return False
        labels = _step(config, regex, labels)
        if labels is None:
            return None
    return labels


_ACTIONS = ("replace", "keep", "drop", "keepequal", "dropequal", "labeldrop", "labelkeep", "labelmap", "lowercase",
            "uppercase", "hashmod")


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
