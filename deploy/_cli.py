"""`inferwatch deploy render` and `inferwatch doctor`: flags and files only; the library does the work. Their
flags come from options models (deploy/_render_options.py's RenderFlags, whose option Config's `backend` shares, and
deploy/_doctor_options.py)."""

from pathlib import Path
from typing import Annotated, Any

import typer

from inferwatch.clikit import Command, bad_flag, group
from inferwatch.deploy._doctor_options import DoctorOptions, pairs_problem
from inferwatch.deploy._render_options import RenderFlags
from inferwatch.options import flags_of
from inferwatch.promapi import ClientOptions
from inferwatch.promapi_flags import connection_flags

__all__ = ["register"]

deploy_app = group("Everything a cluster (or a laptop) needs, from one config.")
ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        metavar="FILE",
        show_default=False,
        help="deploy.yaml (version 1); default: the embedded defaults, as checked in under deploy/.",
    ),
]


@deploy_app.command("render", cls=Command)
@flags_of(RenderFlags, from_file=True)
def render(
    out: Annotated[
        Path, typer.Option("--out", "-o", metavar="DIR", show_default=False, help="Output folder (created if missing).")
    ],
    config: ConfigOpt = None,
    target: Annotated[
        str,
        typer.Option(
            metavar="TARGET",
            help="kubernetes (manifests and kustomization.yaml "
            "for kube-prometheus-stack, or for the "
            "VictoriaMetrics operator) or compose.",
        ),
    ] = "kubernetes",
    **flags: Any,
):
    """Render manifests for kube-prometheus-stack or the VictoriaMetrics operator (or a compose stack) from one
    config.

    \b
    Examples:
      inferwatch deploy render -o k8s/ && kubectl apply -k k8s/ --server-side
      inferwatch deploy render --config deploy.yaml -o k8s/
      inferwatch deploy render --target compose -o stack/ && (cd stack && docker compose up)
      inferwatch deploy render --target compose --backend victoriametrics -o stack/
    """
    from inferwatch._files import output_dir, write_file
    from inferwatch.deploy import TARGETS, Config, load_config
    from inferwatch.deploy import render as render_files
    from inferwatch.errors import InferwatchError
    from inferwatch.options import from_flags

    def refuse(flag: str, err: Exception):
        raise InferwatchError(f"{flag} {err}")

    if target not in TARGETS:
        raise InferwatchError(f"--target {target!r}: use {' or '.join(TARGETS)}")
    deployed = from_flags(Config, flags, load_config(config), bad=refuse)  # --backend over the file's `backend`
    if target == "compose":
        from inferwatch.deploy._compose import for_folder

        deployed = for_folder(deployed, out)  # builds our image from this clone, as seen from --out
    files = render_files(deployed, target)
    output_dir(out, "--out")
    for name, text in files.items():
        write_file(out / name, text, "--out")
    typer.echo(
        f"wrote {len(files)} files to {out}"
        + (
            f" (kubectl apply -k {out} --server-side)"
            if target == "kubernetes"
            else f" (cd {out} && docker compose up)"
        )
    )


@deploy_app.command("merge-alertmanager", cls=Command)
def merge_alertmanager(
    file: Annotated[
        Path,
        typer.Argument(
            metavar="FILE",
            show_default=False,
            help="Your alertmanager.yml, or kube-prometheus-stack values with alertmanager.config.",
        ),
    ],
    config: ConfigOpt = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", metavar="FILE", show_default=False, help="Write here (default: standard output)."),
    ] = None,
):
    """Merge inferwatch's Alertmanager route into your own tree, keeping every route, receiver and inhibit rule.

    Our route (it matches our alert names only) goes first under your root; our receivers and SLO inhibit rules
    are appended. Run it again after an upgrade: it replaces what it added before.

    \b
    Examples:
      inferwatch deploy merge-alertmanager alertmanager.yml -o alertmanager.yml
      inferwatch deploy merge-alertmanager my-values.yaml --config deploy.yaml -o my-values.yaml
    """
    from inferwatch._files import write_file
    from inferwatch.deploy import load_config
    from inferwatch.deploy._alertmanager import merge_document
    from inferwatch.deploy._inputs import gather_inputs
    from inferwatch.deploy._workloads import dump
    from inferwatch.yamlio import load_document

    deployed = load_config(config)
    text = dump(merge_document(load_document(file).data, str(file), deployed, gather_inputs(deployed)))
    if out is None:
        typer.echo(text, nl=False)
    else:
        write_file(out, text, "--out")


@flags_of(DoctorOptions, after=("client",))
def doctor(*, client: ClientOptions, **flags: Any):
    """Check that every signal the dashboards, SLOs and triage need arrives, and their joins work: one line per
    check (ok, note, skipped and why, missing, wrong) with the fix; exit 1 when something is missing or wrong.

    \b
    Examples:
      inferwatch doctor --prometheus http://localhost:9090
      inferwatch doctor --prometheus http://prometheus:9090 --alertmanager http://alertmanager:9093
      inferwatch doctor --prometheus http://localhost:9090 --no-alertmanager
      inferwatch doctor --prometheus http://vmsingle:8428 --scraper http://vmagent:8429 --ruler http://vmalert:8880
      inferwatch doctor --file prometheus.yml --file k8s/monitoring/
    """
    import os

    from inferwatch.deploy import load_config
    from inferwatch.deploy._doctor import run_checks, summary
    from inferwatch.deploy._files import check_files
    from inferwatch.options import from_flags

    problem = pairs_problem(flags)
    if problem is not None:
        bad_flag(*problem)
    given = from_flags(DoctorOptions, flags)
    file = given.file
    missing = [str(p) for p in file if not p.exists()]
    if missing:
        bad_flag("--file", f"{', '.join(missing)}: no such file or folder")
    if given.prometheus is None and not file:
        bad_flag("--prometheus", "give --prometheus URL (a running stack) or --file PATH (its files)")
    deployed = load_config(given.config)
    results = check_files(deployed, list(file), not given.no_alertmanager) if file else []
    if given.prometheus is not None:
        results += run_checks(
            deployed,
            given.prometheus,
            given.alertmanager,
            given.grafana,
            os.environ.get("GRAFANA_TOKEN"),
            alertmanager_expected=not given.no_alertmanager,
            options=client,
            scraper=given.scraper,
            ruler=given.ruler,
            external_metrics=given.external_metrics,
        )
    for result in results:
        typer.echo(str(result))
    typer.echo(summary(results), err=True)
    raise typer.Exit(1 if any(r.bad for r in results) else 0)


def register(app: typer.Typer) -> None:
    app.add_typer(deploy_app, name="deploy")
    app.command("doctor", cls=Command)(connection_flags(doctor))
