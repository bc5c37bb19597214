"""The options models of `inferwatch frontdoor` and `inferwatch probe`: one field per flag, each with its help and
its parser, from which the flags, their checks and frontdoor/README.md's table are made (inferwatch/options.py).
Light to import: `inferwatch --help` builds the flags from it; the rest of the configuration (FrontdoorConfig) is
in _config.py."""

from __future__ import annotations

import re
from dataclasses import MISSING, dataclass

from inferwatch import durations
from inferwatch._urls import listen_address
from inferwatch.options import option

__all__ = [
    "FrontdoorOptions",
    "ProbeOptions",
    "parse_listen",
    "parse_size",
    "parse_seconds",
    "parse_refresh",
    "DEFAULT_MAX_BODY",
]

DEFAULT_MAX_BODY = 32 * 1024 * 1024
_SIZE = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*(|b|k|kb|kib|m|mb|mib|g|gb|gib)\Z", re.I)
_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "kib": 1024,
    "m": 10**6,
    "mb": 10**6,
    "mib": 1024**2,
    "g": 10**9,
    "gb": 10**9,
    "gib": 1024**3,
}


def parse_listen(text: str) -> tuple[str, int]:
    """`HOST:PORT`, `:PORT` or `[::1]:PORT`."""
    return listen_address(text, "0.0.0.0:8080")


def parse_size(text: str) -> int:
    """Bytes from `32MiB`, `100MB`, `1048576`."""
    match = _SIZE.match(str(text).strip())
    if not match or float(match.group(1)) * _UNITS[match.group(2).lower()] < 1:
        raise ValueError(f"{text!r} is not a size such as 32MiB, 100MB or 1048576")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


def parse_seconds(text: str) -> float:
    """Seconds from `10s`, `500ms`, `5m` or a bare number."""
    return float(durations.parse_duration(text, units="ms s m h"))


def parse_refresh(text: str) -> float:
    """--models-refresh: a duration, or 0 (the help's "never"), which parse_seconds refuses."""
    return 0.0 if str(text).strip() in ("0", "0s") else parse_seconds(text)


def _at_least(low: int):
    def check(value: int) -> int:
        if value < low:
            raise ValueError(f"{value}: must be {low} or more")
        return value

    return check


def _allowed(text: str) -> str:
    from inferwatch.frontdoor._paths import parse_allowed

    return parse_allowed([text])[0]


def _otlp_url(text: str) -> str | None:
    from inferwatch.frontdoor._otel import otlp_metrics_url

    return otlp_metrics_url(text) if text else None  # '': off


def _otlp_interval(text: str) -> float:
    seconds = parse_seconds(text)
    if seconds <= 0:
        raise ValueError(f"{text!r}: must be above 0")
    return seconds


def _resource(text: str) -> tuple[str, str]:
    from inferwatch.frontdoor._otel import parse_resource

    return parse_resource([text])[0]


def _provider(text: str) -> str:
    if not text.strip():
        raise ValueError("give the engine's name, e.g. vllm")
    return text.strip()


@dataclass(frozen=True)
class FrontdoorOptions:
    """`inferwatch frontdoor`'s flags, each checked by its own parser; the command (frontdoor/_cli.py) then checks
    them together (one default upstream, the two listeners apart, OTLP settings need an endpoint)."""

    upstream: tuple[str, ...] = option(
        (),
        "The engine's server, http://HOST:PORT (a /v1 suffix is fine) or HOST:PORT; repeat as MODEL=URL to route by "
        "the request's model (a bare URL takes the rest).",
        metavar="[MODEL=]URL",
        repeatable=True,
    )
    listen: tuple[str, int] = option(
        ("0.0.0.0", 8080), "Where to serve.", metavar="HOST:PORT", parse=parse_listen, shown="0.0.0.0:8080"
    )
    max_body: int = option(
        DEFAULT_MAX_BODY,
        "Larger request bodies get 413 and never reach the engine.",
        metavar="SIZE",
        parse=parse_size,
        shown="32MiB",
    )
    connect_timeout: float = option(
        10.0, "To connect to the upstream.", metavar="DURATION", parse=parse_seconds, shown="10s"
    )
    idle_timeout: float = option(
        300.0,
        "Longest silence of the upstream: before its headers, and between two chunks (a whole stream has no limit).",
        metavar="DURATION",
        parse=parse_seconds,
        shown="5m",
    )
    caller_header: str | None = option(
        None,
        "Take the caller from this header, set by a trusted gateway (ignored unless given).",
        metavar="HEADER",
        parse=lambda text: text or None,
    )
    caller_salt: str | None = option(
        None,
        "Salt for caller names hashed from API keys [$INFERWATCH_CALLER_SALT, else random per start].",
        metavar="TEXT",
    )
    max_callers: int = option(
        20,
        "Callers known by a gateway's header or an accepted key, first come; the rest count as other.",
        metavar="N",
        kind=int,
        parse=_at_least(0),
    )
    max_models: int = option(
        50,
        "Models known (routed, --model, then listed by the upstreams); the rest count as other.",
        metavar="N",
        kind=int,
        parse=_at_least(0),
    )
    callers_file: str | None = option(
        None,
        "YAML of CALLER: KEY (or a list of keys): those callers by name, other keys as other. Without it, a key is a "
        "caller once an upstream answered it 2xx.",
        metavar="FILE",
    )
    model: tuple[str, ...] = option(
        (),
        "A model label value besides those the upstreams list and the routes name (repeatable).",
        metavar="NAME",
        repeatable=True,
    )
    models_refresh: float = option(
        60.0,
        "How often the upstreams' /v1/models are read: only their models, routed ones and --model are label values, "
        "others count as other; 0: never [key: $INFERWATCH_UPSTREAM_API_KEY].",
        metavar="DURATION",
        parse=parse_refresh,
        shown="60s",
    )
    access_log: str | None = option(
        None, "One JSON line per request (no content), to FILE or - for standard output.", metavar="FILE"
    )
    metrics_listen: tuple[str, int] = option(
        ("0.0.0.0", 9403),
        "The admin listener, where /metrics is served (never on --listen).",
        metavar="HOST:PORT",
        parse=parse_listen,
        shown="0.0.0.0:9403",
    )
    allow_path: tuple[str, ...] = option(
        (),
        "A path forwarded besides the metered ones, /PATH or /PREFIX/* (repeatable); others get 404 "
        "[default: /v1/*, /health, /version].",
        metavar="PATH",
        repeatable=True,
        parse=_allowed,
    )
    head_timeout: float = option(
        10.0,
        "From a request head's first byte to its end; then the connection is closed.",
        metavar="DURATION",
        parse=parse_seconds,
        shown="10s",
    )
    max_head: int = option(
        32 * 1024,
        "Bytes of one request head (request line and headers); more closes the connection.",
        metavar="SIZE",
        parse=parse_size,
        shown="32KiB",
    )
    keepalive_timeout: float = option(
        75.0,
        "A client connection with no request in progress (new or kept alive) is closed after this.",
        metavar="DURATION",
        parse=parse_seconds,
        shown="75s",
    )
    max_connections: int = option(
        4096, "Open client connections; more get 503 and are closed.", metavar="N", kind=int, parse=_at_least(1)
    )
    max_client_connections: int = option(
        1024,
        "Open client connections from one address; more get 503 and are closed.",
        metavar="N",
        kind=int,
        parse=_at_least(1),
    )
    max_pipelined: int = option(
        16,
        "Requests a client may send ahead on one connection while one is answered (HTTP/1.1 pipelining); more "
        "closes the connection.",
        metavar="N",
        kind=int,
        parse=_at_least(1),
    )
    goodput_spec: tuple[str, ...] = option(
        (),
        "An SLO spec (source: frontdoor) each request is judged by for goodput (repeatable); default: the embedded "
        "slo/defaults-frontdoor.yaml.",
        metavar="FILE",
        repeatable=True,
    )
    otlp_endpoint: str | None = option(
        None,
        "Also push OpenTelemetry GenAI metrics over OTLP/HTTP to this collector, http://HOST:4318 (/v1/metrics is "
        "added to a URL without a path) [$OTEL_EXPORTER_OTLP_METRICS_ENDPOINT, $OTEL_EXPORTER_OTLP_ENDPOINT; other "
        "OTEL_EXPORTER_OTLP_* honoured]. Needs pip install 'inferwatch[otel]'.",
        metavar="URL",
        parse=_otlp_url,
    )
    otlp_interval: float | None = option(
        None,
        "Between two OTLP exports [default: $OTEL_METRIC_EXPORT_INTERVAL, else 60s].",
        metavar="DURATION",
        parse=_otlp_interval,
    )
    otlp_resource: tuple[tuple[str, str], ...] = option(
        (),
        "A resource attribute of the OTLP metrics (repeatable), over $OTEL_RESOURCE_ATTRIBUTES; service.name "
        "defaults to $OTEL_SERVICE_NAME, else inferwatch-frontdoor.",
        metavar="KEY=VALUE",
        repeatable=True,
        parse=_resource,
    )
    otlp_provider: str = option(
        "vllm",
        "gen_ai.provider.name of the OTLP metrics: the engine behind the front door (vllm, sglang, ...).",
        metavar="NAME",
        parse=_provider,
    )


def _probe_target(text: str) -> str:
    from inferwatch._urls import openai_server_url

    try:
        return openai_server_url(text)
    except ValueError:
        raise ValueError(f"{text!r} is not an http(s) URL or HOST:PORT, e.g. http://127.0.0.1:8000") from None


def _model_name(text: str) -> str:
    if not text.strip():
        raise ValueError("give each model by name, e.g. --model llama-3-8b")
    return text


@dataclass(frozen=True)
class ProbeOptions:
    """`inferwatch probe`'s flags, each checked by its own parser."""

    target: str = option(
        MISSING,
        help="An OpenAI-compatible server (or a front door): http://HOST:PORT, its /v1 URL, or HOST:PORT.",
        metavar="URL",
        parse=_probe_target,
    )
    model: tuple[str, ...] = option(
        MISSING, help="A model to probe (repeatable).", metavar="NAME", repeatable=True, parse=_model_name
    )
    every: float = option(30.0, "How often to probe each model.", metavar="DURATION", parse=parse_seconds, shown="30s")
    timeout: float = option(
        30.0, "Bound on one probe, connect included.", metavar="DURATION", parse=parse_seconds, shown="30s"
    )
    max_tokens: int = option(128, "max_tokens of each probe.", metavar="N", kind=int, parse=_at_least(1))
    listen: tuple[str, int] = option(
        ("0.0.0.0", 9402), "Where to serve /metrics.", metavar="HOST:PORT", parse=parse_listen, shown="0.0.0.0:9402"
    )
