"""The normalizing exporter against targets that behave as real networks do: raw loopback servers and checks.

`RawTargets` answers each path with a coroutine that writes bytes to the socket
itself, so a test can cut a body inside a value, pause between pieces, drop the
connection or stream 200 MB without holding it. `running_exporter` serves a
NormalizingExporter in the same event loop; `promtool_problems` and
`client_parse` read what it serves the way Prometheus and prometheus_client do.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import subprocess
from contextlib import asynccontextmanager

import aiohttp
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from inferwatch.exporters import ExporterConfig, Normalizer, NormalizingExporter, Target, split_families

CRLF = b"\r\n"


def head(length: int | None = None, extra: tuple[str, ...] = ()) -> bytes:
    lines = ["HTTP/1.1 200 OK", "Content-Type: text/plain; version=0.0.4", "Connection: close", *extra]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def static(body: bytes, *, pieces: int = 1, pause: float = 0.0, length: bool = True, extra=()):
    """A route sending `body` in `pieces` cut at even offsets (inside values), `pause` seconds apart."""

    async def route(writer: asyncio.StreamWriter) -> None:
        writer.write(head(len(body) if length else None, extra))
        step = max(1, -(-len(body) // pieces))
        for i in range(0, len(body), step):
            if i and pause:
                await writer.drain()
                await asyncio.sleep(pause)
            writer.write(body[i : i + step])
        await writer.drain()

    return route


def chunked(body: bytes, *, pieces: int = 3, pause: float = 0.05, finish: bool = True):
    """Transfer-Encoding: chunked in `pieces`; without `finish` the last chunk never comes."""

    async def route(writer: asyncio.StreamWriter) -> None:
        writer.write(head(None, ("Transfer-Encoding: chunked",)))
        step = max(1, -(-len(body) // pieces))
        for i in range(0, len(body), step):
            part = body[i : i + step]
            writer.write(f"{len(part):x}\r\n".encode() + part + CRLF)
            await writer.drain()
            await asyncio.sleep(pause)
        if finish:
            writer.write(b"0\r\n\r\n")
        await writer.drain()

    return route


def dropped(body: bytes, at: int, *, length: bool = True, reset: bool = False):
    """Promise all of `body` (Content-Length), send `at` bytes of it, close (with `reset`: abort with a TCP RST,
    as a crashed engine or a middlebox does)."""

    async def route(writer: asyncio.StreamWriter) -> None:
        writer.write(head(len(body) if length else None) + body[:at])
        await writer.drain()
        if reset:
            await asyncio.sleep(0.05)  # the bytes leave before the RST that would discard them
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()

    return route


def endless(line: bytes, total: int, *, length: bool = True):
    """`total` bytes of `line` repeated, streamed in 1 MiB writes (never held in memory at once)."""

    async def route(writer: asyncio.StreamWriter) -> None:
        writer.write(head(total if length else None))
        block = line * (1024 * 1024 // len(line))
        sent = 0
        while sent < total:
            writer.write(block)
            sent += len(block)
            await writer.drain()

    return route


def slowloris(line: bytes, pause: float = 0.1):
    """A valid header, then one byte of body every `pause` seconds, forever."""

    async def route(writer: asyncio.StreamWriter) -> None:
        writer.write(head(10**6))
        while True:
            for byte in line:
                writer.write(bytes([byte]))
                await writer.drain()
                await asyncio.sleep(pause)

    return route


async def hang(writer: asyncio.StreamWriter) -> None:
    await asyncio.sleep(3600)


class RawTargets:
    """A loopback HTTP/1.1 server: path -> coroutine(writer) that writes the whole answer."""

    def __init__(self, routes: dict):
        self.routes = routes
        self.requests = 0
        self.server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task] = set()

    async def __aenter__(self) -> RawTargets:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0, backlog=512)
        return self

    async def __aexit__(self, *exc) -> None:
        self.server.close()
        for task in list(self._tasks):  # hanging and endless routes end with the test
            task.cancel()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}{path}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._tasks.add(task)
        try:
            request = await reader.readuntil(b"\r\n\r\n")
            self.requests += 1
            path = request.split(b" ", 2)[1].decode()
            route = self.routes.get(path)
            if route is None:
                writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            else:
                await route(writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            self._tasks.discard(task)
            writer.close()


def make_config(targets: dict[str, str], **options) -> ExporterConfig:
    return ExporterConfig(targets=tuple(Target(n, u) for n, u in targets.items()), **options)


@asynccontextmanager
async def running_exporter(config: ExporterConfig, normalizer: Normalizer):
    """The exporter served on a loopback port in this event loop; yields (base URL, exporter)."""
    exporter = NormalizingExporter(config, normalizer)
    runner = web.AppRunner(exporter.app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", exporter
    finally:
        await runner.cleanup()


async def scrape(session: aiohttp.ClientSession, base: str, timeout_header: float | None = None) -> str:
    headers = {"X-Prometheus-Scrape-Timeout-Seconds": str(timeout_header)} if timeout_header else {}
    async with session.get(base + "/metrics", headers=headers) as resp:
        assert resp.status == 200
        return await resp.text()


def health(text: str, series: str = "up") -> dict[str, str]:
    """target -> value of inferwatch_exporter_target_<series> (for last_error...: target -> kind)."""
    name = "inferwatch_exporter_target_" + series
    out = {}
    for fam in split_families(text):
        for s in fam.samples():
            if s.name == name:
                labels = dict(s.labels)
                out[labels["target"]] = labels.get("kind", s.value) if "kind" in labels else s.value
    return out


def target_samples(text: str, target: str) -> dict[tuple, str]:
    """(name, sorted labels without `target`) -> value, for one target's samples."""
    out = {}
    for fam in split_families(text):
        for s in fam.samples():
            labels = dict(s.labels)
            if labels.pop("target", None) == target and not s.name.startswith("inferwatch_exporter_"):
                out[(s.name, tuple(sorted(labels.items())))] = s.value
    return out


def expected_samples(text: str, normalizer: Normalizer) -> dict[tuple, str]:
    """What a healthy target serving `text` must be served as, exactly."""
    result = normalizer.normalize(text)
    return {
        (s.name, tuple(sorted(s.labels))): s.value for fam in split_families(result.render()) for s in fam.samples()
    }


def promtool_problems(text: str) -> str | None:
    """promtool check metrics' parse error for `text`, or None; lint findings (exit 3) are not errors."""
    proc = subprocess.run(["promtool", "check", "metrics"], input=text.encode(), capture_output=True, timeout=60)
    output = (proc.stdout + proc.stderr).decode(errors="replace")
    if proc.returncode not in (0, 3) or "error while linting" in output:
        return output.strip() or f"exit status {proc.returncode}"
    return None


def client_parse(text: str) -> int:
    """prometheus_client's parser over `text` (raises on what it cannot read); the number of samples."""
    return sum(len(f.samples) for f in text_string_to_metric_families(text))
