"""`inferwatch build` and the checked-in generated files."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT
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


def test_bundle_rules_and_their_tests_work_where_they_are_written(tmp_path):
    """The bundle keeps each promtool test next to its rules, so `promtool test rules` runs in place."""
    from conftest import need
    from inferwatch.build import write_bundle
    from inferwatch.slo import run_rule_tests

    need("promtool")
    written = write_bundle(tmp_path)
    ok, output = run_rule_tests(sorted(p for p in written if p.name.endswith(".test.yaml")))
    assert ok, output


def test_an_orphaned_generated_alert_file_is_reported(monkeypatch, tmp_path):
    import shutil

    from inferwatch import build

    alerts = tmp_path / "alerts"
    shutil.copytree(build.ALERTS_DIR, alerts)
    (alerts / "llm.removed-objective.rules.yaml").write_text("groups: []\n")
    monkeypatch.setattr(build, "ALERTS_DIR", alerts)
    assert any("llm.removed-objective.rules.yaml (no longer generated)" in s for s in build.check())


def test_build_check_exits_1_on_drift(monkeypatch, capsys):
    import pytest

    from inferwatch import build, cli

    monkeypatch.setattr(build, "check", lambda: ["alerts/llm.x.rules.yaml"])
    monkeypatch.setattr(sys, "argv", ["inferwatch", "build", "--check"])
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    assert exit_info.value.code == 1
    assert "stale: alerts/llm.x.rules.yaml" in capsys.readouterr().err


def test_ci_runs_the_readme_test_command():
    """`.ci/run` must run exactly the README's test command, so the README's promise is what CI proves."""
    readme = (ROOT / "README.md").read_text()
    command = next(line for line in readme.splitlines() if "pip install -e '.[test]'" in line)
    assert command in (ROOT / ".ci" / "run").read_text().splitlines()
