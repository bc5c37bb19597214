"""Bad events named as successes: imported as written (only the names say so), and listed to check.

AI-Infra's `prediction-quality` SLO counts `accurate="true"` predictions as its errors; roller's second SLO
counts `..._success_total`. The import cannot know the author meant the opposite, so it does not refuse: it
imports the query as the bad events, as written, and says under "imported as written; check:" which matcher or
name reads as success and how to flip it. Negated matchers (`code!~"2.."`) count the rest and say nothing.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import FIXTURES

from inferwatch.slo import import_file
from inferwatch.slo._import import import_text
from inferwatch.slo._import_promql import reads_as_success

CORPUS = FIXTURES / "slo" / "real-world"
AI_INFRA = CORPUS / "ai-infra" / "monitoring__slos.yaml"


@pytest.mark.parametrize(
    "query, said",
    [
        ('sum(rate(model_predictions_total{job="ml-api",accurate="true"}[5m]))', 'accurate="true"'),
        ('sum(rate(http_requests_total{code=~"2.."}[5m]))', 'code=~"2.."'),
        ('sum(rate(http_requests_total{status_code="200"}[5m]))', 'status_code="200"'),
        ('sum(rate(http_requests_total{code=~"2xx"}[5m]))', 'code=~"2xx"'),
        ('sum(rate(grpc_server_handled_total{grpc_code="OK"}[5m]))', 'grpc_code="OK"'),
        ('sum(rate(jobs_total{status=~"success|ok"}[5m]))', 'status=~"success|ok"'),
        ('sum(rate(checks_total{is_valid="true"}[5m]))', 'is_valid="true"'),
        ("sum(rate(roller_1_happy_path_success_total[5m]))", "the name roller_1_happy_path_success_total"),
        ("sum(rate(a_errors_total[5m])) + sum(rate(jobs_succeeded_total[5m]))", "the name jobs_succeeded_total"),
    ],
)
def test_bad_events_named_as_successes_are_said(query, said):
    assert f"counts what {said} calls successes" in reads_as_success(query, "error query")


@pytest.mark.parametrize(
    "query",
    [
        'sum(rate(http_requests_total{code=~"5.."}[5m]))',
        'sum(rate(http_requests_total{code!~"2.."}[5m]))',  # the rest: errors
        'sum(rate(http_requests_total{code=~"2..|5.."}[5m]))',  # not only successes
        'sum(rate(jobs_total{result="failed"}[5m]))',
        'sum(rate(checks_total{valid="false"}[5m]))',
        "sum(rate(x_success_failures_total[5m]))",  # failures of something named success
        "sum(rate(cache_hit_total[5m]))",
        "sum(rate(llm_tokens_total[5m]))",
        "not a query (",
    ],
)
def test_other_bad_events_say_nothing(query):
    assert reads_as_success(query, "error query") is None


def test_ai_infras_accurate_predictions_are_imported_as_written_and_listed_to_check():
    result = import_file(AI_INFRA)
    quality = next(o for s in result.specs for o in s["objectives"] if o["name"] == "prediction-quality")
    assert quality["bad"] == 'model_predictions_total{job="ml-api", accurate="true"}'
    [check] = result.to_check
    assert (check.line, check.field) == (103, "spec.slos[2].sli.events.errorQuery")
    assert 'accurate="true" calls successes' in check.message and "write good: in place of bad:" in check.message
    assert not any("successes" in str(note) for note in result.not_carried)


def test_the_command_lists_them_apart_from_what_was_not_carried_over():
    run = subprocess.run(
        [sys.executable, "-m", "inferwatch", "slo", "import", str(AI_INFRA)], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0 and "model_predictions_total" in run.stdout
    checks = run.stderr.split("imported as written; check:\n", 1)[1].splitlines()
    assert len(checks) == 1 and checks[0].startswith(f"  {AI_INFRA}:103: ")


def test_openslo_and_pyrra_bad_queries_are_checked_too():
    openslo = """apiVersion: openslo/v1
kind: SLO
metadata: {name: answered}
spec:
  service: chat
  budgetingMethod: Occurrences
  objectives: [{target: 0.99}]
  timeWindow: [{duration: 28d, isRolling: true}]
  indicator:
    metadata: {name: answered}
    spec:
      ratioMetric:
        counter: true
        bad: {metricSource: {type: Prometheus, spec: {query: 'http_requests_total{code="200"}'}}}
        total: {metricSource: {type: Prometheus, spec: {query: http_requests_total}}}
"""
    pyrra = """apiVersion: pyrra.dev/v1alpha1
kind: ServiceLevelObjective
metadata: {name: answered, namespace: chat}
spec:
  target: "99"
  window: 28d
  indicator:
    ratio:
      errors: {metric: 'http_requests_total{status="success"}'}
      total: {metric: http_requests_total}
"""
    for text, field in ((openslo, ".bad"), (pyrra, "spec.indicator.ratio.errors.metric")):
        [check] = import_text(text, "x.yaml").to_check
        assert check.field.endswith(field) and "calls successes" in check.message


def test_no_other_real_spec_is_listed():
    """Every other spec people wrote (the corpus) reads as it means: nothing to check."""
    listed = {}
    for path in sorted(CORPUS.rglob("*.y*ml")):
        try:
            result = import_file(path)
        except Exception:  # noqa: BLE001 - refused files are test_slo_import's concern
            continue
        if result.to_check:
            listed[path.relative_to(CORPUS).as_posix()] = len(result.to_check)
    assert listed == {"ai-infra/monitoring__slos.yaml": 1}
