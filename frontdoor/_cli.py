"""`inferwatch frontdoor`: flags into a FrontdoorConfig, then serve. Registered by inferwatch/cli.py."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from inferwatch.clikit import Command, check_log_level

__all__ = ["register"]


def _parsed(parse, value, flag: str):
    try:
        return parse(value)
    except ValueError as err:
        raise typer.BadParameter(str(err), param_hint=flag) from None


def frontdoor(
    upstream: Annotated[
        list[str],
        typer.Option(
            metavar="[MODEL=]URL",
            help=(
                "The engine's server, http://HOST:PORT (a /v1 suffix is fine) or HOST:PORT; repeat as MODEL=URL to "
                "route by the request's model (a bare URL takes the rest)."
            ),
        ),
    ] = [],
    listen: Annotated[str, typer.Option(metavar="HOST:PORT", help="Where to serve.")] = "0.0.0.0:8080",
    max_body: Annotated[
        str, typer.Option(metavar="SIZE", help="Larger request bodies get 413 and never reach the engine.")
    ] = "32MiB",
    connect_timeout: Annotated[str, typer.Option(metavar="DURATION", help="To connect to the upstream.")] = "10s",
    idle_timeout: Annotated[
        str,
        typer.Option(
            metavar="DURATION",
            help=(
                "Longest silence of the upstream: before its headers, and between two chunks (a whole stream has no "
                "limit)."
            ),
        ),
    ] = "5m",
    caller_header: Annotated[
        str | None,
        typer.Option(
            metavar="HEADER",
            help=("Take the caller from this header, set by a trusted gateway (ignored unless given)."),
        ),
    ] = None,
    caller_salt: Annotated[
        str | None,
        typer.Option(
            metavar="TEXT",
            help=("Salt for caller names hashed from API keys [$INFERWATCH_CALLER_SALT, else random per start]."),
        ),
    ] = None,
    max_callers: Annotated[
        int,
        typer.Option(
            metavar="N",
            help="Callers known by a gateway's header or an accepted key, first come; the rest count as other.",
        ),
    ] = 20,
    max_models: Annotated[
        int,
        typer.Option(
            metavar="N", help="Models known (routed, --model, then listed by the upstreams); the rest count as other."
        ),
    ] = 50,
    callers_file: Annotated[
        str | None,
        typer.Option(
            metavar="FILE",
            help=(
                "YAML of CALLER: KEY (or a list of keys): those callers by name, other keys as other. Without it, a "
                "key is a caller once an upstream answered it 2xx."
            ),
        ),
    ] = None,
    model: Annotated[
        list[str],
        typer.Option(
            metavar="NAME",
            help=("A model label value besides those the upstreams list and the routes name (repeatable)."),
        ),
    ] = [],
    models_refresh: Annotated[
        str,
        typer.Option(
            metavar="DURATION",
            help=(
                "How often the upstreams' /v1/models are read: only their models, routed ones and --model are label "
                "values, others count as other; 0: never [key: $INFERWATCH_UPSTREAM_API_KEY]."
            ),
        ),
    ] = "60s",
    access_log: Annotated[
        str | None,
        typer.Option(
            metavar="FILE", help=("One JSON line per request (no content), to FILE or - for standard output.")
        ),
    ] = None,
    metrics_listen: Annotated[
        str,
        typer.Option(metavar="HOST:PORT", help=("The admin listener, where /metrics is served (never on --listen).")),
    ] = "0.0.0.0:9403",
    allow_path: Annotated[
        list[str],
        typer.Option(
            metavar="PATH",
            help=(
                "A path forwarded besides the metered ones, /PATH or /PREFIX/* (repeatable); others get 404 "
                "[default: /v1/*, /health, /version]."
            ),
        ),
    ] = [],
    head_timeout: Annotated[
        str,
        typer.Option(
            metavar="DURATION", help=("From a request head's first byte to its end; then the connection is closed.")
        ),
    ] = "10s",
    max_head: Annotated[
        str,
        typer.Option(
            metavar="SIZE", help=("Bytes of one request head (request line and headers); more closes the connection.")
        ),
    ] = "32KiB",
    keepalive_timeout: Annotated[
        str,
        typer.Option(
            metavar="DURATION",
            help=("A client connection with no request in progress (new or kept alive) is closed after this."),
        ),
    ] = "75s",
    max_connections: Annotated[
        int, typer.Option(metavar="N", help=("Open client connections; more get 503 and are closed."))
    ] = 4096,
    max_client_connections: Annotated[
        int, typer.Option(metavar="N", help=("Open client connections from one address; more get 503 and are closed."))
    ] = 1024,
    max_pipelined: Annotated[
        int,
        typer.Option(
            metavar="N",
            help=(
                "Requests a client may send ahead on one connection while one is answered (HTTP/1.1 pipelining); "
                "more closes the connection."
            ),
        ),
    ] = 16,
    goodput_spec: Annotated[
        list[str],
        typer.Option(
            metavar="FILE",
            help=(
                "An SLO spec (source: frontdoor) each request is judged by for goodput (repeatable); default: the "
                "embedded slo/defaults-frontdoor.yaml."
            ),
        ),
    ] = [],
    otlp_endpoint: Annotated[
        str | None,
        typer.Option(
            metavar="URL",
            help=(
                "Also push OpenTelemetry GenAI metrics over OTLP/HTTP to this collector, http://HOST:4318 "
                "(/v1/metrics is added to a URL without a path) [$OTEL_EXPORTER_OTLP_METRICS_ENDPOINT, "
                "$OTEL_EXPORTER_OTLP_ENDPOINT; other OTEL_EXPORTER_OTLP_* honoured]. Needs pip install "
                "'inferwatch[otel]'."
            ),
        ),
    ] = None,
    otlp_interval: Annotated[
        str | None,
        typer.Option(
            metavar="DURATION", help=("Between two OTLP exports [default: $OTEL_METRIC_EXPORT_INTERVAL, else 60s].")
        ),
    ] = None,
    otlp_resource: Annotated[
        list[str],
        typer.Option(
            metavar="KEY=VALUE",
            help=(
                "A resource attribute of the OTLP metrics (repeatable), over $OTEL_RESOURCE_ATTRIBUTES; service.name "
                "defaults to $OTEL_SERVICE_NAME, else inferwatch-frontdoor."
            ),
        ),
    ] = [],
    otlp_provider: Annotated[
        str,
        typer.Option(
            metavar="NAME",
            help=("gen_ai.provider.name of the OTLP metrics: the engine behind the front door (vllm, sglang, ...)."),
        ),
    ] = "vllm",
    log_level: Annotated[str, typer.Option(metavar="LEVEL", help="debug, info, warning or error.")] = "info",
):
    """Proxy an OpenAI-compatible engine and meter what users feel, on its own /metrics.

    Streams pass through byte for byte as they arrive. Each chat or completion
    request is counted once by outcome (ok, error, rate_limited, timeout,
    cancelled, truncated, length, empty, tool_call_invalid, content_filter,
    invalid_request), with time to first visible token and first chunk, time per
    output token, duration and tokens, labelled model, caller and upstream. A
    client that leaves cancels the engine's request. Prompts and outputs are never
    logged or stored.

    \b
    Examples:
      inferwatch frontdoor --upstream http://127.0.0.1:8000 --listen 0.0.0.0:8080
      inferwatch frontdoor --upstream llama-3-8b=vllm:8000 --upstream qwen3-8b=sglang:30000 \\
          --caller-header X-Team --access-log -
    """
    import logging
    import secrets

    from inferwatch.frontdoor._config import (
        FrontdoorConfig,
        Limits,
        parse_listen,
        parse_seconds,
        parse_size,
        parse_upstreams,
    )
    from inferwatch.frontdoor._goodput import load_goodput
    from inferwatch.frontdoor._labels import load_keys
    from inferwatch.frontdoor._paths import DEFAULT_ALLOWED, parse_allowed

    level = check_log_level(log_level)
    default, routes = _parsed(parse_upstreams, upstream, "--upstream")
    host, port = _parsed(parse_listen, listen, "--listen")
    metrics_host, metrics_port = _parsed(parse_listen, metrics_listen, "--metrics-listen")
    if (metrics_host, metrics_port) == (host, port) and port:
        raise typer.BadParameter(
            f"{metrics_listen!r} is --listen's address; give the admin listener its own", param_hint="--metrics-listen"
        )
    for flag, value in (("--max-callers", max_callers), ("--max-models", max_models)):
        if value < 0:
            raise typer.BadParameter(f"{value}: must be 0 or more", param_hint=flag)
    for flag, value in (
        ("--max-connections", max_connections),
        ("--max-client-connections", max_client_connections),
        ("--max-pipelined", max_pipelined),
    ):
        if value < 1:
            raise typer.BadParameter(f"{value}: must be 1 or more", param_hint=flag)
    limits = Limits(
        head_timeout=_parsed(parse_seconds, head_timeout, "--head-timeout"),
        max_head=_parsed(parse_size, max_head, "--max-head"),
        keepalive_timeout=_parsed(parse_seconds, keepalive_timeout, "--keepalive-timeout"),
        max_connections=max_connections,
        max_client_connections=max_client_connections,
        max_pipelined=max_pipelined,
    )
    # `0` (the help's "never") is no duration for parse_seconds, which refuses a zero
    refresh = (
        0.0 if models_refresh.strip() in ("0", "0s") else _parsed(parse_seconds, models_refresh, "--models-refresh")
    )
    if refresh < 0 or limits.head_timeout <= 0 or limits.keepalive_timeout <= 0:
        raise typer.BadParameter(
            "durations must be above 0", param_hint="--models-refresh, --head-timeout, --keepalive-timeout"
        )
    salt = caller_salt or os.environ.get("INFERWATCH_CALLER_SALT")
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    otlp = _otlp(otlp_endpoint, otlp_interval, otlp_resource, otlp_provider)
    if not salt:
        salt = secrets.token_hex(16)
        logging.getLogger("inferwatch.frontdoor").info(
            "no --caller-salt: callers hashed from API keys get new names at each start"
        )
    config = FrontdoorConfig(
        default=default,
        routes=routes,
        host=host,
        port=port,
        max_body=_parsed(parse_size, max_body, "--max-body"),
        connect_timeout=_parsed(parse_seconds, connect_timeout, "--connect-timeout"),
        idle_timeout=_parsed(parse_seconds, idle_timeout, "--idle-timeout"),
        caller_header=caller_header or None,
        caller_salt=salt,
        max_callers=max_callers,
        max_models=max_models,
        access_log=access_log,
        metrics_host=metrics_host,
        metrics_port=metrics_port,
        allow_paths=_parsed(parse_allowed, allow_path, "--allow-path") if allow_path else DEFAULT_ALLOWED,
        limits=limits,
        callers_file=_parsed(load_keys, callers_file, "--callers-file") if callers_file else None,
        models=tuple(dict.fromkeys(m.strip() for m in model if m.strip())),
        models_refresh=refresh,
        goodput=load_goodput(goodput_spec) if goodput_spec else None,
        otlp=otlp,
    )
    from inferwatch.frontdoor._proxy import serve

    serve(config)


def _otlp(endpoint: str | None, interval: str | None, resource: list[str], provider: str):
    """The OTLP export's settings, or None: off unless --otlp-endpoint or an OTEL_EXPORTER_OTLP_*ENDPOINT is set.
    Without the [otel] extra the flag is an error; an endpoint from the environment alone only a warning."""
    import logging

    from inferwatch.errors import InferwatchError
    from inferwatch.frontdoor._config import parse_seconds
    from inferwatch.frontdoor._otel import OtlpConfig, otlp_metrics_url, parse_resource, sdk_missing

    url = _parsed(otlp_metrics_url, endpoint, "--otlp-endpoint") if endpoint else None
    from_env = next(
        (
            v
            for v in ("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
            if os.environ.get(v, "").strip()
        ),
        None,
    )
    if url is None and from_env is None:
        given = [f for f, v in (("--otlp-interval", interval), ("--otlp-resource", resource)) if v]
        if given:
            raise typer.BadParameter("needs --otlp-endpoint (or $OTEL_EXPORTER_OTLP_ENDPOINT)", param_hint=given[0])
        return None
    seconds = _parsed(parse_seconds, interval, "--otlp-interval") if interval else None
    if seconds is not None and seconds <= 0:
        raise typer.BadParameter(f"{interval!r}: must be above 0", param_hint="--otlp-interval")
    pairs = _parsed(parse_resource, resource, "--otlp-resource")
    if not provider.strip():
        raise typer.BadParameter("give the engine's name, e.g. vllm", param_hint="--otlp-provider")
    if problem := sdk_missing():
        if url is not None:
            raise InferwatchError(f"--otlp-endpoint: {problem}")
        logging.getLogger("inferwatch.frontdoor").warning("$%s is set, but %s; serving without it", from_env, problem)
        return None
    return OtlpConfig(url, seconds, pairs, provider.strip())


def probe(
    target: Annotated[
        str,
        typer.Option(
            metavar="URL",
            help=("An OpenAI-compatible server (or a front door): http://HOST:PORT, its /v1 URL, or HOST:PORT."),
        ),
    ],
    model: Annotated[list[str], typer.Option(metavar="NAME", help="A model to probe (repeatable).")],
    every: Annotated[str, typer.Option(metavar="DURATION", help="How often to probe each model.")] = "30s",
    timeout: Annotated[str, typer.Option(metavar="DURATION", help="Bound on one probe, connect included.")] = "30s",
    max_tokens: Annotated[int, typer.Option(metavar="N", help="max_tokens of each probe.")] = 128,
    listen: Annotated[str, typer.Option(metavar="HOST:PORT", help="Where to serve /metrics.")] = "0.0.0.0:9402",
    log_level: Annotated[str, typer.Option(metavar="LEVEL", help="debug, info, warning or error.")] = "info",
):
    """Send a short streamed request to each model on a schedule; export llm_probe_* on /metrics.

    For models too quiet for an SLO on real traffic: each probe is judged by the
    front door's outcome rules and counted in llm_probe_requests_total{outcome},
    with llm_probe_time_to_first_token_seconds and llm_probe_request_duration_seconds,
    labelled model and target. The API key, if any, comes from
    $INFERWATCH_PROBE_API_KEY.

    \b
    Examples:
      inferwatch probe --target http://vllm:8000 --model llama-3-8b --every 30s
      inferwatch probe --target localhost:8080 --model a --model b --timeout 10s --listen 0.0.0.0:9402
    """
    import logging

    from inferwatch.frontdoor._config import parse_base_url, parse_listen, parse_seconds
    from inferwatch.frontdoor._probe import ProbeConfig

    level = check_log_level(log_level)
    try:
        url = parse_base_url(target)
    except ValueError:
        raise typer.BadParameter(
            f"{target!r} is not an http(s) URL or HOST:PORT, e.g. http://127.0.0.1:8000", param_hint="--target"
        ) from None
    if not model or any(not m.strip() for m in model):
        raise typer.BadParameter("give each model by name, e.g. --model llama-3-8b", param_hint="--model")
    if max_tokens < 1:
        raise typer.BadParameter(f"{max_tokens}: must be 1 or more", param_hint="--max-tokens")
    host, port = _parsed(parse_listen, listen, "--listen")
    config = ProbeConfig(
        url,
        tuple(dict.fromkeys(model)),
        every=_parsed(parse_seconds, every, "--every"),
        timeout=_parsed(parse_seconds, timeout, "--timeout"),
        max_tokens=max_tokens,
        api_key=os.environ.get("INFERWATCH_PROBE_API_KEY") or None,
        host=host,
        port=port,
    )
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from inferwatch.frontdoor._probe import Prober
    from inferwatch.frontdoor._serve import serve_app

    serve_app(
        Prober(config).app(),
        host,
        port,
        "probing "
        + ", ".join(config.models).replace("%", "%%")
        + f" at {url} every {every}".replace("%", "%%")
        + ", /metrics on %s:%d",
    )


def register(app: typer.Typer) -> None:
    for command in (frontdoor, probe):
        app.command(cls=Command)(command)
