"""Pod attribution: PID -> /proc/PID/cgroup -> pod UID -> pod name, namespace and container."""

from __future__ import annotations

import pytest

from gpu_tools import (CGROUP_V1, CGROUP_V2, CID_A, CID_B, POD_LIST, UID_A, UID_B, fake_kubelet, fake_proc,
                       pod_list_file)
from inferwatch.exporters.gpu import PodResolver, Workload, index_pod_list, pod_of_cgroup


@pytest.mark.parametrize("text,expected", [
    (CGROUP_V1, (UID_A, CID_A)),
    (CGROUP_V2, (UID_B, CID_B)),
    ("0::/kubepods.slice/kubepods-pod" + UID_A.replace("-", "_") + ".slice/crio-" + CID_A + ".scope\n",
     (UID_A, CID_A)),
    ("11:cpu:/kubepods/pod" + UID_B + "\n", (UID_B, "")),
    ("0::/user.slice/session-1.scope\n", None),
    ("", None),
])
def test_pod_uid_and_container_from_cgroup(text, expected):
    assert pod_of_cgroup(text) == expected


def test_pod_list_indexes_pods_and_containers():
    index = index_pod_list(POD_LIST)
    assert index[UID_A] == ("inference", "vllm-llama-0", {CID_A: "vllm"})
    assert index_pod_list({}) == {}


def test_pod_list_names_pod_namespace_and_container(tmp_path):
    resolver = PodResolver(fake_proc(tmp_path / "proc"), tmp_path / "none", str(pod_list_file(tmp_path / "p.json")))
    assert resolver.workload(101) == Workload("inference", "vllm-llama-0", "vllm")
    assert resolver.workload(202) == Workload("research", "sglang-qwen-0", "sglang")
    assert resolver.workloads([101, 102, 202]) == (Workload("inference", "vllm-llama-0", "vllm"),
                                                   Workload("research", "sglang-qwen-0", "sglang"))


def test_kubelet_folder_when_there_is_no_pod_list(tmp_path):
    resolver = PodResolver(fake_proc(tmp_path / "proc"), fake_kubelet(tmp_path / "kubelet"))
    assert resolver.workload(101) == Workload("inference", "vllm-llama-0", "vllm")
    # pod B has no kubelet folder here: the process environment's HOSTNAME is the last resort
    assert resolver.workload(202) == Workload(pod="bare-metal-job")


def test_unreadable_pod_list_falls_back_to_the_kubelet_folder(tmp_path, caplog):
    resolver = PodResolver(fake_proc(tmp_path / "proc"), fake_kubelet(tmp_path / "kubelet"),
                           str(tmp_path / "missing.json"))
    assert resolver.workload(101) == Workload("inference", "vllm-llama-0", "vllm")
    assert resolver.workload(101) is not None
    assert sum("missing.json" in r.message for r in caplog.records) == 1     # said once


def test_processes_outside_kubernetes_and_gone_processes(tmp_path):
    resolver = PodResolver(fake_proc(tmp_path / "proc"), fake_kubelet(tmp_path / "kubelet"))
    assert resolver.workload(303) == Workload(pod="bare-metal-job")
    assert resolver.workload(999) is None
    assert resolver.workloads([999]) == ()


def test_a_kubelet_pod_list_over_the_cap_falls_back_and_is_said_once(tmp_path, caplog, monkeypatch):
    """A kubelet /pods answer over MAX_POD_LIST_BYTES (cut to 2 KiB here) is not read whole: the lookup falls
    back (pod B has no kubelet folder: HOSTNAME) and says so once; under the cap the same list names pod B."""
    import json

    from aiohttp import web

    from inferwatch.exporters.gpu import _pods
    from simtools import serve_app

    monkeypatch.setattr(_pods, "MAX_POD_LIST_BYTES", 2048)
    small = json.dumps(POD_LIST).encode()
    big = json.dumps({**POD_LIST, "padding": "x" * 4096}).encode()
    async def pods(request):
        return web.json_response(body=small if request.path == "/small" else big)

    app = web.Application()
    app.router.add_get("/small", pods)
    app.router.add_get("/big", pods)
    with serve_app(app) as base:
        ok = PodResolver(fake_proc(tmp_path / "proc"), fake_kubelet(tmp_path / "kubelet"), base + "/small")
        assert ok.workload(202) == Workload("research", "sglang-qwen-0", "sglang")
        over = PodResolver(tmp_path / "proc", tmp_path / "kubelet", base + "/big")
        assert over.workload(202) == Workload(pod="bare-metal-job")
        over._fetched = float("-inf")                           # the list is fetched again: still over, not said again
        assert over.workload(202) == Workload(pod="bare-metal-job")
    said = [r.message for r in caplog.records if "/big" in r.message]
    assert len(said) == 1 and "over 2048 bytes" in said[0], said
