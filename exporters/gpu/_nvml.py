"""The real backend: every read through `pynvml` (nvidia-ml-py), its errors as pynvml.NVMLError_*.

The module is a constructor argument, so tests hand in a fake with the same
names. One `sample(wait)` is one pass: a GPM sample of every GPU that has GPM,
`wait` seconds, a second GPM sample, then the plain reads. GPM gives SM,
tensor and DRAM activity (Hopper and newer; percentages, served as 0-1 ratios).
A read the GPU does not support is left out; a GPU that is lost answers
`gpu_up 0` while the others keep serving.

Each GPU's workloads come from the kubelet's PodResources API (`pod_resources`)
when it lists the GPU, else from its processes (`pods`, a PodResolver); the
reading says which (model.ATTRIBUTION_SOURCES).
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter
from dataclasses import dataclass
from functools import partial

from inferwatch.exporters.gpu._model import Labels, Reading, Snapshot, Workload

__all__ = ["NvmlBackend", "GPM_METRICS", "THROTTLE_REASONS", "NVML_NAMES"]

log = logging.getLogger("inferwatch.exporter.gpu")

# (common name, GPM metric constant, divide by): GPM utilisations are percent, throughputs MiB/s
GPM_METRICS = (
    ("gpu_sm_active_ratio", "NVML_GPM_METRIC_SM_UTIL", 100),
    ("gpu_sm_occupancy_ratio", "NVML_GPM_METRIC_SM_OCCUPANCY", 100),
    ("gpu_tensor_active_ratio", "NVML_GPM_METRIC_ANY_TENSOR_UTIL", 100),  # every tensor pipe, as DCGM's
    ("gpu_dram_active_ratio", "NVML_GPM_METRIC_DRAM_BW_UTIL", 100),
    ("gpu_graphics_engine_active_ratio", "NVML_GPM_METRIC_GRAPHICS_UTIL", 100),
    ("gpu_nvlink_tx_bytes_per_second", "NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC", 1 / 1048576),
    ("gpu_nvlink_rx_bytes_per_second", "NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC", 1 / 1048576),
)
# reason label -> clocks-event bit (nvmlClocksThrottleReason* are the same bits under their older names)
THROTTLE_REASONS = (
    ("gpu_idle", "nvmlClocksEventReasonGpuIdle"),
    ("applications_clocks_setting", "nvmlClocksEventReasonApplicationsClocksSetting"),
    ("sw_power_cap", "nvmlClocksEventReasonSwPowerCap"),
    ("hw_slowdown", "nvmlClocksEventReasonHwSlowdown"),
    ("sync_boost", "nvmlClocksEventReasonSyncBoost"),
    ("sw_thermal_slowdown", "nvmlClocksEventReasonSwThermalSlowdown"),
    ("hw_thermal_slowdown", "nvmlClocksEventReasonHwThermalSlowdown"),
    ("hw_power_brake_slowdown", "nvmlClocksEventReasonHwPowerBrakeSlowdown"),
    ("display_clock_setting", "nvmlClocksEventReasonDisplayClockSetting"),
)
# Every pynvml name this backend uses; a test checks each against the installed nvidia-ml-py.
NVML_NAMES = (
    (
        "nvmlInit",
        "nvmlShutdown",
        "nvmlDeviceGetCount",
        "nvmlDeviceGetHandleByIndex",
        "nvmlDeviceGetUUID",
        "nvmlDeviceGetMinorNumber",
        "nvmlDeviceGetName",
        "nvmlDeviceGetUtilizationRates",
        "nvmlDeviceGetMemoryInfo",
        "nvmlDeviceGetPowerUsage",
        "nvmlDeviceGetTotalEnergyConsumption",
        "nvmlDeviceGetTemperatureV",
        "nvmlDeviceGetTemperature",
        "nvmlDeviceGetClockInfo",
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetTotalEccErrors",
        "nvmlDeviceGetPcieThroughput",
        "nvmlDeviceGetComputeRunningProcesses",
        "nvmlDeviceGetMigMode",
        "nvmlDeviceGetMaxMigDeviceCount",
        "nvmlDeviceGetMigDeviceHandleByIndex",
        "nvmlDeviceGetGpuInstanceId",
        "nvmlDeviceGetAttributes",
        "nvmlGpmQueryDeviceSupport",
        "nvmlGpmSampleAlloc",
        "nvmlGpmSampleFree",
        "nvmlGpmSampleGet",
        "nvmlGpmMigSampleGet",
        "nvmlGpmMetricsGet",
        "c_nvmlGpmMetricsGet_t",
        "NVML_GPM_METRICS_GET_VERSION",
        "nvmlEventSetCreate",
        "nvmlEventSetFree",
        "nvmlDeviceRegisterEvents",
        "nvmlEventSetWait",
        "nvmlEventTypeXidCriticalError",
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
        "NVMLError",
        "NVMLError_GpuIsLost",
        "NVMLError_NotSupported",
        "NVMLError_NoPermission",
        "NVMLError_NotFound",
        "NVMLError_Timeout",
        "NVMLError_FunctionNotFound",
        "NVMLError_InvalidArgument",
    )
    + tuple(c for _, c, _ in GPM_METRICS)
    + tuple(c for _, c in THROTTLE_REASONS)
)


class _Lost(Exception):
    """The GPU stopped answering in this pass."""


@dataclass
class _Device:
    """One GPU or MIG instance found by discovery."""

    index: int
    handle: object | None  # None: the handle itself could not be had (lost at discovery)
    identity: Labels
    parent: object | None = None  # a MIG instance's GPU
    gpu_instance: int | None = None
    gpm: bool = False  # take GPM samples of it
    keys: tuple[str, ...] = ()  # the IDs a device plugin may list it by (PodResources device_key)
    profiling: bool | None = None  # what gpu_profiling_supported says; None on a GPU whose MIG instances answer


class NvmlBackend:
    """NVML through `nvml` (the pynvml module or a fake of it); `hostname` goes on every series."""

    name = "nvml"

    def __init__(self, nvml, hostname: str, pods=None, sleep=time.sleep, pod_resources=None):
        self.nv, self.hostname, self.pods, self.sleep = nvml, hostname, pods, sleep
        self.pod_resources = pod_resources
        self._unresolved: set[Labels] = set()  # devices whose processes named no pod, said once each
        self.errors: Counter = Counter()
        self.xids: Counter = Counter()  # (uuid, xid) -> count since start
        self._events = None
        self._registered: set[str] = set()
        self._known: dict[int, Labels] = {}  # index -> identity, so a GPU lost later keeps its labels
        self._started = False

    # -- lifecycle ----------------------------------------------------------------------------------------

    def start(self) -> None:
        """nvmlInit and the XID event set; raises pynvml.NVMLError when NVML cannot start."""
        self.nv.nvmlInit()
        self._started = True
        try:
            self._events = self.nv.nvmlEventSetCreate()
        except self.nv.NVMLError as err:
            log.info("no XID events: %s", err)

    def close(self) -> None:
        if not self._started:
            return
        try:
            if self._events is not None:
                self.nv.nvmlEventSetFree(self._events)
            self.nv.nvmlShutdown()
        except self.nv.NVMLError as err:
            log.debug("nvmlShutdown: %s", err)
        self._started = False

    # -- one pass -----------------------------------------------------------------------------------------

    def sample(self, wait: float) -> Snapshot:
        started = time.monotonic()
        devices = self._discover()
        allocated = self.pod_resources.devices() if self.pod_resources is not None else None
        gpm = [d for d in devices if d.gpm]
        first = self._gpm_samples(gpm)
        busy = time.monotonic() - started
        self.sleep(wait)
        started = time.monotonic()
        second = self._gpm_samples(gpm)
        self._drain_xids()
        readings = []
        for device in devices:
            readings.append(
                self._reading(
                    device,
                    first.get(device.index, {}).get(device.identity),
                    second.get(device.index, {}).get(device.identity),
                    allocated,
                )
            )
        for samples in (first, second):
            for per_device in samples.values():
                for sample in per_device.values():
                    self._free(sample)
        return Snapshot(
            True,
            tuple(readings),
            taken_at=time.time(),
            duration=busy + time.monotonic() - started,
            errors=dict(self.errors),
            pod_list_errors=dict(getattr(self.pods, "errors", {})),
            pod_resources_errors=dict(getattr(self.pod_resources, "errors", {})),
            pod_resources_up=getattr(self.pod_resources, "up", None),
        )

    # -- discovery ----------------------------------------------------------------------------------------

    def _discover(self) -> list[_Device]:
        nv, devices = self.nv, []
        for index in range(nv.nvmlDeviceGetCount()):
            try:
                handle = nv.nvmlDeviceGetHandleByIndex(index)
                uuid, model = nv.nvmlDeviceGetUUID(handle), nv.nvmlDeviceGetName(handle)
            except nv.NVMLError as err:
                self._count(err)
                devices.append(
                    _Device(index, None, self._known.get(index, (("gpu", str(index)), ("hostname", self.hostname))))
                )
                continue
            identity = (("gpu", str(index)), ("uuid", uuid), ("gpu_model", model), ("hostname", self.hostname))
            self._known[index] = identity
            self._register_events(handle, uuid)
            support = self._optional(partial(nv.nvmlGpmQueryDeviceSupport, handle), None)
            gpm = support is not None and bool(support.isSupportedDevice)
            # device plugins list a GPU by UUID; with deviceIDStrategy=index (Bottlerocket's default) by NVML
            # index; GKE's by device node, /dev/nvidia<minor>
            minor = self._optional(partial(nv.nvmlDeviceGetMinorNumber, handle), None)
            gke = f"nvidia{minor}" if minor is not None else ""
            migs = self._mig_instances(handle, index, identity, gpm, gke)
            devices.append(
                _Device(
                    index,
                    handle,
                    identity,
                    gpm=gpm and not migs,
                    profiling=None if migs else gpm,
                    keys=tuple(k for k in (uuid, str(index), gke) if k),
                )
            )
            devices.extend(migs)
        return devices

    def _mig_instances(self, handle, index: int, identity: Labels, gpm: bool, gke: str) -> list[_Device]:
        nv = self.nv
        mode = self._optional(lambda: nv.nvmlDeviceGetMigMode(handle)[0], 0)
        if mode != nv.NVML_DEVICE_MIG_ENABLE:
            return []
        found = []
        for i in range(self._optional(lambda: nv.nvmlDeviceGetMaxMigDeviceCount(handle), 0)):
            try:
                mig = nv.nvmlDeviceGetMigDeviceHandleByIndex(handle, i)
                gi = nv.nvmlDeviceGetGpuInstanceId(mig)
                attrs = nv.nvmlDeviceGetAttributes(mig)
            except nv.NVMLError_NotFound:
                continue  # an empty slot
            except nv.NVMLError as err:
                self._count(err)
                continue
            profile = f"{attrs.gpuInstanceSliceCount}g.{math.ceil(attrs.memorySizeMB / 1024)}gb"  # 9.5 GiB: 1g.10gb
            # a device plugin lists a MIG instance by its MIG- UUID (R470 on), or, before, as MIG-<GPU uuid>/gi/ci;
            # with deviceIDStrategy=index as <GPU index>:<MIG index>; GKE's as nvidia<minor>/gi<gi>
            keys = (
                self._optional(partial(nv.nvmlDeviceGetUUID, mig), ""),
                f"MIG-{dict(identity)['uuid']}/{gi}",
                f"{index}:{i}",
                f"{gke}/gi{gi}" if gke else "",
            )
            found.append(
                _Device(
                    index,
                    mig,
                    identity + (("GPU_I_ID", str(gi)), ("GPU_I_PROFILE", profile)),
                    parent=handle,
                    gpu_instance=gi,
                    gpm=gpm,
                    profiling=gpm,
                    keys=tuple(k for k in keys if k),
                )
            )
        return found

    def _register_events(self, handle, uuid: str) -> None:
        if self._events is None or uuid in self._registered:
            return
        self._registered.add(uuid)
        try:
            self.nv.nvmlDeviceRegisterEvents(handle, self.nv.nvmlEventTypeXidCriticalError, self._events)
        except self.nv.NVMLError as err:
            log.info("GPU %s: no XID events: %s", uuid, err)

    # -- GPM ----------------------------------------------------------------------------------------------

    def _gpm_samples(self, devices: list[_Device]) -> dict[int, dict[Labels, object]]:
        nv = self.nv
        out: dict[int, dict[Labels, object]] = {}
        for device in devices:
            try:
                sample = nv.nvmlGpmSampleAlloc()
            except nv.NVMLError as err:
                self._count(err)
                continue
            try:
                if device.parent is not None:
                    nv.nvmlGpmMigSampleGet(device.parent, device.gpu_instance, sample)
                else:
                    nv.nvmlGpmSampleGet(device.handle, sample)
            except nv.NVMLError as err:
                self._count(err)
                self._free(sample)
                continue
            out.setdefault(device.index, {})[device.identity] = sample
        return out

    def _gpm_values(self, first, second) -> list[tuple[str, Labels, float]]:
        nv = self.nv
        wanted = [(name, getattr(nv, const), divide) for name, const, divide in GPM_METRICS]
        request = nv.c_nvmlGpmMetricsGet_t()
        request.version = nv.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(wanted)
        request.sample1, request.sample2 = first, second
        for i, (_, metric, _) in enumerate(wanted):
            request.metrics[i].metricId = metric
        nv.nvmlGpmMetricsGet(request)
        rows: list[tuple[str, Labels, float]] = []
        for i, (name, _, divide) in enumerate(wanted):
            metric = request.metrics[i]
            if metric.nvmlReturn == nv.NVML_SUCCESS:
                value = metric.value / divide
                rows.append((name, (), min(1.0, max(0.0, value)) if name.endswith("_ratio") else max(0.0, value)))
        return rows

    def _free(self, sample) -> None:
        try:
            self.nv.nvmlGpmSampleFree(sample)
        except self.nv.NVMLError as err:
            log.debug("nvmlGpmSampleFree: %s", err)

    # -- plain reads --------------------------------------------------------------------------------------

    def _reading(self, device: _Device, first, second, allocated: dict | None) -> Reading:
        if device.handle is None:
            return Reading(device.identity, up=False)
        try:
            samples = self._plain(device)
            if first is not None and second is not None:
                samples += self._read(lambda: self._gpm_values(first, second), [])
            workloads, source = self._workloads(device, allocated)
        except _Lost:
            return Reading(device.identity, up=False)
        uuid = dict(device.identity).get("uuid", "")
        if device.parent is None:
            samples += [
                ("gpu_xid_errors_total", (("xid", str(xid)),), float(n))
                for (u, xid), n in sorted(self.xids.items())
                if u == uuid
            ]
        return Reading(device.identity, True, device.profiling, tuple(samples), workloads, source)

    def _plain(self, device: _Device) -> list[tuple[str, Labels, float]]:
        nv, h, rows = self.nv, device.handle, []

        def add(name: str, read, divide: int = 1, extra: Labels = (), multiply: int = 1):
            value = self._read(read, None)
            if value is not None:
                rows.append((name, extra, value * multiply / divide))

        add("gpu_utilization_ratio", lambda: min(100, nv.nvmlDeviceGetUtilizationRates(h).gpu), 100)  # not per MIG
        memory = self._read(lambda: nv.nvmlDeviceGetMemoryInfo(h), None)
        if memory is not None:
            rows += [
                ("gpu_memory_used_bytes", (), float(memory.used)),
                ("gpu_memory_free_bytes", (), float(memory.free)),
            ]
        if device.parent is not None:
            return rows  # power, clocks and the rest belong to the whole GPU
        add("gpu_power_watts", lambda: nv.nvmlDeviceGetPowerUsage(h), 1000)  # mW
        add("gpu_energy_joules_total", lambda: nv.nvmlDeviceGetTotalEnergyConsumption(h), 1000)  # mJ
        # nvmlDeviceGetTemperature is deprecated, but nvidia-ml-py 12.535 (our floor) has only it
        temperature = getattr(nv, "nvmlDeviceGetTemperatureV", None) or nv.nvmlDeviceGetTemperature
        add("gpu_temperature_celsius", lambda: temperature(h, nv.NVML_TEMPERATURE_GPU))
        add("gpu_sm_clock_hertz", lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM), multiply=10**6)  # MHz
        add("gpu_memory_clock_hertz", lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM), multiply=10**6)
        reasons = self._read(lambda: nv.nvmlDeviceGetCurrentClocksEventReasons(h), None)
        if reasons is not None:
            rows += [
                ("gpu_clock_throttle_active", (("reason", label),), 1.0 if reasons & getattr(nv, bit) else 0.0)
                for label, bit in THROTTLE_REASONS
            ]
        for kind, const in (
            ("corrected", nv.NVML_MEMORY_ERROR_TYPE_CORRECTED),
            ("uncorrected", nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED),
        ):
            add(
                "gpu_ecc_errors_total",
                lambda c=const: nv.nvmlDeviceGetTotalEccErrors(h, c, nv.NVML_VOLATILE_ECC),
                extra=(("type", kind),),
            )
        add(
            "gpu_pcie_tx_bytes_per_second",
            lambda: nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_TX_BYTES),
            multiply=1024,
        )
        add(
            "gpu_pcie_rx_bytes_per_second",
            lambda: nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_RX_BYTES),
            multiply=1024,
        )  # KB/s
        return rows

    def _workloads(self, device: _Device, allocated: dict | None) -> tuple[tuple[Workload, ...], str]:
        """The containers using the device, and the ATTRIBUTION_SOURCES name of what said so."""
        if allocated:
            held = {w for key in device.keys for w in allocated.get(key, ())}
            if held:
                self._unresolved.discard(device.identity)
                return tuple(sorted(held)), "pod_resources"
        if self.pods is None:
            return (), "" if self.pod_resources is None else "none"
        procs = self._read(lambda: self.nv.nvmlDeviceGetComputeRunningProcesses(device.handle), [])
        pids = sorted({p.pid for p in procs})
        found = self.pods.workloads(pids)
        if found or not pids:
            self._unresolved.discard(device.identity)
            return found, "process" if found else "none"
        if device.identity not in self._unresolved:
            self._unresolved.add(device.identity)
            ident = dict(device.identity)
            where = ident.get("uuid", "?") + (f" MIG {ident['GPU_I_ID']}" if "GPU_I_ID" in ident else "")
            log.warning(
                "GPU %s: %d processes (pid %s) but none traced to a pod and the kubelet lists no pod for "
                "it: is /proc/PID/cgroup readable (hostPID)? Its series carry no pod label",
                where,
                len(pids),
                pids[0],
            )
        return (), "unresolved"

    def _drain_xids(self) -> None:
        """Count the XID events queued since the last pass, without waiting."""
        nv = self.nv
        while self._events is not None:
            try:
                event = nv.nvmlEventSetWait(self._events, 0)
            except nv.NVMLError_Timeout:
                return
            except nv.NVMLError as err:
                self._count(err)
                return
            try:
                uuid = nv.nvmlDeviceGetUUID(event.device)
            except nv.NVMLError:
                uuid = ""
            self.xids[(uuid, int(event.eventData))] += 1
            log.warning("GPU %s: XID %d", uuid or "?", event.eventData)

    # -- errors -------------------------------------------------------------------------------------------

    def _read(self, read, default):
        """`read()`, or `default` when the GPU cannot say; a lost GPU raises _Lost."""
        nv = self.nv
        try:
            return read()
        except (
            nv.NVMLError_NotSupported,
            nv.NVMLError_NoPermission,
            nv.NVMLError_FunctionNotFound,
            nv.NVMLError_InvalidArgument,
        ):
            return default  # this GPU does not have it: left out, not an error
        except nv.NVMLError_GpuIsLost as err:
            self._count(err)
            raise _Lost() from err
        except nv.NVMLError as err:
            self._count(err)
            return default

    def _optional(self, read, default):
        try:
            return self._read(read, default)
        except _Lost:
            return default

    def _count(self, err: Exception) -> None:
        kind = "gpu_lost" if isinstance(err, self.nv.NVMLError_GpuIsLost) else "nvml"
        self.errors[kind] += 1
        log.debug("NVML: %s: %s", type(err).__name__, err)
