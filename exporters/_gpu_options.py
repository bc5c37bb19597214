"""`inferwatch exporter gpu`'s options model: one field per flag, with its help and its check, from which the flags,
their checks and README.md's table are made (inferwatch/options.py). What reads two flags (the simulated backend's
flags with --backend nvml, --stale-after against --interval) is gpu/_config.py's `exporter_config`. Here, not in
gpu/, whose package imports the exporter itself: `inferwatch --help` builds the flags from this module, and a
check that needs more (the simulated scenarios, the Workload type) imports it when it runs."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from inferwatch.exporters._config import parse_duration, parse_listen
from inferwatch.options import option

if TYPE_CHECKING:
    from inferwatch.exporters.gpu._model import Workload

__all__ = ["GpuOptions", "POD_RESOURCES_SOCKET", "MAX_SOCKET_PATH"]

BACKENDS = ("nvml", "simulated")
MIN_INTERVAL, MAX_INTERVAL = 0.1, 3600.0  # GPM needs ~100 ms between its two samples
POD_RESOURCES_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
MAX_SOCKET_PATH = 107  # bytes in sockaddr_un.sun_path, less its terminating NUL


def _interval(text) -> float:
    seconds = parse_duration(text)
    if not MIN_INTERVAL <= seconds <= MAX_INTERVAL:
        raise ValueError(f"{text!r}: use 100ms to 1h, e.g. 1s")
    return seconds


def _at_least(least: float) -> Callable[[str], float]:
    def parse(text) -> float:
        seconds = parse_duration(text)
        if seconds < least:
            raise ValueError(f"{text!r}: use at least {least:g}s")
        return seconds

    return parse


def _within(low: int, high: int) -> Callable[[int], int]:
    def parse(value: int) -> int:
        if not low <= value <= high:
            raise ValueError(f"{value}: use {low} to {high}")
        return value

    return parse


def _backend(text: str) -> str:
    if text not in BACKENDS:
        raise ValueError(f"{text!r}: use nvml or simulated")
    return text


def _scenario(text: str) -> str:
    from inferwatch.exporters.gpu._sim import SCENARIOS

    if text not in SCENARIOS:
        raise ValueError(f"{text!r}: use {' or '.join(SCENARIOS)}")
    return text


def _follow(text: str) -> str:
    """The simulator's /metrics URL: a bare HOST:PORT or http://HOST:PORT gets /metrics."""
    from inferwatch._urls import http_url

    url = http_url(text, "http://localhost:8000/metrics or localhost:8000")
    return url.rstrip("/") + "/metrics" if url.rstrip("/").count("/") == 2 else url


def _workload(text: str) -> Workload:
    from inferwatch.exporters.gpu._model import Workload

    parts = text.split("/")
    if not 2 <= len(parts) <= 3 or not all(parts):
        raise ValueError(f"{text!r}: use NAMESPACE/POD or NAMESPACE/POD/CONTAINER")
    return Workload(*parts)


def _socket(path: str) -> str:
    """An absolute unix socket path a connect can take, or '' (off)."""
    if not path:
        return ""
    full = os.path.abspath(path)
    if len(os.fsencode(full)) > MAX_SOCKET_PATH:
        raise ValueError(
            f"{path!r}: a unix socket path is at most {MAX_SOCKET_PATH} bytes; use a shorter one (or '' to turn the "
            "API off)"
        )
    return full


@dataclass(frozen=True)
class GpuOptions:
    """`inferwatch exporter gpu`'s flags, each checked and typed by its field: a wrong one is a usage error naming
    the flag (exit 2)."""

    listen: tuple[str, int] = option(
        ("0.0.0.0", 9401), "Where to serve /metrics.", metavar="HOST:PORT", parse=parse_listen, shown="0.0.0.0:9401"
    )
    interval: float = option(
        1.0, "Sampling period (the GPM window), 100ms to 1h.", metavar="DURATION", parse=_interval, shown="1s"
    )
    backend: str = option("nvml", "nvml (the GPUs of this host) or simulated.", metavar="BACKEND", parse=_backend)
    hostname: str | None = option(None, "The hostname label [$NODE_NAME, else this host's name].", metavar="NAME")
    pod_list: str | None = option(None, "A kubelet PodList (its /pods answer) naming pods by UID.", metavar="FILE|URL")
    kubelet_pods_dir: str = option("/var/lib/kubelet/pods", "The kubelet's pod folders.", metavar="DIR")
    proc_root: str = option("/proc", "The host's /proc (mounted in a container).", metavar="DIR")
    pod_resources_socket: str = option(
        POD_RESOURCES_SOCKET,
        "The kubelet's PodResources API socket: GPU -> pod, tried before the processes (/proc); '' turns it off.",
        metavar="PATH",
        parse=_socket,
    )
    gpus: int = option(1, "Simulated: how many GPUs.", metavar="N", kind=int, parse=_within(1, 64))
    follow: str | None = option(
        None, "Simulated: an `inferwatch simulate` server whose load the GPUs follow.", metavar="URL", parse=_follow
    )
    scenario: str = option(
        "normal",
        "Simulated: normal or stall (GPU-Util high, SMs idle); switch with POST /admin/scenario.",
        metavar="SCENARIO",
        parse=_scenario,
    )
    workload: Workload | None = option(
        None, "Simulated: the pod the GPUs are labelled with.", metavar="NS/POD[/CONTAINER]", parse=_workload
    )
    stale_after: float | None = option(
        None,
        "A sampling pass older than this is served as down (gpu_exporter_up 0, no GPU values), never as live "
        "[default: 2 intervals + 5s].",
        metavar="DURATION",
        parse=parse_duration,
    )
    idle_timeout: float = option(
        10.0, "An idle client connection is closed after this.", metavar="DURATION", parse=_at_least(0.1), shown="10s"
    )
    max_connections: int = option(
        64,
        "Client connections served at once; more are closed at once and counted in "
        'inferwatch_gpu_exporter_errors_total{kind="connections_refused"}.',
        metavar="N",
        kind=int,
        parse=_within(1, 65536),
    )
