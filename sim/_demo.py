"""`inferwatch demo`: the whole product on a laptop, in a few minutes.

Starts two simulated engines (vLLM and SGLang), an `inferwatch frontdoor` in
front of each, the normalizing exporter and a real Prometheus loaded with the
rules `inferwatch build` generates and the front-door SLOs; drives load through
the front doors; injects a scripted incident (queueing on vLLM, then vLLM's GPU
stalling, then thinking on SGLang, then broken tool calls on vLLM and
truncation on SGLang); prints what Prometheus reports as it goes. Each engine
serves a simulated GPU that follows it (`simulate --gpus 1`), so the GPU views
have data. To fit in minutes, Prometheus evaluates
the SLO rules every 10 s and waits a tenth of each alert's `for:` (and of the
GPU alert's averaging window). In `--short`, a phase that shows an alert ends at
the first poll after that alert fired (at the latest after its short length).
When the incident pages, the `inferwatch triage` command of the page's
annotation runs as pasted (_demo_page.py); `--headless` fails unless it names
the incident's kind.
It ends by asking the overview's goodput, cost and autoscaling rows whether they are
live (_demo_rows.py) and by running doctor on its own stack. `--canary` plays another
story instead (_demo_canary.py). Every process it started is stopped on exit or Ctrl-C.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

import yaml

from inferwatch.errors import InferwatchError
from inferwatch.sim._demo_page import page_command, triage_from_page
from inferwatch.sim._demo_rows import rows_live
from inferwatch.sim._load import LoadConfig, Sample, percentile, run_load

__all__ = [
    "run_demo",
    "Phase",
    "SCRIPT",
    "EXPECTED",
    "EXPECTED_FULL",
    "free_port",
    "Stack",
    "start_stack",
    "prometheus_binary",
    "until_interrupted",
    "work_folder",
]

VLLM_MODEL, SGLANG_MODEL = "llama-3-8b", "qwen3-8b"
CAPS = {VLLM_MODEL: 8, SGLANG_MODEL: 32}
RATES = {VLLM_MODEL: 2.0, SGLANG_MODEL: 0.6}
TOOL_RATE = 1.0  # extra requests per second offering a tool, to a model while its tool calls break
SLO_INTERVAL = "10s"  # instead of 1m
FOR_SCALE = 10  # every `for:` divided by this
SCRAPE_TIMEOUT = "2s"  # Prometheus' scrape of the exporter (every 2s)
EXPORTER_TIMEOUT = "1500ms"  # each engine's answer: inside SCRAPE_TIMEOUT, with room to merge and send
# the engines make up steps a busy laptop wakes late: else a healthy engine slows with the host and pages
KEEP_PACE_S = 2.0
LOAD_SLACK_S = 600.0  # arrivals planned past the script's end: a busy laptop's triage must not starve the last phases


# alerts that must fire (labels that must match) for --headless to succeed
EXPECTED = [
    {"alertname": "LLMErrorBudgetBurn", "slo": "responsive", "model": VLLM_MODEL, "severity": "critical"},
    {"alertname": "LLMQueueSaturated", "model": VLLM_MODEL},
]
# the page on-call gets for the incident, and the kind `inferwatch triage` must name from its annotation's command
PAGE, PAGE_KIND = {**EXPECTED[0], "service": "llm"}, "queueing"
FRONT_DOOR = "llm-frontdoor"  # the front-door SLOs' service label
# and in the full script, the front door's pages: responsive in the thinking incident (in --short's 30 s it pages
# only at the very end, if at all), answered for broken tool calls (a stop at the length limit is answered: the
# truncation phase pages nothing)
EXPECTED_FULL = [
    {"alertname": "LLMErrorBudgetBurn", "service": FRONT_DOOR, "slo": slo, "model": model, "severity": "critical"}
    for slo, model in (("responsive", SGLANG_MODEL), ("answered", VLLM_MODEL))
]


@dataclass(frozen=True)
class Phase:
    name: str
    seconds: float
    short_seconds: float
    scenarios: dict[str, str]  # model -> scenario
    says: str
    # in --short, the phase ends at the first poll once each of these alerts has fired during it: its point is
    # made, and waiting out short_seconds only made CI's run longer (the full script always plays `seconds`).
    # Not for thinking on SGLang: cut at its page (~15 s), triage no longer names `thinking` for it
    shows: tuple[dict[str, str], ...] = ()


SCRIPT = [
    Phase(
        "normal",
        60,
        # long enough, before the queue, for the page's triage to take as its baseline (the window the alert gives
        # spans the stack's whole life: the normal time before the onset is the only baseline there is)
        40,
        {VLLM_MODEL: "normal", SGLANG_MODEL: "normal"},
        "both engines healthy: note running against the cap, KV cache and TTFT",
    ),
    Phase(
        "queueing on vLLM",
        120,
        75,
        {VLLM_MODEL: "queueing", SGLANG_MODEL: "normal"},
        "vLLM loses capacity: requests pile up at its cap and wait before their first token",
        tuple(EXPECTED),
    ),
    # left out of --short (0 s): the GPU alert needs about two minutes, and CI's demo proves the SLO path
    Phase(
        "GPU stall on vLLM",
        150,
        0,
        {VLLM_MODEL: "gpu-stall", SGLANG_MODEL: "normal"},
        "vLLM's GPU stalls (host or NCCL): GPU-Util stays near 100 % while its SMs idle and decoding slows; "
        "LLMGPUBusyNotComputing fires after about two minutes",
    ),
    Phase(
        "thinking on SGLang",
        60,
        30,
        {VLLM_MODEL: "normal", SGLANG_MODEL: "thinking"},
        "SGLang's model starts reasoning at length: engine TTFT stays normal, users wait for visible text; "
        "the front door's responsive SLO pages",
    ),
    # the two front-door-only moments are left out of --short: the thinking incident proves the front door's SLO
    Phase(
        "broken tools on vLLM",
        90,
        0,
        {VLLM_MODEL: "broken-tools", SGLANG_MODEL: "normal"},
        "vLLM's tool calls come back with arguments that are not JSON: the engine counts successes, the front "
        "door's answered SLO pages",
    ),
    Phase(
        "truncation on SGLang",
        150,
        0,
        {VLLM_MODEL: "normal", SGLANG_MODEL: "truncation"},
        "SGLang's answers stop at the length limit halfway: the front door counts them (outcome length) and its "
        "answered SLO stays green, as a stop at max_tokens is the client's budget (a spec may set "
        "length_is_bad); LLMLengthStopsRising watches for a jump against the day before",
    ),
]


# Kubernetes' service discovery gives every series of an engine's pod its `pod`; behind the one normalizing
# exporter here the engine series have none, so they take their target's pod (`vllm` -> `vllm-0`, the pod its
# GPU series name), and triage can join each GPU to its model.
POD_FROM_TARGET = {"source_labels": ["pod", "target"], "regex": ";(.+)", "target_label": "pod", "replacement": "${1}-0"}


def free_port() -> int:
    """A loopback port nothing listens on now."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(url: str, timeout: float = 2.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.read()


def _query(prom: str, expr: str) -> list[dict]:
    try:
        data = json.loads(_get(f"{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr}), timeout=5))
    except (OSError, ValueError):
        return []
    return data.get("data", {}).get("result", [])


def _compress(text: str) -> str:
    """The demo's time compression: every SLO group every 10s (the long-window group too, else the SLI over the
    SLO window would first appear minutes in), each `for:` a tenth as long."""
    text = re.sub(r"^(\s*)interval: \d+[smh]$", rf"\1interval: {SLO_INTERVAL}", text, flags=re.M)
    text = re.sub(r"(avg_over_time\(gpu_\w+)\[10m\]", r"\1[1m]", text)  # the GPU alert's window, a tenth
    # the queue alert's 5-minute means and the operational alerts' 30-minute memory of their upper bar, a tenth
    text = re.sub(
        r"(avg_over_time\(llm_(?:requests_waiting|requests_running|kv_cache_usage_ratio))\[5m\]", r"\1[30s]", text
    )
    text = text.replace("[30m:1m]", "[3m:6s]")

    def shorter(match):
        seconds = int(match.group(1)) * {"s": 1, "m": 60, "h": 3600}[match.group(2)]
        return f"for: {max(1, seconds // FOR_SCALE)}s"

    return re.sub(r"for: (\d+)([smh])\b", shorter, text)


def _rule_files(folder: Path, compress: bool = True) -> list[str]:
    """The bundle's rules (the autoscaling signals among them), the front-door SLOs (slo/defaults-frontdoor.yaml)
    and cost/example.yaml's cost rules, compressed unless told not to, written to folder."""
    from inferwatch.build import SLO_DIR, artifacts
    from inferwatch.slo import compile_spec, load_spec, render_files

    texts = {
        Path(rel).name: text
        for rel, text in artifacts().items()
        if rel.startswith("prometheus/rules/") and rel.endswith(".rules.yaml")
    }
    front_door, _ = render_files(compile_spec(load_spec(SLO_DIR / "defaults-frontdoor.yaml")), generator="demo")
    texts.update({name: text for name, text in front_door.items() if "/" not in name and name.endswith(".rules.yaml")})
    texts["demo.cost.rules.yaml"] = _cost_rules()
    paths = []
    for name, text in texts.items():
        path = folder / name
        path.write_text(_compress(text) if compress else text)
        paths.append(str(path))
    return paths


def _cost_rules() -> str:
    """cost/example.yaml's prices as rules, so the overview's cost row is live (the simulated H100s take its
    `default` price)."""
    from importlib.resources import as_file, files

    from inferwatch.cost import load_cost, render_cost

    with as_file(files("inferwatch.cost") / "example.yaml") as path:
        return render_cost(load_cost(path), generator="demo")


class _Processes:
    """Child processes, each stopped (and waited for) when the demo ends, however it ends."""

    def __init__(self, logs: Path):
        self.logs = logs
        self.procs: list[tuple[str, subprocess.Popen, IO[str]]] = []

    def start(self, name: str, args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
        log = open(self.logs / f"{name}.log", "w")
        proc = subprocess.Popen(
            args,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **env} if env else None,
        )
        self.procs.append((name, proc, log))
        return proc

    def check(self) -> None:
        for name, proc, _ in self.procs:
            if proc.poll() is not None:
                tail = (self.logs / f"{name}.log").read_text()[-1500:]
                raise InferwatchError(f"{name} exited with status {proc.returncode}:\n{tail}")

    def stop(self) -> None:
        for _, proc, _ in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.time() + 10
        for _, proc, log in self.procs:
            try:
                proc.wait(max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()


def _wait_ready(urls: list[str], procs: _Processes, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    for url in urls:
        while True:
            procs.check()
            try:
                _get(url)
                break
            except OSError:
                if time.time() > deadline:
                    raise InferwatchError(f"{url} did not come up within {timeout:.0f}s") from None
                time.sleep(0.3)


@dataclass(frozen=True)
class Stack:
    """A running demo stack: its Prometheus, each model's front door and engine, and the scrape jobs (a second
    Prometheus over the same stack, e.g. with other rules, reuses them)."""

    prom: str
    doors: dict[str, str]  # model -> its front door's base URL
    bases: dict[str, str]  # model -> its engine's base URL
    engines: dict[str, tuple[str, int]]  # model -> (engine, port)
    exporter: str  # the normalizing exporter's host:port
    scrape_configs: list[dict]


def start_stack(binary: str, folder: Path, procs: _Processes, rule_files: list[str]) -> Stack:
    """Start the demo's engines, front doors, exporter and a Prometheus (`binary`) loaded with `rule_files`,
    each a child in `procs` logging to `folder`; returns once every one answers."""
    ports = {
        name: free_port()
        for name in (
            "vllm",
            "sglang",
            "frontdoor-vllm",
            "frontdoor-sglang",
            "admin-vllm",
            "admin-sglang",
            "exporter",
            "prometheus",
        )
    }
    me = [sys.executable, "-m", "inferwatch"]
    engines = {VLLM_MODEL: ("vllm", ports["vllm"]), SGLANG_MODEL: ("sglang", ports["sglang"])}
    for model, (engine, port) in engines.items():
        # its GPU's workload pod is the simulator's HOSTNAME, as in Kubernetes: `vllm-0`, `sglang-0`
        procs.start(
            engine,
            me
            + [
                "simulate",
                "--engine",
                engine,
                "--model",
                model,
                "--listen",
                f"127.0.0.1:{port}",
                "--max-num-seqs",
                str(CAPS[model]),
                "--seed",
                "1",
                "--gpus",
                "1",
                "--keep-pace",
                str(KEEP_PACE_S),
            ],
            env={"HOSTNAME": f"{engine}-0"},
        )
        # users reach each engine through its own front door, which meters what they feel
        # (its own /metrics on its admin listener)
        procs.start(
            f"frontdoor-{engine}",
            me
            + [
                "frontdoor",
                "--upstream",
                f"http://127.0.0.1:{port}",
                "--listen",
                f"127.0.0.1:{ports[f'frontdoor-{engine}']}",
                "--metrics-listen",
                f"127.0.0.1:{ports[f'admin-{engine}']}",
            ],
        )
    doors = {model: f"http://127.0.0.1:{ports[f'frontdoor-{engine}']}" for model, (engine, _) in engines.items()}
    admins = [f"127.0.0.1:{ports[f'admin-{engine}']}" for engine, _ in engines.values()]
    # the exporter's per-target timeout fits inside Prometheus' scrape timeout, so one hanging engine
    # costs only its own series (the exporter also answers before X-Prometheus-Scrape-Timeout-Seconds)
    procs.start(
        "exporter",
        me
        + [
            "exporter",
            "normalize",
            "--listen",
            f"127.0.0.1:{ports['exporter']}",
            "--timeout",
            EXPORTER_TIMEOUT,
            "--target",
            f"vllm=http://127.0.0.1:{ports['vllm']}/metrics",
            "--target",
            f"sglang=http://127.0.0.1:{ports['sglang']}/metrics",
            *[a for m, cap in CAPS.items() for a in ("--max-running-requests", f"{m}={cap}")],
        ],
    )
    config: dict[str, Any] = {
        "global": {"scrape_interval": "2s", "scrape_timeout": SCRAPE_TIMEOUT, "evaluation_interval": "2s"},
        "rule_files": rule_files,
        "scrape_configs": [
            {
                "job_name": "inferwatch-exporter",
                "honor_labels": True,
                "static_configs": [{"targets": [f"127.0.0.1:{ports['exporter']}"]}],
                "metric_relabel_configs": [POD_FROM_TARGET],
            },
            {"job_name": "inferwatch-frontdoor", "static_configs": [{"targets": admins}]},
        ],
    }
    prom = start_prometheus(binary, folder, procs, config, ports["prometheus"])
    bases = {model: f"http://127.0.0.1:{port}" for model, (_, port) in engines.items()}
    _wait_ready(
        [f"{b}/health" for b in bases.values()]
        + [f"http://{a}/metrics" for a in admins]
        + [f"http://127.0.0.1:{ports['exporter']}/metrics", f"{prom}/-/ready"],
        procs,
    )
    return Stack(prom, doors, bases, engines, f"127.0.0.1:{ports['exporter']}", config["scrape_configs"])


def keep_serving(procs: _Processes, say) -> None:
    """Keep the stack up for the user until Ctrl-C (or until one of its processes exits: an error naming it)."""
    try:
        while True:
            time.sleep(1)
            procs.check()
    except KeyboardInterrupt:
        say("\nstopping every process the demo started")


def start_prometheus(binary: str, folder: Path, procs: _Processes, config: dict, port: int) -> str:
    """Write `config` to folder/prometheus.yml and start Prometheus on it (data in folder/data); its base URL."""
    (folder / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    procs.start(
        "prometheus",
        [
            binary,
            f"--config.file={folder / 'prometheus.yml'}",
            f"--storage.tsdb.path={folder / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            # the URL alerts' annotations give (`$externalURL`): the triage command they carry works pasted
            f"--web.external-url=http://127.0.0.1:{port}",
        ],
    )
    return f"http://127.0.0.1:{port}"


def _set_scenario(base: str, scenario: str) -> None:
    request = urllib.request.Request(
        f"{base}/admin/scenario",
        data=json.dumps({"scenario": scenario}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=5):
        pass


def _fmt(value: float | None, unit: str = "", digits: int = 2) -> str:
    return "-" if value is None or value != value else f"{value:.{digits}f}{unit}"


def _by_model(prom: str, expr: str) -> dict[str, float]:
    return {r["metric"].get("model", ""): float(r["value"][1]) for r in _query(prom, expr)}


def _status(prom: str, samples: dict[str, list[Sample]], now: float) -> list[str]:
    running = _by_model(prom, "sum by (model) (llm_requests_running)")
    waiting = _by_model(prom, "sum by (model) (llm_requests_waiting)")
    kv = _by_model(prom, "max by (model) (llm_kv_cache_usage_ratio)")
    ttft = _by_model(
        prom, "histogram_quantile(0.95, sum by (model, le) (rate(llm_time_to_first_token_seconds_bucket[30s])))"
    )
    door = _by_model(
        prom,
        "histogram_quantile(0.95, sum by (model, le) (rate(llm_frontdoor_time_to_first_token_seconds_bucket[30s])))",
    )
    tokens = _by_model(
        prom,
        "sum by (model) (rate(llm_request_generation_tokens_sum[30s])) / "
        "sum by (model) (rate(llm_request_generation_tokens_count[30s]))",
    )
    lines = []
    for model in (VLLM_MODEL, SGLANG_MODEL):
        recent = [s.ttft for s in samples[model] if s.ttft is not None and now - s.started < 30]
        user = percentile(recent, 0.95) if recent else None
        lines.append(
            f"  {model:11} running {_fmt(running.get(model), digits=0):>3}/{CAPS[model]:<3} "
            f"waiting {_fmt(waiting.get(model), digits=0):>4}  "
            f"KV {_fmt(100 * kv.get(model, float('nan')), '%', 0):>5}"
            f"  engine TTFT p95 {_fmt(ttft.get(model), 's'):>7}  front door {_fmt(door.get(model), 's'):>7}"
            f"  client {_fmt(user, 's'):>7}"
            f"  output tokens/request {_fmt(tokens.get(model), digits=0):>5}"
        )
    util = {
        r["metric"].get("target", ""): float(r["value"][1])
        for r in _query(prom, "max by (target) (gpu_utilization_ratio)")
    }
    sm = {
        r["metric"].get("target", ""): float(r["value"][1])
        for r in _query(prom, "max by (target) (gpu_sm_active_ratio)")
    }
    stalled = _query(prom, "count((gpu_utilization_ratio >= 0.9) and on (uuid) (gpu_sm_active_ratio < 0.5))")
    lines.append(
        "  GPUs       "
        + "  ".join(
            f"{t} util {_fmt(100 * util.get(t, float('nan')), '%', 0):>4} "
            f"SM {_fmt(100 * sm.get(t, float('nan')), '%', 0):>4}"
            for t in ("vllm", "sglang")
        )
        + f"  busy but not computing {int(float(stalled[0]['value'][1])) if stalled else 0}"
    )
    return lines


def _alerts(prom: str) -> dict[tuple, str]:
    out = {}
    for row in _query(prom, "ALERTS"):
        labels = row["metric"]
        key = tuple(sorted((k, v) for k, v in labels.items() if k not in ("__name__", "alertstate")))
        out[key] = labels["alertstate"]
    return out


def _describe(key: tuple) -> str:
    labels = dict(key)
    shown = [
        f"{k}={labels[k]}" for k in ("service", "model", "slo", "tier", "target", "gpu", "severity") if k in labels
    ]
    return f"{labels['alertname']} {' '.join(shown)}"


async def _drive(
    base_urls: dict[str, str],
    engine_urls: dict[str, str],
    prom: str,
    script_seconds: list[float],
    say,
    short: bool = False,
) -> tuple[set, dict[str, list[Sample]], dict[str, tuple[float, float]], dict[str, list[str]]]:
    """Load through the front doors (base_urls), scenarios set on the engines (engine_urls); in --short (`short`)
    a phase ends once the alerts it shows have fired during it. When PAGE fires, its annotation's triage command
    runs as pasted at the end of that phase (its scenario still on: the first minute of a queue reads as the
    slower steps that cause it, the queue's share of request time still low); the last item is what it named
    ({model: kinds}, empty if it did not run)."""
    # arrivals until the script ends (the loads are cancelled then): triage between phases takes time of its own
    total = sum(script_seconds) + LOAD_SLACK_S
    samples: dict[str, list[Sample]] = {m: [] for m in base_urls}
    loads = [
        asyncio.ensure_future(
            run_load(
                LoadConfig(base_urls[m], RATES[m], total, m, prompt_tokens=150, max_tokens=1024, seed=7 + i),
                samples=samples[m],
            )
        )
        for i, m in enumerate(base_urls)
    ]
    seen: dict[tuple, str] = {}
    fired: set = set()
    windows: dict[str, tuple[float, float]] = {}
    command, paged = None, None
    started = time.monotonic()
    for phase, seconds in zip(SCRIPT, script_seconds, strict=True):
        if not seconds:
            continue
        windows[phase.name] = (time.monotonic(), time.monotonic() + seconds)
        wall_start = time.time()
        length = f"{seconds:.0f}s at most" if short and phase.shows else f"{seconds:.0f}s"
        say(f"\n== {phase.name} ({length}): {phase.says}")
        for model, scenario in phase.scenarios.items():
            await asyncio.to_thread(_set_scenario, engine_urls[model], scenario)
            if scenario == "broken-tools":  # tool calls, short answers, in a stream of their own for the phase
                loads.append(
                    asyncio.ensure_future(
                        run_load(
                            LoadConfig(
                                base_urls[model], TOOL_RATE, seconds, model, prompt_tokens=150, tool_share=1.0, seed=5
                            )
                        )
                    )
                )
        end = time.monotonic() + seconds
        fired_here: set = set()
        while time.monotonic() < end:
            await asyncio.sleep(min(5.0, max(0.0, end - time.monotonic())))
            now = time.monotonic()
            say(f"t+{now - started:4.0f}s")
            for line in await asyncio.to_thread(_status, prom, samples, now):
                say(line)
            seen = _note_alerts(await asyncio.to_thread(_alerts, prom), seen, fired, fired_here, say)
            if command is None and _matches(PAGE, fired_here):  # the page's command, as its annotation says it
                command = await asyncio.to_thread(page_command, prom, PAGE)
            if _phase_shown(phase, short, fired_here, say):
                break
        windows[phase.name] = (windows[phase.name][0], time.monotonic())
        if phase.name == SCRIPT[0].name:
            normal = (wall_start, time.time())
        else:  # the incident judged by `inferwatch triage` against the normal phase
            for line in await asyncio.to_thread(_triage_lines, prom, normal, (wall_start, time.time())):
                say(line)
        if command is not None and paged is None:  # on-call pastes it as the phase ends, the incident still on
            paged = await asyncio.to_thread(triage_from_page, command)
            for line in paged.lines:
                say(line)
    for load in loads:
        load.cancel()
    await asyncio.gather(*loads, return_exceptions=True)
    return fired, samples, windows, paged.kinds if paged else {}


def _triage_lines(
    prom: str, normal: tuple[float, float], incident: tuple[float, float], models: tuple[str, ...] = tuple(CAPS)
) -> list[str]:
    """`inferwatch triage` on the demo's Prometheus over an incident, the normal phase as baseline: a line a model."""
    from inferwatch.triage import Connection, Window, headline, triage

    try:
        report = triage(Connection(prom), Window(*incident), f"{normal[0]:.3f}/{normal[1]:.3f}", models)
    except InferwatchError as err:
        return [f"  triage: {err}"]
    return [f"  triage: {headline(verdict)}" for verdict in report.verdicts]


# what the closing line suggests to query: series the demo's Prometheus has (tests/test_demo.py checks the SLO one)
TRY_QUERIES = ("ALERTS", "llm_slo:error_ratio:5m", "llm_requests_waiting")


def _matches(expected: dict[str, str], fired: set) -> bool:
    return any(all(dict(k).get(n) == v for n, v in expected.items()) for k in fired)


def _note_alerts(alerts: dict, seen: dict, fired: set, fired_here: set, say) -> dict:
    """Say each alert whose state changed since `seen` (and each resolved one), add the firing ones to `fired`
    and `fired_here`; the alerts to remember as seen."""
    for key, state in alerts.items():
        if seen.get(key) != state:
            say(f"  ALERT {state.upper():8} {_describe(key)}")
        if state == "firing":
            fired.add(key)
            fired_here.add(key)
    for key in set(seen) - set(alerts):
        say(f"  ALERT resolved {_describe(key)}")
    return alerts


class _Shows(Protocol):
    """What `_phase_shown` reads of a phase: this demo's Phase, the real-engine demo's RealPhase."""

    @property
    def name(self) -> str: ...

    @property
    def shows(self) -> tuple[dict[str, str], ...]: ...


def _phase_shown(phase: _Shows, short: bool, fired_here: set, say) -> bool:
    """In --short, True (and said) once every alert the phase shows has fired during it: the phase ends."""
    if short and phase.shows and all(_matches(e, fired_here) for e in phase.shows):
        say(f"  (--short: {' and '.join(e['alertname'] for e in phase.shows)} fired, {phase.name} ends here)")
        return True
    return False


def _thinking_summary(samples: dict[str, list[Sample]], windows: dict[str, tuple[float, float]], fired: set) -> str:
    start, end = windows.get("thinking on SGLang", (0.0, 0.0))
    waited = [s.ttft for s in samples[SGLANG_MODEL] if s.ttft is not None and start <= s.started < end]
    if not waited:
        return f"  thinking on {SGLANG_MODEL}: no request reached visible text during the incident"
    door = {
        "alertname": "LLMErrorBudgetBurn",
        "service": FRONT_DOOR,
        "slo": "responsive",
        "model": SGLANG_MODEL,
        "severity": "critical",
    }
    engine = {"alertname": "LLMErrorBudgetBurn", "slo": "responsive", "model": SGLANG_MODEL, "severity": "critical"}
    engine_paged = any(dict(k).get("service") != FRONT_DOOR for k in fired if _matches(engine, {k}))
    return (
        f"  thinking on {SGLANG_MODEL}: users waited {percentile(waited, 0.5):.1f}s (p50) for visible text "
        f"while the engine's own TTFT {'paged too' if engine_paged else 'stayed normal'}; the front door's "
        f"responsive SLO {'paged' if _matches(door, fired) else 'did not page (yet)'} on what users felt"
    )


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def prometheus_binary(command: str) -> str:
    """The prometheus on PATH, or one clear error saying how to install it and run `command` again."""
    binary = shutil.which("prometheus")
    if binary is None:
        raise InferwatchError(
            "prometheus not found on PATH: install it with `apt-get install -y prometheus` "
            f"(Debian's package), then run `{command}` again"
        )
    return binary


def until_interrupted(run) -> bool:
    """run()'s answer; Ctrl-C or SIGTERM stop it cleanly instead (False), each process it started stopped by its
    own ExitStack on the way out."""
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        return run()
    except KeyboardInterrupt:
        print("\ninterrupted: every process the demo started has been stopped")
        return False
    finally:
        signal.signal(signal.SIGTERM, previous)


def work_folder(stack: ExitStack, workdir: str | None, prefix: str) -> Path:
    """`workdir` (made if new), or a temporary folder removed when `stack` closes."""
    folder = Path(workdir) if workdir else Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=prefix)))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def run_demo(headless: bool = False, short: bool = False, workdir: str | None = None) -> bool:
    """Run the scripted demo; True when every expected alert fired. Ctrl-C or SIGTERM stop it cleanly."""
    binary = prometheus_binary("inferwatch demo")
    return until_interrupted(lambda: _run(binary, headless, short, workdir))


def _run(binary: str, headless: bool, short: bool, workdir: str | None) -> bool:
    say = print
    with ExitStack() as stack:
        folder = work_folder(stack, workdir, "inferwatch-demo-")
        procs = _Processes(folder)
        stack.callback(procs.stop)
        demo = start_stack(binary, folder, procs, _rule_files(folder))
        prom, doors, bases, engines = demo.prom, demo.doors, demo.bases, demo.engines
        say(
            f"inferwatch demo: vLLM {VLLM_MODEL} at {bases[VLLM_MODEL]} behind the front door {doors[VLLM_MODEL]}, "
            f"SGLang {SGLANG_MODEL} at {bases[SGLANG_MODEL]} behind {doors[SGLANG_MODEL]}, exporter at "
            f"{demo.exporter}, Prometheus at {prom}"
        )
        say(
            f"(time compressed: SLO rules every {SLO_INTERVAL}, alert `for:` durations divided by {FOR_SCALE}; "
            f"logs and data in {folder})"
        )
        seconds = [p.short_seconds if short else p.seconds for p in SCRIPT]
        fired, samples, windows, paged = asyncio.run(_drive(doors, bases, prom, seconds, say, short))
        expected_alerts = EXPECTED + ([] if short else EXPECTED_FULL)
        missing = [e for e in expected_alerts if not _matches(e, fired)]
        say("\n== summary")
        for expected in expected_alerts:
            state = "MISSED" if expected in missing else "fired "
            say(f"  {state} {' '.join(f'{k}={v}' for k, v in expected.items())}")
        named = paged.get(PAGE["model"], [])[:1] == [PAGE_KIND]
        say(
            f"  {'named ' if named else 'MISSED'} triage from the {PAGE['alertname']} page's command: "
            f"{PAGE['model']} {PAGE_KIND} (it said {', '.join(paged.get(PAGE['model'], [])) or 'no kind'})"
        )
        say(_thinking_summary(samples, windows, fired))
        live = rows_live(lambda expr: _query(prom, expr), {m: engine for m, (engine, _) in engines.items()}, say)
        healthy = _doctor(prom, folder, {e: f"http://127.0.0.1:{port}/metrics" for e, port in engines.values()}, say)
        if not headless:
            say(
                f"\nThe stack keeps running: open {prom} and try {', '.join(f'`{q}`' for q in TRY_QUERIES[:-1])} or "
                f"`{TRY_QUERIES[-1]}`; inferwatch simulate's admin endpoints switch scenarios "
                f'(curl -X POST {bases[VLLM_MODEL]}/admin/scenario -d \'{{"scenario": "errors"}}\'). '
                "Press Ctrl-C to stop everything."
            )
            keep_serving(procs, say)
        return not missing and named and live and healthy


def _doctor(prom: str, folder: Path, engine_urls: dict[str, str], say, gpus: bool = True) -> bool:
    """The demo's last step: `inferwatch doctor` against its own stack, with a deploy.yaml saying what the demo
    runs (the normalizing exporter, which serves the caps; front-door SLOs when its rule files hold them; no
    Alertmanager; `gpus` False: no GPU exporter, as on a CPU engine). True when every check is ok or skipped."""
    from inferwatch.deploy import load_config, run_checks, summary

    loaded = yaml.safe_load((folder / "prometheus.yml").read_text())["rule_files"]
    groups = [g["name"] for path in loaded for g in (yaml.safe_load(Path(path).read_text()) or {}).get("groups", [])]
    deploy = {
        "version": 1,
        "scrape_mode": "exporter",
        "engines": [
            {"name": engine, "engine": engine, "selector": {"app": f"inferwatch-demo-{engine}"}, "urls": [url]}
            for engine, url in engine_urls.items()
        ],
        "frontdoor": {"enabled": any(g.startswith("inferwatch-slo-llm-frontdoor") for g in groups)},
        **({} if gpus else {"dcgm": {"enabled": False}}),
    }
    (folder / "deploy.yaml").write_text(yaml.safe_dump(deploy, sort_keys=False))
    say(f"\n== inferwatch doctor --prometheus {prom} --config {folder / 'deploy.yaml'} --no-alertmanager")
    results = run_checks(load_config(folder / "deploy.yaml"), prom, alertmanager_expected=False)
    for result in results:
        say(f"  {result}")
    say(f"  {summary(results)}")
    return not any(r.bad for r in results)
