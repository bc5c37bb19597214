"""A kubelet's PodResources endpoint for the GPU exporter tests: a real grpcio server on a unix socket.

Its messages come from the kubelet's own api.proto (tests/fixtures/podresources/), compiled at test time by
grpcio-tools' protoc, so what the exporter decodes was encoded by protobuf itself, not by our decoder's mirror.
"""

from __future__ import annotations

import atexit
import importlib
import shutil
import sys
import tempfile
import threading
from concurrent import futures
from pathlib import Path

import grpc
from conftest import FIXTURES

PROTO = FIXTURES / "podresources" / "api.proto"
_compiled: dict[str, object] = {}


def api():
    """The kubelet's podresources v1 messages (api_pb2), compiled once per process."""
    if "pb" not in _compiled:
        from grpc_tools import protoc

        out = Path(tempfile.mkdtemp(prefix="iw-podres-pb-"))
        atexit.register(shutil.rmtree, out, True)
        rc = protoc.main(["protoc", f"-I{PROTO.parent}", f"--python_out={out}", str(PROTO)])
        assert rc == 0, f"protoc failed on {PROTO}"
        sys.path.insert(0, str(out))
        try:
            _compiled["pb"] = importlib.import_module("api_pb2")
        finally:
            sys.path.remove(str(out))
    return _compiled["pb"]


def pod(namespace: str, name: str, *containers: tuple[str, list[tuple[str, list[str]]]]):
    """A PodResources; each container is (name, [(resource name, device IDs)]), with the CPU, NUMA and memory
    fields a real kubelet fills in besides (the exporter must skip them)."""
    pb = api()
    numa = pb.TopologyInfo(nodes=[pb.NUMANode(ID=0)])
    return pb.PodResources(
        name=name,
        namespace=namespace,
        cpu_ids=[2, 3],
        containers=[
            pb.ContainerResources(
                name=ctr,
                cpu_ids=[2, 3],
                memory=[pb.ContainerMemory(memory_type="memory", size=2**30, topology=numa)],
                devices=[pb.ContainerDevices(resource_name=res, device_ids=ids, topology=numa) for res, ids in devices],
            )
            for ctr, devices in containers
        ],
    )


def answer(*pods):
    return api().ListPodResourcesResponse(pod_resources=list(pods))


class Kubelet:
    """Answers `v1.PodResourcesLister/List` with `self.answer` (a message, or raw bytes to send as they are).

    `hang` holds every List until `release` is set; `status` aborts it with that gRPC code; `listed` is set by
    each List received."""

    def __init__(self, path: Path):
        self.path, self.answer = path, answer()
        self.hang, self.status = False, None
        self.release, self.listed = threading.Event(), threading.Event()
        self.calls = 0
        self._server = None

    def start(self) -> Kubelet:
        pb = api()
        service = pb.DESCRIPTOR.services_by_name["PodResourcesLister"]
        assert "List" in service.methods_by_name
        handler = grpc.method_handlers_generic_handler(
            service.full_name,
            {
                "List": grpc.unary_unary_rpc_method_handler(
                    self._list,
                    request_deserializer=pb.ListPodResourcesRequest.FromString,
                    response_serializer=lambda m: m if isinstance(m, bytes) else m.SerializeToString(),
                )
            },
        )
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        self._server.add_generic_rpc_handlers((handler,))
        assert self._server.add_insecure_port(f"unix:{self.path}")
        self._server.start()
        return self

    def _list(self, request, context):
        self.calls += 1
        self.listed.set()
        if self.hang:
            self.release.wait(30)
        if self.status is not None:
            context.abort(self.status, "refused by the test")
        return self.answer

    def stop(self) -> None:
        self.release.set()
        if self._server is not None:
            self._server.stop(None).wait()
            self._server = None


def short_dir() -> Path:
    """A folder whose socket paths fit sockaddr_un's 108 bytes (pytest's tmp_path may not)."""
    return Path(tempfile.mkdtemp(prefix="iwpr", dir="/tmp"))
