"""`inferwatch demo --canary`: is the new release worse? Three canaries against one stable version, live.

Four simulated vLLM engines serve the same model, each as one version (the normalizing exporter's target label
is `version`): v1 is stable; v2 is the same release again (an equal canary); v3 decodes five times slower (the
`slow-decode` scenario: a regression); v4 gets a trickle of traffic (too few requests to say). Load runs on all
four at once, then `inferwatch canary` compares each canary with v1 over the window and prints its verdict. It
succeeds when v2 passes, v3 fails and v4 is inconclusive: the three answers a rollout gate must tell apart.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

from inferwatch.sim._load import LoadConfig, run_load

MODEL = "llama-3-8b"
CAP = 32  # --max-num-seqs: the slow canary's longer requests fit without queueing (queueing is another story)
WINDOW = "2m"  # canary --window: covers the whole load


@dataclass(frozen=True)
class Version:
    name: str
    scenario: str
    rate: float  # requests per second sent to it
    expect: str  # the verdict the demo shows for it (the stable version has none)
    says: str


VERSIONS = (
    Version("v1", "normal", 3.0, "", "stable"),
    Version("v2", "normal", 3.0, "pass", "the same release again: an equal canary"),
    Version("v3", "slow-decode", 3.0, "fail", "decodes five times slower: a regression"),
    Version("v4", "normal", 0.1, "inconclusive", "a trickle of traffic: too few requests to say"),
)
STABLE = VERSIONS[0]
LOAD_S = {False: 75.0, True: 50.0}  # seconds of load, by --short: each busy side passes canary's 100 requests


def run_canary_demo(headless: bool = False, short: bool = False, workdir: str | None = None) -> bool:
    """Play the canary story; True when each canary got the verdict it should. Ctrl-C stops it cleanly."""
    from inferwatch.sim._demo import prometheus_binary, until_interrupted

    binary = prometheus_binary("inferwatch demo --canary")
    return until_interrupted(lambda: _run(binary, headless, short, workdir, print))


def _run(binary: str, headless: bool, short: bool, workdir: str | None, say: Callable[[str], None]) -> bool:
    from inferwatch.sim._demo import _Processes, keep_serving, work_folder

    with ExitStack() as stack:
        folder = work_folder(stack, workdir, "inferwatch-demo-canary-")
        procs = _Processes(folder)
        stack.callback(procs.stop)
        prom, bases = _start(binary, folder, procs)
        say(f"inferwatch demo --canary: {MODEL} in four versions behind one exporter, Prometheus at {prom}")
        for version in VERSIONS:
            say(f"  {version.name} at {bases[version.name]}: {version.says}")
        seconds = LOAD_S[short]
        say(f"\n== {seconds:.0f} s of load on every version at once")
        asyncio.run(_load(bases, seconds))
        ok = _verdicts(prom, procs, say)
        if not headless:
            say(
                f"\nThe stack keeps running: try `inferwatch canary --prometheus {prom} --model {MODEL} "
                f"--canary 'version=\"v3\"' --stable 'version=\"v1\"' --window 5m` as the load ages out of the "
                "window. Press Ctrl-C to stop everything."
            )
            keep_serving(procs, say)
        return ok


def _start(binary, folder, procs) -> tuple[str, dict[str, str]]:
    """The four engines, one exporter labelling each engine's series with its version, and Prometheus."""
    from inferwatch.sim._demo import _wait_ready, free_port, start_prometheus

    me = [sys.executable, "-m", "inferwatch"]
    ports = {v.name: free_port() for v in VERSIONS}
    for seed, version in enumerate(VERSIONS, start=1):
        procs.start(
            f"vllm-{version.name}",
            [
                *me,
                "simulate",
                "--engine",
                "vllm",
                "--model",
                MODEL,
                "--listen",
                f"127.0.0.1:{ports[version.name]}",
                "--max-num-seqs",
                str(CAP),
                "--scenario",
                version.scenario,
                "--seed",
                str(seed),
            ],
            env={"HOSTNAME": f"vllm-{version.name}-0"},
        )
    exporter, prom_port = free_port(), free_port()
    targets = [a for v in VERSIONS for a in ("--target", f"{v.name}=http://127.0.0.1:{ports[v.name]}/metrics")]
    procs.start(
        "exporter",
        [*me, "exporter", "normalize", "--listen", f"127.0.0.1:{exporter}", "--target-label", "version", *targets],
    )
    config: dict[str, Any] = {
        "global": {"scrape_interval": "2s", "evaluation_interval": "2s"},
        "scrape_configs": [
            {
                "job_name": "inferwatch-exporter",
                "honor_labels": True,
                "static_configs": [{"targets": [f"127.0.0.1:{exporter}"]}],
            }
        ],
    }
    prom = start_prometheus(binary, folder, procs, config, prom_port)
    bases = {name: f"http://127.0.0.1:{port}" for name, port in ports.items()}
    _wait_ready(
        [f"{b}/health" for b in bases.values()] + [f"http://127.0.0.1:{exporter}/metrics", f"{prom}/-/ready"], procs
    )
    return prom, bases


async def _load(bases: dict[str, str], seconds: float) -> None:
    """Open-loop load on every version at once, the same prompts for each (canary checks the mix is alike)."""
    await asyncio.gather(
        *[
            run_load(LoadConfig(bases[v.name], rate=v.rate, duration=seconds, prompt_tokens=60, max_tokens=64, seed=i))
            for i, v in enumerate(VERSIONS)
        ]
    )


def _verdicts(prom: str, procs, say: Callable[[str], None]) -> bool:
    """`inferwatch canary` for each canary against v1, once Prometheus has scraped the end of the load."""
    from inferwatch.canary import Settings, compare, parse_selector, render_text
    from inferwatch.promapi import Client

    client = Client(prom)
    _until_scraped(client, procs)
    ok = True
    for version in VERSIONS[1:]:
        say(
            f"\n== inferwatch canary --prometheus {prom} --model {MODEL} --canary 'version=\"{version.name}\"' "
            f"--stable 'version=\"{STABLE.name}\"' --window {WINDOW}     ({version.says})"
        )
        report = compare(
            client,
            MODEL,
            canary=parse_selector(f'version="{version.name}"', "--canary"),
            stable=parse_selector(f'version="{STABLE.name}"', "--stable"),
            settings=Settings(window=WINDOW),
        )
        say(render_text(report))
        right = report.verdict == version.expect
        ok &= right
        say(f"  {'as expected' if right else 'UNEXPECTED'}: {report.verdict} (expected {version.expect})")
    return ok


def _until_scraped(client, procs, patience_s: float = 60.0) -> None:
    """Wait until each version's finished-request count has stopped moving: the load's last answers are stored."""
    last: dict[str, float] = {}
    deadline = time.monotonic() + patience_s
    while time.monotonic() < deadline:
        procs.check()
        now = {
            r["metric"].get("version", ""): float(r["value"][1])
            for r in client.query(f'sum by (version) (llm_requests_finished_total{{model="{MODEL}"}})')
        }
        if now and now == last and len(now) == len(VERSIONS):
            return
        last = now
        time.sleep(3)
