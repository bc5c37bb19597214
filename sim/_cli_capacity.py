"""`inferwatch capacity sweep` and `inferwatch capacity compare` (sim/_capacity.py). Registered by sim/_cli.py."""

from __future__ import annotations

from datetime import UTC
from pathlib import Path
from typing import Annotated, Any

import typer

from inferwatch.clikit import Command, bad_flag, group
from inferwatch.options import flags_of, from_flags
from inferwatch.sim._cli_options import CapacityCompareOptions, SweepOptions

__all__ = ["capacity_app"]

capacity_app = group("How much more it can take: the request rate a deployment serves within its SLO.")


@capacity_app.command("sweep", cls=Command)
@flags_of(SweepOptions)
def sweep_command(**flags: Any):
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

    given = from_flags(SweepOptions, flags)
    url, max_steps, request_timeout = given.target, given.max_steps, given.timeout
    if given.max_rate < given.start_rate:
        bad_flag("--max-rate", f"{given.max_rate:g} is below --start-rate {given.start_rate:g}")
    old = load_result(given.compare_to) if given.compare_to else None
    goodput = load_goodput(list(given.slo)) if given.slo else default_goodput()
    load = LoadConfig(
        url,
        model=given.model,
        prompt_tokens=given.prompt_tokens,
        max_tokens=given.max_tokens,
        output_tokens=given.output_tokens,
        prefix_share=given.prefix_share,
        timeout=request_timeout,
        response_timeout=min(10.0, request_timeout),
        seed=given.seed,
    )
    config = SweepConfig(
        load,
        target=given.goodput_target,
        start_rate=given.start_rate,
        growth=given.growth,
        max_rate=given.max_rate,
        step_duration=given.step_duration,
        step_requests=given.step_requests,
        repeats=given.repeats,
        precision=given.precision,
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
    doc = result(config, goodput, steps, name, given.replicas, started, time.monotonic() - clock, interrupted)
    json_out, plot, rules = given.json_out, given.plot, given.rules
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
@flags_of(CapacityCompareOptions)
def compare_command(
    old: Annotated[Path, typer.Argument(metavar="OLD.json", help="The earlier result (--json-out).")],
    new: Annotated[Path, typer.Argument(metavar="NEW.json", help="The later result.")],
    **flags: Any,
):
    """Did capacity change beyond both 95% intervals? Exit 1 when it is lower, 0 otherwise.

    \b
    Examples:
      inferwatch capacity compare release-1.4.json release-1.5.json
    """
    import json

    from inferwatch.sim._capacity_report import compare, format_comparison, load_result

    as_json = from_flags(CapacityCompareOptions, flags).as_json
    c = compare(load_result(old), load_result(new))
    typer.echo(json.dumps(c, indent=2) if as_json else format_comparison(c), nl=as_json)
    raise typer.Exit(1 if c["verdict"] == "lower" else 0)
