"""One request outcome, one verdict: what slo/outcomes.yaml says each outcome counts as in the `answered` SLI is
what the compiled default rules record, on vLLM's counters, SGLang's and the front door's, with and without a
spec's `length_is_bad: true`. Each cell runs in real promtool: ten requests a minute of the outcome beside ten
plain answers, and the per-minute total and good counts the rules record."""

from __future__ import annotations

import subprocess
from importlib import resources
from pathlib import Path

import pytest
import yaml
from conftest import need

from inferwatch.slo import compile_spec, parse_spec, render_files

TABLE = yaml.safe_load(resources.files("inferwatch.slo").joinpath("outcomes.yaml").read_text())["outcomes"]
SPECS = {"engine": "defaults.yaml", "frontdoor": "defaults-frontdoor.yaml"}
SOURCES = {"vllm": "engine", "sglang": "engine", "frontdoor": "frontdoor"}

# How each source shows one request of each outcome: the counters it moves (+1 each). An empty list: the
# source counts nothing at all for that request.
_VLLM = 'llm_requests_finished_total{{engine="vllm", model="m", finished_reason="{}"}}'
_SGLANG_DONE = 'llm_requests_finished_total{engine="sglang", model="m"}'
_SGLANG_ABORT = 'llm_requests_aborted_total{engine="sglang", model="m"}'
_DOOR = 'llm_frontdoor_requests_total{{model="m", outcome="{}"}}'
SHOWS = {
    "vllm": {
        "stop": [_VLLM.format("stop")],
        "length": [_VLLM.format("length")],
        "client-cancel": [],
        "engine-abort": [_VLLM.format("abort")],
        "error": [_VLLM.format("error")],
        "repetition": [_VLLM.format("repetition")],
        "empty-or-invalid-tool-call": [_VLLM.format("stop")],
        "caller-mistake": [],
    },
    "sglang": {
        "stop": [_SGLANG_DONE],
        "length": [_SGLANG_DONE],
        "client-cancel": [_SGLANG_DONE, _SGLANG_ABORT],
        "engine-abort": [_SGLANG_DONE, _SGLANG_ABORT],
        "error": [_SGLANG_DONE],
        "empty-or-invalid-tool-call": [_SGLANG_DONE],
        "caller-mistake": [],
    },
    "frontdoor": {
        "stop": [_DOOR.format("ok")],
        "length": [_DOOR.format("length")],
        "client-cancel": [_DOOR.format("cancelled")],
        "engine-abort": [_DOOR.format("error")],
        "error": [_DOOR.format("error")],
        "repetition": [_DOOR.format("error")],
        "empty-or-invalid-tool-call": [_DOOR.format("empty"), _DOOR.format("tool_call_invalid")],
        "caller-mistake": [_DOOR.format("invalid_request")],
    },
}
PER_MINUTE = 10


def _verdict(row: dict, source: str, length_is_bad: bool) -> str | None:
    verdict = row["counts"].get(source)
    if length_is_bad:
        verdict = (row.get("length_is_bad") or {}).get(source, verdict)
    return verdict


def _cells(length_is_bad: bool):
    for row in TABLE:
        for source in SOURCES:
            if (verdict := _verdict(row, source, length_is_bad)) is not None:
                yield row["outcome"], source, verdict


def test_every_outcome_has_a_verdict_where_the_source_shows_it():
    assert {row["outcome"] for row in TABLE} == set(SHOWS["vllm"]) == set(SHOWS["frontdoor"])
    for row in TABLE:
        assert set(row["counts"]) <= set(SOURCES), row
        assert set(row["counts"].values()) | set((row.get("length_is_bad") or {}).values()) <= {
            "good",
            "bad",
            "excluded",
        }, row
        for source in SOURCES:
            assert (source in row["counts"]) == (row["outcome"] in SHOWS[source]), (row["outcome"], source)


def _rules(source_kind: str, length_is_bad: bool) -> str:
    doc = yaml.safe_load(resources.files("inferwatch.slo").joinpath(SPECS[source_kind]).read_text())
    doc["objectives"] = [dict(o, length_is_bad=length_is_bad) for o in doc["objectives"] if o["sli"] == "answered"]
    files, _ = render_files(compile_spec(parse_spec(doc, SPECS[source_kind])), tests=False)
    (text,) = [t for name, t in files.items() if name.endswith(".rules.yaml")]
    return text


def _case(outcome: str, source: str, verdict: str) -> dict:
    """Ten plain answers a minute, and ten requests a minute of `outcome` (each door outcome listed is ten more
    requests; an engine's counters move together for one request)."""
    moved = SHOWS[source][outcome]
    series: dict[str, int] = {SHOWS[source]["stop"][0]: PER_MINUTE}
    for name in moved:
        series[name] = series.get(name, 0) + PER_MINUTE
    requests = PER_MINUTE * (len(moved) if source == "frontdoor" else min(1, len(moved)))
    total = PER_MINUTE + (0 if verdict == "excluded" else requests)
    good = PER_MINUTE + (requests if verdict == "good" else 0)
    return {
        "name": f"{outcome} on {source} counts as {verdict}",
        "interval": "1m",
        "input_series": [{"series": name, "values": f"0+{n}x40"} for name, n in series.items()],
        "promql_expr_test": [
            {
                "expr": f'sum(llm_slo:{kind}:increase1m{{slo="answered"}})',
                "eval_time": "20m",
                "exp_samples": [{"labels": "{}", "value": value}],
            }
            for kind, value in (("total", total), ("good", good))
        ],
    }


@pytest.mark.promtool
@pytest.mark.parametrize("length_is_bad", [False, True], ids=["default", "length_is_bad"])
@pytest.mark.parametrize("source_kind", ["engine", "frontdoor"])
def test_each_outcome_counts_as_the_table_says(tmp_path: Path, source_kind: str, length_is_bad: bool):
    promtool = need("promtool")
    (tmp_path / "answered.rules.yaml").write_text(_rules(source_kind, length_is_bad))
    cases = [_case(o, s, v) for o, s, v in _cells(length_is_bad) if SOURCES[s] == source_kind]
    (tmp_path / "outcomes.test.yaml").write_text(
        yaml.safe_dump(
            {"rule_files": ["answered.rules.yaml"], "evaluation_interval": "1m", "tests": cases}, sort_keys=False
        )
    )
    proc = subprocess.run(
        [promtool, "test", "rules", "outcomes.test.yaml"], cwd=tmp_path, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
