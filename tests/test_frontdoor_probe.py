"""`inferwatch probe`: each outcome judged like the front door's, never a hang, and an SLO on its series."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import aiohttp
import pytest
from aiohttp import web
from simtools import FAST, simulator
from test_frontdoor import _serving, fake_engine, scrape

from inferwatch.errors import SpecError
from inferwatch.frontdoor import ProbeConfig, Prober, probe_once
from inferwatch.slo import parse_spec


def _probe(url: str, model: str = "m", **options):
    async def run():
        async with aiohttp.ClientSession() as session:
            return await probe_once(session, ProbeConfig(url, (model,), **options), model)

    return asyncio.run(run())


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_probes_of_simulated_engines(engine):
    with simulator(engine, params=replace(FAST, spec_tokens=0)) as (url, sim):
        result = _probe(url)
        assert (result.outcome, result.status) == ("ok", 200) and 0 < result.ttft <= result.duration
        sim.engine.params = replace(sim.engine.params, truncate_share=1.0)
        assert _probe(url).outcome == "length"
        sim.engine.params = replace(sim.engine.params, truncate_share=0.0, error_share=1.0)
        assert _probe(url).outcome == "error"
        assert _probe(url, model="other").outcome == "invalid_request"


def test_a_probe_never_hangs():
    with fake_engine() as (url, _):
        for model, outcome in (
            ("silent", "timeout"),
            ("stall", "timeout"),
            ("busy", "rate_limited"),
            ("cut", "truncated"),
            ("empty", "empty"),
        ):
            began = time.monotonic()
            assert _probe(url, model=model, timeout=0.3).outcome == outcome, model
            assert time.monotonic() - began < 1.5
    with simulator("vllm") as (url, _):
        pass
    assert _probe(url, timeout=0.3).outcome == "error"  # nothing listens any more


def test_the_prober_serves_its_series():
    with simulator("vllm", params=replace(FAST, spec_tokens=0)) as (sim_url, _):
        prober = Prober(ProbeConfig(sim_url, ("m",), every=0.2, timeout=2, host="127.0.0.1", port=0))

        async def starter():
            runner = web.AppRunner(prober.app())
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", 0).start()
            return runner

        with _serving(starter) as (url, _):
            deadline = time.monotonic() + 5
            while sum(v for (n, _), v in scrape(url).items() if n == "llm_probe_requests_total") < 2:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            samples = scrape(url)
    target = sim_url.split("//")[1]
    ok = samples[("llm_probe_requests_total", (("model", "m"), ("outcome", "ok"), ("target", target)))]
    assert ok >= 2
    assert samples[("llm_probe_time_to_first_token_seconds_count", (("model", "m"), ("target", target)))] == ok


def test_a_probe_slo_compiles_on_the_probes_buckets():
    def spec(threshold):
        return parse_spec(
            {
                "service": "probe",
                "source": "frontdoor",
                "objectives": [
                    {
                        "name": "responsive",
                        "sli": "latency",
                        "metric": "llm_probe_time_to_first_token_seconds",
                        "threshold": threshold,
                        "target": "99%",
                    },
                    {
                        "name": "answered",
                        "sli": "ratio",
                        "total": "llm_probe_requests_total",
                        "good": 'llm_probe_requests_total{outcome="ok"}',
                        "target": "99%",
                    },
                ],
            }
        )

    assert spec("2s").objectives[0].sli.metric == "llm_probe_time_to_first_token_seconds"
    with pytest.raises(SpecError, match="no bucket at 3.5s"):
        spec("3.5s")
