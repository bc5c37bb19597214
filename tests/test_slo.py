"""The SLO compiler: arithmetic, rule shape, golden output, and the generated promtool tests run for real."""

from __future__ import annotations

import re
from fractions import Fraction

import pytest
import yaml
from conftest import GOLDEN, ROOT, check_golden, need

from inferwatch.durations import format_duration, parse_duration
from inferwatch.slo import (
    check_rule_files,
    compile_spec,
    explain,
    load_spec,
    parse_spec,
    render_files,
    run_rule_tests,
    tier_math,
)
from inferwatch.slo._burn import decimal
from inferwatch.slo._rules import window_name
from inferwatch.slo._selector import le_matcher, le_spellings

EXAMPLES = sorted((ROOT / "slo" / "examples").glob("*.yaml"))
CHAT = ROOT / "slo" / "examples" / "chat.yaml"
DEFAULTS = ROOT / "slo" / "defaults.yaml"


def spec_with(**changes):
    doc = yaml.safe_load(CHAT.read_text())
    doc.update(changes)
    return parse_spec(doc, "chat.yaml")


# --- arithmetic --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "window, factors",
    [
        ("30d", ["14.4", "6", "3", "1"]),  # the Workbook's table for 30 days
        ("28d", ["13.44", "5.6", "2.8", "0.933333"]),  # Sloth's google-28d catalog
        ("7d", ["3.36", "1.4", "0.7", "0.233333"]),
    ],
)
def test_burn_factors_follow_the_window(window, factors):
    spec = spec_with(window=window)
    objective = spec.objectives[0]
    assert [decimal(tier_math(spec, objective, t).factor) for t in spec.tiers] == factors


def test_thresholds_are_clean_decimals_and_min_events_follow_the_target():
    spec = spec_with()
    responsive, fast, answered = spec.objectives
    page = spec.tiers[0]
    assert decimal(tier_math(spec, responsive, page).threshold) == "0.1344"
    assert decimal(tier_math(spec, answered, page).threshold) == "0.0672"
    # with min_events in the long window one bad request cannot exceed the threshold; with one event fewer it could
    for objective in spec.objectives:
        for tier in spec.tiers:
            m = tier_math(spec, objective, tier)
            assert Fraction(1, m.min_events) <= m.threshold
            assert m.min_events == 1 or Fraction(1, m.min_events - 1) > m.threshold


def test_detection_and_reset_match_the_workbook():
    """99.9% over 30 days, 1h at 14.4x: a total outage is detected in 52 s (Workbook ch. 5)."""
    spec = spec_with(window="30d", objectives=[{"name": "a", "sli": "answered", "target": "99.9%"}])
    m = tier_math(spec, spec.objectives[0], spec.tiers[0])
    assert m.detection(Fraction(1)) == Fraction("51.84")
    assert m.detection(Fraction(15, 100)) == Fraction("345.6")  # 5.76 minutes at 15% errors
    assert m.detection(Fraction(1, 1000) * 10) is None  # a 10x burn never reaches 14.4x
    assert m.reset() == 300 * (1 - Fraction("0.0144"))


def test_tier_that_cannot_fire_is_left_out_with_a_warning():
    spec = spec_with(objectives=[{"name": "loose", "sli": "tpot", "threshold": "100ms", "target": "90%"}])
    ruleset = compile_spec(spec)
    tiers = [r["labels"]["tier"] for g in ruleset.groups for r in g["rules"] if r.get("alert") == "LLMErrorBudgetBurn"]
    assert tiers == ["page_slow", "ticket_fast", "ticket_slow"]
    assert "page_fast left out" in ruleset.warnings[0]


@pytest.mark.parametrize(
    "value, spellings",
    [
        ("1", ["1", "1.0"]),
        ("0.1", ["0.1"]),
        ("2560", ["2560", "2560.0"]),
        ("0.00001", ["1e-05"]),
        ("1000000", ["1e+06", "1000000.0"]),
    ],
)
def test_le_matches_every_spelling(value, spellings):
    assert le_spellings(Fraction(value)) == spellings
    assert le_matcher(Fraction(1)).render() == 'le=~"1|1[.]0"'


@pytest.mark.parametrize(
    "text, seconds, back",
    [
        ("28d", 2419200, "4w"),
        ("1h30m", 5400, "1h30m"),
        ("100ms", Fraction(1, 10), "100ms"),
        (2.5, Fraction(5, 2), "2s500ms"),
    ],
)
def test_durations_round_trip(text, seconds, back):
    assert parse_duration(text) == seconds
    assert format_duration(seconds) == back


@pytest.mark.parametrize(
    "text, message",
    [
        ("0s", "'0s' is not more than zero: give a duration such as 5ms"),
        ("soon", "'soon' is not a duration such as 5ms"),
    ],
)
def test_a_bad_duration_says_why(text, message):
    with pytest.raises(ValueError, match=message):
        parse_duration(text)


def test_window_names():
    assert [window_name(parse_duration(w)) for w in ("5m", "1h", "1d", "28d", "90d")] == [
        "5m",
        "1h",
        "1d",
        "28d",
        "90d",
    ]


# --- the rules ---------------------------------------------------------------------------------------------


def _write(folder, files: dict[str, str]) -> None:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)


def _rules(spec):
    return [r for g in compile_spec(spec).groups for r in g["rules"]]


def test_windows_sum_per_minute_counts_and_scan_raw_counters_only_while_the_recording_is_short():
    """Every tier window is one error ratio: the recorded per-minute counts summed where they reach back 90% of
    the window, else the raw counters (inline up to 6h; longer windows every 10 minutes in the long group, and
    only `unless` covered). Never a mean of ratios, never a raw scan of the SLO window."""
    ruleset = compile_spec(spec_with())
    for group in ruleset.groups:
        long = group["name"].endswith("-long")
        assert group["interval"] == ("10m" if long else "1m")
        for rule in group["rules"]:
            expr = rule["expr"]
            assert "avg_over_time" not in expr and "[28d]" not in expr and "[4w]" not in expr
            raw_ranges = {parse_duration(r) for r in re.findall(r"increase\([a-z_]+\{[^}]*\}\[([0-9a-z]+)\]\)", expr)}
            if rule.get("record", "").startswith("llm_slo:error_ratio:"):
                window = parse_duration(rule["record"].rpartition(":")[2])
                span = format_duration(window - 30)
                assert 'sum_over_time(llm_slo:good:increase1m{service="chat", slo=' in expr
                assert f"[{span}]" in expr and f"offset {format_duration(window * Fraction(9, 10))}" in expr
                assert raw_ranges == ({window} if window <= 6 * 3600 else set()), rule["record"]
            elif rule.get("record", "").startswith("llm_slo:error_ratio_raw:"):
                window = parse_duration(rule["record"].rpartition(":")[2])
                assert long and window > 6 * 3600 and raw_ranges == {window}
                assert "unless on () llm_slo:total:increase1m" in expr
            elif rule.get("alert") == "LLMErrorBudgetBurn" and rule["labels"]["severity"] == "critical":
                # a page reads its windows' raw counters itself while the counts do not cover them
                windows = {parse_duration(rule["labels"][k]) for k in ("long_window", "short_window")}
                assert raw_ranges <= {60} | windows and len(windows) == 2, rule["labels"]["tier"]
            elif not long:
                assert raw_ranges <= {60}, rule.get("record") or rule["alert"]
    records = [r["record"] for g in ruleset.groups for r in g["rules"] if "record" in r]
    assert not [r for r in records if "burn_rate" in r or ":increase" in r and not r.endswith("increase1m")]


def test_recorded_series_per_group_fit_sloths_budget():
    """Issue 15's fleet: 100 models, three objectives, a 30d window. Per objective and group at most 11 series
    exist at a time (an uncovered window's raw fallback stands in for its recorded ratio, never beside it); the
    objective's constants are recorded once, not per group; in all no more than Sloth's 3,312."""
    spec = parse_spec(
        {
            "service": "llm",
            "window": "30d",
            "group_by": ["model"],
            "objectives": [
                {"name": "responsive", "sli": "ttft", "threshold": "1s", "target": "99.9%"},
                {"name": "fast-enough", "sli": "tpot", "threshold": "100ms", "target": "99%"},
                {"name": "answered", "sli": "answered", "target": "99.5%"},
            ],
        },
        "fleet.yaml",
    )
    total = 0
    for group in compile_spec(spec).groups:
        for rule in group["rules"]:
            if "record" not in rule:
                continue
            if rule["expr"].startswith("vector("):
                total += 1  # a constant: one series per objective
            elif not rule["record"].startswith("llm_slo:error_ratio_raw:"):
                total += 100
    per_group = (total - 5) // 300
    assert per_group <= 11 and total <= 3312, (per_group, total)
    assert total == 3005


def test_zero_traffic_guard_and_event_weighting():
    rules = _rules(spec_with())
    ratios = {
        r["record"].rsplit(":", 1)[1]: r["expr"] for r in rules if r.get("record", "").startswith("llm_slo:error_ratio")
    }
    assert ratios["1h"].startswith("clamp(1 - sum_over_time(llm_slo:good:increase1m")
    # a short window (6h is both): no events, no ratio (never NaN), in the recorded and the raw path
    assert ratios["5m"].count(" > 0)") == 2 and ratios["6h"].count(" > 0)") == 2
    # a window that is only ever a long one carries its tiers' min_events guard itself, recorded and raw
    alerts = {r["labels"]["tier"]: r["expr"] for r in rules if r.get("alert") == "LLMErrorBudgetBurn"}
    # (page tiers sum their windows' ratios from the counts inline, guard included: no guard line of their own)
    guard_line = re.compile(r"\nand (on \([^)]*\) \()?sum_over_time\(llm_slo:total")
    for window, tier in (("1h", "page_fast"), ("1d", "ticket_fast"), ("3d", "ticket_slow")):
        assert " > 0)" not in ratios[window] and ">= " in ratios[window]
        assert not guard_line.search(alerts[tier])
    assert "[59m] offset 30s)) >= 15)" in alerts["page_fast"]
    assert guard_line.search(alerts["page_slow"])


def test_alert_labels_and_annotations():
    alerts = [r for r in _rules(spec_with()) if r.get("alert") == "LLMErrorBudgetBurn"]
    assert len(alerts) == 12
    for alert in alerts:
        assert set(alert["labels"]) >= {"service", "slo", "tier", "severity", "long_window", "short_window"}
        assert alert["labels"]["severity"] == ("critical" if alert["labels"]["tier"].startswith("page") else "warning")
        assert set(alert["annotations"]) == {"summary", "description", "runbook_url"}
        assert "for" not in alert
    missing = [r for r in _rules(spec_with()) if r.get("alert") == "LLMSLIDataMissing"]
    assert len(missing) == 3 and all(m["labels"]["severity"] == "critical" for m in missing)


def test_custom_labels_annotations_and_runbook_base():
    rules = _rules(load_spec(ROOT / "slo" / "examples" / "grouped-custom.yaml"))
    alert = next(r for r in rules if r.get("alert") == "LLMErrorBudgetBurn" and r["labels"]["slo"] == "no-5xx")
    assert alert["labels"]["team"] == "ml-platform" and alert["labels"]["page_team"] == "serving"
    assert alert["annotations"]["runbook_url"] == "https://runbooks.example.com/inference/LLMErrorBudgetBurn"
    total = next(r for r in rules if r.get("record") == "llm_slo:total:increase1m")
    assert "sum by (model, namespace)" in total["expr"]


def test_inhibit_rules_silence_slower_tiers_of_the_same_objective():
    inhibit = compile_spec(load_spec(DEFAULTS)).inhibit_rules
    assert [r["source_matchers"][-1] for r in inhibit] == ['tier="page_fast"', 'tier="page_slow"', 'tier="ticket_fast"']
    assert inhibit[0]["target_matchers"][-1] == 'tier=~"page_slow|ticket_fast|ticket_slow"'
    assert all(r["equal"] == ["service", "slo", "model"] for r in inhibit)


@pytest.mark.promtool
@pytest.mark.parametrize("spec_file", EXAMPLES + [DEFAULTS], ids=lambda p: p.name)
def test_rules_are_valid_and_portable(spec_file, tmp_path):
    need("promtool")
    for fmt in ("prometheus", "prometheus-operator"):
        files, _ = render_files(compile_spec(load_spec(spec_file)), fmt, tests=False)
        for text in files.values():
            doc = yaml.safe_load(text)
            groups = doc["spec"]["groups"] if fmt == "prometheus-operator" and "spec" in doc else doc.get("groups", [])
            for group in groups:
                assert set(group) <= {"name", "interval", "rules"}, "no labels, query_offset or partial_response"
    files, _ = render_files(compile_spec(load_spec(spec_file)), tests=False)
    paths = []
    for name, text in files.items():
        if name.endswith(".rules.yaml"):
            paths.append(tmp_path / name)
            paths[-1].write_text(text)
    ok, output = check_rule_files(paths)
    assert ok, output


def test_golden_output_of_the_example_spec():
    """The issue's example spec: every generated file and the explain table, byte for byte."""
    spec = load_spec(CHAT)
    files, warnings = render_files(compile_spec(spec))
    assert not warnings
    for name, text in files.items():
        check_golden(GOLDEN / "slo" / name, text)
    check_golden(GOLDEN / "slo" / "chat.explain.txt", explain(spec))
    golden = sorted(str(p.relative_to(GOLDEN / "slo")) for p in (GOLDEN / "slo").rglob("*") if p.is_file())
    assert golden == sorted([*files, "chat.explain.txt"])


@pytest.mark.promtool
@pytest.mark.parametrize("spec_file", EXAMPLES, ids=lambda p: p.name)
def test_generated_promtool_tests_pass(spec_file, tmp_path):
    """Outage, slow burn, half budget, zero and low traffic, missing data, le spellings: for every objective."""
    need("promtool")
    files, warnings = render_files(compile_spec(load_spec(spec_file)))
    assert not warnings
    _write(tmp_path, files)
    tests = sorted(tmp_path.glob("tests/*.test.yaml"))
    assert len(tests) == len(load_spec(spec_file).objectives)
    ok, output = run_rule_tests(tests)
    assert ok, output


FRESH = re.compile(r" and \(time\(\) - timestamp\([^)]*\) < 90\)\)")
# each mutation of chat.yaml's responsive rules, and the generated test case that must catch it (only that case
# runs: the whole file for each of six mutations took over two minutes of the suite)
MUTATIONS = [
    (lambda good: good.replace("> 0.1344", "> 0.2"), "total outage fires page_fast"),
    (lambda good: good.replace('le=~"1|1[.]0"', 'le="1"'), "are all counted, each minute once"),
    (lambda good: good.replace("[59m30s]", "[1h]"), "are all counted, each minute once"),
    (lambda good: FRESH.sub(")", good), "end without a staleness marker"),
    (
        lambda good: good.replace(" and (time() - timestamp(", " and on () (time() - timestamp("),
        "of two engines one ends",
    ),
    (
        lambda good: re.sub(r"\((llm_slo:error_ratio:1d\{[^}]*\}) or last_over_time\([^)]*\)\)", r"\1", good),
        "opens a ticket but does not page",
    ),
    # no history guard: the first ten minutes of a deployment stand for days, and the tickets open with the page
    (
        lambda good: re.sub(
            r"\n *and on \([^)]*\) group by \([^)]*\) \(last_over_time\(.*\] offset [0-9hms]+\)\)", "", good
        ),
        "are all counted, each minute once",
    ),
]


@pytest.mark.promtool
def test_generated_tests_catch_a_broken_rule(tmp_path):
    """Mutation check: a wrong threshold, a single le spelling, a 1h window of 61 minutes, a 5m-rate fallback
    that outlives its series (phantom requests after an engine dies; or kept alive by any fresh series, `on ()`),
    or a ticket tier that ignores its window's raw fallback makes the generated tests fail."""
    need("promtool")
    _write(tmp_path, render_files(compile_spec(load_spec(CHAT)))[0])
    rules = tmp_path / "chat.responsive.rules.yaml"
    good = rules.read_text()
    assert len(FRESH.findall(good)) == good.count("[5m]) * 60") >= 2  # every 5m-rate fallback, and only there
    generated = yaml.safe_load((tmp_path / "tests" / "chat.responsive.test.yaml").read_text())
    only = tmp_path / "tests" / "one-case.test.yaml"
    for mutate, case in MUTATIONS:
        chosen = [t for t in generated["tests"] if case in t["name"]]
        assert len(chosen) == 1, case
        only.write_text(yaml.safe_dump({**generated, "tests": chosen}))
        rules.write_text(good)
        assert run_rule_tests([only])[0], f"{case}: fails on the right rules"
        broken = mutate(good)
        assert broken != good
        rules.write_text(broken)
        assert not run_rule_tests([only])[0], f"{case}: passes on broken rules"


# --- user text in templates, and specs that must compile ------------------------------------------------------

TRICKY = {
    "service": "chat",
    "window": "7d",
    "group_by": ["job"],
    "runbook_url": "https://x/{{query`up`}}",
    "selector": {"model": 'a\\"b {{ query `up` }}'},
    "labels": {"team": "{{ $labels.job }} {{"},
    "alerting": {"min_bad_events": 1_000_000, "missing_data_for": "30m"},
    "objectives": [
        {"name": "answered", "sli": "answered", "target": "99.9999%"},
        {
            "name": "loose",
            "sli": "ttft",
            "threshold": "1s",
            "target": "0.001%",
            "labels": {"page": "{{"},
            "annotations": {"dashboard": "https://g/{{ $labels.job }}"},
        },
    ],
}
ALLOWED_ACTION = re.compile(r'\{\{ "\{\{" \}\}|\{\{ \$labels\.[a-zA-Z_][a-zA-Z0-9_]* \}\}|\{\{ \$externalURL \}\}')


def test_prometheus_operator_names_are_kubernetes_names():
    spec = parse_spec({**TRICKY, "service": "chat_v2"}, "tricky.yaml")
    files, _ = render_files(compile_spec(spec), "prometheus-operator")
    manifest = yaml.safe_load(files["chat_v2.prometheusrule.yaml"])
    assert manifest["metadata"]["name"] == "inferwatch-slo-chat-v2"


def test_burn_alerts_carry_the_triage_command_that_picks_them():
    """`inferwatch triage --alert` with a matcher for each label that tells this alert from the others (service,
    objective, tier and the group's labels), the Prometheus that evaluated it, and no window of its own (issue 28:
    `--since 6h` spanned time before the model existed); tests/test_triage_alert.py runs it pasted. A spec whose
    selector fixes the model (the example's) names it with --model: its alerts carry no model label."""
    for spec, model in ((ROOT / "slo" / "defaults.yaml", "--alert-match 'model={{ $labels.model }}'"), (CHAT, "")):
        for rule in _rules(load_spec(spec)):
            if rule.get("alert") != "LLMErrorBudgetBurn":
                continue
            labels = rule["labels"]
            picks = f"--alert-match service={labels['service']} --alert-match slo={labels['slo']} "
            picks += f"--alert-match tier={labels['tier']} " + (model or "--model llama-3-70b")
            command = f"`inferwatch triage --prometheus {{{{ $externalURL }}}} --alert LLMErrorBudgetBurn {picks}`"
            assert command in rule["annotations"]["description"]


def test_user_text_never_runs_as_a_template():
    """Selector values, labels and runbook URLs print themselves: the only actions left are $labels (ours and the
    user's annotations), $externalURL (the triage command's Prometheus) and literal braces, so {{ query `up` }}
    can never run when an alert renders."""
    rules = _rules(parse_spec(TRICKY, "tricky.yaml"))
    texts = [v for r in rules if "alert" in r for v in (*r["labels"].values(), *r["annotations"].values())]
    assert any("query" in t for t in texts)
    for text in texts:
        assert "{{" not in ALLOWED_ACTION.sub("", text), text
    missing = next(r for r in rules if r.get("alert") == "LLMSLIDataMissing" and r["labels"]["slo"] == "answered")
    assert missing["labels"]["team"] == '{{ "{{" }} $labels.job }} {{ "{{" }}'
    assert missing["annotations"]["runbook_url"] == 'https://x/{{ "{{" }}query`up`}}/LLMSLIDataMissing'


@pytest.mark.promtool
def test_the_issues_cases_compile_and_pass_their_own_tests(tmp_path):
    """group_by job, a quote and braces in a selector value, templates in labels and URLs, a huge min_bad_events,
    a target of 99.9999% and one so low that only one tier can fire, missing data after 30m."""
    need("promtool")
    files, warnings = render_files(compile_spec(parse_spec(TRICKY, "tricky.yaml")))
    assert all("left out" in w for w in warnings), warnings
    _write(tmp_path, files)
    ok, output = check_rule_files(sorted(tmp_path.glob("*.rules.yaml")))
    assert ok, output
    tests = sorted(tmp_path.glob("tests/*.test.yaml"))
    assert len(tests) == 2
    ok, output = run_rule_tests(tests)
    assert ok, output


# --- label templates in annotations ---------------------------------------------------------------------------

TEMPLATED = {
    "service": "web",
    "window": "28d",
    "engines": [],
    "group_by": ["model"],
    "labels": {"team": "infra {{"},
    "objectives": [
        {
            "name": "errors",
            "sli": "ratio",
            "target": "99%",
            "total": 'http_requests_total{namespace="prod", job="api"}',
            "bad": 'http_requests_total{namespace="prod", job="api", code=~"5.."}',
            "annotations": {
                "dashboard": "https://g/d?ns={{$labels.namespace}}&model={{ $labels.model }}"
                "&tier={{ $labels.tier }}&team={{ $labels.team }}&svc={{ $labels.service }}"
                "&alert={{ $labels.alertname }}&pod={{ $labels.pod }}"
            },
        }
    ],
}


@pytest.mark.promtool
def test_annotation_templates_render_every_label_the_alert_has(tmp_path):
    """Prometheus renders `$labels` from the alert expression's labels only (group_by; a page reading its windows
    from the raw counters carries no service or slo): a label the rule sets (service, tier, the user's team,
    alertname) or one the SLI's selectors fix (namespace="prod", as Pyrra puts it on its alerts) is written out;
    one the alerts never carry (pod) renders empty and is warned of by name. promtool renders the alerts for real:
    an outage's pages, a slow burn's tickets and every missing-data case see these exact URLs."""
    need("promtool")
    spec = parse_spec(TEMPLATED, "templated.yaml")
    files, warnings = render_files(compile_spec(spec))
    assert warnings == [
        "templated.yaml: errors: annotations.dashboard: {{ $labels.pod }} renders empty: the alerts "
        'carry no pod label; select one pod with pod="..." in the SLI\'s selectors, or add it to '
        "group_by for an SLO per pod"
    ]
    _write(tmp_path, files)
    test_file = tmp_path / "tests" / "web.errors.test.yaml"
    doc = yaml.safe_load(test_file.read_text())
    # an outage (pages), a slow burn (ticket tiers) and the missing-data cases: a few s of promtool, not the file's 12
    cases = [
        c
        for c in doc["tests"]
        if "total outage fires page_fast" in c["name"]
        or "opens a ticket" in c["name"]
        or "fire LLMSLIDataMissing" in c["name"]
        or "fires LLMSLIDataMissing" in c["name"]
    ]
    assert len(cases) == 6
    test_file.write_text(yaml.safe_dump({**doc, "tests": cases}))
    url = "https://g/d?ns=prod&model={}&tier={}&team=infra {{{{&svc=web&alert={}&pod="
    rendered = {
        (c["alertname"], a["exp_labels"].get("model", ""), a["exp_labels"].get("tier", "")): a["exp_annotations"][
            "dashboard"
        ]
        for case in cases
        for c in case["alert_rule_test"]
        for a in c["exp_alerts"]
    }
    assert {k[0] for k in rendered} == {"LLMErrorBudgetBurn", "LLMSLIDataMissing"}
    assert {k[2] for k in rendered} >= {"page_fast", "ticket_fast"}
    assert ("LLMSLIDataMissing", "", "") in rendered  # no series at all: no group is known
    for (alert, model, tier), dashboard in rendered.items():
        assert dashboard == url.format(model, tier, alert)
    ok, output = run_rule_tests([test_file])
    assert ok, output
