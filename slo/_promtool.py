"""Run the real promtool: check rule files and run the generated tests."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from inferwatch.errors import InferwatchError

__all__ = ["promtool", "check_rule_files", "run_rule_tests"]

INSTALL_HINT = "install Debian's prometheus package (apt-get install -y prometheus) or put promtool on PATH"


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        raise InferwatchError(f"promtool not found: {INSTALL_HINT}")
    return path


def _run(args: list[str], cwd: Path) -> tuple[bool, str]:
    proc = subprocess.run([promtool(), *args], cwd=cwd, capture_output=True, text=True, timeout=900)
    return proc.returncode == 0, (proc.stdout + proc.stderr).strip()


def check_rule_files(files: list[Path]) -> tuple[bool, str]:
    """`promtool check rules`: (passed, output)."""
    return _run(["check", "rules", *[str(f) for f in files]], Path.cwd())


def run_rule_tests(files: list[Path]) -> tuple[bool, str]:
    """`promtool test rules`, run in each tests' folder so relative rule_files resolve: (passed, output of the
    first folder that failed, else of the last)."""
    ok, output = True, ""
    for folder in dict.fromkeys(f.parent for f in files):
        ok, output = _run(["test", "rules", *[f.name for f in files if f.parent == folder]], folder)
        if not ok:
            break
    return ok, output
