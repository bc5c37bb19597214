"""On the same series, our alerts for Sloth's anchor objectives fire no later than Sloth's own generated rules.

Both rule sets are loaded into one promtool test. The minute Sloth first fires
comes from its window arithmetic (the same exact counts as our oracle) and is
proven by promtool itself: Sloth's alert is firing then and was not a minute
before, while ours is already firing.
"""

from __future__ import annotations

import shutil
import subprocess
from fractions import Fraction

import pytest
import yaml
from conftest import FIXTURES, need

from inferwatch.slo import compile_spec, import_file, parse_spec, render_files, tier_math
from inferwatch.slo._oracle import Counts
from inferwatch.slo._series import Segment, input_series, per_minute
from inferwatch.yamlio import dump_yaml

SLOTH = FIXTURES / "anchors" / "sloth"
HEALTHY = 365  # minutes: Sloth's 6h windows are full before the incident
RATE = Fraction(1000)  # events a minute

# Sloth's two alerts per SLO: severity -> window pairs (short, long, factor), from its 30d catalog
SLOTH_TIERS = {
    "page": [(5, 60, Fraction("14.4")), (30, 360, Fraction(6))],
    "ticket": [(120, 1440, Fraction(3)), (360, 4320, Fraction(1))],
}


def _group_names(text: str) -> list[str]:
    return [g["name"] for g in yaml.safe_load(text)["groups"]]


def _sloth_alert_names(gen_file) -> dict[str, str]:
    """{slo name: alert name} from Sloth's generated rules."""
    names = {}
    for group in yaml.safe_load(gen_file.read_text())["groups"]:
        for rule in group["rules"]:
            if "alert" in rule:
                names[rule["expr"].split('sloth_slo="')[1].split('"')[0]] = rule["alert"]
    return names


def _first_firing(counts: Counts, tiers, budget: Fraction, start: int) -> int:
    for t in range(start, counts.minutes + 1):
        for short, long, factor in tiers:
            ratios = [counts.error_ratio(t, w * 60) for w in (short, long)]
            if None not in ratios and min(ratios) > factor * budget:
                return t
    raise AssertionError("Sloth never fires in this scenario")


SCENARIOS = {
    # severity: (incident segments after HEALTHY minutes of clean traffic)
    "page": [Segment(40, RATE, RATE)],  # total outage
    "ticket": [Segment(420, RATE, RATE * Fraction(5, 2) / 1000)],  # a 2.5x burn of a 99.9% budget
}


@pytest.mark.promtool
@pytest.mark.parametrize("anchor", ["getting-started", "kubernetes-apiserver"])
@pytest.mark.parametrize("severity", ["page", "ticket"])
def test_we_fire_no_later_than_sloth(anchor, severity, tmp_path):
    need("promtool")
    spec_file, gen_file = SLOTH / f"{anchor}.spec.yml", SLOTH / f"{anchor}.gen.yml"
    imported = import_file(spec_file)
    spec = parse_spec(imported.specs[0], str(spec_file))
    ruleset = compile_spec(spec)
    files, _ = render_files(ruleset, tests=False)
    for name, text in files.items():
        if name.endswith(".rules.yaml"):
            (tmp_path / name).write_text(text)
    shutil.copy(gen_file, tmp_path / "sloth.rules.yaml")
    sloth_names = _sloth_alert_names(gen_file)

    series, checks = [], []
    ours_severity = "critical" if severity == "page" else "warning"
    for objective in spec.objectives:
        budget = objective.budget
        segments = [Segment(HEALTHY, RATE)] + [
            Segment(s.minutes, s.total, s.bad * (budget / Fraction(1, 1000)) if severity == "ticket" else s.bad)
            for s in SCENARIOS[severity]
        ]
        counts = Counts(*per_minute(segments))
        sloth_at = _first_firing(counts, SLOTH_TIERS[severity], budget, HEALTHY)
        ours = [m for m in (tier_math(spec, objective, t) for t in spec.tiers) if m.tier.severity == ours_severity]
        ours_at = next(t for t in range(HEALTHY, counts.minutes + 1) if counts.firing(ours, t))
        assert ours_at <= sloth_at, (objective.name, ours_at, sloth_at)
        series += input_series(spec, objective, segments)
        sloth_alert = (
            f'ALERTS{{alertname="{sloth_names[objective.name]}", sloth_severity="{severity}", alertstate="firing"}}'
        )
        our_alert = (
            f'ALERTS{{alertname="LLMErrorBudgetBurn", slo="{objective.name}", '
            f'severity="{ours_severity}", alertstate="firing"}}'
        )
        checks += [
            {"expr": f"group({sloth_alert})", "eval_time": f"{sloth_at - 1}m", "exp_samples": []},
            {
                "expr": f"group({sloth_alert})",
                "eval_time": f"{sloth_at}m",
                "exp_samples": [{"labels": "{}", "value": 1}],
            },
            {"expr": f"group({our_alert})", "eval_time": f"{sloth_at}m", "exp_samples": [{"labels": "{}", "value": 1}]},
        ]
    rule_files = sorted(n for n in files if n.endswith(".rules.yaml")) + ["sloth.rules.yaml"]
    # Sloth records and alerts in separate groups: evaluate them in its most favourable order (records
    # first), else promtool's unordered groups could make Sloth a minute late by chance
    order = [g for n in rule_files for g in _group_names((tmp_path / n).read_text())]
    (tmp_path / "compare.test.yaml").write_text(
        dump_yaml(
            {
                "rule_files": rule_files,
                "evaluation_interval": "1m",
                "group_eval_order": order,
                "tests": [
                    {
                        "name": f"{anchor}: {severity}",
                        "interval": "1m",
                        "input_series": series,
                        "promql_expr_test": checks,
                    }
                ],
            }
        )
    )
    proc = subprocess.run(
        ["promtool", "test", "rules", "compare.test.yaml"], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
