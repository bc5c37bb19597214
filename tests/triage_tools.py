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
import re
import shutil
import tempfile
import urllib.parse
import urllib.request
from contextlib import contextmanager
from itertools import pairwise
from pathlib import Path

import pytest
import yaml
from promtools import create_blocks, prometheus

__all__ = [
    "FIXTURES",
    "FORMAT",
    "SIGNALS",
    "api",
    "changes",
    "load_manifest",
    "read_recording",
    "to_openmetrics",
    "series_prometheus",
    "recorded_prometheus",
    "window_means",
    "used_names",
    "times",
    "series_of",
    "shifted",
    "relabeled",
    "own_names",
    "HOUR_MS",
    "hour_windows",
    "used_series",
    "NEEDS_PROMETHEUS",
]

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "triage"
FORMAT = "inferwatch-recording/1"
HOUR_MS = 3_600_000  # one variant of a recording an hour after the other, in one Prometheus
NEEDS_PROMETHEUS = pytest.mark.skipif(
    not (shutil.which("prometheus") and shutil.which("promtool")), reason="needs Debian's prometheus and promtool"
)


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
        for delta, value in zip(s["t"], s["v"], strict=True):
            t += delta
            if value in ("NaN", "+Inf", "-Inf") or math.isfinite(float(value)):
                lines.append(f"{head} {value} {t / 1000:.3f}")
    return "\n".join(lines) + "\n# EOF\n"


@contextmanager
def series_prometheus(series: list[dict], work: Path):
    """Yields the base URL of a Prometheus serving `series` (read_recording's shape) from TSDB blocks under `work`."""
    prom, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if prom is None or promtool is None:
        raise RuntimeError("prometheus and promtool must be on PATH (Debian: apt-get install prometheus)")
    text = work / "recording.om"
    text.write_text(to_openmetrics(series))
    create_blocks(text, work / "data", timeout=120)
    text.unlink()
    # the blocks are as old as the recording: a long retention keeps Prometheus from deleting them at start
    with prometheus(prom, {"global": {"scrape_interval": "1m"}}, work, ("--storage.tsdb.retention.time=100y",)) as base:
        yield base


@contextmanager
def recorded_prometheus(folder: Path = FIXTURES, workdir: Path | None = None):
    """Yields (Prometheus base URL, manifest) while a Prometheus serves the recording of `folder`."""
    manifest = load_manifest(folder)
    with tempfile.TemporaryDirectory(prefix="triage-recording-") as tmp:
        with series_prometheus(read_recording(folder / manifest["recording"]), Path(workdir or tmp)) as base:
            yield base, manifest


# --- the recording reshaped as other people's Prometheus would hold it (tests/test_triage_foreign.py, ...) -------


def hour_windows(manifest: dict, hours: int):
    """(incident Window, --baseline START/END) of the recording's windows `hours` later, for triage()."""
    from inferwatch.triage import Window

    shift = hours * HOUR_MS / 1000
    incident, baseline = manifest["incident"], manifest["baseline"]
    return (
        Window(incident["start"] + shift, incident["end"] + shift),
        f"{baseline['start'] + shift:.0f}/{baseline['end'] + shift:.0f}",
    )


def used_names() -> set[str]:
    """The vocabulary names triage's signals read: the rest of a recording can be left out, to keep it small."""
    from inferwatch.triage import load_signals

    return {name for s in load_signals() for _, q in s.queries for name in re.findall(r"\b((?:llm|gpu)_[a-z_]+)\{", q)}


def used_series(manifest: dict) -> list[dict]:
    """The series of `manifest`'s recording (tests/fixtures/triage/) that triage's signals read."""
    used = used_names()
    return [s for s in read_recording(FIXTURES / manifest["recording"]) if s["labels"]["__name__"] in used]


def times(series: dict) -> list[int]:
    """A recorded series' sample times, ms."""
    out, t = [], 0
    for delta in series["t"]:
        t += delta
        out.append(t)
    return out


def series_of(labels: dict, at: list[int], values: list[str]) -> dict:
    """A series in read_recording's shape from its labels, sample times (ms) and values."""
    return {"labels": labels, "t": [b - a for a, b in pairwise([0, *at])], "v": values}


def shifted(series: list[dict], by: int) -> list[dict]:
    """The series `by` ms later."""
    return [dict(s, t=[s["t"][0] + by] + s["t"][1:]) for s in series if s["t"]]


def relabeled(series: list[dict], change) -> list[dict]:
    """Each series with `change(labels)`'s labels (a new dict; None leaves the series out)."""
    out = []
    for s in series:
        labels = change(dict(s["labels"]))
        if labels is not None:
            out.append(dict(s, labels=labels))
    return out


def own_names(series: list[dict], oldest: bool = False) -> list[dict]:
    """The recording as the engines and dcgm-exporter expose it, through the mappings backwards: each common
    name under its source's name (the newest or the oldest alias), labels under their source names, values
    unscaled; DCGM's workload labels as `exported_*` beside the exporter pod's own, as a scrape without
    honorLabels writes them; engine series with kube-prometheus' extra target labels."""
    from inferwatch.mappings import load_mappings

    table = {
        (m.source, e.name): (m, e)
        for m in load_mappings()
        for e in m.entries
        if not (e.match or e.set_labels or e.drop_labels or e.bit)
    }
    out, seen = [], set()
    for s in series:
        labels = dict(s["labels"])
        name = labels.pop("__name__")
        if name.startswith("llm_frontdoor_"):
            out.append(s)
            continue
        source = "dcgm" if name.startswith("gpu_") else labels.get("engine")
        base = next(
            (
                name[: -len(x)]
                for x in ("_bucket", "_sum", "_count")
                if name.endswith(x) and (source, name[: -len(x)]) in table
            ),
            name,
        )
        if (source, base) not in table:
            continue
        mapping, entry = table[source, base]
        for key, _ in mapping.set_labels:
            labels.pop(key, None)
        for rule in mapping.labels + entry.labels:
            if rule.target in labels:
                labels[rule.candidates[0]] = labels.pop(rule.target)
        if source == "dcgm":
            labels.update(namespace="gpu-operator", pod="nvidia-dcgm-exporter-7x9k2", job="gpu-operator/dcgm")
        else:
            labels.update(container=source, endpoint="http", service=labels.get("pod", "")[:-2])
        labels["__name__"] = entry.sources[-1 if oldest else 0] + name[len(base) :]
        key = tuple(sorted(labels.items()))
        if key in seen:  # two common names from one source series (SGLang's prompt tokens)
            continue
        seen.add(key)
        scale = 1 / entry.multiply if entry.multiply else (entry.divide or 1)
        out.append(dict(s, labels=labels, v=s["v"] if scale == 1 else [repr(float(v) * scale) for v in s["v"]]))
    return out


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
    "reasoning tokens/request (front door)": _per(
        "llm_frontdoor_reasoning_tokens_total", "llm_frontdoor_requests_total"
    ),
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
        out[signal] = {
            (r["metric"].get("model") or r["metric"].get("pod", "").removesuffix("-0")): float(r["value"][1])
            for r in rows
        }
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
            lines.append(
                f"  {signal:40}{'-' if b is None else f'{b:.4g}':>10}{'-' if a is None else f'{a:.4g}':>10}  {ratio}"
            )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # python tests/triage_tools.py [FOLDER]: what a recording holds
    import sys

    with recorded_prometheus(Path(sys.argv[1]) if len(sys.argv) > 1 else FIXTURES) as (url, loaded):
        print(changes(url, loaded), end="")
