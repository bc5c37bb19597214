"""The rule engine: kinds (kinds.yaml) judged on a baseline's and an incident's readings. Pure functions.

Each condition scores 0-1 (a ramp that reaches 1 at its threshold), a kind's
confidence is the weighted mean score of its measured conditions, and kinds that
another holding kind explains are ranked below it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from inferwatch.triage._rules import ANY, Condition, Kind
from inferwatch.triage._summary import ABSENT, Reading

__all__ = ["Evidence", "Finding", "score", "judge_kind", "judge", "EXPLAINED_CAP", "ALONE_CAP"]

EXPLAINED_CAP = 0.9  # an explained kind ranks at most at this share of its cause's confidence
# a state bad in itself (kinds.yaml `alone`) says users suffer but not what changed: it names the kind even when
# the baseline was no better (it already held the incident, or the deployment is younger than any baseline), ranked
# below a cause whose change the data shows clearly
ALONE_CAP = 0.8
NEED = 0.5  # a `need: true` condition must score at least this (halfway to its threshold)
MISSING_SHARE = 0.1  # a signal is missing when its share of steps with data falls by more than this


@dataclass(frozen=True)
class Evidence:
    signal: str
    baseline: float | None
    incident: float | None
    change: float | None  # incident / baseline; None when either is missing or the baseline is 0
    condition: str
    score: float


@dataclass(frozen=True)
class Finding:
    kind: str
    confidence: float
    evidence: tuple[Evidence, ...]
    summary: str = ""
    runbook: str = ""
    next: str = ""
    explains: tuple[str, ...] = ()
    explained_by: tuple[str, ...] = ()
    pod: str | None = None


def _ramp(x: float, zero: float, one: float) -> float:
    """0 at `zero`, 1 at `one`, linear between (either direction), clamped."""
    if one == zero:
        return 1.0 if (x >= one if one >= 0 else x <= one) else 0.0
    return min(1.0, max(0.0, (x - zero) / (one - zero)))


def _log_ratio(base: float, inc: float, floor: float) -> float:
    low = max(floor, 1e-12)
    return math.log(max(inc, low) / max(base, low))


def score(cond: Condition, base: Reading, inc: Reading, floor: float = 0.0) -> float | None:
    """How well a condition holds, 0-1; None when it cannot be judged (a value missing in a window)."""
    if cond.op == "missing":
        if base.state == "absent":
            return None
        return 1.0 if _gone(base, inc) else 0.0
    b, i = base.value, inc.value
    if cond.op.startswith("incident"):
        if i is None:
            return None
        return (
            _ramp(i, 0.9 * cond.value, cond.value)
            if cond.op.endswith(">=")
            else _ramp(i, cond.value / 0.9 if cond.value else 1e-9, cond.value)
        )
    if cond.op.startswith("baseline"):
        if b is None:
            return None
        return (
            _ramp(b, 0.9 * cond.value, cond.value)
            if cond.op.endswith(">=")
            else _ramp(b, cond.value / 0.9 if cond.value else 1e-9, cond.value)
        )
    if b is None or i is None:
        return None
    if cond.op in ("up", "down"):
        r = _log_ratio(b, i, floor) * (1 if cond.op == "up" else -1)
        k = math.log(cond.value)
        return _ramp(r, k / 2, k)
    if cond.op == "flat":
        t = math.log(1 + cond.value)
        return _ramp(abs(_log_ratio(b, i, floor)), 2 * t, t)
    delta = (i - b) if cond.op == "rise" else (b - i)
    return _ramp(delta, cond.value / 2, cond.value)


def _change(b: float | None, i: float | None) -> float | None:
    if b is None or i is None or b == 0:
        return None
    return i / b


def _gone(base: Reading, inc: Reading) -> bool:
    """Absent in the incident, or there for much less of it than in the baseline."""
    if base.state == "absent":
        return False
    return inc.state == "absent" or inc.coverage < base.coverage - MISSING_SHARE


def _missing(base: dict[str, Reading], inc: dict[str, Reading]) -> list[Evidence]:
    """One piece of evidence per signal that went missing: its share of steps with data, before and during."""
    gone = [name for name, reading in base.items() if _gone(reading, inc.get(name, ABSENT))]
    return [
        Evidence(
            name,
            base[name].coverage,
            inc[name].coverage if name in inc else 0.0,
            None,
            f"{name} missing (share of steps with data)",
            1.0,
        )
        for name in sorted(gone)
    ]


def _clauses(
    clauses, base: dict[str, Reading], inc: dict[str, Reading], floors: dict[str, float]
) -> tuple[float, list[Evidence]] | None:
    """The weighted mean score of the measured clauses and their evidence; None when a `need` clause fails or
    less than half the weight was measured."""
    total = known = earned = 0.0
    evidence: list[Evidence] = []
    for clause in clauses:
        total += clause.weight
        best: tuple[float, list[Evidence]] | None = None
        for cond in clause.conditions:
            if cond.signal == ANY:
                found = _missing(base, inc)
                s = 1.0 if found else (0.0 if base else None)
                if s is not None and (best is None or s > best[0]):
                    best = (s, found or [])
                continue
            b, i = base.get(cond.signal, ABSENT), inc.get(cond.signal, ABSENT)
            s = score(cond, b, i, floors.get(cond.signal, 0.0))
            if s is not None and (best is None or s > best[0]):
                best = (s, [Evidence(cond.signal, b.value, i.value, _change(b.value, i.value), cond.text, s)])
        if best is None and clause.unmeasured is not None and not clause.need:
            # what the data could not show: counted at its stated score, and said
            best = (
                clause.unmeasured,
                [
                    Evidence(c.signal, None, None, None, f"{c.text} (not measured)", clause.unmeasured)
                    for c in clause.conditions[:1]
                ],
            )
        if best is None:
            if clause.need:
                return None
            continue
        if clause.need and best[0] < NEED:
            return None
        known += clause.weight
        earned += clause.weight * best[0]
        evidence.extend(e for e in best[1] if e not in evidence)  # a condition two clauses share: once
    if not known or known < total / 2:
        return None
    return earned / known, evidence


def judge_kind(
    kind: Kind, base: dict[str, Reading], inc: dict[str, Reading], floors: dict[str, float], alone: bool = True
) -> Finding | None:
    """The kind's finding when it holds on these readings, else None: its change from the baseline (`when`),
    or (`alone`, when asked) a state bad in itself in the incident, at most ALONE_CAP, whichever scores more."""
    found = _clauses(kind.clauses, base, inc, floors)
    if alone and kind.alone:
        bad = _clauses(kind.alone, base, inc, floors)
        if bad is not None and (found is None or min(bad[0], ALONE_CAP) > found[0]):
            found = (min(bad[0], ALONE_CAP), bad[1])
    if found is None or found[0] < kind.min_confidence:
        return None
    confidence, evidence = found
    return Finding(
        kind.name, round(confidence, 3), tuple(evidence), kind.summary, kind.runbook, kind.next, kind.explains
    )


def judge(
    kinds: dict[str, Kind],
    base: dict[str, Reading],
    inc: dict[str, Reading],
    floors: dict[str, float],
    alone: bool = True,
) -> list[Finding]:
    """Every kind that holds, causes first: sorted by confidence after capping explained kinds below their cause.
    `alone=False` judges changes only (a replica against its peers: one at the cap like the others is no finding)."""
    held = {name: f for name in kinds if (f := judge_kind(kinds[name], base, inc, floors, alone)) is not None}
    out = []
    for name, finding in held.items():
        causes = tuple(c for c in held if name in held[c].explains and c != name)
        if causes:
            cap = EXPLAINED_CAP * max(held[c].confidence for c in causes)
            finding = replace(finding, explained_by=causes, confidence=round(min(finding.confidence, cap), 3))
        kept = tuple(e for e in finding.explains if e in held)
        out.append(replace(finding, explains=kept))
    order = list(kinds)
    return sorted(out, key=lambda f: (-f.confidence, order.index(f.kind)))
