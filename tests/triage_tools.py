"""Recorded incidents for the triage tests: a real Prometheus serving a recording of tests/fixtures/triage/.

    with recorded_prometheus() as (base, manifest):
        manifest["incident"]["start"], manifest["models"]["m-queueing"]   # -> 1764..., "queueing"

tests/record_triage.py wrote the recording (raw samples of every series, see its docstring) and the manifest
(windows in Unix seconds, the kind each model should be named, what ran). Here the samples become OpenMetrics
with timestamps, promtool turns them into TSDB blocks, and Prometheus starts on those blocks with a retention
long enough to keep them. Takes a few seconds.
"""

from __future__ import annotations

import gzip
import json
import math
import shutil
import tempfile
import urllib.parse
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import yaml

from promtools import create_blocks, prometheus

__all__ = ["FIXTURES", "FORMAT", "SIGNALS", "api", "changes", "load_manifest", "read_recording", "to_openmetrics",
           "recorded_prometheus", "window_means"]

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "triage"
FORMAT = "inferwatch-recording/1"


def load_manifest(folder: Path = FIXTURES) -> dict:
    return yaml.safe_load((folder / "manifest.yaml").read_text())


def read_recording(path: Path) -> list[dict]:
    """The recorded series: [{"labels": {...}, "t": [ms, delta ms, ...], "v": ["value", ...]}]."""
    with gzip.open(path, "rt") as f:
        header = json.loads(f.readline())
        if header.get("format") != FORMAT:
            raise ValueError(f"{path}: not an {FORMAT} recording: {header}")
        return [json.loads(line) for line in f if line.strip()]


def _labels(labels: dict) -> str:
    pairs = sorted((k, v) for k, v in labels.items() if k != "__name__")
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in pairs) + "}" if pairs else ""


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def to_openmetrics(series: list[dict]) -> str:
    """OpenMetrics with timestamps (seconds), series of one name together, each in time order, then # EOF."""
    lines = []
    for s in sorted(series, key=lambda s: (s["labels"]["__name__"], sorted(s["labels"].items()))):
        head = s["labels"]["__name__"] + _labels(s["labels"])
        t = 0
        for delta, value in zip(s["t"], s["v"]):
            t += delta
            if value in ("NaN", "+Inf", "-Inf") or math.isfinite(float(value)):
                lines.append(f"{head} {value} {t / 1000:.3f}")
    return "\n".join(lines) + "\n# EOF\n"


@contextmanager
def recorded_prometheus(folder: Path = FIXTURES, workdir: Path | None = None):
    """Yields (Prometheus base URL, manifest) while a Prometheus serves the recording of `folder`."""
    manifest = load_manifest(folder)
    prom, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if prom is None or promtool is None:
        raise RuntimeError("prometheus and promtool must be on PATH (Debian: apt-get install prometheus)")
    with tempfile.TemporaryDirectory(prefix="triage-recording-") as tmp:
        work = Path(workdir or tmp)
        text = work / "recording.om"
        text.write_text(to_openmetrics(read_recording(folder / manifest["recording"])))
        create_blocks(text, work / "data", timeout=120)
        text.unlink()
        # the blocks are as old as the recording: a long retention keeps Prometheus from deleting them at start
        with prometheus(prom, {"global": {"scrape_interval": "1m"}}, work,
                        ("--storage.tsdb.retention.time=100y",)) as base:
            yield base, manifest


def _mean(name: str, by: str = "model") -> str:
    return f"sum by ({by}) (rate({name}_sum[W])) / sum by ({by}) (rate({name}_count[W]))"


def _per(numerator: str, denominator: str, by: str = "model") -> str:
    return f"sum by ({by}) (rate({numerator}[W])) / sum by ({by}) (rate({denominator}[W]))"


# Per-model means over a window W, to see what a recording holds (GPU signals by pod: the model's pod is
# "<model>-0"). Not triage's rules: a plain look at the signals each kind moves.
SIGNALS = {
    "requests/s (front door)": "sum by (model) (rate(llm_frontdoor_requests_total[W]))",
    "answered share (front door)": 'sum by (model) (rate(llm_frontdoor_requests_total{outcome="ok"}[W])) / '
                                   "sum by (model) (rate(llm_frontdoor_requests_total[W]))",
    "TTFT (front door)": _mean("llm_frontdoor_time_to_first_token_seconds"),
    "first chunk (front door)": _mean("llm_frontdoor_time_to_first_chunk_seconds"),
    "duration (front door)": _mean("llm_frontdoor_request_duration_seconds"),
    "reasoning tokens/request (front door)": _per("llm_frontdoor_reasoning_tokens_total",
                                                  "llm_frontdoor_requests_total"),
    "running": "sum by (model) (avg_over_time(llm_requests_running[W]))",
    "waiting": "sum by (model) (avg_over_time(llm_requests_waiting[W]))",
    "running / cap": "sum by (model) (avg_over_time(llm_requests_running[W])) / "
                     "max by (model) (max_over_time(llm_max_running_requests[W]))",
    "KV cache": "max by (model) (avg_over_time(llm_kv_cache_usage_ratio[W]))",
    "KV cache (max)": "max by (model) (max_over_time(llm_kv_cache_usage_ratio[W]))",
    "TTFT": _mean("llm_time_to_first_token_seconds"),
    "queue time": _mean("llm_request_queue_time_seconds"),
    "prefill time": _mean("llm_request_prefill_time_seconds"),
    "TPOT": _mean("llm_time_per_output_token_seconds"),
    "ITL": _mean("llm_inter_token_latency_seconds"),
    "e2e": _mean("llm_request_duration_seconds"),
    "prompt tokens/request": _mean("llm_request_prompt_tokens"),
    "output tokens/request": _mean("llm_request_generation_tokens"),
    "prefix-cache hit ratio": _per("llm_prefix_cache_hit_tokens_total", "llm_prefix_cache_queried_tokens_total"),
    "preemptions/s": "sum by (model) (rate(llm_preemptions_total[W]))",
    # vLLM counts drafts; SGLang has only its acceptance gauge
    "spec acceptance": _per("llm_spec_decode_accepted_tokens_total", "llm_spec_decode_draft_tokens_total")
                       + " or max by (model) (avg_over_time(llm_spec_decode_acceptance_ratio[W]))",
    "generation tokens/s": "sum by (model) (rate(llm_generation_tokens_total[W]))",
    "engine series samples": "sum by (model) (count_over_time(llm_requests_running[W]))",
    "GPU-Util": "avg by (pod) (avg_over_time(gpu_utilization_ratio[W]))",
    "GPU SM active": "avg by (pod) (avg_over_time(gpu_sm_active_ratio[W]))",
    "GPU tensor active": "avg by (pod) (avg_over_time(gpu_tensor_active_ratio[W]))",
}


def api(base: str, path: str, **params) -> dict | list:
    """The `data` of a Prometheus HTTP API answer, e.g. api(base, "query", query="up", time=t)."""
    url = f"{base}/api/v1/{path}" + ("?" + urllib.parse.urlencode(params) if params else "")
    with urllib.request.urlopen(url, timeout=60) as resp:
        answer = json.load(resp)
    if answer.get("status") != "success":
        raise RuntimeError(f"{url}: {answer}")
    return answer["data"]


def window_means(base: str, start: float, end: float) -> dict[str, dict[str, float]]:
    """{signal: {model: value over [start, end]}} of SIGNALS, from the Prometheus at `base`."""
    out: dict[str, dict[str, float]] = {}
    for signal, expr in SIGNALS.items():
        rows = api(base, "query", query=expr.replace("[W]", f"[{int(end - start)}s]"), time=end)["result"]
        out[signal] = {(r["metric"].get("model") or r["metric"].get("pod", "").removesuffix("-0")): float(r["value"][1])
                       for r in rows}
    return out


def changes(base: str, manifest: dict) -> str:
    """A text table of every SIGNALS value per model, baseline and incident, and their ratio."""
    before = window_means(base, manifest["baseline"]["start"], manifest["baseline"]["end"])
    after = window_means(base, manifest["incident"]["start"], manifest["incident"]["end"])
    lines = []
    for model, kind in manifest["models"].items():
        lines.append(f"{model} (expected: {kind})")
        for signal in SIGNALS:
            b, a = before[signal].get(model), after[signal].get(model)
            if b is None and a is None:
                continue
            ratio = f"x{a / b:.2f}" if a is not None and b else ""
            lines.append(f"  {signal:40}{'-' if b is None else f'{b:.4g}':>10}{'-' if a is None else f'{a:.4g}':>10}"
                         f"  {ratio}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":            # python tests/triage_tools.py [FOLDER]: what a recording holds
    import sys

    with recorded_prometheus(Path(sys.argv[1]) if len(sys.argv) > 1 else FIXTURES) as (url, loaded):
        print(changes(url, loaded), end="")
