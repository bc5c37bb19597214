"""`inferwatch dashboards ...`: build, lint and push Grafana dashboards."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from inferwatch.errors import InferwatchError

__all__ = ["dashboards_app"]

dashboards_app = typer.Typer(help="Grafana dashboards as code: build, lint, push.", no_args_is_help=True)
Sources = Annotated[Optional[list[Path]], typer.Argument(help="*.dashboard.py files (default: inferwatch's four).",
                                                         show_default=False)]


@dashboards_app.command()
def build(sources: Sources = None,
          out: Annotated[Path, typer.Option("--out", "-o", help="Output folder.")] = Path("dashboards-json"),
          configmaps: Annotated[bool, typer.Option(help="Also write Kubernetes ConfigMaps for the Grafana "
                                                         "sidecar (label grafana_dashboard: \"1\").")] = False,
          folder: Annotated[str, typer.Option(help="Grafana folder for the ConfigMaps' grafana_folder "
                                                   "annotation.")] = "inferwatch"):
    """Write modern Grafana JSON for each dashboard (and ConfigMaps with --configmaps)."""
    from inferwatch._yaml import dump_yaml
    from inferwatch.dashboards._build import build as build_all
    from inferwatch.dashboards._build import configmap

    out.mkdir(parents=True, exist_ok=True)
    for name, text in build_all(sources).items():
        (out / name).write_text(text, encoding="utf-8")
        typer.echo(f"wrote {out / name}")
        if configmaps:
            path = out / name.replace(".json", ".configmap.yaml")
            path.write_text(dump_yaml(configmap(name, text, folder)), encoding="utf-8")
            typer.echo(f"wrote {path}")


@dashboards_app.command()
def lint(files: Annotated[list[Path], typer.Argument(help="Dashboard JSON files (anyone's).")]):
    """Flag dashboard anti-patterns: raw counters, quantiles without `by (le)`, stale metric names, ..."""
    from inferwatch.dashboards._lint import lint_file

    findings = [f for path in files for f in lint_file(path)]
    for finding in findings:
        typer.echo(str(finding))
    typer.echo(f"{len(findings)} findings in {len(files)} files", err=True)
    raise typer.Exit(1 if findings else 0)


@dashboards_app.command()
def push(sources: Sources = None,
         grafana_url: Annotated[str, typer.Option(help="Grafana base URL, e.g. http://grafana:3000.")] = "",
         folder: Annotated[str, typer.Option(help="Folder to put them in (created if missing).")] = "inferwatch"):
    """Upload dashboards to Grafana by uid (create or update); the token is read from GRAFANA_TOKEN."""
    from inferwatch.dashboards._build import build as build_all
    from inferwatch.dashboards._push import push as push_all

    if not grafana_url:
        raise InferwatchError("--grafana-url is required, e.g. --grafana-url http://grafana:3000")
    boards = {name: json.loads(text) for name, text in build_all(sources).items()}
    for line in push_all(boards, grafana_url, folder):
        typer.echo(f"pushed {line}")
