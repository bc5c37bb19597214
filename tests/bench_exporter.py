"""Benchmark: the normalizing exporter under concurrent scrapes with faulty targets, on loopback.

    python tests/bench_exporter.py [--targets 100] [--faulty 10] [--scrapers 20] [--duration 10] [--timeout 2]
                                   [--scrape-timeout 1.5]

Starts --targets loopback targets serving real captures, --faulty of them
hanging, trickling (slowloris), refusing, cut short, 503 or garbage, and the
exporter as a subprocess in front of them. First a baseline: one scraper
alone, in the same run; then --scrapers concurrent scrapers for --duration
seconds. Prints, for both: scrapes, answer time (p50, p99, max) against the
timeout + 1 s bound, the share of scrapes in which every healthy target was
complete (all its series, target_up 1), fetches per target per second, and the
exporter's peak RSS and open files. Not a timed assert: the numbers are for reading.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import aiohttp

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from conftest import REAL_CAPTURES  # noqa: E402
from exporter_tools import RawTargets, dropped, hang, slowloris, static  # noqa: E402

from inferwatch.exporters import Normalizer  # noqa: E402
from inferwatch.mappings import load_catalog, load_mappings  # noqa: E402

CAPTURES = ["dcgm-exporter-4.4.1-4.6.0-lke-ai-conformance.txt", "sglang-0.3.6-docs-production-metrics.txt"]
_TARGET = re.compile(r'target="(t[0-9]+)"\}')


async def _error(writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")


def faulty_route(i: int):
    kinds = [
        hang,
        slowloris(b"x 1\n" * 1000, pause=0.2),
        None,
        dropped(b"a 1\nb 2\n" * 1000, 3000),
        _error,
        static(b"<html>502 Bad Gateway</html>\n"),
    ]
    return kinds[i % len(kinds)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_usage(pid: int) -> tuple[float, int]:
    """RSS in MiB and open file descriptors of a process (Linux /proc)."""
    rss = 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


class Stats:
    def __init__(self, healthy: dict[str, int]):
        self.healthy = healthy  # target -> series it must have
        self.latencies: list[float] = []
        self.server: list[float] = []  # the exporter's own inferwatch_exporter_scrape_duration_seconds
        self.complete = 0
        self.target_complete = 0
        self.errors = 0

    def add(self, text: str | None, latency: float) -> None:
        self.latencies.append(latency)
        if text is None:
            self.errors += 1
            return
        data, _, own = text.partition("# HELP inferwatch_exporter_target_up ")
        found = re.search(r"^inferwatch_exporter_scrape_duration_seconds (\S+)$", own, re.M)
        self.server.append(float(found.group(1)) if found else 0.0)
        counts = Counter(_TARGET.findall(data))
        up = {m.group(1) for m in re.finditer(r'inferwatch_exporter_target_up\{target="(t[0-9]+)"\} 1\.0', own)}
        ok = [t for t, n in self.healthy.items() if t in up and counts[t] == n]
        self.target_complete += len(ok)
        self.complete += len(ok) == len(self.healthy)

    def line(self, label: str, seconds: float, bound: float) -> str:
        lat = sorted(self.latencies) or [0.0]
        n = len(self.latencies)
        p = lambda q: lat[min(n - 1, int(q * n))] if n else 0.0  # noqa: E731
        share = self.target_complete / max(1, n * len(self.healthy))
        return (
            f"{label:9} scrapes {n:5d} ({n / seconds:5.1f}/s)  answer p50 {p(0.5):5.2f}s p99 {p(0.99):5.2f}s "
            f"max {lat[-1]:5.2f}s (bound {bound:.1f}s: {'ok' if lat[-1] <= bound else 'OVER'}; in the exporter "
            f"max {max(self.server, default=0):5.2f}s)  "
            f"all healthy complete {self.complete / max(1, n):7.3%}  healthy target-scrapes complete "
            f"{share:7.3%}  failed requests {self.errors}"
        )


async def scraper(session: aiohttp.ClientSession, url: str, stats: Stats, until: float, headers: dict) -> None:
    while time.monotonic() < until:
        start = time.monotonic()
        try:
            async with session.get(url, headers=headers, timeout=aiohttp.ClientTimeout(total=30)) as resp:
                text = await resp.text()
        except (TimeoutError, aiohttp.ClientError):
            text = None
        stats.add(text, time.monotonic() - start)


async def phase(
    url: str, scrapers: int, seconds: float, healthy: dict[str, int], pid: int, peak: list, headers: dict
) -> Stats:
    stats = Stats(healthy)
    until = time.monotonic() + seconds
    connector = aiohttp.TCPConnector(limit=scrapers)
    async with aiohttp.ClientSession(connector=connector) as session:
        tasks = [asyncio.create_task(scraper(session, url, stats, until, headers)) for _ in range(scrapers)]
        while not all(t.done() for t in tasks):
            rss, fds = proc_usage(pid)
            peak[0], peak[1] = max(peak[0], rss), max(peak[1], fds)
            await asyncio.sleep(0.5)
    return stats


async def main(args) -> None:
    catalog = load_catalog()
    normalizer = Normalizer(load_mappings(catalog=catalog), catalog)
    step = max(1, args.targets // max(1, args.faulty))
    faulty = list(range(0, args.targets, step))[: args.faulty]
    routes, healthy = {}, {}
    for i in range(args.targets):
        name = f"t{i}"
        if i in faulty:
            routes[name] = faulty_route(faulty.index(i))  # None: refused, nothing listens there
            continue
        body = (REAL_CAPTURES / CAPTURES[i % len(CAPTURES)]).read_text()
        routes[name] = static(body.encode())
        healthy[name] = normalizer.normalize(body).series_out
    async with RawTargets({f"/{n}": r for n, r in routes.items() if r is not None}) as targets:
        port = free_port()
        cmd = [
            sys.executable,
            "-m",
            "inferwatch",
            "exporter",
            "normalize",
            "--listen",
            f"127.0.0.1:{port}",
            "--timeout",
            f"{args.timeout}s",
            "--log-level",
            "error",
        ]
        for name, route in routes.items():
            url = targets.url(f"/{name}") if route is not None else f"http://127.0.0.1:{free_port()}/metrics"
            cmd += ["--target", f"{name}={url}"]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}/metrics"
        try:
            async with aiohttp.ClientSession() as session:
                for _ in range(100):
                    try:
                        async with session.get(f"http://127.0.0.1:{port}/healthz") as resp:
                            if resp.status == 200:
                                break
                    except aiohttp.ClientError:
                        await asyncio.sleep(0.2)
            rss0, fds0 = proc_usage(proc.pid)
            bound = args.timeout + 1
            headers = {}
            if args.scrape_timeout:  # as Prometheus sends it: the exporter answers before it
                headers = {"X-Prometheus-Scrape-Timeout-Seconds": str(args.scrape_timeout)}
                bound = min(bound, args.scrape_timeout)
            peak = [0.0, 0]
            served = sum(r is not None for r in routes.values())
            requests0 = targets.requests
            base = await phase(url, 1, args.duration / 2, healthy, proc.pid, peak, headers)
            base_fetches = (targets.requests - requests0) / served
            peak_base = list(peak)
            requests0 = targets.requests
            load = await phase(url, args.scrapers, args.duration, healthy, proc.pid, peak, headers)
            load_fetches = (targets.requests - requests0) / served
        finally:
            proc.terminate()
            proc.wait(10)
    print(
        f"{args.targets} targets ({len(healthy)} healthy, {args.targets - len(healthy)} faulty), exporter --timeout "
        f"{args.timeout}s; at start RSS {rss0:.0f} MiB, {fds0} open files"
    )
    print(
        base.line("baseline", args.duration / 2, bound) + f"  fetches per target {base_fetches:.0f} "
        f"for {len(base.latencies)} scrapes; peak RSS {peak_base[0]:.0f} MiB, {peak_base[1]} files"
    )
    print(
        load.line(f"{args.scrapers} conc.", args.duration, bound) + f"  fetches per target {load_fetches:.0f} "
        f"for {len(load.latencies)} scrapes; peak RSS {peak[0]:.0f} MiB, {peak[1]} files"
    )
    b50 = sorted(base.latencies)[len(base.latencies) // 2] if base.latencies else 0.0
    l50 = sorted(load.latencies)[len(load.latencies) // 2] if load.latencies else 0.0
    rate = lambda s, secs: len(s.latencies) / secs  # noqa: E731
    print(
        f"ratio     throughput {rate(load, args.duration) / max(1e-9, rate(base, args.duration / 2)):.1f}x the "
        f"baseline's, p50 answer {l50 / max(1e-9, b50):.2f}x, target fetches per exporter scrape "
        f"{load_fetches / max(1, len(load.latencies)):.3f} (1.000 would be no sharing)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--targets", type=int, default=100)
    parser.add_argument("--faulty", type=int, default=10)
    parser.add_argument("--scrapers", type=int, default=20)
    parser.add_argument("--duration", type=float, default=10.0, help="seconds under load (the baseline runs half)")
    parser.add_argument("--timeout", type=float, default=2.0, help="the exporter's per-target timeout, seconds")
    parser.add_argument(
        "--scrape-timeout",
        type=float,
        default=0.0,
        help="send X-Prometheus-Scrape-Timeout-Seconds like Prometheus (0: do not)",
    )
    asyncio.run(main(parser.parse_args()))
