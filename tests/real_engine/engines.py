"""Fixtures for the real-engine tests (imported by the test modules: a second conftest.py would shadow the
suite's own `conftest` module): one vLLM per flag set, shared by the tests that need it.

Run them with `python -m pytest tests/real_engine --real-engine -n 0` (the first run installs vLLM, about three
minutes), or against an engine already running anywhere with `--engine-url http://HOST:PORT`: then the tests
that need an engine of their own flags are skipped, and those that only read it run.
"""

from __future__ import annotations

import pytest

from harness import Engine, EngineUnavailable

# One shared engine: few running slots and a short waiting queue, so a handful of clients queue up and a few
# more are refused, while single requests run at once.
SHARED_FLAGS = ("--max-num-seqs", "2", "--max-num-queued-reqs", "4")


@pytest.fixture(scope="session")
def engine_url(request) -> str:
    """The URL of a real vLLM serving `tiny-llama` (or the model of --engine-url)."""
    given = request.config.getoption("--engine-url")
    if given:
        return given.rstrip("/").removesuffix("/v1")
    engine = Engine(SHARED_FLAGS)
    try:
        engine.start()
    except EngineUnavailable as err:
        pytest.skip(f"real vLLM unavailable: {err}")
    request.addfinalizer(engine.stop)
    return engine.url


@pytest.fixture
def shared_flags(request) -> tuple[str, ...]:
    """The flags the shared engine was started with; a test that relies on them is skipped against --engine-url,
    whose flags are unknown."""
    if request.config.getoption("--engine-url"):
        pytest.skip("relies on the shared engine's flags (" + " ".join(SHARED_FLAGS) + "); --engine-url names "
                    "an engine started with its own")
    return SHARED_FLAGS
