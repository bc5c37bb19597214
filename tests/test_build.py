"""`inferwatch build` and the checked-in generated files."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml
from conftest import ROOT

from inferwatch import reference
from inferwatch.build import artifacts, check, source_copies


def test_checked_in_artifacts_match_the_code():
    stale = check() + reference.check()
    assert not stale, f"stale generated files {stale}: run `inferwatch build` and commit them"
    assert set(source_copies()) <= set(artifacts())


def test_build_writes_the_bundle(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "inferwatch", "build", "-o", str(tmp_path / "out")], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    for rel, text in artifacts().items():
        assert (tmp_path / "out" / rel).read_text() == text
    check_proc = subprocess.run(
        [sys.executable, "-m", "inferwatch", "build", "--check"], capture_output=True, text=True
    )
    assert check_proc.returncode == 0


@pytest.mark.promtool
def test_bundle_rules_and_their_tests_work_where_they_are_written(tmp_path):
    """The bundle keeps the promtool tests in rules/tests/, naming their rules as ../x.rules.yaml, so
    `promtool test rules` runs in place."""
    from conftest import need

    from inferwatch.build import write_bundle
    from inferwatch.slo import run_rule_tests

    need("promtool")
    written = write_bundle(tmp_path)
    tests = sorted(p for p in written if p.name.endswith(".test.yaml"))
    assert tests and all(
        p.parent in (tmp_path / "prometheus" / "rules" / "tests", tmp_path / "prometheus" / "rules-frontdoor" / "tests")
        for p in tests
    )
    assert {p.parent for p in tests if "frontdoor" in p.name} == {tmp_path / "prometheus" / "rules-frontdoor" / "tests"}
    for test in tests:  # every rule file a test names is there, relative to the test
        rule_files = yaml.safe_load(test.read_text())["rule_files"]
        assert rule_files and all((test.parent / name).is_file() for name in rule_files), test
    # one test file run in place proves the layout; test_alerts.py runs them all (the bundle equals alerts/)
    ok, output = run_rule_tests([tmp_path / "prometheus" / "rules" / "tests" / "operational.test.yaml"])
    assert ok, output


def _rule_folders(tmp_path):
    """The folders a user points `rule_files` at: the bundle's, `slo compile -o`'s, and the checked-in alerts/."""
    from inferwatch.build import write_bundle

    write_bundle(tmp_path / "bundle")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "inferwatch",
            "slo",
            "compile",
            str(ROOT / "slo/examples/chat.yaml"),
            "-o",
            str(tmp_path / "compiled"),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    return {
        "bundle": tmp_path / "bundle" / "prometheus" / "rules",
        "slo compile": tmp_path / "compiled",
        "alerts": ROOT / "alerts",
        "bundle front door": tmp_path / "bundle" / "prometheus" / "rules-frontdoor",
        "alerts front door": ROOT / "alerts" / "frontdoor",
    }


@pytest.mark.promtool
def test_rule_folders_load_as_a_glob(tmp_path):
    """`rule_files: [<folder>/*.yaml]` passes `promtool check config`: rule folders hold rule files only, with
    the promtool tests in tests/ and Alertmanager's inhibit rules in alertmanager/."""
    from conftest import need

    need("promtool")
    for what, folder in _rule_folders(tmp_path).items():
        rules = sorted(folder.glob("*.yaml"))
        assert rules and all(p.name.endswith(".rules.yaml") for p in rules), (what, rules)
        # the front-door SLOs fire LLMSLIDataMissing without a front door: never in the main folders' glob
        assert all(("frontdoor" in p.name) == ("front door" in what) for p in rules if p.name.startswith("llm")), what
        config = tmp_path / f"prometheus-{what.replace(' ', '-')}.yml"
        config.write_text(yaml.safe_dump({"global": {"evaluation_interval": "1m"}, "rule_files": [f"{folder}/*.yaml"]}))
        proc = subprocess.run(["promtool", "check", "config", str(config)], capture_output=True, text=True)
        assert proc.returncode == 0, (what, proc.stdout + proc.stderr)
        assert f"SUCCESS: {len(rules)} rule files found" in proc.stdout, (what, proc.stdout)


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
