"""What the front door costs per stream: added time to first token, CPU per chunk, memory (a benchmark, not a test).

    python tests/bench_frontdoor.py                           # 1, 16, 64, 256 streams of 64 chunks, 3 repeats
    python tests/bench_frontdoor.py --streams 1,64 --repeats 5 --memory-streams 0

On loopback, against an upstream that streams vLLM-shaped chunks at a fixed pace,
the same load goes (a) direct, (b) through a bare aiohttp pass-through written
here, (c) through `inferwatch frontdoor`; and, as the floor under any Python proxy,
through `pipe`: a byte pipe with no HTTP at all (two asyncio protocols, each read
written out from its own callback). Upstream, pipe, (b) and (c) are each their own
process, and the load generator is this one, so nothing shares a loop or a GIL;
nothing is pinned. Every process runs uvloop where it is installed, as (c) does.

Pace: with `--pace stream` (the default) each stream's chunks come on its own
clock, so chunks of different streams arrive spread out (one wakeup each); with
`--pace step` every stream's chunks come together on one clock, as an engine
decoding a batch sends them (fewer wakeups, but N chunks queued at each step).

Load: N concurrent streams is a steady state, not a burst: N workers start
staggered over one stream's length and each then sends requests back to back,
so about N streams are always in flight and arrivals are spread out, as in an
engine serving traffic. The first request of each worker (the ramp) is not
measured. `--burst` sends the N requests of a round at the same instant instead
(the proxy then queues N request setups: a thundering herd, a different number).

Repeats: each repeat runs every level through every path, the paths in a
rotating order, so background load falls on all of them alike; each figure is
the median over repeats, and what (c) adds over (a) or (b) is the median of the
per-repeat differences. `box busy` is the whole machine's CPU use during the
rounds (/proc/stat: this benchmark's processes and anything else running), so
a level that saturates the machine shows it. CPU is each proxy's own, from /proc/<pid>/task/*/schedstat
(nanoseconds), over the events the clients received; it includes the per-request
work spread over the stream's chunks.
`relayed chunks/s on N core` is what each proxy passed on per second during the
rounds and the share of one core it used for it (each proxy is one event loop
on one thread). At low concurrency a proxy is idle between chunks and each chunk
pays the machine's wakeup (the pipe shows that floor); at high concurrency the
loop stays busy, and chunks/s over cores is what one core can relay.

Memory: `--memory-streams` (1000) slow streams held open at once through (b) and
(c), twice; RSS is sampled from /proc while they are in flight.

OTLP: `--otlp` adds a fifth path, `door+otlp`: the same front door with
--otlp-endpoint (the OpenTelemetry GenAI view) exporting every second to a sink
process that accepts each export; its TTFT and CPU per chunk are then shown as
ratios over the plain front door's of the same repeat, and the per-request
metering cost is measured with the view on too.

Targets (issue 11): added TTFT p50 <= 2 ms up to 64 streams; <= 100 us CPU per chunk
(>= 10k chunks/s on one core); memory bounded at 1,000 concurrent streams.
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import time

EPOCH = time.monotonic()  # the upstream's decode-step clock (--pace step)
CHUNK = {
    "id": "chatcmpl-0123456789abcdef0123456789abcdef",
    "object": "chat.completion.chunk",
    "created": 1,
    "model": "llama-3-8b",
    "choices": [{"index": 0, "delta": {"content": " token"}, "logprobs": None, "finish_reason": None}],
}
PATHS = ("direct", "pipe", "bare", "frontdoor")
DOORS = ("frontdoor", "door+otlp")  # the front door's paths: without and with the OTLP export


def _event(doc: dict) -> bytes:
    return b"data: " + json.dumps(doc, separators=(",", ":")).encode() + b"\n\n"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _loop_name() -> str:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return "asyncio"
    return "uvloop"


def _new_loop() -> asyncio.AbstractEventLoop:
    if _loop_name() == "uvloop":
        import uvloop

        return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def _run(coro):
    loop = _new_loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


def _more_files() -> None:
    """1,000 streams through a proxy are 2,000 sockets: raise the soft limit to the hard one (children inherit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


# --- the servers, each run in its own process ---------------------------------------------------------------


def run_upstream(port: int) -> None:
    """A fixed-pace engine; the request's `bench` object says how: the first chunk after `first` s, then one
    every `interval` s, `chunks` in all, then a finish chunk and [DONE]. With `step`, as an engine decoding a
    batch: the chunks after the first go out together with every other stream's, on one clock (at the first
    tick after each chunk's time); the first stays `first` after arrival, so TTFT has no clock's jitter."""
    from aiohttp import web

    content = _event(CHUNK)
    finish = _event({**CHUNK, "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}]})

    async def chat(request: web.Request) -> web.StreamResponse:
        pace = json.loads(await request.read())["bench"]
        chunks, interval, first, step = pace["chunks"], pace["interval"], pace["first"], pace.get("step")
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        began = time.monotonic()

        async def until(t: float, align: bool = True) -> None:
            if step and align:
                t = EPOCH + -(-(t - EPOCH) // interval) * interval
            await asyncio.sleep(max(0.0, t - time.monotonic()))

        await until(began + first, align=False)
        for i in range(chunks):
            await response.write(content)
            await until(began + first + (i + 1) * interval)
        await response.write(finish + b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None, backlog=4096, loop=_new_loop())


def run_pipe(port: int, upstream: str) -> None:
    """The floor under any proxy written in Python: no HTTP at all, each client connection piped byte for byte
    to its own upstream connection by two asyncio protocols (a write from inside the read callback, no task
    woken). What this costs per chunk is the wakeup, the two system calls and the loop, not any work."""
    host, upstream_port = upstream.rsplit("/", 1)[-1].rsplit(":", 1)
    loop = _new_loop()

    class Half(asyncio.Protocol):
        """One direction: what arrives here is written to `peer`; its full buffer pauses our reading."""

        def __init__(self, peer: Half | None = None):
            self.peer, self.transport, self.early = peer, None, []

        def connection_made(self, transport) -> None:
            self.transport = transport
            if self.peer is None:  # a client: open its upstream, say what it sent meanwhile
                loop.create_task(self._connect())

        async def _connect(self) -> None:
            try:
                _, self.peer = await loop.create_connection(lambda: Half(self), host, int(upstream_port))
            except OSError:
                self.transport.close()
                return
            for data in self.early:
                self.peer.transport.write(data)

        def data_received(self, data: bytes) -> None:
            if self.peer is None or self.peer.transport is None:
                self.early.append(data)
            else:
                self.peer.transport.write(data)

        def pause_writing(self) -> None:
            if self.peer and self.peer.transport:
                self.peer.transport.pause_reading()

        def resume_writing(self) -> None:
            if self.peer and self.peer.transport:
                self.peer.transport.resume_reading()

        def connection_lost(self, exc) -> None:
            if self.peer and self.peer.transport:
                self.peer.transport.close()

    loop.run_until_complete(loop.create_server(Half, "127.0.0.1", port, backlog=4096))
    loop.run_forever()


def run_otlp_sink(port: int) -> None:
    """An OTLP/HTTP endpoint that accepts every export and keeps nothing (the collector is not what is measured)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Sink(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    ThreadingHTTPServer(("127.0.0.1", port), Sink).serve_forever()


def run_bare(port: int, upstream: str) -> None:
    """The least a pass-through can do in aiohttp: forward the body, copy each read to the client."""
    from aiohttp import ClientSession, ClientTimeout, TCPConnector, web

    async def proxy(request: web.Request) -> web.StreamResponse:
        session = request.app["session"]
        body = await request.read()
        async with session.post(
            upstream + request.path, data=body, headers={"Content-Type": "application/json"}
        ) as upstream_response:
            response = web.StreamResponse(
                status=upstream_response.status, headers={"Content-Type": upstream_response.headers["Content-Type"]}
            )
            await response.prepare(request)
            async for chunk in upstream_response.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response

    async def session_ctx(app):
        app["session"] = ClientSession(connector=TCPConnector(limit=0), timeout=ClientTimeout(total=None))
        yield
        await app["session"].close()

    app = web.Application()
    app.cleanup_ctx.append(session_ctx)
    app.router.add_post("/v1/chat/completions", proxy)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None, backlog=4096, loop=_new_loop())


# --- the load generator (this process) ------------------------------------------------------------------------


def _body(chunks: int, interval: float, first: float, step: bool = False) -> bytes:
    return json.dumps(
        {
            "model": "llama-3-8b",
            "stream": True,
            "messages": [{"role": "user", "content": "hi"}],
            "bench": {"chunks": chunks, "interval": interval, "first": first, "step": step},
        }
    ).encode()


async def _stream(session, url: str, body: bytes) -> tuple[float | None, int]:
    """(seconds to the first body bytes, events received); (None, events) when the stream failed."""
    began = time.perf_counter()
    ttft, events = None, 0
    try:
        async with session.post(
            url + "/v1/chat/completions", data=body, headers={"Content-Type": "application/json"}
        ) as response:
            async for chunk in response.content.iter_any():
                if ttft is None:
                    ttft = time.perf_counter() - began
                events += chunk.count(b"\n\n")
    except Exception:  # noqa: BLE001 - a failed stream is counted, not fatal
        return None, events
    return ttft, events


async def _round(
    session, url: str, streams: int, requests: int, body: bytes, length: float, burst: bool
) -> tuple[list[float], int, int]:
    """(TTFTs measured, events received, failed streams) of `streams` workers sending `requests` each."""
    ttfts, totals = [], [0, 0]

    async def worker(i: int) -> None:
        if not burst:
            await asyncio.sleep(i * length / streams)
            ttft, events = await _stream(session, url, body)  # the ramp: not measured
            totals[0] += events
        for _ in range(requests):
            await _stream_into(session, url, body, ttfts, totals)

    if burst:
        for _ in range(requests):
            await asyncio.gather(*(_stream_into(session, url, body, ttfts, totals) for _ in range(streams)))
    else:
        await asyncio.gather(*(worker(i) for i in range(streams)))
    return ttfts, totals[0], totals[1]


async def _stream_into(session, url, body, ttfts, totals) -> None:
    ttft, events = await _stream(session, url, body)
    totals[0] += events
    if ttft is None:
        totals[1] += 1
    else:
        ttfts.append(ttft)


def _session():
    from aiohttp import ClientSession, ClientTimeout, TCPConnector

    return ClientSession(connector=TCPConnector(limit=0), timeout=ClientTimeout(total=300))


async def _levels(args, paths: dict) -> dict:
    """{(streams, repeat, path): (p50, p99, CPU seconds per event or None, failed, machine busy fraction,
    events per second relayed, cores the proxy used or None)}."""
    body = _body(args.chunks, args.interval, args.first, args.pace == "step")
    warm = _body(2, 0.001, 0.0)
    length = args.first + args.chunks * args.interval
    sessions = {path: _session() for path in paths}
    out = {}
    try:
        for repeat in range(args.repeats):
            for level, streams in enumerate(args.streams):
                turn = (repeat + level) % len(PATHS)
                for path in PATHS[turn:] + PATHS[:turn]:
                    url, pid = paths[path]
                    await asyncio.gather(*(_stream(sessions[path], url, warm) for _ in range(streams)))
                    cpu, box, began = _cpu_seconds(pid) if pid else 0.0, _machine(), time.monotonic()
                    ttfts, events, failed = await _round(
                        sessions[path], url, streams, args.requests, body, length, args.burst
                    )
                    spent, took = (_cpu_seconds(pid) - cpu) if pid else None, time.monotonic() - began
                    busy, total = (b - a for a, b in zip(box, _machine(), strict=True))
                    out[streams, repeat, path] = (
                        _pct(ttfts, 0.5),
                        _pct(ttfts, 0.99),
                        spent / events if spent is not None and events else None,
                        failed,
                        busy / total if total else float("nan"),
                        events / took,
                        spent / took if spent is not None else None,
                    )
                print(
                    f"  repeat {repeat + 1}/{args.repeats}, {streams} streams: "
                    + ", ".join(f"{p} {out[streams, repeat, p][0] * 1000:.2f}ms" for p in PATHS),
                    file=sys.stderr,
                )
    finally:
        for session in sessions.values():
            await session.close()
    return out


async def _memory(url: str, pid: int, streams: int, waves: int) -> tuple[float, list[float], int]:
    """(RSS MiB before, [peak RSS MiB while `streams` slow streams are in flight, per wave], failed streams)."""
    body = _body(40, 0.1, 0.02)  # 4 s each; all are open from 1 s to 4 s
    before, peaks, failed = _rss_mib(pid), [], 0
    async with _session() as session:
        for _ in range(waves):

            async def one(i: int) -> tuple[float | None, int]:
                await asyncio.sleep(i / streams)  # 1,000 connects spread over a second
                return await _stream(session, url, body)

            task = asyncio.gather(*(one(i) for i in range(streams)))
            peak = 0.0
            while not task.done():
                peak = max(peak, _rss_mib(pid))
                await asyncio.sleep(0.1)
            failed += sum(1 for ttft, events in task.result() if ttft is None or events < 42)
            peaks.append(peak)
    return before, peaks, failed


# --- measuring other processes --------------------------------------------------------------------------------


def _cpu_seconds(pid: int) -> float:
    """CPU time of all of a process's threads: scheduler nanoseconds, else clock ticks."""
    try:
        return sum(int(open(f).read().split()[0]) for f in glob.glob(f"/proc/{pid}/task/*/schedstat")) / 1e9
    except (OSError, ValueError, IndexError):
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _machine() -> tuple[int, int]:
    """(busy, all) clock ticks of every CPU so far, from /proc/stat: what this benchmark and anything else
    on the machine used."""
    ticks = [int(t) for t in open("/proc/stat").readline().split()[1:]]
    return sum(ticks) - ticks[3] - ticks[4], sum(ticks)


def _rss_mib(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _wait_listening(port: int, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"a server exited early: {process.args}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listens on {port}")


def _frontdoor_env() -> dict:
    return {"PYTHONPATH": os.environ["BENCH_FRONTDOOR_PATH"]} if os.environ.get("BENCH_FRONTDOOR_PATH") else {}


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def metering_cost(otlp: bool = False) -> tuple[float, float, float | None]:
    """(seconds per chunk, seconds per request, seconds per request with the OpenTelemetry view recording too or
    None) of the front door's own metering, in this process: the part a bare pass-through does not pay, measured
    without the event loop, the kernel or a shared machine's noise."""
    import timeit

    from inferwatch.frontdoor import Facts, SSESplitter, classify, observe_event, request_info, token_counts
    from inferwatch.frontdoor._caller import caller_of
    from inferwatch.frontdoor._metrics import FrontdoorMetrics

    chunk, splitter, facts = _event(CHUNK), SSESplitter(), Facts()

    def per_chunk():
        for payload in splitter.feed(chunk):
            observe_event(facts, payload, 1.0)

    body = json.dumps(
        {
            "model": "llama-3-8b",
            "stream": True,
            "messages": [{"role": "user", "content": "x" * 2000}],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
        }
    ).encode()
    metrics, headers = FrontdoorMetrics(), {"Authorization": "Bearer sk-0123456789"}

    def per_request(metrics=metrics, facts=facts):
        info, caller = request_info(body), caller_of(headers, None, "salt")
        labels = (info.model, caller, "upstream:8000")
        metrics.in_flight.labels(*labels).inc()
        metrics.in_flight.labels(*labels).dec()
        metrics.record(
            labels,
            classify(200, "complete", facts, True, info.tools),
            200,
            {"ttft": 0.1, "ttfc": 0.05, "tpot": 0.02, "duration": 1.0},
            token_counts(facts)[:3],
        )

    per_chunk_s = min(timeit.repeat(per_chunk, number=20000, repeat=3)) / 20000  # first: it fills `facts`
    request = min(timeit.repeat(per_request, number=2000, repeat=3)) / 2000
    with_otel = None
    if otlp:
        # a stream that ended well, with usage: the view records all five (duration, first token, per output
        # token, input and output tokens); into an in-memory reader, as recording does not depend on the reader
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader

        from inferwatch.frontdoor._otel import OtelView, OtlpConfig

        ended, last = (
            Facts(),
            {
                **CHUNK,
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 500, "completion_tokens": 3},
            },
        )
        for payload in SSESplitter().feed(chunk * 3 + _event(last) + b"data: [DONE]\n\n"):
            observe_event(ended, payload, 1.0)
        assert classify(200, "complete", ended, True, None) == "ok"
        viewed = FrontdoorMetrics(OtelView(OtlpConfig(None), reader=InMemoryMetricReader()))
        request = min(timeit.repeat(lambda: per_request(metrics, ended), number=2000, repeat=3)) / 2000
        with_otel = min(timeit.repeat(lambda: per_request(viewed, ended), number=2000, repeat=3)) / 2000
    return per_chunk_s, request, with_otel


# --- the report -------------------------------------------------------------------------------------------------


def _median(values) -> float:
    values = [v for v in values if v is not None and v == v]
    return statistics.median(values) if values else float("nan")


def _difference(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def _table(args, out: dict) -> None:
    ms = 1000
    print(
        f"{'streams':>7} {'path':>9} {'TTFT p50':>9} {'p99':>8} {'+p50 vs a':>10} {'+p99 vs a':>10} "
        f"{'+p50 vs b':>10} {'+p99 vs b':>10} {'CPU/chunk':>10} {'relayed chunks/s':>25} {'+CPU vs b':>17} "
        f"{'failed':>6} {'box busy':>8}"
    )
    for streams in args.streams:
        reps = range(args.repeats)
        for path in PATHS:
            p50 = _median(out[streams, r, path][0] for r in reps)
            p99 = _median(out[streams, r, path][1] for r in reps)
            cpu = _median(out[streams, r, path][2] for r in reps)
            failed = sum(out[streams, r, path][3] for r in reps)
            busy = _median(out[streams, r, path][4] for r in reps)
            added = " " * 44
            if path in DOORS:
                added = "".join(
                    f" {_median(out[streams, r, path][i] - out[streams, r, ref][i] for r in reps) * ms:+8.2f}ms"
                    for ref in ("direct", "bare")
                    for i in (0, 1)
                )
            rate = _median(out[streams, r, path][5] for r in reps)
            cores = _median(out[streams, r, path][6] for r in reps)
            cpu_text = (
                f"{cpu * 1e6:8.1f}us {rate:9,.0f}/s on {cores:4.2f} core"
                if cpu == cpu
                else f"{'':10} {rate:9,.0f}/s{'':13}"
            )
            over_bare = " " * 17
            if path in DOORS:  # what the front door's CPU adds per chunk over the bare pass-through
                pairs = [(out[streams, r, path][2], out[streams, r, "bare"][2]) for r in reps]
                over_bare = (
                    f"{_median(_difference(*p) for p in pairs) * 1e6:+8.1f}us "
                    f"{_median(_ratio(*p) for p in pairs):5.2f}x"
                )
            print(
                f"{streams:>7} {path:>9} {p50 * ms:7.2f}ms {p99 * ms:6.2f}ms{added} {cpu_text} {over_bare} "
                f"{failed:>6} {busy:8.0%}"
            )
    if "door+otlp" not in PATHS:
        return
    print("OTLP export on, over the plain front door (median of per-repeat ratios):")
    for streams in args.streams:
        ratios = [
            _median(
                _ratio(out[streams, r, "door+otlp"][i], out[streams, r, "frontdoor"][i]) for r in range(args.repeats)
            )
            for i in (0, 1, 2)
        ]
        print(f"{streams:>7} streams: TTFT p50 {ratios[0]:.2f}x, p99 {ratios[1]:.2f}x, CPU per chunk {ratios[2]:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", default="1,16,64,256", help="concurrency levels, comma-separated")
    parser.add_argument("--chunks", type=int, default=64, help="content chunks per stream (64 or more)")
    parser.add_argument(
        "--interval",
        type=float,
        default=0.02,
        help="seconds between two chunks upstream (50 tokens a second per stream)",
    )
    parser.add_argument("--first", type=float, default=0.02, help="seconds before the first chunk upstream")
    parser.add_argument("--requests", type=int, default=3, help="measured requests per worker and round")
    parser.add_argument("--repeats", type=int, default=3, help="rounds of every level through every path")
    parser.add_argument("--burst", action="store_true", help="each round's N requests start at the same instant")
    parser.add_argument(
        "--pace",
        choices=["stream", "step"],
        default="stream",
        help="stream: each stream's chunks "
        "on its own clock; step: every stream's on one clock, as an engine decoding a batch",
    )
    parser.add_argument(
        "--memory-streams", type=int, default=1000, help="slow streams held open for the RSS measurement (0: none)"
    )
    parser.add_argument(
        "--otlp",
        action="store_true",
        help="also a front door exporting the OpenTelemetry GenAI view every second (needs the [otel] extra)",
    )
    parser.add_argument("--role", choices=["upstream", "pipe", "bare", "otlp-sink"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--upstream-url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    _more_files()
    if args.role == "upstream":
        return run_upstream(args.port)
    if args.role == "otlp-sink":
        return run_otlp_sink(args.port)
    if args.role in ("pipe", "bare"):
        return (run_pipe if args.role == "pipe" else run_bare)(args.port, args.upstream_url)
    args.streams = [int(s) for s in args.streams.split(",")]
    global PATHS
    if args.otlp:
        PATHS = PATHS + ("door+otlp",)

    me = [sys.executable, os.path.abspath(__file__)]
    up_port, pipe_port, bare_port, door_port, admin_port = (_free_port() for _ in range(5))
    upstream_url = f"http://127.0.0.1:{up_port}"

    def door(port: int, admin: int, *more: str) -> subprocess.Popen:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "inferwatch",
                "frontdoor",
                "--upstream",
                upstream_url,
                "--listen",
                f"127.0.0.1:{port}",
                "--caller-salt",
                "bench",
                "--metrics-listen",
                f"127.0.0.1:{admin}",
                # the load generator is one address, as a gateway is: 2 x 1,000 streams
                "--max-client-connections",
                "4096",
                "--log-level",
                "warning",
                *more,
            ],
            env={**os.environ, **_frontdoor_env()},
        )

    processes = {
        "upstream": subprocess.Popen(me + ["--role", "upstream", "--port", str(up_port)]),
        "pipe": subprocess.Popen(me + ["--role", "pipe", "--port", str(pipe_port), "--upstream-url", upstream_url]),
        "bare": subprocess.Popen(me + ["--role", "bare", "--port", str(bare_port), "--upstream-url", upstream_url]),
        "frontdoor": door(door_port, admin_port),
    }
    ports = {"upstream": up_port, "pipe": pipe_port, "bare": bare_port, "frontdoor": door_port}
    if args.otlp:
        sink_port, ports["door+otlp"], otlp_admin = (_free_port() for _ in range(3))
        processes["otlp-sink"] = subprocess.Popen(me + ["--role", "otlp-sink", "--port", str(sink_port)])
        processes["door+otlp"] = door(
            ports["door+otlp"], otlp_admin, "--otlp-endpoint", f"http://127.0.0.1:{sink_port}", "--otlp-interval", "1s"
        )
        _wait_listening(sink_port, processes["otlp-sink"])
    try:
        for name, port in ports.items():
            _wait_listening(port, processes[name])
        paths = {
            "direct": (upstream_url, None),
            **{name: (f"http://127.0.0.1:{ports[name]}", processes[name].pid) for name in PATHS if name != "direct"},
        }
        print(
            f"{args.chunks} chunks per stream every {args.interval * 1000:g} ms, first after "
            f"{args.first * 1000:g} ms, then on {'one clock for all' if args.pace == 'step' else 'a clock each'}; "
            f"{'bursts' if args.burst else 'steady concurrency'}, {args.requests} "
            f"measured requests per worker, median of {args.repeats} repeats; {_loop_name()} everywhere; "
            f"{os.cpu_count()} CPUs shared by upstream, proxy and load generator; load average "
            f"{os.getloadavg()[0]:.2f}"
        )
        began = time.monotonic()
        out = _run(_levels(args, paths))
        _table(args, out)
        if args.memory_streams:
            for path in ("bare",) + tuple(p for p in DOORS if p in PATHS):
                url, pid = paths[path]
                before, peaks, failed = _run(_memory(url, pid, args.memory_streams, 2))
                print(
                    f"{path:>9} RSS: {before:.0f} MiB idle, {' then '.join(f'{p:.0f}' for p in peaks)} MiB with "
                    f"{args.memory_streams} slow streams in flight (two waves; "
                    f"{(max(peaks) - before) * 1024 / args.memory_streams:.0f} KiB a stream), {failed} failed"
                )
        chunk_s, request_s, otel_s = metering_cost(args.otlp)
        print(
            f"metering alone (split, parse, fold one event): {chunk_s * 1e6:.1f} us per chunk; "
            f"per request (body, caller, outcome, series): {request_s * 1e6:.0f} us"
            + (
                f" (a stream that ended well), {otel_s * 1e6:.0f} us with the OpenTelemetry view "
                f"({otel_s / request_s:.2f}x)"
                if otel_s
                else ""
            )
            + f"; {time.monotonic() - began:.0f} s in all"
        )
    finally:
        sink = processes.pop("otlp-sink", None)  # last: the front door exports once more as it stops
        for process in processes.values():
            process.terminate()
        for process in processes.values():
            process.wait(10)
        if sink:
            sink.terminate()
            sink.wait(10)


if __name__ == "__main__":
    main()
