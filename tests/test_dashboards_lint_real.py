"""The dashboard linter on the shapes real dashboards come in that the public corpus (tests/test_lint.py) lacks:
schema v2 (the Kubernetes resource and Grafana 12's JSON model, rows, repeats, library panels, Loki and mixed
datasources), an old export with `rows` and `__inputs`, a current export with library panels, a mixed panel, Loki
and a repeated panel in a collapsed row, and Kubernetes YAML (a List of ConfigMaps as the Grafana sidecar reads
them). The files are written by us in those shapes (tests/fixtures/dashboards/shapes/README.md); each expected
finding is a defect placed there on purpose, and nothing else may be found."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest
from conftest import FIXTURES
from test_lint import _mangle

from inferwatch.dashboards._lint import RULES, from_v2, lint_dashboard, lint_file

SHAPES = FIXTURES / "dashboards" / "shapes"

EXPECTED = {
    "v2beta1-resource.json": {
        ("Prompt tokens", "counter-without-rate"),  # a raw counter inside a repeated row
        ("GPU memory", "unit-mismatch"),  # FB_USED (MiB) in bytes, a repeated panel
        ("Waiting (fixed datasource)", "hard-coded-datasource"),  # v2beta1 names the uid: {"name": "P18..."}
        ("variable ttft_slo", "le-format"),  # custom "0.5,1,2.5" feeds le of vLLM buckets
    },
    "v2alpha1-json-model.json": {
        ("Queue time", "sum-rate-as-latency"),
        ("", "undefined-variable"),  # $job
        ("variable unused", "unused-variable"),
    },
    "classic-rows-schema.json": {
        ("", "old-schema"),
        ("Temperature", "angular-panel"),
        ("Temperature", "legacy-datasource"),
        ("Framebuffer used", "angular-panel"),
        ("Framebuffer used", "legacy-datasource"),
        ("Framebuffer used", "unit-mismatch"),
        ("SM clock", "angular-panel"),
        ("SM clock", "legacy-datasource"),
        ("variable gpu", "legacy-datasource"),
    },
    # the panels Ray Serve generates for vLLM (serve_llm_dashboard_panels.py), transcribed
    "ray-serve-llm-panels.json": {
        ("vLLM: Cache Utilization", "deprecated-metric"),
        ("vLLM: Scheduler State", "deprecated-metric"),
        ("vLLM: Prefix Cache Hit Rate", "deprecated-metric"),
        ("vLLM: Time To First Token Latency", "unit-mismatch"),  # seconds in "ms"
        ("vLLM: Queue Time", "sum-rate-as-latency"),
        ("vLLM: Requests Prefill and Decode Time", "sum-rate-as-latency"),
        ("Tokens Per Request Per Model Last 7 Days", "counter-without-rate"),  # delta() of counters
        ("Tokens Last Hour", "counter-without-rate"),
        # not ("variable deployment", "ignored-variable"): $deployment filters Ray Serve's own ray_serve_* counter;
        # Ray's ray_vllm: copies of vLLM's metrics carry no deployment label
    },
    "classic-library-mixed-loki.json": {
        ("Cache hit rate (mean of engines)", "average-of-ratios"),  # in a collapsed row
        ("variable e2e_slo", "le-format"),  # "1" for SGLang's "1.0"
    },
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_shape_gives_exactly_its_planted_defects(name):
    found = lint_file(SHAPES / name)
    assert {(f.panel, f.rule) for f in found} == EXPECTED[name]
    assert all(f.rule in RULES for f in found)


def test_stale_names_are_named_as_the_dashboard_spells_them():
    found = {f.message for f in lint_file(SHAPES / "ray-serve-llm-panels.json") if f.rule == "deprecated-metric"}
    assert (
        "ray_vllm:gpu_cache_usage_perc is stale: use ray_vllm:kv_cache_usage_perc (renamed in 0.9.2, gone after "
        "0.11)" in found
    )
    assert (
        "ray_vllm:num_requests_swapped is stale, removed with the V0 engine and nothing replaces it: drop the "
        "query" in found
    )


def test_loki_targets_and_library_panels_are_not_read_as_promql():
    for name in ("v2beta1-resource.json", "classic-library-mixed-loki.json"):
        assert not {f for f in lint_file(SHAPES / name) if f.rule in ("invalid-promql", "unknown-metric")}, name


def test_a_v2_resource_and_its_json_model_lint_alike():
    resource = json.loads((SHAPES / "v2beta1-resource.json").read_text(encoding="utf-8"))
    board = from_v2(resource["spec"])
    assert {(f.panel, f.rule) for f in lint_dashboard(board)} == EXPECTED["v2beta1-resource.json"]
    # the layout order, repeats and the library panel survive the conversion
    assert [p.get("title") for p in board["panels"]][:3] == ["Latency", "TTFT p95", "TTFT within SLO"]
    assert {p.get("repeat") for p in board["panels"]} >= {"pod", "gpu"}
    assert any("libraryPanel" in p for p in board["panels"])


def test_kubernetes_yaml_lints_each_configmap_key_and_names_it():
    found = lint_file(SHAPES / "configmap-sidecar.yaml")
    assert {(f.file.rsplit("/", 1)[-1], f.panel, f.rule) for f in found} == {
        ("configmap-sidecar.yaml:engine.json", "Requests", "counter-without-rate"),
        ("configmap-sidecar.yaml:gpu.json", "SM occupancy", "unit-mismatch"),
    }
    proc = subprocess.run(
        [sys.executable, "-m", "inferwatch", "dashboards", "lint", SHAPES / "configmap-sidecar.yaml"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr
    assert 'configmap-sidecar.yaml:gpu.json: panel "SM occupancy": unit-mismatch: ' in proc.stdout


def test_a_grafana_operator_pointer_is_one_line_naming_where_the_dashboard_is():
    # llm-d docs/monitoring/grafana/dashboards/*.yaml (tests/fixtures/dashboards/real-world): url and configMapRef
    real = FIXTURES / "dashboards" / "real-world"
    (url,) = lint_file(real / "llm-d-docs-inference-gateway-dashboard.yaml")
    (ref,) = lint_file(real / "llm-d-docs-llm-d-dashboard.yaml")
    assert url.rule == ref.rule == "not-a-dashboard"
    assert "points at the URL https://raw.githubusercontent.com/" in url.message
    assert "points at the ConfigMap name llm-d-dashboard-json key dashboard.json" in ref.message


def test_mangled_v2_dashboards_never_raise():
    rng = random.Random(11)
    resource = json.loads((SHAPES / "v2beta1-resource.json").read_text(encoding="utf-8"))
    for _ in range(100):
        mangled = _mangle(resource, rng, p=0.08)
        spec = mangled.get("spec") if isinstance(mangled.get("spec"), dict) else {}
        if isinstance(spec.get("elements"), dict):
            assert all(f.rule in RULES for f in lint_dashboard(from_v2(spec)))


def test_a_helm_template_is_read_with_its_actions_blanked():
    # prometheus-community/helm-charts kube-prometheus-stack: the dashboard JSON is a ConfigMap key, built from
    # {{`...`}} raw strings and {{ .Values... }} actions, beside a grafana-operator GrafanaDashboard pointing at it
    real = FIXTURES / "dashboards" / "real-world"
    found = lint_file(real / "kube-prometheus-stack-prometheus.yaml")
    assert [(f.file.rsplit("/", 1)[-1], f.panel, f.rule) for f in found] == [
        ("kube-prometheus-stack-prometheus.yaml:prometheus.json", "Target Sync", "sum-rate-as-latency")
    ]
    # Loki queries and Angular's "$$hashKey" are no PromQL and no variable; an untitled panel is named by type and id
    loki = lint_file(real / "kube-prometheus-stack-loki-logs.yaml")
    assert [(f.panel, f.rule) for f in loki] == [("untitled graph #6", "angular-panel")]


def test_inline_helm_conditionals_and_raw_strings(tmp_path):
    raw = '{"schemaVersion": 39, "panels": [{"type": "graph", "title": "t", "hide": '
    (tmp_path / "t.yaml").write_text(
        "{{- if .Values.grafana.enabled }}\napiVersion: v1\nkind: ConfigMap\nmetadata:\n"
        '  name: {{ printf "%s-x" (include "full" $) }}\ndata:\n  x.json: |-\n'
        f'    {{{{`{raw}`}}}}{{{{ if .Values.multi }}}}0{{{{ else }}}}2{{{{ end }}}}{{{{`, "targets": [{{"expr": '
        '"rate(vllm:num_requests_running[5m])", "legendFormat": "{{pod}}"}]}]}`}}\n{{- end }}\n',
        encoding="utf-8",
    )
    assert [(f.file.rsplit("/", 1)[-1], f.panel, f.rule) for f in lint_file(tmp_path / "t.yaml")] == [
        ("t.yaml:x.json", "t", "angular-panel")
    ]
