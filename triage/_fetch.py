"""Reading Prometheus with prometheus-api-client: one range query per signal part for every model at once, into
long pandas frames (part, model, pod, le, t, v). Foreign errors become one InferwatchError naming the cause."""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone

from inferwatch.errors import InferwatchError
from inferwatch.triage._signals import DEPLOYMENT

__all__ = ["Connection", "connect", "fetch_windows", "instant", "COLUMNS"]

COLUMNS = ["signal", "part", "model", "pod", *DEPLOYMENT, "le", "t", "v"]
WORKERS = 8


@dataclass(frozen=True)
class Connection:
    """How to reach Prometheus: URL, extra headers (auth), TLS verification and client certificate."""

    url: str
    headers: dict = field(default_factory=dict)
    verify: bool | str = True        # False: no verification; a path: this CA bundle
    cert: str | tuple | None = None  # client certificate (file, or (cert, key))
    timeout: float = 30.0


def connect(conn: Connection):
    """A PrometheusConnect on a session that carries the TLS options; few retries, so a dead URL fails fast."""
    import requests
    from prometheus_api_client import PrometheusConnect
    from urllib3.util.retry import Retry

    session = requests.Session()
    session.verify = conn.verify
    session.cert = conn.cert
    retry = Retry(total=2, connect=0, backoff_factor=0.2, status_forcelist=(502, 503, 504))
    return PrometheusConnect(url=conn.url.rstrip("/"), headers=dict(conn.headers) or None, retry=retry,
                             session=session, timeout=conn.timeout)


def _translate(err: Exception, url: str) -> InferwatchError:
    """The client's and requests' errors in the user's terms, with the flag that fixes them."""
    import requests
    from prometheus_api_client.exceptions import PrometheusApiClientException

    text = str(err)
    if isinstance(err, requests.exceptions.SSLError):
        return InferwatchError(f"Prometheus at {url}: TLS failed ({text[:200]}); give --ca-file, or --insecure")
    if isinstance(err, (requests.exceptions.ConnectionError, requests.exceptions.Timeout)):
        return InferwatchError(f"cannot reach Prometheus at {url}: {type(err).__name__}; check --prometheus "
                               "(e.g. http://localhost:9090)")
    if isinstance(err, PrometheusApiClientException):
        if "401" in text or "403" in text:
            return InferwatchError(f"Prometheus at {url} refused the request ({text[:120]}); pass credentials with "
                                   "--header 'Authorization: Bearer TOKEN' or --bearer-token-file FILE")
        return InferwatchError(f"Prometheus at {url} answered an error: {text[:300]}")
    if isinstance(err, (ValueError, KeyError)):
        return InferwatchError(f"{url} did not answer like Prometheus' HTTP API ({type(err).__name__}); check "
                               "--prometheus")
    if isinstance(err, requests.exceptions.RequestException):
        return InferwatchError(f"Prometheus at {url}: {text[:300]}")
    raise err


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
    return pd.DataFrame({"signal": signal, "part": part,
                         **{name: np.repeat(np.array(column, dtype=object), counts) for name, column in text.items()},
                         "le": np.repeat(np.array(les, dtype=float), counts), "t": block[:, 0], "v": block[:, 1]})


class QueryFailed(str):
    """A query Prometheus could not run on this data (HTTP 422, e.g. a join that is not one-to-one here)."""


def _query_failed(err: Exception, promql: str) -> QueryFailed | None:
    from prometheus_api_client.exceptions import PrometheusApiClientException

    text = str(err)
    if isinstance(err, PrometheusApiClientException) and "422" in text:
        reason = text.split('"error":"', 1)[-1].split('"}', 1)[0][:200]
        return QueryFailed(f"Prometheus could not run {promql[:80]}...: {reason}")
    return None


def fetch_windows(client, url: str, queries: list[tuple[str, str, str]], windows, step: float,
                  warnings: list | None = None) -> list:
    """Every (signal, part, PromQL) over each window at `step`, all concurrently; one long frame per window.
    A query Prometheus cannot execute on this data leaves its signal unmeasured, with a warning."""
    import pandas as pd

    texts = list(dict.fromkeys(promql for _, _, promql in queries))     # a denominator shared by signals: once
    jobs = [(k, w, text) for k, w in enumerate(windows) for text in texts]

    def one(job):
        k, window, promql = job
        begin, finish = (datetime.fromtimestamp(x, timezone.utc) for x in (window.start, window.end))
        try:
            return (k, promql), client.custom_query_range(promql, begin, finish, f"{step:g}s")
        except Exception as err:  # noqa: BLE001 - translated into the user's terms, or re-raised
            failed = _query_failed(err, promql)
            if failed is not None:
                return (k, promql), failed
            raise _translate(err, url) from None

    with ThreadPoolExecutor(WORKERS) as pool:
        answers = dict(pool.map(one, jobs))
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
    """One instant query at `at`."""
    try:
        return client.custom_query(promql, params={"time": f"{at:.3f}"})
    except Exception as err:  # noqa: BLE001
        raise _translate(err, url) from None
