"""Reading Prometheus through inferwatch.promapi (bounded calls, answers checked before use): one range query
per signal part for every model at once, into long pandas frames (part, model, pod, le, t, v). Every failure is
one InferwatchError naming the endpoint and the cause."""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from inferwatch.promapi import ApiError, Client, ClientOptions
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
        samples = series.get("values") or []
        labels = series.get("metric", {})
        le = _bound(labels.get("le"))
        if not samples or le is None:
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
    client, url: str, queries: list[tuple[str, str, str]], windows, step: float, warnings: list | None = None
) -> list:
    """Every (signal, part, PromQL) over each window at `step`, all concurrently; one long frame per window.
    A query Prometheus cannot execute on this data leaves its signal unmeasured, with a warning."""
    import pandas as pd

    texts = list(dict.fromkeys(promql for _, _, promql in queries))  # a denominator shared by signals: once
    jobs = [(k, w, text) for k, w in enumerate(windows) for text in texts]

    def one(job):
        k, window, promql = job
        try:
            return (k, promql), client.query_range(promql, window.start, window.end, step)
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
    out = []
    for k in range(len(windows)):
        frames = [f for signal, part, promql in queries if len(f := _frame(signal, part, answers[k, promql]))]
        out.append(pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS))
    return out


def instant(client, url: str, promql: str, at: float) -> list[dict]:
    """One instant query at `at`: its series, each checked (`metric`, and `value` or `values`)."""
    return client.query(promql, at)
