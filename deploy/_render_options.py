"""The flags of `inferwatch deploy render` that are keys of deploy.yaml too (`backend`), in a module light enough
for `inferwatch --help`: the command's flags are made from `RenderFlags`, and Config (deploy/_config.py, loaded
when the command runs) holds the same option, so the key and the flag share one help, one check and one table row."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from inferwatch.options import option

__all__ = ["BACKENDS", "RenderFlags", "backend_option"]

BACKENDS = ("prometheus", "victoriametrics")  # who scrapes, stores and evaluates the rules


def _backend(value) -> str:
    if value not in BACKENDS:
        raise ValueError(f"{value!r}: use one of {', '.join(BACKENDS)}")
    return value


def backend_option() -> Any:
    """`backend`: a key of deploy.yaml and the flag --backend."""
    return option(
        "prometheus",
        "Who scrapes, stores and evaluates the rules: prometheus, or victoriametrics (the VM operator's CRs; "
        "vmagent, VictoriaMetrics and vmalert in compose).",
        parse=_backend,
        flag="--backend",
        metavar="BACKEND",
    )


@dataclass(frozen=True)
class RenderFlags:
    """The flags `deploy render` takes from Config's keys; from_flags lays them over Config by name."""

    backend: str = backend_option()
