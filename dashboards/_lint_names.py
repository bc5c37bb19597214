"""Which metric names exist, and whose they are, for `inferwatch dashboards lint`.

A name is judged (unknown, deprecated) only when it belongs to a source inferwatch
knows: vLLM's `vllm:` names, SGLang's `sglang:` names and the `sglang_` names a
router sanitizes them to, Ray's `ray_vllm_` copies, dcgm-exporter's `DCGM_FI_`
fields, and our own `llm_` vocabulary in a dashboard written against it. Anything
else (llm-d's `llm_d_*`, production-stack's router gauges under `vllm:`) is
someone else's metric and is left alone. engine-metrics.yaml and dcgm-fields.txt
hold the tables, with the mappings' source names.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib.resources import files

import yaml

__all__ = ["Known", "known", "canonical", "base", "HISTOGRAM_SUFFIXES"]

HISTOGRAM_SUFFIXES = ("_bucket", "_count", "_sum")


@dataclass(frozen=True)
class Known:
    """The name tables of the judged sources, as engine-metrics.yaml, dcgm-fields.txt and the mappings give them."""

    names: frozenset[str]  # exact names of judged sources (vllm:, sglang:, DCGM_FI_, vocabulary)
    families: tuple[str, ...]  # prefixes whose every name exists (vllm:nixl_, ...)
    foreign: frozenset[str]  # names under a judged prefix that belong to other software
    foreign_families: tuple[str, ...]  # prefixes of other software (llm_d_, vllm:semantic_cache_)
    gauges: frozenset[str]  # gauges whose names end like counters
    dcgm_units: dict[str, str]  # DCGM gauges -> their unit (percent, ratio, MiB, MHz, W, C, B/s)
    state_counters: tuple[str, ...]  # prefixes of counters that mirror object state (kube_)
    ratio_gauges: frozenset[str]  # engine-computed ratios and rates
    deprecated: dict[str, str]  # stale name -> what replaces it
    vocabulary: frozenset[str]  # the common vocabulary's names

    def exists(self, name: str) -> bool:
        created = {name.removesuffix("_created") + s for s in ("", "_total")} if name.endswith("_created") else set()
        return (
            bool({name, base(name)} & self.names or created & self.names)
            or name.startswith(self.families)
            or self.is_foreign(name)
        )

    def is_foreign(self, name: str) -> bool:
        return name in self.foreign or base(name) in self.foreign or name.startswith(self.foreign_families)

    def stale(self, name: str) -> str | None:
        for candidate in (name, base(name)):
            if candidate in self.deprecated:
                return candidate
        return None


def base(name: str) -> str:
    """The name without `_total` or a histogram suffix."""
    for suffix in HISTOGRAM_SUFFIXES + ("_total",):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


@cache
def known() -> Known:
    """The tables, read once: engine-metrics.yaml, every mapping's source names (an entry's later sources are
    stale names of its first) and the common vocabulary, and dcgm-fields.txt."""
    from inferwatch.mappings import load_catalog, load_mappings

    doc = yaml.safe_load(files("inferwatch.dashboards").joinpath("engine-metrics.yaml").read_text(encoding="utf-8"))
    names = set(doc["known"])
    deprecated = dict(doc["deprecated"])
    catalog = load_catalog()
    vocabulary = set(catalog.metrics) | set(doc.get("vocabulary", []))
    for mapping in load_mappings(catalog=catalog):
        for entry in mapping.entries:
            sources = list(entry.sources)
            names |= set(sources)
            for old in sources[1:]:
                deprecated.setdefault(old, sources[0])
    names |= vocabulary
    dcgm = files("inferwatch.dashboards").joinpath("dcgm-fields.txt").read_text(encoding="utf-8").split("\n")
    names |= {line.strip() for line in dcgm if line.strip() and not line.startswith("#")}
    return Known(
        frozenset(names),
        tuple(doc["families"]),
        frozenset(doc["foreign"]),
        tuple(doc["foreign_families"]),
        frozenset(doc["gauges"]),
        dict(doc["dcgm_units"]),
        tuple(doc["state_counters"]),
        frozenset(doc["ratio_gauges"]),
        deprecated,
        frozenset(vocabulary),
    )


def canonical(name: str) -> tuple[str, str | None]:
    """(the engine's own spelling, the source judging it); source None: not ours to judge."""
    if name.startswith(("vllm:", "sglang:")):
        return name, name.split(":", 1)[0]
    if name.startswith("sglang_"):  # colons sanitized by a router or an OTel pipeline
        return "sglang:" + name.removeprefix("sglang_"), "sglang"
    if name.startswith(("ray_vllm:", "ray_vllm_")):  # Ray Serve's copies of vLLM's metrics
        return "vllm:" + name[len("ray_vllm:") :], "ray"
    if name.startswith("DCGM_FI_"):
        return name, "dcgm"
    if name.startswith("llm_") and ":" not in name:
        return name, "vocabulary"
    return name, None
