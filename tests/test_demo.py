"""`inferwatch demo --headless --short`: the whole pipeline in CI, and the expected alerts fire."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import need


def test_demo_detects_the_incident(tmp_path):
    need("prometheus")
    proc = subprocess.run([sys.executable, "-m", "inferwatch", "demo", "--headless", "--short", "--workdir",
                           str(tmp_path)], capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert "fired  alertname=LLMErrorBudgetBurn slo=responsive model=llama-3-8b severity=critical" in out
    assert "fired  alertname=LLMQueueSaturated model=llama-3-8b" in out
    assert "ALERT FIRING" in out and "== thinking on SGLang" in out
    assert "Traceback" not in out
    logs = sorted(p.name for p in tmp_path.glob("*.log"))
    assert logs == ["exporter.log", "prometheus.log", "sglang.log", "vllm.log"]
    assert not _leftovers(str(tmp_path)), "every process the demo started is stopped"


def _leftovers(workdir: str) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if workdir in args or "inferwatch simulate" in args or "exporter normalize" in args:
            found.append(args)
    return found


def test_demo_without_prometheus_says_how_to_install_it():
    env = {**os.environ, "PATH": "/nonexistent"}
    proc = subprocess.run([sys.executable, "-m", "inferwatch", "demo", "--headless"], capture_output=True, text=True,
                          env=env, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "error: prometheus not found on PATH: install it with `apt-get install -y prometheus` (Debian's package), "
        "then run `inferwatch demo` again"]
