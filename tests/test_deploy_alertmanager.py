"""inferwatch's Alertmanager routing takes inferwatch's alerts and no others: every cluster alert routes through a
merged tree exactly as it did before, ours where the render says, asked of amtool (`config routes test`) on
kube-prometheus-stack's default tree, a user's own tree (genai-auto) and the operator's AlertmanagerConfig merge."""

from __future__ import annotations

import copy
import subprocess

import pytest
import yaml
from conftest import FIXTURES, need

from inferwatch.deploy import Config, render
from inferwatch.deploy._inputs import gather_inputs

REAL = FIXTURES / "real-configs"

# alerts a cluster already has: kube-prometheus-stack's own, and ones a user's routes take by name or severity
CLUSTER = [
    {"alertname": "Watchdog", "severity": "none", "namespace": "monitoring"},
    {"alertname": "InfoInhibitor", "severity": "none", "namespace": "default"},
    {"alertname": "KubePodCrashLooping", "severity": "critical", "namespace": "default", "pod": "web-0"},
    {"alertname": "KubePodCrashLooping", "severity": "warning", "namespace": "default", "pod": "web-0"},
    {"alertname": "KubeCPUOvercommit", "severity": "info", "namespace": "kube-system"},
    {"alertname": "APILatencyHigh", "severity": "warning"},
    {"alertname": "CostBudgetExceeded", "severity": "critical"},
]
# ours, and where the render sends them
OURS = [
    (
        {
            "alertname": "LLMErrorBudgetBurn",
            "service": "llm",
            "slo": "responsive",
            "tier": "page_fast",
            "severity": "critical",
            "model": "m",
        },
        "page",
    ),
    (
        {
            "alertname": "LLMErrorBudgetBurn",
            "service": "llm",
            "slo": "answered",
            "tier": "ticket_slow",
            "severity": "warning",
            "model": "m",
        },
        "ticket",
    ),
    ({"alertname": "LLMSLIDataMissing", "service": "llm", "slo": "responsive", "severity": "critical"}, "page"),
    ({"alertname": "LLMEngineTargetDown", "severity": "critical", "namespace": "llm"}, "page"),
    ({"alertname": "LLMQueueSaturated", "severity": "warning", "model": "m", "namespace": "llm"}, "ticket"),
]


def _routes(config: dict, labels: dict, tmp_path) -> str:
    """The receivers amtool sends `labels` to through `config`, as it prints them (comma-separated)."""
    path = tmp_path / "am.yml"
    path.write_text(yaml.safe_dump(config))
    proc = subprocess.run(
        [need("amtool"), "config", "routes", "test", f"--config.file={path}", *(f"{k}={v}" for k, v in labels.items())],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout.strip()


def _check(config: dict, tmp_path) -> None:
    path = tmp_path / "check.yml"
    path.write_text(yaml.safe_dump(config))
    proc = subprocess.run([need("amtool"), "check-config", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def kubernetes() -> dict[str, str]:
    return render(Config(), "kubernetes")


def _chart_default() -> dict:
    return yaml.safe_load((REAL / "kube-prometheus-stack-values.yaml").read_text())["alertmanager"]["config"]


def test_the_charts_default_tree_is_the_one_merged_into():
    from inferwatch.deploy._alertmanager import CHART_DEFAULT

    assert CHART_DEFAULT == _chart_default()


def _same_for_the_cluster_and_ours_where_said(before: dict, after: dict, tmp_path, prefix="inferwatch-") -> None:
    _check(after, tmp_path)
    for labels in CLUSTER:
        assert _routes(after, labels, tmp_path) == _routes(before, labels, tmp_path), labels
    for labels, where in OURS:
        assert _routes(after, labels, tmp_path) == prefix + where, labels


def test_helm_values_keep_the_charts_tree_and_route_only_ours(kubernetes, tmp_path):
    merged = yaml.safe_load(kubernetes["alertmanager/values.yaml"])["alertmanager"]["config"]
    _same_for_the_cluster_and_ours_where_said(_chart_default(), merged, tmp_path)
    assert merged["route"]["routes"][1:] == _chart_default()["route"]["routes"]  # Watchdog -> null, as it was
    assert [r for r in merged["inhibit_rules"] if "InfoInhibitor" in repr(r)] == [
        r for r in _chart_default()["inhibit_rules"] if "InfoInhibitor" in repr(r)
    ]


def test_merging_into_a_users_own_tree_keeps_it(tmp_path):
    from inferwatch.deploy._alertmanager import merge_document

    config = Config()
    inputs = gather_inputs(config)
    before = yaml.safe_load((REAL / "genai-auto" / "alertmanager.yml").read_text())
    merged = merge_document(before, "alertmanager.yml", config, inputs)
    _same_for_the_cluster_and_ours_where_said(before, merged, tmp_path)
    assert merge_document(merged, "alertmanager.yml", config, inputs) == merged  # again: nothing added twice
    assert {r["name"] for r in before["receivers"]} < {r["name"] for r in merged["receivers"]}


def test_merging_again_after_an_upgrade_replaces_what_was_added():
    """New alert names (an upgrade) replace the earlier exclusion in the chart's rule instead of adding a second."""
    from inferwatch.deploy._alertmanager import CHART_DEFAULT, alert_names, merge_into

    config = Config()
    inputs = gather_inputs(config)
    merged = merge_into(CHART_DEFAULT, config, inputs.inhibit_rules, inputs.rules)
    current = merged["inhibit_rules"][0]["target_matchers"]
    assert current[0] == "severity =~ warning|info" and "LLMErrorBudgetBurn" in current[1] and len(current) == 2
    merged["inhibit_rules"][0]["target_matchers"][1] = 'alertname!~"LLMErrorBudgetBurn|LLMGone"'
    again = merge_into(merged, config, inputs.inhibit_rules, inputs.rules)
    assert again == merge_into(CHART_DEFAULT, config, inputs.inhibit_rules, inputs.rules)
    assert "LLMQueueSaturated" in alert_names(inputs.rules)  # operational alerts too, not only the SLOs'


def _as_the_operator_merges(resource: dict, base: dict) -> dict:
    """What prometheus-operator makes of an AlertmanagerConfig with alertmanagerConfigMatcherStrategy None: its
    route first under the root, with continue forced true (the CRD: 'always overridden to true for the first-level
    route'), receivers named namespace/name/receiver; matchers and timings as they are."""
    ns, name = resource["metadata"]["namespace"], resource["metadata"]["name"]

    def convert(route: dict) -> dict:
        out = {
            "receiver": f"{ns}/{name}/{route['receiver']}",
            "matchers": [f'{m["name"]}{m["matchType"]}"{m["value"]}"' for m in route.get("matchers", [])],
        }
        out.update(
            {
                k: route[c]
                for k, c in (
                    ("group_by", "groupBy"),
                    ("group_wait", "groupWait"),
                    ("group_interval", "groupInterval"),
                    ("repeat_interval", "repeatInterval"),
                )
                if c in route
            }
        )
        if route.get("routes"):
            out["routes"] = [convert(r) for r in route["routes"]]
        return out

    config = copy.deepcopy(base)
    config["route"]["routes"] = [
        {**convert(resource["spec"]["route"]), "continue": True},
        *config["route"].get("routes", []),
    ]
    config["receivers"] += [{"name": f"{ns}/{name}/{r['name']}"} for r in resource["spec"]["receivers"]]
    return config


def test_the_alertmanagerconfig_takes_only_ours_under_matcher_strategy_none(kubernetes, tmp_path):
    resource = yaml.safe_load(kubernetes["alertmanager/alertmanagerconfig.yaml"])
    before = _chart_default()
    after = _as_the_operator_merges(resource, before)
    # continue: true on the operator's route: ours go on through the chart's routes, where none takes them
    _same_for_the_cluster_and_ours_where_said(before, after, tmp_path, prefix="monitoring/inferwatch/inferwatch-")


def _cli(*args):
    import sys

    return subprocess.run(
        [sys.executable, "-m", "inferwatch", "deploy", "merge-alertmanager", *map(str, args)],
        capture_output=True,
        text=True,
    )


def test_the_command_merges_a_values_file_and_refuses_what_is_no_tree(tmp_path):
    values = tmp_path / "values.yaml"
    values.write_text(
        "grafana: {enabled: false}\nalertmanager:\n  config:\n"
        + "".join(f"    {line}\n" for line in yaml.safe_dump(_chart_default()).splitlines())
    )
    proc = _cli(values, "-o", tmp_path / "merged.yaml")
    assert proc.returncode == 0, proc.stderr
    merged = yaml.safe_load((tmp_path / "merged.yaml").read_text())
    assert merged["grafana"] == {"enabled": False}
    _same_for_the_cluster_and_ours_where_said(_chart_default(), merged["alertmanager"]["config"], tmp_path)
    bad = tmp_path / "bad.yml"
    for text, message in (
        (
            "route: {receiver: x, routes: {a: b}}\nreceivers: [{name: x}]\n",
            "route.routes: expected a list of routes, got dict",
        ),
        ("receivers: [{name: x}]\n", "route: required, a mapping naming the root `receiver`"),
        ("route: {receiver: x}\nreceivers: x\n", "receivers: expected a list of mappings"),
        ("alertmanager: {config: null}\n", "alertmanager.config: expected an Alertmanager config"),
        ("- a\n- b\n", "expected an Alertmanager config"),
    ):
        bad.write_text(text)
        proc = _cli(bad)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, text
        assert f"{bad}: {message}" in proc.stderr, (text, proc.stderr)
