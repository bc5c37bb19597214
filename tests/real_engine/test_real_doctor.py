"""`inferwatch doctor` on a real stack: a real Prometheus scraping the real vLLM with what `inferwatch deploy render
--target compose` writes for it (the relabelings, every rule file, a real Alertmanager with the rendered routes),
read healthy; then the same render with one fault injected, each named by doctor: the relabelings removed (the
engine's series arrive without the vocabulary), and the scrape blocked (the target's port answers nothing).

The three Prometheus servers run side by side against the one shared engine, so the step waits once.
"""

from __future__ import annotations

import json
import subprocess
import sys
from contextlib import ExitStack
from functools import partial

import pytest
import yaml
from conftest import need
from deploytools import alertmanager
from engines import engine_url  # noqa: F401 - the fixture
from harness import free_port, get
from promtools import prometheus, query, wait_for

pytestmark = pytest.mark.real_engine
PATIENCE = 300  # seconds: a deadline for conditions, never a measure of speed
CAP = 2  # what deploy.yaml says of the model; doctor checks the cap arrives, not that it is right


def _deploy_yaml(engine: str, model: str) -> str:
    """The user's deploy.yaml for one CPU vLLM on this machine: no front door, no GPUs (so no DCGM), real URLs."""
    return yaml.safe_dump(
        {
            "version": 1,
            "scrape_interval": "5s",
            "frontdoor": {"enabled": False},
            "dcgm": {"enabled": False},
            "compose": {"simulate": False},
            # receivers that notify someone (nothing listens there: doctor reads the routes, nothing is sent)
            "alerting": {"page_webhook": "http://127.0.0.1:9/page", "ticket_webhook": "http://127.0.0.1:9/ticket"},
            "engines": [
                {
                    "name": "vllm",
                    "engine": "vllm",
                    "selector": {"app": "vllm"},
                    "urls": [f"{engine}/metrics"],
                    "max_running_requests": {model: CAP},
                }
            ],
        },
        sort_keys=False,
    )


def _prometheus_yml(render, am: str, fault: str | None) -> dict:
    """The rendered prometheus.yml, pointed at this machine's Alertmanager and rule files, with `fault` in it."""
    config = yaml.safe_load((render / "prometheus" / "prometheus.yml").read_text())
    config["rule_files"] = [str(render / "prometheus" / "rules" / "*.yaml")]
    config["global"]["evaluation_interval"] = "5s"  # the caps and SLO rules evaluated soon after the start
    config["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] = [am.removeprefix("http://")]
    job = next(j for j in config["scrape_configs"] if j["job_name"] == "vllm")
    if fault == "relabeling removed":
        del job["metric_relabel_configs"]
    elif fault == "scrape blocked":
        job["static_configs"][0]["targets"] = [f"127.0.0.1:{free_port()}"]  # nothing listens there
    return config


@pytest.fixture(scope="module")
def stacks(engine_url, tmp_path_factory):  # noqa: F811 - the fixture above
    """{None (healthy) or the fault: (Prometheus URL, Alertmanager URL)} and the deploy.yaml they came from."""
    tmp = tmp_path_factory.mktemp("real-doctor")
    model = json.loads(get(engine_url + "/v1/models", timeout=PATIENCE)[1])["data"][0]["id"]
    (tmp / "deploy.yaml").write_text(_deploy_yaml(engine_url, model))
    render = tmp / "render"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "inferwatch",
            "deploy",
            "render",
            "--target",
            "compose",
            "--config",
            str(tmp / "deploy.yaml"),
            "--out",
            str(render),
        ],
        capture_output=True,
        text=True,
        timeout=PATIENCE,
    )
    assert proc.returncode == 0, proc.stderr
    with ExitStack() as stack:
        am = stack.enter_context(
            alertmanager(need("prometheus-alertmanager"), render / "alertmanager" / "alertmanager.yml", tmp)
        )
        servers = {}
        for fault in (None, "relabeling removed", "scrape blocked"):
            folder = tmp / (fault or "healthy").replace(" ", "-")
            folder.mkdir()
            servers[fault] = stack.enter_context(
                prometheus(need("prometheus"), _prometheus_yml(render, am, fault), folder)
            )
        # a request, so the engine's histograms have observations; then every server has scraped and evaluated
        status, _ = _post_chat(engine_url, model)
        assert status == 200
        wait_for(
            lambda: (
                query(servers[None], "llm_max_running_requests")
                and query(servers[None], "llm_time_to_first_token_seconds_count > 0")
                and query(servers[None], "llm_kv_cache_usage_ratio")
            ),
            timeout=PATIENCE,
            step=1,
        )
        wait_for(lambda: query(servers["relabeling removed"], "vllm:num_requests_running"), timeout=PATIENCE, step=1)
        wait_for(lambda: query(servers["scrape blocked"], 'up{job="vllm"} == 0'), timeout=PATIENCE, step=1)
        for url in servers.values():
            wait_for(partial(_active_alertmanagers, url), timeout=PATIENCE, step=1)
        yield {"servers": servers, "am": am, "config": tmp / "deploy.yaml", "model": model}


def _post_chat(url: str, model: str) -> tuple[int, dict]:
    import urllib.request

    request = urllib.request.Request(
        url + "/v1/chat/completions",
        headers={"Content-Type": "application/json"},
        data=json.dumps(
            {"model": model, "max_tokens": 4, "messages": [{"role": "user", "content": "Say something."}]}
        ).encode(),
    )
    with urllib.request.urlopen(request, timeout=PATIENCE) as response:
        return response.status, json.loads(response.read())


def _active_alertmanagers(prom: str) -> list:
    return json.loads(get(prom + "/api/v1/alertmanagers", timeout=30)[1])["data"]["activeAlertmanagers"]


def _doctor(stacks, fault) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "inferwatch",
            "doctor",
            "--prometheus",
            stacks["servers"][fault],
            "--alertmanager",
            stacks["am"],
            "--config",
            str(stacks["config"]),
            "--timeout",
            "60",
        ],
        capture_output=True,
        text=True,
        timeout=PATIENCE,
    )


def _lines(out: str) -> dict[str, list[str]]:
    """{status: [the rest of each line]}"""
    found: dict[str, list[str]] = {}
    for line in out.splitlines():
        status, _, rest = line.partition(" ")
        found.setdefault(status, []).append(rest.strip())
    return found


def test_doctor_reads_the_real_stack_healthy(stacks):
    """Every check either works (ok) or says why it cannot here: no GPU on a CPU engine, no Grafana given."""
    proc = _doctor(stacks, None)
    lines = _lines(proc.stdout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert set(lines) <= {"ok", "skipped"}, proc.stdout
    ok = {line.split(":")[0] for line in lines["ok"]}
    assert {
        "targets",
        "running requests",
        "waiting requests",
        "KV-cache usage",
        "model label",
        "concurrency cap",
        "rule groups",
        "Prometheus sends alerts",
        "Alertmanager routing",
    } <= ok, proc.stdout
    assert any(line.startswith("SLO ") and "threshold" in line for line in lines["ok"]), proc.stdout
    skipped = {line.split(":")[0]: line for line in lines.get("skipped", [])}
    assert set(skipped) <= {"GPU series", "GPU <-> engine join", "Grafana dashboards"}, proc.stdout
    assert all(len(line.split(":", 1)[1].strip()) > 10 for line in skipped.values()), "a skip without its reason"


def test_doctor_names_relabeling_removed(stacks):
    """The engine scraped as vLLM writes it: its series arrive under vllm: names without `model`, none of the
    vocabulary the dashboards read; doctor names the job and the signals."""
    proc = _doctor(stacks, "relabeling removed")
    out = proc.stdout
    assert proc.returncode == 1, out
    assert (
        "missing engine series: no llm_requests_running with a model from any engine; engine series arrive "
        "under the engine's own names, scraped without the inferwatch relabelings: job vllm "
        "(vllm:num_requests_running)"
    ) in out, out


def test_doctor_names_the_blocked_scrape(stacks):
    """The engine's port answers nothing (a firewall, a wrong port): the target is down and no engine series
    arrives; doctor says both."""
    proc = _doctor(stacks, "scrape blocked")
    out = proc.stdout
    assert proc.returncode == 1, out
    assert "wrong   target vllm http://127.0.0.1:" in out and "down: " in out and "connection refused" in out, out
    assert "missing engine series" in out, out
