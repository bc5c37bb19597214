"""`inferwatch canary`: a canary's signals against the stable version's, from Prometheus. Registered by
inferwatch/cli.py."""

from __future__ import annotations

from typing import Annotated

import typer

from inferwatch.clikit import Command
from inferwatch.promapi import ClientOptions
from inferwatch.promapi_flags import connection_flags

__all__ = ["register"]


def canary(
    model: Annotated[str, typer.Option(metavar="NAME", help="The model both versions serve.")],
    canary_selector: Annotated[
        str,
        typer.Option(
            "--canary",
            metavar="SELECTOR",
            help=("Label matchers of the canary's series, e.g. 'version=\"v2\"' or 'pod=~\"llama-7d9f.*\"'."),
        ),
    ],
    stable_selector: Annotated[
        str, typer.Option("--stable", metavar="SELECTOR", help=("Label matchers of the stable version's series."))
    ],
    prometheus: Annotated[
        str, typer.Option(metavar="URL", envvar="INFERWATCH_PROMETHEUS", help="Prometheus' base URL.")
    ] = "http://localhost:9090",
    window: Annotated[str, typer.Option(metavar="DURATION", help="Compare over this window.")] = "30m",
    at: Annotated[
        str | None, typer.Option(metavar="TIME", help="The window's end: RFC 3339 or Unix seconds [now].")
    ] = None,
    source: Annotated[
        str,
        typer.Option(
            metavar="engine|frontdoor",
            help=(
                "Whose series: the engines' (selectors on pod, version...) or the front door's (selectors on "
                "upstream), which adds tool-call failures and goodput."
            ),
        ),
    ] = "engine",
    min_requests: Annotated[
        int, typer.Option(metavar="N", min=1, help="Requests each side needs per signal; fewer is inconclusive.")
    ] = 100,
    alpha: Annotated[
        float, typer.Option(metavar="P", min=1e-9, max=0.5, help="Significance level of the one-sided tests.")
    ] = 0.01,
    latency_tolerance: Annotated[
        float,
        typer.Option(metavar="SHARE", min=0.0, help="A canary mean this much above the stable one fails (0.1: 10 %)."),
    ] = 0.10,
    share_tolerance: Annotated[
        float,
        typer.Option(
            metavar="SHARE",
            min=0.0,
            help="An error, truncation or "
            "tool-call share this much above the stable one, "
            "relatively, fails (0.5: 1.5x).",
        ),
    ] = 0.5,
    mix_tolerance: Annotated[
        float,
        typer.Option(
            metavar="SHARE",
            min=0.0,
            help="Prompt length or prefix-cache hits this far apart make latency inconclusive.",
        ),
    ] = 0.25,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    *,
    client: ClientOptions,
):
    """Is the canary worse than the stable version? A gate for CI and rollouts.

    Compares time to first token, time per output token, error and truncation
    shares (and at the front door tool-call failures and goodput): the ratio of
    each against the stable version, a one-sided test on bucket or event counts,
    and a check that both saw a comparable traffic mix (prompt length, prefix-cache
    hits). Exit 0 pass, 1 fail, 3 inconclusive (too little traffic or a different
    mix), 2 when the command or Prometheus cannot be used.

    \b
    Examples:
      inferwatch canary --model llama-3-8b --canary 'version="v2"' --stable 'version="v1"'
      inferwatch canary --model llama-3-8b --canary 'rollouts_pod_template_hash="7d9f"' \\
          --stable 'rollouts_pod_template_hash="5c4b"' --window 1h --json
    """
    import json

    from inferwatch._urls import http_url
    from inferwatch.canary import Settings, compare, parse_selector, render_text, to_json
    from inferwatch.durations import parse_duration
    from inferwatch.promapi import ApiError, Client
    from inferwatch.triage import parse_time

    if source not in ("engine", "frontdoor"):
        raise typer.BadParameter(f"{source!r}: use engine or frontdoor", param_hint="--source")
    try:
        parse_duration(window)
    except ValueError as err:
        raise typer.BadParameter(str(err), param_hint="--window") from None
    try:
        url = http_url(prometheus, "http://localhost:9090")
    except ValueError as err:
        raise typer.BadParameter(str(err), param_hint="--prometheus") from None
    end = parse_time(at, "--at") if at else None
    prom = Client(url, client)
    settings = Settings(
        window=window,
        alpha=alpha,
        min_requests=min_requests,
        latency_tolerance=latency_tolerance,
        share_tolerance=share_tolerance,
        mix_tolerance=mix_tolerance,
    )
    try:
        report = compare(
            prom,
            model,
            parse_selector(canary_selector, "--canary"),
            parse_selector(stable_selector, "--stable"),
            source,
            settings,
            end,
        )
    except ApiError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    typer.echo(json.dumps(to_json(report), indent=2) if as_json else render_text(report), nl=as_json)
    raise typer.Exit(report.exit_code)


def register(app: typer.Typer) -> None:
    app.command(cls=Command)(connection_flags(canary))
