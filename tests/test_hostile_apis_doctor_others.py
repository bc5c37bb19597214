"""doctor against a hostile Alertmanager and Grafana (tests/fakes/hostile_api.py), every mode: one failed check
each, naming the endpoint, exit 1, no traceback (the stated bounds: tests/test_hostile_apis.py)."""

from __future__ import annotations

import pytest
from fakes.hostile_api import MODES, hostile_server
from hostile_cli import limits, run_main


@pytest.mark.parametrize("mode", MODES)
def test_doctor_reports_a_broken_alertmanager_and_grafana(mode, capsys, monkeypatch):
    with hostile_server(mode, lambda path: False) as prom, hostile_server(mode) as bad:
        code, out, err = run_main(
            capsys, monkeypatch, "doctor", "--prometheus", prom, "--alertmanager", bad, "--grafana", bad, *limits()
        )
    assert code == 1 and "Traceback" not in err, (mode, out, err)
    assert any(line.startswith(f"missing Alertmanager: {bad}/api/v2/status: ") for line in out.splitlines()), out
    grafana = f"missing Grafana: {bad}/api/search: " if mode != "empty_list" else "missing Grafana dashboards: "
    assert any(line.startswith(grafana) for line in out.splitlines()), out  # [] is a Grafana with none
