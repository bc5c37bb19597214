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


# the one shared engine of the session, or why there is none. Each test module that imports the fixture below
# gets a session-scoped fixture of its own from pytest (one per module it is found in): without this, every such
# module started an engine of its own (~3 GB and up to minutes each).
_SHARED: dict[str, str] = {}


@pytest.fixture(scope="session")
def engine_url(request) -> str:
    """The URL of a real vLLM serving `tiny-llama` (or the model of --engine-url)."""
    given = request.config.getoption("--engine-url")
    if given:
        return given.rstrip("/").removesuffix("/v1")
    if not _SHARED:
        engine = Engine(SHARED_FLAGS)
        try:
            engine.start()
            _SHARED["url"] = engine.url
        except EngineUnavailable as err:
            _SHARED["unavailable"] = str(err)
        request.config.add_cleanup(engine.stop)         # once, at the end of the session
    if "unavailable" in _SHARED:
        pytest.skip(f"real vLLM unavailable: {_SHARED['unavailable']}")
    return _SHARED["url"]


@pytest.fixture
def shared_flags(request) -> tuple[str, ...]:
    """The flags the shared engine was started with; a test that relies on them is skipped against --engine-url,
    whose flags are unknown."""
    if request.config.getoption("--engine-url"):
        pytest.skip("relies on the shared engine's flags (" + " ".join(SHARED_FLAGS) + "); --engine-url names "
                    "an engine started with its own")
    return SHARED_FLAGS
