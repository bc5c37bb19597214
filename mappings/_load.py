"""Read the catalog and mapping files into frozen data, collecting every problem."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from inferwatch.errors import InferwatchError, Problem, SpecError
from inferwatch.mappings._model import (
    METRIC_TYPES,
    Catalog,
    CatalogMetric,
    Entry,
    LabelRule,
    SourceMapping,
)
from inferwatch.resources import data_path
from inferwatch.yamlio import Problems, load_document

__all__ = ["HERE", "load_catalog", "load_mapping", "builtin_mapping_paths", "load_mappings", "select_source"]

HERE = data_path("inferwatch.mappings")  # catalog.yaml, sources/*.yaml, generated/ (written by `inferwatch build`)
CATALOG_PATH = HERE / "catalog.yaml"
SOURCES_DIR = HERE / "sources"

METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
SOURCE_ID = re.compile(r"[a-z0-9][a-z0-9_-]*\Z")

MAPPING_KEYS = (
    "version",
    "source",
    "detect",
    "labels",
    "set_labels",
    "blank_at_or_above",
    "metrics",
    "verified",
    "ignored",
)
ENTRY_KEYS = ("name", "from", "multiply", "divide", "bit", "match", "drop_labels", "labels", "set_labels", "note")
CATALOG_KEYS = ("name", "type", "unit", "concept", "help")
# Labels Prometheus reads as part of a histogram's or a summary's samples, and what they hold there. A mapping
# may not write them (`le="fast"` fails the whole scrape), nor take them off an entry of that type.
BOUND_LABELS = {"le": ("histogram", "bucket bound", "buckets"), "quantile": ("summary", "quantile", "quantiles")}


def _names(value: Any, col: Problems, node: Any, field: str, pattern: re.Pattern, what: str) -> tuple[str, ...]:
    """A string or list of strings, each matching `pattern`."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        col.add(node, field, f"expected a {what} or a non-empty list of them")
        return ()
    for item in items:
        if not isinstance(item, str) or not pattern.match(item):
            col.add(node, field, f"{item!r} is not a valid {what}")
            return ()
    return tuple(items)


def _written_bounds(value: Any, col: Problems, field: str) -> None:
    """`le` or `quantile` as a label a mapping writes (a `set_labels` key, a `labels` target): refused."""
    for key in value if isinstance(value, dict) else ():
        if key in BOUND_LABELS:
            mtype, what, _ = BOUND_LABELS[key]
            col.add(
                value,
                f"{field}.{key}",
                f"a mapping may not write {key}: Prometheus reads it as the {what} "
                f"of a {mtype} and rejects the whole scrape when it is not a number; use another label name",
                key,
            )


def _removed_bounds(
    removed: dict[str, str], entries: list[tuple[str, str]], col: Problems, node: Any, field: str
) -> None:
    """`le` or `quantile` taken off (`removed`: label -> what is done to it) an entry of the type that needs it.

    `entries`: (common name, type) of the entries the rule applies to; the first one it would break is named.
    """
    for label, how in removed.items():
        mtype, _, parts = BOUND_LABELS.get(label, (None, None, None))
        broken = next((name for name, t in entries if t == mtype), None)
        if broken:
            col.add(
                node, field, f"{how} breaks {mtype} {broken}: its {parts} would collide as one series; keep {label}"
            )


def _matched_bounds(value: Any, name: str, mtype: str, col: Problems, field: str) -> None:
    """`le` or `quantile` in the `match` of an entry of the type that needs it: refused. The filter keeps some
    buckets (quantiles) and none of `_sum` and `_count`, which carry no such label: a partial family that
    Prometheus accepts without a word."""
    for key in value if isinstance(value, dict) else ():
        if key in BOUND_LABELS and BOUND_LABELS[key][0] == mtype:
            _, _, parts = BOUND_LABELS[key]
            col.add(
                value,
                f"{field}.{key}",
                f"matching {key} keeps only some {parts} of {mtype} {name} and drops "
                f"its _sum and _count: Prometheus accepts the partial {mtype} and what is read from it "
                "silently goes wrong; match on other labels only",
                key,
            )


def _label_rules(value: Any, col: Problems, node: Any, field: str) -> tuple[LabelRule, ...]:
    _written_bounds(value, col, field)
    if value is None:
        return ()
    if not isinstance(value, dict):
        col.add(node, field, "expected a mapping of target label to source labels, e.g. {model: [model_name]}")
        return ()
    rules = []
    for target, candidates in value.items():
        if not LABEL_NAME.match(str(target)):
            col.add(value, f"{field}.{target}", "is not a valid label name")
            continue
        names = _names(candidates, col, value, f"{field}.{target}", LABEL_NAME, "label name")
        if names:
            rules.append(LabelRule(str(target), names))
    return tuple(rules)


def _renamed_away(rule: LabelRule) -> dict[str, str]:
    """The candidates a rename takes off the series (all but its target), as `_removed_bounds` wants them."""
    return {c: f"renaming {c} to {rule.target}" for c in rule.candidates if c != rule.target}


def _ignored(value: Any, col: Problems, node: Any) -> tuple[tuple[str, str], ...]:
    """Source family -> why it is left out: a family a real engine exposes that carries no meaning for the
    vocabulary, so a new one can be told from one nobody looked at."""
    if value is None:
        return ()
    if not isinstance(value, dict):
        col.add(node, "ignored", "expected a mapping of source family name to the reason it is left out")
        return ()
    pairs = []
    for name, reason in value.items():
        if not isinstance(reason, str) or not reason.strip():
            col.add(value, f"ignored.{name}", "needs the reason it is left out, as text")
            continue
        pairs.append((str(name), reason))
    return tuple(pairs)


def _string_map(value: Any, col: Problems, node: Any, field: str, writes: bool = True) -> tuple[tuple[str, str], ...]:
    """Label name -> value; `writes`: the labels are set on series (so `le` and `quantile` are refused)."""
    if writes:
        _written_bounds(value, col, field)
    if value is None:
        return ()
    if not isinstance(value, dict):
        col.add(node, field, "expected a mapping of label name to value")
        return ()
    pairs = []
    for key, val in value.items():
        if not LABEL_NAME.match(str(key)):
            col.add(value, f"{field}.{key}", "is not a valid label name")
        elif not isinstance(val, (str, int, float)) or isinstance(val, bool):
            col.add(value, f"{field}.{key}", "expected a string value")
        else:
            pairs.append((str(key), str(val)))
    return tuple(sorted(pairs))


def _number(value: Any) -> float | None:
    """A YAML number; also a string like '9.2e18', which YAML 1.1 does not read as a float."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _factor(node: dict, key: str, col: Problems, field: str) -> float | None:
    if node.get(key) is None:
        return None
    value = _number(node[key])
    if value is None or value <= 0:
        col.add(node, f"{field}{key}", f"expected a positive number, got {node[key]!r}")
        return None
    return value


def _bit(node: dict, mtype: str, scaled: bool, col: Problems, field: str) -> int | None:
    """`bit: 0x4`: the value of one bit of an integer bitmask (a power of two, as C headers write flags)."""
    value = node.get("bit")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0 or value & (value - 1):
        col.add(node, f"{field}bit", f"expected the bit's value, a power of two such as 0x4, got {value!r}")
        return None
    if mtype != "gauge":
        col.add(node, f"{field}bit", f"a bit is 0 or 1, a gauge; this name is a {mtype}")
    if scaled:
        col.add(node, f"{field}bit", "give either bit or multiply/divide, not both")
    return value


def load_catalog(path: Path | str = CATALOG_PATH) -> Catalog:
    """Load the common vocabulary."""
    loaded = load_document(path)
    col, doc = Problems(loaded.file, loaded.positions), loaded.data
    metrics: dict[str, CatalogMetric] = {}
    items = doc.get("metrics") if isinstance(doc, dict) else None
    if not isinstance(items, list):
        col.add(doc, "metrics", "expected a list of metrics")
        raise SpecError(col.problems)
    for i, item in enumerate(items):
        field = f"metrics[{i}]."
        if not isinstance(item, dict):
            col.add(doc, field, "expected a mapping")
            continue
        col.unknown_keys(item, CATALOG_KEYS, field)
        missing = [k for k in CATALOG_KEYS if not isinstance(item.get(k), str)]
        for key in missing:
            col.add(item, field + key, "required string")
        if missing:
            continue
        if item["type"] not in METRIC_TYPES:
            col.add(item, field + "type", f"must be one of {', '.join(METRIC_TYPES)}")
        if item["name"] in metrics:
            col.add(item, field + "name", f"{item['name']} is listed twice")
        metrics[item["name"]] = CatalogMetric(**{k: item[k] for k in CATALOG_KEYS})
    col.raise_if_any()
    return Catalog(metrics)


def _entry(item: Any, i: int, catalog: Catalog, col: Problems) -> Entry | None:
    field = f"metrics[{i}]."
    if not isinstance(item, dict):
        col.add(item, field, "expected a mapping with at least `name` and `from`")
        return None
    name = item.get("name")
    label = f"metrics[{i}] ({name})." if isinstance(name, str) else field
    col.unknown_keys(item, ENTRY_KEYS, label)
    if not isinstance(name, str):
        col.add(item, field + "name", "required: a name from the vocabulary")
        return None
    if name not in catalog:
        hint = difflib.get_close_matches(name, list(catalog.metrics), n=1)
        also = f"; did you mean '{hint[0]}'?" if hint else ""
        col.add(item, label + "name", f"'{name}' is not in the vocabulary{also} (list: inferwatch mappings catalog)")
        return None
    if "from" not in item:
        col.add(item, label + "from", "required: the source metric name, or a list with the preferred name first")
        return None
    sources = _names(item["from"], col, item, label + "from", METRIC_NAME, "metric name")
    multiply = _factor(item, "multiply", col, label)
    divide = _factor(item, "divide", col, label)
    mtype = catalog[name].type
    if multiply is not None and divide is not None:
        col.add(item, label + "multiply", "give either multiply or divide, not both")
    if mtype == "histogram" and (multiply is not None or divide is not None):
        col.add(item, label + "multiply", "a histogram cannot be scaled: its `le` boundaries would need scaling too")
    bit = _bit(item, mtype, multiply is not None or divide is not None, col, label)
    drop = item.get("drop_labels") or []
    drop_labels = _names(drop, col, item, label + "drop_labels", LABEL_NAME, "label name") if drop else ()
    labels = _label_rules(item.get("labels"), col, item, label + "labels")
    _removed_bounds({d: f"dropping {d}" for d in drop_labels}, [(name, mtype)], col, item, label + "drop_labels")
    for rule in labels:
        _removed_bounds(_renamed_away(rule), [(name, mtype)], col, item.get("labels"), f"{label}labels.{rule.target}")
    _matched_bounds(item.get("match"), name, mtype, col, label + "match")
    note = item.get("note", "")
    if not isinstance(note, str):
        col.add(item, label + "note", "expected a string")
        note = ""
    return Entry(
        name=name,
        type=mtype,
        sources=sources,
        multiply=multiply,
        divide=divide,
        match=_string_map(item.get("match"), col, item, label + "match", writes=False),
        drop_labels=drop_labels,
        labels=labels,
        set_labels=_string_map(item.get("set_labels"), col, item, label + "set_labels"),
        bit=bit,
        note=note,
        line=col.line(item),
    )


def load_mapping(path: Path | str, catalog: Catalog, text: str | None = None) -> SourceMapping:
    """Load and validate one mapping file; every problem is reported at once."""
    path = str(path)
    loaded = load_document(path, text)
    col, doc = Problems(path, loaded.positions), loaded.data
    if not isinstance(doc, dict):
        col.add(doc, "", "expected a mapping with `version`, `source` and `metrics` (see mappings/README.md)")
        col.raise_if_any()
    col.unknown_keys(doc, MAPPING_KEYS, "")
    if doc.get("version") != 1:
        col.add(doc, "version", f"must be 1, got {doc.get('version')!r}")
    source = doc.get("source")
    if not isinstance(source, str) or not SOURCE_ID.match(source):
        col.add(doc, "source", "required: a short lower-case id such as 'tgi' or 'trtllm'")
    detect = _names(doc.get("detect"), col, doc, "detect", re.compile(r".+"), "name prefix") if "detect" in doc else ()
    if "detect" not in doc:
        col.add(doc, "detect", "required: family-name prefixes that identify this source, e.g. ['tgi_']")
    blank = _number(doc.get("blank_at_or_above"))
    if doc.get("blank_at_or_above") is not None and blank is None:
        col.add(doc, "blank_at_or_above", f"expected a number, got {doc['blank_at_or_above']!r}")
    items = doc.get("metrics")
    entries: list[Entry] = []
    if not isinstance(items, list) or not items:
        col.add(doc, "metrics", "required: a non-empty list of {name, from} entries")
    else:
        for i, item in enumerate(items):
            entry = _entry(item, i, catalog, col)
            if entry is not None:
                entries.append(entry)
    labels = _label_rules(doc.get("labels"), col, doc, "labels")
    set_labels = _string_map(doc.get("set_labels"), col, doc, "set_labels")
    ignored = _ignored(doc.get("ignored"), col, doc)
    for name in set(dict(ignored)) & {n for e in entries for n in e.sources}:
        col.add(doc.get("ignored"), f"ignored.{name}", "is mapped in metrics: drop it from one of the two")
    verified = doc.get("verified")
    if verified is not None and not (isinstance(verified, list) and all(isinstance(v, str) for v in verified)):
        col.add(doc, "verified", "expected a list of releases checked against a real engine, e.g. ['0.32.0']")
    for rule in labels:  # the mapping's renames apply to every entry
        _removed_bounds(
            _renamed_away(rule), [(e.name, e.type) for e in entries], col, doc.get("labels"), f"labels.{rule.target}"
        )
    _check_entries(entries, col)
    col.raise_if_any()
    return SourceMapping(
        source=source,
        path=path,
        detect=detect,
        labels=labels,
        set_labels=set_labels,
        entries=tuple(entries),
        blank_at_or_above=blank,
        ignored=ignored,
        verified=tuple(verified or ()),
    )


def _check_entries(entries: list[Entry], col: Problems) -> None:
    """Cross-entry rules: one entry per common name and label filter or fixed labels."""
    seen: dict[tuple[str, tuple, tuple], Entry] = {}
    for entry in entries:
        key = (entry.name, entry.match, entry.set_labels)
        if key in seen:
            first = seen[key]
            col.problems.append(
                Problem(
                    col.file,
                    entry.line,
                    f"metrics ({entry.name})",
                    f"maps {entry.name} a second time (first at line {first.line}); "
                    "list older names as aliases in one `from` list instead",
                )
            )
        seen[key] = entry


def builtin_mapping_paths() -> list[Path]:
    """The mapping files shipped with inferwatch, in a fixed order."""
    return sorted(SOURCES_DIR.glob("*.yaml"))


def load_mappings(extra: Sequence[Path | str] = (), catalog: Catalog | None = None) -> list[SourceMapping]:
    """The built-in mappings followed by any user mapping files."""
    catalog = catalog or load_catalog()
    problems: list[Problem] = []
    mappings = []
    for path in [*builtin_mapping_paths(), *extra]:
        try:
            mappings.append(load_mapping(path, catalog))
        except SpecError as err:
            problems.extend(err.problems)
    if problems:
        raise SpecError(problems)
    return mappings


def select_source(mappings: list[SourceMapping], source: str) -> SourceMapping:
    """The mapping with this source id (a later user file overrides a built-in one)."""
    found = [m for m in mappings if m.source == source]
    if not found:
        known = ", ".join(m.source for m in mappings)
        raise InferwatchError(f"unknown source {source!r}; known sources: {known}")
    return found[-1]
