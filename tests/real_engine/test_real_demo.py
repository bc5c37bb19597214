"""`inferwatch demo --engine vllm-real --headless --short`: the demo's stack in front of a real vLLM of its own,
queueing induced by more clients than --max-num-seqs; the alert it promises (LLMQueueSaturated) fires, and doctor
reads its stack healthy (the command exits 0 only then)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from engines import engine_url, shared_flags  # noqa: F401 - fixtures: the engine installed, or the step skipped

# with --real-demo only: .ci/run's step of its own after the real-engine step, which it would push past 10 minutes
pytestmark = [pytest.mark.real_engine, pytest.mark.real_demo]


def test_the_real_demo_fires_the_queueing_alert(engine_url, shared_flags, tmp_path):  # noqa: F811
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "inferwatch",
            "demo",
            "--engine",
            "vllm-real",
            "--headless",
            "--short",
            "--no-install",
            "--workdir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    out = proc.stdout
    assert proc.returncode == 0, out[-4000:] + proc.stderr[-2000:]
    assert "fired  alertname=LLMQueueSaturated" in out, out[-4000:]
    assert "not here: gpu-stall" in out and "shows: queueing" in out
