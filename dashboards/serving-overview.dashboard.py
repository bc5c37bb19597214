"""Serving overview: load against capacity, latency as users feel it, what the engine produced, and errors.

Written against the common vocabulary only, so it serves vLLM and SGLang alike.
"""

from inferwatch.autoscale import load_knobs
from inferwatch.dashboards import (
    ENGINE_FILTERS,
    RATE,
    STREAMED,
    Selector,
    attainment,
    dashboard,
    engine_variables,
    latency_objective,
    logs,
    loki_variable,
    quantiles,
    rate_sum,
    ratio,
    row,
    spec_acceptance_targets,
    stat,
    target,
    textbox,
    timeseries,
)
from inferwatch.slo import builtin_sli

sel = Selector(ENGINE_FILTERS)
# the installed SLO specs' thresholds and targets (slo/defaults.yaml's 1 s and 100 ms unless built with others), so
# the tiles and the pager agree; `le` matches every spelling of the bound
TTFT, TPOT = latency_objective("ttft"), latency_objective("tpot")


def _within(objective, what: str) -> dict:
    """The tile's title, colours and the sentence saying where its numbers come from: green from the objective's
    target, orange from twice the bad share it allows, red below."""
    target = float(objective.target)
    orange = round(max(0.0, 2 * target - 1), 6)
    return {
        "title": f"{what} within {objective.words}",
        "thresholds": ((orange, "orange"), (target, "green")),
        "source": f"The bound and the target ({target:.4g}, green from there; orange from {orange:.4g}) "
        f"are the SLO's ({objective.source}).",
    }


TTFT_TILE, TPOT_TILE = _within(TTFT, "TTFT"), _within(TPOT, "TPOT")


scaled = Selector(("namespace", "model"))  # llm_autoscale:* records: per (namespace, model)
KNOBS = load_knobs()
http = Selector(("namespace", "engine", "pod"))  # the API server's counters carry no model label
door = Selector(("namespace", "model"))  # the front door's series carry model, caller, upstream
FRONT_DOOR = "Front door only (inferwatch frontdoor): "  # tests/test_dashboards_data.py exempts these
COST = "With cost rules only (inferwatch cost compile, cost/README.md): "  # exempted the same way
CAPACITY = "With a capacity sweep only (inferwatch capacity sweep --rules, sim/README.md): "  # and this one
NOT_CANCELLED = 'outcome!="cancelled"'
BAD = 'outcome!~"ok|cancelled|length"'

# The front door's access log (`inferwatch frontdoor --access-log`) in Loki: one JSON line per request. Only lines
# that parse as JSON and carry an outcome (the door's own log lines share its stdout in a pod), of the chosen models.
ACCESS_LOG_JOB = "inferwatch-frontdoor"  # the job label the shipper sets; $access_log_job on the dashboard
ACCESS = '{job="$access_log_job"} |= "\\"outcome\\":" | json | __error__="" | model=~"$model"'
SLOW_MS = {"first_token_ms": TTFT, "time_per_output_token_ms": TPOT}


def _slow(field: str) -> str:
    """Answered requests slower than the SLO's bound on `field`; a null field (one visible token has no time per
    token) fails the number conversion and is dropped, never shown as slow."""
    return f'{ACCESS} | outcome="ok" | {field} > {float(SLOW_MS[field].threshold) * 1000:g} | __error__=""'


# The engine-side goodput estimate: a request that failed one objective may fail another too, so one minus the
# sum of the bad shares is a floor (never above the real share). The answered SLI's bad finishes are the compiler's
# own (slo/slis.yaml), read through the public spec parser rather than written here again.
_ANSWERED_BAD = builtin_sli("answered").bad


def _over(histogram: str, objective, extra: str = "") -> str:
    """The share of a histogram's requests over the objective's bound (its `le` bucket, every spelling)."""
    within = rate_sum(sel, histogram + "_bucket", extra=", ".join(x for x in (extra, objective.le) if x))
    return f"(1 - {ratio(within, rate_sum(sel, histogram + '_count', extra=extra))})"


_FINISHED = rate_sum(sel, "llm_requests_finished_total")
# no bad finish yet is no series at all: 0 then, per model that finished anything, or the sum would be no data
_BAD = " + ".join(
    f"({rate_sum(sel, b.metric, extra=', '.join(m.render() for m in b.matchers))} or 0 * {_FINISHED})"
    for b in _ANSWERED_BAD
)
_NOT_ANSWERED = f"({ratio(_BAD, _FINISHED)})"
GOODPUT_ESTIMATE = (
    f"clamp_min(1 - (\n{_over('llm_time_to_first_token_seconds', TTFT, STREAMED)}\n+ "
    f"{_over('llm_time_per_output_token_seconds', TPOT)}\n+ {_NOT_ANSWERED}\n), 0)"
)
JUDGED, GOOD = "llm_frontdoor_goodput_judged_requests_total", "llm_frontdoor_goodput_good_requests_total"

ACCESS_LOG = logs(
    "Slow and failed requests (front door access log)",
    [f"{ACCESS} | {BAD}", _slow("first_token_ms"), _slow("time_per_output_token_ms")],
    description=(
        "Loki: the front door's access log, newest first: requests not answered well (outcomes other than ok, "
        f"cancelled and length), and answered ones slower than the SLOs' bounds: first visible token over "
        f"{TTFT.words}, time per output token over {TPOT.words} ({TTFT.source}; {TPOT.source}). Each line is one "
        "request's JSON (request_id, caller, model, status, outcome, first_token_ms, time_per_output_token_ms, "
        "duration_ms, token counts); open it for the fields. Getting the log to Loki: run the front door with "
        "--access-log - (or a file) and have Promtail or Grafana Alloy ship the container's (or the file's) "
        f'lines with the label job="{ACCESS_LOG_JOB}", or set the dashboard\'s "Access log job" to the job '
        'your shipper sets (Promtail\'s Kubernetes config: namespace/app). Pick your Loki in the "Loki" data '
        'source variable: "Data source" lists Prometheus data sources only.'
    ),
)

dashboard = dashboard(
    uid="inferwatch-serving-overview",
    title="LLM serving overview",
    description="Load against capacity, TTFT and time per output token, output, errors. inferwatch.",
    variables=engine_variables() + [loki_variable(), textbox("access_log_job", ACCESS_LOG_JOB, "Access log job")],
    panels=[
        row("Load against capacity"),
        timeseries(
            "Running requests against the cap",
            [
                target(f"sum by (model, pod) ({sel('llm_requests_running')})", "running {{model}} {{pod}}"),
                target('max by (model) (llm_max_running_requests{model=~"$model"})', "cap {{model}}"),
            ],
            description="llm_requests_running per engine, and the concurrency cap each engine was started with "
            "(llm_max_running_requests, served by the normalizing exporter's --max-running-requests: no "
            "engine exports it). Running at the cap with requests waiting is queueing.",
        ),
        timeseries(
            "Headroom: request rate per replica against measured capacity",
            [
                target(
                    ratio(
                        rate_sum(sel, "llm_requests_finished_total"),
                        f"count by (model) (count by (model, pod) ({sel('llm_requests_running')}))",
                    ),
                    "rate per replica {{model}}",
                ),
                target(
                    'max by (model) (llm_capacity:requests_per_second_per_replica{model=~"$model"})',
                    "capacity per replica {{model}}",
                ),
            ],
            unit="reqps",
            description=CAPACITY + "requests each replica finishes per second (rate of "
            "llm_requests_finished_total over the pods serving the model) against the capacity per "
            "replica a sweep measured: the highest rate at which 90 % of requests still met every "
            "objective (llm_capacity:requests_per_second_per_replica, a constant from the rule file "
            "the sweep writes). The gap between the lines is the headroom; traffic above the "
            "capacity line misses the SLO.",
        ),
        timeseries(
            "Waiting requests",
            [target(f"sum by (model, pod) ({sel('llm_requests_waiting')})", "{{model}} {{pod}}")],
            description="llm_requests_waiting: requests admitted to the engine but not yet running.",
        ),
        timeseries(
            "KV-cache usage",
            [target(f"max by (model, pod) ({sel('llm_kv_cache_usage_ratio')})", "{{model}} {{pod}}")],
            unit="percentunit",
            max_value=1,
            description="llm_kv_cache_usage_ratio, 0-1 per engine.",
        ),
        timeseries(
            "Preemptions per second",
            [target(rate_sum(sel, "llm_preemptions_total"), "{{model}}")],
            unit="ops",
            description="rate(llm_preemptions_total): vLLM preemptions, SGLang retractions, under KV-cache pressure.",
        ),
        row("Autoscaling: what the scaler sees (autoscale/)"),
        timeseries(
            "SLO pressure and the scaling signal",
            [
                target(f"max by (model) ({scaled('llm_autoscale:slo_pressure')})", "pressure {{model}}"),
                target(f"max by (model) ({scaled('llm_autoscale:scaling_signal')})", "signal {{model}}"),
            ],
            max_value=None,
            description="llm_autoscale:slo_pressure: max(p90 TTFT / TTFT objective, p90 TPOT / "
            "TPOT objective), smoothed; 1 is the objective. The scaling signal is the pressure with "
            f"its band folded in (held at {KNOBS.scale_up:g} between {KNOBS.scale_down:g} and "
            f"{KNOBS.scale_up:g}): what KEDA or the HPA targets, asking for replicas x signal / "
            f"{KNOBS.scale_up:g} (autoscale/knobs.yaml).",
        ),
        timeseries(
            "Replicas and waiting requests per replica",
            [
                target(f"sum by (model) ({scaled('llm_autoscale:replicas')})", "replicas {{model}}"),
                target(f"max by (model) ({scaled('llm_autoscale:waiting_per_replica')})", "waiting/replica {{model}}"),
            ],
            description="llm_autoscale:replicas (pods with engine series serving the model) beside the waiting "
            f"requests per replica, the load signal that adds replicas over {KNOBS.waiting_per_replica:g} "
            "before latency moves. Replicas that do not follow the signal: a stalled scale-up "
            "(LLMScaleUpStalled).",
        ),
        row("Latency"),
        stat(
            TTFT_TILE["title"],
            attainment(
                sel("llm_time_to_first_token_seconds_bucket", f"{STREAMED}, {TTFT.le}"),
                sel("llm_time_to_first_token_seconds_count", STREAMED),
            ),
            description=f"Share of requests whose first token came within {TTFT.words} over the dashboard's time "
            "range, from llm_time_to_first_token_seconds buckets (the bound must be a bucket boundary "
            f"of the engines: `inferwatch slo explain` says). {TTFT_TILE['source']} No "
            "data, never 100 %, when no engine counted a request in the last 5 minutes.",
            thresholds=TTFT_TILE["thresholds"],
            width=4,
        ),
        timeseries(
            "Time to first token",
            quantiles(sel, "llm_time_to_first_token_seconds", extra=STREAMED),
            unit="s",
            width=8,
            description="p50/p95/p99 of llm_time_to_first_token_seconds (engine-side: arrival to first "
            "token, reasoning included; SGLang's non-streamed requests left out).",
        ),
        stat(
            TPOT_TILE["title"],
            attainment(
                sel("llm_time_per_output_token_seconds_bucket", TPOT.le), sel("llm_time_per_output_token_seconds_count")
            ),
            description=f"Share of requests whose mean time per output token was within {TPOT.words} "
            f"(llm_time_per_output_token_seconds buckets). {TPOT_TILE['source']} No data, "
            "never 100 %, when no engine counted a request in the last 5 minutes.",
            thresholds=TPOT_TILE["thresholds"],
            width=4,
        ),
        timeseries(
            "Time per output token (per request)",
            quantiles(sel, "llm_time_per_output_token_seconds"),
            unit="s",
            width=8,
            description="p50/p95/p99 of llm_time_per_output_token_seconds: each request's mean time per output token.",
        ),
        timeseries(
            "Inter-token latency",
            quantiles(sel, "llm_inter_token_latency_seconds"),
            unit="s",
            description="p50/p95/p99 of llm_inter_token_latency_seconds: gaps between tokens (vLLM samples "
            "per step, SGLang per token).",
        ),
        timeseries(
            "End-to-end and queue time",
            quantiles(sel, "llm_request_duration_seconds", qs=(0.5, 0.95))
            + [
                target(t.expr, t.legendFormat.replace("p", "queue p", 1))
                for t in quantiles(sel, "llm_request_queue_time_seconds", qs=(0.5, 0.95))
            ],
            unit="s",
            description="p50/p95 of llm_request_duration_seconds and llm_request_queue_time_seconds.",
        ),
        row("Output"),
        timeseries(
            "Output tokens per request",
            quantiles(sel, "llm_request_generation_tokens", qs=(0.5, 0.95))
            + [
                target(
                    ratio(
                        rate_sum(sel, "llm_request_generation_tokens_sum"),
                        rate_sum(sel, "llm_request_generation_tokens_count"),
                    ),
                    "mean {{model}}",
                )
            ],
            description="p50/p95 and mean of llm_request_generation_tokens. A jump with normal TTFT and slow "
            "visible text is the 'thinking' kind of slow.",
        ),
        timeseries(
            "Token throughput",
            [
                target(rate_sum(sel, "llm_generation_tokens_total"), "output {{model}}"),
                target(rate_sum(sel, "llm_prompt_tokens_total"), "prompt {{model}}"),
            ],
            unit="short",
            description="rate of llm_generation_tokens_total and llm_prompt_tokens_total, tokens per second "
            "(SGLang adds them when a request ends, so its curve lags).",
        ),
        timeseries(
            "Finish reasons",
            [target(rate_sum(sel, "llm_requests_finished_total", by="finished_reason"), "{{finished_reason}}")],
            unit="reqps",
            stack=True,
            description="vLLM only: SGLang reports no finish reason. "
            "rate(llm_requests_finished_total) by finished_reason.",
        ),
        timeseries(
            "Truncated (length) share",
            [
                target(
                    ratio(
                        rate_sum(sel, "llm_requests_finished_total", extra='finished_reason="length"'),
                        rate_sum(sel, "llm_requests_finished_total"),
                    ),
                    "{{model}}",
                )
            ],
            unit="percentunit",
            max_value=1,
            description="vLLM only: SGLang reports no finish reason. Share of finished requests cut at the length "
            "limit.",
        ),
        timeseries(
            "Prefix-cache hit rate",
            [
                target(
                    ratio(
                        rate_sum(sel, "llm_prefix_cache_hit_tokens_total"),
                        rate_sum(sel, "llm_prefix_cache_queried_tokens_total"),
                    ),
                    "{{model}}",
                )
            ],
            unit="percentunit",
            max_value=1,
            description="Windowed ratio of llm_prefix_cache_hit_tokens_total to llm_prefix_cache_queried_tokens_total "
            "(not SGLang's last-batch cache_hit_rate gauge).",
        ),
        timeseries(
            "Speculative decoding acceptance",
            spec_acceptance_targets(sel),
            unit="percentunit",
            max_value=1,
            description="Accepted draft tokens over proposed ones: a windowed ratio of vLLM's counters, and SGLang's "
            "own acceptance gauge per engine (never averaged across engines).",
        ),
        row("Goodput: requests that met every objective at once"),
        timeseries(
            "Good requests/s beside requests/s",
            [target(rate_sum(door, JUDGED), "judged {{model}}"), target(rate_sum(door, GOOD), "good {{model}}")],
            unit="reqps",
            description=FRONT_DOOR + "rate of llm_frontdoor_goodput_judged_requests_total (requests "
            "the answered SLO counts) and of llm_frontdoor_goodput_good_requests_total (of those, the "
            "ones answered that met every objective of the front door's --goodput-spec at once, judged "
            "per request). The gap is requests users got late or not at all.",
        ),
        timeseries(
            "Goodput share",
            [
                target(ratio(rate_sum(door, GOOD), rate_sum(door, JUDGED)), "front door {{model}}"),
                target(GOODPUT_ESTIMATE, "estimate from the engine (at least) {{model}}"),
            ],
            unit="percentunit",
            max_value=1,
            description="Share of requests good on every objective at once. Front door: good over judged "
            "requests, exact per request. Without a front door, an estimate from the engine's "
            f"histograms, marked as one: 1 minus the shares of requests over {TTFT.words} to the first "
            f"token, over {TPOT.words} per output token, and not answered ({TTFT.source}; "
            f"{TPOT.source}), a floor since a request can fail several at once. No data at zero "
            "traffic, never 100 %.",
        ),
        row("Cost (inferwatch cost compile)"),
        timeseries(
            "Dollars per hour: by model, idle and unallocated",
            [
                target(
                    'sum by (model, currency) (llm_cost:model_dollars_per_hour{model=~"$model"})',
                    "{{model}} ({{currency}}/h)",
                ),
                target(
                    'sum by (currency) (llm_cost:idle_dollars_per_hour{namespace=~"$namespace"})',
                    "idle: GPUs of pods with no finished request in 5m ({{currency}}/h)",
                ),
                target(
                    "sum by (currency) (llm_cost:unallocated_dollars_per_hour)",
                    "unallocated: GPUs no pod holds ({{currency}}/h)",
                ),
            ],
            unit="currencyUSD",
            description=COST + "llm_cost:model_dollars_per_hour (the GPUs of the pods "
            "serving each model, priced by the cost file, overhead included), beside what buys nothing: "
            "GPUs allocated to pods that finished no request in 5 minutes, and GPUs no pod holds.",
        ),
        timeseries(
            "Dollars per million tokens",
            [
                target('llm_cost:dollars_per_million_output_tokens{model=~"$model"}', "output {{model}}"),
                target(
                    'llm_cost:dollars_per_million_prompt_tokens_computed{model=~"$model"}', "prompt computed {{model}}"
                ),
            ],
            unit="currencyUSD",
            description=COST + "each model's cost over the last hour divided by the tokens it "
            "generated, and (apart, not a split) by the prompt tokens it computed: cache hits left out "
            "where the engine counts them.",
        ),
        timeseries(
            "Dollars per good request",
            [target('llm_cost:dollars_per_good_request{model=~"$model"}', "{{model}}")],
            unit="currencyUSD",
            description=COST + "each model's cost over the last hour divided by the requests "
            "the front door judged good (goodput): what one useful answer costs.",
        ),
        row("Front door: what users feel"),
        timeseries(
            "TTFT p95: users (front door) and engine",
            [
                target(
                    f"histogram_quantile(0.95, sum by (le, model) (rate({s(m + '_bucket', extra)}[{RATE}])))",
                    f"{who} p95 {{{{model}}}}",
                )
                for who, s, m, extra in (
                    ("users", door, "llm_frontdoor_time_to_first_token_seconds", ""),
                    ("engine", sel, "llm_time_to_first_token_seconds", STREAMED),
                )
            ],
            unit="s",
            description=FRONT_DOOR + "p95 of llm_frontdoor_time_to_first_token_seconds (arrival at the front door "
            "to the first visible token) beside the engine's llm_time_to_first_token_seconds. Users "
            "slower than the engine: hidden reasoning, or time spent before the engine.",
        ),
        timeseries(
            "First chunk and first visible token (hidden reasoning)",
            [
                target(
                    f"histogram_quantile(0.95, sum by (le, model) (rate({door(m + '_bucket')}[{RATE}])))",
                    f"{what} p95 {{{{model}}}}",
                )
                for what, m in (
                    ("first chunk", "llm_frontdoor_time_to_first_chunk_seconds"),
                    ("first visible", "llm_frontdoor_time_to_first_token_seconds"),
                )
            ],
            unit="s",
            description=FRONT_DOOR + "p95 of llm_frontdoor_time_to_first_chunk_seconds (any event, reasoning "
            "included) and llm_frontdoor_time_to_first_token_seconds (content or tool call). The gap "
            "is hidden reasoning: the 'thinking' kind of slow.",
        ),
        timeseries(
            "Outcomes by kind",
            [target(rate_sum(door, "llm_frontdoor_requests_total", by="outcome"), "{{outcome}}")],
            unit="reqps",
            stack=True,
            description=FRONT_DOOR + "rate(llm_frontdoor_requests_total) by outcome: ok, error, rate_limited, "
            "timeout, cancelled, truncated, length, empty, tool_call_invalid, content_filter, "
            "invalid_request.",
        ),
        timeseries(
            "Reasoning tokens per request",
            [
                target(
                    ratio(
                        rate_sum(door, "llm_frontdoor_reasoning_tokens_total"),
                        rate_sum(door, "llm_frontdoor_requests_total", extra=NOT_CANCELLED),
                    ),
                    "{{model}}",
                )
            ],
            unit="short",
            description=FRONT_DOOR + "rate of llm_frontdoor_reasoning_tokens_total over the rate of "
            "llm_frontdoor_requests_total (cancelled ones aside): hidden tokens users wait for.",
        ),
        timeseries(
            "Top callers by requests",
            [target(f"topk(10, {rate_sum(door, 'llm_frontdoor_requests_total', by='caller')})", "{{caller}}")],
            unit="reqps",
            description=FRONT_DOOR + "the 10 busiest callers, rate(llm_frontdoor_requests_total) by caller.",
        ),
        timeseries(
            "Top callers by errors",
            [
                target(
                    f"topk(10, {rate_sum(door, 'llm_frontdoor_requests_total', by='caller', extra=BAD)} > 0)",
                    "{{caller}}",
                )
            ],
            unit="reqps",
            description=FRONT_DOOR + "the 10 callers with the most requests not answered well, "
            "rate(llm_frontdoor_requests_total) by caller for outcomes other than ok, cancelled "
            "and length.",
        ),
        row("Errors and cancellations"),
        timeseries(
            "Responses by status code",
            [target(f"sum by (status_code) (rate({http('llm_http_requests_total')}[{RATE}]))", "{{status_code}}")],
            unit="reqps",
            stack=True,
            description="llm_http_requests_total by status_code (vLLM groups codes as 2xx, "
            "4xx, 5xx; SGLang gives the exact code).",
        ),
        timeseries(
            "Cancellations and aborts",
            [target(rate_sum(sel, "llm_requests_aborted_total"), "{{model}}")],
            unit="reqps",
            description="rate(llm_requests_aborted_total): requests aborted (SGLang counts client "
            "disconnects; vLLM counts engine-side aborts).",
        ),
        row("Front door access log (Loki): slow and failed requests", collapsed=[ACCESS_LOG]),
    ],
)
