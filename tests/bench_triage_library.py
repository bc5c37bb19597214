"""Triage's score on the generated incident library, beside a naive "largest relative change" classifier on the
same readings: progress as a ratio, not a feeling.

    python tests/bench_triage_library.py                 # seed 0: the fast suite's library (41 cases)
    python tests/bench_triage_library.py --seeds 1 2 3   # libraries the rules were not written against
    python tests/bench_triage_library.py --rules my-kinds.yaml

Writes each library's TSDB blocks with promtool, serves them from real Prometheus servers (prometheus and
promtool on PATH), judges every case with `--baseline auto` over the library's incident window, and prints one
line per case and the scores (tests/library_score.py says what counts as right).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from incident_library import library  # noqa: E402 - the tests' folder is not a package
from library_score import result, served, table, verdicts  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--rules", type=Path, action="append", default=[])
    args = parser.parse_args(argv)
    cases = [c for seed in args.seeds for c in library(seed)]
    began = time.perf_counter()
    with served(cases) as urls:
        loaded = time.perf_counter()
        judged = verdicts(cases, urls, args.rules)
        done = time.perf_counter()
    print(table([result(c, judged[c.model]) for c in cases]))
    print(f"{len(cases)} cases: generated and loaded in {loaded - began:.1f} s, judged in {done - loaded:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
