"""The shipped alert files: valid, portable, written against the vocabulary, documented, and tested with promtool."""

from __future__ import annotations

import re

import pytest
import yaml
from conftest import ROOT, need

from inferwatch.slo import check_rule_files, run_rule_tests

ALERTS = ROOT / "alerts"
RULE_FILES = sorted(ALERTS.glob("*.rules.yaml"))
# the front-door variant of the default SLOs: apart, so `rule_files: [alerts/*.yaml]` does not load it
FRONTDOOR_RULE_FILES = sorted((ALERTS / "frontdoor").glob("*.rules.yaml"))
# series that are not engine or GPU metrics but that alerts may read
NON_VOCABULARY = {
    "up",
    "inferwatch_exporter_target_up",
    "inferwatch_exporter_target_source_info",
    "ALERTS",
    "llm_frontdoor_requests_total",
}  # the exporter's and the front door's own
PROMQL_WORDS = {"and", "or", "unless", "on", "by", "without", "group_left", "group_right", "ignoring", "bool", "offset"}


def _alerts(paths=RULE_FILES):
    for path in paths:
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                if "alert" in rule:
                    yield path.name, rule


@pytest.mark.promtool
def test_rule_files_are_valid_and_their_tests_pass():
    need("promtool")
    ok, output = check_rule_files(RULE_FILES)
    assert ok, output
    tests = sorted((ALERTS / "tests").glob("*.test.yaml"))
    assert {p.name.replace(".test.yaml", ".rules.yaml") for p in tests} == {p.name for p in RULE_FILES}
    ok, output = run_rule_tests(tests)
    assert ok, output


@pytest.mark.promtool
def test_frontdoor_rule_files_are_valid_and_their_tests_pass():
    """alerts/frontdoor/: the front-door SLOs, out of the alerts/*.yaml glob, with their own promtool tests."""
    need("promtool")
    assert FRONTDOOR_RULE_FILES and not set(FRONTDOOR_RULE_FILES) & set(RULE_FILES)
    ok, output = check_rule_files(FRONTDOOR_RULE_FILES)
    assert ok, output
    tests = sorted((ALERTS / "frontdoor" / "tests").glob("*.test.yaml"))
    assert {p.name.replace(".test.yaml", ".rules.yaml") for p in tests} == {p.name for p in FRONTDOOR_RULE_FILES}
    ok, output = run_rule_tests(tests)
    assert ok, output


@pytest.mark.parametrize(
    "name, rule",
    list(_alerts(RULE_FILES + FRONTDOOR_RULE_FILES)),
    ids=lambda v: v if isinstance(v, str) else v["alert"],
)
def test_every_alert_is_documented(name, rule):
    assert rule["labels"]["severity"] in ("critical", "warning")
    assert {"summary", "description", "runbook_url"} <= set(rule["annotations"])
    anchor = rule["annotations"]["runbook_url"].rpartition("#")[2]
    headings = {h.lower() for h in re.findall(r"^## (\w+)$", (ALERTS / "RUNBOOKS.md").read_text(), re.M)}
    assert anchor in headings


RECORDED = {
    r["record"]
    for path in RULE_FILES
    for g in yaml.safe_load(path.read_text())["groups"]
    for r in g["rules"]
    if "record" in r
}


def test_operational_alerts_read_only_the_vocabulary(catalog):
    names = set(catalog.metrics)
    known = names | {n + s for n in names for s in ("_bucket", "_count", "_sum")} | NON_VOCABULARY
    for _, rule in _alerts():
        expr = re.sub(r'"[^"]*"', "", rule["expr"])  # label values are not metric names
        expr = re.sub(r"\{[^}]*\}|\[[^\]]*\]", "", expr)  # nor are matchers and ranges
        idents = set(re.findall(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()", expr))
        metrics = {i for i in idents if i.startswith(("llm_", "gpu_", "inferwatch_", "up"))}
        metrics -= {i for i in idents if i.startswith("llm_slo:")} | RECORDED  # our own records
        assert metrics <= known, metrics - known


def test_target_down_leaves_out_exactly_the_gpu_sources():
    """Behind the normalizing exporter LLMEngineTargetDown fires for a target whose fetches found an engine: it leaves
    out the sources that map no llm_ signal (dcgm-exporter), so a new engine's mapping is covered as it is."""
    from inferwatch.mappings import load_mappings

    gpu_only = {m.source for m in load_mappings() if not any(e.name.startswith("llm_") for e in m.entries)}
    rule = next(r for _, r in _alerts() if r["alert"] == "LLMEngineTargetDown")
    excluded = re.findall(r'inferwatch_exporter_target_source_info\{source![=~]"([^"]*)"\}', rule["expr"])
    assert gpu_only and excluded and set(excluded[0].split("|")) == gpu_only


def test_groups_stay_portable():
    for path in RULE_FILES + FRONTDOOR_RULE_FILES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            assert set(group) <= {"name", "interval", "rules"}, path


def test_runbooks_list_exactly_the_kinds_triage_names():
    """RUNBOOKS.md's "Kinds of slow" is generated from triage/kinds.yaml (`inferwatch build` keeps it in step);
    every kind's runbook is a section of triage/README.md and every alert it names has its own section here."""
    from inferwatch.alerts._runbooks import BEGIN, END, KIND_ALERTS, with_kinds_section
    from inferwatch.triage import load_kinds

    kinds = load_kinds()
    text = (ALERTS / "RUNBOOKS.md").read_text()
    assert with_kinds_section(text, kinds) == text, "run `inferwatch build`"
    section = text[text.index(BEGIN) : text.index(END)]
    listed = re.findall(r"^\| `([\w-]+)` \|", section, re.M)
    assert listed == list(kinds)
    triage_sections = set(re.findall(r"^## ([\w-]+)$", (ROOT / "triage" / "README.md").read_text(), re.M))
    assert {k.runbook for k in kinds.values()} <= triage_sections
    headings = set(re.findall(r"^## (\w+)$", text, re.M))
    assert set(KIND_ALERTS) <= set(kinds) and {a for alerts in KIND_ALERTS.values() for a in alerts} <= headings
    assert "DESIGN.md" not in text  # not shipped


def test_a_drifted_kinds_section_is_reported(monkeypatch, tmp_path):
    import shutil

    from inferwatch import build

    alerts = tmp_path / "alerts"
    shutil.copytree(build.ALERTS_DIR, alerts)
    runbooks = alerts / "RUNBOOKS.md"
    runbooks.write_text(runbooks.read_text().replace("| `queueing` |", "| `queuing` |"))
    monkeypatch.setattr(build, "ALERTS_DIR", alerts)
    assert str(runbooks) in build.check()
