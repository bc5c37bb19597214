"""Options of `inferwatch exporter gpu`, checked at the edge: every mistake names its flag in one line."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

from inferwatch._urls import http_url
from inferwatch.exporters._config import parse_duration, parse_listen
from inferwatch.exporters.gpu._model import Workload
from inferwatch.exporters.gpu._sim import SCENARIOS

__all__ = ["GpuExporterConfig", "BadOption", "gpu_config", "build_exporter", "default_hostname"]

BACKENDS = ("nvml", "simulated")
MIN_INTERVAL, MAX_INTERVAL = 0.1, 3600.0  # GPM needs ~100 ms between its two samples
POD_RESOURCES_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
MAX_SOCKET_PATH = 107  # bytes in sockaddr_un.sun_path, less its terminating NUL


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


def gpu_config(
    listen: str = "0.0.0.0:9401",
    interval: str = "1s",
    backend: str = "nvml",
    gpus: int = 1,
    follow: str | None = None,
    scenario: str = "normal",
    hostname: str | None = None,
    workload: str | None = None,
    proc_root: str = "/proc",
    kubelet_pods_dir: str = "/var/lib/kubelet/pods",
    pod_list: str | None = None,
    stale_after: str | None = None,
    idle_timeout: str = "10s",
    max_connections: int = 64,
    pod_resources_socket: str = POD_RESOURCES_SOCKET,
) -> GpuExporterConfig:
    """The options as typed; raises BadOption naming the flag."""
    try:
        host, port = parse_listen(listen)
    except ValueError as err:
        raise BadOption("--listen", str(err)) from None
    try:
        seconds = parse_duration(interval)
    except ValueError as err:
        raise BadOption("--interval", str(err)) from None
    if not MIN_INTERVAL <= seconds <= MAX_INTERVAL:
        raise BadOption("--interval", f"{interval!r}: use 100ms to 1h, e.g. 1s")
    if backend not in BACKENDS:
        raise BadOption("--backend", f"{backend!r}: use nvml or simulated")
    simulated_only = {
        "--gpus": gpus != 1,
        "--follow": follow is not None,
        "--scenario": scenario != "normal",
        "--workload": workload is not None,
    }
    if backend == "nvml":
        for flag, given in simulated_only.items():
            if given:
                raise BadOption(flag, "only with --backend simulated")
    if not 1 <= gpus <= 64:
        raise BadOption("--gpus", f"{gpus}: use 1 to 64")
    if scenario not in SCENARIOS:
        raise BadOption("--scenario", f"{scenario!r}: use {' or '.join(SCENARIOS)}")
    if follow is not None:
        try:
            follow = http_url(follow, "http://localhost:8000/metrics or localhost:8000")
        except ValueError as err:
            raise BadOption("--follow", str(err)) from None
        if follow.rstrip("/").count("/") == 2:  # no path: the simulator's /metrics
            follow = follow.rstrip("/") + "/metrics"
    stale = _seconds("--stale-after", stale_after, float(seconds)) if stale_after is not None else None
    idle = _seconds("--idle-timeout", idle_timeout, 0.1)
    if not 1 <= max_connections <= 65536:
        raise BadOption("--max-connections", f"{max_connections}: use 1 to 65536")
    return GpuExporterConfig(
        host,
        port,
        float(seconds),
        backend,
        gpus,
        follow,
        scenario,
        hostname or default_hostname(),
        _workload(workload),
        proc_root,
        kubelet_pods_dir,
        pod_list,
        stale,
        idle,
        max_connections,
        _socket(pod_resources_socket),
    )


def _seconds(flag: str, text: str, least: float) -> float:
    try:
        seconds = float(parse_duration(text))
    except ValueError as err:
        raise BadOption(flag, str(err)) from None
    if seconds < least:
        raise BadOption(flag, f"{text!r}: use at least {least:g}s")
    return seconds


def _socket(path: str) -> str:
    """An absolute unix socket path a connect can take, or '' (off)."""
    if not path:
        return ""
    full = os.path.abspath(path)
    if len(os.fsencode(full)) > MAX_SOCKET_PATH:
        raise BadOption(
            "--pod-resources-socket",
            f"{path!r}: a unix socket path is at most {MAX_SOCKET_PATH} "
            "bytes; use a shorter one (or '' to turn the API off)",
        )
    return full


def _workload(text: str | None) -> Workload | None:
    if text is None:
        return None
    parts = text.split("/")
    if not 2 <= len(parts) <= 3 or not all(parts):
        raise BadOption("--workload", f"{text!r}: use NAMESPACE/POD or NAMESPACE/POD/CONTAINER")
    return Workload(*parts)


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
