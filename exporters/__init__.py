"""Exporters: the normalizing exporter and the exposition tools under it.

    from inferwatch.exporters import Normalizer
"""

from inferwatch.exporters._exposition import Family, Sample, format_sample, parse_sample, split_families
from inferwatch.exporters._normalize import NormalizeResult, Normalizer, OutFamily, add_label, render
from inferwatch import _lazy

__all__ = [
    "ExporterConfig",
    "NormalizingExporter",
    "Target",
    "load_config",
    "Family",
    "NormalizeResult",
    "Normalizer",
    "OutFamily",
    "Sample",
    "add_label",
    "format_sample",
    "parse_sample",
    "render",
    "split_families",
]


# loaded on first use: the server pulls in aiohttp, and neither it nor its config is needed for a text rewrite
_LAZY = {"NormalizingExporter": "_server", "ExporterConfig": "_config", "Target": "_config", "load_config": "_config"}


__getattr__ = _lazy.lazy_attributes(__name__, _LAZY)
