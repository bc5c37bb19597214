"""`inferwatch probe`: synthetic requests for models too quiet for an SLO, judged like real ones.

Every `every` seconds each model gets one short streamed chat request; its
outcome (the front door's rules, `classify`), time to first visible token and
duration are exported as `llm_probe_*`, labelled `model` and `target`. A probe
never hangs: `timeout` bounds the whole request, connect included.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

import aiohttp
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from inferwatch.frontdoor._meter import Facts, observe_stream
from inferwatch.frontdoor._metrics import bounds
from inferwatch.frontdoor._outcome import classify

__all__ = ["ProbeConfig", "ProbeResult", "probe_once", "Prober"]

log = logging.getLogger("inferwatch.probe")
PROMPT = "Reply with one word: ok."


@dataclass(frozen=True)
class ProbeConfig:
    target: str  # an OpenAI-compatible server's base URL (no /v1)
    models: tuple[str, ...]
    every: float = 30.0
    timeout: float = 30.0
    max_tokens: int = 128
    api_key: str | None = None
    host: str = "0.0.0.0"
    port: int = 9402


@dataclass(frozen=True)
class ProbeResult:
    outcome: str
    status: int | None
    ttft: float | None  # seconds to the first visible token
    duration: float


async def probe_once(session: aiohttp.ClientSession, config: ProbeConfig, model: str) -> ProbeResult:
    """One streamed request, judged; returns within `config.timeout` whatever the server does."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": PROMPT}],
        "stream": True,
        "max_tokens": config.max_tokens,
    }
    headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
    facts, status, ended, start = Facts(), None, "complete", time.monotonic()
    try:
        async with asyncio.timeout(config.timeout):
            async with session.post(config.target + "/v1/chat/completions", json=body, headers=headers) as resp:
                status = resp.status
                if status == 200 and resp.content_type != "text/event-stream":
                    facts.error = "not a stream"
                if status == 200:
                    await observe_stream(resp.content, facts)
    except TimeoutError:
        ended = "timeout"
    except aiohttp.ClientPayloadError:
        ended = "broken"
    except aiohttp.ClientError:
        ended = "unreachable" if status is None else "broken"
    ttft = None if facts.first_visible is None else facts.first_visible - start
    return ProbeResult(classify(status, ended, facts, True, None), status, ttft, time.monotonic() - start)


class Prober:
    """Probes every model on a schedule and serves the results on /metrics."""

    def __init__(self, config: ProbeConfig):
        self.config = config
        r = self.registry = CollectorRegistry()
        labels = ("model", "target")
        self.requests = Counter(
            "llm_probe_requests",
            "Probe requests by outcome (the front door's outcomes).",
            labels + ("outcome",),
            registry=r,
        )
        self.ttft = Histogram(
            "llm_probe_time_to_first_token_seconds",
            "Probe start to its first visible token.",
            labels,
            buckets=bounds("llm_probe_time_to_first_token_seconds"),
            registry=r,
        )
        self.duration = Histogram(
            "llm_probe_request_duration_seconds",
            "Probe start to its end.",
            labels,
            buckets=bounds("llm_probe_request_duration_seconds"),
            registry=r,
        )
        self.last = Gauge(
            "llm_probe_last_run_timestamp_seconds", "When each model was last probed.", labels, registry=r
        )
        self.target = config.target.split("://", 1)[-1]
        self.session: aiohttp.ClientSession | None = None

    def record(self, model: str, result: ProbeResult) -> None:
        labels = (model, self.target)
        self.requests.labels(*labels, result.outcome).inc()
        if result.ttft is not None:
            self.ttft.labels(*labels).observe(result.ttft)
        self.duration.labels(*labels).observe(result.duration)
        self.last.labels(*labels).set(time.time())
        log.info("probe %s: %s in %.3fs", model, result.outcome, result.duration)

    async def run_forever(self, session: aiohttp.ClientSession) -> None:
        while True:
            began = time.monotonic()
            results = await asyncio.gather(*(probe_once(session, self.config, m) for m in self.config.models))
            for model, result in zip(self.config.models, results, strict=True):
                self.record(model, result)
            await asyncio.sleep(max(0.0, self.config.every - (time.monotonic() - began)))

    async def metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(self.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/metrics", self.metrics)

        async def lifecycle(app):
            self.session = session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=None), cookie_jar=aiohttp.DummyCookieJar()
            )
            task = asyncio.get_running_loop().create_task(self.run_forever(session))
            yield
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await session.close()

        app.cleanup_ctx.append(lifecycle)
        return app
