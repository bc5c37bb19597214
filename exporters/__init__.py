"""Exporters: the normalizing exporter and the exposition tools under it.

    from inferwatch.exporters import Normalizer
"""

from inferwatch.exporters._exposition import Family, Sample, format_sample, parse_sample, split_families
from inferwatch.exporters._config import ExporterConfig, Target, load_config
from inferwatch.exporters._normalize import NormalizeResult, Normalizer, OutFamily, add_label, render

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

from inferwatch.exporters._server import NormalizingExporter  # noqa: E402
