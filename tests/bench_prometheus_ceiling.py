"""Benchmark: what one Prometheus carries with inferwatch's default rules, at a fleet size you choose.

    python tests/bench_prometheus_ceiling.py                      # 10 engines, 3 minutes
    python tests/bench_prometheus_ceiling.py --engines 100 --json-out ceiling-100.json
    python tests/bench_prometheus_ceiling.py --engines 1000 --minutes 8

A real Prometheus (Debian's) scrapes a synthetic fleet (tests/ceiling_fleet.py: real expositions as templates,
one target per engine, dcgm-exporter node and front-door replica, all on one loopback server, through file_sd) with
the scrape jobs and relabelings of the compose render and every rule file of the default bundle
(deploy/compose/prometheus/rules/: SLOs, front-door SLOs, operational alerts, mappings, caps, autoscaling).
Groups whose interval is longer than `--max-interval` run at it so that each one's cost shows within the run; the
cost is then charged at the group's real interval. Printed, and written with `--json-out`:

- series (prometheus_tsdb_head_series) and where they come from: per vLLM engine, SGLang engine, GPU, front-door
  replica (series with that `job`, relabelled and mapped), recorded per engine (`pod`), per GPU, per model, rest;
- samples ingested a second, Prometheus' CPU (cores) and this process' (the fleet's server), load average;
- resident memory and Go heap in use (the peak seen), head chunks;
- each rule group's evaluation time (median and max over the run) against its real interval, the worst group,
  the evaluation duty (the sum of time / interval: cores the rules keep busy), missed iterations, and the samples
  each group reads a second (its rules as instant queries with `stats=all`: a cost the machine's load does not
  move, where evaluation times on a shared machine do);
- scrape durations by job (mean and max);
- the four dashboards' panel queries as Grafana runs them (range queries at a 30 s step, variables at All,
  $__rate_interval 1m) with Prometheus' own timings (`stats=all`), over the run's span, and scaled to the
  dashboards' 3 h of steps (a run holds minutes, not 3 h, of data).

Not a timed assertion: numbers for deploy/README.md#scaling, measured on whatever machine runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ceiling_fleet import Fleet, rule_files, scrape_config  # noqa: E402
from promtools import prometheus  # noqa: E402

from inferwatch.durations import parse_duration  # noqa: E402

DASHBOARDS = sorted((Path(__file__).resolve().parent.parent / "dashboards").glob("*.json"))
GRAFANA = {"__rate_interval": "1m", "__interval": "30s", "__range": "3h"}
SELF = (
    "prometheus_tsdb_head_series",
    "prometheus_tsdb_head_samples_appended_total",
    "prometheus_tsdb_head_chunks",
    "process_resident_memory_bytes",
    "go_memstats_heap_inuse_bytes",
    "process_cpu_seconds_total",
    "prometheus_rule_group_iterations_missed_total",
)


def _get(base: str, path: str, timeout: float = 150) -> dict:
    with urllib.request.urlopen(base + path, timeout=timeout) as resp:  # Prometheus' own query timeout is 2 m
        return json.load(resp)


def self_metrics(base: str) -> dict[str, float]:
    """Prometheus' own process and TSDB metrics (summed over their labels) from its /metrics."""
    out = dict.fromkeys(SELF, 0.0)
    with urllib.request.urlopen(base + "/metrics", timeout=150) as resp:
        for line in resp.read().decode().splitlines():
            name = re.split(r"[{ ]", line, maxsplit=1)[0]
            if name in out:
                out[name] += float(line.rsplit(" ", 1)[1])
    return out


def scaled_rules(folder: Path, max_interval: float, evaluation_interval: float) -> tuple[list[Path], dict[str, float]]:
    """The default rule files with every group interval above `max_interval` lowered to it; returns the files and
    {group: its real interval in seconds} (the global evaluation_interval where a group names none)."""
    files, intervals = [], {}
    for path in rule_files():
        doc = yaml.safe_load(path.read_text())
        for group in doc["groups"]:
            real = float(parse_duration(group["interval"])) if "interval" in group else evaluation_interval
            intervals[group["name"]] = real
            if real > max_interval:
                group["interval"] = f"{max_interval:g}s"
        files.append(folder / path.name)
        files[-1].write_text(yaml.safe_dump(doc, sort_keys=False))
    return files, intervals


def _substitute(expr: str) -> str:
    """A panel query as Grafana sends it with every variable at All."""
    return re.sub(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)", lambda m: GRAFANA.get(m.group(1) or m.group(2), ".*"), expr)


def _timed_range(base: str, expr: str, start: float, end: float) -> dict:
    """One range query at a 30 s step: Prometheus' own evaluation time (`stats=all`), samples read, series."""
    params = {"query": expr, "start": start, "end": end, "step": 30, "stats": "all"}
    started = time.perf_counter()
    try:
        answer = _get(base, "/api/v1/query_range?" + urllib.parse.urlencode(params))
    except OSError as err:  # an HTTP 422/503 (too many samples, a timeout) is a finding, not a crash
        return {"error": str(err)[:200]}
    stats = answer["data"].get("stats", {})
    return {
        "seconds": stats.get("timings", {}).get("evalTotalTime", time.perf_counter() - started),
        "samples": stats.get("samples", {}).get("totalQueryableSamples"),
        "peak_samples": stats.get("samples", {}).get("peakSamples"),
        "series": len(answer["data"]["result"]),
    }


def dashboard_queries(base: str, span: float, budget: float) -> dict:
    """Every panel query of the four dashboards (Loki panels left out), variables at All, as a range query over the
    run's span, where every step has data; `est_3h_s` scales it to the dashboards' 3 h of steps, what a refresh
    costs once 3 h of data exist. Queries left when `budget` seconds are spent are listed, not run."""
    end, stop = time.time(), time.time() + budget
    boards = {}
    for path in DASHBOARDS:
        board = json.loads(path.read_text())
        panels = []
        for panel in board["panels"]:
            for target in panel.get("targets", []):
                if "expr" not in target or "loki" in json.dumps(target.get("datasource", panel.get("datasource"))):
                    continue
                if time.time() > stop:
                    panels.append({"panel": panel["title"], "error": "not run: the dashboards' time budget was spent"})
                    continue
                panels.append(
                    {"panel": panel["title"], **_timed_range(base, _substitute(target["expr"]), end - span, end)}
                )
        seconds = sum(p.get("seconds", 0) for p in panels)
        slowest = max(panels, key=lambda p: p.get("seconds", 0), default=None)
        boards[path.stem] = {
            "queries": len(panels),
            "errors": [p for p in panels if "error" in p],
            "span_s": seconds,
            "est_3h_s": seconds * 3 * 3600 / max(span, 1),
            "samples": sum(p.get("samples") or 0 for p in panels),
            "est_3h_samples": sum(p.get("samples") or 0 for p in panels) * 3 * 3600 / max(span, 1),
            "peak_samples": max((p.get("peak_samples") or 0 for p in panels), default=0),
            "slowest": slowest["panel"] if slowest else None,
            "slowest_s": slowest.get("seconds") if slowest else None,
            "panels": panels,
        }
    return boards


def rule_samples(base: str, files: list[Path]) -> dict[str, int]:
    """{group: samples its rules read in one evaluation}: each rule's expression once as an instant query with
    Prometheus' own count (`stats=all`, totalQueryableSamples). Unlike evaluation time, this does not move with the
    machine's load: which groups cost the most, by the work they do."""
    out = {}
    for path in files:
        for group in yaml.safe_load(path.read_text())["groups"]:
            total = 0
            for rule in group["rules"]:
                params = urllib.parse.urlencode({"query": rule["expr"], "stats": "all"})
                stats = _get(base, "/api/v1/query?" + params)["data"].get("stats", {})
                total += stats.get("samples", {}).get("totalQueryableSamples", 0)
            out[group["name"]] = total
    return out


def _query(base: str, expr: str) -> list[dict]:
    """An instant query with room for a loaded server (promtools.query gives up after 10 s)."""
    return _get(base, "/api/v1/query?" + urllib.parse.urlencode({"query": expr}), timeout=150)["data"]["result"]


def _count(base: str, selector: str) -> int:
    result = _query(base, f"count({selector})")
    return int(float(result[0]["value"][1])) if result else 0


def composition(base: str, fleet: Fleet) -> dict:
    """Series by what they scale with: each job's series per target unit, recorded series per pod, GPU, model."""
    units = {
        "vllm": fleet.count("vllm"),
        "sglang": fleet.count("sglang"),
        "dcgm": fleet.gpu_count,
        "frontdoor": fleet.count("frontdoor"),
    }
    out: dict[str, float] = {}
    any_ = '__name__=~".+"'
    for job, n in units.items():
        out[f"per_{job}"] = _count(base, f'{{{any_}, job="{job}"}}') / max(n, 1)
    recorded = {
        "recorded_per_engine": (f'{{{any_}, job="", pod!=""}}', fleet.engines),
        "recorded_per_gpu": (f'{{{any_}, job="", pod="", uuid!=""}}', fleet.gpu_count),
        "recorded_per_model": (f'{{{any_}, job="", pod="", uuid="", model!=""}}', fleet.models),
        "recorded_rest": (f'{{{any_}, job="", pod="", uuid="", model=""}}', 1),
    }
    for key, (selector, n) in recorded.items():
        out[key] = _count(base, selector) / max(n, 1)
    return out


def measure(
    engines: int,
    models: int,
    minutes: float,
    scrape_interval: str = "15s",
    evaluation_interval: str = "15s",
    max_interval: str = "1m",
    min_evaluations: int = 2,
    dashboard_minutes: float = 10,
    workdir: Path | None = None,
    binary: str = "prometheus",
) -> dict:
    """Run one fleet size for `minutes` (and until every group evaluated `min_evaluations` times); the numbers."""
    work = workdir or Path(tempfile.mkdtemp(prefix="bench-ceiling-"))
    built = time.time()
    fleet = Fleet(engines, models)
    built = time.time() - built
    files, intervals = scaled_rules(
        work, float(parse_duration(max_interval)), float(parse_duration(evaluation_interval))
    )
    load_before = os.getloadavg()
    with fleet.serve() as url:
        sd = fleet.write_file_sd(work, url.removeprefix("http://"))
        config = scrape_config(sd, scrape_interval, evaluation_interval, files)
        with prometheus(binary, config, work) as base:
            every = len(fleet.targets)
            _until(lambda: _up(base) >= every, 60 + 4 * float(parse_duration(scrape_interval)))
            up_at_start = _up(base)
            start, ours0 = time.time(), time.process_time()
            first = self_metrics(base)
            peak = {"process_resident_memory_bytes": 0.0, "go_memstats_heap_inuse_bytes": 0.0}
            evaluations: dict[str, dict[str, float]] = {}
            rule_times: dict[tuple[str, str, str], dict[str, float]] = {}
            poll = min(5.0, float(parse_duration(scrape_interval)))
            while True:
                for group in _get(base, "/api/v1/rules")["data"]["groups"]:
                    if not group["lastEvaluation"].startswith("0001"):
                        evaluations.setdefault(group["name"], {})[group["lastEvaluation"]] = group["evaluationTime"]
                        for rule in group["rules"]:
                            key = (group["name"], rule["name"], json.dumps(rule.get("labels", {}), sort_keys=True))
                            rule_times.setdefault(key, {})[rule["lastEvaluation"]] = rule["evaluationTime"]
                now = self_metrics(base)
                for key in peak:
                    peak[key] = max(peak[key], now[key])
                done = time.time() - start >= minutes * 60
                if done and all(len(evaluations.get(g, ())) >= min_evaluations for g in intervals):
                    break
                if time.time() - start > minutes * 60 + 4 * float(parse_duration(max_interval)) + 120:
                    break  # a group that never evaluates is reported as such, not waited on forever
                time.sleep(poll)
            last, elapsed, ours = self_metrics(base), time.time() - start, time.process_time() - ours0
            up_at_end = _up(base)
            load_during = os.getloadavg()
            # what follows reads the TSDB, heavily at 1,000 engines: each part that fails is named, the rest kept
            failed: list[str] = []
            window = f"[{int(elapsed)}s]"
            scrape = _attempt(
                failed,
                "scrape durations",
                lambda: _by_job(base, f"avg_over_time(scrape_duration_seconds{window})", "avg"),
            )
            scrape_max = _attempt(
                failed,
                "scrape durations",
                lambda: _by_job(base, f"max_over_time(scrape_duration_seconds{window})", "max"),
            )
            series = _attempt(failed, "series composition", lambda: composition(base, fleet))
            read = _attempt(failed, "samples the rules read", lambda: rule_samples(base, files))
            firing = _attempt(
                failed,
                "firing alerts",
                lambda: {
                    r["metric"]["alertname"]: int(float(r["value"][1]))
                    for r in _query(base, 'count by (alertname) (ALERTS{alertstate="firing"})')
                },
            )
            boards = (
                _attempt(failed, "dashboards", lambda: dashboard_queries(base, elapsed, dashboard_minutes * 60))
                if dashboard_minutes
                else {}
            )
    groups = {}
    for name, real in intervals.items():
        times = list(evaluations.get(name, {}).values())
        groups[name] = {
            "interval_s": real,
            "evaluations": len(times),
            "median_s": statistics.median(times) if times else None,
            "max_s": max(times) if times else None,
            "duty": statistics.median(times) / real if times else None,
            "samples_per_evaluation": read.get(name),
            "samples_read_per_s": read[name] / real if name in read else None,
        }
    evaluated = {k: v for k, v in groups.items() if v["evaluations"]}
    rules = sorted(
        (
            {
                "group": group,
                "rule": name,
                "labels": json.loads(labels),
                "median_s": statistics.median(times.values()),
                "duty": statistics.median(times.values()) / intervals[group],
            }
            for (group, name, labels), times in rule_times.items()
        ),
        key=lambda r: -r["duty"],
    )
    worst = max(evaluated, key=lambda k: evaluated[k]["max_s"] / evaluated[k]["interval_s"], default=None)
    result = {
        "engines": engines,
        "models": models,
        "gpus": fleet.gpu_count,
        "nodes": fleet.nodes,
        "frontdoor_replicas": fleet.count("frontdoor"),
        "targets": len(fleet.targets),
        "targets_up": {"start": up_at_start, "end": up_at_end},
        "scrape_interval": scrape_interval,
        "evaluation_interval": evaluation_interval,
        "seconds": elapsed,
        "fleet_build_s": built,
        "head_series": last["prometheus_tsdb_head_series"],
        "head_chunks": last["prometheus_tsdb_head_chunks"],
        "samples_per_s": (
            last["prometheus_tsdb_head_samples_appended_total"] - first["prometheus_tsdb_head_samples_appended_total"]
        )
        / elapsed,
        "prometheus_cpu_cores": (last["process_cpu_seconds_total"] - first["process_cpu_seconds_total"]) / elapsed,
        "fleet_server_cpu_cores": ours / elapsed,
        "rss_mib_peak": peak["process_resident_memory_bytes"] / 2**20,
        "heap_inuse_mib_peak": peak["go_memstats_heap_inuse_bytes"] / 2**20,
        "rule_duty": sum(g["duty"] for g in evaluated.values()),
        "rule_samples_read_per_s": sum(read.values()) and sum(g["samples_read_per_s"] or 0 for g in groups.values()),
        "worst_group": worst,
        "worst_group_max_s": groups[worst]["max_s"] if worst else None,
        "worst_group_interval_s": groups[worst]["interval_s"] if worst else None,
        "groups_not_evaluated": sorted(set(groups) - set(evaluated)),
        "iterations_missed": last["prometheus_rule_group_iterations_missed_total"],
        "scrape_mean_s": scrape,
        "scrape_max_s": scrape_max,
        "series_per": series,
        "alerts_firing": firing,
        "failed": failed,
        "load_average": {"before": load_before, "during": load_during},
        "groups": groups,
        "rules": rules,
        "dashboards": boards,
    }
    if workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    return result


_PER = ("per_vllm", "per_sglang", "per_dcgm", "per_frontdoor", "recorded_per_engine", "recorded_per_gpu")
_PER += ("recorded_per_model", "recorded_rest")


def _attempt(failed: list[str], what: str, read):
    """`read()`, or {} with `what` and the error added to `failed`."""
    try:
        return read()
    except (OSError, KeyError, ValueError) as err:
        failed.append(f"{what}: {err}")
        return {}


def _by_job(base: str, expr: str, how: str) -> dict[str, float]:
    return {r["metric"]["job"]: float(r["value"][1]) for r in _query(base, f"{how} by (job) ({expr})")}


def _up(base: str) -> int:
    targets = _get(base, "/api/v1/targets?state=active")["data"]["activeTargets"]
    return sum(1 for t in targets if t["health"] == "up")


def _until(predicate, timeout: float) -> bool:
    """Wait for `predicate`, at most `timeout` seconds; whether it came (a fleet too large for the machine keeps
    some targets down: the run goes on and reports how many were up)."""
    deadline = time.time() + timeout
    while not predicate():
        if time.time() > deadline:
            return False
        time.sleep(1)
    return True


def print_result(r: dict, groups: int) -> None:
    per = r["series_per"] or dict.fromkeys(_PER, float("nan"))
    print(
        f"\n{r['engines']} engines, {r['models']} models, {r['gpus']} GPUs on {r['nodes']} nodes, "
        f"{r['frontdoor_replicas']} front-door replicas: {r['targets']} targets (up at the start "
        f"{r['targets_up']['start']}, at the end {r['targets_up']['end']}), scrape {r['scrape_interval']}, "
        f"{r['seconds']:.0f} s measured; load average before {r['load_average']['before'][0]:.2f}, "
        f"at the end {r['load_average']['during'][0]:.2f} (1-minute)"
    )
    rows = [
        ("head series", f"{r['head_series']:,.0f}"),
        ("samples/s ingested", f"{r['samples_per_s']:,.0f}"),
        ("Prometheus CPU (cores)", f"{r['prometheus_cpu_cores']:.3f}"),
        ("fleet server CPU (cores)", f"{r['fleet_server_cpu_cores']:.3f}"),
        ("RSS peak (MiB)", f"{r['rss_mib_peak']:,.0f}"),
        ("Go heap in use peak (MiB)", f"{r['heap_inuse_mib_peak']:,.0f}"),
        ("rule duty (cores)", f"{r['rule_duty']:.4f}"),
        ("samples the rules read a second", f"{r['rule_samples_read_per_s']:,.0f}"),
        (
            "worst group (max s / interval s)",
            f"{r['worst_group']} {r['worst_group_max_s']:.3f} / {r['worst_group_interval_s']:g}"
            if r["worst_group"]
            else "-",
        ),
        ("iterations missed", f"{r['iterations_missed']:.0f}"),
        ("scrape mean s by job", ", ".join(f"{k} {v:.4f}" for k, v in sorted(r["scrape_mean_s"].items()))),
        ("scrape max s by job", ", ".join(f"{k} {v:.4f}" for k, v in sorted(r["scrape_max_s"].items()))),
        ("series per vLLM / SGLang engine", f"{per['per_vllm']:.1f} / {per['per_sglang']:.1f}"),
        ("series per GPU / front-door replica", f"{per['per_dcgm']:.1f} / {per['per_frontdoor']:.1f}"),
        (
            "recorded per engine / GPU / model / rest",
            f"{per['recorded_per_engine']:.1f} / {per['recorded_per_gpu']:.1f} / "
            f"{per['recorded_per_model']:.1f} / {per['recorded_rest']:.0f}",
        ),
        ("alerts firing", ", ".join(f"{k} {v}" for k, v in sorted(r["alerts_firing"].items())) or "none"),
    ]
    for name, board in r["dashboards"].items():
        rows.append(
            (
                f"dashboard {name}",
                f"{board['queries']} queries over the run {board['span_s']:.3f} s, {board['samples']:,} samples "
                f"(3 h of data est. {board['est_3h_s']:.1f} s, {board['est_3h_samples']:,.0f} samples; peak in one "
                f"query {board['peak_samples']:,}); slowest {board['slowest']!r} "
                f"{board['slowest_s'] or 0:.3f} s; errors {len(board['errors'])}",
            )
        )
    for key, value in rows:
        print(f"  {key:42} {value}")
    costly = sorted(
        ((k, g) for k, g in r["groups"].items() if g["evaluations"]),
        key=lambda kv: (-(kv[1]["samples_read_per_s"] or 0), -kv[1]["duty"]),
    )[:groups]
    print(f"  {'rule group':42} {'median s':>9} {'max s':>9} {'interval':>9} {'duty':>9} {'samples/s':>10}")
    for name, g in costly:
        read = g["samples_read_per_s"]
        print(
            f"  {name:42} {g['median_s']:9.4f} {g['max_s']:9.4f} {g['interval_s']:9g} {g['duty']:9.5f} "
            f"{read if read is not None else float('nan'):10,.0f}"
        )
    print(f"  {'costliest rules':62} {'median s':>9} {'duty':>9}")
    for rule in r["rules"][:groups]:
        print(f"  {rule['group'] + ' / ' + rule['rule']:62} {rule['median_s']:9.4f} {rule['duty']:9.5f}")
    for failure in r["failed"]:
        print(f"  not measured: {failure}")
    if r["groups_not_evaluated"]:
        print(f"  not evaluated in the run: {r['groups_not_evaluated']}")


SUMMARY = (
    ("engines", "{:,}"),
    ("models", "{:,}"),
    ("gpus", "{:,}"),
    ("targets", "{:,}"),
    ("head_series", "{:,.0f}"),
    ("samples_per_s", "{:,.0f}"),
    ("prometheus_cpu_cores", "{:.3f}"),
    ("rss_mib_peak", "{:,.0f}"),
    ("heap_inuse_mib_peak", "{:,.0f}"),
    ("rule_duty", "{:.4f}"),
    ("rule_samples_read_per_s", "{:,.0f}"),
    ("worst_group_max_s", "{:.3f}"),
    ("iterations_missed", "{:.0f}"),
)


def print_summary(results: list[dict]) -> None:
    """One column per fleet size, and the series formula each size gives."""
    print(f"\n{'':24}" + "".join(f"{r['engines']:>14,}" for r in results))
    for key, fmt in SUMMARY:
        print(f"{key:24}" + "".join(f"{fmt.format(r[key]) if r[key] is not None else '-':>14}" for r in results))
    for r in results:
        p = r["series_per"] or dict.fromkeys(_PER, float("nan"))
        print(
            f"series at {r['engines']} engines = {p['per_vllm']:.0f} x vLLM engines + {p['per_sglang']:.0f} x SGLang "
            f"engines + {p['per_dcgm'] + p['recorded_per_gpu']:.0f} x GPUs + {p['per_frontdoor']:.0f} x front-door "
            f"replicas + {p['recorded_per_engine']:.1f} x engines + {p['recorded_per_model']:.0f} x models "
            f"+ {p['recorded_rest']:.0f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", default="10", help="fleet sizes, one run each: 10 or 10,100,1000")
    parser.add_argument("--models", type=int, help="default: a tenth of the engines, at least 3")
    parser.add_argument("--minutes", type=float, default=3, help="each size's run")
    parser.add_argument("--scrape-interval", default="15s", help="the compose render's")
    parser.add_argument("--evaluation-interval", default="15s", help="the compose render's")
    parser.add_argument("--max-interval", default="1m", help="longer group intervals run at this for the run")
    parser.add_argument("--groups", type=int, default=8, help="print this many costliest rule groups")
    parser.add_argument("--no-dashboards", action="store_true")
    parser.add_argument("--dashboard-minutes", type=float, default=10, help="time budget of the dashboard queries")
    parser.add_argument("--json-out", type=Path, help="write every size's numbers here (a JSON list)")
    parser.add_argument("--keep", type=Path, help="keep Prometheus' working folders under this folder")
    args = parser.parse_args()
    # a stopped run stops its Prometheus too (the context managers' exits run on SystemExit, not on a bare SIGTERM)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    results = []
    for engines in (int(n) for n in args.engines.split(",")):
        workdir = None
        if args.keep:
            workdir = args.keep / f"engines-{engines}"
            workdir.mkdir(parents=True, exist_ok=True)
        print(f"running {engines} engines for {args.minutes:g} min ...", flush=True)
        results.append(
            measure(
                engines,
                args.models or max(3, engines // 10),
                args.minutes,
                args.scrape_interval,
                args.evaluation_interval,
                args.max_interval,
                dashboard_minutes=0 if args.no_dashboards else args.dashboard_minutes,
                workdir=workdir,
            )
        )
        print_result(results[-1], args.groups)
        if args.json_out:  # after each size: a long run that fails later keeps what it measured
            args.json_out.write_text(json.dumps(results, indent=2) + "\n")
    print_summary(results)


if __name__ == "__main__":
    main()
