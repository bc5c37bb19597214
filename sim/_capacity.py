"""`inferwatch capacity sweep`: how many requests a second a deployment serves within its SLO.

The sweep offers open-loop Poisson load (`run_load`) in steps of one rate each, and judges every request as the
front door's goodput does (`Goodput.judge`: answered, and within every latency objective of the SLO specs). A step
passes when the share of good requests is at or above the target.

1. Ramp: from `start_rate`, multiply by `growth` after each passing step until one fails (or divide until one
   passes, when the first fails), within `max_rate`.
2. Refine: repeat the two rates around the knee until each was measured `repeats` times, then bisect: take the
   widest gap between a passing (or unsure) rate and a failing (or unsure) one, repeat its ends until measured
   `repeats` times, then probe its middle; until the interval is narrower than `precision` of its upper end, or
   `max_steps` were run. A step that sent no request (a low rate, a
   short step) says nothing; one whose requests were all cancelled or refused as the caller's mistake (4xx) ends
   the sweep.

Every step is bounded: at most `step_duration` seconds of arrivals and `step_requests` requests, each answered or
given up after the load's `timeout`; the sweep at most `max_steps` steps. Steps run one after the other and each
waits for its answers, so one step's queue does not spill into the next. What the steps say is computed by
_capacity_stats. An overloaded server's queue grows for the length of a step: a step must be long enough for
that to break the TTFT objective (TTFT threshold / (1 - target) seconds at least; the default 60 s suits 1 s
and 90 %), or short steps read an overload as capacity.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field, replace
from itertools import pairwise

from inferwatch.frontdoor import Goodput
from inferwatch.sim._capacity_stats import RateStats, estimate, rate_stats
from inferwatch.sim._load import LoadConfig, Sample, percentile, run_load

__all__ = ["SweepConfig", "Step", "judge_step", "measure", "next_rate", "sweep", "format_step"]


@dataclass(frozen=True)
class SweepConfig:
    load: LoadConfig  # target, model, request shape; rate, duration and max_requests are per step
    target: float = 0.9  # share of good requests a step needs (DistServe's SLO attainment)
    start_rate: float = 1.0
    growth: float = 2.0
    max_rate: float = 1000.0
    step_duration: float = 60.0  # seconds of arrivals per step
    step_requests: int = 2000  # most requests a step sends
    repeats: int = 3  # steps per rate near the knee
    precision: float = 0.1  # stop when the interval is narrower than this share of its upper end
    max_steps: int = 20


@dataclass
class Step:
    """One step: its rate and what its requests measured (times in seconds)."""

    rate: float
    phase: str  # ramp or refine
    sent: int = 0
    judged: int = 0
    good: int = 0
    share: float | None = None  # good / judged
    goodput_rps: float = 0.0  # good requests a second of arrivals
    ttft_p50: float | None = None
    ttft_p95: float | None = None
    tpot_p50: float | None = None
    tpot_p95: float | None = None
    e2e_mean: float | None = None  # answered requests, send to last byte
    outcomes: dict[str, int] = field(default_factory=dict)
    duration_s: float = 0.0

    def as_dict(self) -> dict:
        return asdict(self)


def _quantile(values: list[float], q: float) -> float | None:
    return None if not values else percentile(values, q)


def judge_step(
    rate: float, phase: str, samples: list[Sample], seconds: float, goodput: Goodput, model: str, arrivals_s: float
) -> Step:
    """A step's measurements, each request judged by the SLO's objectives as the front door judges it."""
    step = Step(rate, phase, sent=len(samples), duration_s=seconds)
    for s in samples:
        outcome = s.outcome or "error"
        step.outcomes[outcome] = step.outcomes.get(outcome, 0) + 1
        times = {k: v for k, v in (("ttft", s.ttft), ("tpot", s.tpot), ("duration", s.e2e)) if v is not None}
        verdict = goodput.judge((model, "", ""), outcome, s.code, times)
        if verdict is not None:
            step.judged += 1
            step.good += verdict
    step.share = step.good / step.judged if step.judged else None
    step.goodput_rps = step.good / arrivals_s if arrivals_s else 0.0
    answered = [s for s in samples if not s.error]
    ttft = [s.ttft for s in answered if s.ttft is not None]
    tpot = [s.tpot for s in answered if s.tpot is not None]
    step.ttft_p50, step.ttft_p95 = _quantile(ttft, 0.5), _quantile(ttft, 0.95)
    step.tpot_p50, step.tpot_p95 = _quantile(tpot, 0.5), _quantile(tpot, 0.95)
    e2e = [s.e2e for s in answered if s.e2e is not None]
    step.e2e_mean = sum(e2e) / len(e2e) if e2e else None
    return step


def _stats(steps: list[Step], target: float) -> list[RateStats]:
    return rate_stats([(s.rate, s.judged, s.good) for s in steps], target)


def _ramp_rate(steps: list[Step], config: SweepConfig) -> float | None:
    """The ramp's next rate, or None once it has a passing and a failing rate (or hit a limit)."""
    if not steps:
        return config.start_rate
    passed = [s.rate for s in steps if s.share is not None and s.share >= config.target]
    failed = [s.rate for s in steps if s.share is not None and s.share < config.target]
    if passed and failed:
        return None
    last = steps[-1].rate
    rate = last * config.growth if not failed else last / config.growth
    return rate if rate <= config.max_rate and rate >= config.start_rate / 1e3 else None


def next_rate(steps: list[Step], config: SweepConfig) -> tuple[float, str] | None:
    """The rate of the next step and its phase, or None when the sweep is done."""
    if len(steps) >= config.max_steps or (steps and steps[-1].sent and not steps[-1].judged):
        return None  # every request cancelled or the caller's mistake (4xx): no use
    if all(s.phase == "ramp" for s in steps):
        rate = _ramp_rate(steps, config)
        if rate is not None:
            return rate, "ramp"
        if not any(s.share is not None and s.share >= config.target for s in steps) or not any(
            s.share is not None and s.share < config.target for s in steps
        ):
            return None  # a limit ended the ramp on one side of the knee
    stats = _stats(steps, config.target)
    counts = {s.rate: s.steps for s in stats}
    est = estimate(stats, config.target)
    # the rates next to the knee first: from the knee outwards, repeat each until one passes (below the knee) and
    # one fails (above it)
    below = sorted((s for s in stats if s.share >= config.target), key=lambda s: -s.rate)
    above = [s for s in stats if s.share < config.target]
    for side, settled in ((below, "pass"), (above, "fail")):
        for s in side:
            if s.verdict == settled:
                break
            if s.steps < config.repeats:
                return s.rate, "refine"
    low = est.lower if est.lower is not None else 0.0
    if est.upper is None:
        rate = max(counts) * config.growth
        return (rate, "refine") if rate <= config.max_rate else None
    if est.upper - low <= config.precision * est.upper:
        return None
    unsure = sorted(r for r in counts if low < r < est.upper)
    points = [low] + unsure + [est.upper]
    gaps = [(b - a, a, b) for a, b in pairwise(points)]
    width, a, b = max(gaps)
    if width <= config.precision * est.upper:
        return None
    for rate in (b, a):  # an end of the widest gap measured too few times: repeat it
        if rate in counts and counts[rate] < config.repeats:
            return rate, "refine"
    return _round((a + b) / 2), "refine"


def _round(rate: float) -> float:
    """Three significant digits: rates people can read and repeat."""
    return float(f"{rate:.3g}") if rate > 0 else rate


async def measure(config: SweepConfig, goodput: Goodput, model: str, rate: float, phase: str, index: int) -> Step:
    """One step: open-loop load at `rate` for the step's time or requests, every request judged."""
    load = replace(
        config.load,
        rate=rate,
        duration=config.step_duration,
        max_requests=config.step_requests,
        model=model,
        seed=None if config.load.seed is None else config.load.seed + index,
    )
    report = await run_load(load)
    arrivals = min(config.step_duration, config.step_requests / rate)
    return judge_step(rate, phase, report.samples, report.duration_s, goodput, model, arrivals)


async def sweep(
    config: SweepConfig,
    goodput: Goodput,
    steps: list[Step],
    model: str,
    on_step: Callable[[Step], None] | None = None,
    run_step: Callable[[float, str, int], Awaitable[Step]] | None = None,
) -> list[Step]:
    """Run steps until `next_rate` says done. `steps` receives each finished step as it completes, so a caller
    interrupted mid-step (Ctrl-C) still holds the ones before. `run_step(rate, phase, index)` measures a step
    (default: `measure`, real load against `config.load.target`)."""
    while (nxt := next_rate(steps, config)) is not None:
        rate, phase = nxt
        step = await (
            run_step(rate, phase, len(steps)) if run_step else measure(config, goodput, model, rate, phase, len(steps))
        )
        steps.append(step)
        if on_step:
            on_step(step)
    return steps


def format_step(step: Step, target: float) -> str:
    share = "-" if step.share is None else f"{step.share:.1%}"
    verdict = "pass" if step.share is not None and step.share >= target else "fail"
    ms = lambda v: "-" if v is None or math.isnan(v) else f"{v * 1000:.0f}ms"  # noqa: E731
    return (
        f"{step.phase:6} {step.rate:8.3g} req/s  good {share:>6} of {step.judged:<5} {verdict}  "
        f"ttft p50 {ms(step.ttft_p50)} p95 {ms(step.ttft_p95)}  tpot p50 {ms(step.tpot_p50)} "
        f"p95 {ms(step.tpot_p95)}  {step.duration_s:.0f}s"
    )
