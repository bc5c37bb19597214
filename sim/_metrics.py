"""/metrics of a simulated engine, exactly as the chosen release writes it (names, labels, buckets, _created).

The engine model reports signals (`running`, `ttft`, `finished`...); the
release table (releases.yaml) says which metrics, if any, carry each signal.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib.resources import files

import yaml
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from inferwatch.errors import InferwatchError
from inferwatch.slo import bucket_tables, version_tuple

__all__ = ["EngineMetrics", "releases", "default_release"]

FIXED_LABELS = {"engine": "0", "engine_type": "unified", "tp_rank": "0", "pp_rank": "0", "moe_ep_rank": "0"}
_TYPES = {"gauge": Gauge, "counter": Counter, "histogram": Histogram}


@cache
def _table() -> dict:
    return yaml.safe_load(files("inferwatch.sim").joinpath("releases.yaml").read_text(encoding="utf-8"))["engines"]


def releases(engine: str) -> list[str]:
    return list(_table()[engine]["releases"])


def default_release(engine: str) -> str:
    return _table()[engine]["default"]


def _buckets(engine: str, version: str, family) -> list[float]:
    if isinstance(family, list):  # the release's own bounds
        return [float(b) for b in family]
    if family == "tokens":
        return _table()[engine]["token_buckets"]
    wanted = version_tuple(version)
    for entry in bucket_tables()[engine].families[family]:
        if entry.since <= wanted and entry.bounds is not None:
            return [float(b) for b in entry.bounds]
    raise InferwatchError(f"no {family} buckets for {engine} {version}")


@dataclass
class _Signal:
    metrics: list  # prometheus_client metrics carrying the same values
    base: dict[str, str]  # values of the release's own labels
    streaming: bool
    values: tuple[str, ...] = ()  # the values of its extra label, where the release lists them


class EngineMetrics:
    """One engine's registry; signals the release does not expose are ignored."""

    def __init__(self, engine: str, version: str, model: str):
        if engine not in _table():
            raise InferwatchError(f"unknown engine {engine!r}; use vllm or sglang")
        if version not in _table()[engine]["releases"]:
            raise InferwatchError(f"{engine} {version} is not simulated; releases: {', '.join(releases(engine))}")
        self.engine, self.version = engine, version
        self.registry = CollectorRegistry()
        self._created = _table()[engine]["created"]
        release = _table()[engine]["releases"][version]
        self._signals: dict[str, _Signal] = {}
        for signal, spec in release["metrics"].items():
            self._signals[signal] = self._build(release, spec, model)

    def _build(self, release: dict, spec: dict, model: str) -> _Signal:
        role = spec.get("labels", "engine" if "engine" in release["labels"] else "tokenizer")
        own = [] if role == "none" else list(release["labels"][role])
        names = spec["name"] if isinstance(spec["name"], list) else [spec["name"]]
        streaming = bool(spec.get("streaming"))
        labelnames = own + (["is_streaming"] if streaming else []) + list(spec.get("extra", []))
        kwargs = {"buckets": _buckets(self.engine, self.version, spec["buckets"])} if "buckets" in spec else {}
        metrics = [
            _TYPES[spec["type"]](name, f"{name} (inferwatch simulator)", labelnames, registry=self.registry, **kwargs)
            for name in names
        ]
        base = {label: (model if label == "model_name" else FIXED_LABELS[label]) for label in own}
        signal = _Signal(metrics, base, streaming, tuple(spec.get("values", ())))
        # series exist from the start, as the engines create them: one per listed value of the extra label,
        # or the plain one; a signal with an open-ended extra label (HTTP status) appears on first use
        if spec.get("extra") and not signal.values:
            return signal
        for extra in [{spec["extra"][0]: v} for v in signal.values] or [{}]:
            for metric in metrics:
                metric.labels(**self._labels(signal, True, extra))
        return signal

    @staticmethod
    def _labels(signal: _Signal, streaming: bool | None, extra: dict) -> dict[str, str]:
        labels = dict(signal.base)
        if signal.streaming:
            labels["is_streaming"] = "false" if streaming is False else "true"
        labels.update(extra)
        return labels

    def has(self, signal: str) -> bool:
        return signal in self._signals

    def values(self, signal: str) -> tuple[str, ...]:
        """The values the release gives the signal's extra label (finish reasons, cache sources)."""
        return self._signals[signal].values if signal in self._signals else ()

    def set(self, signal: str, value: float) -> None:
        if signal in self._signals:
            for metric in self._signals[signal].metrics:
                metric.labels(**self._labels(self._signals[signal], None, {})).set(value)

    def inc(self, signal: str, amount: float = 1, streaming: bool | None = None, **extra: str) -> None:
        if signal in self._signals and amount:
            for metric in self._signals[signal].metrics:
                metric.labels(**self._labels(self._signals[signal], streaming, extra)).inc(amount)

    def observe(self, signal: str, value: float, streaming: bool | None = None, times: int = 1) -> None:
        if signal in self._signals:
            for metric in self._signals[signal].metrics:
                child = metric.labels(**self._labels(self._signals[signal], streaming, {}))
                for _ in range(times):
                    child.observe(value)

    def render(self) -> str:
        text = generate_latest(self.registry).decode()
        if self._created:
            return text
        # multiprocess-mode engines (SGLang) write no _created series
        return "".join(
            line + "\n"
            for line in text.splitlines()
            if not (line.split(" ")[2 if line.startswith("#") else 0].split("{")[0].endswith("_created"))
        )
