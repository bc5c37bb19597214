"""`inferwatch frontdoor`: flags into a FrontdoorConfig, then serve. Registered by inferwatch/cli.py."""

from __future__ import annotations

import os
from typing import Annotated, Optional

import typer

__all__ = ["register"]


def _parsed(parse, value, flag: str):
    try:
        return parse(value)
    except ValueError as err:
        raise typer.BadParameter(str(err), param_hint=flag) from None


def frontdoor(
        upstream: Annotated[list[str], typer.Option(metavar="[MODEL=]URL", help=(
            "The engine's server, http://HOST:PORT (a /v1 suffix is fine) or HOST:PORT; repeat as MODEL=URL to "
            "route by the request's model (a bare URL takes the rest).")
        )] = [],
        listen: Annotated[str, typer.Option(metavar="HOST:PORT", help="Where to serve.")] = "0.0.0.0:8080",
        max_body: Annotated[str, typer.Option(metavar="SIZE", help="Larger request bodies get 413 and never "
                                                                   "reach the engine.")] = "32MiB",
        connect_timeout: Annotated[str, typer.Option(metavar="DURATION", help="To connect to the upstream.")]
        = "10s",
        idle_timeout: Annotated[str, typer.Option(metavar="DURATION", help=(
            "Longest silence of the upstream: before its headers, and between two chunks (a whole stream has no "
            "limit)."))] = "5m",
        caller_header: Annotated[Optional[str], typer.Option(metavar="HEADER", help=(
            "Take the caller from this header, set by a trusted gateway (ignored unless given).")
        )] = None,
        caller_salt: Annotated[Optional[str], typer.Option(metavar="TEXT", help=(
            "Salt for caller names hashed from API keys [$INFERWATCH_CALLER_SALT, else random per start].")
        )] = None,
        max_callers: Annotated[int, typer.Option(metavar="N", help="Distinct caller label values; later ones "
                                                                   "count as other.")] = 20,
        max_models: Annotated[int, typer.Option(metavar="N", help="Distinct model label values; later ones "
                                                                  "count as other.")] = 50,
        access_log: Annotated[Optional[str], typer.Option(metavar="FILE", help=(
            "One JSON line per request (no content), to FILE or - for standard output."))] = None,
        log_level: Annotated[str, typer.Option(metavar="LEVEL", help="debug, info, warning or error.")] = "info"):
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

    from inferwatch.frontdoor._config import (FrontdoorConfig, parse_listen, parse_seconds, parse_size,
                                              parse_upstreams)

    if log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        raise typer.BadParameter(f"{log_level!r}: use debug, info, warning or error", param_hint="--log-level")
    default, routes = _parsed(parse_upstreams, upstream, "--upstream")
    host, port = _parsed(parse_listen, listen, "--listen")
    for flag, value in (("--max-callers", max_callers), ("--max-models", max_models)):
        if value < 0:
            raise typer.BadParameter(f"{value}: must be 0 or more", param_hint=flag)
    salt = caller_salt or os.environ.get("INFERWATCH_CALLER_SALT")
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not salt:
        salt = secrets.token_hex(16)
        logging.getLogger("inferwatch.frontdoor").info(
            "no --caller-salt: callers hashed from API keys get new names at each start")
    config = FrontdoorConfig(
        default=default, routes=routes, host=host, port=port, max_body=_parsed(parse_size, max_body, "--max-body"),
        connect_timeout=_parsed(parse_seconds, connect_timeout, "--connect-timeout"),
        idle_timeout=_parsed(parse_seconds, idle_timeout, "--idle-timeout"), caller_header=caller_header or None,
        caller_salt=salt, max_callers=max_callers, max_models=max_models, access_log=access_log)
    from inferwatch.frontdoor._proxy import serve

    serve(config)


def probe(
        target: Annotated[str, typer.Option(metavar="URL", help=(
            "An OpenAI-compatible server (or a front door): http://HOST:PORT, its /v1 URL, or HOST:PORT."))],
        model: Annotated[list[str], typer.Option(metavar="NAME", help="A model to probe (repeatable).")],
        every: Annotated[str, typer.Option(metavar="DURATION", help="How often to probe each model.")] = "30s",
        timeout: Annotated[str, typer.Option(metavar="DURATION", help="Bound on one probe, connect included.")]
        = "30s",
        max_tokens: Annotated[int, typer.Option(metavar="N", help="max_tokens of each probe.")] = 128,
        listen: Annotated[str, typer.Option(metavar="HOST:PORT", help="Where to serve /metrics.")] = "0.0.0.0:9402",
        log_level: Annotated[str, typer.Option(metavar="LEVEL", help="debug, info, warning or error.")] = "info"):
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

    if log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        raise typer.BadParameter(f"{log_level!r}: use debug, info, warning or error", param_hint="--log-level")
    try:
        url = parse_base_url(target)
    except ValueError:
        raise typer.BadParameter(f"{target!r} is not an http(s) URL or HOST:PORT, e.g. http://127.0.0.1:8000",
                                 param_hint="--target") from None
    if not model or any(not m.strip() for m in model):
        raise typer.BadParameter("give each model by name, e.g. --model llama-3-8b", param_hint="--model")
    if max_tokens < 1:
        raise typer.BadParameter(f"{max_tokens}: must be 1 or more", param_hint="--max-tokens")
    host, port = _parsed(parse_listen, listen, "--listen")
    config = ProbeConfig(url, tuple(dict.fromkeys(model)), every=_parsed(parse_seconds, every, "--every"),
                         timeout=_parsed(parse_seconds, timeout, "--timeout"), max_tokens=max_tokens,
                         api_key=os.environ.get("INFERWATCH_PROBE_API_KEY") or None, host=host, port=port)
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from inferwatch.frontdoor._probe import Prober
    from inferwatch.frontdoor._serve import serve_app

    serve_app(Prober(config).app(), host, port,
              "probing " + ", ".join(config.models).replace("%", "%%") + f" at {url} every {every}".replace(
                  "%", "%%") + ", /metrics on %s:%d")


def register(app: typer.Typer) -> None:
    app.command()(frontdoor)
    app.command()(probe)
