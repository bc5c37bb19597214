"""What a capacity sweep hands on: a JSON result to keep per release, a comparison of two, a text summary, a
Prometheus rule file with the capacity per replica, and a plot."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

import yaml

from inferwatch import __version__
from inferwatch.errors import InferwatchError
from inferwatch.frontdoor import Goodput, default_goodput
from inferwatch.sim._capacity import Step, SweepConfig
from inferwatch.sim._capacity_stats import estimate, rate_stats

__all__ = [
    "SCHEMA",
    "METHOD",
    "CAPACITY_METRIC",
    "result",
    "load_result",
    "compare",
    "format_result",
    "format_comparison",
    "rule_file",
    "plot",
]

SCHEMA = "inferwatch.capacity/v1"
CAPACITY_METRIC = "llm_capacity:requests_per_second_per_replica"
METHOD = (
    "capacity: the rate at which the share of good requests (judged per request against every objective, as "
    "the front door's goodput) falls to the target, from a non-increasing fit of the share per rate; "
    "interval: between the highest rate whose share is above the target and the lowest below it, each with a "
    "95% band per rate (the wider of Wilson's on pooled requests and Student's t on the steps' shares), "
    "only rates measured two times or more"
)
_SETTINGS = (
    "target",
    "start_rate",
    "growth",
    "max_rate",
    "step_duration",
    "step_requests",
    "repeats",
    "precision",
    "max_steps",
)
_LOAD = ("prompt_tokens", "max_tokens", "output_tokens", "prefix_share", "prefix_tokens", "tool_share", "timeout")


def _objectives(goodput: Goodput) -> list[dict]:
    """The objectives by name (not by the file's path, which differs between machines) and what each checks."""
    named = [(o, o.name.rpartition(": objective ")[2]) for o in goodput.objectives]
    return [
        {"objective": name, "time": o.time, "threshold_s": o.threshold}
        if o.time
        else {"objective": name, "outcomes": "good selector" if o.good is not None else "not bad"}
        for o, name in named
    ]


def result(
    config: SweepConfig,
    goodput: Goodput,
    steps: list[Step],
    model: str,
    replicas: int,
    started: datetime,
    seconds: float,
    interrupted: bool,
) -> dict:
    """The sweep as JSON-ready data: everything needed to compare it with another release's."""
    stats = rate_stats([(s.rate, s.judged, s.good) for s in steps], config.target)
    est = estimate(stats, config.target)
    per = lambda v: None if v is None else v / replicas  # noqa: E731
    return {
        "schema": SCHEMA,
        "inferwatch": __version__,
        "time": started.astimezone(UTC).isoformat(timespec="seconds"),
        "url": config.load.target,
        "model": model,
        "replicas": replicas,
        "slo": {
            "files": ["(embedded) slo/defaults-frontdoor.yaml"]
            if goodput is default_goodput()
            else list(goodput.files),
            "objectives": _objectives(goodput),
        },
        "target": config.target,
        "settings": {**{k: getattr(config, k) for k in _SETTINGS}, "load": {k: getattr(config.load, k) for k in _LOAD}},
        "status": "interrupted" if interrupted else est.status,
        "interrupted": interrupted,
        "duration_s": round(seconds, 3),
        "capacity": {
            "requests_per_second": est.capacity,
            "lower": est.lower,
            "upper": est.upper,
            "per_replica": {"requests_per_second": per(est.capacity), "lower": per(est.lower), "upper": per(est.upper)},
            "confidence": 0.95,
            "method": METHOD,
        },
        "rates": [asdict(s) for s in stats],
        "steps": [s.as_dict() for s in steps],
    }


def load_result(path: str | Path) -> dict:
    """A result file written by `capacity sweep --json-out`; a clear error for anything else."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as err:
        raise InferwatchError(f"{path}: cannot read: {err.strerror}") from None
    except ValueError as err:
        raise InferwatchError(f"{path}: not JSON ({err})") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise InferwatchError(
            f"{path}: field schema: not a capacity result (want {SCHEMA!r}, written by "
            "inferwatch capacity sweep --json-out)"
        )
    cap = doc.get("capacity")
    if not isinstance(cap, dict) or not all(k in cap for k in ("requests_per_second", "lower", "upper")):
        raise InferwatchError(f"{path}: field capacity: needs requests_per_second, lower and upper")
    return doc


def _rate(v) -> str:
    return "-" if v is None else f"{v:.3g}"


def _interval(cap: dict) -> str:
    return (
        f"[{_rate(cap['lower']) if cap['lower'] is not None else '0'}, "
        f"{_rate(cap['upper']) if cap['upper'] is not None else 'above'}]"
    )


def compare(old: dict, new: dict) -> dict:
    """Did capacity change beyond what both sweeps can tell? Only when the 95 % intervals do not overlap (a
    conservative test). Differences in what was measured (SLO, target, request shape, replicas) are listed: they
    make the numbers incomparable."""
    o, n = old["capacity"], new["capacity"]
    o_lo, o_hi = o["lower"] or 0.0, o["upper"] if o["upper"] is not None else math.inf
    n_lo, n_hi = n["lower"] or 0.0, n["upper"] if n["upper"] is not None else math.inf
    if n_lo >= o_hi and n_hi > o_hi:
        verdict = "higher"
    elif n_hi <= o_lo and n_lo < o_lo:
        verdict = "lower"
    else:
        verdict = "same"
    differs = [k for k in ("target", "replicas", "model") if old.get(k) != new.get(k)]
    if old.get("slo", {}).get("objectives") != new.get("slo", {}).get("objectives"):
        differs.append("slo")
    if old.get("settings", {}).get("load") != new.get("settings", {}).get("load"):
        differs.append("settings.load")
    ratio = (
        n["requests_per_second"] / o["requests_per_second"]
        if n["requests_per_second"] and o["requests_per_second"]
        else None
    )
    return {
        "verdict": verdict,
        "ratio": ratio,
        "old": o,
        "new": n,
        "differs": differs,
        "incomplete": [name for name, d in (("old", old), ("new", new)) if d.get("status") != "measured"],
    }


def format_comparison(c: dict) -> str:
    o, n = c["old"], c["new"]
    words = {
        "higher": "higher, beyond both intervals",
        "lower": "lower, beyond both intervals",
        "same": "no difference beyond the intervals (they overlap)",
    }
    ratio = f" ({c['ratio']:.2f}x)" if c["ratio"] else ""
    lines = [
        f"old: {_rate(o['requests_per_second'])} req/s {_interval(o)}",
        f"new: {_rate(n['requests_per_second'])} req/s {_interval(n)}",
        f"capacity: {words[c['verdict']]}{ratio}",
    ]
    if c["differs"]:
        lines.append(f"warning: measured differently ({', '.join(c['differs'])}): the numbers may not compare")
    if c["incomplete"]:
        lines.append(f"warning: not a finished measurement: {', '.join(c['incomplete'])}")
    return "\n".join(lines) + "\n"


def format_result(doc: dict) -> str:
    cap, per = doc["capacity"], doc["capacity"]["per_replica"]
    status = doc["status"]
    if cap["requests_per_second"] is None:
        head = {
            "not-reached": f"capacity: above {_rate(cap['lower'])} req/s (no rate failed within the limits)",
            "below-lowest-rate": "capacity: below every rate measured",
            "no-data": "capacity: no step judged any request",
        }.get(status, "capacity: not measured")
    else:
        head = f"capacity: {_rate(cap['requests_per_second'])} req/s, 95% interval {_interval(cap)}" + (
            f"; per replica {_rate(per['requests_per_second'])} {_interval(per)}" if doc["replicas"] > 1 else ""
        )
    lines = [
        head + (" (interrupted: from the steps measured so far)" if doc["interrupted"] else ""),
        f"at {doc['target']:.0%} good requests (SLO: {', '.join(doc['slo']['files'])}), "
        f"{len(doc['steps'])} steps in {doc['duration_s']:.0f}s",
        f"{'rate':>10}{'steps':>7}{'good':>9}{'95% band':>16}  verdict",
    ]
    for r in doc["rates"]:
        lines.append(
            f"{r['rate']:10.3g}{r['steps']:7d}{r['share']:9.1%}   [{r['lower']:.1%}, {r['upper']:.1%}]  {r['verdict']}"
        )
    return "\n".join(lines) + "\n"


def rule_file(doc: dict) -> str:
    """A Prometheus rule file holding the measured capacity per replica as a constant series, for the overview
    dashboard's headroom panel: load it beside the other rules (rule_files, or a PrometheusRule)."""
    value = doc["capacity"]["per_replica"]["requests_per_second"]
    if value is None:
        raise InferwatchError(f"no capacity to write as a rule: the sweep ended {doc['status']}")
    rule = {"record": CAPACITY_METRIC, "expr": f"vector({value:.6g})", "labels": {"model": doc["model"]}}
    header = (
        f"# Measured by inferwatch capacity sweep {doc['inferwatch']} at {doc['time']} against {doc['url']}:\n"
        f"# {doc['capacity']['requests_per_second']:.6g} req/s over {doc['replicas']} replica(s), 95% interval "
        f"{_interval(doc['capacity'])}, at {doc['target']:.0%} good requests.\n"
    )
    body = {"groups": [{"name": f"inferwatch-capacity-{doc['model']}", "rules": [rule]}]}
    return header + yaml.safe_dump(body, sort_keys=False)


def plot(doc: dict, path: str | Path) -> None:
    """TTFT and TPOT (p50, p95) and the share of good requests against the offered rate, one point per step,
    with the SLO's thresholds, the target, and the capacity with its interval."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = doc["steps"]
    fig, axes = plt.subplots(3, 1, figsize=(8, 9), sharex=True)
    thresholds = {o["time"]: o["threshold_s"] for o in doc["slo"]["objectives"] if o.get("time")}
    for ax, key, label in (
        (axes[0], "ttft", "time to first token (s)"),
        (axes[1], "tpot", "time per output token (s)"),
    ):
        for q, marker in (("p50", "o"), ("p95", "^")):
            points = [(s["rate"], s[f"{key}_{q}"]) for s in steps if s[f"{key}_{q}"] is not None]
            ax.scatter([p[0] for p in points], [p[1] for p in points], marker=marker, label=q, alpha=0.7)
        if key in thresholds:
            ax.axhline(thresholds[key], color="red", linestyle="--", linewidth=1, label="SLO threshold")
        ax.set_ylabel(label)
        ax.legend(loc="upper left", fontsize="small")
    ax = axes[2]
    ax.scatter(
        [s["rate"] for s in steps if s["share"] is not None],
        [s["share"] for s in steps if s["share"] is not None],
        label="step",
        alpha=0.6,
    )
    rates = doc["rates"]
    ax.errorbar(
        [r["rate"] for r in rates],
        [r["share"] for r in rates],
        # a band need not hold its point (the t-band of few steps about their mean, the share pooled): never below 0
        yerr=[[max(0.0, r["share"] - r["lower"]) for r in rates], [max(0.0, r["upper"] - r["share"]) for r in rates]],
        fmt="s",
        color="black",
        capsize=3,
        markersize=4,
        label="per rate, 95% band",
    )
    ax.axhline(doc["target"], color="red", linestyle="--", linewidth=1, label=f"target {doc['target']:.0%}")
    ax.set_ylabel("good requests (share)")
    ax.set_xlabel("offered rate (requests/s)")
    ax.set_ylim(-0.02, 1.05)
    goodput = ax.twinx()
    goodput.plot([s["rate"] for s in steps], [s["goodput_rps"] for s in steps], "x", color="green", alpha=0.6)
    goodput.set_ylabel("goodput (good requests/s)", color="green")
    cap = doc["capacity"]
    for ax in axes:
        if cap["lower"] is not None or cap["upper"] is not None:
            high = cap["upper"] if cap["upper"] is not None else max(s["rate"] for s in steps)
            ax.axvspan(cap["lower"] or 0.0, high, color="orange", alpha=0.15)
        if cap["requests_per_second"] is not None:
            ax.axvline(cap["requests_per_second"], color="orange", linewidth=1.5)
    axes[2].legend(loc="lower left", fontsize="small")
    title = f"{doc['model']} at {doc['url']}: capacity {_rate(cap['requests_per_second'])} req/s {_interval(cap)} (95%)"
    fig.suptitle(title + (" - interrupted" if doc["interrupted"] else ""), fontsize=10)
    fig.text(
        0.01,
        0.005,
        f"inferwatch {doc['inferwatch']}, {doc['time']}, {len(steps)} steps; shaded: the interval, line: the estimate",
        fontsize=7,
    )
    fig.tight_layout(rect=(0, 0.02, 1, 0.97))
    fig.savefig(path, dpi=100)
    plt.close(fig)
