"""Shared fixtures: where the real captures and our own expositions live, and the loaded mappings."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from inferwatch.mappings import load_catalog, load_mappings

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"  # everything the tests read; SOURCES.md says where each file came from
REAL_CAPTURES = FIXTURES / "real-captures"
EXPOSITIONS = FIXTURES / "expositions"
GOLDEN = ROOT / "tests" / "golden"
UPDATE_GOLDEN = os.environ.get("INFERWATCH_UPDATE_GOLDEN") == "1"

# Go's garbage collector, for every promtool, Prometheus and Alertmanager the tests start (they inherit this
# environment): promtool's rule tests are CPU-bound and were the largest part of the suite's CPU (~170 of ~400 s);
# collecting at 5x the live heap instead of 2x cuts their CPU by about a quarter for ~130 MB instead of ~70 MB
# each, and one P keeps idle-priority GC workers from taking the second core while all four xdist workers compete
# for two. The same programs, the same results; a value set outside the tests wins.
os.environ.setdefault("GOGC", "400")
os.environ.setdefault("GOMAXPROCS", "1")


def check_golden(path: Path, text: str) -> None:
    """Compare `text` with a golden file byte for byte; INFERWATCH_UPDATE_GOLDEN=1 rewrites it."""
    if UPDATE_GOLDEN:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert text == path.read_text(), f"{path} differs (INFERWATCH_UPDATE_GOLDEN=1 rewrites it)"


def all_expositions() -> list[Path]:
    """Every exposition the tests normalize: the real captures, then ours per release."""
    return sorted(REAL_CAPTURES.glob("*.txt")) + sorted(EXPOSITIONS.glob("*.txt"))


@pytest.fixture(scope="session")
def catalog():
    return load_catalog()


@pytest.fixture(scope="session")
def mappings(catalog):
    return load_mappings(catalog=catalog)


def need(tool: str) -> str:
    """Path of a required tool; the suite fails (not skips) without it, since CI installs it."""
    path = shutil.which(tool)
    if path is None:
        pytest.fail(f"{tool} not found: install Debian's prometheus package (apt-get install -y prometheus)")
    return path


def pytest_addoption(parser):
    group = parser.getgroup("inferwatch")
    group.addoption(
        "--real-engine",
        action="store_true",
        help="also run the tests marked real_engine, on a real vLLM CPU engine (installed once into a "
        "cached venv: tests/real_engine/harness.py)",
    )
    group.addoption(
        "--real-demo",
        action="store_true",
        help="with --real-engine, also run `inferwatch demo --engine vllm-real` (test_real_demo.py: .ci/run's "
        "step of its own); minutes",
    )
    group.addoption(
        "--engine-url",
        metavar="URL",
        help="run the real_engine tests against this running vLLM (a GPU one, say) instead of starting "
        "one; tests that need their own engine flags are skipped",
    )


def _deselect_real_engine(config, items) -> None:
    """The real-engine tests run only when asked for (--real-engine or --engine-url): .ci/run's second step; the
    real demo only with --real-demo as well."""
    wanted = config.getoption("--real-engine") or config.getoption("--engine-url")
    dropped = [
        item
        for item in items
        if item.get_closest_marker("real_engine")
        and not wanted
        or item.get_closest_marker("real_demo")
        and not config.getoption("--real-demo")
    ]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        gone = set(map(id, dropped))
        items[:] = [item for item in items if id(item) not in gone]


# Each test file is one unit of work for xdist's workers (`--dist loadfile` in pyproject's addopts), so a module
# fixture (a real Prometheus, a whole render) starts once, on one worker. The workers take the files in the order
# given here (`--no-loadscope-reorder`: xdist would sort them by their number of tests): the longest first, by
# the seconds each took in a recorded run (tests/durations.txt), files not recorded yet before them, so the
# workers finish together. The table only orders; a stale one makes the suite a little slower, never wrong.
# INFERWATCH_RECORD_DURATIONS=1 rewrites it from the run (the files it ran; the others keep their seconds).
DURATIONS = ROOT / "tests" / "durations.txt"
RECORD_DURATIONS = os.environ.get("INFERWATCH_RECORD_DURATIONS") == "1"


def _unit(nodeid: str, slow: bool) -> str:
    """A file's part in one of the two runs: the fast suite, or the tests marked slow (`-m slow`)."""
    return ("slow " if slow else "fast ") + nodeid.split("::", 1)[0]


def read_durations(path: Path = DURATIONS) -> dict[str, float]:
    """`SECONDS fast|slow FILE` lines (# comments) as {"fast FILE": seconds}."""
    table = {}
    for line in path.read_text().splitlines() if path.exists() else ():
        if line.strip() and not line.startswith("#"):
            seconds, unit = line.split(None, 1)
            table[unit.strip()] = float(seconds)
    return table


def pytest_collection_modifyitems(config, items):
    _deselect_real_engine(config, items)
    recorded = read_durations()
    unknown = max(recorded.values(), default=0.0) + 1.0
    items.sort(key=lambda item: -recorded.get(_unit(item.nodeid, item.get_closest_marker("slow") is not None), unknown))
    if RECORD_DURATIONS:  # the report says which run a test is in (its keywords would also match an id "slow")
        for item in items:
            if item.get_closest_marker("slow"):
                item.user_properties.append(("inferwatch_run", "slow"))


_spent: dict[str, float] = {}


def pytest_runtest_logreport(report):
    """Each file's seconds (setup, call and teardown of its tests), on the process that runs the session (with
    xdist, the controller, from every worker's reports)."""
    if RECORD_DURATIONS:
        unit = _unit(report.nodeid, ("inferwatch_run", "slow") in map(tuple, report.user_properties))
        _spent[unit] = _spent.get(unit, 0.0) + report.duration


def pytest_sessionfinish(session):
    if not RECORD_DURATIONS or hasattr(session.config, "workerinput") or not _spent:
        return
    table = {unit: s for unit, s in {**read_durations(), **_spent}.items() if (ROOT / unit.split(" ", 1)[1]).exists()}
    lines = [f"{seconds:8.1f} {unit}" for unit, seconds in sorted(table.items(), key=lambda kv: (-kv[1], kv[0]))]
    header = [
        "# Seconds each test file took (setup, call, teardown) in a recorded run, the fast suite's tests and the",
        "# slow ones apart; tests/conftest.py hands the files to the xdist workers longest first. Rewritten by",
        "# INFERWATCH_RECORD_DURATIONS=1 python -m pytest (and -m slow): only the files that ran change.",
    ]
    DURATIONS.write_text("\n".join(header + lines) + "\n")
