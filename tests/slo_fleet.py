"""A synthetic serving fleet with days of history, for SLO rules in a real Prometheus (tests and benchmark).

Every model's pods count requests per minute, with a share of bad ones per objective: healthy models stay well
under their error budget with short bursts (one every six hours, and one that runs across the moment the rules
are deployed); incident models fail `answered` for the last `incident_minutes`. The history up to `now` becomes
TSDB blocks with `promtool tsdb create-blocks-from openmetrics`; after `now` the same counters go on live at
`/metrics` (with their own `job` and `instance`: scrape with honor_labels), so rules deployed at `now` see a
fleet that was there for days.

Series: the engines' common vocabulary that the default SLOs read: TTFT and TPOT `_count` and the threshold's
bucket (`le="1.0"`, `le="0.1"`), and `llm_requests_finished_total` by `finished_reason` (stop, error).
"""

from __future__ import annotations

import json
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import promtools

# per objective: the series (metric name, extra labels) and whether it counts all requests or the good/bad ones
SERIES = (
    ("llm_time_to_first_token_seconds_count", "", "responsive", "total"),
    ("llm_time_to_first_token_seconds_bucket", 'le="1.0"', "responsive", "good"),
    ("llm_time_per_output_token_seconds_count", "", "fast-enough", "total"),
    ("llm_time_per_output_token_seconds_bucket", 'le="0.1"', "fast-enough", "good"),
    ("llm_requests_finished_total", 'finished_reason="stop"', "answered", "good"),
    ("llm_requests_finished_total", 'finished_reason="error"', "answered", "bad"),
)
BURST = 8  # a burst's error ratio, in error budgets: over page_slow's 5.6x, under page_fast's 13.44x
BURST_EVERY = 360  # minutes
BURST_MINUTES = 3


@dataclass
class Fleet:
    models: list[str]
    budgets: dict[str, float]  # objective -> 1 - target
    incidents: set[str] = field(default_factory=set)
    pods: int = 1
    days: float = 4
    rate: float = 60.0  # requests per minute per pod
    incident_minutes: int = 40
    incident_ratio: float = 0.5  # bad share of `answered` during an incident
    ahead: int = 60  # minutes the live counters may run past `now`
    now: int = field(default_factory=lambda: int(time.time()))
    seed: int = 15

    def __post_init__(self):
        self.start = self.now - int(self.days * 86400) // 60 * 60  # whole minutes before `now`
        minutes = (self.now - self.start) // 60 + self.ahead
        rng = np.random.default_rng(self.seed)
        self.cumulative: dict[tuple[str, int], np.ndarray] = {}  # (model, pod) -> [series, minute]
        for model in self.models:
            for pod in range(self.pods):
                total = rng.poisson(self.rate, minutes).astype(float)
                incs = []
                for objective, budget in self.budgets.items():
                    share = self._bad_share(model, objective, budget, minutes, rng)
                    bad = np.minimum(total, rng.binomial(total.astype(int), share))
                    incs += [total, total - bad] if objective != "answered" else [total - bad, bad]
                self.cumulative[model, pod] = np.concatenate(
                    [np.zeros((len(incs), 1)), np.cumsum(np.array(incs), axis=1)], axis=1
                )

    def _bad_share(self, model: str, objective: str, budget: float, minutes: int, rng) -> np.ndarray:
        minute = np.arange(minutes)
        share = budget * rng.uniform(0, 0.3, minutes)  # noise well under the budget
        share[(minute % BURST_EVERY) < BURST_MINUTES] = budget * BURST
        deployed = (self.now - self.start) // 60
        share[deployed - 2 : deployed + 8] = budget * BURST  # a burst across the deployment
        if model in self.incidents and objective == "answered":
            share[deployed - self.incident_minutes :] = self.incident_ratio
        return np.minimum(share, 1.0)

    def labels(self, model: str, pod: int) -> str:
        return f'job="llm",instance="{model}-{pod}:8000",model="{model}"'

    def _values(self, model: str, pod: int, times: np.ndarray) -> np.ndarray:
        """Counter values at these Unix times: linear within each minute."""
        pos = (times - self.start) / 60
        cum = self.cumulative[model, pod]
        return np.array([np.interp(pos, np.arange(cum.shape[1]), row) for row in cum])

    def write_openmetrics(self, path: Path, step: int = 60, since: int | None = None) -> int:
        """The history up to `now` (from `since`, default the start) at one sample per `step` seconds, the last at
        `now` itself, so that the first live scrape follows without a gap; returns the number of samples."""
        times = np.arange(self.now - (self.now - (since or self.start)) // step * step, self.now + 1, step)
        count = 0
        with open(path, "w") as out:
            for index, (metric, extra, _, _) in enumerate(SERIES):  # a metric's series stay together
                for model in self.models:
                    for pod in range(self.pods):
                        labels = self.labels(model, pod) + (f",{extra}" if extra else "")
                        values = self._values(model, pod, times)[index]
                        out.writelines(
                            f"{metric}{{{labels}}} {v:.0f} {t}\n" for t, v in zip(times, values, strict=True)
                        )
                        count += len(times)
            out.write("# EOF\n")
        return count

    def exposition(self, at: float | None = None) -> str:
        """The live /metrics text at wall time `at` (now by default)."""
        at = time.time() if at is None else at
        lines = []
        for model in self.models:
            for pod in range(self.pods):
                values = self._values(model, pod, np.array([at]))[:, 0]
                for (metric, extra, _, _), value in zip(SERIES, values, strict=True):
                    labels = self.labels(model, pod) + (f",{extra}" if extra else "")
                    lines.append(f"{metric}{{{labels}}} {value:.3f}")
        return "\n".join(lines) + "\n"


def api(base: str, path: str) -> dict:
    """The `data` of a Prometheus HTTP API answer (/api/v1/rules, /api/v1/alerts)."""
    with urllib.request.urlopen(base + path, timeout=30) as resp:
        return json.load(resp)["data"]


def create_blocks(openmetrics: Path, data_dir: Path) -> None:
    """History into TSDB blocks, in the data directory Prometheus is then started on."""
    # day-long blocks (a hidden flag of promtool's): a few blocks load and import far faster than 2h ones
    promtools.create_blocks(openmetrics, data_dir, "--quiet", "--max-block-duration=24h")


def live_handler(fleet: Fleet):
    """A `serve()` route that answers with the fleet's counters at the moment of the scrape."""

    def handler(request):
        body = fleet.exposition().encode()
        request.send_response(200)
        request.send_header("Content-Type", "text/plain; version=0.0.4")
        request.send_header("Content-Length", str(len(body)))
        request.end_headers()
        request.wfile.write(body)

    return handler
