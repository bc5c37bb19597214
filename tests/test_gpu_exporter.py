"""The NVML exporter over a fake node: the common vocabulary, honest gaps, pods, and scrapes that never wait."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.request

import pynvml
import pytest
from conftest import ROOT, need
from fakes.fake_pynvml import FakeNvml, hopper
from gpu_tools import node, series, values

from inferwatch.exporters.gpu import GPU_FAMILIES, GpuExporter, NvmlBackend, Snapshot

HOPPER, AMPERE, MIG, LOST = (
    f"GPU-0000000{i}-aaaa-bbbb-cccc-{kind}000000" for i, kind in enumerate(("hopper", "ampere", "migmig", "ampere"))
)


def _scrape(tmp_path, **kw) -> str:
    _, exporter = node(tmp_path, **kw)
    exporter.step()
    return exporter.render()


@pytest.mark.promtool
def test_output_passes_promtool_and_normalize_unchanged(tmp_path):
    text = _scrape(tmp_path)
    proc = subprocess.run([need("promtool"), "check", "metrics"], input=text, capture_output=True, text=True)
    assert proc.returncode == 0 and not proc.stdout.strip() and not proc.stderr.strip(), proc.stdout + proc.stderr
    out = subprocess.run([sys.executable, "-m", "inferwatch", "normalize"], input=text, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout == text


def test_names_are_the_vocabulary_and_ratios_stay_in_range(tmp_path, catalog):
    text = _scrape(tmp_path)
    names = {n for n, _ in series(text)}
    assert {n for n in names if n.startswith("gpu_")} <= set(catalog.metrics)
    assert set(GPU_FAMILIES) <= set(catalog.metrics)
    ratios = [(n, v) for (n, _), v in series(text).items() if n.endswith("_ratio")]
    assert ratios and all(0 <= v <= 1 for _, v in ratios), ratios
    # GPM's percent over 100 on the MIG instance is clamped, not served as 1.02
    assert values(text, "gpu_sm_active_ratio", GPU_I_ID="2")[0][1] == 1.0


def test_every_series_the_gpu_dashboard_queries_is_present(tmp_path):
    dashboard = json.loads((ROOT / "dashboards" / "gpu-activity.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    queried = {n for n in GPU_FAMILIES if any(n in e for e in exprs)}
    assert {"gpu_utilization_ratio", "gpu_sm_active_ratio", "gpu_power_watts"} <= queried
    names = {n for n, _ in series(_scrape(tmp_path))}
    assert queried <= names, queried - names


def test_hopper_has_gpm_ampere_says_it_has_none(tmp_path):
    text = _scrape(tmp_path)
    assert values(text, "gpu_profiling_supported", uuid=HOPPER)[0][1] == 1.0
    assert values(text, "gpu_sm_active_ratio", uuid=HOPPER)[0][1] == 0.415
    assert values(text, "gpu_tensor_active_ratio", uuid=HOPPER)[0][1] == 0.1225
    assert values(text, "gpu_nvlink_tx_bytes_per_second", uuid=HOPPER)[0][1] == 100 * 2**20
    assert all(v == 0.0 for _, v in values(text, "gpu_profiling_supported", uuid=AMPERE))
    for name in ("gpu_sm_active_ratio", "gpu_sm_occupancy_ratio", "gpu_tensor_active_ratio", "gpu_dram_active_ratio"):
        assert not values(text, name, uuid=AMPERE), f"{name}: a fake 0 on a GPU without GPM"
    assert values(text, "gpu_utilization_ratio", uuid=AMPERE)[0][1] == 0.88


def test_units_are_base_units(tmp_path):
    text = _scrape(tmp_path)
    one = lambda name: values(text, name, uuid=HOPPER)[0][1]  # noqa: E731
    assert one("gpu_power_watts") == 300.0 and one("gpu_energy_joules_total") == 5000.0
    assert one("gpu_memory_used_bytes") == 20 * 2**30 and one("gpu_memory_free_bytes") == 60 * 2**30
    assert one("gpu_sm_clock_hertz") == 1980e6 and one("gpu_pcie_rx_bytes_per_second") == 2000 * 1024
    throttle = {labels["reason"]: v for labels, v in values(text, "gpu_clock_throttle_active", uuid=HOPPER)}
    assert throttle["sw_power_cap"] == 1.0 and throttle["gpu_idle"] == 0.0 and len(throttle) == 9
    assert values(text, "gpu_xid_errors_total", uuid=HOPPER)[0] == (
        {
            "gpu": "0",
            "uuid": HOPPER,
            "gpu_model": "NVIDIA H100 80GB HBM3",
            "hostname": "node-1",
            "xid": "79",
            "namespace": "inference",
            "pod": "vllm-llama-0",
            "container": "vllm",
        },
        1.0,
    )
    assert {labels["type"]: v for labels, v in values(text, "gpu_ecc_errors_total", uuid=HOPPER)} == {
        "corrected": 3.0,
        "uncorrected": 0.0,
    }


def test_mig_instances_carry_dcgm_labels(tmp_path):
    text = _scrape(tmp_path)
    instances = values(text, "gpu_memory_used_bytes", uuid=MIG)
    profiles = {labels.get("GPU_I_ID"): labels.get("GPU_I_PROFILE") for labels, _ in instances}
    assert profiles == {None: None, "1": "1g.10gb", "2": "3g.40gb"}
    assert values(text, "gpu_sm_active_ratio", GPU_I_ID="1")[0][1] == 0.3
    assert not values(text, "gpu_utilization_ratio", uuid=MIG)  # NVML has no GPU-Util in MIG mode
    assert not values(text, "gpu_power_watts", GPU_I_ID="1")  # power belongs to the whole GPU
    # the instance's process is pid 501, not in any pod here: no workload labels
    assert "pod" not in values(text, "gpu_sm_active_ratio", GPU_I_ID="1")[0][0]


def test_a_gpu_shared_by_two_pods_is_written_once_per_pod(tmp_path):
    text = _scrape(tmp_path)
    pods = sorted(
        (labels["namespace"], labels["pod"], labels["container"])
        for labels, _ in values(text, "gpu_power_watts", uuid=AMPERE)
    )
    assert pods == [("inference", "vllm-llama-0", "vllm"), ("research", "sglang-qwen-0", "sglang")]
    [(labels, _)] = values(text, "gpu_utilization_ratio", uuid=HOPPER)
    assert (labels["namespace"], labels["pod"], labels["container"]) == ("inference", "vllm-llama-0", "vllm")


def test_a_lost_gpu_is_down_and_the_others_keep_serving(tmp_path):
    nvml, exporter = node(tmp_path)
    exporter.step()
    nvml.gpus[0].lost = True  # Hopper falls off the bus between passes
    text = (exporter.step(), exporter.render())[1]
    assert values(text, "gpu_up", uuid=HOPPER) == [
        ({"gpu": "0", "uuid": HOPPER, "gpu_model": "NVIDIA H100 80GB HBM3", "hostname": "node-1"}, 0.0)
    ]
    assert [n for (n, labels), _ in series(text).items() if dict(labels).get("uuid") == HOPPER] == ["gpu_up"]
    assert values(text, "gpu_up", gpu="3") == [({"gpu": "3", "hostname": "node-1"}, 0.0)]  # lost from the start
    assert values(text, "gpu_up", uuid=AMPERE)[0][1] == 1.0
    assert values(text, "gpu_exporter_up")[0][1] == 1.0
    assert values(text, "inferwatch_gpu_exporter_errors_total", kind="gpu_lost")[0][1] >= 2


def test_nvml_init_failure_keeps_serving_and_recovers(tmp_path, caplog):
    nvml, exporter = node(tmp_path, init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    exporter.step()
    exporter.step()
    text = exporter.render()
    assert values(text, "gpu_exporter_up") == [({}, 0.0)]
    assert not [n for n, _ in series(text) if n.startswith("gpu_") and n != "gpu_exporter_up"]
    assert values(text, "inferwatch_gpu_exporter_errors_total", kind="init")[0][1] == 2.0
    errors = [r.message for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and "NVML Shared Library Not Found" in errors[0]  # logged once
    nvml.init_error = None  # the driver arrives
    exporter.step()
    assert values(exporter.render(), "gpu_exporter_up")[0][1] == 1.0


class _Blocking:
    """A backend whose second pass hangs, like NVML on a sick GPU."""

    name = "nvml"

    def __init__(self):
        self.release, self.passes = threading.Event(), 0

    def start(self):
        pass

    def close(self):
        pass

    def sample(self, wait):
        self.passes += 1
        if self.passes > 1:
            self.release.wait(30)
        return Snapshot(True, taken_at=time.time())


def test_scrapes_read_the_last_pass_and_never_wait_for_the_backend():
    backend = _Blocking()
    exporter = GpuExporter(backend, interval=0.1)
    server = exporter.server("127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    exporter.start()
    try:
        deadline = time.time() + 5
        while backend.passes < 2 and time.time() < deadline:
            time.sleep(0.02)
        started = time.monotonic()
        with urllib.request.urlopen(f"http://127.0.0.1:{server.server_address[1]}/metrics", timeout=5) as resp:
            body = resp.read().decode()
        assert time.monotonic() - started < 1.0
        assert "gpu_exporter_up 1.0" in body and "inferwatch_gpu_exporter_sample_age_seconds" in body
    finally:
        backend.release.set()
        server.shutdown()
        server.server_close()
        exporter.stop()


def test_a_pass_older_than_stale_after_is_served_down_without_gpu_values():
    """A sampler frozen (an engine trickling its answer, a hung driver call) must not serve its last values as
    live with gpu_exporter_up 1 (issue 23 §3); the sample age still says how old the pass is."""
    import dataclasses

    exporter = GpuExporter(NvmlBackend(FakeNvml([hopper()]), "h", sleep=lambda s: None), interval=1.0)
    exporter.step()
    assert "gpu_exporter_up 1.0" in exporter.render() and "gpu_power_watts{" in exporter.render()
    exporter.snapshot = dataclasses.replace(exporter.snapshot, taken_at=time.time() - 60)
    body = exporter.render()
    assert "gpu_exporter_up 0.0" in body and "gpu_power_watts{" not in body
    assert values(body, "inferwatch_gpu_exporter_sample_age_seconds")[0][1] >= 60


def test_gpm_samples_are_freed_and_taken_around_the_wait(tmp_path):
    waits = []
    nvml = FakeNvml([hopper()])
    backend = NvmlBackend(nvml, "h", sleep=waits.append)
    backend.start()
    backend.sample(1.5)
    assert waits == [1.5]
    gets = [i for i, c in enumerate(nvml.calls) if c == "nvmlGpmSampleGet"]
    wait_at = nvml.calls.index("nvmlGpmMetricsGet")
    assert len(gets) == 2 and gets[1] < wait_at
    assert not nvml._live_samples


def test_package_all_is_its_public_names():
    import inferwatch.exporters.gpu as package

    public = {n for n, v in vars(package).items() if not n.startswith("_") and type(v).__name__ != "module"}
    assert set(package.__all__) == public


def test_the_real_gpu_check_runs_end_to_end_over_the_fake(monkeypatch, capsys):
    from fakes.fake_pynvml import ampere, hopper

    from inferwatch.exporters.gpu import check_real

    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml([hopper(0), ampere(1)]))
    assert check_real.main(["--interval", "0.01"]) == 0
    out = capsys.readouterr().out
    assert "ok   GPU 0 GPM sample pair" in out and "SM_UTIL=41.50%" in out and "no GPM" in out
    assert out.rstrip().endswith("PASS") and "gpu_exporter_up 1.0" in out


def test_the_oldest_supported_nvidia_ml_py_without_temperature_v_still_reads_temperature():
    class Old(FakeNvml):  # nvidia-ml-py 12.535 (pyproject's floor) has no nvmlDeviceGetTemperatureV
        def __getattribute__(self, name):
            if name == "nvmlDeviceGetTemperatureV":
                raise AttributeError(name)
            return super().__getattribute__(name)

    nvml = Old([hopper()])
    exporter = GpuExporter(NvmlBackend(nvml, "h", sleep=lambda s: None))
    exporter.step()
    assert values(exporter.render(), "gpu_temperature_celsius")[0][1] == 60.0


def _raw(port: int, data: bytes, timeout: float = 10) -> bytes:
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
        return b"".join(chunks)


def _serving(**bounds):
    from inferwatch.exporters.gpu import SimulatedBackend

    exporter = GpuExporter(SimulatedBackend(1, "h"), interval=0.1)
    server = exporter.server("127.0.0.1", 0, **bounds)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return exporter, server


def test_bad_lengths_and_deep_json_get_400_not_a_traceback_or_a_held_handler():
    """Issue 23 §3: `Content-Length: abc` and 60,000-deep JSON gave tracebacks and no answer; -1 held the
    handler."""
    exporter, server = _serving()
    port = server.server_address[1]
    try:
        for length in (b"abc", b"-1", b"99999999"):
            answer = _raw(port, b"POST /admin/scenario HTTP/1.1\r\nHost: x\r\nContent-Length: " + length + b"\r\n\r\n")
            assert answer.startswith(b"HTTP/1.0 400"), (length, answer[:80])
        deep = b"[" * 32000 + b"]" * 32000  # 32,000 deep, under the 64 KiB body cap
        answer = _raw(
            port,
            b"POST /admin/scenario HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %d"
            b"\r\n\r\n" % len(deep) + deep,
        )
        assert answer.startswith(b"HTTP/1.0 400") and b"scenario" in answer
    finally:
        server.shutdown()
        server.server_close()


def test_idle_connections_are_closed_and_connections_are_capped():
    """Issue 23 §3: 500 idle sockets held 502 threads. Over the cap a connection is closed at once (the held
    ones stay served), and an idle client is closed after the idle timeout."""
    import socket

    exporter, server = _serving(idle_timeout=60, max_connections=4)
    port = server.server_address[1]
    socks = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(10)]
    try:
        for sock in socks[4:]:  # accepted in order: the first four hold the slots
            assert sock.recv(1) == b""
        assert exporter._errors["connections_refused"] == 6
    finally:
        for sock in socks:
            sock.close()
        server.shutdown()
        server.server_close()
    exporter, server = _serving(idle_timeout=0.2)
    try:
        with socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=30) as sock:
            assert sock.recv(1) == b""  # closed by the server, well before our 30 s
    finally:
        server.shutdown()
        server.server_close()
