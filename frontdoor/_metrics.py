"""The front door's series, in the common vocabulary, labelled `model`, `caller`, `upstream`.

Histogram buckets come from slo/buckets.yaml (`sources: frontdoor`), the table
the SLO compiler checks thresholds against.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from inferwatch.slo._tables import source_buckets

__all__ = ["FrontdoorMetrics", "LABELS", "bounds"]

LABELS = ("model", "caller", "upstream")


def bounds(metric: str) -> list[float]:
    """The histogram bounds of one of inferwatch's own metrics (slo/buckets.yaml, `sources: frontdoor`)."""
    table = source_buckets()["frontdoor"]
    return [float(b) for b in table.families[table.metrics[metric]][0].bounds]


def _histogram(registry, name: str, doc: str) -> Histogram:
    return Histogram(name, doc, LABELS, buckets=bounds(name), registry=registry)


class FrontdoorMetrics:
    """One registry per front door; `record` is called once per metered request."""

    def __init__(self):
        r = self.registry = CollectorRegistry()
        self.requests = Counter("llm_frontdoor_requests", "Requests by how they ended for the user (outcome) and "
                                "the HTTP status the client got (code).", LABELS + ("outcome", "code"), registry=r)
        self.ttft = _histogram(r, "llm_frontdoor_time_to_first_token_seconds",
                               "Arrival to the first visible token (content or tool call, not reasoning); "
                               "streamed requests.")
        self.ttfc = _histogram(r, "llm_frontdoor_time_to_first_chunk_seconds",
                               "Arrival to the first streamed event of any kind (reasoning included).")
        self.tpot = _histogram(r, "llm_frontdoor_time_per_output_token_seconds",
                               "Mean time per visible output token after the first, one sample per streamed "
                               "request with two or more.")
        self.duration = _histogram(r, "llm_frontdoor_request_duration_seconds", "Arrival to the end of the response.")
        self.prompt_tokens = Counter("llm_frontdoor_prompt_tokens", "Prompt tokens (from usage).", LABELS,
                                     registry=r)
        self.output_tokens = Counter("llm_frontdoor_output_tokens", "Generated tokens, reasoning included (usage, "
                                     "else one per streamed event).", LABELS, registry=r)
        self.reasoning_tokens = Counter("llm_frontdoor_reasoning_tokens", "Hidden reasoning tokens (usage "
                                        "details, else one per streamed reasoning event).", LABELS, registry=r)
        self.in_flight = Gauge("llm_frontdoor_requests_in_flight", "Requests between arrival and the end of the "
                               "response.", LABELS, registry=r)

    def record(self, labels: tuple[str, str, str], outcome: str, code: int, times: dict, tokens) -> None:
        """Count one finished request; `times` holds the seconds measured (ttft, ttfc, tpot, duration)."""
        self.requests.labels(*labels, outcome, str(code)).inc()
        for name in ("ttft", "ttfc", "tpot", "duration"):
            if times.get(name) is not None:
                getattr(self, name).labels(*labels).observe(times[name])
        prompt, output, reasoning = tokens
        for counter, value in ((self.prompt_tokens, prompt), (self.output_tokens, output),
                               (self.reasoning_tokens, reasoning)):
            counter.labels(*labels).inc(value or 0)
