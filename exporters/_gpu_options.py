"""`inferwatch exporter gpu`'s options model: one field per flag, with its help, from which the flags and README.md's
table are made (inferwatch/options.py). The values stay as given; gpu_config (gpu/_config.py) checks them together
and names the flag at fault. Here, not in gpu/, whose package imports the exporter itself: `inferwatch --help`
builds the flags from this module."""

from __future__ import annotations

from dataclasses import dataclass

from inferwatch.options import option

__all__ = ["GpuOptions"]


@dataclass(frozen=True)
class GpuOptions:
    listen: str = option("0.0.0.0:9401", "Where to serve /metrics.", metavar="HOST:PORT")
    interval: str = option("1s", "Sampling period (the GPM window), 100ms to 1h.", metavar="DURATION")
    backend: str = option("nvml", "nvml (the GPUs of this host) or simulated.", metavar="BACKEND")
    hostname: str | None = option(None, "The hostname label [$NODE_NAME, else this host's name].", metavar="NAME")
    pod_list: str | None = option(None, "A kubelet PodList (its /pods answer) naming pods by UID.", metavar="FILE|URL")
    kubelet_pods_dir: str = option("/var/lib/kubelet/pods", "The kubelet's pod folders.", metavar="DIR")
    proc_root: str = option("/proc", "The host's /proc (mounted in a container).", metavar="DIR")
    pod_resources_socket: str = option(
        "/var/lib/kubelet/pod-resources/kubelet.sock",
        "The kubelet's PodResources API socket: GPU -> pod, tried before the processes (/proc); '' turns it off.",
        metavar="PATH",
    )
    gpus: int = option(1, "Simulated: how many GPUs.", metavar="N", kind=int)
    follow: str | None = option(
        None, "Simulated: an `inferwatch simulate` server whose load the GPUs follow.", metavar="URL"
    )
    scenario: str = option(
        "normal",
        "Simulated: normal or stall (GPU-Util high, SMs idle); switch with POST /admin/scenario.",
        metavar="SCENARIO",
    )
    workload: str | None = option(None, "Simulated: the pod the GPUs are labelled with.", metavar="NS/POD[/CONTAINER]")
    stale_after: str | None = option(
        None,
        "A sampling pass older than this is served as down (gpu_exporter_up 0, no GPU values), never as live "
        "[default: 2 intervals + 5s].",
        metavar="DURATION",
    )
    idle_timeout: str = option("10s", "An idle client connection is closed after this.", metavar="DURATION")
    max_connections: int = option(
        64,
        "Client connections served at once; more are closed at once and counted in "
        'inferwatch_gpu_exporter_errors_total{kind="connections_refused"}.',
        metavar="N",
        kind=int,
    )
