"""In-process runs of the CLI against tests/fakes/hostile_api.py, shared by the tests/test_hostile_apis*.py files
(split so that xdist's --dist loadfile spreads their waits, on deadlines that trickling and silent servers run
into, over its workers)."""

from __future__ import annotations

import sys

import pytest

TIMEOUT = 2.0  # --timeout given to the commands run in-process
MAX_BYTES = 4 << 20  # --max-bytes in the in-process matrix, so a huge answer is refused quickly
NOT_BUILDINFO = lambda path: path != "/api/v1/status/buildinfo"  # noqa: E731 - doctor gets past its first call


def run_main(capsys, monkeypatch, *argv: str) -> tuple[int, str, str]:
    """inferwatch.cli.main with `argv`: its exit code, stdout and stderr."""
    from inferwatch.cli import main

    monkeypatch.setattr(sys, "argv", ["inferwatch", *argv])
    with pytest.raises(SystemExit) as done:
        main()
    out, err = capsys.readouterr()
    return done.value.code, out, err


def limits(*extra: str) -> tuple[str, ...]:
    return ("--timeout", str(TIMEOUT), "--max-bytes", str(MAX_BYTES), *extra)
