"""A window's raw samples (the long frame of _fetch) summed up per model and per pod: one Reading per signal.

Pure functions on pandas frames. A ratio's window value is the sum of its
numerator over the sum of its denominator; a histogram quantile is read from the
buckets summed over the window; presence is the share of steps with data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

__all__ = ["Reading", "ABSENT", "summarise", "others", "model_series", "bucket_quantile"]

COMBINE = {"sum": "sum", "max": "max", "mean": "mean"}


@dataclass(frozen=True)
class Reading:
    """A signal over one window: `value`, or None when `state` is absent (no series) or few (too few events)."""

    value: float | None
    state: str = "ok"
    num: float = 0.0  # ratio signals: events summed over the window (numerator, denominator)
    den: float = 0.0
    coverage: float = 1.0  # share of the window's steps with data, relative to the best-covered signal


ABSENT = Reading(None, "absent")


def _ratio(num: float, den: float, min_den: float, coverage: float = 1.0) -> Reading:
    if den <= 0 or den < min_den:
        return Reading(None, "few", num, den, coverage)
    return Reading(num / den, "ok", num, den, coverage)


def bucket_quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """histogram_quantile over (upper bound, cumulative count) pairs, as Prometheus interpolates it."""
    buckets = sorted(buckets)
    if not buckets or not math.isinf(buckets[-1][0]) or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if math.isinf(bound):
                return lower_bound
            if count == lower_count:
                return bound
            return lower_bound + (bound - lower_bound) * (rank - lower_count) / (count - lower_count)
        lower_bound, lower_count = bound, count
    return lower_bound


def _steps(window, step: float, lead: float = 0.0) -> int:
    """Steps of the range query in the window from `lead` seconds after its start (0 when the lead passes its end)."""
    span = window.seconds - lead
    return int(round(span / step)) + 1 if span >= -1e-6 else 0


def _per_step(window, step: float, lead: float) -> float:
    """Seconds of the window each step stands for: its rates times this, summed, are the window's events."""
    n = _steps(window, step, lead)
    return window.seconds / n if n else 0.0


def _window_value(values, agg: str, step: float, lead: float) -> float:
    """A value signal over the window: its mean, max or min; `events`, counts over each rate window (`lead`
    seconds, steps `step` apart) summed into the window's total."""
    if agg == "events":
        return float(values.sum()) * step / max(lead, step)
    return float(values.agg(agg))


def _value_readings(rows, signal, out, window, step, lead=0.0):
    agg, n = signal.agg, _steps(window, step, lead)
    for (model, pod), group in rows.groupby(["model", "pod"], sort=False):
        if signal.per_pod and pod:
            out.setdefault((model, pod), {})[signal.name] = Reading(
                _window_value(group["v"], agg, step, lead), coverage=min(1.0, len(group) / n)
            )
    combined = rows.groupby(["model", "t"], sort=False)["v"].agg(COMBINE[signal.combine])
    for model, series in combined.groupby(level=0, sort=False):
        out.setdefault((model, None), {})[signal.name] = Reading(
            _window_value(series, agg, step, lead), coverage=min(1.0, len(series) / n)
        )


def _ratio_readings(rows, signal, out, window, step, lead=0.0):
    n = _steps(window, step, lead)
    grouped = rows.groupby(["model", "pod", "part"], sort=False)["v"]
    table = (grouped.sum() * _per_step(window, step, lead)).unstack("part")
    if "den" not in table:
        return
    steps = grouped.size().unstack("part")["den"]
    table = table.dropna(subset=["den"])
    table["num"] = table["num"].fillna(0.0) if "num" in table else 0.0
    for (model, pod), row in table.iterrows():
        if signal.per_pod and pod:
            out.setdefault((model, pod), {})[signal.name] = _ratio(
                row["num"], row["den"], signal.min_den, min(1.0, steps[model, pod] / n)
            )
    models = rows[rows["part"] == "den"].groupby("model", sort=False)["t"].nunique()
    for model, group in table.groupby(level=0, sort=False):
        out.setdefault((model, None), {})[signal.name] = _ratio(
            group["num"].sum(), group["den"].sum(), signal.min_den, min(1.0, models[model] / n)
        )


def _bucket_readings(rows, signal, out, window, step, lead=0.0):
    sums = rows.groupby(["model", "le"], sort=False)["v"].sum() * _per_step(window, step, lead)
    present = rows.groupby("model", sort=False)["t"].nunique() / max(_steps(window, step, lead), 1)
    for model, group in sums.groupby(level=0, sort=False):
        pairs = [(le, count) for (_, le), count in group.items()]
        total = max((c for le, c in pairs if math.isinf(le)), default=0.0)
        value = bucket_quantile(signal.q, pairs) if total >= max(signal.min_den, 1e-9) else None
        out.setdefault((model, None), {})[signal.name] = Reading(
            value, "ok" if value is not None else "few", 0.0, total, min(1.0, present[model])
        )


def _presence_readings(rows, signal, out, window, step):
    n = _steps(window, step)
    for model, group in rows.groupby("model", sort=False):
        share = min(1.0, group["t"].nunique() / n)
        out.setdefault((model, None), {})[signal.name] = Reading(share, coverage=share)
        if not signal.per_pod:
            continue
        pods_at = group.groupby("t")["pod"].nunique().sort_index()
        # fewer replicas at the window's end than at its start: one that went away was not replaced (a rollout's
        # old pods end while their successors serve, and a replica's gauges linger a few scrapes beside its
        # successor's, so the count at its busiest moment says nothing)
        shrank = pods_at.iloc[-1] < pods_at.iloc[0]
        for pod, pod_rows in group.groupby("pod", sort=False):
            if not pod:
                continue
            first, last, present = pod_rows["t"].min(), pod_rows["t"].max(), pod_rows["t"].nunique()
            stop = last
            if last < window.end - 2 * step and shrank:
                stop = window.end  # the replica went away and was not replaced: its silence counts
            span = int(round((stop - first) / step)) + 1
            share = min(1.0, present / max(span, 1))
            out.setdefault((model, pod), {})[signal.name] = Reading(share, coverage=share)


def _too_short(rows, signal, out) -> None:
    """Every model and replica with rows of a signal whose rate window is longer than the window: too few samples."""
    for model, pod in rows[["model", "pod"]].drop_duplicates().itertuples(index=False):
        out.setdefault((model, None), {})[signal.name] = Reading(None, "few", coverage=1.0)
        if signal.per_pod and pod:
            out.setdefault((model, pod), {})[signal.name] = Reading(None, "few", coverage=1.0)


def summarise(
    frame, signals, window, step: float, lookback: float = 0.0
) -> dict[tuple[str, str | None], dict[str, Reading]]:
    """{(model, None): model readings, (model, pod): a replica's readings} for one window; absent signals are
    simply not there. A signal that rates over `lookback` seconds is read at the steps whose rate window lies
    inside this window only, and is "few" when there is no such step (a window shorter than the rate window)."""
    out: dict = {}
    if frame is None or not len(frame):
        return out
    by_signal = dict(tuple(frame.groupby("signal", sort=False)))
    for signal in signals:
        rows = by_signal.get(signal.name)
        if rows is None or not len(rows):
            continue
        lead = lookback if signal.looks_back else 0.0
        if lead:
            inside = rows[rows["t"] >= window.start + lead - 1e-6]
            if not len(inside) or not _steps(window, step, lead):
                _too_short(rows, signal, out)
                continue
            rows = inside
        shape = signal.shape
        if shape == "value":
            _value_readings(rows, signal, out, window, step, lead)
        elif shape == "num":
            _ratio_readings(rows, signal, out, window, step, lead)
        elif shape == "buckets":
            _bucket_readings(rows, signal, out, window, step, lead)
        else:
            _presence_readings(rows, signal, out, window, step)
    return {key: _relative_coverage(readings) for key, readings in out.items()}


def _relative_coverage(readings: dict[str, Reading]) -> dict[str, Reading]:
    """Coverage as a share of the model's (or replica's) best-covered signal in the same window: a baseline that
    starts before the data did is not "missing", a signal that stopped while the others went on is."""
    best = max((r.coverage for r in readings.values()), default=0.0)
    if best <= 0:
        return readings
    return {name: replace(r, coverage=min(1.0, r.coverage / best)) for name, r in readings.items()}


def others(pods: dict[str, dict[str, Reading]], pod: str, signals) -> dict[str, Reading]:
    """The other replicas of a model taken together: ratios summed, other values averaged."""
    result = {}
    rest = [readings for name, readings in pods.items() if name != pod]
    for signal in signals:
        readings = [r[signal.name] for r in rest if signal.name in r]
        if not readings:
            continue
        if signal.shape == "num":
            result[signal.name] = _ratio(sum(r.num for r in readings), sum(r.den for r in readings), signal.min_den)
        else:
            values = [r.value for r in readings if r.value is not None]
            result[signal.name] = Reading(sum(values) / len(values)) if values else Reading(None, "few")
    return result


def model_series(rows, signal):
    """A per-step series of one model's rows of a signal (pods combined; ratios per step), for plots; None if
    there is nothing to draw."""
    if rows is None or not len(rows) or signal.shape == "buckets":
        return None
    if signal.shape == "value":
        return rows.groupby("t")["v"].agg(COMBINE[signal.combine])
    if signal.shape == "presence":
        return rows.groupby("t")["v"].sum()
    parts = rows.groupby(["t", "part"])["v"].sum().unstack("part")
    if "den" not in parts:
        return None
    num = parts["num"].fillna(0.0) if "num" in parts else parts["den"] * 0
    return (num / parts["den"].where(parts["den"] > 0)).dropna()
