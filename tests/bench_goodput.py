"""Benchmark: what judging goodput adds to the front door's work per finished request (not a timed assert).

    python tests/bench_goodput.py [--requests 200000] [--repeat 5]

Per finished request the front door counts it (`FrontdoorMetrics.record`: the request counter, up to four
histograms, three token counters) and, since goodput, first judges it against every objective of its SLO specs
(`Goodput.judge`). Timed here, best of --repeat, over the same requests (a mix of models, outcomes and times):
  baseline   record(..., good=None)                       what a finished request cost before goodput
  default    judge with the embedded slo/defaults-frontdoor.yaml, then record
  wide       judge with four times those objectives (as four specs of that size), then record
Prints microseconds per request and the ratio against the baseline measured in the same run. The figure to
read beside it is a request's own time: the whole proxying of one streamed request is milliseconds.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from inferwatch.frontdoor._goodput import default_goodput  # noqa: E402
from inferwatch.frontdoor._metrics import FrontdoorMetrics  # noqa: E402

OUTCOMES = ["ok"] * 8 + ["length", "error", "tool_call_invalid", "cancelled"]


def requests(n: int, seed: int = 1) -> list[tuple]:
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        labels = (rnd.choice(["llama-3-8b", "qwen3-8b", "other"]), "anonymous", "127.0.0.1:8000")
        outcome = rnd.choice(OUTCOMES)
        code = 200 if outcome != "error" else 500
        ttft = rnd.expovariate(3.0)
        times = {"duration": ttft + rnd.expovariate(0.5), "ttfc": ttft, "ttft": ttft, "tpot": rnd.expovariate(30)}
        out.append((labels, outcome, code, times, (200, 120, 0)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    reqs = requests(args.requests)
    default = default_goodput()
    wide = replace(default, objectives=default.objectives * 4)  # as four specs of the same size
    metrics = FrontdoorMetrics()

    def baseline() -> None:
        for labels, outcome, code, times, tokens in reqs:
            metrics.record(labels, outcome, code, times, tokens, None)

    def judged(goodput):
        def run() -> None:
            for labels, outcome, code, times, tokens in reqs:
                metrics.record(labels, outcome, code, times, tokens, goodput.judge(labels, outcome, code, times))

        return run

    runs = {"baseline": baseline, "default": judged(default), "wide": judged(wide)}
    baseline()  # once untimed: the first record of each label set creates its children
    took: dict[str, float] = {}
    for r in range(args.repeat):  # each repeat in a rotated order, so background load falls on each alike
        names = list(runs)[r % len(runs) :] + list(runs)[: r % len(runs)]
        for name in names:
            start = time.perf_counter()
            runs[name]()
            took[name] = min(took.get(name, float("inf")), time.perf_counter() - start)
    objectives = {"baseline": "-", "default": len(default.objectives), "wide": len(wide.objectives)}
    print(f"{args.requests} finished requests, best of {args.repeat}; load average {os.getloadavg()[0]:.1f}")
    print(f"{'':10} {'objectives':>10} {'us/request':>11} {'vs baseline':>12}")
    for name, seconds in took.items():
        ratio = seconds / took["baseline"]
        print(f"{name:10} {objectives[name]:>10} {seconds / args.requests * 1e6:11.2f} {ratio:11.2f}x")


if __name__ == "__main__":
    main()
