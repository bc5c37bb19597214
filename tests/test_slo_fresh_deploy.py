"""The default SLO rules deployed fresh onto a Prometheus that holds days of raw history (issue 15).

Four healthy models, noisy but well under budget, each with a short burst of errors across the moment the rules
are deployed, and one model whose `answered` has failed for 40 minutes. The history becomes TSDB blocks; the
counters go on live at /metrics; the rules are loaded as a fresh deployment. On its first evaluations the rules'
own per-minute recording holds minutes, not days: every window must then be read from the raw counters, so the
bursts stay a few minutes in a day (no ticket, no `page_slow` on a healthy model) while the incident pages at
once. Recorded series stay within Sloth's budget per group, and no ratio is NaN.
"""

from __future__ import annotations

import re
import time

import pytest
from conftest import ROOT, need
from promtools import prometheus, query, serve, wait_for
from slo_fleet import Fleet, api, create_blocks, live_handler

HEALTHY = ["chat-a", "chat-b", "code-c", "embed-d"]
INCIDENT = "broken-e"
BUDGETS = {"responsive": 0.01, "fast-enough": 0.05, "answered": 0.005}  # slo/defaults.yaml


def _groups(base: str) -> list[dict]:
    return api(base, "/api/v1/rules")["groups"]


def _alerts(base: str, name: str) -> list[dict]:
    """Active alerts from the API: the ALERTS series is written only from a rule's third evaluation on, once
    Prometheus has restored its `for` state."""
    return [a for a in api(base, "/api/v1/alerts")["alerts"] if a["labels"]["alertname"] == name]


def _evaluated(base: str) -> dict[str, float]:
    """{group: its last evaluation as a Unix time}, 0 before the first."""
    out = {}
    for group in _groups(base):
        stamp = group["lastEvaluation"]
        out[group["name"]] = (
            0.0
            if stamp.startswith("0001")
            else time.mktime(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
        )
    return out


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    binary = need("prometheus")
    need("promtool")
    tmp = tmp_path_factory.mktemp("fresh")
    fleet = Fleet(HEALTHY + [INCIDENT], BUDGETS, incidents={INCIDENT})
    fleet.write_openmetrics(tmp / "history.om")
    create_blocks(tmp / "history.om", tmp / "data")
    rule_files = []
    for path in sorted((ROOT / "alerts").glob("llm.*.rules.yaml")):
        # every group every 5s instead of 1m (10m for the long-window group): Prometheus first evaluates a group up
        # to one interval after it starts, so the two rounds below took up to two minutes. A window reads the
        # per-minute recording only once it reaches 4m30s back (the 5m window's coverage), never within this
        # test's seconds, so every window reads the raw counters exactly as on a 1m deployment's first minutes
        copy = tmp / path.name
        copy.write_text(re.sub(r"(?m)^(\s+)interval: (1m|10m)$", r"\1interval: 5s", path.read_text()))
        rule_files.append(str(copy))
    with serve({"/metrics": live_handler(fleet)}) as url:
        config = {
            "global": {"scrape_interval": "15s", "evaluation_interval": "1m"},
            "rule_files": rule_files,
            "scrape_configs": [
                {
                    "job_name": "llm",
                    "honor_labels": True,
                    "static_configs": [{"targets": [url.removeprefix("http://")]}],
                }
            ],
        }
        with prometheus(binary, config, tmp, ("--storage.tsdb.retention.time=90d",)) as base:
            # every group evaluated, then the every-minute groups once more: alerts see the long group's fallbacks
            first = wait_for(
                lambda: (lambda e: max(e.values()) if e and all(e.values()) else None)(_evaluated(base)),
                timeout=90,
                step=1,
            )
            wait_for(
                lambda: all(t > first for name, t in _evaluated(base).items() if not name.endswith("-long")),
                timeout=90,
                step=1,
            )
            yield base


def _pages(base: str) -> set[tuple[str, str, str]]:
    return {
        (a["labels"]["model"], a["labels"]["slo"], a["labels"]["tier"])
        for a in _alerts(base, "LLMErrorBudgetBurn")
        if a["state"] == "firing"
    }


def test_only_the_incident_pages_after_a_fresh_deployment(fresh):
    # both of the incident's pages, waited for: page_slow's 6h window reads the long group's raw fallback, which
    # a page takes through `offset` half a minute (pages read no record of their own evaluation), so it may come
    # up to that much after page_fast; every page that fired meanwhile is judged below
    expected = {(INCIDENT, "answered", "page_fast"), (INCIDENT, "answered", "page_slow")}
    wait_for(lambda: expected <= _pages(fresh), step=1)
    firing = [a for a in _alerts(fresh, "LLMErrorBudgetBurn") if a["state"] == "firing"]
    pending = _alerts(fresh, "LLMSLIDataMissing")
    fired = {(a["labels"]["model"], a["labels"]["slo"], a["labels"]["tier"]) for a in firing}
    assert {m for m, _, _ in fired} == {INCIDENT}, sorted(fired)
    assert {(INCIDENT, "answered", "page_fast"), (INCIDENT, "answered", "page_slow")} <= fired, sorted(fired)
    assert {slo for _, slo, _ in fired} == {"answered"}
    assert pending == [], "every model has data"


def test_windows_read_the_raw_counters_until_the_recording_covers_them(fresh):
    # the 5m window reads the last minutes' burst either way; the day-long windows see days, not minutes
    for window in ("6h", "1d", "3d"):
        name = f"llm_slo:error_ratio:{window}" if window == "6h" else f"llm_slo:error_ratio_raw:{window}"
        ratios = {r["metric"]["model"]: float(r["value"][1]) for r in query(fresh, f'{name}{{slo="responsive"}}')}
        assert set(ratios) == set(HEALTHY + [INCIDENT]), (window, ratios)
        assert all(r < BUDGETS["responsive"] for r in ratios.values()), (window, ratios)
    # an uncovered long window records its raw fallback only, never the short recording beside it
    assert query(fresh, "llm_slo:error_ratio:1d") == [] and query(fresh, "llm_slo:error_ratio:3d") == []


def test_recorded_series_stay_within_sloths_budget(fresh):
    per_group = query(fresh, 'count by (slo, model) ({__name__=~"llm_slo:.+", model!=""})')
    assert len(per_group) == 3 * (len(HEALTHY) + 1)
    assert max(int(r["value"][1]) for r in per_group) <= 11, per_group
    constants = query(fresh, 'count({__name__=~"llm_slo:.+", model=""})')
    assert int(constants[0]["value"][1]) == 5  # three targets and two thresholds, once per objective
    values = [r["value"][1] for r in query(fresh, '{__name__=~"llm_slo:.+"}')]
    assert values and "NaN" not in values
