"""The `inferwatch` command: the root (--version, --max-input and `build`) and every package's commands.

Each package defines its commands in its own `_cli.py` (built from inferwatch/clikit.py) and adds them with
`register(app)`; this module only assembles them and turns errors into exit statuses. Each command parses its
flags, calls one library function and prints. Every InferwatchError becomes `error: ...` on stderr and exit
status 1; a usage error, or an input or output that cannot be used at all (InputError, an OSError on standard
output), one `error: ...` line and exit status 2. Everything beyond typer is imported inside the command that
needs it, so `--help` does not pay for aiohttp, grafanalib or the simulator.
"""

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from inferwatch import __version__
from inferwatch.clikit import Command, bad_flag
from inferwatch.errors import InferwatchError

__all__ = ["app", "main"]

HELP = """Observability and SLOs for self-hosted LLM inference (vLLM, SGLang, NVIDIA GPUs).

\b
Examples:
  inferwatch simulate --engine vllm &      a stand-in vLLM on localhost:8000, no GPU
  curl -s localhost:8000/metrics | inferwatch normalize
  inferwatch build                         relabel configs, rules, alerts and dashboards into build/
  inferwatch slo test slo/examples/chat.yaml
  inferwatch demo                          an incident, detected end to end
"""

# rich_markup_mode=None: plain click help, which does not import rich (a third of --help's time)
app = typer.Typer(
    help=HELP, no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"inferwatch {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
    max_input: Annotated[
        str | None,
        typer.Option(
            "--max-input",
            metavar="SIZE",
            help="Largest file any command reads, e.g. 256MiB; a larger one is "
            "refused (exit 2) [$INFERWATCH_MAX_INPUT, else 64MiB].",
        ),
    ] = None,
):
    import os

    from inferwatch._files import MAX_INPUT_ENV, parse_size

    if max_input is not None:
        try:
            parse_size(max_input)
        except ValueError as err:
            bad_flag("--max-input", err)
        os.environ[MAX_INPUT_ENV] = max_input


def build(
    out: Annotated[Path, typer.Option("--out", "-o", metavar="DIR", help="Bundle folder.")] = Path("build"),
    check: Annotated[
        bool,
        typer.Option(
            "--check", help="Write nothing; exit 1 if a checked-in copy drifted from what the code generates."
        ),
    ] = False,
):
    """Write the whole bundle from the embedded defaults, and refresh the checked-in copies.

    \b
    Into --out (default build/):
      prometheus/                relabel configs for scrape jobs and ServiceMonitors
      prometheus/rules/          rule files only: mapping recording rules, the default SLO rules
                                 (slo/defaults.yaml), operational alerts
      prometheus/rules/tests/    the promtool tests of those rules
      alertmanager/              inhibit rules for the SLO burn-rate tiers
      grafana/dashboards/        the four dashboards as Grafana JSON
    In a source checkout it also rewrites the copies under mappings/generated/, alerts/ and dashboards/.

    \b
    Examples:
      inferwatch build -o build/
      inferwatch build --check     (in CI: fails when a generated file was not regenerated)
    """
    from inferwatch import build as builder
    from inferwatch import reference
    from inferwatch._files import output_dir

    if check:
        stale = builder.check() + reference.check()
        for drifted in stale:
            typer.echo(f"stale: {drifted} (run `inferwatch build` to regenerate)", err=True)
        if not stale:
            typer.echo("up to date: the checked-in generated files match the code")
        raise typer.Exit(1 if stale else 0)
    output_dir(out, "--out")
    for updated in [*builder.refresh_sources(), *reference.refresh()]:
        typer.echo(f"updated {updated}")
    try:
        written = builder.write_bundle(out)
    except OSError as err:
        raise InferwatchError(f"--out {out}: cannot write {err.filename or out}: {err.strerror}") from None
    for path in written:
        typer.echo(f"wrote {path}")


def _assemble() -> None:
    """Every package's commands. `inferwatch --help` lists the commands in the order they are added, then the
    groups in theirs. Each package's `register` (its `_cli` module) imports only typer and its flags; a command
    imports the library it runs when it runs."""
    from inferwatch.canary import register as canary
    from inferwatch.cost import register as cost
    from inferwatch.dashboards import register as dashboards
    from inferwatch.deploy import register as deploy
    from inferwatch.exporters import register as exporters
    from inferwatch.frontdoor import register as frontdoor
    from inferwatch.mappings import register as mappings
    from inferwatch.sim import register as sim
    from inferwatch.slo import register as slo
    from inferwatch.triage import register as triage

    def root(app: typer.Typer) -> None:
        app.command(cls=Command)(build)

    for register in (mappings, sim, frontdoor, deploy, triage, canary, cost, root, exporters, slo, dashboards):
        register(app)


_assemble()


def _usage_error(err: Any) -> None:
    """Click's usage errors as one line (`error: ... (see `inferwatch x --help`)`), exit 2; bare groups show help."""
    if type(err).__name__ == "NoArgsIsHelpError":
        err.show()
    else:
        ctx = getattr(err, "ctx", None)
        hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
        typer.echo(f"error: {err.format_message()}{hint}", err=True)
    sys.exit(err.exit_code)


def _stdout_failed(err: OSError) -> None:
    """Standard output cannot take what was written (a full disk, /dev/full, a closed pipe): one line, exit 2,
    and stdout pointed at /dev/null so the interpreter's own flush at exit stays quiet."""
    import errno
    import os

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    if err.errno != errno.EPIPE:
        typer.echo(f"error: standard output: cannot write: {err.strerror or err}", err=True)
    sys.exit(2)


def main() -> None:
    """Console entry point: user mistakes print one clear line, never a traceback."""
    for stream in (sys.stdout, sys.stderr):  # a file name that is not UTF-8 is printed as its bytes, no crash
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="surrogateescape")
    try:
        code = app(standalone_mode=False, prog_name="inferwatch")  # click returns a typer.Exit's code
        sys.stdout.flush()
    except InferwatchError as err:
        typer.echo(f"error: {err}", err=True)
        sys.exit(err.exit_code)
    except BrokenPipeError as err:
        _stdout_failed(err)
    except OSError as err:
        if _is_stdout_error(err):
            _stdout_failed(err)
        raise
    except typer.Exit as err:
        sys.exit(err.exit_code)
    except typer.Abort:
        typer.echo("aborted", err=True)
        sys.exit(130)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as err:
        # usage errors of the (vendored) click under typer
        if hasattr(err, "format_message") and hasattr(err, "exit_code"):
            _usage_error(err)
        raise
    sys.exit(code if isinstance(code, int) else 0)


def _is_stdout_error(err: OSError) -> bool:
    """Whether `err` is standard output failing: files go through inferwatch._files, which names them, so an
    OSError without a file name and with an errno of a full or gone stream can only be the output stream."""
    import errno

    return err.filename is None and err.errno in (errno.ENOSPC, errno.EPIPE, errno.EIO, errno.EFBIG, errno.EDQUOT)


if __name__ == "__main__":
    main()
