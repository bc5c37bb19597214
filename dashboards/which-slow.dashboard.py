"""Which kind of slow? The kinds of slow from DESIGN.md side by side, each with the signals that confirm or
rule it out: queueing, thinking, slow generation, GPU busy but not computing."""

from inferwatch.dashboards import (ENGINE_FILTERS, GPU_FILTERS, STREAMED, Selector, dashboard, engine_variables, quantiles,
                                   rate_sum, ratio, row, target, timeseries)

sel = Selector(ENGINE_FILTERS)
gpu = Selector(GPU_FILTERS)

dashboard = dashboard(
    uid="inferwatch-which-slow",
    title="LLM: which kind of slow?",
    description="Queueing, thinking, slow generation or a GPU busy but not computing, with the signals for each. "
                "inferwatch.",
    variables=engine_variables(),
    panels=[
        row("Queueing: a long wait before anything appears"),
        timeseries("Waiting, and running against the cap", [
            target(f"sum by (model) ({sel('llm_requests_waiting')})", "waiting {{model}}"),
            target(f"sum by (model) ({sel('llm_requests_running')})", "running {{model}}"),
            target('sum by (model) (llm_max_running_requests{model=~"$model"})', "cap {{model}}")], width=8,
            description="Queueing when llm_requests_waiting stays above 0 with llm_requests_running at the cap "
                        "(llm_max_running_requests). Waiting at 0 rules it out."),
        timeseries("KV-cache usage", [target(f"max by (model) ({sel('llm_kv_cache_usage_ratio')})", "{{model}}")],
                   unit="percentunit", max_value=1, width=8,
                   description="A full KV cache (llm_kv_cache_usage_ratio near 1) also holds requests back."),
        timeseries("Queue time p95", quantiles(sel, "llm_request_queue_time_seconds", qs=(0.95,)), unit="s",
                   width=8, description="p95 of llm_request_queue_time_seconds: time spent waiting for a slot."),
        row("Thinking: a long wait for visible text, engine TTFT normal"),
        timeseries("Engine TTFT p95", quantiles(sel, "llm_time_to_first_token_seconds", qs=(0.95,), extra=STREAMED),
                   unit="s",
                   width=8, description="llm_time_to_first_token_seconds counts hidden reasoning tokens as output, "
                                        "so it stays normal while a model thinks."),
        timeseries("Output tokens per request", [target(ratio(
            rate_sum(sel, "llm_request_generation_tokens_sum"), rate_sum(sel, "llm_request_generation_tokens_count")),
            "mean {{model}}")], width=8,
            description="Mean llm_request_generation_tokens: reasoning inflates it many times while TTFT stays flat."),
        timeseries("End-to-end p95", quantiles(sel, "llm_request_duration_seconds", qs=(0.95,)), unit="s", width=8,
                   description="llm_request_duration_seconds grows with the hidden tokens."),
        row("Slow generation: text trickles out"),
        timeseries("Time per output token p95", quantiles(sel, "llm_time_per_output_token_seconds", qs=(0.95,)),
                   unit="s", width=8, description="llm_time_per_output_token_seconds: the decode speed users feel."),
        timeseries("Batch size and preemptions", [
            target(f"sum by (model) ({sel('llm_requests_running')})", "running {{model}}"),
            target(rate_sum(sel, "llm_preemptions_total"), "preemptions/s {{model}}")], width=8,
            description="A bigger batch (llm_requests_running) or preemptions (llm_preemptions_total) slow each step."),
        timeseries("Speculative decoding acceptance", [
            target(ratio(rate_sum(sel, "llm_spec_decode_accepted_tokens_total"),
                         rate_sum(sel, "llm_spec_decode_draft_tokens_total")), "{{model}}"),
            target(f"max by (model, pod) ({sel('llm_spec_decode_acceptance_ratio')})", "{{model}} {{pod}} (gauge)")],
            unit="percentunit", max_value=1, width=8,
            description="A drop in accepted draft tokens means more decode steps per token."),
        row("GPU busy but not computing: slow, GPU-Util high"),
        timeseries("GPU-Util against SM and tensor activity", [
            target(f"avg by (pod) ({gpu('gpu_utilization_ratio')})", "util {{pod}}"),
            target(f"avg by (pod) ({gpu('gpu_sm_active_ratio')})", "SM active {{pod}}"),
            target(f"avg by (pod) ({gpu('gpu_tensor_active_ratio')})", "tensor {{pod}}")], unit="percentunit",
            max_value=1, width=24,
            description="gpu_utilization_ratio high while gpu_sm_active_ratio and gpu_tensor_active_ratio stay low: "
                        "the GPU waits (small batches, host stalls, synchronisation) instead of computing."),
    ])
