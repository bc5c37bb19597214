"""Which kind of slow? One row per kind of slow that `inferwatch triage` names (DESIGN.md), each opening with a
tile whose description says which panels confirm the kind and which rule it out, then those panels side by side.

The kinds, their order, their titles (`summary`) and what their signals show (`signature`) come from
triage/kinds.yaml. A kind's panels are drawn by hand below (HAND_MADE); a kind without them gets a row drawn from
its conditions and the signals they read (triage/signals.yaml): a tile on its first needed condition, one panel per
signal.

Engine histograms have coarse buckets (vLLM's time per output token: 0.01 then 0.025 s; its request latencies
start at 0.3 s; SGLang's TTFT at 0.1 s; token counts on 1-2-5 steps), so every quantile here has the exact mean
(rate of `_sum` over rate of `_count`, summed first) beside it.
"""

from string import Template

from inferwatch.dashboards import (
    ENGINE_FILTERS,
    FRESH,
    GPU_FILTERS,
    RATE,
    STREAMED,
    Selector,
    engine_variables,
    rate_sum,
    ratio,
    row,
    spec_acceptance_targets,
    stat,
    target,
    timeseries,
)
from inferwatch.dashboards import dashboard as make_dashboard
from inferwatch.dashboards._panels import mean
from inferwatch.triage import Condition, Kind, Signal, load_kinds, load_signals

sel = Selector(ENGINE_FILTERS)
gpu = Selector(GPU_FILTERS)
door = Selector(("namespace", "model"))  # the front door's series carry model, caller, upstream
http = Selector(("namespace", "engine", "pod"))  # the API server's counters carry no model label
scrape = Selector(("namespace",))  # scrape health: `up` has the target's labels only
FRONT_DOOR = "Front door only (inferwatch frontdoor): "  # tests/test_dashboards_data.py exempts these
PER_GPU = "{{hostname}} GPU {{gpu}} {{pod}}"
TTFT, TPOT = "llm_time_to_first_token_seconds", "llm_time_per_output_token_seconds"
ITL, QUEUE = "llm_inter_token_latency_seconds", "llm_request_queue_time_seconds"
E2E, PREFILL = "llm_request_duration_seconds", "llm_request_prefill_time_seconds"
PROMPT_LEN, OUTPUT_LEN = "llm_request_prompt_tokens", "llm_request_generation_tokens"
DOOR_TTFT, DOOR_TTFC = "llm_frontdoor_time_to_first_token_seconds", "llm_frontdoor_time_to_first_chunk_seconds"
DOOR_DURATION = "llm_frontdoor_request_duration_seconds"
BAD_FINISH = 'finished_reason=~"length|abort|error|repetition"'  # as the default `answered` SLI counts them


def quantile(histogram: str, q: float, what: str, s: Selector = sel, extra: str = "", by: str = "model"):
    expr = f"histogram_quantile({q}, sum by (le, {by}) (rate({s(histogram + '_bucket', extra)}[{RATE}])))"
    return target(expr, f"{what} p{int(q * 100)} {{{{{by}}}}}")


def with_mean(histogram: str, what: str, s: Selector = sel, extra: str = "", qs=(0.95,)) -> list:
    """The quantiles of a histogram and, beside them, its exact mean: coarse buckets hide what the mean shows."""
    return [quantile(histogram, q, what, s, extra) for q in qs] + [
        target(mean(s, histogram, extra=extra), f"{what} mean {{{{model}}}}")
    ]


def guide(kind: Kind, confirm: list[tuple[str, str]], rule_out: list[tuple[str, str]], note: str = "") -> str:
    """The row's description: what the kind's signals show (kinds.yaml), then which panels (by title, in quotes)
    confirm the kind and which rule it out."""

    def panels(items):
        return "; ".join(f'"{title}" {reading}' for title, reading in items)

    text = f"{kind.name}: {kind.signature or kind.summary}. Confirmed by: {panels(confirm)}."
    return text + (f" Ruled out by: {panels(rule_out)}." if rule_out else "") + (f" {note}" if note else "")


HOUR = "1h"  # a relative tile compares the last FRESH with the hour before it (triage's --baseline auto fallback)


def tile(title: str, expr: str, unit: str, description: str, lit: float, low: bool = False):
    """The first panel of a kind's row: the kind's headline signal now (rates over the last 5 minutes, `live`),
    and the row's guide. The tile turns orange past `lit` (under it when `low`); the description says why there."""
    thresholds = ((lit, "blue"),) if low else ((lit, "orange"),)
    return stat(
        title,
        expr,
        unit=unit,
        description=description,
        width=4,
        height=8,
        thresholds=thresholds,
        base_color="orange" if low else "blue",
    )


def before(expr: str) -> str:
    """`expr` (written over the last FRESH) over the hour before those 5 minutes."""
    return expr.replace(f"[{FRESH}]", f"[{HOUR}] offset {FRESH}")


def change(now: str, floor: str = "") -> str:
    """`now` over the same expression in the hour before: 1 is unchanged, 2 twice as much. Until there is an hour
    before (a new model), the last hour including now. The earlier value is at least `floor` when given (a
    count that was 0 before), else must be above 0."""
    hour = now.replace(f"[{FRESH}]", f"[{HOUR}]")
    earlier = f"(\n  {before(now)}\n  or\n  {hour}\n)"
    earlier = f"clamp_min{earlier}, {floor})".replace("clamp_min(", "clamp_min((", 1) if floor else f"({earlier} > 0)"
    return f"(\n  {now}\n)\n/ on (model)\n{earlier}"


def answered(window: str) -> str:
    """Engine answered share per model: 1 - bad / finished, sums over sums. A bad series that is absent counts 0
    only where finished requests exist, so the share is no data (never 100 %) without them."""
    finished = rate_sum(sel, "llm_requests_finished_total", window=window)
    bad_finish = rate_sum(sel, "llm_requests_finished_total", extra=BAD_FINISH, window=window)
    sglang_aborts = rate_sum(sel, "llm_requests_aborted_total", extra='engine="sglang"', window=window)
    return f"1 - (\n  ({bad_finish} or 0 * {finished})\n  + ({sglang_aborts} or 0 * {finished})\n)\n/\n({finished} > 0)"


def live(expr: str, *series: str) -> str:
    """A tile's rate over the last 5 minutes, kept only for models whose `series` are still scraped: a range
    keeps a vanished engine's old samples for its whole length, the plain selector drops them at once."""
    return f"({expr})" + "".join(f"\nand on (model)\ngroup by (model) ({one})" for one in series)


def mean_now(histogram: str) -> str:
    """A histogram's mean over the last 5 minutes, for engines still scraped."""
    return live(mean(sel, histogram, window=FRESH), sel(histogram + "_count"))


def mean_change(histogram: str) -> str:
    """A histogram's mean over the last 5 minutes against the hour before, for engines still scraped."""
    return live(change(mean(sel, histogram, window=FRESH)), sel(histogram + "_count"))


def reasoning_per_request(window: str = FRESH) -> str:
    return ratio(
        rate_sum(door, "llm_frontdoor_reasoning_tokens_total", window=window),
        rate_sum(door, "llm_frontdoor_requests_total", extra='outcome!="cancelled"', window=window),
    )


def visible_output() -> str:
    """Output tokens per request less the front door's reasoning tokens per request where a front door counts
    them (an engine's output tokens include the hidden reasoning: thinking is not longer answers)."""
    engine = mean(sel, OUTPUT_LEN, window=FRESH)
    return f"(\n  {engine}\n  - on (model)\n  {reasoning_per_request()}\n)\nor\n{engine}"


def acceptance_now() -> str:
    """vLLM's counters as a ratio over the last 5 minutes, else the lowest engine's SGLang gauge."""
    counters = ratio(
        rate_sum(sel, "llm_spec_decode_accepted_tokens_total", window=FRESH),
        rate_sum(sel, "llm_spec_decode_draft_tokens_total", window=FRESH),
    )
    gauge = sel("llm_spec_decode_acceptance_ratio")
    return f"{live(counters, sel('llm_spec_decode_draft_tokens_total'))}\nor\nmin by (model) ({gauge})"


def acceptance_change() -> str:
    """The acceptance over the last 5 minutes against the hour before: vLLM's counters, else SGLang's gauge
    averaged over time, lowest engine."""
    counters = ratio(
        rate_sum(sel, "llm_spec_decode_accepted_tokens_total", window=FRESH),
        rate_sum(sel, "llm_spec_decode_draft_tokens_total", window=FRESH),
    )
    gauge = f"min by (model) (avg_over_time({sel('llm_spec_decode_acceptance_ratio')}[{FRESH}]))"
    return (
        f"{live(change(counters), sel('llm_spec_decode_draft_tokens_total'))}\nor\n"
        f"{live(change(gauge), sel('llm_spec_decode_acceptance_ratio'))}"
    )


RUNNING = sel("llm_requests_running")
UTIL, SM_ACTIVE = gpu("gpu_utilization_ratio"), gpu("gpu_sm_active_ratio")
ENGINE_PODS = f" and on (namespace, pod) group by (namespace, pod) ({RUNNING})"  # GPUs of the models' pods


def busy_idle(only: str = "") -> str:
    """How many GPUs show GPU-Util of at least 0.9 with SM active under 0.5 (0 where both are exported and none
    does), `only` narrowing the GPUs."""
    return (
        f"(\n  count(({UTIL} >= 0.9) and on (uuid) ({SM_ACTIVE} < 0.5){only})\n  or\n"
        f"  0 * count({UTIL} and on (uuid) {SM_ACTIVE}{only})\n)"
    )


LLM_SERIES = sel("", '__name__=~"llm_.+", __name__!~".+_created"')  # every vocabulary series of the engines


def _queueing(kind: Kind) -> list:
    return [
        tile(
            "Waiting (5-minute average)",
            live(
                f"sum by (model) (avg_over_time({sel('llm_requests_waiting')}[{FRESH}]))", sel("llm_requests_waiting")
            ),
            "short",
            lit=1,
            description=guide(
                kind,
                [
                    ("Waiting, and running against the cap", "shows waiting above 0 while running sits at the cap"),
                    ("Queue time: p95 and mean", "rises"),
                    ("Engine TTFT: p95 and mean", "rises by about as much as the queue time"),
                ],
                [
                    ("Waiting (5-minute average)", "under 1"),
                    ("Queue time: p95 and mean", "flat while TTFT rises (then see long-prompts, prefix-cache-loss)"),
                    (
                        "Time per output token: p95 and mean",
                        "rising as well (each step is slower: kv-pressure, slow-decode)",
                    ),
                ],
                "kv-pressure often brings queueing with it: a full KV cache admits fewer requests. The tile turns "
                "orange at one request waiting on average over the last 5 minutes: a steady queue, not a burst.",
            ),
        ),
        timeseries(
            "Waiting, and running against the cap",
            [
                target(f"sum by (model) ({sel('llm_requests_waiting')})", "waiting {{model}}"),
                target(f"sum by (model) ({RUNNING})", "running {{model}}"),
                target('sum by (model) (llm_max_running_requests{model=~"$model"})', "cap {{model}}"),
            ],
            width=7,
            description="llm_requests_waiting and llm_requests_running per model, against the concurrency cap "
            "(llm_max_running_requests, from the exporter's configuration).",
        ),
        timeseries(
            "Queue time: p95 and mean",
            with_mean(QUEUE, "queue"),
            unit="s",
            width=7,
            description="p95 and mean of llm_request_queue_time_seconds: time waiting for a slot. vLLM's "
            "buckets start at 0.3 s, so the p95 cannot show a wait below that; the mean can.",
        ),
        timeseries(
            "Engine TTFT: p95 and mean",
            with_mean(TTFT, "TTFT", extra=STREAMED),
            unit="s",
            width=6,
            description="p95 and mean of llm_time_to_first_token_seconds (engine-side, arrival to first "
            "token, queue time included; SGLang's non-streamed requests left out). SGLang's "
            "buckets start at 0.1 s and vLLM's jump from 0.1 to 0.25 s: read the mean.",
        ),
    ]


def _long_prompts(kind: Kind) -> list:
    return [
        tile(
            "Prompt tokens per request: now / the hour before",
            mean_change(PROMPT_LEN),
            "short",
            lit=1.5,
            description=guide(
                kind,
                [
                    ("Prompt tokens per request: p50, p95 and mean", "rises"),
                    ("Prefill: TTFT and prefill time", "rises with it"),
                ],
                [
                    ("Prompt tokens per request: p50, p95 and mean", "flat"),
                    ("Queue time: p95 and mean", "up by as much as TTFT (queueing explains the wait)"),
                ],
                "Longer prompts also lower the prefix-cache hit ratio with the cache intact (see prefix-cache-loss). "
                "The tile is the mean prompt length over the last 5 minutes over the hour before; orange at 1.5 "
                "(prompts half as long again).",
            ),
        ),
        timeseries(
            "Prompt tokens per request: p50, p95 and mean",
            with_mean(PROMPT_LEN, "prompt", qs=(0.5, 0.95)),
            width=10,
            description="llm_request_prompt_tokens per finished request. Its buckets step 1-2-5 "
            "(vLLM) or by hundreds (SGLang): the mean moves where a quantile sticks "
            "to a bound.",
        ),
        timeseries(
            "Prefill: TTFT and prefill time",
            with_mean(TTFT, "TTFT", extra=STREAMED) + [target(mean(sel, PREFILL), "prefill mean {{model}}")],
            unit="s",
            width=10,
            description="Engine TTFT (p95 and mean of llm_time_to_first_token_seconds, queue included) "
            "beside the mean of llm_request_prefill_time_seconds (first scheduling to first "
            "token, queue excluded; vLLM only: SGLang exports no prefill time).",
        ),
    ]


def _prefix_cache_loss(kind: Kind) -> list:
    return [
        tile(
            "Prefix-cache hit tokens per request: now / the hour before",
            live(
                change(
                    ratio(
                        rate_sum(sel, "llm_prefix_cache_hit_tokens_total", window=FRESH),
                        rate_sum(sel, "llm_request_prompt_tokens_count", window=FRESH),
                    )
                ),
                sel("llm_prefix_cache_queried_tokens_total"),
            ),
            "short",
            lit=0.5,
            low=True,
            description=guide(
                kind,
                [
                    ("Prefix-cache hit ratio", 'collapses while "Prompt length beside the hit ratio" stays flat'),
                    (
                        "Prefix-cache tokens: hit and queried",
                        "shows hit tokens per second falling while queried tokens stay",
                    ),
                    ("Prefill: TTFT and prefill time", "rises"),
                ],
                [
                    (
                        "Prompt length beside the hit ratio",
                        "rising as the ratio falls (long-prompts: the cache is intact)",
                    ),
                    ("Prefix-cache tokens: hit and queried", "shows hit tokens per second steady"),
                ],
                "The tile is prompt tokens served from the cache per request over the last 5 minutes, over the hour "
                "before: longer prompts lower the hit ratio but not the hits per request (the shared prefix still "
                "hits), a lost cache lowers both. Orange under 0.5 (half the cached tokens gone).",
            ),
        ),
        timeseries(
            "Prefix-cache hit ratio",
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
            width=7,
            description="Windowed ratio of llm_prefix_cache_hit_tokens_total to llm_prefix_cache_queried_tokens_total "
            "(not SGLang's last-batch cache_hit_rate gauge).",
        ),
        timeseries(
            "Prompt length beside the hit ratio",
            with_mean(PROMPT_LEN, "prompt"),
            width=6,
            description="p95 and mean of llm_request_prompt_tokens: the hit ratio also falls when prompts "
            "grow longer with the cache intact (more new tokens per request).",
        ),
        timeseries(
            "Prefix-cache tokens: hit and queried",
            [
                target(rate_sum(sel, "llm_prefix_cache_hit_tokens_total"), "hit {{model}}"),
                target(rate_sum(sel, "llm_prefix_cache_queried_tokens_total"), "queried {{model}}"),
            ],
            width=7,
            description="Prompt tokens per second served from the prefix cache and looked up in it. "
            "Cache loss: hits fall, queries stay. Longer prompts: queries rise, hits stay.",
        ),
    ]


def _kv_pressure(kind: Kind) -> list:
    return [
        tile(
            "Preemptions per 100 requests",
            live(
                ratio(
                    "100 * " + rate_sum(sel, "llm_preemptions_total", window=FRESH),
                    rate_sum(sel, "llm_requests_finished_total", window=FRESH),
                ),
                sel("llm_preemptions_total"),
            ),
            "short",
            lit=1,
            description=guide(
                kind,
                [
                    ("KV-cache usage", "near 1"),
                    ("Preemptions per second", "above 0"),
                    ("Time per output token: p95 and mean", "rises"),
                    ("End-to-end time: p95 and mean", "rises at the same output length"),
                ],
                [("Preemptions per second", 'at 0 while "KV-cache usage" stays well below 1')],
                "vLLM counts evictable cached blocks as free, so usage is what running requests hold. The "
                "tile is preemptions (SGLang: retractions) per 100 finished requests over the last 5 minutes; "
                "orange at 1: a healthy engine preempts almost never, one request in a hundred redoing its "
                "prefill is the cache too small for the load.",
            ),
        ),
        timeseries(
            "KV-cache usage",
            [target(f"max by (model, pod) ({sel('llm_kv_cache_usage_ratio')})", "{{model}} {{pod}}")],
            unit="percentunit",
            max_value=1,
            width=10,
            description="llm_kv_cache_usage_ratio per engine, never averaged across engines.",
        ),
        timeseries(
            "Preemptions per second",
            [target(rate_sum(sel, "llm_preemptions_total"), "{{model}}")],
            unit="ops",
            width=10,
            description="Rate of llm_preemptions_total (vLLM preemptions, SGLang retractions), beside the KV "
            "usage that causes them.",
        ),
    ]


def _slow_decode(kind: Kind) -> list:
    return [
        tile(
            "Time per output token (mean): now / the hour before",
            mean_change(TPOT),
            "short",
            lit=1.5,
            description=guide(
                kind,
                [
                    (
                        "Time per output token: p95 and mean",
                        "rises (the mean first: the p95 can stay under vLLM's 0.025 s bound)",
                    ),
                    ("Inter-token latency: p95 and mean", "rises"),
                    ("Batch size (running requests)", "stays where it was"),
                ],
                [
                    ("Batch size (running requests)", "grew (a bigger batch makes every step slower: load)"),
                    ("Preemptions per second", "above 0 (kv-pressure)"),
                    ("Speculative-decoding acceptance", "falling (spec-decode-collapse)"),
                    (
                        "GPU-Util against SM and tensor activity",
                        "shows SM activity far below GPU-Util (gpu-not-computing)",
                    ),
                ],
                "The tile is the mean time per output token over the last 5 minutes over the hour before (the mean: "
                "vLLM's p95 cannot move below 25 ms); orange at 1.5, each token half as slow again. "
                "spec-decode-collapse and gpu-not-computing light it too: their own tiles tell them apart.",
            ),
        ),
        timeseries(
            "Time per output token: p95 and mean",
            with_mean(TPOT, "TPOT"),
            unit="s",
            width=7,
            description="p95 and mean of llm_time_per_output_token_seconds (one sample per request). vLLM's "
            "buckets are 0.01 then 0.025 s: the p95 stays at 0.024 while the time users feel "
            "doubles below 25 ms; the mean shows it.",
        ),
        timeseries(
            "Inter-token latency: p95 and mean",
            with_mean(ITL, "ITL"),
            unit="s",
            width=7,
            description="p95 and mean of llm_inter_token_latency_seconds (vLLM samples per step, SGLang per "
            "token), on the same coarse buckets as TPOT.",
        ),
        timeseries(
            "Batch size (running requests)",
            [target(f"sum by (model, pod) ({RUNNING})", "running {{model}} {{pod}}")],
            width=6,
            description="llm_requests_running per engine: the batch each decode step serves.",
        ),
    ]


def _spec_decode_collapse(kind: Kind) -> list:
    return [
        tile(
            "Draft acceptance: now / the hour before",
            acceptance_change(),
            "short",
            lit=0.7,
            low=True,
            description=guide(
                kind,
                [
                    ("Speculative-decoding acceptance", "falls"),
                    ("Tokens accepted per draft round", "falls"),
                    ("TPOT beside the acceptance: p95 and mean", "rises at the same time"),
                ],
                [("Speculative-decoding acceptance", "steady, or no series at all (the engine does not draft)")],
                "SGLang exports only its last batch's acceptance (averaged over time, lowest engine). The tile is "
                "the acceptance over the last 5 minutes over the hour before; orange under 0.7 (a drop of 30 %: a "
                "drafter that still earns its keep moves less).",
            ),
        ),
        timeseries(
            "Speculative-decoding acceptance",
            spec_acceptance_targets(sel),
            unit="percentunit",
            max_value=1,
            width=7,
            description="Accepted draft tokens over proposed ones: a windowed ratio of vLLM's counters, and SGLang's "
            "last-batch gauge per engine (never averaged across engines).",
        ),
        timeseries(
            "TPOT beside the acceptance: p95 and mean",
            with_mean(TPOT, "TPOT"),
            unit="s",
            width=7,
            description="p95 and mean of llm_time_per_output_token_seconds: fewer accepted draft tokens "
            "mean more decode steps per token.",
        ),
        timeseries(
            "Tokens accepted per draft round",
            [
                target(
                    ratio(
                        rate_sum(sel, "llm_spec_decode_accepted_tokens_total"),
                        rate_sum(sel, "llm_spec_decode_drafts_total"),
                    ),
                    "{{model}}",
                )
            ],
            width=6,
            description="vLLM only: the rate of llm_spec_decode_accepted_tokens_total over the rate of "
            "llm_spec_decode_drafts_total, accepted tokens per draft round.",
        ),
    ]


def _thinking(kind: Kind) -> list:
    return [
        tile(
            "Reasoning tokens per request: now / the hour before",
            live(change(reasoning_per_request(), floor="1"), door("llm_frontdoor_requests_total")),
            "short",
            lit=1.5,
            description=FRONT_DOOR
            + guide(
                kind,
                [
                    (
                        "TTFT at the front door and the engine",
                        "shows first visible late while first chunk and engine TTFT stay",
                    ),
                    ("Reasoning tokens per request", "rises"),
                ],
                [
                    (
                        "TTFT at the front door and the engine",
                        "shows the first chunk late too (the wait is before "
                        "any event: queueing, not-the-engine) or engine TTFT up",
                    ),
                    ("Reasoning tokens per request", "flat"),
                ],
                "The tile is reasoning tokens per request over the last 5 minutes over the hour before (counted "
                "as at least 1, so a model that did not reason shows its new count); orange at 1.5.",
            ),
        ),
        timeseries(
            "TTFT at the front door and the engine",
            with_mean(DOOR_TTFT, "first visible", door)
            + with_mean(DOOR_TTFC, "first chunk", door)
            + with_mean(TTFT, "engine", extra=STREAMED),
            unit="s",
            width=12,
            description="p95 and mean of llm_frontdoor_time_to_first_token_seconds (first visible token), "
            "llm_frontdoor_time_to_first_chunk_seconds (any event, reasoning included) and the "
            "engine's llm_time_to_first_token_seconds. The front-door series exist only behind "
            "an inferwatch frontdoor.",
        ),
        timeseries(
            "Reasoning tokens per request",
            [
                target(
                    ratio(
                        rate_sum(door, "llm_frontdoor_reasoning_tokens_total"),
                        rate_sum(door, "llm_frontdoor_requests_total", extra='outcome!="cancelled"'),
                    ),
                    "{{model}}",
                )
            ],
            width=8,
            description=FRONT_DOOR + "rate of llm_frontdoor_reasoning_tokens_total over the rate of "
            "llm_frontdoor_requests_total (cancelled ones aside).",
        ),
    ]


def _long_outputs(kind: Kind) -> list:
    return [
        tile(
            "Visible output tokens per request: now / the hour before",
            live(change(visible_output()), sel(OUTPUT_LEN + "_count")),
            "short",
            lit=1.5,
            description=guide(
                kind,
                [
                    ("Output tokens per request: p50, p95 and mean", "rises"),
                    ("End-to-end time: p95 and mean", "rises with it"),
                ],
                [
                    ("Engine TTFT: p95 and mean", "rising"),
                    ("Time per output token: p95 and mean", "rising (the engine is slower, not the answers longer)"),
                    ("Truncated (length) share", "rising (answers hit the limit: errors)"),
                    ("Reasoning tokens per request", "rising (the extra tokens are hidden reasoning: thinking)"),
                ],
                "The tile is output tokens per request less the front door's reasoning tokens per request (where a "
                "front door counts them) over the last 5 minutes, over the hour before; orange at 1.5.",
            ),
        ),
        timeseries(
            "Output tokens per request: p50, p95 and mean",
            with_mean(OUTPUT_LEN, "output", qs=(0.5, 0.95)),
            width=10,
            description="llm_request_generation_tokens per finished request (1-2-5 buckets in vLLM: read the mean).",
        ),
        timeseries(
            "End-to-end time: p95 and mean",
            with_mean(E2E, "e2e"),
            unit="s",
            width=10,
            description="p95 and mean of llm_request_duration_seconds; vLLM's buckets start at 0.3 s.",
        ),
    ]


def _gpu_not_computing(kind: Kind) -> list:
    return [
        tile(
            "GPUs busy, not computing",
            f"{busy_idle(ENGINE_PODS)}\nor\n{busy_idle()}",
            "short",
            lit=1,
            description=guide(
                kind,
                [
                    (
                        "GPU-Util against SM and tensor activity",
                        "shows GPU-Util near 1 while SM active and tensor activity fall",
                    ),
                    ("Output token throughput", "falls"),
                ],
                [
                    (
                        "GPU-Util against SM and tensor activity",
                        "shows SM activity following GPU-Util (the GPU computes) or GPU-Util low (idle)",
                    )
                ],
                "The tile counts GPUs with GPU-Util at least 0.9 and SM active under 0.5; without both series "
                "(dcgm-exporter's profiling fields off) it reads no data, never 0. It counts the GPUs whose pod "
                "label names an engine pod of the selected models, or, where no GPU series does (GPUs not "
                "attributed to pods), every GPU of the selected namespaces and pods; orange at 1.",
            ),
        ),
        timeseries(
            "GPU-Util against SM and tensor activity",
            [
                target(gpu("gpu_utilization_ratio"), "util " + PER_GPU),
                target(gpu("gpu_sm_active_ratio"), "SM active " + PER_GPU),
                target(gpu("gpu_tensor_active_ratio"), "tensor " + PER_GPU),
            ],
            unit="percentunit",
            max_value=1,
            width=12,
            description="Per GPU: gpu_utilization_ratio (a kernel ran) against gpu_sm_active_ratio and "
            "gpu_tensor_active_ratio (the SMs worked). A wide gap is the GPU waiting (small batches, "
            "host stalls, synchronisation) instead of computing.",
        ),
        timeseries(
            "Output token throughput",
            [target(rate_sum(sel, "llm_generation_tokens_total", by="model, pod"), "{{model}} {{pod}}")],
            width=8,
            description="Output tokens per second per engine (rate of llm_generation_tokens_total), beside the GPUs "
            "of the same pods.",
        ),
    ]


def _errors(kind: Kind) -> list:
    return [
        tile(
            "Answered share now (engine)",
            live(answered(FRESH), sel("llm_requests_finished_total")),
            "percentunit",
            lit=0.95,
            low=True,
            description=guide(
                kind,
                [
                    ("Answered share: engine and front door", "falls"),
                    ("Finish reasons", "shows error, abort or length rising"),
                    ("Truncated (length) share", "rises"),
                    ("Front-door outcomes other than ok", "rises (tool_call_invalid, empty, truncated, error)"),
                    ("Responses by status code and aborts", "shows 5xx or aborts rising"),
                ],
                [("Answered share: engine and front door", "steady")],
                "The tile is the share over the last 5 minutes; orange under 95 % (one request in twenty not "
                "answered), whatever the objective: the SLO dashboard measures against it.",
            ),
        ),
        timeseries(
            "Answered share: engine and front door",
            [
                target(answered(RATE), "engine {{model}}"),
                target(
                    ratio(
                        rate_sum(door, "llm_frontdoor_requests_total", extra='outcome="ok"'),
                        rate_sum(door, "llm_frontdoor_requests_total", extra='outcome!~"cancelled|invalid_request"'),
                    ),
                    "front door {{model}}",
                ),
            ],
            unit="percentunit",
            max_value=1,
            width=10,
            description="Engine: finished requests without an error, abort, repetition or length stop (vLLM's "
            "finish reasons; SGLang's aborts), over finished requests. Front door: outcome ok over "
            "all outcomes but cancelled and invalid_request. Sums over sums; no data, never 100 %, "
            "without requests.",
        ),
        timeseries(
            "Finish reasons",
            [target(rate_sum(sel, "llm_requests_finished_total", by="finished_reason"), "{{finished_reason}}")],
            unit="reqps",
            stack=True,
            width=10,
            description="vLLM only: SGLang reports no finish reason. rate(llm_requests_finished_total) by "
            "finished_reason.",
        ),
        timeseries(
            "Truncated (length) share",
            [
                target(
                    ratio(
                        rate_sum(sel, "llm_requests_finished_total", extra='finished_reason="length"'),
                        rate_sum(sel, "llm_requests_finished_total"),
                    ),
                    "engine {{model}}",
                ),
                target(
                    ratio(
                        rate_sum(door, "llm_frontdoor_requests_total", extra='outcome=~"length|truncated"'),
                        rate_sum(door, "llm_frontdoor_requests_total", extra='outcome!="cancelled"'),
                    ),
                    "front door {{model}}",
                ),
            ],
            unit="percentunit",
            max_value=1,
            width=8,
            description="vLLM only (SGLang reports no finish reason): finished requests cut at the length limit; "
            "at the front door, outcomes length and truncated (a broken stream) over all but "
            "cancelled.",
        ),
        timeseries(
            "Front-door outcomes other than ok",
            [
                target(
                    rate_sum(door, "llm_frontdoor_requests_total", by="outcome", extra='outcome!="ok"'), "{{outcome}}"
                )
            ],
            unit="reqps",
            stack=True,
            width=8,
            description=FRONT_DOOR + "rate(llm_frontdoor_requests_total) by outcome, ok aside: error, "
            "rate_limited, timeout, cancelled, truncated, length, empty, "
            "tool_call_invalid, content_filter, invalid_request.",
        ),
        timeseries(
            "Responses by status code and aborts",
            [
                target(f"sum by (status_code) (rate({http('llm_http_requests_total')}[{RATE}]))", "{{status_code}}"),
                target(rate_sum(sel, "llm_requests_aborted_total"), "aborted {{model}}"),
            ],
            unit="reqps",
            width=8,
            description="llm_http_requests_total by status_code (vLLM groups codes as 2xx, 4xx, 5xx) and the "
            "rate of llm_requests_aborted_total.",
        ),
    ]


def _not_the_engine(kind: Kind) -> list:
    return [
        tile(
            "Front door's first chunk minus engine TTFT (mean)",
            live(
                f"({mean(door, DOOR_TTFC, window=FRESH)})\n- on (model)\n"
                f"({mean(sel, TTFT, extra=STREAMED, window=FRESH)})",
                door(DOOR_TTFC + "_count"),
                sel(TTFT + "_count", STREAMED),
            ),
            "s",
            lit=0.25,
            description=FRONT_DOOR
            + guide(
                kind,
                [
                    (
                        "TTFT at the front door and the engine",
                        "shows first chunk and first visible rising while engine TTFT stays",
                    ),
                    ("Request duration at the front door and the engine", "shows the front door rising alone"),
                ],
                [
                    ("Engine TTFT: p95 and mean", "rising"),
                    ("Queue time: p95 and mean", "rising"),
                    ("Time per output token: p95 and mean", "rising (the engine is slower)"),
                    (
                        "TTFT at the front door and the engine",
                        "shows the first chunk on time and only the first visible token late (thinking)",
                    ),
                ],
                "The tile is the mean time a request spends outside the engine before its first event (network, "
                "router, proxy): the two means count slightly different requests, so a few milliseconds either "
                "way mean nothing. Orange at 0.25 s, a wait users notice.",
            ),
        ),
        timeseries(
            "Request duration at the front door and the engine",
            with_mean(DOOR_DURATION, "front door", door) + with_mean(E2E, "engine"),
            unit="s",
            width=20,
            description="p95 and mean of llm_frontdoor_request_duration_seconds (arrival at the front door "
            "to the end of the response) and the engine's llm_request_duration_seconds. The "
            "front-door series exist only behind an inferwatch frontdoor.",
        ),
    ]


def _missing_data(kind: Kind) -> list:
    return [
        tile(
            "Engine series gone",
            f"count(\n  group by (model, pod) (last_over_time({RUNNING}[15m]))\n  unless "
            f"group by (model, pod) ({RUNNING} and present_over_time({RUNNING}[2m]))\n)"
            f"\nor\n0 * count({RUNNING})",
            "short",
            lit=1,
            description=guide(
                kind,
                [
                    (
                        "Engine series gone",
                        "above 0 (engines seen in the last 15 minutes without a sample now or in "
                        "the last 2 minutes; a pod replaced in a rollout counts until then), or no "
                        "data",
                    ),
                    ("Targets up", "at 0 for a scrape target or an exporter target"),
                    ("Age of the newest engine sample", "growing, or lines that end"),
                    ("Engine signals present per model", "dropping (part of the series gone)"),
                ],
                [
                    ("Targets up", "at 1 everywhere"),
                    ("Engine signals present per model", "steady"),
                    ("Age of the newest engine sample", "about one scrape interval"),
                ],
                "An empty panel anywhere on this dashboard, for a model that serves traffic, is missing data too.",
            ),
        ),
        timeseries(
            "Targets up",
            [
                target("max by (job, instance, target) (inferwatch_exporter_target_up)", "exporter target {{target}}"),
                target(
                    f"min by (job, instance) ({scrape('up')})\nand on (job, instance)\n"
                    f"group by (job, instance) (last_over_time({RUNNING}[1h]))",
                    "scrape {{job}} {{instance}}",
                ),
            ],
            max_value=1,
            width=7,
            description="inferwatch_exporter_target_up (1 when the exporter's target answered its last fetch) and "
            "Prometheus' up for the scrape targets that served engine series in the last hour.",
        ),
        timeseries(
            "Age of the newest engine sample",
            [target(f"time() - max by (model, pod) (timestamp({RUNNING}))", "{{model}} {{pod}}")],
            unit="s",
            width=7,
            description="Seconds since the newest sample of llm_requests_running per engine: about one scrape "
            "interval when fresh; a line that ends is an engine whose series went stale.",
        ),
        timeseries(
            "Engine signals present per model",
            [target(f"count by (model) (group by (model, __name__) ({LLM_SERIES}))", "{{model}}")],
            width=6,
            description="How many llm_ series names each model has now: a drop is part of the engine's series "
            "gone (a renamed metric, a disabled feature, a failing mapping).",
        ),
    ]


# the rows drawn by hand, by kind; a kind of kinds.yaml without one gets a row drawn from its signals
HAND_MADE = {
    "queueing": _queueing,
    "long-prompts": _long_prompts,
    "prefix-cache-loss": _prefix_cache_loss,
    "kv-pressure": _kv_pressure,
    "slow-decode": _slow_decode,
    "spec-decode-collapse": _spec_decode_collapse,
    "thinking": _thinking,
    "long-outputs": _long_outputs,
    "gpu-not-computing": _gpu_not_computing,
    "errors": _errors,
    "not-the-engine": _not_the_engine,
    "missing-data": _missing_data,
}

# A row drawn from kinds.yaml and signals.yaml, for a kind with no hand-made row. Triage's templates read for one
# dashboard query per model: `$sel` the dashboard's namespace and model, pods summed into their model.
SIGNAL_SEL = 'namespace=~"$namespace", model=~"$model"'
UNITS = {"s": "s", "ratio": "percentunit"}
READINGS = {
    "up": "rises {:g}x or more",
    "down": "falls {:g}x or more",
    "flat": "stays within {:.0%}",
    "rise": "rises by {:g} or more",
    "fall": "falls by {:g} or more",
    "incident>=": "reads {:g} or more",
    "incident<=": "reads {:g} or less",
    "baseline>=": "read {:g} or more the hour before",
    "baseline<=": "read {:g} or less the hour before",
    "missing": "has no data",
}


def signal_expr(signal: Signal, window: str) -> str:
    """A triage signal per model over `window`: its value, its num over its den (sums over sums), its quantile."""
    values = {"sel": SIGNAL_SEL, "by": "model", "unit": "model", "w": window, "fresh": window}
    running = f'group by (cluster, namespace, pod, model) (last_over_time(llm_requests_running{{{SIGNAL_SEL}, pod!=""'
    for key, cluster in (("pods", ""), ("pods_unclustered", ', cluster=""'), ("pods_clustered", ', cluster!=""')):
        values[key] = f"{running}{cluster}}}[{window}]))"
    parts = {part: Template(text).substitute(values) for part, text in signal.queries}
    if "num" in parts:
        return ratio(parts["num"], parts["den"])
    if "buckets" in parts:
        return f"histogram_quantile({signal.q}, {parts['buckets']})"
    return parts.get("value") or parts["presence"]


def signal_title(signal: Signal) -> str:
    return signal.help[:1].upper() + signal.help[1:]


def headline(kind: Kind) -> Condition:
    """The condition a drawn row's tile shows: the first that a value can light, needed ones first."""
    clauses = sorted(kind.clauses, key=lambda clause: not clause.need)
    drawable = [c for clause in clauses for c in clause.conditions if c.op in ("up", "down", "rise", "fall")]
    drawable += [c for clause in clauses for c in clause.conditions if c.op in ("incident>=", "incident<=")]
    if not drawable:
        raise ValueError(f"kinds.yaml: {kind.name}: no condition a tile can show (up, down, rise, fall or incident)")
    return drawable[0]


def drawn_tile(kind: Kind, condition: Condition, signal: Signal, note: str, confirm: list) -> object:
    now = signal_expr(signal, FRESH)
    if condition.op in ("up", "down"):
        expr, title, unit = change(now), f"{signal_title(signal)}: now / the hour before", "short"
        lit, low = (condition.value, False) if condition.op == "up" else (1 / condition.value, True)
    elif condition.op in ("rise", "fall"):
        expr, title = f"(\n  {now}\n)\n- on (model)\n(\n  {before(now)}\n)", f"{signal_title(signal)}: change"
        unit = UNITS.get(signal.unit, "short")
        lit, low = (condition.value, False) if condition.op == "rise" else (-condition.value, True)
    else:
        expr, title, unit = now, f"{signal_title(signal)} (last {FRESH})", UNITS.get(signal.unit, "short")
        lit, low = condition.value, condition.op == "incident<="
    return tile(title, expr, unit, lit=lit, low=low, description=guide(kind, confirm, [], note))


def drawn_row(kind: Kind, signals: dict[str, Signal]) -> list:
    """A tile on the kind's headline condition, then one panel per signal its conditions read."""
    conditions = [c for clause in kind.clauses for c in clause.conditions if c.signal in signals]
    shown = list(dict.fromkeys(c.signal for c in conditions))
    confirm = [(signal_title(signals[c.signal]), READINGS[c.op].format(c.value)) for c in conditions]
    condition = headline(kind)
    note = f"Drawn from triage/kinds.yaml: the tile is {condition.text} (orange where triage would count it)."
    width = max(5, 20 // max(len(shown), 1))
    return [drawn_tile(kind, condition, signals[condition.signal], note, confirm)] + [
        timeseries(
            signal_title(signals[name]),
            [target(signal_expr(signals[name], RATE), "{{model}}")],
            unit=UNITS.get(signals[name].unit, "short"),
            width=width,
            description=f"triage's {name} (triage/signals.yaml) per model.",
        )
        for name in shown
    ]


def which_slow(kinds: dict[str, Kind], signals: tuple[Signal, ...]):
    """The dashboard for these kinds, in their order: each hand-made row where there is one, else a drawn one."""
    by_name = {signal.name: signal for signal in signals}
    panels = []
    for kind in kinds.values():
        panels.append(row(f"{kind.name}: {kind.summary}"))
        panels += HAND_MADE[kind.name](kind) if kind.name in HAND_MADE else drawn_row(kind, by_name)
    return make_dashboard(
        uid="inferwatch-which-slow",
        title="LLM: which kind of slow?",
        description=f"One row per kind of slow ({', '.join(kinds)}); each row's first tile says which panels "
        "confirm it and which rule it out. inferwatch.",
        variables=engine_variables(),
        panels=panels,
    )


dashboard = which_slow(load_kinds(), load_signals())
