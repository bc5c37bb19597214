"""The kind table (kinds.yaml, and a user's --rules file): kinds as weighted conditions on signal changes.

Parsed at the edge into frozen dataclasses; every problem is collected with its
file, line and field (`kinds.queueing.when[2].if`), then reported at once.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from inferwatch.errors import Problem, SpecError
from inferwatch.resources import data_path
from inferwatch.yamlio import Positions, Problems, load_document

__all__ = ["Condition", "Clause", "Kind", "KINDS_FILE", "parse_condition", "parse_kinds", "load_kinds"]

KINDS_FILE = data_path("inferwatch.triage", "kinds.yaml")
ANY = "*"
KIND_KEYS = ("summary", "signature", "runbook", "next", "explains", "min_confidence", "when", "alone")
CLAUSE_KEYS = ("if", "weight", "need", "unmeasured")
_NUM = r"([0-9]*\.?[0-9]+)"
_FORMS = [
    (re.compile(rf"(up|down)\s*>=\s*{_NUM}\s*x"), lambda m: (m[1], float(m[2]))),
    (re.compile(rf"flat\s+within\s+{_NUM}\s*%"), lambda m: ("flat", float(m[1]) / 100)),
    (re.compile(rf"(rise|fall)\s*>=\s*{_NUM}"), lambda m: (m[1], float(m[2]))),
    (re.compile(rf"(incident|baseline)\s*(>=|<=)\s*{_NUM}"), lambda m: (f"{m[1]}{m[2]}", float(m[3]))),
    (re.compile(r"missing"), lambda m: ("missing", 0.0)),
]
SYNTAX = (
    "SIGNAL up >= 1.5x, down >= 2x, flat within 20%, rise >= 0.05, fall >= 0.1, incident >= 0.9, "
    "incident <= 0.1, baseline >= 1 or missing"
)


@dataclass(frozen=True)
class Condition:
    """One test on a signal's change: op is up, down, flat, rise, fall, incident>=, incident<=, baseline>=,
    baseline<= or missing."""

    signal: str
    op: str
    value: float
    text: str


@dataclass(frozen=True)
class Clause:
    """Weighted conditions, the best of which counts; `need`: the kind cannot hold without it; `unmeasured`: the
    score it counts at when none of its signals was measured (None: it is left out)."""

    conditions: tuple[Condition, ...]
    weight: float = 1.0
    need: bool = False
    unmeasured: float | None = None


@dataclass(frozen=True)
class Kind:
    name: str
    summary: str
    runbook: str
    next: str
    clauses: tuple[Clause, ...]
    explains: tuple[str, ...] = ()
    min_confidence: float = 0.6
    signature: str = ""  # what the signals show, in words (the which-slow dashboard's row guide opens with it)
    alone: tuple[Clause, ...] = ()  # conditions on the incident alone: a state bad in itself, whatever the baseline


def parse_condition(text: str, signals) -> Condition:
    """`ttft_mean up >= 1.5x` into a Condition; ValueError says what is wrong."""
    head, _, rest = str(text).strip().partition(" ")
    if head != ANY and head not in signals:
        import difflib

        close = difflib.get_close_matches(head, list(signals), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"unknown signal {head!r}{hint} (signals: {', '.join(signals)})")
    for pattern, build in _FORMS:
        match = pattern.fullmatch(rest.strip())
        if match:
            op, value = build(match)
            if head == ANY and op != "missing":
                raise ValueError(f"{text!r}: `*` (any signal) only takes `missing`")
            return Condition(head, op, value, " ".join(str(text).split()))
    raise ValueError(f"{text!r} is not a condition; write {SYNTAX}")


def _clause(item, signals, where: str, problems: Problems, parent) -> Clause | None:
    node = item if isinstance(item, dict) else {"if": item}
    if not isinstance(item, (dict, str)):
        problems.add(parent, where, "a condition is a line of text or a mapping with if, weight, need", key=None)
        return None
    problems.unknown_keys(node, CLAUSE_KEYS, f"{where}.")
    texts = node.get("if")
    texts = texts if isinstance(texts, list) else [texts]
    conditions = []
    for i, text in enumerate(texts):
        try:
            conditions.append(parse_condition(text, signals))
        except ValueError as err:
            problems.add(
                node if isinstance(item, dict) else parent,
                f"{where}.if" + (f"[{i}]" if len(texts) > 1 else ""),
                str(err),
            )
    weight = node.get("weight", 1)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight <= 0:
        problems.add(node, f"{where}.weight", f"{weight!r}: a weight is a number above 0")
        weight = 1
    need = node.get("need", False)
    if not isinstance(need, bool):
        problems.add(node, f"{where}.need", f"{need!r}: need is true or false")
    unmeasured = node.get("unmeasured")
    if unmeasured is not None and (
        isinstance(unmeasured, bool) or not isinstance(unmeasured, (int, float)) or not 0 <= unmeasured <= 1
    ):
        problems.add(node, f"{where}.unmeasured", f"{unmeasured!r}: a score in [0, 1]")
        unmeasured = None
    return (
        Clause(tuple(conditions), float(weight), bool(need), None if unmeasured is None else float(unmeasured))
        if conditions
        else None
    )


def _kind(name: str, node, signals, problems: Problems, default_min: float) -> Kind | None:
    where = f"kinds.{name}"
    if not isinstance(node, dict):
        problems.add(node, where, "a kind is a mapping with summary, runbook, next, explains and when", key=None)
        return None
    problems.unknown_keys(node, KIND_KEYS, f"{where}.")
    when = node.get("when")
    if not isinstance(when, list) or not when:
        problems.add(node, f"{where}.when", "give a list of conditions, e.g. - ttft_mean up >= 1.5x")
        when = []
    clauses = [_clause(item, signals, f"{where}.when[{i}]", problems, node) for i, item in enumerate(when)]
    alone = node.get("alone") or []
    if not isinstance(alone, list):
        problems.add(node, f"{where}.alone", "give a list of conditions, e.g. - waiting incident >= 1")
        alone = []
    bad = [_clause(item, signals, f"{where}.alone[{i}]", problems, node) for i, item in enumerate(alone)]
    for i, clause in enumerate(bad):
        if clause and any(not c.op.startswith("incident") for c in clause.conditions):
            problems.add(
                node,
                f"{where}.alone[{i}]",
                "a state bad in itself reads the incident alone: SIGNAL incident >= X or <= X",
            )
    explains = node.get("explains") or []
    if not isinstance(explains, list) or not all(isinstance(e, str) for e in explains):
        problems.add(node, f"{where}.explains", "a list of kind names")
        explains = []
    minimum = node.get("min_confidence", default_min)
    if isinstance(minimum, bool) or not isinstance(minimum, (int, float)) or not 0 < minimum <= 1:
        problems.add(node, f"{where}.min_confidence", f"{minimum!r}: a number in (0, 1]")
        minimum = default_min
    text = {k: " ".join(str(node.get(k, "")).split()) for k in ("summary", "signature", "runbook", "next")}
    return Kind(
        name,
        text["summary"],
        text["runbook"] or name,
        text["next"],
        tuple(c for c in clauses if c),
        tuple(explains),
        float(minimum),
        text["signature"],
        tuple(c for c in bad if c),
    )


def parse_kinds(
    doc, file: str, signals, base: dict[str, Kind] | None = None, positions: Positions | None = None
) -> dict[str, Kind]:
    """A kinds document over `base` (the defaults): kinds added or replaced by name, `name: null` drops one."""
    problems = Problems(file, positions)
    if not isinstance(doc, dict) or not isinstance(doc.get("kinds"), dict):
        raise SpecError([Problem(file, None, "kinds", "a rules file is a mapping with `kinds:` (see kinds.yaml)")])
    problems.unknown_keys(doc, ("version", "min_confidence", "kinds"), "")
    if doc.get("version", 1) != 1:
        problems.add(doc, "version", f"{doc['version']!r}: only version 1 exists")
    default_min = doc.get("min_confidence", 0.6)
    kinds = dict(base or {})
    for name, node in doc["kinds"].items():
        if node is None:
            kinds.pop(name, None)
            continue
        kind = _kind(str(name), node, signals, problems, default_min)
        if kind is not None:
            kinds[kind.name] = kind
    for kind in kinds.values():
        for other in kind.explains:
            if other not in kinds:
                problems.add(doc["kinds"].get(kind.name, {}), f"kinds.{kind.name}.explains", f"unknown kind {other!r}")
    problems.raise_if_any()
    return kinds


def load_kinds(extra: Sequence[str | Path] = (), signals=None) -> dict[str, Kind]:
    """The shipped kinds, then each --rules file over them in order."""
    from inferwatch.triage._signals import load_signals

    names = [s.name for s in (signals or load_signals())]
    kinds: dict[str, Kind] = {}
    for path in (KINDS_FILE, *extra):
        loaded = load_document(path)
        kinds = parse_kinds(loaded.data, loaded.file, names, kinds, loaded.positions)
    return kinds
