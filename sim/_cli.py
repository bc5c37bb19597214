"""`inferwatch simulate`, `inferwatch load` and `inferwatch demo`."""

import sys
from typing import Any

import typer

from inferwatch.clikit import Command, refuse_flag
from inferwatch.errors import InferwatchError
from inferwatch.options import flags_of, from_flags
from inferwatch.sim._cli_options import ENGINE_VERSIONS, DemoOptions, LoadOptions, SimulateOptions

__all__ = ["register", "ENGINE_VERSIONS"]


@flags_of(SimulateOptions)
def simulate(**flags: Any):
    """Run a stand-in inference engine: an OpenAI-compatible API and vLLM's or SGLang's /metrics, no GPU.

    \b
    Examples:
      inferwatch simulate --engine vllm                  # then: curl -s localhost:8000/metrics
      inferwatch simulate --engine sglang --engine-version 0.4.4 --listen 127.0.0.1:30000
      curl -X POST localhost:8000/admin/scenario -d '{"scenario": "queueing"}'
    """
    import logging
    from dataclasses import replace

    from inferwatch.sim import EngineParams, SimulatorConfig, releases, serve

    given = from_flags(SimulateOptions, flags, bad=refuse_flag)
    engine, version = given.engine, given.engine_version
    if version is not None and version not in releases(engine):
        raise InferwatchError(
            f"--engine-version {version}: simulated {engine} releases are {', '.join(releases(engine))}"
        )
    params = replace(
        EngineParams(),
        max_num_seqs=given.max_num_seqs,
        kv_cache_tokens=given.kv_cache_tokens,
        max_num_queued_reqs=given.max_num_queued_reqs,
        decode_step_s=given.decode_step,
        reasoning_tokens=given.reasoning,
    )
    workload = _pod(given.pod, given.gpus)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = SimulatorConfig(
        engine, version, given.model, given.scenario, params, given.seed, given.gpus, workload, given.keep_pace
    )
    serve(config, *given.listen)


def _pod(text: str | None, gpus: int):
    """--pod as a Workload: POD, NAMESPACE/POD or NAMESPACE/POD/CONTAINER."""
    if text is None:
        return None
    from inferwatch.exporters.gpu import Workload

    if not gpus:
        raise InferwatchError(f"--pod {text}: only with --gpus N (it names the workload using the GPUs)")
    parts = text.split("/")
    if len(parts) > 3 or not all(parts):
        raise InferwatchError(f"--pod {text!r}: use POD, NAMESPACE/POD or NAMESPACE/POD/CONTAINER")
    return Workload(*([""] + parts if len(parts) == 1 else parts))


@flags_of(LoadOptions)
def load(**flags: Any):
    """Open-loop load: measure TTFT (first visible token), time per output token and end-to-end latency.

    The run ends shortly after --duration even against a server that never
    answers; it exits 1 when every request failed.

    \b
    Examples:
      inferwatch load --target localhost:8000 --rate 5 --duration 1m
      inferwatch load --target http://vllm:8000/v1 --rate 2 --duration 30s --json
    """
    import asyncio
    import json

    given = from_flags(LoadOptions, flags)
    from inferwatch.sim import LoadConfig, format_report, run_load

    url, rate = given.target, given.rate
    config = LoadConfig(
        url,
        rate=rate,
        duration=given.duration,
        model=given.model,
        prompt_tokens=given.prompt_tokens,
        max_tokens=given.max_tokens,
        output_tokens=given.output_tokens,
        prefix_share=given.prefix_share,
        tool_share=given.tool_share,
        timeout=given.timeout,
        response_timeout=min(10.0, given.timeout),
        seed=given.seed,
    )
    report = asyncio.run(run_load(config, progress=not given.as_json and sys.stderr.isatty()))
    if given.as_json:
        typer.echo(json.dumps(report.as_dict(), indent=2))
    else:
        typer.echo(format_report(report), nl=False)  # the report ends with its own newline
    if report.requests == 0:
        raise InferwatchError(
            f"no request was sent: at --rate {rate:g} none arrived within --duration {flags['duration']}"
        )
    if report.ok == 0:
        kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(report.errors.items()))
        raise InferwatchError(f"every request failed ({kinds}): is {url} an OpenAI-compatible server that answers?")


@flags_of(DemoOptions)
def demo(**flags: Any):
    """Two simulated engines, the normalizing exporter, a real Prometheus with inferwatch's rules, load,
    and a scripted incident: watch it being detected.

    \b
    Examples:
      inferwatch demo                       (Ctrl-C stops everything)
      inferwatch demo --headless --short    (for CI: exit 1 unless the expected alerts fired)
      inferwatch demo --engine vllm-real    (a real vLLM on this machine's CPUs: queueing induced by load)
      inferwatch demo --canary --headless   (is the new release worse? pass, fail and inconclusive, live)
    """
    from inferwatch.sim import run_demo

    given = from_flags(DemoOptions, flags, bad=refuse_flag)
    engine, no_install = given.engine, given.no_install
    headless, short, workdir = given.headless, given.short, given.workdir
    if given.canary:
        if engine != "sim" or no_install:
            raise InferwatchError("--canary plays on simulated engines: leave out --engine and --no-install")
        from inferwatch.sim._demo_canary import run_canary_demo

        raise typer.Exit(0 if run_canary_demo(headless=headless, short=short, workdir=workdir) else 1)
    if engine == "vllm-real":
        from inferwatch.sim._demo_real import run_real_demo

        ok = run_real_demo(headless=headless, short=short, workdir=workdir, install=not no_install)
        raise typer.Exit(0 if ok else 1)
    if no_install:
        raise InferwatchError("--no-install is for --engine vllm-real: the simulated demo installs nothing")
    ok = run_demo(headless=headless, short=short, workdir=workdir)
    raise typer.Exit(0 if ok else 1)


def register(app: typer.Typer) -> None:
    from inferwatch.sim._cli_capacity import capacity_app

    for command in (simulate, load, demo):
        app.command(cls=Command)(command)
    app.add_typer(capacity_app, name="capacity")
