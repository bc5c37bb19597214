"""The dashboard linter on other people's dashboards: every rule on true and false cases cut from real
dashboards (the source is noted on each), the whole real corpus against a hand-judged list of findings, and
inputs that are not dashboards at all. Sources of the files: tests/fixtures/SOURCES.md."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections import Counter

import pytest
import yaml
from conftest import FIXTURES

from inferwatch.dashboards._build import HERE
from inferwatch.dashboards._lint import RULES, lint_dashboard, lint_file

CORPUS = FIXTURES / "dashboards"
EXPECTED = CORPUS / "lint-expected.tsv"
PROMETHEUS = {"type": "prometheus", "uid": "${datasource}"}


def _board(*exprs, title="p", type="timeseries", unit="", variables=(), datasource=PROMETHEUS, **panel) -> dict:
    fields = {"fieldConfig": {"defaults": {"unit": unit}}} if unit else {}
    return {
        "schemaVersion": 41,
        "templating": {"list": [{"name": "datasource", "type": "datasource", "query": "prometheus"}, *variables]},
        "panels": [
            {
                "type": type,
                "title": title,
                "datasource": datasource,
                **fields,
                **panel,
                "targets": [{"expr": e, "refId": chr(65 + i)} for i, e in enumerate(exprs)],
            }
        ],
    }


def _rules(board: dict) -> set[str]:
    return {f.rule for f in lint_dashboard(board)}


# (source, expression, panel options, rule, whether it fires)
QUERY_CASES = [
    # counter-without-rate
    (
        "production-stack vllm-dashboard: Average Latency",
        "avg(vllm:e2e_request_latency_seconds_sum) / avg(vllm:e2e_request_latency_seconds_count)",
        {},
        "counter-without-rate",
        True,
    ),
    (
        "production-stack vllm-dashboard: Request TTFT distribution",
        "sum by(le) (vllm:time_to_first_token_seconds_bucket)",
        {"type": "bargauge"},
        "counter-without-rate",
        True,
    ),
    (
        "llm-d performance-kv-cache: KV Cache Hit Rate",
        'sum(vllm:prefix_cache_hits_total{model_name=~"$model"}) / sum(vllm:prefix_cache_queries_total'
        '{model_name=~"$model"})',
        {"type": "stat"},
        "counter-without-rate",
        True,
    ),
    (
        "node-exporter-full: CPU Cores (count of series)",
        'count(count(node_cpu_seconds_total{instance="$node",job="$job"}) by (cpu))',
        {"type": "stat"},
        "counter-without-rate",
        False,
    ),
    (
        "production-stack vllm-dashboard: Available vLLM instances (a router gauge named _total)",
        "sum(max by (server) (vllm:healthy_pods_total))",
        {"type": "stat"},
        "counter-without-rate",
        False,
    ),
    (
        "aibrix Envoy Gateway: Cluster State (envoy gauges)",
        "(sum(envoy_cluster_membership_total)-sum(envoy_cluster_membership_healthy)) == bool 0",
        {},
        "counter-without-rate",
        False,
    ),
    (
        "aibrix metadata: Runtime Unteared Down (started minus torn down: in flight)",
        "clamp_min(sum by (runtime_type) (metadata_batch_runtime_started_total) - sum by (runtime_type) "
        "(metadata_batch_runtime_torn_down_total), 0)",
        {},
        "counter-without-rate",
        False,
    ),
    (
        "dotdc k8s-views-namespaces: restarts (kube-state-metrics mirrors pod state)",
        'sum(kube_pod_container_status_restarts_total{namespace=~"$namespace", cluster="$cluster"})',
        {},
        "counter-without-rate",
        False,
    ),
    (
        "inferwatch serving-overview: attainment freshness (right-hand side of and)",
        "sum(increase(llm_time_to_first_token_seconds_count[5m]) and llm_time_to_first_token_seconds_count) > 0",
        {},
        "counter-without-rate",
        False,
    ),
    (
        "Ray Serve LLM panels: Tokens Last Hour (delta() of a counter)",
        'delta(ray_vllm:prompt_tokens_total{WorkerId=~"$workerid"}[1h])',
        {"type": "stat"},
        "counter-without-rate",
        True,
    ),
    (
        "gateway-api-inference-extension: Net Queue Flow (deriv() of a gauge)",
        "sum(deriv(inference_extension_flow_control_queue_size[$__rate_interval]))",
        {},
        "counter-without-rate",
        False,
    ),
    (
        "aibrix metadata: idelta() clamped at 0 counts each scrape's increments",
        "sum(clamp_min(idelta(metadata_batch_api_job_incoming_total[$__rate_interval]), 0))",
        {},
        "counter-without-rate",
        False,
    ),
    # quantile-without-le
    (
        "constructed: the sum drops le",
        "histogram_quantile(0.9, sum(rate(vllm:e2e_request_latency_seconds_bucket[5m])))",
        {},
        "quantile-without-le",
        True,
    ),
    (
        "constructed: by (model_name) drops le",
        "histogram_quantile(0.9, sum by (model_name) (rate(vllm:e2e_request_latency_seconds_bucket[5m])))",
        {},
        "quantile-without-le",
        True,
    ),
    (
        "llm-d performance-kv-cache: TTFT, per-series quantiles",
        'histogram_quantile(0.95, rate(vllm:time_to_first_token_seconds_bucket{model_name=~"$model"}[5m]))',
        {},
        "quantile-without-le",
        False,
    ),
    (
        "sglang dashboard: E2E p99",
        "histogram_quantile(0.99, sum by (le) (rate(sglang:e2e_request_latency_seconds_bucket[$__rate_interval])))",
        {},
        "quantile-without-le",
        False,
    ),
    # sum-rate-as-latency
    (
        "vLLM grafana.json: Queue Time",
        'rate(vllm:request_queue_time_seconds_sum{model_name="$model_name"}[$__rate_interval])',
        {"title": "Queue Time"},
        "sum-rate-as-latency",
        True,
    ),
    (
        "Ray serve LLM panels: Prompt Tokens/Sec (a token sum is a throughput)",
        'rate(ray_vllm:request_prompt_tokens_sum{model_name="$model_name"}[$__rate_interval])',
        {"title": "vLLM: Token Throughput", "unit": "tokens/s"},
        "sum-rate-as-latency",
        False,
    ),
    (
        "aibrix metadata: Batch Execution Breakdown Share (idelta, a share)",
        'sum(clamp_min(idelta(metadata_batch_api_job_execution_phase_time_ms_sum{phase="scheduling"}'
        "[$__rate_interval]), 0))",
        {"title": "Batch Execution Breakdown Share"},
        "sum-rate-as-latency",
        False,
    ),
    (
        "vllm performance_statistics: TTFT Over Time (a mean)",
        "rate(vllm:time_to_first_token_seconds_sum[$__rate_interval]) / "
        "rate(vllm:time_to_first_token_seconds_count[$__rate_interval])",
        {"unit": "s"},
        "sum-rate-as-latency",
        False,
    ),
    # average-of-ratios, and sum() of per-series means
    (
        "tgi dashboard: Throughput (generated tok/s)",
        'sum((rate(tgi_request_generated_tokens_sum{container="$s"}[10m]) '
        '/ rate(tgi_request_generated_tokens_count{container="$s"}[10m]))>0)',
        {"type": "stat"},
        "average-of-ratios",
        True,
    ),
    (
        "kserve prefix caching: a ratio of sums",
        "sum(rate(vllm:prefix_cache_hits_total[5m])) / sum(rate(vllm:prefix_cache_queries_total[5m]))",
        {"type": "gauge"},
        "average-of-ratios",
        False,
    ),
    (
        "sglang dashboard 2025-12: E2E Avg",
        "avg(rate(sglang_e2e_request_latency_seconds_sum[$__rate_interval]) /  "
        "rate(sglang_e2e_request_latency_seconds_count[$__rate_interval]))",
        {},
        "average-of-ratios",
        True,
    ),
    (
        "aibrix vLLM engine: Prefix Cache Hit Rate",
        'avg(vllm:gpu_prefix_cache_hit_rate{model_name="$model_name"})',
        {},
        "average-of-ratios",
        True,
    ),
    (
        "vLLM kv_cache dashboard: Mean KV cache usage",
        'avg(vllm:kv_cache_usage_perc{job=~"$job"})',
        {},
        "average-of-ratios",
        False,
    ),
    (
        "constructed: mean GPU-Util as 0-1, a division by a number is scaling",
        "avg(DCGM_FI_DEV_GPU_UTIL / 100)",
        {"unit": "percentunit"},
        "average-of-ratios",
        False,
    ),
    (
        "constructed: the share of pods whose mean is over 1 s (a bool comparison's 0s and 1s)",
        "avg(rate(vllm:e2e_request_latency_seconds_sum[5m]) / rate(vllm:e2e_request_latency_seconds_count[5m]) "
        "> bool 1)",
        {},
        "average-of-ratios",
        False,
    ),
    (
        "constructed: the number of pods whose mean is over 1 s",
        "sum(rate(vllm:e2e_request_latency_seconds_sum[5m]) / rate(vllm:e2e_request_latency_seconds_count[5m]) "
        "> bool 1)",
        {},
        "average-of-ratios",
        False,
    ),
    # rate-over-interval
    (
        "vllm performance_statistics: TTFT Over Time",
        "rate(vllm:time_to_first_token_seconds_sum[$__interval]) / "
        "rate(vllm:time_to_first_token_seconds_count[$__interval])",
        {"unit": "s"},
        "rate-over-interval",
        True,
    ),
    (
        "vLLM kv_cache dashboard: preemptions",
        'sum(rate(vllm:num_preemptions_total{job=~"$job"}[$__rate_interval]))',
        {},
        "rate-over-interval",
        False,
    ),
    (
        "constructed: max_over_time over one step is right",
        "max_over_time(vllm:num_requests_waiting[$__interval])",
        {},
        "rate-over-interval",
        False,
    ),
    # unit-mismatch
    (
        "vllm query_statistics: p50 Latency in ms",
        "histogram_quantile(0.50, sum by(le, model_name) "
        '(rate(vllm:e2e_request_latency_seconds_bucket{model_name=~"$Deployment_id"}[$__rate_interval])))',
        {"type": "stat", "unit": "ms"},
        "unit-mismatch",
        True,
    ),
    (
        "dotdc k8s-system-api-server: latency by verb in ms",
        "sum(rate(apiserver_request_duration_seconds_sum"
        '{job=~"$job"}[$__rate_interval])) by (verb)\n/\nsum(rate(apiserver_request_duration_seconds_count'
        '{job=~"$job"}[$__rate_interval])) by (verb)',
        {"unit": "ms"},
        "unit-mismatch",
        True,
    ),
    (
        "vllm performance_statistics: TPS, engine steps as tokens",
        "rate(vllm:iteration_tokens_total_count[$__interval])",
        {"title": "TPS (Tokens Per Second) Over Time", "unit": "tokens/sec (tps)"},
        "unit-mismatch",
        True,
    ),
    (
        "llm-d pd-coordinator: Avg vLLM TTFT (Prefill), scaled to ms",
        'sum(rate(vllm:time_to_first_token_seconds_sum{pod=~".*prefill.*"}[5m])) / '
        'sum(rate(vllm:time_to_first_token_seconds_count{pod=~".*prefill.*"}[5m])) * 1000',
        {"type": "stat", "unit": "ms"},
        "unit-mismatch",
        False,
    ),
    (
        "opea kubeai vllm-scaling: Total output tokens, the count of a per-token seconds histogram (one per token)",
        'sum by (model_name)(rate(vllm:time_per_output_token_seconds_count{namespace="$namespace"}[$__rate_interval]))',
        {"title": "Total output tokens", "unit": "t/s"},
        "unit-mismatch",
        False,
    ),
    (
        "dcgm-exporter dashboard 2020-05: GPU SM Clocks (MHz shown as hertz)",
        "DCGM_FI_DEV_SM_CLOCK",
        {"unit": "hertz"},
        "unit-mismatch",
        True,
    ),
    (
        "dcgm-exporter dashboard 2023: GPU SM Clocks scaled to hertz",
        'DCGM_FI_DEV_SM_CLOCK{gpu=~"$gpu"} * 1000000',
        {"unit": "hertz"},
        "unit-mismatch",
        False,
    ),
    (
        "dcgm-exporter dashboard 2020-05: framebuffer MiB shown as decbytes",
        "DCGM_FI_DEV_FB_USED",
        {"unit": "decbytes"},
        "unit-mismatch",
        True,
    ),
    (
        "dcgm-exporter dashboard 2023: framebuffer in decmbytes",
        "DCGM_FI_DEV_FB_USED",
        {"unit": "decmbytes"},
        "unit-mismatch",
        False,
    ),
    (
        "NIM consolidated: SM occupancy (0-1) in percent",
        'avg(DCGM_FI_PROF_SM_OCCUPANCY{namespace="$ns"})',
        {"unit": "percent"},
        "unit-mismatch",
        True,
    ),
    (
        "dcgm-exporter dashboard: tensor activity in percentunit",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        {"unit": "percentunit"},
        "unit-mismatch",
        False,
    ),
    (
        "dcgm-exporter dashboard: GPU-Util (0-100) in percent",
        "DCGM_FI_DEV_GPU_UTIL",
        {"unit": "percent"},
        "unit-mismatch",
        False,
    ),
    (
        "vllm performance_statistics: TPS, generation tokens",
        "rate(vllm:generation_tokens_total[$__interval])",
        {"title": "TPS (Tokens Per Second) Over Time", "unit": "tokens/sec (tps)"},
        "unit-mismatch",
        False,
    ),
    (
        "sglang dashboard: E2E p99 in s",
        "histogram_quantile(0.99, sum by (le) (rate(sglang:e2e_request_latency_seconds_bucket[$__rate_interval])))",
        {"unit": "s"},
        "unit-mismatch",
        False,
    ),
    # rate-of-gauge
    (
        "NIM consolidated: GPU Memory Bandwidth Utilization",
        "rate(DCGM_FI_PROF_DRAM_ACTIVE[5m]) * 1000000",
        {"unit": "Bps"},
        "rate-of-gauge",
        True,
    ),
    (
        "NIM consolidated: PCIe Bandwidth (already bytes per second)",
        'rate(DCGM_FI_PROF_PCIE_TX_BYTES{namespace="$ns"}[5m])',
        {"unit": "Bps"},
        "rate-of-gauge",
        True,
    ),
    ("constructed: deriv() of a gauge is right", "deriv(DCGM_FI_DEV_FB_USED[10m])", {}, "rate-of-gauge", False),
    (
        "constructed: energy is a counter",
        "rate(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION[5m]) / 1000",
        {},
        "rate-of-gauge",
        False,
    ),
    # rate-over-range
    (
        "semantic-router serve dashboard: Model Request Count",
        "sum(increase(llm_model_requests_total[$__range])) by (model)",
        {"title": "Model Request Count"},
        "rate-over-range",
        True,
    ),
    (
        "semantic-router serve dashboard: Total Requests stat",
        "sum(increase(llm_model_requests_total[$__range]))",
        {"type": "stat"},
        "rate-over-range",
        False,
    ),
    (
        "gateway-api-inference-extension: top 10 over the range picks series, value ignored",
        "sum by (p) (queue_size) and on(p) topk(10, sum by (p) (max_over_time(queue_size[$__range])))",
        {},
        "rate-over-range",
        False,
    ),
    # missing-as-good
    (
        "llm-d pd-coordinator: Failed KV Transfers",
        "sum(vllm:nixl_num_failed_transfers) or vector(0)",
        {"type": "stat", "title": "Failed KV Transfers"},
        "missing-as-good",
        True,
    ),
    (
        "constructed: success share falling back to 1",
        "sum(rate(ok_total[5m])) / sum(rate(all_total[5m])) or on() vector(1)",
        {"type": "stat", "title": "Success rate"},
        "missing-as-good",
        True,
    ),
    (
        "semantic-router serve: Success Rate, errors absent until the first one (inside, not the whole query)",
        "sum(increase(llm_model_requests_total[$__range])) / (sum(increase(llm_model_requests_total[$__range])) + "
        "(sum(increase(llm_request_errors_total[$__range])) or vector(0))) * 100",
        {"type": "stat", "title": "Success Rate", "unit": "percent"},
        "missing-as-good",
        False,
    ),
    (
        "constructed: failed targets, count() of up == 0 is empty when none is down and up is never missing",
        'count(up{job="vllm"} == 0) or vector(0)',
        {"type": "stat", "title": "Failed targets"},
        "missing-as-good",
        False,
    ),
    (
        "our gpu-activity before issue 29: GPUs busy but not computing, 0 painted green, 1 red",
        "count((gpu_utilization_ratio >= 0.9) and on (uuid) (gpu_sm_active_ratio < 0.5)) or vector(0)",
        {
            "type": "stat",
            "title": "GPUs busy but not computing",
            "fieldConfig": {
                "defaults": {
                    "thresholds": {
                        "mode": "absolute",
                        "steps": [{"color": "green", "value": None}, {"color": "red", "value": 1}],
                    }
                }
            },
        },
        "missing-as-good",
        True,
    ),
    (
        "constructed: the fallback only while the GPUs are scraped keeps No data for no data",
        "count((gpu_utilization_ratio >= 0.9) and on (uuid) (gpu_sm_active_ratio < 0.5)) or 0 * count("
        "gpu_utilization_ratio and on (uuid) gpu_sm_active_ratio)",
        {
            "type": "stat",
            "title": "GPUs busy but not computing",
            "fieldConfig": {
                "defaults": {
                    "thresholds": {
                        "mode": "absolute",
                        "steps": [{"color": "green", "value": None}, {"color": "red", "value": 1}],
                    }
                }
            },
        },
        "missing-as-good",
        False,
    ),
    (
        "constructed: thresholds all green say nothing is good or bad",
        "sum(replicas) or vector(0)",
        {
            "type": "stat",
            "title": "Replicas",
            "fieldConfig": {
                "defaults": {"thresholds": {"mode": "absolute", "steps": [{"color": "green", "value": None}]}}
            },
        },
        "missing-as-good",
        False,
    ),
    (
        "our slos dashboard: alerts firing, ALERTS is empty when none fires",
        'count(ALERTS{alertstate="firing"}) or vector(0)',
        {
            "type": "stat",
            "title": "Alerts firing",
            "fieldConfig": {
                "defaults": {
                    "thresholds": {
                        "mode": "absolute",
                        "steps": [{"color": "green", "value": None}, {"color": "red", "value": 1}],
                    }
                }
            },
        },
        "missing-as-good",
        False,
    ),
    (
        "aibrix ModelClaim: Desired Replicas (not a good-or-bad quantity)",
        'sum(aibrix_modelclaim_desired_replicas{model=~"$model"}) or vector(0)',
        {"type": "stat", "title": "Desired Replicas"},
        "missing-as-good",
        False,
    ),
    # le-format
    (
        "constructed: an SLO bucket spelled as Go writes it",
        "sum(rate(vllm:time_to_first_token_seconds_bucket"
        '{le="2"}[5m])) / sum(rate(vllm:time_to_first_token_seconds_count[5m]))',
        {},
        "le-format",
        True,
    ),
    (
        "constructed: SGLang's sanitized spelling, 0.50",
        'sglang_e2e_request_latency_seconds_bucket{le="0.50"}',
        {},
        "le-format",
        True,
    ),
    (
        "constructed: as prometheus_client writes it",
        'sum(rate(vllm:e2e_request_latency_seconds_bucket{le="2.5"}[5m]))',
        {},
        "le-format",
        False,
    ),
    (
        'constructed: a Go exporter writes le="2"',
        'sum(rate(http_request_duration_seconds_bucket{le="2"}[5m]))',
        {},
        "le-format",
        False,
    ),
    # deprecated-metric, also through _bucket/_sum/_count and SGLang's sanitized spelling
    (
        "vLLM grafana.json 2025-01: TPOT p99",
        "histogram_quantile(0.99, sum by(le) "
        '(rate(vllm:time_per_output_token_seconds_bucket{model_name="$model_name"}[$__rate_interval])))',
        {},
        "deprecated-metric",
        True,
    ),
    (
        "production-stack terraform: GPU KV Usage",
        'vllm:gpu_cache_usage_perc{model_name="$model_name"}',
        {},
        "deprecated-metric",
        True,
    ),
    (
        "sglang dashboard 2025-12 spelling (sglang_), a name renamed in 0.5.3",
        "histogram_quantile(0.9, sum by (le) (rate(sglang_queue_time_s_bucket[$__rate_interval])))",
        {},
        "deprecated-metric",
        True,
    ),
    (
        "vLLM grafana.json 2025-10: TPOT p99",
        "histogram_quantile(0.99, sum by(le) (rate("
        'vllm:request_time_per_output_token_seconds_bucket{model_name="$model_name"}[$__rate_interval])))',
        {},
        "deprecated-metric",
        False,
    ),
    # unknown-metric: only names of sources we know
    (
        "llm-d failure-saturation: Request Preemptions",
        'sum by(pod) (rate(vllm:num_preemptions{namespace="$namespace"}[5m]))',
        {},
        "unknown-metric",
        True,
    ),
    ("constructed: SGLang spelled with underscores, misspelled", "sglang_num_runing_reqs", {}, "unknown-metric", True),
    ("llm-d inference-gateway: Request / s", "sum(rate(llm_d_epp_request_total[5m]))", {}, "unknown-metric", False),
    ("production-stack vllm-dashboard: Current QPS (router gauge)", "vllm:current_qps", {}, "unknown-metric", False),
    (
        "llm-d pd-coordinator: KV transfer (the vllm:nixl_ family)",
        "histogram_quantile(0.95, sum by (le) (rate(vllm:nixl_xfer_time_seconds_bucket[$__rate_interval])))",
        {},
        "unknown-metric",
        False,
    ),
    ("sglang dashboard 2025-12: running", "sglang_num_running_reqs", {}, "unknown-metric", False),
    (
        "sglang dashboard 2026-06: Cache Hit Rate (Per-Tier), HiCache names of 2026",
        "sum(rate(sglang:cache_hit_tokens_l1_total[5m])) / sum(rate(sglang:uncached_prompt_tokens_histogram_sum[5m]))",
        {},
        "unknown-metric",
        False,
    ),
    (
        "vLLM 2026-03: cached prompt tokens (counter, _total)",
        "sum(rate(vllm:prompt_tokens_cached_total[5m]))",
        {},
        "unknown-metric",
        False,
    ),
    (
        "constructed: the same counter without _total",
        "sum(rate(vllm:prompt_tokens_cached[5m]))",
        {},
        "unknown-metric",
        True,
    ),
    (
        "sglang grafana.json 2024-11: Max Running Requests, a pre-0.3.6 name",
        'sglang:max_running_requests{name="$name"}',
        {},
        "unknown-metric",
        False,
    ),
    (
        "sglang grafana.json 2024-11: Num Requests Running, renamed num_running_reqs",
        'sglang:num_requests_running{name="$name"}',
        {},
        "deprecated-metric",
        True,
    ),
    (
        "dcgm-exporter dashboard: SM clocks",
        'DCGM_FI_DEV_SM_CLOCK{instance=~"$instance"} * 1000000',
        {},
        "unknown-metric",
        False,
    ),
    (
        "constructed: a DCGM field dcgm-exporter does not enable by default",
        "sum(rate(DCGM_FI_PROF_NVLINK_TX_BYTES[5m]))",
        {},
        "unknown-metric",
        False,
    ),
    ("constructed: a typo in a DCGM field", "DCGM_FI_DEV_GPU_UTILISATION", {}, "unknown-metric", True),
    # invalid-promql
    ("constructed", "rate(vllm:num_preemptions_total[$__rate_interval]", {}, "invalid-promql", True),
    (
        "constructed: variables as a grouping label and a name prefix",
        "sum by ($groupby) (rate(${prefix}_requests_total[$__rate_interval]))",
        {},
        "invalid-promql",
        False,
    ),
    (
        "Grafana variables in ranges, subqueries and offsets",
        "max_over_time(rate(vllm:num_preemptions_total[$__rate_interval])[$__range:$__interval] offset $__interval)",
        {},
        "invalid-promql",
        False,
    ),
]


@pytest.mark.parametrize("source, expr, panel, rule, fires", QUERY_CASES, ids=[c[0] for c in QUERY_CASES])
def test_query_rules(source, expr, panel, rule, fires):
    assert (rule in _rules(_board(expr, **panel))) is fires


def test_an_instant_query_of_totals_is_a_snapshot_even_in_a_bar_chart():
    # envoyproxy/ai-gateway examples/monitoring: "Token Usage by Type", an instant bar chart of lifetime totals
    # beside "Total Tokens" stats of the same series: a table of totals of software we do not know
    expr = "sum by (gen_ai_token_type) (gen_ai_client_token_usage_sum)"
    board = _board(expr, type="barchart")
    assert "counter-without-rate" in _rules(board)
    board["panels"][0]["targets"][0]["instant"] = True
    assert "counter-without-rate" not in _rules(board)
    board["panels"][0]["targets"][0]["range"] = True  # both: Grafana draws the range too
    assert "counter-without-rate" in _rules(board)
    known = _board("sum(vllm:prompt_tokens_total)", type="barchart")  # an engine's counter: still a lifetime total
    known["panels"][0]["targets"][0]["instant"] = True
    assert "counter-without-rate" in _rules(known)


def test_a_total_of_unknown_software_is_a_counter_only_where_the_dashboard_rates_it():
    # vllm-project/semantic-router "Cache Items by Backend": llm_cache_entries_total is a GaugeVec (cache_metrics.go)
    assert "counter-without-rate" not in _rules(_board("llm_cache_entries_total"))
    assert "counter-without-rate" not in _rules(_board("deriv(llm_cache_entries_total[10m])"))  # a gauge's slope
    # the same dashboard rating the name elsewhere says the author knows it is a counter
    assert "counter-without-rate" in _rules(_board("http_requests_total", "sum(rate(http_requests_total[5m]))"))
    # histogram series are counters whoever exports them (OPEA's "TGI Request Queue": tgi_request_duration_count)
    assert "counter-without-rate" in _rules(_board("tgi_request_duration_count"))


def test_no_value_zero_on_failures_reads_missing_data_as_good():
    # llm-d pd-coordinator "Failed KV Transfers": noValue "0" beside `or vector(0)`
    board = _board(
        "sum(rate(vllm:nixl_num_failed_transfers[5m]))",
        title="Failed KV Transfers",
        type="stat",
        fieldConfig={"defaults": {"noValue": "0"}},
    )
    assert "missing-as-good" in _rules(board)
    board["panels"][0]["title"] = "KV transfers"
    assert "missing-as-good" not in _rules(board)


def test_vocabulary_names_are_judged_only_in_a_dashboard_that_uses_the_vocabulary():
    typo = "sum(llm_requests_runing)"
    assert "unknown-metric" in _rules(_board(typo, "sum(llm_requests_waiting)"))
    assert "unknown-metric" not in _rules(_board(typo))  # someone else's llm_ metric
    assert "unknown-metric" not in _rules(_board("llm_d_epp_average_queue_size", "sum(llm_requests_waiting)"))


DATASOURCE_CASES = [
    ("sglang dashboard: a fixed uid", {"type": "prometheus", "uid": "ddyfngn31dg5cf"}, "hard-coded-datasource"),
    ("production-stack vllm-dashboard", {"type": "prometheus", "uid": "prometheus"}, "hard-coded-datasource"),
    ("dcgm-exporter dashboard: a string variable", "$datasource", "legacy-datasource"),
    (
        "an import placeholder with spaces",
        {"type": "prometheus", "uid": "${DS_PROMETHEUS_EKS API INFERENCE PROD}"},
        None,
    ),
    ("Grafana's server-side expressions", {"type": "__expr__", "uid": "__expr__"}, None),
    ("dotdc dashboards: the built-in Grafana datasource", {"type": "datasource", "uid": "grafana"}, None),
    ("vLLM dashboards: annotations", {"type": "grafana", "uid": "-- Grafana --"}, None),
    ("mixed", {"type": "datasource", "uid": "-- Mixed --"}, None),
]


@pytest.mark.parametrize("source, datasource, rule", DATASOURCE_CASES, ids=[c[0] for c in DATASOURCE_CASES])
def test_datasource_rules(source, datasource, rule):
    found = _rules(_board("sum(vllm:num_requests_running)", datasource=datasource))
    assert found & {"hard-coded-datasource", "legacy-datasource"} == ({rule} if rule else set())


def test_a_string_datasource_is_told_the_object_with_its_own_variable():
    board = _board("sum(vllm:num_requests_running)", datasource="${datasrc}")  # aibrix batch dashboard
    assert [f.message for f in lint_dashboard(board) if f.rule == "legacy-datasource"] == [
        'datasource \'${datasrc}\' is a string; current Grafana writes {"type": "prometheus", "uid": "${datasrc}"}'
    ]


LOKI_VARIABLE = {"name": "loki", "type": "datasource", "query": "loki"}
ACCESS_LOG = '{job="frontdoor"} |= "outcome" | json | outcome!="ok"'
LOKI_CASES = [
    # issue 29: an access-log panel told users to pick ${datasource}, whose list holds only Prometheus data sources
    ("a loki panel on the Prometheus variable", ACCESS_LOG, {"type": "loki", "uid": "${datasource}"}, (), True),
    ("LogQL on the Prometheus variable, no type", ACCESS_LOG, {"uid": "${datasource}"}, (), True),
    ("LogQL on a string variable", '{app="x"} != "debug"', "$datasource", (), True),
    ("a line filter only", '{app="x"} |= "error"', PROMETHEUS, (), True),
    ("Loki on its own variable", ACCESS_LOG, {"type": "loki", "uid": "${loki}"}, (LOKI_VARIABLE,), False),
    ("LogQL on its own variable, no type", ACCESS_LOG, {"uid": "${loki}"}, (LOKI_VARIABLE,), False),
    ("Loki with a fixed uid", ACCESS_LOG, {"type": "loki", "uid": "P8E80F9AEF21F6940"}, (), False),
    ("PromQL with a regex of pipes", 'sum(rate(x_total{code=~"5..|429"}[5m]))', PROMETHEUS, (), False),
    ("PromQL comparing numbers", "sum(up) != 0", PROMETHEUS, (), False),
]


@pytest.mark.parametrize("source, expr, datasource, variables, fires", LOKI_CASES, ids=[c[0] for c in LOKI_CASES])
def test_a_loki_query_on_a_prometheus_datasource_variable(source, expr, datasource, variables, fires):
    board = _board(expr, type="logs", datasource=datasource, variables=variables)
    found = lint_dashboard(board)
    assert ("loki-on-prometheus-datasource" in {f.rule for f in found}) == fires, found
    assert "invalid-promql" not in {f.rule for f in found}  # LogQL is never judged as PromQL


def test_a_loki_target_of_a_mixed_panel_names_the_variable_to_add():
    board = _board("sum(up)", datasource={"type": "datasource", "uid": "-- Mixed --"})
    board["panels"][0]["targets"].append(
        {"expr": ACCESS_LOG, "refId": "B", "datasource": {"type": "loki", "uid": "${datasource}"}}
    )
    assert [(f.rule, f.message) for f in lint_dashboard(board)] == [
        (
            "loki-on-prometheus-datasource",
            "a Loki query on $datasource, a data source variable of Prometheus data "
            "sources: Grafana offers no Loki there; give Loki a variable of its own (type datasource, query loki) and "
            "use it",
        )
    ]


def test_variables_grafana_resolves_itself_are_not_undefined():
    board = _board(
        'sum(rate(up{job=~"$job"}[$__rate_interval]))',
        'label_replace(up, "x", "$1", "job", "(.*)")',
        variables=[{"name": "job", "type": "query", "query": "label_values(up, job)"}],
        links=[{"url": "/d/x?var-pod=${__field.labels.pod}&${__url_time_range}"}],
    )
    board["__inputs"] = [{"name": "DS_PROMETHEUS", "type": "datasource"}]
    board["panels"][0]["datasource"] = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
    board["panels"][0]["targets"] += [
        {
            "refId": "C",
            "datasource": {"type": "__expr__", "uid": "__expr__"},
            "type": "math",
            "expression": "$A / $B",
        },  # server-side expression
        {
            "refId": "D",
            "expr": "x",
            "alias": "$tag_cluster-$tag_container_name",  # aibrix: InfluxDB aliases
            "datasource": {"type": "influxdb", "uid": "influx"},
        },
    ]
    assert "undefined-variable" not in _rules(board)
    board["panels"][0]["targets"][0]["expr"] = 'up{job=~"$job", pod=~"$pod"}'
    assert {(f.rule, f.message) for f in lint_dashboard(board) if f.rule == "undefined-variable"} == {
        ("undefined-variable", '$pod is used (panel "p") but not defined: define it, or use one of $datasource, $job')
    }


def test_unused_and_single_select_variables():
    defined = [
        {"name": "instance", "type": "query", "query": "label_values(instance)"},  # sglang dashboard
        {"name": "node", "type": "query", "query": "label_values(node_uname_info, instance)"},
        {"name": "filters", "type": "adhoc"},
    ]
    found = [(f.panel, f.rule) for f in lint_dashboard(_board('node_load1{instance="$node"}', variables=defined))]
    assert found == [("variable instance", "unused-variable")]  # single-select $node is no defect


def test_ignored_variable_on_the_sglang_dashboards_and_not_on_the_router_one():
    real = CORPUS / "real-world"
    for name, expected in (
        ("sglang-dashboard-2025-07.json", {"variable model_name"}),
        ("sglang-dashboard-2025-12.json", {"variable model_name"}),
        ("sglang-router-dashboard.json", set()),
    ):
        assert {f.panel for f in lint_file(real / name) if f.rule == "ignored-variable"} == expected, name


def test_a_threshold_variable_is_not_a_filter():
    slo = {"name": "ttft_slo", "type": "custom", "query": "0.5,1.0,2.5"}  # vLLM overview's SLO tiles
    board = _board(
        'sum(rate(vllm:time_to_first_token_seconds_bucket{le="$ttft_slo"}[5m]))',
        "sum(vllm:num_requests_running)",
        "sum(vllm:num_requests_waiting)",
        variables=[slo],
    )
    assert "ignored-variable" not in _rules(board)


def _expected() -> dict[tuple[str, str, str], str]:
    rows = {}
    for line in EXPECTED.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            file, panel, rule, verdict, _ = line.split("\t")
            rows[(file, panel, rule)] = verdict
    return rows


def test_the_real_corpus_gives_exactly_the_judged_findings():
    found = set()
    paths = sorted((FIXTURES / "anchors" / "dashboards").glob("*.json")) + sorted(
        p for p in (CORPUS / "real-world").iterdir() if p.suffix in (".json", ".yaml")
    )
    assert len(paths) == 74
    for path in paths:
        for f in lint_file(path):  # never raises
            assert f.rule in RULES
            found.add(
                (f"{path.parent.parent.name}/{path.parent.name}/{path.name}".removeprefix("fixtures/"), f.panel, f.rule)
            )
    expected = _expected()
    assert sorted(found - set(expected)) == [], "new findings: judge them and add them to lint-expected.tsv"
    assert sorted(set(expected) - found) == [], "findings gone: a miss, or update lint-expected.tsv"


def test_precision_on_the_real_corpus_is_at_least_95_percent_per_rule():
    verdicts = _expected()
    per_rule = Counter(rule for (_, _, rule) in verdicts)
    true = Counter(rule for (_, _, rule), verdict in verdicts.items() if verdict == "TP")
    assert sum(true.values()) / len(verdicts) >= 0.95
    assert {rule: true[rule] / n for rule, n in per_rule.items() if true[rule] / n < 0.95} == {}


BAD_INPUTS = {
    "truncated.json": (b'{"panels": [', "invalid-json"),
    "binary.json": (b"\xff\xfe\x00", "invalid-json"),
    "conflict.json": (b"<<<<<<< HEAD\n{}\n=======\n{}\n>>>>>>> main\n", "invalid-json"),
    "list.json": (b"[1, 2]", "not-a-dashboard"),
    "config.json": (b'{"apiVersion": 1, "providers": []}', "not-a-dashboard"),
    "v2.json": (
        json.dumps(
            {
                "apiVersion": "dashboard.grafana.app/v2beta1",
                "kind": "Dashboard",
                "spec": {
                    "elements": {
                        "a": {"kind": "Panel", "spec": {"title": "t", "vizConfig": {"group": "graph"}}},
                        "b": 1,
                        "c": {"kind": "Panel", "spec": {"data": {"spec": {"queries": [1, {"spec": 2}]}}}},
                    },
                    "layout": {"kind": "RowsLayout", "spec": {"rows": [None, {"spec": {"repeat": 3, "layout": []}}]}},
                    "variables": [1, {"kind": "QueryVariable", "spec": {"query": 5}}],
                },
            }
        ).encode(),
        "angular-panel",
    ),
    "pointer.yaml": (
        b"apiVersion: grafana.integreatly.org/v1beta1\nkind: GrafanaDashboard\nspec:\n  url: http://x\n",
        "not-a-dashboard",
    ),
    "configmap.yaml": (b"apiVersion: v1\nkind: ConfigMap\ndata:\n  a.json: '{'\n  b.txt: x\n", "invalid-json"),
    "empty-configmap.yaml": (b"kind: ConfigMap\ndata: {}\n", "not-a-dashboard"),
    "prose.yaml": (b"just: some\nyaml: [1, 2]\n", "not-a-dashboard"),
    "text.txt": (b"hello world\n", "invalid-json"),
    "deep.json": (b"[" * 100_000 + b"]" * 100_000, "invalid-json"),
    "deep-panels.json": (b'{"panels": [' + b'{"panels": [' * 3000 + b"]}" * 3000 + b"]}", "invalid-json"),
    "deep-query.json": (
        json.dumps(
            {
                "schemaVersion": 41,
                "panels": [
                    {
                        "type": "timeseries",
                        "title": "t",
                        "targets": [
                            {"expr": "(" * 900 + "up" + ")" * 900},
                            {"expr": "+".join(["up"] * 900)},  # parsed, walked
                            {"expr": "-" * 20_000 + "up"},
                            {"expr": "(" * 20_000 + "up" + ")" * 20_000},  # promql-parser segfaults
                            {"expr": "+".join(["up"] * 20_000)},
                        ],
                    }
                ],
            }
        ).encode(),
        "invalid-promql",
    ),
    "v1-resource.json": (
        json.dumps(
            {
                "apiVersion": "dashboard.grafana.app/v1beta1",
                "kind": "Dashboard",
                "spec": {"schemaVersion": 41, "panels": [{"type": "graph", "title": "t", "targets": []}]},
            }
        ).encode(),
        "angular-panel",
    ),
    "odd-shapes.json": (
        json.dumps(
            {
                "schemaVersion": "x",
                "rows": "x",
                "__inputs": 1,
                "templating": {"list": [1]},
                "panels": [
                    1,
                    None,
                    {
                        "type": "row",
                        "collapsed": True,
                        "panels": [
                            {"libraryPanel": {"uid": "u", "name": "n"}},
                            {"title": 5, "targets": {"expr": 1}},
                            {"targets": [None, {"expr": 5}, {"expr": "sum(vllm:num_requests_swapped)"}]},
                        ],
                    },
                ],
            }
        ).encode(),
        "deprecated-metric",
    ),
}


def test_inputs_that_are_not_dashboards_are_one_line_findings(tmp_path):
    for name, (data, rule) in BAD_INPUTS.items():
        (tmp_path / name).write_bytes(data)
        assert rule in {f.rule for f in lint_file(tmp_path / name)}, name
    proc = subprocess.run(
        [sys.executable, "-m", "inferwatch", "dashboards", "lint", *sorted(tmp_path.iterdir())],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr + proc.stdout
    assert all(line.count(": ") >= 3 for line in proc.stdout.splitlines())


def test_a_folder_is_linted_file_by_file_and_stdin_as_one(tmp_path):
    board = json.dumps(_board("vllm:num_preemptions_total"))
    (tmp_path / "a.json").write_text(board)
    (tmp_path / "team" / "b").mkdir(parents=True)
    (tmp_path / "team" / "b" / "c.yml").write_text("kind: ConfigMap\ndata:\n  c.json: '" + board + "'\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "d.json").write_text("[]")  # hidden: not read
    (tmp_path / "notes.md").write_text("# not a dashboard")  # another suffix: not read
    (tmp_path / "package.json").write_text('{"name": "x"}')  # no dashboard: passed over
    (tmp_path / "values.yaml").write_text("replicas: 2\n")
    assert sorted((f.file, f.rule) for f in lint_file(tmp_path)) == [
        (str(tmp_path / "a.json"), "counter-without-rate"),
        (f"{tmp_path / 'team' / 'b' / 'c.yml'}:c.json", "counter-without-rate"),
    ]
    (tmp_path / "none").mkdir()
    (tmp_path / "none" / "values.yaml").write_text("replicas: 2\n")
    assert [str(f) for f in lint_file(tmp_path / "none")] == [
        f"{tmp_path / 'none'}: file: not-a-dashboard: a folder with no dashboard in a .json, .yaml or .yml file"
    ]
    (tmp_path / "broken.json").write_text('{"panels": [')  # does not parse: reported
    assert "invalid-json" in {f.rule for f in lint_file(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "inferwatch", "dashboards", "lint", "-"], input=board, capture_output=True, text=True
    )
    assert proc.returncode == 1 and proc.stdout.startswith('<stdin>: panel "p": counter-without-rate: ')
    assert proc.stderr == "1 finding in 1 file\n"  # not '1 findings'


def test_the_name_table_lists_each_name_once():
    doc = yaml.safe_load((HERE / "engine-metrics.yaml").read_text(encoding="utf-8"))
    for key, names in doc.items():
        if isinstance(names, list):
            assert [n for n, count in Counter(names).items() if count > 1] == [], key


def test_an_empty_file_and_broken_yaml_say_so(tmp_path):
    (tmp_path / "empty.json").write_text("")
    (tmp_path / "broken.yaml").write_text("kind: ConfigMap\ndata: [\n")
    (tmp_path / "scalar.yaml").write_text("just words\n")
    assert [f.message for f in lint_file(tmp_path / "empty.json")] == ["the file is empty"]
    assert [f.message for f in lint_file(tmp_path / "broken.yaml")] == [
        "not YAML: expected the node content, but found '<stream end>' (line 3)"
    ]
    assert [f.message for f in lint_file(tmp_path / "scalar.yaml")] == [
        "YAML, but neither a dashboard nor a Kubernetes resource holding one"
    ]


ODD_VALUES = [None, 1, 2.5, "x", "$v", "${a b}", [], {}, [1, None], {"a": None}, True, "sum(", "[[x]]", "$__interval"]


def _mangle(value, rng: random.Random, p: float = 0.1):
    if isinstance(value, dict):
        return {k: rng.choice(ODD_VALUES) if rng.random() < p else _mangle(v, rng, p) for k, v in value.items()}
    if isinstance(value, list):
        return [rng.choice(ODD_VALUES) if rng.random() < p else _mangle(v, rng, p) for v in value]
    return value


def test_mangled_dashboards_never_raise():
    rng = random.Random(7)
    for name in (
        "sglang-dashboard-2025-07.json",
        "llm-d-pd-coordinator-metrics.json",
        "aibrix-aibrix-batch-grafana.json",
        "dotdc-k8s-views-pods.json",
    ):
        board = json.loads((CORPUS / "real-world" / name).read_text(encoding="utf-8"))
        for _ in range(15):
            assert all(f.rule in RULES for f in lint_dashboard(_mangle(board, rng), name))
