"""`inferwatch slo import`: Sloth and OpenSLO specs become ours, and what cannot be carried over is listed."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from conftest import FIXTURES, ROOT
from inferwatch.errors import InferwatchError
from inferwatch.slo import compile_spec, import_file, parse_spec
from inferwatch.slo._import import import_text

SLOTH = FIXTURES / "anchors" / "sloth"
OPENSLO = ROOT / "tests" / "fixtures" / "slo" / "openslo-v1.yaml"


def test_sloth_getting_started():
    result = import_file(SLOTH / "getting-started.spec.yml")
    (spec,) = result.specs
    assert spec["service"] == "myservice" and spec["window"] == "30d"
    (objective,) = spec["objectives"]
    assert objective == {
        "name": "requests-availability",
        "description": "Common SLO based on availability for HTTP request responses.",
        "sli": "ratio",
        "total": 'http_request_duration_seconds_count{job="myservice"}',
        "bad": 'http_request_duration_seconds_count{job="myservice",code=~"(5..|429)"}',
        "target": "99.9%",
        "labels": {"category": "availability"},
        "annotations": {"summary": "High error rate on 'myservice' requests responses"},
    }
    notes = "\n".join(result.not_carried)
    for dropped in ("label tier='2' dropped", "alert name MyServiceHighErrorRate", "page_alert.labels (severity=pageteam,"
                    " routing_key=myteam)", "ticket_alert.labels (severity=slack, slack_channel=#alerts-myteam)"):
        assert dropped in notes


def test_sloth_latency_from_buckets_becomes_a_latency_sli():
    (spec,) = import_file(SLOTH / "kubernetes-apiserver.spec.yml").specs
    latency = spec["objectives"][1]
    assert (latency["sli"], latency["metric"], latency["threshold"]) == (
        "latency", 'apiserver_request_duration_seconds{verb!="WATCH"}', "0.4s")


def test_sloth_crd_with_plugins():
    result = import_file(SLOTH / "contrib-denominator-corrected.spec.yaml")
    assert result.specs[0]["service"] == "svc01"
    assert any("slo_plugins" in n for n in result.not_carried)


@pytest.mark.parametrize("path", [SLOTH / "getting-started.spec.yml", SLOTH / "kubernetes-apiserver.spec.yml",
                                  SLOTH / "contrib-denominator-corrected.spec.yaml", OPENSLO], ids=lambda p: p.name)
def test_imports_compile(path):
    for doc in import_file(path).specs:
        assert compile_spec(parse_spec(yaml.safe_load(yaml.safe_dump(doc)), str(path))).groups


def test_openslo_v1():
    result = import_file(OPENSLO)
    (spec,) = result.specs
    assert spec["window"] == "28d"
    (objective,) = spec["objectives"]
    assert objective == {"name": "chat-responsive", "sli": "latency",
                         "metric": 'llm_time_to_first_token_seconds{model="llama-3-70b"}', "threshold": "1.0s",
                         "description": "first token within 1 s", "target": "99%"}
    notes = "\n".join(result.not_carried)
    for dropped in ("alertPolicies: replaced", "calendar window 1M", "budgetingMethod Timeslices",
                    "thresholdMetric SLIs are not event counts", "engines: [] skips the bucket check"):
        assert dropped in notes


@pytest.mark.parametrize("text, message", [
    ("a: [", "invalid YAML"),
    ("kind: Something\n", "not a Sloth prometheus/v1 spec"),
    ("apiVersion: openslo/v1alpha\nkind: SLO\nspec: {}\n", "only openslo/v1 is read"),
])
def test_unsupported_input_is_a_clear_error(text, message):
    try:
        result = import_text(text, "x.yaml")
    except InferwatchError as err:
        assert message in str(err)
    else:
        assert not result.specs and message in "\n".join(result.not_carried)


def test_cli_writes_yaml_and_lists_what_was_not_carried(tmp_path):
    out = tmp_path / "imported.yaml"
    proc = subprocess.run([sys.executable, "-m", "inferwatch", "slo", "import", str(SLOTH / "getting-started.spec.yml"),
                           "-o", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "not carried over:" in proc.stderr
    check = subprocess.run([sys.executable, "-m", "inferwatch", "slo", "check", str(out)], capture_output=True,
                           text=True)
    assert check.returncode == 0, check.stderr
