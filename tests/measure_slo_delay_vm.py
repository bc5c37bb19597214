"""Measure: when the SLO pages come on vmalert + VictoriaMetrics, against Prometheus, on the same samples.

    python tests/measure_slo_delay_vm.py                 # recorded history: the windows are covered (steady state)
    python tests/measure_slo_delay_vm.py --no-records    # a fresh deployment: no recorded counts yet
    python tests/measure_slo_delay_vm.py --vm-defaults   # VictoriaMetrics' and vmalert's default query flags
    python tests/measure_slo_delay_vm.py --rules OLD.yaml # another rendering of the answered objective's rules

One model serves 60 requests a minute on one engine. An hour of its history (and, unless --no-records, an hour
of its per-minute counts as the rules record them) goes by remote write into a real Prometheus (which runs
alerts/llm.answered.rules.yaml) and into a real VictoriaMetrics (which vmalert evaluates the same file against,
writing its records back). Then the samples go on live, every 15 s, to both; after --outage-after seconds every
request fails. Printed: seconds from the outage to the first firing page on each ruler, the difference (also by
the evaluations that fired it, `activeAt`, free of this script's polling), and every alert either ruler fired
before the outage (false pages; none expected). A run takes 6-8 minutes of
wall time (the 1h window needs about 4 minutes of outage at 60 requests a minute).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vmtools import process, prometheus_receiver, remote_write, victoria_metrics  # noqa: E402

from inferwatch.sim._demo import free_port  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "alerts" / "llm.answered.rules.yaml"
STEP, PER_STEP = 15, 15  # 60 requests a minute
MODEL = {"model": "delay", "engine": "vllm", "job": "vllm", "instance": "delay:8000"}
RECORD_LABELS = {"service": "llm", "slo": "answered", "model": "delay"}


def _finished(reason: str, samples) -> tuple:
    return ({"__name__": "llm_requests_finished_total", "finished_reason": reason, **MODEL}, samples)


class Engine:
    """The model's two counters, stop and error, from `start`; every request fails from `outage` on."""

    def __init__(self, start: float):
        self.start, self.outage = start, float("inf")
        self.stop = self.error = 0.0

    def samples_until(self, t0: float, t1: float) -> list:
        stop, error = [], []
        t = t0
        while t <= t1:
            if t > self.start:
                if t > self.outage:
                    self.error += PER_STEP
                else:
                    self.stop += PER_STEP
            stop.append((t, self.stop))
            error.append((t, self.error))
            t += STEP
        return [_finished("stop", stop), _finished("error", error)]


def _records(t0: float, t1: float) -> list:
    """An hour of per-minute counts as the rules record them (60 events a minute, all good)."""
    minutes = [m * 60.0 for m in range(int(t0 // 60) + 1, int(t1 // 60) + 1)]
    return [
        ({"__name__": name, **RECORD_LABELS}, [(m, 60.0) for m in minutes])
        for name in ("llm_slo:total:increase1m", "llm_slo:good:increase1m")
    ]


def _alerts(base: str) -> list[dict]:
    with urllib.request.urlopen(base + "/api/v1/alerts", timeout=10) as resp:
        data = json.load(resp)["data"]
    return (data["alerts"] if isinstance(data, dict) else data) or []


def _firing(base: str) -> list[dict]:
    return [a for a in _alerts(base) if a.get("state") == "firing"]


def _seconds(stamp: str) -> float:
    """An RFC 3339 time as Prometheus and vmalert write it (nanoseconds, `Z`) in Unix seconds."""
    day, _, rest = stamp.rstrip("Z").partition("T")
    clock, _, fraction = rest.partition(".")
    whole = datetime.datetime.fromisoformat(f"{day}T{clock}+00:00").timestamp()
    return whole + (float(f"0.{fraction}") if fraction else 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outage-after", type=float, default=150, help="seconds of healthy live traffic first")
    parser.add_argument("--no-records", action="store_true", help="no recorded history: a fresh deployment")
    parser.add_argument(
        "--vm-defaults",
        action="store_true",
        help="VictoriaMetrics' default -search.latencyOffset and vmalert's default alignment",
    )
    parser.add_argument("--rules", type=Path, default=RULES, help="the rule file both rulers run")
    parser.add_argument("--timeout", type=float, default=900)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="inferwatch-vmdelay-"))
    now = time.time() // STEP * STEP
    engine = Engine(now - 3600)
    vm_flags = () if args.vm_defaults else ("-search.latencyOffset=1s",)
    with (
        victoria_metrics("victoria-metrics", work / "vm", *vm_flags) as vm,
        prometheus_receiver("prometheus", work / "prom", (str(args.rules.resolve()),)) as prom,
    ):
        # history in 5-minute requests, oldest first: Prometheus takes samples up to an hour behind its newest
        for t in range(int(now - 3600), int(now) + 1, 300):
            batch = engine.samples_until(t, min(t + 300 - STEP, now))
            if not args.no_records:
                batch += _records(t - 1, min(t + 300 - STEP, now))
            for base in (vm, prom):
                remote_write(base, batch)
        port = free_port()
        vmalert = [
            "vmalert",
            f"-rule={args.rules.resolve()}",
            f"-datasource.url={vm}",
            f"-remoteWrite.url={vm}",
            f"-httpListenAddr=127.0.0.1:{port}",
            f"-notifier.url=http://127.0.0.1:{free_port()}",
        ]  # nobody there: alerts are read from vmalert
        if not args.vm_defaults:
            vmalert.append("-datasource.queryTimeAlignment=false")
        stop = threading.Event()

        def feed():
            t = now + STEP
            while not stop.is_set():
                stop.wait(max(0.0, t - time.time()))
                batch = engine.samples_until(t, t)  # once: both stores get the same samples
                for base in (vm, prom):
                    remote_write(base, batch)
                t += STEP

        feeder = threading.Thread(target=feed, daemon=True)
        with process(vmalert, work / "vmalert.log", ready=f"http://127.0.0.1:{port}"):
            vma = f"http://127.0.0.1:{port}"
            feeder.start()
            started = time.time()
            engine.outage = started + args.outage_after
            false_pages: dict[str, set] = {"prometheus": set(), "vmalert": set()}
            fired: dict[str, float] = {}
            active: dict[str, float] = {}  # the evaluation that fired it (activeAt), from the outage
            while len(fired) < 2 and time.time() < started + args.timeout:
                for name, base in (("prometheus", prom), ("vmalert", vma)):
                    for alert in _firing(base):
                        labels = alert["labels"]
                        if time.time() < engine.outage:
                            false_pages[name].add((labels["alertname"], labels.get("tier", "")))
                        elif labels.get("tier") == "page_fast" and name not in fired:
                            fired[name] = time.time() - engine.outage
                            active[name] = _seconds(alert["activeAt"]) - engine.outage
                            print(
                                f"{name}: page_fast fired {fired[name]:.0f} s after the outage began (its "
                                f"evaluation at {active[name]:.1f} s)",
                                flush=True,
                            )
                time.sleep(1)
            stop.set()
    setup = ("no recorded history" if args.no_records else "an hour of recorded counts") + (
        ", VictoriaMetrics/vmalert defaults"
        if args.vm_defaults
        else ", -search.latencyOffset=1s, -datasource.queryTimeAlignment=false"
    )
    print(f"setup: {setup}; rules: {args.rules}")
    if len(fired) == 2:
        print(f"vmalert - Prometheus: {fired['vmalert'] - fired['prometheus']:+.0f} s")
        # by the evaluation timestamps, without this script's polling: the rulers' phases within the minute (under
        # 60 s either way), plus 60 s for each record of the same evaluation the page read (a hop)
        print(f"by the evaluations that fired (activeAt): {active['vmalert'] - active['prometheus']:+.1f} s")
    print(f"alerts firing before the outage: {false_pages}")
    print(f"logs: {work}")


if __name__ == "__main__":
    main()
