"""`inferwatch cost compile`'s options model: its one flag, from which the flag and cost/README.md's table are
made (inferwatch/options.py); the cost file is an argument. Light to import: `inferwatch --help` builds the flag
from it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from inferwatch.options import option

__all__ = ["CostCompileOptions"]


@dataclass(frozen=True)
class CostCompileOptions:
    """`inferwatch cost compile`'s flags."""

    out: Path = option(Path("rules"), "Where to write NAME.cost.rules.yaml.", short="-o", metavar="DIR", kind=Path)
