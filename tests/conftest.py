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


def _scope(item) -> str:
    """xdist's unit of work under --dist loadgroup: the item's xdist_group, else the item alone."""
    names = sorted(
        {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")}
    )
    return "_".join(names) if names else item.nodeid


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


def pytest_collection_modifyitems(config, items):
    """Order the work units for xdist's workers (each unit is a whole xdist_group or one test); xdist keeps this
    order because pyproject's addopts turn its own reordering off (`--no-loadscope-reorder`: it would sort the
    units by their number of tests, putting every one-test slow run behind all the grouped modules).

    The suite is CPU-bound on two cores, except for the slow end-to-end runs, which mostly wait on real
    processes (the demo, the multicluster run: ~105 s each at a few CPU seconds). Half the workers start with
    them; the other half start with the single tests that run promtool (marked promtool), the CPU-bound part of
    the suite, largest first (the slow property test, ~45 CPU seconds in two promtool processes), so both cores
    are busy from the start. (The largest groups used to start there: their fixtures wait on Prometheus scrapes
    while the slow runs wait too, leaving a core idle; collected last, the promtool tests ran four at once on two
    cores at the end.)
    xdist queues one more unit behind every worker at once, so right behind each slow run comes one of the last
    single tests collected (quick pure-Python ones: a group would wait there for the slow run). Then the groups,
    largest first, and the other single tests: small units at the end keep the workers finishing together.
    """
    _deselect_real_engine(config, items)
    workers = getattr(config, "workerinput", {}).get("workercount", 0)
    units: dict[str, list] = {}
    for item in items:
        units.setdefault(_scope(item), []).append(item)
    waiting, heavy, groups, singles = [], [], [], []
    for unit in units.values():
        promtool = len(unit) == 1 and unit[0].get_closest_marker("promtool") is not None
        if any(i.get_closest_marker("slow") for i in unit) and promtool:
            heavy.insert(0, unit)  # a slow test that computes rather than waits: the first of them
        elif any(i.get_closest_marker("slow") for i in unit):
            waiting.append(unit)
        elif len(unit) > 1:
            groups.append(unit)
        else:
            (heavy if promtool else singles).append(unit)
    groups.sort(key=len, reverse=True)
    first = min(len(waiting), max(1, workers // 2))
    start = max(0, workers - first)
    fillers = singles[len(singles) - first :]
    order = (
        waiting[:first]
        + heavy[:start]
        + fillers
        + waiting[first:]
        + heavy[start:]
        + groups
        + singles[: len(singles) - first]
    )
    items[:] = [item for unit in order for item in unit]
