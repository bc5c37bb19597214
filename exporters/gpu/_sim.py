"""The simulated backend: GPUs whose activity follows a simulated engine, for the demo, the dashboards and tests.

With `follow` (the URL of an `inferwatch simulate` server) each pass reads the
engine's /metrics in the common vocabulary: the running batch drives SM and
tensor activity, the share of prompt tokens says how much of the time is
compute-bound prefill, the KV cache fills the framebuffer, and power follows
activity. Without it the load is a slow wave. The `stall` scenario is a host or
communication stall: GPU-Util stays near 1 while SM and tensor activity collapse.
"""

from __future__ import annotations

import http.client
import logging
import math
import time
import uuid as uuidlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from inferwatch.errors import InferwatchError
from inferwatch.exporters._config import MAX_BODY_BYTES
from inferwatch.exporters.gpu._http import get_capped, one_line
from inferwatch.exporters.gpu._model import Labels, Reading, Snapshot, Workload

if TYPE_CHECKING:  # imported when first needed: the simulator alone does not load the mappings
    from inferwatch.exporters import Normalizer

__all__ = ["SimulatedBackend", "EngineLoad", "activity", "simulated_gpus", "SCENARIOS"]

log = logging.getLogger("inferwatch.exporter.gpu")

SCENARIOS = {
    "normal": "activity follows the engine's batch and phase",
    "stall": "GPU-Util near 1 while SM and tensor activity collapse (host or communication stall)",
}
TOTAL_BYTES = 80 * 2**30
WEIGHTS_BYTES = 16 * 2**30
KV_POOL_BYTES = int(0.9 * TOTAL_BYTES) - WEIGHTS_BYTES  # what an engine preallocates at 0.9 memory utilisation
IDLE_W, MAX_W = 90.0, 700.0


@dataclass(frozen=True)
class EngineLoad:
    """What the GPUs need from the engine: its batch, queue, KV-cache use and the share of prefill work."""

    running: float = 0.0
    waiting: float = 0.0
    kv: float = 0.0
    prefill: float = 0.0  # share of tokens processed this pass that were prompt tokens


def activity(load: EngineLoad, scenario: str) -> dict[str, float]:
    """The GPU series of one GPU under `load` (ratios 0-1, bytes, watts): a pure function of the load."""
    busy = load.running > 0 or load.waiting > 0
    fill = 1 - math.exp(-load.running / 8)  # a batch of 8 uses ~60 % of the SMs, 24 ~95 %
    if scenario == "stall":
        util, sm, tensor, dram = (0.98, 0.08, 0.02, 0.04) if busy else (0.97, 0.06, 0.01, 0.03)
    elif busy:
        util = min(1.0, 0.9 + 0.1 * fill)
        sm = 0.55 + 0.4 * fill  # a healthy engine keeps at least half of the SMs busy
        tensor = (0.08 + 0.4 * fill) * (1 - load.prefill) + 0.8 * load.prefill
        dram = (0.3 + 0.5 * fill) * (1 - load.prefill) + 0.35 * load.prefill
    else:
        util, sm, tensor, dram = 0.0, 0.0, 0.0, 0.0
    power = IDLE_W + (MAX_W - IDLE_W) * (0.55 * sm + 0.3 * tensor + 0.15 * dram)
    return {
        "gpu_utilization_ratio": util,
        "gpu_graphics_engine_active_ratio": max(sm, util * 0.99),
        "gpu_sm_active_ratio": sm,
        "gpu_sm_occupancy_ratio": 0.55 * sm,
        "gpu_tensor_active_ratio": tensor,
        "gpu_dram_active_ratio": dram,
        "gpu_memory_used_bytes": float(WEIGHTS_BYTES + int(min(1.0, load.kv) * KV_POOL_BYTES)),
        "gpu_power_watts": power,
        "gpu_sm_clock_hertz": (1980.0 if busy or scenario == "stall" else 345.0) * 1e6,
        "gpu_memory_clock_hertz": 2619e6,
        "gpu_pcie_tx_bytes_per_second": 2e6 + 4e7 * load.prefill,
        "gpu_pcie_rx_bytes_per_second": 1e6 + 2e7 * fill,
    }


def _wave(t: float) -> EngineLoad:
    """A made-up load for GPUs that follow no engine: a ten-minute wave."""
    phase = math.sin(2 * math.pi * t / 600)
    return EngineLoad(running=10 + 8 * phase, waiting=0, kv=0.35 + 0.25 * phase, prefill=0.2)


class SimulatedBackend:
    """`gpus` simulated H100s on `hostname`, following the engine at `follow` (optional)."""

    name = "simulated"
    scenarios = tuple(SCENARIOS)

    def __init__(
        self,
        gpus: int,
        hostname: str,
        follow: str | None = None,
        scenario: str = "normal",
        workload: Workload | None = None,
        sleep=time.sleep,
        clock=time.monotonic,
        fetch=None,
        seed: str = "",
    ):
        self.gpus, self.hostname, self.follow, self.seed = gpus, hostname, follow, seed
        self.set_scenario(scenario)
        self.workload, self.sleep, self.clock = workload, sleep, clock
        self.fetch = fetch or _fetch
        self.errors: dict[str, int] = {}
        self._normalizer: Normalizer | None = None
        self._counters: tuple[float, float, float] | None = None  # time, prompt, generation tokens
        self._energy = [0.0] * gpus
        self._temp = [32.0] * gpus
        self._last = clock()
        self._problem: str | None = None

    def start(self) -> None:
        pass

    def close(self) -> None:
        pass

    def set_scenario(self, name: str) -> None:
        if name not in SCENARIOS:
            raise ValueError(f"unknown scenario {name!r}; use one of {', '.join(SCENARIOS)}")
        if getattr(self, "scenario", name) != name:
            log.info("GPU scenario: %s", name)
        self.scenario = name

    def sample(self, wait: float) -> Snapshot:
        self.sleep(wait)
        now = self.clock()
        return self._snapshot(
            self._follow(self.follow, now, max(0.5, min(2.0, wait))) if self.follow else _wave(now), now
        )

    def sample_engine(self, text: str) -> Snapshot:
        """A pass over an engine exposition handed in: a simulator serving its own GPUs."""
        now = self.clock()
        return self._snapshot(self._load(self._totals(text), now), now)

    def _snapshot(self, load: EngineLoad, now: float) -> Snapshot:
        dt, self._last = max(0.0, now - self._last), now
        readings = [self._reading(i, load, dt) for i in range(self.gpus)]
        return Snapshot(
            True, tuple(readings), taken_at=time.time(), duration=self.clock() - now, errors=dict(self.errors)
        )

    def _reading(self, index: int, load: EngineLoad, dt: float) -> Reading:
        values = activity(load, self.scenario)
        values["gpu_memory_free_bytes"] = TOTAL_BYTES - values["gpu_memory_used_bytes"]
        self._energy[index] += values["gpu_power_watts"] * dt
        target = 30 + 45 * values["gpu_power_watts"] / MAX_W
        self._temp[index] += (target - self._temp[index]) * (1 - math.exp(-dt / 30))
        values["gpu_energy_joules_total"] = 1e6 + self._energy[index]
        values["gpu_temperature_celsius"] = round(self._temp[index], 1)
        samples: list[tuple[str, Labels, float]] = [(name, (), value) for name, value in values.items()]
        samples += [
            ("gpu_clock_throttle_active", (("reason", reason),), value)
            for reason, value in (
                ("gpu_idle", float(values["gpu_utilization_ratio"] == 0)),
                ("sw_power_cap", float(values["gpu_power_watts"] > 0.95 * MAX_W)),
                ("hw_slowdown", 0.0),
            )
        ]
        samples += [("gpu_ecc_errors_total", (("type", kind),), 0.0) for kind in ("corrected", "uncorrected")]
        if self.gpus > 1:
            nvlink = 5e9 * (1 - math.exp(-load.running / 8))
            samples += [("gpu_nvlink_tx_bytes_per_second", (), nvlink), ("gpu_nvlink_rx_bytes_per_second", (), nvlink)]
        uid = uuidlib.uuid5(uuidlib.NAMESPACE_DNS, f"{self.hostname}/{self.seed}/{index}")
        identity = (
            ("gpu", str(index)),
            ("uuid", f"GPU-{uid}"),
            ("gpu_model", "NVIDIA H100 80GB HBM3 (simulated)"),
            ("hostname", self.hostname),
        )
        return Reading(identity, True, True, tuple(samples), (self.workload,) if self.workload else ())

    # -- following an engine ------------------------------------------------------------------------------

    def _follow(self, url: str, now: float, timeout: float) -> EngineLoad:
        try:
            totals = self._totals(self.fetch(url, timeout))
        except (OSError, ValueError, InferwatchError, http.client.HTTPException) as err:  # the last: not HTTP
            self._problem_is(f"--follow {self.follow}: {one_line(getattr(err, 'reason', err))}")
            return EngineLoad()
        self._problem_is(None)
        return self._load(totals, now)

    def _load(self, totals: dict[str, float], now: float) -> EngineLoad:
        prompt, generation = totals.get("llm_prompt_tokens_total", 0.0), totals.get("llm_generation_tokens_total", 0.0)
        prefill = 0.0
        if self._counters is not None:
            dp, dg = max(0.0, prompt - self._counters[1]), max(0.0, generation - self._counters[2])
            prefill = dp / (dp + 20 * dg) if dp + dg > 0 else 0.0  # a prompt token costs ~1/20 of a decode step
        self._counters = (now, prompt, generation)
        return EngineLoad(
            totals.get("llm_requests_running", 0.0),
            totals.get("llm_requests_waiting", 0.0),
            totals.get("llm_kv_cache_usage_ratio", 0.0),
            prefill,
        )

    def _totals(self, text: str) -> dict[str, float]:
        """Sums of the common series the GPUs follow (the KV ratio: the largest)."""
        from inferwatch.exporters import Normalizer, split_families
        from inferwatch.mappings import load_catalog, load_mappings

        normalizer = self._normalizer
        if normalizer is None:
            catalog = load_catalog()
            self._normalizer = normalizer = Normalizer(load_mappings(catalog=catalog), catalog, drop_unmapped=True)
        totals: dict[str, float] = {}
        for family in split_families(normalizer.normalize(text).render(), tolerant=True):
            for s in family.samples():
                value = float(s.value)
                if math.isnan(value):
                    continue
                if s.name == "llm_kv_cache_usage_ratio":
                    totals[s.name] = max(totals.get(s.name, 0.0), value)
                elif s.name in (
                    "llm_requests_running",
                    "llm_requests_waiting",
                    "llm_prompt_tokens_total",
                    "llm_generation_tokens_total",
                ):
                    totals[s.name] = totals.get(s.name, 0.0) + value
        return totals

    def _problem_is(self, problem: str | None) -> None:
        if problem is not None:
            self.errors["follow"] = self.errors.get("follow", 0) + 1
            if problem != self._problem:
                log.warning("%s; the simulated GPUs idle until it answers", problem)
        elif self._problem is not None:
            log.info("--follow %s answers again", self.follow)
        self._problem = problem


def _fetch(url: str, timeout: float) -> str:
    """The engine's /metrics; a body over the normalizing exporter's --max-body default is a failed follow
    (ValueError), never parsed cut."""
    return get_capped(url, timeout, MAX_BODY_BYTES).decode("utf-8", errors="replace")


def _default_workload() -> Workload:
    """The pod a simulator's GPUs are used by: itself. In Kubernetes HOSTNAME is the pod name (and POD_NAMESPACE,
    when the Downward API sets it, the namespace), so its GPUs join its engine series on `pod` as a real NVML
    exporter's do; elsewhere the host's name."""
    import os
    import socket

    return Workload(os.environ.get("POD_NAMESPACE", ""), os.environ.get("HOSTNAME") or socket.gethostname())


def simulated_gpus(gpus: int, seed: str, workload: Workload | None = None):
    """GPUs a simulator serves beside its engine: `render(engine exposition, stalled)` gives their exposition,
    each GPU labelled with `workload` (default: `_default_workload()`); `stalled` (the engine parameter
    `gpu_stall`, set by the scenarios gpu-stall and gpu-not-computing) stalls them."""
    import socket

    from inferwatch.exporters.gpu._render import render_snapshot
    from inferwatch.mappings import load_catalog

    backend = SimulatedBackend(gpus, socket.gethostname(), workload=workload or _default_workload(), seed=seed)
    catalog = load_catalog()

    def render(engine_text: str, stalled: bool) -> str:
        backend.set_scenario("stall" if stalled else "normal")
        return render_snapshot(backend.sample_engine(engine_text), catalog)

    return render
