"""`inferwatch demo --engine vllm-real`: the demo's stack in front of a real vLLM on this machine's CPUs.

A real engine cannot switch scenarios on request as the simulator does: what it shows is what load can induce.
It serves the tiny local model (_real_vllm.py; installed once into a cached venv, after saying what that costs)
with two running slots, behind an `inferwatch frontdoor`, scraped through the normalizing exporter (which serves
the cap) by a real Prometheus with the demo's compressed rules. The script: normal load, then more clients than
--max-num-seqs (queueing: requests wait at the cap). `SHOWN` and `NOT_SHOWN` say which of the simulated demo's
scenarios a real CPU engine can show and why the others cannot.
"""

from __future__ import annotations

import asyncio
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass

import yaml

from inferwatch.errors import InferwatchError
from inferwatch.sim._demo import (
    FOR_SCALE,
    SLO_INTERVAL,
    _alerts,
    _by_model,
    _doctor,
    _fmt,
    _matches,
    _note_alerts,
    _phase_shown,
    _Processes,
    _rule_files,
    _triage_lines,
    _wait_ready,
    free_port,
    keep_serving,
    prometheus_binary,
    until_interrupted,
    work_folder,
)
from inferwatch.sim._load import LoadConfig, run_load

__all__ = ["run_real_demo", "prometheus_config", "SHOWN", "NOT_SHOWN", "REAL_SCRIPT", "REAL_EXPECTED"]

CAP = 2  # --max-num-seqs: a handful of clients queue on two CPU cores
# The model's size (sim/_tiny_model.py, SHAPES): big enough that the engine core, not vLLM's API server streaming
# the tokens, is what limits; with the tests' smaller model a quiet machine's engine drained its queue into the
# API server's, `waiting` came and went, and LLMQueueSaturated never fired
SHAPE = "demo"
# A busy CPU engine's /metrics takes seconds (its API server streams every token in Python): 3 s at the start of
# queueing here. Each scrape gets its whole interval (Prometheus' timeout may not exceed it), and the exporter's
# fetch the interval less the time to answer: a shorter deadline lost the engine's samples for whole stretches
# (a 3 s exporter timeout), and the queue alert, which averages them, never fired.
SCRAPE = "5s"
EXPORTER_TIMEOUT = "4s"  # the engine's answer, inside SCRAPE (the exporter keeps 0.5 s to answer)
# the alert the queueing phase promises (and --headless requires)
REAL_EXPECTED = [{"alertname": "LLMQueueSaturated"}]


@dataclass(frozen=True)
class RealPhase:
    name: str
    seconds: float
    short_seconds: float
    rate: float  # requests per second (Poisson), each writing up to max_tokens
    max_tokens: int
    in_flight: int  # at most this many requests at once: an arrival waits for an answer first
    says: str
    shows: tuple[dict[str, str], ...] = ()


# The load is sized to the engine by how many requests are in flight, not by a rate: a CPU engine's speed is the
# machine's, and an open rate it cannot serve (8 a second here) grew the queue without bound until the engine's
# /metrics answered too late for its scrapes and the queue alert never fired. In the queueing phase a request
# goes as soon as one is answered (CLOSED_LOOP: arrivals no engine keeps up with), so the in-flight bound alone
# holds the queue: 4 * CAP in flight is CAP running and the rest waiting, on a fast machine and a slow one, as long
# as the engine core is what limits (SHAPE above: on the smaller model the API server was, and the queue at the
# engine came and went however many requests were in flight).
IN_FLIGHT = 4 * CAP
CLOSED_LOOP = 1000.0  # requests per second: an arrival always finds every slot taken and waits for an answer
# --short ends the queueing phase once its alert fired (about a minute here); this is a deadline, not a measure
# of speed: where it passes, the alert is reported MISSED
QUEUEING_PATIENCE = 300
REAL_SCRIPT = [
    RealPhase("normal", 60, 15, 0.5, 32, 1, "light load: one request at a time, under the cap, nothing waits"),
    RealPhase(
        "queueing",
        150,
        QUEUEING_PATIENCE,
        CLOSED_LOOP,
        256,
        IN_FLIGHT,
        f"more clients than --max-num-seqs {CAP} ({IN_FLIGHT} requests at once): requests wait at the cap "
        "before their first token; LLMQueueSaturated fires",
        tuple(REAL_EXPECTED),
    ),
]
RESPONSE_TIMEOUT = 120  # seconds to a response's headers: a queued request waits for its slot

# the simulated demo's scenarios (sim/scenarios.yaml) a real CPU engine shows here, and those it cannot
SHOWN = {"normal": "light load", "queueing": "more clients than --max-num-seqs"}
NOT_SHOWN = {
    "kv-pressure": "needs an engine started with few KV blocks (--num-gpu-blocks-override); the real-engine tests "
    "induce it",
    "long-prompts": "load with long prompts induces it (inferwatch load --prompt-tokens); not in this script",
    "prefix-cache-loss": "a shared prefix of 128+ tokens, then none; the real-engine tests induce it",
    "gpu-stall": "no GPU: a CPU engine has no GPU-Util or SM activity",
    "gpu-not-computing": "no GPU, as gpu-stall",
    "long-outputs": "every answer of the random model runs to max_tokens already; longer ones are more load",
    "metrics-down": "the real engine's /metrics cannot be switched off while it serves",
    "thinking": "the tiny random model does not reason",
    "broken-tools": "the tiny random model calls no tools",
    "truncation": "every answer of the random model runs to max_tokens: truncation is the normal case here",
    "slow-decode": "cannot be switched on a real engine; other work on the CPUs slows it unasked",
    "spec-decode-collapse": "runs without a draft model",
    "errors": "a real engine's errors cannot be asked for",
    "not-the-engine": "needs a slow path in front of the engine",
    "flaky-metrics": "the real engine's /metrics does not fail on request",
}


def describe_engine() -> list[str]:
    """What the real demo can show, said before anything starts."""
    return [f"  shows: {name} ({how})" for name, how in SHOWN.items()] + [
        f"  not here: {name}: {why}" for name, why in NOT_SHOWN.items()
    ]


def run_real_demo(
    headless: bool = False, short: bool = False, workdir: str | None = None, install: bool = True
) -> bool:
    """The demo against a real CPU vLLM; True when the promised alert fired and doctor found nothing to fix. Refuses
    in one line (InferwatchError) when the engine cannot be installed or started."""
    from inferwatch.sim import _real_vllm as real

    binary = prometheus_binary("inferwatch demo --engine vllm-real")
    if not real.installed() and not install:
        raise InferwatchError(
            f"--engine vllm-real: {real.VLLM} is not installed in {real.venv()} and --no-install "
            f"was given; run without --no-install once to install it ({real.INSTALL_COST})"
        )
    try:
        return until_interrupted(lambda: _run(binary, headless, short, workdir))
    except real.EngineUnavailable as err:
        raise InferwatchError(f"--engine vllm-real: the real vLLM cannot run here: {err}") from None


def _status(prom: str, model: str) -> str:
    running = _by_model(prom, "sum by (model) (llm_requests_running)").get(model)
    waiting = _by_model(prom, "sum by (model) (llm_requests_waiting)").get(model)
    kv = _by_model(prom, "max by (model) (llm_kv_cache_usage_ratio)").get(model, float("nan"))
    ttft = _by_model(
        prom, "histogram_quantile(0.95, sum by (model, le) (rate(llm_time_to_first_token_seconds_bucket[30s])))"
    ).get(model)
    door = _by_model(
        prom,
        "histogram_quantile(0.95, sum by (model, le) (rate(llm_frontdoor_time_to_first_token_seconds_bucket[30s])))",
    ).get(model)
    return (
        f"  {model} running {_fmt(running, digits=0):>3}/{CAP} waiting {_fmt(waiting, digits=0):>4}  "
        f"KV {_fmt(100 * kv, '%', 0):>5}  engine TTFT p95 {_fmt(ttft, 's'):>7}  front door {_fmt(door, 's'):>7}"
    )


async def _drive(door: str, model: str, prom: str, short: bool, say) -> set:
    fired: set = set()
    seen: dict[tuple, str] = {}
    started = time.monotonic()
    normal = None
    for phase in REAL_SCRIPT:
        seconds = phase.short_seconds if short else phase.seconds
        wall_start = time.time()
        say(f"\n== {phase.name} ({seconds:.0f}s{' at most' if short and phase.shows else ''}): {phase.says}")
        load = asyncio.ensure_future(
            run_load(
                LoadConfig(
                    door,
                    phase.rate,
                    seconds,
                    model,
                    prompt_tokens=40,
                    max_tokens=phase.max_tokens,
                    prefix_share=0.0,
                    seed=7,
                    concurrency=phase.in_flight,
                    response_timeout=RESPONSE_TIMEOUT,
                )
            )
        )
        end = time.monotonic() + seconds
        fired_here: set = set()
        while time.monotonic() < end:
            await asyncio.sleep(min(5.0, max(0.0, end - time.monotonic())))
            say(f"t+{time.monotonic() - started:4.0f}s")
            say(await asyncio.to_thread(_status, prom, model))
            seen = _note_alerts(await asyncio.to_thread(_alerts, prom), seen, fired, fired_here, say)
            if _phase_shown(phase, short, fired_here, say):
                break
        load.cancel()
        await asyncio.gather(load, return_exceptions=True)
        if normal is None:
            normal = (wall_start, time.time())
        else:
            for line in await asyncio.to_thread(_triage_lines, prom, normal, (wall_start, time.time()), (model,)):
                say(line)
    return fired


def prometheus_config(rule_files: list, exporter: str, frontdoor: str) -> dict:
    """The demo's Prometheus: the exporter (the engine's series and the cap) and the front door, every scrape
    given its whole interval (SCRAPE), the compressed rules evaluated every 2 s."""
    return {
        "global": {"scrape_interval": SCRAPE, "scrape_timeout": SCRAPE, "evaluation_interval": "2s"},
        "rule_files": rule_files,
        "scrape_configs": [
            {"job_name": "inferwatch-exporter", "honor_labels": True, "static_configs": [{"targets": [exporter]}]},
            {"job_name": "inferwatch-frontdoor", "static_configs": [{"targets": [frontdoor]}]},
        ],
    }


def _run(binary: str, headless: bool, short: bool, workdir: str | None) -> bool:
    from inferwatch.sim import _real_vllm as real

    say = print
    with ExitStack() as stack:
        folder = work_folder(stack, workdir, "inferwatch-demo-real-")
        say(
            f"inferwatch demo --engine vllm-real: a real {real.VLLM} on this machine's CPUs serving the tiny local "
            f"model {real.MODEL_NAME} (--max-num-seqs {CAP}); a real engine cannot switch scenarios, load induces "
            "them:"
        )
        for line in describe_engine():
            say(line)
        say(f"starting vllm serve (20-60 s on two cores{'' if real.installed() else ', after installing it'})")
        sys.stdout.flush()
        engine = real.Engine(("--max-num-seqs", str(CAP)), shape=SHAPE, log_path=folder / "vllm.log")
        stack.callback(engine.stop)
        engine.start(log=say)
        procs = _Processes(folder)
        stack.callback(procs.stop)
        ports = {name: free_port() for name in ("frontdoor", "admin", "exporter", "prometheus")}
        me = [sys.executable, "-m", "inferwatch"]
        model = real.MODEL_NAME
        procs.start(
            "frontdoor",
            me
            + [
                "frontdoor",
                "--upstream",
                engine.url,
                "--listen",
                f"127.0.0.1:{ports['frontdoor']}",
                "--metrics-listen",
                f"127.0.0.1:{ports['admin']}",
            ],
        )
        procs.start(
            "exporter",
            me
            + [
                "exporter",
                "normalize",
                "--listen",
                f"127.0.0.1:{ports['exporter']}",
                "--timeout",
                EXPORTER_TIMEOUT,
                "--target",
                f"vllm={engine.url}/metrics",
                "--max-running-requests",
                f"{model}={CAP}",
            ],
        )
        config = prometheus_config(_rule_files(folder), f"127.0.0.1:{ports['exporter']}", f"127.0.0.1:{ports['admin']}")
        (folder / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))
        procs.start(
            "prometheus",
            [
                binary,
                f"--config.file={folder / 'prometheus.yml'}",
                f"--storage.tsdb.path={folder / 'data'}",
                f"--web.listen-address=127.0.0.1:{ports['prometheus']}",
            ],
        )
        prom = f"http://127.0.0.1:{ports['prometheus']}"
        door = f"http://127.0.0.1:{ports['frontdoor']}"
        _wait_ready(
            [
                f"http://127.0.0.1:{ports['admin']}/metrics",
                f"http://127.0.0.1:{ports['exporter']}/metrics",
                f"{prom}/-/ready",
            ],
            procs,
        )
        say(
            f"vLLM {model} at {engine.url} behind the front door {door}, exporter at 127.0.0.1:{ports['exporter']}, "
            f"Prometheus at {prom}"
        )
        say(
            f"(time compressed: SLO rules every {SLO_INTERVAL}, alert `for:` durations divided by {FOR_SCALE}; "
            f"logs and data in {folder})"
        )
        fired = asyncio.run(_drive(door, model, prom, short, say))
        missing = [e for e in REAL_EXPECTED if not _matches(e, fired)]
        say("\n== summary")
        for expected in REAL_EXPECTED:
            labels = " ".join(f"{k}={v}" for k, v in expected.items())
            say(f"  {'MISSED' if expected in missing else 'fired '} {labels}")
        healthy = _doctor(prom, folder, {"vllm": f"{engine.url}/metrics"}, say, gpus=False)
        if not headless:
            say(
                f"\nThe stack keeps running: open {prom} and try `ALERTS` or `llm_requests_waiting`; load the engine "
                f"with `inferwatch load --target {door} --rate 8`. Press Ctrl-C to stop everything."
            )
            keep_serving(procs, say)
        return not missing and healthy
