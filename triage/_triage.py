"""`triage()`: fetch both windows, sum them up, judge every model and its replicas. `assess()` is the pure part."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from itertools import pairwise

from inferwatch.errors import InferwatchError
from inferwatch.triage._fetch import Connection, connect, fetch_windows, instant
from inferwatch.triage._judge import MISSING_SHARE, Evidence, Finding, judge
from inferwatch.triage._onset import MIN_SEGMENT, Onset, onsets
from inferwatch.triage._rules import load_kinds
from inferwatch.triage._signals import load_signals, model_matcher, signal_queries
from inferwatch.triage._sources import SOURCE_NAMES, name_matcher, source_names, translate
from inferwatch.triage._summary import ABSENT, Reading, others, summarise
from inferwatch.triage._units import Unit, asked_models, asked_units, split_deployments, unit_name
from inferwatch.triage._window import Window, baseline_choices, choose_step, iso, rate_window

__all__ = ["Verdict", "Report", "assess", "triage", "DEFAULT_SCRAPE_INTERVAL", "CORE_SERIES"]

DEFAULT_SCRAPE_INTERVAL = 15.0
INTERVAL_PROBE = "10m"  # raw samples read to measure the scrape interval: a few even at 2-minute scrapes
FRESH_SCRAPES = 2.5  # a gauge counts while its last sample is at most this many scrapes old
MAX_PROBED = 5000  # series whose spacing is measured for the scrape interval
# why a model was judged against the hour before while the report's baseline is the day before
YOUNG = "no series a day earlier (deployed since)"
SECOND_LOOK = "nothing wrong against the same hour a day earlier (itself an incident?), but against this"
GONE_REPLICA = 0.6  # confidence of a replica absent from the whole incident: a crash, or just a scale-in
# named when a model has no series at all: the engine series every kind starts from
CORE_SERIES = (
    "llm_requests_running",
    "llm_time_to_first_token_seconds",
    "llm_request_duration_seconds",
    "llm_generation_tokens_total",
    "llm_frontdoor_requests_total",
)
# why a model's baseline ends where it does: before the onset its series show (_onset)
BEFORE_ONSET = "ends before the onset"  # the window held the incident's start
INSIDE_ONSET = "the incident's time before the onset"  # no earlier data: a deployment younger than the window
# the families that can be read under the sources' own names
ENGINE, GPU = frozenset({"engine"}), frozenset({"gpu"})


@dataclass(frozen=True)
class Verdict:
    """One model (in one deployment, when its name is served in several): its findings (most likely first; pod
    findings carry `pod`), per replica, and unmeasured signals."""

    model: str
    findings: tuple[Finding, ...]
    pods: dict[str, tuple[Finding, ...]] = field(default_factory=dict)
    not_measured: tuple[str, ...] = ()
    too_few: tuple[str, ...] = ()  # signals with too few events in the incident to be judged
    baseline: dict[str, Reading] = field(default_factory=dict)
    incident: dict[str, Reading] = field(default_factory=dict)
    not_enough_data: str = ""  # why nothing could be judged; "" when something could
    deployment: tuple[tuple[str, str], ...] = ()  # (label, value) of cluster, namespace: only when split
    baseline_window: Window | None = None  # its own baseline, when not the report's; baseline_why says why
    baseline_why: str = ""
    onset: Onset | None = None  # where its incident signals rose from their normal level (_onset), if they did
    incident_window: Window | None = None  # its own incident, when not the report's: from the onset on

    @property
    def enough_data(self) -> bool:
        return not self.not_enough_data

    @property
    def unit(self) -> str:
        """What the report calls it: `model`, or `model (namespace=a)` for one of its deployments."""
        return unit_name(self.model, self.deployment)


@dataclass(frozen=True)
class Report:
    incident: Window
    baseline: Window
    step: float
    verdicts: tuple[Verdict, ...]
    frames: tuple = ()  # (baseline frame, incident frame): the raw samples, for --plot
    warnings: tuple[str, ...] = ()
    read_from_sources: tuple[str, ...] = ()  # families read under the sources' names (no vocabulary series)
    rate_window: float = 0.0  # seconds


def _pod_findings(kinds, signals, floors, model, base, inc) -> dict[str, tuple[Finding, ...]]:
    """Findings of one replica against the model's other replicas in the incident (and against its own baseline
    when it had one); a replica that left without a replacement is missing data."""
    pods_now = {key[1]: r for key, r in inc.items() if key[0] == model and key[1] is not None}
    pods_before = {key[1]: r for key, r in base.items() if key[0] == model and key[1] is not None}
    per_pod = [s for s in signals if s.per_pod]
    out = {}
    if len(pods_now) >= 2:
        for pod, readings in pods_now.items():
            versus_others = {
                f.kind: f for f in judge(kinds, others(pods_now, pod, per_pod), readings, floors, alone=False)
            }
            if pod in pods_before:
                own = {f.kind for f in judge(kinds, pods_before[pod], readings, floors, alone=False)}
                versus_others = {k: f for k, f in versus_others.items() if k in own}
            if (readings.get("engine_series", ABSENT).value or 0.0) >= 1 - MISSING_SHARE:
                # there for its whole life in the window: a replica that started or was replaced during the
                # incident (a rollout, a restart under a new name) has shorter series, not missing ones
                versus_others.pop("missing-data", None)
            if versus_others:
                out[pod] = tuple(replace(f, pod=pod) for f in versus_others.values())
    if "missing-data" in kinds and len(pods_now) < len(pods_before):
        # gone for the whole incident and not replaced: a crash or a scale-in before it; said, ranked low
        for pod in sorted(set(pods_before) - set(pods_now)):
            kind = kinds["missing-data"]
            out[pod] = (
                Finding(
                    kind.name,
                    GONE_REPLICA,
                    (Evidence("engine_series", 1.0, 0.0, None, "engine_series missing", 1.0),),
                    kind.summary,
                    kind.runbook,
                    kind.next,
                    pod=pod,
                ),
            )
    return out


def assess(kinds, signals, base: dict, inc: dict, models, units: dict[str, Unit] | None = None) -> list[Verdict]:
    """Verdicts for `models` from two summaries ({(model, pod or None): {signal: Reading}}); a model there may be
    a unit name of split_deployments, whose (model, deployment) `units` gives."""
    floors = {s.name: s.floor for s in signals}
    verdicts = []
    presence = [s.name for s in signals if s.shape == "presence"]
    felt = [s.name for s in signals if s.felt]
    for model in models:
        b, i = base.get((model, None), {}), inc.get((model, None), {})
        # a share of steps with data is 0, not unknown, when the series are gone from the whole incident
        i = {**{name: Reading(0.0, coverage=0.0) for name in presence if name in b}, **i}
        findings = judge(kinds, b, i, floors)
        pods = _pod_findings(kinds, signals, floors, model, base, inc)
        held = {f.kind for f in findings}
        if sum(1 for key in inc if key[0] == model and key[1] is not None) >= 2:
            findings = [_named(f, pods) for f in findings]
        extra = [f for pod_findings in pods.values() for f in pod_findings if f.kind not in held]
        findings = sorted(findings + extra, key=lambda f: -f.confidence)
        unmeasured = tuple(s.name for s in signals if s.name not in b and s.name not in i)
        few = tuple(s.name for s in signals if s.name in i and i[s.name].state == "few")
        name, deployment = (units or {}).get(model, (model, ()))
        verdicts.append(
            Verdict(name, tuple(findings), pods, unmeasured, few, b, i, _not_enough(b, i, felt), deployment)
        )
    return verdicts


def _named(finding: Finding, pods: dict[str, tuple[Finding, ...]]) -> Finding:
    """A model's finding with the pod that causes it: the one replica (of several) that shows the same kind
    against the others (a crash-looping or throttled replica), else as it is."""
    holders = [pod for pod, found in pods.items() if any(f.kind == finding.kind for f in found)]
    return replace(finding, pod=holders[0]) if len(holders) == 1 and finding.pod is None else finding


def _not_enough(base: dict, inc: dict, felt: list[str]) -> str:
    """Why no latency users feel (`felt`, signals.yaml) can be compared between the windows ("" when one can): a
    verdict of nothing wrong on such data would read missing data as healthy."""
    if any(base.get(name, ABSENT).value is not None and inc.get(name, ABSENT).value is not None for name in felt):
        return ""
    few = [name for name in felt if name in inc and inc[name].state == "few"]
    if few:
        return f"too few requests or samples in the incident to judge latency ({', '.join(few)})"
    before = [name for name in felt if base.get(name, ABSENT).value is not None]
    if before:
        return f"latency not measured in the incident ({', '.join(before)} had values before)"
    few = [name for name in felt if name in base and base[name].state == "few"]
    if few:
        return f"too few requests or samples in the baseline to compare with ({', '.join(few)})"
    after = [name for name in felt if inc.get(name, ABSENT).value is not None]
    if after:  # a model, or a deployment of one, that started during the incident
        return f"no baseline to compare with: latency measured in the incident only ({', '.join(after)})"
    return "no latency series in either window (" + ", ".join(felt) + ")"


def _running(sel: str, raw: frozenset[str], func: str, window: str) -> str:
    """`func(llm_requests_running{sel}[window])`, read from the sources' names when the engines have no
    vocabulary series."""
    return translate(f"{func}(llm_requests_running{{{sel}}}[{window}])", raw)


def _scrape_interval(client, url: str, sel: str, at: list[float], raw: frozenset[str]) -> float:
    """The scrape interval: the median spacing of each engine's (llm_requests_running) and front door's
    (llm_frontdoor_requests_in_flight) raw samples near `at`, the longest of them: a fleet scraped at 15 s and
    60 s (two ServiceMonitors) is rated over four of the slower scrapes, or the slow ones' rates, and the
    restarts their gaps hide, would read as missing."""
    import statistics

    if "engine" in raw:
        engines = "{" + name_matcher(source_names("llm_requests_running")) + "}"
    else:
        engines = f"llm_requests_running{{{sel}}}"
    found = []
    for selector in (engines, f"llm_frontdoor_requests_in_flight{{{sel}}}"):
        for moment in at:
            rows = instant(client, url, f"{selector}[{INTERVAL_PROBE}]", moment)
            medians = [
                statistics.median(gaps)
                for row in rows[:MAX_PROBED]
                if (gaps := [float(b[0]) - float(a[0]) for a, b in pairwise(row.get("values", []))])
            ]
            if medians:
                # to a tenth of a second: the interval a person set, not the milliseconds by which one scraper's
                # timestamps jitter (Prometheus' and vmagent's differ: 2.003 s against 2 s would make rate windows
                # of 9 and 8 steps, and two stores' readings of the same engines apart)
                found.append(max(0.5, round(max(medians), 1)))
                break
    return max(found, default=DEFAULT_SCRAPE_INTERVAL)


def _models_of(client, url: str, query: str, at: float) -> list[str]:
    """The non-empty model labels of an instant query's answer, sorted."""
    return sorted({r["metric"].get("model", "") for r in instant(client, url, query, at)} - {""})


def _naming(client, url: str, sel: str, span: tuple[float, float]) -> tuple[list[str], list[str], bool]:
    """Which names Prometheus holds over `span`: (models with vocabulary engine series, models with only the
    engines' own series (vllm:*, sglang:*), whether the GPUs have only dcgm-exporter's names (DCGM_FI_*))."""
    seconds = max(1, int(span[1] - span[0]) + 1)
    engines = f"count by (model) (last_over_time(llm_requests_running{{{sel}}}[{seconds}s]))"
    vocabulary = _models_of(client, url, engines, span[1])
    own = [m for m in _models_of(client, url, translate(engines, ENGINE), span[1]) if m not in vocabulary]
    gpus = f"count(last_over_time(gpu_utilization_ratio{{}}[{seconds}s]))"
    dcgm = not instant(client, url, gpus, span[1]) and bool(instant(client, url, translate(gpus, GPU), span[1]))
    return vocabulary, own, dcgm


def _query_sets(models, vocabulary: list[str], own: list[str], gpu: frozenset) -> list[tuple[tuple, frozenset]]:
    """(models, families read from the sources) for each set of queries: one set, or two when some models have
    vocabulary series and others only their engine's own names."""
    if not own:
        return [(tuple(models), gpu)]
    if not vocabulary:
        return [(tuple(models), ENGINE | gpu)]
    return [(tuple(vocabulary), gpu), (tuple(own), ENGINE | gpu)]


def _queries(signals, sets: list[tuple[tuple, frozenset]], rate: str, fresh: str) -> list[tuple[str, str, str]]:
    """(signal, part, PromQL) for every signal part of every query set, each set read under its families' names."""
    return [
        (s.name, part, translate(q, families))
        for models, families in sets
        for s in signals
        for part, q in signal_queries(s, models, rate, fresh).items()
    ]


def _has_series(client, url: str, sel: str, window: Window, raw: frozenset[str]) -> bool:
    """Whether any engine has series in `window`."""
    seconds = max(1, int(window.seconds))
    result = instant(client, url, f"count({_running(sel, raw, 'count_over_time', f'{seconds}s')})", window.end)
    return bool(result and "value" in result[0] and float(result[0]["value"][1]) > 0)


def _pick_baseline(client, url: str, sel: str, choices: list[Window], raw: frozenset[str]) -> tuple[Window, bool]:
    """The first baseline choice with engine series, else the last (the fallback, judged with or without data);
    and whether it has any."""
    for window in choices[:-1]:
        if _has_series(client, url, sel, window, raw):
            return window, True
    return choices[-1], _has_series(client, url, sel, choices[-1], raw)


def _models_in(client, url: str, sel: str, window: Window) -> set[str]:
    """The models with engine series in `window`, under the vocabulary's names or the engines' own."""
    query = f"count by (model) ({_running(sel, frozenset(), 'count_over_time', f'{max(1, int(window.seconds))}s')})"
    return set(_models_of(client, url, query, window.end)) | set(
        _models_of(client, url, translate(query, ENGINE), window.end)
    )


def _young(
    client, url: str, sel: str, spec: str, choices: list[Window], chosen: Window, incident: Window
) -> tuple[Window | None, set[str]]:
    """`--baseline auto` chose the day before for the fleet: the second baseline (the hour before), and the models
    with series now but none a day ago (deployed since), which are judged against it alone."""
    if spec.strip() != "auto" or len(choices) < 2 or chosen != choices[0]:
        return None, set()
    return choices[-1], _models_in(client, url, sel, incident) - _models_in(client, url, sel, chosen)


def _second_look(verdicts: list[Verdict], against: list[Verdict], window: Window) -> list[Verdict]:
    """A model the day before finds nothing wrong with, but the hour before does, takes the hour before's
    verdict: the same hour yesterday was itself an incident (a nightly job, yesterday's throttling), so it
    hides today's; a slow drift that the hour before hides keeps the day before's findings."""
    other = {v.unit: v for v in against}
    out = []
    for v in verdicts:
        second = other.get(v.unit)
        if not v.findings and v.enough_data and second is not None and second.findings:
            v = replace(second, baseline_window=window, baseline_why=SECOND_LOOK)
        out.append(v)
    return out


class _Cut(tuple):
    """(onset, {a baseline window: the window that model was judged on instead}, its own incident or None)."""


def _contiguous(windows: tuple[Window, ...]) -> int | None:
    """Which window (index into `windows`: baseline, incident, fallback) ends where the incident begins."""
    incident = windows[1]
    return next((k for k, w in enumerate(windows) if k != 1 and abs(w.end - incident.start) < 1), None)


def _cut_at_onsets(signals, frames, windows, base, inc, rest, mine, step: float, lookback: float) -> dict:
    """Find each model's onset over the hour before and the incident, and end its baselines before it, in
    place: the hour before cut at the onset (a queue that began before --since), or, where the model has no
    baseline data at all (younger than the window before it), the incident's own time before the onset as
    baseline and the rest as incident. {model: _Cut} for every model with an onset."""
    import pandas as pd

    k = _contiguous(windows)
    incident = windows[1]
    before_it = [] if k is None else [frames[k][frames[k]["t"] < incident.start]]
    # only the onset signals' rows are searched: the frames of 100 models over a day are large, a copy costs
    names = {s.name for s in signals if s.onset}
    parts = [p[p["signal"].isin(names)] for p in [*before_it, frames[1]] if p is not None and len(p)]
    if not parts:
        return {}
    found = onsets(pd.concat(parts), signals, incident.start if k is None else windows[k].start)

    def rows(model):  # every signal of one model over the span, only where a window is cut
        return pd.concat([p[p["model"] == model] for p in [*before_it, frames[1]] if p is not None and len(p)])

    readings = {0: base, 2: rest[0] if rest else None}
    # the least baseline left once cut, else no cut: a rate window, then as many steps of rates as a level needs
    # in the change point
    least = lookback + MIN_SEGMENT * step
    felt = [s.name for s in signals if s.felt]
    out = {}
    for model, onset in found.items():
        cuts: dict[Window, Window] = {}
        own = None
        end = onset.at - lookback  # the rate at the onset's step already saw the rise: the rise began after this
        if k is not None and end < incident.start and end - max(windows[k].start, onset.before) >= least:
            window = Window(windows[k].start, end)
            mine_rows = rows(model)
            _replace(readings[k], model, summarise(mine_rows[mine_rows["t"] <= end], signals, window, step, lookback))
            cuts[windows[k]] = window
        judged_on = readings[2] if (readings[2] is not None and mine((model, None))) else base
        had = judged_on.get((model, None), {})
        if end >= incident.start and not any(had.get(name, ABSENT).value is not None for name in felt):
            before = Window(max(onset.before, incident.start if k is None else windows[k].start), end)
            if before.seconds >= least:
                own = Window(end, incident.end)
                mine_rows = rows(model)
                _replace(judged_on, model, summarise(mine_rows[mine_rows["t"] <= end], signals, before, step, lookback))
                _replace(inc, model, summarise(mine_rows[mine_rows["t"] >= end], signals, own, step, lookback))
                cuts[windows[0] if judged_on is base else windows[2]] = before
        out[model] = _Cut((onset, cuts, own))
    return out


def _replace(readings: dict, model: str, new: dict) -> None:
    """A model's readings (and its replicas') in `readings` replaced by `new`'s."""
    for key in [key for key in readings if key[0] == model]:
        del readings[key]
    readings.update({key: r for key, r in new.items() if key[0] == model})


def _with_onset(verdict: Verdict, cut: _Cut | None, chosen: Window) -> Verdict:
    """A verdict with its onset, and the baseline (and incident) it was judged on when the onset cut them."""
    if cut is None:
        return verdict
    onset, cuts, own = cut
    judged_on = verdict.baseline_window or chosen
    verdict = replace(verdict, onset=onset, incident_window=own)
    if judged_on in cuts:
        why = INSIDE_ONSET if own is not None else BEFORE_ONSET
        verdict = replace(verdict, baseline_window=cuts[judged_on], baseline_why=why)
    return verdict


def _models_with_series(client, url: str, incident: Window, baseline: Window) -> list[str]:
    """Every model with engine series over both windows, under the vocabulary's names or the engines' own."""
    seconds = int(incident.end - min(incident.start, baseline.start)) + 1
    query = f"count by (model) ({_running('', frozenset(), 'count_over_time', f'{seconds}s')})"
    return sorted(
        set(_models_of(client, url, query, incident.end))
        | set(_models_of(client, url, translate(query, ENGINE), incident.end))
    )


def _no_series(model: str, seen: list[str], incident: Window, baseline: Window) -> InferwatchError:
    others_seen = f"; models with series: {', '.join(seen[:20])}" if seen else "; no model has any"
    alike = [name for name in seen if name.casefold() == model.casefold()]
    if alike:  # model names are case-sensitive, as Prometheus' labels are: say so, with the right spelling
        others_seen = f"; model names are case-sensitive: did you mean {' or '.join(map(repr, alike))}?"
    return InferwatchError(
        f"no series for model {model!r} between {iso(baseline.start)} and {iso(incident.end)}: "
        f"{', '.join(CORE_SERIES)} (nor their engines' own names, vllm:num_requests_running, "
        f"sglang:num_running_reqs, ...) and every other triage signal are missing{others_seen}"
    )


def _require_series(client, url: str, models, seen: list[str], incident: Window, baseline: Window) -> None:
    """Fail in one line when an asked model, or every model, has no series in either window."""
    for model in models:
        if model not in seen:
            raise _no_series(model, _models_with_series(client, url, incident, baseline), incident, baseline)
    if not seen:
        raise InferwatchError(
            f"no model has engine series between {iso(baseline.start)} and {iso(incident.end)} at "
            f"{url}: neither the common vocabulary (llm_requests_running, ...) nor vLLM's or "
            "SGLang's own names (vllm:num_requests_running, sglang:num_running_reqs, ...); is "
            "Prometheus scraping the engines?"
        )


def _window_warnings(incident: Window, baseline: Window, interval: float, rate: float) -> list[str]:
    """What the scrape interval leaves unjudgeable: a window shorter than the rate window has no rate."""
    out = []
    for name, window in (("incident", incident), ("baseline", baseline)):
        if window.seconds < rate:
            out.append(
                f"the {name} ({window.seconds:g}s) is shorter than the rate window ({rate:g}s: two scrapes "
                f"{interval:g}s apart and a step at least): its rates and latency means have too few samples; "
                f"give a window of at least {max(4 * interval, rate):g}s"
            )
    return out


def triage(conn: Connection, incident: Window, baseline: str = "auto", models=(), rules=()) -> Report:
    """Judge `models` (default: every model with series; a unit name such as `llama-3-8b (namespace=a)` asks
    for one deployment) over the incident against a baseline."""
    kinds = load_kinds(list(rules))
    signals = load_signals()
    client = connect(conn)
    wanted = [asked_models(m) for m in models]
    asked = tuple(dict.fromkeys(name for names in wanted for name in names))
    sel = model_matcher(asked)
    choices = baseline_choices(baseline, incident)
    vocabulary, own, dcgm = _naming(client, conn.url, sel, (min(w.start for w in choices), incident.end))
    gpu = GPU if dcgm else frozenset()
    sets = _query_sets(asked, vocabulary, own, gpu)
    raw = ENGINE if own and not vocabulary else frozenset()  # what the probes below read
    chosen, filled = _pick_baseline(client, conn.url, sel, choices, raw)
    fallback, young = _young(client, conn.url, sel, baseline, choices, chosen, incident)
    interval = _scrape_interval(
        client, conn.url, sel, [incident.end, (incident.start + incident.end) / 2, chosen.end], raw
    )
    # a baseline without any data does not set the step: the incident's own time before its onset may serve
    windows = (chosen, incident, *([fallback] if fallback else []))
    step = choose_step(incident, *([chosen] if filled else []), *([fallback] if fallback else []), fetched=windows)
    rate = rate_window(step, interval, min(incident.seconds, chosen.seconds))
    lookback = float(rate.rstrip("s"))
    fresh = f"{math.ceil(FRESH_SCRAPES * interval)}s"
    queries = _queries(signals, sets, rate, fresh)
    warnings: list[str] = _window_warnings(incident, chosen, interval, lookback)
    if own and vocabulary:
        warnings.append(
            f"read {', '.join(own[:20])} from {SOURCE_NAMES['engine']}: only they have no common-vocabulary series"
        )
    frames = fetch_windows(client, conn.url, queries, windows, step, warnings, lookback)
    frames, units = split_deployments(frames)
    base, inc, *rest = (summarise(f, signals, w, step, lookback) for f, w in zip(frames, windows, strict=True))
    mine = lambda key: units.get(key[0], (key[0], ()))[0] in young  # noqa: E731 - a young model's reading
    cut = _cut_at_onsets(signals, frames, windows, base, inc, rest, mine, step, lookback)
    if rest:
        base = {**{k: r for k, r in base.items() if not mine(k)}, **{k: r for k, r in rest[0].items() if mine(k)}}
        frames = frames[:2]  # the plot shows the report's baseline
    judged = sorted({key[0] for key in list(base) + list(inc)})
    seen = sorted({units.get(name, (name, ()))[0] for name in judged})
    _require_series(
        client, conn.url, [next((m for m in names if m in seen), names[-1]) for names in wanted], seen, incident, chosen
    )
    if models:  # in the order asked, each model's deployments together
        judged = asked_units(models, judged, units)
    verdicts = [
        replace(v, baseline_window=fallback, baseline_why=YOUNG) if v.model in young else v
        for v in assess(kinds, signals, base, inc, judged, units)
    ]
    if rest:
        assert fallback is not None  # `rest` is the fallback window's reading
        verdicts = _second_look(verdicts, assess(kinds, signals, rest[0], inc, judged, units), fallback)
    verdicts = [_with_onset(v, cut.get(name), chosen) for v, name in zip(verdicts, judged, strict=True)]
    return Report(
        incident, chosen, step, tuple(verdicts), tuple(frames), tuple(warnings), tuple(sorted(raw | gpu)), lookback
    )
