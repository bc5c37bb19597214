"""`inferwatch capacity`: the sweep finds a simulator's knee, its interval is honest, results compare, a Ctrl-C
keeps what was measured, and the rule file loads into Prometheus.

The simulator is an Erlang loss system here: `--max-num-queued-reqs` equal to the concurrency cap refuses (503)
every request that arrives while the cap is full, so with Poisson arrivals the refused share is Erlang's B formula
of the offered load (rate x the time a request holds its slot), whatever the service times' spread. Every other
objective would hold with room (TTFT a few steps, TPOT one step against 1 s and 100 ms) on an idle machine, but a
test machine's load delays what the client sees, so the knee tests judge by the answered objective alone (an SLO
spec of their own, through --slo): the capacity at 90 % good requests is then the rate where B = 10 %, known from
how long a request holds its slot, which the test measures.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import signal
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import jsonschema
import pytest
from conftest import need
from simtools import serve_app

from inferwatch.frontdoor import default_goodput, load_goodput
from inferwatch.sim import EngineParams, LoadConfig, SimulatorConfig, make_app
from inferwatch.sim._capacity import Step, SweepConfig, next_rate, sweep
from inferwatch.sim._capacity_report import compare, load_result, result, rule_file
from inferwatch.sim._capacity_stats import estimate, rate_stats

SCHEMA = json.loads((Path(__file__).parents[1] / "sim" / "capacity-result.schema.json").read_text())
CAP = 4
LOSS = EngineParams(
    max_num_seqs=CAP,
    max_num_queued_reqs=CAP,
    decode_step_s=0.02,
    decode_batch_slope=0.0,
    spec_tokens=0,
    prefill_tokens_per_s=1e7,
    output_tokens_mean=1000,
)
TOKENS = 8  # max_tokens of every request: the simulator's answers (mean 1000) always stop at the limit


def erlang_b(servers: int, load: float) -> float:
    b = 1.0
    for n in range(1, servers + 1):
        b = load * b / (n + load * b)
    return b


def erlang_capacity(servers: int, hold_s: float, loss: float) -> float:
    """The arrival rate at which Erlang B refuses `loss` of the requests."""
    low, high = 0.0, 1000.0
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if erlang_b(servers, mid * hold_s) < loss else (low, mid)
    return low


@pytest.fixture
def loss_sim():
    app = make_app(SimulatorConfig("vllm", None, "m", "normal", LOSS, seed=1, keep_pace_s=5.0))
    with serve_app(app) as url:
        yield url


def _load(url: str) -> LoadConfig:
    return LoadConfig(
        url, model="m", prompt_tokens=8, max_tokens=TOKENS, prefix_share=0, timeout=10, response_timeout=5, seed=3
    )


def _truth(doc: dict) -> tuple[float, float]:
    """Where the simulator's knee lies: the Erlang capacity for the slot time its model gives (TOKENS decode steps:
    12.8 requests/s), and for the time the sweep's requests took end to end, weighted by each step's answered
    requests (on an idle machine about the same; a loaded test machine stretches the time slots are held, and the
    refusals with it, but also delays the client, so it bounds the knee from below)."""
    steps = [s for s in doc["steps"] if s["e2e_mean"] is not None]
    answered = [s["judged"] - s["outcomes"].get("error", 0) for s in steps]
    hold = sum(s["e2e_mean"] * n for s, n in zip(steps, answered, strict=True)) / sum(answered)
    modelled = TOKENS * LOSS.decode_step_s
    assert hold >= modelled * 0.9, hold
    return erlang_capacity(CAP, hold, 0.1), erlang_capacity(CAP, modelled, 0.1)


ANSWERED = """\
version: 1
service: capacity-test
source: frontdoor
objectives:
  - {name: answered, sli: answered, target: 99%}
"""


@pytest.fixture
def answered(tmp_path) -> Path:
    (tmp_path / "answered.yaml").write_text(ANSWERED)
    return tmp_path / "answered.yaml"


def _sweep(url: str, slo: Path, **settings) -> tuple[dict, tuple[float, float]]:
    config = SweepConfig(_load(url), **settings)
    steps: list[Step] = []
    goodput = load_goodput([slo])
    asyncio.run(sweep(config, goodput, steps, "m"))
    doc = result(config, goodput, steps, "m", 1, datetime.now(UTC), 0.0, False)
    jsonschema.validate(doc, SCHEMA)
    return doc, _truth(doc)


def test_sweep_finds_the_simulator_knee(loss_sim, answered, tmp_path):
    """The command, on short steps (the fast suite): its ramp stops in the octave of the Erlang capacity and the
    estimate is within 1.6x of where it lies; it writes the result, the plot and the rule file, and compares with an
    older result (not "lower": exit 0)."""
    old, out, png, rules = (tmp_path / n for n in ("old.json", "new.json", "knee.png", "capacity.rules.yaml"))
    old.write_text(json.dumps(_doc(1, 0.5, 1.5)))
    done = _cli(
        "capacity",
        "sweep",
        "--target",
        loss_sim,
        "--start-rate",
        "4",
        "--step-duration",
        "2s",
        "--max-steps",
        "6",
        "--repeats",
        "2",
        "--precision",
        "0.3",
        "--prompt-tokens",
        "8",
        "--max-tokens",
        str(TOKENS),
        "--prefix-share",
        "0",
        "--json-out",
        str(out),
        "--plot",
        str(png),
        "--rules",
        str(rules),
        "--compare",
        str(old),
        "--slo",
        str(answered),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    doc = load_result(out)
    truth = _truth(doc)
    jsonschema.validate(doc, SCHEMA)
    ramp = [s for s in doc["steps"] if s["phase"] == "ramp"]
    passed = max(s["rate"] for s in ramp if s["share"] >= 0.9)
    failed = min(s["rate"] for s in ramp if s["share"] < 0.9)
    assert failed == 2 * passed, ramp
    low, high = truth
    assert passed <= high * 1.6 and failed >= low / 1.6, (ramp, truth)
    assert low / 1.6 <= doc["capacity"]["requests_per_second"] <= high * 1.6, (doc["capacity"], truth)
    assert "old: 1 req/s [0.5, 1.5]" in done.stdout and "capacity: " in done.stdout.split("old:")[1]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "llm_capacity:requests_per_second_per_replica" in rules.read_text()


@pytest.mark.slow
def test_sweep_knee_with_repeats(loss_sim, answered):
    """The default method (three steps per rate, 10 % precision) on longer steps: a rate fails for certain, the
    interval meets where the knee lies, and the estimate is within a quarter of it."""
    doc, truth = _sweep(loss_sim, answered, start_rate=2, step_duration=4.0, repeats=3, precision=0.1, max_steps=18)
    cap, (low, high) = doc["capacity"], truth
    assert cap["upper"] is not None, doc["rates"]
    assert (cap["lower"] or 0) <= high * 1.1 and cap["upper"] >= low * 0.9, (cap, truth)
    assert low / 1.25 <= cap["requests_per_second"] <= high * 1.25, (cap, truth)


# --- the method, on synthetic steps: a known share curve, requests drawn per step ------------------------------


def _synthetic(seed: int, knee: float, spread: float):
    """Steps from share(rate) = 1 / (1 + exp((rate - knee) / 1.5)), with each step's share shifted at random
    (one queue per step: requests of a step are good or bad together) before its requests are drawn."""
    rng = random.Random(seed)

    async def run(rate: float, phase: str, index: int) -> Step:
        share = 1 / (1 + math.exp((rate - knee) / 1.5))
        share = min(1.0, max(0.0, share + rng.gauss(0, spread)))
        judged = max(1, int(rate * 5))
        good = sum(rng.random() < share for _ in range(judged))
        return Step(rate, phase, sent=judged, judged=judged, good=good, share=good / judged)

    return run


def test_interval_covers_the_true_capacity_in_most_sweeps():
    """Over 40 synthetic sweeps whose steps vary more than their requests would alone, the 95 % interval holds
    the true crossing in at least 90 % of them, and the sweeps stop within max_steps."""
    knee, target = 12.0, 0.9
    truth = knee + 1.5 * math.log(1 / target - 1)
    config = SweepConfig(LoadConfig("http://unused"), target=target, start_rate=1, max_steps=24)
    covered = 0
    for seed in range(40):
        steps: list[Step] = []
        asyncio.run(sweep(config, default_goodput(), steps, "m", run_step=_synthetic(seed, knee, 0.04)))
        est = estimate(rate_stats([(s.rate, s.judged, s.good) for s in steps], target), target)
        assert len(steps) <= config.max_steps
        covered += (est.lower or 0) <= truth <= (est.upper if est.upper is not None else math.inf)
    assert covered >= 36, covered


def test_ramp_goes_down_when_the_first_step_fails():
    config = SweepConfig(LoadConfig("http://unused"), start_rate=8, growth=2)
    steps = [Step(8, "ramp", judged=40, good=10, share=0.25)]
    assert next_rate(steps, config) == (4, "ramp")
    steps.append(Step(4, "ramp", judged=20, good=20, share=1.0))
    assert next_rate(steps, config) == (4, "refine")  # then the rates around the knee, repeated


def test_no_failure_within_the_limits_reports_not_reached():
    config = SweepConfig(LoadConfig("http://unused"), start_rate=1, growth=2, max_rate=4)
    steps = [Step(r, "ramp", judged=50, good=50, share=1.0) for r in (1, 2, 4)]
    assert next_rate(steps, config) is None
    doc = result(config, default_goodput(), steps, "m", 1, datetime.now(UTC), 1.0, False)
    assert doc["status"] == "not-reached" and doc["capacity"]["requests_per_second"] is None
    jsonschema.validate(doc, SCHEMA)


# --- results: schema, compare, rule file ---------------------------------------------------------------------


def _doc(capacity: float, lower: float, upper: float, **extra) -> dict:
    config = SweepConfig(LoadConfig("http://x"))
    doc = result(
        config,
        default_goodput(),
        [Step(lower, "ramp", judged=10, good=10, share=1.0)],
        "m",
        2,
        datetime(2026, 1, 1, tzinfo=UTC),
        1.0,
        False,
    )
    doc["capacity"].update(requests_per_second=capacity, lower=lower, upper=upper)
    doc["capacity"]["per_replica"].update(requests_per_second=capacity / 2, lower=lower / 2, upper=upper / 2)
    doc["status"] = "measured"
    return {**doc, **extra}


def test_compare_says_whether_the_difference_is_beyond_the_intervals():
    old = _doc(10, 8, 12)
    assert compare(old, _doc(11, 9, 13))["verdict"] == "same"
    assert compare(old, _doc(16, 13, 19))["verdict"] == "higher"
    assert compare(old, _doc(6, 5, 7.5))["verdict"] == "lower"
    assert compare(old, _doc(10, 8, 12, target=0.95))["differs"] == ["target"]


def _cli(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "inferwatch", *args], capture_output=True, text=True, timeout=120, **kw
    )


def test_compare_cli_exits_1_on_a_lower_capacity(tmp_path):
    (tmp_path / "old.json").write_text(json.dumps(_doc(10, 8, 12)))
    (tmp_path / "new.json").write_text(json.dumps(_doc(6, 5, 7.5)))
    done = _cli("capacity", "compare", str(tmp_path / "old.json"), str(tmp_path / "new.json"))
    assert done.returncode == 1 and "lower, beyond both intervals" in done.stdout, done.stdout + done.stderr
    done = _cli("capacity", "compare", str(tmp_path / "new.json"), str(tmp_path / "old.json"))
    assert done.returncode == 0 and "higher" in done.stdout
    (tmp_path / "bad.json").write_text('{"schema": "something else"}')
    done = _cli("capacity", "compare", str(tmp_path / "bad.json"), str(tmp_path / "old.json"))
    assert done.returncode == 1 and "bad.json: field schema" in done.stderr and "Traceback" not in done.stderr


def test_rule_file_loads_into_prometheus(tmp_path):
    promtool = need("promtool")
    (tmp_path / "capacity.rules.yaml").write_text(rule_file(_doc(10, 8, 12)))
    (tmp_path / "test.yaml").write_text(
        json.dumps(
            {
                "rule_files": ["capacity.rules.yaml"],
                "evaluation_interval": "1m",
                "tests": [
                    {
                        "interval": "1m",
                        "input_series": [],
                        "promql_expr_test": [
                            {
                                "expr": "llm_capacity:requests_per_second_per_replica",
                                "eval_time": "1m",
                                "exp_samples": [
                                    {"labels": 'llm_capacity:requests_per_second_per_replica{model="m"}', "value": 5}
                                ],
                            }
                        ],
                    }
                ],
            }
        )
    )
    for args in (["check", "rules", "capacity.rules.yaml"], ["test", "rules", "test.yaml"]):
        done = subprocess.run([promtool, *args], cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr


# --- the command, interrupted ----------------------------------------------------------------------------------


def test_ctrl_c_keeps_the_steps_measured_so_far(loss_sim, tmp_path):
    """SIGINT after the first step: exit 130, and the JSON, the plot and the summary hold what was measured."""
    out, png = tmp_path / "partial.json", tmp_path / "partial.png"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "inferwatch",
            "capacity",
            "sweep",
            "--target",
            loss_sim,
            "--start-rate",
            "4",
            "--step-duration",
            "1s",
            "--max-steps",
            "40",
            "--prompt-tokens",
            "8",
            "--max-tokens",
            str(TOKENS),
            "--json-out",
            str(out),
            "--plot",
            str(png),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        for line in proc.stderr:  # each finished step is one line on stderr
            if line.startswith("ramp"):
                break
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, stdout + stderr
    doc = load_result(out)
    jsonschema.validate(doc, SCHEMA)
    assert doc["interrupted"] and doc["status"] == "interrupted" and len(doc["steps"]) >= 1, (doc, stderr)
    assert "interrupted" in stdout and png.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    "args, says",
    [
        (["--slo", "slo/defaults.yaml"], "defaults.yaml: source is 'engine'"),
        (["--compare", "README.md"], "README.md: not JSON"),
        (["--max-rate", "0.5"], "is below --start-rate"),
        ([], "cannot find a model to load"),
    ],
)
def test_bad_input_is_one_clear_line(args, says):
    """A wrong SLO spec, result file or limit, or a target that is not a server: one message naming it."""
    done = _cli("capacity", "sweep", "--target", "http://127.0.0.1:9", *args, cwd=Path(__file__).parents[1])
    assert done.returncode in (1, 2) and says in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_a_step_without_requests_says_nothing_and_one_all_4xx_ends_the_sweep():
    config = SweepConfig(LoadConfig("http://unused"), start_rate=0.01, growth=2)
    assert next_rate([Step(0.01, "ramp")], config) == (0.02, "ramp")
    assert next_rate([Step(0.01, "ramp", sent=3, outcomes={"invalid_request": 3})], config) is None
