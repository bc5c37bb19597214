"""Autoscaling signals (autoscale/): the rules and their generated promtool test for any knobs, the KEDA, adapter
and HPA renders validated, deploy render's scalers and doctor's checks."""

from __future__ import annotations

import json

import pytest
import yaml
from conftest import ROOT, need
from test_canary import _strict

from inferwatch.autoscale import (
    ADAPTER_SIGNAL,
    adapter_rules,
    hpa,
    keda_scaled_object,
    load_knobs,
    promtool_test,
    render_autoscaling,
)
from inferwatch.slo import check_rule_files, load_spec, run_rule_tests

SPEC = ROOT / "slo" / "defaults.yaml"  # TTFT 1 s, TPOT 100 ms


@pytest.mark.parametrize(
    "knobs", [{}, {"scale_up": 1.2, "scale_down": 0.3, "scale_down_delay": "15m"}], ids=["default", "other-knobs"]
)
def test_the_shipped_promtool_test_passes_for_any_knobs(tmp_path, knobs):
    """The generated test (alerts/tests/inferwatch-autoscaling.test.yaml for the defaults): pressure over, inside
    and under the band, the scaling signal held inside it, replicas, a cold start of 180 s, an idle replica."""
    need("promtool")
    spec, knobs = load_spec(SPEC), load_knobs(knobs)
    rules = tmp_path / "autoscaling.rules.yaml"
    rules.write_text(render_autoscaling(spec, knobs))
    ok, output = check_rule_files([rules])
    assert ok, output
    (tmp_path / "tests").mkdir()
    test = tmp_path / "tests" / "autoscaling.test.yaml"
    test.write_text(promtool_test(spec, knobs, rules.name))
    ok, output = run_rule_tests([test])
    assert ok, output


def test_the_checked_in_autoscaling_files_are_the_generated_ones():
    assert (ROOT / "alerts" / "inferwatch-autoscaling.rules.yaml").read_text() == render_autoscaling(
        load_spec(SPEC), load_knobs()
    )
    assert (ROOT / "alerts" / "tests" / "inferwatch-autoscaling.test.yaml").read_text() == promtool_test(
        load_spec(SPEC), load_knobs(), "inferwatch-autoscaling.rules.yaml"
    )


def test_knobs_refuse_a_band_upside_down():
    with pytest.raises(ValueError, match="scale_down"):
        load_knobs({"scale_up": 0.5, "scale_down": 0.6})
    with pytest.raises(ValueError, match="min_replicas"):
        load_knobs({"min_replicas": 3, "max_replicas": 2})


def test_keda_scaled_object_validates_and_never_reads_missing_data_as_zero():
    jsonschema = pytest.importorskip("jsonschema")
    schema = _strict(json.loads((ROOT / "tests" / "fixtures" / "crds" / "keda-scaledobject-v1alpha1.json").read_text()))
    doc = keda_scaled_object("llama", "ml", "vllm-llama", load_knobs(), "http://prometheus:9090")
    jsonschema.validate(doc, schema)
    triggers = doc["spec"]["triggers"]
    assert all(t["metadata"]["ignoreNullValues"] == "false" for t in triggers)
    assert {t["metadata"]["activationThreshold"] for t in triggers}
    assert 'model="llama"' in triggers[0]["metadata"]["query"] and triggers[0]["metricType"] == "Value"


def test_hpa_validates_against_the_kubernetes_schema_and_adapter_rules_name_the_signal():
    kv = pytest.importorskip("kubernetes_validate")
    doc = hpa("llama", "ml", "vllm-llama", load_knobs())
    kv.validate(doc, "1.33.0", strict=True)
    assert doc["spec"]["metrics"][0]["external"]["metric"]["name"] == ADAPTER_SIGNAL
    assert [r["name"]["as"] for r in adapter_rules()["externalRules"]][0] == ADAPTER_SIGNAL


def _config(via: str, **engine):
    from inferwatch.deploy import parse_config

    return parse_config(
        {
            "version": 1,
            "autoscaling": {"via": via},
            "engines": [{"name": "vllm", "selector": {"app": "vllm"}, **engine}],
        },
        "deploy.yaml",
    )


@pytest.mark.parametrize(
    "via, path, kind",
    [
        ("keda", "autoscaling/vllm.scaledobject.yaml", "ScaledObject"),
        ("hpa", "autoscaling/vllm.hpa.yaml", "HorizontalPodAutoscaler"),
    ],
)
def test_deploy_render_scales_an_engine_with_a_model_and_a_deployment(via, path, kind):
    from inferwatch.deploy import render

    config = _config(via, model="llama-3-8b", workload="deployment/vllm-llama")
    files = render(config, "kubernetes")
    doc = yaml.safe_load(files[path])
    assert doc["kind"] == kind and doc["spec"]["scaleTargetRef"]["name"] == "vllm-llama"
    assert path in yaml.safe_load(files["kustomization.yaml"])["resources"]
    assert "inferwatch-autoscaling" in files["rules/inferwatch-autoscaling.prometheusrule.yaml"]
    if via == "hpa":
        values = yaml.safe_load(files["autoscaling/prometheus-adapter-values.yaml"])
        assert values["rules"]["externalRules"][0]["name"]["as"] == ADAPTER_SIGNAL
    else:
        jsonschema = pytest.importorskip("jsonschema")
        jsonschema.validate(
            doc,
            _strict(json.loads((ROOT / "tests" / "fixtures" / "crds" / "keda-scaledobject-v1alpha1.json").read_text())),
        )


def test_autoscaling_without_an_engine_to_scale_says_what_is_missing():
    from inferwatch.errors import SpecError

    with pytest.raises(SpecError, match="autoscaling.via: keda: no engine to scale"):
        _config("keda")
    with pytest.raises(SpecError, match="autoscaling.via"):
        _config("knative", model="m", workload="deployment/x")


def test_doctor_checks_each_autoscaled_model_in_prometheus_and_in_the_adapter(tmp_path):
    """A real Prometheus holds the signal for one of two autoscaled models; the Kubernetes external metrics API
    (which cannot run here: served by a stand-in answering as prometheus-adapter does) has it for the same one."""
    from promtools import prometheus, serve, wait_for

    from inferwatch.deploy import parse_config
    from inferwatch.deploy._doctor import check_autoscaling
    from inferwatch.promapi import Client

    config = parse_config(
        {
            "version": 1,
            "autoscaling": {"via": "hpa"},
            "engines": [
                {
                    "name": "a",
                    "namespace": "ml",
                    "selector": {"app": "a"},
                    "model": "llama",
                    "workload": "deployment/a",
                },
                {"name": "b", "namespace": "ml", "selector": {"app": "b"}, "model": "qwen", "workload": "deployment/b"},
            ],
        },
        "deploy.yaml",
    )
    rules = tmp_path / "signal.rules.yaml"
    rules.write_text(
        yaml.safe_dump(
            {
                "groups": [
                    {
                        "name": "g",
                        "interval": "1s",
                        "rules": [
                            {
                                "record": "llm_autoscale:scaling_signal",
                                "expr": "vector(0.8)",
                                "labels": {"namespace": "ml", "model": "llama"},
                            }
                        ],
                    }
                ]
            }
        )
    )
    path = f"/apis/external.metrics.k8s.io/v1beta1/namespaces/ml/{ADAPTER_SIGNAL}"

    def adapter(handler):
        body = json.dumps(
            {
                "kind": "ExternalMetricValueList",
                "apiVersion": "external.metrics.k8s.io/v1beta1",
                "items": [{"metricName": ADAPTER_SIGNAL, "value": "800m"}] if "model%3Dllama" in handler.path else [],
            }
        ).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    routes = {f"{path}?labelSelector=model%3D{m}": adapter for m in ("llama", "qwen")}
    with (
        prometheus(
            need("prometheus"), {"global": {"evaluation_interval": "1s"}, "rule_files": [str(rules)]}, tmp_path
        ) as base,
        serve(routes) as kube,
    ):
        prom = Client(base)
        wait_for(lambda: prom.query("llm_autoscale:scaling_signal"))
        results = {r.check: r.status for r in check_autoscaling(prom, config, Client(kube))}
    assert results == {
        "autoscaling signal llama": "ok",
        "external metric llama": "ok",
        "autoscaling signal qwen": "missing",
        "external metric qwen": "missing",
    }
