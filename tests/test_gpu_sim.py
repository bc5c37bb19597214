"""Simulated GPUs: activity that follows a simulated engine, the stall that fires LLMGPUBusyNotComputing in
promtool and in a real Prometheus, and `inferwatch exporter gpu` as users run it."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import replace

import pytest
import yaml
from conftest import ROOT, need
from gpu_tools import values
from promtools import serve
from simtools import FAST, serve_app, simulator

from inferwatch.exporters.gpu import SCENARIOS, EngineLoad, GpuExporter, SimulatedBackend, Workload, activity
from inferwatch.sim._demo import free_port

LOADS = [
    EngineLoad(),
    EngineLoad(1, 0, 0.05),
    EngineLoad(8, 2, 0.4, 0.3),
    EngineLoad(64, 40, 1.0, 0.9),
    EngineLoad(3, 0, 0.2, 1.0),
]


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("load", LOADS)
def test_activity_is_in_range(load, scenario):
    out = activity(load, scenario)
    assert all(0 <= v <= 1 for k, v in out.items() if k.endswith("_ratio")), out
    assert 0 < out["gpu_memory_used_bytes"] <= 80 * 2**30 and 90 <= out["gpu_power_watts"] <= 700


def test_activity_follows_batch_phase_and_kv_cache():
    idle, small, big = activity(LOADS[0], "normal"), activity(LOADS[1], "normal"), activity(LOADS[3], "normal")
    assert idle["gpu_utilization_ratio"] == 0 and idle["gpu_sm_active_ratio"] == 0
    assert small["gpu_sm_active_ratio"] >= 0.5 and small["gpu_utilization_ratio"] >= 0.9
    assert big["gpu_sm_active_ratio"] > small["gpu_sm_active_ratio"]
    assert big["gpu_power_watts"] > small["gpu_power_watts"] > idle["gpu_power_watts"]
    assert big["gpu_memory_used_bytes"] > small["gpu_memory_used_bytes"]
    decode, prefill = activity(EngineLoad(3, 0, 0.2, 0.0), "normal"), activity(LOADS[4], "normal")
    assert prefill["gpu_tensor_active_ratio"] > decode["gpu_tensor_active_ratio"]


def test_stall_keeps_gpu_util_high_while_sms_and_tensors_collapse():
    for load in LOADS:
        out = activity(load, "stall")
        assert out["gpu_utilization_ratio"] >= 0.95
        assert out["gpu_sm_active_ratio"] <= 0.1 and out["gpu_tensor_active_ratio"] <= 0.05


def _render(backend: SimulatedBackend) -> str:
    exporter = GpuExporter(backend, interval=0)
    exporter.step()
    return exporter.render()


def test_follows_a_running_simulator():
    params = replace(FAST, decode_step_s=0.05, output_tokens_mean=400)
    with simulator("vllm", params=params) as (base, _):
        backend = SimulatedBackend(2, "node-1", follow=base + "/metrics", workload=Workload("demo", "vllm-0"))
        idle = _render(backend)
        # answers long enough (400 steps of 50ms) that a loaded machine still sees them running: the wait below is a
        # condition with a generous deadline, not a bet on how fast requests start
        body = json.dumps({"model": "m", "prompt": "hello " * 50, "max_tokens": 400}).encode()
        for _ in range(6):
            request = urllib.request.Request(
                base + "/v1/completions", data=body, headers={"Content-Type": "application/json"}
            )
            threading.Thread(target=lambda r=request: urllib.request.urlopen(r, timeout=60).read(), daemon=True).start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            busy = _render(backend)
            if values(busy, "gpu_sm_active_ratio", gpu="0")[0][1] > 0:
                break
            time.sleep(0.1)
    for text, expect_busy in ((idle, False), (busy, True)):
        [(labels, util)] = values(text, "gpu_utilization_ratio", gpu="0")
        assert (util >= 0.9) is expect_busy and (labels["namespace"], labels["pod"]) == ("demo", "vllm-0")
    used = lambda t: values(t, "gpu_memory_used_bytes", gpu="1")[0][1]  # noqa: E731
    assert used(busy) > used(idle)  # the KV cache filled
    assert values(busy, "gpu_nvlink_tx_bytes_per_second", gpu="1")[0][1] > 0
    assert not values(busy, "inferwatch_gpu_exporter_errors_total")


def test_unreachable_engine_idles_the_gpus_and_is_counted(caplog):
    backend = SimulatedBackend(1, "n", follow=f"http://127.0.0.1:{free_port()}/metrics")
    _render(backend)
    text = _render(backend)
    assert values(text, "gpu_up")[0][1] == 1.0 and values(text, "gpu_utilization_ratio")[0][1] == 0.0
    assert values(text, "inferwatch_gpu_exporter_errors_total", kind="follow")[0][1] == 2.0
    assert sum("--follow" in r.message for r in caplog.records) == 1  # said once, not every pass


def test_an_engine_that_answers_no_http_is_a_counted_follow_failure(caplog):
    """Bytes that are not HTTP (a TLS port, a wrong service) fail the follow like a closed port; they used to fail
    the whole pass, so the exporter served gpu_exporter_up 0 and no GPU at all."""

    def not_http(handler):
        handler.wfile.write(b"\x16\x03\x01 not HTTP\r\n\r\n")
        handler.close_connection = True

    with serve({"/metrics": not_http}) as base:
        backend = SimulatedBackend(1, "n", follow=base + "/metrics")
        _render(backend)
        text = _render(backend)
    assert values(text, "gpu_exporter_up")[0][1] == 1.0 and values(text, "gpu_utilization_ratio")[0][1] == 0.0
    assert values(text, "inferwatch_gpu_exporter_errors_total") == [({"kind": "follow"}, 2.0)]
    said = [r.message for r in caplog.records if "--follow" in r.message]
    assert len(said) == 1 and "\n" not in said[0], said


def _minutes(backend: SimulatedBackend, clock: list[float], minutes: int, stall_from: int | None):
    """{series: [value per minute]} of gpu_utilization_ratio and gpu_sm_active_ratio."""
    out: dict[str, list[str]] = {}
    for minute in range(minutes):
        clock[0] = minute * 60.0
        backend.set_scenario("stall" if stall_from is not None and minute >= stall_from else "normal")
        text = _render(backend)
        for name in ("gpu_utilization_ratio", "gpu_sm_active_ratio"):
            for labels, value in values(text, name):
                key = name + "{" + ", ".join(f'{k}="{v}"' for k, v in labels.items()) + "}"
                out.setdefault(key, []).append(repr(value))
    return out


@pytest.mark.promtool
def test_stall_fires_gpu_busy_not_computing_in_promtool(tmp_path):
    series = {}
    for host, stall_from in (("node-stall", 10), ("node-ok", None)):
        clock = [0.0]
        backend = SimulatedBackend(1, host, clock=lambda c=clock: c[0], sleep=lambda s: None)
        series.update(_minutes(backend, clock, 50, stall_from))
    test = {
        "rule_files": [str(ROOT / "alerts" / "operational.rules.yaml")],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": k, "values": " ".join(v)} for k, v in series.items()],
                "promql_expr_test": [
                    {
                        "expr": 'count by (hostname) (ALERTS{alertname="LLMGPUBusyNotComputing"})',
                        "eval_time": "9m",
                        "exp_samples": [],
                    },
                    {
                        "expr": 'count by (hostname) (ALERTS{alertname="LLMGPUBusyNotComputing", alertstate="firing"})',
                        "eval_time": "45m",
                        "exp_samples": [{"labels": '{hostname="node-stall"}', "value": 1}],
                    },
                ],
            }
        ],
    }
    path = tmp_path / "gpu-stall.test.yaml"
    path.write_text(yaml.safe_dump(test, sort_keys=False))
    proc = subprocess.run([need("promtool"), "test", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "SUCCESS" in proc.stdout, proc.stdout + proc.stderr


def _get(url: str, data: bytes | None = None) -> str:
    with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=5) as resp:
        return resp.read().decode()


def test_cli_serves_simulated_gpus_switches_scenario_and_survives_a_missing_engine(tmp_path):
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "inferwatch",
        "exporter",
        "gpu",
        "--backend",
        "simulated",
        "--gpus",
        "2",
        "--interval",
        "200ms",
        "--listen",
        f"127.0.0.1:{port}",
        "--follow",
        f"127.0.0.1:{free_port()}",
        "--workload",
        "demo/vllm-0/engine",
        "--hostname",
        "sim-node",
    ]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    try:
        base, deadline, text = f"http://127.0.0.1:{port}", time.time() + 20, ""
        while time.time() < deadline and "gpu_up{" not in text:
            try:
                text = _get(base + "/metrics")
            except OSError:
                time.sleep(0.1)
        assert values(text, "gpu_up", hostname="sim-node", pod="vllm-0", container="engine")
        answer = json.loads(_get(base + "/admin/scenario", json.dumps({"scenario": "stall"}).encode()))
        assert answer["scenario"] == "stall"
        deadline = time.time() + 10
        while time.time() < deadline and values(text, "gpu_utilization_ratio", gpu="0")[0][1] < 0.95:
            text = _get(base + "/metrics")
        assert values(text, "gpu_sm_active_ratio", gpu="0")[0][1] <= 0.1  # idle engine, stalled GPU
        with pytest.raises(urllib.error.HTTPError):
            _get(base + "/admin/scenario", b'{"scenario": "melt"}')
        # the port is taken now: a second exporter says so in one line
        again = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        assert again.returncode == 1 and again.stderr.startswith(f"error: --listen 127.0.0.1:{port}: cannot listen")
        assert "Traceback" not in again.stderr
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    assert "Traceback" not in err and err.count("--follow") == 1, err


@pytest.mark.parametrize(
    "args,flag",
    [
        (["--listen", "nowhere"], "--listen"),
        (["--interval", "10ms"], "--interval"),
        (["--interval", "soon"], "--interval"),
        (["--backend", "cuda"], "--backend"),
        (["--follow", "localhost:8000"], "--follow"),
        (["--backend", "simulated", "--follow", "engine"], "--follow"),
        (["--backend", "simulated", "--scenario", "melt"], "--scenario"),
        (["--backend", "simulated", "--gpus", "0"], "--gpus"),
        (["--backend", "simulated", "--workload", "podonly"], "--workload"),
        (["--log-level", "loud"], "--log-level"),
        (["--stale-after", "100ms"], "--stale-after"),
        (["--idle-timeout", "0s"], "--idle-timeout"),
        (["--max-connections", "0"], "--max-connections"),
    ],
)
def test_cli_mistakes_are_one_line(args, flag):
    proc = subprocess.run(
        [sys.executable, "-m", "inferwatch", "exporter", "gpu", *args], capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and flag in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.promtool
def test_simulate_serves_its_gpus_beside_the_engine_and_gpu_stall_stalls_them():
    from inferwatch.exporters import split_families
    from inferwatch.sim import SimulatorConfig, make_app

    with serve_app(make_app(SimulatorConfig("vllm", None, "m", "normal", FAST, 1, gpus=2))) as base:
        text = _get(base + "/metrics")
        assert "vllm:num_requests_running" in text and len(values(text, "gpu_up")) == 2
        gpu_part = "".join(f.header() + f.body for f in split_families(text) if f.name.startswith("gpu_"))
        proc = subprocess.run([need("promtool"), "check", "metrics"], input=gpu_part, capture_output=True, text=True)
        assert proc.returncode == 0 and "gpu_sm_active_ratio" in gpu_part, proc.stdout + proc.stderr
        for scenario in ("gpu-stall", "gpu-not-computing"):  # the second is named for triage's kind
            _get(base + "/admin/scenario", json.dumps({"scenario": scenario}).encode())
            stalled = _get(base + "/metrics")
            assert values(stalled, "gpu_utilization_ratio", gpu="1")[0][1] >= 0.95
            assert values(stalled, "gpu_sm_active_ratio", gpu="1")[0][1] <= 0.1
        _get(base + "/admin/scenario", json.dumps({"scenario": "normal"}).encode())
        assert values(_get(base + "/metrics"), "gpu_utilization_ratio", gpu="1")[0][1] == 0.0  # idle, not stalled


def test_simulated_gpus_name_the_pod_using_them(monkeypatch):
    """As the NVML exporter does, so GPUs join the engine's series on pod: `--pod` when given, else the pod the
    simulator runs in (HOSTNAME in Kubernetes, POD_NAMESPACE from the Downward API)."""
    from inferwatch.sim import SimulatorConfig, make_app

    monkeypatch.setenv("HOSTNAME", "vllm-7f9c4-x2x8q")
    monkeypatch.setenv("POD_NAMESPACE", "llm")
    cases = [
        (None, {"namespace": "llm", "pod": "vllm-7f9c4-x2x8q"}),
        (Workload("serving", "vllm-0", "engine"), {"namespace": "serving", "pod": "vllm-0", "container": "engine"}),
    ]
    for workload, labels in cases:
        config = SimulatorConfig("vllm", None, "m", "normal", FAST, 1, gpus=2, workload=workload)
        with serve_app(make_app(config)) as base:
            found = values(_get(base + "/metrics"), "gpu_utilization_ratio")
        assert len(found) == 2 and all(
            {k: v for k, v in got.items() if k in ("namespace", "pod", "container")} == labels for got, _ in found
        ), found


@pytest.mark.parametrize(
    "args", [["--pod", "a/b/c/d", "--gpus", "1"], ["--pod", "llm//engine", "--gpus", "1"], ["--pod", "vllm-0"]]
)
def test_simulate_pod_mistakes_are_one_line(args):
    proc = subprocess.run(
        [sys.executable, "-m", "inferwatch", "simulate", "--listen", f"127.0.0.1:{free_port()}", *args],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1 and "--pod" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_stall_fires_gpu_busy_not_computing_in_a_real_prometheus(tmp_path):
    """A real Prometheus scrapes `simulate --gpus 1` in the gpu-stall scenario with the shipped operational rules
    (groups every second, `for:` cut to 5 s,
     the alerts' memory of their upper bar read every second): LLMGPUBusyNotComputing fires for that GPU."""
    import re

    from promtools import prometheus, query, wait_for

    from inferwatch.sim import SimulatorConfig, make_app

    binary = need("prometheus")
    rules = (ROOT / "alerts" / "operational.rules.yaml").read_text()
    rules = re.sub(r"for: \d+[smh]\b", "for: 5s", re.sub(r"interval: \S+", "interval: 1s", rules))
    rules = rules.replace("[30m:1m]", "[30m:1s]")  # the upper bar's memory at each evaluation, not each minute
    (tmp_path / "operational.rules.yaml").write_text(rules)
    with serve_app(make_app(SimulatorConfig("vllm", None, "m", "gpu-stall", FAST, 1, gpus=1))) as base:
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(tmp_path / "operational.rules.yaml")],
            "scrape_configs": [
                {
                    "job_name": "node",
                    "honor_labels": True,
                    "static_configs": [{"targets": [base.removeprefix("http://")]}],
                }
            ],
        }
        with prometheus(binary, config, tmp_path) as prom:
            firing = wait_for(
                lambda: query(prom, 'ALERTS{alertname="LLMGPUBusyNotComputing",alertstate="firing"}'),
                timeout=60,
                step=1,
            )
    assert [a["metric"]["gpu"] for a in firing] == ["0"]


def test_an_engine_body_over_the_limit_is_a_counted_follow_failure_not_parsed_cut(caplog):
    """A /metrics body one byte over the normalizing exporter's --max-body default: the follow fails (counted,
    said once) and the GPUs idle, rather than following the 5 running requests at the head of the cut text."""
    from aiohttp import web

    from inferwatch.exporters._config import MAX_BODY_BYTES

    head = b'# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name="m"} 5\n'
    body = head + b"#" * (MAX_BODY_BYTES - len(head)) + b"\n"  # MAX_BODY_BYTES + 1 bytes

    async def metrics(request):
        return web.Response(body=body, content_type="text/plain")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    with serve_app(app) as base:
        # a 2 s interval, unslept: the follow's deadline is 2 s, not 0.5, as 16 MiB may take a busy machine longer
        backend = SimulatedBackend(1, "n", follow=base + "/metrics", sleep=lambda seconds: None)
        exporter = GpuExporter(backend, interval=2)
        exporter.step()
        exporter.step()
        text = exporter.render()
    assert values(text, "gpu_up")[0][1] == 1.0 and values(text, "gpu_utilization_ratio")[0][1] == 0.0
    assert values(text, "inferwatch_gpu_exporter_errors_total", kind="follow")[0][1] == 2.0
    said = [r.message for r in caplog.records if "--follow" in r.message]
    assert len(said) == 1 and f"over {MAX_BODY_BYTES} bytes" in said[0], said


def test_the_limits_flags_reach_the_exporter():
    """--stale-after, --idle-timeout and --max-connections (issue 23 §3: every limit has a flag)."""
    from inferwatch.exporters.gpu._config import build_exporter, gpu_config

    config = gpu_config(backend="simulated", stale_after="9s", idle_timeout="3s", max_connections=5)
    exporter = build_exporter(config)
    assert (exporter.stale_after, exporter.idle_timeout, exporter.max_connections) == (9.0, 3.0, 5)
    assert build_exporter(gpu_config(backend="simulated", interval="2s")).stale_after == 9.0  # 2 intervals + 5 s
