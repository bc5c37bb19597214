"""Benchmark: the normalizer against prometheus_client's own parse and re-expose, in the same run.

    python tests/bench_normalize.py [--models 12] [--ranks 8] [--repeat 15]

Builds a large vLLM exposition from the real 0.11.0 capture (many models, 8
data-parallel ranks, non-zero values), then times, best of --repeat:
  ours      Normalizer.normalize(text).render()   (parse, validate, map, write)
  baseline  text_string_to_metric_families + generate_latest (parse and re-expose only)
Prints throughput and the ratio. Not a timed assert: the numbers are for reading.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from conftest import REAL_CAPTURES  # noqa: E402

from inferwatch.exporters import Normalizer  # noqa: E402
from inferwatch.mappings import load_catalog, load_mappings  # noqa: E402


def big_exposition(models: int, ranks: int) -> str:
    """The capture's vLLM families, every sample repeated for each model and rank, with varied values."""
    rnd = random.Random(7)
    capture = (REAL_CAPTURES / "vllm-0.11.0-hardware-aware-router.txt").read_text()
    out = []
    for line in capture.splitlines():
        if line.startswith("#") or 'engine="0"' not in line:
            out.append(line)
            continue
        head, value = line.rsplit(" ", 1)
        for m in range(models):
            for r in range(ranks):
                labels = head.replace('engine="0"', f'engine="{r}"').replace(
                    "Qwen/Qwen1.5-0.5B-Chat", f"org/model-{m:02d}-instruct"
                )
                number = float(value) + (rnd.random() * 1000 if "_created" not in head else 0)
                out.append(f"{labels} {number!r}")
    return "\n".join(out) + "\n"


class _Replay:
    def __init__(self, families):
        self.families = families

    def collect(self):
        return self.families


def baseline(text: str) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Replay(list(text_string_to_metric_families(text))))
    return generate_latest(registry)


def best(fn, text: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn(text)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, default=12)
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    catalog = load_catalog()
    normalizer = Normalizer(load_mappings(catalog=catalog), catalog)
    text = big_exposition(args.models, args.ranks)
    mb = len(text.encode()) / 1e6
    ours_fn = lambda t: normalizer.normalize(t).render()  # noqa: E731
    ours_fn(text)  # warm the per-family regex cache, as a long-running exporter has it
    ours = best(ours_fn, text, args.repeat)
    base = best(baseline, text, max(3, args.repeat // 5))
    lines = text.count("\n")
    print(f"exposition: {mb:.2f} MB, {lines} lines, {args.models} models x {args.ranks} ranks")
    print(f"ours      {ours * 1000:8.1f} ms  {ours * 1000 / mb:6.1f} ms/MB  {mb / ours:7.1f} MB/s")
    print(
        f"baseline  {base * 1000:8.1f} ms  {base * 1000 / mb:6.1f} ms/MB  {mb / base:7.1f} MB/s"
        "  (prometheus_client parse + generate_latest)"
    )
    print(f"ratio     {base / ours:8.1f}x faster than the baseline")


if __name__ == "__main__":
    main()
