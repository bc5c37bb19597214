"""Type-check the library with mypy, as the installed package `inferwatch` (CI's gate; `python tests/typecheck.py`).

pyproject maps `inferwatch.slo` to `slo/`, `inferwatch.exporters` to `exporters/` and so on (package-dir): mypy
cannot follow that mapping from the source tree, nor through pip's editable-install finder. So this lays the tree out
as the package, with symlinks (`build/typecheck/inferwatch/` holds a link to each file of `inferwatch/` and one to
each subpackage folder), runs `mypy -p inferwatch` with the settings in pyproject's [tool.mypy], and writes mypy's
findings with the repository's own paths (`slo/_rules.py`, not `build/typecheck/inferwatch/slo/_rules.py`). The
layout sits at a fixed place so mypy's cache (.mypy_cache) stays warm between runs. Extra arguments go to mypy.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYOUT = ROOT / "build" / "typecheck"


@cache
def subpackages() -> dict[str, str]:
    """Each `inferwatch.X` subpackage and its folder in the repository, from pyproject's package-dir."""
    dirs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    return {name: folder for name, folder in dirs.items() if name != "inferwatch" and name.count(".") == 1}


def lay_out() -> Path:
    """build/typecheck/inferwatch/: links to inferwatch/'s files and to each top-level subpackage's folder."""
    shutil.rmtree(LAYOUT, ignore_errors=True)
    package = LAYOUT / "inferwatch"
    package.mkdir(parents=True)
    for entry in sorted((ROOT / "inferwatch").iterdir()):
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    for name, folder in subpackages().items():
        (package / name.split(".", 1)[1]).symlink_to(ROOT / folder)
    return LAYOUT


def repository_paths(line: str) -> str:
    """mypy's path inside the layout, written as the file's path in the repository."""
    prefix = os.path.relpath(LAYOUT, ROOT) + "/inferwatch/"
    if not line.startswith(prefix):
        return line
    rest = line[len(prefix) :]
    top = rest.split("/", 1)[0]
    folder = subpackages().get("inferwatch." + top)
    return folder + rest[len(top) :] if folder else "inferwatch/" + rest


def main(argv: list[str]) -> int:
    layout = lay_out()
    env = dict(os.environ, MYPYPATH=str(layout))
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "-p", "inferwatch", *argv], cwd=ROOT, env=env, capture_output=True, text=True
    )
    for line in proc.stdout.splitlines():
        print(repository_paths(line))
    sys.stderr.write(proc.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
