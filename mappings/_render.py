"""Renderers 2 and 3 of the mappings: scrape-time relabeling and recording rules.

Relabeling is the cheapest path (no extra series) but can only rename. So:

* relabel configs rename the labels of every mapped series, set the mapping's
  fixed labels (engine="vllm"), drop the `_created` companions of mapped
  families, and rename a metric when its entry is a plain rename;
* recording rules produce everything else from the (already relabeled) source
  series: scaled values, one bit of a bitmask, filtered or label-dropped copies,
  copies with fixed labels (ECC errors by `type`), a second common name read
  from the same source, and names with older aliases (`new or old`,
  so a scrape that emits both yields each series once). Each common name is
  recorded by one rule, across all sources.

Both together yield the same common series as `inferwatch normalize`.
"""

from __future__ import annotations

import re

from inferwatch.mappings._model import Entry, LabelRule, SourceMapping

__all__ = ["relabel_configs", "servicemonitor_relabelings", "recording_rules", "renamed_by_relabel", "as_values"]

_HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def _name_re(name: str) -> str:
    """A regex for a source name in either spelling (`vllm:x` or sanitized `vllm_x`)."""
    return "[:_]".join(re.escape(part) for part in name.split(":"))


def _alternation(names: list[str]) -> str:
    return names[0] if len(names) == 1 else "(?:" + "|".join(names) + ")"


def renamed_by_relabel(mapping: SourceMapping, entry: Entry) -> bool:
    """Whether relabeling alone can produce this entry (a plain one-to-one rename)."""
    if entry.reshaped or len(entry.sources) != 1:
        return False
    if mapping.blank_at_or_above is not None:
        return False  # blanks must be filtered by value, which relabeling cannot do
    users = [e for e in mapping.entries if entry.sources[0] in e.sources]
    return len(users) == 1


def _series_re(names: list[str], types: list[str]) -> str:
    alts = []
    for name, mtype in zip(names, types, strict=True):
        suffix = "(?:_bucket|_sum|_count)" if mtype == "histogram" else ""
        alts.append(_name_re(name) + suffix)
    return _alternation(alts)


def _label_steps(rule: LabelRule, series: str) -> list[dict]:
    """Copy the first present candidate into the target, then clear the other candidates."""
    steps = []
    for i, cand in enumerate(rule.candidates):
        if cand == rule.target:
            continue
        steps.append(
            {
                "source_labels": ["__name__", *rule.candidates[: i + 1]],
                "regex": series + ";" * i + ";(.+)",
                "target_label": rule.target,
                "replacement": "$1",
            }
        )
    for cand in rule.candidates:
        if cand != rule.target:
            steps.append({"source_labels": ["__name__"], "regex": series, "target_label": cand, "replacement": ""})
    return steps


def _created_re(mapping: SourceMapping) -> str:
    bases = []
    for entry in mapping.entries:
        for src in entry.sources:
            base = src[: -len("_total")] if entry.type == "counter" and src.endswith("_total") else src
            if entry.type in ("counter", "histogram") and _name_re(base) not in bases:
                bases.append(_name_re(base))
    return _alternation(bases) + "_created" if bases else ""


def _mapping_relabels(mapping: SourceMapping) -> list[dict]:
    entries_by_source: dict[str, Entry] = {}
    for entry in mapping.entries:
        for src in entry.sources:
            entries_by_source.setdefault(src, entry)
    names = list(entries_by_source)
    series = _series_re(names, [entries_by_source[n].type for n in names])
    steps: list[dict] = []
    created = _created_re(mapping)
    if created:
        steps.append({"source_labels": ["__name__"], "regex": created, "action": "drop"})
    for rule in mapping.labels:
        steps.extend(_label_steps(rule, series))
    for entry in mapping.entries:
        for rule in entry.labels:
            steps.extend(_label_steps(rule, _series_re(list(entry.sources), [entry.type] * len(entry.sources))))
    for key, value in mapping.set_labels:
        steps.append({"source_labels": ["__name__"], "regex": series, "target_label": key, "replacement": value})
    for entry in mapping.entries:
        if not renamed_by_relabel(mapping, entry):
            continue
        src = _name_re(entry.sources[0])
        if entry.type == "histogram":
            steps.append(
                {
                    "source_labels": ["__name__"],
                    "regex": f"{src}(_bucket|_sum|_count)",
                    "target_label": "__name__",
                    "replacement": f"{entry.name}${{1}}",
                }
            )
        else:
            steps.append(
                {"source_labels": ["__name__"], "regex": src, "target_label": "__name__", "replacement": entry.name}
            )
    return steps


def relabel_configs(mappings: list[SourceMapping]) -> list[dict]:
    """`metric_relabel_configs` for a Prometheus scrape job."""
    return [step for mapping in mappings for step in _mapping_relabels(mapping)]


_OPERATOR_KEYS = {"source_labels": "sourceLabels", "target_label": "targetLabel"}


def servicemonitor_relabelings(mappings: list[SourceMapping]) -> list[dict]:
    """The same steps as Prometheus Operator `metricRelabelings` (camelCase keys)."""
    return [{_OPERATOR_KEYS.get(k, k): v for k, v in step.items()} for step in relabel_configs(mappings)]


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)


def _selector(name: str, matchers: tuple[tuple[str, str], ...] = ()) -> str:
    parts = [f'__name__=~"{_name_re(name)}"'] if ":" in name else []
    parts += [f'{k}="{v}"' for k, v in matchers]
    if not parts:
        return name
    head = "" if ":" in name else name
    return head + "{" + ", ".join(parts) + "}"


def as_values(mapping: SourceMapping, entry: Entry, expr: str, blank: bool = True) -> str:
    """`expr`, the entry's source series, as the entry's values in PromQL: blank sentinels left out (`blank`;
    not on a rate), labels dropped, scaled or one bit taken. The recording rules do this; so does triage when
    it reads a Prometheus that holds only the sources' names."""
    if blank and mapping.blank_at_or_above is not None:
        bare = " or " not in expr
        expr = f"{expr if bare else f'({expr})'} < {mapping.blank_at_or_above:g}"
    for label in entry.drop_labels:
        expr = f'label_replace({expr}, "{label}", "", "", "")'
    if entry.multiply is not None:
        expr = f"({expr}) * {_number(entry.multiply)}"
    elif entry.divide is not None:
        expr = f"({expr}) / {_number(entry.divide)}"
    elif entry.bit is not None:
        expr = f"floor(({expr}) / {entry.bit}) % 2"
    return expr


def _expr(mapping: SourceMapping, entry: Entry, suffix: str) -> str:
    expr = as_values(mapping, entry, " or ".join(_selector(src + suffix, entry.match) for src in entry.sources))
    for key, value in entry.set_labels:
        expr = f'label_replace({expr}, "{key}", "{value}", "", "")'
    return expr


def recording_rules(mappings: list[SourceMapping]) -> dict:
    """A Prometheus rule file for what relabeling cannot do: one rule per common name.

    A name recorded from several sources (SGLang's and vLLM's queue time) is one
    rule, the sources' expressions joined by `or` (their series differ in `engine`):
    promtool rejects two rules recording the same name. Each group holds the names
    of one set of sources, `inferwatch-mappings-<source>[-<source>...]`, in mapping order.
    """
    parts: dict[str, list[tuple[str, str]]] = {}  # record name -> [(source, expression)]
    for mapping in mappings:
        for entry in mapping.entries:
            if renamed_by_relabel(mapping, entry):
                continue
            for suffix in _HISTOGRAM_SUFFIXES if entry.type == "histogram" else ("",):
                parts.setdefault(entry.name + suffix, []).append((mapping.source, _expr(mapping, entry, suffix)))
    groups: dict[tuple[str, ...], list[dict]] = {}
    for name, exprs in parts.items():
        sources = tuple(dict.fromkeys(source for source, _ in exprs))
        groups.setdefault(sources, []).append({"record": name, "expr": " or ".join(expr for _, expr in exprs)})
    order = {m.source: i for i, m in enumerate(mappings)}
    return {
        "groups": [
            {"name": "inferwatch-mappings-" + "-".join(sources), "rules": rules}
            for sources, rules in sorted(groups.items(), key=lambda g: [order[s] for s in g[0]])
        ]
    }
