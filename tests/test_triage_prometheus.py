"""`inferwatch triage` against a real Prometheus serving synthetic histories (tests/bench_triage.py): one model
per kind, a quiet one, a harmless doubling and one bad replica of three; the command's output, exit codes and
errors as a user sees them."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from bench_triage import KINDS, history, history_prometheus
from triage_tools import NEEDS_PROMETHEUS

from inferwatch.errors import InferwatchError
from inferwatch.triage import Connection, Window, triage

pytestmark = NEEDS_PROMETHEUS

NOW = time.time() // 60 * 60 - 600
INCIDENT = Window(NOW - 1200, NOW)
BASELINE = f"{NOW - 3600:.0f}/{NOW - 1200:.0f}"
MODELS = {f"m-{kind}": kind for kind in KINDS}
MODELS["m-bad-replica"] = "slow-decode"
MODELS["m-lost-replica"] = "missing-data"  # one replica of two stops reporting
REPLICAS = {"m-bad-replica": (3, 1), "m-lost-replica": (2, 1)}


@pytest.fixture(scope="module")
def prom(tmp_path_factory):
    text = history(MODELS, NOW - 4800, INCIDENT.start, NOW, pods=REPLICAS)
    with history_prometheus(text, tmp_path_factory.mktemp("triage-prom")) as base:
        yield base


@pytest.fixture(scope="module")
def report(prom):
    return triage(Connection(prom), INCIDENT, BASELINE)


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "inferwatch", "triage", *args], capture_output=True, text=True, timeout=60
    )


def test_every_kind_comes_first_for_its_model(report):
    first = {v.model: [f.kind for f in v.findings] for v in report.verdicts}
    for model, kind in MODELS.items():
        if kind in ("quiet", "doubling"):
            assert first[model] == [], (model, first[model])
        else:
            assert first[model][:1] == [kind], (model, first[model])


def test_the_incident_and_baseline_are_what_was_asked(report):
    assert report.incident == INCIDENT and report.baseline == Window(NOW - 3600, NOW - 1200)
    assert report.step == 8  # 300 points over the 40-minute baseline


def test_one_bad_replica_is_its_own_finding(report):
    verdict = next(v for v in report.verdicts if v.model == "m-bad-replica")
    assert list(verdict.pods) == ["m-bad-replica-0"]
    assert [f.kind for f in verdict.pods["m-bad-replica-0"]] == ["slow-decode"]
    tpot = next(e for e in verdict.pods["m-bad-replica-0"][0].evidence if e.signal == "tpot_mean")
    assert tpot.incident / tpot.baseline > 2.5  # against the other two replicas


def test_a_replica_that_stops_reporting_is_missing_data_of_its_own(report):
    verdict = next(v for v in report.verdicts if v.model == "m-lost-replica")
    assert list(verdict.pods) == ["m-lost-replica-0"]
    first = verdict.findings[0]
    assert (first.kind, first.pod) == ("missing-data", "m-lost-replica-0")
    ttft = next(e for e in first.evidence if e.signal == "ttft_mean")  # its share of steps with data
    assert ttft.incident < 0.5 < ttft.baseline


def test_missing_data_names_the_missing_series(report):
    verdict = next(v for v in report.verdicts if v.model == "m-missing-data")
    names = {e.signal for e in verdict.findings[0].evidence}
    assert {"running", "ttft_mean", "kv_usage", "engine_series"} <= names
    assert "door_ttft_mean" not in names  # the front door kept reporting


def test_auto_baseline_falls_back_to_the_hour_before(prom):
    one = triage(Connection(prom), INCIDENT, "auto", ("m-queueing",))
    assert one.baseline == Window(INCIDENT.start - 3600, INCIDENT.start)  # no data a day earlier
    assert [f.kind for f in one.verdicts[0].findings][:1] == ["queueing"]


def test_json_and_plot_from_the_command(prom, tmp_path):
    png = tmp_path / "incident.png"
    done = run(
        "--prometheus",
        prom,
        "--start",
        f"{INCIDENT.start:.0f}",
        "--end",
        f"{INCIDENT.end:.0f}",
        "--baseline",
        BASELINE,
        "--model",
        "m-kv-pressure",
        "--model",
        "m-quiet",
        "--json",
        "--plot",
        str(png),
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert set(doc) >= {"start", "end", "baseline", "models"} and set(doc["baseline"]) == {"start", "end"}
    kinds = {m["model"]: m["kinds"] for m in doc["models"]}
    assert kinds["m-quiet"] == []
    first = kinds["m-kv-pressure"][0]
    assert first["kind"] == "kv-pressure" and 0 <= first["confidence"] <= 1 and first["explains"]
    assert [k["confidence"] for k in kinds["m-kv-pressure"]] == sorted(
        (k["confidence"] for k in kinds["m-kv-pressure"]), reverse=True
    )
    assert set(first["evidence"][0]) >= {"signal", "baseline", "incident", "change"}
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 50_000


def test_plain_text_when_piped(prom):
    done = run(
        "--prometheus",
        prom,
        "--start",
        f"{INCIDENT.start:.0f}",
        "--end",
        f"{INCIDENT.end:.0f}",
        "--baseline",
        BASELINE,
        "--model",
        "m-queueing",
        "--model",
        "m-doubling",
    )
    assert done.returncode == 0, done.stderr
    assert "\x1b[" not in done.stdout
    assert "m-queueing: queueing (1.00)" in done.stdout and "m-doubling: nothing wrong" in done.stdout
    assert "runbook: https://" in done.stdout


def test_a_model_without_series_is_exit_1_naming_the_missing_series(prom):
    done = run("--prometheus", prom, "--since", "20m", "--end", f"{NOW:.0f}", "--model", "nope")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "no series for model 'nope'" in done.stderr and "llm_requests_running" in done.stderr
    assert "m-queueing" in done.stderr  # the models it does have


@pytest.mark.parametrize(
    "args, message",
    [
        (("--prometheus", "http://127.0.0.1:1"), "http://127.0.0.1:1/api/v1/query: cannot reach Prometheus"),
        (("--start", "yesterday"), "--start 'yesterday': not a time"),
        (("--since", "10m", "--baseline", "sometimes"), "--baseline 'sometimes'"),
        (
            ("--since", "20m", "--end", f"{NOW:.0f}", "--model", "m-quiet", "--plot", "/nonexistent/x.png"),
            "--plot /nonexistent/x.png: cannot write it",
        ),
    ],
)
def test_user_errors_are_one_line_and_exit_1(prom, args, message):
    args = ("--prometheus", prom, *args) if "--prometheus" not in args else args
    done = run(*args)
    assert done.returncode == 1, done
    assert message in done.stderr and "Traceback" not in done.stderr and len(done.stderr.splitlines()) == 1


def test_a_bad_rules_file_names_file_and_field(prom, tmp_path):
    rules = tmp_path / "rules.yaml"
    rules.write_text("kinds:\n  mine:\n    when:\n      - {if: ttft_mean up >= lots}\n")
    done = run("--prometheus", prom, "--since", "10m", "--rules", str(rules))
    assert done.returncode == 1 and f"{rules}:4: kinds.mine.when[0].if:" in done.stderr


def test_no_series_at_all(tmp_path):
    with history_prometheus("# EOF\n", tmp_path) as empty:
        with pytest.raises(InferwatchError, match="no model has engine series"):
            triage(Connection(empty), INCIDENT, "1h")


def test_a_query_prometheus_cannot_run_here_leaves_its_signal_unmeasured(prom):
    from inferwatch.triage._fetch import connect, fetch_windows

    conn = Connection(prom)
    bad = "sum by (model) (llm_requests_running) * on () llm_requests_running"  # many-to-many: HTTP 422
    warnings: list[str] = []
    base, inc = fetch_windows(
        connect(conn),
        prom,
        [("running", "value", "sum by (model) (llm_requests_running)"), ("waiting", "value", bad)],
        (INCIDENT, INCIDENT),
        60.0,
        warnings,
    )
    assert set(inc["signal"]) == {"running"} and len(warnings) == 1
    assert "many-to-many" in warnings[0] or "duplicate" in warnings[0]
