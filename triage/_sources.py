"""The engines' own series where Prometheus holds no common vocabulary: a signal's vocabulary selectors rewritten
through the mappings (mappings/sources/*.yaml) into vLLM's, SGLang's and dcgm-exporter's names, in PromQL.

Triage's queries are written against the vocabulary (`llm_*`, `gpu_*`), which a Prometheus has when it scrapes
through the normalizing exporter or the mappings' relabeling. A Prometheus that scrapes the engines as they are
holds `vllm:*`, `sglang:*` and `DCGM_FI_*` instead. There, every `FUNC(NAME{MATCHERS}[RANGE])` of a query
becomes the same function over each source name the mappings give NAME (aliases of older releases joined by
`or`, preferred first; each name's sanitized spelling `vllm_x` read only for a model without `vllm:x`), with the
mapping's label renames (`model` from `model_name`, else from a `model` already there; a GPU's `pod` from
`exported_pod`), scale, filters and blank sentinels applied in PromQL, as the recording rules would. A matcher
on a renamed label becomes matchers on its candidates: the first present one decides, as the renames do.

The selectors are found by regular expressions, which is safe for signals.yaml's shape only: each series read
inside one range function, `FUNC(NAME{MATCHERS}[RANGE])`, with quoted matcher values (a query that keeps labels
it does not name, `without (...)` or no aggregation, has every label renamed). A test
(tests/test_triage_foreign.py) checks with promql-parser that every selector of every signal is rewritten and
that the result parses; a signal outside those shapes fails it rather than silently keeping its vocabulary name.
"""

from __future__ import annotations

import itertools
import re
from functools import cache

from inferwatch.promql import escape_label_value

__all__ = ["FAMILIES", "SOURCE_NAMES", "translate", "source_names", "family_of", "name_matcher"]

# what a vocabulary name belongs to: its series are read from the vocabulary or from the sources, per family
FAMILIES = {"engine": "llm_", "gpu": "gpu_"}
# each family's source names, as the report says them
SOURCE_NAMES = {"engine": "the engines' own names (vllm:*, sglang:*)", "gpu": "dcgm-exporter's names (DCGM_FI_*)"}
# a quoted matcher value is read whole: a model named `a}b` has a brace inside its selector
SELECTOR = re.compile(
    r'(?P<func>[a-z_]+)\((?P<name>(?:llm|gpu)_[a-z_]+)\{(?P<matchers>(?:[^{}"]|"(?:[^"\\]|\\.)*")*)\}'
    r"\[(?P<range>[0-9a-z$]+)\]\)"
)
GROUPING = re.compile(r"\b(?:by|on|ignoring|group_left|group_right)\s*\(([^()]*)\)")
MATCHER = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)')
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")
SCRATCH = "inferwatch_candidate"  # the label a rename passes through: its first present candidate


@cache
def _mappings() -> tuple:
    from inferwatch.mappings import load_mappings

    return tuple(load_mappings())


def family_of(name: str) -> str | None:
    """The family a vocabulary name is read under (None: not one the sources give)."""
    if name.startswith("llm_frontdoor_") or name.startswith("llm_probe_"):
        return None  # inferwatch's own series: always in the vocabulary
    return next((family for family, prefix in FAMILIES.items() if name.startswith(prefix)), None)


def _entries(name: str):
    """(mapping, entry, suffix) for every mapping entry that gives the vocabulary name `name`."""
    for mapping in _mappings():
        for entry in mapping.entries:
            if entry.name == name:
                yield mapping, entry, ""
            elif (
                entry.type == "histogram"
                and name.startswith(entry.name)
                and name[len(entry.name) :] in HISTOGRAM_SUFFIXES
            ):
                yield mapping, entry, name[len(entry.name) :]


def source_names(name: str) -> list[str]:
    """Every source name (with its sanitized spelling) that gives the vocabulary name `name`."""
    from inferwatch.mappings import sanitized

    out: dict[str, None] = {}
    for _, entry, suffix in _entries(name):
        for source in entry.sources:
            out.setdefault(source + suffix, None)
            out.setdefault(sanitized(source) + suffix, None)
    return list(out)


def name_matcher(names) -> str:
    """`__name__=~"a|b"` for these metric names, each matched literally (regex- and string-escaped)."""
    return '__name__=~"' + "|".join(escape_label_value(re.escape(n)) for n in dict.fromkeys(names)) + '"'


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n"}.get(m[1], m[1]), value)


def _accepts(op: str, pattern: str, value: str) -> bool:
    """Whether a matcher accepts a label value, as Prometheus reads it (regexes anchored)."""
    text = _unescape(pattern)
    if op in ("=", "!="):
        return (value == text) == (op == "=")
    return (re.fullmatch(text, value) is not None) == (op == "=~")


def _parse_matchers(text: str) -> list[tuple[str, str, str]]:
    found, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = MATCHER.match(text, pos)
        if m is None:
            raise ValueError(f"cannot read the matchers {text!r}")
        found.append((m[1], m[2], m[3]))
        pos = m.end()
    return found


def _renames(mapping, entry) -> dict[str, tuple[str, ...]]:
    """{vocabulary label: its source candidates, first present wins}, each ending with the vocabulary label itself:
    a series that already carries it (a scrape config that relabeled `model_name` to `model`, or set `model`) is
    read by it where no source candidate is there."""
    rules = {rule.target: rule.candidates for rule in mapping.labels}
    rules.update({rule.target: rule.candidates for rule in entry.labels})
    return {
        target: candidates if target in candidates else (*candidates, target) for target, candidates in rules.items()
    }


def _candidate_choices(label: str, op: str, value: str, candidates: tuple[str, ...]) -> list[list[str]]:
    """Matcher sets on a renamed label's candidates, one per candidate that can decide it (the earlier ones
    absent), plus "none present" when the matcher accepts an empty value."""
    choices = []
    for i, candidate in enumerate(candidates):
        before = [f'{c}=""' for c in candidates[:i]]
        choices.append(before + [f'{candidate}!=""', f'{candidate}{op}"{value}"'])
    if _accepts(op, value, ""):
        choices.append([f'{c}=""' for c in candidates])
    return choices


def _alternatives(
    mapping, entry, suffix: str, func: str, matchers, window: str, needed: frozenset[str] | None
) -> list[str]:
    """The expressions one entry gives for `func(name{matchers}[window])`, one per source alias and candidate."""
    from inferwatch.mappings import sanitized

    fixed = dict(mapping.set_labels) | dict(entry.set_labels)
    renames = _renames(mapping, entry)
    plain, renamed = list(f'{k}="{v}"' for k, v in entry.match), []
    for label, op, value in matchers:
        if label in fixed:
            if not _accepts(op, value, fixed[label]):
                return []
        elif label in renames:
            renamed.append(_candidate_choices(label, op, value, renames[label]))
        else:
            plain.append(f'{label}{op}"{value}"')
    extras = [list(itertools.chain.from_iterable(c)) for c in itertools.product(*renamed)]
    out = []
    for source in entry.sources:
        spellings = []
        for name in dict.fromkeys((source + suffix, sanitized(source) + suffix)):
            names = f'__name__="{name}"'
            spellings.append(
                " or ".join(f"{func}({{{', '.join([names, *plain, *extra])}}}[{window}])" for extra in extras)
            )
        out.append(_preferred(spellings, renames.get("model", ())))
    return [_reshape(mapping, entry, f"({' or '.join(out)})", func, needed)]


def _preferred(spellings: list[str], model_labels: tuple[str, ...]) -> str:
    """One source name's spellings (`vllm:x`, then the sanitized `vllm_x` of a name-sanitizing re-exporter or an
    OTel copy), the first one with series for a model winning: a Prometheus that ingests both counts each signal
    once, even where the copy's target labels (job, instance) differ. Per model, so a model exposed only under
    the sanitized name is still read."""
    if len(spellings) == 1:
        return spellings[0]
    by = f" on ({', '.join(model_labels)})" if model_labels else ""
    return f" or{by} ".join(f"({text})" for text in spellings)


def _reshape(mapping, entry, expr: str, func: str, needed: frozenset[str] | None) -> str:
    """The entry's value and labels in the vocabulary's terms: blanks dropped, scaled, and the labels the query
    groups or matches by (`needed`; None: every label) renamed and set."""
    from inferwatch.mappings import as_values

    expr = as_values(mapping, entry, expr, blank=func != "rate")
    for target, candidates in _renames(mapping, entry).items():
        if needed is not None and target not in needed or candidates == (target,):
            continue
        if target not in candidates[:-1]:  # the first present candidate is copied last and wins
            for candidate in reversed(candidates):
                if candidate != target:
                    expr = f'label_replace({expr}, "{target}", "$1", "{candidate}", "(.+)")'
            continue
        for candidate in reversed(candidates):  # the target itself outranks a later candidate: via a copy
            expr = f'label_replace({expr}, "{SCRATCH}", "$1", "{candidate}", "(.+)")'
        expr = f'label_replace(label_replace({expr}, "{target}", "$1", "{SCRATCH}", "(.+)"), "{SCRATCH}", "", "", "")'
    for key, value in (dict(mapping.set_labels) | dict(entry.set_labels)).items():
        if needed is None or key in needed:
            expr = f'label_replace({expr}, "{key}", "{value}", "", "")'
    return expr


def _needed(promql: str) -> frozenset[str] | None:
    """The labels a query groups or joins by; None when it keeps labels it does not name (`without`, or a
    selector outside any aggregation), so every label must be renamed."""
    if re.search(r"\bwithout\s*\(", promql) or not re.match(r"\s*(sum|avg|max|min|count|group)\b", promql):
        return None
    return frozenset(
        label.strip() for labels in GROUPING.findall(promql) for label in labels.split(",") if label.strip()
    )


def _rewrite(match: re.Match, needed: frozenset[str] | None) -> str:
    func, name, window = match["func"], match["name"], match["range"]
    matchers = _parse_matchers(match["matchers"])
    parts = [
        alt
        for mapping, entry, suffix in _entries(name)
        for alt in _alternatives(mapping, entry, suffix, func, matchers, window, needed)
    ]
    if not parts:
        return match[0]  # no source gives it: the vocabulary name, which then has no series
    return "(" + " or ".join(parts) + ")"


def translate(promql: str, families: set[str] | frozenset[str]) -> str:
    """`promql` with every vocabulary selector of the given families read from the sources instead."""
    if not families:
        return promql
    needed = _needed(promql)

    def one(match: re.Match) -> str:
        return _rewrite(match, needed) if family_of(match["name"]) in families else match[0]

    return SELECTOR.sub(one, promql)
