"""`inferwatch dashboards ...`: build, lint and push Grafana dashboards."""

from pathlib import Path
from typing import Annotated

import typer

from inferwatch.clikit import Command, bad_flag, group

__all__ = ["register"]

dashboards_app = group("Grafana dashboards as code: build, lint, push.")
Sources = Annotated[
    list[Path] | None,
    typer.Argument(metavar="SOURCE", help="*.dashboard.py files (default: inferwatch's four).", show_default=False),
]


@dashboards_app.command(cls=Command)
def build(
    sources: Sources = None,
    out: Annotated[Path, typer.Option("--out", "-o", metavar="DIR", help="Output folder.")] = Path("dashboards-json"),
    configmaps: Annotated[
        bool,
        typer.Option(
            "--configmaps",
            help='Also write Kubernetes ConfigMaps for the Grafana sidecar (label grafana_dashboard: "1").',
        ),
    ] = False,
    folder: Annotated[
        str, typer.Option(metavar="NAME", help="Grafana folder for the ConfigMaps' grafana_folder annotation.")
    ] = "inferwatch",
    slo: Annotated[
        list[Path] | None,
        typer.Option(
            "--slo",
            metavar="SPEC",
            show_default=False,
            help="Your SLO spec(s): the latency tiles show their "
            "thresholds and targets (default: "
            "slo/defaults.yaml's). Repeatable.",
        ),
    ] = None,
):
    """Write modern Grafana JSON for each dashboard (and ConfigMaps with --configmaps).

    \b
    Examples:
      inferwatch dashboards build -o out/
      inferwatch dashboards build -o out/ --configmaps --folder LLM
      inferwatch dashboards build -o out/ --slo slos/chat.yaml
    """
    from inferwatch._files import output_dir, write_file
    from inferwatch.dashboards._build import build as build_all
    from inferwatch.dashboards._build import configmap
    from inferwatch.errors import SpecError, collect
    from inferwatch.slo import load_spec
    from inferwatch.yamlio import dump_yaml

    loaded, problems = collect(load_spec, list(slo or []))
    if problems:
        raise SpecError(problems)
    output_dir(out, "--out")
    for name, text in build_all(sources, [spec for _, spec in loaded]).items():
        write_file(out / name, text, "--out")
        typer.echo(f"wrote {out / name}")
        if configmaps:
            path = out / name.replace(".json", ".configmap.yaml")
            write_file(path, dump_yaml(configmap(name, text, folder)), "--out")
            typer.echo(f"wrote {path}")


@dashboards_app.command(cls=Command)
def lint(
    files: Annotated[
        list[Path],
        typer.Argument(
            metavar="FILE",
            show_default=False,
            help="Anyone's dashboards: JSON (classic or schema v2) or "
            "Kubernetes YAML files, folders of them, - for stdin.",
        ),
    ],
):
    """Flag dashboard anti-patterns: raw counters, quantiles without `by (le)`, stale metric names, ...

    \b
    Example:
      inferwatch dashboards lint some-dashboard.json
    """
    from inferwatch.dashboards._lint import lint_file

    findings = [f for path in files for f in lint_file(path)]
    for finding in findings:
        typer.echo(str(finding))
    files_with = len({finding.file for finding in findings})  # a folder or a ConfigMap holds several
    typer.echo(
        f"{len(findings)} finding{'s' if len(findings) != 1 else ''} in {files_with} "
        f"file{'s' if files_with != 1 else ''}"
        if findings
        else "no findings",
        err=True,
    )
    raise typer.Exit(1 if findings else 0)


@dashboards_app.command(cls=Command)
def push(
    grafana_url: Annotated[
        str, typer.Option(metavar="URL", show_default=False, help="Grafana base URL, e.g. http://grafana:3000.")
    ],
    sources: Sources = None,
    folder: Annotated[
        str, typer.Option(metavar="NAME", help="Folder to put them in (created if missing).")
    ] = "inferwatch",
):
    """Upload dashboards to Grafana by uid (create or update); the token is read from GRAFANA_TOKEN.

    \b
    Example:
      GRAFANA_TOKEN=... inferwatch dashboards push --grafana-url http://grafana:3000
    """
    import json

    from inferwatch._urls import http_url
    from inferwatch.dashboards._build import build as build_all
    from inferwatch.dashboards._push import push as push_all

    try:
        grafana_url = http_url(grafana_url, "http://grafana:3000")
    except ValueError as err:
        bad_flag("--grafana-url", err)
    boards = {name: json.loads(text) for name, text in build_all(sources).items()}
    for line in push_all(boards, grafana_url, folder):
        typer.echo(f"pushed {line}")


def register(app: typer.Typer) -> None:
    app.add_typer(dashboards_app, name="dashboards")
