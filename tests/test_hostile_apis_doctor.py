"""doctor against a hostile Prometheus (tests/fakes/hostile_api.py), every mode: each broken endpoint is one failed
check naming it, the other checks still run, exit 1, no traceback (the stated bounds: tests/test_hostile_apis.py)."""

from __future__ import annotations

import pytest
from fakes.hostile_api import MODES, hostile_server
from hostile_cli import NOT_BUILDINFO, limits, run_main


@pytest.mark.parametrize("mode", MODES)
def test_doctor_says_which_endpoint_answered_what(mode, capsys, monkeypatch):
    with hostile_server(mode) as url:
        code, out, err = run_main(capsys, monkeypatch, "doctor", "--prometheus", url, "--no-alertmanager", *limits())
    assert code == 1 and "Traceback" not in err, (mode, out, err)
    broken = [line for line in out.splitlines() if f"{url}/api/v1/" in line]
    assert broken and all(line.startswith(("missing ", "wrong ")) for line in broken), (mode, out)
    if out.startswith("missing Prometheus"):  # the first call failed: nothing else is asked
        assert out.startswith(f"missing Prometheus: {url}/api/v1/status/buildinfo: ") and len(broken) == 1


@pytest.mark.parametrize("mode", MODES)
def test_doctor_runs_every_other_check_when_one_endpoint_is_broken(mode, capsys, monkeypatch):
    with hostile_server(mode, NOT_BUILDINFO) as url:
        code, out, err = run_main(capsys, monkeypatch, "doctor", "--prometheus", url, "--no-alertmanager", *limits())
    assert code == 1 and "Traceback" not in err, (mode, out, err)
    broken = [line for line in out.splitlines() if f"{url}/api/v1/" in line]
    assert broken and all(line.startswith("wrong ") for line in broken), (mode, out)
    assert "summary" not in out and err.strip().endswith("to fix")
