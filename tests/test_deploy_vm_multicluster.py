"""Many clusters into one VictoriaMetrics, with the real binaries (issue 25 §2): in each of two clusters a
victoria-metrics and a vmagent run with the rendered compose command lines (`cluster` set), scraping a simulated
vLLM that serves the same model under the same pod name in both; each vmagent also writes to a central
victoria-metrics with its cluster's label; a central vmalert runs the rendered central rules. On that global view
every dashboard query runs without an error, the panels show data, and the SLO records are one per cluster.

Time is compressed for the test only, as in the demo: rule groups every second and each `for:` a tenth as long.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import urllib.request
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from conftest import need
from deploytools import alertmanager
from promtools import process, query, wait_for
from simtools import FAST, serve_app
from test_dashboards_data import _front_door_only, _has_data, _substitute
from test_deploy_vm import _local

from inferwatch.dashboards import build
from inferwatch.deploy import parse_config, render
from inferwatch.deploy._victoriametrics import STORE_FLAGS, vmalert_flags
from inferwatch.sim import LoadConfig, SimulatorConfig, make_app, run_load
from inferwatch.sim._demo import _compress, free_port

MODEL = "llama-3-8b"


def _config(cluster: str, central: str):
    return parse_config(
        {
            "version": 1,
            "backend": "victoriametrics",
            "frontdoor": {"enabled": False},
            "scrape_interval": "1s",
            "engines": [
                {"name": "vllm", "engine": "vllm", "selector": {"app": "vllm"}, "max_running_requests": {MODEL: 8}}
            ],
            "cluster": {"name": cluster, "remote_write_url": f"{central}/api/v1/write"},
        },
        "d.yaml",
    )


def _store(stack: ExitStack, workdir: Path) -> str:
    port = free_port()
    workdir.mkdir(parents=True)
    stack.enter_context(
        process(
            [
                need("victoria-metrics"),
                f"-storageDataPath={workdir / 'data'}",
                *STORE_FLAGS,
                f"-httpListenAddr=127.0.0.1:{port}",
            ],
            workdir / "vm.log",
            ready=f"http://127.0.0.1:{port}",
        )
    )
    return f"http://127.0.0.1:{port}"


def _cluster(stack: ExitStack, name: str, central: str, engine: str, workdir: Path) -> None:
    """One cluster's compose stack, as rendered: its own victoria-metrics, and vmagent writing there and centrally."""
    files = render(_config(name, central), "compose")
    for path, text in files.items():
        (workdir / path).parent.mkdir(parents=True, exist_ok=True)
        (workdir / path).write_text(text.replace("vllm:8000", engine))
    local = _store(stack, workdir / "volumes" / "vm-data")
    port = free_port()
    command = _local(
        yaml.safe_load(files["compose.yaml"])["services"]["vmagent"],
        workdir,
        {"victoria-metrics:8428": local.removeprefix("http://"), "central:8428": central.removeprefix("http://")},
        port,
    )
    assert f"-remoteWrite.label=cluster={name}" in command
    stack.enter_context(process([need("vmagent"), *command], workdir / "vmagent.log", ready=f"http://127.0.0.1:{port}"))


def _central_rules(central: str, workdir: Path) -> list[str]:
    """The Kubernetes render's central rules (SLOs grouped by cluster), compressed."""
    workdir.mkdir()
    out = []
    for path, text in render(_config("a", central), "kubernetes").items():
        if path.startswith("central/rules/"):
            text = re.sub(r"(?m)^(\s*)interval: \S+$", r"\1interval: 1s", _compress(text))
            out.append(str(workdir / Path(path).name))
            Path(out[-1]).write_text(text)
    return out


def _load(bases: list[str], done: threading.Event) -> threading.Thread:
    async def drive():
        loads = asyncio.gather(
            *[
                run_load(LoadConfig(base, rate=6, duration=60, prompt_tokens=60, seed=i, max_tokens=64))
                for i, base in enumerate(bases)
            ]
        )
        while not loads.done() and not done.is_set():
            await asyncio.sleep(0.2)
        loads.cancel()
        await asyncio.gather(loads, return_exceptions=True)

    thread = threading.Thread(target=lambda: asyncio.run(drive()), daemon=True)
    thread.start()
    return thread


def _empty_panels(store: str, boards: dict[str, dict]) -> list[str]:
    """The panels (but rows and front-door-only ones) whose every query reads nothing for MODEL on vLLM; a query
    the store answers with an error fails the test (promtools.query)."""
    empty = []
    for name, board in boards.items():
        slos = "service" in json.dumps(board["templating"])  # the SLO dashboard filters by model only
        values = {"model": MODEL} if slos else {"engine": "vllm", "model": MODEL}
        for panel in board["panels"]:
            if (
                panel["type"] != "row"
                and not _front_door_only(panel)
                and not any(_has_data(store, _substitute(t["expr"], values)) for t in panel["targets"])
            ):
                empty.append(f"{name}: {panel['title']}")
    return empty


@pytest.mark.slow
def test_two_clusters_into_one_victoriametrics_and_the_dashboards_on_the_global_view(tmp_path):
    params = replace(FAST, decode_step_s=0.005, output_tokens_mean=40, max_num_seqs=8)
    done = threading.Event()
    with ExitStack() as stack:
        central = _store(stack, tmp_path / "central")
        engines = [
            stack.enter_context(
                serve_app(make_app(SimulatorConfig("vllm", None, MODEL, "normal", params, seed=i, gpus=1)))
            )
            for i in range(2)
        ]
        for name, engine in zip("ab", engines, strict=True):
            _cluster(stack, name, central, engine.removeprefix("http://"), tmp_path / name)
        (tmp_path / "alertmanager.yml").write_text(
            render(_config("a", central), "kubernetes")["alertmanager/alertmanager.yml"]
        )
        am = stack.enter_context(alertmanager(need("prometheus-alertmanager"), tmp_path / "alertmanager.yml", tmp_path))
        port = free_port()
        stack.enter_context(
            process(
                [
                    need("vmalert"),
                    *vmalert_flags(_central_rules(central, tmp_path / "rules"), central, am, evaluation_interval="1s"),
                    f"-httpListenAddr=127.0.0.1:{port}",
                    "-remoteWrite.flushInterval=100ms",
                ],
                tmp_path / "vmalert.log",
                ready=f"http://127.0.0.1:{port}",
            )
        )
        load = _load(engines, done)
        stack.callback(load.join, 60)
        stack.callback(done.set)
        clusters = wait_for(
            lambda: {r["metric"].get("cluster") for r in query(central, "llm_slo:sli:ratio")} >= {"a", "b"} or None,
            timeout=120,
        )
        assert clusters
        sli = query(central, f'llm_slo:sli:ratio{{slo="responsive", model="{MODEL}"}}')
        assert sorted(r["metric"]["cluster"] for r in sli) == ["a", "b"]  # one per cluster, same model
        raw = query(central, f'count by (cluster) (llm_requests_running{{model="{MODEL}"}})')
        assert {r["metric"]["cluster"] for r in raw} == {"a", "b"}
        boards = {name: json.loads(text) for name, text in build().items()}
        # the records of the last groups come in over a few evaluations: wait until every panel shows data
        wait_for(lambda: not _empty_panels(central, boards), timeout=90, step=2)
        with urllib.request.urlopen(am + "/api/v2/alerts", timeout=5) as resp:
            assert json.load(resp) == []  # a healthy fleet: nothing reached the Alertmanager
