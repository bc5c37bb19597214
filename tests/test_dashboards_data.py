"""No empty panels: every panel of the four dashboards returns data for vLLM and for SGLang.

A simulated vLLM and SGLang under load and two dcgm-exporter expositions sit
behind the normalizing exporter; a real Prometheus scrapes it with the default
SLO rules loaded. Each panel's queries run with the variables substituted, once
per engine. A panel whose description says "vLLM only" (a signal SGLang does
not export) is exempt for SGLang. A panel whose description says "Front door
only" reads `llm_frontdoor_*` series, which this stack (engines without an
`inferwatch frontdoor`) does not have: it is exempt here, and the demo's
front door feeds it (tests/test_demo.py).
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import threading
import time
from dataclasses import replace

import pytest
from conftest import EXPOSITIONS, REAL_CAPTURES, ROOT, need
from promtools import free_port, prometheus, query, serve, wait_for
from simtools import FAST, simulator

from inferwatch.dashboards import PANEL_NEEDS, build, has_data, panel_needs, substitute_variables
from inferwatch.sim import LoadConfig, run_load
from inferwatch.sim._demo import _compress

MODELS = {"vllm": "llama-3-8b", "sglang": "qwen3-8b"}
DCGM = [
    REAL_CAPTURES / "dcgm-exporter-4.4.1-4.6.0-lke-ai-conformance.txt",
    EXPOSITIONS / "dcgm-4.5-exported-labels.txt",
]
_substitute = substitute_variables


def _has_data(prom: str, expr: str) -> bool:
    return has_data(lambda e: query(prom, e), expr)


AUTOSCALING = "inferwatch-autoscaling.rules.yaml"


def fast_slo_rules(workdir) -> list[str]:
    """The default SLO rule files and the autoscaling signals, written to `workdir` with the demo's compression and
    each group evaluated every second (the demo's 10 s made the recordings first appear 14 s and the SLI 18 s into
    the load; the panels only need data)."""
    rules = []
    for path in [*sorted((ROOT / "alerts").glob("llm.*.rules.yaml")), ROOT / "alerts" / AUTOSCALING]:
        text = path.read_text() if path.name == AUTOSCALING else _compress(path.read_text())  # its windows are short
        text = re.sub(r"(?m)^(\s*)interval: \S+$", r"\1interval: 1s", text)
        (workdir / path.name).write_text(text)
        rules.append(str(workdir / path.name))
    return rules


@pytest.fixture(scope="module")
def prom(tmp_path_factory):
    need("prometheus")
    workdir = tmp_path_factory.mktemp("dashboards")
    params = replace(FAST, decode_step_s=0.005, output_tokens_mean=40, max_num_seqs=8)
    with (
        simulator("vllm", model=MODELS["vllm"], params=params) as (vllm, _),
        simulator("sglang", model=MODELS["sglang"], params=params) as (sglang, _),
        serve({f"/{p.stem}": p.read_text() for p in DCGM}) as gpus,
    ):
        port = free_port()
        targets = [f"vllm={vllm}/metrics", f"sglang={sglang}/metrics"] + [
            f"gpu{i}={gpus}/{p.stem}" for i, p in enumerate(DCGM)
        ]
        exporter = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "inferwatch",
                "exporter",
                "normalize",
                "--listen",
                f"127.0.0.1:{port}",
                *[a for t in targets for a in ("--target", t)],
                *[a for m in MODELS.values() for a in ("--max-running-requests", f"{m}=8")],
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        rules = fast_slo_rules(workdir)
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": rules,
            "scrape_configs": [
                {"job_name": "inferwatch", "honor_labels": True, "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}
            ],
        }
        done = threading.Event()

        async def drive():  # 40 s of load, or until the module's tests are done (teardown used to wait it out)
            loads = asyncio.gather(
                *[
                    run_load(LoadConfig(base, rate=6, duration=40, prompt_tokens=60, seed=i, max_tokens=64))
                    for i, base in enumerate((vllm, sglang))
                ]
            )
            while not loads.done() and not done.is_set():
                await asyncio.sleep(0.2)
            loads.cancel()
            await asyncio.gather(loads, return_exceptions=True)

        load = threading.Thread(target=lambda: asyncio.run(drive()), daemon=True)
        try:
            with prometheus(need("prometheus"), config, workdir) as base:
                load.start()
                wait_for(lambda: len(query(base, "llm_slo:sli:ratio")) >= 6, timeout=60)
                _until_every_panel_has_data(base, deadline=time.monotonic() + 60)
                yield base
        finally:
            done.set()
            load.join(60)
            exporter.terminate()
            exporter.wait(10)


EXEMPT = PANEL_NEEDS  # a panel noted so reads a part this stack does not run, and must read that part's series


def _front_door_only(panel: dict) -> bool:
    return panel_needs(panel) is not None


def test_front_door_exemption_only_covers_front_door_panels():
    """An exempt panel must read the series of the part its note names (the front door's, or the cost rules'),
    so the note cannot hide an empty engine panel."""
    exempt = [p for text in build().values() for p in json.loads(text)["panels"] if _front_door_only(p)]
    assert {note for note in EXEMPT if any(note in p["description"] for p in exempt)} == set(EXEMPT)
    for panel in exempt:
        prefix = next(prefix for note, prefix in EXEMPT.items() if note in panel["description"])
        assert any(prefix in t["expr"] for t in panel["targets"]), panel["title"]


def panel_cases():
    """Every panel of the four dashboards but rows and front-door-only ones, as (board, panel) params."""
    for name, text in build().items():
        board = json.loads(text)
        for panel in board["panels"]:
            if panel["type"] != "row" and not _front_door_only(panel):
                yield pytest.param(board, panel, id=f"{name}:{panel['title']}")


def _no_data(board: dict, panel: dict, prom: str) -> str | None:
    """What `panel` lacks: None when it has data for each engine it shows, else which engine and its queries."""
    exprs = [t["expr"] for t in panel["targets"]]
    per_engine = any("$engine" in e or "$model" in e for e in exprs)
    engines = ["vllm"] + ([] if "vLLM only" in panel.get("description", "") else ["sglang"])
    for engine in engines if per_engine else ["any"]:
        values = {"engine": engine, "model": MODELS.get(engine, ".*")} if engine != "any" else {}
        if "service" in json.dumps(board["templating"]):  # the SLO dashboard filters by model only
            values = {"model": MODELS.get(engine, ".*")}
        if not any(_has_data(prom, _substitute(e, values)) for e in exprs):
            return f"{panel['title']}: no data for {engine}: {[_substitute(e, values) for e in exprs]}"
    return None


def _until_every_panel_has_data(prom: str, deadline: float) -> None:
    """Wait until every panel has data (rates and quantiles need a few scrapes after the SLI's first samples),
    or the deadline; the tests then name each panel still without."""
    cases = [param.values for param in panel_cases()]
    while time.monotonic() < deadline:
        cases = [(board, panel) for board, panel in cases if _no_data(board, panel, prom)]
        if not cases:
            return
        time.sleep(1)


@pytest.mark.parametrize("board, panel", list(panel_cases()))
def test_panel_has_data_for_both_engines(board, panel, prom):
    missing = _no_data(board, panel, prom)
    assert missing is None, missing


def _tiles() -> dict[str, str]:
    board = json.loads(build()["serving-overview.json"])
    return {p["title"]: p["targets"][0]["expr"] for p in board["panels"] if p["type"] == "stat"}


def test_attainment_tiles_read_no_data_once_the_engine_is_gone(tmp_path):
    """Issue 9: with the engine gone, a ratio over [$__range] keeps its old samples and read 100 % for minutes;
    the tiles must show no data within a few scrapes, and show the share while requests are counted."""
    alive, scrapes = threading.Event(), [0]
    alive.set()

    def metrics(handler):
        scrapes[0] += 1
        lines = []
        if alive.is_set():  # the exporter serves nothing for a dead engine
            n, labels = scrapes[0], 'namespace="ns", model="m", engine="vllm", pod="p"'
            for name in ("llm_time_to_first_token_seconds", "llm_time_per_output_token_seconds"):
                lines += [f"# TYPE {name} histogram"] + [
                    f'{name}_bucket{{{labels}, le="{le}"}} {n}' for le in ("0.1", "1.0", "+Inf")
                ]
                lines += [f"{name}_sum{{{labels}}} {n * 0.05}", f"{name}_count{{{labels}}} {n}"]
        body = (
            "\n".join(
                lines
                + ["# TYPE inferwatch_exporter_target_up gauge", f"inferwatch_exporter_target_up {int(alive.is_set())}"]
            )
            + "\n"
        ).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "text/plain; version=0.0.4")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    tiles = {title: _substitute(expr, {}) for title, expr in _tiles().items() if "within" in title}
    assert set(tiles) == {"TTFT within 1 s", "TPOT within 100 ms"}
    with serve({"/metrics": metrics}) as target:
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [
                {
                    "job_name": "engine",
                    "honor_labels": True,
                    "static_configs": [{"targets": [target.removeprefix("http://")]}],
                }
            ],
        }
        with prometheus(need("prometheus"), config, tmp_path) as prom:
            for expr in tiles.values():
                assert float(wait_for(lambda expr=expr: query(prom, expr), timeout=30)[0]["value"][1]) == 1.0
            alive.clear()
            gone = time.time()
            for title, expr in tiles.items():
                wait_for(lambda expr=expr: not query(prom, expr), timeout=15)
                assert time.time() - gone < 10, title
            old = (
                'sum(rate(llm_time_to_first_token_seconds_bucket{le="1.0"}[5m])) / '
                "(sum(rate(llm_time_to_first_token_seconds_count[5m])) > 0)"
            )
            assert float(query(prom, old)[0]["value"][1]) == 1.0  # what the tile read before: 100 %


def test_gpus_busy_not_computing_reads_no_data_without_gpu_series(tmp_path):
    """Issue 29 §6: the tile read `... or vector(0)`, a green 0 with no GPU series at all. Now: No data until a
    GPU reports both GPU-Util and SM activity (GPU-Util alone cannot tell), 0 once they do, 1 for a stuck GPU."""
    board = json.loads(build()["gpu-activity.json"])
    expr = _substitute(
        next(p["targets"][0]["expr"] for p in board["panels"] if p["title"] == "GPUs busy but not computing"), {}
    )
    state = ["none"]
    gpu = 'gpu="0", uuid="GPU-1", pod="vllm-0", namespace="llm"'
    shown = {
        "none": [],
        "util only": [f"gpu_utilization_ratio{{{gpu}}} 0.95"],
        "healthy": [f"gpu_utilization_ratio{{{gpu}}} 0.95", f"gpu_sm_active_ratio{{{gpu}}} 0.8"],
        "stuck": [f"gpu_utilization_ratio{{{gpu}}} 0.95", f"gpu_sm_active_ratio{{{gpu}}} 0.3"],
    }

    def metrics(handler):
        body = (
            "\n".join(["# TYPE inferwatch_exporter_up gauge", "inferwatch_exporter_up 1", *shown[state[0]]]) + "\n"
        ).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "text/plain; version=0.0.4")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    with serve({"/metrics": metrics}) as target:
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [
                {
                    "job_name": "gpus",
                    "honor_labels": True,
                    "static_configs": [{"targets": [target.removeprefix("http://")]}],
                }
            ],
        }
        with prometheus(need("prometheus"), config, tmp_path) as prom:
            assert wait_for(lambda: query(prom, "inferwatch_exporter_up"), timeout=30)
            assert query(prom, expr) == []
            old = expr.split("\nor\n")[0] + " or vector(0)"
            assert query(prom, old)[0]["value"][1] == "0"  # what the tile read before: a green 0
            state[0] = "util only"
            assert wait_for(lambda: query(prom, "gpu_utilization_ratio"), timeout=30)
            assert query(prom, expr) == []
            for name, value in (("healthy", "0"), ("stuck", "1")):
                state[0] = name
                assert wait_for(
                    lambda value=value: [r["value"][1] for r in query(prom, expr)] == [value], timeout=30
                ), name
