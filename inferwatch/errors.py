"""The one exception tree of inferwatch.

    InferwatchError            anything a user can cause; the CLI prints it, exits 1
    ├── InputError             a file the user named cannot be read or written as given (missing, a folder,
    │                          over the input cap, not UTF-8, nested too deep, a YAML alias bomb): exit 2
    ├── SpecError              a YAML file (mapping, config, SLO spec) is wrong:
    │                          carries file, line and field path, and may hold several problems
    ├── ExpositionError        a Prometheus text exposition cannot be parsed: carries the line
    └── ListenError            a server cannot listen on HOST:PORT (taken, not this host's, privileged)

Code outside the CLI raises these and nothing else for bad input, so a user
never sees a traceback for a mistake of theirs.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass

__all__ = ["InferwatchError", "InputError", "SpecError", "Problem", "ExpositionError", "ListenError", "collect"]


class InferwatchError(Exception):
    """Root of every error a user can cause."""

    exit_code = 1


class InputError(InferwatchError):
    """A named input or output cannot be used at all: one line naming the path; the CLI exits 2."""

    exit_code = 2


@dataclass(frozen=True)
class Problem:
    """One thing wrong in a file: where (line and column, 1-based, when known), which field (a path such as
    `objectives[0].threshold`), what, and what would be valid."""

    file: str
    line: int | None
    field: str
    message: str
    column: int | None = None
    valid: tuple[str, ...] = ()

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        field = f" {self.field}:" if self.field else ""
        valid = f" (valid: {', '.join(map(str, self.valid))})" if self.valid else ""
        return f"{where}:{field} {self.message}{valid}"


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


class ListenError(InferwatchError):
    """A server cannot bind HOST:PORT; says why in the user's terms and which flag picks another."""

    def __init__(self, host: str, port: int, err: OSError, flag: str = "--listen"):
        self.host, self.port = host, port
        reasons: dict[int | None, str] = {
            errno.EADDRINUSE: "the port is already in use by another process",
            errno.EADDRNOTAVAIL: "the address is not one of this host's",
            errno.EACCES: "permission denied (ports below 1024 need privileges)",
        }
        reason = reasons.get(err.errno, err.strerror or str(err))
        super().__init__(f"{flag} {host}:{port}: cannot listen: {reason}; choose another with {flag} HOST:PORT")
