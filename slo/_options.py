"""The options models of `inferwatch slo compile` and `inferwatch slo import`: one field per flag, with its help and
its check, from which the flags and slo/README.md's tables are made (inferwatch/options.py). `slo check`, `slo
explain` and `slo test` take specs and no flags. Light to import: `inferwatch --help` builds the flags from it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from inferwatch.options import option

__all__ = ["CompileOptions", "ImportOptions"]


def _format(text: str) -> str:
    from inferwatch.slo._output import FORMATS

    if text not in FORMATS:
        raise ValueError(f"{text!r}: use one of {', '.join(FORMATS)}")
    return text


@dataclass(frozen=True)
class CompileOptions:
    """`inferwatch slo compile`'s flags (its specs are arguments)."""

    out: Path = option(Path("slo-rules"), "Output folder.", short="-o", metavar="DIR", kind=Path)
    format: str = option(
        "prometheus",
        "prometheus (rule files, tests, inhibit rules) or prometheus-operator (PrometheusRule manifests)",
        metavar="FORMAT",
        parse=_format,
    )


@dataclass(frozen=True)
class ImportOptions:
    """`inferwatch slo import`'s flags (its file is an argument); the command refuses both together, and an --out
    that is a folder."""

    out: Path | None = option(
        None,
        "Write the spec here (one service) instead of standard output.",
        short="-o",
        metavar="FILE",
        kind=Path,
    )
    out_dir: Path | None = option(
        None,
        "Write one <service>.yaml per service here (created if missing).",
        short="-d",
        metavar="DIR",
        kind=Path,
    )
