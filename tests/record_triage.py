"""Record the incidents `inferwatch triage` is tested on: run once by a developer, never by the suite.

    python tests/record_triage.py                         # 4 min baseline + 4 min incident, about 10 minutes
    python tests/record_triage.py --variant swapped       # the same kinds on the other engines: fixtures/triage/swapped
    python tests/record_triage.py --baseline 60 --incident 60 --out /tmp/try   # a quick look

For every model of the variant it starts a simulated engine (`inferwatch simulate`, its own process and model name,
one simulated GPU naming the engine's pod: `--gpus 1 --pod`), a front door in front of it (`inferwatch
frontdoor`), one normalizing exporter over every engine, and a real Prometheus scraping the exporter, the front
doors and the simulated GPUs (job `gpu`) every --step seconds. Engine series get the pod's `namespace` and `pod`
from the exporter's target name, as a Kubernetes pod target's labels would give them, so triage can join GPUs
to models on (namespace, pod). Load
goes through each front door (sim/_load.py). Every model runs `normal` for the baseline, then each switches at
once to its own scenario (POST /admin/scenario) for the incident; `m-doubling` stays normal with twice the
traffic (nothing wrong), `m-queueing` with 2.6 times the traffic its four slots serve, `m-quiet` as it was.

The raw samples of every series triage can need are then written to `recording.json.gz` (see
tests/triage_tools.py, which replays them into a Prometheus TSDB with promtool) and the windows, the expected
kinds and what ran to `manifest.yaml`.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, replace
from itertools import pairwise
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from promtools import prometheus  # noqa: E402 - the tests' folder is not a package
from triage_tools import FORMAT, api  # noqa: E402

from inferwatch.sim import LoadConfig, default_release, run_load, scenarios  # noqa: E402
from inferwatch.sim._demo import _Processes, _set_scenario, _wait_ready, free_port  # noqa: E402

NAMESPACE = "inference"
# series triage never needs: the runtimes' own, Prometheus' scrape bookkeeping (but `up`), creation times
DROP = ("go_", "process_", "python_", "scrape_", "prometheus_", "promhttp_", "net_conntrack_")
DROP_SUFFIX = ("_created",)


@dataclass(frozen=True)
class Model:
    name: str
    engine: str  # vllm or sglang
    scenario: str  # during the incident
    kind: str  # what triage should say first; "none" for nothing wrong
    cap: int = 16  # --max-num-seqs
    surge: float = 1.0  # the incident's traffic over the baseline's
    version: str | None = None  # --engine-version (default: the newest simulated release)

    @property
    def pod(self) -> str:
        return f"{self.name}-0"


MAIN = [
    Model("m-quiet", "sglang", "normal", "none"),
    Model("m-doubling", "vllm", "normal", "none", surge=2.0),
    # queueing as the kind says: more traffic than the slots (a small cap) serve, steps as fast as before. (The
    # `queueing` scenario, the demo's, also makes every step six times slower: slow decode that then queues.)
    Model("m-queueing", "vllm", "normal", "queueing", cap=4, surge=2.6),
    Model("m-long-prompts", "vllm", "long-prompts", "long-prompts"),
    Model("m-prefix-cache-loss", "vllm", "prefix-cache-loss", "prefix-cache-loss"),
    Model("m-kv-pressure", "vllm", "kv-pressure", "kv-pressure"),
    Model("m-slow-decode", "vllm", "slow-decode", "slow-decode"),
    Model("m-spec-decode-collapse", "vllm", "spec-decode-collapse", "spec-decode-collapse"),
    Model("m-thinking", "sglang", "thinking", "thinking"),
    Model("m-long-outputs", "sglang", "long-outputs", "long-outputs"),
    Model("m-gpu-not-computing", "vllm", "gpu-not-computing", "gpu-not-computing"),
    Model("m-errors", "sglang", "errors", "errors"),
    Model("m-not-the-engine", "vllm", "not-the-engine", "not-the-engine"),
    Model("m-missing-data", "vllm", "metrics-down", "missing-data"),
]
# the same kinds with the engines swapped (spec-decode-collapse on SGLang reads its acceptance gauge), an older
# vLLM release for two models, other traffic, a shorter scrape interval: triage must not depend on one engine,
# one release or one load
OTHER_ENGINE = {"vllm": "sglang", "sglang": "vllm"}
SWAPPED_CHANGES = {
    "m-quiet": {"version": "0.10.2"},
    "m-long-outputs": {"version": "0.10.2"},
    "m-queueing": {"cap": 5, "surge": 2.5},
}
SWAPPED = [replace(m, engine=OTHER_ENGINE[m.engine], **SWAPPED_CHANGES.get(m.name, {})) for m in MAIN]


@dataclass(frozen=True)
class Variant:
    models: list[Model]
    load: dict  # what every model's users send (LoadConfig's fields)
    step: int  # scrape interval, seconds
    folder: str  # under tests/fixtures/


VARIANTS = {
    # a chat product with a long shared system prompt, answers of ~120 tokens
    "main": Variant(
        MAIN,
        {"rate": 1.0, "prompt_tokens": 200, "prefix_share": 0.7, "prefix_tokens": 768, "max_tokens": 2048},
        5,
        "triage",
    ),
    "swapped": Variant(
        SWAPPED,
        {"rate": 1.2, "prompt_tokens": 300, "prefix_share": 0.5, "prefix_tokens": 768, "max_tokens": 2048},
        3,
        "triage/swapped",
    ),
}


def _start(procs: _Processes, ports: dict[str, int], models: list[Model]) -> None:
    me = [sys.executable, "-m", "inferwatch"]
    for i, m in enumerate(models):
        version = ["--engine-version", m.version] if m.version else []
        procs.start(
            m.name,
            me
            + [
                "simulate",
                "--engine",
                m.engine,
                *version,
                "--model",
                m.name,
                "--listen",
                f"127.0.0.1:{ports[m.name]}",
                "--max-num-seqs",
                str(m.cap),
                "--seed",
                str(i + 1),
                "--gpus",
                "1",
                "--pod",
                f"{NAMESPACE}/{m.pod}/engine",
            ],
        )
        procs.start(
            f"frontdoor-{m.name}",
            me
            + [
                "frontdoor",
                "--upstream",
                f"http://127.0.0.1:{ports[m.name]}",
                "--listen",
                f"127.0.0.1:{ports['door-' + m.name]}",
                "--metrics-listen",
                f"127.0.0.1:{ports['admin-' + m.name]}",
            ],
        )
    procs.start(
        "exporter",
        me
        + [
            "exporter",
            "normalize",
            "--listen",
            f"127.0.0.1:{ports['exporter']}",
            "--timeout",
            "1500ms",
            "--drop-unmapped",
            *[a for m in models for a in ("--target", f"{m.pod}=http://127.0.0.1:{ports[m.name]}/metrics")],
            *[a for m in models for a in ("--max-running-requests", f"{m.name}={m.cap}")],
        ],
    )


def _prometheus_config(ports: dict[str, int], step: int, models: list[Model]) -> dict:
    # the exporter names each engine's target after its pod; engine series get that pod and the namespace, as a
    # pod's target labels would give them (the GPU series already name the pod using them: left as they are)
    pod_labels = [
        {
            "source_labels": ["pod", "target"],
            "separator": ";",
            "regex": ";(.+)",
            "target_label": "pod",
            "replacement": "$1",
        },
        {
            "source_labels": ["namespace", "target"],
            "separator": ";",
            "regex": ";.+",
            "target_label": "namespace",
            "replacement": NAMESPACE,
        },
    ]
    return {
        "global": {"scrape_interval": f"{step}s", "scrape_timeout": f"{max(1, step - 1)}s"},
        "scrape_configs": [
            {
                "job_name": "inferwatch-exporter",
                "honor_labels": True,
                "metric_relabel_configs": pod_labels,
                "static_configs": [{"targets": [f"127.0.0.1:{ports['exporter']}"]}],
            },
            {
                "job_name": "inferwatch-frontdoor",
                "static_configs": [{"targets": [f"127.0.0.1:{ports['admin-' + m.name]}" for m in models]}],
            },
            # each simulator also serves its GPU (--gpus 1) as a node's GPU exporter would: scraped on its own,
            # keeping the workload labels the GPU series carry (honor_labels, as the README says for DCGM)
            {
                "job_name": "gpu",
                "honor_labels": True,
                "metric_relabel_configs": [{"source_labels": ["__name__"], "regex": "gpu_.*", "action": "keep"}],
                "static_configs": [{"targets": [f"127.0.0.1:{ports[m.name]}" for m in models]}],
            },
        ],
    }


async def _drive(
    doors: dict[str, str], engines: dict[str, str], baseline: float, incident: float, variant: Variant
) -> dict:
    """Load through the front doors; switch every engine to its scenario after `baseline`; returns the times."""
    total, load = baseline + incident, variant.load
    loads = [
        asyncio.ensure_future(
            run_load(LoadConfig(doors[m.name], duration=total, model=m.name, seed=11 + i, timeout=60, **load))
        )
        for i, m in enumerate(variant.models)
    ]
    started = time.time()
    await asyncio.sleep(baseline)
    switched = time.time()
    for m in variant.models:
        if m.scenario != "normal":
            await asyncio.to_thread(_set_scenario, engines[m.name], m.scenario)
        if m.surge > 1:
            loads.append(
                asyncio.ensure_future(
                    run_load(
                        LoadConfig(
                            doors[m.name],
                            duration=incident,
                            model=m.name,
                            seed=99,
                            timeout=60,
                            **(load | {"rate": load["rate"] * (m.surge - 1)}),
                        )
                    )
                )
            )
    print(f"incident: every model switched at {switched:.0f}", flush=True)
    await asyncio.sleep(max(0.0, switched + incident - time.time()))
    ended = time.time()
    for load in loads:
        load.cancel()
    await asyncio.gather(*loads, return_exceptions=True)
    return {"started": started, "switched": switched, "ended": ended}


def export(prom: str, start: float, end: float) -> list[dict]:
    """Every series' raw samples in [start, end]: [{"labels": {...}, "t": [ms, deltas...], "v": ["value"...]}]."""
    names = api(prom, "label/__name__/values")
    wanted = [n for n in names if n == "up" or not (n.startswith(DROP) or n.endswith(DROP_SUFFIX))]
    seconds = int(end - start) + 1
    out = []
    for name in sorted(wanted):
        for series in api(prom, "query", query=f'{{__name__="{name}"}}[{seconds}s]', time=f"{end:.3f}")["result"]:
            times = [round(float(t) * 1000) for t, _ in series["values"]]
            out.append(
                {
                    "labels": series["metric"],
                    "t": [times[0]] + [b - a for a, b in pairwise(times)],
                    "v": [v for _, v in series["values"]],
                }
            )
    out.sort(key=lambda s: sorted(s["labels"].items()))
    return out


def write(out: Path, series: list[dict], manifest: dict, recorder: str = "tests/record_triage.py") -> None:
    """The recording (gzip without a timestamp, so a rerun of the same samples writes the same bytes) and its
    manifest into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    body = "\n".join(json.dumps(s, separators=(",", ":"), sort_keys=True) for s in series) + "\n"
    header = json.dumps({"format": FORMAT, "series": len(series)}) + "\n"
    with gzip.GzipFile(out / manifest["recording"], "wb", compresslevel=9, mtime=0) as f:
        f.write((header + body).encode())
    (out / "manifest.yaml").write_text(
        f"# Incidents recorded by {recorder} (times: Unix seconds), replayed by tests/triage_tools.py.\n"
        + yaml.safe_dump(manifest, sort_keys=False)
    )


def ran_models(models: list[Model]) -> dict:
    """What each model ran: engine, release, cap, its scenario and that scenario's parameters (sim/scenarios.yaml)."""
    return {
        m.name: {
            "engine": m.engine,
            "engine_version": m.version or default_release(m.engine),
            "scenario": m.scenario,
            "scenario_parameters": dict(scenarios()[m.scenario] or {}),
            "max_num_seqs": m.cap,
            "pod": m.pod,
            "gpus": 1,
            **({"incident_traffic": f"x{m.surge:g}"} if m.surge > 1 else {}),
        }
        for m in models
    }


def _version(args: list[str]) -> str:
    try:
        text = subprocess.run(args, capture_output=True, text=True, timeout=10)
        return (text.stdout or text.stderr).splitlines()[0].strip()
    except (OSError, IndexError, subprocess.SubprocessError):
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", choices=list(VARIANTS), default="main", help="which models, load and step")
    parser.add_argument("--baseline", type=float, default=240, help="seconds of normal traffic (after warm-up)")
    parser.add_argument("--incident", type=float, default=240, help="seconds of incident")
    parser.add_argument("--warmup", type=float, default=60, help="seconds of load before the baseline window")
    parser.add_argument("--out", type=Path, help="default: tests/fixtures/<the variant's folder>")
    parser.add_argument("--workdir", type=Path, help="keep logs and Prometheus data here")
    args = parser.parse_args()
    variant = VARIANTS[args.variant]
    models, step, out = variant.models, variant.step, args.out or HERE / "fixtures" / variant.folder
    binary = shutil.which("prometheus")
    if binary is None:
        sys.exit("prometheus not found on PATH")
    with ExitStack() as stack:
        work = args.workdir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="record-triage-")))
        work.mkdir(parents=True, exist_ok=True)
        ports = {key: free_port() for m in models for key in (m.name, "door-" + m.name, "admin-" + m.name)} | {
            "exporter": free_port()
        }
        procs = _Processes(work)
        stack.callback(procs.stop)
        _start(procs, ports, models)
        engines = {m.name: f"http://127.0.0.1:{ports[m.name]}" for m in models}
        doors = {m.name: f"http://127.0.0.1:{ports['door-' + m.name]}" for m in models}
        prom = stack.enter_context(prometheus(binary, _prometheus_config(ports, step, models), work))
        _wait_ready(
            [f"{u}/health" for u in engines.values()]
            + [f"http://127.0.0.1:{ports['admin-' + m.name]}/metrics" for m in models]
            + [f"http://127.0.0.1:{ports['exporter']}/metrics"],
            procs,
        )
        print(f"recording {len(models)} models ({args.variant}) in {work}: Prometheus at {prom}", flush=True)
        times = asyncio.run(_drive(doors, engines, args.warmup + args.baseline, args.incident, variant))
        procs.check()
        time.sleep(step + 1)  # the last scrape of the incident
        start, end = times["started"] - step, times["ended"] + step
        series = export(prom, start, end)
    manifest = {
        "recording": "recording.json.gz",
        "step": step,
        "start": int(start),
        "end": int(end) + 1,
        "baseline": {"start": int(times["started"] + args.warmup), "end": int(times["switched"])},
        "incident": {"start": int(times["switched"]) + 1, "end": int(times["ended"])},
        "models": {m.name: m.kind for m in models},
        "ran": {
            "recorder": f"tests/record_triage.py --variant {args.variant}",
            "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(end)),
            "inferwatch": _version([sys.executable, "-m", "inferwatch", "--version"]),
            "prometheus": _version([binary, "--version"]),
            "python": platform.python_version(),
            "namespace": NAMESPACE,
            "load_per_model": variant.load,
            "models": ran_models(models),
        },
    }
    write(out, series, manifest)
    size = (out / manifest["recording"]).stat().st_size
    print(f"wrote {len(series)} series, {size / 1e6:.2f} MB, to {out}", flush=True)


if __name__ == "__main__":
    main()
