"""`inferwatch load`: an open-loop load generator that measures what users see.

Arrivals are Poisson at `rate` per second whatever the server does (a closed
loop would slow down with the server and hide queueing). Each request streams;
TTFT is the time to the first *visible* token (content or a tool call, not
hidden reasoning), time per output token is the mean gap between visible tokens
after the first, and end-to-end is the time to the last byte. Works against the
simulator and against a real vLLM or SGLang.

Every wait is bounded: a request gets `response_timeout` for its response
headers (engines send them at once, before queueing) and `timeout` in all, so
a server that accepts connections and never answers ends the run shortly after
`duration`, with every request counted as failed.
"""

from __future__ import annotations

import asyncio
import math
import random
import sys
import time
from dataclasses import asdict, dataclass, field

import aiohttp

from inferwatch.errors import InferwatchError
from inferwatch.frontdoor import Facts, classify, observe_stream, token_counts
from inferwatch.sim._engine import WORDS

__all__ = ["LoadConfig", "LoadReport", "Sample", "run_load", "resolve_model", "percentile", "format_report"]

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]


@dataclass(frozen=True)
class LoadConfig:
    target: str  # base URL, e.g. http://localhost:8000
    rate: float = 2.0  # requests per second (Poisson)
    duration: float = 30.0  # seconds of arrivals
    model: str | None = None  # default: the first of /v1/models
    prompt_tokens: int = 200  # mean prompt length, in words
    max_tokens: int = 512
    output_tokens: int | None = None  # if set, each max_tokens is drawn around this mean (fixed-length benchmarks)
    prefix_share: float = 0.3  # share of requests that start with the same long system prompt
    prefix_tokens: int = 256
    tool_share: float = 0.0  # share of requests offering a tool
    timeout: float = 120.0  # per request, in all
    response_timeout: float = 10.0  # per request, until the response headers arrive
    seed: int | None = None
    max_requests: int | None = None  # stop sending after this many, even before `duration` is over
    # at most this many requests in flight: an arrival waits for an answer first. A rate the engine cannot serve
    # then keeps a queue of the same length on a fast machine and a slow one, instead of one that grows without
    # bound (and an engine too busy to answer its /metrics)
    concurrency: int | None = None


@dataclass
class Sample:
    started: float = 0.0  # time.monotonic() when the request was sent
    ttft: float | None = None
    tpot: float | None = None
    e2e: float | None = None
    tokens: int = 0
    finish_reason: str | None = None
    error: str | None = None
    outcome: str | None = None  # as the front door would call it (frontdoor/_outcome.py)
    code: int = 0  # the HTTP status; 0: none came


@dataclass
class LoadReport:
    requests: int = 0
    ok: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    finish_reasons: dict[str, int] = field(default_factory=dict)
    ttft: dict[str, float] = field(default_factory=dict)
    tpot: dict[str, float] = field(default_factory=dict)
    e2e: dict[str, float] = field(default_factory=dict)
    output_tokens_per_s: float = 0.0
    duration_s: float = 0.0
    samples: list[Sample] = field(default_factory=list, repr=False)

    def as_dict(self) -> dict:
        out = asdict(self)
        out.pop("samples")
        return out


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    low, high = math.floor(pos), math.ceil(pos)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def _summary(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    return {
        "p50": percentile(values, 0.5),
        "p95": percentile(values, 0.95),
        "p99": percentile(values, 0.99),
        "mean": sum(values) / len(values),
    }


async def _model(session: aiohttp.ClientSession, config: LoadConfig) -> str:
    if config.model:
        return config.model
    try:
        async with session.get(
            f"{config.target}/v1/models", timeout=aiohttp.ClientTimeout(total=config.response_timeout)
        ) as resp:
            return (await resp.json(content_type=None))["data"][0]["id"]
    except (TimeoutError, aiohttp.ClientError, KeyError, IndexError, TypeError, ValueError) as err:
        reason = (
            f"no answer within {config.response_timeout:g}s"
            if isinstance(err, TimeoutError)
            else str(err) or type(err).__name__
        )
        raise InferwatchError(
            f"{config.target}/v1/models: cannot find a model to load ({reason}); "
            "is an OpenAI-compatible server up there? give --model to skip this"
        ) from None


async def resolve_model(config: LoadConfig) -> str:
    """`config.model`, or the first model the server lists."""
    async with aiohttp.ClientSession() as session:
        return await _model(session, config)


def _body(config: LoadConfig, model: str, rng: random.Random, prefix: str) -> dict:
    length = max(1, int(rng.lognormvariate(math.log(config.prompt_tokens), 0.5)))
    prompt = " ".join(rng.choice(WORDS) for _ in range(length))
    if rng.random() < config.prefix_share:
        prompt = prefix + " " + prompt
    max_tokens = config.max_tokens
    if config.output_tokens:
        max_tokens = min(max_tokens, max(1, int(rng.expovariate(1 / config.output_tokens)) + 1))
    body = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": max_tokens,
    }
    if rng.random() < config.tool_share:
        body["tools"] = TOOLS
    return body


async def _one(session: aiohttp.ClientSession, url: str, body: dict, config: LoadConfig) -> Sample:
    sample, start = Sample(started=time.monotonic()), time.monotonic()
    first = last = None
    try:
        try:
            async with asyncio.timeout(config.response_timeout):
                resp = await session.post(url, json=body, timeout=aiohttp.ClientTimeout(total=config.timeout))
        except TimeoutError:
            resp, sample.error = None, "no_response"
        if resp is not None:
            async with resp:
                first, last = await _read_stream(resp, sample, _offered(body))
    except TimeoutError:
        sample.error = "timeout"
    except (aiohttp.ClientError, ValueError) as err:
        sample.error = "connect" if isinstance(err, aiohttp.ClientConnectionError) else "protocol"
    if sample.outcome is None or sample.error in ("timeout", "connect", "protocol"):
        sample.outcome = ERROR_OUTCOMES.get(sample.error or "", "error")
    sample.e2e = time.monotonic() - start
    if first is not None:
        sample.ttft = first - start
        if sample.tokens > 1 and last is not None:
            sample.tpot = (last - first) / (sample.tokens - 1)
    return sample


async def _read_stream(
    resp: aiohttp.ClientResponse, sample: Sample, offered: dict | None
) -> tuple[float | None, float | None]:
    """Read an SSE answer into `sample`; returns when the first and the last visible token arrived. It is read
    with the front door's meter, so "visible" means here what it means there: content with something to see, a
    refusal or a tool call; not reasoning, nor the whitespace before the first of them."""
    sample.code = resp.status
    if resp.status != 200:
        sample.error = f"http_{resp.status}"
        sample.outcome = classify(resp.status, "complete", Facts(), True, offered)
        await resp.read()
        return None, None
    facts = Facts()
    await observe_stream(resp.content, facts, until_error=True)
    sample.outcome = classify(resp.status, "complete", facts, True, offered)
    if facts.error:
        sample.error = "stream_error" if facts.error == "an error object" else "protocol"
    sample.tokens = token_counts(facts)[3] or 0
    sample.finish_reason = next(iter(facts.finish.values()), sample.finish_reason)
    return facts.first_visible, facts.last_visible


def _offered(body: dict) -> dict | None:
    """The functions a request offered, as the front door's outcome reads them (name -> parameters schema)."""
    return {t["function"]["name"]: t["function"].get("parameters") for t in body.get("tools", ())} or None


# how a request the load generator gave up on ends, in the front door's outcomes: the front door calls a request
# whose upstream does not answer in time `timeout`, and one it cannot connect to or read `error`
ERROR_OUTCOMES = {"no_response": "timeout", "timeout": "timeout", "unfinished": "timeout"}


def _progress(started: float, config: LoadConfig, sent: int, samples: list[Sample]) -> None:
    elapsed = min(time.monotonic() - started, config.duration)
    width, done = 24, len(samples)
    filled = int(width * elapsed / config.duration) if config.duration else width
    errors = sum(1 for s in samples if s.error)
    sys.stderr.write(
        f"\r[{'#' * filled}{'.' * (width - filled)}] {elapsed:5.1f}/{config.duration:.0f}s "
        f"sent {sent} done {done} errors {errors} in flight {sent - done}   "
    )
    sys.stderr.flush()


def _collector(samples: list[Sample]):
    """A done-callback that files each request's sample; one cancelled at the end of the run is "unfinished"."""
    sent = time.monotonic()

    def collect(task: asyncio.Task) -> None:
        samples.append(
            Sample(started=sent, error="unfinished", outcome="timeout") if task.cancelled() else task.result()
        )

    return collect


async def run_load(config: LoadConfig, progress: bool = False, samples: list[Sample] | None = None) -> LoadReport:
    """Send Poisson arrivals for `duration` seconds, wait for every answer (each bounded), and summarize.

    `samples`, if given, receives each finished request as it completes (the demo reads it live).
    """
    rng = random.Random(config.seed)
    prefix = " ".join(rng.choice(WORDS) for _ in range(config.prefix_tokens))
    samples = [] if samples is None else samples
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        model = await _model(session, config)
        url = f"{config.target}/v1/chat/completions"
        started, next_at = time.monotonic(), 0.0
        tasks: list[asyncio.Task] = []
        last_shown = 0.0

        def full() -> bool:
            return config.concurrency is not None and sum(not t.done() for t in tasks) >= config.concurrency

        try:
            while True:
                next_at += rng.expovariate(config.rate) if config.rate > 0 else config.duration
                if next_at >= config.duration or len(tasks) == config.max_requests:
                    break
                while (
                    (wait := started + next_at - time.monotonic()) > 0 or full()
                ) and time.monotonic() - started < config.duration:
                    await asyncio.sleep(min(wait, 0.25) if wait > 0 else 0.05)
                    if progress and time.monotonic() - last_shown > 0.25:
                        _progress(started, config, len(tasks), samples)
                        last_shown = time.monotonic()
                if full():
                    break  # the duration ended while every slot was taken
                task = asyncio.ensure_future(_one(session, url, _body(config, model, rng, prefix), config))
                task.add_done_callback(_collector(samples))
                tasks.append(task)
            # each request is bounded by its own timeouts; this deadline guards the run as a whole
            deadline = started + config.duration + config.timeout + 1.0
            while (pending := [t for t in tasks if not t.done()]) and (left := deadline - time.monotonic()) > 0:
                await asyncio.wait(pending, timeout=min(0.25, left))
                if progress:
                    _progress(started, config, len(tasks), samples)
        finally:
            for task in tasks:
                task.cancel()  # what is left counts as "unfinished"
            await asyncio.gather(*tasks, return_exceptions=True)
        if progress:
            _progress(started, config, len(tasks), samples)
            sys.stderr.write("\n")
        elapsed = time.monotonic() - started
    return _report(samples, elapsed)


def _report(samples: list[Sample], elapsed: float) -> LoadReport:
    report = LoadReport(requests=len(samples), duration_s=elapsed, samples=samples)
    for s in samples:
        if s.error:
            report.errors[s.error] = report.errors.get(s.error, 0) + 1
        else:
            report.ok += 1
        if s.finish_reason:
            report.finish_reasons[s.finish_reason] = report.finish_reasons.get(s.finish_reason, 0) + 1
    ok = [s for s in samples if not s.error]
    report.ttft = _summary([s.ttft for s in ok if s.ttft is not None])
    report.tpot = _summary([s.tpot for s in ok if s.tpot is not None])
    report.e2e = _summary([s.e2e for s in ok if s.e2e is not None])
    report.output_tokens_per_s = sum(s.tokens for s in samples) / elapsed if elapsed else 0.0
    return report


def format_report(report: LoadReport) -> str:
    lines = [
        f"requests {report.requests}, ok {report.ok}, errors {sum(report.errors.values())}"
        + (f" ({', '.join(f'{k} {v}' for k, v in sorted(report.errors.items()))})" if report.errors else ""),
        "finish reasons: " + (", ".join(f"{k} {v}" for k, v in sorted(report.finish_reasons.items())) or "-"),
        f"{'':26}{'p50':>10}{'p95':>10}{'p99':>10}{'mean':>10}",
    ]
    for label, values in (
        ("time to first token (s)", report.ttft),
        ("time per output token (s)", report.tpot),
        ("end to end (s)", report.e2e),
    ):
        cells = "".join(f"{values[k]:10.3f}" if values else f"{'-':>10}" for k in ("p50", "p95", "p99", "mean"))
        lines.append(f"{label:26}{cells}")
    lines.append(f"visible output tokens per second: {report.output_tokens_per_s:.1f}")
    return "\n".join(lines) + "\n"
