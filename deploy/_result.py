"""One line of `inferwatch doctor`: a check, its status and, when something is wrong, the fix."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Result", "RENDER"]

RENDER = "inferwatch deploy render"  # what most fixes point at: the files it writes are right


@dataclass(frozen=True)
class Result:
    """`check` names what was looked at (and where it is written); `fix` is printed only when the status is bad."""

    status: str  # ok, note (works in part, nothing to fix), skipped (not checked: why), missing or wrong
    check: str
    detail: str = ""
    fix: str = ""

    def __str__(self) -> str:
        text = f"{self.status:7} {self.check}" + (f": {self.detail}" if self.detail else "")
        return text + (f" (fix: {self.fix})" if self.fix and self.status != "ok" else "")

    @property
    def bad(self) -> bool:
        return self.status not in ("ok", "note", "skipped")
