"""`inferwatch slo ...`: compile, explain, test, check and import SLO specs."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Annotated, Optional

import typer
import yaml

from inferwatch.errors import InferwatchError, SpecError, collect

__all__ = ["slo_app"]

slo_app = typer.Typer(help="SLO specs into burn-rate and missing-data alerts, with promtool tests.",
                      no_args_is_help=True)
Specs = Annotated[list[Path], typer.Argument(help="SLO spec files (YAML).", show_default=False)]


def _load_all(paths: list[Path]):
    """Every spec, or one SpecError listing the problems of all of them."""
    from inferwatch.slo import load_spec

    loaded, problems = collect(load_spec, paths)
    if problems:
        raise SpecError(problems)
    return [spec for _, spec in loaded]


def _write(paths: list[Path], out: Path, fmt: str, tests: bool = True) -> list[Path]:
    from inferwatch.slo import compile_spec, render_files

    written = []
    out.mkdir(parents=True, exist_ok=True)
    for spec in _load_all(paths):
        files, warnings = render_files(compile_spec(spec), fmt, tests=tests)
        for warning in warnings:
            typer.echo(f"warning: {warning}", err=True)
        for name, text in files.items():
            (out / name).write_text(text, encoding="utf-8")
            written.append(out / name)
    return written


@slo_app.command()
def compile(specs: Specs,
            out: Annotated[Path, typer.Option("--out", "-o", help="Output folder.")] = Path("slo-rules"),
            fmt: Annotated[str, typer.Option("--format", help="prometheus (rule files, tests, inhibit rules) or "
                                                              "prometheus-operator (PrometheusRule manifests)")]
            = "prometheus"):
    """Write the rules of each spec, Alertmanager inhibit rules and promtool tests."""
    from inferwatch.slo import FORMATS

    if fmt not in FORMATS:
        raise InferwatchError(f"--format {fmt!r}: use one of {', '.join(FORMATS)}")
    for path in _write(specs, out, fmt):
        typer.echo(f"wrote {path}")


@slo_app.command()
def explain(specs: Specs):
    """Print, per objective and tier, the windows, burn factor, threshold, detection and reset times."""
    from inferwatch.slo import explain as explain_spec

    for i, spec in enumerate(_load_all(specs)):
        typer.echo(("\n" if i else "") + explain_spec(spec), nl=False)


@slo_app.command()
def check(specs: Specs):
    """Validate specs only; every problem of every file is listed."""
    for spec in _load_all(specs):
        typer.echo(f"{spec.file}: ok: {spec.service}, {len(spec.objectives)} objectives")


@slo_app.command()
def test(specs: Specs):
    """Compile into a temporary folder and run `promtool check rules` and the generated tests."""
    from inferwatch.slo import check_rule_files, run_rule_tests

    with tempfile.TemporaryDirectory(prefix="inferwatch-slo-") as tmp:
        written = _write(specs, Path(tmp), "prometheus")
        rules = [p for p in written if p.name.endswith(".rules.yaml")]
        tests = [p for p in written if p.name.endswith(".test.yaml")]
        ok, output = check_rule_files(rules)
        if ok:
            ok, output = run_rule_tests(tests)
        if not ok:
            typer.echo(output, err=True)
            raise typer.Exit(1)
        cases = sum(len(yaml.safe_load(p.read_text())["tests"]) for p in tests)
        typer.echo(f"promtool: {len(rules)} rule files valid; {cases} generated test cases in {len(tests)} files "
                   "passed")


@slo_app.command("import")
def import_(file: Annotated[Path, typer.Argument(help="A Sloth prometheus/v1 spec, a Sloth "
                                                      "PrometheusServiceLevel, or OpenSLO v1 documents.")],
            out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Write here instead of "
                                                                           "standard output.")] = None):
    """Convert a Sloth or OpenSLO spec into an inferwatch spec and list what could not be carried over."""
    from inferwatch._yaml import dump_yaml
    from inferwatch.slo import import_file

    result = import_file(file)
    text = "---\n".join(dump_yaml(spec) for spec in result.specs)
    if out is None:
        sys.stdout.write(text)
    else:
        out.write_text(text, encoding="utf-8")
        typer.echo(f"wrote {out}", err=True)
    if result.not_carried:
        typer.echo("not carried over:", err=True)
        for note in result.not_carried:
            typer.echo(f"  {note}", err=True)
    if not result.specs:
        raise InferwatchError(f"{file}: nothing could be imported")
