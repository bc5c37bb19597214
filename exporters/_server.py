"""The normalizing exporter: scrape targets when scraped, normalize, serve the union.

Each target is fetched concurrently with its own timeout. A target that is
down, hangs, answers an error or returns garbage is left out of that scrape
and shows up in the exporter's own series (`inferwatch_exporter_target_*`) and
log; the other targets are still served.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

import aiohttp
from aiohttp import web

from inferwatch import __version__
from inferwatch.errors import ExpositionError, ListenError
from inferwatch.exporters._config import ExporterConfig, Target
from inferwatch.exporters._exposition import Sample, format_header, format_sample, format_value
from inferwatch.exporters._normalize import Normalizer, NormalizeResult, OutFamily, add_label, render

__all__ = ["NormalizingExporter", "TargetState", "MAX_BODY_BYTES"]

log = logging.getLogger("inferwatch.exporter")

MAX_BODY_BYTES = 64 * 1024 * 1024
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_PREFIX = "inferwatch_exporter_"


@dataclass
class TargetState:
    """What the exporter knows about one target across scrapes."""

    target: Target
    up: bool = False
    duration: float = 0.0
    series_in: int = 0
    series_out: int = 0
    sources: tuple[str, ...] = ()
    errors: dict[str, int] = field(default_factory=dict)
    last_error: tuple[str, str, float] | None = None   # kind, message, unix time

    def fail(self, kind: str, message: str) -> None:
        if self.up or self.last_error is None or self.last_error[1] != message:
            log.warning("target %s (%s): %s: %s", self.target.name, self.target.url, kind, message)
        self.up = False
        self.errors[kind] = self.errors.get(kind, 0) + 1
        self.last_error = (kind, message[:300].replace("\n", " "), time.time())

    def succeed(self, result: NormalizeResult) -> None:
        if not self.up and self.last_error is not None:
            log.info("target %s is back", self.target.name)
        self.up = True
        self.series_in, self.series_out, self.sources = result.series_in, result.series_out, result.sources
        for warning in result.warnings:
            log.debug("target %s: %s", self.target.name, warning)


class NormalizingExporter:
    """Scrapes, normalizes and merges; `app()` serves it over HTTP."""

    def __init__(self, config: ExporterConfig, normalizer: Normalizer):
        self.config = config
        self.normalizer = normalizer
        self.states = [TargetState(t) for t in config.targets]
        self._session: aiohttp.ClientSession | None = None

    async def _fetch(self, state: TargetState) -> NormalizeResult | None:
        target = state.target
        start = time.perf_counter()
        try:
            timeout = aiohttp.ClientTimeout(total=self.config.timeout)
            async with self._session.get(target.url, timeout=timeout,
                                         headers={"Accept": "text/plain;version=0.0.4"}) as resp:
                if resp.status != 200:
                    state.fail("http", f"HTTP {resp.status} from {target.url}")
                    return None
                raw = await resp.content.read(MAX_BODY_BYTES + 1)
                if len(raw) > MAX_BODY_BYTES:
                    state.fail("too_large", f"response over {MAX_BODY_BYTES} bytes")
                    return None
            text = raw.decode("utf-8")
            result = self.normalizer.normalize(text, origin=target.url)
        except asyncio.TimeoutError:
            state.fail("timeout", f"no complete answer within {self.config.timeout:g}s")
        except aiohttp.ClientConnectorError as err:
            state.fail("connect", f"cannot connect: {err.os_error or err}")
        except aiohttp.ClientError as err:
            state.fail("connect", f"{type(err).__name__}: {err}")
        except UnicodeDecodeError as err:
            state.fail("parse", f"not UTF-8 text: {err.reason} at byte {err.start}")
        except ExpositionError as err:
            state.fail("parse", f"line {err.line}: {err.reason}")
        except Exception as err:  # noqa: BLE001 - one bad target must never take the exporter down
            log.exception("target %s: unexpected error", target.name)
            state.fail("internal", f"{type(err).__name__}: {err}")
        else:
            state.succeed(result)
            return result
        finally:
            state.duration = time.perf_counter() - start
        return None

    async def collect(self) -> str:
        """One scrape of every target, normalized, merged, with the exporter's own series."""
        if self._session is None:
            self._session = aiohttp.ClientSession(auto_decompress=True)
        start = time.perf_counter()
        results = await asyncio.gather(*(self._fetch(s) for s in self.states))
        merged: dict[str, OutFamily] = {}
        for state, result in zip(self.states, results):
            if result is not None:
                self._merge(merged, state.target, result)
        self._add_caps(merged)
        return render(merged.values()) + self._health(time.perf_counter() - start)

    def _merge(self, merged: dict[str, OutFamily], target: Target, result: NormalizeResult) -> None:
        label = self.config.target_label
        for name, fam in result.families.items():
            into = merged.get(name)
            if into is None:
                into = merged[name] = OutFamily(name, fam.header)
            for body, canonical in zip(fam.chunks, fam.canonical):
                if label:
                    body = add_label(body, canonical, label, target.name)
                into.add(body, canonical)

    def _add_caps(self, merged: dict[str, OutFamily]) -> None:
        if not self.config.max_running_requests:
            return
        name = "llm_max_running_requests"
        help_text = self.normalizer.catalog[name].help
        fam = merged.setdefault(name, OutFamily(name, format_header(name, "gauge", help_text)))
        for model, cap in self.config.max_running_requests:
            fam.add(format_sample(Sample(name, (("model", model),), format_value(cap))), False)

    def _health(self, total: float) -> str:
        lines: list[str] = []

        def family(name: str, mtype: str, help_text: str, samples: list[tuple[tuple, float]]) -> None:
            lines.append(format_header(_PREFIX + name, mtype, help_text))
            for labels, value in samples:
                lines.append(format_sample(Sample(_PREFIX + name, labels, format_value(value))))

        per = [(s, (("target", s.target.name),)) for s in self.states]
        family("target_up", "gauge", "1 if the last scrape of the target succeeded and parsed.",
               [(lab, float(s.up)) for s, lab in per])
        family("target_scrape_duration_seconds", "gauge", "Time the last scrape of the target took.",
               [(lab, s.duration) for s, lab in per])
        family("target_series_in", "gauge", "Samples read from the target in the last good scrape.",
               [(lab, s.series_in) for s, lab in per])
        family("target_series_out", "gauge", "Samples served for the target after normalizing, last good scrape.",
               [(lab, s.series_out) for s, lab in per])
        family("target_source_info", "gauge", "Sources (mappings) detected in the target's last good scrape.",
               [(lab + (("source", src),), 1.0) for s, lab in per for src in s.sources])
        family("target_scrape_errors_total", "counter", "Failed scrapes of the target by kind.",
               [(lab + (("kind", k),), n) for s, lab in per for k, n in sorted(s.errors.items())])
        family("target_last_error_timestamp_seconds", "gauge", "When the target last failed, with the error.",
               [(lab + (("kind", s.last_error[0]), ("message", s.last_error[1])), s.last_error[2])
                for s, lab in per if s.last_error])
        family("scrape_duration_seconds", "gauge", "Time this exporter took to answer its last scrape.",
               [((), total)])
        family("build_info", "gauge", "inferwatch version.", [((("version", __version__),), 1.0)])
        return "".join(lines)

    async def _handle_metrics(self, request: web.Request) -> web.Response:
        body = await self.collect()
        return web.Response(body=body.encode("utf-8"), headers={"Content-Type": CONTENT_TYPE})

    async def _handle_index(self, request: web.Request) -> web.Response:
        rows = "\n".join(f"  {s.target.name}: {s.target.url} ({'up' if s.up else 'down'})" for s in self.states)
        return web.Response(text=f"inferwatch normalizing exporter {__version__}\n/metrics\ntargets:\n{rows}\n")

    async def _handle_health(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _close(self, app: web.Application) -> None:
        if self._session is not None:
            await self._session.close()

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/metrics", self._handle_metrics)
        app.router.add_get("/healthz", self._handle_health)
        app.router.add_get("/", self._handle_index)
        app.on_cleanup.append(self._close)
        return app

    def run(self) -> None:
        host, port = self.config.host, self.config.port

        def started(_message: str) -> None:  # aiohttp calls it once the port is bound
            log.info("serving on http://%s:%d/metrics for %d target(s)", host, port, len(self.states))

        try:
            web.run_app(self.app(), host=host, port=port, print=started, access_log=None, handle_signals=True)
        except OSError as err:
            raise ListenError(host, port, err) from None
