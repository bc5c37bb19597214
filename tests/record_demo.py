"""Soak the demo's healthy models, then play its incidents, and record what the rules read: run by a developer,
never by the suite.

    python tests/record_demo.py                               # 30 min healthy + 4 min per incident, about 52 min
    python tests/record_demo.py --healthy 3 --incident 1 --out /tmp/try   # a quick look

It starts the demo's own stack (sim/_demo.py `start_stack`: both simulated engines with their GPUs, a front door
in front of each, the normalizing exporter, and a Prometheus with the demo's compressed rules) and a second
Prometheus scraping the same targets with the rules as shipped (uncompressed: `inferwatch build`'s rule files
and the front-door SLOs). The demo's load runs through the front doors throughout. Both models stay `normal` for
--healthy minutes, then each incident of the demo's script (sim/_demo.py SCRIPT) plays for --incident minutes, in
the script's order, with the demo's extra tool-call traffic during broken tools.

Every 15 s it reads ALERTS from both Prometheus servers and logs each alert that is pending or firing, with its
phase. At the end it writes to --out:
- `soak.yaml`: what ran, the phases' times, and every alert seen pending or firing, per Prometheus and phase;
- `recording.json.gz`: every series the shipped rules read, one sample every --step seconds (15) over the whole
  run (the value at each step, as a range query gives it), for tests/demo_replay.py to replay through promtool.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import platform
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
from pathlib import Path

import yaml

from inferwatch.sim import LoadConfig, run_load
from inferwatch.sim._demo import (
    CAPS,
    RATES,
    SCRIPT,
    TOOL_RATE,
    _interrupt,
    _Processes,
    _rule_files,
    _set_scenario,
    _wait_ready,
    free_port,
    start_stack,
)

HERE = Path(__file__).resolve().parent

STEP = 15  # seconds between recorded samples (--step)
POLL = 15  # seconds between reads of ALERTS


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as resp:
        return json.load(resp)


def _query(prom: str, expr: str) -> list[dict]:
    try:
        return _get(f"{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))["data"]["result"]
    except (OSError, ValueError, KeyError):
        return []


def _read_names(rule_files: list[str]) -> set[str]:
    """Series names the rules read, but the SLO rules' own recordings (`llm_slo:...`). The mapping rules' records
    (vLLM's names to the vocabulary) stay: behind the normalizing exporter they record nothing."""
    names = set()
    for path in rule_files:
        for group in yaml.safe_load(Path(path).read_text())["groups"]:
            for rule in group["rules"]:
                expr = re.sub(r'"[^"]*"', '""', rule["expr"])
                names |= set(re.findall(r"\b((?:llm|gpu|inferwatch)_[a-zA-Z0-9_:]*|up)\b(?!\s*\()", expr))
    return {n for n in names if ":" not in n}


def _start_real_prometheus(
    binary: str, folder: Path, procs: _Processes, scrape_configs: list[dict]
) -> tuple[str, list[str]]:
    folder.mkdir()
    rules = _rule_files(folder, compress=False)
    port = free_port()
    config = {
        "global": {"scrape_interval": "2s", "scrape_timeout": "2s", "evaluation_interval": "2s"},
        "rule_files": rules,
        "scrape_configs": scrape_configs,
    }
    (folder / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    procs.start(
        "prometheus-real",
        [
            binary,
            f"--config.file={folder / 'prometheus.yml'}",
            f"--storage.tsdb.path={folder / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
    )
    prom = f"http://127.0.0.1:{port}"
    _wait_ready([f"{prom}/-/ready"], procs)
    return prom, rules


def _phases(healthy_s: float, incident_s: float) -> list[tuple[str, dict[str, str], float]]:
    phases = [("healthy", {m: "normal" for m in CAPS}, healthy_s)]
    phases += [(p.name, p.scenarios, incident_s) for p in SCRIPT if set(p.scenarios.values()) != {"normal"}]
    return phases


async def _play(doors, bases, proms: dict[str, str], phases, log) -> tuple[list[dict], list[dict]]:
    total = sum(s for _, _, s in phases)
    loads = [
        asyncio.ensure_future(
            run_load(LoadConfig(doors[m], RATES[m], total, m, prompt_tokens=150, max_tokens=1024, seed=7 + i))
        )
        for i, m in enumerate(doors)
    ]
    windows, seen, host_load = [], [], []
    for name, scenarios, seconds in phases:
        for model, scenario in scenarios.items():
            await asyncio.to_thread(_set_scenario, bases[model], scenario)
            if scenario == "broken-tools":
                loads.append(
                    asyncio.ensure_future(
                        run_load(
                            LoadConfig(
                                doors[model], TOOL_RATE, seconds, model, prompt_tokens=150, tool_share=1.0, seed=5
                            )
                        )
                    )
                )
        start = time.time()
        log(f"== {name} for {seconds:.0f}s: {scenarios}")
        end = start + seconds
        while (left := end - time.time()) > 0:
            await asyncio.sleep(min(POLL, left))
            host_load.append(os.getloadavg()[0])
            for which, prom in proms.items():
                for row in await asyncio.to_thread(_query, prom, "ALERTS"):
                    labels = {k: v for k, v in row["metric"].items() if k != "__name__"}
                    seen.append({"time": round(time.time(), 1), "prometheus": which, "phase": name, **labels})
                    log(f"  {which}: {labels['alertstate']} {labels}")
        windows.append(
            {
                "phase": name,
                "scenarios": scenarios,
                "start": round(start, 3),
                "end": round(time.time(), 3),
                "host_load_1m": {
                    "mean": round(sum(host_load) / max(1, len(host_load)), 1),
                    "max": round(max(host_load, default=0), 1),
                },
            }
        )
        log(f"   host load average over {name}: {windows[-1]['host_load_1m']}")
        host_load = []
    for load in loads:
        load.cancel()
    await asyncio.gather(*loads, return_exceptions=True)
    return windows, seen


def _record(prom: str, names: set[str], start: float, end: float, step: float = STEP) -> dict:
    """Every series of `names`, one value every `step` seconds (None where it had none) on a grid from `start`."""
    grid = [start + i * step for i in range(int((end - start) // step) + 1)]
    series = {}
    for name in sorted(names):
        data = _get(
            f"{prom}/api/v1/query_range?"
            + urllib.parse.urlencode({"query": name, "start": grid[0], "end": grid[-1], "step": step})
        )["data"]["result"]
        for row in data:
            labels = dict(sorted(row["metric"].items()))
            values = dict((round(float(t)), v) for t, v in row["values"])
            series[json.dumps(labels, sort_keys=True)] = [values.get(round(t)) for t in grid]
    return {"start": grid[0], "step": step, "points": len(grid), "series": series}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--healthy", type=float, default=30, help="minutes of healthy load")
    parser.add_argument("--incident", type=float, default=4, help="minutes of each incident of the demo's script")
    parser.add_argument("--step", type=float, default=STEP, help="seconds between recorded samples")
    parser.add_argument("--out", type=Path, default=HERE / "fixtures" / "demo")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)  # stop every child process on SIGTERM too
    binary = shutil.which("prometheus")
    if binary is None:
        sys.exit("prometheus not found on PATH")
    args.out.mkdir(parents=True, exist_ok=True)
    logfile = open(args.out / "record.log", "w")

    def log(line: str) -> None:
        stamp = time.strftime("%H:%M:%S", time.gmtime())
        print(f"{stamp} {line}", flush=True)
        logfile.write(f"{stamp} {line}\n")
        logfile.flush()

    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="inferwatch-soak-")))
        procs = _Processes(folder)
        stack.callback(procs.stop)
        demo = start_stack(binary, folder, procs, _rule_files(folder))
        real, real_rules = _start_real_prometheus(binary, folder / "real", procs, demo.scrape_configs)
        proms = {"demo (compressed rules)": demo.prom, "shipped rules": real}
        log(f"stack up: demo Prometheus {demo.prom}, shipped-rules Prometheus {real}, logs in {folder}")
        phases = _phases(args.healthy * 60, args.incident * 60)
        started = time.time()
        windows, seen = asyncio.run(_play(demo.doors, demo.bases, proms, phases, log))
        procs.check()
        version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
        recording = _record(real, _read_names(real_rules), started, time.time(), args.step)
        with gzip.open(args.out / "recording.json.gz", "wt") as out:
            json.dump(recording, out, sort_keys=True, separators=(",", ":"))
        fired = [s for s in seen if s["alertstate"] == "firing"]
        summary = {
            "ran": {
                "command": "python tests/record_demo.py " + " ".join(sys.argv[1:] if argv is None else argv),
                "prometheus": version,
                "python": platform.python_version(),
                "models": {m: {"cap": CAPS[m], "rate": RATES[m]} for m in CAPS},
                "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            },
            "phases": windows,
            "alerts_seen": _group(seen),
            "healthy_alerts_firing": sorted({_key(s) for s in fired if s["phase"] == "healthy"}),
        }
        (args.out / "soak.yaml").write_text(yaml.safe_dump(summary, sort_keys=False, width=120))
        log(
            f"healthy phase: {len(summary['healthy_alerts_firing'])} alerts firing "
            f"{summary['healthy_alerts_firing']}; wrote {args.out}"
        )
    return 0


def _key(row: dict) -> str:
    shown = [
        f"{k}={row[k]}" for k in ("alertname", "model", "slo", "tier", "service", "severity", "target") if k in row
    ]
    return f"{row['prometheus']}: {' '.join(shown)}"


def _group(seen: list[dict]) -> list[dict]:
    """Each (Prometheus, phase, alert) once, with when it was first pending and first firing."""
    out: dict[tuple, dict] = {}
    for row in seen:
        entry = out.setdefault((row["phase"], _key(row)), {"phase": row["phase"], "alert": _key(row)})
        entry.setdefault(f"first_{row['alertstate']}", row["time"])
    return list(out.values())


if __name__ == "__main__":
    sys.exit(main())
