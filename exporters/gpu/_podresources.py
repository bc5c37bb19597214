"""Which pods hold each GPU, from the kubelet's PodResources API, as dcgm-exporter reads it.

The kubelet's device manager gave each GPU (or MIG instance, or time-sliced
replica) to a container, and says so over gRPC on a root-owned unix socket:
`v1.PodResourcesLister/List`. This needs neither hostPID nor /proc, which the
exporter's user often cannot read on a real node. Every call is bounded: a
fresh channel per List (a kubelet restart costs one failed List, not gRPC's
reconnect backoff), a deadline, and a cap on the answer's size. A List is
trusted for `ttl` seconds, a failure too, so a dead socket costs one timeout
per `ttl`, not one per sampling pass.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import re
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from inferwatch.exporters.gpu._http import one_line
from inferwatch.exporters.gpu._model import Workload
from inferwatch.exporters.gpu._wire import WireError, decode

__all__ = ["PodResourcesClient", "index_pod_resources", "device_key", "POD_RESOURCES_ERRORS", "SOCKET", "GPU_RESOURCES"]

log = logging.getLogger("inferwatch.exporter.gpu")

SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
METHOD = "/v1.PodResourcesLister/List"
# A List is local and answers in milliseconds; 2 s keeps a pass with a stuck kubelet under the exporter's
# stale_after (two intervals plus 5 s), so the GPU series stay served while the kubelet hangs.
TIMEOUT = 2.0
TTL = 10.0  # seconds a List answer (or failure) stands
# A full node (110 pods, 8 time-sliced GPU IDs each) answers 48 KB, decoded in ~10 ms; 4 MiB is 80 times that and
# bounds both memory and the decode in the sampler thread (~0.5 s at the cap, measured 1.7 s for 14 MB).
MAX_ANSWER_BYTES = 4 * 2**20
# Resources whose device IDs are GPUs: the NVIDIA device plugin's (GKE's too), a renamed shared one
# (time-slicing's `renameByDefault` gives nvidia.com/gpu.shared), and MIG profiles under the mixed strategy.
GPU_RESOURCES = ("nvidia.com/gpu", "nvidia.com/gpu.*", "nvidia.com/mig-*")
# Why the PodResources API could not be read: a bounded set, as it is a label value.
POD_RESOURCES_ERRORS = {
    "absent": "no socket at the path: not a Kubernetes node, or the hostPath mount is missing",
    "permission": "the socket is there but this user may not connect: it is root's (run the exporter as UID 0)",
    "connect": "nothing accepts on the socket, or what answers does not speak gRPC",
    "timeout": "no answer within TIMEOUT",
    "status": "the kubelet answered with a gRPC error (UNIMPLEMENTED: a kubelet without the v1 API, before 1.20)",
    "too_large": "the answer is over MAX_ANSWER_BYTES",
    "parse": "the answer is not a ListPodResourcesResponse",
}
# MIG device IDs of drivers before R470: MIG-GPU-<parent uuid>/<GPU instance>/<compute instance>
_LEGACY_MIG = re.compile(r"^MIG-(GPU-[^/]+)/(\d+)/\d+$")
_GKE_SHARED = re.compile(r"/vgpu\d+$")  # GKE's device plugin: nvidia<minor>[/gi<GPU instance>][/vgpu<N>]


def device_key(device_id: str) -> str:
    """The name NVML knows a device ID's device by (NvmlBackend's device keys): its GPU-/MIG- UUID, or its
    `<index>[:<MIG index>]` (deviceIDStrategy=index), without time-slicing's `::N` replica suffix; a pre-R470 MIG
    ID `MIG-GPU-<uuid>/<gi>/<ci>` as `MIG-GPU-<uuid>/<gi>` (its GPU instance); GKE's `nvidia<minor>[/gi<gi>]`
    without its `/vgpu<N>` sharing suffix."""
    base = _GKE_SHARED.sub("", device_id.split("::", 1)[0])
    legacy = _LEGACY_MIG.match(base)
    return f"MIG-{legacy.group(1)}/{legacy.group(2)}" if legacy else base


def is_gpu_resource(name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in GPU_RESOURCES)


def index_pod_resources(doc: dict) -> dict[str, tuple[Workload, ...]]:
    """device key -> the containers holding it, sorted, from a decoded ListPodResourcesResponse."""
    index: dict[str, set[Workload]] = {}
    for pod in doc["pod_resources"]:
        for ctr in pod["containers"]:
            workload = Workload(pod["namespace"], pod["name"], ctr["name"])
            for devices in ctr["devices"]:
                if is_gpu_resource(devices["resource_name"]):
                    for device_id in devices["device_ids"]:
                        index.setdefault(device_key(device_id), set()).add(workload)
    return {key: tuple(sorted(found)) for key, found in index.items()}


class _Failed(Exception):
    def __init__(self, kind: str, detail: str):
        super().__init__(detail)
        self.kind = kind


@dataclass
class PodResourcesClient:
    """`devices()` -> {device key: workloads} from the kubelet at `socket_path`, or None while it cannot be read."""

    socket_path: str = SOCKET
    timeout: float = TIMEOUT
    max_bytes: int = MAX_ANSWER_BYTES
    ttl: float = TTL
    clock: Callable[[], float] = time.monotonic
    errors: dict[str, int] = field(default_factory=dict)  # failed Lists by POD_RESOURCES_ERRORS kind
    up: bool | None = None  # None: not asked yet
    _index: dict | None = None
    _asked: float = float("-inf")
    _problem: str | None = None  # the kind of the last failure, said once

    def __post_init__(self) -> None:
        # gRPC core's own INFO lines (a GOAWAY on each kubelet restart) would interleave with the exporter's
        # log, where every failure is already said once: keep it to its errors unless the user set otherwise.
        # Imported here, as the exporter starts, not first in the sampler thread: without grpcio the command
        # stops with the gpu extra's one line (inferwatch/extras.py), not a failed pass after pass
        os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
        import grpc  # noqa: F401  # grpcio: gRPC over HTTP/2 is not code this project should write

    def devices(self) -> dict[str, tuple[Workload, ...]] | None:
        now = self.clock()
        if now - self._asked < self.ttl:
            return self._index
        self._asked = now
        try:
            self._index = index_pod_resources(self._list())
        except _Failed as err:
            self._index, self.up = None, False
            self.errors[err.kind] = self.errors.get(err.kind, 0) + 1
            if err.kind != self._problem:  # once per new kind of problem, not once per pass
                log.warning(
                    "PodResources API at %s: %s: %s (%s); attributing GPUs by their processes (/proc) instead",
                    self.socket_path,
                    err.kind,
                    err,
                    POD_RESOURCES_ERRORS[err.kind],
                )
            self._problem = err.kind
            return None
        if self._problem is not None:
            log.info("PodResources API at %s answers again", self.socket_path)
        self._problem, self.up = None, True
        return self._index

    def _list(self) -> dict:
        import grpc  # loaded by __post_init__

        if not os.path.exists(self.socket_path):
            raise _Failed("absent", "no such socket")
        # a subchannel pool of its own: gRPC shares connections (and their reconnect backoff) between channels to one
        # address, so a List soon after a failed one could fail again on the old connection's backoff, not on
        # the kubelet (a test saw a restarted kubelet refused once more under load)
        options = [
            ("grpc.max_receive_message_length", self.max_bytes),
            ("grpc.enable_retries", 0),
            ("grpc.use_local_subchannel_pool", 1),
        ]
        channel = grpc.insecure_channel("unix:" + os.path.abspath(self.socket_path), options=options)
        try:
            # the request is empty, and the answer is decoded here (exporters/gpu/_wire.py): no generated code
            call = channel.unary_unary(METHOD, request_serializer=None, response_deserializer=None)
            answer = call(b"", timeout=self.timeout)
        except grpc.RpcError as err:
            raise self._failure(err) from None
        finally:
            channel.close()
        try:
            return decode(answer)
        except (WireError, RecursionError) as err:
            raise _Failed("parse", str(err)) from None

    def _failure(self, err) -> _Failed:
        import grpc

        code, detail = err.code(), one_line(err.details() or "")
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return _Failed("timeout", f"no answer within {self.timeout:g}s")
        if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
            return _Failed("too_large", f"the answer is over {self.max_bytes} bytes ({detail})")
        if code == grpc.StatusCode.UNAVAILABLE:
            return _Failed(*self._why_no_connection(detail))
        return _Failed("status", f"{code.name}: {detail}")

    def _why_no_connection(self, detail: str) -> tuple[str, str]:
        """gRPC says UNAVAILABLE for every failed connection: a plain connect tells permission from the rest."""
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        probe.settimeout(self.timeout)
        try:
            probe.connect(self.socket_path)
        except PermissionError as err:
            return "permission", f"{err.strerror} (uid {os.geteuid()})"
        except FileNotFoundError:
            return "absent", "the socket went away"
        except OSError as err:
            return "connect", f"{err.strerror or type(err).__name__}"
        finally:
            probe.close()
        return "connect", f"not a gRPC answer ({detail})"
