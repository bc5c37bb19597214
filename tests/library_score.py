"""Scoring `inferwatch triage` on the generated incident library (tests/incident_library.py), beside a naive
classifier on the same readings.

A case is right when its top finding at 0.5 or more is one of the kinds it expects (with the pod, when one
replica is the finding), or, for a healthy case, when no kind reaches 0.5. A forbidden kind (any kind on a
healthy model, missing-data on a rollout, slow-decode on long outputs) reaching 0.5 is counted apart: the
issue's bar is zero of those.

The naive classifier is "the largest relative change": of the signals below, the one that moved most (in log
ratio, at least 1.5x) names its kind; nothing moved that much, nothing wrong.
"""

from __future__ import annotations

import math
import shutil
import tempfile
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from incident_library import INCIDENT, Case, labels, store_of, write_store

__all__ = ["Result", "served", "verdicts", "result", "naive", "table", "NAIVE"]

CONFIDENT = 0.5
# the naive classifier's signal -> kind (direction: +1 a rise is the symptom, -1 a fall)
NAIVE = {
    "queue_time_mean": ("queueing", 1),
    "waiting": ("queueing", 1),
    "prompt_tokens_per_request": ("long-prompts", 1),
    "prefix_hit_ratio": ("prefix-cache-loss", -1),
    "preemptions_per_request": ("kv-pressure", 1),
    "kv_usage": ("kv-pressure", 1),
    "tpot_mean": ("slow-decode", 1),
    "spec_acceptance": ("spec-decode-collapse", -1),
    "reasoning_tokens_per_request": ("thinking", 1),
    "output_tokens_per_request": ("long-outputs", 1),
    "sm_active": ("gpu-not-computing", -1),
    "engine_error_share": ("errors", 1),
    "door_unanswered_share": ("errors", 1),
    "door_ttft_mean": ("not-the-engine", 1),
    "engine_series": ("missing-data", -1),
}


@dataclass(frozen=True)
class Result:
    case: Case
    right: bool
    got: str  # the top kind (with its pod and confidence), or "none"
    forbidden: str  # a forbidden kind that reached 0.5, or ""
    naive_right: bool
    naive_got: str


@contextmanager
def served(cases: list[Case], work: Path | None = None):
    """Yields {store: Prometheus base URL} while real Prometheus servers hold the cases' blocks."""
    from promtools import prometheus

    with tempfile.TemporaryDirectory(prefix="triage-library-") as tmp, ExitStack() as stack:
        root = Path(work or tmp)
        urls = {}
        for store in sorted({store_of(c) for c in cases}):
            folder = root / store
            write_store([c for c in cases if store_of(c) == store], folder)
            urls[store] = stack.enter_context(
                prometheus(
                    shutil.which("prometheus"),
                    {"global": {"scrape_interval": "1m"}},
                    folder,
                    # Prometheus' own deadline as long as the client's (verdicts): at load 30 a query over four
                    # seeds' GPU joins ran past the default 2 minutes
                    ("--storage.tsdb.retention.time=100y", "--query.timeout=10m"),
                )
            )
        yield urls


def verdicts(cases: list[Case], urls: dict[str, str], rules=()) -> dict[str, object]:
    """{model: Verdict} of every case, each store judged in one triage() over the library's incident window."""
    from inferwatch.promapi import ClientOptions
    from inferwatch.triage import Connection, Window, triage

    out = {}
    for store, url in urls.items():
        models = tuple(c.model for c in cases if store_of(c) == store)
        # a deadline for a shared CI machine's load, not for speed (tests/bench_triage.py measures that)
        conn = Connection(url, ClientOptions(timeout=600))
        report = triage(conn, Window(*INCIDENT), "auto", models, tuple(rules))
        out.update({v.model: v for v in report.verdicts})
    return out


def _top(verdict) -> tuple[str, str | None, float]:
    top = next((f for f in verdict.findings if f.confidence >= CONFIDENT), None)
    return (top.kind, top.pod, top.confidence) if top else ("none", None, 0.0)


def naive(verdict) -> str:
    """The kind of the signal that moved most, at least 1.5x; "none" when nothing did."""
    best, kind = math.log(1.5), "none"
    for signal, (name, sign) in NAIVE.items():
        b, i = verdict.baseline.get(signal), verdict.incident.get(signal)
        if b is None or b.value is None:
            continue
        inc = i.value if i is not None and i.value is not None else (0.0 if signal == "engine_series" else None)
        if inc is None:
            continue
        change = sign * math.log(max(inc, 1e-3) / max(b.value, 1e-3))
        if change > best:
            best, kind = change, name
    return kind


def result(case: Case, verdict) -> Result:
    kind, pod, confidence = _top(verdict)
    want = labels(case)
    if case.expect:
        right = kind in case.expect and (want["pod"] is None or pod == want["pod"])
    else:
        right = kind == "none"
    confident = {f.kind for f in verdict.findings if f.confidence >= CONFIDENT}
    bad = sorted(confident if "*" in case.forbid else confident & set(case.forbid))
    got = "none" if kind == "none" else f"{kind}{f'@{pod}' if pod else ''} {confidence:.2f}"
    guess = naive(verdict)
    return Result(case, right, got, ",".join(bad), guess in case.expect or (not case.expect and guess == "none"), guess)


def table(results: list[Result]) -> str:
    """One line per case and the scores: triage's, the naive classifier's, and forbidden kinds at 0.5."""
    lines = [f"{'case':34} {'expect':34} {'triage':38} {'naive':20}"]
    for r in results:
        mark = "ok " if r.right else "BAD"
        expect = "/".join(r.case.expect) or "none"
        if r.case.expect_pod is not None:
            expect += f"@pod{r.case.expect_pod}"
        extra = f"  FORBIDDEN {r.forbidden}" if r.forbidden else ""
        lines.append(f"{r.case.name:34} {expect:34} {mark} {r.got:34} {r.naive_got:20}{extra}")
    n = len(results)
    right, simple = sum(r.right for r in results), sum(r.naive_right for r in results)
    lines.append(
        f"triage {right}/{n} right ({100 * right / n:.0f} %), naive largest-change {simple}/{n} "
        f"({100 * simple / n:.0f} %), forbidden kinds at 0.5: {sum(bool(r.forbidden) for r in results)}"
    )
    return "\n".join(lines)
