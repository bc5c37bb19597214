"""The latency objectives a dashboard shows beside its panels, taken from the SLO specs that are installed, so a tile
that reads "TTFT within 1 s" and the pager that fires on it agree on the threshold and the target.

    with slo_specs(specs):                     # the builder: dashboards built inside read these specs
        board = load_dashboard(path)
    latency_objective("ttft")                  # in a *.dashboard.py: the threshold and target to show

Outside `slo_specs(...)` the embedded default spec (slo/defaults.yaml) is installed, so the checked-in JSON shows
its values.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from inferwatch.resources import data_path

__all__ = ["LatencyObjective", "latency_objective", "slo_specs"]

_SPECS: ContextVar[tuple | None] = ContextVar("inferwatch_dashboard_slo_specs", default=None)


@dataclass(frozen=True)
class LatencyObjective:
    """One latency objective as a tile shows it: the bound (seconds), the target share, and where it came from."""

    threshold: Fraction
    target: Fraction
    source: str  # "slo/defaults.yaml, objective responsive"
    le: str  # the bucket matcher for the bound however an engine spells it: le=~"1|1[.]0"

    @property
    def words(self) -> str:
        """The bound as a title says it: 1 s, 100 ms, 2.5 s."""
        seconds = float(self.threshold)
        return f"{seconds * 1000:g} ms" if seconds < 1 else f"{seconds:g} s"


@contextmanager
def slo_specs(specs):
    """Dashboards built inside read these specs' objectives (`inferwatch.slo.Spec`s, in the order installed)."""
    token = _SPECS.set(tuple(specs))
    try:
        yield
    finally:
        _SPECS.reset(token)


def _defaults() -> tuple:
    from inferwatch.slo import load_spec

    return (load_spec(data_path("inferwatch.slo", "defaults.yaml")),)


def _name(spec) -> str:
    """The spec file as a description names it: slo/defaults.yaml for the embedded one, else the file's name (no
    folder: the dashboard JSON is the same wherever the spec sits)."""
    path = Path(spec.file)
    return f"slo/{path.name}" if path.parent.resolve() == data_path("inferwatch.slo").resolve() else path.name


def latency_objective(kind: str) -> LatencyObjective:
    """The first `kind` objective (ttft, tpot) of the installed specs, those read from the engines first (the
    dashboards read the engines' histograms); the embedded default's when no installed spec has one."""
    from inferwatch.slo import le_matcher

    installed = sorted(_SPECS.get() or (), key=lambda spec: spec.source != "engine")
    for spec in [*installed, *_defaults()]:
        for objective in spec.objectives:
            if objective.kind == kind:
                m = le_matcher(objective.sli.threshold)
                return LatencyObjective(
                    objective.sli.threshold,
                    objective.target,
                    f"{_name(spec)}, objective {objective.name}",
                    f'{m.label}{m.op}"{m.value}"',
                )
    raise LookupError(f"no {kind} objective in the installed SLO specs nor in the embedded defaults")
