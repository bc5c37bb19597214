"""Helpers of the GPU exporter tests: a fake node (GPUs, /proc and the kubelet's folders) and exposition parsing."""

from __future__ import annotations

import json
from pathlib import Path

from fakes.fake_pynvml import FakeNvml, ampere, hopper, mig_hopper

from inferwatch.exporters import split_families
from inferwatch.exporters.gpu import GpuExporter, NvmlBackend, PodResolver

UID_A = "0b0c5f1e-1111-4a2b-9c3d-aaaaaaaaaaaa"
UID_B = "7d3e9a20-2222-4b3c-8d4e-bbbbbbbbbbbb"
CID_A = "a" * 64
CID_B = "b" * 64
CGROUP_V1 = f"12:devices:/kubepods/burstable/pod{UID_A}/{CID_A}\n0::/\n"
CGROUP_V2 = (
    "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod"
    f"{UID_B.replace('-', '_')}.slice/cri-containerd-{CID_B}.scope\n"
)
POD_LIST = {
    "kind": "PodList",
    "items": [
        {
            "metadata": {"uid": UID_A, "name": "vllm-llama-0", "namespace": "inference"},
            "status": {"containerStatuses": [{"name": "vllm", "containerID": f"containerd://{CID_A}"}]},
        },
        {
            "metadata": {"uid": UID_B, "name": "sglang-qwen-0", "namespace": "research"},
            "status": {"containerStatuses": [{"name": "sglang", "containerID": f"containerd://{CID_B}"}]},
        },
    ],
}


def fake_proc(root: Path) -> Path:
    """/proc with pid 101 and 102 in pod A (cgroup v1), 202 in pod B (cgroup v2), 303 outside Kubernetes."""
    procs = {101: CGROUP_V1, 102: CGROUP_V1, 202: CGROUP_V2, 303: "0::/user.slice/session-1.scope\n"}
    for pid, cgroup in procs.items():
        (root / str(pid)).mkdir(parents=True)
        (root / str(pid) / "cgroup").write_text(cgroup)
        (root / str(pid) / "environ").write_bytes(b"PATH=/usr/bin\0HOSTNAME=bare-metal-job\0")
    return root


def fake_kubelet(root: Path) -> Path:
    """/var/lib/kubelet/pods with pod A's folder: namespace in its service-account volume, name in etc-hosts."""
    pod = root / UID_A
    sa = pod / "volumes" / "kubernetes.io~projected" / "kube-api-access-x7k2p"
    sa.mkdir(parents=True)
    (sa / "namespace").write_text("inference")
    (pod / "etc-hosts").write_text("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n10.1.2.3\tvllm-llama-0\n")
    (pod / "containers" / "vllm").mkdir(parents=True)
    return root


def pod_list_file(path: Path) -> Path:
    path.write_text(json.dumps(POD_LIST))
    return path


def node(tmp_path: Path, pod_list: str | None = None, **kw) -> tuple[FakeNvml, GpuExporter]:
    """A node: a Hopper with GPM (pod A), an Ampere without (pods A and B), a MIG Hopper, a lost Ampere.

    The pods are named by a PodList file, or by `pod_list` (a kubelet URL or a path) when given."""
    gpus = [
        hopper(0, pids=(101,), xids=[79], reasons=0b100),
        ampere(1, pids=(102, 202)),
        mig_hopper(2),
        ampere(3, lost=True),
    ]
    nvml = FakeNvml(gpus, **kw)
    pods = PodResolver(
        fake_proc(tmp_path / "proc"),
        fake_kubelet(tmp_path / "kubelet"),
        pod_list or str(pod_list_file(tmp_path / "pods.json")),
    )
    return nvml, GpuExporter(NvmlBackend(nvml, "node-1", pods, sleep=lambda s: None), interval=1.0)


def series(text: str) -> dict[tuple[str, tuple], float]:
    """{(name, sorted labels): value} of an exposition."""
    return {(s.name, tuple(sorted(s.labels))): float(s.value) for fam in split_families(text) for s in fam.samples()}


def values(text: str, name: str, **match) -> list[tuple[dict, float]]:
    return [
        (dict(labels), v)
        for (n, labels), v in series(text).items()
        if n == name and all(dict(labels).get(k) == m for k, m in match.items())
    ]
