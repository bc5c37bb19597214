"""Many clusters into one store, with real Prometheus processes: two agents remote-write with their `cluster`
label to a central Prometheus (--web.enable-remote-write-receiver) that runs the rendered central SLO rules;
alerts carry `cluster`, and LLMSLIDataMissing fires for the one cluster whose agent stopped.

Time is compressed for the test only: rule groups evaluate every 2s and alerts wait 5s instead of 1m and 2m.
What cannot be compressed is the SLI's own guard: a vanished series stops counting 90s after its last sample.
"""

from __future__ import annotations

import re
import subprocess
import time
from contextlib import ExitStack

import pytest
import yaml
from conftest import need
from deploytools import wait_ready
from promtools import query, serve, wait_for
from test_doctor import ENGINE

from inferwatch.deploy import parse_config, render
from inferwatch.sim._demo import free_port

CONFIG = {
    "version": 1,
    "frontdoor": {"enabled": False},
    "cluster": {"name": "a", "remote_write_url": "http://central:9090/api/v1/write"},
}


@pytest.mark.promtool
def test_rendered_multicluster_variant():
    files = render(parse_config(CONFIG, "multi.yaml"))
    values = yaml.safe_load(files["prometheus/values.yaml"])["prometheus"]["prometheusSpec"]
    url = CONFIG["cluster"]["remote_write_url"]
    assert values == {"externalLabels": {"cluster": "a"}, "remoteWrite": [{"url": url}]}
    assert not [p for p in files if p.startswith("rules/")]  # rules run centrally, not in the cluster
    slo = yaml.safe_load(files["central/rules/inferwatch-slo-llm.yaml"])
    assert "sum by (model, cluster) (" in slo["groups"][0]["rules"][0]["expr"]
    proc = subprocess.run(
        [need("promtool"), "check", "rules", "/dev/stdin"],
        input=files["central/rules/inferwatch-slo-llm.yaml"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _agent(binary: str, cluster: str, target: str, central: str, workdir):
    port = free_port()
    cfg = {
        "global": {"scrape_interval": "1s", "external_labels": {"cluster": cluster}},
        "scrape_configs": [{"job_name": "engine", "static_configs": [{"targets": [target.removeprefix("http://")]}]}],
        "remote_write": [{"url": central + "/api/v1/write", "queue_config": {"batch_send_deadline": "1s"}}],
    }
    (workdir / "agent.yml").write_text(yaml.safe_dump(cfg))
    log = workdir / "agent.log"
    proc = subprocess.Popen(
        [
            binary,
            "--enable-feature=agent",
            f"--config.file={workdir / 'agent.yml'}",
            f"--storage.agent.path={workdir / 'wal'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=open(log, "w"),
        stderr=subprocess.STDOUT,
    )
    wait_ready(f"http://127.0.0.1:{port}/-/ready", proc, log)
    return proc


def _alerts(base: str) -> dict[str, str]:
    """{cluster: state} of LLMSLIDataMissing for the responsive objective."""
    import json
    import urllib.request

    got = json.load(urllib.request.urlopen(base + "/api/v1/alerts", timeout=5))["data"]["alerts"]
    return {
        a["labels"].get("cluster", ""): a["state"]
        for a in got
        if a["labels"]["alertname"] == "LLMSLIDataMissing" and a["labels"]["slo"] == "responsive"
    }


@pytest.mark.slow
def test_two_agents_one_store_and_one_cluster_goes_missing(tmp_path):
    binary = need("prometheus")
    files = render(parse_config(CONFIG, "multi.yaml"))
    rules = tmp_path / "central"
    rules.mkdir()
    for path, text in files.items():
        if path.startswith("central/rules/"):
            text = re.sub(r"(?m)^(\s+)interval: 1m$", r"\1interval: 2s", text)
            text = re.sub(r"(?m)^(\s+)for: \d+m$", r"\1for: 5s", text)
            (rules / path.rsplit("/", 1)[1]).write_text(text)
    with ExitStack() as stack:
        central = _central(binary, rules, tmp_path, stack)
        agents = {}
        for cluster in ("a", "b"):
            target = stack.enter_context(serve({"/metrics": ENGINE}))
            (tmp_path / cluster).mkdir()
            agents[cluster] = _agent(binary, cluster, target, central, tmp_path / cluster)
            stack.callback(agents[cluster].terminate)
        recorded = wait_for(
            lambda: (
                {r["metric"].get("cluster") for r in query(central, 'llm_slo:total:increase1m{slo="responsive"}')}
                == {"a", "b"}
            ),
            timeout=40,
        )
        assert recorded
        assert not _alerts(central)
        agents["b"].terminate()
        agents["b"].wait(10)
        stopped = time.time()
        assert wait_for(lambda: _alerts(central).get("b") == "firing", timeout=150, step=2)
        assert "a" not in _alerts(central) and time.time() - stopped > 60


def _central(binary: str, rules, workdir, stack: ExitStack) -> str:
    """The central Prometheus: receives remote writes, runs the rendered central rules."""
    port = free_port()
    (workdir / "central.yml").write_text(
        yaml.safe_dump({"global": {"evaluation_interval": "2s"}, "rule_files": [str(rules / "*.yaml")]})
    )
    log = workdir / "central.log"
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={workdir / 'central.yml'}",
            f"--storage.tsdb.path={workdir / 'central-data'}",
            "--web.enable-remote-write-receiver",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=open(log, "w"),
        stderr=subprocess.STDOUT,
    )
    stack.callback(proc.wait, 10)
    stack.callback(proc.terminate)
    wait_ready(f"http://127.0.0.1:{port}/-/ready", proc, log)
    return f"http://127.0.0.1:{port}"
