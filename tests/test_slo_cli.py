"""`inferwatch slo ...` as a user runs it: compile, explain, test, and a front-door spec."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import GOLDEN, ROOT, need

CHAT = ROOT / "slo" / "examples" / "chat.yaml"


def _run(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "inferwatch", "slo", *map(str, args)], capture_output=True, text=True, cwd=cwd
    )


def test_explain_prints_the_table():
    proc = _run("explain", CHAT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (GOLDEN / "slo" / "chat.explain.txt").read_text()


def test_compile_writes_rules_tests_and_inhibit_rules(tmp_path):
    proc = _run("compile", CHAT, "-o", tmp_path)
    assert proc.returncode == 0, proc.stderr
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    objectives = ("responsive", "fast-enough", "answered")
    assert written == sorted(
        [f"chat.{o}.rules.yaml" for o in objectives]
        + [f"tests/chat.{o}.test.yaml" for o in objectives]
        + ["alertmanager/chat.inhibit.yaml"]
    )


@pytest.mark.promtool
def test_compile_for_the_prometheus_operator(tmp_path):
    need("promtool")
    proc = _run("compile", CHAT, "-o", tmp_path, "--format", "prometheus-operator")
    assert proc.returncode == 0, proc.stderr
    manifest = yaml.safe_load((tmp_path / "chat.prometheusrule.yaml").read_text())
    assert (manifest["apiVersion"], manifest["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    (tmp_path / "groups.yaml").write_text(yaml.safe_dump({"groups": manifest["spec"]["groups"]}))
    check = subprocess.run(
        ["promtool", "check", "rules", str(tmp_path / "groups.yaml")], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout + check.stderr


def _one_objective(tmp_path, name: str, **changes) -> Path:
    """chat.yaml cut to one objective: the CLI path is what these tests prove (test_slo.py runs all of chat.yaml)."""
    spec = yaml.safe_load(CHAT.read_text())
    spec["objectives"] = [o for o in spec["objectives"] if o["name"] == name]
    spec.update(changes)
    path = tmp_path / "one.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@pytest.mark.promtool
def test_a_selector_on_target_passes_its_own_tests(tmp_path):
    """`target` is the normalizing exporter's label for the engine behind it: an SLO pinned to one engine is
    legal, and its generated tests expect that label on the missing-data alert of a failing scrape."""
    need("promtool")
    spec = _one_objective(tmp_path, "answered", selector={"model": "llama-3-70b", "target": "vllm-0"})
    assert _run("check", spec).returncode == 0
    proc = _run("test", spec)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.promtool
def test_slo_test_runs_the_generated_tests(tmp_path):
    need("promtool")
    proc = _run("test", _one_objective(tmp_path, "answered"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 rule files valid" in proc.stdout and "passed" in proc.stdout


def _untestable(tmp_path) -> Path:
    """Service chat, objective answered, whose tests cannot be generated (no series matches `code=~"[0-9]+"`)."""
    path = tmp_path / "untestable.yaml"
    path.write_text(
        "service: chat\nengines: []\nobjectives:\n- name: answered\n  sli: ratio\n"
        "  total: 'app_requests_total{code=~\"[0-9]+\"}'\n  bad: 'app_requests_total{code=\"500\"}'\n"
        "  target: 99%\n"
    )
    return path


@pytest.mark.promtool
def test_slo_test_tests_each_spec_of_a_shared_service(tmp_path):
    """Two specs of service chat: the second's rules used to overwrite the first's, whose tests then ran against
    them (and failed); each is now tested alone, and the untestable one is named."""
    need("promtool")
    proc = _run("test", _one_objective(tmp_path, "answered"), _untestable(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout == (
        "promtool: 2 rule files valid; 12 generated test cases in 1 files passed; untested (see "
        "the warnings above): chat.answered\n"
    )


def test_compile_refuses_two_specs_of_one_service(tmp_path):
    one, other = _one_objective(tmp_path, "answered"), _untestable(tmp_path)
    proc = _run("compile", one, other, "-o", tmp_path / "out")
    assert proc.returncode == 1 and proc.stderr == (
        f"error: {one} and {other} both have service: chat; their files would overwrite each other: give each spec "
        "its own service, or compile them into separate folders\n"
    )
    assert not (tmp_path / "out").exists()


def test_unknown_format_is_a_clear_error(tmp_path):
    proc = _run("compile", CHAT, "-o", tmp_path, "--format", "thanos")
    assert proc.returncode == 1 and proc.stderr.startswith("error: --format 'thanos': use one of")


@pytest.mark.promtool
def test_frontdoor_source_needs_no_engine_buckets(tmp_path):
    """The front door's own buckets hold the usual thresholds: 2s, off vLLM's TTFT buckets, is exact there."""
    need("promtool")
    spec = _one_objective(tmp_path, "responsive", source="frontdoor")
    spec.write_text(
        spec.read_text().replace("engines:\n- vllm\n- sglang\n", "").replace("threshold: 1s", "threshold: 2s")
    )
    proc = _run("test", spec)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = tmp_path / "out"
    assert _run("compile", spec, "-o", out).returncode == 0
    rules = (out / "chat.responsive.rules.yaml").read_text()
    assert "llm_frontdoor_time_to_first_token_seconds_bucket" in rules and 'le=~"2|2[.]0"' in rules


def test_mistakes_that_used_to_crash_the_compiler_are_clear_errors(tmp_path):
    """Sub-millisecond durations and a 241-character objective name (File name too long) are refused by the
    check every command runs first: one line each naming file, line and field, no traceback."""
    spec = tmp_path / "bad.yaml"
    spec.write_text(
        CHAT.read_text()
        .replace("threshold: 1s", "threshold: 0.0001")
        .replace("window: 28d", "window: 7.00000001d")
        .replace("name: answered", "name: " + "a" * 241)
    )
    for command in ("check", "compile", "test"):
        proc = _run(command, spec, *(["-o", tmp_path / "out"] if command == "compile" else []))
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 3 and lines[0].startswith("error: "), lines
        assert all(line.removeprefix("error: ").startswith(f"{spec}:") for line in lines), lines
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
