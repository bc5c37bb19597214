"""Is a latency threshold a bucket boundary of every engine in scope? If not, say what would be."""

from __future__ import annotations

from fractions import Fraction

from inferwatch.slo._model import EngineRef
from inferwatch.slo._tables import EngineBuckets, bucket_tables, source_buckets, version_tuple

__all__ = ["threshold_problem", "fmt_number", "shared_bounds"]


def fmt_number(value: Fraction) -> str:
    """A bound as people write it: 1, 0.1, 2.5."""
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


def _range_for(table: EngineBuckets, family: str, version: str | None):
    ranges = table.families[family]
    if version is None:
        return ranges[0]
    wanted = version_tuple(version)
    for entry in ranges:
        if entry.since <= wanted:
            return entry
    return None


def _table(name: str) -> EngineBuckets | None:
    """An engine's table, or one of inferwatch's own sources' (`frontdoor`)."""
    return bucket_tables().get(name) or source_buckets().get(name)


def _label(engine: EngineRef, table: EngineBuckets, family: str) -> str:
    if engine.name in source_buckets():
        return f"inferwatch {engine.name}"
    if engine.version:
        return f"{engine.name} {engine.version}"
    since = ".".join(map(str, table.families[family][0].since))
    return f"{engine.name} {since}+"


def engine_bounds(engine: EngineRef, metric: str) -> tuple[str, tuple[Fraction, ...] | None, str] | None:
    """(family, bounds, description) of `metric` in that engine release; None if the table does not know it."""
    table = _table(engine.name)
    if table is None or metric not in table.metrics:
        return None
    family = table.metrics[metric]
    entry = _range_for(table, family, engine.version)
    bounds = None if entry is None else entry.bounds
    return family, bounds, _label(engine, table, family)


def shared_bounds(engines, metric: str) -> list[Fraction]:
    """Boundaries common to every engine in scope that the tables know."""
    common = None
    for engine in engines:
        found = engine_bounds(engine, metric)
        if found and found[1] is not None:
            common = set(found[1]) if common is None else common & set(found[1])
    return sorted(common or ())


def threshold_problem(engines, metric: str, threshold: Fraction) -> str | None:
    """One message saying where `threshold` would not be counted exactly and how to fix it; None when exact."""
    lines = []
    for engine in engines:
        found = engine_bounds(engine, metric)
        if found is None:
            continue
        family, bounds, label = found
        if bounds is None:
            lines.append(f"{label} does not export {metric} (see slo/buckets.yaml)")
            continue
        if threshold in bounds:
            continue
        below = [b for b in bounds if b < threshold]
        above = [b for b in bounds if b > threshold]
        near = " and ".join(fmt_number(b) + "s" for b in (below[-1:] + above[:1]))
        line = f"{label} {family} has no bucket at {fmt_number(threshold)}s (nearest: {near})"
        table = _table(engine.name)
        flag = table.flags.get(family) if table else None
        if flag:
            exact = [fmt_number(b) for b in sorted(set(bounds) | {threshold})]
            flag = flag.replace("{bounds}", ", ".join(exact)).replace("{bounds_spaced}", " ".join(exact))
            line += f"; to make it exact, start {engine.name} with {flag}"
        lines.append(line)
    if not lines:
        return None
    head = f"{fmt_number(threshold)}s cannot be counted exactly from {metric}:"
    shared = shared_bounds(engines, metric)
    if shared and any("has no bucket" in line for line in lines):
        lines.append("thresholds exact in every engine in scope: " + ", ".join(fmt_number(b) + "s" for b in shared))
    return head + "".join(f"\n    {line}" for line in lines)
