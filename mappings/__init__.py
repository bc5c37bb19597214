"""The common vocabulary and the per-source mappings into it, as data.

    catalog = load_catalog()
    mappings = load_mappings()          # vLLM, SGLang, dcgm-exporter, plus user files
"""

from inferwatch.mappings._load import (
    builtin_mapping_paths,
    load_catalog,
    load_mapping,
    load_mappings,
    select_source,
)
from inferwatch.mappings._model import Catalog, CatalogMetric, Entry, LabelRule, SourceMapping, sanitized

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
]

from inferwatch.mappings._render import (  # noqa: E402
    as_values,
    recording_rules,
    relabel_configs,
    renamed_by_relabel,
    servicemonitor_relabelings,
)

__all__ += ["as_values", "recording_rules", "relabel_configs", "renamed_by_relabel", "servicemonitor_relabelings"]
