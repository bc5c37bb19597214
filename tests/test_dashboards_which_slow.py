"""The which-slow dashboard's mean beside a quantile, on a real Prometheus: issue 12's case, where users' time per
output token doubles below 25 ms and vLLM's p95 (buckets 0.01, 0.025) does not move, while the mean does."""

from __future__ import annotations

import importlib.util
import json
import re
import threading

import promql_parser
import pytest
from conftest import need
from promtools import prometheus, query, serve, wait_for

from inferwatch.dashboards import build, render_json
from inferwatch.dashboards._lint import lint_dashboard
from inferwatch.resources import data_path
from inferwatch.slo import bucket_tables
from inferwatch.triage import load_kinds, load_signals

TPOT = "llm_time_per_output_token_seconds"
LABELS = 'namespace="ns", model="m", engine="vllm", pod="p"'
PER_SCRAPE = 20  # requests finishing between two scrapes
FRONT_DOOR = "Front door only (inferwatch frontdoor): "  # the front-door tiles' descriptions open with it


def _reply(handler, lines: list[str]) -> None:
    body = ("\n".join(lines) + "\n").encode()
    handler.send_response(200)
    handler.send_header("Content-Type", "text/plain; version=0.0.4")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def _panel_queries(title: str) -> dict[str, str]:
    """{legend: query} of a which-slow panel, its variables matching everything and a 5 s rate window."""
    board = json.loads(build()["which-slow.json"])
    panel = next(p for p in board["panels"] if p["title"] == title)
    return {
        t["legendFormat"].split(" {{")[0]: re.sub(
            r"\$(\w+)", lambda m: "5s" if m[1] == "__rate_interval" else ".*", t["expr"]
        )
        for t in panel["targets"]
    }


def test_tpot_mean_sees_a_doubling_that_the_p95_on_vllm_buckets_cannot(tmp_path):
    bounds = [float(b) for b in bucket_tables()["vllm"].families["request_time_per_output_token"][0].bounds]
    assert bounds[:2] == [0.01, 0.025]
    seconds_per_token, lock = [0.011], threading.Lock()
    counts, total = [0] * len(bounds), [0, 0.0]

    def metrics(handler):
        with lock:
            value = seconds_per_token[0]
            for i, bound in enumerate(bounds):
                counts[i] += PER_SCRAPE if value <= bound else 0
            total[0] += PER_SCRAPE
            total[1] += PER_SCRAPE * value
            lines = [f"# TYPE {TPOT} histogram"] + [
                f'{TPOT}_bucket{{{LABELS}, le="{b}"}} {n}' for b, n in zip(bounds, counts, strict=True)
            ]
            lines += [
                f'{TPOT}_bucket{{{LABELS}, le="+Inf"}} {total[0]}',
                f"{TPOT}_sum{{{LABELS}}} {total[1]}",
                f"{TPOT}_count{{{LABELS}}} {total[0]}",
            ]
        _reply(handler, lines)

    queries = _panel_queries("Time per output token: p95 and mean")
    assert set(queries) == {"TPOT p95", "TPOT mean"}

    def settled(mean: float):
        """(p95, mean) once the rate window holds only the current value's samples."""

        def read():
            got = {k: query(prom, q) for k, q in queries.items()}
            if all(got.values()) and abs(float(got["TPOT mean"][0]["value"][1]) - mean) < 1e-9:
                return tuple(float(got[k][0]["value"][1]) for k in ("TPOT p95", "TPOT mean"))
            return None

        return wait_for(read, timeout=30, step=0.5)

    with serve({"/metrics": metrics}) as target:
        config = {
            "global": {"scrape_interval": "1s"},
            "scrape_configs": [
                {
                    "job_name": "engine",
                    "honor_labels": True,
                    "static_configs": [{"targets": [target.removeprefix("http://")]}],
                }
            ],
        }
        with prometheus(need("prometheus"), config, tmp_path) as prom:
            before = settled(0.011)
            with lock:
                seconds_per_token[0] = 0.022  # users' time per token doubles, still under 25 ms
            after = settled(0.022)
    assert before[0] == pytest.approx(after[0]) == pytest.approx(0.01 + 0.95 * 0.015)  # the p95 is blind
    assert after[1] == pytest.approx(2 * before[1])  # the mean doubles


def _tiles() -> dict[str, str]:
    board = json.loads(build()["which-slow.json"])
    return {
        p["title"]: re.sub(r"\$(\w+)", ".*", p["targets"][0]["expr"]) for p in board["panels"] if p["type"] == "stat"
    }


def test_missing_data_tiles_say_so_when_the_engine_goes(tmp_path):
    """The engine's target fails behind the exporter: its series go stale; the missing-data tile counts it and
    the tiles that read 'good' at a value (answered share) read no data, never 100 %."""
    alive, scrapes = threading.Event(), [0]
    alive.set()

    def metrics(handler):
        scrapes[0] += 1
        lines = [
            "# TYPE inferwatch_exporter_target_up gauge",
            f'inferwatch_exporter_target_up{{target="engine"}} {int(alive.is_set())}',
        ]
        if alive.is_set():
            lines += [
                "# TYPE llm_requests_running gauge",
                f"llm_requests_running{{{LABELS}}} 3",
                "# TYPE llm_requests_finished_total counter",
            ]
            lines += [
                f'llm_requests_finished_total{{{LABELS}, finished_reason="{reason}"}} {n * scrapes[0]}'
                for reason, n in (("stop", 9), ("length", 1))
            ]
        _reply(handler, lines)

    tiles = _tiles()
    gone, answered = tiles["Engine series gone"], tiles["Answered share now (engine)"]
    with serve({"/metrics": metrics}) as target:
        config = {
            "global": {"scrape_interval": "1s"},
            "scrape_configs": [
                {
                    "job_name": "exporter",
                    "honor_labels": True,
                    "static_configs": [{"targets": [target.removeprefix("http://")]}],
                }
            ],
        }
        with prometheus(need("prometheus"), config, tmp_path) as prom:
            share = wait_for(lambda: query(prom, answered), timeout=30)
            assert float(share[0]["value"][1]) == pytest.approx(0.9)  # the length stops count as bad
            assert float(query(prom, gone)[0]["value"][1]) == 0  # every engine seen is there
            alive.clear()
            assert (
                float(wait_for(lambda: query(prom, gone) and float(query(prom, gone)[0]["value"][1]), timeout=15)) == 1
            )
            assert query(prom, answered) == []  # no data, not 100 %
            targets_up = _panel_queries("Targets up")
            assert float(query(prom, targets_up["exporter target"])[0]["value"][1]) == 0


def _which_slow_module():
    """The which-slow dashboard's source as a module, for its `which_slow(kinds, signals)` builder."""
    path = data_path("inferwatch.dashboards", "which-slow.dashboard.py")
    spec = importlib.util.spec_from_file_location("which_slow_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


COLD_REPLICA = """\
version: 1
kinds:
  cold-replica:
    summary: a new replica serves with an empty prefix cache
    runbook: https://wiki.example.com/llm/cold-replica
    next: Warm new replicas before they take traffic.
    explains: [prefix-cache-loss]
    when:
      - {if: prefix_hit_ratio fall >= 0.3, weight: 2, need: true}
      - {if: [ttft_mean up >= 1.3x, prefill_time_mean up >= 1.3x], weight: 1}
"""


def test_the_kinds_text_comes_from_kinds_yaml():
    """Every kind of kinds.yaml has its row, in order, titled with its summary, its tile's guide opening with its
    signature; the dashboard's own description lists them; no hand-made row is left for a kind triage lacks."""
    kinds = load_kinds()
    board = json.loads(build()["which-slow.json"])
    rows = [p["title"] for p in board["panels"] if p["type"] == "row"]
    assert rows == [f"{k.name}: {k.summary}" for k in kinds.values()]
    guides = [p["description"].removeprefix(FRONT_DOOR) for p in board["panels"] if p["type"] == "stat"]
    assert guides == [
        f"{k.name}: {k.signature}. Confirmed by: " + g.split(". Confirmed by: ")[1]
        for k, g in zip(kinds.values(), guides, strict=True)
    ]
    assert f"One row per kind of slow ({', '.join(kinds)});" in board["description"]
    assert set(_which_slow_module().HAND_MADE) <= set(kinds)


def test_a_kind_added_to_kinds_yaml_gets_a_row_drawn_from_its_signals(tmp_path):
    """triage/README.md's cold-replica, added as `--rules` adds it: a row of its own after the shipped ones (which
    stay as they are), a tile that lights where triage would count its needed condition, a panel per signal,
    every query linted and valid PromQL."""
    (tmp_path / "rules.yaml").write_text(COLD_REPLICA)
    kinds, signals = load_kinds([tmp_path / "rules.yaml"]), load_signals()
    board = json.loads(render_json(_which_slow_module().which_slow(kinds, signals)))
    shipped = json.loads(build()["which-slow.json"])
    start = next(i for i, p in enumerate(board["panels"]) if p["title"].startswith("cold-replica"))
    assert board["panels"][:start] == shipped["panels"]
    assert "missing-data, cold-replica);" in board["description"]
    row_, tile_, *panels = board["panels"][start:]
    assert row_["title"] == "cold-replica: a new replica serves with an empty prefix cache"
    helps = {s.name: s.help[:1].upper() + s.help[1:] for s in signals}
    assert [p["title"] for p in panels] == [helps["prefix_hit_ratio"], helps["ttft_mean"], helps["prefill_time_mean"]]
    assert tile_["type"] == "stat" and tile_["title"] == f"{helps['prefix_hit_ratio']}: change"
    assert tile_["description"].startswith(
        f'cold-replica: a new replica serves with an empty prefix cache. Confirmed by: "{helps["prefix_hit_ratio"]}" '
        "falls by 0.3 or more; "
    )
    steps = tile_["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert [(s["value"], s["color"]) for s in steps] == [(None, "orange"), (-0.3, "blue")]  # orange under -0.3
    assert lint_dashboard(board) == lint_dashboard(shipped)
    for panel in [tile_, *panels]:
        for t in panel["targets"]:
            promql_parser.parse(re.sub(r"\$(\w+)", lambda m: "5m" if m[1] == "__rate_interval" else ".*", t["expr"]))
