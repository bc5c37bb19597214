"""A Snapshot as Prometheus text: the common GPU vocabulary first, then the exporter's own health.

Names, types and help come from the catalog (mappings/catalog.yaml), so this
exporter cannot drift from what the DCGM mapping produces. A GPU held by several
containers (time-slicing) or used by processes of several pods is written once
per container: each engine then joins its GPU on `pod` (aggregate with
`max by (uuid)` to count a GPU once).
"""

from __future__ import annotations

from inferwatch import __version__
from inferwatch.exporters._exposition import Sample, format_header, format_sample, format_value
from inferwatch.exporters.gpu._model import Labels, Reading, Snapshot
from inferwatch.mappings import Catalog

__all__ = ["GPU_FAMILIES", "OWN_FAMILIES", "render_snapshot", "render_health"]

# Every family a reading may carry, in the order served.
GPU_FAMILIES = (
    "gpu_up",
    "gpu_profiling_supported",
    "gpu_utilization_ratio",
    "gpu_graphics_engine_active_ratio",
    "gpu_sm_active_ratio",
    "gpu_sm_occupancy_ratio",
    "gpu_tensor_active_ratio",
    "gpu_dram_active_ratio",
    "gpu_memory_used_bytes",
    "gpu_memory_free_bytes",
    "gpu_power_watts",
    "gpu_energy_joules_total",
    "gpu_temperature_celsius",
    "gpu_sm_clock_hertz",
    "gpu_memory_clock_hertz",
    "gpu_clock_throttle_active",
    "gpu_xid_errors_total",
    "gpu_ecc_errors_total",
    "gpu_pcie_tx_bytes_per_second",
    "gpu_pcie_rx_bytes_per_second",
    "gpu_nvlink_tx_bytes_per_second",
    "gpu_nvlink_rx_bytes_per_second",
)
_OWN = "inferwatch_gpu_exporter_"
OWN_FAMILIES = {  # name: (type, help); gpu_exporter_up is in the catalog, so alerts may use it
    _OWN + "scrape_duration_seconds": ("gauge", "Time this exporter took to answer this scrape."),
    _OWN + "sample_duration_seconds": (
        "gauge",
        "Time the last sampling pass spent in backend calls, the wait between the two GPM samples excluded.",
    ),
    _OWN + "sample_age_seconds": ("gauge", "Age of the sampling pass served in this response."),
    _OWN + "errors_total": (
        "counter",
        "Failed backend reads since start, by kind (init, gpu_lost, nvml, follow; "
        "connections_refused: HTTP connections over the limit).",
    ),
    _OWN + "pod_list_errors_total": (
        "counter",
        "Failed reads of the pod list (--pod-list) since start, by kind "
        "(connect, timeout, http, too_large, parse, file); pods are then "
        "named from the kubelet's folders.",
    ),
    _OWN + "attribution_info": (
        "gauge",
        "1 per GPU (or MIG instance): which source named its pod (pod_resources: "
        "the kubelet's PodResources API; process: its processes, by /proc; "
        "unresolved: processes that no pod could be traced to; none: no pod "
        "holds it).",
    ),
    _OWN + "pod_resources_up": (
        "gauge",
        "1 when the last List of the kubelet's PodResources API "
        "(--pod-resources-socket) answered, else 0; absent when it is off.",
    ),
    _OWN + "pod_resources_errors_total": (
        "counter",
        "Failed Lists of the kubelet's PodResources API since start, by "
        "kind (absent, permission, connect, timeout, status, too_large, "
        "parse); GPUs are then attributed by their processes.",
    ),
    _OWN + "build_info": ("gauge", "inferwatch version and the backend in use."),
}


def _expand(reading: Reading) -> list[tuple[str, Labels, float]]:
    """The reading's series before workload labels: up, profiling, then its samples."""
    rows: list[tuple[str, Labels, float]] = [("gpu_up", (), 1.0 if reading.up else 0.0)]
    if reading.up and reading.profiling is not None:
        rows.append(("gpu_profiling_supported", (), 1.0 if reading.profiling else 0.0))
    if reading.up:
        rows.extend(reading.samples)
    return rows


def render_snapshot(snapshot: Snapshot, catalog: Catalog) -> str:
    """The GPU families of a snapshot and gpu_exporter_up, one HELP/TYPE each, in a fixed order."""
    lines: dict[str, list[str]] = {name: [] for name in GPU_FAMILIES}
    for reading in snapshot.readings:
        workloads = [w.labels() for w in reading.workloads] or [()]
        for name, extra, value in _expand(reading):
            for workload in workloads:
                lines[name].append(
                    format_sample(Sample(name, reading.identity + extra + workload, format_value(value)))
                )
    out = []
    for name in GPU_FAMILIES:
        if lines[name]:
            out.append(format_header(name, catalog[name].type, catalog[name].help))
            out.extend(lines[name])
    name = "gpu_exporter_up"
    out.append(format_header(name, catalog[name].type, catalog[name].help))
    out.append(format_sample(Sample(name, (), format_value(1.0 if snapshot.up else 0.0))))
    return "".join(out)


def render_health(snapshot: Snapshot, now: float, scrape_seconds: float, backend: str) -> str:
    """The exporter's own series; `now` is time.time()."""

    def by_kind(counts: dict[str, int]) -> list:
        return [((("kind", k),), float(n)) for k, n in sorted(counts.items())]

    values = {
        _OWN + "scrape_duration_seconds": [((), scrape_seconds)],
        _OWN + "sample_duration_seconds": [((), snapshot.duration)] if snapshot.taken_at else [],
        _OWN + "sample_age_seconds": [((), max(0.0, now - snapshot.taken_at))] if snapshot.taken_at else [],
        _OWN + "errors_total": by_kind(snapshot.errors),
        _OWN + "pod_list_errors_total": by_kind(snapshot.pod_list_errors),
        _OWN + "attribution_info": [(r.identity + (("source", r.source),), 1.0) for r in snapshot.readings if r.source],
        _OWN + "pod_resources_up": []
        if snapshot.pod_resources_up is None
        else [((), 1.0 if snapshot.pod_resources_up else 0.0)],
        _OWN + "pod_resources_errors_total": by_kind(snapshot.pod_resources_errors),
        _OWN + "build_info": [((("backend", backend), ("version", __version__)), 1.0)],
    }
    out = []
    for name, (mtype, help_text) in OWN_FAMILIES.items():
        out.append(format_header(name, mtype, help_text))
        out.extend(format_sample(Sample(name, labels, format_value(v))) for labels, v in values[name])
    return "".join(out)
