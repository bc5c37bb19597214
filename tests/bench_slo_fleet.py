"""Benchmark: inferwatch's SLO rules against the same objectives rendered as Sloth v0.16 does, on one fleet.

    python tests/bench_slo_fleet.py                       # issue 15's fleet: 100 models x 2 pods, 4 days at 15 s
    python tests/bench_slo_fleet.py --models 20 --recorded-days 30     # "after 30 days" at a fifth of the size
    python tests/bench_slo_fleet.py --write-rules /tmp/old   # in an older checkout: its rendering, then here
    python tests/bench_slo_fleet.py --models 20 --recorded-days 30 --also before=/tmp/old   # both in one run

The fleet (tests/slo_fleet.py: noisy healthy models with bursts, one across the deployment, and `--incidents`
models failing `answered`) is written as TSDB blocks with `promtool tsdb create-blocks-from openmetrics`, and
goes on live at /metrics. Each rule set then runs in its own real Prometheus on a copy of those blocks, one after
the other, for `--minutes`: a fresh deployment, or with `--recorded-days` of each design's own recorded series
written as blocks too (inferwatch's per-minute counts; Sloth's 5m error ratios that its SLO-window rules
average), so their SLO-window rules see that much history, as after that many days of running.

Printed per design: rule evaluation seconds per minute of wall time (the sum over groups of the mean
`evaluationTime` from /api/v1/rules (the median of its evaluations), scaled by 60 / the group's interval in the rule
file), peak RSS, recorded series, and firing alerts (on incident models and on healthy ones). Every group runs every
minute here, so that a few minutes show each group's cost and the alerts of a steady state; the long-window groups'
cost is then scaled to their real interval (10m). Sloth's groups carry no `interval:`, so Prometheus' global
evaluation_interval sets their cost: they run once per `--sloth-intervals` value (default 1m and 30s, each printed
under its own column, sloth@1m and sloth@30s), and inferwatch's ratio is printed against each.

The objectives (30d window): TTFT <= 1 s at 99.9%, TPOT <= 0.1 s at 99%, answered at 99.5%, one SLO per model.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from promtools import prometheus, query, serve  # noqa: E402
from slo_fleet import SERIES, Fleet, api, create_blocks, live_handler  # noqa: E402

from inferwatch.slo import compile_spec, parse_spec, render_files  # noqa: E402
from inferwatch.yamlio import dump_yaml  # noqa: E402

TARGETS = {"responsive": 0.999, "fast-enough": 0.99, "answered": 0.995}
SPEC = {
    "service": "llm",
    "window": "30d",
    "group_by": ["model"],
    "objectives": [
        {"name": "responsive", "sli": "ttft", "threshold": "1s", "target": "99.9%"},
        {"name": "fast-enough", "sli": "tpot", "threshold": "100ms", "target": "99%"},
        {"name": "answered", "sli": "answered", "target": "99.5%"},
    ],
}
# Sloth's queries for the same SLIs: errors and totals as rates, summed by model
SLOTH_SLIS = {
    "responsive": (
        "(sum(rate(llm_time_to_first_token_seconds_count[{w}])) by (model)"
        ' - sum(rate(llm_time_to_first_token_seconds_bucket{{le=~"1|1[.]0"}}[{w}])) by (model))',
        "sum(rate(llm_time_to_first_token_seconds_count[{w}])) by (model)",
    ),
    "fast-enough": (
        "(sum(rate(llm_time_per_output_token_seconds_count[{w}])) by (model)"
        ' - sum(rate(llm_time_per_output_token_seconds_bucket{{le=~"0.1|0[.]1"}}[{w}])) by (model))',
        "sum(rate(llm_time_per_output_token_seconds_count[{w}])) by (model)",
    ),
    "answered": (
        'sum(rate(llm_requests_finished_total{{finished_reason=~"length|abort|error|repetition"}}[{w}])) by (model)',
        "sum(rate(llm_requests_finished_total[{w}])) by (model)",
    ),
}
SLOTH_WINDOWS = ("5m", "30m", "1h", "2h", "6h", "1d", "3d")
PERIOD = "30d"


def sloth_rules() -> dict:
    """The three objectives as Sloth v0.16 renders them (google-30d burn-rate alerts, one SLO per model by a
    `by (model)` in its queries): SLI recordings per window, the 30d ratio as the mean of the 5m one, metadata,
    and a page and a ticket alert."""
    groups = []
    for slo, target in TARGETS.items():
        ident = {"sloth_id": f"llm-{slo}", "sloth_service": "llm", "sloth_slo": slo}
        sel = ", ".join(f'{k}="{v}"' for k, v in ident.items())
        bad, total = SLOTH_SLIS[slo]
        sli = [
            {
                "record": f"slo:sli_error:ratio_rate{w}",
                "expr": f"({bad.format(w=w)})\n/\n({total.format(w=w)})",
                "labels": {**ident, "sloth_window": w},
            }
            for w in SLOTH_WINDOWS
        ]
        sli.append(
            {
                "record": f"slo:sli_error:ratio_rate{PERIOD}",
                "expr": f"sum_over_time(slo:sli_error:ratio_rate5m{{{sel}}}[{PERIOD}])\n/ ignoring (sloth_window)\n"
                f"count_over_time(slo:sli_error:ratio_rate5m{{{sel}}}[{PERIOD}])",
                "labels": {**ident, "sloth_window": PERIOD},
            }
        )
        budget = round(1 - target, 6)
        meta = [
            {"record": "slo:objective:ratio", "expr": f"vector({target})", "labels": ident},
            {"record": "slo:error_budget:ratio", "expr": f"vector(1-{target})", "labels": ident},
            {"record": "slo:time_period:days", "expr": "vector(30)", "labels": ident},
            {
                "record": "slo:current_burn_rate:ratio",
                "expr": f"slo:sli_error:ratio_rate5m{{{sel}}}\n/ on(sloth_id, sloth_slo, sloth_service) group_left\n"
                f"slo:error_budget:ratio{{{sel}}}",
                "labels": ident,
            },
            {
                "record": "slo:period_burn_rate:ratio",
                "expr": f"slo:sli_error:ratio_rate{PERIOD}{{{sel}}}\n/ on(sloth_id, sloth_slo, sloth_service) "
                f"group_left\nslo:error_budget:ratio{{{sel}}}",
                "labels": ident,
            },
            {
                "record": "slo:period_error_budget_remaining:ratio",
                "expr": f"1 - slo:period_burn_rate:ratio{{{sel}}}",
                "labels": ident,
            },
            {
                "record": "sloth_slo_info",
                "expr": "vector(1)",
                "labels": {
                    **ident,
                    "sloth_mode": "cli-gen-prom",
                    "sloth_spec": "prometheus/v1",
                    "sloth_version": "v0.16.0",
                    "sloth_objective": str(target * 100),
                },
            },
        ]

        def over(short: str, long: str, factor: float, sel: str = sel, budget: float = budget) -> str:
            return (
                f"(max(slo:sli_error:ratio_rate{short}{{{sel}}} > ({factor} * {budget})) without (sloth_window)\n"
                f"and max(slo:sli_error:ratio_rate{long}{{{sel}}} > ({factor} * {budget})) without (sloth_window))"
            )

        alerts = [
            {
                "alert": "SlothPage",
                "expr": f"{over('5m', '1h', 14.4)}\nor\n{over('30m', '6h', 6)}",
                "labels": {"sloth_severity": "page"},
            },
            {
                "alert": "SlothTicket",
                "expr": f"{over('2h', '1d', 3)}\nor\n{over('6h', '3d', 1)}",
                "labels": {"sloth_severity": "ticket"},
            },
        ]
        groups += [
            {"name": f"sloth-slo-sli-recordings-llm-{slo}", "rules": sli},
            {"name": f"sloth-slo-meta-recordings-llm-{slo}", "rules": meta},
            {"name": f"sloth-slo-alerts-llm-{slo}", "rules": alerts},
        ]
    return {"groups": groups}


def _per_group(fleet: Fleet, model: str, since: int) -> dict[str, np.ndarray]:
    """Per-minute events of one model's objectives (summed over its pods) from `since` on: {objective/kind: counts}."""
    first = (since - fleet.start) // 60
    last = (fleet.now - fleet.start) // 60
    incs = sum(np.diff(fleet.cumulative[model, pod], axis=1) for pod in range(fleet.pods))[:, first:last]
    out = {}
    for index, (_, _, objective, kind) in enumerate(SERIES):
        out[f"{objective}/{kind}"] = incs[index]
    out["answered/total"] = out["answered/good"] + out["answered/bad"]
    return out


def write_recorded(fleet: Fleet, days: float, path: Path, design: str) -> None:
    """`days` of the design's own recorded series before now, as its rules would have written them."""
    since = fleet.now - int(days * 86400) // 60 * 60
    times = np.arange(since, fleet.now - 59, 60) + 60  # the end of each minute
    with open(path, "w") as out:
        names = (
            ("llm_slo:total:increase1m", "llm_slo:good:increase1m")
            if design == "inferwatch"
            else ("slo:sli_error:ratio_rate5m",)
        )
        for name in names:
            for model in fleet.models:
                counts = _per_group(fleet, model, since)
                for slo in TARGETS:
                    total = counts[f"{slo}/total"]
                    good = counts[f"{slo}/good"] if f"{slo}/good" in counts else total - counts[f"{slo}/bad"]
                    if name.startswith("llm_slo:"):
                        values = total if ":total:" in name else good
                        labels = f'model="{model}",service="llm",slo="{slo}"'
                    else:  # the 5m error ratio, recorded every minute
                        window = np.convolve(total, np.ones(5))[: len(total)]
                        bad5 = np.convolve(total - good, np.ones(5))[: len(total)]
                        values = np.divide(bad5, window, out=np.zeros_like(bad5), where=window > 0)
                        labels = (
                            f'model="{model}",sloth_id="llm-{slo}",sloth_service="llm",sloth_slo="{slo}",'
                            'sloth_window="5m"'
                        )
                    out.writelines(f"{name}{{{labels}}} {v:.6g} {t}\n" for t, v in zip(times, values, strict=True))
        out.write("# EOF\n")


def _self_metric(base: str, name: str) -> float:
    """One of Prometheus' own process metrics, read from its /metrics."""
    with urllib.request.urlopen(base + "/metrics", timeout=30) as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return float("nan")


def _page(alert: dict) -> bool:
    return alert["labels"].get("severity") == "critical" or alert["labels"].get("sloth_severity") == "page"


def _intervals(rules: list[Path], evaluation_interval: str) -> dict[str, float]:
    """{group: its interval in seconds} as the rule files say (the global evaluation_interval where they say
    nothing: all of Sloth's groups)."""
    import yaml

    from inferwatch.durations import parse_duration

    return {
        g["name"]: float(parse_duration(g.get("interval", evaluation_interval)))
        for p in rules
        for g in yaml.safe_load(p.read_text())["groups"]
    }


def run(
    design: str,
    rules: list[Path],
    data: Path,
    url: str,
    minutes: float,
    incidents: set[str],
    prefix: str,
    workdir: Path,
    evaluation_interval: str = "1m",
) -> dict:
    intervals = _intervals(rules, evaluation_interval)
    workdir.mkdir(parents=True, exist_ok=True)
    every_minute = []
    for path in rules:
        every_minute.append(workdir / path.name)
        every_minute[-1].write_text(path.read_text().replace("interval: 10m", "interval: 1m"))
    config = {
        "global": {"scrape_interval": "15s", "evaluation_interval": evaluation_interval},
        "rule_files": [str(p) for p in every_minute],
        "scrape_configs": [
            {"job_name": "llm", "honor_labels": True, "static_configs": [{"targets": [url.removeprefix("http://")]}]}
        ],
    }
    shutil.copytree(data, workdir / "data")
    samples: dict[tuple[str, str], float] = {}
    rule_samples: dict[tuple[str, str], dict[str, float]] = {}
    with prometheus("prometheus", config, workdir, ("--storage.tsdb.retention.time=400d",)) as base:
        t0, peak = time.time(), 0.0
        while time.time() - t0 < minutes * 60:
            for group in api(base, "/api/v1/rules")["groups"]:
                if not group["lastEvaluation"].startswith("0001"):
                    samples[group["name"], group["lastEvaluation"]] = group["evaluationTime"]
                    for rule in group["rules"]:
                        key = (group["name"], rule["name"] + " " + rule.get("labels", {}).get("tier", ""))
                        rule_samples.setdefault(key, {})[rule["lastEvaluation"]] = rule["evaluationTime"]
            peak = max(peak, _self_metric(base, "process_resident_memory_bytes"))
            time.sleep(10)
        series = int(query(base, f'count({{__name__=~"{prefix}"}})')[0]["value"][1])
        alerts = [
            a
            for a in api(base, "/api/v1/alerts")["alerts"]
            if a["state"] == "firing" and a["labels"]["alertname"] != "LLMSLIDataMissing"
        ]
    per_group: dict[str, list[float]] = {}
    for (name, _), seconds in samples.items():
        per_group.setdefault(name, []).append(seconds)
    evaluation = sum(np.median(v) * 60 / intervals[name] for name, v in per_group.items())
    unevaluated = sorted(set(intervals) - set(per_group))
    costs = {f"{g} {r}": float(np.median(list(v.values()))) * 60 / intervals[g] for (g, r), v in rule_samples.items()}
    on_incidents = [a for a in alerts if a["labels"].get("model") in incidents]
    return {
        "design": design,
        "evaluation_s_per_min": evaluation,
        "peak_rss_mib": peak / 2**20,
        "recorded_series": series,
        "firing": len(alerts),
        "firing_on_incidents": len(on_incidents),
        "firing_on_healthy": len(alerts) - len(on_incidents),
        "pages_on_healthy": sum(1 for a in alerts if _page(a) and a["labels"].get("model") not in incidents),
        "groups_not_evaluated": unevaluated,
        "rule_costs": costs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=100)
    parser.add_argument("--pods", type=int, default=2)
    parser.add_argument("--days", type=float, default=4, help="raw history (3d windows need over 3)")
    parser.add_argument("--step", type=int, default=15, help="seconds between raw samples")
    parser.add_argument(
        "--recorded-days",
        type=float,
        default=0,
        help="each design's recorded series before now (0: a fresh deployment)",
    )
    parser.add_argument("--incidents", type=int, default=3)
    parser.add_argument("--minutes", type=float, default=4, help="each design's run")
    parser.add_argument("--keep", action="store_true", help="keep the working folder")
    parser.add_argument("--rules", type=int, default=0, help="print this many costliest rules of each design")
    parser.add_argument(
        "--sloth-intervals",
        default="1m,30s",
        help="Prometheus' global evaluation_interval for Sloth's groups (they carry no interval:), "
        "one run each; issue 15's first table had 30s, Prometheus' own default is 1m",
    )
    parser.add_argument(
        "--also",
        action="append",
        default=[],
        metavar="NAME=DIR",
        help="another inferwatch rendering of the same objectives to run beside this one (its "
        "*.rules.yaml in DIR, e.g. written by --write-rules from an older checkout)",
    )
    parser.add_argument("--write-rules", metavar="DIR", help="write this checkout's rendering to DIR and exit")
    args = parser.parse_args()

    files, _ = render_files(compile_spec(parse_spec(SPEC, "bench.yaml")), tests=False)
    if args.write_rules:
        Path(args.write_rules).mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            if name.endswith(".rules.yaml"):
                (Path(args.write_rules) / name).write_text(text)
        return
    work = Path(tempfile.mkdtemp(prefix="bench-slo-"))
    models = [f"model-{i:03d}" for i in range(args.models)]
    incidents = set(models[: args.incidents])
    budgets = {slo: 1 - t for slo, t in TARGETS.items()}
    started = time.time()
    fleet = Fleet(
        models,
        budgets,
        incidents,
        pods=args.pods,
        days=max(args.days, args.recorded_days),
        ahead=int(4 * args.minutes) + 30,
    )
    raw_since = fleet.now - int(args.days * 86400) // 60 * 60
    samples = fleet.write_openmetrics(work / "raw.om", step=args.step, since=raw_since)
    create_blocks(work / "raw.om", work / "raw")
    (work / "raw.om").unlink()
    print(
        f"fleet: {args.models} models x {args.pods} pods, {args.days} days at {args.step}s: {samples:,} raw samples "
        f"({time.time() - started:.0f}s to write and import)",
        flush=True,
    )

    ours = []
    for name, text in files.items():
        if name.endswith(".rules.yaml"):
            (work / name).write_text(text)
            ours.append(work / name)
    (work / "sloth.rules.yaml").write_text(dump_yaml(sloth_rules()))
    # design: (kind, rules, recorded-series prefix, global evaluation_interval)
    designs = {
        f"sloth@{i}": ("sloth", [work / "sloth.rules.yaml"], "slo:.+|sloth_.+", i)
        for i in args.sloth_intervals.split(",")
    }
    designs["inferwatch"] = ("inferwatch", ours, "llm_slo:.+", "1m")
    for also in args.also:
        name, _, folder = also.partition("=")
        designs[name] = ("inferwatch", sorted(Path(folder).glob("*.rules.yaml")), "llm_slo:.+", "1m")
    data = {}
    for kind in ("sloth", "inferwatch"):
        data[kind] = work / f"data-{kind}"
        shutil.copytree(work / "raw", data[kind])
        if args.recorded_days:
            write_recorded(fleet, args.recorded_days, work / f"{kind}.om", kind)
            create_blocks(work / f"{kind}.om", data[kind])
            (work / f"{kind}.om").unlink()
    results = []
    with serve({"/metrics": live_handler(fleet)}) as url:
        for design, (kind, rules, prefix, interval) in designs.items():
            print(f"running {design} for {args.minutes} min ...", flush=True)
            results.append(
                run(
                    design,
                    rules,
                    data[kind],
                    url,
                    args.minutes,
                    incidents,
                    prefix,
                    work / design.replace("@", "-"),
                    interval,
                )
            )
    state = f"after {args.recorded_days:g} days of recording" if args.recorded_days else "just deployed"
    print(
        f"\n{args.models} models x 3 objectives, {state} (sloth@I: Sloth's groups at a global "
        "evaluation_interval of I; inferwatch's groups carry their own interval: 1m, the long-window group 10m):"
    )
    keys = (
        "evaluation_s_per_min",
        "peak_rss_mib",
        "recorded_series",
        "firing",
        "firing_on_incidents",
        "firing_on_healthy",
        "pages_on_healthy",
    )
    print(f"{'':24}" + "".join(f"{r['design']:>18}" for r in results))
    for key in keys:
        values = [r[key] for r in results]
        print(f"{key:24}" + "".join(f"{v:>18.3f}" if isinstance(v, float) else f"{v:>18}" for v in values))
    print("\nevaluation, inferwatch / Sloth:")
    for ours_ in (r for r in results if not r["design"].startswith("sloth@")):
        print(
            f"  {ours_['design']:22}"
            + "".join(
                f"  / {theirs['design']}: {ours_['evaluation_s_per_min'] / theirs['evaluation_s_per_min']:.3f}"
                for theirs in results
                if theirs["design"].startswith("sloth@")
            )
        )
    for r in results:
        if args.rules:
            print(f"\n{r['design']}: the costliest rules, seconds per minute")
            for name, cost in sorted(r["rule_costs"].items(), key=lambda kv: -kv[1])[: args.rules]:
                print(f"  {cost:8.4f}  {name}")
        if r["groups_not_evaluated"]:
            print(f"{r['design']}: not evaluated in the run: {r['groups_not_evaluated']}")
    if args.keep:
        print(f"kept {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
