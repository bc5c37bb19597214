"""`inferwatch normalize` (a text rewrite) and `inferwatch exporter normalize|gpu` (the exporters as servers):
flags into configs, then the library."""

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from inferwatch.clikit import Command, bad_flag, check_log_level, group
from inferwatch.exporters._config import ExporterConfig
from inferwatch.exporters._gpu_options import GpuOptions
from inferwatch.mappings.flags import MappingOpt, SourceOpt, selected_mappings
from inferwatch.options import flags_of

__all__ = ["register"]

exporter_app = group("Run an exporter.")


def normalize(
    file: Annotated[
        Path | None,
        typer.Argument(metavar="FILE", show_default=False, help="Exposition file; standard input if omitted or -."),
    ] = None,
    source: SourceOpt = None,
    drop_unmapped: Annotated[bool, typer.Option("--drop-unmapped", help="Leave out metrics no mapping knows.")] = False,
    keep_original: Annotated[
        bool, typer.Option("--keep-original", help="Keep the source series next to the common ones.")
    ] = False,
    mapping: MappingOpt = [],
):
    """Print a Prometheus text exposition translated into the common vocabulary.

    Warns on stderr when the result is not useful: empty, --source not matching
    the input, no known source, an engine without its key series, or a
    histogram cut short.

    \b
    Examples:
      curl -s localhost:8000/metrics | inferwatch normalize
      inferwatch normalize --source dcgm --drop-unmapped dcgm.txt
    """
    from inferwatch._files import read_input_text, shown
    from inferwatch.exporters import Normalizer

    catalog, mappings = selected_mappings(mapping)
    name: Path | str = file if file is not None else "-"
    text, origin = read_input_text(name), "<stdin>" if str(name) == "-" else shown(name)
    normalizer = Normalizer(mappings, catalog, source=source, drop_unmapped=drop_unmapped, keep_original=keep_original)
    result = normalizer.normalize(text, origin)
    sys.stdout.write(result.render())
    for warning in result.warnings + normalizer.check(result):
        typer.echo(f"warning: {warning}", err=True)


@exporter_app.command("normalize", cls=Command)
@flags_of(ExporterConfig, from_file=True, after=("log_level",))
def exporter_normalize(
    config: Annotated[Path | None, typer.Option(metavar="FILE", help="YAML config file; flags add to it.")] = None,
    log_level: Annotated[str, typer.Option(metavar="LEVEL", help="debug, info, warning or error.")] = "info",
    **flags: Any,
):
    """Scrape engines and exporters when scraped, normalize, and serve the union on /metrics.

    Every flag but --config and --log-level is also a key of the --config file
    (README.md lists them): flags replace its values and add to its lists.

    \b
    Examples:
      inferwatch exporter normalize --target localhost:8000 --listen 0.0.0.0:9400
      inferwatch exporter normalize --target vllm=http://vllm:8000/metrics \\
          --target gpu=http://dcgm-exporter:9400/metrics --max-running-requests llama-3-70b=256
      inferwatch exporter normalize --config exporter.yaml
    """
    import logging

    from inferwatch.exporters import Normalizer, NormalizingExporter
    from inferwatch.exporters._config import load_config
    from inferwatch.options import from_flags

    logging.basicConfig(level=check_log_level(log_level), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    cfg = from_flags(ExporterConfig, flags, load_config(str(config)) if config else None)
    if not cfg.targets:
        bad_flag("--target", "give at least one target (or `targets:` in --config)")
    names = [t.name for t in cfg.targets]
    if len(set(names)) != len(names):
        bad_flag("--target", f"target names must be unique, got {names}; use NAME=URL")
    if not cfg.target_label and len(cfg.targets) > 1:  # same names from two targets: Prometheus keeps one
        bad_flag(
            "--target-label",
            f"'' (no target label) with {len(cfg.targets)} targets would serve their series "
            "under the same labels; keep a target label (default: target) or run one "
            "exporter per target",
        )
    catalog, mappings = selected_mappings([Path(m) for m in cfg.mappings])
    normalizer = Normalizer(mappings, catalog, source=cfg.source, drop_unmapped=cfg.drop_unmapped)
    NormalizingExporter(cfg, normalizer).run()


@exporter_app.command("gpu", cls=Command)
@flags_of(GpuOptions, after=("log_level",))
def exporter_gpu(
    log_level: Annotated[str, typer.Option(metavar="LEVEL", help="debug, info, warning or error.")] = "info",
    **flags: Any,
):
    """Serve the common GPU vocabulary from NVML (or simulated GPUs), labelled with the pod using each GPU.

    \b
    Examples:
      inferwatch exporter gpu --listen 0.0.0.0:9401 --interval 1s
      inferwatch exporter gpu --backend simulated --gpus 2 --follow localhost:8000 --workload demo/vllm-0
      curl -X POST localhost:9401/admin/scenario -d '{"scenario": "stall"}'
    """
    import logging

    from inferwatch.exporters.gpu._config import BadOption, build_exporter, exporter_config
    from inferwatch.options import from_flags

    level = check_log_level(log_level)
    given = from_flags(GpuOptions, flags)  # each flag checked by its field
    try:
        config = exporter_config(given)
    except BadOption as err:
        bad_flag(err.flag, err)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    build_exporter(config).run(config.host, config.port)


def register(app: typer.Typer) -> None:
    app.command(cls=Command)(normalize)
    app.add_typer(exporter_app, name="exporter")
