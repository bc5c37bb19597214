"""The compiler's data tables: engine bucket boundaries, built-in SLIs and burn-rate tiers (YAML beside this file)."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from importlib.resources import files

import yaml

from inferwatch.durations import parse_duration
from inferwatch.slo._model import Tier

__all__ = ["BucketRange", "EngineBuckets", "bucket_tables", "source_buckets", "builtin_slis", "default_tiers"]


@dataclass(frozen=True)
class BucketRange:
    since: tuple[int, ...]
    bounds: tuple[Fraction, ...] | None  # None: that release exports no such histogram


@dataclass(frozen=True)
class EngineBuckets:
    name: str
    metrics: dict[str, str]  # vocabulary histogram -> family
    families: dict[str, tuple[BucketRange, ...]]  # newest first
    flags: dict[str, str]


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in str(text).split("."))


def _load(name: str) -> dict:
    return yaml.safe_load(files("inferwatch.slo").joinpath(name).read_text(encoding="utf-8"))


def _buckets(name: str, doc: dict) -> EngineBuckets:
    families = {
        family: tuple(
            BucketRange(
                version_tuple(r["since"]), None if r["bounds"] is None else tuple(Fraction(str(b)) for b in r["bounds"])
            )
            for r in ranges
        )
        for family, ranges in doc["families"].items()
    }
    return EngineBuckets(name, dict(doc["metrics"]), families, dict(doc.get("flags", {})))


@cache
def bucket_tables() -> dict[str, EngineBuckets]:
    return {engine: _buckets(engine, doc) for engine, doc in _load("buckets.yaml")["engines"].items()}


@cache
def source_buckets() -> dict[str, EngineBuckets]:
    """inferwatch's own histograms (the front door), in the engines' shape."""
    return {name: _buckets(name, doc) for name, doc in _load("buckets.yaml").get("sources", {}).items()}


@cache
def builtin_slis() -> dict[str, dict[str, dict]]:
    """{source: {sli name: definition}} as written in slis.yaml."""
    return _load("slis.yaml")["sources"]


@cache
def default_tiers() -> tuple[Tier, ...]:
    return tuple(
        Tier(
            t["name"],
            t["severity"],
            Fraction(str(t["budget_percent"])),
            parse_duration(t["long"]),
            parse_duration(t["short"]),
            parse_duration(t["history"]) if "history" in t else None,
        )
        for t in _load("tiers.yaml")["tiers"]
    )
