"""The front door's configuration: its flags (FrontdoorOptions, frontdoor/_options.py) parsed at the edge into one
frozen FrontdoorConfig, with one-line errors."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from inferwatch._urls import openai_server_url
from inferwatch.frontdoor._options import (
    DEFAULT_MAX_BODY,
    parse_listen,
    parse_seconds,
    parse_size,
)
from inferwatch.frontdoor._paths import DEFAULT_ALLOWED

if TYPE_CHECKING:
    from inferwatch.frontdoor._goodput import Goodput
    from inferwatch.frontdoor._otel import OtlpConfig

__all__ = [
    "Upstream",
    "Limits",
    "FrontdoorConfig",
    "parse_upstreams",
    "parse_listen",
    "parse_size",
    "parse_seconds",
    "parse_base_url",
    "DEFAULT_MAX_BODY",
]


@dataclass(frozen=True)
class Upstream:
    """An engine's OpenAI-compatible server: `name` labels its series (HOST:PORT), `url` is its base URL."""

    name: str
    url: str


@dataclass(frozen=True)
class Limits:
    """What one front door allows its clients (flags of the same names)."""

    head_timeout: float = 10.0  # from a head's first byte to its end
    max_head: int = 32 * 1024  # bytes of one request head (request line and headers)
    keepalive_timeout: float = 75.0  # a connection with no request in progress, new or kept alive
    max_connections: int = 4096  # open client connections, all addresses together
    max_client_connections: int = 1024  # open client connections from one address
    max_pipelined: int = 16  # requests a client sends ahead on one connection before answers


@dataclass(frozen=True)
class FrontdoorConfig:
    default: Upstream | None = None  # where requests go that no route names
    routes: tuple[tuple[str, Upstream], ...] = ()  # (model, upstream), from --upstream MODEL=URL
    host: str = "0.0.0.0"
    port: int = 8080
    max_body: int = DEFAULT_MAX_BODY  # request bodies above this get 413, unsent
    connect_timeout: float = 10.0
    idle_timeout: float = 300.0  # between two reads of one response (headers included)
    caller_header: str | None = None  # trusted only when set: a gateway's caller name
    caller_salt: str = ""  # hashes API keys into caller names
    max_callers: int = 20  # distinct caller label values; the rest are `other`
    max_models: int = 50  # distinct model label values; the rest are `other`
    access_log: str | None = None  # a file, `-` for standard output, None for none
    metrics_host: str = "0.0.0.0"  # the admin listener: the front door's own /metrics
    metrics_port: int = 9403
    allow_paths: tuple[str, ...] = DEFAULT_ALLOWED  # what is forwarded besides the metered paths
    limits: Limits = Limits()  # on client connections and request heads
    callers_file: dict[str, str] | None = None  # API key -> caller, from --callers-file
    models: tuple[str, ...] = ()  # model label values besides the routes' (--model)
    models_refresh: float = 60.0  # how often each upstream's /v1/models is read; 0: never
    goodput: Goodput | None = None  # the objectives requests are judged by; None: embedded
    otlp: OtlpConfig | None = None  # OpenTelemetry GenAI metrics over OTLP/HTTP; None: off

    def upstream_for(self, model: str | None) -> Upstream | None:
        for name, upstream in self.routes:
            if name == model:
                return upstream
        return self.default

    @property
    def upstreams(self) -> tuple[Upstream, ...]:
        seen = ([self.default] if self.default else []) + [u for _, u in self.routes]
        return tuple(dict.fromkeys(seen))


def parse_base_url(text: str) -> str:
    """An engine's base URL from `http://host:port`, `http://host:port/v1` or `host:port`; ValueError if not."""
    return openai_server_url(text)


def parse_upstreams(texts: list[str]) -> tuple[Upstream | None, tuple[tuple[str, Upstream], ...]]:
    """`URL` (at most one: the default) and `MODEL=URL` (one per model) into (default, routes)."""
    default: Upstream | None = None
    routes: dict[str, Upstream] = {}
    for text in texts:
        model, sep, url = text.partition("=")
        if not sep or "://" in model:
            model, url = "", text
        try:
            base = parse_base_url(url)
        except ValueError:
            raise ValueError(
                f"{text!r} is not URL or MODEL=URL with an http(s) URL or HOST:PORT, "
                "e.g. http://127.0.0.1:8000 or llama-3-8b=vllm:8000"
            ) from None
        upstream = Upstream(urlsplit(base).netloc, base)
        if not model:
            if default is not None:
                raise ValueError(
                    f"{text!r}: only one upstream may be the default (URL without MODEL=); {default.url} already is"
                )
            default = upstream
        elif model in routes:
            raise ValueError(f"{text!r}: model {model!r} already goes to {routes[model].url}")
        else:
            routes[model] = upstream
    if default is None and not routes:
        raise ValueError("give at least one, e.g. --upstream http://127.0.0.1:8000")
    return default, tuple(routes.items())
