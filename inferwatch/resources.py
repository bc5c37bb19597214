"""The package data shipped beside the code (YAML tables, checked-in artifacts), found with importlib.resources.

Readers use `importlib.resources.files(package)`; `data_path` is for the few that need a path on disk: a loader
that names the file in its messages, a folder to glob, or `inferwatch build`, which writes the checked-in copies
back beside their sources.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from inferwatch.errors import InferwatchError

__all__ = ["data_path"]


def data_path(package: str, *parts: str) -> Path:
    """`package`'s data file or folder `parts` (the package's own folder when none) as a path on disk. inferwatch
    installs as plain folders (pip, an editable checkout); a zipped install has no such path and says so."""
    found = files(package).joinpath(*parts)
    if not isinstance(found, Path):
        raise InferwatchError(f"{package} is not installed as plain files ({found}); reinstall it with pip")
    return found
