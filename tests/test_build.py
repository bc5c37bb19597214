"""`inferwatch build` and the checked-in generated files."""

from __future__ import annotations

import subprocess
import sys

from inferwatch.build import artifacts, check, source_copies


def test_checked_in_artifacts_match_the_code():
    stale = check()
    assert not stale, f"stale generated files {stale}: run `inferwatch build` and commit them"
    assert set(source_copies()) <= set(artifacts())


def test_build_writes_the_bundle(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "inferwatch", "build", "-o", str(tmp_path / "out")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    for rel, text in artifacts().items():
        assert (tmp_path / "out" / rel).read_text() == text
    check_proc = subprocess.run([sys.executable, "-m", "inferwatch", "build", "--check"], capture_output=True, text=True)
    assert check_proc.returncode == 0
