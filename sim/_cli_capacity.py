"""`inferwatch capacity sweep` and `inferwatch capacity compare` (sim/_capacity.py). Registered by sim/_cli.py."""

from __future__ import annotations

from datetime import UTC
from pathlib import Path
from typing import Annotated, Any

import typer

from inferwatch.clikit import Command, group

__all__ = ["capacity_app"]

capacity_app = group("How much more it can take: the request rate a deployment serves within its SLO.")


def _seconds(text: str, flag: str) -> float:
    from inferwatch.sim._cli import _seconds as seconds

    return seconds(text, flag)


@capacity_app.command("sweep", cls=Command)
def sweep_command(
    target: Annotated[
        str,
        typer.Option(
            metavar="URL",
            help="An OpenAI-compatible server: an engine, a front door, the simulator (http://HOST:PORT[/v1]).",
        ),
    ],
    slo: Annotated[
        list[Path],
        typer.Option(
            "--slo",
            metavar="FILE",
            help=(
                "SLO spec(s) with source: frontdoor whose objectives judge each request (repeatable); default the "
                "embedded slo/defaults-frontdoor.yaml (TTFT 1s, TPOT 100ms, answered)."
            ),
        ),
    ] = [],
    goodput_target: Annotated[
        float,
        typer.Option(
            "--good-share",
            metavar="SHARE",
            min=0.01,
            max=0.999,
            help=("Share of good requests a step needs (DistServe's attainment)."),
        ),
    ] = 0.9,
    start_rate: Annotated[float, typer.Option(metavar="R", min=0.001, help="First step's requests/s.")] = 1.0,
    growth: Annotated[float, typer.Option(metavar="X", min=1.1, help="Ramp factor between steps.")] = 2.0,
    max_rate: Annotated[float, typer.Option(metavar="R", help="Never offer more than this.")] = 1000.0,
    step_duration: Annotated[
        str,
        typer.Option(
            metavar="DURATION", help=("Arrivals per step; long enough for a growing queue to break the TTFT objective.")
        ),
    ] = "60s",
    step_requests: Annotated[int, typer.Option(metavar="N", min=1, help="Most requests a step sends.")] = 2000,
    repeats: Annotated[int, typer.Option(metavar="N", min=2, max=30, help="Steps per rate near the knee.")] = 3,
    precision: Annotated[
        float,
        typer.Option(
            metavar="SHARE",
            min=0.01,
            max=1.0,
            help=("Stop refining when the interval is narrower than this share of its upper end."),
        ),
    ] = 0.1,
    max_steps: Annotated[int, typer.Option(metavar="N", min=1, max=500, help="Most steps in all.")] = 20,
    replicas: Annotated[
        int,
        typer.Option(
            metavar="N", min=1, help=("Replicas behind --target: the capacity per replica is the capacity over N.")
        ),
    ] = 1,
    model: Annotated[
        str | None, typer.Option(metavar="NAME", help="Model to ask (default: the first of /v1/models).")
    ] = None,
    prompt_tokens: Annotated[int, typer.Option(metavar="N", help="Mean prompt length in words.")] = 200,
    max_tokens: Annotated[int, typer.Option(metavar="N", help="max_tokens of each request.")] = 512,
    output_tokens: Annotated[
        int | None, typer.Option(metavar="N", help=("Draw each request's max_tokens around this mean."))
    ] = None,
    prefix_share: Annotated[float, typer.Option(metavar="SHARE", help="Share with a shared system prompt.")] = 0.3,
    timeout: Annotated[str, typer.Option(metavar="DURATION", help="Give up on a request after this long.")] = "120s",
    seed: Annotated[int | None, typer.Option(metavar="N", help="Random seed.")] = None,
    json_out: Annotated[
        Path | None,
        typer.Option(
            "--json-out",
            metavar="FILE",
            help=("Write the result (rates, steps, capacity, interval, SLO, settings, version, time)."),
        ),
    ] = None,
    plot: Annotated[
        Path | None, typer.Option(metavar="FILE.png", help=("Plot TTFT, TPOT and goodput against the offered rate."))
    ] = None,
    rules: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help=(
                "Write a Prometheus rule file with the capacity per replica "
                "(llm_capacity:requests_per_second_per_replica{model}) for the overview's headroom panel."
            ),
        ),
    ] = None,
    compare_to: Annotated[
        Path | None,
        typer.Option(
            "--compare",
            metavar="OLD.json",
            help=("Compare with an earlier result; exit 1 when capacity is lower beyond both intervals."),
        ),
    ] = None,
):
    """Step the request rate until the SLO fails, refine near the knee, report capacity with a 95% interval.

    Each request is judged as the front door judges goodput: answered, and within
    every latency objective of the SLO. A step passes when --good-share of its
    requests were good. Ctrl-C stops at once and reports the steps measured so far.
    Method and bounds: sim/README.md.

    \b
    Examples:
      inferwatch capacity sweep --target localhost:8000 --json-out v1.json --plot v1.png
      inferwatch capacity sweep --target http://door:8080 --replicas 4 --rules capacity.rules.yaml
      inferwatch capacity compare v1.json v2.json
    """
    import asyncio
    import json
    import time
    from datetime import datetime

    from inferwatch._files import write_output
    from inferwatch._urls import openai_server_url
    from inferwatch.frontdoor import default_goodput, load_goodput
    from inferwatch.sim._capacity import SweepConfig, format_step, sweep
    from inferwatch.sim._capacity_report import (
        compare,
        format_comparison,
        format_result,
        load_result,
        result,
        rule_file,
    )
    from inferwatch.sim._capacity_report import plot as draw
    from inferwatch.sim._load import LoadConfig, resolve_model

    try:
        url = openai_server_url(target)
    except ValueError as err:
        raise typer.BadParameter(str(err), param_hint="--target") from None
    if max_rate < start_rate:
        raise typer.BadParameter(f"{max_rate:g} is below --start-rate {start_rate:g}", param_hint="--max-rate")
    old = load_result(compare_to) if compare_to else None
    goodput = load_goodput(list(slo)) if slo else default_goodput()
    request_timeout = _seconds(timeout, "--timeout")
    load = LoadConfig(
        url,
        model=model,
        prompt_tokens=prompt_tokens,
        max_tokens=max_tokens,
        output_tokens=output_tokens,
        prefix_share=prefix_share,
        timeout=request_timeout,
        response_timeout=min(10.0, request_timeout),
        seed=seed,
    )
    config = SweepConfig(
        load,
        target=goodput_target,
        start_rate=start_rate,
        growth=growth,
        max_rate=max_rate,
        step_duration=_seconds(step_duration, "--step-duration"),
        step_requests=step_requests,
        repeats=repeats,
        precision=precision,
        max_steps=max_steps,
    )
    name = asyncio.run(resolve_model(load))
    bound = max_steps * (config.step_duration + request_timeout)
    typer.echo(
        f"sweeping {name} at {url}: at most {max_steps} steps of {config.step_duration:g}s "
        f"(under {bound / 60:.0f} min); Ctrl-C stops with what was measured",
        err=True,
    )
    steps: list[Any] = []
    started, clock = datetime.now(UTC), time.monotonic()
    interrupted = False
    try:
        asyncio.run(
            sweep(config, goodput, steps, name, on_step=lambda s: typer.echo(format_step(s, config.target), err=True))
        )
    except KeyboardInterrupt:
        interrupted = True
        typer.echo("interrupted: the step in progress is left out", err=True)
    doc = result(config, goodput, steps, name, replicas, started, time.monotonic() - clock, interrupted)
    if json_out:
        write_output(json_out, json.dumps(doc, indent=2) + "\n", "--json-out")
    if plot and steps:
        draw(doc, plot)
    typer.echo(format_result(doc), nl=False)
    if rules:
        if doc["capacity"]["per_replica"]["requests_per_second"] is None:
            typer.echo(f"--rules {rules}: not written, no capacity was measured", err=True)
        else:
            write_output(rules, rule_file(doc), "--rules")
    if old is not None:
        c = compare(old, doc)
        typer.echo(format_comparison(c), nl=False)
        if c["verdict"] == "lower":
            raise typer.Exit(1)
    if interrupted:
        raise typer.Exit(130)


@capacity_app.command("compare", cls=Command)
def compare_command(
    old: Annotated[Path, typer.Argument(metavar="OLD.json", help="The earlier result (--json-out).")],
    new: Annotated[Path, typer.Argument(metavar="NEW.json", help="The later result.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
):
    """Did capacity change beyond both 95% intervals? Exit 1 when it is lower, 0 otherwise.

    \b
    Examples:
      inferwatch capacity compare release-1.4.json release-1.5.json
    """
    import json

    from inferwatch.sim._capacity_report import compare, format_comparison, load_result

    c = compare(load_result(old), load_result(new))
    typer.echo(json.dumps(c, indent=2) if as_json else format_comparison(c), nl=as_json)
    raise typer.Exit(1 if c["verdict"] == "lower" else 0)
