"""`inferwatch slo ...`: compile, explain, test, check and import SLO specs."""

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from inferwatch.clikit import Command, group, refuse_flag
from inferwatch.errors import InferwatchError, SpecError, collect
from inferwatch.options import flags_of, from_flags
from inferwatch.slo._options import CompileOptions, ImportOptions

__all__ = ["register"]

slo_app = group("SLO specs into burn-rate and missing-data alerts, with promtool tests.")
Specs = Annotated[list[Path], typer.Argument(metavar="SPEC", help="SLO spec files (YAML).", show_default=False)]


def _load_all(paths: list[Path]):
    """Every spec, or one SpecError listing the problems of all of them."""
    from inferwatch.slo import load_spec

    loaded, problems = collect(load_spec, paths)
    if problems:
        raise SpecError(problems)
    return [spec for _, spec in loaded]


def _one_per_service(specs) -> None:
    """Refuse two specs of one service: their files (`<service>.<objective>.rules.yaml`, `<service>.inhibit.yaml`)
    and their recorded series would overwrite each other."""
    first: dict[str, Any] = {}
    for spec in specs:
        if spec.service in first:
            raise InferwatchError(
                f"{first[spec.service].file} and {spec.file} both have service: {spec.service}; "
                "their files would overwrite each other: give each spec its own service, or "
                "compile them into separate folders"
            )
        first[spec.service] = spec


def _write(specs, out: Path, fmt: str, tests: bool = True) -> list[Path]:
    from inferwatch._files import output_dir, write_file
    from inferwatch.slo import compile_spec, render_files

    written = []
    output_dir(out, "--out")
    for spec in specs:
        files, warnings = render_files(compile_spec(spec), fmt, tests=tests)
        for warning in warnings:
            typer.echo(f"warning: {warning}", err=True)
        for name, text in files.items():
            write_file(out / name, text, "--out")
            written.append(out / name)
    return written


@slo_app.command(cls=Command)
@flags_of(CompileOptions)
def compile(specs: Specs, **flags: Any):
    """Write the rules of each spec, Alertmanager inhibit rules and promtool tests.

    \b
    Examples:
      inferwatch slo compile slo/examples/chat.yaml -o rules/
      inferwatch slo compile slo/examples/chat.yaml --format prometheus-operator -o manifests/
    """
    given = from_flags(CompileOptions, flags, bad=refuse_flag)
    loaded = _load_all(specs)
    _one_per_service(loaded)
    for path in _write(loaded, given.out, given.format):
        typer.echo(f"wrote {path}")


@slo_app.command(cls=Command)
def explain(specs: Specs):
    """Print, per objective and tier, the windows, burn factor, threshold, detection and reset times.

    \b
    Example:
      inferwatch slo explain slo/examples/chat.yaml
    """
    from inferwatch.slo import explain as explain_spec

    for i, spec in enumerate(_load_all(specs)):
        typer.echo(("\n" if i else "") + explain_spec(spec), nl=False)


@slo_app.command(cls=Command)
def check(specs: Specs):
    """Validate specs; every problem of every file is listed, and what compiling would warn of.

    \b
    Example:
      inferwatch slo check slo/examples/*.yaml
    """
    from inferwatch.slo import compile_spec

    for spec in _load_all(specs):
        typer.echo(f"{spec.file}: ok: {spec.service}, {len(spec.objectives)} objectives")
        for warning in compile_spec(spec).warnings:
            typer.echo(f"warning: {warning}", err=True)


@slo_app.command(cls=Command)
def test(specs: Specs):
    """Compile into a temporary folder and run `promtool check rules` and the generated tests.

    \b
    Example:
      inferwatch slo test slo/examples/chat.yaml
    """
    import tempfile

    import yaml

    from inferwatch.slo import check_rule_files, run_rule_tests

    with tempfile.TemporaryDirectory(prefix="inferwatch-slo-") as tmp:
        written = [
            path
            for i, spec in enumerate(_load_all(specs))  # a folder each: specs may share a service
            for path in _write([spec], Path(tmp) / str(i), "prometheus")
        ]
        rules = [p for p in written if p.name.endswith(".rules.yaml")]
        tests = [p for p in written if p.name.endswith(".test.yaml")]
        ok, output = check_rule_files(rules)
        if ok:
            ok, output = run_rule_tests(tests)
        if not ok:
            typer.echo(output, err=True)
            raise typer.Exit(1)
        cases = sum(len(yaml.safe_load(p.read_text())["tests"]) for p in tests)
        tested = {p.parent.parent / p.name.replace(".test.yaml", ".rules.yaml") for p in tests}
        untested = [p.name[: -len(".rules.yaml")] for p in rules if p not in tested]
        if not cases:
            raise InferwatchError(
                f"promtool: {len(rules)} rule files valid, but 0 generated test cases: no tests "
                f"for {', '.join(untested) or 'any objective'} (see the warnings above), so "
                "nothing was tested"
            )
        typer.echo(
            f"promtool: {len(rules)} rule files valid; {cases} generated test cases in {len(tests)} files "
            "passed" + (f"; untested (see the warnings above): {', '.join(untested)}" if untested else "")
        )


@slo_app.command("import", cls=Command)
@flags_of(ImportOptions)
def import_(
    file: Annotated[
        Path,
        typer.Argument(
            metavar="FILE",
            show_default=False,
            help="Sloth prometheus/v1 specs, Sloth PrometheusServiceLevels, "
            "OpenSLO or Pyrra documents (several per file, or a YAML "
            "list).",
        ),
    ],
    **flags: Any,
):
    """Convert Sloth, OpenSLO or Pyrra specs into inferwatch specs, one per service, and list what was not carried
    over. Nothing is written when nothing can be imported.

    \b
    Examples:
      inferwatch slo import sloth.yaml -o my-service.yaml
      inferwatch slo import multifile.yaml --out-dir specs/
      inferwatch slo import openslo.yaml
    """
    from inferwatch.slo import import_file
    from inferwatch.yamlio import dump_yaml

    given = from_flags(ImportOptions, flags)
    out, out_dir = given.out, given.out_dir
    if out is not None and out_dir is not None:
        raise InferwatchError("--out and --out-dir: give one (--out-dir writes one spec per service)")
    if out is not None and os.path.isdir(out):  # not Path.is_dir: a 5,000-character name raises there
        raise InferwatchError(
            f"--out {out}: is a folder; give a file name, or --out-dir {out} for one spec per service"
        )
    try:
        result = import_file(file)
    except SpecError as err:
        if len(err.problems) < 2:
            raise
        raise InferwatchError(f"{file}: nothing imported:\n" + "\n".join(f"  {p}" for p in err.problems)) from None
    texts = {f"{spec['service']}.yaml": dump_yaml(spec) for spec in result.specs}
    if out is not None and len(texts) > 1:
        raise InferwatchError(
            f"{file} holds {len(texts)} services ({', '.join(n[:-5] for n in texts)}): give "
            "--out-dir DIR to write one spec per service, or leave out --out to print them"
        )
    if out is not None:
        targets, flag = {out: next(iter(texts.values()))}, "--out"  # one service: checked above
    elif out_dir is not None:
        targets, flag = {out_dir / name: text for name, text in texts.items()}, "--out-dir"
    else:
        sys.stdout.write("---\n".join(texts.values()))
        targets, flag = {}, ""
    for path in _write_imported(targets, flag):
        typer.echo(f"wrote {path}", err=True)
    for heading, notes in (("not carried over:", result.not_carried), ("imported as written; check:", result.to_check)):
        if notes:
            typer.echo(heading, err=True)
            for note in notes:
                typer.echo(f"  {note}", err=True)
    if out is None and out_dir is None and len(texts) > 1:
        typer.echo(
            f"{len(texts)} specs, one per service ({', '.join(n[:-5] for n in texts)}): save each YAML "
            "document as its own file, or give --out-dir",
            err=True,
        )


def _write_imported(targets: dict[Path, str], flag: str) -> list[Path]:
    """Write each spec with write_output: a regular file whole (never empty or partial), a device, FIFO or
    symlink through, never replaced."""
    from inferwatch._files import write_output

    for path, text in targets.items():
        write_output(path, text, flag)
    return list(targets)


def register(app: typer.Typer) -> None:
    app.add_typer(slo_app, name="slo")
