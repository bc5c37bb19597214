"""triage, canary and doctor against a hostile Prometheus, Alertmanager and Grafana (tests/fakes/hostile_api.py):
every broken answer ends in one line naming the endpoint and what was wrong, exit 1 (canary: 2), no traceback, no
hang, bounded memory.

Stated bounds, asserted here:
- time: one call ends within its --timeout + 2 s (measured on the client alone, whose own work is trivial; a
  command that waited on a trickle or on silence would instead run into the subprocess's 100 s limit, below the
  fake's 120 s stall);
- memory: a command's peak RSS stays under MEMORY_MB whatever the answer (before: 7.9 GB on a gzip bomb), the
  concurrent queries of triage included;
- output: one error line for triage and canary, one failed check per broken endpoint for doctor.
The broad matrix runs in-process (inferwatch.cli.main, every mode); the time and memory bounds run in a fresh
process for the modes that stress them.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from fakes import hostile_api
from fakes.hostile_api import MODES, hostile_server

from inferwatch.promapi import ApiError, Client, ClientOptions

TIMEOUT = 2.0  # --timeout given to the commands run in-process
CMD_TIMEOUT = 5.0  # --timeout of the commands run in a fresh process: generous, the outcome is what counts
MEMORY_MB = 512  # peak RSS of one command (the interpreter, pandas and numpy take ~100 MB of it)
MAX_BYTES = 4 << 20  # --max-bytes in the in-process matrix, so a huge answer is refused quickly
NOT_BUILDINFO = lambda path: path != "/api/v1/status/buildinfo"  # noqa: E731 - doctor gets past its first call


def _main(capsys, monkeypatch, *argv: str) -> tuple[int, str, str]:
    from inferwatch.cli import main

    monkeypatch.setattr(sys, "argv", ["inferwatch", *argv])
    with pytest.raises(SystemExit) as done:
        main()
    out, err = capsys.readouterr()
    return done.value.code, out, err


def _limits(*extra: str) -> tuple[str, ...]:
    return ("--timeout", str(TIMEOUT), "--max-bytes", str(MAX_BYTES), *extra)


@pytest.mark.parametrize("mode", MODES)
def test_triage_says_which_endpoint_answered_what(mode, capsys, monkeypatch):
    with hostile_server(mode) as url:
        code, out, err = _main(capsys, monkeypatch, "triage", "--prometheus", url, "--since", "10m", *_limits())
    assert code == 1, (mode, out, err)
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {url}/api/v1/query"), (mode, err)
    assert "Traceback" not in err and out == ""


@pytest.mark.parametrize("mode", MODES)
def test_canary_says_which_endpoint_answered_what(mode, capsys, monkeypatch):
    canary = ("--model", "m", "--canary", 'version="v2"', "--stable", 'version="v1"')
    with hostile_server(mode) as url:
        code, out, err = _main(capsys, monkeypatch, "canary", "--prometheus", url, *canary, *_limits())
    assert code == 2, (mode, out, err)  # 2: Prometheus cannot be used (never a verdict from a broken answer)
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {url}/api/v1/query"), (mode, err)
    assert "Traceback" not in err and out == ""


@pytest.mark.parametrize("mode", MODES)
def test_doctor_says_which_endpoint_answered_what(mode, capsys, monkeypatch):
    with hostile_server(mode) as url:
        code, out, err = _main(capsys, monkeypatch, "doctor", "--prometheus", url, "--no-alertmanager", *_limits())
    assert code == 1 and "Traceback" not in err, (mode, out, err)
    broken = [line for line in out.splitlines() if f"{url}/api/v1/" in line]
    assert broken and all(line.startswith(("missing ", "wrong ")) for line in broken), (mode, out)
    if out.startswith("missing Prometheus"):  # the first call failed: nothing else is asked
        assert out.startswith(f"missing Prometheus: {url}/api/v1/status/buildinfo: ") and len(broken) == 1


@pytest.mark.parametrize("mode", MODES)
def test_doctor_runs_every_other_check_when_one_endpoint_is_broken(mode, capsys, monkeypatch):
    with hostile_server(mode, NOT_BUILDINFO) as url:
        code, out, err = _main(capsys, monkeypatch, "doctor", "--prometheus", url, "--no-alertmanager", *_limits())
    assert code == 1 and "Traceback" not in err, (mode, out, err)
    broken = [line for line in out.splitlines() if f"{url}/api/v1/" in line]
    assert broken and all(line.startswith("wrong ") for line in broken), (mode, out)
    assert "summary" not in out and err.strip().endswith("to fix")


@pytest.mark.parametrize("mode", MODES)
def test_doctor_reports_a_broken_alertmanager_and_grafana(mode, capsys, monkeypatch):
    with hostile_server(mode, lambda path: False) as prom, hostile_server(mode) as bad:
        code, out, err = _main(
            capsys, monkeypatch, "doctor", "--prometheus", prom, "--alertmanager", bad, "--grafana", bad, *_limits()
        )
    assert code == 1 and "Traceback" not in err, (mode, out, err)
    assert any(line.startswith(f"missing Alertmanager: {bad}/api/v2/status: ") for line in out.splitlines()), out
    grafana = f"missing Grafana: {bad}/api/search: " if mode != "empty_list" else "missing Grafana dashboards: "
    assert any(line.startswith(grafana) for line in out.splitlines()), out  # [] is a Grafana with none


# ---- time: the client alone, one call -------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["trickle_body", "trickle_head", "silent"])
def test_one_call_ends_within_its_deadline(mode):
    with hostile_server(mode) as url:
        client = Client(url, ClientOptions(timeout=1.0))
        began = time.monotonic()
        with pytest.raises(ApiError, match="within the 1s deadline") as caught:
            client.query("up")
        took = time.monotonic() - began
    assert took < 1.0 + 2.0, took
    assert caught.value.endpoint == f"{url}/api/v1/query"
    with pytest.raises(ApiError, match="not asked"):  # the next call does not wait out the deadline again
        client.query("up")


def test_a_gzip_bomb_is_refused_at_the_cap_not_inflated():
    with hostile_server("gzip_bomb") as url:  # 1 GiB in 1,024 gzip members
        with pytest.raises(ApiError, match="larger than 1048576 bytes once decompressed"):
            Client(url, ClientOptions(max_bytes=1 << 20)).query("up")
    hostile_api.ANSWERS["one_member_bomb"] = (
        200,
        {"Content-Encoding": "gzip"},
        hostile_api.gzip_bomb(64 << 20, members=False),
    )
    with hostile_server("one_member_bomb") as url:  # 64 MiB in one member
        with pytest.raises(ApiError, match="larger than 1048576 bytes once decompressed"):
            Client(url, ClientOptions(max_bytes=1 << 20)).query("up")
    del hostile_api.ANSWERS["one_member_bomb"]


def test_gzip_and_deflate_answers_are_read_whole():
    """A good compressed answer, in one gzip member, several, or zlib's deflate, reads as the JSON it holds."""
    import gzip
    import zlib

    body = b'{"status": "success", "data": {"resultType": "vector", "result": []}}'
    for encoding, data in (
        ("gzip", gzip.compress(body)),
        ("gzip", gzip.compress(body[:20]) + gzip.compress(body[20:])),
        ("deflate", zlib.compress(body)),
    ):
        hostile_api.ANSWERS["good_compressed"] = (200, {"Content-Encoding": encoding}, data)
        with hostile_server("good_compressed") as url:
            assert Client(url).query("up") == []
    del hostile_api.ANSWERS["good_compressed"]


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


def test_a_proxy_without_a_host_is_refused_by_name():
    """A proxy URL with no host (`http://:3128`) is an error naming it, not a connection to this machine's port
    (http.client takes a None host as localhost)."""
    client = Client("http://prometheus.invalid:9090", ClientOptions(proxy="http://:3128", timeout=5))
    with pytest.raises(ApiError, match=r"the proxy http://:3128 has no host"):
        client.query("up")
