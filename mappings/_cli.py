"""`inferwatch mappings ...`: validate mapping files, print the vocabulary, and the relabel and recording rules."""

from pathlib import Path
from typing import Annotated

import typer

from inferwatch.clikit import Command, group
from inferwatch.errors import InferwatchError
from inferwatch.mappings.flags import MappingOpt, SourceOpt, selected_mappings

__all__ = ["register"]

mappings_app = group("The common vocabulary and the per-source mappings.")


@mappings_app.command("check", cls=Command)
def mappings_check(
    files: Annotated[list[Path], typer.Argument(metavar="FILE", show_default=False, help="Mapping files to validate.")],
):
    """Validate mapping files against the vocabulary; every problem is listed.

    \b
    Examples:
      inferwatch mappings check my-engine.yaml
      inferwatch mappings check mappings/examples/tgi.yaml
    """
    from inferwatch.errors import SpecError, collect
    from inferwatch.mappings import load_catalog, load_mapping

    catalog = load_catalog()
    loaded, problems = collect(lambda path: load_mapping(path, catalog), files)
    for path, mapping in loaded:
        typer.echo(f"{path}: ok: source {mapping.source}, {len(mapping.entries)} metrics")
    if problems:
        raise SpecError(problems)


@mappings_app.command("catalog", cls=Command)
def mappings_catalog():
    """Print the common vocabulary.

    \b
    Example:
      inferwatch mappings catalog | grep time_to_first_token
    """
    from inferwatch.mappings import load_catalog

    for metric in load_catalog().metrics.values():
        typer.echo(f"{metric.name:42} {metric.type:10} {metric.unit:9} {metric.help}")


@mappings_app.command("relabel", cls=Command)
def mappings_relabel(
    fmt: Annotated[str, typer.Option("--format", metavar="FORMAT", help="prometheus or servicemonitor")] = "prometheus",
    source: SourceOpt = None,
    mapping: MappingOpt = [],
):
    """Print metric_relabel_configs (or ServiceMonitor metricRelabelings) that rename at scrape time.

    \b
    Examples:
      inferwatch mappings relabel > relabel.yaml
      inferwatch mappings relabel --format servicemonitor --source vllm
    """
    from inferwatch.mappings import relabel_configs, servicemonitor_relabelings
    from inferwatch.yamlio import dump_yaml

    _, mappings = selected_mappings(mapping, source)
    if fmt == "prometheus":
        typer.echo(dump_yaml({"metric_relabel_configs": relabel_configs(mappings)}), nl=False)
    elif fmt == "servicemonitor":
        typer.echo(dump_yaml({"metricRelabelings": servicemonitor_relabelings(mappings)}), nl=False)
    else:
        raise InferwatchError(f"--format {fmt!r}: use prometheus or servicemonitor")


@mappings_app.command("rules", cls=Command)
def mappings_rules(source: SourceOpt = None, mapping: MappingOpt = []):
    """Print recording rules for what relabeling cannot do (scaling, derived series, old-name fallbacks).

    \b
    Examples:
      inferwatch mappings rules > inferwatch-mappings.rules.yaml
      inferwatch mappings rules --source vllm
    """
    from inferwatch.mappings import recording_rules
    from inferwatch.yamlio import dump_yaml

    _, mappings = selected_mappings(mapping, source)
    typer.echo(dump_yaml(recording_rules(mappings)), nl=False)


def register(app: typer.Typer) -> None:
    app.add_typer(mappings_app, name="mappings")
