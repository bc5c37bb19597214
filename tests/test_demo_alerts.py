"""Issue 29's "done when", on the shipped rules: the demo's healthy models raise no alert, and each incident of the
demo's script raises the alert its runbook promises within the time the runbook (or `slo explain`) states.

The series are the demo's own, recorded once by `python tests/record_demo.py` (tests/fixtures/demo/soak.yaml says
what ran): 30 minutes of both models healthy, then each incident of the demo's script for 3 minutes, at one sample
every 15 s. They are replayed through `promtool test rules` with the rule files the demo loads, uncompressed
(tests/demo_replay.py): the healthy half as recorded; each incident after an hour of the healthy half, its steady
part (its first minute left out) repeated until past the promised time.
"""

from __future__ import annotations

import pytest
from conftest import need
from demo_replay import (
    SKIP_INCIDENT_S,
    error_ratio,
    firing,
    load,
    nothing_fired,
    page_detection_minutes,
    phase,
    replay,
    rule_texts,
    segment,
    splice,
)

from inferwatch.sim._demo import SCRIPT, SGLANG_MODEL, VLLM_MODEL

MANIFEST, RECORDING = load()
STEP = RECORDING["step"]
PER_MINUTE = round(60 / STEP)
HEALTHY = phase(MANIFEST, "healthy")
HEALTHY_SERIES = segment(RECORDING, HEALTHY["start"], HEALTHY["end"])  # from the stack's start, as it ran
HEALTHY_MINUTES = len(next(iter(HEALTHY_SERIES.values()))) // PER_MINUTE
BEFORE = 60  # minutes of healthy traffic before an incident: the page tiers' 1h window is clean


@pytest.mark.promtool
@pytest.mark.parametrize("rule_file", list(rule_texts()))
def test_the_healthy_demo_pages_nothing(rule_file):
    """Both demo models healthy for the recorded half hour, replayed from a fresh start as the demo runs: no page
    and no operational alert fires at any evaluation, and every SLI has its data (no LLMSLIDataMissing)."""
    need("promtool")
    assert HEALTHY_MINUTES >= 29
    series = splice([(HEALTHY_SERIES, HEALTHY_MINUTES * PER_MINUTE)])
    ok, output = replay(
        series,
        STEP,
        [
            nothing_fired(HEALTHY_MINUTES, 'severity="critical"'),
            nothing_fired(HEALTHY_MINUTES, 'alertname!="LLMErrorBudgetBurn"'),
        ],
        only=(rule_file,),
    )
    assert ok, output


@pytest.mark.promtool
def test_the_healthy_demo_raises_no_ticket():
    """The recorded half hour holds blips of front-door TTFT over 1 s (1-7 % of a model's requests in some 2-minute
    spells, from the loaded host it was recorded on) in its first minutes: a fresh deployment's tickets would read
    them as days of burn, but no tier fires before the SLI's data reaches back its history (slo/tiers.yaml)."""
    need("promtool")
    series = splice([(HEALTHY_SERIES, HEALTHY_MINUTES * PER_MINUTE)])
    ok, output = replay(
        series,
        STEP,
        [nothing_fired(HEALTHY_MINUTES)],
        only=("llm-frontdoor.responsive.rules.yaml", "llm.responsive.rules.yaml"),
    )
    assert ok, output


def _slo(spec_file: str, objective: str):
    from inferwatch.build import SLO_DIR
    from inferwatch.slo import load_spec

    spec = load_spec(SLO_DIR / spec_file)
    return spec, next(o for o in spec.objectives if o.name == objective)


def _page(spec_file: str, service: str, objective: str, model: str):
    """The page of an SLO objective for a model, and its rule file."""
    return (
        {
            "alertname": "LLMErrorBudgetBurn",
            "service": service,
            "slo": objective,
            "model": model,
            "severity": "critical",
        },
        f"{service}.{objective}.rules.yaml",
        (spec_file, objective),
    )


# incident -> the alerts it promises: (labels, rule file, minutes from the incident's start the runbook states,
# or the SLO (spec file, objective) whose `slo explain` detection time applies)
PROMISES = {
    "queueing on vLLM": [
        # RUNBOOKS.md LLMQueueSaturated: "about 10 minutes after requests start queueing at full capacity"
        ({"alertname": "LLMQueueSaturated", "model": VLLM_MODEL}, "operational.rules.yaml", 10),
        _page("defaults.yaml", "llm", "responsive", VLLM_MODEL),
    ],
    "GPU stall on vLLM": [
        # RUNBOOKS.md LLMGPUBusyNotComputing: "15 minutes after the 10-minute means pass the upper bar", which they
        # do at the latest once the 10 minutes are all stalled
        ({"alertname": "LLMGPUBusyNotComputing", "pod": "vllm-0"}, "operational.rules.yaml", 10 + 15)
    ],
    "thinking on SGLang": [_page("defaults-frontdoor.yaml", "llm-frontdoor", "responsive", SGLANG_MODEL)],
    "broken tools on vLLM": [
        # RUNBOOKS.md LLMToolCallsInvalid: "tested, 16 minutes after a surge to 10% starts"; the demo's is stronger
        ({"alertname": "LLMToolCallsInvalid", "model": VLLM_MODEL}, "operational.rules.yaml", 16),
        _page("defaults-frontdoor.yaml", "llm-frontdoor", "answered", VLLM_MODEL),
    ],
}
CASES = [
    (incident, alert, rule_file, when) for incident, promises in PROMISES.items() for alert, rule_file, when in promises
]


def test_every_incident_of_the_demos_script_is_covered():
    """Each incident the demo plays (its script, less the healthy opening) has its promised alerts tested here,
    but truncation on SGLang, which promises no alert: a stop at the length limit counts as answered (issue 29
    §1), so the demo expects no page for it (EXPECTED_FULL), and SGLang reports no finish reason for
    LLMLengthStopsRising. Nothing fired for qwen3-8b's answers in the recording."""
    incidents = [p.name for p in SCRIPT if set(p.scenarios.values()) != {"normal"}]
    assert set(PROMISES) | {"truncation on SGLang"} == set(incidents)
    assert [p["phase"] for p in MANIFEST["phases"]] == ["healthy", *incidents]


@pytest.mark.promtool
@pytest.mark.parametrize(
    "incident, alert, rule_file, when",
    CASES,
    ids=[f"{c[0]}: {c[1]['alertname']} {c[1].get('slo', '')}".strip() for c in CASES],
)
def test_each_incident_raises_the_promised_alert_in_time(incident, alert, rule_file, when):
    need("promtool")
    played = phase(MANIFEST, incident)
    steady = segment(RECORDING, played["start"] + SKIP_INCIDENT_S, played["end"])
    group = {"model": alert["model"]} if "model" in alert else {}
    if isinstance(when, tuple):  # an SLO page: slo explain's detection at the incident's error ratio
        spec, objective = _slo(*when)
        ratio = error_ratio(spec, objective, steady, group)
        when = page_detection_minutes(spec, objective, ratio)
        assert when, f"{incident}: an error ratio of {ratio:.3g} pages on no tier"
    series = splice([(HEALTHY_SERIES, BEFORE * PER_MINUTE), (steady, (when + 1) * PER_MINUTE)])
    ok, output = replay(
        series,
        STEP,
        [firing(alert, BEFORE, BEFORE, fired=False), firing(alert, when, BEFORE + when, fired=True)],
        only=(rule_file,),
    )
    assert ok, f"{incident}: {alert} within {when} minutes\n{output}"
