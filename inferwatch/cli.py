"""The `inferwatch` command: a thin typer layer over the library.

Each command parses its flags, calls one library function and prints. Every
InferwatchError becomes `error: ...` on stderr and exit status 1.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Optional

import typer

from inferwatch._cli_dashboards import dashboards_app
from inferwatch._cli_sim import register as register_sim_commands
from inferwatch._cli_slo import slo_app
from inferwatch.errors import InferwatchError

__all__ = ["app", "main"]

app = typer.Typer(help="Observability and SLOs for self-hosted LLM inference.", no_args_is_help=True,
                  add_completion=False, pretty_exceptions_enable=False)
mappings_app = typer.Typer(help="The common vocabulary and the per-source mappings.", no_args_is_help=True)
exporter_app = typer.Typer(help="Run an exporter.", no_args_is_help=True)
app.add_typer(mappings_app, name="mappings")
app.add_typer(exporter_app, name="exporter")
app.add_typer(slo_app, name="slo")
app.add_typer(dashboards_app, name="dashboards")
register_sim_commands(app)

MappingOpt = Annotated[list[Path], typer.Option("--mapping", "-m", help="Extra mapping file (repeatable).")]
SourceOpt = Annotated[Optional[str], typer.Option(help="Use this mapping only (vllm, sglang, dcgm or a user's).")]


def _mappings(extra: list[Path], source: str | None = None):
    from inferwatch.mappings import load_catalog, load_mappings, select_source

    catalog = load_catalog()
    mappings = load_mappings(extra, catalog)
    if source is not None:
        mappings = [select_source(mappings, source)]
    return catalog, mappings


@app.command()
def build(out: Annotated[Path, typer.Option("--out", "-o", help="Bundle folder.")] = Path("build"),
          check: Annotated[bool, typer.Option(help="Only report checked-in files that drifted; exit 1 if any.")] = False):
    """Write every generated artifact (relabel configs, recording rules) from the embedded defaults."""
    from inferwatch import build as builder

    if check:
        stale = builder.check()
        for path in stale:
            typer.echo(f"stale: {path} (run `inferwatch build` to regenerate)", err=True)
        raise typer.Exit(1 if stale else 0)
    for path in builder.refresh_sources():
        typer.echo(f"updated {path}")
    for path in builder.write_bundle(out):
        typer.echo(f"wrote {path}")


@app.command()
def normalize(file: Annotated[Optional[Path], typer.Argument(help="Exposition file; standard input if omitted or -.")] = None,
              source: SourceOpt = None,
              drop_unmapped: Annotated[bool, typer.Option(help="Leave out metrics no mapping knows.")] = False,
              keep_original: Annotated[bool, typer.Option(help="Keep the source series next to the common ones.")] = False,
              mapping: MappingOpt = []):
    """Print a Prometheus text exposition translated into the common vocabulary."""
    from inferwatch.exporters import Normalizer

    catalog, mappings = _mappings(mapping)
    if file is None or str(file) == "-":
        text, origin = sys.stdin.read(), "<stdin>"
    else:
        try:
            text, origin = file.read_text(encoding="utf-8"), str(file)
        except (OSError, UnicodeDecodeError) as err:
            raise InferwatchError(f"{file}: cannot read: {getattr(err, 'strerror', None) or err}") from None
    normalizer = Normalizer(mappings, catalog, source=source, drop_unmapped=drop_unmapped,
                            keep_original=keep_original)
    result = normalizer.normalize(text, origin)
    sys.stdout.write(result.render())
    for warning in result.warnings:
        typer.echo(f"warning: {warning}", err=True)
    if not result.sources:
        typer.echo("warning: no known source detected; everything passed through unchanged "
                   "(use --source or add a mapping)", err=True)


@mappings_app.command("check")
def mappings_check(files: Annotated[list[Path], typer.Argument(help="Mapping files to validate.")]):
    """Validate mapping files against the vocabulary; every problem is listed."""
    from inferwatch.errors import SpecError, collect
    from inferwatch.mappings import load_catalog, load_mapping

    catalog = load_catalog()
    loaded, problems = collect(lambda path: load_mapping(path, catalog), files)
    for path, mapping in loaded:
        typer.echo(f"{path}: ok: source {mapping.source}, {len(mapping.entries)} metrics")
    if problems:
        raise SpecError(problems)


@mappings_app.command("catalog")
def mappings_catalog():
    """Print the common vocabulary."""
    from inferwatch.mappings import load_catalog

    for metric in load_catalog().metrics.values():
        typer.echo(f"{metric.name:42} {metric.type:10} {metric.unit:9} {metric.help}")


@mappings_app.command("relabel")
def mappings_relabel(fmt: Annotated[str, typer.Option("--format", help="prometheus or servicemonitor")] = "prometheus",
                     source: SourceOpt = None, mapping: MappingOpt = []):
    """Print metric_relabel_configs (or ServiceMonitor metricRelabelings) that rename at scrape time."""
    from inferwatch._yaml import dump_yaml
    from inferwatch.mappings import relabel_configs, servicemonitor_relabelings

    _, mappings = _mappings(mapping, source)
    if fmt == "prometheus":
        typer.echo(dump_yaml({"metric_relabel_configs": relabel_configs(mappings)}), nl=False)
    elif fmt == "servicemonitor":
        typer.echo(dump_yaml({"metricRelabelings": servicemonitor_relabelings(mappings)}), nl=False)
    else:
        raise InferwatchError(f"--format {fmt!r}: use prometheus or servicemonitor")


@mappings_app.command("rules")
def mappings_rules(source: SourceOpt = None, mapping: MappingOpt = []):
    """Print recording rules for what relabeling cannot do (scaling, derived series, old-name fallbacks)."""
    from inferwatch._yaml import dump_yaml
    from inferwatch.mappings import recording_rules

    _, mappings = _mappings(mapping, source)
    typer.echo(dump_yaml(recording_rules(mappings)), nl=False)


def _bad(param: str, err: Exception):
    raise typer.BadParameter(str(err), param_hint=param)


@exporter_app.command("normalize")
def exporter_normalize(
        target: Annotated[list[str], typer.Option(help="URL or NAME=URL of a /metrics endpoint (repeatable).")] = [],
        listen: Annotated[Optional[str], typer.Option(help="HOST:PORT to serve /metrics on [0.0.0.0:9400].")] = None,
        timeout: Annotated[Optional[str], typer.Option(help="Per-target scrape timeout, e.g. 5s [5s].")] = None,
        max_running_requests: Annotated[list[str], typer.Option(
            help="MODEL=N: the concurrency cap, served as llm_max_running_requests (repeatable).")] = [],
        config: Annotated[Optional[Path], typer.Option(help="YAML config file; flags add to it.")] = None,
        source: SourceOpt = None,
        drop_unmapped: Annotated[bool, typer.Option(help="Serve only mapped metrics.")] = False,
        target_label: Annotated[Optional[str], typer.Option(
            help="Label naming the target on every series; '' for none [target].")] = None,
        mapping: MappingOpt = [],
        log_level: Annotated[str, typer.Option(help="debug, info, warning or error.")] = "info"):
    """Scrape engines and exporters when scraped, normalize, and serve the union on /metrics."""
    from inferwatch.exporters import NormalizingExporter, Normalizer
    from inferwatch.exporters._config import (ExporterConfig, load_config, parse_cap, parse_duration,
                                              parse_listen, parse_target)

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    cfg = load_config(str(config)) if config else ExporterConfig()
    try:
        targets = tuple(parse_target(t) for t in target)
    except ValueError as err:
        _bad("--target", err)
    try:
        caps = tuple(parse_cap(c) for c in max_running_requests)
    except ValueError as err:
        _bad("--max-running-requests", err)
    cfg = replace(cfg, targets=cfg.targets + targets, max_running_requests=cfg.max_running_requests + caps,
                  mappings=cfg.mappings + tuple(str(m) for m in mapping),
                  drop_unmapped=cfg.drop_unmapped or drop_unmapped)
    if listen is not None:
        try:
            host, port = parse_listen(listen)
        except ValueError as err:
            _bad("--listen", err)
        cfg = replace(cfg, host=host, port=port)
    if timeout is not None:
        try:
            cfg = replace(cfg, timeout=parse_duration(timeout))
        except ValueError as err:
            _bad("--timeout", err)
    if source is not None:
        cfg = replace(cfg, source=source)
    if target_label is not None:
        cfg = replace(cfg, target_label=target_label)
    if not cfg.targets:
        _bad("--target", ValueError("give at least one target (or `targets:` in --config)"))
    names = [t.name for t in cfg.targets]
    if len(set(names)) != len(names):
        _bad("--target", ValueError(f"target names must be unique, got {names}; use NAME=URL"))
    catalog, mappings = _mappings([Path(m) for m in cfg.mappings])
    normalizer = Normalizer(mappings, catalog, source=cfg.source, drop_unmapped=cfg.drop_unmapped)
    NormalizingExporter(cfg, normalizer).run()


def main() -> None:
    """Console entry point: user mistakes print one clear message, never a traceback."""
    try:
        code = app(standalone_mode=False)      # click returns a typer.Exit's code instead of raising it
    except InferwatchError as err:
        typer.echo(f"error: {err}", err=True)
        sys.exit(1)
    except typer.Exit as err:
        sys.exit(err.exit_code)
    except typer.Abort:
        typer.echo("aborted", err=True)
        sys.exit(130)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as err:
        # usage errors of the (vendored) click under typer: print click's message, exit 2
        if hasattr(err, "show") and hasattr(err, "exit_code"):
            err.show()
            sys.exit(err.exit_code)
        raise
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
