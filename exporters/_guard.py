"""What the exporter serves must parse, whatever a target sends.

Prometheus rejects a whole scrape for one line it cannot read, so one target's
OpenMetrics-only family or duplicate label would cost every target its data.
`check_families` keeps what Prometheus and promtool's stricter parser accept and
drops the rest per family (a line that did not parse, an OpenMetrics-only type)
or per sample (too many labels, a reserved or repeated label name, a histogram
`le` that is not a number), counting each by reason. Canonical bodies are
checked by their distinct label-name sets, at C speed, not line by line.

promtool files a sample under a histogram or summary by its name, wherever
the line is: a stray `x_bucket` line after another family, or in another
target's body, is read as a bucket of histogram `x`. So `le` is checked on
every sample named like a histogram's (`_bucket`, `_sum`, `_count`) and on
every sample of a family that shares its name with a histogram of the scrape;
`quantile` likewise for summaries (`_sum`, `_count`).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from inferwatch.exporters._exposition import SUFFIXES, Family, Sample, format_sample, is_float

__all__ = ["Checked", "check_families", "DROP_REASONS", "DEFAULT_MAX_LABELS", "names_used", "ALLOWED_SUFFIXES"]

DEFAULT_MAX_LABELS = 64
OPENMETRICS_ONLY = ("info", "stateset", "gaugehistogram")
# Sample names a family of each type may hold (promtool files any other under a family of its own).
ALLOWED_SUFFIXES = {"histogram": ("", "_bucket", "_sum", "_count"), "summary": ("", "_sum", "_count")}
SPECIAL_LABEL = {"histogram": "le", "summary": "quantile"}
DROP_REASONS = {
    "invalid_line": "a line of the family did not parse: the family is left out",
    "openmetrics_type": "an OpenMetrics-only type (info, stateset, gaugehistogram): the family is left out",
    "label_limit": "a sample with more labels than --max-labels",
    "invalid_labels": "a sample with a repeated or reserved (__name__) label name",
    "invalid_sample": "a sample whose name or le/quantile does not fit its histogram or summary",
    "conflict": "a family whose name or type clashes with another target's or the exporter's own",
}
# Sample names promtool reads as part of a histogram or summary `x` served anywhere in the same text.
SPECIAL_SUFFIXES = {"le": ("_bucket", "_sum", "_count"), "quantile": ("_sum", "_count")}
_SIGNATURE = re.compile(r'="[^"\n]*+"| [^\n]*+')  # label values, then value and timestamp
# In a canonical body every `le="v"` or `quantile="v"` is matched (a match that starts inside another
# value ends at its closing quote, so what it reads is never a number): a superset of the suspects.
_SPECIAL_VALUE = re.compile(r'[{,](le|quantile)="([^"\n]*+)"')


@dataclass
class Checked:
    """The families that may be served, what was dropped by reason, and the first problem met."""

    families: list[Family]
    dropped: Counter = field(default_factory=Counter)
    problem: str | None = None


def names_used(name: str, body: str) -> set[str]:
    """The sample names in a family body (its name, or its name plus a suffix)."""
    text = "\n" + body
    return {name + s for s in ("", *SUFFIXES) if f"\n{name}{s}{{" in text or f"\n{name}{s} " in text}


def _labels_ok(names: list[str], max_labels: int) -> str | None:
    """Why a sample with these label names may not be served, or None."""
    if max_labels and len(names) > max_labels:
        return "label_limit"
    if "__name__" in names or len(set(names)) != len(names):
        return "invalid_labels"
    return None


def _signature_problem(signature: str, fam: Family, max_labels: int) -> str | None:
    """`name{a,b}` (a canonical line with values stripped): why it may not be served, or None."""
    name, _, labels = signature.partition("{")
    problem = _labels_ok(labels[:-1].split(",") if labels else [], max_labels)
    if problem:
        return problem
    allowed = ALLOWED_SUFFIXES.get(fam.type or "")
    if allowed and name[len(fam.name) :] not in allowed:
        return "invalid_sample"
    return None


def _bad_special(sample: Sample, family_keys: frozenset[str]) -> bool:
    """Whether the sample carries an `le` or `quantile` that promtool would parse as a number, and is not one."""
    keys = family_keys.union(k for k, ends in SPECIAL_SUFFIXES.items() if sample.name.endswith(ends))
    return bool(keys) and any(k in keys and not is_float(v) for k, v in sample.labels)


def _suspect_special(body: str) -> bool:
    """Whether a canonical body may hold an `le` or `quantile` that is not a number (cheap superset)."""
    if 'le="' not in body and 'quantile="' not in body:
        return False
    return any(not is_float(v) for v in {v for _, v in _SPECIAL_VALUE.findall(body)})


def _check_canonical(fam: Family, family_keys: frozenset[str], max_labels: int, dropped: Counter) -> None:
    if _suspect_special(fam.body):
        _check_parsed(fam, family_keys, max_labels, dropped)  # rare: decide sample by sample, exactly
        return
    signatures = set(_SIGNATURE.sub("", fam.body).split("\n"))
    signatures.discard("")
    bad = {s: p for s in signatures if (p := _signature_problem(s, fam, max_labels))}
    if not bad:
        return
    kept = []
    for line in fam.body.split("\n"):
        if not line:
            continue
        problem = bad.get(_SIGNATURE.sub("", line))
        if problem:
            dropped[problem] += 1
        else:
            kept.append(line + "\n")
    fam.body = "".join(kept)
    fam._samples = None


def _check_parsed(fam: Family, family_keys: frozenset[str], max_labels: int, dropped: Counter) -> None:
    allowed = ALLOWED_SUFFIXES.get(fam.type or "")
    kept = []
    for s in fam.samples():
        problem = _labels_ok([k for k, _ in s.labels], max_labels)
        if problem is None and allowed and s.name[len(fam.name) :] not in allowed:
            problem = "invalid_sample"
        if problem is None and _bad_special(s, family_keys):
            problem = "invalid_sample"
        if problem:
            dropped[problem] += 1
        else:
            kept.append(s)
    if len(kept) != len(fam.samples()):  # parsed above: no second parse
        fam._samples = kept
        fam.body = "".join(format_sample(s) for s in kept)


def _family_keys(families: list[Family]) -> dict[str, frozenset[str]]:
    """Family name -> le and/or quantile, for every name a histogram or summary of the scrape has."""
    keys: dict[str, set[str]] = {}
    for fam in families:
        key = SPECIAL_LABEL.get(fam.type or "")
        if key is not None and fam.error is None:
            keys.setdefault(fam.name, set()).add(key)
    return {name: frozenset(k) for name, k in keys.items()}


def check_families(families: list[Family], max_labels: int = DEFAULT_MAX_LABELS) -> Checked:
    """The families Prometheus can read, fixed or dropped in place; `max_labels` 0 means no limit."""
    checked = Checked([])
    family_keys = _family_keys(families)
    for fam in families:
        if fam.error is not None or fam.type in OPENMETRICS_ONLY:
            checked.dropped["invalid_line" if fam.error else "openmetrics_type"] += 1
            checked.problem = checked.problem or fam.error or f"{fam.name}: OpenMetrics type {fam.type}"
            continue
        if fam.type == "unknown":  # OpenMetrics' name for untyped
            fam.type, fam.type_line = "untyped", f"# TYPE {fam.name} untyped"
        keys = family_keys.get(fam.name, frozenset())
        if fam.canonical:
            _check_canonical(fam, keys, max_labels, checked.dropped)
        else:
            _check_parsed(fam, keys, max_labels, checked.dropped)
        checked.families.append(fam)
    if checked.dropped and checked.problem is None:
        checked.problem = ", ".join(f"{n} sample(s) dropped: {r}" for r, n in sorted(checked.dropped.items()))
    return checked
