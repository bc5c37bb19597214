"""Property: a spec `slo check` accepts compiles to rules promtool accepts, and its own generated tests pass.

A fixed seed draws specs from tables of what users write and what fuzzing
found: quotes, backslashes and braces in values, Go template syntax in
selectors, labels and URLs, reserved and number-like label names, `le`
matchers, null and boolean values, extreme targets, counts and durations.
Each spec either fails `slo check` with `file:line: field: message` problems
(never a traceback, never the loader's bookkeeping) or passes `promtool check
rules` and every generated test case.
"""

from __future__ import annotations

import random
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest
import yaml
from conftest import need

from inferwatch.errors import SpecError
from inferwatch.slo import compile_spec, load_spec, render_files

SEED = 20261130
SPECS = 32  # about a third are accepted; each runs every generated test case, the costliest part of the suite
P_MUTATED = 0.6

# valid, including what must be escaped or matched exactly: quotes, backslashes, braces, template syntax
VALUES = [
    "llama-3-70b",
    'a\\"b',
    'say "hi"',
    "back\\slash",
    "{{query`up`}}",
    "{{",
    "a}}b",
    "$labels.model",
    "naïve ✓",
    "",
    "50%",
    "x{y}z",
    0,
]
LABEL_VALUES = [v for v in VALUES if v != ""]  # an alert label with an empty value is dropped: refused
SPEC_LABELS = ["model", "namespace", "inf"]  # the spec's selector and the objective's use different
OBJECTIVE_LABELS = ["team", "caller", "by", "offset"]  # labels: the same label twice would match nothing
GROUP_BY = ["model", "namespace", "job", "engine", "caller"]
WINDOWS = ["28d", "30d", "7d", "90d", "4w", "7.5d"]
TARGETS = ["99%", "99.5%", "95%", "90%", "50%", "0.001%", "99.9%", "99.99%", "99.9999%", 0.995]
THRESHOLDS = {
    "engine": {"ttft": ["1s", "100ms", "10s"], "tpot": ["100ms", "0.1"], "latency": ["2s", "1"]},
    "frontdoor": {"ttft": ["1s", "2s", "0.25"], "tpot": ["100ms", "40ms"], "latency": ["7s", "0.5", "1ms"]},
}
LATENCY_METRICS = [
    "llm_request_queue_time_seconds",
    'llm_request_queue_time_seconds{role="decode"}',
    'my_latency_seconds{path=~"/v1/chat|/v1/completions"}',
    'my_latency_seconds{code!="500"}',
]
RATIOS = [
    {"total": 'http_requests_total{path="/v1/chat"}', "bad": 'http_requests_total{path="/v1/chat", code=~"5.."}'},
    {"total": "jobs_total", "good": 'jobs_total{result="ok"}'},
    {"total": "jobs_total", "good": 'jobs_ok_total{queue="a\\\\\\"b{{"}'},
    {
        "total": "llm_requests_finished_total",
        "bad": ['llm_requests_finished_total{finished_reason="error"}', "llm_requests_aborted_total"],
    },
    {"total": "x_count", "good": 'x_bucket{le="1"}'},
]
DURATIONS = ["2m", "90s", "1m", "30m", "5m"]
URLS = ["https://runbooks.example.com/llm", "https://x/{{query`up`}}", "https://x/{{"]
ANNOTATIONS = ["https://g/d?var-model={{ $labels.model }}", "plain", "two\nlines {{ $labels.job }}"]

# invalid: each must be refused with a clear message (one per mutated spec)
MUTATIONS = [
    ("service", "y" * 70),
    ("service", "Chat"),
    ("service", None),
    ("objectives.0.name", "a" * 250),
    ("window", "7.00000001d"),
    ("window", "6d"),
    ("objectives.0.target", "yes"),
    ("objectives.0.target", "100%"),
    ("objectives.0.target", "99.99999%"),
    ("objectives.0.threshold", "0.0001"),
    ("selector.__name__", "x"),
    ("selector.le", "1"),
    ("selector.9lives", "x"),
    ("selector.model", None),
    ("selector.model", True),
    ("selector.model", 0.5),
    ("selector.model", "two\nlines"),
    ("group_by", ["inf"]),
    ("group_by", ["NaN"]),
    ("group_by", ["instance"]),
    ("group_by", ["target"]),
    ("group_by", ["__name__"]),
    ("group_by", ["request_id"]),
    ("group_by", [True]),
    ("group_by", ["model", "model"]),
    ("labels.__name__", "x"),
    ("labels.severity", "x"),
    ("labels.alertname", "x"),
    ("labels.team", None),
    ("labels.team", True),
    ("labels.team", ""),
    ("alerting.min_bad_events", 10**30),
    ("alerting.min_bad_events", 0),
    ("alerting.min_bad_events", "1e30"),
    ("alerting.missing_data_for", "0.0001s"),
    ("alerting.missing_data_for", "45s"),
    ("alerting.missing_data_for", "2h"),
    ("alerting.missing_data_for", True),
    ("runbook_url", "https://x/a b"),
    ("runbook_url", None),
    ("objectives.0.annotations", {"a": "{{ $value }}"}),
    ("objectives.0.annotations", {"a": "open {{"}),
    ("engines", [{"vllm": 1}]),
    ("objectives.0.description", None),
    ("objectives.0.sli", "latency"),
    ("objectives.0.metric", 'my_latency_seconds{le="5"}'),
    ("objectives.0.metric", 'my_latency_seconds{__name__="x"}'),
    ("objectives.0.metric", None),
    ("objectives.0.metric", 'x{a="b\\.c"}'),
    ("objectives.0.selector", {"le": "1"}),
    ("objectives.0.labels", {"model": "x"}),
    ("version", True),
]


def _label_map(rng: random.Random, names: list[str], n: int) -> dict:
    return {rng.choice(names): rng.choice(VALUES) for _ in range(n)}


def _objective(rng: random.Random, source: str) -> dict:
    kind = rng.choice(["ttft", "tpot", "answered", "latency", "ratio"])
    node = {"name": rng.choice(["responsive", "z" * 63, "a.b_c-1"]), "sli": kind, "target": rng.choice(TARGETS)}
    if kind in THRESHOLDS[source]:
        node["threshold"] = rng.choice(THRESHOLDS[source][kind])
    if kind == "latency":
        node["metric"] = rng.choice(LATENCY_METRICS)
    if kind == "ratio":
        node.update(rng.choice(RATIOS))
    if rng.random() < 0.3:
        node["selector"] = _label_map(rng, OBJECTIVE_LABELS, rng.randint(1, 2))
    if rng.random() < 0.3:
        node["labels"] = {"page_team": rng.choice(LABEL_VALUES)}
    if rng.random() < 0.3:
        node["annotations"] = {"dashboard": rng.choice(ANNOTATIONS)}
    if rng.random() < 0.3:
        node["runbook_url"] = rng.choice(URLS)
    return node


def _mutate(doc: dict, path: str, value) -> None:
    *parents, last = path.split(".")
    node = doc
    for key in parents:
        node = node[int(key)] if key.isdigit() else node.setdefault(key, {})
    node[last] = value


def random_spec(rng: random.Random) -> dict:
    """One spec of one objective (each objective's tests load its rules alone), mutated with P_MUTATED."""
    source = rng.choice(["engine", "engine", "frontdoor"])
    doc = {
        "service": rng.choice(["chat", "a.b_c-d", "x" * 63]),
        "window": rng.choice(WINDOWS),
        "source": source,
        "objectives": [_objective(rng, source)],
    }
    if rng.random() < 0.4:
        doc["selector"] = _label_map(rng, SPEC_LABELS, rng.randint(1, 2))
    if rng.random() < 0.4:
        doc["labels"] = {"team": rng.choice(LABEL_VALUES)}
    if rng.random() < 0.4:
        doc["group_by"] = rng.sample(GROUP_BY, rng.randint(1, 2))
    if rng.random() < 0.3:
        doc["alerting"] = {
            "min_bad_events": rng.choice([1, 5, 1000, 1_000_000]),
            "missing_data_for": rng.choice(DURATIONS),
        }
    if rng.random() < 0.3:
        doc["runbook_url"] = rng.choice(URLS)
    if rng.random() < 0.2:
        doc["engines"] = []
    if rng.random() < P_MUTATED:
        _mutate(doc, *rng.choice(MUTATIONS))
    return doc


def _checked(tmp_path):
    """[(index, spec)] of the accepted specs; asserts that the rejected ones say file:line: field: message."""
    rng = random.Random(SEED)
    accepted, rejected = [], 0
    for i in range(SPECS):
        path = tmp_path / f"spec{i}.yaml"
        path.write_text(yaml.safe_dump(random_spec(rng), sort_keys=False, allow_unicode=True))
        try:
            accepted.append((i, load_spec(path)))
        except SpecError as err:
            rejected += 1
            for problem in err.problems:
                text = str(problem)
                assert re.match(rf"{re.escape(str(path))}:\d+: [^:]+: \S", text) or problem.field == "", text
                assert "__line__" not in text and "Traceback" not in text, text
    assert accepted and rejected, (len(accepted), rejected)
    return accepted


def _promtool(*args, cwd):
    proc = subprocess.run(
        ["promtool", *args], cwd=cwd, capture_output=True, text=True, timeout=1800
    )  # a hang guard only
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.promtool
@pytest.mark.slow  # ~45 CPU seconds of promtool, a minute or more in the suite: conftest starts it first
def test_accepted_specs_pass_promtool_and_their_own_tests(tmp_path):
    need("promtool")
    out = tmp_path / "out"
    rules, tests = [], []
    for i, spec in _checked(tmp_path):
        folder = out / f"spec{i}"
        folder.mkdir(parents=True)
        files, warnings = render_files(compile_spec(spec))
        assert not [w for w in warnings if "no generated tests" in w], warnings
        for name, text in files.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(text, encoding="utf-8")
        rules += [str(folder / n) for n in files if n.endswith(".rules.yaml")]
        tests += [str(folder / n) for n in files if n.endswith(".test.yaml")]
    assert len(tests) == len(rules) >= SPECS // 4
    rc, output = _promtool("check", "rules", *rules, cwd=out)
    assert rc == 0, output
    halves = [tests[0::2], tests[1::2]]  # two promtool processes: the machine has two cores
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda files: _promtool("test", "rules", *files, cwd=out), halves))
    for rc, output in results:
        assert rc == 0, output[-6000:]
