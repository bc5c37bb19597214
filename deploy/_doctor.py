"""`inferwatch doctor`: monitor the monitor."""

from __future__ import annotations

from inferwatch.errors import InferwatchError

__all__ = ["run_checks"]


def run_checks(*args):
    raise InferwatchError("doctor: not implemented yet")
