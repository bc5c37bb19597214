"""The flags of every command that reads mappings (normalize, the mappings commands, the normalizing exporter):
the same names and help, and one way to load what they select."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["MappingOpt", "SourceOpt", "selected_mappings"]

MappingOpt = Annotated[
    list[Path], typer.Option("--mapping", "-m", metavar="FILE", help="Extra mapping file (repeatable).")
]
SourceOpt = Annotated[
    str | None, typer.Option(metavar="SOURCE", help="Use this mapping only (vllm, sglang, dcgm or a user's).")
]


def selected_mappings(extra: list[Path], source: str | None = None):
    """(catalog, mappings): the built-in mappings and `extra`, only `source`'s when one is given."""
    from inferwatch.mappings import load_catalog, load_mappings, select_source

    catalog = load_catalog()
    mappings = load_mappings(extra, catalog)
    if source is not None:
        mappings = [select_source(mappings, source)]
    return catalog, mappings
