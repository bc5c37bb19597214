"""triage, canary and doctor against a hostile Prometheus, Alertmanager and Grafana (tests/fakes/hostile_api.py):
every broken answer ends in one line naming the endpoint and what was wrong, exit 1 (canary: 2), no traceback, no
hang, bounded memory.

Stated bounds, asserted in these files:
- time: one call ends within its --timeout + 2 s (measured on the client alone, whose own work is trivial; a
  command that waited on a trickle or on silence would instead run into the subprocess's 100 s limit, below the
  fake's 120 s stall);
- memory: a command's peak RSS stays under MEMORY_MB whatever the answer (before: 7.9 GB on a gzip bomb), the
  concurrent queries of triage included;
- output: one error line for triage and canary, one failed check per broken endpoint for doctor.
The broad matrix runs in-process (inferwatch.cli.main, every mode); the time and memory bounds run in a fresh
process for the modes that stress them.

This file: triage's and canary's matrix and the client alone; doctor's matrix is in test_hostile_apis_doctor*.py,
the commands' time and memory bounds in test_hostile_apis_bounds.py (one file is one unit of xdist's loadfile).
"""

from __future__ import annotations

import time

import pytest
from fakes import hostile_api
from fakes.hostile_api import MODES, hostile_server
from hostile_cli import limits, run_main

from inferwatch.promapi import ApiError, Client, ClientOptions


@pytest.mark.parametrize("mode", MODES)
def test_triage_says_which_endpoint_answered_what(mode, capsys, monkeypatch):
    with hostile_server(mode) as url:
        code, out, err = run_main(capsys, monkeypatch, "triage", "--prometheus", url, "--since", "10m", *limits())
    assert code == 1, (mode, out, err)
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {url}/api/v1/query"), (mode, err)
    assert "Traceback" not in err and out == ""


@pytest.mark.parametrize("mode", MODES)
def test_canary_says_which_endpoint_answered_what(mode, capsys, monkeypatch):
    canary = ("--model", "m", "--canary", 'version="v2"', "--stable", 'version="v1"')
    with hostile_server(mode) as url:
        code, out, err = run_main(capsys, monkeypatch, "canary", "--prometheus", url, *canary, *limits())
    assert code == 2, (mode, out, err)  # 2: Prometheus cannot be used (never a verdict from a broken answer)
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {url}/api/v1/query"), (mode, err)
    assert "Traceback" not in err and out == ""


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


def test_a_proxy_without_a_host_is_refused_by_name():
    """A proxy URL with no host (`http://:3128`) is an error naming it, not a connection to this machine's port
    (http.client takes a None host as localhost)."""
    client = Client("http://prometheus.invalid:9090", ClientOptions(proxy="http://:3128", timeout=5))
    with pytest.raises(ApiError, match=r"the proxy http://:3128 has no host"):
        client.query("up")
