"""The four dashboards on a real vLLM: every panel that one CPU engine can feed has data.

The normalizing exporter fronts the real engine (with its configured cap), a real Prometheus scrapes it with the
default SLO rules (each group every second, as tests/test_dashboards_data.py does for the simulators), and a
load of short chats runs while each panel's queries are asked. Panels that cannot have data here say why in
NO_DATA_HERE; any other empty panel fails.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading

import pytest
from conftest import need
from engines import engine_url  # noqa: F401 - the fixture
from harness import free_port, get
from promtools import prometheus, query, wait_for
from test_dashboards_data import _has_data, _substitute, fast_slo_rules, panel_cases

from inferwatch.sim import LoadConfig, run_load

pytestmark = pytest.mark.real_engine

# what a panel's queries read -> why one CPU vLLM without a front door cannot give it data
NO_DATA_HERE = {
    "gpu_": "GPU series: a CPU engine has no GPU (tests/test_dashboards_data.py feeds them from DCGM captures)",
    "spec_decode": "speculative decoding: the engine runs without a draft model",
}


def _why_empty(panel: dict) -> str | None:
    exprs = [t["expr"] for t in panel["targets"]]
    for needle, why in NO_DATA_HERE.items():
        if all(needle in e for e in exprs):
            return why
    return None


@pytest.fixture(scope="module")
def loaded(engine_url, tmp_path_factory):  # noqa: F811 - the fixture above
    workdir = tmp_path_factory.mktemp("real-dashboards")
    port = free_port()
    model = json.loads(get(engine_url + "/v1/models", timeout=60)[1])["data"][0]["id"]
    exporter = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "inferwatch",
            "exporter",
            "normalize",
            "--listen",
            f"127.0.0.1:{port}",
            "--target",
            f"vllm={engine_url}/metrics",
            "--timeout",
            "20s",
            "--max-running-requests",
            f"{model}=2",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    rules = fast_slo_rules(workdir)
    config = {
        "global": {"scrape_interval": "5s", "scrape_timeout": "5s", "evaluation_interval": "1s"},
        "rule_files": rules,
        "scrape_configs": [
            {"job_name": "inferwatch", "honor_labels": True, "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}
        ],
    }
    done = threading.Event()

    async def drive():
        load = asyncio.ensure_future(
            run_load(
                LoadConfig(
                    engine_url, rate=1.5, duration=240, prompt_tokens=60, max_tokens=24, prefix_share=0.5, seed=1
                )
            )
        )
        while not load.done() and not done.is_set():
            await asyncio.sleep(0.2)
        load.cancel()
        await asyncio.gather(load, return_exceptions=True)

    driver = threading.Thread(target=lambda: asyncio.run(drive()), daemon=True)
    try:
        with prometheus(need("prometheus"), config, workdir) as prom:
            driver.start()
            wait_for(lambda: query(prom, f'llm_slo:sli:ratio{{model="{model}"}}'), timeout=300)
            yield prom, model
    finally:
        done.set()
        driver.join(60)
        exporter.terminate()
        exporter.wait(30)


@pytest.mark.parametrize("board, panel", list(panel_cases()))
def test_panel_has_data_on_the_real_engine(board, panel, loaded):
    prom, model = loaded
    why = _why_empty(panel)
    if why:
        pytest.skip(why)
    values = {"engine": "vllm", "model": model}
    exprs = [_substitute(t["expr"], values) for t in panel["targets"]]
    wait_for(lambda: any(_has_data(prom, e) for e in exprs), timeout=120)
