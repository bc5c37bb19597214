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
    ("unknown SLI", _bad("sli: ttft ", "sli: ttfb "),
     ["8: objectives[0].sli: 'ttfb' is not an SLI: use one of ttft, tpot, answered, latency, ratio; "
      "did you mean 'ttft'?"]),
    ("threshold off the buckets", _bad("threshold: 1s", "threshold: 2s"),
     ["9: objectives[0].threshold: 2s cannot be counted exactly from llm_time_to_first_token_seconds:\n"
      "    vllm 0.8.4+ time_to_first_token has no bucket at 2s (nearest: 1s and 2.5s); to make it exact, start vllm "
      "with --custom-histogram-buckets '{\"time_to_first_token\": [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, "
      "0.25, 0.5, 0.75, 1, 2, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560]}' (vLLM 0.32+)\n"
      "    thresholds exact in every engine in scope: 0.1s, 1s, 10s, 20s, 40s, 80s"]),
    ("target over 100%", _bad("target: 99.5%", "target: 100.5%"),
     ["17: objectives[2].target: 100.5% is over 100%; a target is the share of good events, e.g. 99.9%"]),
    ("window of 2d", _bad("window: 28d", "window: 2d"),
     ["2: window: 2d is outside 7d to 90d"]),
    ("missing target", _bad("    target: 95%\n", ""),
     ["11: objectives[1].target: missing; give the share of good events, e.g. 99% or 0.99"]),
]

MORE = [
    ("missing service", _bad("service: chat\n", ""), ["1: service: missing"]),
    ("typo in a key", _bad("threshold: 100ms", "treshold: 100ms"),
     ["objectives[1].treshold: unknown key; did you mean 'threshold'?",
      "objectives[1].threshold: missing; a latency SLI needs a threshold"]),
    ("percent without %", _bad("target: 99%", "target: 99"), ["objectives[0].target: 99 is over 1"]),
    ("a target of 100%", _bad("target: 99%", "target: 100%"), ["objectives[0].target: 100% leaves no error budget"]),
    ("threshold not a duration", _bad("threshold: 1s", "threshold: fast"),
     ["objectives[0].threshold: 'fast' is not a threshold such as 1s, 500ms or 0.1 (seconds)"]),
    ("SGLang release without per-request TPOT", _bad("engines: [vllm, sglang]", "engines: [vllm, sglang@0.5.2]"),
     ["objectives[1].threshold: 0.1s cannot be counted exactly from llm_time_per_output_token_seconds:\n"
      "    sglang 0.5.2 does not export llm_time_per_output_token_seconds"]),
    ("threshold off both engines' buckets", _bad("threshold: 1s", "threshold: 300ms"),
     ["(nearest: 0.25s and 0.5s)", "--bucket-time-to-first-token 0.1 0.2 0.3 0.4 0.6"]),
    ("unknown engine", _bad("engines: [vllm, sglang]", "engines: [vllm, tgi]"),
     ["engines[1]: unknown engine 'tgi'; known: vllm, sglang"]),
    ("unbounded group_by", _bad("selector:", "group_by: [request_id]\nselector:"),
     ["group_by: 'request_id' has a value per request or process"]),
    ("duplicate objective", _bad("name: fast-enough", "name: responsive"),
     ["objectives[1].name: 'responsive' is used twice"]),
    ("reserved label", _bad("    target: 99%\n", "    target: 99%\n    labels: {severity: page}\n"),
     ["objectives[0].labels.severity: is set by the compiler on every alert"]),
    ("annotation with $value", _bad("    target: 99%\n", "    target: 99%\n    annotations: {summary: '{{ $value }}'}\n"),
     ["objectives[0].annotations.summary: {{ $value }}: only {{ $labels.NAME }} templates are allowed"]),
    ("ratio without total", _bad("    sli: answered", "    sli: ratio\n    bad: llm_requests_finished_total"),
     ["objectives[2].total: must be a selector"]),
    ("a query instead of a selector", _bad("    sli: answered", "    sli: ratio\n    total: sum(rate(x[5m]))\n"
                                                                  "    bad: x"),
     ["objectives[2].total: 'sum(rate(x[5m]))': unexpected text at column 4; give a plain selector, not a query"]),
    ("no objectives", GOOD[:GOOD.index("objectives:")], ["objectives: missing"]),
    ("invalid YAML", _bad("window: 28d", "window: [28d"), ["invalid YAML"]),
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
    for message, want in zip(messages, expected):
        assert message.startswith(str(tmp_path / "chat.yaml") + ":")
        assert want in message, message


@pytest.mark.parametrize("case, text, expected", MORE, ids=[c[0] for c in MORE])
def test_more_mistakes(case, text, expected, tmp_path):
    shown = str(_errors(tmp_path, text))
    for want in expected:
        assert want in shown, shown


def test_every_problem_is_listed_at_once(tmp_path):
    text = _bad("window: 28d", "window: 2d").replace("sli: ttft ", "sli: ttfb ").replace("99.5%", "101%")
    assert len(_errors(tmp_path, text).problems) == 3


def test_cli_prints_the_error_without_a_traceback(tmp_path):
    path = tmp_path / "chat.yaml"
    path.write_text(_bad("threshold: 1s", "threshold: 2s"))
    proc = subprocess.run([sys.executable, "-m", "inferwatch", "slo", "check", str(path)], capture_output=True,
                          text=True)
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
