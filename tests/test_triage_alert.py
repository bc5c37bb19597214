"""`inferwatch triage --alert NAME`: from the alert that paged to the verdict in one command. Two generated
incidents (tests/incident_library.py) in a real Prometheus beside the `ALERTS_FOR_STATE` series a rule would
have written for them: the alert's newest activation sets the window, its labels the model."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml
from incident_library import INCIDENT, T0, case_series, library
from triage_tools import NEEDS_PROMETHEUS, series_of, series_prometheus

from inferwatch.triage._window import iso

pytestmark = NEEDS_PROMETHEUS

CASES = {c.cls + ":" + "/".join(c.expect): c for c in library(0)}
QUEUE, DECODE = CASES["kind:queueing"], CASES["kind:slow-decode"]
ACTIVE = {QUEUE.model: T0 + 240, DECODE.model: T0 + 60}  # when each alert went active


def _alert_series(model: str, since: float) -> dict:
    at = [int(t * 1000) for t in range(int(since), INCIDENT[1] + 1, 30)]
    return series_of(
        {
            "__name__": "ALERTS_FOR_STATE",
            "alertname": "LLMSlow",
            "model": model,
            "namespace": "llm",
            "severity": "page",
        },
        at,
        [f"{since:.0f}"] * len(at),
    )


@pytest.fixture(scope="module")
def base():
    series = [s for case in (QUEUE, DECODE) for s in case_series(case)]
    series += [_alert_series(model, at) for model, at in ACTIVE.items()]
    with tempfile.TemporaryDirectory(prefix="triage-alert-") as tmp:
        with series_prometheus(series, Path(tmp)) as url:
            yield url


def _triage(base: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "inferwatch",
            "triage",
            "--prometheus",
            base,
            "--end",
            str(INCIDENT[1]),
            "--json",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_newest_alert_sets_the_window_and_the_model(base):
    done = _triage(base, "--alert", "LLMSlow")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert [m["model"] for m in report["models"]] == [QUEUE.model]
    assert report["models"][0]["kinds"][0]["kind"] == "queueing"
    assert report["start"] == iso(ACTIVE[QUEUE.model] - 300)  # five minutes before it went active
    assert report["end"] == iso(INCIDENT[1])


def test_a_label_matcher_picks_one_alert_of_several(base):
    done = _triage(base, "--alert", "LLMSlow", "--alert-match", f"model={DECODE.model}")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert [m["model"] for m in report["models"]] == [DECODE.model]
    assert report["models"][0]["kinds"][0]["kind"] == "slow-decode"


def test_an_alert_that_never_fired_is_one_clear_error(base):
    done = _triage(base, "--alert", "LLMNoSuchAlert")
    assert done.returncode == 1
    assert 'no alert {alertname="LLMNoSuchAlert"} was active' in done.stderr
    assert "Traceback" not in done.stderr


# --- the command an alert's annotation carries, pasted as it is -------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent
COMMAND = re.compile(r"`(inferwatch triage [^`]*)`")
PASTED = 30  # the incident ends this many seconds before the test runs: `--end` is now, as when pasted


def _rule(path: str, alert: str, **labels) -> dict:
    """The first alerting rule named `alert` in a shipped rule file whose labels include `labels`."""
    groups = yaml.safe_load((ROOT / path).read_text())["groups"]
    return next(
        r
        for g in groups
        for r in g["rules"]
        if r.get("alert") == alert and labels.items() <= r.get("labels", {}).items()
    )


def _render(text: str, labels: dict, url: str) -> str:
    """The template as Prometheus renders it: `$labels.x` and `$externalURL` are its only actions here."""
    text = re.sub(r"\{\{\s*\$externalURL\s*\}\}", url, text)
    return re.sub(r"\{\{\s*\$labels\.(\w+)\s*\}\}", lambda m: labels.get(m[1], ""), text)


# (rule file, alert, the rule's labels that pick it, the labels its expression gives the alert)
PAGES = {
    "slo-page": (
        "alerts/llm.responsive.rules.yaml",
        "LLMErrorBudgetBurn",
        {"tier": "page_fast"},
        {"model": QUEUE.model},
    ),
    "queue-saturated": ("alerts/operational.rules.yaml", "LLMQueueSaturated", {}, None),
}


@pytest.fixture(scope="module")
def now_base():
    """A Prometheus holding the queueing incident moved to end just now, with the `ALERTS_FOR_STATE` of each
    alert in PAGES as its rule would have written them (active from T0 + 240 s, moved the same)."""
    now = time.time()
    by = int(now - PASTED - INCIDENT[1])
    series = case_series(QUEUE)
    # one replica's labels, as the normalizing exporter gives them (`model`, whichever names the case has)
    engine = next(s["labels"] for s in series if s["labels"]["__name__"].endswith("requests_running"))
    engine = {**{k: v for k, v in engine.items() if k not in ("__name__", "model_name")}, "model": QUEUE.model}
    active = T0 + 240
    alerts = {}
    for name, (path, alert, picks, own) in PAGES.items():
        rule = _rule(path, alert, **picks)
        own = own or engine
        labels = {**own, **{k: _render(str(v), own, "") for k, v in rule.get("labels", {}).items()}}
        at = [int(t * 1000) for t in range(active, INCIDENT[1] + 1, 30)]
        # its value is the time the alert went active: moved with the samples
        series.append(
            series_of({"__name__": "ALERTS_FOR_STATE", "alertname": alert, **labels}, at, [f"{active + by}"] * len(at))
        )
        alerts[name] = (rule, labels)
    series = [dict(s, t=[s["t"][0] + by * 1000] + s["t"][1:]) for s in series if s["t"]]
    with tempfile.TemporaryDirectory(prefix="triage-pasted-") as tmp:
        with series_prometheus(series, Path(tmp)) as url:
            yield url, alerts, by


def _kinds(report: dict) -> list[tuple[str, list[str]]]:
    return [(m["model"], [k["kind"] for k in m["kinds"] if k["confidence"] >= 0.5]) for m in report["models"]]


@pytest.mark.parametrize("page", sorted(PAGES))
def test_the_annotations_command_pasted_gives_the_alerts_verdict(now_base, page):
    """The command in the alert's description, rendered as Prometheus renders it and run as a shell would split
    it (no --end: now), names the same kinds for the same model as `triage --alert NAME` does."""
    url, alerts, by = now_base
    rule, labels = alerts[page]
    found = COMMAND.search(" ".join(rule["annotations"]["description"].split()))
    assert found, rule["annotations"]["description"]
    argv = shlex.split(_render(found[1], labels, url))
    assert argv[:2] == ["inferwatch", "triage"] and "--since" not in argv
    # a deadline for a shared CI machine's load, not for speed (tests/bench_triage.py measures that)
    pasted = subprocess.run(
        [sys.executable, "-m", *argv, "--json", "--timeout", "240"], capture_output=True, text=True, timeout=600
    )
    assert pasted.returncode == 0, pasted.stderr
    plain = subprocess.run(
        [sys.executable, "-m", "inferwatch", "triage", "--prometheus", url, "--alert", rule["alert"], "--json"]
        + ["--timeout", "240"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert plain.returncode == 0, plain.stderr
    got, want = json.loads(pasted.stdout), json.loads(plain.stdout)
    assert _kinds(got) == _kinds(want) == [(QUEUE.model, _kinds(want)[0][1])]
    assert _kinds(got)[0][1][:1] == ["queueing"], json.dumps(got, indent=1)[:6000]
    assert got["start"] == iso(T0 + 240 - 300 + by)  # five minutes before the alert went active
