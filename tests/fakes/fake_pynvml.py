"""A fake `pynvml` for machines without a GPU: only names the real nvidia-ml-py has, its error classes.

`FakeNvml(gpus)` behaves like the module: `nvml.nvmlInit()`, `nvml.NVML_CLOCK_SM`,
`nvml.NVMLError_GpuIsLost`. Constants and error classes are the installed
module's own objects; every method has the real function's signature
(tests/test_gpu_fake.py checks both). Builders below give the GPUs of the
tests: a Hopper with GPM, an Ampere without, MIG instances, a lost GPU.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from types import SimpleNamespace

import pynvml as _real

# constants and classes taken from the real module (only names it has, by construction)
CONSTANTS = (
    "NVML_SUCCESS",
    "NVML_TEMPERATURE_GPU",
    "NVML_CLOCK_SM",
    "NVML_CLOCK_MEM",
    "NVML_PCIE_UTIL_TX_BYTES",
    "NVML_PCIE_UTIL_RX_BYTES",
    "NVML_MEMORY_ERROR_TYPE_CORRECTED",
    "NVML_MEMORY_ERROR_TYPE_UNCORRECTED",
    "NVML_VOLATILE_ECC",
    "NVML_DEVICE_MIG_ENABLE",
    "NVML_DEVICE_MIG_DISABLE",
    "NVML_GPM_METRICS_GET_VERSION",
    "NVML_GPM_SUPPORT_VERSION",
    "nvmlEventTypeXidCriticalError",
    "nvmlTemperature_v1",
    "c_nvmlGpmMetricsGet_t",
    "c_nvmlGpmSupport_t",
    "c_nvmlGpmSample_t",
    "struct_c_nvmlGpmSample_t",
    "NVMLError",
    "NVML_DEVICE_ARCH_HOPPER",
    "NVML_DEVICE_ARCH_AMPERE",
) + tuple(
    n for n in dir(_real) if n.startswith(("NVML_GPM_METRIC_", "nvmlClocksEventReason", "NVMLError_", "NVML_ERROR_"))
)

SM, OCC, TENSOR, DRAM = (
    _real.NVML_GPM_METRIC_SM_UTIL,
    _real.NVML_GPM_METRIC_SM_OCCUPANCY,
    _real.NVML_GPM_METRIC_ANY_TENSOR_UTIL,
    _real.NVML_GPM_METRIC_DRAM_BW_UTIL,
)


@dataclass
class FakeMig:
    gpu_instance: int
    slices: int
    memory_mb: int
    used: int
    gpm: dict[int, float] = field(default_factory=dict)
    pids: tuple[int, ...] = ()


@dataclass
class FakeGpu:
    uuid: str
    name: str
    gpm: dict[int, float] | None = None  # GPM metric id -> percent; None: no GPM (pre-Hopper)
    util: int = 50  # percent
    total: int = 80 * 2**30
    used: int = 20 * 2**30
    power_mw: int = 300_000
    energy_mj: int = 5_000_000
    temp: int = 60
    sm_mhz: int = 1980
    mem_mhz: int = 2619
    reasons: int = 0
    ecc: tuple[int, int] | None = (3, 0)  # corrected, uncorrected; None: ECC off
    pcie_kb: tuple[int, int] = (1000, 2000)  # tx, rx KB/s
    pids: tuple[int, ...] = ()
    migs: list[FakeMig] | None = None
    lost: bool = False
    xids: list[int] = field(default_factory=list)
    minor: int | None = None  # /dev/nvidiaN; None: its index


class _Handle:
    def __init__(self, gpu: FakeGpu, mig: FakeMig | None = None):
        self.gpu, self.mig = gpu, mig


def _fail(code: int):
    raise _real.NVMLError(code)  # the real class picks the real subclass (NVMLError_GpuIsLost, ...)


class FakeNvml:
    """The pynvml module over `gpus`; `init_error` makes nvmlInit fail with that NVML_ERROR_* code."""

    def __init__(self, gpus: list[FakeGpu], init_error: int | None = None):
        for name in CONSTANTS:
            setattr(self, name, getattr(_real, name))
        self.gpus, self.init_error = gpus, init_error
        self.initialised = False
        self.calls: list[str] = []
        self._samples: dict[int, tuple[_Handle, int]] = {}
        self._live_samples: set[int] = set()
        self._events: list[tuple[_Handle, int]] = []
        self._registered: set[str] = set()
        self._tick = 0

    def __getattribute__(self, name):
        if name.startswith("nvml"):
            object.__getattribute__(self, "calls").append(name)
        return object.__getattribute__(self, name)

    # -- helpers ------------------------------------------------------------------------------------------

    def _gpu(self, handle: _Handle) -> FakeGpu:
        if not self.initialised:
            _fail(_real.NVML_ERROR_UNINITIALIZED)
        if handle.gpu.lost:
            _fail(_real.NVML_ERROR_GPU_IS_LOST)
        return handle.gpu

    def _whole(self, handle: _Handle) -> FakeGpu:
        gpu = self._gpu(handle)
        if handle.mig is not None:
            _fail(_real.NVML_ERROR_NOT_SUPPORTED)
        return gpu

    # -- init and devices ---------------------------------------------------------------------------------

    def nvmlInit(self):
        if self.init_error is not None:
            _fail(self.init_error)
        self.initialised = True

    def nvmlShutdown(self):
        self.initialised = False

    def nvmlDeviceGetCount(self):
        if not self.initialised:
            _fail(_real.NVML_ERROR_UNINITIALIZED)
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index):
        if not 0 <= index < len(self.gpus):
            _fail(_real.NVML_ERROR_INVALID_ARGUMENT)
        return _Handle(self.gpus[index])

    def nvmlDeviceGetMinorNumber(self, handle):
        gpu = self._gpu(handle)
        return gpu.minor if gpu.minor is not None else self.gpus.index(gpu)  # /dev/nvidiaN

    def nvmlDeviceGetUUID(self, handle):
        gpu = self._gpu(handle)
        return f"MIG-{gpu.uuid[4:12]}-{handle.mig.gpu_instance}" if handle.mig else gpu.uuid

    def nvmlDeviceGetName(self, handle):
        return self._gpu(handle).name

    def nvmlDeviceGetArchitecture(self, device):
        return _real.NVML_DEVICE_ARCH_HOPPER if self._gpu(device).gpm is not None else _real.NVML_DEVICE_ARCH_AMPERE

    def nvmlSystemGetDriverVersion(self):
        return "580.95.05"

    # -- plain reads --------------------------------------------------------------------------------------

    def nvmlDeviceGetUtilizationRates(self, handle):
        gpu = self._whole(handle)
        if gpu.migs is not None:
            _fail(_real.NVML_ERROR_NOT_SUPPORTED)  # no GPU-Util in MIG mode
        return SimpleNamespace(gpu=gpu.util, memory=10)

    def nvmlDeviceGetMemoryInfo(self, handle, version=None):
        gpu = self._gpu(handle)
        if handle.mig is not None:
            total = handle.mig.memory_mb * 2**20
            return SimpleNamespace(total=total, used=handle.mig.used, free=total - handle.mig.used)
        return SimpleNamespace(total=gpu.total, used=gpu.used, free=gpu.total - gpu.used)

    def nvmlDeviceGetPowerUsage(self, handle):
        return self._whole(handle).power_mw

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        return self._whole(handle).energy_mj

    def nvmlDeviceGetTemperatureV(self, handle, sensor, version=_real.nvmlTemperature_v1):
        assert sensor == _real.NVML_TEMPERATURE_GPU
        return self._whole(handle).temp

    def nvmlDeviceGetTemperature(self, handle, sensor):
        return self._whole(handle).temp

    def nvmlDeviceGetClockInfo(self, handle, type):  # noqa: A002 - the real parameter name
        gpu = self._whole(handle)
        return {_real.NVML_CLOCK_SM: gpu.sm_mhz, _real.NVML_CLOCK_MEM: gpu.mem_mhz}[type]

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return self._whole(handle).reasons

    def nvmlDeviceGetTotalEccErrors(self, handle, errorType, counterType):
        gpu = self._whole(handle)
        if gpu.ecc is None:
            _fail(_real.NVML_ERROR_NOT_SUPPORTED)
        return gpu.ecc[0 if errorType == _real.NVML_MEMORY_ERROR_TYPE_CORRECTED else 1]

    def nvmlDeviceGetPcieThroughput(self, device, counter):
        gpu = self._whole(device)
        return gpu.pcie_kb[0 if counter == _real.NVML_PCIE_UTIL_TX_BYTES else 1]

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        gpu = self._gpu(handle)
        pids = handle.mig.pids if handle.mig else gpu.pids
        return [SimpleNamespace(pid=pid, usedGpuMemory=2**30) for pid in pids]

    # -- MIG ----------------------------------------------------------------------------------------------

    def nvmlDeviceGetMigMode(self, device):
        gpu = self._whole(device)
        if gpu.migs is None:
            return [_real.NVML_DEVICE_MIG_DISABLE, _real.NVML_DEVICE_MIG_DISABLE]
        return [_real.NVML_DEVICE_MIG_ENABLE, _real.NVML_DEVICE_MIG_ENABLE]

    def nvmlDeviceGetMaxMigDeviceCount(self, device):
        return 7 if self._whole(device).migs is not None else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, device, index):
        gpu = self._whole(device)
        if gpu.migs is None or index >= len(gpu.migs):
            _fail(_real.NVML_ERROR_NOT_FOUND)
        return _Handle(gpu, gpu.migs[index])

    def nvmlDeviceGetGpuInstanceId(self, device):
        self._gpu(device)
        if device.mig is None:
            _fail(_real.NVML_ERROR_INVALID_ARGUMENT)
        return device.mig.gpu_instance

    def nvmlDeviceGetAttributes(self, device):
        self._gpu(device)
        mig = device.mig
        return SimpleNamespace(
            gpuInstanceSliceCount=mig.slices if mig else 7,
            computeInstanceSliceCount=1,
            memorySizeMB=mig.memory_mb if mig else device.gpu.total // 2**20,
            multiprocessorCount=16,
        )

    # -- GPM ----------------------------------------------------------------------------------------------

    def nvmlGpmQueryDeviceSupport(self, device):
        gpu = self._gpu(device)
        support = _real.c_nvmlGpmSupport_t()
        support.version = _real.NVML_GPM_SUPPORT_VERSION
        support.isSupportedDevice = int(gpu.gpm is not None)
        return support

    def nvmlGpmSampleAlloc(self):
        sample = ctypes.pointer(_real.struct_c_nvmlGpmSample_t())
        self._live_samples.add(ctypes.addressof(sample.contents))
        self._keep = getattr(self, "_keep", []) + [sample]  # keep the memory alive while referenced
        return sample

    def nvmlGpmSampleFree(self, gpmSample):
        self._live_samples.discard(ctypes.addressof(gpmSample.contents))

    def _take(self, handle: _Handle, gpmSample):
        if self._gpu(handle).gpm is None:
            _fail(_real.NVML_ERROR_NOT_SUPPORTED)
        self._tick += 1
        self._samples[ctypes.addressof(gpmSample.contents)] = (handle, self._tick)
        return gpmSample

    def nvmlGpmSampleGet(self, device, gpmSample):
        if device.gpu.migs is not None:
            _fail(_real.NVML_ERROR_NOT_SUPPORTED)  # in MIG mode, sample per GPU instance
        return self._take(device, gpmSample)

    def nvmlGpmMigSampleGet(self, device, gpuInstanceId, gpmSample):
        gpu = self._whole(device)
        mig = next(m for m in gpu.migs if m.gpu_instance == gpuInstanceId)
        return self._take(_Handle(gpu, mig), gpmSample)

    def nvmlGpmMetricsGet(self, metricsGet):
        assert metricsGet.version == _real.NVML_GPM_METRICS_GET_VERSION
        first = self._samples[ctypes.addressof(metricsGet.sample1.contents)]
        second = self._samples[ctypes.addressof(metricsGet.sample2.contents)]
        assert first[0].gpu is second[0].gpu and first[1] < second[1], "samples of one device, in order"
        handle = second[0]
        values = handle.mig.gpm if handle.mig else handle.gpu.gpm
        for i in range(metricsGet.numMetrics):
            metric = metricsGet.metrics[i]
            if metric.metricId in values:
                metric.nvmlReturn, metric.value = _real.NVML_SUCCESS, values[metric.metricId]
            else:
                metric.nvmlReturn = _real.NVML_ERROR_NOT_SUPPORTED
        return metricsGet

    # -- XID events ---------------------------------------------------------------------------------------

    def nvmlEventSetCreate(self):
        if not self.initialised:
            _fail(_real.NVML_ERROR_UNINITIALIZED)
        return object()

    def nvmlEventSetFree(self, eventSet):
        pass

    def nvmlDeviceRegisterEvents(self, handle, eventTypes, eventSet):
        gpu = self._whole(handle)
        self._registered.add(gpu.uuid)

    def nvmlEventSetWait(self, eventSet, timeoutms):
        for gpu in self.gpus:
            if gpu.uuid in self._registered and gpu.xids:
                return SimpleNamespace(
                    device=_Handle(gpu),
                    eventType=_real.nvmlEventTypeXidCriticalError,
                    eventData=gpu.xids.pop(0),
                    gpuInstanceId=0,
                    computeInstanceId=0,
                )
        _fail(_real.NVML_ERROR_TIMEOUT)


# -- the GPUs of the tests --------------------------------------------------------------------------------


def hopper(n: int = 0, **kw) -> FakeGpu:
    return FakeGpu(
        f"GPU-{n:08d}-aaaa-bbbb-cccc-hopper000000",
        "NVIDIA H100 80GB HBM3",
        gpm={
            SM: 41.5,
            OCC: 22.0,
            TENSOR: 12.25,
            DRAM: 55.0,
            _real.NVML_GPM_METRIC_GRAPHICS_UTIL: 97.0,
            _real.NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC: 100.0,
            _real.NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC: 50.0,
        },
        util=97,
        **kw,
    )


def ampere(n: int = 1, **kw) -> FakeGpu:
    return FakeGpu(f"GPU-{n:08d}-aaaa-bbbb-cccc-ampere000000", "NVIDIA A100-SXM4-80GB", gpm=None, util=88, **kw)


def mig_hopper(n: int = 2) -> FakeGpu:
    return FakeGpu(
        f"GPU-{n:08d}-aaaa-bbbb-cccc-migmig000000",
        "NVIDIA H100 80GB HBM3",
        gpm={SM: 0.0},
        util=0,
        migs=[
            FakeMig(1, 1, 9856, 3 * 2**30, {SM: 30.0, OCC: 10.0, TENSOR: 5.0, DRAM: 20.0}, (501,)),
            FakeMig(2, 3, 40192, 10 * 2**30, {SM: 102.0, OCC: 60.0, TENSOR: 70.0, DRAM: 80.0}),
        ],
    )
