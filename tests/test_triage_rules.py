"""The triage rule engine as pure functions: conditions, scores, kinds, the window summaries on small pandas
frames, times, rules files and the JSON shape. No Prometheus here (tests/test_triage_prometheus.py has one)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from inferwatch.errors import InferwatchError, SpecError
from inferwatch.triage import (
    Connection,
    Evidence,
    Finding,
    Reading,
    Report,
    Verdict,
    Window,
    baseline_choices,
    bucket_quantile,
    choose_step,
    headline,
    incident_window,
    judge,
    load_kinds,
    load_signals,
    parse_condition,
    parse_kinds,
    parse_time,
    rate_window,
    score,
    signal_queries,
    summarise,
    to_json,
)

SIGNALS = load_signals()
NAMES = [s.name for s in SIGNALS]
FLOORS = {s.name: s.floor for s in SIGNALS}
KINDS = load_kinds()
KIND_NAMES = [
    "queueing",
    "long-prompts",
    "prefix-cache-loss",
    "kv-pressure",
    "slow-decode",
    "spec-decode-collapse",
    "thinking",
    "long-outputs",
    "gpu-not-computing",
    "errors",
    "not-the-engine",
    "missing-data",
]


def test_the_twelve_kinds_by_their_exact_names():
    assert list(KINDS) == KIND_NAMES
    for kind in KINDS.values():
        assert kind.summary and kind.next and kind.clauses and any(c.need for c in kind.clauses)


def test_public_names_are_exported():
    from test_exported_members import test_all_matches_public_names

    test_all_matches_public_names("inferwatch.triage")


def test_signals_use_only_the_common_vocabulary_and_one_query_per_signal():
    import re

    from inferwatch.mappings import load_catalog

    vocabulary = set(load_catalog().metrics)
    for signal in SIGNALS:
        for promql in signal_queries(signal, ["a", "b"], "60s").values():
            assert 'model=~"a|b"' in promql and "$" not in promql, (signal.name, promql)
            for name in re.findall(r"\b((?:llm|gpu)_[a-z_]+)\b", promql):
                base = re.sub(r"_(sum|count|bucket)$", "", name)
                assert name in vocabulary or base in vocabulary or name.startswith("llm_frontdoor_"), name
            assert re.search(r"\b(sum|max|avg|count) by \(model", promql), promql
            if "gpu_" in promql:
                assert "on (cluster, namespace, pod) group_left (model)" in promql
                assert "on (namespace, pod) group_left (model, cluster)" in promql  # GPUs without cluster


@pytest.mark.parametrize(
    "text, op, value",
    [
        ("ttft_mean up >= 1.5x", "up", 1.5),
        ("sm_active down >= 2x", "down", 2.0),
        ("tpot_mean flat within 20%", "flat", 0.2),
        ("length_share rise >= 0.05", "rise", 0.05),
        ("prefix_hit_ratio fall >= .15", "fall", 0.15),
        ("kv_usage incident >= 0.9", "incident>=", 0.9),
        ("preemptions_per_request incident <= 0.02", "incident<=", 0.02),
        ("waiting baseline <= 1", "baseline<=", 1.0),
        ("ttft_mean missing", "missing", 0.0),
        ("* missing", "missing", 0.0),
    ],
)
def test_conditions_parse(text, op, value):
    cond = parse_condition(text, NAMES)
    assert (cond.op, cond.value) == (op, value)


@pytest.mark.parametrize(
    "text, message",
    [
        ("ttft up >= 1.5x", "unknown signal 'ttft'"),
        ("ttft_meen up >= 2x", "did you mean 'ttft_mean'"),
        ("ttft_mean up 1.5x", "is not a condition"),
        ("ttft_mean sideways", "is not a condition"),
        ("* up >= 2x", "only takes `missing`"),
    ],
)
def test_bad_conditions_say_what_is_wrong(text, message):
    with pytest.raises(ValueError, match=message):
        parse_condition(text, NAMES)


def _r(value):
    return Reading(value)


@pytest.mark.parametrize(
    "cond, base, inc, expected",
    [
        ("ttft_mean up >= 2x", 1.0, 2.0, 1.0),
        ("ttft_mean up >= 2x", 1.0, 1.0, 0.0),
        ("ttft_mean up >= 2x", 1.0, math.sqrt(2), 0.0),
        ("ttft_mean up >= 2x", 1.0, 2**0.75, 0.5),
        ("ttft_mean up >= 2x", 0.001, 0.003, 0.0),  # both under the 50 ms floor: noise, not a tripling
        ("sm_active down >= 2x", 0.6, 0.3, 1.0),
        ("tpot_mean flat within 20%", 0.03, 0.033, 1.0),
        ("tpot_mean flat within 20%", 0.03, 0.06, 0.0),
        ("length_share rise >= 0.1", 0.0, 0.05, 0.0),
        ("length_share rise >= 0.1", 0.0, 0.075, 0.5),
        ("kv_usage incident >= 0.9", 0.2, 0.95, 1.0),
        ("kv_usage incident >= 0.9", 0.2, 0.81, 0.0),
        ("engine_series incident <= 0.9", 1.0, 1.0, 0.0),
        ("engine_series incident <= 0.9", 1.0, 0.5, 1.0),
    ],
)
def test_scores_ramp_to_the_threshold(cond, base, inc, expected):
    c = parse_condition(cond, NAMES)
    assert score(c, _r(base), _r(inc), FLOORS[c.signal]) == pytest.approx(expected, abs=1e-9)


def test_a_value_missing_in_a_window_cannot_be_judged():
    c = parse_condition("ttft_mean up >= 2x", NAMES)
    assert score(c, Reading(None, "few"), _r(1.0)) is None
    gone = parse_condition("ttft_mean missing", NAMES)
    assert score(gone, _r(1.0), Reading(None, "absent")) == 1.0
    assert score(gone, Reading(None, "absent"), Reading(None, "absent")) is None


NORMAL = {
    "running": 6,
    "waiting": 0,
    "cap_usage": 0.2,
    "queue_time_mean": 0.01,
    "request_rate": 2,
    "ttft_mean": 0.25,
    "tpot_mean": 0.03,
    "itl_mean": 0.03,
    "e2e_mean": 4,
    "prompt_tokens_per_request": 600,
    "output_tokens_per_request": 120,
    "kv_usage": 0.4,
    "prefix_hit_ratio": 0.5,
    "preemptions_per_request": 0,
    "spec_acceptance": 0.7,
    "engine_error_share": 0,
    "length_share": 0.02,
    "engine_series": 1.0,
    "queue_share": 0.003,
    "kv_usage_peak": 0.5,
}


def readings(**changes) -> dict[str, Reading]:
    return {name: Reading(float(value)) for name, value in {**NORMAL, **changes}.items()}


def kinds_of(base, inc) -> list[str]:
    return [f.kind for f in judge(KINDS, base, inc, FLOORS)]


def test_nothing_wrong_is_an_empty_list():
    assert kinds_of(readings(), readings()) == []
    # a harmless doubling: twice the traffic and batch, a little slower per token
    assert (
        kinds_of(
            readings(),
            readings(running=12, request_rate=4, tpot_mean=0.034, itl_mean=0.034, e2e_mean=4.4, kv_usage=0.55),
        )
        == []
    )


def test_queueing():
    found = judge(
        KINDS,
        readings(),
        readings(waiting=8, queue_time_mean=1.5, ttft_mean=1.8, cap_usage=1.0, queue_share=0.3, e2e_mean=5.5),
        FLOORS,
    )
    assert [f.kind for f in found] == ["queueing"] and found[0].confidence == 1.0
    signals = {e.signal for e in found[0].evidence}
    assert {"waiting", "ttft_mean", "queue_time_mean", "tpot_mean"} <= signals


def test_kv_pressure_explains_the_queueing_it_brings_and_ranks_first():
    found = judge(
        KINDS,
        readings(),
        readings(
            kv_usage_peak=0.97,
            preemptions_per_request=0.3,
            waiting=4,
            queue_time_mean=0.5,
            ttft_mean=0.6,
            tpot_mean=0.04,
            e2e_mean=6,
        ),
        FLOORS,
    )
    assert [f.kind for f in found][:2] == ["kv-pressure", "queueing"]
    assert found[0].explains == ("queueing",) and found[1].explained_by == ("kv-pressure",)
    assert found[1].confidence <= 0.9 * found[0].confidence


def test_where_the_time_goes_ranks_slow_decode_against_the_queue_it_causes():
    # slower steps at a cap: requests queue; most of their time spent waiting makes it queueing first
    queued = readings(
        tpot_mean=0.18,
        itl_mean=0.18,
        waiting=13,
        queue_time_mean=12,
        ttft_mean=12.5,
        cap_usage=0.95,
        queue_share=0.6,
        e2e_mean=20,
    )
    assert kinds_of(readings(), queued) == ["queueing", "slow-decode"]
    # the same slowdown below the cap: the time goes to decoding
    decoding = readings(
        tpot_mean=0.15, itl_mean=0.15, waiting=0.1, queue_time_mean=0.06, ttft_mean=0.2, queue_share=0.01, e2e_mean=18
    )
    assert kinds_of(readings(), decoding) == ["slow-decode"]


def test_states_bad_in_themselves_name_a_kind_when_the_baseline_was_no_better():
    """At the cap with requests waiting, or the KV cache full while they wait: a kind even when the baseline
    already held the incident, or there is none (a deployment younger than any baseline); ranked at ALONE_CAP."""
    from inferwatch.triage._judge import ALONE_CAP

    queue = readings(waiting=12, queue_share=0.7, cap_usage=0.975, queue_time_mean=8, ttft_mean=11, e2e_mean=15)
    for base in (queue, {}):
        found = judge(KINDS, base, queue, FLOORS)
        assert [f.kind for f in found] == ["queueing"] and found[0].confidence == ALONE_CAP
        assert {e.signal for e in found[0].evidence} >= {"waiting", "queue_share", "cap_usage"}
    full = readings(kv_full_share=0.95, kv_usage=0.97, waiting=5, queue_share=0.4, preemptions_per_request=0.1)
    assert kinds_of(full, full)[:2] == ["kv-pressure", "queueing"]
    # an SLO page firing stands in for the cap where the engine exports none
    paged = {k: v for k, v in queue.items() if k != "cap_usage"}
    assert judge(KINDS, paged, {**paged, "paging": Reading(1.0)}, FLOORS)[0].confidence == ALONE_CAP
    assert judge(KINDS, paged, {**paged, "paging": Reading(0.0)}, FLOORS)[0].confidence < ALONE_CAP


def test_a_busy_model_under_its_cap_with_nothing_waiting_is_not_bad_in_itself():
    busy = readings(running=30, cap_usage=0.85, waiting=0.2, queue_share=0.01, kv_usage=0.8, kv_full_share=0.1)
    assert kinds_of(busy, busy) == [] and kinds_of({}, busy) == []
    # at the cap with nobody waiting: full, not saturated
    assert kinds_of({}, readings(cap_usage=1.0, waiting=0, queue_share=0.0)) == []


def test_a_stall_whose_growing_batch_props_sm_activity_up_is_read_per_unit_of_gpu_util():
    """A host-side stall raises GPU-Util while the batch growing behind it keeps SM activity within 1.5x: the SMs'
    work per unit of GPU-Util still halves, and names gpu-not-computing over the queue it causes."""
    gpu = {"gpu_util": 0.9, "sm_active": 0.41, "tensor_active": 0.23, "dram_active": 0.26, "gpu_power": 410}
    base = readings(**gpu, sm_per_busy=0.46, tensor_per_busy=0.26, sm_clock=1.98e9, generation_throughput=2400)
    stalled = dict(gpu_util=0.98, sm_active=0.31, tensor_active=0.17, dram_active=0.2, gpu_power=335)
    inc = readings(**stalled, sm_per_busy=0.31, tensor_per_busy=0.18, sm_clock=1.98e9, generation_throughput=1600)
    queue = dict(waiting=60, queue_time_mean=40, ttft_mean=40, queue_share=0.9, tpot_mean=0.037, itl_mean=0.037)
    found = kinds_of(base, {**inc, **{k: Reading(float(v)) for k, v in queue.items()}})
    assert found[0] == "gpu-not-computing" and "queueing" in found
    # each activity alone moved less than 1.5x: without the ratio the stall reads as the queue it causes
    inc = {k: v for k, v in inc.items() if not k.endswith("_per_busy")}
    base = {k: v for k, v in base.items() if not k.endswith("_per_busy")}
    assert kinds_of(base, {**inc, **{k: Reading(float(v)) for k, v in queue.items()}})[0] == "queueing"


def test_prefix_cache_loss_over_the_prompt_token_counter_where_no_query_counter_is_exported():
    base = {k: v for k, v in readings(prefix_hit_ratio_counted=0.76).items() if k != "prefix_hit_ratio"}
    inc = {k: v for k, v in readings(prefix_hit_ratio_counted=0.05, ttft_mean=0.8).items() if k != "prefix_hit_ratio"}
    assert kinds_of(base, inc)[:1] == ["prefix-cache-loss"]


def test_a_kind_whose_needed_signal_was_not_measured_does_not_hold():
    inc = readings(tpot_mean=0.09, itl_mean=0.09, e2e_mean=11)
    assert kinds_of(readings(), inc) == ["slow-decode"]
    without = {k: v for k, v in inc.items() if k not in ("tpot_mean", "itl_mean")}
    assert "slow-decode" not in kinds_of(readings(), without)


def test_missing_series_are_named_never_all_good():
    inc = {k: v for k, v in readings().items() if k not in ("ttft_mean", "running")}
    found = judge(KINDS, readings(), inc, FLOORS)
    assert [f.kind for f in found] == ["missing-data"]
    assert {e.signal for e in found[0].evidence if "missing" in e.condition} == {"ttft_mean", "running"}
    assert found[0].confidence == 0.6  # the engine's series went on: named, ranked below a clear kind


def test_summaries_sum_over_sum_and_combine_pods():
    window, step = Window(0, 40), 10.0
    rows = []
    for t in range(0, 50, 10):
        for pod, (num, den) in {"a": (1.0, 10.0), "b": (9.0, 10.0)}.items():  # rates per second
            rows += [
                ("ttft_mean", "num", "m", pod, math.nan, float(t), num),
                ("ttft_mean", "den", "m", pod, math.nan, float(t), den),
            ]
        rows += [
            ("running", "value", "m", "a", math.nan, float(t), 2.0),
            ("running", "value", "m", "b", math.nan, float(t), 4.0),
        ]
        if t < 20:
            rows.append(("engine_series", "presence", "m", "a", math.nan, float(t), 1.0))
        rows.append(("engine_series", "presence", "m", "b", math.nan, float(t), 1.0))
    frame = pd.DataFrame(rows, columns=["signal", "part", "model", "pod", "le", "t", "v"])
    out = summarise(frame, SIGNALS, window, step)
    model = out[("m", None)]
    assert model["ttft_mean"].value == pytest.approx(0.5)  # (1 + 9) / (10 + 10), not a mean of ratios
    assert model["ttft_mean"].den == pytest.approx(20 * 40)  # events: the mean rate over the 40 s window
    assert out[("m", "b")]["ttft_mean"].value == pytest.approx(0.9)
    assert model["running"].value == 6.0 and out[("m", "a")]["running"].value == 2.0
    assert model["engine_series"].value == 1.0
    assert out[("m", "a")]["engine_series"].value == pytest.approx(2 / 5)  # left and not replaced


def test_too_few_events_read_as_few_not_as_a_value():
    frame = pd.DataFrame(
        [("ttft_mean", part, "m", "", math.nan, 0.0, v) for part, v in (("num", 0.1), ("den", 0.1))],
        columns=["signal", "part", "model", "pod", "le", "t", "v"],
    )
    reading = summarise(frame, SIGNALS, Window(0, 0), 1.0)[("m", None)]["ttft_mean"]
    assert reading.value is None and reading.state == "few"


def test_bucket_quantile_interpolates_like_prometheus():
    buckets = [(0.1, 10.0), (0.5, 60.0), (1.0, 90.0), (math.inf, 100.0)]
    assert bucket_quantile(0.5, buckets) == pytest.approx(0.1 + 0.4 * 40 / 50)
    assert bucket_quantile(0.95, buckets) == 1.0
    assert bucket_quantile(0.5, [(0.1, 0.0), (math.inf, 0.0)]) is None


@pytest.mark.parametrize(
    "text, expected",
    [
        ("1764496800", 1764496800.0),
        ("2025-11-30T10:00:00Z", 1764496800.0),
        ("2025-11-30T11:00:00+01:00", 1764496800.0),
        ("2025-11-30T10:00:00", 1764496800.0),
    ],
)
def test_times_rfc3339_or_unix(text, expected):
    assert parse_time(text) == expected


@pytest.mark.parametrize(
    "since, start, end, message",
    [
        (None, "yesterday", None, "--start 'yesterday': not a time"),
        ("5x", None, None, "--since '5x'"),
        ("30m", "1000", None, "not both"),
        (None, "2000", "1000", "the incident window is empty"),
        (None, "1000", "9999999999", "in the future"),
        ("30", None, None, r"--since '30': give a unit, e.g. 30m or 30s"),
        ("2.5", None, None, "give a unit"),
    ],
)
def test_bad_times_are_one_clear_error(since, start, end, message):
    with pytest.raises(InferwatchError, match=message):
        incident_window(since, start, end, now=1_800_000_000)


def test_baselines():
    incident = Window(100_000, 101_800)
    assert baseline_choices("auto", incident) == [Window(13_600, 15_400), Window(96_400, 100_000)]
    assert baseline_choices("1h", incident) == [Window(96_400, 100_000)]
    assert baseline_choices("7d", incident) == [incident.shifted(-7 * 86400)]
    assert baseline_choices("1000/2000", incident) == [Window(1000, 2000)]
    with pytest.raises(InferwatchError, match="--baseline"):
        baseline_choices("2000/1000", incident)
    assert choose_step(Window(0, 3600)) == 12 and choose_step(Window(0, 86400)) == 288
    # a week-long baseline without data does not set a 10-minute incident's step, but is still queried: no finer
    # than Prometheus' 11,000 points over it
    week = Window(-7 * 86400, 0)
    assert choose_step(Window(0, 600), fetched=(week, Window(0, 600))) == 55 and choose_step(Window(0, 600)) == 2
    assert rate_window(12, 15) == "60s" and rate_window(288, 15) == "288s"


def test_rules_files_add_replace_and_drop_kinds(tmp_path):
    rules = tmp_path / "mine.yaml"
    rules.write_text(
        "version: 1\nkinds:\n  errors: null\n  cold-start:\n    summary: a replica started\n"
        "    when:\n      - {if: ttft_mean up >= 3x, need: true}\n"
    )
    kinds = load_kinds([rules])
    assert "errors" not in kinds and kinds["cold-start"].clauses[0].need
    assert list(kinds)[-1] == "cold-start"


@pytest.mark.parametrize(
    "body, where",
    [
        ("kinds:\n  mine:\n    when:\n      - ttft_mean up by a lot\n", "mine.yaml:3: kinds.mine.when[0].if:"),
        (
            "kinds:\n  mine:\n    when:\n      - {if: ttft_mean up >= 2x, weight: -1}\n",
            "mine.yaml:4: kinds.mine.when[0].weight:",
        ),
        ("kinds:\n  mine:\n    summary: x\n    wen: []\n", "mine.yaml:4: kinds.mine.wen: unknown key"),
        (
            "kinds:\n  mine:\n    explains: [nope]\n    when: [ttft_mean up >= 2x]\n",
            "kinds.mine.explains: unknown kind",
        ),
        (
            "kinds:\n  mine:\n    when: [ttft_mean up >= 2x]\n    alone: [ttft_mean up >= 2x]\n",
            "kinds.mine.alone[0]: a state bad in itself reads the incident alone",
        ),
        ("kinds: [1]\n", "mine.yaml: kinds:"),
        ("kinds: {a: [\n", "mine.yaml:2: invalid YAML"),
    ],
)
def test_a_bad_rules_file_names_file_line_and_field(tmp_path, body, where):
    rules = tmp_path / "mine.yaml"
    rules.write_text(body)
    with pytest.raises(SpecError) as err:
        load_kinds([rules])
    assert where in str(err.value)


def test_every_default_kind_parses_without_the_defaults():
    from inferwatch.triage._rules import KINDS_FILE
    from inferwatch.yamlio import load_document

    assert list(parse_kinds(load_document(KINDS_FILE).data, "kinds.yaml", NAMES)) == KIND_NAMES


def test_json_shape():
    evidence = (
        Evidence("waiting", 0.0, 8.0, None, "waiting rise >= 1", 1.0),
        Evidence("ttft_mean", 0.25, 1.8, 7.2, "ttft_mean up >= 1.5x", 1.0),
    )
    found = (
        Finding("queueing", 0.9, evidence, "s", "queueing", "n"),
        Finding("slow-decode", 0.7, (), "s", "slow-decode", "n", pod="p-1"),
    )
    report = Report(
        Window(1764496800, 1764498600),
        Window(1764493200, 1764496800),
        12.0,
        (Verdict("m", found), Verdict("quiet", ())),
    )
    doc = to_json(report)
    assert doc["start"] == "2025-11-30T10:00:00Z" and doc["end"] == "2025-11-30T10:30:00Z"
    assert doc["baseline"] == {"start": "2025-11-30T09:00:00Z", "end": "2025-11-30T10:00:00Z"}
    first = doc["models"][0]
    assert first["model"] == "m" and [k["kind"] for k in first["kinds"]] == ["queueing", "slow-decode"]
    assert first["kinds"][0]["confidence"] == 0.9 and first["kinds"][1]["pod"] == "p-1"
    assert first["kinds"][0]["evidence"][1] == {
        "signal": "ttft_mean",
        "baseline": 0.25,
        "incident": 1.8,
        "change": 7.2,
        "condition": "ttft_mean up >= 1.5x",
        "score": 1.0,
    }
    assert first["kinds"][0]["runbook"].endswith("triage/README.md#queueing")
    assert doc["models"][1]["kinds"] == []
    assert headline(report.verdicts[0]) == "m: queueing (0.90); slow-decode (0.70, pod p-1)"
    assert headline(report.verdicts[1]) == "quiet: nothing wrong"


def test_connection_defaults():
    conn = Connection("http://prom:9090")
    assert not conn.options.insecure and conn.options.headers == () and conn.options.bearer_token is None


def test_text_and_rich_reports():
    from rich.console import Console

    from inferwatch.triage import render_rich, render_text

    evidence = (Evidence("queue_time_mean", 0.01, 12.0, 1200.0, "queue_time_mean up >= 2x", 1.0),)
    report = Report(
        Window(1764496800, 1764498600),
        Window(1764493200, 1764496800),
        12.0,
        (
            Verdict(
                "m",
                (Finding("queueing", 0.91, evidence, "requests wait", "queueing", "add replicas"),),
                not_measured=("gpu_util",),
            ),
            Verdict("quiet", ()),
        ),
        warnings=("a [60s] query failed",),
    )
    text = render_text(report)
    assert "m: queueing (0.91)" in text and "queue_time_mean" in text and "x1200.00" in text
    assert "not measured (no series in either window): gpu_util" in text and "warning: a [60s] query failed" in text
    console = Console(record=True, width=120, color_system=None)
    render_rich(report, console)
    shown = console.export_text()
    assert "queueing" in shown and "nothing wrong" in shown and "a [60s] query failed" in shown


def test_spec_decode_collapse_from_sglangs_acceptance_gauge():
    base = {k: v for k, v in readings(spec_acceptance_gauge=0.7).items() if k != "spec_acceptance"}
    inc = {
        k: v
        for k, v in readings(spec_acceptance_gauge=0.2, tpot_mean=0.045, itl_mean=0.03).items()
        if k != "spec_acceptance"
    }
    found = judge(KINDS, base, inc, FLOORS)
    assert [f.kind for f in found] == ["spec-decode-collapse", "slow-decode"]
    assert found[1].explained_by == ("spec-decode-collapse",)


def _frame_of(columns: dict[str, range]) -> pd.DataFrame:
    """running (a value) and ttft_mean (a ratio) of model m at the given steps (10 s apart)."""
    rows = []
    for signal, steps in columns.items():
        for t in steps:
            if signal == "running":
                rows.append(("running", "value", "m", "", math.nan, 10.0 * t, 3.0))
            else:
                rows += [
                    ("ttft_mean", part, "m", "", math.nan, 10.0 * t, v) for part, v in (("num", 1.0), ("den", 10.0))
                ]
    return pd.DataFrame(rows, columns=["signal", "part", "model", "pod", "le", "t", "v"])


def test_missing_is_relative_to_the_models_other_series():
    signals = [s for s in SIGNALS if s.name in ("running", "ttft_mean")]
    window = Window(0, 990)
    # a baseline that begins before the data did (the last fifth has data) is not a gap
    late = summarise(_frame_of({"running": range(80, 100), "ttft_mean": range(80, 100)}), signals, window, 10.0)
    full = summarise(_frame_of({"running": range(100), "ttft_mean": range(100)}), signals, window, 10.0)
    assert kinds_of(late[("m", None)], full[("m", None)]) == []
    # TTFT stopped after a tenth of the incident while the batch gauge went on: missing
    stopped = summarise(_frame_of({"running": range(100), "ttft_mean": range(10)}), signals, window, 10.0)
    found = judge(KINDS, late[("m", None)], stopped[("m", None)], FLOORS)
    assert [f.kind for f in found] == ["missing-data"] and [e.signal for e in found[0].evidence] == ["ttft_mean"]
