"""`inferwatch doctor` against real Prometheus servers: a stack where every signal arrives reads all ok; one with
the cap missing, GPU activity without the profiling fields and a failing rule group names each, exit 1."""

from __future__ import annotations

import json
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path

import pytest
from conftest import need
from deploytools import alertmanager
from promtools import prometheus, query, serve, wait_for

from inferwatch.deploy import render
from inferwatch.deploy._config import Alerting, Config, FrontDoor

CONFIG = "version: 1\nfrontdoor: {enabled: false}\n"
MODEL = "llama-3-8b"


def _histogram(name: str, bounds: list[str]) -> str:
    lines = [f'{name}_bucket{{model="{MODEL}",le="{le}"}} {i + 1}' for i, le in enumerate(bounds + ["+Inf"])]
    return "\n".join(lines + [f'{name}_sum{{model="{MODEL}"}} 3', f'{name}_count{{model="{MODEL}"}} {len(bounds) + 1}'])


ENGINE = (
    "\n".join(
        [
            f'llm_requests_running{{model="{MODEL}",engine="vllm"}} 3',
            f'llm_requests_waiting{{model="{MODEL}",engine="vllm"}} 0',
            f'llm_kv_cache_usage_ratio{{model="{MODEL}",engine="vllm"}} 0.4',
            _histogram("llm_time_to_first_token_seconds", ["0.1", "1.0", "2.5"]),
            _histogram("llm_time_per_output_token_seconds", ["0.05", "0.1", "0.5"]),
        ]
    )
    + "\n"
)
RAW_VLLM = f'vllm:num_requests_running{{model_name="{MODEL}",engine="0"}} 1\n'
GPU = 'gpu_utilization_ratio{uuid="GPU-0",pod="vllm-0"} 0.9\n'
PROFILING = (
    'gpu_sm_active_ratio{uuid="GPU-0",pod="vllm-0"} 0.7\ngpu_tensor_active_ratio{uuid="GPU-0",pod="vllm-0"} 0.4\n'
)
EXPORTED = 'gpu_utilization_ratio{uuid="GPU-1",exported_pod="vllm-1"} 0.5\n'  # scraped without honor_labels
NO_MODEL = 'llm_requests_waiting{engine="vllm"} 0\n'  # a series that falls out of every per-model view
FAILING = {"groups": [{"name": "broken", "interval": "1s", "rules": [{"record": "x", "expr": "up + on() vector(1)"}]}]}


def _config(
    tmp: Path,
    rule_files: list[str],
    target: str,
    alertmanager_url: str | None,
    broken: bool = False,
    engine_pod: str | None = None,
) -> dict:
    """`engine_pod`: the engine series' pod (a target label, as a PodMonitor gives); None: none, as behind the
    normalizing exporter."""
    host = target.removeprefix("http://")
    engine = {"targets": [host]} | ({"labels": {"pod": engine_pod}} if engine_pod else {})
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": rule_files,
        "scrape_configs": [
            {"job_name": "engine", "static_configs": [engine]},
            {"job_name": "gpu", "honor_labels": True, "metrics_path": "/gpu", "static_configs": [{"targets": [host]}]},
        ],
    }
    if broken:  # an SGLang started without --enable-metrics, and a job scraped too rarely for the SLO rules
        config["scrape_configs"] += [
            {"job_name": "sglang", "metrics_path": "/no-metrics", "static_configs": [{"targets": [host]}]},
            {"job_name": "rare", "scrape_interval": "45s", "static_configs": [{"targets": [host]}]},
        ]
    if alertmanager_url:
        config["alerting"] = {
            "alertmanagers": [{"static_configs": [{"targets": [alertmanager_url.removeprefix("http://")]}]}]
        }
    return config


@pytest.fixture(scope="module")
def stacks(tmp_path_factory):
    """(good: Prometheus, Alertmanager and Grafana URLs; broken: Prometheus URL), started side by side."""
    tmp = tmp_path_factory.mktemp("doctor")
    hooks = Alerting(page_webhook="http://127.0.0.1:9/page", ticket_webhook="http://127.0.0.1:9/ticket")
    files = render(Config(frontdoor=FrontDoor(enabled=False), alerting=hooks), "compose")
    for path, text in files.items():
        (tmp / "good" / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp / "good" / path).write_text(text)
    (tmp / "broken").mkdir()
    (tmp / "broken" / "broken.yaml").write_text(json.dumps(FAILING))
    (tmp / "deploy.yaml").write_text(CONFIG)
    # the laptop: the default config's render without the caps it never installs, engines on another pod than the
    # GPUs' (as behind the normalizing exporter), no Alertmanager or Grafana given
    laptop_files = render(Config(), "compose")
    for path, text in laptop_files.items():
        if path.startswith("prometheus/rules/") and "caps" not in path:
            (tmp / "laptop" / path).parent.mkdir(parents=True, exist_ok=True)
            (tmp / "laptop" / path).write_text(text)
    (tmp / "capped.yaml").write_text(
        CONFIG + f"engines:\n  - {{name: llama, engine: vllm, namespace: llm, selector: "
        f"{{app: llama}}, max_running_requests: {{{MODEL}: 64}}}}\n"
    )
    boards = [{"uid": json.loads(text)["uid"]} for path, text in files.items() if path.endswith(".json")]
    with ExitStack() as stack:
        good_targets = stack.enter_context(
            serve({"/metrics": ENGINE, "/gpu": GPU + PROFILING, "/api/search?type=dash-db": json.dumps(boards)})
        )
        broken_targets = stack.enter_context(serve({"/metrics": ENGINE, "/gpu": GPU + EXPORTED}))
        am = stack.enter_context(
            alertmanager(
                need("prometheus-alertmanager"), tmp / "good" / "alertmanager" / "alertmanager.yml", tmp / "good"
            )
        )
        good = stack.enter_context(
            prometheus(
                need("prometheus"),
                _config(
                    tmp, [str(tmp / "good" / "prometheus" / "rules" / "*.yaml")], good_targets, am, engine_pod="vllm-0"
                ),
                tmp / "good",
            )
        )
        broken = stack.enter_context(
            prometheus(
                need("prometheus"),
                _config(tmp, [str(tmp / "broken" / "broken.yaml")], broken_targets, None, broken=True),
                tmp / "broken",
            )
        )
        wait_for(lambda: query(good, "llm_max_running_requests") and query(good, "gpu_tensor_active_ratio"))
        wait_for(
            lambda: json.load(__import__("urllib.request").request.urlopen(good + "/api/v1/alertmanagers"))["data"][
                "activeAlertmanagers"
            ]
        )
        wait_for(lambda: query(broken, "gpu_utilization_ratio") and query(broken, 'up{job="sglang"} == 0'))
        wait_for(
            lambda: '"err"' in __import__("urllib.request").request.urlopen(broken + "/api/v1/rules").read().decode()
        )
        laptop_targets = stack.enter_context(serve({"/metrics": ENGINE + NO_MODEL, "/gpu": GPU + PROFILING}))
        laptop = stack.enter_context(
            prometheus(
                need("prometheus"),
                _config(
                    tmp,
                    [str(tmp / "laptop" / "prometheus" / "rules" / "*.yaml")],
                    laptop_targets,
                    None,
                    engine_pod="vllm-7",
                ),
                tmp / "laptop",
            )
        )
        wait_for(lambda: query(laptop, "gpu_tensor_active_ratio") and query(laptop, 'llm_requests_waiting{model=""}'))
        wait_for(
            lambda: (
                "LLMQueueSaturated"
                in __import__("urllib.request").request.urlopen(laptop + "/api/v1/rules").read().decode()
            )
        )
        # two engine pods, a GPU series for one of them only
        partial_config = _config(tmp, [], laptop_targets, None, engine_pod="vllm-0")
        partial_config["scrape_configs"].append(
            {
                "job_name": "engine-b",
                "static_configs": [{"targets": [laptop_targets.removeprefix("http://")], "labels": {"pod": "vllm-9"}}],
            }
        )
        (tmp / "partial").mkdir()
        partial = stack.enter_context(prometheus(need("prometheus"), partial_config, tmp / "partial"))
        wait_for(
            lambda: (
                len(query(partial, 'llm_requests_running{pod!=""}')) == 2 and query(partial, "gpu_utilization_ratio")
            )
        )
        # a CPU engine scraped as it writes its series (no relabelings), on a config without GPU exporters
        raw_targets = stack.enter_context(serve({"/metrics": RAW_VLLM}))
        (tmp / "raw").mkdir()
        raw = stack.enter_context(
            prometheus(
                need("prometheus"),
                {
                    "global": {"scrape_interval": "1s"},
                    "scrape_configs": [
                        {"job_name": "cpu-vllm", "static_configs": [{"targets": [raw_targets.removeprefix("http://")]}]}
                    ],
                },
                tmp / "raw",
            )
        )
        (tmp / "no-gpus.yaml").write_text(CONFIG + "dcgm: {enabled: false}\n")
        wait_for(lambda: query(raw, "vllm:num_requests_running"))
        yield {
            "raw": raw,
            "no-gpus": tmp / "no-gpus.yaml",
            "good": (good, am, good_targets),
            "broken": broken,
            "laptop": laptop,
            "partial": partial,
            "config": tmp / "deploy.yaml",
            "capped": tmp / "capped.yaml",
        }


def _doctor(*args):
    return subprocess.run([sys.executable, "-m", "inferwatch", "doctor", *args], capture_output=True, text=True)


def test_doctor_reads_all_ok_where_every_signal_arrives(stacks):
    prom, am, grafana = stacks["good"]
    proc = _doctor("--prometheus", prom, "--alertmanager", am, "--grafana", grafana, "--config", str(stacks["config"]))
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert all(line.startswith("ok ") for line in lines), proc.stdout
    checks = {line.split(":")[0][8:] for line in lines}
    assert {
        "concurrency cap",
        "gpu_sm_active_ratio",
        "GPU workload pod",
        "GPU <-> engine join",
        "model label",
        "rule groups",
        "Alertmanager routing",
        "Grafana dashboards",
        "SLO llm/responsive threshold",
    } <= checks


def test_doctor_names_the_missing_cap_profiling_fields_and_failing_group(stacks):
    proc = _doctor("--prometheus", stacks["broken"], "--config", str(stacks["config"]))
    assert proc.returncode == 1
    out = proc.stdout
    assert "skipped concurrency cap: no loaded alert reads llm_max_running_requests: not checked" in out
    assert (
        "wrong   GPU <-> engine join: no engine series (llm_requests_running) carries pod: triage cannot join "
        "GPUs to engines"
    ) in out and "honor_labels: true on the GPU scrape" in out
    assert "skipped Grafana dashboards: no --grafana given" in out
    assert "skipped Alertmanager routing: no --alertmanager given" in out
    assert "missing gpu_sm_active_ratio: GPU-Util arrives but not the profiling fields" in out
    assert "counters.csv" in out
    assert "wrong   rule group broken: 1 rules fail: " in out and "group_left" in out
    assert "missing rule groups: inferwatch-slo-llm-responsive" in out
    assert "missing Prometheus sends alerts" in out
    assert "ok      running requests" in out
    assert "wrong   honor_labels on GPU scrapes: GPU series carry exported_pod" in out
    assert "(fix: SGLang serves /metrics only when started with --enable-metrics)" in out
    assert "wrong   target rare http://" in out and "scraped every 45s" in out


def test_doctor_told_no_alertmanager_skips_it_and_still_fails_on_the_rest(stacks):
    proc = _doctor("--prometheus", stacks["broken"], "--config", str(stacks["config"]), "--no-alertmanager")
    assert proc.returncode == 1
    assert "skipped Prometheus sends alerts: no Alertmanager in this stack, as told (--no-alertmanager)" in proc.stdout
    assert "missing Prometheus sends alerts" not in proc.stdout and "ok, 3 skipped, " in proc.stderr
    assert "Alertmanager routing" not in proc.stdout  # the line above says why


def test_doctor_on_the_laptop_path_notes_the_cap_and_names_the_join_and_model(stacks):
    """The README's laptop path (no deploy.yaml, no caps installed): the cap alert's cap part is a note, not a
    missing rule group; GPUs on a pod no engine series names, and an engine series without model, are wrong."""
    proc = _doctor("--prometheus", stacks["laptop"], "--no-alertmanager")
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    assert "inferwatch-caps" not in out and "missing rule groups" not in out
    assert (
        f"note    concurrency cap: no llm_max_running_requests for model {MODEL}: the cap part of "
        "LLMQueueSaturated cannot fire for it (the KV-cache part still can) (fix: "
    ) in out
    assert (
        "wrong   GPU <-> engine join: no GPU series' pod (vllm-0) matches an engine series' pod (vllm-7): triage "
        "cannot join GPUs to engines"
    ) in out
    assert "wrong   model label: 1 engine series without model: llm_requests_waiting (job engine)" in out
    assert " ok, 1 note, " in proc.stderr


def test_doctor_names_a_cap_the_config_sets_that_does_not_arrive(stacks):
    proc = _doctor("--prometheus", stacks["laptop"], "--no-alertmanager", "--config", str(stacks["capped"]))
    assert (
        f"missing concurrency cap: llm_max_running_requests absent for model {MODEL} though deploy.yaml sets it: "
        "LLMQueueSaturated cannot fire on the cap (fix: load the inferwatch-caps rules"
    ) in proc.stdout
    assert "note    concurrency cap" not in proc.stdout and "missing rule groups: inferwatch-caps" not in proc.stdout


def test_doctor_without_prometheus_is_one_line():
    proc = _doctor("--prometheus", "127.0.0.1:1")
    assert proc.returncode == 1 and proc.stdout.startswith(
        "missing Prometheus: http://127.0.0.1:1/api/v1/status/buildinfo: cannot reach Prometheus"
    )
    assert "Traceback" not in proc.stderr
    proc = _doctor("--prometheus", "nowhere")
    assert proc.returncode == 2 and "not an http(s) URL" in proc.stderr
    proc = _doctor("--prometheus", "127.0.0.1:1", "--alertmanager", "127.0.0.1:2", "--no-alertmanager")
    assert proc.returncode == 2 and "contradict" in proc.stderr and "Traceback" not in proc.stderr


def test_doctor_names_the_engine_pods_no_gpu_series_joins(stacks):
    proc = _doctor("--prometheus", stacks["partial"], "--no-alertmanager")
    assert (
        "missing GPU <-> engine join: engine pods vllm-9 match no GPU series' pod: triage and the GPU dashboard "
        "show no GPU for them (fix: "
    ) in proc.stdout, proc.stdout


def test_doctor_names_the_job_without_relabelings_and_skips_gpus_nobody_runs(stacks):
    """Engine series under vLLM's own names: doctor names the job that scrapes them raw; a deploy.yaml without GPU
    exporters (CPU engines) skips the GPU checks, saying why, instead of asking for dcgm-exporter."""
    proc = _doctor("--prometheus", stacks["raw"], "--no-alertmanager", "--config", str(stacks["no-gpus"]))
    assert proc.returncode == 1
    assert (
        "missing engine series: no llm_requests_running with a model from any engine; engine series arrive under "
        "the engine's own names, scraped without the inferwatch relabelings: job cpu-vllm "
        "(vllm:num_requests_running)"
    ) in proc.stdout, proc.stdout
    assert (
        "skipped GPU series: deploy.yaml runs no GPU exporter (dcgm and nvml disabled): GPU activity is not checked"
    ) in proc.stdout
    assert "missing GPU series" not in proc.stdout
