"""Fixtures for the real-engine tests (imported by the test modules: a second conftest.py would shadow the
suite's own `conftest` module): two vLLMs per session, each shared by the tests that need it.

Run them with `python -m pytest tests/real_engine --real-engine -n 0` (the first run installs vLLM, about three
minutes), or against an engine already running anywhere with `--engine-url http://HOST:PORT`: then the tests
that need an engine of their own flags are skipped, and those that only read it run.
"""

from __future__ import annotations

import threading

import pytest
from harness import Engine, EngineUnavailable

from inferwatch.sim._real_vllm import installed

# The shared engine: few running slots and a short waiting queue, so a handful of clients queue up and a few
# more are refused, while single requests run at once.
SHARED_FLAGS = ("--max-num-seqs", "2", "--max-num-queued-reqs", "4")
# The pressure engine: 10 KV blocks of 128 tokens, one of them vLLM's own, room for one 1024-token request
# (--max-model-len) and not four, and no prefix cache to save blocks: requests that grow preempt each other.
# The calibration's preemption and the KV-pressure incident run on it, one after the other.
PRESSURE_FLAGS = ("--max-num-seqs", "4", "--num-gpu-blocks-override", "10", "--no-enable-prefix-caching")


class _Lazy:
    """One engine of the session, started in a thread of its own at the session's first engine start (its boot,
    tens of seconds, overlaps the shared engine's and the first tests), stopped at the session's end."""

    def __init__(self, flags: tuple[str, ...]):
        self.engine, self.error, self.thread = Engine(flags), None, None

    def start(self, config) -> None:
        if self.thread is None:
            self.thread = threading.Thread(target=self._boot, daemon=True)
            self.thread.start()
            config.add_cleanup(self._stop)

    def _boot(self) -> None:
        try:
            self.engine.start(log=lambda *_: None)
        except EngineUnavailable as err:
            self.error = str(err)

    def _stop(self) -> None:
        self.thread.join()
        self.engine.stop()

    def url(self) -> str:
        self.thread.join()
        if self.error:
            pytest.skip(f"real vLLM unavailable: {self.error}")
        return self.engine.url


# the session's engines, or why there is none. Each test module that imports the fixtures below gets a
# session-scoped fixture of its own from pytest (one per module it is found in): without this, every such module
# started an engine of its own (~3 GB and up to minutes each).
_SHARED: dict[str, str] = {}
_PRESSURE = _Lazy(PRESSURE_FLAGS)


def _wants_pressure(session) -> bool:
    return any("pressure_url" in getattr(item, "fixturenames", ()) for item in session.items)


@pytest.fixture(scope="session")
def engine_url(request) -> str:
    """The URL of a real vLLM serving `tiny-llama` (or the model of --engine-url)."""
    given = request.config.getoption("--engine-url")
    if given:
        return given.rstrip("/").removesuffix("/v1")
    if not _SHARED:
        if _wants_pressure(request.session) and installed():
            _PRESSURE.start(request.config)  # boots beside this one (not beside its install)
        engine = Engine(SHARED_FLAGS)
        try:
            engine.start()
            _SHARED["url"] = engine.url
        except EngineUnavailable as err:
            _SHARED["unavailable"] = str(err)
        request.config.add_cleanup(engine.stop)  # once, at the end of the session
    if "unavailable" in _SHARED:
        pytest.skip(f"real vLLM unavailable: {_SHARED['unavailable']}")
    return _SHARED["url"]


@pytest.fixture(scope="session")
def pressure_url(request) -> str:
    """The URL of the pressure engine (PRESSURE_FLAGS); skipped against --engine-url, whose flags are unknown."""
    if request.config.getoption("--engine-url"):
        pytest.skip("needs an engine of its own flags (" + " ".join(PRESSURE_FLAGS) + "); --engine-url names another")
    _PRESSURE.start(request.config)
    return _PRESSURE.url()


@pytest.fixture
def shared_flags(request) -> tuple[str, ...]:
    """The flags the shared engine was started with; a test that relies on them is skipped against --engine-url,
    whose flags are unknown."""
    if request.config.getoption("--engine-url"):
        pytest.skip(
            "relies on the shared engine's flags (" + " ".join(SHARED_FLAGS) + "); --engine-url names "
            "an engine started with its own"
        )
    return SHARED_FLAGS
