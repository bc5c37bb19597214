"""Record what the calibration load script (tests/calibration.py) does to a real vLLM, for the fast suite.

    python tests/record_calibration.py            # installs the real-engine venv first if needed (~3 min)

Starts two real vLLM CPU engines one after the other (tests/real_engine/harness.py): one with the shared flags
(2 running slots, 4 requests in the engine at most) for the length stop, the stop string, the client's cancel and
the rejection; one with few KV blocks for the preemption. Writes tests/fixtures/calibration/vllm-<release>/:
deltas.json (each event's HTTP statuses and counter changes) and metrics.txt (the first engine's whole /metrics
after its events: its families, labels and buckets). tests/test_sim_calibration.py runs the same script against
the simulator and compares.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE / "real_engine")]

import calibration  # noqa: E402
from harness import VLLM, Engine  # noqa: E402


def main() -> int:
    out = HERE / "fixtures" / "calibration" / f"vllm-{VLLM.split('==')[1]}"
    out.mkdir(parents=True, exist_ok=True)
    recorded = {}
    with Engine(calibration.SHARED_REAL) as engine:
        recorded.update(calibration.run(engine.url, "tiny-llama", calibration.SHARED_EVENTS))
        (out / "metrics.txt").write_text(calibration.metrics(engine.url))
    with Engine(calibration.PRESSURE_REAL) as engine:
        recorded.update(calibration.run(engine.url, "tiny-llama", calibration.PRESSURE_EVENTS))
    (out / "deltas.json").write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    print(f"recorded {', '.join(recorded)} into {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
