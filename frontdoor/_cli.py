"""`inferwatch frontdoor`: flags into a FrontdoorConfig, then serve. Registered by inferwatch/cli.py."""

from __future__ import annotations

import os
from typing import Annotated, Any

import typer

from inferwatch.clikit import Command, check_log_level
from inferwatch.frontdoor._options import FrontdoorOptions, ProbeOptions
from inferwatch.options import flags_of

__all__ = ["register"]


def _parsed(parse, value, flag: str):
    try:
        return parse(value)
    except ValueError as err:
        raise typer.BadParameter(str(err), param_hint=flag) from None


@flags_of(FrontdoorOptions, after=("log_level",))
def frontdoor(
    log_level: Annotated[str, typer.Option(metavar="LEVEL", help="debug, info, warning or error.")] = "info",
    **flags: Any,
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

    from inferwatch.frontdoor._config import FrontdoorConfig, Limits, parse_upstreams
    from inferwatch.frontdoor._goodput import load_goodput
    from inferwatch.frontdoor._labels import load_keys
    from inferwatch.frontdoor._paths import DEFAULT_ALLOWED
    from inferwatch.options import from_flags

    level = check_log_level(log_level)
    given = from_flags(FrontdoorOptions, flags)
    default, routes = _parsed(parse_upstreams, list(given.upstream), "--upstream")
    if given.metrics_listen == given.listen and given.listen[1]:
        raise typer.BadParameter(
            f"{flags['metrics_listen']!r} is --listen's address; give the admin listener its own",
            param_hint="--metrics-listen",
        )
    limits = Limits(
        head_timeout=given.head_timeout,
        max_head=given.max_head,
        keepalive_timeout=given.keepalive_timeout,
        max_connections=given.max_connections,
        max_client_connections=given.max_client_connections,
        max_pipelined=given.max_pipelined,
    )
    if given.models_refresh < 0 or limits.head_timeout <= 0 or limits.keepalive_timeout <= 0:
        raise typer.BadParameter(
            "durations must be above 0", param_hint="--models-refresh, --head-timeout, --keepalive-timeout"
        )
    salt = given.caller_salt or os.environ.get("INFERWATCH_CALLER_SALT")
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    otlp = _otlp(given)
    if not salt:
        salt = secrets.token_hex(16)
        logging.getLogger("inferwatch.frontdoor").info(
            "no --caller-salt: callers hashed from API keys get new names at each start"
        )
    config = FrontdoorConfig(
        default=default,
        routes=routes,
        host=given.listen[0],
        port=given.listen[1],
        max_body=given.max_body,
        connect_timeout=given.connect_timeout,
        idle_timeout=given.idle_timeout,
        caller_header=given.caller_header,
        caller_salt=salt,
        max_callers=given.max_callers,
        max_models=given.max_models,
        access_log=given.access_log,
        metrics_host=given.metrics_listen[0],
        metrics_port=given.metrics_listen[1],
        allow_paths=tuple(dict.fromkeys(given.allow_path)) or DEFAULT_ALLOWED,
        limits=limits,
        callers_file=_parsed(load_keys, given.callers_file, "--callers-file") if given.callers_file else None,
        models=tuple(dict.fromkeys(m.strip() for m in given.model if m.strip())),
        models_refresh=given.models_refresh,
        goodput=load_goodput(given.goodput_spec) if given.goodput_spec else None,
        otlp=otlp,
    )
    from inferwatch.frontdoor._proxy import serve

    serve(config)


def _otlp(given: FrontdoorOptions):
    """The OTLP export's settings, or None: off unless --otlp-endpoint or an OTEL_EXPORTER_OTLP_*ENDPOINT is set.
    Without the [otel] extra the flag is an error; an endpoint from the environment alone only a warning."""
    import logging

    from inferwatch.errors import InferwatchError
    from inferwatch.frontdoor._otel import OtlpConfig, sdk_missing

    url = given.otlp_endpoint
    from_env = next(
        (
            v
            for v in ("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
            if os.environ.get(v, "").strip()
        ),
        None,
    )
    if url is None and from_env is None:
        given_flags = [
            f for f, v in (("--otlp-interval", given.otlp_interval), ("--otlp-resource", given.otlp_resource)) if v
        ]
        if given_flags:
            raise typer.BadParameter(
                "needs --otlp-endpoint (or $OTEL_EXPORTER_OTLP_ENDPOINT)", param_hint=given_flags[0]
            )
        return None
    if problem := sdk_missing():
        if url is not None:
            raise InferwatchError(f"--otlp-endpoint: {problem}")
        logging.getLogger("inferwatch.frontdoor").warning("$%s is set, but %s; serving without it", from_env, problem)
        return None
    return OtlpConfig(url, given.otlp_interval, given.otlp_resource, given.otlp_provider)


@flags_of(ProbeOptions, after=("log_level",))
def probe(
    log_level: Annotated[str, typer.Option(metavar="LEVEL", help="debug, info, warning or error.")] = "info",
    **flags: Any,
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

    from inferwatch.frontdoor._probe import ProbeConfig
    from inferwatch.options import from_flags

    level = check_log_level(log_level)
    given = from_flags(ProbeOptions, flags)
    url, every = given.target, flags["every"]
    host, port = given.listen
    config = ProbeConfig(
        url,
        tuple(dict.fromkeys(given.model)),
        every=given.every,
        timeout=given.timeout,
        max_tokens=given.max_tokens,
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
