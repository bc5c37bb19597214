"""A short check of the NVML backend on a real GPU machine (a few seconds; nothing here runs in CI).

    python -m inferwatch.exporters.gpu.check_real [--interval 1]

It initialises NVML, counts the GPUs, takes one GPM sample pair per GPU that
supports it, runs one exporter pass and one scrape, and checks the scrape with
`promtool check metrics` (when installed) and against the vocabulary. It prints
what it saw and exits 1 if any step failed; paste the output in the closing note.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import subprocess
import sys
import time


def _step(name: str, fn):
    started = time.monotonic()
    try:
        result = fn()
    except Exception as err:  # noqa: BLE001 - report every failure and go on
        print(f"FAIL {name}: {type(err).__name__}: {err}")
        return None, False
    print(f"ok   {name} ({time.monotonic() - started:.2f}s): {result if result is not None else ''}")
    return result, True


def _gpm_pair(nv, index: int, interval: float) -> str:
    handle = nv.nvmlDeviceGetHandleByIndex(index)
    if not nv.nvmlGpmQueryDeviceSupport(handle).isSupportedDevice:
        return "no GPM on this GPU (expected before Hopper): gpu_profiling_supported 0"
    first, second = nv.nvmlGpmSampleAlloc(), nv.nvmlGpmSampleAlloc()
    try:
        nv.nvmlGpmSampleGet(handle, first)
        time.sleep(interval)
        nv.nvmlGpmSampleGet(handle, second)
        ids = {
            "SM_UTIL": nv.NVML_GPM_METRIC_SM_UTIL,
            "SM_OCCUPANCY": nv.NVML_GPM_METRIC_SM_OCCUPANCY,
            "ANY_TENSOR_UTIL": nv.NVML_GPM_METRIC_ANY_TENSOR_UTIL,
            "DRAM_BW_UTIL": nv.NVML_GPM_METRIC_DRAM_BW_UTIL,
        }
        request = nv.c_nvmlGpmMetricsGet_t()
        request.version, request.numMetrics = nv.NVML_GPM_METRICS_GET_VERSION, len(ids)
        request.sample1, request.sample2 = first, second
        for i, metric in enumerate(ids.values()):
            request.metrics[i].metricId = metric
        nv.nvmlGpmMetricsGet(request)
        return ", ".join(
            f"{name}={request.metrics[i].value:.2f}%"
            if request.metrics[i].nvmlReturn == nv.NVML_SUCCESS
            else f"{name}=error {request.metrics[i].nvmlReturn}"
            for i, name in enumerate(ids)
        )
    finally:
        nv.nvmlGpmSampleFree(first)
        nv.nvmlGpmSampleFree(second)


def _scrape(nv, interval: float) -> str:
    from inferwatch.exporters import split_families
    from inferwatch.exporters.gpu import GpuExporter, NvmlBackend, PodResolver, PodResourcesClient
    from inferwatch.mappings import load_catalog

    # the kubelet's socket where this is a Kubernetes node; elsewhere attribution_info says which source named what
    backend = NvmlBackend(nv, socket.gethostname(), PodResolver(), pod_resources=PodResourcesClient())
    exporter = GpuExporter(backend, interval)
    snapshot = exporter.step()  # nvmlInit again: NVML counts references
    text = exporter.render()
    exporter.stop()
    print(text)
    names = {s.name for fam in split_families(text) for s in fam.samples()}
    unknown = {n for n in names if n.startswith("gpu_")} - set(load_catalog().metrics)
    assert snapshot.up and not unknown, f"up={snapshot.up} error={snapshot.error} unknown names={unknown}"
    promtool = shutil.which("promtool")
    if promtool:
        proc = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return f"{len(text.splitlines())} lines, {len(names)} names, promtool {'clean' if promtool else 'not installed'}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between the two GPM samples")
    args = parser.parse_args(argv)
    import pynvml as nv

    ok = True
    _, good = _step("nvmlInit", nv.nvmlInit)
    if not good:
        return 1
    _step("driver", nv.nvmlSystemGetDriverVersion)
    count, good = _step("nvmlDeviceGetCount", nv.nvmlDeviceGetCount)
    ok &= good
    for i in range(count or 0):
        handle = nv.nvmlDeviceGetHandleByIndex(i)
        ok &= _step(
            f"GPU {i}",
            lambda h=handle: (
                f"{nv.nvmlDeviceGetName(h)} {nv.nvmlDeviceGetUUID(h)} arch {nv.nvmlDeviceGetArchitecture(h)}"
            ),
        )[1]
        ok &= _step(f"GPU {i} GPM sample pair", lambda i=i: _gpm_pair(nv, i, args.interval))[1]
    ok &= _step("one exporter pass and scrape", lambda: _scrape(nv, args.interval))[1]
    nv.nvmlShutdown()
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
