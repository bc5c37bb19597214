"""`triage()`: fetch both windows, sum them up, judge every model and its replicas. `assess()` is the pure part."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from inferwatch.errors import InferwatchError
from inferwatch.triage._fetch import Connection, connect, fetch_windows, instant
from inferwatch.triage._judge import Evidence, Finding, judge
from inferwatch.triage._rules import load_kinds
from inferwatch.triage._signals import load_signals, model_matcher, signal_queries
from inferwatch.triage._summary import Reading, others, summarise
from inferwatch.triage._window import Window, baseline_choices, choose_step, iso, rate_window

__all__ = ["Verdict", "Report", "assess", "triage", "DEFAULT_SCRAPE_INTERVAL", "CORE_SERIES"]

DEFAULT_SCRAPE_INTERVAL = 15.0
GONE_REPLICA = 0.6       # confidence of a replica absent from the whole incident: a crash, or just a scale-in
# named when a model has no series at all: the engine series every kind starts from
CORE_SERIES = ("llm_requests_running", "llm_time_to_first_token_seconds", "llm_request_duration_seconds",
               "llm_generation_tokens_total", "llm_frontdoor_requests_total")


@dataclass(frozen=True)
class Verdict:
    """One model: its findings (most likely first; pod findings carry `pod`), per replica, and unmeasured signals."""

    model: str
    findings: tuple[Finding, ...]
    pods: dict[str, tuple[Finding, ...]] = field(default_factory=dict)
    not_measured: tuple[str, ...] = ()
    too_few: tuple[str, ...] = ()         # signals with too few events in the incident to be judged
    baseline: dict[str, Reading] = field(default_factory=dict)
    incident: dict[str, Reading] = field(default_factory=dict)


@dataclass(frozen=True)
class Report:
    incident: Window
    baseline: Window
    step: float
    verdicts: tuple[Verdict, ...]
    frames: tuple = ()            # (baseline frame, incident frame): the raw samples, for --plot
    warnings: tuple[str, ...] = ()


def _pod_findings(kinds, signals, floors, model, base, inc) -> dict[str, tuple[Finding, ...]]:
    """Findings of one replica against the model's other replicas in the incident (and against its own baseline
    when it had one); a replica that left without a replacement is missing data."""
    pods_now = {key[1]: r for key, r in inc.items() if key[0] == model and key[1] is not None}
    pods_before = {key[1]: r for key, r in base.items() if key[0] == model and key[1] is not None}
    per_pod = [s for s in signals if s.per_pod]
    out = {}
    if len(pods_now) >= 2:
        for pod, readings in pods_now.items():
            versus_others = {f.kind: f for f in judge(kinds, others(pods_now, pod, per_pod), readings, floors)}
            if pod in pods_before:
                own = {f.kind for f in judge(kinds, pods_before[pod], readings, floors)}
                versus_others = {k: f for k, f in versus_others.items() if k in own}
            if versus_others:
                out[pod] = tuple(replace(f, pod=pod) for f in versus_others.values())
    if "missing-data" in kinds and len(pods_now) < len(pods_before):
        # gone for the whole incident and not replaced: a crash or a scale-in before it; said, ranked low
        for pod in sorted(set(pods_before) - set(pods_now)):
            kind = kinds["missing-data"]
            out[pod] = (Finding(kind.name, GONE_REPLICA, (Evidence("engine_series", 1.0, 0.0, None,
                                                                   "engine_series missing", 1.0),),
                                kind.summary, kind.runbook, kind.next, pod=pod),)
    return out


def assess(kinds, signals, base: dict, inc: dict, models) -> list[Verdict]:
    """Verdicts for `models` from two summaries ({(model, pod or None): {signal: Reading}})."""
    floors = {s.name: s.floor for s in signals}
    verdicts = []
    for model in models:
        b, i = base.get((model, None), {}), inc.get((model, None), {})
        findings = judge(kinds, b, i, floors)
        pods = _pod_findings(kinds, signals, floors, model, base, inc)
        held = {f.kind for f in findings}
        extra = [f for pod_findings in pods.values() for f in pod_findings if f.kind not in held]
        findings = sorted(findings + extra, key=lambda f: -f.confidence)
        unmeasured = tuple(s.name for s in signals if s.name not in b and s.name not in i)
        few = tuple(s.name for s in signals if s.name in i and i[s.name].state == "few")
        verdicts.append(Verdict(model, tuple(findings), pods, unmeasured, few, b, i))
    return verdicts


def _scrape_interval(client, url: str, sel: str, at: list[float]) -> float:
    """The engines' scrape interval: the median spacing of llm_requests_running's raw samples near `at`."""
    import statistics

    for moment in at:
        rows = instant(client, url, f"llm_requests_running{{{sel}}}[3m]", moment)
        gaps = [float(b[0]) - float(a[0]) for row in rows[:50] for a, b in zip(row.get("values", []),
                                                                                row.get("values", [])[1:])]
        if gaps:
            return max(0.5, statistics.median(gaps))
    return DEFAULT_SCRAPE_INTERVAL


def _pick_baseline(client, url: str, sel: str, choices: list[Window]) -> Window:
    for window in choices[:-1]:
        seconds = max(1, int(window.seconds))
        result = instant(client, url, f"count(count_over_time(llm_requests_running{{{sel}}}[{seconds}s]))",
                         window.end)
        if result and float(result[0]["value"][1]) > 0:
            return window
    return choices[-1]


def _models_with_series(client, url: str, incident: Window, baseline: Window) -> list[str]:
    seconds = int(incident.end - min(incident.start, baseline.start)) + 1
    rows = instant(client, url, f"count by (model) (count_over_time(llm_requests_running[{seconds}s]))",
                   incident.end)
    return sorted(r["metric"].get("model", "") for r in rows)


def _no_series(model: str, seen: list[str], incident: Window, baseline: Window) -> InferwatchError:
    others_seen = f"; models with series: {', '.join(seen[:20])}" if seen else "; no model has any"
    return InferwatchError(f"no series for model {model!r} between {iso(baseline.start)} and {iso(incident.end)}: "
                           f"{', '.join(CORE_SERIES)} and every other triage signal are missing{others_seen}")


def triage(conn: Connection, incident: Window, baseline: str = "auto", models=(), rules=()) -> Report:
    """Judge `models` (default: every model with series) over the incident against a baseline."""
    kinds = load_kinds(list(rules))
    signals = load_signals()
    client = connect(conn)
    sel = model_matcher(models)
    chosen = _pick_baseline(client, conn.url, sel, baseline_choices(baseline, incident))
    interval = _scrape_interval(client, conn.url, sel, [incident.end, (incident.start + incident.end) / 2,
                                                        chosen.end])
    step = choose_step(incident, chosen)
    rate = rate_window(step, interval)
    queries = [(s.name, part, q) for s in signals for part, q in signal_queries(s, models, rate).items()]
    warnings: list[str] = []
    frames = fetch_windows(client, conn.url, queries, (chosen, incident), step, warnings)
    base, inc = (summarise(f, signals, w, step) for f, w in zip(frames, (chosen, incident)))
    seen = sorted({key[0] for key in list(base) + list(inc)})
    for model in models:
        if model not in seen:
            raise _no_series(model, _models_with_series(client, conn.url, incident, chosen), incident, chosen)
    if not seen:
        raise InferwatchError(f"no model has any inferwatch series (llm_*) between {iso(chosen.start)} and "
                              f"{iso(incident.end)} at {conn.url}: is Prometheus scraping the engines, through the "
                              "normalizing exporter or with the mapping's relabeling?")
    verdicts = assess(kinds, signals, base, inc, list(models) or seen)
    return Report(incident, chosen, step, tuple(verdicts), tuple(frames), tuple(warnings))
