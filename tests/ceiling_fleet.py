"""A large serving fleet on one loopback server, for measuring what one Prometheus carries (bench_prometheus_ceiling).

Every engine, dcgm-exporter and front-door replica of the fleet is a target of its own, scraped by its own scrape
loop with the jobs and metric relabelings `inferwatch deploy render --target compose` writes (vllm, sglang,
frontdoor) plus the dcgm-exporter job of the Kubernetes render (honor_labels, the dcgm mapping's relabelings); the
targets come from file_sd, each with its own `instance`, `namespace`, `pod` and `container`, so Prometheus stores
the series a real fleet gives it. All of them are paths of one HTTP server (`/vllm/3`, `/dcgm/12`, ...).

Each target answers a real exposition used as a template:
- vLLM: `real-captures/vllm-0.32.0-cpu-tiny-llama.txt`, a real `vllm serve` 0.32.0 (every family, `_created`
  series, the HTTP instrumentator's), with the engine's model as `model_name`;
- SGLang: `expositions/sglang-0.5.23.txt`, written from SGLang's collector (two dp ranks; no complete real 0.5.x
  scrape exists);
- GPUs: `real-captures/dcgm-exporter-4.4.1-4.6.0-lke-ai-conformance.txt`, one block per GPU of a node (8 a node),
  plus the fields of `deploy/dcgm/counters.csv` (what the deploy render turns on) that the capture lacks, each GPU
  labelled with the pod that uses it;
- front doors: inferwatch's own `FrontdoorMetrics` after requests from several callers with the outcomes users see.

Values move as a live target's do: counters and histogram parts grow as the template's requests repeated at the
engine's own rate (every bucket by the same factor, so buckets stay cumulative and `+Inf` equals `_count`), gauges
swing within a range, `_created` and info series stay. VALUES below sets the few series whose template values
would not be a healthy engine (a capture taken right after a length stop and a 400).
"""

from __future__ import annotations

import json
import math
import re
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import yaml
from conftest import EXPOSITIONS, REAL_CAPTURES, ROOT
from promtools import serving

from inferwatch.mappings import load_mappings, relabel_configs, select_source

TEMPLATES = {
    "vllm": REAL_CAPTURES / "vllm-0.32.0-cpu-tiny-llama.txt",
    "sglang": EXPOSITIONS / "sglang-0.5.23.txt",
    "dcgm": REAL_CAPTURES / "dcgm-exporter-4.4.1-4.6.0-lke-ai-conformance.txt",
}
TEMPLATE_MODEL = {"vllm": 'model_name="tiny-llama"', "sglang": 'model_name="llama"'}
COMPOSE = ROOT / "deploy" / "compose" / "prometheus"

# (regex on a series' name and labels, how it moves): ("share", x) grows as x of the template's requests (the
# finish reasons of a healthy engine: the capture's own were two length stops and a stop), ("range", lo, hi) swings
# between lo and hi; the first match wins. Everything else: counters grow, gauges swing by a tenth around the
# template's value, zeros stay zero.
VALUES = (
    (r'^vllm:request_success_total\{.*finished_reason="stop"', ("share", 0.998)),
    (r'^vllm:request_success_total\{.*finished_reason="length"', ("share", 0.0015)),
    (r'^vllm:request_success_total\{.*finished_reason="abort"', ("share", 0.0005)),
    (r"^sglang:num_aborted_requests_total", ("share", 0.0005)),
    (r"^(vllm:kv_cache_usage_perc|sglang:token_usage)\{", ("range", 0.2, 0.6)),
    (r"^(vllm:num_requests_running|sglang:num_running_reqs)\{", ("range", 4, 24)),
    (r"^DCGM_FI_DEV_GPU_UTIL\{", ("range", 60, 95)),
    (r"^DCGM_FI_PROF_(SM_ACTIVE|GR_ENGINE_ACTIVE)\{", ("range", 0.4, 0.8)),
    (r"^DCGM_FI_PROF_(SM_OCCUPANCY|PIPE_TENSOR_ACTIVE|DRAM_ACTIVE)\{", ("range", 0.2, 0.5)),
    (r"^DCGM_FI_DEV_FB_USED\{", ("range", 60000, 75000)),
    (r"^DCGM_FI_DEV_FB_FREE\{", ("range", 5000, 20000)),
    (r"^DCGM_FI_DEV_POWER_USAGE\{", ("range", 300, 650)),
    (r"^DCGM_FI_DEV_(GPU|MEMORY)_TEMP\{", ("range", 45, 75)),
    (r"^DCGM_FI_PROF_(PCIE|NVLINK)_[TR]X_BYTES\{", ("range", 1e8, 5e9)),
)
GROW, SWING, KEEP = 0, 1, 2


def _kind_of(line: str, family_type: str) -> tuple[int, float, float, float | None]:
    """(kind, lo, hi, share) of one sample line."""
    for pattern, how in VALUES:
        if re.search(pattern, line):
            if how[0] == "share":
                return GROW, 0.0, 0.0, how[1]
            return SWING, how[1], how[2], None
    name = line.split("{", 1)[0].split(" ", 1)[0]
    value = float(line.rsplit(" ", 1)[1])
    if name.endswith(("_created", "_info", "_start_time_seconds")):
        return KEEP, value, value, None
    if family_type in ("counter", "histogram", "summary"):
        return GROW, 0.0, 0.0, None
    if value == 0:
        return KEEP, 0.0, 0.0, None
    return SWING, value * 0.9, value * 1.1, None


class Exposition:
    """One target's /metrics: the template's lines with values that move with time."""

    def __init__(self, text: str, rate: float, seed: int):
        prefixes, base, kinds, lo, hi = [], [], [], [], []
        pending, types = [], {}  # family -> its TYPE
        requests = _requests(text)
        for line in text.splitlines():
            if not line.strip():
                continue
            if line.startswith("#"):
                if line.startswith("# TYPE "):
                    types[line.split()[2]] = line.split()[3]
                pending.append(line)
                continue
            series, value = line.rsplit(" ", 1)
            kind, low, high, share = _kind_of(line, _family_type(series.split("{", 1)[0], types))
            prefixes.append("\n".join([*pending, series]))
            pending = []
            base.append(share * requests if share is not None else float(value))
            kinds.append(kind)
            lo.append(low)
            hi.append(high)
        rng = np.random.default_rng(seed)
        self.prefixes = prefixes
        self.base, self.kinds = np.array(base), np.array(kinds)
        self.lo, self.hi = np.array(lo), np.array(hi)
        self.phase = rng.uniform(0, 2 * math.pi, len(prefixes))
        self.integer = np.array([float(b).is_integer() for b in base]) & (self.kinds == GROW)
        self.rate = rate  # template's worth of requests a second
        self.start = time.time() - rng.uniform(3600, 86400)  # up for 1-24 h: the template's counts at its start

    def values(self, at: float) -> np.ndarray:
        elapsed = max(at - self.start, 0.0)
        # grows at `rate` on average, faster and slower over a 10-minute swing: monotonic, as counters are
        growth = 1 + self.rate * (elapsed + 0.3 * 600 / (2 * math.pi) * math.sin(2 * math.pi * elapsed / 600))
        grown = self.base * growth
        grown = np.where(self.integer, np.floor(grown), grown)
        swing = self.lo + (self.hi - self.lo) * (0.5 + 0.5 * np.sin(self.phase + at / 97))
        return np.where(self.kinds == GROW, grown, np.where(self.kinds == SWING, swing, self.base))

    def render(self, at: float) -> bytes:
        lines = (f"{p} {v!r}" for p, v in zip(self.prefixes, self.values(at).tolist(), strict=True))
        return ("\n".join(lines) + "\n").encode()


def _family_type(name: str, types: dict[str, str]) -> str:
    """The TYPE of the family a sample belongs to (`x_bucket` of histogram `x`, `x_total` of counter `x`), wherever
    its TYPE line was (a node's GPUs after the first repeat samples without one)."""
    for suffix in ("", "_total", "_bucket", "_count", "_sum", "_created"):
        if suffix and not name.endswith(suffix):
            continue
        family = name[: len(name) - len(suffix)] if suffix else name
        if family in types:
            return types[family]
    return "untyped"


def _requests(text: str) -> float:
    """The template's request count: its TTFT `_count` (summed over series), else 1."""
    counts = re.findall(r"^\S*time_to_first_token_seconds_count(?:\{[^}]*\})? (\S+)$", text, re.M)
    return sum(float(c) for c in counts) or 1.0


# dcgm fields deploy/dcgm/counters.csv turns on that the real capture lacks, added under its labels
def _dcgm_template() -> str:
    text = TEMPLATES["dcgm"].read_text()
    have = set(re.findall(r"^(DCGM_FI_\w+)\{", text, re.M))
    line = next(x for x in text.splitlines() if x.startswith("DCGM_FI_DEV_GPU_TEMP{"))
    labels = line[line.index("{") : line.index("}") + 1]
    extra = []
    for row in (ROOT / "deploy" / "dcgm" / "counters.csv").read_text().splitlines():
        cells = [c.strip() for c in row.split(",")]
        if len(cells) < 3 or row.startswith("#") or cells[1] == "label" or cells[0] in have:
            continue
        extra += [f"# HELP {cells[0]} {cells[2]}", f"# TYPE {cells[0]} {cells[1]}", f"{cells[0]}{labels} 0"]
    return text.rstrip("\n") + "\n" + "\n".join(extra) + "\n"


def _frontdoor_template(model: str, callers: int) -> str:
    """A front door's /metrics after requests of every caller with the outcomes users see, as it exports them."""
    from prometheus_client import generate_latest

    from inferwatch.frontdoor._metrics import FrontdoorMetrics

    metrics = FrontdoorMetrics()
    outcomes = [("ok", 200)] * 40 + [("length", 200), ("cancelled", 499)]
    for caller in range(callers):
        labels = (model, f"team-{caller}", "engine")
        for i, (outcome, code) in enumerate(outcomes):
            times = {"ttft": 0.05 + 0.01 * i, "ttfc": 0.04, "tpot": 0.02, "duration": 2.0 + i / 10}
            metrics.record(labels, outcome, code, times, (400, 200, 0), good=outcome == "ok")
    # as the front door serves it: without `_created` series (frontdoor/_serve.py)
    return "\n".join(x for x in generate_latest(metrics.registry).decode().splitlines() if "_created" not in x) + "\n"


@dataclass
class Target:
    job: str
    path: str
    labels: dict[str, str]
    exposition: Exposition


@dataclass
class Fleet:
    """`engines` engines serving `models` models round robin (every fourth model on SGLang, from the second; the
    rest on vLLM), each engine with the GPUs of its model's tensor parallelism (`gpus`, cycled over the models),
    packed on 8-GPU nodes with one dcgm-exporter each; `frontdoors` front-door replicas per model, `callers`
    callers each."""

    engines: int
    models: int
    gpus: tuple[int, ...] = (1, 2, 4, 8)
    sglang_every: int = 4
    frontdoors: int = 2
    callers: int = 4
    gpus_per_node: int = 8
    targets: list[Target] = field(default_factory=list)

    def __post_init__(self):
        texts = {kind: TEMPLATES[kind].read_text() for kind in ("vllm", "sglang")}
        names = [f"model-{m:03d}" for m in range(self.models)]
        nodes: list[list[str]] = []  # per node: the pod of each GPU
        for e in range(self.engines):
            m = e % self.models
            kind = "sglang" if m % self.sglang_every == 1 else "vllm"
            pod = f"{names[m]}-{e:04d}"
            text = texts[kind].replace(TEMPLATE_MODEL[kind], f'model_name="{names[m]}"')
            self._add(kind, e, pod, text, rate=1 + (e % 5) / 2, seed=e)
            tp = self.gpus[m % len(self.gpus)]
            if not nodes or len(nodes[-1]) + tp > self.gpus_per_node:
                nodes.append([])
            nodes[-1] += [pod] * tp
        dcgm = _dcgm_template()
        for n, pods in enumerate(nodes):
            self._add("dcgm", n, f"dcgm-exporter-{n:04d}", _gpus(dcgm, n, pods), rate=1, seed=10**6 + n)
        for m, name in enumerate(names):
            text = _frontdoor_template(name, self.callers)
            for r in range(self.frontdoors):
                self._add("frontdoor", m * self.frontdoors + r, f"frontdoor-{name}-{r}", text, 1, 2 * 10**6 + m)
        self.gpu_count = sum(len(p) for p in nodes)
        self.nodes = len(nodes)

    def _add(self, job: str, index: int, pod: str, text: str, rate: float, seed: int) -> None:
        labels = {"instance": f"{pod}:{index}", "namespace": "llm", "pod": pod, "container": job}
        self.targets.append(Target(job, f"/{job}/{index}", labels, Exposition(text, rate, seed)))

    def count(self, job: str) -> int:
        return sum(1 for t in self.targets if t.job == job)

    @contextmanager
    def serve(self, clock=time.time):
        """Every target on one loopback server; yields its base URL. Each answers its exposition at the moment of
        the scrape."""
        by_path = {t.path: t.exposition for t in self.targets}

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as exporters answer: no new connection per scrape

            def do_GET(self):  # noqa: N802 - http.server's name
                exposition = by_path.get(self.path)
                if exposition is None:
                    self.send_error(404)
                    return
                body = exposition.render(clock())
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain; version=0.0.4")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):  # a scrape Prometheus gave up on: `up` says so
                    self.close_connection = True

            def log_message(self, *args):
                pass

        with serving(_Server(("127.0.0.1", 0), Handler)) as base:
            yield base

    def write_file_sd(self, folder: Path, address: str) -> dict[str, Path]:
        """One file_sd file per job: every target at `address`, its path and labels as target labels."""
        files = {}
        for job in ("vllm", "sglang", "dcgm", "frontdoor"):
            groups = [
                {"targets": [address], "labels": {"__metrics_path__": t.path, **t.labels}}
                for t in self.targets
                if t.job == job
            ]
            files[job] = folder / f"{job}.json"
            files[job].write_text(json.dumps(groups))
        return files


class _Server(ThreadingHTTPServer):
    request_queue_size = 4096  # a thousand scrape loops connect at once at start; the default 5 drops their SYNs

    def handle_error(self, request, client_address):
        """A connection Prometheus reset mid-request (a scrape past its timeout): its `up` says so, no traceback."""


def _gpus(template: str, node: int, pods: list[str]) -> str:
    """A node's dcgm-exporter: the one-GPU template once per GPU, each with its index, UUID, node and pod."""
    blocks = []
    for gpu, pod in enumerate(pods):
        text = re.sub(r'gpu="0"', f'gpu="{gpu}"', template)
        text = re.sub(r'UUID="[^"]*"', f'UUID="GPU-{node:06d}-{gpu}"', text)
        text = re.sub(r'Hostname="[^"]*"', f'Hostname="node-{node:04d}"', text)
        text = re.sub(r'pod="[^"]*"', f'pod="{pod}"', text)
        text = re.sub(r'namespace="[^"]*"', 'namespace="llm"', text)
        text = re.sub(r'container="[^"]*"', 'container="vllm"', text)
        text = text.replace('modelName="NVIDIA RTX 4000 Ada Generation"', 'modelName="NVIDIA H100 80GB HBM3"')
        blocks.append(text if gpu == 0 else "\n".join(x for x in text.splitlines() if not x.startswith("#")) + "\n")
    # one HELP/TYPE per family is what an exporter writes; Prometheus accepts the samples of a family apart too
    return "".join(blocks)


def scrape_config(files: dict[str, Path], scrape_interval: str, evaluation_interval: str, rules: list[Path]) -> dict:
    """The rendered compose prometheus.yml with file_sd in place of its static targets, the dcgm-exporter job of
    the Kubernetes render added, and no Alertmanager (none runs here)."""
    config = yaml.safe_load((COMPOSE / "prometheus.yml").read_text())
    config["global"] = {"scrape_interval": scrape_interval, "evaluation_interval": evaluation_interval}
    config.pop("alerting", None)
    config["rule_files"] = [str(p) for p in rules]
    dcgm = relabel_configs([select_source(load_mappings(), "dcgm")])
    config["scrape_configs"].append({"job_name": "dcgm", "honor_labels": True, "metric_relabel_configs": dcgm})
    for job in config["scrape_configs"]:
        job.pop("static_configs", None)
        job["file_sd_configs"] = [{"files": [str(files[job["job_name"]])]}]
    return config


def rule_files() -> list[Path]:
    """The default rule bundle the compose render loads (SLOs, front-door SLOs, operational alerts, mappings, caps,
    autoscaling)."""
    return sorted((COMPOSE / "rules").glob("*.yaml"))
