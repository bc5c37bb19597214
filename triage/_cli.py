"""`inferwatch triage`: flags into a Connection and windows, then `triage()` and a report. Registered by
inferwatch/cli.py."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

__all__ = ["register", "parse_header"]


def parse_header(text: str) -> tuple[str, str]:
    """`Name: value` into (name, value); ValueError with an example otherwise."""
    name, sep, value = text.partition(":")
    if not sep or not name.strip() or any(c.isspace() for c in name.strip()):
        raise ValueError(f"{text!r} is not a header; write 'Name: value', e.g. 'Authorization: Bearer TOKEN'")
    return name.strip(), value.strip()


def _connection(url: str, header: list[str], bearer_token_file: Optional[Path], ca_file: Optional[Path],
                insecure: bool, cert: Optional[Path], key: Optional[Path]):
    from inferwatch._files import check_readable, read_input_text
    from inferwatch.triage._fetch import Connection

    if not url.startswith(("http://", "https://")):
        raise typer.BadParameter(f"{url!r}: give an http(s) URL, e.g. http://localhost:9090", param_hint="--prometheus")
    headers = {}
    for text in header:
        try:
            name, value = parse_header(text)
        except ValueError as err:
            raise typer.BadParameter(str(err), param_hint="--header") from None
        headers[name] = value
    if bearer_token_file is not None:
        headers["Authorization"] = "Bearer " + read_input_text(bearer_token_file, "--bearer-token-file").strip()
    if insecure and ca_file is not None:
        raise typer.BadParameter("give --ca-file or --insecure, not both", param_hint="--insecure")
    verify = False if insecure else (check_readable(ca_file, "--ca-file") if ca_file else True)
    cert_file = check_readable(cert, "--cert") if cert else None
    client_cert = (cert_file, check_readable(key, "--key")) if cert and key else cert_file
    return Connection(url, headers, verify, client_cert)


def triage(
        prometheus: Annotated[str, typer.Option(metavar="URL", envvar="INFERWATCH_PROMETHEUS",
                                                help="Prometheus' base URL.")]
        = "http://localhost:9090",
        since: Annotated[Optional[str], typer.Option(metavar="DURATION", help="The incident: this long before "
                                                     "--end (default now) [30m].")] = None,
        start: Annotated[Optional[str], typer.Option(metavar="TIME", help="The incident's start: RFC 3339 or "
                                                     "Unix seconds.")] = None,
        end: Annotated[Optional[str], typer.Option(metavar="TIME", help="The incident's end [now].")] = None,
        model: Annotated[list[str], typer.Option(metavar="NAME", help="A model to judge (repeatable), in every "
                                                 "namespace and cluster that serves it, or one deployment as the "
                                                 "report names it, 'llama-3-8b (namespace=a)'; names are "
                                                 "case-sensitive [every model with series].")] = [],
        baseline: Annotated[str, typer.Option(metavar="auto|1d|1h|START/END", help=(
            "What normal looked like: auto (the same window a day earlier if it has data, else the hour before), "
            "1d / 7d (the same window that much earlier), 1h / 30m (that long before the incident), or START/END."))]
        = "auto",
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON (kinds sorted by confidence; empty when "
                                                             "nothing is wrong).")] = False,
        plot: Annotated[Optional[Path], typer.Option(metavar="FILE.png", help="Also draw the signals, incident "
                                                     "shaded and baseline faint, into this PNG.")] = None,
        rules: Annotated[list[Path], typer.Option(metavar="FILE", help="Kinds to add or replace (kinds.yaml's "
                                                  "format; repeatable).")] = [],
        header: Annotated[list[str], typer.Option(metavar="'NAME: VALUE'", help="An HTTP header for Prometheus, "
                                                  "e.g. 'Authorization: Bearer TOKEN' (repeatable).")] = [],
        bearer_token_file: Annotated[Optional[Path], typer.Option(metavar="FILE", help="Send this file's token "
                                                                  "as 'Authorization: Bearer'.")] = None,
        ca_file: Annotated[Optional[Path], typer.Option(metavar="FILE", help="Verify Prometheus' TLS certificate "
                                                        "with this CA bundle.")] = None,
        insecure: Annotated[bool, typer.Option("--insecure", help="Do not verify Prometheus' TLS certificate.")]
        = False,
        cert: Annotated[Optional[Path], typer.Option(metavar="FILE", help="Client certificate (PEM) for mutual "
                                                     "TLS.")] = None,
        key: Annotated[Optional[Path], typer.Option(metavar="FILE", help="The client certificate's key.")] = None):
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
    """
    import json
    import sys
    import time

    from inferwatch.triage._report import render_rich, render_text, to_json
    from inferwatch.triage._triage import triage as run
    from inferwatch.triage._window import incident_window

    conn = _connection(prometheus, header, bearer_token_file, ca_file, insecure, cert, key)
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
    app.command()(triage)
