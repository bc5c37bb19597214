"""The NVML backend and the exporter on a real GPU: every value read for GPU 0, then a live /metrics checked.

Run by nvml_check.sh (which sets PYTHONPATH); prints `FAIL <what>` per failure and exits 1 if any.
"""

from __future__ import annotations

import math
import os
import socket
import subprocess
import sys
import time
import urllib.request

FAILS: list[str] = []
GiB = 2**30


def fail(line: str) -> None:
    FAILS.append(line)
    print("FAIL", line, flush=True)


def check(ok: bool, line: str) -> None:
    print("ok  " if ok else "FAIL", line, flush=True)
    if not ok:
        FAILS.append(line)


# What an H200 (Hopper, GPM) must serve, and the range a sane value lies in.
SANE = {
    "gpu_up": (1, 1),
    "gpu_profiling_supported": (1, 1),
    "gpu_utilization_ratio": (0, 1),
    "gpu_sm_active_ratio": (0, 1),
    "gpu_sm_occupancy_ratio": (0, 1),
    "gpu_tensor_active_ratio": (0, 1),
    "gpu_dram_active_ratio": (0, 1),
    "gpu_memory_used_bytes": (0, 200 * GiB),
    "gpu_memory_free_bytes": (0, 200 * GiB),
    "gpu_power_watts": (10, 1500),
    "gpu_energy_joules_total": (0, math.inf),
    "gpu_temperature_celsius": (5, 110),
    "gpu_sm_clock_hertz": (1e8, 5e9),
    "gpu_memory_clock_hertz": (1e8, 1e10),
}


def backend_values() -> None:
    import pynvml

    from inferwatch.exporters.gpu import NvmlBackend, PodResolver

    backend = NvmlBackend(pynvml, socket.gethostname(), PodResolver())
    backend.start()
    try:
        snapshot = backend.sample(1.0)
    finally:
        backend.close()
    check(snapshot.up, f"NvmlBackend pass up (error: {snapshot.error}, errors: {snapshot.errors})")
    gpu0 = [r for r in snapshot.readings if dict(r.identity).get("gpu") == "0"]
    if not gpu0:
        return fail("no reading for GPU 0")
    reading = gpu0[0]
    print("GPU 0 identity:", dict(reading.identity), "profiling:", reading.profiling, "workloads:", reading.workloads)
    for name, labels, value in reading.samples:
        print(f"    {name}{dict(labels) if labels else ''} = {value}")
    names = {name for name, _, _ in reading.samples} | {"gpu_up", "gpu_profiling_supported"}
    check(reading.profiling is True, "GPU 0 has GPM (profiling) as Hopper should")
    check(SANE.keys() <= names, f"backend read every common name; missing: {sorted(SANE.keys() - names)}")
    ident = dict(reading.identity)
    check(
        ident.get("uuid", "").startswith("GPU-") and "H200" in ident.get("gpu_model", ""),
        f"uuid {ident.get('uuid')!r} and model {ident.get('gpu_model')!r}",
    )


# Work the GPU is given while the backend samples it: the product's claim is that SM and tensor activity tell
# "busy" from "computing", where GPU-Util cannot. `spin` keeps one single-thread kernel resident (GPU-Util ~100 %,
# almost no SM active), `matmul` runs bf16 matrix products on the tensor cores.
LOADS = {
    "matmul": "a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16); b = a.clone()\n"
    "def step():\n    for _ in range(20): a @ b\n",
    "spin": "def step():\n    for _ in range(20): torch.cuda._sleep(50_000_000)\n",
}
# (load, common name, low, high): the range the value must lie in while that load runs.
EXPECT = [
    ("idle", "gpu_sm_active_ratio", 0.0, 0.05),
    ("idle", "gpu_tensor_active_ratio", 0.0, 0.02),
    ("matmul", "gpu_utilization_ratio", 0.9, 1.0),
    ("matmul", "gpu_sm_active_ratio", 0.5, 1.0),
    ("matmul", "gpu_tensor_active_ratio", 0.2, 1.0),
    ("spin", "gpu_utilization_ratio", 0.9, 1.0),
    ("spin", "gpu_sm_active_ratio", 0.0, 0.1),
    ("spin", "gpu_tensor_active_ratio", 0.0, 0.02),
]


def _load(kind: str) -> subprocess.Popen:
    body = (
        "import sys, torch\n" + LOADS[kind] + "step(); torch.cuda.synchronize(); print('ready', flush=True)\n"
        "while True:\n    step(); torch.cuda.synchronize()\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", body], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()  # waits for the warm-up: the load is on the GPU from here
    if line.strip() != "ready":
        proc.kill()
        raise RuntimeError(f"{kind} load did not start (said {line!r}, exit {proc.wait()})")
    return proc


def activity_under_load() -> None:
    import pynvml

    from inferwatch.exporters.gpu import NvmlBackend, PodResolver

    backend = NvmlBackend(pynvml, socket.gethostname(), PodResolver())
    backend.start()
    seen: dict[str, dict[str, float]] = {}
    try:
        for kind in ("idle", "matmul", "spin"):
            proc = None if kind == "idle" else _load(kind)
            try:
                backend.sample(1.0)  # GPU-Util is NVML's own average over its last period: let it turn
                reading = [r for r in backend.sample(2.0).readings if dict(r.identity).get("gpu") == "0"][0]
            finally:
                if proc is not None:
                    proc.kill()
                    proc.wait()
            seen[kind] = {name: value for name, labels, value in reading.samples if not labels}
            print(
                f"{kind:7s}",
                {k: round(v, 3) for k, v in seen[kind].items() if k.endswith("_ratio")},
                "workloads:",
                reading.workloads,
                flush=True,
            )
    finally:
        backend.close()
    for kind, name, low, high in EXPECT:
        got = seen.get(kind, {}).get(name)
        check(got is not None and low <= got <= high, f"{kind}: {name} in [{low}, {high}]: {got}")


def parse(text: str) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name = line.split("{", 1)[0].split(" ", 1)[0]
            out.setdefault(name, []).append(float(line.rsplit(" ", 1)[1]))
    return out


def exporter_scrape() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    try:
        import typer  # noqa: F401 - the CLI path when its packages were carried

        cmd = [
            sys.executable,
            "-m",
            "inferwatch",
            "exporter",
            "gpu",
            "--listen",
            f"127.0.0.1:{port}",
            "--interval",
            "1s",
        ]
    except ImportError:
        print("typer not importable: starting the exporter through GpuExporter.run (same server and backend)")
        cmd = [
            sys.executable,
            "-c",
            "import pynvml, socket; from inferwatch.exporters.gpu import GpuExporter, "
            "NvmlBackend, PodResolver; GpuExporter(NvmlBackend(pynvml, socket.gethostname(), PodResolver()), "
            f"1.0).run('127.0.0.1', {port})",
        ]
    print("starting:", " ".join(cmd), flush=True)
    # cwd away from the repository: `-m inferwatch` there would import the source tree, not the package layout
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd="/")
    text, deadline = "", time.monotonic() + 60
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
                    text = resp.read().decode()
                if "gpu_exporter_up 1" in text and "gpu_sm_active_ratio" in text:
                    break
            except OSError:
                pass
            time.sleep(0.5)
    finally:
        proc.terminate()
        try:
            out, _ = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
    print("exporter log:\n" + out[-3000:])
    shown = [line for line in text.splitlines() if 'gpu="0"' in line or "exporter" in line]
    print("/metrics (GPU 0 lines):\n" + "\n".join(shown))
    served = parse(text)
    check(served.get("gpu_exporter_up") == [1.0], f"gpu_exporter_up is 1 (got {served.get('gpu_exporter_up')})")
    for name, (low, high) in SANE.items():
        got = served.get(name)
        check(bool(got) and all(low <= v <= high for v in got), f"{name} in [{low}, {high}]: {got}")
    if served.get("gpu_memory_used_bytes") and served.get("gpu_memory_free_bytes"):
        total = served["gpu_memory_used_bytes"][0] + served["gpu_memory_free_bytes"][0]
        check(130 * GiB < total < 150 * GiB, f"used + free = {total / GiB:.1f} GiB (H200: ~140)")


def main() -> int:
    print("python", sys.version.split()[0], "PYTHONPATH", os.environ.get("PYTHONPATH"))
    for step in (backend_values, activity_under_load, exporter_scrape):
        try:
            step()
        except Exception as err:  # noqa: BLE001 - report and go on to the next step
            fail(f"{step.__name__}: {type(err).__name__}: {err}")
    print("PASS" if not FAILS else f"FAILED {len(FAILS)} check(s)")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
