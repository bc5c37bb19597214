"""Bad SLO specs: each mistake gets one clear error naming the file, line, field and what would be valid."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT

from inferwatch.errors import SpecError
from inferwatch.slo import load_spec

GOOD = (ROOT / "slo" / "examples" / "chat.yaml").read_text()


def _bad(old: str, new: str) -> str:
    assert old in GOOD
    return GOOD.replace(old, new, 1)


# (case, spec text, expected "line: field: message" fragments)
CASES = [
    (
        "unknown SLI",
        _bad("sli: ttft ", "sli: ttfb "),
        [
            "8: objectives[0].sli: 'ttfb' is not an SLI: use one of ttft, tpot, answered, latency, ratio; "
            "did you mean 'ttft'?"
        ],
    ),
    (
        "threshold off the buckets",
        _bad("threshold: 1s", "threshold: 2s"),
        [
            "9: objectives[0].threshold: 2s cannot be counted exactly from llm_time_to_first_token_seconds:\n"
            "    vllm 0.8.4+ time_to_first_token has no bucket at 2s (nearest: 1s and 2.5s); to make it exact, "
            "start vllm "
            'with --custom-histogram-buckets \'{"time_to_first_token": [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, '
            "0.1, "
            "0.25, 0.5, 0.75, 1, 2, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560]}' (vLLM 0.32+)\n"
            "    thresholds exact in every engine in scope: 0.1s, 1s, 10s, 20s, 40s, 80s"
        ],
    ),
    (
        "target over 100%",
        _bad("target: 99.5%", "target: 100.5%"),
        ["17: objectives[2].target: 100.5% is over 100%; a target is the share of good events, e.g. 99.9%"],
    ),
    ("window of 2d", _bad("window: 28d", "window: 2d"), ["2: window: 2d is outside 7d to 90d"]),
    (
        "missing target",
        _bad("    target: 95%\n", ""),
        ["11: objectives[1].target: missing; give the share of good events, e.g. 99% or 0.99"],
    ),
    (
        "length_is_bad not a boolean",
        _bad("    target: 99.5%", "    target: 99.5%\n    length_is_bad: yes please"),
        ["objectives[2].length_is_bad: 'yes please' must be true or false"],
    ),
    (
        "length_is_bad on a latency SLI",
        _bad("    target: 95%", "    target: 95%\n    length_is_bad: true"),
        [
            "objectives[1].length_is_bad: the tpot SLI has no length stops to count: only sli: answered takes "
            "length_is_bad"
        ],
    ),
]

MORE = [
    ("missing service", _bad("service: chat\n", ""), ["1: service: missing"]),
    (
        "typo in a key",
        _bad("threshold: 100ms", "treshold: 100ms"),
        [
            "objectives[1].treshold: unknown key; did you mean 'threshold'?",
            "objectives[1].threshold: missing; a latency SLI needs a threshold",
        ],
    ),
    ("percent without %", _bad("target: 99%", "target: 99"), ["objectives[0].target: 99 is over 1"]),
    ("a target of 100%", _bad("target: 99%", "target: 100%"), ["objectives[0].target: 100% leaves no error budget"]),
    (
        "threshold not a duration",
        _bad("threshold: 1s", "threshold: fast"),
        ["objectives[0].threshold: 'fast' is not a threshold such as 1s, 500ms or 0.1 (seconds)"],
    ),
    (
        "SGLang release without per-request TPOT",
        _bad("engines: [vllm, sglang]", "engines: [vllm, sglang@0.5.2]"),
        [
            "objectives[1].threshold: 0.1s cannot be counted exactly from llm_time_per_output_token_seconds:\n"
            "    sglang 0.5.2 does not export llm_time_per_output_token_seconds"
        ],
    ),
    (
        "threshold off both engines' buckets",
        _bad("threshold: 1s", "threshold: 300ms"),
        ["(nearest: 0.25s and 0.5s)", "--bucket-time-to-first-token 0.1 0.2 0.3 0.4 0.6"],
    ),
    (
        "unknown engine",
        _bad("engines: [vllm, sglang]", "engines: [vllm, tgi]"),
        ["engines[1]: unknown engine 'tgi'; known: vllm, sglang"],
    ),
    (
        "unbounded group_by",
        _bad("selector:", "group_by: [request_id]\nselector:"),
        ["group_by: 'request_id' has a value per request or process"],
    ),
    (
        "duplicate objective",
        _bad("name: fast-enough", "name: responsive"),
        ["objectives[1].name: 'responsive' is used twice"],
    ),
    (
        "reserved label",
        _bad("    target: 99%\n", "    target: 99%\n    labels: {severity: page}\n"),
        ["objectives[0].labels.severity: is set by the compiler on every alert"],
    ),
    (
        "annotation with $value",
        _bad("    target: 99%\n", "    target: 99%\n    annotations: {summary: '{{ $value }}'}\n"),
        ["objectives[0].annotations.summary: {{ $value }}: only {{ $labels.NAME }} templates are allowed"],
    ),
    (
        "ratio without total",
        _bad("    sli: answered", "    sli: ratio\n    bad: llm_requests_finished_total"),
        ["objectives[2].total: must be a selector"],
    ),
    (
        "a query instead of a selector",
        _bad("    sli: answered", "    sli: ratio\n    total: sum(rate(x[5m]))\n    bad: x"),
        ["objectives[2].total: 'sum(rate(x[5m]))': unexpected text at column 4; give a plain selector, not a query"],
    ),
    ("no objectives", GOOD[: GOOD.index("objectives:")], ["objectives: missing"]),
    ("invalid YAML", _bad("window: 28d", "window: [28d"), ["invalid YAML"]),
    # what fuzzing found: each of these compiled to rules promtool refused, or to tests that could not pass
    (
        "group_by instance",
        _bad("selector:", "group_by: [instance]\nselector:"),
        ["3: group_by: 'instance' names one scrape target: an SLO per replica churns with every restart"],
    ),
    ("group_by target", _bad("selector:", "group_by: [model, target]\nselector:"), ["group_by: 'target' names one"]),
    (
        "group_by inf",
        _bad("selector:", "group_by: [inf]\nselector:"),
        ["group_by: 'inf' reads as a number in PromQL's by (...)"],
    ),
    ("group_by twice", _bad("selector:", "group_by: [model, model]\nselector:"), ["group_by: 'model' is listed twice"]),
    (
        "selector __name__",
        _bad("model: llama-3-70b", "__name__: x"),
        ["4: selector.__name__: names starting with __ are reserved for Prometheus' own use"],
    ),
    (
        "alert label __name__",
        _bad("selector:", "labels: {__name__: x}\nselector:"),
        ["labels.__name__: names starting with __ are reserved"],
    ),
    (
        "alert label alertname",
        _bad("selector:", "labels: {alertname: x}\nselector:"),
        ["labels.alertname: is set by the compiler on every alert"],
    ),
    (
        "alert label that is a group",
        _bad("selector:", "group_by: [namespace]\nlabels: {namespace: x}\nselector:"),
        ["labels.namespace: is a group_by label"],
    ),
    ("empty alert label", _bad("selector:", "labels: {team: ''}\nselector:"), ["labels.team: is empty"]),
    ("le in a selector", _bad("model: llama-3-70b", "le: '1'"), ["4: selector.le: le is set from the threshold"]),
    (
        "le in a latency metric",
        _bad("    sli: ttft ", '    sli: latency\n    metric: x_seconds{le="5"}\n   '),
        [
            'objectives[0].metric: x_seconds{le="5"}: le is set from the threshold; a second le matcher would match no '
            "bucket"
        ],
    ),
    (
        "contradictory selectors",
        _bad("    target: 99%\n", "    target: 99%\n    selector: {model: other}\n"),
        ["objectives[0]: model='llama-3-70b' and model='other' together match no series"],
    ),
    (
        "an escape PromQL refuses",
        _bad("    sli: answered", '    sli: ratio\n    total: x{a="b\\.c"}\n    bad: x'),
        ["objectives[2].total: 'x{a=\"b\\\\.c\"}': escape \\. at column 7 is not supported"],
    ),
    (
        "a regex RE2 refuses",
        _bad("    sli: answered", '    sli: ratio\n    total: x{a=~"(5"}\n    bad: x'),
        ["objectives[2].total: x{a=~\"(5\"}: '(5' is not a valid regular expression"],
    ),
    (
        "sub-millisecond threshold",
        _bad("threshold: 1s", "threshold: 0.0001"),
        ["9: objectives[0].threshold: 0.0001 is finer than a millisecond; thresholds are whole milliseconds"],
    ),
    (
        "fractional-minute window",
        _bad("window: 28d", "window: 7.00000001d"),
        ["2: window: 7.00000001d is not a whole number of minutes"],
    ),
    (
        "objective name too long",
        _bad("name: responsive", "name: " + "a" * 241),
        ["7: objectives[0].name: is 241 characters long; at most 63"],
    ),
    ("null selector value", _bad("model: llama-3-70b", "model:"), ["4: selector.model: has no value; write the text"]),
    (
        "yes as a label value",
        _bad("model: llama-3-70b", "model: yes"),
        ["4: selector.model: is the boolean true (YAML reads yes, no, on, off, true and false so); quote it"],
    ),
    (
        "a float label value",
        _bad("model: llama-3-70b", "model: 1.5"),
        ["selector.model: 1.5 is a number with a fraction; quote it"],
    ),
    (
        "a two-line selector value",
        _bad("model: llama-3-70b", 'model: "a\\nb"'),
        ["selector.model: 'a\\nb' contains a control character; one line of text only"],
    ),
    (
        "min_bad_events 1e30",
        _bad("selector:", "alerting: {min_bad_events: 1000000000000000000000000000000}\nselector:"),
        ["min_bad_events: 1000000000000000000000000000000 must be a whole number from 1 to 1000000"],
    ),
    (
        "missing_data_for under a minute",
        _bad("selector:", "alerting: {missing_data_for: 45s}\nselector:"),
        ["alerting.missing_data_for: 45s must be whole seconds from 1m to 30m"],
    ),
    (
        "a target too close to 100%",
        _bad("target: 99.5%", "target: 99.99999%"),
        ["objectives[2].target: 99.99999% leaves less than one bad request in a million"],
    ),
    (
        "a runbook URL with a space",
        _bad("selector:", "runbook_url: https://x/a b\nselector:"),
        ["runbook_url: 'https://x/a b' is not a URL"],
    ),
    (
        "an annotation with an open template",
        _bad("    target: 99%\n", "    target: 99%\n    annotations: {a: 'x {{'}\n"),
        ["objectives[0].annotations.a: {{ without a closing }}"],
    ),
    (
        "metric: null",
        _bad("    sli: ttft ", "    sli: latency\n    metric:\n   "),
        ["objectives[0].metric: a latency SLI needs metric: a histogram's name"],
    ),
    ("version: true", "version: true\n" + GOOD, ["1: version: unsupported version True"]),
    (
        "a ratio whose parts are never in one group",
        _bad("selector:", "group_by: [job]\nselector:").replace(
            "    sli: answered", '    sli: ratio\n    total: a_total{job="x"}\n    good: b_total{job="y"}'
        ),
        ["objectives[2]: group_by job: the total's job='x' and the other selector's job='y' are never in one group"],
    ),
]


def _errors(tmp_path, text) -> str:
    path = tmp_path / "chat.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as err:
        load_spec(path)
    return err.value


@pytest.mark.parametrize("case, text, expected", CASES, ids=[c[0] for c in CASES])
def test_each_mistake_gets_one_clear_error(case, text, expected, tmp_path):
    error = _errors(tmp_path, text)
    messages = [str(p) for p in error.problems]
    assert len(messages) == len(expected), messages
    for message, want in zip(messages, expected, strict=True):
        assert message.startswith(str(tmp_path / "chat.yaml") + ":")
        assert want in message, message


@pytest.mark.parametrize("case, text, expected", MORE, ids=[c[0] for c in MORE])
def test_more_mistakes(case, text, expected, tmp_path):
    shown = str(_errors(tmp_path, text))
    for want in expected:
        assert want in shown, shown


@pytest.mark.parametrize(
    "text",
    [
        _bad("engines: [vllm, sglang]", "engines: [{a: 1}]"),
        _bad("target: 99%", "target: {a: 1}"),
        _bad("threshold: 1s", "threshold: {a: 1}"),
        _bad("service: chat", "service: {a: 1}"),
        _bad("window: 28d", "window: {a: 1}"),
        _bad("sli: ttft ", "sli: {a: 1} "),
        _bad(
            "selector:", "group_by: [{a: 1}]\nalerting: {min_bad_events: {a: 1}, missing_data_for: {a: 1}}\nselector:"
        ),
    ],
    ids=["engines", "target", "threshold", "service", "window", "sli", "group_by and alerting"],
)
def test_messages_never_show_the_loaders_line_key(text, tmp_path):
    shown = str(_errors(tmp_path, text))
    assert "__line__" not in shown and "{'a': 1}" in shown, shown


def test_every_problem_is_listed_at_once(tmp_path):
    text = _bad("window: 28d", "window: 2d").replace("sli: ttft ", "sli: ttfb ").replace("99.5%", "101%")
    assert len(_errors(tmp_path, text).problems) == 3


def test_cli_prints_the_error_without_a_traceback(tmp_path):
    path = tmp_path / "chat.yaml"
    path.write_text(_bad("threshold: 1s", "threshold: 2s"))
    proc = subprocess.run(
        [sys.executable, "-m", "inferwatch", "slo", "check", str(path)], capture_output=True, text=True
    )
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"error: {path}:9: objectives[0].threshold: 2s cannot be counted exactly")
    assert "Traceback" not in proc.stderr


def test_le_values_are_compared_exactly(tmp_path):
    """0.1 is a boundary of both engines' TTFT lists, 0.3 of neither; no float slop either way."""
    path = tmp_path / "chat.yaml"
    path.write_text(_bad("threshold: 1s", "threshold: 100ms"))
    load_spec(path)
    path.write_text(_bad("threshold: 1s", "threshold: 300ms"))
    with pytest.raises(SpecError):
        load_spec(path)
