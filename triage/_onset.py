"""Where an incident began: the step at which a model's incident signals (`onset: true` in signals.yaml: queue
time, TTFT, waiting, KV usage, error shares...) left their normal level, on the per-step series triage already
fetched. A baseline must end before it: an hour-before baseline that holds the incident's first minutes (a queue
that began before `--since`) compares the incident with itself.

One change point per signal, the classic mean shift: on y = log(x + floor) (so a change is a ratio, and values
under the noise floor do not count), the split of the series into a before and an after whose difference of
means, in units of its standard error, is largest. It counts when the after is worse by at least ONSET_RATIO
(and the standard error leaves no doubt: ONSET_T); the onset is then the first step of the run of values, ending
at the split, that stand above the before's normal range (a ramp starts before its middle). The model's onset is
the earliest of its signals'. Pure functions on the long frames of _fetch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Onset", "onsets", "find_onset", "ONSET_RATIO", "ONSET_T", "MIN_SEGMENT"]

ONSET_RATIO = 1.5  # the after at least this much worse (in x + floor): the change kinds.yaml calls "up"
ONSET_T = 6.0  # standard errors: far beyond what noise (even rate windows' autocorrelated noise) reaches
MIN_SEGMENT = 5  # steps each side of a split: fewer is no level
NORMAL_BAND = 3.0  # standard deviations of the before: a value above that has left its normal range
SHARE_FLOOR = 0.01  # the floor of a share without one (error shares, KV usage): one percent


@dataclass(frozen=True)
class Onset:
    at: float  # Unix seconds: the first step above the normal range
    signals: tuple[str, ...]  # the signals whose change point this is (the earliest first)
    before: float = 0.0  # Unix seconds: the model's first step with data (of an onset signal): where a before starts


def find_onset(t: np.ndarray, x: np.ndarray, floor: float) -> float | None:
    """The onset of one per-step series (times `t`, values `x`, NaN where unmeasured), or None when it holds no
    material, certain rise."""
    ok = np.isfinite(x)
    t, x = t[ok], x[ok]
    n = len(x)
    if n < 2 * MIN_SEGMENT:
        return None
    y = np.log(np.maximum(x, 0.0) + (floor or SHARE_FLOOR))
    k = np.arange(MIN_SEGMENT, n - MIN_SEGMENT + 1)
    c1 = np.concatenate([[0.0], np.cumsum(y)])
    c2 = np.concatenate([[0.0], np.cumsum(y * y)])
    pre_mean = c1[k] / k
    post_mean = (c1[n] - c1[k]) / (n - k)
    within = (c2[k] - k * pre_mean**2) + (c2[n] - c2[k] - (n - k) * post_mean**2)
    sd = np.sqrt(np.maximum(within, 0.0) / (n - 2))
    diff = post_mean - pre_mean
    # the noise floor of log(x + floor) itself: a perfectly flat series has sd 0, and no shift is uncertain then
    stat = diff / np.maximum(sd, 1e-3) * np.sqrt(k * (n - k) / n)
    best = int(np.argmax(stat))
    if stat[best] < ONSET_T or diff[best] < math.log(ONSET_RATIO):
        return None
    split = int(k[best])
    if split == MIN_SEGMENT:  # at the search's edge: the rise may begin before any before could be seen
        return None
    before = y[:split]
    normal = before.mean() + NORMAL_BAND * max(before.std(), 1e-3)
    j = split
    while j > 0 and y[j - 1] > normal:
        j -= 1
    if j < MIN_SEGMENT:  # the rise starts with the data: no before to speak of
        return None
    return float(t[j])


def _series(rows, signal) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per model, the signal's per-step series (pods combined; ratios per step): {model: (t, x)}."""
    if rows is None or not len(rows):
        return {}
    if signal.shape == "value":
        merged = rows.groupby(["model", "t"], sort=True)["v"].agg(signal.combine)
    elif signal.shape == "num":
        parts = rows.groupby(["model", "t", "part"], sort=True)["v"].sum().unstack("part")
        if "den" not in parts:
            return {}
        num = parts["num"].fillna(0.0) if "num" in parts else parts["den"] * 0
        merged = num / parts["den"].where(parts["den"] > 0)
    else:
        return {}
    out = {}
    for model, series in merged.groupby(level=0, sort=False):
        out[model] = (series.index.get_level_values(1).to_numpy(float), series.to_numpy(float))
    return out


def onsets(frame, signals, since: float | None = None) -> dict[str, Onset]:
    """{model: its onset} over one frame (the contiguous span searched: the hour before and the incident); only
    models with a material, certain rise are there. `since` (Unix seconds) leaves out onsets before it."""
    if frame is None or not len(frame):
        return {}
    wanted = [s for s in signals if s.onset]
    frame = frame[frame["signal"].isin([s.name for s in wanted])]
    by_signal = dict(tuple(frame.groupby("signal", sort=False)))
    found: dict[str, list[tuple[float, str]]] = {}
    for signal in wanted:
        for model, (t, x) in _series(by_signal.get(signal.name), signal).items():
            at = find_onset(t, x, signal.floor)
            if at is not None and (since is None or at >= since):
                found.setdefault(model, []).append((at, signal.name))
    first = frame.groupby("model", sort=False)["t"].min()
    out = {}
    for model, hits in found.items():
        hits.sort()
        out[model] = Onset(hits[0][0], tuple(name for _, name in hits), float(first[model]))
    return out
