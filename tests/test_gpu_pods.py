"""Pod attribution: PID -> /proc/PID/cgroup -> pod UID -> pod name, namespace and container."""

from __future__ import annotations

import json
import subprocess
import threading

import pytest
from conftest import need
from gpu_tools import (
    CGROUP_V1,
    CGROUP_V2,
    CID_A,
    CID_B,
    POD_LIST,
    UID_A,
    UID_B,
    fake_kubelet,
    fake_proc,
    node,
    pod_list_file,
    values,
)
from promtools import serve

from inferwatch.exporters.gpu import PodResolver, Workload, index_pod_list, pod_of_cgroup
from inferwatch.sim._demo import free_port


@pytest.mark.parametrize(
    "text,expected",
    [
        (CGROUP_V1, (UID_A, CID_A)),
        (CGROUP_V2, (UID_B, CID_B)),
        (
            "0::/kubepods.slice/kubepods-pod" + UID_A.replace("-", "_") + ".slice/crio-" + CID_A + ".scope\n",
            (UID_A, CID_A),
        ),
        ("11:cpu:/kubepods/pod" + UID_B + "\n", (UID_B, "")),
        ("0::/user.slice/session-1.scope\n", None),
        ("", None),
    ],
)
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
    assert resolver.workloads([101, 102, 202]) == (
        Workload("inference", "vllm-llama-0", "vllm"),
        Workload("research", "sglang-qwen-0", "sglang"),
    )


def test_kubelet_folder_when_there_is_no_pod_list(tmp_path):
    resolver = PodResolver(fake_proc(tmp_path / "proc"), fake_kubelet(tmp_path / "kubelet"))
    assert resolver.workload(101) == Workload("inference", "vllm-llama-0", "vllm")
    # pod B has no kubelet folder here: the process environment's HOSTNAME is the last resort
    assert resolver.workload(202) == Workload(pod="bare-metal-job")


def test_unreadable_pod_list_falls_back_to_the_kubelet_folder(tmp_path, caplog):
    resolver = PodResolver(
        fake_proc(tmp_path / "proc"), fake_kubelet(tmp_path / "kubelet"), str(tmp_path / "missing.json")
    )
    assert resolver.workload(101) == Workload("inference", "vllm-llama-0", "vllm")
    assert resolver.workload(101) is not None
    assert sum("missing.json" in r.message for r in caplog.records) == 1  # said once


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
    from simtools import serve_app

    from inferwatch.exporters.gpu import _pods

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
        over._fetched = float("-inf")  # the list is fetched again: still over, not said again
        assert over.workload(202) == Workload(pod="bare-metal-job")
    said = [r.message for r in caplog.records if "/big" in r.message]
    assert len(said) == 1 and "over 2048 bytes" in said[0], said


# --- a kubelet that cannot be read: the exporter keeps serving, falls back to the kubelet folder, counts why -------


def _status(code: int):
    def send(handler):
        handler.send_error(code)

    return send


def _body(data: bytes):
    def send(handler):
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    return send


def _not_http(handler):
    handler.wfile.write(b"\x16\x03\x01 not an HTTP answer\r\n\r\n")  # e.g. a TLS port spoken to in plain HTTP
    handler.close_connection = True


_HOLD = threading.Event()  # /slow answers only once the module is done: past any timeout, however busy the box


def _slow(handler):
    _HOLD.wait(60)
    _body(json.dumps(POD_LIST).encode())(handler)


KUBELET = {
    "/forbidden": _status(403),
    "/html": _body(b"<html>Unauthorized</html>"),
    "/items-not-a-list": _body(b'{"kind": "PodList", "items": 5}'),
    "/a-list": _body(b"[1, 2]"),
    "/not-http": _not_http,
    "/over-cap": _body(json.dumps({**POD_LIST, "pad": "x" * 4096}).encode()),
    "/slow": _slow,
}
BROKEN = [  # (pod list: a path on the fake kubelet, a closed port, or a file; the kind counted)
    ("/forbidden", "http"),
    ("/html", "parse"),
    ("/items-not-a-list", "parse"),
    ("/a-list", "parse"),
    ("/not-http", "connect"),
    ("/over-cap", "too_large"),
    ("/slow", "timeout"),
    ("closed-port", "connect"),
    ("missing-file", "file"),
]


def test_every_kind_of_pod_list_error_is_exercised():
    from inferwatch.exporters.gpu._pods import POD_LIST_ERRORS

    assert {kind for _, kind in BROKEN} == set(POD_LIST_ERRORS)


@pytest.fixture(scope="module")
def kubelet():
    with serve(KUBELET) as base:
        try:
            yield base
        finally:
            _HOLD.set()


@pytest.mark.parametrize("where,kind", BROKEN, ids=[b[0].strip("/") for b in BROKEN])
def test_an_unreadable_pod_list_is_counted_by_kind_and_the_exporter_keeps_serving(
    where, kind, kubelet, tmp_path, caplog, monkeypatch
):
    from inferwatch.exporters.gpu import _pods

    monkeypatch.setattr(_pods, "MAX_POD_LIST_BYTES", 2048)
    # short only where the answer never comes (a busy machine may take a second to answer the others)
    monkeypatch.setattr(_pods, "POD_LIST_TIMEOUT", 0.3 if kind == "timeout" else 30.0)
    url = {"closed-port": f"http://127.0.0.1:{free_port()}/pods", "missing-file": str(tmp_path / "none.json")}
    _, exporter = node(tmp_path, pod_list=url.get(where, kubelet + where))
    exporter.step()
    exporter.backend.pods._fetched = float("-inf")  # the next pass fetches the list again: still broken
    text = (exporter.step(), exporter.render())[1]
    assert values(text, "gpu_exporter_up")[0][1] == 1.0 and values(text, "gpu_up", gpu="0")[0][1] == 1.0
    # pod A is still named, from its kubelet folder; pod B has none: its process's HOSTNAME
    assert {
        (labels.get("namespace"), labels["pod"]) for labels, _ in values(text, "gpu_utilization_ratio", gpu="1")
    } == {("inference", "vllm-llama-0"), (None, "bare-metal-job")}
    assert values(text, "inferwatch_gpu_exporter_pod_list_errors_total") == [({"kind": kind}, 2.0)]
    errors = {labels["kind"] for labels, _ in values(text, "inferwatch_gpu_exporter_errors_total")}
    assert errors == {"gpu_lost"}  # GPU 3 only
    said = [r.message for r in caplog.records if "pod list" in r.message]
    assert len(said) == 1 and f": {kind}: " in said[0] and "\n" not in said[0], said  # once, on one line


@pytest.mark.promtool
def test_pod_list_errors_are_valid_exposition_and_absent_when_the_list_reads(kubelet, tmp_path):
    _, exporter = node(tmp_path / "ok")
    exporter.step()
    assert not values(exporter.render(), "inferwatch_gpu_exporter_pod_list_errors_total")
    _, exporter = node(tmp_path / "broken", pod_list=kubelet + "/forbidden")
    exporter.step()
    text = exporter.render()
    proc = subprocess.run([need("promtool"), "check", "metrics"], input=text, capture_output=True, text=True)
    assert proc.returncode == 0 and not proc.stdout.strip() and not proc.stderr.strip(), proc.stdout + proc.stderr
    assert "# TYPE inferwatch_gpu_exporter_pod_list_errors_total counter\n" in text


def test_one_capped_read_serves_the_pod_list_and_the_followed_engine(kubelet):
    """get_capped returns a body of exactly the limit whole and refuses one byte more (a ValueError, as both
    callers count it), for the pod resolver and the simulated GPUs' --follow alike."""
    from inferwatch.exporters.gpu import _pods, _sim
    from inferwatch.exporters.gpu._http import TooLarge, get_capped

    body = json.dumps({**POD_LIST, "pad": "x" * 4096}).encode()
    assert get_capped(kubelet + "/over-cap", 5, len(body)) == body
    with pytest.raises(TooLarge, match=f"body is over {len(body) - 1} bytes"):
        get_capped(kubelet + "/over-cap", 5, len(body) - 1)
    assert issubclass(TooLarge, ValueError) and _pods.get_capped is _sim.get_capped is get_capped


def _raw_server(answer):
    """A loopback server that runs `answer(conn)` for each connection, in a thread; returns its URL."""
    import socket
    import threading

    listener = socket.create_server(("127.0.0.1", 0))

    def serve():
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                answer(conn)

    threading.Thread(target=serve, daemon=True).start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}/metrics", listener


def test_a_body_cut_under_its_content_length_is_an_error_not_a_short_body():
    """urllib returns the bytes it got when the peer closes early; a follow read must be whole (issue 23 §3)."""
    import http.client

    from inferwatch.exporters.gpu._http import get_capped

    url, listener = _raw_server(
        lambda c: c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nllm_requests_running 3\n")
    )
    try:
        with pytest.raises(http.client.IncompleteRead):
            get_capped(url, 5, 1 << 20)
    finally:
        listener.close()


def test_a_trickled_body_fails_at_the_total_deadline_not_per_read():
    """One byte every 0.2 s never trips a per-read timeout of 1 s; the whole read has a deadline (issue 23 §3)."""
    import threading

    from inferwatch.exporters.gpu._http import get_capped

    done = threading.Event()

    def trickle(conn):
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
        while not done.wait(0.2):
            try:
                conn.sendall(b"#")
            except OSError:
                return

    url, listener = _raw_server(trickle)
    try:
        with pytest.raises(TimeoutError):
            get_capped(url, 1.0, 1 << 20)
    finally:
        done.set()
        listener.close()
