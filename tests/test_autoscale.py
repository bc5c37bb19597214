"""Autoscaling signals (autoscale/): the rules from the default SLO spec, run by promtool on engine series with
known quantiles, a new pod's cold start and an idle replica; the KEDA, adapter and HPA renders validated."""

from __future__ import annotations

import json

import pytest
import yaml

from conftest import ROOT, need
from inferwatch.autoscale import (ADAPTER_SIGNAL, adapter_rules, hpa, keda_scaled_object, load_knobs,
                                  render_autoscaling)
from inferwatch.canary._stats import quantile
from inferwatch.slo import check_rule_files, load_spec, run_rule_tests
from test_canary import _strict

SPEC = ROOT / "slo" / "defaults.yaml"          # TTFT 1 s, TPOT 100 ms


def _histogram(name: str, labels: str, per_minute: dict[str, int]) -> list[dict]:
    return [{"series": f'{name}_bucket{{{labels}, le="{le}"}}', "values": f"0+{n}x90"}
            for le, n in per_minute.items()]


def _model(model: str, ttft: dict[str, int], tpot: dict[str, int], pods=("a", "b")) -> list[dict]:
    series = []
    for pod in pods:
        labels = f'namespace="ml", model="{model}", pod="{model}-{pod}"'
        series += _histogram("llm_time_to_first_token_seconds", labels, ttft)
        series += _histogram("llm_time_per_output_token_seconds", labels, tpot)
        series += [{"series": f"llm_requests_running{{{labels}}}", "values": "3+0x90"},
                   {"series": f"llm_requests_waiting{{{labels}}}", "values": "1+0x90"},
                   {"series": f"llm_requests_finished_total{{{labels}}}", "values": "0+10x90"}]
    return series


# per-minute bucket increments of TTFT and TPOT; the pressure each gives is worked out below as Prometheus does
PRESSURE = {
    "hot": ({"0.5": 60, "1": 100, "+Inf": 100}, {"0.05": 100, "0.1": 100, "+Inf": 100}),     # TTFT p90 0.875 s
    "band": ({"0.5": 100, "1": 100, "+Inf": 100}, {"0.05": 80, "0.1": 100, "+Inf": 100}),    # TPOT p90 75 ms
    "cool": ({"0.25": 90, "1": 100, "+Inf": 100}, {"0.025": 100, "0.05": 100, "+Inf": 100}),  # TTFT p90 0.25 s
}
THRESHOLDS = (1.0, 0.1)


def _p90(per_minute: dict[str, int]) -> float:
    return quantile([(float(le), float(n)) for le, n in per_minute.items()], 0.9)


def _pressure(model: str) -> float:
    ttft, tpot = PRESSURE[model]
    return max(_p90(ttft) / THRESHOLDS[0], _p90(tpot) / THRESHOLDS[1])


def _annotations(rules, alert: str, **labels) -> dict:
    """The alert's annotations as Prometheus fills them in for `labels`."""
    rule = next(r for r in yaml.safe_load(rules.read_text())["groups"][0]["rules"] if r.get("alert") == alert)
    out = {}
    for key, text in rule["annotations"].items():
        for name, value in labels.items():
            text = text.replace("{{ $labels." + name + " }}", value)
        out[key] = text
    return out


def _expected_signal(pressure: float, knobs) -> float:
    return pressure if pressure > knobs.scale_up or pressure < knobs.scale_down else knobs.scale_up


def test_signals_pressure_cold_start_and_idle_replica(tmp_path):
    need("promtool")
    knobs = load_knobs()
    assert [round(_pressure(m), 6) for m in PRESSURE] == [0.875, 0.75, 0.25]    # over, inside, under the band
    rules = tmp_path / "autoscaling.rules.yaml"
    rules.write_text(render_autoscaling(load_spec(SPEC), knobs))
    ok, output = check_rule_files([rules])
    assert ok, output
    series = []
    for model, (ttft, tpot) in PRESSURE.items():
        series += _model(model, ttft, tpot)
    # a third replica of `hot`, first scraped at 20m (the others at 0: before the lookback's hour at 70m), its
    # first request finished at 23m; and a fourth, up from the start, that finishes nothing while others queue
    new = 'namespace="ml", model="hot", pod="hot-new"'
    series += [{"series": f"llm_requests_running{{{new}}}", "values": "_x20 1+0x60"},
               {"series": f"llm_requests_finished_total{{{new}}}", "values": "_x20 0 0 0 1+1x57"}]
    idle = 'namespace="ml", model="hot", pod="hot-idle"'
    series += [{"series": f"llm_requests_running{{{idle}}}", "values": "0+0x90"},
               {"series": f"llm_requests_waiting{{{idle}}}", "values": "20+0x90"},
               {"series": f"llm_requests_finished_total{{{idle}}}", "values": "5+0x90"}]
    cases = []
    for model in PRESSURE:
        pressure = _pressure(model)
        sel = f'namespace="ml", model="{model}"'
        cases.append({"expr": f"llm_autoscale:slo_pressure{{{sel}}}", "eval_time": "70m",
                      "exp_samples": [{"labels": f"llm_autoscale:slo_pressure{{{sel}}}", "value": pressure}]})
        cases.append({"expr": f"llm_autoscale:scaling_signal{{{sel}}}", "eval_time": "70m",
                      "exp_samples": [{"labels": f"llm_autoscale:scaling_signal{{{sel}}}",
                                       "value": _expected_signal(pressure, knobs)}]})
    cases += [
        {"expr": 'llm_autoscale:replicas{model="hot"}', "eval_time": "70m",
         "exp_samples": [{"labels": 'llm_autoscale:replicas{namespace="ml", model="hot"}', "value": 4}]},
        {"expr": 'llm_autoscale:running_per_replica{model="band"}', "eval_time": "70m",
         "exp_samples": [{"labels": 'llm_autoscale:running_per_replica{namespace="ml", model="band"}', "value": 3}]},
        {"expr": "llm_autoscale:cold_start_seconds", "eval_time": "70m",
         "exp_samples": [{"labels": f"llm_autoscale:cold_start_seconds{{{new}}}", "value": 180}]},
    ]
    alerts = [{"eval_time": "9m", "alertname": "LLMReplicaIdleWhileOthersQueue", "exp_alerts": []},
              {"eval_time": "25m", "alertname": "LLMReplicaIdleWhileOthersQueue", "exp_alerts": [
                  {"exp_labels": {"severity": "warning", "namespace": "ml", "model": "hot", "pod": "hot-idle"},
                   "exp_annotations": _annotations(rules, "LLMReplicaIdleWhileOthersQueue",
                                                   pod="hot-idle", model="hot")}]}]
    test = tmp_path / "autoscaling.test.yaml"
    test.write_text(yaml.safe_dump({"rule_files": [rules.name], "evaluation_interval": "30s", "tests": [
        {"interval": "1m", "input_series": series, "promql_expr_test": cases, "alert_rule_test": alerts}]},
        sort_keys=False))
    ok, output = run_rule_tests([test])
    assert ok, output


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

    return parse_config({"version": 1, "autoscaling": {"via": via}, "engines": [
        {"name": "vllm", "selector": {"app": "vllm"}, **engine}]}, "deploy.yaml")


@pytest.mark.parametrize("via, path, kind", [("keda", "autoscaling/vllm.scaledobject.yaml", "ScaledObject"),
                                             ("hpa", "autoscaling/vllm.hpa.yaml", "HorizontalPodAutoscaler")])
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
        jsonschema.validate(doc, _strict(json.loads(
            (ROOT / "tests" / "fixtures" / "crds" / "keda-scaledobject-v1alpha1.json").read_text())))


def test_autoscaling_without_an_engine_to_scale_says_what_is_missing():
    from inferwatch.errors import SpecError

    with pytest.raises(SpecError, match="autoscaling.via: keda: no engine to scale"):
        _config("keda")
    with pytest.raises(SpecError, match="autoscaling.via"):
        _config("knative", model="m", workload="deployment/x")


def test_doctor_checks_each_autoscaled_model_in_prometheus_and_in_the_adapter(tmp_path):
    """A real Prometheus holds the signal for one of two autoscaled models; the Kubernetes external metrics API
    (which cannot run here: served by a stand-in answering as prometheus-adapter does) has it for the same one."""
    from inferwatch.deploy import parse_config
    from inferwatch.deploy._doctor import check_autoscaling
    from inferwatch.promapi import Client
    from promtools import prometheus, serve, wait_for

    config = parse_config({"version": 1, "autoscaling": {"via": "hpa"}, "engines": [
        {"name": "a", "namespace": "ml", "selector": {"app": "a"}, "model": "llama", "workload": "deployment/a"},
        {"name": "b", "namespace": "ml", "selector": {"app": "b"}, "model": "qwen", "workload": "deployment/b"}]},
        "deploy.yaml")
    rules = tmp_path / "signal.rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": [{"name": "g", "interval": "1s", "rules": [
        {"record": "llm_autoscale:scaling_signal", "expr": "vector(0.8)",
         "labels": {"namespace": "ml", "model": "llama"}}]}]}))
    path = f"/apis/external.metrics.k8s.io/v1beta1/namespaces/ml/{ADAPTER_SIGNAL}"

    def adapter(handler):
        body = json.dumps({"kind": "ExternalMetricValueList", "apiVersion": "external.metrics.k8s.io/v1beta1",
                           "items": [{"metricName": ADAPTER_SIGNAL, "value": "800m"}]
                           if "model%3Dllama" in handler.path else []}).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    routes = {f"{path}?labelSelector=model%3D{m}": adapter for m in ("llama", "qwen")}
    with prometheus(need("prometheus"), {"global": {"evaluation_interval": "1s"}, "rule_files": [str(rules)]},
                    tmp_path) as base, serve(routes) as kube:
        prom = Client(base)
        wait_for(lambda: prom.query("llm_autoscale:scaling_signal"))
        results = {r.check: r.status for r in check_autoscaling(prom, config, Client(kube))}
    assert results == {"autoscaling signal llama": "ok", "external metric llama": "ok",
                       "autoscaling signal qwen": "missing", "external metric qwen": "missing"}
