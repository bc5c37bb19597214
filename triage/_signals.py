"""The signal table (signals.yaml): what triage reads from Prometheus, and the PromQL of each, for all models
at once."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from string import Template

import yaml

from inferwatch.promql import escape_label_value

__all__ = ["Signal", "GROUPS", "DEPLOYMENT", "load_signals", "signal_queries", "model_matcher"]

# the plot's rows and the report's order
GROUPS = ("load-queue", "latency", "tokens", "cache", "gpu", "outcomes", "freshness")
SHAPES = ("value", "num", "buckets", "presence")
# the labels that tell two deployments of one model name apart (two teams' namespaces, two clusters): every query
# keeps them, and a model served in more than one is judged per deployment (_units)
DEPLOYMENT = ("cluster", "namespace")
# functions whose value at a step depends on the whole rate window before it (last_over_time only keeps a gauge fresh)
LOOKING_BACK = ("rate", "increase", "resets", "max_over_time", "min_over_time", "avg_over_time")


@dataclass(frozen=True)
class Signal:
    """One signal: its PromQL parts (`value`, or `num` and `den`, or `buckets`, or `presence`) and how to sum it up."""

    name: str
    group: str
    help: str
    unit: str
    queries: tuple[tuple[str, str], ...]  # (part, PromQL template) with $sel, $by, $unit, $w, $fresh, $pods*
    per_pod: bool = False
    combine: str = "sum"  # how pods merge into their model (value signals)
    agg: str = "mean"  # how a window sums up (value signals): mean, max, min, or events
    #                                        (a count over each rate window: the window's total)
    q: float = 0.95  # buckets signals: the quantile
    min_den: float = 0.0  # ratio signals: fewer events than this read as too few
    floor: float = 0.0  # values below this are noise: changes are measured from here
    felt: bool = False  # a latency users feel: without one, a verdict is "not enough data"
    onset: bool = False  # an incident's start shows in it (_onset): a baseline ends before its rise

    @property
    def shape(self) -> str:
        return self.queries[0][0]

    @property
    def looks_back(self) -> bool:
        """Whether a part rates or looks back over the rate window: read only at steps whose window lies inside."""
        return any(f"{fn}(" in text for _, text in self.queries for fn in LOOKING_BACK)


def _signal(entry: dict) -> Signal:
    parts = tuple(
        (part, " ".join(str(entry[part]).split()))
        for part in ("value", "num", "den", "buckets", "presence")
        if part in entry
    )
    shapes = [p for p, _ in parts if p in SHAPES]
    if len(shapes) != 1 or (shapes == ["num"]) != ("den" in entry):
        raise ValueError(f"signals.yaml: {entry.get('name')}: give exactly one of value, num+den, buckets, presence")
    if entry["group"] not in GROUPS:
        raise ValueError(f"signals.yaml: {entry['name']}: group {entry['group']!r} is not one of {GROUPS}")
    keys = {"per_pod", "combine", "agg", "q", "min_den", "floor", "felt", "onset"}
    return Signal(
        entry["name"],
        entry["group"],
        entry.get("help", ""),
        entry.get("unit", ""),
        parts,
        **{k: entry[k] for k in keys if k in entry},
    )


@cache
def load_signals() -> tuple[Signal, ...]:
    """The shipped signal table, in file order."""
    doc = yaml.safe_load(files("inferwatch.triage").joinpath("signals.yaml").read_text(encoding="utf-8"))
    return tuple(_signal(entry) for entry in doc["signals"])


def model_matcher(models: tuple[str, ...] | list[str]) -> str:
    """`model=~"a|b"` for the given models (regex-escaped), `model!=""` for every model."""
    if not models:
        return 'model!=""'
    import re

    alternatives = "|".join(escape_label_value(re.escape(m)) for m in sorted(set(models)))
    return f'model=~"{alternatives}"'


def signal_queries(signal: Signal, models, rate_window: str, fresh: str | None = None) -> dict[str, str]:
    """Each part of a signal as PromQL over `models`, by model and deployment (`$unit`), with pods kept apart
    where the signal says so (`$by`); `fresh` is how old a gauge's last sample may be (default: the rate window)."""
    unit = ", ".join(("model", *DEPLOYMENT))
    by = f"{unit}, pod" if signal.per_pod else unit
    values = {"sel": model_matcher(models), "by": by, "unit": unit, "w": rate_window, "fresh": fresh or rate_window}
    # the engines' pods, each with its model (all, those without a cluster label, those with one): what GPU series
    # (per workload pod) are joined to
    for key, cluster in (("pods", ""), ("pods_unclustered", ', cluster=""'), ("pods_clustered", ', cluster!=""')):
        values[key] = Template(
            f"group by (cluster, namespace, pod, model) (last_over_time(llm_requests_running{{$sel, "
            f'pod!=""{cluster}}}[$w]))'
        ).substitute(values)
    return {part: Template(text).substitute(values) for part, text in signal.queries}
