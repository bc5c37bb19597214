"""`inferwatch simulate`, `inferwatch load` and `inferwatch demo`."""

import sys
from typing import Annotated

import typer

from inferwatch.clikit import Command, bad_flag
from inferwatch.errors import InferwatchError

__all__ = ["register", "ENGINE_VERSIONS"]

# the releases of sim/releases.yaml, spelled out so that --help need not read it (a test keeps them in step)
ENGINE_VERSIONS = "vllm 0.33.0, 0.32.0, 0.10.2, 0.7.3; sglang 0.5.23, 0.5.2, 0.4.4"


def simulate(
    engine: Annotated[
        str, typer.Option(metavar="ENGINE", help="vllm or sglang: whose API and /metrics to imitate.")
    ] = "vllm",
    engine_version: Annotated[
        str | None,
        typer.Option(
            metavar="VERSION",
            help=f"Release whose metric names, labels and buckets to expose: "
            f"{ENGINE_VERSIONS} (default: the first, the newest).",
        ),
    ] = None,
    model: Annotated[str, typer.Option(metavar="NAME", help="The served model name.")] = "llama-3-8b",
    listen: Annotated[str, typer.Option(metavar="HOST:PORT", help="Where to serve.")] = "127.0.0.1:8000",
    scenario: Annotated[
        str,
        typer.Option(
            metavar="SCENARIO",
            help="normal, or a kind of trouble: queueing, long-prompts, "
            "prefix-cache-loss, kv-pressure, slow-decode, "
            "spec-decode-collapse, thinking, long-outputs, "
            "gpu-not-computing (or gpu-stall), not-the-engine, errors, "
            "truncation, broken-tools, flaky-metrics or metrics-down; "
            "switch later with POST /admin/scenario.",
        ),
    ] = "normal",
    max_num_seqs: Annotated[int, typer.Option(metavar="N", help="Concurrency cap.")] = 32,
    kv_cache_tokens: Annotated[int, typer.Option(metavar="N", help="KV-cache capacity in tokens.")] = 32768,
    max_num_queued_reqs: Annotated[
        int,
        typer.Option(
            metavar="N",
            help="Refuse (503) a request arriving while N are running or waiting, as vLLM's "
            "--max-num-queued-reqs; 0: no limit.",
        ),
    ] = 0,
    decode_step: Annotated[
        float, typer.Option(metavar="SECONDS", help="Seconds per decode step at batch size 1.")
    ] = 0.02,
    reasoning: Annotated[int, typer.Option(metavar="N", help="Hidden reasoning tokens before visible text.")] = 0,
    seed: Annotated[int | None, typer.Option(metavar="N", help="Random seed, for repeatable runs.")] = None,
    gpus: Annotated[
        int,
        typer.Option(metavar="N", help="Also serve N simulated GPUs on /metrics (gpu_* series following this engine)."),
    ] = 0,
    pod: Annotated[
        str | None,
        typer.Option(
            metavar="[NAMESPACE/]POD[/CONTAINER]",
            show_default=False,
            help="The workload the --gpus name as using them (namespace, pod, container labels, as the NVML "
            "exporter writes them), so they join the engine's series on pod; default: pod $HOSTNAME "
            "(the pod name in Kubernetes), namespace $POD_NAMESPACE.",
        ),
    ] = None,
    keep_pace: Annotated[
        float,
        typer.Option(
            metavar="SECONDS",
            help=(
                "Make up steps a busy host wakes late, up to SECONDS behind, so the modelled engine keeps its "
                "speed (the demo uses 2); 0: each late wake-up slows it."
            ),
        ),
    ] = 0.0,
):
    """Run a stand-in inference engine: an OpenAI-compatible API and vLLM's or SGLang's /metrics, no GPU.

    \b
    Examples:
      inferwatch simulate --engine vllm                  # then: curl -s localhost:8000/metrics
      inferwatch simulate --engine sglang --engine-version 0.4.4 --listen 127.0.0.1:30000
      curl -X POST localhost:8000/admin/scenario -d '{"scenario": "queueing"}'
    """
    import logging
    from dataclasses import replace

    from inferwatch._urls import listen_address
    from inferwatch.sim import EngineParams, SimulatorConfig, releases, serve

    if engine not in ("vllm", "sglang"):
        raise InferwatchError(f"--engine {engine!r}: use vllm or sglang")
    if engine_version is not None and engine_version not in releases(engine):
        raise InferwatchError(
            f"--engine-version {engine_version}: simulated {engine} releases are {', '.join(releases(engine))}"
        )
    try:
        host, port = listen_address(listen, "127.0.0.1:8000")
    except ValueError as err:
        raise InferwatchError(f"--listen: {err}") from None
    if max_num_queued_reqs < 0:
        raise InferwatchError(f"--max-num-queued-reqs {max_num_queued_reqs}: use 0 (no limit) or more")
    params = replace(
        EngineParams(),
        max_num_seqs=max_num_seqs,
        kv_cache_tokens=kv_cache_tokens,
        max_num_queued_reqs=max_num_queued_reqs,
        decode_step_s=decode_step,
        reasoning_tokens=reasoning,
    )
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not 0 <= gpus <= 64:
        raise InferwatchError(f"--gpus {gpus}: use 0 to 64")
    if not 0 <= keep_pace <= 60:
        raise InferwatchError(f"--keep-pace {keep_pace}: use 0 to 60 seconds")
    serve(
        SimulatorConfig(engine, engine_version, model, scenario, params, seed, gpus, _pod(pod, gpus), keep_pace),
        host,
        port,
    )


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


def load(
    target: Annotated[
        str,
        typer.Option(
            metavar="URL",
            help="An OpenAI-compatible server: http://HOST:PORT, its OpenAI base "
            "URL http://HOST:PORT/v1, or HOST:PORT.",
        ),
    ],
    rate: Annotated[float, typer.Option(metavar="R", help="Requests per second (Poisson arrivals).")] = 2.0,
    duration: Annotated[str, typer.Option(metavar="DURATION", help="How long to send, e.g. 30s or 5m.")] = "30s",
    timeout: Annotated[
        str,
        typer.Option(
            metavar="DURATION",
            help="Give up on a request after this long; one without response headers after 10s fails at once.",
        ),
    ] = "120s",
    model: Annotated[
        str | None, typer.Option(metavar="NAME", help="Model to ask (default: the first of /v1/models).")
    ] = None,
    prompt_tokens: Annotated[int, typer.Option(metavar="N", help="Mean prompt length in words.")] = 200,
    max_tokens: Annotated[int, typer.Option(metavar="N", help="max_tokens of each request.")] = 512,
    output_tokens: Annotated[
        int | None,
        typer.Option(
            metavar="N",
            help="Draw each request's max_tokens around this mean (outputs then mostly end at the "
            "length limit, as in fixed-length benchmarks).",
        ),
    ] = None,
    prefix_share: Annotated[
        float, typer.Option(metavar="SHARE", help="Share of requests with a shared system prompt.")
    ] = 0.3,
    tool_share: Annotated[float, typer.Option(metavar="SHARE", help="Share of requests offering a tool.")] = 0.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    seed: Annotated[int | None, typer.Option(metavar="N", help="Random seed.")] = None,
):
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

    from inferwatch._urls import openai_server_url

    seconds, request_timeout = _seconds(duration, "--duration"), _seconds(timeout, "--timeout")
    if rate <= 0:
        bad_flag("--rate", "must be above 0")
    try:
        url = openai_server_url(target)
    except ValueError as err:
        bad_flag("--target", err)
    from inferwatch.sim import LoadConfig, format_report, run_load

    config = LoadConfig(
        url,
        rate=rate,
        duration=seconds,
        model=model,
        prompt_tokens=prompt_tokens,
        max_tokens=max_tokens,
        output_tokens=output_tokens,
        prefix_share=prefix_share,
        tool_share=tool_share,
        timeout=request_timeout,
        response_timeout=min(10.0, request_timeout),
        seed=seed,
    )
    report = asyncio.run(run_load(config, progress=not as_json and sys.stderr.isatty()))
    if as_json:
        typer.echo(json.dumps(report.as_dict(), indent=2))
    else:
        typer.echo(format_report(report), nl=False)  # the report ends with its own newline
    if report.requests == 0:
        raise InferwatchError(f"no request was sent: at --rate {rate:g} none arrived within --duration {duration}")
    if report.ok == 0:
        kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(report.errors.items()))
        raise InferwatchError(f"every request failed ({kinds}): is {url} an OpenAI-compatible server that answers?")


def _seconds(text: str, flag: str) -> float:
    from inferwatch.durations import parse_duration

    try:
        value = float(parse_duration(text, units="ms s m h"))
    except ValueError as err:
        bad_flag(flag, err)
    if value <= 0:
        bad_flag(flag, f"{text!r} must be above 0, e.g. 30s")
    return value


def demo(
    headless: Annotated[
        bool, typer.Option("--headless", help="No live screen; exit 1 if the expected alerts did not fire.")
    ] = False,
    short: Annotated[bool, typer.Option("--short", help="A compressed script (under 2 minutes) for CI.")] = False,
    workdir: Annotated[str | None, typer.Option(metavar="DIR", help="Keep Prometheus data and logs here.")] = None,
    engine: Annotated[
        str,
        typer.Option(
            metavar="ENGINE",
            help="sim (two simulated engines) or vllm-real (a "
            "real vLLM CPU build serving a tiny local "
            "model; installed once, ~670 MB, 2-3 min).",
        ),
    ] = "sim",
    no_install: Annotated[
        bool,
        typer.Option(
            "--no-install", help="With --engine vllm-real: refuse instead of installing vLLM when it is not yet."
        ),
    ] = False,
    canary: Annotated[
        bool,
        typer.Option(
            "--canary",
            help="The canary story instead: one stable version and three canaries (equal, slower, too quiet) "
            "under load, each judged by `inferwatch canary`; exit 1 unless they pass, fail and read inconclusive.",
        ),
    ] = False,
):
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

    if engine not in ("sim", "vllm-real"):
        raise InferwatchError(f"--engine {engine!r}: use sim or vllm-real")
    if canary:
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
