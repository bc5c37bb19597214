"""GPU activity: GPU-Util next to what the GPU really did (SM, tensor and DRAM activity), beside the engine's load.

GPU-Util only says a kernel was running; SM activity says how much of the GPU
worked. "GPU-Util 99 %, SM active 40 %, tensor 10 %" is the GPU busy but not computing.
"""

from inferwatch.dashboards import (
    ENGINE_FILTERS,
    GPU_FILTERS,
    Selector,
    dashboard,
    engine_variables,
    row,
    stat,
    target,
    timeseries,
)

gpu = Selector(GPU_FILTERS)
engine = Selector(ENGINE_FILTERS)
PER_GPU = "{{hostname}} GPU {{gpu}} {{pod}}"
# 0 only while GPUs report both signals: without them the tile reads No data, not a healthy 0
BOTH = f"{gpu('gpu_utilization_ratio')} and on (uuid) {gpu('gpu_sm_active_ratio')}"
BUSY_NOT_COMPUTING = (
    f"count(({gpu('gpu_utilization_ratio')} >= 0.9) and on (uuid) "
    f"({gpu('gpu_sm_active_ratio')} < 0.5))\nor\n0 * count({BOTH})"
)

dashboard = dashboard(
    uid="inferwatch-gpu-activity",
    title="LLM GPU activity",
    description="GPU-Util against SM, tensor and DRAM activity, memory and power, per GPU, beside engine load. "
    "inferwatch.",
    variables=engine_variables(),
    panels=[
        row("Is the GPU computing?"),
        stat(
            "GPUs busy but not computing",
            BUSY_NOT_COMPUTING,
            unit="short",
            thresholds=((1, "red"),),
            width=4,
            description="GPUs with gpu_utilization_ratio at least 0.9 but gpu_sm_active_ratio under 0.5 right now; "
            "0 while GPUs report both and none is stuck. No data, never a green 0, when no GPU in the "
            "selected pods reports both: no GPU exporter is scraped, or dcgm-exporter runs without the "
            "profiling fields (deploy/dcgm/counters.csv turns DCGM_FI_PROF_SM_ACTIVE on; GPUs without "
            "profiling counters cannot tell).",
        ),
        timeseries(
            "GPU-Util against SM active",
            [
                target(gpu("gpu_utilization_ratio"), "util " + PER_GPU),
                target(gpu("gpu_sm_active_ratio"), "SM active " + PER_GPU),
            ],
            unit="percentunit",
            max_value=1,
            width=20,
            description="gpu_utilization_ratio (share of time any kernel ran) next to gpu_sm_active_ratio (share of "
            "SMs with work). A wide gap is the GPU busy but not computing.",
        ),
        timeseries(
            "SM occupancy",
            [target(gpu("gpu_sm_occupancy_ratio"), PER_GPU)],
            unit="percentunit",
            max_value=1,
            width=8,
            description="gpu_sm_occupancy_ratio: resident warps over the maximum.",
        ),
        timeseries(
            "Tensor-core activity",
            [target(gpu("gpu_tensor_active_ratio"), PER_GPU)],
            unit="percentunit",
            max_value=1,
            width=8,
            description="gpu_tensor_active_ratio: share of cycles the tensor pipes were "
            "busy; near zero during decode means tiny batches.",
        ),
        timeseries(
            "DRAM activity",
            [target(gpu("gpu_dram_active_ratio"), PER_GPU)],
            unit="percentunit",
            max_value=1,
            width=8,
            description="gpu_dram_active_ratio: memory-bandwidth use; decode is usually memory-bound.",
        ),
        row("Memory and power"),
        timeseries(
            "Framebuffer memory",
            [
                target(gpu("gpu_memory_used_bytes"), "used " + PER_GPU),
                target(gpu("gpu_memory_free_bytes"), "free " + PER_GPU),
            ],
            unit="bytes",
            width=8,
            description="gpu_memory_used_bytes and gpu_memory_free_bytes.",
        ),
        timeseries(
            "Power", [target(gpu("gpu_power_watts"), PER_GPU)], unit="watt", width=8, description="gpu_power_watts."
        ),
        timeseries(
            "Temperature",
            [target(gpu("gpu_temperature_celsius"), PER_GPU)],
            unit="celsius",
            width=8,
            description="gpu_temperature_celsius.",
        ),
        row("Engine load on these GPUs"),
        timeseries(
            "Running and waiting requests",
            [
                target(f"sum by (model, pod) ({engine('llm_requests_running')})", "running {{model}} {{pod}}"),
                target(f"sum by (model, pod) ({engine('llm_requests_waiting')})", "waiting {{model}} {{pod}}"),
            ],
            description="llm_requests_running and llm_requests_waiting of the engines in the selected pods: a "
            "small batch explains low SM and tensor activity.",
        ),
        timeseries(
            "KV-cache usage",
            [target(f"max by (model, pod) ({engine('llm_kv_cache_usage_ratio')})", "{{model}} {{pod}}")],
            unit="percentunit",
            max_value=1,
            description="llm_kv_cache_usage_ratio of the same engines.",
        ),
    ],
)
