"""`deploy render` with `backend: victoriametrics` (issue 25 §2): the VM operator's manifests validate strictly against
its vendored CRDs and carry what the Prometheus-operator render carries; the compose stack's configs are accepted by
the real victoria-metrics, vmagent and vmalert (Debian's 1.79.5), started with the rendered command lines, the
simulator as the engines: series arrive with the common names and every rule group loads.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

import jsonschema
import pytest
import yaml
from conftest import FIXTURES, ROOT, need
from deploytools import alertmanager, validate_manifest
from promtools import process, query, wait_for
from simtools import simulator
from test_deploy import FULL

from inferwatch.deploy import Config, parse_config, render
from inferwatch.deploy._victoriametrics import VMALERT_EXTRA_ARGS
from inferwatch.durations import parse_duration
from inferwatch.sim._demo import free_port

VM = {"version": 1, "backend": "victoriametrics"}
MULTI = {
    **VM,
    "frontdoor": {"enabled": False},
    "cluster": {"name": "a", "remote_write_url": "http://central:8428/api/v1/write"},
}


def _vm(config: Config) -> Config:
    return replace(config, backend="victoriametrics")


@pytest.fixture(scope="module")
def renders() -> dict[str, dict[str, str]]:
    full = _vm(parse_config(yaml.safe_load(FULL), "full.yaml"))
    sidecar = replace(full, scrape_mode="sidecar")
    return {
        "default-kubernetes": render(_vm(Config()), "kubernetes"),
        "full-kubernetes": render(full, "kubernetes"),
        "sidecar-kubernetes": render(sidecar, "kubernetes"),
        "default-compose": render(_vm(Config()), "compose"),
        "full-compose": render(full, "compose"),
        "prometheus-kubernetes": render(Config(), "kubernetes"),
    }


def _manifests(files: dict[str, str]) -> dict[str, dict]:
    return {path: yaml.safe_load(files[path]) for path in yaml.safe_load(files["kustomization.yaml"])["resources"]}


def _vmalert(files: list[Path], *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [need("vmalert"), "-dryRun", "-loggerLevel=ERROR", *(f"-rule={f}" for f in files), *flags],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_backend_is_checked_like_every_key():
    from inferwatch.errors import SpecError
    from inferwatch.yamlio import load_document

    assert parse_config(VM, "d.yaml").backend == "victoriametrics"
    with pytest.raises(SpecError) as err:
        loaded = load_document("d.yaml", "version: 1\nbackend: thanos\nvictoriametrics: {url: vm}\n")
        parse_config(loaded.data, loaded.file, loaded.positions)
    assert "d.yaml:2: backend: 'thanos': use one of prometheus, victoriametrics" in str(err.value)
    assert "d.yaml:3: victoriametrics.url: 'vm' is not an http:// or https:// URL" in str(err.value)


# --- Kubernetes: the VictoriaMetrics operator -------------------------------------------------------------------


@pytest.mark.parametrize("which", ["default-kubernetes", "full-kubernetes", "sidecar-kubernetes"])
def test_every_vm_operator_manifest_validates_offline(renders, which):
    manifests = _manifests(renders[which])
    kinds = {doc["kind"] for doc in manifests.values()}
    assert not [d for d in manifests.values() if d["apiVersion"].startswith("monitoring.coreos.com/")]
    assert {"VMRule", "VMAlert"} <= kinds and kinds & {"VMPodScrape", "VMServiceScrape"}
    problems = {path: validate_manifest(doc) for path, doc in manifests.items()}
    assert not {p: e for p, e in problems.items() if e}


def test_validation_catches_a_prometheus_operator_field_in_a_vm_object():
    """The vendored CRDs are read strictly: the Prometheus-operator spelling is an error in a VMPodScrape."""
    scrape = {
        "apiVersion": "operator.victoriametrics.com/v1beta1",
        "kind": "VMPodScrape",
        "metadata": {"name": "x"},
        "spec": {"selector": {}, "podMetricsEndpoints": [{"port": "http", "metricRelabelings": []}]},
    }
    assert validate_manifest(scrape)
    scrape["spec"]["podMetricsEndpoints"][0] = {"port": "http", "metricRelabelConfigs": []}
    assert not validate_manifest(scrape)


def test_vm_objects_carry_what_the_prometheus_operator_render_carries(renders):
    """The same selectors, endpoints, relabelings and rule groups, under the VM operator's names."""
    vm, prom = _manifests(renders["default-kubernetes"]), _manifests(renders["prometheus-kubernetes"])
    pairs = {
        "monitors/vllm.vmpodscrape.yaml": "monitors/vllm.podmonitor.yaml",
        "monitors/dcgm-exporter.vmservicescrape.yaml": "monitors/dcgm-exporter.servicemonitor.yaml",
        "rules/inferwatch-slo-llm.vmrule.yaml": "rules/inferwatch-slo-llm.prometheusrule.yaml",
    }
    renamed = {"metricRelabelConfigs": "metricRelabelings", "relabelConfigs": "relabelings"}
    for ours, theirs in pairs.items():
        spec, want = vm[ours]["spec"], prom[theirs]["spec"]
        for key in ("podMetricsEndpoints", "endpoints"):
            if key in spec:
                spec = {**spec, key: [{renamed.get(k, k): v for k, v in e.items()} for e in spec[key]]}
        assert spec == want, ours
    assert len([d for d in vm.values() if d["kind"] == "VMRule"]) == len(
        [d for d in prom.values() if d["kind"] == "PrometheusRule"]
    )


def test_our_vmalert_runs_our_vmrules_only_with_the_flags_they_need(renders):
    manifests = _manifests(renders["default-kubernetes"])
    vmalert = manifests["vmalert/vmalert.yaml"]["spec"]
    selector = vmalert["ruleSelector"]["matchLabels"]
    rules = [d for d in manifests.values() if d["kind"] == "VMRule"]
    assert rules and all(selector.items() <= d["metadata"]["labels"].items() for d in rules)
    assert vmalert["selectAllByDefault"] is False and vmalert["replicaCount"] == 1
    assert vmalert["extraArgs"] == VMALERT_EXTRA_ARGS == {"datasource.queryTimeAlignment": "false"}
    store = Config().victoriametrics.url
    assert vmalert["datasource"]["url"] == store + "/?nocache=1"  # the store's 30 s latency offset
    assert vmalert["remoteWrite"]["url"] == vmalert["remoteRead"]["url"] == store
    assert vmalert["notifier"]["url"] == Config().victoriametrics.alertmanager_url
    # the stack's own VMAlert keeps every rule but ours, in every namespace
    stack = yaml.safe_load(renders["default-kubernetes"]["vmalert/values.yaml"])["vmalert"]["spec"]
    assert stack["ruleNamespaceSelector"] == {}
    assert stack["ruleSelector"]["matchExpressions"] == [
        {"key": k, "operator": "NotIn", "values": [v]} for k, v in selector.items()
    ]
    assert "vmalert/values.yaml" not in yaml.safe_load(renders["default-kubernetes"]["kustomization.yaml"])["resources"]


def test_vmrule_groups_load_in_vmalert(renders, tmp_path):
    files = []
    for which in ("default-kubernetes", "full-kubernetes"):
        for path, doc in _manifests(renders[which]).items():
            if doc["kind"] == "VMRule":
                files.append(tmp_path / f"{which}-{Path(path).name}")
                files[-1].write_text(yaml.safe_dump({"groups": doc["spec"]["groups"]}))
    assert len(files) >= 8
    proc = _vmalert(files)
    assert proc.returncode == 0, proc.stderr[-3000:]


# --- multi-cluster ----------------------------------------------------------------------------------------------


def test_multicluster_writes_with_the_cluster_label_and_runs_the_rules_centrally(tmp_path):
    """As the Prometheus render: the cluster's agent remote-writes every sample with `cluster`, no rule runs in the
    cluster, and the central rules (SLOs grouped by cluster) load in a central vmalert."""
    config = parse_config(MULTI, "multi.yaml")
    k8s = render(config, "kubernetes")
    values = yaml.safe_load(k8s["vmagent/values.yaml"])["vmagent"]
    assert values == {
        "additionalRemoteWrites": [{"url": MULTI["cluster"]["remote_write_url"]}],
        "spec": {"externalLabels": {"cluster": "a"}},
    }
    assert not [d for d in _manifests(k8s).values() if d["kind"] in ("VMRule", "VMAlert")]
    central = sorted(p for p in k8s if p.startswith("central/rules/"))
    assert "sum by (model, cluster) (" in k8s["central/rules/inferwatch-slo-llm.yaml"]
    note = k8s[central[0]].splitlines()[3]
    assert note.startswith("# vmalert -rule=central/rules/*.yaml ") and "-datasource.queryTimeAlignment=false" in note
    for path in central:
        (tmp_path / Path(path).name).write_text(k8s[path])
    proc = _vmalert([tmp_path / "*.yaml"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    agent = yaml.safe_load(render(config, "compose")["compose.yaml"])["services"]["vmagent"]["command"]
    assert {
        "-remoteWrite.url=http://victoria-metrics:8428/api/v1/write",
        "-remoteWrite.url=" + MULTI["cluster"]["remote_write_url"],
        "-remoteWrite.label=cluster=a",
    } <= set(agent)


# --- compose ----------------------------------------------------------------------------------------------------


def _write(files: dict[str, str], out: Path) -> Path:
    for path, text in files.items():
        (out / path).parent.mkdir(parents=True, exist_ok=True)
        (out / path).write_text(text)
    return out


@pytest.mark.parametrize("which", ["default-compose", "full-compose"])
def test_compose_validates_and_vmagent_and_vmalert_accept_its_files_as_they_are(renders, which, tmp_path):
    """vmagent reads the scrape file strictly (no -promscrape.config.strictParse=false), vmalert every rule file."""
    files = renders[which]
    schema = json.loads((FIXTURES / "compose-spec" / "compose-spec.json").read_text())
    compose = yaml.safe_load(files["compose.yaml"])
    assert not [e.message for e in jsonschema.Draft7Validator(schema).iter_errors(compose)]
    assert "prometheus" not in compose["services"]
    for name, service in compose["services"].items():
        assert service["read_only"] and service["cap_drop"] == ["ALL"], name
        assert ":" in service["image"] and not service["image"].endswith(":latest"), name
    out = _write(files, tmp_path)
    proc = subprocess.run(
        [need("vmagent"), "-dryRun", "-loggerLevel=ERROR", f"-promscrape.config={out / 'vmagent' / 'scrape.yml'}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = _vmalert([out / "vmalert" / "rules" / "*.yaml"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    amtool = subprocess.run(
        [need("amtool"), "check-config", str(out / "alertmanager" / "alertmanager.yml")], capture_output=True, text=True
    )
    assert amtool.returncode == 0, amtool.stdout + amtool.stderr


def test_grafana_reads_victoria_metrics(renders):
    source = yaml.safe_load(renders["default-compose"]["grafana/provisioning/datasources/inferwatch.yaml"])
    assert source["datasources"][0] | {"name": "VictoriaMetrics"} == source["datasources"][0]
    assert source["datasources"][0]["type"] == "prometheus"  # VictoriaMetrics answers Prometheus' query API
    assert source["datasources"][0]["url"] == "http://victoria-metrics:8428"


def _local(service: dict, out: Path, hosts: dict[str, str], port: int) -> list[str]:
    """A compose service's command line for a process here: compose host names to loopback addresses, container
    paths to what they mount (the rendered folder, or a folder per named volume), listening on `port`."""
    args = []
    for arg in service["command"]:
        for host, local in hosts.items():
            arg = arg.replace(f"//{host}", f"//{local}")
        for volume in service.get("volumes", []):
            source, target = volume.split(":")[:2]
            arg = arg.replace(
                target,
                str(out / source.removeprefix("./")) if source.startswith("./") else str(out / "volumes" / source),
            )
        args.append(arg)
    return [*args, f"-httpListenAddr=127.0.0.1:{port}"]


def _rules_api(base: str) -> list[dict]:
    with urllib.request.urlopen(base + "/api/v1/rules", timeout=5) as resp:
        return json.load(resp)["data"]["groups"]


def test_the_compose_stack_runs_on_the_real_binaries(tmp_path):
    """victoria-metrics, vmagent and vmalert started with the rendered compose command lines (only host names,
    mounts and listen addresses made local), two simulated engines as the vLLM and SGLang services, a real
    Alertmanager with the rendered config: both engines' series arrive in the common vocabulary with their
    models, and vmalert loads every rule group the render holds, none failing."""
    config = parse_config({**VM, "frontdoor": {"enabled": False}, "scrape_interval": "2s"}, "deploy.yaml")
    files = render(config, "compose")
    out = _write(files, tmp_path / "stack")
    services = yaml.safe_load(files["compose.yaml"])["services"]
    ports = {name: free_port() for name in ("victoria-metrics", "vmagent", "vmalert")}
    with ExitStack() as stack:
        engines = {
            name: stack.enter_context(simulator(engine, model=model))[0].removeprefix("http://")
            for name, engine, model in (("vllm:8000", "vllm", "llama-3-8b"), ("sglang:30000", "sglang", "qwen3-8b"))
        }
        scrape = out / "vmagent" / "scrape.yml"
        scrape.write_text(re.sub("|".join(engines), lambda m: engines[m.group(0)], scrape.read_text()))
        am = stack.enter_context(
            alertmanager(need("prometheus-alertmanager"), out / "alertmanager" / "alertmanager.yml", tmp_path)
        )
        hosts = {
            "victoria-metrics:8428": f"127.0.0.1:{ports['victoria-metrics']}",
            "alertmanager:9093": am.removeprefix("http://"),
        }
        (out / "volumes").mkdir()
        bases = {}
        for name in ("victoria-metrics", "vmagent", "vmalert"):
            bases[name] = f"http://127.0.0.1:{ports[name]}"
            stack.enter_context(
                process(
                    [need(name), *_local(services[name], out, hosts, ports[name])],
                    tmp_path / f"{name}.log",
                    ready=bases[name],
                )
            )
        store = bases["victoria-metrics"]
        models = wait_for(
            lambda: (
                {r["metric"].get("model") for r in query(store, "llm_requests_running")} >= {"llama-3-8b", "qwen3-8b"}
                or None
            ),
            timeout=60,
        )
        assert models
        assert query(store, 'llm_kv_cache_usage_ratio{model="qwen3-8b", engine="sglang"}')
        assert query(store, 'llm_time_to_first_token_seconds_bucket{model="llama-3-8b", engine="vllm"}')
        loaded = _rules_api(bases["vmalert"])
        groups = [
            g
            for path, text in files.items()
            if path.startswith("vmalert/rules/")
            for g in yaml.safe_load(text)["groups"]
        ]
        assert {g["name"]: len(g["rules"]) for g in loaded} == {g["name"]: len(g["rules"]) for g in groups}
        # groups without an interval run as often as Prometheus' evaluation_interval has them (vmalert's default: 1m)
        every = yaml.safe_load(render(replace(config, backend="prometheus"), "compose")["prometheus/prometheus.yml"])[
            "global"
        ]["evaluation_interval"]
        assert {g["name"]: g["interval"] for g in loaded} == {
            g["name"]: parse_duration(g.get("interval", every)) for g in groups
        }
        # vmalert starts each group at a moment of its interval of its own: the first of them evaluates within
        # seconds; its records come back from the store, and no rule fails
        evaluated = wait_for(
            lambda: [
                (g["name"], r["name"])
                for g in _rules_api(bases["vmalert"])
                for r in g["rules"]
                if r["type"] == "recording" and r.get("lastSamples")
            ],
            timeout=90,
        )
        group, record = evaluated[0]
        assert wait_for(lambda: query(store, record)), (group, record)
        assert not [
            (g["name"], r["name"], r["lastError"])
            for g in _rules_api(bases["vmalert"])
            for r in g["rules"]
            if r.get("lastError")
        ]


# --- the README -------------------------------------------------------------------------------------------------


def _readme_section() -> str:
    text = (ROOT / "deploy" / "README.md").read_text()
    return text.split("## VictoriaMetrics (`backend: victoriametrics`)")[1].split("\n## ")[0]


def test_the_readme_commands_render_what_is_checked_in(tmp_path):
    """deploy/README.md's commands, run as written up to their `&&` (into tmp_path): the Kubernetes render is the
    checked-in one; compose too, but for where it builds our image from (this clone, seen from the folder)."""
    commands = re.findall(r"(?m)^inferwatch (deploy render .*?) && ", _readme_section())
    assert len(commands) == 2
    for command in commands:
        args = command.split()
        out = args[args.index("-o") + 1]
        args[args.index("-o") + 1] = str(tmp_path / out)
        proc = subprocess.run([sys.executable, "-m", "inferwatch", *args], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        folder = "compose-victoriametrics" if "compose" in args else "kubernetes-victoriametrics"
        checked_in = ROOT / "deploy" / folder
        want = {str(p.relative_to(checked_in)): p.read_text() for p in checked_in.rglob("*") if p.is_file()}
        got = {str(p.relative_to(tmp_path / out)): p.read_text() for p in (tmp_path / out).rglob("*") if p.is_file()}
        assert got.keys() == want.keys()
        differ = [p for p in want if got[p] != want[p]]
        assert differ == (["compose.yaml"] if "compose" in args else []), differ
        if differ:
            context = os.path.relpath(ROOT, tmp_path / out)
            assert got["compose.yaml"] == want["compose.yaml"].replace("../..", context)


def test_the_readme_config_example_is_valid():
    example = re.search(r"```yaml\n(.*?)```", _readme_section(), re.S).group(1)
    config = parse_config(yaml.safe_load("version: 1\n" + example), "README.md")
    assert config.backend == "victoriametrics" and config.victoriametrics == Config().victoriametrics


def test_each_service_runs_with_the_flags_the_readme_names(renders):
    """The README's table of flags is what compose runs (a flag with `=` exactly; the others by name)."""
    rows = re.findall(r"(?m)^\| (victoria-metrics|vmagent|vmalert) \| (.+?) \|", _readme_section())
    services = yaml.safe_load(renders["default-compose"]["compose.yaml"])["services"]
    assert {service for service, _ in rows} == {"victoria-metrics", "vmagent", "vmalert"}
    for service, flags in rows:
        for flag in re.findall(r"`(-[^`]+)`", flags):
            command = services[service]["command"]
            assert flag in command if "=" in flag else any(a.startswith(flag + "=") for a in command), (service, flag)
    vmalert = services["vmalert"]["command"]
    assert "-notifier.url=http://alertmanager:9093" in vmalert and "alertmanager" in services
