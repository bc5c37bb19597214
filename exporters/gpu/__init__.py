"""The GPU exporter: the common GPU vocabulary straight from NVML, or from simulated GPUs.

    inferwatch exporter gpu --listen 0.0.0.0:9401                     NVML (pynvml)
    inferwatch exporter gpu --backend simulated --follow localhost:8000

Two backends behind one narrow interface (`start()`, `sample(wait) -> Snapshot`,
`close()`, `name`): `NvmlBackend` over the pynvml module (or a fake of it) and
`SimulatedBackend`. `GpuExporter` runs one in a sampler thread and serves its
last complete pass. Each GPU's pod comes from the kubelet's PodResources API
(`PodResourcesClient`), else from its processes (`PodResolver`).
"""

from inferwatch.exporters.gpu._model import ATTRIBUTION_SOURCES, Reading, Snapshot, Workload
from inferwatch.exporters.gpu._nvml import NvmlBackend
from inferwatch.exporters.gpu._podresources import PodResourcesClient, device_key, index_pod_resources
from inferwatch.exporters.gpu._pods import PodResolver, index_pod_list, pod_of_cgroup
from inferwatch.exporters.gpu._render import GPU_FAMILIES, render_health, render_snapshot
from inferwatch.exporters.gpu._server import GpuExporter
from inferwatch.exporters.gpu._sim import SCENARIOS, EngineLoad, SimulatedBackend, activity, simulated_gpus

__all__ = [
    "GpuExporter",
    "NvmlBackend",
    "SimulatedBackend",
    "PodResolver",
    "Reading",
    "Snapshot",
    "Workload",
    "EngineLoad",
    "activity",
    "simulated_gpus",
    "SCENARIOS",
    "GPU_FAMILIES",
    "render_snapshot",
    "render_health",
    "index_pod_list",
    "pod_of_cgroup",
    "PodResourcesClient",
    "index_pod_resources",
    "device_key",
    "ATTRIBUTION_SOURCES",
]
