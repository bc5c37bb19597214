"""The scale-out test (issue 25 §4): the demo's stack and incidents, watched by Prometheus and by vmagent ->
victoria-metrics -> vmalert -> Alertmanager at once (Debian's binaries, started and stopped here on free ports in
temporary folders); and 30 healthy minutes on vmalert without 30 minutes of wall time.

The demo's engines (simulated vLLM and SGLang, each behind its front door), its normalizing exporter and its
Prometheus run as `inferwatch demo` starts them (sim/_demo.start_stack); vmagent scrapes the same jobs with the
same scrape configuration into a victoria-metrics, and vmalert runs the same rule files there, with the flags the
VictoriaMetrics render gives it (deploy/_victoriametrics.py), notifying a real Alertmanager. Time is compressed as in
the demo (the SLO groups every 10 s, each `for:` a tenth), but the operational alerts: every duration of theirs a
twentieth (promtools.compress_durations), so the target-down and GPU alerts fire within a minute or two.

Each model runs its incidents in turn (the demo's, plus engine errors and a metrics outage), the two models side
by side, each incident until the alerts it must raise have fired on both rulers and nothing about its model is
left pending or fired on one side only. Asserted, on both alert APIs polled every second: the same alerts fired on
both rulers; each on vmalert within the extra delay slo/README.md states (`_allowed`); every one vmalert fired
reached the Alertmanager; after vLLM's target vanished its per-minute counts stopped on both stores alike (no
phantom count); `inferwatch triage` names the same most likely kind on both stores. The measured delays are printed
(`-s`) and kept in slo/README.md ("On VictoriaMetrics").
"""

from __future__ import annotations

import asyncio
import datetime
import json
import re
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from conftest import need
from deploytools import alertmanager
from promtools import compress_durations, process, wait_for
from vmtools import force_flush, remote_write, victoria_metrics

from inferwatch.deploy._victoriametrics import STORE_FLAGS, vmalert_flags
from inferwatch.sim._demo import (
    RATES,
    SGLANG_MODEL,
    SLO_INTERVAL,
    TOOL_RATE,
    VLLM_MODEL,
    _compress,
    _Processes,
    _rule_files,
    _set_scenario,
    free_port,
    start_stack,
)
from inferwatch.sim._load import LoadConfig, run_load
from inferwatch.slo._rules import record_hops

SCRAPE_S = 2  # the demo's scrape interval, for Prometheus and vmagent alike
EVAL_S = 2  # the demo's evaluation_interval: the groups without an interval of their own (operational, mappings)
SLO_S = int(SLO_INTERVAL.removesuffix("s"))  # the compressed SLO groups' interval
POLL_S = 1.0
PATIENCE_S = 420  # a deadline for any incident, only against a hang: never a measure of speed
MIN_INCIDENT_S = 20  # triage needs events in the incident window
SETTLE_S = 60  # the longest compressed `for:` (the GPU alert's 45 s), and room
QUEUEING_MINUTES = 12  # of the recorded queueing, replayed after the healthy half hour: vLLM pages within them
BASELINE_S = 30  # healthy load first: triage's baseline
# the operational alerts' durations, divided: their 5-, 10- and 15-minute windows and `for:` in a fraction of a
# minute (7 scrapes in the shortest window). Their thresholds are rates, ratios and means: unchanged by it
OPERATIONAL_SCALE = 20

# The alerts' extra delay on vmalert that slo/README.md ("On VictoriaMetrics") states: a rule reads a record of its
# own group's same evaluation one evaluation late, and the two rulers evaluate at unrelated moments of the interval,
# so an alert reading `hops` records deep (slo._rules.records_read_now; 0 for the SLO pages, which read earlier
# evaluations' records only) comes between one interval before and hops + 1 intervals after Prometheus'.
# On top: the scrapes (vmagent and Prometheus scrape at moments of their own), vmalert's remote-write flush and the
# store's search latency (-remoteWrite.flushInterval, -search.latencyOffset: 1 s each here) and this test's polling.
SLACK_S = SCRAPE_S + 1 + 1 + 2 * POLL_S


@dataclass(frozen=True)
class Incident:
    """One incident of a model's script: its engine's scenario, and the alerts (label subsets) it must raise."""

    name: str
    scenario: str
    raises: tuple[dict[str, str], ...] = ()
    tools: bool = False  # the broken-tools load: requests offering a tool, beside the usual ones


def _page(model: str, slo: str, service: str = "llm") -> dict[str, str]:
    return {"alertname": "LLMErrorBudgetBurn", "service": service, "slo": slo, "model": model, "severity": "critical"}


# each model's incidents, one after another; the two models' scripts run side by side
SCRIPTS = {
    VLLM_MODEL: [
        # the outage first, from a healthy start (slo/README.md, "On VictoriaMetrics")
        Incident(
            "metrics down",
            "metrics-down",
            ({"alertname": "LLMEngineTargetDown", "target": "vllm"}, {"alertname": "LLMSLIDataMissing"}),
        ),
        Incident(
            "queueing",
            "queueing",
            ({"alertname": "LLMQueueSaturated", "model": VLLM_MODEL}, _page(VLLM_MODEL, "responsive")),
        ),
        Incident("errors", "errors", (_page(VLLM_MODEL, "answered"),)),
        Incident(
            "broken tools",
            "broken-tools",
            (
                {"alertname": "LLMToolCallsInvalid", "model": VLLM_MODEL},
                _page(VLLM_MODEL, "answered", "llm-frontdoor"),
            ),
            tools=True,
        ),
    ],
    SGLANG_MODEL: [
        Incident("GPU stall", "gpu-stall", ({"alertname": "LLMGPUBusyNotComputing", "pod": "sglang-0"},)),
        Incident("thinking", "thinking", (_page(SGLANG_MODEL, "responsive", "llm-frontdoor"),)),
        Incident("truncation", "truncation"),  # a stop at the length limit is answered: no alert (the demo's)
    ],
}

IGNORED_LABELS = {"alertstate", "alertgroup"}  # vmalert adds the group's name to each alert


def _key(labels: dict[str, str]) -> tuple:
    return tuple(sorted((k, v) for k, v in labels.items() if k not in IGNORED_LABELS))


def _get(url: str) -> object:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.load(resp)


def _alerts(base: str) -> dict[tuple, str]:
    """{alert: firing or pending} of a ruler now (Prometheus and vmalert both serve /api/v1/alerts)."""
    data = _get(base + "/api/v1/alerts")["data"]
    alerts = (data["alerts"] if isinstance(data, dict) else data) or []
    return {_key(a["labels"]): a["state"] for a in alerts}


def _in_alertmanager(base: str) -> set[tuple]:
    return {_key(a["labels"]) for a in _get(base + "/api/v2/alerts")}


@dataclass
class Watch:
    """When each alert was first seen firing, per side, and which are pending now: both rulers' alert APIs (and the
    Alertmanager's) polled every POLL_S by a thread of its own."""

    prom: str
    vmalert: str
    am: str
    first: dict[str, dict[tuple, float]] = field(default_factory=lambda: {"prometheus": {}, "vmalert": {}})
    pending: dict[str, set[tuple]] = field(default_factory=lambda: {"prometheus": set(), "vmalert": set()})
    notified: set[tuple] = field(default_factory=set)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self.stop.is_set():
            now = time.time()
            try:  # a slow answer on a loaded host skips this round, not the rest of the test
                answers = {side: _alerts(base) for side, base in (("prometheus", self.prom), ("vmalert", self.vmalert))}
                self.notified |= _in_alertmanager(self.am)
            except OSError:
                answers = {}
            for side, alerts in answers.items():
                for key in (k for k, state in alerts.items() if state == "firing"):
                    self.first[side].setdefault(key, now)
                self.pending[side] = {k for k, state in alerts.items() if state == "pending"}
            self.stop.wait(POLL_S)

    def fired(self, side: str, want: dict[str, str]) -> list[tuple]:
        return [k for k in self.first[side] if want.items() <= dict(k).items()]

    def unsettled(self, names: set[str]) -> list[tuple]:
        """Alerts about `names` (a model, its engine, its pod) pending on either ruler or fired on one only: an
        incident that ended now would leave them to a race between the rulers."""
        about = lambda key: bool(names & {v for _, v in key})  # noqa: E731
        fired = set(self.first["prometheus"]) ^ set(self.first["vmalert"])
        return [k for k in fired | self.pending["prometheus"] | self.pending["vmalert"] if about(k)]


def _rules(folder: Path) -> list[str]:
    """The demo's rule files, compressed as the demo does, but for the operational alerts: every duration of theirs
    divided by OPERATIONAL_SCALE (the demo leaves the 5-minute windows of the target-down alert)."""
    paths = _rule_files(folder, compress=False)
    for path in map(Path, paths):
        text = path.read_text()
        is_operational = path.name == "operational.rules.yaml"
        path.write_text(compress_durations(text, OPERATIONAL_SCALE) if is_operational else _compress(text))
    assert any(Path(p).name == "operational.rules.yaml" for p in paths)
    return paths


class Load:
    """The demo's load through the front doors, in a thread with its own loop, until closed; `tools(True)` adds the
    broken-tools incident's stream of tool-offering requests to vLLM, `tools(False)` ends it."""

    def __init__(self, doors: dict[str, str]):
        self.doors = doors
        self.loop = asyncio.new_event_loop()
        self.tasks: list[asyncio.Future] = []
        self.tool_tasks: list[asyncio.Future] = []
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        for i, (model, door) in enumerate(doors.items()):
            config = LoadConfig(door, RATES[model], 3600, model, prompt_tokens=150, max_tokens=1024, seed=7 + i)
            self.loop.call_soon_threadsafe(lambda c=config: self.tasks.append(asyncio.ensure_future(run_load(c))))

    def tools(self, on: bool) -> None:
        if on:
            config = LoadConfig(self.doors[VLLM_MODEL], TOOL_RATE, 3600, VLLM_MODEL, prompt_tokens=150, tool_share=1)
            self.loop.call_soon_threadsafe(lambda: self.tool_tasks.append(asyncio.ensure_future(run_load(config))))
        else:
            self.loop.call_soon_threadsafe(lambda: [t.cancel() for t in self.tool_tasks])

    def close(self) -> None:
        async def cancel():
            for task in self.tasks + self.tool_tasks:
                task.cancel()
            await asyncio.gather(*self.tasks, *self.tool_tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(cancel(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def _delays(paths: list[str]) -> dict[tuple[str, str], tuple[int, float]]:
    """{(alert name, tier): (how many records of its own group deep it reads at its own instant, its group's interval
    in s)}: what its extra delay on vmalert is made of (the SLO pages read none, tickets two)."""
    from inferwatch.durations import parse_duration

    out: dict[tuple[str, str], tuple[int, float]] = {}
    for path in paths:
        for group in yaml.safe_load(Path(path).read_text())["groups"]:
            interval = parse_duration(group["interval"]) if "interval" in group else EVAL_S
            records = {r["record"]: r["expr"] for r in group["rules"] if "record" in r}
            for rule in group["rules"]:
                if "alert" in rule:
                    hops = record_hops(rule["expr"], records)
                    name = (rule["alert"], rule.get("labels", {}).get("tier", ""))
                    out[name] = max(out.get(name, (0, 0.0)), (hops, interval))
    return out


def _allowed(delays: dict[tuple[str, str], tuple[int, float]], key: tuple) -> tuple[float, float]:
    """(how much earlier, how much later) vmalert may fire `key` than Prometheus, in seconds."""
    labels = dict(key)
    hops, interval = delays[labels["alertname"], labels.get("tier", "")]
    return interval + SLACK_S, (hops + 1) * interval + SLACK_S


class Script:
    """Each model's incidents one after another, the two models side by side: an incident ends once it ran
    MIN_INCIDENT_S, each alert it must raise has fired on both rulers, and no alert about the model is pending or
    fired on one ruler only (Watch.unsettled)."""

    def __init__(self, demo, load: Load, watch: Watch):
        self.bases, self.load, self.watch = demo.bases, load, watch
        self.engines = {model: (engine, f"{engine}-0") for model, (engine, _) in demo.engines.items()}
        self.left = {model: list(script) for model, script in SCRIPTS.items()}
        self.now: dict[str, tuple[Incident, float]] = {}
        self.windows: dict[tuple[str, str], tuple[float, float]] = {}
        self.ready: dict[str, float] = {}  # model -> when its incident had raised all it must
        for model in SCRIPTS:
            self._next(model)

    def _next(self, model: str) -> None:
        incident = self.left[model].pop(0) if self.left[model] else None
        _set_scenario(self.bases[model], incident.scenario if incident else "normal")
        if incident:
            self.now[model] = (incident, time.time())
            self.load.tools(True) if incident.tools else None
        else:
            self.now.pop(model)

    def step(self) -> bool:
        """Advance what is due; True once every script has ended. A deadline guards against a hang only."""
        for model, (incident, began) in list(self.now.items()):
            missing = [
                (side, want)
                for want in incident.raises
                for side in ("prometheus", "vmalert")
                if not self.watch.fired(side, want)
            ]
            names = {model, *self.engines[model]}
            assert time.time() - began < PATIENCE_S, (model, incident.name, missing, self.watch.unsettled(names))
            if missing or time.time() - began < MIN_INCIDENT_S:
                continue
            ready = self.ready.setdefault(model, time.time())
            # a pending alert fires within its `for:` (SETTLE_S covers the longest) or is gone: then end anyway
            if not self.watch.unsettled(names) or time.time() - ready > SETTLE_S:
                self.windows[model, incident.name] = (began, time.time())
                self.load.tools(False) if incident.tools else None
                self.ready.pop(model)
                self._next(model)
        return not self.now


def _settled(watch: Watch, delays) -> bool:
    """Every alert one ruler fired has fired on the other, or the stated delay for it has passed."""
    now = time.time()
    for side, other in (("prometheus", "vmalert"), ("vmalert", "prometheus")):
        for key, at in watch.first[side].items():
            if key not in watch.first[other] and now - at <= max(_allowed(delays, key)):
                return False
    return True


def _range(base: str, expr: str, seconds: float, at: float) -> list[tuple[dict, list[tuple[float, float]]]]:
    """The raw samples of `expr` in the `seconds` before `at`."""
    query = {"query": f"{expr}[{int(seconds)}s]", "time": f"{at:.3f}", "nocache": "1"}
    data = _get(f"{base}/api/v1/query?" + urllib.parse.urlencode(query))["data"]["result"]
    return [(r["metric"], [(float(t), float(v)) for t, v in r["values"]]) for r in data]


def _last_count(base: str, window: tuple[float, float]) -> float:
    """Seconds from the start of `window` (vLLM's metrics outage) to the last per-minute count recorded for vLLM in
    it (0: none)."""
    began, end = window
    times = [
        t
        for record in ("llm_slo:total:increase1m", "llm_slo:good:increase1m")
        for _, samples in _range(base, f'{record}{{service="llm", model="{VLLM_MODEL}"}}', end - began, end)
        for t, _ in samples
    ]
    return max(times, default=began) - began


def _triage(base: str, baseline: tuple[float, float], incident: tuple[float, float], model: str) -> str:
    """`inferwatch triage`'s headline for `model`: `model: kind (confidence); next kind (...)`, `model: nothing
    wrong`."""
    from inferwatch.triage import Connection, Window, headline, triage

    report = triage(Connection(base), Window(*incident), f"{baseline[0]:.3f}/{baseline[1]:.3f}", (model,))
    (verdict,) = report.verdicts
    return headline(verdict)


# kinds this close to the most likely one lead with it: a tie. Triage reads both stores alike (the same samples give
# the same numbers: tests/test_triage_vm.py), but vmagent and Prometheus scrape the engines at moments of their own,
# so the two stores hold different samples: a kind both named came up to 0.04 apart between them in the four runs
# measured, the top kinds equal in all (slo/README.md); a tie within TIE leaves that 2.5 times over
TIE = 0.1


def _kinds(headline: str) -> list[tuple[str, float]]:
    """The kinds of a headline, most likely first, with their confidences; `[("nothing wrong", 1.0)]` for none,
    `[("not enough data", 1.0)]` where latency could not be compared."""
    verdict = headline.split(": ", 1)[1]
    if verdict.startswith("not enough data"):
        return [("not enough data", 1.0)]
    found = [(kind, float(c)) for kind, c in re.findall(r"([a-z-]+) \((\d+(?:\.\d+)?)", verdict)]
    return found or [("nothing wrong", 1.0)]


def _top(headline: str) -> str:
    return _kinds(headline)[0][0]


def _leading(headline: str) -> set[str]:
    """The headline's most likely kind and every kind within TIE of it."""
    kinds = _kinds(headline)
    return {kind for kind, c in kinds if c >= kinds[0][1] - TIE}


def _agree(prometheus: str, vm: str) -> bool:
    """Both stores name the same most likely kind, or each one's leads the other within TIE."""
    return _top(prometheus) == _top(vm) or (_top(prometheus) in _leading(vm) and _top(vm) in _leading(prometheus))


def _gap(prometheus: str, vm: str) -> tuple[float, list[str]]:
    """The largest difference of one kind's confidence between the stores, over the kinds both name; and the kinds
    one names alone."""
    a, b = dict(_kinds(prometheus)), dict(_kinds(vm))
    return max((abs(a[k] - b[k]) for k in set(a) & set(b)), default=0.0), sorted(set(a) ^ set(b))


def _stack(stack: ExitStack, tmp_path: Path, rule_files: list[str]):
    """The demo's stack with its Prometheus, and vmagent -> victoria-metrics -> vmalert -> Alertmanager beside it:
    (the demo's Stack, victoria-metrics' URL, vmalert's, the Alertmanager's)."""
    folder = Path(rule_files[0]).parent
    procs = _Processes(folder)
    stack.callback(procs.stop)
    demo = start_stack(need("prometheus"), folder, procs, rule_files)
    vm = stack.enter_context(victoria_metrics(need("victoria-metrics"), tmp_path / "vm", *STORE_FLAGS))
    scrape = tmp_path / "vmagent.yml"  # the demo's scrape configs, strictly what vmagent reads
    scrape.write_text(
        yaml.safe_dump(
            {
                "global": {"scrape_interval": f"{SCRAPE_S}s", "scrape_timeout": f"{SCRAPE_S}s"},
                "scrape_configs": demo.scrape_configs,
            }
        )
    )
    agent = free_port()
    stack.enter_context(
        process(
            [
                need("vmagent"),
                f"-promscrape.config={scrape}",
                f"-remoteWrite.url={vm}/api/v1/write",
                f"-remoteWrite.tmpDataPath={tmp_path / 'vmagent-queue'}",
                f"-httpListenAddr=127.0.0.1:{agent}",
            ],
            tmp_path / "vmagent.log",
            ready=f"http://127.0.0.1:{agent}",
        )
    )
    am_config = tmp_path / "alertmanager.yml"
    am_config.write_text(
        yaml.safe_dump({"route": {"receiver": "null", "group_wait": "1s"}, "receivers": [{"name": "null"}]})
    )
    am = stack.enter_context(alertmanager(need("prometheus-alertmanager"), am_config, tmp_path))
    port = free_port()
    vmalert = f"http://127.0.0.1:{port}"
    stack.enter_context(
        process(
            [
                need("vmalert"),
                *vmalert_flags(rule_files, vm, am, evaluation_interval=f"{EVAL_S}s"),
                f"-httpListenAddr=127.0.0.1:{port}",
                # the default 5 s is a twelfth of the 1m interval it serves in production; time compressed, a tenth
                "-remoteWrite.flushInterval=1s",
            ],
            tmp_path / "vmalert.log",
            ready=vmalert,
        )
    )
    return demo, vm, vmalert, am


def _models(base: str) -> set[str]:
    query = urllib.parse.urlencode({"query": "max by (model) (llm_requests_running)"})
    return {r["metric"].get("model", "") for r in _get(f"{base}/api/v1/query?{query}")["data"]["result"]}


def _describe(key: tuple) -> str:
    labels = dict(key)
    shown = [labels[k] for k in ("service", "model", "pod", "target", "slo", "tier") if k in labels]
    return " ".join([labels["alertname"], *shown])


@pytest.mark.slow
def test_the_demo_raises_the_same_alerts_on_vmalert_as_on_prometheus(tmp_path):
    """See the module's docstring."""
    folder = tmp_path / "demo"
    folder.mkdir()
    rule_files = _rules(folder)
    delays = _delays(rule_files)
    with ExitStack() as stack:
        demo, vm, vmalert, am = _stack(stack, tmp_path, rule_files)
        for base in (demo.prom, vm):  # both stores hold both engines' series before the load starts
            wait_for(lambda b=base: len(_models(b)) == 2, timeout=PATIENCE_S)
        load = Load(demo.doors)
        stack.callback(load.close)
        watch = Watch(demo.prom, vmalert, am)
        poller = threading.Thread(target=watch.run, daemon=True)
        poller.start()
        stack.callback(poller.join, 30)
        stack.callback(watch.stop.set)
        start = time.time()
        time.sleep(BASELINE_S)  # the baseline's load: a phase of fixed length, not a wait on an event
        baseline = (start, time.time())
        script = Script(demo, load, watch)
        wait_for(script.step, timeout=PATIENCE_S * 4, step=POLL_S)  # each incident has its own deadline
        wait_for(lambda: _settled(watch, delays), timeout=PATIENCE_S, step=POLL_S)
        watch.stop.set()
        poller.join(30)
        force_flush(vm)
        outage = script.windows[VLLM_MODEL, "metrics down"]
        last_count = {"prometheus": _last_count(demo.prom, outage), "vmalert": _last_count(vm, outage)}
        verdicts = {
            f"{model}, {name}": {
                side: _triage(base, baseline, window, model) for side, base in (("prometheus", demo.prom), ("vm", vm))
            }
            for (model, name), window in script.windows.items()
        }
    prom_fired, vm_fired = watch.first["prometheus"], watch.first["vmalert"]
    # each scraper's own link to the exporter (`up` of the inferwatch-exporter job) is its own scrape, timed by
    # its own clock: in one .ci/run Prometheus' 2 s scrape of the exporter ran late once during metrics-down and
    # vmagent's did not. Said, not compared; the engines behind the exporter are
    links = {
        k
        for k in set(prom_fired) | set(vm_fired)
        if dict(k).get("job") == "inferwatch-exporter" and not {"target", "model"} & set(dict(k))
    }
    print(f"the scrapers' own link to the exporter, not compared: {sorted(_describe(k) for k in links)}")
    prom_fired = {k: v for k, v in prom_fired.items() if k not in links}
    vm_fired = {k: v for k, v in vm_fired.items() if k not in links}
    print(f"\nwall {time.time() - start:.0f} s from the load's start; incidents (s from it):")
    for (model, name), (began, end) in script.windows.items():
        print(f"  {model} {name}: {began - start:.0f} - {end - start:.0f}")
    print("first firing (s from the load's start): prometheus, vmalert, vmalert - prometheus")
    order = lambda k: min(prom_fired.get(k, 1e18), vm_fired.get(k, 1e18))  # noqa: E731
    for key in sorted(set(prom_fired) | set(vm_fired), key=order):
        p, v = prom_fired.get(key), vm_fired.get(key)
        diff = f"{v - p:+.0f}" if p and v else "-"
        print(f"  {_describe(key)}: {p - start if p else 0:.0f}, {v - start if v else 0:.0f}, {diff}")
    print(f"last per-minute count of vLLM after its target vanished (s): {last_count}")
    print(json.dumps(verdicts, indent=1))
    assert set(vm_fired) == set(prom_fired), {
        "vmalert only": [_describe(k) for k in set(vm_fired) - set(prom_fired)],
        "prometheus only": [_describe(k) for k in set(prom_fired) - set(vm_fired)],
    }
    late = {}
    for key, p in prom_fired.items():
        earlier, later = _allowed(delays, key)
        if not -earlier <= vm_fired[key] - p <= later:
            late[_describe(key)] = (round(vm_fired[key] - p), -earlier, later)
    assert not late, late
    assert set(vm_fired) <= watch.notified, [_describe(k) for k in set(vm_fired) - watch.notified]
    # no phantom counts: vLLM's counts stop on vmalert's side within one hop of where Prometheus' stop
    assert last_count["vmalert"] <= last_count["prometheus"] + SLO_S + SLACK_S, last_count
    # triage's verdict, the most likely kind, on both stores: the same, or a tie within TIE on both sides
    gaps = {name: _gap(v["prometheus"], v["vm"]) for name, v in verdicts.items()}
    print("largest confidence gap of a kind both stores name, and kinds one names alone:")
    print(json.dumps({name: [round(gap, 2), alone] for name, (gap, alone) in gaps.items()}))
    differ = {name: v for name, v in verdicts.items() if not _agree(v["prometheus"], v["vm"])}
    assert not differ, json.dumps(differ, indent=1)


# --- 30 healthy minutes on vmalert, without 30 minutes of wall time ---------------------------------------------


def _layers(texts: dict[str, str]) -> list[dict[str, str]]:
    """The rule files split by depth: layer 0 the rules that read raw series only, layer n those that read a record
    of layer n-1 at most; each layer's files keep their groups' names and intervals."""
    groups = {name: yaml.safe_load(text)["groups"] for name, text in texts.items()}
    rules = [r for gs in groups.values() for g in gs for r in g["rules"]]
    depth: dict[str, int] = {}

    def of(rule: dict) -> int:
        reads = [
            depth_of(r["record"]) + 1 for r in rules if "record" in r and re.search(_word(r["record"]), rule["expr"])
        ]
        return max(reads, default=0)

    def depth_of(record: str) -> int:
        if record not in depth:
            depth[record] = max(of(r) for r in rules if r.get("record") == record)
        return depth[record]

    layers: list[dict[str, str]] = []
    for name, gs in groups.items():
        for group in gs:
            for rule in group["rules"]:
                d = of(rule)
                while len(layers) <= d:
                    layers.append({})
                files = layers[d].setdefault(name, {"groups": []})
                if not files["groups"] or files["groups"][-1]["name"] != group["name"]:
                    files["groups"].append({**{k: v for k, v in group.items() if k != "rules"}, "rules": []})
                files["groups"][-1]["rules"].append(rule)
    return [{name: yaml.safe_dump(doc, sort_keys=False) for name, doc in layer.items()} for layer in layers]


def _word(name: str) -> str:
    return r"(?<![\w:])" + re.escape(name) + r"(?![\w:])"


def _rfc3339(t: float) -> str:
    return datetime.datetime.fromtimestamp(t, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_thirty_healthy_minutes_page_nothing_on_vmalert(tmp_path):
    """Issue 25's "0 false pages in 30 healthy minutes" on VictoriaMetrics, in well under a minute: the demo's
    recorded healthy half hour (tests/fixtures/demo: both models healthy, from a fresh start; the history
    tests/test_demo_alerts.py replays through promtool with the same rules, where nothing fires either) goes into a
    real victoria-metrics by remote write, and vmalert's replay mode (-replay.timeFrom/-replay.timeTo: each rule a
    range query over the half hour at its group's interval, its records and ALERTS written back) evaluates the
    shipped rules on it, uncompressed. The rules go layer by layer (first those reading raw series only, then those
    reading their records, ...), each layer flushed into the store before the next, so every rule reads the records
    of the same instant, as promtool does. No alert fires; every objective's 5-minute ratio was recorded for both
    models (the chain of records was evaluated whole)."""
    from demo_replay import SKIP_INCIDENT_S, load, phase, rule_texts, segment, splice

    manifest, recording = load()
    step = recording["step"]
    healthy = phase(manifest, "healthy")
    seg = segment(recording, healthy["start"], healthy["end"])
    samples = len(next(iter(seg.values())))
    minutes = int(samples * step // 60)
    assert minutes >= 29
    # then, as a control that the replay can page at all, the recorded queueing on vLLM, its steady part repeated
    queueing = phase(manifest, "queueing on vLLM")
    steady = segment(recording, queueing["start"] + SKIP_INCIDENT_S, queueing["end"])
    series = splice([(seg, samples), (steady, int(QUEUEING_MINUTES * 60 // step))])
    t0 = time.time() // 3600 * 3600 - 3 * 3600  # within the store's retention, an hour clear of now
    batch = [
        (json.loads(labels), [(t0 + i * step, v) for i, v in enumerate(values) if v is not None])
        for labels, values in series.items()
    ]
    layers = _layers(rule_texts())
    with victoria_metrics(need("victoria-metrics"), tmp_path / "vm", *STORE_FLAGS) as vm:
        remote_write(vm, batch)
        force_flush(vm)
        for n, layer in enumerate(layers):
            folder = tmp_path / f"layer{n}"
            folder.mkdir()
            for name, text in layer.items():
                (folder / name).write_text(text)
            proc = subprocess.run(
                [
                    need("vmalert"),
                    f"-rule={folder}/*.yaml",
                    f"-datasource.url={vm}",
                    f"-remoteWrite.url={vm}",
                    f"-replay.timeFrom={_rfc3339(t0)}",
                    f"-replay.timeTo={_rfc3339(t0 + (minutes + QUEUEING_MINUTES) * 60)}",
                    "-replay.disableProgressBar",
                    "-replay.rulesDelay=0s",  # a layer's rules read none of each other's records
                ],
                capture_output=True,
                text=True,
                timeout=PATIENCE_S,
            )
            assert proc.returncode == 0, proc.stderr[-3000:]
            force_flush(vm)
        end = t0 + minutes * 60
        fired = _range(vm, 'ALERTS{alertstate="firing"}', minutes * 60 + 60, end + 1)
        ratios = _range(vm, "llm_slo:error_ratio:5m", minutes * 60 + 60, end + 1)
        paged = _range(
            vm, 'ALERTS{alertstate="firing", severity="critical"}', QUEUEING_MINUTES * 60, end + QUEUEING_MINUTES * 60
        )
    assert len(layers) >= 3
    assert not fired, [m for m, _ in fired]
    objectives = {(m["service"], m["slo"], m["model"]) for m, _ in ratios}
    for model in (VLLM_MODEL, SGLANG_MODEL):
        assert {(s, o) for s, o, m in objectives if m == model} >= {("llm", "responsive"), ("llm", "answered")}
    assert {(m["alertname"], m["slo"], m["model"]) for m, _ in paged} == {
        ("LLMErrorBudgetBurn", "responsive", VLLM_MODEL)
    }
