"""The front door's measurements as OpenTelemetry GenAI metrics, pushed over OTLP/HTTP (`--otlp-endpoint`).

Optional: the OpenTelemetry SDK and exporter come with `pip install 'inferwatch[otel]'`; without them the flag
is one clear error and nothing else changes. The same requests, with the same bounded model and caller values,
are recorded into these instruments from `FrontdoorMetrics.record`, the place the Prometheus series are
recorded: one call per finished request, never per chunk. The SDK's reader collects and exports in its own
thread.

Conventions followed: the GenAI metrics of OpenTelemetry semantic conventions v1.41.1
(open-telemetry/semantic-conventions, docs/gen-ai/gen-ai-metrics.md and model/gen-ai/metrics.yaml), the last
release that holds them (v1.42.0 moved them to open-telemetry/semantic-conventions-genai, unreleased so far,
where `gen_ai.client.token.usage` is being replaced by token counters whose names are still changing). Their
status is Development: names, attributes and buckets may change in a later release.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from inferwatch._urls import http_url
from inferwatch.errors import InferwatchError
from inferwatch.frontdoor._outcome import OUTCOMES

__all__ = [
    "SEMCONV_VERSION",
    "SCHEMA_URL",
    "INSTRUMENTS",
    "ERROR_TYPES",
    "OtlpConfig",
    "OtelView",
    "otlp_metrics_url",
    "parse_resource",
    "sdk_missing",
]

log = logging.getLogger("inferwatch.frontdoor")

SEMCONV_VERSION = "1.41.1"
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
EXTRA = "pip install 'inferwatch[otel]'"
DEFAULT_SERVICE_NAME = "inferwatch-frontdoor"


@dataclass(frozen=True)
class Instrument:
    """One GenAI histogram and what it measures (a key of `times`, or `tokens`); which requests each one
    counts, as the spec says, is `OtelView.record`'s."""

    name: str
    unit: str
    description: str
    bounds: tuple[float, ...]  # the spec's ExplicitBucketBoundaries, given to the SDK as the advisory
    measures: str


_SECONDS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
INSTRUMENTS = (
    Instrument(
        "gen_ai.server.request.duration",
        "s",
        "Generative AI server request duration such as time-to-last byte or last output token.",
        _SECONDS,
        "duration",
    ),
    Instrument(
        "gen_ai.server.time_to_first_token",
        "s",
        "Time to generate first token for successful responses.",
        (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0),
        "ttft",
    ),
    Instrument(
        "gen_ai.server.time_per_output_token",
        "s",
        "Time per output token generated after the first token for successful responses.",
        (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5),
        "tpot",
    ),
    Instrument(
        "gen_ai.client.token.usage",
        "{token}",
        "Number of input and output tokens used.",
        (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864),
        "tokens",
    ),
)
# gen_ai.operation.name is the metered path's (METERED_PATHS in _proxy.py: chat, text_completion).
# error.type is the outcome of a request that failed: every outcome but ok and length (a finished answer stopped
# at max_tokens), which are the spec's successful responses and carry none
ERROR_TYPES = {outcome: outcome for outcome in OUTCOMES if outcome not in ("ok", "length")}


@dataclass(frozen=True)
class OtlpConfig:
    """Where and how the GenAI metrics go; None fields defer to the SDK's OTEL_* environment variables."""

    endpoint: str | None  # the full metrics URL; None: OTEL_EXPORTER_OTLP_[METRICS_]ENDPOINT
    interval: float | None = None  # seconds between exports; None: OTEL_METRIC_EXPORT_INTERVAL or 60 s
    resource: tuple[tuple[str, str], ...] = ()  # --otlp-resource KEY=VALUE, over OTEL_RESOURCE_ATTRIBUTES
    provider: str = "vllm"  # gen_ai.provider.name


def otlp_metrics_url(text: str) -> str:
    """The OTLP/HTTP metrics URL from a collector's base URL (`/v1/metrics` added, as for
    OTEL_EXPORTER_OTLP_ENDPOINT), a full URL with a path (as given), or HOST:PORT."""
    url = http_url(text.strip(), "http://otel-collector:4318")
    parts = urlsplit(url)
    if parts.query or parts.fragment:
        raise ValueError(
            f"{text!r}: give the collector's URL without a query or fragment, e.g. http://otel-collector:4318"
        )
    if parts.path in ("", "/"):
        parts = parts._replace(path="/v1/metrics")
    return urlunsplit(parts)


def parse_resource(texts: list[str]) -> tuple[tuple[str, str], ...]:
    """KEY=VALUE pairs (`service.name=chat-door`); ValueError names the one that is not."""
    pairs = []
    for text in texts:
        key, sep, value = text.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{text!r} is not KEY=VALUE, e.g. service.name=chat-frontdoor")
        pairs.append((key.strip(), value.strip()))
    return tuple(pairs)


def sdk_missing() -> str | None:
    """None when the OpenTelemetry SDK and its OTLP/HTTP exporter import; else the one line that says how."""
    try:
        import opentelemetry.exporter.otlp.proto.http.metric_exporter  # noqa: F401
        import opentelemetry.sdk.metrics  # noqa: F401
    except ImportError as err:
        return (
            f"OTLP export needs the OpenTelemetry SDK and its OTLP/HTTP exporter ({err.name} is not installed): {EXTRA}"
        )
    return None


def _resource(config: OtlpConfig):
    """OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES as the SDK reads them, --otlp-resource over them, and
    service.name inferwatch-frontdoor where none of them names one."""
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource

    attributes = dict(config.resource)
    named = (
        SERVICE_NAME in attributes
        or os.environ.get("OTEL_SERVICE_NAME")
        or any(
            part.partition("=")[0].strip() == SERVICE_NAME
            for part in os.environ.get("OTEL_RESOURCE_ATTRIBUTES", "").split(",")
        )
    )
    if not named:
        attributes[SERVICE_NAME] = DEFAULT_SERVICE_NAME
    return Resource.create(attributes)


class OtelView:
    """The GenAI instruments of one front door. `record` is called once per metered request; `shutdown` exports
    what is left. `reader` replaces the OTLP exporter (tests, benchmarks)."""

    def __init__(self, config: OtlpConfig, reader=None):
        if problem := sdk_missing():
            raise InferwatchError(problem)
        from opentelemetry.sdk.metrics import AlwaysOffExemplarFilter, MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        from inferwatch import __version__

        if reader is None:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

            interval = None if config.interval is None else config.interval * 1000
            exporter = OTLPMetricExporter(endpoint=config.endpoint)
            reader = PeriodicExportingMetricReader(exporter, export_interval_millis=interval)
            log.info(
                "OpenTelemetry GenAI metrics (semantic conventions %s) to %s every %s s",
                SEMCONV_VERSION,
                getattr(exporter, "_endpoint", config.endpoint),  # the URL the SDK resolved, where known
                getattr(reader, "_export_interval_millis", 60000) / 1000,
            )
        # no exemplars: there is no span to point at, and the filter would run on every record
        self.provider = MeterProvider(
            metric_readers=[reader], resource=_resource(config), exemplar_filter=AlwaysOffExemplarFilter()
        )
        meter = self.provider.get_meter("inferwatch.frontdoor", __version__, schema_url=SCHEMA_URL)
        self.config = config
        self._instruments = {
            i.measures: meter.create_histogram(
                i.name, unit=i.unit, description=i.description, explicit_bucket_boundaries_advisory=i.bounds
            )
            for i in INSTRUMENTS
        }
        self._attributes: dict[tuple, tuple[dict, dict, dict, dict]] = {}
        # the context only feeds exemplars, which are off: one empty context spares a contextvar read per record
        from opentelemetry.context import Context

        self._context = Context()

    def _attributes_of(self, operation: str, labels: tuple[str, str, str], error: str | None):
        """(common, with error.type, input tokens, output tokens) attribute sets, made once per label values
        (bounded: the same model and caller values as the Prometheus series)."""
        key = (operation, labels, error)
        found = self._attributes.get(key)
        if found is None:
            common = {
                "gen_ai.operation.name": operation,
                "gen_ai.provider.name": self.config.provider,
                "gen_ai.request.model": labels[0],
                "inferwatch.caller": labels[1],
            }
            found = self._attributes[key] = (
                common,
                {**common, "error.type": error} if error else common,
                {**common, "gen_ai.token.type": "input"},
                {**common, "gen_ai.token.type": "output"},
            )
        return found

    def record(self, labels: tuple[str, str, str], operation: str, outcome: str, times: dict, tokens) -> None:
        """One finished request: its duration (error.type when it failed), TTFT and time per output token when
        it succeeded and they were measured, and its prompt and output tokens where known."""
        error = ERROR_TYPES.get(outcome)
        common, failed, given, made = self._attributes_of(operation, labels, error)
        histograms, context = self._instruments, self._context
        histograms["duration"].record(times["duration"], failed, context)
        if error is None:
            for name in ("ttft", "tpot"):
                if (value := times.get(name)) is not None:
                    histograms[name].record(value, common, context)
        prompt, output = tokens[0], tokens[1]
        if prompt is not None:
            histograms["tokens"].record(prompt, given, context)
        if output is not None:
            histograms["tokens"].record(output, made, context)

    def shutdown(self) -> None:
        """Export what was recorded since the last export, then stop (blocks up to the exporter's timeout)."""
        self.provider.shutdown()
