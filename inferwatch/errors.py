"""The one exception tree of inferwatch.

    InferwatchError            anything a user can cause; the CLI prints it, exits 1
    ├── SpecError              a YAML file (mapping, config, SLO spec) is wrong:
    │                          carries file, line and field path, and may hold several problems
    └── ExpositionError        a Prometheus text exposition cannot be parsed: carries the line

Code outside the CLI raises these and nothing else for bad input, so a user
never sees a traceback for a mistake of theirs.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["InferwatchError", "SpecError", "Problem", "ExpositionError", "collect"]


class InferwatchError(Exception):
    """Root of every error a user can cause."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong in a file: where, which field, what."""

    file: str
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        field = f" {self.field}:" if self.field else ""
        return f"{where}:{field} {self.message}"


class SpecError(InferwatchError):
    """A YAML input is invalid; `problems` lists every problem found, not just the first."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


def collect(load, paths) -> tuple[list, list[Problem]]:
    """Run `load` on every path: ([(path, result) of those that loaded], every problem of those that did not),
    so a command can report all files at once."""
    loaded, problems = [], []
    for path in paths:
        try:
            loaded.append((path, load(path)))
        except SpecError as err:
            problems.extend(err.problems)
    return loaded, problems


class ExpositionError(InferwatchError):
    """A Prometheus text exposition is malformed at `line` (1-based)."""

    def __init__(self, line: int, message: str, source: str = "<input>"):
        self.line = line
        self.source = source
        self.reason = message
        super().__init__(f"{source}:{line}: {message}")
