"""`inferwatch exporter gpu`'s config: its options (exporters/_gpu_options.py, each flag checked by its field) with
the checks that read two flags and the host's defaults; every mistake names its flag in one line."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inferwatch.exporters._gpu_options import POD_RESOURCES_SOCKET, GpuOptions
from inferwatch.exporters.gpu._model import Workload

__all__ = ["GpuExporterConfig", "BadOption", "exporter_config", "gpu_config", "build_exporter", "default_hostname"]


class BadOption(ValueError):
    """A flag's value is wrong; `flag` says which."""

    def __init__(self, flag: str, message: str):
        super().__init__(message)
        self.flag = flag


@dataclass(frozen=True)
class GpuExporterConfig:
    host: str = "0.0.0.0"
    port: int = 9401
    interval: float = 1.0
    backend: str = "nvml"
    gpus: int = 1
    follow: str | None = None
    scenario: str = "normal"
    hostname: str = ""
    workload: Workload | None = None
    proc_root: str = "/proc"
    kubelet_pods_dir: str = "/var/lib/kubelet/pods"
    pod_list: str | None = None
    stale_after: float | None = None  # None: two intervals plus 5 s
    idle_timeout: float = 10.0  # an idle client connection is closed after this
    max_connections: int = 64  # connections served at once; more are closed and counted
    pod_resources_socket: str = POD_RESOURCES_SOCKET  # the kubelet's PodResources API; '' turns it off


def default_hostname() -> str:
    """NODE_NAME (set from spec.nodeName in a DaemonSet) or this host's name, as dcgm-exporter does."""
    return os.environ.get("NODE_NAME") or socket.gethostname()


def exporter_config(options: GpuOptions) -> GpuExporterConfig:
    """The exporter's config from its checked options: what reads two flags is checked here (BadOption names the
    flag), and the hostname defaults to this host's."""
    if options.backend == "nvml":
        for flag, given in (
            ("--gpus", options.gpus != 1),
            ("--follow", options.follow is not None),
            ("--scenario", options.scenario != "normal"),
            ("--workload", options.workload is not None),
        ):
            if given:
                raise BadOption(flag, "only with --backend simulated")
    if options.stale_after is not None and options.stale_after < options.interval:
        raise BadOption(
            "--stale-after",
            f"{options.stale_after:g}s is under --interval {options.interval:g}s: use at least {options.interval:g}s",
        )
    host, port = options.listen
    return GpuExporterConfig(
        host,
        port,
        options.interval,
        options.backend,
        options.gpus,
        options.follow,
        options.scenario,
        options.hostname or default_hostname(),
        options.workload,
        options.proc_root,
        options.kubelet_pods_dir,
        options.pod_list,
        options.stale_after,
        options.idle_timeout,
        options.max_connections,
        options.pod_resources_socket,
    )


def gpu_config(**given: Any) -> GpuExporterConfig:
    """The config from options written as their flags are (`interval="2s"`, `gpus=2`), each checked by its field
    of GpuOptions; raises BadOption naming the flag."""
    from inferwatch.options import from_flags

    def bad(flag: str, err: Exception):
        raise BadOption(flag, str(err))

    return exporter_config(from_flags(GpuOptions, given, bad=bad))


def build_exporter(config: GpuExporterConfig, nvml=None):
    """The exporter for `config`; `nvml` replaces the pynvml module (tests)."""
    from inferwatch.exporters.gpu._server import GpuExporter

    backend: SimulatedBackend | NvmlBackend
    if config.backend == "simulated":
        from inferwatch.exporters.gpu._sim import SimulatedBackend

        backend = SimulatedBackend(config.gpus, config.hostname, config.follow, config.scenario, config.workload)
    else:
        from inferwatch.exporters.gpu._nvml import NvmlBackend
        from inferwatch.exporters.gpu._pods import PodResolver

        if nvml is None:
            import pynvml  # nvidia-ml-py; loading libnvidia-ml waits for nvmlInit in the sampler

            nvml = pynvml
        from inferwatch.exporters.gpu._podresources import PodResourcesClient

        pods = PodResolver(Path(config.proc_root), Path(config.kubelet_pods_dir), config.pod_list)
        kubelet = PodResourcesClient(config.pod_resources_socket) if config.pod_resources_socket else None
        backend = NvmlBackend(nvml, config.hostname, pods, pod_resources=kubelet)
    return GpuExporter(
        backend,
        config.interval,
        stale_after=config.stale_after,
        idle_timeout=config.idle_timeout,
        max_connections=config.max_connections,
    )
