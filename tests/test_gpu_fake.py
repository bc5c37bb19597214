"""The fake pynvml stays honest: only names the real nvidia-ml-py has, the same signatures, the real errors."""

from __future__ import annotations

import inspect

import pynvml
import pytest
from fakes.fake_pynvml import CONSTANTS, FakeNvml, ampere, hopper
from gpu_tools import node

from inferwatch.exporters.gpu._nvml import NVML_NAMES


def _public(fake: FakeNvml) -> list[str]:
    return [n for n in dir(fake) if n.startswith(("nvml", "NVML", "c_nvml", "struct_c_nvml"))]


def test_every_name_the_exporter_uses_is_real():
    missing = [n for n in NVML_NAMES if not hasattr(pynvml, n)]
    assert not missing, f"not in the installed nvidia-ml-py: {missing}"


def test_every_fake_name_is_real_with_the_real_signature():
    fake = FakeNvml([])
    for name in _public(fake) + list(CONSTANTS):
        assert hasattr(pynvml, name), name
        real, ours = getattr(pynvml, name), getattr(fake, name)
        if inspect.ismethod(ours):
            assert inspect.signature(ours) == inspect.signature(real), name
        else:
            assert ours is real, f"{name} must be the real module's object"


def test_every_call_of_a_full_pass_is_a_name_the_exporter_declares(tmp_path):
    nvml, exporter = node(tmp_path)
    exporter.step()
    exporter.step()
    called = {c for c in nvml.calls}
    assert called - set(NVML_NAMES) == set()
    # the pass used GPM, MIG sampling, processes and XID events, so the check above covered them
    assert {
        "nvmlGpmMetricsGet",
        "nvmlGpmMigSampleGet",
        "nvmlDeviceGetComputeRunningProcesses",
        "nvmlEventSetWait",
    } <= called


@pytest.mark.parametrize(
    "code,cls",
    [
        (pynvml.NVML_ERROR_GPU_IS_LOST, pynvml.NVMLError_GpuIsLost),
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, pynvml.NVMLError_LibraryNotFound),
    ],
)
def test_fake_raises_the_real_error_classes(code, cls):
    with pytest.raises(cls):
        FakeNvml([], init_error=code).nvmlInit()
    lost = FakeNvml([ampere(lost=True)])
    lost.nvmlInit()
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        lost.nvmlDeviceGetName(lost.nvmlDeviceGetHandleByIndex(0))


def test_gpm_fills_the_real_struct():
    nv = FakeNvml([hopper()])
    nv.nvmlInit()
    h = nv.nvmlDeviceGetHandleByIndex(0)
    s1, s2 = nv.nvmlGpmSampleAlloc(), nv.nvmlGpmSampleAlloc()
    nv.nvmlGpmSampleGet(h, s1)
    nv.nvmlGpmSampleGet(h, s2)
    request = pynvml.c_nvmlGpmMetricsGet_t()
    request.version, request.numMetrics, request.sample1, request.sample2 = 1, 1, s1, s2
    request.metrics[0].metricId = pynvml.NVML_GPM_METRIC_SM_UTIL
    nv.nvmlGpmMetricsGet(request)
    assert request.metrics[0].nvmlReturn == pynvml.NVML_SUCCESS and request.metrics[0].value == 41.5
