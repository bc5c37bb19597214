"""Serve an aiohttp app until SIGINT or SIGTERM, with uvloop where installed; a failed bind is one clear error.

The soft limit on open files is raised to the hard one first: a proxy holds two
sockets per stream, and a soft limit of 1,024 (common) would refuse the 500th.
What was allocated until then (modules, the app) is frozen out of the garbage
collector's sight: a full collection then walks the objects of requests only,
not 50,000 of startup (about 30 ms, a pause every stream in flight would feel).
"""

from __future__ import annotations

import asyncio
import errno
import gc
import logging
import resource
import signal

import prometheus_client
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from inferwatch.errors import InferwatchError

__all__ = ["serve_app", "raise_open_files_limit", "HTTP_LOG"]

log = logging.getLogger("inferwatch.frontdoor")


class _ClientMistakes(logging.Filter):
    """aiohttp logs a client's malformed HTTP (a header line over 8,190 bytes, too many headers, a bad chunk size),
    which it answers 400 itself, at ERROR with a traceback: any client could fill the log with them. Here each is
    one WARNING line that names the mistake, without the bytes aiohttp quotes (they may hold a header's value)."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            record.levelno, record.levelname, record.exc_info, record.exc_text = logging.WARNING, "WARNING", None, None
            record.msg, record.args = (
                "%s (%s %d): the client got a %d",
                (record.getMessage(), type(exc).__name__, exc.code, exc.code),
            )
        return True


HTTP_LOG = logging.getLogger("inferwatch.frontdoor.http")  # the servers' own logger, in place of aiohttp.server
HTTP_LOG.addFilter(_ClientMistakes())
_LISTEN_ERRORS = {
    errno.EADDRINUSE: "the port is already in use by another process",
    errno.EADDRNOTAVAIL: "the address is not one of this host's",
    errno.EACCES: "permission denied (ports below 1024 need privileges)",
}


def raise_open_files_limit(most: int = 1 << 16) -> int:
    """Raise the soft RLIMIT_NOFILE toward the hard one (at most `most` when the hard one is unlimited); the
    soft limit in force after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = most if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
        except (ValueError, OSError):
            log.warning("cannot raise the open-files limit above %d", soft)
    return soft


def serve_app(
    app: web.Application, host: str, port: int, started: str, handler_cancellation: bool = False, starter=None
) -> None:
    """Bind, log `started % (host, port)`, serve until a signal, then clean up. `starter()`, when given, binds
    instead and returns the runner; an OSError it raises may name its listener (`err.listener`: flag, address)."""

    async def bound() -> web.AppRunner:
        runner = web.AppRunner(app, access_log=None, handler_cancellation=handler_cancellation, logger=HTTP_LOG)
        await runner.setup()
        try:
            await web.TCPSite(runner, host, port).start()
        except OSError:
            await runner.cleanup()
            raise
        return runner

    async def main():
        try:
            runner = await (starter or bound)()
        except OSError as err:
            flag, where = getattr(err, "listener", ("--listen", f"{host}:{port}"))
            reason = _LISTEN_ERRORS.get(err.errno, err.strerror or str(err))
            raise InferwatchError(
                f"{flag} {where}: cannot listen: {reason}; choose another with {flag} HOST:PORT"
            ) from None
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(sig, stop.set)
        log.info(started + " (%s, %d open files at most)", host, port, loop_name, files)
        try:
            await stop.wait()
        finally:
            await runner.cleanup()

    files = raise_open_files_limit()
    # no `x_created` series beside each counter and histogram: nothing reads them, and they double a counter's
    # series (process-wide, which this process is: the front door or the prober, nothing else)
    prometheus_client.disable_created_metrics()
    gc.collect()
    gc.freeze()
    try:
        import uvloop  # where installed: less CPU per chunk (tests/bench_frontdoor.py)
    except ImportError:
        loop_name = "asyncio"
        asyncio.run(main())
    else:
        loop_name = "uvloop"
        uvloop.run(main())
