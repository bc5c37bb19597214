"""Serve an aiohttp app until SIGINT or SIGTERM, with uvloop where installed; a failed bind is one clear error."""

from __future__ import annotations

import asyncio
import errno
import logging
import signal

from aiohttp import web

from inferwatch.errors import InferwatchError

__all__ = ["serve_app"]

log = logging.getLogger("inferwatch.frontdoor")
_LISTEN_ERRORS = {errno.EADDRINUSE: "the port is already in use by another process",
                  errno.EADDRNOTAVAIL: "the address is not one of this host's",
                  errno.EACCES: "permission denied (ports below 1024 need privileges)"}


def serve_app(app: web.Application, host: str, port: int, started: str, handler_cancellation: bool = False) -> None:
    """Bind, log `started % (host, port)`, serve until a signal, then clean up."""
    async def main():
        runner = web.AppRunner(app, access_log=None, handler_cancellation=handler_cancellation)
        await runner.setup()
        try:
            await web.TCPSite(runner, host, port).start()
        except OSError as err:
            await runner.cleanup()
            reason = _LISTEN_ERRORS.get(err.errno, err.strerror or str(err))
            raise InferwatchError(f"--listen {host}:{port}: cannot listen: {reason}; "
                                  "choose another with --listen HOST:PORT") from None
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(sig, stop.set)
        log.info(started, host, port)
        try:
            await stop.wait()
        finally:
            await runner.cleanup()

    try:
        import uvloop                     # where installed: less CPU per chunk (tests/bench_frontdoor.py)
    except ImportError:
        asyncio.run(main())
    else:
        uvloop.run(main())
