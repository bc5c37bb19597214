"""`inferwatch simulate`, `inferwatch load` and `inferwatch demo`."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from dataclasses import replace
from typing import Annotated, Optional

import typer

from inferwatch.errors import InferwatchError

__all__ = ["register"]


def simulate(engine: Annotated[str, typer.Option(help="vllm or sglang: whose API and /metrics to imitate.")] = "vllm",
             engine_version: Annotated[Optional[str], typer.Option(
                 help="Release whose metric names, labels and buckets to expose (default: the newest simulated).")]
             = None,
             model: Annotated[str, typer.Option(help="The served model name.")] = "llama-3-8b",
             listen: Annotated[str, typer.Option(help="HOST:PORT to serve on.")] = "127.0.0.1:8000",
             scenario: Annotated[str, typer.Option(help="normal, queueing, thinking, slow-decode, errors, truncation,"
                                                        " broken-tools or flaky-metrics; switch later with POST "
                                                        "/admin/scenario.")] = "normal",
             max_num_seqs: Annotated[int, typer.Option(help="Concurrency cap.")] = 32,
             kv_cache_tokens: Annotated[int, typer.Option(help="KV-cache capacity in tokens.")] = 32768,
             decode_step: Annotated[float, typer.Option(help="Seconds per decode step at batch size 1.")] = 0.02,
             reasoning: Annotated[int, typer.Option(help="Hidden reasoning tokens before visible text.")] = 0,
             seed: Annotated[Optional[int], typer.Option(help="Random seed, for repeatable runs.")] = None):
    """Run a stand-in inference engine: an OpenAI-compatible API and vLLM's or SGLang's /metrics, no GPU."""
    from inferwatch.exporters._config import parse_listen
    from inferwatch.sim import EngineParams, SimulatorConfig, releases, serve

    if engine not in ("vllm", "sglang"):
        raise InferwatchError(f"--engine {engine!r}: use vllm or sglang")
    if engine_version is not None and engine_version not in releases(engine):
        raise InferwatchError(f"--engine-version {engine_version}: simulated {engine} releases are "
                              f"{', '.join(releases(engine))}")
    try:
        host, port = parse_listen(listen)
    except ValueError as err:
        raise InferwatchError(f"--listen: {err}") from None
    params = replace(EngineParams(), max_num_seqs=max_num_seqs, kv_cache_tokens=kv_cache_tokens,
                     decode_step_s=decode_step, reasoning_tokens=reasoning)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    serve(SimulatorConfig(engine, engine_version, model, scenario, params, seed), host, port)


def load(target: Annotated[str, typer.Option(help="Base URL of an OpenAI-compatible server.")],
         rate: Annotated[float, typer.Option(help="Requests per second (Poisson arrivals).")] = 2.0,
         duration: Annotated[str, typer.Option(help="How long to send, e.g. 30s or 5m.")] = "30s",
         model: Annotated[Optional[str], typer.Option(help="Model to ask (default: the first of /v1/models).")] = None,
         prompt_tokens: Annotated[int, typer.Option(help="Mean prompt length in words.")] = 200,
         max_tokens: Annotated[int, typer.Option(help="max_tokens of each request.")] = 512,
         output_tokens: Annotated[Optional[int], typer.Option(
             help="Draw each request's max_tokens around this mean (outputs then mostly end at the length "
                  "limit, as in fixed-length benchmarks).")] = None,
         prefix_share: Annotated[float, typer.Option(help="Share of requests with a shared system prompt.")] = 0.3,
         tool_share: Annotated[float, typer.Option(help="Share of requests offering a tool.")] = 0.0,
         as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
         seed: Annotated[Optional[int], typer.Option(help="Random seed.")] = None):
    """Open-loop load: measure TTFT (first visible token), time per output token and end-to-end latency."""
    from inferwatch.durations import parse_duration
    from inferwatch.sim import LoadConfig, format_report, run_load

    try:
        seconds = float(parse_duration(duration, units="s m h"))
    except ValueError as err:
        raise InferwatchError(f"--duration: {err}") from None
    if rate <= 0:
        raise InferwatchError("--rate must be above 0")
    config = LoadConfig(target.rstrip("/"), rate=rate, duration=seconds, model=model, prompt_tokens=prompt_tokens,
                        max_tokens=max_tokens, output_tokens=output_tokens, prefix_share=prefix_share,
                        tool_share=tool_share, seed=seed)
    report = asyncio.run(run_load(config, progress=not as_json and sys.stderr.isatty()))
    if as_json:
        typer.echo(json.dumps(report.as_dict(), indent=2))
    else:
        typer.echo(format_report(report), nl=False)         # the report ends with its own newline


def demo(headless: Annotated[bool, typer.Option(help="No live screen; exit 1 if the expected alerts did not "
                                                     "fire.")] = False,
         short: Annotated[bool, typer.Option(help="A compressed script (about 2 minutes) for CI.")] = False,
         workdir: Annotated[Optional[str], typer.Option(help="Keep Prometheus data and logs here.")] = None):
    """Two simulated engines, the normalizing exporter, a real Prometheus with inferwatch's rules, load,
    and a scripted incident: watch it being detected."""
    from inferwatch.sim import run_demo

    ok = run_demo(headless=headless, short=short, workdir=workdir)
    raise typer.Exit(0 if ok else 1)


def register(app: typer.Typer) -> None:
    app.command()(simulate)
    app.command()(load)
    app.command()(demo)
