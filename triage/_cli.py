"""`inferwatch triage`: flags into a Connection and windows, then `triage()` and a report. Registered by
inferwatch/cli.py."""

from __future__ import annotations

from typing import Any

import typer

from inferwatch.clikit import Command
from inferwatch.options import flags_of
from inferwatch.promapi import ClientOptions
from inferwatch.promapi_flags import connection_flags
from inferwatch.triage._options import TriageOptions

__all__ = ["register"]


@flags_of(TriageOptions, after=("client",))
def triage(
    *,
    client: ClientOptions,
    **flags: Any,
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

    from inferwatch.options import from_flags
    from inferwatch.triage._fetch import Connection
    from inferwatch.triage._report import render_rich, render_text, to_json
    from inferwatch.triage._triage import triage as run
    from inferwatch.triage._window import incident_window

    given = from_flags(TriageOptions, flags)
    since, start, end, model = given.since, given.start, given.end, list(given.model)
    conn = Connection(given.prometheus, client)
    if given.alert is not None:
        from inferwatch.triage._alert import alert_incident
        from inferwatch.triage._fetch import connect
        from inferwatch.triage._window import parse_time

        if since is not None or start is not None:
            raise typer.BadParameter("give --alert or --since/--start, not both", param_hint="--alert")
        now = time.time()
        found = alert_incident(
            connect(conn), given.alert, list(given.alert_match), parse_time(end, "--end") if end else now
        )
        window, model = found.window, [*model, *found.models]
    else:
        window = incident_window(since, start, end, time.time())
    report = run(conn, window, given.baseline, tuple(dict.fromkeys(model)), given.rules)
    if given.plot is not None:
        from inferwatch.triage._plot import plot_report

        plot_report(report, given.plot)
        typer.echo(f"plot written to {given.plot}", err=True)
    if given.as_json:
        typer.echo(json.dumps(to_json(report), indent=2))
    elif sys.stdout.isatty():
        from rich.console import Console

        render_rich(report, Console())
    else:
        typer.echo(render_text(report), nl=False)


def register(app: typer.Typer) -> None:
    app.command(cls=Command)(connection_flags(triage))
