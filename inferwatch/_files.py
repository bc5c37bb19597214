"""Output folders and files the user names with -o: every way they can be unusable becomes one clear line."""

from __future__ import annotations

import os
from pathlib import Path

from inferwatch.errors import InferwatchError

__all__ = ["output_dir", "write_file"]


def output_dir(path: Path, flag: str = "--out") -> Path:
    """Create the folder `path` (and its parents), or say why it cannot be one."""
    if path.exists() and not path.is_dir():
        raise InferwatchError(f"{flag} {path}: is a file, not a folder; give a folder (it is created if missing)")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InferwatchError(f"{flag} {path}: cannot create the folder ({err.strerror}); "
                              "give a folder you can write to") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise InferwatchError(f"{flag} {path}: the folder is not writable; give a folder you can write to")
    return path


def write_file(path: Path, text: str, flag: str = "--out") -> None:
    """Write `text` as UTF-8; an OSError (disk full, a file where a folder should be) names the path."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as err:
        raise InferwatchError(f"{flag}: cannot write {err.filename or path}: {err.strerror}") from None
