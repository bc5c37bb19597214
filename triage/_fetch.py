"""Reading Prometheus through inferwatch.promapi (bounded calls, answers checked before use): one range query
per signal part for every model at once, into long pandas frames (part, model, pod, le, t, v). Every failure is
one InferwatchError naming the endpoint and the cause."""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from inferwatch.promapi import ApiError, Client, ClientOptions
from inferwatch.triage._increase import exact_rates, reads, roll, steps_per_window
from inferwatch.triage._signals import DEPLOYMENT

__all__ = ["Connection", "connect", "fetch_windows", "instant", "COLUMNS"]

COLUMNS = ["signal", "part", "model", "pod", *DEPLOYMENT, "le", "t", "v"]
WORKERS = 8


@dataclass(frozen=True)
class Connection:
    """How to reach Prometheus: its URL and the client options (auth, TLS, proxy, deadline, size cap)."""

    url: str
    options: ClientOptions = field(default_factory=ClientOptions)


def connect(conn: Connection) -> Client:
    """The one client for Prometheus-like APIs, on this URL with these options."""
    return Client(conn.url, conn.options, "Prometheus")


def _bound(le: str | None) -> float | None:
    """A histogram bound as a number (`2`, `2.0` and `2e0` are one bucket); NaN without `le`; None when it is no
    number, so that series is left out rather than failing the command."""
    if le is None:
        return math.nan
    try:
        return float(le)
    except ValueError:
        return None


def _frame(signal: str, part: str, result: list[dict]):
    """One query's answer as a long frame, built column by column (no frame per series)."""
    import numpy as np
    import pandas as pd

    values, counts, les = [], [], []
    text: dict[str, list[str]] = {name: [] for name in ("model", "pod", *DEPLOYMENT)}
    for series in result:
        samples = series.get("values")
        samples = [] if samples is None else samples  # a list from the server, an array once rolled
        labels = series.get("metric", {})
        le = _bound(labels.get("le"))
        if not len(samples) or le is None:
            continue
        values.append(np.asarray(samples, dtype=float).reshape(-1, 2))
        counts.append(len(samples))
        for name, column in text.items():
            column.append(labels.get(name, ""))
        les.append(le)
    if not values:
        return pd.DataFrame(columns=COLUMNS)
    block = np.concatenate(values)
    return pd.DataFrame(
        {
            "signal": signal,
            "part": part,
            **{name: np.repeat(np.array(column, dtype=object), counts) for name, column in text.items()},
            "le": np.repeat(np.array(les, dtype=float), counts),
            "t": block[:, 0],
            "v": block[:, 1],
        }
    )


class QueryFailed(str):
    """A query Prometheus could not run on this data (HTTP 422, e.g. a join that is not one-to-one here)."""


def _query_failed(err: ApiError, promql: str) -> QueryFailed | None:
    if err.status == 422:
        return QueryFailed(f"Prometheus could not run {promql[:80]}...: {err.what[:200]}")
    return None


def fetch_windows(
    client,
    url: str,
    queries: list[tuple[str, str, str]],
    windows,
    step: float,
    warnings: list | None = None,
    lookback: float | None = None,
) -> list:
    """Every (signal, part, PromQL) over each window at `step`, all concurrently; one long frame per window.
    With `lookback` (the rate window, s), every `rate()` is read as Prometheus and VictoriaMetrics answer alike
    (_increase): per-step increases from a rate window before the window on, rolled into rates over it here.
    A query Prometheus cannot execute on this data leaves its signal unmeasured, with a warning."""
    import pandas as pd

    texts = list(dict.fromkeys(promql for _, _, promql in queries))  # a denominator shared by signals: once
    sent = {text: exact_rates(text, step) if lookback else text for text in texts}
    k_steps = steps_per_window(lookback, step) if lookback else 0
    jobs = [(k, w, text) for k, w in enumerate(windows) for text in texts]

    def one(job):
        k, window, promql = job
        first = _first_step(window, step)
        start = first - (k_steps - 1) * step if sent[promql] != promql else first
        try:
            return (k, promql), client.query_range(sent[promql], start, window.end, step)
        except ApiError as err:
            failed = _query_failed(err, promql)
            if failed is not None:
                return (k, promql), failed
            raise

    with ThreadPoolExecutor(WORKERS) as pool:
        futures = [pool.submit(one, job) for job in jobs]
        try:
            answers = dict(future.result() for future in futures)
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)  # the first failure ends the command: ask no more
            raise
    for (k, promql), answer in list(answers.items()):
        if isinstance(answer, QueryFailed):
            if warnings is not None and f"{answer}; its signals read as not measured" not in warnings:
                warnings.append(f"{answer}; its signals read as not measured")
            answers[k, promql] = []
    for (k, promql), answer in answers.items():
        if sent[promql] != promql:
            answers[k, promql] = _rolled(answer, step, k_steps, _first_step(windows[k], step), reads(promql) == "rate")
    out = []
    for k in range(len(windows)):
        frames = [f for signal, part, promql in queries if len(f := _frame(signal, part, answers[k, promql]))]
        out.append(pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS))
    return out


def _first_step(window, step: float) -> float:
    """The window's first step on a multiple of `step`: where VictoriaMetrics (its response cache on) moves a range
    query's start to, so both stores answer at the same moments."""
    return math.ceil(window.start / step - 1e-9) * step


def _rolled(result: list[dict], step: float, k: int, keep_from: float, per_second: bool) -> list[dict]:
    """A query's series of per-step increases as rates over `k` steps (or counts: resets), from `keep_from` on
    (_increase.roll)."""
    import numpy as np

    out = []
    for series in result:
        samples = series.get("values") or []
        if samples:
            out.append(
                {
                    **series,
                    "values": roll(np.asarray(samples, dtype=float).reshape(-1, 2), step, k, keep_from, per_second),
                }
            )
    return out


def instant(client, url: str, promql: str, at: float) -> list[dict]:
    """One instant query at `at`: its series, each checked (`metric`, and `value` or `values`)."""
    return client.query(promql, at)
