"""The front door's series, in the common vocabulary, labelled `model`, `caller`, `upstream`.

Histogram buckets come from slo/buckets.yaml (`sources: frontdoor`), the table
the SLO compiler checks thresholds against.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from inferwatch.slo import source_buckets

__all__ = ["FrontdoorMetrics", "LABELS", "REFUSED", "bounds", "worst_case_series"]

LABELS = ("model", "caller", "upstream")
# llm_frontdoor_refused_total{reason}: what the front door refused or closed before any engine saw it
REFUSED = {
    "connections": "a connection over --max-connections (503, closed)",
    "client_connections": "a connection over --max-client-connections from one address (503, closed)",
    "head_timeout": "a request head unfinished --head-timeout after its first byte (closed)",
    "head_too_large": "a request head over --max-head bytes (closed)",
    "pipelined": "more than --max-pipelined requests sent ahead on one connection, or their bytes over "
    "--max-body plus that many --max-head (closed)",
    "idle_timeout": "a connection with no request for --keepalive-timeout (closed)",
    "path": "a path no --allow-path names (404)",
    "bad_path": "a path with a dot segment, a backslash or a NUL, encoded or not (400)",
    "bad_header": "a header that is not UTF-8 (400)",
}


def bounds(metric: str) -> list[float]:
    """The histogram bounds of one of inferwatch's own metrics (slo/buckets.yaml, `sources: frontdoor`)."""
    table = source_buckets()["frontdoor"]
    found = table.families[table.metrics[metric]][0].bounds
    if found is None:
        raise ValueError(f"slo/buckets.yaml gives the front door's {metric} no bounds")
    return [float(b) for b in found]


HISTOGRAMS = (
    "llm_frontdoor_time_to_first_token_seconds",
    "llm_frontdoor_time_to_first_chunk_seconds",
    "llm_frontdoor_time_per_output_token_seconds",
    "llm_frontdoor_request_duration_seconds",
)


def worst_case_series(models: int, callers: int, upstreams: int, outcome_codes: int) -> int:
    """The most series a front door serves: `models` and `callers` label values (known ones, plus `unknown` and
    `other`, `anonymous` and `other`), `upstreams` (the configured ones plus `none`) and `outcome_codes` distinct
    (outcome, code) pairs. Per (model, caller, upstream): each histogram's buckets, +Inf, _sum and _count, three
    token counters, two goodput counters, the in-flight gauge and one request counter per pair; then one per
    refusal reason."""
    per_labels = sum(len(bounds(name)) + 3 for name in HISTOGRAMS) + 3 + 2 + 1 + outcome_codes
    return models * callers * upstreams * per_labels + len(REFUSED)


def _histogram(registry, name: str, doc: str) -> Histogram:
    return Histogram(name, doc, LABELS, buckets=bounds(name), registry=registry)


class FrontdoorMetrics:
    """One registry per front door; `record` is called once per metered request. `otel`, when given (an
    OtelView, --otlp-endpoint), records the same request into the OpenTelemetry GenAI instruments."""

    def __init__(self, otel=None):
        self.otel = otel
        r = self.registry = CollectorRegistry()
        self.requests = Counter(
            "llm_frontdoor_requests",
            "Requests by how they ended for the user (outcome) and the HTTP status the client got (code).",
            LABELS + ("outcome", "code"),
            registry=r,
        )
        self.ttft = _histogram(
            r,
            "llm_frontdoor_time_to_first_token_seconds",
            "Arrival to the first visible token (content or tool call, not reasoning); streamed requests.",
        )
        self.ttfc = _histogram(
            r,
            "llm_frontdoor_time_to_first_chunk_seconds",
            "Arrival to the first streamed event of any kind (reasoning included).",
        )
        self.tpot = _histogram(
            r,
            "llm_frontdoor_time_per_output_token_seconds",
            "Mean time per visible output token after the first, one sample per streamed request with two or more.",
        )
        self.duration = _histogram(r, "llm_frontdoor_request_duration_seconds", "Arrival to the end of the response.")
        self.prompt_tokens = Counter("llm_frontdoor_prompt_tokens", "Prompt tokens (from usage).", LABELS, registry=r)
        self.output_tokens = Counter(
            "llm_frontdoor_output_tokens",
            "Generated tokens, reasoning included (usage, else one per streamed event).",
            LABELS,
            registry=r,
        )
        self.reasoning_tokens = Counter(
            "llm_frontdoor_reasoning_tokens",
            "Hidden reasoning tokens (usage details, else one per streamed reasoning event).",
            LABELS,
            registry=r,
        )
        self.judged = Counter(
            "llm_frontdoor_goodput_judged_requests",
            "Requests judged against the SLO specs' "
            "objectives (those the answered SLI counts and some objective selects).",
            LABELS,
            registry=r,
        )
        self.good = Counter(
            "llm_frontdoor_goodput_good_requests",
            "Judged requests that were answered and met every objective that selects them (goodput).",
            LABELS,
            registry=r,
        )
        self.in_flight = Gauge(
            "llm_frontdoor_requests_in_flight",
            "Requests between arrival and the end of the response.",
            LABELS,
            registry=r,
        )
        self.refused = Counter(
            "llm_frontdoor_refused",
            "Connections and requests the front door refused or closed before an engine saw them, by reason.",
            ("reason",),
            registry=r,
        )
        for reason in REFUSED:
            self.refused.labels(reason)

    def record(
        self,
        labels: tuple[str, str, str],
        outcome: str,
        code: int,
        times: dict,
        tokens,
        good: bool | None = None,
        operation: str = "chat",
    ) -> None:
        """Count one finished request; `times` holds the seconds measured (ttft, ttfc, tpot, duration), `good` the
        goodput verdict (None: not judged), `operation` its gen_ai.operation.name (chat or text_completion)."""
        self.requests.labels(*labels, outcome, str(code)).inc()
        if good is not None:
            self.judged.labels(*labels).inc()
            self.good.labels(*labels).inc(1 if good else 0)  # present from the first judged request, at 0 too
        for name in ("ttft", "ttfc", "tpot", "duration"):
            if times.get(name) is not None:
                getattr(self, name).labels(*labels).observe(times[name])
        prompt, output, reasoning = tokens
        for counter, value in (
            (self.prompt_tokens, prompt),
            (self.output_tokens, output),
            (self.reasoning_tokens, reasoning),
        ):
            counter.labels(*labels).inc(value or 0)
        if self.otel is not None:
            self.otel.record(labels, operation, outcome, times, tokens)
