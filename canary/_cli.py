"""`inferwatch canary`: a canary's signals against the stable version's, from Prometheus. Registered by
inferwatch/cli.py."""

from __future__ import annotations

from typing import Any

import typer

from inferwatch.canary._options import CanaryOptions
from inferwatch.clikit import Command
from inferwatch.options import flags_of
from inferwatch.promapi import ClientOptions
from inferwatch.promapi_flags import connection_flags

__all__ = ["register"]


@flags_of(CanaryOptions, after=("client",))
def canary(*, client: ClientOptions, **flags: Any):
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

    from inferwatch.canary import Settings, compare, parse_selector, render_text, to_json
    from inferwatch.options import from_flags
    from inferwatch.promapi import ApiError, Client
    from inferwatch.triage import parse_time

    given = from_flags(CanaryOptions, flags)
    end = parse_time(given.at, "--at") if given.at else None
    prom = Client(given.prometheus, client)
    settings = Settings(
        window=given.window,
        alpha=given.alpha,
        min_requests=given.min_requests,
        latency_tolerance=given.latency_tolerance,
        share_tolerance=given.share_tolerance,
        mix_tolerance=given.mix_tolerance,
    )
    try:
        report = compare(
            prom,
            given.model,
            parse_selector(given.canary_selector, "--canary"),
            parse_selector(given.stable_selector, "--stable"),
            given.source,
            settings,
            end,
        )
    except ApiError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    typer.echo(json.dumps(to_json(report), indent=2) if given.as_json else render_text(report), nl=given.as_json)
    raise typer.Exit(report.exit_code)


def register(app: typer.Typer) -> None:
    app.command(cls=Command)(connection_flags(canary))
