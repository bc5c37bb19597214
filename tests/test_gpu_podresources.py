"""GPU -> pod from the kubelet's PodResources API: the client against a real gRPC server speaking the kubelet's
own api.proto on a unix socket, its failures named and counted, and the exporter's labels and health with it."""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import sys
import threading

import grpc
import pytest
from conftest import need
from fakes.fake_pynvml import FakeNvml, ampere, hopper, mig_hopper
from gpu_tools import fake_kubelet, fake_proc, pod_list_file, values
from kubelet_tools import Kubelet, answer, pod, short_dir

from inferwatch.exporters.gpu import (
    GpuExporter,
    NvmlBackend,
    PodResolver,
    PodResourcesClient,
    Workload,
    device_key,
    index_pod_resources,
)
from inferwatch.exporters.gpu._config import BadOption, build_exporter, gpu_config
from inferwatch.exporters.gpu._wire import WireError, decode

GPU0, GPU1, GPU2 = (hopper(0).uuid, ampere(1).uuid, mig_hopper(2).uuid)
MIG1 = f"MIG-{GPU2[4:12]}-1"  # the fake NVML's UUID of GPU 2's MIG instance 1
OWN = "inferwatch_gpu_exporter_"


def node_answer():
    """A node as the NVIDIA device plugin reports it: a whole GPU, a MIG instance (mixed strategy), one GPU
    time-sliced between two pods (one of them two containers), and resources that are not GPUs."""
    return answer(
        pod("inference", "vllm-llama-0", ("vllm", [("nvidia.com/gpu", [GPU0])]), ("sidecar", [])),
        pod(
            "research", "mig-job-0", ("trainer", [("nvidia.com/mig-1g.10gb", [MIG1]), ("example.com/fpga", ["fpga-7"])])
        ),
        pod(
            "batch",
            "embed-0",
            ("embed", [("nvidia.com/gpu.shared", [f"{GPU1}::0"])]),
            ("rerank", [("nvidia.com/gpu.shared", [f"{GPU1}::3"])]),
        ),
        pod("batch", "embed-1", ("embed", [("nvidia.com/gpu.shared", [f"{GPU1}::1"])])),
        pod("kube-system", "no-devices", ("pause", [])),
    )


EXPECTED = {
    GPU0: (Workload("inference", "vllm-llama-0", "vllm"),),
    MIG1: (Workload("research", "mig-job-0", "trainer"),),
    GPU1: (
        Workload("batch", "embed-0", "embed"),
        Workload("batch", "embed-0", "rerank"),
        Workload("batch", "embed-1", "embed"),
    ),
}


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def sock_dir():
    path = short_dir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def kubelet(sock_dir):
    server = Kubelet(sock_dir / "kubelet.sock").start()
    yield server
    server.stop()


def client(path, **kw) -> PodResourcesClient:
    kw.setdefault("clock", Clock())
    return PodResourcesClient(str(path), **kw)


# --- the answer, decoded --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "device_id,key",
    [
        (GPU0, GPU0),  # a whole GPU
        (f"{GPU1}::3", GPU1),  # time-slicing's fourth replica
        (MIG1, MIG1),  # a MIG instance (R470 on)
        (f"{MIG1}::1", MIG1),  # a time-sliced MIG instance
        (f"MIG-{GPU2}/1/0", f"MIG-{GPU2}/1"),  # a MIG instance before R470
        ("1", "1"),
        ("1::2", "1"),
        ("2:0", "2:0"),
        ("2:0::1", "2:0"),  # deviceIDStrategy=index
        ("nvidia0", "nvidia0"),  # GKE: by device node
        ("nvidia0/vgpu3", "nvidia0"),  # GKE time-sharing
        ("nvidia2/gi1", "nvidia2/gi1"),  # GKE MIG
        ("nvidia2/gi1/vgpu0", "nvidia2/gi1"),
    ],
)
def test_device_ids_are_keyed_as_nvml_names_the_device(device_id, key):
    assert device_key(device_id) == key


def test_what_protobuf_encodes_decodes_to_each_gpus_containers():
    """Bytes from protobuf's own encoder (the kubelet's proto, its CPU, NUMA and memory fields filled in):
    non-GPU resources are left out, a shared GPU names every container, in order."""
    data = node_answer().SerializeToString()
    assert index_pod_resources(decode(data)) == EXPECTED
    assert index_pod_resources(decode(b"")) == {}  # a node without pods


def test_random_answers_decode_as_protobuf_reads_them():
    """Seeded random answers (any Unicode in names, empty fields, long IDs) read the same through our decoder as
    through protobuf's own parser."""
    import random

    from kubelet_tools import api

    rng = random.Random(29)
    text = lambda: "".join(rng.choice("aZ-0.é漢\u200b/:") for _ in range(rng.randint(0, 12)))  # noqa: E731
    for _ in range(50):
        message = answer(
            *(
                pod(
                    text(),
                    text(),
                    *(
                        (
                            text(),
                            [
                                (
                                    rng.choice(["nvidia.com/gpu", "nvidia.com/mig-1g.5gb", text()]),
                                    [text() * rng.randint(1, 30) for _ in range(3)],
                                )
                                for _ in range(rng.randint(0, 3))
                            ],
                        )
                        for _ in range(rng.randint(0, 3))
                    ),
                )
                for _ in range(rng.randint(0, 5))
            )
        )
        parsed = api().ListPodResourcesResponse.FromString(message.SerializeToString())
        expected = {
            "pod_resources": [
                {
                    "name": p.name,
                    "namespace": p.namespace,
                    "containers": [
                        {
                            "name": c.name,
                            "devices": [
                                {"resource_name": d.resource_name, "device_ids": list(d.device_ids)} for d in c.devices
                            ],
                        }
                        for c in p.containers
                    ],
                }
                for p in parsed.pod_resources
            ]
        }
        assert decode(message.SerializeToString()) == expected


@pytest.mark.parametrize(
    "data",
    [
        b"\x0a\x05ab",  # a length past the end
        b"\x0a",  # a tag with nothing after it
        b"\x0a\x80",  # a length varint cut short
        b"\x08\x01",  # pod_resources as a varint
        b"\x0b",  # wire type 3 (a proto2 group)
        b"\x00\x00",  # field number 0
        b"\x0a\x04\x0a\x02\xff\xfe",  # a pod name that is not UTF-8
        b"\xff" * 11,  # a varint longer than 64 bits
        b"<html>502 Bad Gateway</html>",
    ],
)
def test_bytes_that_are_not_an_answer_are_refused_whole(data):
    with pytest.raises(WireError):
        decode(data)


# --- the client against a kubelet -----------------------------------------------------------------------------


def test_the_client_lists_gpus_mig_instances_and_shared_gpus(kubelet):
    kubelet.answer = node_answer()
    pods = client(kubelet.path)
    assert pods.devices() == EXPECTED
    assert pods.up is True and pods.errors == {}


def test_an_answer_is_kept_for_its_ttl(kubelet):
    clock = Clock()
    pods = client(kubelet.path, clock=clock, ttl=10)
    pods.devices(), pods.devices()
    assert kubelet.calls == 1
    clock.now = 10
    pods.devices()
    assert kubelet.calls == 2


def test_no_socket_is_said_once_and_counted(sock_dir, caplog):
    clock = Clock()
    pods = client(sock_dir / "kubelet.sock", clock=clock, ttl=10)
    for _ in range(3):
        assert pods.devices() is None
        clock.now += 10
    assert pods.errors == {"absent": 3} and pods.up is False
    said = [r for r in caplog.records if "PodResources" in r.message]
    assert len(said) == 1 and said[0].levelno == logging.WARNING and "absent" in said[0].message


def test_a_hanging_kubelet_times_out(kubelet):
    kubelet.hang = True
    pods = client(kubelet.path, timeout=0.5)
    assert pods.devices() is None
    assert kubelet.listed.wait(10)  # it was asked, and did not answer
    assert pods.errors == {"timeout": 1}


def test_an_answer_over_the_cap_is_refused(kubelet):
    kubelet.answer = answer(
        *(pod("batch", f"job-{i}", ("main", [("nvidia.com/gpu", [f"{GPU0}::{i}"])])) for i in range(200))
    )
    assert client(kubelet.path, max_bytes=4096).devices() is None
    capped = client(kubelet.path, max_bytes=4096)
    capped.devices()
    assert capped.errors == {"too_large": 1}
    assert len(client(kubelet.path).devices()[GPU0]) == 200  # under the default cap the same answer reads


def test_a_grpc_answer_of_garbage_is_a_parse_error(kubelet):
    kubelet.answer = b"\x0a\xff\xff\xff\x0fnot protobuf"
    pods = client(kubelet.path)
    assert pods.devices() is None and pods.errors == {"parse": 1}


def test_an_error_status_is_counted(kubelet):
    kubelet.status = grpc.StatusCode.UNIMPLEMENTED  # a kubelet without the v1 API
    pods = client(kubelet.path)
    assert pods.devices() is None and pods.errors == {"status": 1}


def test_a_socket_that_does_not_speak_grpc(sock_dir):
    """Something else listens there and answers garbage: no connection, counted as such."""
    path = sock_dir / "kubelet.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(8)
    stop = threading.Event()

    def serve():
        listener.settimeout(0.05)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with conn:
                try:
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n\x00\xffgarbage")
                except OSError:
                    pass  # the client hung up first

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        pods = client(path, timeout=2)
        assert pods.devices() is None
        assert set(pods.errors) <= {"connect", "timeout"} and sum(pods.errors.values()) == 1
    finally:
        stop.set()
        thread.join()
        listener.close()


def test_a_kubelet_going_away_and_coming_back(sock_dir, caplog):
    """A kubelet restart: each new failure said once, then the next List after the TTL reads the new kubelet."""
    caplog.set_level(logging.INFO, logger="inferwatch.exporter.gpu")
    path, clock = sock_dir / "kubelet.sock", Clock()
    first = Kubelet(path).start()
    first.answer = node_answer()
    pods = client(path, clock=clock, ttl=10)
    try:
        assert pods.devices() == EXPECTED
    finally:
        first.stop()
    clock.now += 10
    assert pods.devices() is None and pods.errors == {"absent": 1}  # grpc's server removes its socket
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # a dead kubelet's socket left behind
    stale.bind(str(path))
    stale.close()
    clock.now += 10
    assert pods.devices() is None and pods.errors == {"absent": 1, "connect": 1} and pods.up is False
    path.unlink()  # a new kubelet binds its socket anew
    second = Kubelet(path).start()
    second.answer = answer(pod("inference", "vllm-llama-1", ("vllm", [("nvidia.com/gpu", [GPU0])])))
    try:
        clock.now += 10
        assert pods.devices() == {GPU0: (Workload("inference", "vllm-llama-1", "vllm"),)}
        assert pods.up is True
    finally:
        second.stop()
    said = [r.message for r in caplog.records if "PodResources" in r.message]
    assert len(said) == 3 and "absent" in said[0] and "connect" in said[1] and "answers again" in said[2]


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv")
def test_a_user_who_may_not_connect_gets_a_permission_error(kubelet):
    """The kubelet's socket is root's (srwxr-xr-x): any other user gets EACCES on connect. Here the socket is
    another user's and the client runs as root without capabilities (setpriv), which is the same refusal."""
    os.chown(kubelet.path, 65532, 65532)
    os.chmod(kubelet.path, 0o755)
    code = (
        "import sys; from inferwatch.exporters.gpu import PodResourcesClient as C; c = C(sys.argv[1]); "
        "assert c.devices() is None; print(sorted(c.errors.items()))"
    )
    proc = subprocess.run(
        ["setpriv", "--bounding-set", "-all", "--inh-caps", "-all", sys.executable, "-c", code, str(kubelet.path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if proc.returncode != 0 and proc.stderr.startswith("setpriv:"):
        pytest.skip(f"setpriv cannot drop capabilities here: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[('permission', 1)]"
    assert "permission" in proc.stderr and "UID 0" in proc.stderr  # the warning says what to change


# --- the exporter with it ---------------------------------------------------------------------------------------


def _node(tmp_path, socket_path):
    """gpu_tools.node's GPUs: GPU 0 and 1 run processes of pods A and B (named by the pod list), GPU 2's MIG
    instance 1 runs pid 501, which /proc does not have; GPU 3 is lost."""
    gpus = [hopper(0, pids=(101,)), ampere(1, pids=(102, 202)), mig_hopper(2), ampere(3, lost=True)]
    pods = PodResolver(
        fake_proc(tmp_path / "proc"), fake_kubelet(tmp_path / "kubelet"), str(pod_list_file(tmp_path / "pods.json"))
    )
    backend = NvmlBackend(
        FakeNvml(gpus), "node-1", pods, sleep=lambda s: None, pod_resources=PodResourcesClient(str(socket_path))
    )
    return GpuExporter(backend, interval=1.0)


def _sources(text: str) -> dict[tuple[str, str | None], str]:
    return {
        (labels["gpu"], labels.get("GPU_I_ID")): labels["source"]
        for labels, _ in values(text, OWN + "attribution_info")
    }


def test_the_exporter_labels_gpus_with_the_kubelets_pods(tmp_path, kubelet):
    kubelet.answer = answer(
        pod("research", "mig-job-0", ("trainer", [("nvidia.com/mig-1g.10gb", [MIG1])])),
        pod("batch", "embed-0", ("embed", [("nvidia.com/gpu", [f"{GPU1}::0"])])),
        pod("batch", "embed-1", ("embed", [("nvidia.com/gpu", [f"{GPU1}::1"])])),
    )
    exporter = _node(tmp_path, kubelet.path)
    exporter.step()
    text = exporter.render()
    # GPU 1: the kubelet's two pods, not the processes' (pod list) names
    assert sorted(
        (w["namespace"], w["pod"], w["container"]) for w, _ in values(text, "gpu_utilization_ratio", gpu="1")
    ) == [("batch", "embed-0", "embed"), ("batch", "embed-1", "embed")]
    # the MIG instance whose process /proc cannot trace is named by the kubelet
    assert [w["pod"] for w, _ in values(text, "gpu_memory_used_bytes", GPU_I_ID="1")] == ["mig-job-0"]
    # GPU 0 is not allocated through the kubelet (NVIDIA_VISIBLE_DEVICES=all): its processes name it
    assert [w["pod"] for w, _ in values(text, "gpu_utilization_ratio", gpu="0")] == ["vllm-llama-0"]
    assert _sources(text) == {
        ("0", None): "process",
        ("1", None): "pod_resources",
        ("2", None): "none",
        ("2", "1"): "pod_resources",
        ("2", "2"): "none",
    }
    assert values(text, OWN + "pod_resources_up") == [({}, 1.0)]
    assert not values(text, OWN + "pod_resources_errors_total")


def test_gke_device_ids_name_gpus_by_device_node(tmp_path, kubelet):
    """GKE's device plugin lists /dev/nvidia<minor> and <minor>/gi<gi>, shared ones with /vgpu<N>."""
    kubelet.answer = answer(
        pod("inference", "llama-0", ("vllm", [("nvidia.com/gpu", ["nvidia0/vgpu0"])])),
        pod("inference", "llama-1", ("vllm", [("nvidia.com/gpu", ["nvidia0/vgpu1"])])),
        pod("research", "mig-job-0", ("trainer", [("nvidia.com/gpu", ["nvidia2/gi2"])])),
    )
    exporter = _node(tmp_path, kubelet.path)
    exporter.step()
    text = exporter.render()
    assert sorted(w["pod"] for w, _ in values(text, "gpu_utilization_ratio", gpu="0")) == ["llama-0", "llama-1"]
    assert [w["pod"] for w, _ in values(text, "gpu_memory_used_bytes", GPU_I_ID="2")] == ["mig-job-0"]
    assert _sources(text)[("0", None)] == _sources(text)[("2", "2")] == "pod_resources"


def test_index_device_ids_name_gpus_by_nvml_index(tmp_path, kubelet):
    """The NVIDIA device plugin with deviceIDStrategy=index (Bottlerocket's default) lists <index> and
    <index>:<MIG index>; GPU 2's second MIG slot is its GPU instance 2."""
    kubelet.answer = answer(
        pod("batch", "embed-0", ("embed", [("nvidia.com/gpu", ["1::0"])])),
        pod("research", "mig-job-0", ("trainer", [("nvidia.com/mig-3g.40gb", ["2:1"])])),
    )
    exporter = _node(tmp_path, kubelet.path)
    exporter.step()
    text = exporter.render()
    assert [w["pod"] for w, _ in values(text, "gpu_utilization_ratio", gpu="1")] == ["embed-0"]
    assert [w["pod"] for w, _ in values(text, "gpu_memory_used_bytes", GPU_I_ID="2")] == ["mig-job-0"]


@pytest.mark.promtool
def test_without_the_socket_the_exporter_falls_back_and_says_so(tmp_path, sock_dir, caplog):
    exporter = _node(tmp_path, sock_dir / "kubelet.sock")
    exporter.step()
    text = exporter.render()
    assert [w["pod"] for w, _ in values(text, "gpu_utilization_ratio", gpu="0")] == ["vllm-llama-0"]
    assert sorted(w["pod"] for w, _ in values(text, "gpu_utilization_ratio", gpu="1")) == [
        "sglang-qwen-0",
        "vllm-llama-0",
    ]
    # MIG instance 1 runs pid 501, which no pod could be traced to: not silent
    assert _sources(text) == {
        ("0", None): "process",
        ("1", None): "process",
        ("2", None): "none",
        ("2", "1"): "unresolved",
        ("2", "2"): "none",
    }
    assert values(text, OWN + "pod_resources_up") == [({}, 0.0)]
    assert values(text, OWN + "pod_resources_errors_total") == [({"kind": "absent"}, 1.0)]
    proc = subprocess.run([need("promtool"), "check", "metrics"], input=text, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    exporter.step()  # the next pass: nothing said again
    warned = [r.message for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 2, warned
    assert "kubelet.sock: absent" in warned[0] and f"GPU {GPU2} MIG 1:" in warned[1] and "pid 501" in warned[1]


def test_the_flag_turns_the_api_off_and_bounds_the_path(tmp_path):
    default = gpu_config()
    assert default.pod_resources_socket == "/var/lib/kubelet/pod-resources/kubelet.sock"
    exporter = build_exporter(gpu_config(pod_resources_socket=""), nvml=FakeNvml([]))
    assert exporter.backend.pod_resources is None
    exporter = build_exporter(default, nvml=FakeNvml([]))
    assert exporter.backend.pod_resources.socket_path == default.pod_resources_socket
    with pytest.raises(BadOption) as err:
        gpu_config(pod_resources_socket="/" + "x" * 120)
    assert err.value.flag == "--pod-resources-socket" and "107 bytes" in str(err.value)
