"""The common vocabulary and the per-source mappings into it, as data.

catalog = load_catalog()
mappings = load_mappings()          # vLLM, SGLang, dcgm-exporter, plus user files
"""

from inferwatch import _lazy

__all__ = [
    "Catalog",
    "CatalogMetric",
    "Entry",
    "LabelRule",
    "SourceMapping",
    "builtin_mapping_paths",
    "load_catalog",
    "load_mapping",
    "load_mappings",
    "sanitized",
    "select_source",
    "as_values",
    "recording_rules",
    "relabel_configs",
    "renamed_by_relabel",
    "servicemonitor_relabelings",
    "register",
]

# loaded on first use: `inferwatch --help` registers the mappings commands without reading a mapping
_LAZY = {
    name: module
    for module, names in {
        "_cli": ("register",),
        "_load": ("builtin_mapping_paths", "load_catalog", "load_mapping", "load_mappings", "select_source"),
        "_model": ("Catalog", "CatalogMetric", "Entry", "LabelRule", "SourceMapping", "sanitized"),
        "_render": (
            "as_values",
            "recording_rules",
            "relabel_configs",
            "renamed_by_relabel",
            "servicemonitor_relabelings",
        ),
    }.items()
    for name in names
}

__getattr__ = _lazy.lazy_attributes(__name__, _LAZY)
