"""promtools.compress_durations, which the real-engine incidents (tests/real_engine/test_real_incidents.py) run the
operational alerts through: every duration shrinks by the factor, nothing else moves, and promtool still loads
the result."""

from __future__ import annotations

import re
import subprocess

import pytest
from conftest import ROOT, need
from promtools import compress_durations


def test_every_range_subquery_offset_for_and_interval_shrinks():
    text = (
        "groups:\n- name: g\n  interval: 1m\n  rules:\n  - alert: A\n    expr: |\n"
        '      max_over_time(avg_over_time(x{le=~"1|1[.]0"}[5m])[30m:1m]) > rate(y[1d] offset 30m)\n'
        "    for: 5m\n"
    )
    assert compress_durations(text, 10) == text.replace("interval: 1m", "interval: 6s").replace(
        "[5m]", "[30s]"
    ).replace("[30m:1m]", "[180s:6s]").replace("[1d] offset 30m", "[8640s] offset 180s").replace("for: 5m", "for: 30s")
    assert compress_durations("rate(x[1h30m])\n  for: 1m\n", 7) == "rate(x[771429ms])\n  for: 8571ms\n"


@pytest.mark.promtool
def test_the_compressed_operational_alerts_load_in_promtool(tmp_path):
    source = (ROOT / "alerts" / "operational.rules.yaml").read_text()
    out = tmp_path / "operational.rules.yaml"
    out.write_text(compress_durations(source, 10))
    proc = subprocess.run([need("promtool"), "check", "rules", str(out)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # the text around the durations is untouched: the same alerts, thresholds and annotations
    strip = lambda t: re.sub(r"\[[^\]]*\]|offset \S+|for: \S+", "", t)  # noqa: E731
    assert strip(out.read_text()) == strip(source)
