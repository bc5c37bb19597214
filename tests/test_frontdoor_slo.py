"""Front-door SLO rules on the series a real front door exports: the compiled selectors match its real label
sets and outcomes, and a real error mix fires the tier it should (promtool, no synthetic outcome names).

The front door meters 30 requests through the simulator (one broken tool call among them, plus a client that
leaves and an unknown model, which `answered` leaves out); its /metrics become promtool input series that
grow by the same counts every minute, so every window sees the real mix: 1 bad in 30 (3.3 %) burns a 99.5 %
budget 6.7x, over page_slow's 5.6x and under page_fast's 13.44x. Then, end to end, a real Prometheus
scrapes a front door during the broken-tools scenario and pages.
"""

from __future__ import annotations

import subprocess
import urllib.request
from dataclasses import replace

import openai
import pytest
import yaml
from conftest import need
from prometheus_client.parser import text_string_to_metric_families
from simtools import FAST, simulator
from test_frontdoor import ASK, METRICS, TOOLS, client, frontdoor

from inferwatch.slo import compile_spec, parse_spec, render_files

SPEC = {
    "service": "chat",
    "source": "frontdoor",
    "group_by": ["model"],
    "objectives": [
        {"name": "responsive", "sli": "ttft", "threshold": "1s", "target": "99%"},
        {"name": "answered", "sli": "answered", "target": "99.5%"},
    ],
}


def _real_series() -> list[tuple[str, dict, float]]:
    """(name, labels, value) of every counter and histogram sample the front door exported."""
    with (
        simulator("vllm", params=replace(FAST, spec_tokens=0, broken_tool_share=1.0)) as (sim_url, _),
        frontdoor(sim_url) as (door_url, _),
    ):
        c = client(door_url)
        c.chat.completions.create(model="m", messages=ASK, tools=TOOLS)  # tool_call_invalid
        for _ in range(29):
            list(c.chat.completions.create(model="m", messages=ASK, stream=True))  # ok
        with c.chat.completions.create(model="m", messages=ASK, stream=True) as chunks:
            next(iter(chunks))  # cancelled
        with pytest.raises(openai.NotFoundError):
            c.chat.completions.create(model="nope", messages=ASK)  # invalid_request
        text = urllib.request.urlopen(METRICS[door_url] + "/metrics", timeout=5).read().decode()
    return [
        (s.name, s.labels, s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.endswith(("_total", "_bucket", "_count"))
    ]


@pytest.mark.promtool
def test_a_real_error_mix_fires_page_slow_not_page_fast(tmp_path):
    need("promtool")
    series = _real_series()
    outcomes = {labels["outcome"]: value for name, labels, value in series if name == "llm_frontdoor_requests_total"}
    assert outcomes == {"ok": 29, "tool_call_invalid": 1, "cancelled": 1, "invalid_request": 1}
    visible = sum(v for n, _, v in series if n == "llm_frontdoor_time_to_first_token_seconds_count")
    files, _ = render_files(compile_spec(parse_spec(SPEC)), tests=False)
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    inputs = [
        {
            "series": name
            + "{"
            + ", ".join(f'{k}="{v}"' for k, v in {**labels, "job": "frontdoor", "instance": "fd:8080"}.items())
            + "}",
            "values": f"0 {value:g}+{value:g}x69",
        }
        for name, labels, value in series
    ]
    firing = 'count by (tier) (ALERTS{alertname="LLMErrorBudgetBurn", alertstate="firing", slo="answered"})'
    test = {
        "rule_files": sorted(n for n in files if n.endswith(".rules.yaml")),
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": inputs,
                "promql_expr_test": [
                    {
                        "expr": 'llm_slo:total:increase1m{slo="answered"}',
                        "eval_time": "30m",
                        "exp_samples": [
                            {
                                "labels": 'llm_slo:total:increase1m{model="m", service="chat", slo="answered"}',
                                "value": 30,
                            }
                        ],
                    },
                    {
                        "expr": 'llm_slo:good:increase1m{slo="answered"}',
                        "eval_time": "30m",
                        "exp_samples": [
                            {
                                "labels": 'llm_slo:good:increase1m{model="m", service="chat", slo="answered"}',
                                "value": 29,
                            }
                        ],
                    },
                    {
                        "expr": 'llm_slo:good:increase1m{slo="responsive"} '
                        '== llm_slo:total:increase1m{slo="responsive"}',
                        # every streamed request saw a visible token within 1s, and only those count
                        "eval_time": "30m",
                        "exp_samples": [
                            {
                                "labels": 'llm_slo:good:increase1m{model="m", service="chat", slo="responsive"}',
                                "value": visible,
                            }
                        ],
                    },
                    # page_slow alone: the tickets wait for 2 h of data (slo/tiers.yaml `history`), and there are 30 min
                    {"expr": firing, "eval_time": "30m", "exp_samples": [{"labels": '{tier="page_slow"}', "value": 1}]},
                ],
            }
        ],
    }
    (tmp_path / "real.test.yaml").write_text(yaml.safe_dump(test, sort_keys=False))
    proc = subprocess.run(
        ["promtool", "test", "rules", "real.test.yaml"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_real_prometheus_scraping_the_front_door_pages_on_broken_tools(tmp_path):
    """End to end: the simulator's broken-tools scenario behind a front door, a real Prometheus scraping it with
    the compiled front-door rules (evaluated every 5 s instead of every minute): answered pages, responsive
    stays quiet."""
    import threading

    from promtools import prometheus, query, wait_for

    binary = need("prometheus")
    files, _ = render_files(compile_spec(parse_spec(SPEC)), tests=False)
    rules = []
    for name, text in files.items():
        if name.endswith(".rules.yaml"):
            (tmp_path / name).write_text(text.replace("interval: 1m", "interval: 5s"))
            rules.append(str(tmp_path / name))
    params = replace(FAST, spec_tokens=0, broken_tool_share=1.0, decode_step_s=0.001)
    with simulator("sglang", params=params) as (sim_url, _), frontdoor(sim_url) as (door_url, _):
        stop = threading.Event()

        def traffic():
            c = client(door_url)
            while not stop.is_set():
                list(c.chat.completions.create(model="m", messages=ASK, tools=TOOLS, stream=True))

        sender = threading.Thread(target=traffic, daemon=True)
        sender.start()
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "5s"},
            "rule_files": rules,
            "scrape_configs": [
                {"job_name": "frontdoor", "static_configs": [{"targets": [METRICS[door_url].split("//")[1]]}]}
            ],
        }
        try:
            with prometheus(binary, config, tmp_path) as base:
                page = 'ALERTS{alertname="LLMErrorBudgetBurn", slo="answered", tier="page_fast", alertstate="firing"}'
                fired = wait_for(lambda: query(base, page), timeout=60, step=1)
                assert fired[0]["metric"]["model"] == "m" and fired[0]["metric"]["severity"] == "critical"
                assert not query(base, 'ALERTS{alertname="LLMErrorBudgetBurn", slo="responsive"}')
                ratio = query(base, 'llm_slo:error_ratio:5m{slo="answered"}')
                assert float(ratio[0]["value"][1]) == 1.0
        finally:
            stop.set()
            sender.join(10)
