"""The vocabulary and the per-source mappings as frozen data.

Loaders (`_load.py`) build these from YAML; renderers (the normalizer,
relabel configs, recording rules) only ever read them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["CatalogMetric", "Catalog", "LabelRule", "Entry", "SourceMapping", "sanitized"]

METRIC_TYPES = ("counter", "gauge", "histogram")


@dataclass(frozen=True)
class CatalogMetric:
    """One name of the common vocabulary."""

    name: str
    type: str
    unit: str
    concept: str
    help: str


@dataclass(frozen=True)
class Catalog:
    """The common vocabulary, keyed by name."""

    metrics: dict[str, CatalogMetric] = field(hash=False)

    def __contains__(self, name: str) -> bool:
        return name in self.metrics

    def __getitem__(self, name: str) -> CatalogMetric:
        return self.metrics[name]


@dataclass(frozen=True)
class LabelRule:
    """`target` takes the value of the first present label in `candidates`; the others are removed."""

    target: str
    candidates: tuple[str, ...]


@dataclass(frozen=True)
class Entry:
    """One common metric and where it comes from in one source."""

    name: str
    type: str
    sources: tuple[str, ...]  # source metric names, preferred first (older aliases after)
    multiply: float | None = None
    divide: float | None = None
    match: tuple[tuple[str, str], ...] = ()  # keep only series with these label values
    drop_labels: tuple[str, ...] = ()
    labels: tuple[LabelRule, ...] = ()  # entry-specific renames, applied after the mapping's
    set_labels: tuple[tuple[str, str], ...] = ()  # fixed labels on this entry's series (type="corrected")
    bit: int | None = None  # read one bit (a power of two) of an integer bitmask: 1 or 0
    note: str = ""
    line: int | None = None

    @property
    def scaled(self) -> bool:
        """Whether the value changes on the way (a scale or a bit), so relabeling alone cannot give it."""
        return self.multiply is not None or self.divide is not None or self.bit is not None

    @property
    def reshaped(self) -> bool:
        """Whether its series change beyond a rename of name and labels (a value, a filter, labels dropped or
        fixed): neither scrape-time relabeling nor the normalizer's text rewrite can give it."""
        return self.scaled or bool(self.match or self.drop_labels or self.set_labels)

    def scale(self, value: float) -> float:
        """The common value; a bit is `floor(v / bit) % 2` exactly as the recording rule computes it."""
        if self.bit is not None:
            return math.fmod(math.floor(value / self.bit), 2) if math.isfinite(value) else math.nan
        if self.multiply is not None:
            return value * self.multiply
        if self.divide is not None:
            return value / self.divide
        return value


@dataclass(frozen=True)
class SourceMapping:
    """How one engine or exporter translates into the vocabulary."""

    source: str
    path: str
    detect: tuple[str, ...]  # family-name prefixes that identify this source in a scrape
    labels: tuple[LabelRule, ...]  # applied to every mapped series
    set_labels: tuple[tuple[str, str], ...]  # added to every mapped series (e.g. engine="vllm")
    entries: tuple[Entry, ...]
    blank_at_or_above: float | None = None  # values this large are "no data" sentinels
    ignored: tuple[tuple[str, str], ...] = ()  # source families left out on purpose, with the reason
    verified: tuple[str, ...] = ()  # releases whose real /metrics were checked against this mapping

    def source_names(self) -> list[str]:
        """Every source metric name this mapping reads, in first-use order."""
        seen: dict[str, None] = {}
        for entry in self.entries:
            for name in entry.sources:
                seen.setdefault(name, None)
        return list(seen)


def sanitized(name: str) -> str:
    """The spelling a name sanitizer or re-exporter gives a colon name (`vllm:x` -> `vllm_x`)."""
    return name.replace(":", "_")
