"""The `inferwatch` command: a thin typer layer over the library.

Each command parses its flags, calls one library function and prints. Every
InferwatchError becomes `error: ...` on stderr and exit status 1; a usage
error, or an input or output that cannot be used at all (InputError, an
OSError on standard output), one `error: ...` line and exit status 2. Everything beyond typer
is imported inside the command that needs it, so `--help` and `normalize` do
not pay for aiohttp, grafanalib or the simulator.
"""

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from inferwatch import __version__
from inferwatch._cli_dashboards import dashboards_app
from inferwatch._cli_sim import register as register_sim_commands
from inferwatch.frontdoor._cli import register as register_frontdoor
from inferwatch.deploy._cli import register as register_deploy
from inferwatch.triage._cli import register as register_triage
from inferwatch.cost._cli import register as register_cost
from inferwatch.canary._cli import register as register_canary
from inferwatch._cli_slo import slo_app
from inferwatch._typer import plain_metavars, plain_strings
from inferwatch.errors import InferwatchError

__all__ = ["app", "main"]

plain_metavars()
plain_strings()

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
app = typer.Typer(help=HELP, no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  rich_markup_mode=None)
mappings_app = typer.Typer(help="The common vocabulary and the per-source mappings.", no_args_is_help=True,
                           rich_markup_mode=None)
exporter_app = typer.Typer(help="Run an exporter.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(mappings_app, name="mappings")
app.add_typer(exporter_app, name="exporter")
app.add_typer(slo_app, name="slo")
app.add_typer(dashboards_app, name="dashboards")
register_sim_commands(app)
register_frontdoor(app)
register_deploy(app)
register_triage(app)
register_cost(app)
register_canary(app)

MappingOpt = Annotated[list[Path], typer.Option("--mapping", "-m", metavar="FILE",
                                                help="Extra mapping file (repeatable).")]
SourceOpt = Annotated[Optional[str], typer.Option(metavar="SOURCE",
                                                  help="Use this mapping only (vllm, sglang, dcgm or a user's).")]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"inferwatch {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                                help="Print the version and exit.")] = False,
          max_input: Annotated[Optional[str], typer.Option(
              "--max-input", metavar="SIZE", help="Largest file any command reads, e.g. 256MiB; a larger one is "
                                                  "refused (exit 2) [$INFERWATCH_MAX_INPUT, else 64MiB].")] = None):
    import os

    from inferwatch._files import MAX_INPUT_ENV, parse_size

    if max_input is not None:
        try:
            parse_size(max_input)
        except ValueError as err:
            _bad("--max-input", err)
        os.environ[MAX_INPUT_ENV] = max_input


def _mappings(extra: list[Path], source: str | None = None):
    from inferwatch.mappings import load_catalog, load_mappings, select_source

    catalog = load_catalog()
    mappings = load_mappings(extra, catalog)
    if source is not None:
        mappings = [select_source(mappings, source)]
    return catalog, mappings


@app.command()
def build(out: Annotated[Path, typer.Option("--out", "-o", metavar="DIR", help="Bundle folder.")] = Path("build"),
          check: Annotated[bool, typer.Option("--check", help="Write nothing; exit 1 if a checked-in copy drifted "
                                                              "from what the code generates.")] = False):
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
    from inferwatch._files import output_dir

    if check:
        stale = builder.check()
        for path in stale:
            typer.echo(f"stale: {path} (run `inferwatch build` to regenerate)", err=True)
        if not stale:
            typer.echo("up to date: the checked-in generated files match the code")
        raise typer.Exit(1 if stale else 0)
    output_dir(out, "--out")
    for path in builder.refresh_sources():
        typer.echo(f"updated {path}")
    try:
        written = builder.write_bundle(out)
    except OSError as err:
        raise InferwatchError(f"--out {out}: cannot write {err.filename or out}: {err.strerror}") from None
    for path in written:
        typer.echo(f"wrote {path}")


@app.command()
def normalize(file: Annotated[Optional[Path], typer.Argument(metavar="FILE", show_default=False,
                                                             help="Exposition file; standard input if omitted "
                                                                  "or -.")] = None,
              source: SourceOpt = None,
              drop_unmapped: Annotated[bool, typer.Option("--drop-unmapped",
                                                          help="Leave out metrics no mapping knows.")] = False,
              keep_original: Annotated[bool, typer.Option("--keep-original",
                                                          help="Keep the source series next to the common "
                                                               "ones.")] = False,
              mapping: MappingOpt = []):
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

    catalog, mappings = _mappings(mapping)
    file = file if file is not None else "-"
    text, origin = read_input_text(file), "<stdin>" if str(file) == "-" else shown(file)
    normalizer = Normalizer(mappings, catalog, source=source, drop_unmapped=drop_unmapped,
                            keep_original=keep_original)
    result = normalizer.normalize(text, origin)
    sys.stdout.write(result.render())
    for warning in result.warnings + normalizer.check(result):
        typer.echo(f"warning: {warning}", err=True)


@mappings_app.command("check")
def mappings_check(files: Annotated[list[Path], typer.Argument(metavar="FILE", show_default=False,
                                                               help="Mapping files to validate.")]):
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


@mappings_app.command("catalog")
def mappings_catalog():
    """Print the common vocabulary.

    \b
    Example:
      inferwatch mappings catalog | grep time_to_first_token
    """
    from inferwatch.mappings import load_catalog

    for metric in load_catalog().metrics.values():
        typer.echo(f"{metric.name:42} {metric.type:10} {metric.unit:9} {metric.help}")


@mappings_app.command("relabel")
def mappings_relabel(fmt: Annotated[str, typer.Option("--format", metavar="FORMAT",
                                                      help="prometheus or servicemonitor")] = "prometheus",
                     source: SourceOpt = None, mapping: MappingOpt = []):
    """Print metric_relabel_configs (or ServiceMonitor metricRelabelings) that rename at scrape time.

    \b
    Examples:
      inferwatch mappings relabel > relabel.yaml
      inferwatch mappings relabel --format servicemonitor --source vllm
    """
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
    """Print recording rules for what relabeling cannot do (scaling, derived series, old-name fallbacks).

    \b
    Examples:
      inferwatch mappings rules > inferwatch-mappings.rules.yaml
      inferwatch mappings rules --source vllm
    """
    from inferwatch._yaml import dump_yaml
    from inferwatch.mappings import recording_rules

    _, mappings = _mappings(mapping, source)
    typer.echo(dump_yaml(recording_rules(mappings)), nl=False)


def _bad(param: str, err: Exception):
    raise typer.BadParameter(str(err), param_hint=param)


@exporter_app.command("normalize")
def exporter_normalize(
        target: Annotated[list[str], typer.Option(metavar="[NAME=]URL",
                                                  help="URL or HOST:PORT of a /metrics endpoint, optionally "
                                                       "NAME=... (repeatable).")] = [],
        listen: Annotated[Optional[str], typer.Option(metavar="HOST:PORT",
                                                      help="Where to serve /metrics [0.0.0.0:9400].")] = None,
        timeout: Annotated[Optional[str], typer.Option(metavar="DURATION",
                                                       help="Per-target scrape timeout, e.g. 5s [5s].")] = None,
        max_running_requests: Annotated[list[str], typer.Option(
            metavar="MODEL=N", help="The concurrency cap, served as llm_max_running_requests (repeatable).")] = [],
        config: Annotated[Optional[Path], typer.Option(metavar="FILE", help="YAML config file; flags add to it.")]
        = None,
        source: SourceOpt = None,
        drop_unmapped: Annotated[bool, typer.Option("--drop-unmapped", help="Serve only mapped metrics.")] = False,
        target_label: Annotated[Optional[str], typer.Option(
            metavar="LABEL", help="Label naming the target on every series; '' for none [target].")] = None,
        min_interval: Annotated[Optional[str], typer.Option(
            metavar="DURATION", help="Fetch each target at most this often; concurrent scrapes share it [1s].")]
        = None,
        max_labels: Annotated[Optional[str], typer.Option(
            metavar="N", help="Drop samples with more labels than this (a counted error); 0 for no limit [64].")]
        = None,
        max_body: Annotated[Optional[str], typer.Option(
            metavar="SIZE", help="Largest body read from a target, inflated, e.g. 64MiB; a larger one is a "
                                 "too_large error [16MiB].")] = None,
        mapping: MappingOpt = [],
        log_level: Annotated[str, typer.Option(metavar="LEVEL", help="debug, info, warning or error.")] = "info"):
    """Scrape engines and exporters when scraped, normalize, and serve the union on /metrics.

    \b
    Examples:
      inferwatch exporter normalize --target localhost:8000 --listen 0.0.0.0:9400
      inferwatch exporter normalize --target vllm=http://vllm:8000/metrics \\
          --target gpu=http://dcgm-exporter:9400/metrics --max-running-requests llama-3-70b=256
      inferwatch exporter normalize --config exporter.yaml
    """
    import logging
    from dataclasses import replace

    from inferwatch.exporters import NormalizingExporter, Normalizer
    from inferwatch.exporters._config import (ExporterConfig, load_config, parse_cap, parse_duration,
                                              parse_listen, parse_max_body, parse_max_labels, parse_target,
                                              parse_target_label)

    if log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        _bad("--log-level", ValueError(f"{log_level!r}: use debug, info, warning or error"))
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
    for flag, key, value, parse in (("--target-label", "target_label", target_label, parse_target_label),
                                    ("--min-interval", "min_interval", min_interval, parse_duration),
                                    ("--max-labels", "max_labels", max_labels, parse_max_labels),
                                    ("--max-body", "max_body", max_body, parse_max_body)):
        if value is not None:
            try:
                cfg = replace(cfg, **{key: parse(value)})
            except ValueError as err:
                _bad(flag, err)
    if not cfg.targets:
        _bad("--target", ValueError("give at least one target (or `targets:` in --config)"))
    names = [t.name for t in cfg.targets]
    if len(set(names)) != len(names):
        _bad("--target", ValueError(f"target names must be unique, got {names}; use NAME=URL"))
    if not cfg.target_label and len(cfg.targets) > 1:    # same names from two targets: Prometheus keeps one
        _bad("--target-label", ValueError(f"'' (no target label) with {len(cfg.targets)} targets would serve their "
                                          "series under the same labels; keep a target label (default: target) "
                                          "or run one exporter per target"))
    catalog, mappings = _mappings([Path(m) for m in cfg.mappings])
    normalizer = Normalizer(mappings, catalog, source=cfg.source, drop_unmapped=cfg.drop_unmapped)
    NormalizingExporter(cfg, normalizer).run()


@exporter_app.command("gpu")
def exporter_gpu(
        listen: Annotated[str, typer.Option(metavar="HOST:PORT", help="Where to serve /metrics.")] = "0.0.0.0:9401",
        interval: Annotated[str, typer.Option(metavar="DURATION", help="Sampling period (the GPM window), "
                                                                       "100ms to 1h.")] = "1s",
        backend: Annotated[str, typer.Option(metavar="BACKEND", help="nvml (the GPUs of this host) or simulated.")]
        = "nvml",
        hostname: Annotated[Optional[str], typer.Option(metavar="NAME", help="The hostname label [$NODE_NAME, "
                                                                               "else this host's name].")] = None,
        pod_list: Annotated[Optional[str], typer.Option(metavar="FILE|URL", help="A kubelet PodList (its /pods "
                                                                                  "answer) naming pods by UID.")]
        = None,
        kubelet_pods_dir: Annotated[str, typer.Option(metavar="DIR", help="The kubelet's pod folders.")]
        = "/var/lib/kubelet/pods",
        proc_root: Annotated[str, typer.Option(metavar="DIR", help="The host's /proc (mounted in a container).")]
        = "/proc",
        pod_resources_socket: Annotated[str, typer.Option(
            metavar="PATH", help="The kubelet's PodResources API socket: GPU -> pod, tried before the processes "
                                 "(/proc); '' turns it off.")] = "/var/lib/kubelet/pod-resources/kubelet.sock",
        gpus: Annotated[int, typer.Option(metavar="N", help="Simulated: how many GPUs.")] = 1,
        follow: Annotated[Optional[str], typer.Option(metavar="URL", help="Simulated: an `inferwatch simulate` "
                                                                          "server whose load the GPUs follow.")]
        = None,
        scenario: Annotated[str, typer.Option(metavar="SCENARIO", help="Simulated: normal or stall (GPU-Util "
                                                                       "high, SMs idle); switch with POST "
                                                                       "/admin/scenario.")] = "normal",
        workload: Annotated[Optional[str], typer.Option(metavar="NS/POD[/CONTAINER]",
                                                        help="Simulated: the pod the GPUs are labelled with.")]
        = None,
        stale_after: Annotated[Optional[str], typer.Option(
            metavar="DURATION", help="A sampling pass older than this is served as down (gpu_exporter_up 0, no "
                                     "GPU values), never as live [default: 2 intervals + 5s].")] = None,
        idle_timeout: Annotated[str, typer.Option(metavar="DURATION", help="An idle client connection is closed "
                                                                           "after this.")] = "10s",
        max_connections: Annotated[int, typer.Option(
            metavar="N", help="Client connections served at once; more are closed at once and counted in "
                              "inferwatch_gpu_exporter_errors_total{kind=\"connections_refused\"}.")] = 64,
        log_level: Annotated[str, typer.Option(metavar="LEVEL", help="debug, info, warning or error.")] = "info"):
    """Serve the common GPU vocabulary from NVML (or simulated GPUs), labelled with the pod using each GPU.

    \b
    Examples:
      inferwatch exporter gpu --listen 0.0.0.0:9401 --interval 1s
      inferwatch exporter gpu --backend simulated --gpus 2 --follow localhost:8000 --workload demo/vllm-0
      curl -X POST localhost:9401/admin/scenario -d '{"scenario": "stall"}'
    """
    import logging

    from inferwatch.exporters.gpu._config import BadOption, build_exporter, gpu_config

    if log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        _bad("--log-level", ValueError(f"{log_level!r}: use debug, info, warning or error"))
    try:
        config = gpu_config(listen, interval, backend, gpus, follow, scenario, hostname, workload, proc_root,
                            kubelet_pods_dir, pod_list, stale_after, idle_timeout, max_connections,
                            pod_resources_socket)
    except BadOption as err:
        _bad(err.flag, err)
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    build_exporter(config).run(config.host, config.port)


def _usage_error(err: Exception) -> None:
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
    for stream in (sys.stdout, sys.stderr):   # a file name that is not UTF-8 is printed as its bytes, no crash
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

    return err.filename is None and err.errno in (errno.ENOSPC, errno.EPIPE, errno.EIO, errno.EFBIG,
                                                  errno.EDQUOT)


if __name__ == "__main__":
    main()
