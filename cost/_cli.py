"""`inferwatch cost compile`: a price table into recording rules. Registered by inferwatch/cli.py."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from inferwatch.clikit import Command, group
from inferwatch.cost._options import CostCompileOptions
from inferwatch.options import flags_of

__all__ = ["register"]

cost_app = group("What serving costs: a price table compiled to recording rules (llm_cost:*).")


@cost_app.command("compile", cls=Command)
@flags_of(CostCompileOptions)
def compile_command(
    file: Annotated[Path, typer.Argument(metavar="FILE", help="A cost file (cost/example.yaml documents it).")],
    **flags: Any,
):
    """Compile a price table into Prometheus recording rules.

    Per GPU (by gpu_model or any label, plus an overhead share), per pod and per
    model in dollars an hour; idle and unallocated GPUs apart; and dollars per
    million output tokens, per million prompt tokens computed and per good request.

    \b
    Examples:
      inferwatch cost compile cost/example.yaml -o rules/
      promtool check rules rules/example.cost.rules.yaml
    """
    from inferwatch._files import output_dir, write_output
    from inferwatch.cost import load_cost, render_cost
    from inferwatch.options import from_flags

    out = from_flags(CostCompileOptions, flags).out
    text = render_cost(load_cost(file))
    target = output_dir(out, "--out") / f"{file.stem}.cost.rules.yaml"
    write_output(target, text, "--out")
    typer.echo(f"wrote {target}")


def register(app: typer.Typer) -> None:
    app.add_typer(cost_app, name="cost")
