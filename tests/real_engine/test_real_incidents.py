"""Real incidents on real vLLM engines: the alert the runbook promises fires, healthy load fires nothing, and
triage names the kind.

A real Prometheus evaluates the compiled SLO rules (alerts/llm.*.rules.yaml) and the operational alerts
(alerts/operational.rules.yaml) while a bounded load drives the engine through phases: first healthy (triage's
baseline, in which nothing may fire), then the incidents. One Prometheus scrapes the shared engine through the
normalizing exporter (which adds the configured cap, `llm_max_running_requests`, that LLMQueueSaturated reads)
through one run of phases: healthy, over-long prompts beside it, short prompts, prompts sharing a long prefix,
long prompts sharing none (long-prompts against the short ones, prefix-cache-loss against the shared ones), then
queueing and admission rejections, last as their alert outlasts them. Then another scrapes the pressure engine
(few KV blocks) directly with the generated relabel configs and mapping rules: healthy, then KV pressure.

The load is sized to the engine, not to a clock: closed-loop clients, each sending its next request when its last
was answered, so "more clients than --max-num-seqs" keeps the same queue on a fast machine and a busy one, and the
engine's /metrics stays quick enough for a scrape (an open-loop rate that a slow machine cannot serve grows the
queue without bound, and the scrapes time out).

Time is compressed by FACTOR (the demo's): every window, subquery, offset and `for:` of the operational alerts
is divided by it (promtools.compress_durations), so their detection times scale back by FACTOR. The SLO rules
evaluate every second with `for:` divided by it (test_dashboards_data.fast_slo_rules) but keep their burn-rate
windows, whose per-minute recordings count events per minute; in a fresh Prometheus the long window holds only
this Prometheus' own minutes, so a burn alert's time here is a lower bound, reported unscaled. The table of
detection times is printed when the module ends (and kept in the README's real-engine section).

Waits are on conditions (an alert firing, a series present) with a generous PATIENCE; the fixed lengths are
those of the load phases (a baseline, an observation in which nothing may fire), never an assertion on speed.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, need
from engines import PRESSURE_FLAGS, SHARED_FLAGS, engine_url, pressure_url  # noqa: F401 - the fixtures
from harness import MODEL_NAME, free_port
from promtools import compress_durations, prometheus, wait_for
from promtools import query as _query
from test_dashboards_data import fast_slo_rules

from inferwatch.sim._demo import FOR_SCALE
from inferwatch.triage import Connection, Window, triage

# in .ci/run's real-engine step (README, "A real vLLM in the loop")
pytestmark = [pytest.mark.real_engine]

FACTOR = FOR_SCALE  # the demo's compression: ten minutes of alerting in one
PATIENCE = 300  # seconds of real time for any condition: a deadline, never a measure of speed
SCRAPE_S = 3  # seconds between scrapes: 10 samples in the shortest compressed window (5m / FACTOR); the
# exporter's fetch of the engine's /metrics took 10-20 ms in every phase, queueing and admission included, once
# the engine ran niced in the test's own session (sim/_real_vllm.py, ENGINE_NICE), and a failed scrape is what
# LLMEngineTargetDown counts
SCRAPE = f"{SCRAPE_S}s"
EXPORTER_TIMEOUT = "2.5s"  # the exporter's fetch from the engine, inside the scrape's
# Every judged window is longer than triage's rate window (four scrapes, 12 s here) by several steps: triage reads
# a rate only where its window lies inside the phase, so a 15 s phase at 5 s scrapes gave it one step, and it named
# 630-token prompts against as long ones "long-prompts"
BASELINE_S = 25  # healthy load before each incident: triage's baseline, and nothing may fire in it
QUIET_S = 30  # how long "nothing fires" is watched: 5 compressed minutes, the longest `for:` that
# can have data here (the GPU and speculative-decoding alerts have none)
MIN_INCIDENT_S = 25  # an incident runs at least this long, so triage has events to compare
# A phase's window for triage opens a scrape after its load began (and runs its `hold` from there): the first
# scrape after a change still counts what the phase before finished since the last one, and triage reads the
# window from the last sample before it opens (the queueing phase, opened at once, read ~35 of the 630-token
# prompts before it and prompts up 1.4x, and triage put long-prompts first)
SETTLE_S = SCRAPE_S + 1
MIN_ANSWERS = 20  # and each phase until its clients had this many answers: triage's least events (10-20), on a
# fast machine and a busy one alike (a fixed length held a busy machine's phase to a handful of long answers)
ANSWER_TOKENS = 400  # a healthy or queueing request's answer: long beside a client's turnaround (below)
WORDS = "the request queue alert fires when engine cache model token prefix".split()
REPORT: dict[str, Outcome] = {}
# a folder: each judged incident is also written there as a recording of triage's library (_record)
RECORD_TO = os.environ.get("INFERWATCH_RECORD_REAL")


# --- load -------------------------------------------------------------------------------------------------


def _prompt(rnd: random.Random, words: int, prefix: str = "") -> str:
    return prefix + " ".join(rnd.choice(WORDS) for _ in range(words))


@dataclass
class Clients:
    """`n` clients, each sending one request after another until stopped (or PATIENCE), `body(rnd)` the request.
    A refused request (503) waits `backoff` seconds before the next, so a full queue is not a busy loop."""

    url: str
    n: int
    body: object
    backoff: float = 0.5
    statuses: list = field(default_factory=list)

    def __post_init__(self):
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._client, args=(i,), daemon=True) for i in range(self.n)]

    def _client(self, i: int) -> None:
        rnd, deadline = random.Random(i), time.monotonic() + PATIENCE
        while not self._stop.is_set() and time.monotonic() < deadline:
            request = urllib.request.Request(
                self.url + "/v1/completions",
                headers={"Content-Type": "application/json"},
                data=json.dumps({"model": MODEL_NAME, **self.body(rnd)}).encode(),
            )
            try:
                with urllib.request.urlopen(request, timeout=PATIENCE) as response:
                    response.read()
                    status = response.status
            except urllib.error.HTTPError as err:
                status = err.code
            except OSError:
                status = None
            self.statuses.append(status)
            if status != 200:
                self._stop.wait(self.backoff)

    def __enter__(self) -> Clients:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(PATIENCE)


def chats(
    url: str, n: int = 1, words: int = 40, max_tokens: int = ANSWER_TOKENS, prefix: str = "", backoff: float = 0.5
) -> Clients:
    """`n` clients of one request shape; one client never fills the engine's cap: healthy load. An incident of
    more clients keeps the shape, so only what the incident changes changes (triage compares the two).

    The answers are long beside the time between a client's answer and its next request reaching the engine (its
    turnaround: the API server parses, tokenizes, answers): with answers of 96 tokens, at load 30-45 that
    turnaround was as long as an answer, the four clients of the queueing phase left the engine idle in a third
    of the scrapes, the queue averaged 0.7 and LLMQueueSaturated (a mean of one waiting) never fired."""
    return Clients(
        url,
        n,
        lambda rnd: {"prompt": _prompt(rnd, words, prefix), "max_tokens": max_tokens, "ignore_eos": True},
        backoff,
    )


def healthy(url: str) -> Clients:
    return chats(url)


# --- incidents, measured ------------------------------------------------------------------------------------


@dataclass
class Phase:
    """One stretch of load: `clients` run until every `promised` alert fires, its window (SETTLE_S after the load
    began) is `hold` seconds long and they had `min_answers` answers (or PATIENCE); `facts` are PromQL read at its
    end over the whole phase (`$W` its length)."""

    name: str
    clients: list
    promised: tuple[str, ...] = ()
    hold: float = MIN_INCIDENT_S
    facts: dict[str, str] = field(default_factory=dict)
    min_answers: int = MIN_ANSWERS  # and until its clients had this many answers (HTTP 200)


@dataclass
class Outcome:
    """What one phase gave: when each alert first fired (seconds after the phase began, real time; 0 for one
    already firing), what fired during the phase it is judged against, triage's kinds (most likely first), and
    the facts the skips quote."""

    incident: str
    fired: dict[str, float] = field(default_factory=dict)  # from the load's start
    fired_during: list[str] = field(default_factory=list)
    baseline: Outcome | None = None  # the phase it is judged against
    kinds: list[str] = field(default_factory=list)
    triage_notes: list[str] = field(default_factory=list)  # not enough data, signals with too few events
    facts: dict[str, float] = field(default_factory=dict)
    presence: float | None = None  # triage's share of the incident's steps with the engine's series (engine_series)
    statuses: dict = field(default_factory=dict)
    window: tuple[float, float] = (0.0, 0.0)  # triage's: from SETTLE_S after the load began to its end


def query(prom: str, expr: str) -> list[dict]:
    """promtools.query, asked again while Prometheus does not answer within its 10 s (PATIENCE in all): at load 40
    here one poll of ALERTS timed out and failed every incident of the run."""
    deadline = time.monotonic() + PATIENCE
    while True:
        try:
            return _query(prom, expr)
        except OSError:
            if time.monotonic() > deadline:
                raise


def _alert_name(labels: dict) -> str:
    return labels["alertname"] + (f"{{slo={labels['slo']},tier={labels['tier']}}}" if "tier" in labels else "")


def _firing(prom: str) -> set[str]:
    return {_alert_name(r["metric"]) for r in query(prom, 'ALERTS{alertstate="firing"}')}


def _fired_over(prom: str, seconds: float) -> list[str]:
    return sorted(
        {
            _alert_name(r["metric"])
            for r in query(prom, f'max_over_time(ALERTS{{alertstate="firing"}}[{max(1, round(seconds))}s])')
        }
    )


def _value(prom: str, expr: str) -> float | None:
    result = query(prom, expr)
    return float(result[0]["value"][1]) if result else None


class Stack:
    """A fresh Prometheus with the compressed rules, scraping `scrape` (a scrape config), for one run of phases;
    `extra` rule files load as they are."""

    def __init__(self, workdir: Path, scrape: dict, extra: tuple[Path, ...] = ()):
        self.workdir = workdir
        rules = fast_slo_rules(workdir)
        operational = workdir / "operational.rules.yaml"
        operational.write_text(compress_durations((ROOT / "alerts" / "operational.rules.yaml").read_text(), FACTOR))
        self.config = {
            "global": {"scrape_interval": SCRAPE, "scrape_timeout": SCRAPE, "evaluation_interval": "1s"},
            "rule_files": [*rules, str(operational), *map(str, extra)],
            "scrape_configs": [scrape],
        }

    def run(self, phases: list[Phase], judge: dict[str, tuple[str, str]]) -> dict[str, Outcome]:
        """The phases one after another; then each incident of `judge` ({incident: (phase, baseline phase)}) is
        its phase's outcome, with what fired during its baseline and triage over the two windows."""
        done: dict[str, Outcome] = {}
        with prometheus(need("prometheus"), self.config, self.workdir) as prom:
            wait_for(lambda: query(prom, f'llm_slo:total:increase1m{{model="{MODEL_NAME}"}}'), timeout=PATIENCE, step=1)
            for phase in phases:
                done[phase.name] = self._phase(prom, phase)
            for incident, (name, against) in judge.items():
                outcome, base = replace(done[name], incident=incident), done[against]
                outcome.baseline = base
                report = triage(
                    Connection(prom),
                    Window(*outcome.window),
                    "{:.0f}/{:.0f}".format(*base.window),
                    models=(MODEL_NAME,),
                )
                outcome.kinds = [f.kind for v in report.verdicts for f in v.findings]
                present = [v.incident["engine_series"].value for v in report.verdicts if "engine_series" in v.incident]
                outcome.presence = present[0] if present else None
                outcome.triage_notes = [
                    note
                    for v in report.verdicts
                    for note in (v.not_enough_data, *(f"too few: {s}" for s in v.too_few))
                    if note
                ]
                done[incident] = REPORT[incident] = outcome
                if RECORD_TO:
                    _record(prom, outcome, Path(RECORD_TO) / incident)
        return done

    @staticmethod
    def _phase(prom: str, phase: Phase) -> Outcome:
        outcome = Outcome(phase.name)
        with ExitStack() as load:
            t0 = time.time()
            for clients in phase.clients:
                load.enter_context(clients)
            while time.time() - t0 < PATIENCE:
                now = time.time()
                for alert in _firing(prom) - set(outcome.fired):
                    outcome.fired[alert] = now - t0
                answered = sum(c.statuses.count(200) for c in phase.clients)
                promised = all(any(f.startswith(p) for f in outcome.fired) for p in phase.promised)
                if promised and now - t0 >= SETTLE_S + phase.hold and answered >= phase.min_answers:
                    break
                time.sleep(1)  # polling Prometheus; `hold` is a load phase's length, not an assertion
            t1 = time.time()
            outcome.window = (t0 + SETTLE_S, t1)
            outcome.fired_during = _fired_over(prom, t1 - t0)
            for key, expr in phase.facts.items():
                seconds = max(1, round(t1 - t0))
                outcome.facts[key] = _value(prom, expr.replace("$W", f"{seconds}s").replace("$S", str(seconds)))
        statuses = phase.clients[-1].statuses  # the phase's own clients are the last
        outcome.statuses = {s: statuses.count(s) for s in set(statuses)}
        return outcome


def _record(prom: str, outcome: Outcome, out: Path) -> None:
    """The incident as a recording of the triage library (tests/fixtures/triage/real-vllm/): every series of this
    Prometheus from a minute before the earlier of its two windows to the incident's end, and a manifest naming
    the kind triage must put first (EXPECTED_KIND) over the same two windows. tests/test_triage_recorded.py then
    judges it in the fast suite, on a Prometheus that replays it."""
    from record_triage import export, write  # the simulator's recorder: the same format, the same replay

    base = outcome.baseline
    assert base is not None
    start, end = min(base.window[0], outcome.window[0]) - 60, outcome.window[1] + 1
    manifest = {
        "recording": "recording.json.gz",
        "step": SCRAPE_S,
        "start": round(start),
        "end": round(end),
        "baseline": {"start": round(base.window[0]), "end": round(base.window[1])},
        "incident": {"start": round(outcome.window[0]), "end": round(outcome.window[1])},
        "models": {MODEL_NAME: EXPECTED_KIND[outcome.incident]},
        "ran": {
            "recorder": "tests/real_engine/test_real_incidents.py (INFERWATCH_RECORD_REAL)",
            "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "engine": "a real vLLM CPU build (tests/real_engine/harness.py) serving a tiny random Llama",
            "phase": outcome.incident,
            "against": base.incident,
            "fired": sorted(outcome.fired),
            "live_triage": outcome.kinds,
            "statuses": {str(k): v for k, v in sorted(outcome.statuses.items(), key=str)},
        },
    }
    write(out, export(prom, start, end), manifest, recorder="tests/real_engine/test_real_incidents.py")


def _exporter_stack(engine_url: str, workdir: Path, cap: int):  # noqa: F811 - a URL, not the fixture
    """The normalizing exporter in front of the engine, with its cap; yields (Stack, stop)."""
    port = free_port()
    exporter = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "inferwatch",
            "exporter",
            "normalize",
            "--listen",
            f"127.0.0.1:{port}",
            "--target",
            f"vllm={engine_url}/metrics",
            "--timeout",
            EXPORTER_TIMEOUT,
            "--max-running-requests",
            f"{MODEL_NAME}={cap}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=(workdir / "exporter.log").open("w"),
    )
    scrape = {"job_name": "inferwatch", "honor_labels": True, "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}
    return Stack(workdir, scrape), exporter


@pytest.fixture(scope="module")
def shared(request, engine_url, tmp_path_factory) -> dict[str, Outcome]:  # noqa: F811 - fixtures
    """Every incident of the shared engine (--max-num-seqs 2, --max-num-queued-reqs 4), run once: a run that
    fails fails each test that reads it, with the same error (pytest keeps a fixture's failure for its scope)."""
    if request.config.getoption("--engine-url"):
        pytest.skip(
            "relies on the shared engine's flags (" + " ".join(SHARED_FLAGS) + "); --engine-url names "
            "an engine started with its own"
        )
    cap = int(SHARED_FLAGS[SHARED_FLAGS.index("--max-num-seqs") + 1])
    workdir = tmp_path_factory.mktemp("shared")
    stack, exporter = _exporter_stack(engine_url, workdir, cap)
    try:
        return stack.run(_shared_phases(engine_url, cap), JUDGED)
    finally:
        exporter.terminate()
        exporter.wait(30)


# --- the incidents -----------------------------------------------------------------------------------------

PREFIX = " ".join(random.Random(7).choice(WORDS) for _ in range(600)) + " "
TTFT_FACTS = {
    "ttft_mean_s": f'sum(increase(llm_time_to_first_token_seconds_sum{{model="{MODEL_NAME}"}}[$W])) / '
    f'sum(increase(llm_time_to_first_token_seconds_count{{model="{MODEL_NAME}"}}[$W]))',
    "ttft_over_1s": f'1 - sum(increase(llm_time_to_first_token_seconds_bucket{{model="{MODEL_NAME}", le=~"1|1[.]0"}}'
    f'[$W])) / sum(increase(llm_time_to_first_token_seconds_count{{model="{MODEL_NAME}"}}[$W]))',
    "prompt_tokens": f'sum(increase(llm_request_prompt_tokens_sum{{model="{MODEL_NAME}"}}[$W])) / '
    f'sum(increase(llm_request_prompt_tokens_count{{model="{MODEL_NAME}"}}[$W]))',
}
REJECTED = f'sum(increase(llm_admission_rejections_total{{model="{MODEL_NAME}"}}[$W]))'
# The default SLOs a busy machine can burn under healthy load (slo/defaults.yaml): the histogram and threshold of
# their SLI, and their page_slow bar (5.6x the error budget, the lowest page). In a Prometheus minutes old a burn
# alert reads only those minutes, so a few late first tokens among a few dozen requests page, rightly: the share
# since it started (the [1h] covers it all) says whether the engine really was that slow.
SLO_BARS = {
    "responsive": ("llm_time_to_first_token_seconds", 1.0, 5.6 * 0.01),
    "fast-enough": ("llm_time_per_output_token_seconds", 0.1, 5.6 * 0.05),
}
SLOW_FACTS = {
    slo: f'1 - sum(increase({h}_bucket{{model="{MODEL_NAME}", le=~"{le:g}|{le:.1f}"}}[1h])) / '
    f'sum(increase({h}_count{{model="{MODEL_NAME}"}}[1h]))'
    for slo, (h, le, _) in SLO_BARS.items()
}
# the engine's samples Prometheus has over a phase (the series' samples in `$W`), and how many its scrapes would
# give: where a busy machine made the engine's /metrics miss scrapes, triage rightly names the gap
SCRAPED_FACTS = {
    "samples": f'count_over_time(llm_requests_running{{model="{MODEL_NAME}"}}[$W])',
    "scrapes": f"vector($S / {SCRAPE_S})",
}
# the kind triage must name first for each incident ("none": nothing wrong), as the tests below assert it live
EXPECTED_KIND = {
    "over-context": "none",
    "long-prompts": "long-prompts",
    "prefix-cache-loss": "prefix-cache-loss",
    "queueing": "queueing",
    "admission-rejections": "queueing",
    "kv-pressure": "kv-pressure",
}
# {incident: (its phase, the baseline phase triage compares it with)}
JUDGED = {
    "over-context": ("over-context", "healthy"),
    "long-prompts": ("no-prefix", "short"),
    "prefix-cache-loss": ("no-prefix", "shared-prefix"),
    "queueing": ("queueing", "healthy"),
    "admission-rejections": ("admission-rejections", "healthy"),
}


def _shared_phases(url: str, cap: int) -> list[Phase]:
    """The shared engine's phases, in order:
    - healthy: one client, never at the cap (nothing may fire), then the same beside one client sending prompts
      over --max-model-len (400 at once);
    - short prompts; then ~630-token prompts sharing a 600-word prefix (the prefix cache hits); then ~630-token
      prompts sharing nothing. Judged against the short ones they are long prompts; against the shared ones, the
      prefix cache's loss;
    - cap + 2 clients (two run, two wait) until LLMQueueSaturated fires; then cap + 8, more than vLLM admits under
      --max-num-queued-reqs 4 (it refuses at cap + 2 requests in flight): the rest get 503 at once, while the
      queue stays full. Last, since the queue alert outlasts its queue by design (hysteresis)."""
    over = Clients(url, 1, lambda rnd: {"prompt": _prompt(rnd, 3000), "max_tokens": 4}, backoff=1)
    return [
        Phase("healthy", [healthy(url)], hold=BASELINE_S, facts={**SLOW_FACTS, **SCRAPED_FACTS}),
        Phase("over-context", [healthy(url), over], hold=QUIET_S, facts={**SLOW_FACTS, **SCRAPED_FACTS}),
        Phase("short", [chats(url, words=40, max_tokens=16)], hold=BASELINE_S),
        Phase("shared-prefix", [chats(url, words=30, max_tokens=16, prefix=PREFIX)], hold=BASELINE_S),
        Phase("no-prefix", [chats(url, words=630, max_tokens=16)], facts={**TTFT_FACTS, **SCRAPED_FACTS}),
        Phase("queueing", [chats(url, cap + 2)], promised=("LLMQueueSaturated",), facts=SCRAPED_FACTS),
        Phase(
            "admission-rejections",
            # refused clients wait 2 s before trying again: at 0.5 s their 503s, 16 a second, kept the API server
            # so busy at load 40-50 that its /metrics missed scrapes and triage had too few samples to judge
            [chats(url, cap + 8, backoff=2.0)],
            promised=("LLMQueueSaturated",),
            facts={"rejected": REJECTED, **SCRAPED_FACTS},
            min_answers=2 * MIN_ANSWERS,  # its alert fires at once (the queueing's goes on): triage needs requests
        ),
    ]


def _slo_only(outcome: Outcome) -> None:
    """The runbook promises only the responsive SLO's burn alert for this kind: it must fire where the incident
    made first tokens late, and cannot where a prefill on the tiny CPU model stays far under the 1 s threshold."""
    late, mean = outcome.facts["ttft_over_1s"], outcome.facts["ttft_mean_s"]
    if late is not None and late > 0.1344:  # the responsive objective's page_fast bar (99 %, 13.44x)
        assert "LLMErrorBudgetBurn{slo=responsive,tier=page_fast}" in outcome.fired, (outcome.fired, late)
        return
    pytest.skip(
        f"{outcome.incident}: engine TTFT averaged {mean * 1000:.0f} ms over "
        f"{outcome.facts['prompt_tokens']:.0f}-token prompts, {late or 0:.0%} over 1 s: a prefill on the tiny "
        f"CPU model is too fast to burn the responsive SLO (page bar 13.4 % over 1 s), which is the only "
        f"alert the runbook promises for this kind; the burn alerts fire on a real Prometheus in "
        "tests/test_slo_fresh_deploy.py, where the simulated engine's requests are slow"
    )


def _pages(alerts) -> list[str]:
    """The alerts that page or that on-call acts on, leaving out the SLO ticket tiers: their 1-day and 3-day
    windows, in a Prometheus minutes old, hold only those minutes (the raw-counter fallback), so two requests
    over 1 s among the first 108 open one. The detection table lists them all."""
    return sorted(a for a in alerts if "tier=ticket_" not in a)


def _slow(*outcomes: Outcome) -> list[str]:
    """What paged in these healthy phases, each an SLO burn alert where the engine really was slow for that SLO
    (SLO_BARS: the machine, shared and busy, made a few clients' requests slow; the rule was right, the load was
    not healthy), or any page where the engine's scrapes were missed (_scrapes_missed: LLMEngineTargetDown and
    LLMSLIDataMissing are then right); any other page fails."""
    slow = []
    for outcome in outcomes:
        pages = _pages(outcome.fired_during)
        if pages and (why := _scrapes_missed(outcome)):
            slow.append(f"{', '.join(pages)} in {why}")
            continue
        for alert in pages:
            slo = alert.partition("slo=")[2].partition(",")[0]
            share = outcome.facts.get(slo) if alert.startswith("LLMErrorBudgetBurn") else None
            assert slo in SLO_BARS and share is not None and share >= SLO_BARS[slo][2], (
                outcome.incident,
                alert,
                outcome.facts,
            )
            slow.append(f"{alert} in {outcome.incident}: {share:.0%} of requests over {SLO_BARS[slo][1]:g} s")
    return slow


def _quiet(*outcomes: Outcome) -> None:
    """Nothing pages in these healthy phases; where the machine made them slow (_slow), skipped with the
    measured shares."""
    if slow := _slow(*outcomes):
        pytest.skip(
            "the machine made the healthy load slow or unscraped, and the alerts said so rightly: " + "; ".join(slow)
        )


def _scrapes_missed(outcome: Outcome) -> str | None:
    """Why the engine's own series cannot show this incident, where the machine made its /metrics miss scrapes:
    vLLM's API server answers /metrics on the cores it streams tokens on, and on a machine busy beside the test
    it can answer after the scrape's deadline. Then LLMEngineTargetDown is the alert that is right, and
    missing-data the kind. Missed is: under 90 % of the scrapes came, LLMEngineTargetDown fired, or triage's own
    measure of the engine's series (engine_series, the share of steps with a sample under 2.5 scrapes old) is
    under the 0.9 at which its missing-data kind holds: two scrapes missed in a row in a 30 s phase are a fifth
    of it."""
    samples, scrapes = outcome.facts.get("samples"), outcome.facts.get("scrapes")
    share = (samples or 0) / scrapes if scrapes else 1.0
    present = 1.0 if outcome.presence is None else outcome.presence
    if share < 0.9 or present < 0.9 or "LLMEngineTargetDown" in outcome.fired:
        return (
            f"{outcome.incident}: the engine's /metrics missed scrapes on this busy machine ({share:.0%} of them "
            f"came, series present in {present:.0%} of triage's steps; fired: "
            f"{', '.join(sorted(outcome.fired)) or 'nothing'}); the incident cannot be judged on them"
        )
    return None


def _judged(outcome: Outcome, ok: bool, *detail) -> None:
    """Assert `ok`, unless it failed where the engine's scrapes were missed (_scrapes_missed): then skipped with
    the measured share, as a busy machine's slow healthy load is (_quiet)."""
    if not ok and (why := _scrapes_missed(outcome)):
        pytest.skip(why)
    assert ok, detail


def test_healthy_load_fires_nothing(shared):
    """One client at a time (never at the cap) for BASELINE_S, then QUIET_S more beside over-long prompts that
    the engine refuses: 63 s or more here with each phase's settling, 10.5 compressed minutes, and no alert
    fires. (The KV engine's baseline is checked too, in its own test.)"""
    _quiet(shared["healthy"], shared["over-context"])


def test_prompts_over_the_context_limit_fire_nothing(shared):
    """A 400 over --max-model-len is the caller's mistake: no SLO counts it, no alert fires (5 compressed minutes
    of one over-long prompt for every few good requests)."""
    outcome = shared["over-context"]
    assert outcome.statuses.get(400, 0) >= 5 and set(outcome.statuses) == {400}, outcome.statuses
    _quiet(outcome)


def test_prompts_over_the_context_limit_are_no_kind_of_slow(shared):
    """No kind, or only missing-data where the engine's scrapes really had gaps (a machine at load 35 here made its
    /metrics miss a tenth of them; triage names that rightly, and it is not the over-long prompts' doing)."""
    outcome = shared["over-context"]
    if outcome.kinds == ["missing-data"]:  # skipped only where the scrapes really had gaps
        _judged(outcome, False, outcome.kinds, outcome.triage_notes, outcome.facts)
    assert outcome.kinds == [], (outcome.kinds, outcome.triage_notes, outcome.facts)


def test_queueing_fires_queue_saturated(shared):
    outcome = shared["queueing"]
    assert outcome.statuses.get(200, 0) >= 1, outcome.statuses
    _judged(outcome, "LLMQueueSaturated" in outcome.fired, outcome.fired, outcome.facts)


def test_triage_names_queueing(shared):
    outcome = shared["queueing"]
    _judged(outcome, outcome.kinds[:1] == ["queueing"], outcome.kinds, outcome.triage_notes)


def test_admission_rejections_keep_queue_saturated_firing(shared):
    """More clients than vLLM admits: the rest are refused with 503 at once and counted
    (llm_admission_rejections_total); the queue is full at the cap, which LLMQueueSaturated promises (it fired
    in the queueing before, and goes on). No SLO counts a refusal at the engine: see the README."""
    outcome = shared["admission-rejections"]
    assert outcome.statuses.get(503, 0) >= 1 and outcome.statuses.get(200, 0) >= 1, outcome.statuses
    _judged(outcome, bool(outcome.facts["rejected"]) and outcome.facts["rejected"] > 0, outcome.facts)
    _judged(outcome, "LLMQueueSaturated" in outcome.fired, outcome.fired, outcome.facts)


def test_triage_names_admission_rejections_queueing(shared):
    outcome = shared["admission-rejections"]
    _judged(outcome, outcome.kinds[:1] == ["queueing"], outcome.kinds, outcome.triage_notes, outcome.facts)


def test_prefix_cache_loss_alerts_as_the_runbook_promises(shared):
    _slo_only(shared["prefix-cache-loss"])


def test_triage_names_prefix_cache_loss(shared):
    outcome = shared["prefix-cache-loss"]
    _judged(outcome, outcome.kinds[:1] == ["prefix-cache-loss"], outcome.kinds, outcome.triage_notes)


def test_long_prompts_alert_as_the_runbook_promises(shared):
    _slo_only(shared["long-prompts"])


def test_triage_names_long_prompts(shared):
    outcome = shared["long-prompts"]
    _judged(outcome, outcome.kinds[:1] == ["long-prompts"], outcome.kinds, outcome.triage_notes)


# --- KV pressure: an engine of its own, scraped directly with the relabel rules ------------------------------


def _kv_pressure(url: str, workdir: Path) -> Outcome:
    # the relabel configs and, as the README says, the recording rules beside them (for what a rename cannot do:
    # request_success_total feeds both llm_requests_finished_total and llm_requests_aborted_total)
    generated = ROOT / "mappings" / "generated"
    relabel = yaml.safe_load((generated / "metric-relabel-configs.yaml").read_text())
    scrape = {"job_name": "vllm", "static_configs": [{"targets": [url.removeprefix("http://")]}], **relabel}
    # 40-token prompts and 250-token answers: one request holds up to 3 of the 9 blocks, so two clients run
    # side by side and four (the running cap) run out of blocks and preempt each other; the baseline is longer
    # than the others' so that triage has as many of these longer requests to compare
    body = dict(words=40, max_tokens=250)
    phases = [
        Phase("healthy", [chats(url, 2, **body)], hold=2 * BASELINE_S, facts={**SLOW_FACTS, **SCRAPED_FACTS}),
        Phase(
            "kv-pressure",
            [chats(url, 4, **body)],
            promised=("LLMPreemptionStorm",),
            facts={
                "preemptions": f'sum(increase(llm_preemptions_total{{model="{MODEL_NAME}"}}[$W]))',
                **SCRAPED_FACTS,
            },
        ),
    ]
    stack = Stack(workdir, scrape, (generated / "inferwatch-mappings.rules.yaml",))
    return stack.run(phases, {"kv-pressure": ("kv-pressure", "healthy")})["kv-pressure"]


@pytest.fixture(scope="module")
def kv_pressure(pressure_url, tmp_path_factory):  # noqa: F811 - the fixture
    """The KV-pressure incident on the session's pressure engine, after the shared engine's incidents: run beside
    them, the two engines' load on the two cores made its phases unlike each other (a baseline slower than its
    incident, and triage named nothing)."""
    return _kv_pressure(pressure_url, tmp_path_factory.mktemp("kv-pressure"))


def test_kv_pressure_fires_preemption_storm(kv_pressure):
    _slow(kv_pressure.baseline)  # explained pages only; the incident is judged whatever its baseline
    assert kv_pressure.facts["preemptions"] and kv_pressure.facts["preemptions"] > 0, kv_pressure.facts
    _judged(kv_pressure, "LLMPreemptionStorm" in kv_pressure.fired, kv_pressure.fired, kv_pressure.facts)


def test_triage_names_kv_pressure(kv_pressure):
    _judged(kv_pressure, kv_pressure.kinds[:1] == ["kv-pressure"], kv_pressure.kinds, kv_pressure.triage_notes)


# --- the table ---------------------------------------------------------------------------------------------


def detection_table(outcomes: dict[str, Outcome]) -> list[str]:
    """One line per incident and alert: seconds from the incident's start to firing, here and scaled back."""
    lines = [
        f"detection times (time compressed {FACTOR}x for the operational alerts; SLO burn alerts unscaled, "
        "their windows uncompressed):",
        f"  {'incident':<22} {'alert':<58} {'here':>7} {'scaled':>9}  triage",
    ]
    for outcome in outcomes.values():
        kinds = ", ".join(outcome.kinds) or "nothing"
        for alert, seconds in sorted(outcome.fired.items(), key=lambda kv: kv[1]) or [("(none fired)", None)]:
            scale = 1 if alert.startswith(("LLMErrorBudgetBurn", "LLMSLIDataMissing")) else FACTOR
            here = "" if seconds is None else f"{seconds:.0f} s"
            scaled = "" if seconds is None else f"{seconds * scale / 60:.1f} min"
            lines.append(f"  {outcome.incident:<22} {alert:<58} {here:>7} {scaled:>9}  {kinds}")
    return lines


@pytest.fixture(scope="module", autouse=True)
def _print_detection_times(request, tmp_path_factory):
    """The table, printed and written to detection-times.txt in pytest's base temporary folder (its path printed
    under it), to compare runs or machines."""
    yield
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if REPORT:
        lines = detection_table(REPORT)
        saved = tmp_path_factory.getbasetemp() / "detection-times.txt"
        saved.write_text("\n".join(lines) + "\n")
        lines.append(f"  (written to {saved})")
    if REPORT and reporter and capture:
        with capture.global_and_fixture_disabled():  # past -q and the capture, as -ra's lines are
            reporter.write("\n")
            for line in lines:
                reporter.write_line(line)
