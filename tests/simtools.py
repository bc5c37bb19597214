"""Running the simulator inside a test: its aiohttp app on a loopback port, in a thread with its own loop."""

from __future__ import annotations

import asyncio
import threading
from contextlib import contextmanager

from aiohttp import web

from inferwatch.sim import EngineParams, SimulatorConfig, make_app
from inferwatch.sim._server import SIMULATOR

FAST = EngineParams(decode_step_s=0.002, prefill_tokens_per_s=1e6, output_tokens_mean=20)


@contextmanager
def serve_app(app: web.Application, port: int = 0):
    """Serve an aiohttp app on a loopback port (`port`, else a free one) in a thread with its own loop; yields its
    base URL."""
    loop = asyncio.new_event_loop()
    started, stop = threading.Event(), None
    holder: dict = {}

    def run():
        nonlocal stop
        asyncio.set_event_loop(loop)
        runner = web.AppRunner(app, access_log=None)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", port)
        loop.run_until_complete(site.start())
        holder["port"] = runner.addresses[0][1]
        stop = asyncio.Event()
        started.set()
        loop.run_until_complete(stop.wait())
        loop.run_until_complete(runner.cleanup())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    started.wait(10)
    try:
        yield f"http://127.0.0.1:{holder['port']}"
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)


@contextmanager
def simulator(
    engine: str = "vllm",
    version: str | None = None,
    scenario: str = "normal",
    params: EngineParams = FAST,
    model: str = "m",
    port: int = 0,
):
    """Yields (base URL, the simulator object) while the app serves (on `port`, else a free one)."""
    app = make_app(SimulatorConfig(engine, version, model, scenario, params, seed=1))
    with serve_app(app, port) as base:
        yield base, app[SIMULATOR]
