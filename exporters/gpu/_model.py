"""What one sampling pass saw, as frozen data: the backends build it, the renderer and the server only read it."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Labels", "Reading", "Snapshot", "Workload", "ATTRIBUTION_SOURCES"]

Labels = tuple[tuple[str, str], ...]
# How a GPU's workloads were found, best first: a bounded set, as it is a label value.
ATTRIBUTION_SOURCES = {
    "pod_resources": "the kubelet's PodResources API lists the GPU as allocated to these containers",
    "process": "the GPU is not allocated through the kubelet: its processes were traced to pods by /proc",
    "unresolved": "processes run on the GPU but none could be traced to a pod (/proc unreadable, no hostPID)",
    "none": "no container holds the GPU and no process runs on it",
}


@dataclass(frozen=True, order=True)
class Workload:
    """The pod whose processes use a GPU; any field may be unknown ('')."""

    namespace: str = ""
    pod: str = ""
    container: str = ""

    def labels(self) -> Labels:
        return tuple(
            (k, v) for k, v in (("namespace", self.namespace), ("pod", self.pod), ("container", self.container)) if v
        )


@dataclass(frozen=True)
class Reading:
    """One GPU or MIG instance in one pass.

    `identity` are its labels (gpu, uuid, gpu_model, hostname, and GPU_I_ID /
    GPU_I_PROFILE for a MIG instance, as dcgm-exporter writes them). `samples`
    are (common name, extra labels, value); a value the GPU cannot give is left
    out, never written as 0.
    """

    identity: Labels
    up: bool = True
    profiling: bool | None = None  # None: not a question for this reading (a lost GPU)
    samples: tuple[tuple[str, Labels, float], ...] = ()
    workloads: tuple[Workload, ...] = ()
    source: str = ""  # which ATTRIBUTION_SOURCES named the workloads; '' when not asked


@dataclass(frozen=True)
class Snapshot:
    """The last complete pass: what every scrape serves until the next one is ready."""

    up: bool
    readings: tuple[Reading, ...] = ()
    error: str | None = None  # why the backend is down (also logged)
    taken_at: float = 0.0  # time.time() at the end of the pass
    duration: float = 0.0  # seconds of backend calls, the GPM wait excluded
    errors: dict[str, int] = field(default_factory=dict)  # failed reads by kind, since start
    pod_list_errors: dict[str, int] = field(default_factory=dict)  # failed reads of the pod list by kind
    pod_resources_errors: dict[str, int] = field(default_factory=dict)  # failed PodResources Lists by kind
    pod_resources_up: bool | None = None  # the last List answered; None: the API is off or not asked yet
