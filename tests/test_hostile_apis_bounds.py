"""triage, canary and doctor against a hostile Prometheus, each in a fresh process, for the modes that stress time
and memory: a command ends within its --timeout (a hang would run into the subprocess's 100 s limit, below the
fake's 120 s stall) and its peak RSS stays under MEMORY_MB whatever the answer (the stated bounds:
tests/test_hostile_apis.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from fakes.hostile_api import hostile_server
from hostile_cli import NOT_BUILDINFO

CMD_TIMEOUT = 5.0  # --timeout of the commands run in a fresh process: generous, the outcome is what counts
MEMORY_MB = 512  # peak RSS of one command (the interpreter, pandas and numpy take ~100 MB of it)


# ---- time and memory: the commands, each in a fresh process ----------------------------------------------------
_PEAK = (
    "import atexit, runpy, sys; "  # VmHWM: this process's own peak (ru_maxrss counts the forking parent's)
    "atexit.register(lambda: sys.stderr.write('PEAK_KB %s\\n' % [l.split()[1] for l in "
    "open('/proc/self/status') if l.startswith('VmHWM:')][0])); "
    "sys.argv = ['inferwatch'] + sys.argv[1:]; runpy.run_module('inferwatch', run_name='__main__')"
)


def _command(*argv: str) -> tuple[subprocess.CompletedProcess, float]:
    done = subprocess.run(
        [sys.executable, "-c", _PEAK, *argv], capture_output=True, text=True, timeout=100
    )  # below the fake's 120 s stall: a hang fails here
    peak = [line for line in done.stderr.splitlines() if line.startswith("PEAK_KB ")]
    assert peak, done.stderr
    return done, int(peak[-1].split()[1]) / 1024


@pytest.mark.parametrize("mode", ["gzip_bomb", "huge_body", "trickle_body", "silent", "deep_json", "metric_null"])
@pytest.mark.parametrize("command", ["triage", "doctor", "canary"])
def test_commands_are_bounded_in_time_and_memory(command, mode):
    """Default --max-bytes: the 1 GiB bomb and the endless body stop at the cap."""
    args = {
        "triage": ("--since", "10m"),
        "doctor": ("--no-alertmanager",),
        "canary": ("--model", "m", "--canary", 'version="v2"', "--stable", 'version="v1"'),
    }[command]
    with hostile_server(mode, NOT_BUILDINFO if command == "doctor" else (lambda path: True)) as url:
        done, peak_mb = _command(command, "--prometheus", url, "--timeout", str(CMD_TIMEOUT), *args)
    assert done.returncode == (2 if command == "canary" else 1) and "Traceback" not in done.stderr, done
    assert url in (done.stdout if command == "doctor" else done.stderr), done
    assert peak_mb < MEMORY_MB, (mode, peak_mb)


@pytest.mark.parametrize("mode", ["gzip_bomb", "huge_body", "trickle_body"])
def test_triage_range_queries_read_at_once_share_the_cap(mode):
    """Eight range queries at once, each answered by a bomb: together they stay under --max-bytes (default), and
    the first failure cancels the queries not yet sent (a failed future's traceback no longer holds its body)."""
    with hostile_server(mode, lambda path: path == "/api/v1/query_range") as url:
        done, peak_mb = _command("triage", "--prometheus", url, "--timeout", str(CMD_TIMEOUT), "--since", "10m")
    assert done.returncode == 1 and done.stderr.startswith(f"error: {url}/api/v1/query_range: "), done
    assert peak_mb < MEMORY_MB, (mode, peak_mb)
