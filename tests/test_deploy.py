"""`inferwatch deploy render`: a typed config, and manifests that validate offline, whose rules pass promtool and
whose Alertmanager routing a real Alertmanager loads and inhibits with."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

import jsonschema
import pytest
import yaml
from conftest import FIXTURES, ROOT, need
from deploytools import alertmanager, validate_manifest

from inferwatch.deploy import Config, parse_config, render, render_default
from inferwatch.errors import SpecError

FULL = """\
version: 1
namespace: observability
release: prom
image: registry.example.com/inferwatch:0.1.0
scrape_mode: exporter
engines:
  - name: llama-pd
    engine: vllm
    namespace: serving
    selector: {app: llama}
    role_label: llm-d.ai/role
    urls: [http://llama-0.llama.serving.svc:8000/metrics, http://llama-1.llama.serving.svc:8000/metrics]
    max_running_requests: {llama-3-70b: 256}
  - name: qwen
    engine: sglang
    namespace: serving
    selector: {app: qwen}
    port: ""
    port_number: 30000
    urls: [http://qwen.serving.svc:30000/metrics]
nvml: {enabled: true}
frontdoor: {namespace: serving, upstream: "http://llama.serving.svc:8000", replicas: 3}
alerting: {page_webhook: "http://pager.example.com/hook", ticket_webhook: "http://tickets.example.com/hook"}
compose: {simulate: false}
"""


def _full(tmp_path=None) -> Config:
    return parse_config(yaml.safe_load(FULL), "full.yaml")


@pytest.fixture(scope="module")
def renders() -> dict[str, dict[str, str]]:
    """Every target of the defaults and of a config that turns everything else on."""
    full = _full()
    return {
        "default-kubernetes": render(Config(), "kubernetes"),
        "default-compose": render(Config(), "compose"),
        "full-kubernetes": render(full, "kubernetes"),
        "full-compose": render(full, "compose"),
    }


def _manifests(files: dict[str, str]) -> dict[str, dict]:
    resources = yaml.safe_load(files["kustomization.yaml"])["resources"]
    return {path: yaml.safe_load(files[path]) for path in resources}


# --- the config -------------------------------------------------------------------------------------------------

BAD = [
    ("version: 2\n", "cfg.yaml:1: version: 2: this inferwatch reads version 1"),
    ("version: 1\nrelase: prom\n", "cfg.yaml:2: relase: unknown key; did you mean 'release'?"),
    (
        "version: 1\nimage: ghcr.io/inferwatch/inferwatch\n",
        "cfg.yaml:2: image: 'ghcr.io/inferwatch/inferwatch': pin the image with a tag or digest",
    ),
    ("version: 1\nimage: ghcr.io/inferwatch/inferwatch:latest\n", "`latest` is not a pinned tag"),
    ("version: 1\nscrape_interval: 1m\n", "cfg.yaml:2: scrape_interval: 1m: the SLO rules count requests per minute"),
    ("version: 1\nscrape_mode: daemon\n", "cfg.yaml:2: scrape_mode: 'daemon': use one of relabel, exporter, sidecar"),
    (
        "version: 1\nengines:\n  - {name: v, selector: {app: v}, workload: pod/v}\n",
        "cfg.yaml:3: engines[0].workload: 'pod/v' is not KIND/NAME",
    ),
    (
        "version: 1\nengines:\n  - name: Vllm_0\n    selector: {app: v}\n",
        "cfg.yaml:3: engines[0].name: 'Vllm_0' is not a Kubernetes name",
    ),
    (
        "version: 1\nengines:\n  - name: v\n    engine: tgi\n    selector: {app: v}\n",
        "cfg.yaml:4: engines[0].engine: 'tgi': use one of vllm, sglang",
    ),
    ("version: 1\nengines:\n  - engine: vllm\n", "cfg.yaml:3: engines[0].name: required"),
    (
        "version: 1\nscrape_mode: exporter\nengines:\n  - {name: v, selector: {app: v}}\n",
        "engines[0].urls: required with scrape_mode: exporter",
    ),
    (
        "version: 1\nengines:\n  - {name: v, selector: {app: v}, max_running_requests: {m: -1}}\n",
        "cfg.yaml:3: engines[0].max_running_requests: m: the cap must be a whole number",
    ),
    ("version: 1\nnvml: {enabled: yes please}\n", "cfg.yaml:2: nvml.enabled: expected true or false"),
    ("version: 1\nalerting: {page_webhook: pager}\n", "alerting.page_webhook: 'pager' is not an http"),
]


@pytest.mark.parametrize("text, message", BAD, ids=[m[:40] for _, m in BAD])
def test_a_bad_config_names_file_line_and_field(text, message):
    with pytest.raises(SpecError) as err:
        from inferwatch.yamlio import load_document

        loaded = load_document("cfg.yaml", text)
        parse_config(loaded.data, loaded.file, loaded.positions)
    assert message in str(err.value)


def test_every_problem_is_reported_at_once():
    from inferwatch.yamlio import load_document

    with pytest.raises(SpecError) as err:
        loaded = load_document("cfg.yaml", "version: 1\nrelease: 'a b'\nscrape_mode: x\nfrontdoor: {replicas: 0}\n")
        parse_config(loaded.data, loaded.file, loaded.positions)
    assert [p.field for p in err.value.problems] == ["release", "scrape_mode", "frontdoor.replicas"]


def test_the_readme_example_config_is_valid():
    readme = (ROOT / "README.md").read_text()
    example = readme.split("```yaml\nversion: 1\nnamespace: monitoring")[1].split("```")[0]
    config = parse_config(yaml.safe_load("version: 1\nnamespace: monitoring" + example), "README.md")
    assert config.engines[0].role_label == "llm-d.ai/role" and render(config)


def test_an_empty_config_is_the_embedded_default():
    assert parse_config({"version": 1}, "x.yaml") == Config(file="x.yaml")


def test_the_checked_in_render_is_the_default():
    rendered = render_default()
    from inferwatch.deploy import DEFAULT_FOLDERS

    on_disk = {
        str(p.relative_to(ROOT / "deploy")): p.read_text()
        for folder in DEFAULT_FOLDERS
        for p in (ROOT / "deploy" / folder).rglob("*")
        if p.is_file()
    }
    assert {path.split("/")[0] for path in rendered} == set(DEFAULT_FOLDERS)
    assert rendered == on_disk, "run `inferwatch build`"


# --- Kubernetes -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["default-kubernetes", "full-kubernetes"])
def test_every_manifest_validates_offline(renders, which):
    files = renders[which]
    manifests = _manifests(files)
    # the canary analyses stay out of the kustomization (their CRDs may not be installed): tests/test_canary.py
    # validates them against Argo Rollouts' and Flagger's schemas
    assert set(manifests) == {
        f for f in set(files) - {"kustomization.yaml", "alertmanager/values.yaml"} if not f.startswith("canary/")
    }
    problems = {path: validate_manifest(doc) for path, doc in manifests.items()}
    assert not {p: e for p, e in problems.items() if e}


def test_validation_catches_a_wrong_field():
    monitor = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": {"name": "x"},
        "spec": {"selector": {}, "podMetricsEndpoints": [{"port": "http", "honourLabels": True}]},
    }
    assert validate_manifest(monitor)
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "x"},
        "spec": {"selector": {}, "template": {"spec": {"containers": [{"name": "a", "imag": "b"}]}}},
    }
    assert validate_manifest(deployment)


def _workloads(manifests):
    return [doc for doc in manifests.values() if doc["kind"] in ("Deployment", "DaemonSet")]


def test_every_workload_is_hardened_and_pinned(renders):
    workloads = _workloads(_manifests(renders["full-kubernetes"]))
    assert {w["metadata"]["name"] for w in workloads} == {
        "inferwatch-exporter",
        "inferwatch-gpu-exporter",
        "inferwatch-frontdoor",
    }
    for workload in workloads:
        pod = workload["spec"]["template"]["spec"]
        # the one root: the GPU exporter, for the kubelet's root-owned PodResources socket, with no capability
        root = workload["metadata"]["name"] == "inferwatch-gpu-exporter"
        sec = pod["securityContext"]
        assert sec["runAsNonRoot"] is not root and (sec["runAsUser"] == 0) is root
        for ctr in pod["containers"]:
            sec = ctr["securityContext"]
            assert sec["runAsNonRoot"] is not root and (sec["runAsUser"] == 0) is root
            assert sec["readOnlyRootFilesystem"] and not sec["allowPrivilegeEscalation"]
            assert sec["capabilities"] == {"drop": ["ALL"]} and "privileged" not in sec
            assert ctr["image"] == "registry.example.com/inferwatch:0.1.0"
            assert ctr["resources"]["requests"] and ctr["resources"]["limits"]["memory"]
            assert ctr["livenessProbe"] and ctr["readinessProbe"]


def test_the_gpu_daemonset_runs_on_gpu_nodes_with_the_nvidia_runtime(renders):
    ds = yaml.safe_load(renders["full-kubernetes"]["gpu-exporter/daemonset.yaml"])
    pod = ds["spec"]["template"]["spec"]
    assert pod["runtimeClassName"] == "nvidia" and pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert pod["hostPID"] is True  # said why in the file; never privileged
    assert "hostPID" in renders["full-kubernetes"]["gpu-exporter/daemonset.yaml"].split("apiVersion")[0]


def test_the_gpu_daemonset_can_ask_the_kubelet_which_pod_holds_each_gpu(renders):
    """The kubelet's PodResources socket folder mounted read-only at the path the exporter is told, as root (the
    socket's owner) without capabilities; why is said in the file."""
    text = renders["full-kubernetes"]["gpu-exporter/daemonset.yaml"]
    pod = yaml.safe_load(text)["spec"]["template"]["spec"]
    ctr = pod["containers"][0]
    volume = {v["name"]: v for v in pod["volumes"]}["pod-resources"]
    assert volume["hostPath"] == {"path": "/var/lib/kubelet/pod-resources", "type": "Directory"}
    mount = {m["name"]: m for m in ctr["volumeMounts"]}["pod-resources"]
    assert mount == {"name": "pod-resources", "mountPath": "/var/lib/kubelet/pod-resources", "readOnly": True}
    socket = ctr["args"][ctr["args"].index("--pod-resources-socket") + 1]
    assert socket == mount["mountPath"] + "/kubelet.sock"
    assert ctr["securityContext"]["runAsUser"] == 0 and ctr["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert "PodResources" in text.split("apiVersion")[0]


def test_monitors_carry_the_release_label_relabelings_and_honor_labels(renders):
    default = _manifests(renders["default-kubernetes"])
    for path, doc in default.items():
        if doc["kind"] in ("PodMonitor", "ServiceMonitor", "PrometheusRule"):
            assert doc["metadata"]["labels"]["release"] == "kube-prometheus-stack", path
    vllm = default["monitors/vllm.podmonitor.yaml"]["spec"]["podMetricsEndpoints"][0]
    from inferwatch.mappings import load_mappings, select_source, servicemonitor_relabelings

    assert vllm["metricRelabelings"] == servicemonitor_relabelings([select_source(load_mappings(), "vllm")])
    dcgm = default["monitors/dcgm-exporter.servicemonitor.yaml"]["spec"]["endpoints"][0]
    assert dcgm["honorLabels"] is True and dcgm["metricRelabelings"]
    assert "DCGM_FI_PROF_SM_ACTIVE" in default["dcgm/counters.configmap.yaml"]["data"]["dcgm-metrics.csv"]
    full = _manifests(renders["full-kubernetes"])
    assert full["rules/inferwatch-mappings.prometheusrule.yaml"]["metadata"]["labels"]["release"] == "prom"
    assert full["monitors/exporter.servicemonitor.yaml"]["spec"]["endpoints"][0]["honorLabels"] is True
    exporter = yaml.safe_load(full["exporter/configmap.yaml"]["data"]["exporter.yaml"])
    assert [t["name"] for t in exporter["targets"]] == ["llama-pd-0", "llama-pd-1", "qwen"]
    assert exporter["max_running_requests"] == {"llama-3-70b": 256}


def test_a_disaggregated_engine_gets_its_role_from_a_pod_label_and_a_port_may_be_a_number():
    config = parse_config(yaml.safe_load(FULL.replace("scrape_mode: exporter", "scrape_mode: relabel")), "f.yaml")
    files = render(config)
    monitor = yaml.safe_load(files["monitors/llama-pd.podmonitor.yaml"])
    assert {
        "action": "replace",
        "sourceLabels": ["__meta_kubernetes_pod_label_llm_d_ai_role"],
        "targetLabel": "role",
    } in monitor["spec"]["podMetricsEndpoints"][0]["relabelings"]
    qwen = yaml.safe_load(files["monitors/qwen.podmonitor.yaml"])["spec"]["podMetricsEndpoints"][0]
    assert qwen["portNumber"] == 30000 and "port" not in qwen
    assert not [e for doc in _manifests(files).values() for e in validate_manifest(doc)]


def test_the_sidecar_variant_patches_each_engine_workload():
    config = parse_config(yaml.safe_load(FULL.replace("scrape_mode: exporter", "scrape_mode: sidecar")), "f.yaml")
    files = render(config)
    assert "sidecars/llama-pd.patch.yaml" not in yaml.safe_load(files["kustomization.yaml"])["resources"]
    assert "kubectl patch deployment/llama-pd -n serving --patch-file" in files["sidecars/llama-pd.patch.yaml"]
    patch = yaml.safe_load(files["sidecars/llama-pd.patch.yaml"])["spec"]["template"]["spec"]
    sidecar = patch["containers"][0]
    assert "llama-pd=http://localhost:8000/metrics" in sidecar["args"]
    assert "--max-running-requests=llama-3-70b=256" in sidecar["args"]
    engine = {"name": "vllm", "image": "vllm/vllm-openai:v0.11.0", "ports": [{"name": "http", "containerPort": 8000}]}
    patched = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "llama-pd", "namespace": "serving"},
        "spec": {
            "selector": {"matchLabels": {"app": "llama"}},
            "template": {
                "metadata": {"labels": {"app": "llama"}},
                "spec": {"containers": [engine, sidecar], "volumes": patch["volumes"]},
            },
        },
    }
    assert not validate_manifest(patched)
    monitor = yaml.safe_load(files["monitors/llama-pd.podmonitor.yaml"])
    assert monitor["spec"]["podMetricsEndpoints"][0]["port"] == sidecar["ports"][0]["name"]
    assert not validate_manifest(monitor)


def test_dashboard_configmaps_are_the_dashboards_for_the_grafana_sidecar(renders):
    schema = json.loads((FIXTURES / "schemas" / "grafana-foundation-sdk" / "dashboard.jsonschema.json").read_text())
    files = renders["default-kubernetes"]
    for path in (ROOT / "dashboards").glob("*.json"):
        text = files[f"dashboards/{path.stem}.configmap.yaml"]
        cm = yaml.safe_load(text)
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert cm["metadata"]["annotations"]["grafana_folder"] == "inferwatch"
        assert cm["data"] == {path.name: path.read_text()}
        assert not list(jsonschema.Draft7Validator(schema).iter_errors(json.loads(path.read_text())))
        assert len(text.encode()) < 262144 and "KiB" in text.split("apiVersion")[0]


@pytest.mark.promtool
def test_prometheusrule_groups_pass_promtool(renders, tmp_path):
    promtool = need("promtool")
    paths = []
    for which in ("default-kubernetes", "full-kubernetes"):
        for path, doc in _manifests(renders[which]).items():
            if doc["kind"] == "PrometheusRule":
                out = tmp_path / which / Path(path).name
                out.parent.mkdir(exist_ok=True)
                out.write_text(yaml.safe_dump({"groups": doc["spec"]["groups"]}))
                paths.append(out)
    assert len(paths) >= 8
    proc = subprocess.run([promtool, "check", "rules", *map(str, paths)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --- compose ----------------------------------------------------------------------------------------------------


@pytest.mark.promtool
@pytest.mark.parametrize("which", ["default-compose", "full-compose"])
def test_compose_validates_and_its_prometheus_config_passes_promtool(renders, which, tmp_path):
    files = renders[which]
    schema = json.loads((FIXTURES / "compose-spec" / "compose-spec.json").read_text())
    compose = yaml.safe_load(files["compose.yaml"])
    assert not [e.message for e in jsonschema.Draft7Validator(schema).iter_errors(compose)]
    for name, service in compose["services"].items():
        assert service["read_only"] and service["cap_drop"] == ["ALL"], name
        assert ":" in service["image"] and not service["image"].endswith(":latest"), name
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    proc = subprocess.run(
        [need("promtool"), "check", "config", str(tmp_path / "prometheus" / "prometheus.yml")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout + proc.stderr


def test_compose_points_at_stand_ins_or_real_engines(renders):
    default = yaml.safe_load(renders["default-compose"]["compose.yaml"])["services"]
    assert default["vllm"]["command"][:3] == ["simulate", "--engine", "vllm"]
    assert default["frontdoor"]["command"][2] == "http://vllm:8000"
    full = yaml.safe_load(renders["full-compose"]["compose.yaml"])["services"]
    assert (
        "llama-pd" not in full
        and "--target=llama-pd-1=http://llama-1.llama.serving.svc:8000/metrics" in full["exporter"]["command"]
    )


def _ours(compose: dict) -> dict[str, dict]:
    """The services that run inferwatch (not the pinned Prometheus, Alertmanager and Grafana)."""
    from inferwatch.deploy._compose import IMAGES

    return {n: s for n, s in compose["services"].items() if s["image"] not in IMAGES.values()}


def test_compose_from_a_clone_builds_our_image_from_its_dockerfile(renders, tmp_path):
    """Issue 29 §7: the render named ghcr.io/inferwatch/inferwatch:<version>, which is not published, so
    `docker compose up` failed to pull it. The checked-in render builds it from the clone's Dockerfile; rendered
    elsewhere, the build context is this clone seen from there; a config naming its own image pulls that."""
    checked_in = ROOT / "deploy" / "compose"
    ours = _ours(yaml.safe_load((checked_in / "compose.yaml").read_text()))
    assert set(ours) == {"vllm", "sglang", "frontdoor"}
    for name, service in ours.items():
        assert (checked_in / service["build"]["context"] / "Dockerfile").resolve() == ROOT / "Dockerfile", name
        assert not service["image"].startswith("ghcr.io/"), name
    out = tmp_path / "elsewhere" / "stack"
    assert _cli("deploy", "render", "--target", "compose", "-o", str(out)).returncode == 0
    for name, service in _ours(yaml.safe_load((out / "compose.yaml").read_text())).items():
        assert (out / service["build"]["context"] / "Dockerfile").resolve() == ROOT / "Dockerfile", name
    pushed = _ours(yaml.safe_load(renders["full-compose"]["compose.yaml"]))
    assert {s["image"] for s in pushed.values()} == {"registry.example.com/inferwatch:0.1.0"}
    assert not any("build" in s for s in pushed.values())
    both = parse_config(
        {"version": 1, "image": "registry.example.com/iw:1.0", "compose": {"build": "/src/iw"}}, "d.yaml"
    )
    assert {
        (s["image"], s["build"]["context"])
        for s in _ours(yaml.safe_load(render(both, "compose")["compose.yaml"])).values()
    } == {("registry.example.com/iw:1.0", "/src/iw")}


def test_compose_stand_ins_serve_distinct_models_at_their_caps(renders):
    """Issue 29 §7: both stand-ins served llama-3-8b, so every per-model view merged them."""
    from inferwatch.deploy._config import Engine

    def served(config_or_render) -> dict[str, list[str]]:
        services = yaml.safe_load(config_or_render["compose.yaml"])["services"]
        return {n: s["command"] for n, s in services.items() if s.get("command", [""])[0] == "simulate"}

    default = served(renders["default-compose"])
    models = {n: c[c.index("--model") + 1] for n, c in default.items()}
    assert models == {"vllm": "llama-3-8b", "sglang": "qwen3-8b"}
    assert "--max-num-seqs=256" in default["vllm"]  # the cap the exporter and the rules say
    twins = Config(
        engines=(
            Engine("a", "vllm", urls=("http://a:8000/metrics",)),
            Engine("b", "vllm", urls=("http://b:8000/metrics",)),
        )
    )
    commands = served(render(twins, "compose"))
    assert {c[c.index("--model") + 1] for c in commands.values()} == {"llama-3-8b-a", "llama-3-8b-b"}


def test_the_dashboards_show_the_thresholds_of_the_configs_slo_specs(tmp_path):
    """The overview's latency tiles and the pager agree: a config naming its own specs gets tiles with their
    bounds in both targets; the defaults keep 1 s and 100 ms."""
    (tmp_path / "chat.yaml").write_text(
        "version: 1\nservice: chat\nengines: [vllm]\nobjectives:\n"
        "  - {name: snappy, sli: ttft, threshold: 500ms, target: 99.9%}\n"
        "  - {name: smooth, sli: tpot, threshold: 50ms, target: 90%}\n"
    )
    config = parse_config({"version": 1, "slo_specs": ["chat.yaml"]}, str(tmp_path / "deploy.yaml"))
    for target, path in (
        ("kubernetes", "dashboards/serving-overview.configmap.yaml"),
        ("compose", "grafana/dashboards/serving-overview.json"),
    ):
        text = render(config, target)[path]
        assert "TTFT within 500 ms" in text and "TPOT within 50 ms" in text and "TTFT within 1 s" not in text
    assert "TTFT within 1 s" in render(Config(), "compose")["grafana/dashboards/serving-overview.json"]


# --- Alertmanager -----------------------------------------------------------------------------------------------


def _am_configs(renders) -> dict[str, str]:
    return {
        "compose": renders["default-compose"]["alertmanager/alertmanager.yml"],
        "values": yaml.safe_dump(
            yaml.safe_load(renders["full-kubernetes"]["alertmanager/values.yaml"])["alertmanager"]["config"]
        ),
    }


def test_amtool_loads_the_rendered_alertmanager_configs(renders, tmp_path):
    amtool = need("amtool")
    for name, text in _am_configs(renders).items():
        (tmp_path / f"{name}.yml").write_text(text)
        proc = subprocess.run([amtool, "check-config", str(tmp_path / f"{name}.yml")], capture_output=True, text=True)
        # three tiers silenced by faster ones, for the engine SLOs and for the front door's (and the chart's 4)
        rules = {"compose": 6, "values": 10}[name]
        assert proc.returncode == 0 and f" - {rules} inhibit rules" in proc.stdout, proc.stdout + proc.stderr


def _post(base: str, alerts: list[dict]) -> None:
    request = urllib.request.Request(
        base + "/api/v2/alerts", json.dumps(alerts).encode(), {"Content-Type": "application/json"}
    )
    urllib.request.urlopen(request, timeout=5).read()


@pytest.mark.parametrize("which", ["compose", "values"])
def test_a_page_inhibits_the_ticket_of_the_same_objective(renders, tmp_path, which):
    """Only that one: in the Helm values, the chart's own `critical silences warning of the same alertname` rule
    would silence every other objective's ticket too, and leaves ours out."""
    from promtools import wait_for

    config = tmp_path / "alertmanager.yml"
    config.write_text(_am_configs(renders)[which])
    now = datetime.now(UTC)
    common = {"alertname": "LLMErrorBudgetBurn", "service": "llm", "slo": "responsive", "model": "llama-3-8b"}

    def alert(tier, severity, **labels):
        return {
            "labels": {**common, "tier": tier, "severity": severity, **labels},
            "startsAt": now.isoformat(),
            "endsAt": (now + timedelta(minutes=10)).isoformat(),
        }

    with alertmanager(need("prometheus-alertmanager"), config, tmp_path) as base:
        _post(
            base,
            [
                alert("page_fast", "critical"),
                alert("ticket_slow", "warning"),
                alert("ticket_slow", "warning", slo="answered"),
            ],
        )

        def states():
            got = json.load(urllib.request.urlopen(base + "/api/v2/alerts", timeout=5))
            return {(a["labels"]["tier"], a["labels"]["slo"]): a["status"]["state"] for a in got}

        assert wait_for(lambda: len(states()) == 3 and "unprocessed" not in states().values())
        assert states() == {
            ("page_fast", "responsive"): "active",
            ("ticket_slow", "responsive"): "suppressed",
            ("ticket_slow", "answered"): "active",
        }


# --- the command ------------------------------------------------------------------------------------------------


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "inferwatch", *args], capture_output=True, text=True)


def test_render_writes_both_targets(tmp_path):
    config = tmp_path / "deploy.yaml"
    config.write_text(FULL)
    proc = _cli("deploy", "render", "--config", str(config), "-o", str(tmp_path / "k8s"))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "k8s" / "kustomization.yaml").is_file()
    proc = _cli("deploy", "render", "--target", "compose", "-o", str(tmp_path / "c"))
    assert proc.returncode == 0 and (tmp_path / "c" / "compose.yaml").is_file()


def test_render_mistakes_are_one_line(tmp_path):
    bad = tmp_path / "deploy.yaml"
    bad.write_text("version: 1\nnamespace: Bad_NS\n")
    proc = _cli("deploy", "render", "--config", str(bad), "-o", str(tmp_path / "o"))
    assert proc.returncode == 1 and proc.stderr.startswith(f"error: {bad}:2: namespace:")
    assert "Traceback" not in proc.stderr
    proc = _cli("deploy", "render", "--target", "helm", "-o", str(tmp_path / "o"))
    assert proc.returncode == 1 and "use kubernetes or compose" in proc.stderr
    proc = _cli("deploy", "render", "--config", str(tmp_path / "nope.yaml"), "-o", str(tmp_path / "o"))
    assert proc.returncode == 2 and "nope.yaml: cannot read: No such file" in proc.stderr
    assert "Traceback" not in proc.stderr
