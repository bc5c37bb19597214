"""What the front door costs per stream: added time to first token and CPU per chunk (a benchmark, not a test).

    python tests/bench_frontdoor.py                      # 1, 16, 64 concurrent streams of 64 chunks
    python tests/bench_frontdoor.py --streams 1,16,64,256 --chunks 128

On loopback, against an upstream that streams vLLM-shaped chunks at a fixed pace,
the same load goes (a) direct, (b) through a bare aiohttp pass-through written
here, (c) through `inferwatch frontdoor`. Each server is its own process, so the
CPU of (b) and (c) is theirs alone (from /proc). Prints TTFT p50/p99 per path, what
(c) adds over (a) and over (b), CPU per chunk of (b) and (c), and (c)'s peak RSS.
Targets (issue 11): added TTFT p50 <= 2 ms up to 64 streams; <= 100 us CPU per chunk.
Bounded: every level runs a fixed number of rounds, at most about a minute in all.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time

CHUNK = {"id": "chatcmpl-0123456789abcdef0123456789abcdef", "object": "chat.completion.chunk", "created": 1,
         "model": "llama-3-8b", "choices": [{"index": 0, "delta": {"content": " token"}, "logprobs": None,
                                             "finish_reason": None}]}


def _event(doc: dict) -> bytes:
    return b"data: " + json.dumps(doc, separators=(",", ":")).encode() + b"\n\n"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- the roles, each run in its own process ---------------------------------------------------------------


def run_upstream(port: int, chunks: int, interval: float, first: float) -> None:
    """A fixed-pace engine: the first chunk after `first` s, then one every `interval` s, then stop and [DONE]."""
    from aiohttp import web

    content = _event(CHUNK)
    finish = _event({**CHUNK, "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}]})

    async def chat(request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        began = time.monotonic()
        await asyncio.sleep(first)
        for i in range(chunks):
            await response.write(content)
            await asyncio.sleep(max(0.0, began + first + (i + 1) * interval - time.monotonic()))
        await response.write(finish + b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None, backlog=4096)


def run_bare(port: int, upstream: str) -> None:
    """The least a pass-through can do in aiohttp: forward the body, copy each read to the client."""
    from aiohttp import ClientSession, ClientTimeout, TCPConnector, web

    async def proxy(request: web.Request) -> web.StreamResponse:
        session = request.app["session"]
        body = await request.read()
        async with session.post(upstream + request.path, data=body,
                                headers={"Content-Type": "application/json"}) as upstream_response:
            response = web.StreamResponse(status=upstream_response.status,
                                          headers={"Content-Type": upstream_response.headers["Content-Type"]})
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
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None, backlog=4096)


# --- the client ----------------------------------------------------------------------------------------------


async def _one(session, url: str, body: bytes) -> tuple[float, int]:
    began = time.perf_counter()
    ttft, events = None, 0
    async with session.post(url + "/v1/chat/completions", data=body,
                            headers={"Content-Type": "application/json"}) as response:
        async for chunk in response.content.iter_any():
            if ttft is None:
                ttft = time.perf_counter() - began
            events += chunk.count(b"\n\n")
    return ttft, events


async def _level(paths: dict, streams: int, rounds: int) -> dict:
    """{path: (TTFTs, events, proxy CPU seconds)}; rounds alternate between the paths, so background load on a
    shared machine falls on all of them alike."""
    from aiohttp import ClientSession, ClientTimeout, TCPConnector

    body = json.dumps({"model": "llama-3-8b", "stream": True,
                       "messages": [{"role": "user", "content": "hi"}]}).encode()
    sessions = {path: ClientSession(connector=TCPConnector(limit=0), timeout=ClientTimeout(total=120))
                for path in paths}
    results = {path: ([], 0, 0.0) for path in paths}
    try:
        for path, (url, _) in paths.items():     # warm up at full concurrency: pools open, code paths hot
            await asyncio.gather(*(_one(sessions[path], url, body) for _ in range(streams)))
        for _ in range(rounds):
            for path, (url, pid) in paths.items():
                cpu = _cpu_seconds(pid) if pid else 0.0
                done = await asyncio.gather(*(_one(sessions[path], url, body) for _ in range(streams)))
                ttfts, events, seconds = results[path]
                results[path] = (ttfts + [d[0] for d in done], events + sum(d[1] for d in done),
                                 seconds + ((_cpu_seconds(pid) - cpu) if pid else 0.0))
    finally:
        for session in sessions.values():
            await session.close()
    return results


def _cpu_seconds(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mib(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
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
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def metering_cost() -> tuple[float, float]:
    """(seconds per chunk, seconds per request) of the front door's own metering, in this process: the part a
    bare pass-through does not pay, measured without the event loop, the kernel or a shared machine's noise."""
    import timeit

    from inferwatch.frontdoor import Facts, SSESplitter, classify, observe_event, request_info, token_counts
    from inferwatch.frontdoor._caller import caller_of
    from inferwatch.frontdoor._metrics import FrontdoorMetrics

    chunk, splitter, facts = _event(CHUNK), SSESplitter(), Facts()

    def per_chunk():
        for payload in splitter.feed(chunk):
            observe_event(facts, payload, 1.0)

    body = json.dumps({"model": "llama-3-8b", "stream": True, "messages": [{"role": "user", "content": "x" * 2000}],
                       "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]}).encode()
    metrics, headers = FrontdoorMetrics(), {"Authorization": "Bearer sk-0123456789"}

    def per_request():
        info, caller = request_info(body), caller_of(headers, None, "salt")
        labels = (info.model, caller, "upstream:8000")
        metrics.in_flight.labels(*labels).inc()
        metrics.in_flight.labels(*labels).dec()
        metrics.record(labels, classify(200, "complete", facts, True, info.tools), 200,
                       {"ttft": 0.1, "ttfc": 0.05, "tpot": 0.02, "duration": 1.0}, token_counts(facts)[:3])

    return (min(timeit.repeat(per_chunk, number=20000, repeat=3)) / 20000,
            min(timeit.repeat(per_request, number=2000, repeat=3)) / 2000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", default="1,16,64", help="concurrency levels, comma-separated")
    parser.add_argument("--chunks", type=int, default=64, help="content chunks per stream (64 or more)")
    parser.add_argument("--interval", type=float, default=0.02, help="seconds between two chunks upstream "
                                                                    "(an engine decoding a batch of 64)")
    parser.add_argument("--first", type=float, default=0.02, help="seconds before the first chunk upstream")
    parser.add_argument("--role", choices=["upstream", "bare"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--upstream-url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "upstream":
        return run_upstream(args.port, args.chunks, args.interval, args.first)
    if args.role == "bare":
        return run_bare(args.port, args.upstream_url)

    me = [sys.executable, os.path.abspath(__file__)]
    up_port, bare_port, door_port = _free_port(), _free_port(), _free_port()
    upstream_url = f"http://127.0.0.1:{up_port}"
    processes = {
        "upstream": subprocess.Popen(me + ["--role", "upstream", "--port", str(up_port), "--chunks",
                                           str(args.chunks), "--interval", str(args.interval), "--first",
                                           str(args.first)]),
        "bare": subprocess.Popen(me + ["--role", "bare", "--port", str(bare_port), "--upstream-url", upstream_url]),
        "frontdoor": subprocess.Popen([sys.executable, "-m", "inferwatch", "frontdoor", "--upstream", upstream_url,
                                       "--listen", f"127.0.0.1:{door_port}", "--caller-salt", "bench",
                                       "--log-level", "warning"], env={**os.environ, **_frontdoor_env()}),
    }
    try:
        for name, port in (("upstream", up_port), ("bare", bare_port), ("frontdoor", door_port)):
            _wait_listening(port, processes[name])
        paths = {"direct": (upstream_url, None), "bare": (f"http://127.0.0.1:{bare_port}", processes["bare"].pid),
                 "frontdoor": (f"http://127.0.0.1:{door_port}", processes["frontdoor"].pid)}
        print(f"{args.chunks} chunks per stream every {args.interval * 1000:g} ms, first after "
              f"{args.first * 1000:g} ms; {os.cpu_count()} CPUs shared by upstream, proxy and client")
        print(f"{'streams':>7} {'path':>9} {'TTFT p50':>9} {'p99':>8} {'+p50 vs a':>10} {'+p99 vs a':>10} "
              f"{'+p50 vs b':>10} {'+p99 vs b':>10} {'CPU/chunk':>10} {'+CPU vs b':>10}")
        for streams in (int(s) for s in args.streams.split(",")):
            rounds = max(3, min(10, 8192 // (streams * args.chunks)))
            row = {}
            for path, (ttfts, events, seconds) in asyncio.run(_level(paths, streams, rounds)).items():
                row[path] = (_pct(ttfts, 0.5), _pct(ttfts, 0.99), seconds / events if paths[path][1] else None)
            for path, (p50, p99, per_chunk) in row.items():
                added = ""
                if path == "frontdoor":
                    added = "".join(f" {(p50 - row[ref][0]) * 1000:+9.2f}ms {(p99 - row[ref][1]) * 1000:+9.2f}ms"
                                    for ref in ("direct", "bare"))
                else:
                    added = " " * 44
                cpu_text = "" if per_chunk is None else f"{per_chunk * 1e6:8.1f}us"
                if path == "frontdoor":
                    cpu_text += f" {(per_chunk - row['bare'][2]) * 1e6:+8.1f}us"
                print(f"{streams:>7} {path:>9} {p50 * 1000:7.2f}ms {p99 * 1000:6.2f}ms{added} {cpu_text:>10}")
        print(f"front door peak RSS: {_rss_mib(processes['frontdoor'].pid):.0f} MiB")
        chunk_s, request_s = metering_cost()
        print(f"metering alone (split, parse, fold one event): {chunk_s * 1e6:.1f} us per chunk; "
              f"per request (body, caller, outcome, series): {request_s * 1e6:.0f} us")
    finally:
        for process in processes.values():
            process.terminate()
        for process in processes.values():
            process.wait(10)


if __name__ == "__main__":
    main()
