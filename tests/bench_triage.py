"""Triage's speed, and the synthetic histories its tests load into a real Prometheus.

    python tests/bench_triage.py            # 1 model over 1 h, then 100 models over 24 h (a generated fleet)

`history()` writes OpenMetrics with timestamps for models that behave normally in
a baseline and, from the incident's start, as one kind of slow says (`KINDS`);
`promtool tsdb create-blocks-from openmetrics` turns it into TSDB blocks and a
real Prometheus serves them. The numbers are made up, each kind moving the
signals its row of the issue names; they are not the simulator's.
"""

from __future__ import annotations

import math
import random
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from promtools import create_blocks, prometheus  # noqa: E402

NORMAL = dict(
    rate=2.0,
    ttft=0.25,
    queue=0.01,
    prefill=0.12,
    tpot=0.03,
    itl=0.03,
    e2e=4.0,
    prompt=600.0,
    output=120.0,
    running=6.0,
    waiting=0.0,
    kv=0.4,
    cap=32.0,
    hit=0.5,
    preempt=0.0,
    accept=0.7,
    util=0.7,
    sm=0.6,
    tensor=0.45,
    errors=0.0,
    length=0.02,
    door_ttft=0.3,
    door_ttfc=0.28,
    door_duration=4.2,
    reasoning=0.0,
    door_bad=0.01,
)
# what each kind changes from NORMAL during the incident
KINDS = {
    "quiet": {},
    "doubling": dict(
        rate=4.0,
        running=12.0,
        kv=0.55,
        tpot=0.034,
        itl=0.034,
        e2e=4.4,
        ttft=0.27,
        door_ttft=0.32,
        door_ttfc=0.3,
        door_duration=4.6,
    ),
    "queueing": dict(
        rate=3.0,
        running=32.0,
        waiting=9.0,
        queue=1.6,
        ttft=1.9,
        e2e=5.8,
        kv=0.7,
        door_ttft=1.95,
        door_ttfc=1.93,
        door_duration=6.0,
        tpot=0.032,
        itl=0.032,
    ),
    "long-prompts": dict(
        prompt=2400.0,
        ttft=0.8,
        prefill=0.6,
        e2e=4.6,
        door_ttft=0.85,
        door_ttfc=0.83,
        door_duration=4.8,
        hit=0.2,
        kv=0.55,
    ),
    "prefix-cache-loss": dict(
        hit=0.05, ttft=0.55, prefill=0.45, e2e=4.3, door_ttft=0.6, door_ttfc=0.58, door_duration=4.5
    ),
    "kv-pressure": dict(
        kv=0.97,
        preempt=0.3,
        waiting=3.0,
        queue=0.4,
        ttft=0.6,
        tpot=0.05,
        itl=0.05,
        e2e=7.0,
        door_ttft=0.65,
        door_ttfc=0.63,
        door_duration=7.2,
        running=20.0,
    ),
    "slow-decode": dict(tpot=0.09, itl=0.09, e2e=11.0, running=14.0, door_duration=11.2),
    "spec-decode-collapse": dict(accept=0.2, tpot=0.05, itl=0.05, e2e=6.3, door_duration=6.5, running=9.0),
    "thinking": dict(reasoning=600.0, output=720.0, door_ttft=9.0, e2e=22.0, door_duration=22.3, running=30.0),
    "long-outputs": dict(output=480.0, e2e=14.6, door_duration=14.8, running=20.0),
    "gpu-not-computing": dict(
        util=0.98, sm=0.15, tensor=0.05, tpot=0.06, itl=0.06, e2e=7.5, door_duration=7.7, running=11.0
    ),
    "errors": dict(errors=0.15, door_bad=0.18),
    "not-the-engine": dict(door_ttft=1.5, door_ttfc=1.48, door_duration=5.4),
    "missing-data": dict(missing=1.0),
}
HIST = {  # histogram name -> parameter holding its mean, and the count's source (per request or per token)
    "llm_time_to_first_token_seconds": ("ttft", "req"),
    "llm_request_queue_time_seconds": ("queue", "req"),
    "llm_request_prefill_time_seconds": ("prefill", "req"),
    "llm_time_per_output_token_seconds": ("tpot", "req"),
    "llm_inter_token_latency_seconds": ("itl", "tok"),
    "llm_request_duration_seconds": ("e2e", "req"),
    "llm_request_prompt_tokens": ("prompt", "req"),
    "llm_request_generation_tokens": ("output", "req"),
    "llm_frontdoor_time_to_first_token_seconds": ("door_ttft", "door"),
    "llm_frontdoor_time_to_first_chunk_seconds": ("door_ttfc", "door"),
    "llm_frontdoor_request_duration_seconds": ("door_duration", "door"),
}
TTFT_BOUNDS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def _labels(pairs: dict) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in pairs.items()) + "}"


def _params(kind: str, incident: bool, rng: random.Random) -> dict:
    p = dict(NORMAL, **(KINDS[kind] if incident else {}))
    return {k: (v * (1 + rng.uniform(-0.05, 0.05)) if k not in ("cap", "missing") else v) for k, v in p.items()}


def history(
    models: dict[str, str],
    start: float,
    incident: float,
    end: float,
    interval: float = 15.0,
    pods: dict[str, tuple[int, int]] | None = None,
    seed: int = 1,
) -> str:
    """OpenMetrics text: each model (-> kind) normal from `start`, its kind from `incident` to `end`; `pods`
    gives a model (replicas, how many of them turn bad), default (1, 1)."""
    chunks = [
        _model_lines(
            model,
            kind,
            start,
            incident,
            end,
            interval,
            (pods or {}).get(model, (1, 1)),
            random.Random(f"{seed}-{model}"),
        )
        for model, kind in sorted(models.items())
    ]
    return "".join(chunks) + "# EOF\n"


def _model_lines(
    model: str,
    kind: str,
    start: float,
    incident: float,
    end: float,
    interval: float,
    pods: tuple[int, int],
    rng: random.Random,
) -> str:
    """One model's series, each in time order (promtool takes families of different models interleaved)."""
    series: dict[str, list[str]] = {}
    steps = int((end - start) // interval) + 1
    replicas, bad = pods
    door_counts: dict[str, float] = {}
    for r in range(replicas):
        pod = f"{model}-{r}"
        eng = {"model": model, "namespace": "default", "pod": pod}
        gpu = {"gpu": "0", "uuid": f"GPU-{pod}", "namespace": "default", "pod": pod}
        counts: dict[str, float] = {}
        for i in range(steps):
            t = start + i * interval
            turned = t >= incident and r < bad
            p = _params(kind, turned, rng)
            engine_off = bool(p.get("missing")) and turned  # the engine's and GPU's series stop, the door's not
            share = 1.0 / replicas
            reqs = p["rate"] * interval * share
            tokens = reqs * p["output"]

            def add(name: str, labels: dict, value: float, engine_off: bool = engine_off, t: float = t):
                if engine_off and "pod" in labels:
                    return
                series.setdefault(name + _labels(labels), []).append(f"{value:.6g} {t:.3f}")

            def count(name: str, labels: dict, inc: float, counts: dict[str, float] = counts):
                key = name + _labels(labels)
                counts[key] = counts.get(key, 0.0) + inc
                add(name, labels, counts[key])

            for name, value in (
                ("llm_requests_running", p["running"] * share),
                ("llm_requests_waiting", p["waiting"] * share),
                ("llm_kv_cache_usage_ratio", p["kv"]),
                ("llm_max_running_requests", p["cap"]),
            ):
                add(name, eng, value)
            for name, (param, per) in HIST.items():
                if per == "door":
                    continue
                n = tokens if per == "tok" else reqs
                count(name + "_count", eng, n)
                count(name + "_sum", eng, n * p[param])
            for le in TTFT_BOUNDS + (math.inf,):
                below = 1 - math.exp(-le / p["ttft"]) if le != math.inf else 1.0
                count(
                    "llm_time_to_first_token_seconds_bucket",
                    dict(eng, le="+Inf" if le == math.inf else le),
                    reqs * below,
                )
            count("llm_prompt_tokens_total", eng, reqs * p["prompt"])
            count("llm_generation_tokens_total", eng, tokens)
            count("llm_prefix_cache_queried_tokens_total", eng, reqs * p["prompt"])
            count("llm_prefix_cache_hit_tokens_total", eng, reqs * p["prompt"] * p["hit"])
            count("llm_preemptions_total", eng, reqs * p["preempt"])
            count("llm_spec_decode_draft_tokens_total", eng, tokens * 2)
            count("llm_spec_decode_accepted_tokens_total", eng, tokens * 2 * p["accept"])
            for reason, part in (
                ("stop", 1 - p["errors"] - p["length"]),
                ("length", p["length"]),
                ("error", p["errors"]),
            ):
                count("llm_requests_finished_total", dict(eng, finished_reason=reason), reqs * part)
            for name, value in (
                ("gpu_utilization_ratio", p["util"]),
                ("gpu_sm_active_ratio", p["sm"]),
                ("gpu_tensor_active_ratio", p["tensor"]),
            ):
                add(name, gpu, value)
            if r == 0:  # one front door per model
                door = {"model": model}
                door_reqs = p["rate"] * interval
                for name, (param, per) in HIST.items():
                    if per == "door":
                        door_counts[name] = door_counts.get(name, 0.0) + door_reqs
                        door_counts[name + "s"] = door_counts.get(name + "s", 0.0) + door_reqs * p[param]
                        add(name + "_count", door, door_counts[name])
                        add(name + "_sum", door, door_counts[name + "s"])
                for outcome, part in (("ok", 1 - p["door_bad"]), ("error", p["door_bad"])):
                    key = "req" + outcome
                    door_counts[key] = door_counts.get(key, 0.0) + door_reqs * part
                    add("llm_frontdoor_requests_total", dict(door, outcome=outcome), door_counts[key])
                door_counts["reasoning"] = door_counts.get("reasoning", 0.0) + door_reqs * p["reasoning"]
                add("llm_frontdoor_reasoning_tokens_total", door, door_counts["reasoning"])
                add("llm_frontdoor_requests_in_flight", door, p["rate"] * p["door_duration"])
    return "".join(f"{key} {sample}\n" for key in sorted(series) for sample in series[key])


def load_blocks(text: str | None, work: Path) -> Path:
    """promtool's TSDB blocks of an OpenMetrics text (None: work/history.om, already written), under work/data."""
    source = work / "history.om"
    if text is not None:
        source.write_text(text)
    create_blocks(source, work / "data")
    source.unlink()
    return work / "data"


@contextmanager
def history_prometheus(text: str, work: Path):
    """A real Prometheus serving `text`'s samples; yields its base URL."""
    load_blocks(text, work)
    with prometheus(
        shutil.which("prometheus") or "prometheus",
        {"global": {"scrape_interval": "1m"}},
        work,
        ("--storage.tsdb.retention.time=100y", "--query.max-samples=200000000"),
    ) as base:
        yield base


def _time(label: str, base: str, start: float, end: float, baseline: str, models=()) -> float:
    from inferwatch.triage import Connection, Window, triage

    began = time.perf_counter()
    report = triage(Connection(base), Window(start, end), baseline, tuple(models))
    took = time.perf_counter() - began
    named = sum(1 for v in report.verdicts if v.findings)
    print(f"{label}: {took:.2f}s ({len(report.verdicts)} models, {named} with a kind, step {report.step:g}s)")
    return took


def _cli(label: str, base: str, start: float, end: float, model: str) -> float:
    began = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "inferwatch",
            "triage",
            "--prometheus",
            base,
            "--start",
            f"{start:.0f}",
            "--end",
            f"{end:.0f}",
            "--model",
            model,
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    took = time.perf_counter() - began
    print(f"{label}: {took:.2f}s (exit {done.returncode})")
    return took


def main() -> None:
    import tempfile

    hour = 3600.0
    now = time.time() // 60 * 60 - 600
    kinds = [k for k in KINDS if k not in ("quiet", "doubling")]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        began = time.perf_counter()
        # a kind for every fourth model, over the whole day; the rest quiet; the baseline is the hour before
        fleet = {f"model-{i:03d}": kinds[(i // 4) % len(kinds)] if i % 4 == 0 else "quiet" for i in range(100)}
        with open(work / "history.om", "w") as out:
            for model, kind in fleet.items():
                out.write(
                    _model_lines(model, kind, now - 25 * hour, now - 24 * hour, now, 30.0, (2, 1), random.Random(model))
                )
            out.write("# EOF\n")
        size = (work / "history.om").stat().st_size
        print(
            f"generated {size // 1_000_000} MB of OpenMetrics (100 models, 2 replicas each, 25 h scraped every "
            f"30 s) in {time.perf_counter() - began:.0f}s"
        )
        began = time.perf_counter()
        with history_prometheus(None, work) as base:
            print(f"promtool + Prometheus start: {time.perf_counter() - began:.0f}s")
            _cli("1 model, 1 h, the whole command", base, now - hour, now, "model-001")
            _time("1 model, 1 h, in process", base, now - hour, now, "1h", ["model-001"])
            _time("100 models, 24 h, in process", base, now - 24 * hour, now, "1h")


if __name__ == "__main__":
    main()
