"""`inferwatch doctor` knows its backend (issue 25): against a real Prometheus and a real VictoriaMetrics stack
(victoria-metrics stores, vmagent scrapes, vmalert evaluates and notifies), with the simulator as engine, a healthy
stack reads true on each, and an engine down, rules not loaded and no notifier are named on each.

Two stacks run side by side: a healthy one (the simulator scraped with the compose render's relabelings, its rules,
a real Alertmanager), and a faulty one (the engine's port answers nothing; no inferwatch rule group loaded; no
notifier), each on Prometheus and on VictoriaMetrics. A third Prometheus scrapes nothing at all.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from conftest import need
from deploytools import alertmanager
from promtools import process, prometheus, query, wait_for
from simtools import simulator
from vmtools import force_flush, victoria_metrics, vmagent, vmalert

from inferwatch.deploy import render
from inferwatch.deploy._config import Alerting, Config, Dcgm, FrontDoor
from inferwatch.deploy._doctor import run_checks
from inferwatch.sim._demo import free_port

MODEL = "llama-3-8b"  # the model the embedded defaults' cap names
CONFIG = Config(
    frontdoor=FrontDoor(enabled=False),
    dcgm=Dcgm(enabled=False),
    alerting=Alerting(page_webhook="http://127.0.0.1:9/page", ticket_webhook="http://127.0.0.1:9/ticket"),
)
DEPLOY_YAML = "version: 1\nfrontdoor: {enabled: false}\ndcgm: {enabled: false}\n"  # CONFIG, for the CLI
VM_FLAGS = ("-search.latencyOffset=1s", "-search.disableCache")  # answer what arrived a second ago


# a job whose own relabelings strip vLLM's prefix (as arks' ServiceMonitor does): what the config check names
RENAMING = {
    "job_name": "vllm-renamed",
    "metric_relabel_configs": [
        {"source_labels": ["__name__"], "regex": "vllm:(.*)", "target_label": "__name__", "replacement": "$1"}
    ],
}


def _scrape_config(files: dict[str, str], engine: str, am: str | None, rules: bool) -> dict:
    """The compose render's prometheus.yml, its vLLM job pointed at `engine` (host:port), scraped every second;
    with `rules` False (the faulty stack) a job that renames the engine's series beside it."""
    import yaml

    config = yaml.safe_load(files["prometheus/prometheus.yml"])
    job = next(j for j in config["scrape_configs"] if j["job_name"] == "vllm")
    job["static_configs"] = [{"targets": [engine]}]
    config["scrape_configs"] = [job] + ([] if rules else [{**RENAMING, "static_configs": [{"targets": [engine]}]}])
    config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    config["rule_files"] = ["rules/*.yaml"] if rules else []
    if am:
        config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [am.removeprefix("http://")]}]}]}
    else:
        config.pop("alerting", None)
    return config


@contextmanager
def prometheus_agent(workdir: Path, config: dict, remote_write: str):
    """A real Prometheus in agent mode (it scrapes and remote-writes; no queries, no rules); yields its URL."""
    port = free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    config = {**config, "remote_write": [{"url": remote_write + "/api/v1/write"}]}
    (workdir / "agent.yml").write_text(json.dumps(config))
    base = f"http://127.0.0.1:{port}"
    with process(
        [
            need("prometheus"),
            "--enable-feature=agent",
            f"--config.file={workdir / 'agent.yml'}",
            f"--storage.agent.path={workdir / 'wal'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        workdir / "agent.log",
        base,
        "/-/ready",
    ):
        yield base


def _answers(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return resp.read().decode()


@pytest.fixture(scope="module")
def stacks(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("backends")
    files = render(CONFIG, "compose")
    rules = tmp / "prom" / "rules"
    rules.mkdir(parents=True)
    for path, text in files.items():
        if path.startswith("prometheus/rules/"):
            (rules / path.rsplit("/", 1)[1]).write_text(text)
    (tmp / "alertmanager.yml").write_text(files["alertmanager/alertmanager.yml"])
    (tmp / "deploy.yaml").write_text(DEPLOY_YAML)
    dead = f"127.0.0.1:{free_port()}"  # an engine that is down: nothing listens there
    with ExitStack() as stack:
        engine, _ = stack.enter_context(simulator(model=MODEL))
        host = engine.removeprefix("http://")
        am = stack.enter_context(alertmanager(need("prometheus-alertmanager"), tmp / "alertmanager.yml", tmp))
        prom = stack.enter_context(prometheus(need("prometheus"), _scrape_config(files, host, am, True), tmp / "prom"))
        vm = stack.enter_context(victoria_metrics(need("victoria-metrics"), tmp / "vm", *VM_FLAGS))
        agent = stack.enter_context(
            vmagent(need("vmagent"), tmp / "vmagent", _scrape_config(files, host, None, True), vm)
        )
        ruler = stack.enter_context(
            vmalert(
                need("vmalert"),
                tmp / "vmalert",
                str(rules / "*.yaml"),
                vm,
                f"-notifier.url={am}",
                "-evaluationInterval=1s",
                "-remoteWrite.flushInterval=200ms",
            )
        )
        # the faulty stack: the engine down, no inferwatch rule group, no notifier
        (tmp / "prom-down").mkdir()
        prom_down = stack.enter_context(
            prometheus(need("prometheus"), _scrape_config(files, dead, None, False), tmp / "prom-down")
        )
        vm_down = stack.enter_context(victoria_metrics(need("victoria-metrics"), tmp / "vm-down", *VM_FLAGS))
        agent_down = stack.enter_context(
            vmagent(need("vmagent"), tmp / "vmagent-down", _scrape_config(files, dead, None, False), vm_down)
        )
        prom_agent = stack.enter_context(
            prometheus_agent(tmp / "agent-down", _scrape_config(files, dead, None, False), vm_down)
        )
        # recording rules only: vmalert starts without a notifier only then
        ruler_down = stack.enter_context(
            vmalert(need("vmalert"), tmp / "vmalert-down", str(rules / "inferwatch-mappings.yaml"), vm_down)
        )
        (tmp / "prom-empty").mkdir()
        prom_empty = stack.enter_context(
            prometheus(need("prometheus"), {"global": {"scrape_interval": "1s"}}, tmp / "prom-empty")
        )
        wait_for(lambda: query(prom, "llm_max_running_requests") and query(prom, "llm_requests_running"), step=0.1)
        wait_for(lambda: json.loads(_answers(prom + "/api/v1/alertmanagers"))["data"]["activeAlertmanagers"], step=0.1)
        wait_for(
            lambda: (
                force_flush(vm)
                or query(vm, "llm_requests_running")
                and query(vm, "llm_kv_cache_usage_ratio")
                and query(vm, "llm_max_running_requests")
            ),
            step=0.1,
        )
        wait_for(lambda: query(prom_down, "up == 0") and (force_flush(vm_down) or query(vm_down, "up == 0")), step=0.1)
        wait_for(
            lambda: (
                '"health":"down"' in _answers(agent_down + "/api/v1/targets")
                and '"health":"down"' in _answers(prom_down + "/api/v1/targets")
                and '"health":"down"' in _answers(prom_agent + "/api/v1/targets")
            ),
            step=0.1,
        )
        yield {
            "prom": prom,
            "am": am,
            "vm": vm,
            "agent": agent,
            "ruler": ruler,
            "prom_down": prom_down,
            "vm_down": vm_down,
            "agent_down": agent_down,
            "ruler_down": ruler_down,
            "prom_empty": prom_empty,
            "prom_agent": prom_agent,
            "dead": dead,
            "config": str(tmp / "deploy.yaml"),
        }


def _doctor(prometheus: str, **kwargs) -> list[str]:
    return [str(r) for r in run_checks(CONFIG, prometheus, **kwargs)]


def _bad(lines: list[str]) -> list[str]:
    return [line for line in lines if line.split()[0] in ("missing", "wrong")]


# --- a healthy stack reads true on each backend ---------------------------------------------------------------


def test_healthy_prometheus_reads_all_ok(stacks):
    lines = _doctor(stacks["prom"], alertmanager=stacks["am"])
    assert not _bad(lines), "\n".join(lines)
    assert lines[0].startswith("ok      backend --prometheus: Prometheus 2.") and lines[0].endswith(
        f"at {stacks['prom']}: queries, scrape targets, rules and alerts"
    )
    text = "\n".join(lines)
    for check in (
        "targets: all 1 active targets are up",
        "running requests",
        "model label",
        "concurrency cap",
        "rule groups",
        "Prometheus sends alerts",
        "SLO llm/responsive threshold",
    ):
        assert f"ok      {check}" in text, text


def test_healthy_victoriametrics_split_stack_reads_all_ok(stacks):
    lines = _doctor(stacks["vm"], scraper=stacks["agent"], ruler=stacks["ruler"], alertmanager=stacks["am"])
    assert not _bad(lines), "\n".join(lines)
    text = "\n".join(lines)
    assert (
        f"ok      backend --prometheus: VictoriaMetrics single node at {stacks['vm']}: queries (it scrapes "
        "nothing itself; it evaluates no rules)" in text
    )
    assert f"ok      backend --scraper: vmagent at {stacks['agent']}: scrape targets" in text
    assert f"ok      backend --ruler: vmalert at {stacks['ruler']}: rules and alerts" in text
    for check in (
        "targets: all 1 active targets are up",
        "running requests",
        "model label",
        "concurrency cap",
        "SLO llm/responsive threshold",
        f"vmalert sends alerts: to {stacks['am']}/api/v2/alerts",
    ):
        assert f"ok      {check}" in text, text
    assert "ok      rule groups: 13 loaded, none failing" in text, text
    assert "Prometheus sends alerts" not in text
    assert {line.split(":")[0][8:] for line in lines if line.startswith("skipped")} == {
        "GPU series",
        "GPU <-> engine join",
        "Grafana dashboards",
    }, text  # no GPU exporter, no --grafana


def test_victoriametrics_alone_names_what_it_cannot_check(stacks):
    """Only the store given: each check that needs the scraper or the ruler is skipped, naming the flag; what the
    store can answer (stored up, engine series) is checked."""
    lines = _doctor(stacks["vm"], alertmanager=stacks["am"])
    text = "\n".join(lines)
    assert not _bad(lines), text
    for check in ("targets", "scrape config"):
        assert (
            f"skipped {check}: VictoriaMetrics single node at --prometheus scrapes nothing itself (its target "
            "list is empty): give --scraper URL, the vmagent or Prometheus agent that scrapes the engines"
        ) in lines
    for check in ("concurrency cap", "rule groups", "alerts sent"):
        assert (
            f"skipped {check}: VictoriaMetrics single node at --prometheus evaluates no rules and sends no "
            "alerts: give --ruler URL, the vmalert (or Prometheus) that evaluates the rules and sends the "
            "alerts"
        ) in lines
    assert "ok      stored up: the 1 targets whose up arrives in VictoriaMetrics are up" in text
    assert "ok      running requests" in text


RENAMED = "its metric relabelings rename vllm:num_requests_running to num_requests_running"


# --- faults are named on each backend -------------------------------------------------------------------------


def test_faults_are_named_on_prometheus(stacks):
    lines = _doctor(stacks["prom_down"])
    text = "\n".join(lines)
    assert f"wrong   target vllm http://{stacks['dead']}/metrics: down: " in text, text
    assert "missing rule groups: inferwatch-slo-llm-responsive-long" in text
    assert "missing Prometheus sends alerts: no Alertmanager configured" in text
    assert "missing engine series" in text
    assert f"wrong   scrape job vllm-renamed: {RENAMED}" in text


def test_faults_are_named_on_victoriametrics(stacks):
    lines = _doctor(stacks["vm_down"], scraper=stacks["agent_down"], ruler=stacks["ruler_down"])
    text = "\n".join(lines)
    assert f"wrong   target vllm http://{stacks['dead']}/metrics: down: " in text, text
    assert "missing rule groups: inferwatch-slo-llm-responsive-long" in text
    assert "inferwatch-mappings-vllm" not in text.split("missing rule groups: ")[1].split("\n")[0]
    assert "missing vmalert sends alerts: no notifier configured" in text
    assert "missing engine series" in text
    assert f"wrong   scrape job vllm-renamed: {RENAMED}" in text  # vmagent's config, read and checked


# --- the four ways doctor misled on VictoriaMetrics (issue 25), each failing before ------------------------


def test_an_empty_target_list_is_never_every_target_up(stacks):
    """A Prometheus that scrapes nothing, and VictoriaMetrics during an outage (its own target list empty; vmagent
    scrapes): no line says every target is up, and the down engine is named from the up series vmagent wrote."""
    lines = _doctor(stacks["prom_empty"], alertmanager_expected=False)
    assert (
        f"missing targets: Prometheus at {stacks['prom_empty']} has no active scrape target: nothing is "
        "scraped (fix: check its scrape config; if another server scrapes (vmagent, a Prometheus agent), give "
        "its URL with --scraper)" in lines
    ), "\n".join(lines)
    lines = _doctor(stacks["vm_down"])
    text = "\n".join(lines)
    assert "every" not in text.replace("every one of", "") or "are up" not in text, text
    assert f"wrong   target vllm {stacks['dead']}: down: its last scrape failed (up 0 in VictoriaMetrics)" in text, text
    assert not [line for line in lines if line.startswith("ok      targets")]


def test_configuration_checks_are_never_skipped_silently(stacks):
    """VictoriaMetrics single node serves an empty scrape config: said as such, with the flag that checks it; given
    vmagent, its config is read and checked (no skipped scrape config line)."""
    vm_alone = "\n".join(_doctor(stacks["vm"]))
    assert "skipped scrape config: VictoriaMetrics single node at --prometheus scrapes nothing itself" in vm_alone
    assert "does not serve its config" not in vm_alone
    with_agent = "\n".join(_doctor(stacks["vm"], scraper=stacks["agent"]))
    assert "scrape config" not in with_agent, with_agent


def test_vmalert_sending_alerts_is_not_prometheus_missing(stacks):
    """The split stack: vmalert sends the alerts; doctor says so, and nothing about Prometheus' Alertmanagers."""
    text = "\n".join(_doctor(stacks["vm"], ruler=stacks["ruler"]))
    assert f"ok      vmalert sends alerts: to {stacks['am']}/api/v2/alerts" in text, text
    assert "Prometheus sends alerts" not in text


@pytest.mark.parametrize("which", ["agent", "ruler"])
def test_pointed_at_vmagent_or_vmalert_it_checks_what_they_answer(stacks, which):
    """--prometheus given vmagent's or vmalert's URL: no "Bad Request"; what it is is said, what it answers is
    checked, and every check that needs the store is skipped naming --prometheus."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "inferwatch",
            "doctor",
            "--prometheus",
            stacks[which],
            "--config",
            stacks["config"],
            "--no-alertmanager",
        ],
        capture_output=True,
        text=True,
    )
    out = proc.stdout
    assert "400" not in out and "Bad Request" not in out and "Traceback" not in proc.stderr, out + proc.stderr
    name = {"agent": "vmagent", "ruler": "vmalert"}[which]
    assert out.startswith(f"ok      backend --prometheus: {name} at {stacks[which]}: "), out
    assert (
        f"skipped engine series: {name} at --prometheus stores nothing and answers no queries: give --prometheus "
        "URL, the store the scrapers write to: victoria-metrics or a Prometheus"
    ) in out
    if which == "agent":
        assert "ok      targets: all 1 active targets are up" in out
    else:
        assert "ok      rule groups: 13 loaded, none failing" in out and "ok      vmalert sends alerts" in out
    assert proc.returncode == 0, out


def test_a_prometheus_agent_is_a_scraper(stacks):
    """Prometheus in agent mode answers targets and its config, nothing else: as --scraper it is checked as one;
    as --prometheus, every check that needs queries or rules is skipped (no "unavailable with Prometheus Agent")."""
    lines = _doctor(stacks["vm_down"], scraper=stacks["prom_agent"])
    text = "\n".join(lines)
    assert (
        "ok      backend --scraper: Prometheus agent 2." in text
        and f"at {stacks['prom_agent']}: scrape targets" in text
    ), text
    assert f"wrong   target vllm http://{stacks['dead']}/metrics: down: " in text
    assert f"wrong   scrape job vllm-renamed: {RENAMED}" in text
    lines = _doctor(stacks["prom_agent"])
    text = "\n".join(lines)
    assert "Agent" not in text.replace("Prometheus agent", ""), text
    assert (
        "skipped rule groups: Prometheus agent at --prometheus evaluates no rules and sends no alerts: give "
        "--ruler URL, the vmalert (or Prometheus) that evaluates the rules and sends the alerts"
    ) in lines
    assert f"wrong   target vllm http://{stacks['dead']}/metrics: down: " in text


def test_a_server_given_for_a_role_it_cannot_play_is_named(stacks):
    lines = _doctor(stacks["vm"], scraper=stacks["ruler"])
    assert (
        f"wrong   backend --scraper: vmalert at {stacks['ruler']} scrapes nothing itself (fix: give --scraper the "
        "URL of the vmagent or Prometheus agent that scrapes the engines)"
    ) in lines, "\n".join(lines)


def test_a_few_missed_vmalert_iterations_are_a_note_many_are_wrong():
    """A busy start misses an iteration or two (a CI box under load did, every group at once): a note; a group
    that misses more than a tenth of its runs evaluates late all the time: wrong."""
    from promtools import serve

    from inferwatch.deploy._doctor_stack import missed_iterations
    from inferwatch.promapi import Client

    metrics = (
        'vmalert_iteration_total{group="busy-start",file="a.yaml"} 99\n'
        'vmalert_iteration_missed_total{group="busy-start",file="a.yaml"} 1\n'
        'vmalert_iteration_total{group="starved",file="a.yaml"} 10\n'
        'vmalert_iteration_missed_total{group="starved",file="a.yaml"} 5\n'
        'vmalert_iteration_missed_total{group="fine",file="a.yaml"} 0\n'
    )
    with serve({"/metrics": metrics}) as base:
        results = {r.check: r.status for r in missed_iterations(Client(base))}
    assert results == {"rule group busy-start": "note", "rule group starved": "wrong"}
