"""`inferwatch demo --headless --short`: the whole pipeline in CI, and the expected alerts fire."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from conftest import need

ROOT = Path(__file__).resolve().parent.parent


def _demo(tmp_path, *flags: str) -> tuple[str, str]:
    """`inferwatch demo --headless --short [flags]` run to its end; (its output, the mark its processes carry).
    Fails the test unless it exited 0."""
    need("prometheus")
    mark = f"inferwatch-demo-test-{uuid.uuid4()}"
    proc = subprocess.run(
        [sys.executable, "-m", "inferwatch", "demo", *flags, "--headless", "--short", "--workdir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "INFERWATCH_TEST_MARK": mark},
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    return out, mark


@pytest.mark.slow
def test_demo_detects_the_incident(tmp_path):
    out, mark = _demo(tmp_path)
    assert "fired  alertname=LLMErrorBudgetBurn slo=responsive model=llama-3-8b severity=critical" in out
    assert "fired  alertname=LLMQueueSaturated model=llama-3-8b" in out
    assert "ALERT FIRING" in out and "== thinking on SGLang" in out
    # the page's own triage command, from its annotation as Prometheus rendered it, run as pasted, names the queue
    pasted = re.search(r"(?m)^  on-call pastes the page's command: (inferwatch triage .*)$", out)
    assert pasted and "--alert LLMErrorBudgetBurn --alert-match service=llm " in pasted[1], out[-6000:]
    assert re.search(r"--prometheus http://127\.0\.0\.1:\d+ ", pasted[1]) and "'model=llama-3-8b'" in pasted[1]
    assert re.search(r"(?m)^  triage from the page: llama-3-8b: queueing \(", out), out[-6000:]
    assert "named  triage from the LLMErrorBudgetBurn page's command: llama-3-8b queueing" in out
    assert "Traceback" not in out
    # it ends by running doctor against itself, with the deploy config it wrote: every check ok or skipped
    doctor = out[out.index("== inferwatch doctor --prometheus") :]
    assert "skipped, 0 to fix" in doctor and "ok      GPU workload pod" in doctor, doctor
    assert "ok      GPU <-> engine join" in doctor and "ok      model label" in doctor, doctor
    assert "skipped Prometheus sends alerts" in doctor and (tmp_path / "deploy.yaml").is_file()
    logs = sorted(p.name for p in tmp_path.glob("*.log"))
    assert logs == [
        "exporter.log",
        "frontdoor-sglang.log",
        "frontdoor-vllm.log",
        "prometheus.log",
        "sglang.log",
        "vllm.log",
    ]
    assert "front door" in out and "the engine's own TTFT stayed normal; the front door's responsive SLO" in out
    # the rows after "is it slow?": goodput (front door), cost (the example's rules), autoscaling, all live
    rows = out[out.index("== the overview's rows") : out.index("== inferwatch doctor")]
    for row in ("Goodput", "Cost", "Autoscaling"):
        assert re.search(rf"(?m)^  {row} +live ", rows), rows
    assert "NO DATA" not in rows and "model=other" not in out, rows
    assert not _leftovers(mark), "every process the demo started is stopped"


def _leftovers(mark: str) -> list[str]:
    """Command lines of the demo's own descendants still alive: they inherit `mark` in their environment.

    Other `inferwatch simulate` or exporter processes on the machine are not ours and do not count.
    """
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if f"INFERWATCH_TEST_MARK={mark}".encode() in (proc / "environ").read_bytes().split(b"\0"):
                found.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            continue
    return found


def test_demo_without_prometheus_says_how_to_install_it():
    env = {**os.environ, "PATH": "/nonexistent"}
    proc = subprocess.run(
        [sys.executable, "-m", "inferwatch", "demo", "--headless"], capture_output=True, text=True, env=env, timeout=60
    )
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "error: prometheus not found on PATH: install it with `apt-get install -y prometheus` (Debian's package), "
        "then run `inferwatch demo` again"
    ]


def test_the_closing_hint_names_series_the_rules_record():
    """The live demo ends suggesting queries; each llm_slo: one is a series the default SLOs record (it once named
    llm_slo:burn_rate:5m, which nothing records)."""
    from inferwatch.sim._demo import TRY_QUERIES
    from inferwatch.slo import compile_spec, load_spec

    recorded = {
        rule.get("record")
        for group in compile_spec(load_spec(ROOT / "slo" / "defaults.yaml")).groups
        for rule in group["rules"]
    }
    assert [q for q in TRY_QUERIES if q.startswith("llm_slo:") and q not in recorded] == []


@pytest.mark.slow
def test_the_canary_demo_tells_an_equal_a_slower_and_a_quiet_canary_apart(tmp_path):
    """`inferwatch demo --canary --headless`: four simulated versions under load at once; `inferwatch canary`
    passes the equal one, fails the one decoding five times slower, and says inconclusive on the trickle."""
    out, mark = _demo(tmp_path, "--canary")
    verdicts = re.findall(r"(?m)^canary verdict for llama-3-8b: (\w+)", out)
    assert verdicts == ["PASS", "FAIL", "INCONCLUSIVE"], out[-6000:]
    assert out.count("as expected:") == 3 and "UNEXPECTED" not in out and "Traceback" not in out
    assert "too few requests" in out  # why v4 reads inconclusive
    assert not _leftovers(mark), "every process the demo started is stopped"
