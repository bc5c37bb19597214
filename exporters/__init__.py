"""Exporters: the normalizing exporter and the exposition tools under it.

from inferwatch.exporters import Normalizer
"""

from inferwatch import _lazy

__all__ = [
    "ExporterConfig",
    "GpuOptions",
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
    "register",
]


# loaded on first use: the server pulls in aiohttp, and neither it nor its config is needed for a text rewrite;
# `inferwatch --help` registers the exporter commands without loading the normalizer
_LAZY = {
    name: module
    for module, names in {
        "_cli": ("register",),
        "_server": ("NormalizingExporter",),
        "_config": ("ExporterConfig", "Target", "load_config"),
        "_gpu_options": ("GpuOptions",),
        "_exposition": ("Family", "Sample", "format_sample", "parse_sample", "split_families"),
        "_normalize": ("NormalizeResult", "Normalizer", "OutFamily", "add_label", "render"),
    }.items()
    for name in names
}


__getattr__ = _lazy.lazy_attributes(__name__, _LAZY)
