"""`inferwatch triage`: flags into a Connection and windows, then `triage()` and a report. Registered by
inferwatch/cli.py."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from inferwatch.clikit import Command
from inferwatch.promapi import ClientOptions
from inferwatch.promapi_flags import connection_flags

__all__ = ["register"]


def triage(
    prometheus: Annotated[
        str, typer.Option(metavar="URL", envvar="INFERWATCH_PROMETHEUS", help="Prometheus' base URL.")
    ] = "http://localhost:9090",
    since: Annotated[
        str | None, typer.Option(metavar="DURATION", help="The incident: this long before --end (default now) [30m].")
    ] = None,
    start: Annotated[
        str | None, typer.Option(metavar="TIME", help="The incident's start: RFC 3339 or Unix seconds.")
    ] = None,
    end: Annotated[str | None, typer.Option(metavar="TIME", help="The incident's end [now].")] = None,
    model: Annotated[
        list[str],
        typer.Option(
            metavar="NAME",
            help="A model to judge (repeatable), in every "
            "namespace and cluster that serves it, or one deployment as the "
            "report names it, 'llama-3-8b (namespace=a)'; names are "
            "case-sensitive [every model with series].",
        ),
    ] = [],
    baseline: Annotated[
        str,
        typer.Option(
            metavar="auto|1d|1h|START/END",
            help=(
                "What normal looked like: auto (the same window a day earlier if it has data, else the hour before), "
                "1d / 7d (the same window that much earlier), 1h / 30m (that long before the incident), or START/END."
            ),
        ),
    ] = "auto",
    as_json: Annotated[
        bool, typer.Option("--json", help="Print JSON (kinds sorted by confidence; empty when nothing is wrong).")
    ] = False,
    plot: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE.png", help="Also draw the signals, incident shaded and baseline faint, into this PNG."
        ),
    ] = None,
    rules: Annotated[
        list[Path], typer.Option(metavar="FILE", help="Kinds to add or replace (kinds.yaml's format; repeatable).")
    ] = [],
    alert: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            help="Judge the incident of this alert: "
            "from its last activation (less 5 minutes) to --end, for "
            "the models its labels name (read from ALERTS_FOR_STATE); "
            "instead of --since/--start.",
        ),
    ] = None,
    alert_match: Annotated[
        list[str],
        typer.Option(
            metavar="LABEL=VALUE", help="With --alert: pick the alert's instance by label (repeatable; =, !=, =~, !~)."
        ),
    ] = [],
    *,
    client: ClientOptions,
):
    """Name the kind of slow from Prometheus: each model's incident against a baseline, with evidence.

    Kinds: queueing, long-prompts, prefix-cache-loss, kv-pressure, slow-decode,
    spec-decode-collapse, thinking, long-outputs, gpu-not-computing, errors,
    not-the-engine, missing-data. Exit 0 with a verdict (nothing wrong
    included), 1 when Prometheus cannot be read or a model (or deployment)
    asked for has no series.

    \b
    Examples:
      inferwatch triage --prometheus http://prometheus:9090 --since 30m
      inferwatch triage --start 2026-11-30T10:00:00Z --end 2026-11-30T10:45:00Z --model llama-3-70b --baseline 1d
      inferwatch triage --since 1h --json | jq '.models[].kinds[0].kind'
      inferwatch triage --since 30m --plot incident.png --header 'Authorization: Bearer TOKEN'
      inferwatch triage --alert LLMErrorBudgetBurn --alert-match model=llama-3-8b
    """
    import json
    import sys
    import time

    from inferwatch._urls import http_url
    from inferwatch.triage._fetch import Connection
    from inferwatch.triage._report import render_rich, render_text, to_json
    from inferwatch.triage._triage import triage as run
    from inferwatch.triage._window import incident_window

    try:
        url = http_url(prometheus, "http://localhost:9090")
    except ValueError as err:
        raise typer.BadParameter(str(err), param_hint="--prometheus") from None
    conn = Connection(url, client)
    if alert is not None:
        from inferwatch.triage._alert import alert_incident
        from inferwatch.triage._fetch import connect
        from inferwatch.triage._window import parse_time

        if since is not None or start is not None:
            raise typer.BadParameter("give --alert or --since/--start, not both", param_hint="--alert")
        now = time.time()
        found = alert_incident(connect(conn), alert, alert_match, parse_time(end, "--end") if end else now)
        window, model = found.window, [*model, *found.models]
    else:
        window = incident_window(since, start, end, time.time())
    report = run(conn, window, baseline, tuple(dict.fromkeys(model)), tuple(rules))
    if plot is not None:
        from inferwatch.triage._plot import plot_report

        plot_report(report, plot)
        typer.echo(f"plot written to {plot}", err=True)
    if as_json:
        typer.echo(json.dumps(to_json(report), indent=2))
    elif sys.stdout.isatty():
        from rich.console import Console

        render_rich(report, Console())
    else:
        typer.echo(render_text(report), nl=False)


def register(app: typer.Typer) -> None:
    app.command(cls=Command)(connection_flags(triage))
