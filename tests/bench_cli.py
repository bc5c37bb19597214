"""Benchmark: the command line as whole processes, against a baseline measured in the same run.

    python tests/bench_cli.py [--models 36] [--ranks 8] [--repeat 5]

Builds the large vLLM exposition of bench_normalize.py (about 11 MB with the
defaults: the real capture repeated for 36 models and 8 ranks) and times, as
separate processes, median of --repeat:
  help       `inferwatch --help`
  normalize  `inferwatch normalize FILE`          (start, parse, map, write)
  baseline   python + prometheus_client: parse the file and re-expose it with generate_latest
Every command runs as an installed package does, with bytecode caches: they go to a
temporary PYTHONPYCACHEPREFIX (so the checkout stays clean, even where
PYTHONDONTWRITEBYTECODE is set), after one warm-up run of each.
Prints wall and CPU (user + system) time and the ratios. Not a timed assert: the numbers are for reading.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_normalize import big_exposition  # noqa: E402

BASELINE = """
import sys
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

class Replay:
    def __init__(self, families):
        self.families = families

    def collect(self):
        return self.families

with open(sys.argv[1], encoding="utf-8") as handle:
    families = list(text_string_to_metric_families(handle.read()))
registry = CollectorRegistry(auto_describe=False)
registry.register(Replay(families))
sys.stdout.buffer.write(generate_latest(registry))
"""


def inferwatch() -> list[str]:
    """The installed console script next to this interpreter, else `python -m inferwatch`."""
    script = Path(sys.executable).with_name("inferwatch")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "inferwatch"]


def measure(argv: list[str], repeat: int, env: dict[str, str]) -> tuple[float, float]:
    """Median wall and median CPU (user + system) seconds of `argv` run `repeat` times after a warm-up run,
    output discarded."""
    subprocess.run(argv, stdout=subprocess.DEVNULL, check=True, env=env)
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, check=True, env=env)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, default=36)
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="inferwatch-bench-") as tmp:
        path = Path(tmp) / "big.prom"
        path.write_text(big_exposition(args.models, args.ranks), encoding="utf-8")
        mb = path.stat().st_size / 1e6
        env_note = f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}"
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        help_wall, help_cpu = measure([*inferwatch(), "--help"], args.repeat, env)
        ours_wall, ours_cpu = measure([*inferwatch(), "normalize", str(path)], args.repeat, env)
        base_wall, base_cpu = measure([sys.executable, "-c", BASELINE, str(path)], args.repeat, env)
    print(f"exposition: {mb:.2f} MB, {args.models} models x {args.ranks} ranks; median of {args.repeat}; {env_note}")
    print(f"{'':10}{'wall ms':>10}{'cpu ms':>10}")
    for name, wall, cpu in (
        ("help", help_wall, help_cpu),
        ("normalize", ours_wall, ours_cpu),
        ("baseline", base_wall, base_cpu),
    ):
        print(f"{name:10}{wall * 1000:10.0f}{cpu * 1000:10.0f}")
    print(
        f"normalize is {base_wall / ours_wall:.1f}x faster than the baseline (wall), "
        f"{base_cpu / ours_cpu:.1f}x (cpu); `inferwatch --help` takes {help_cpu * 1000:.0f} ms of CPU"
    )


if __name__ == "__main__":
    main()
