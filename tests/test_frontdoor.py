"""The front door end to end: the official openai client through it, against both simulated engines and a
loopback engine for what the simulator cannot do (429, silence, cut streams, odd chunking).

Every server runs on a loopback port in a thread with its own event loop; counts are read from the front
door's own /metrics, so a test sees exactly what Prometheus would.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import random
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from dataclasses import replace

import openai
import pytest
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families
from simtools import FAST, simulator

from inferwatch.frontdoor import FRONTDOOR, FrontdoorConfig, make_app, parse_upstreams, start

STEADY = replace(FAST, spec_tokens=0)  # one token per step: the same seed gives the same answer
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "required": ["city"],
                "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius"]}},
            },
        },
    }
]
ASK = [{"role": "user", "content": "what is the weather"}]


# --- servers in threads ----------------------------------------------------------------------------------------


@contextmanager
def _serving(starter):
    """Run `starter()` (a coroutine returning an AppRunner) in a thread's loop; yields (base URL, runner)."""
    loop, ready, holder = asyncio.new_event_loop(), threading.Event(), {}

    def run():
        asyncio.set_event_loop(loop)
        holder["runner"] = runner = loop.run_until_complete(starter())
        holder["stop"] = asyncio.Event()
        ready.set()
        loop.run_until_complete(holder["stop"].wait())
        loop.run_until_complete(runner.cleanup())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(10)
    try:
        yield f"http://127.0.0.1:{holder['runner'].addresses[0][1]}", holder["runner"]
    finally:
        loop.call_soon_threadsafe(holder["stop"].set)
        thread.join(10)


METRICS: dict[str, str] = {}  # a front door's URL -> its admin listener's, where /metrics is
DOORS: dict[str, object] = {}  # a front door's URL -> its Frontdoor object


@contextmanager
def frontdoor(*upstreams: str, **options):
    """A front door on a loopback port in front of `upstreams`; yields (base URL, the Frontdoor object). Its
    /metrics, on the admin listener, is what `scrape(base URL)` reads."""
    default, routes = parse_upstreams(list(upstreams))
    config = FrontdoorConfig(
        default=default,
        routes=routes,
        host="127.0.0.1",
        port=0,
        caller_salt="s",
        **{"metrics_host": "127.0.0.1", "metrics_port": 0, **options},
    )
    app = make_app(config)
    with _serving(lambda: start(config, app)) as (url, _):
        door = app[FRONTDOOR]
        METRICS[url], DOORS[url] = f"http://127.0.0.1:{door.admin.addresses[0][1]}", door
        try:
            yield url, door
        finally:
            METRICS.pop(url, None)
            DOORS.pop(url, None)


def _sse(*chunks) -> list[bytes]:
    return [b"data: " + json.dumps(c, separators=(",", ":")).encode() + b"\n\n" for c in chunks]


def _chunk(delta=None, finish=None, text=None) -> dict:
    choice = {"index": 0, "finish_reason": finish}
    choice.update({"text": text} if text is not None else {"delta": delta or {}})
    return {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "fake", "choices": [choice]}


# what the loopback engine sends, by the request's model: a list of byte chunks, then how it ends
FAKE = {
    "ok": (
        _sse(
            _chunk({"role": "assistant", "content": ""}),
            _chunk({"content": "Hi"}),
            _chunk({"content": "!"}),
            _chunk({}, "stop"),
        )
        + [b"data: [DONE]\n\n"],
        "end",
    ),
    "no-done": (_sse(_chunk({"content": "Hi"}), _chunk({"content": " there"})), "end"),
    "finish-no-done": (_sse(_chunk({"content": "Hi"}), _chunk({}, "stop")), "end"),
    "cut": (_sse(_chunk({"content": "Hi"}), _chunk({"content": " there"})), "reset"),
    "empty": (_sse(_chunk({"role": "assistant", "content": ""}), _chunk({}, "stop")) + [b"data: [DONE]\n\n"], "end"),
    "filtered": (_sse(_chunk({"content": "Hi"}), _chunk({}, "content_filter")) + [b"data: [DONE]\n\n"], "end"),
    "broken-json": ([b'data: {"choices": [\n\n'] + _sse(_chunk({}, "stop")) + [b"data: [DONE]\n\n"], "end"),
    "not-offered": (
        _sse(
            _chunk(
                {
                    "tool_calls": [
                        {"index": 0, "id": "t", "type": "function", "function": {"name": "rm_rf", "arguments": "{}"}}
                    ]
                }
            ),
            _chunk({}, "tool_calls"),
        )
        + [b"data: [DONE]\n\n"],
        "end",
    ),
    "stall": (_sse(_chunk({"content": "Hi"})), "hang"),
    # every token, the finish and [DONE] in one write: what a fast engine or a buffering gateway sends
    "burst": (
        [
            b"".join(
                _sse(
                    _chunk({"content": "Hi"}),
                    _chunk({"content": " there"}),
                    _chunk({"content": "!"}),
                    _chunk({}, "stop"),
                )
            )
            + b"data: [DONE]\n\n"
        ],
        "end",
    ),
    # 32 MiB in one write: more than loopback's socket buffers hold while a client does not read
    "large": (
        [b"".join(_sse(*[_chunk({"content": "x" * 4000})] * 8192, _chunk({}, "stop"))) + b"data: [DONE]\n\n"],
        "end",
    ),
    # one response, chunked at odd places and with CRLF, comments and a multi-line data field
    "odd": (
        [
            b': keep-alive\r\n\r\ndata: {"id":"c1","choices":[{"index":0,"delta":{"con',
            b'tent":"Hi"},"finish_reason":null}]}\r',
            b'\n\r\ndata: {"choices":[{"index":0,',
            b'\ndata: "delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n',
        ],
        "end",
    ),
}


MODELS = (*FAKE, "busy", "silent", "whole-broken")


class FakeEngine:
    """A loopback engine whose behaviour is picked by the request's model (FAKE), plus 429 and silence."""

    def __init__(self):
        self.requests = 0
        self.bytes_in = 0
        self.gone: list[float] = []  # when a request's client (the front door) went away

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.path == "/v1/models":  # what it serves: each behaviour is a model
            return web.json_response({"object": "list", "data": [{"id": m, "object": "model"} for m in MODELS]})
        self.requests += 1
        body = await request.read()
        self.bytes_in += len(body)
        model = json.loads(body).get("model") if body else None
        if model == "busy":
            return web.json_response({"error": {"message": "slow down", "type": "rate_limit", "code": 429}}, status=429)
        if model == "silent":  # headers never come
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                self.gone.append(time.monotonic())
                raise
        if model == "whole-broken":
            return web.Response(text="{not json", content_type="application/json")
        chunks, end = FAKE[model]
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for chunk in chunks:
            await response.write(chunk)
            await asyncio.sleep(0.001)
        if end == "hang":
            await asyncio.sleep(60)
        if end == "reset":
            request.transport.close()
            return response
        await response.write_eof()
        return response


@contextmanager
def fake_engine():
    engine = FakeEngine()

    async def starter():
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", engine.handle)
        runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=0.1)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        return runner

    with _serving(starter) as (url, _):
        yield url, engine


# --- reading what happened -----------------------------------------------------------------------------------


def scrape(url: str) -> dict[tuple, float]:
    """{(sample name, sorted labels): value} of a /metrics page."""
    text = urllib.request.urlopen(METRICS.get(url, url) + "/metrics", timeout=5).read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def outcomes(url: str) -> dict[tuple[str, str], float]:
    """{(outcome, code): count} summed over the other labels."""
    counts: dict = {}
    for (name, labels), value in scrape(url).items():
        if name == "llm_frontdoor_requests_total":
            key = (dict(labels)["outcome"], dict(labels)["code"])
            counts[key] = counts.get(key, 0) + value
    return counts


def total(url: str, name: str, **match) -> float:
    return sum(
        v
        for (n, labels), v in scrape(url).items()
        if n == name and all(dict(labels).get(k) == w for k, w in match.items())
    )


def wait_for(predicate, timeout: float = 3.0):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.01)
    return value


def client(url: str, key: str = "sk-test", **options) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0, **{"timeout": 10, **options})


def post_raw(url: str, body: dict, headers: dict | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(
        url + "/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


# --- pass-through ----------------------------------------------------------------------------------------------


def _streamed(c: openai.OpenAI, **kwargs) -> dict:
    """Content, reasoning and tool calls of one streamed answer, as the client assembled them."""
    got = {"content": "", "reasoning": "", "tools": "", "finish": None, "usage": None}
    for chunk in c.chat.completions.create(
        model="m", messages=ASK, stream=True, stream_options={"include_usage": True}, **kwargs
    ):
        if chunk.usage:
            got["usage"] = chunk.usage.model_dump()
        for choice in chunk.choices or ():  # an error event has no choices
            delta = choice.delta
            got["content"] += delta.content or ""
            got["reasoning"] += (delta.model_extra or {}).get("reasoning_content") or ""
            for call in delta.tool_calls or ():
                got["tools"] += (call.function.name or "") + "|" + (call.function.arguments or "")
            got["finish"] = choice.finish_reason or got["finish"]
    return got


def _raw(url: str, body: dict) -> bytes:
    """The response bytes with per-request ids and times made equal."""
    _, data = post_raw(url, body)
    return re.sub(rb'"(id|created)": ?("[^"]*"|\d+)', rb'"\1":0', data)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_openai_client_streams_through_byte_identical(engine):
    """Content, reasoning and tool calls through the front door equal a direct request's, byte for byte."""
    with (
        simulator(engine, params=replace(STEADY, reasoning_tokens=4)) as (sim_url, sim),
        frontdoor(sim_url) as (door_url, _),
    ):
        for kwargs in ({}, {"tools": TOOLS}):
            seen = []
            for url in (sim_url, door_url):
                sim.engine.rng = random.Random(7)
                seen.append(_streamed(client(url), **kwargs))
            assert seen[0] == seen[1]
            assert seen[0]["reasoning"] and (seen[0]["tools"] if kwargs else seen[0]["content"])
        for stream in (True, False):  # the raw bytes, streamed and whole
            body = {"model": "m", "messages": ASK, "stream": stream, "tools": TOOLS}
            seen = []
            for url in (sim_url, door_url):
                sim.engine.rng = random.Random(7)
                seen.append(_raw(url, body))
            assert seen[0] == seen[1] and b"get_weather" in seen[0]
        assert outcomes(door_url) == {("ok", "200"): 4}
        assert total(door_url, "llm_frontdoor_reasoning_tokens_total") == 3 * 4  # three streamed, 4 each


def test_bytes_pass_unchanged_however_chunked():
    """Odd chunking, CRLF, comments and multi-line data reach the client as sent, and are still metered."""
    with fake_engine() as (fake_url, _), frontdoor(fake_url) as (door_url, _):
        status, data = post_raw(door_url, {"model": "odd", "stream": True})
        assert status == 200 and data == b"".join(FAKE["odd"][0])
        assert outcomes(door_url) == {("ok", "200"): 1}


def test_a_stream_that_arrives_in_one_read_still_gives_a_time_per_token_sample():
    """Three visible tokens in one read: one sample of time per output token (0 s or a little more, to the end of
    the stream), so the fast-enough SLO counts the request instead of silently dropping it."""
    with fake_engine() as (fake_url, _), frontdoor(fake_url) as (door_url, _):
        for _ in range(3):
            status, _data = post_raw(door_url, {"model": "burst", "stream": True})
            assert status == 200
        wait_for(lambda: outcomes(door_url).get(("ok", "200")) == 3, timeout=30)
        assert total(door_url, "llm_frontdoor_time_per_output_token_seconds_count") == 3
        assert total(door_url, "llm_frontdoor_time_to_first_token_seconds_count") == 3


def test_the_allowed_paths_pass_through_untouched_and_no_other():
    """/v1/* and /health reach the engine as they are; its /metrics and admin paths do not, however written
    (the engine reads a path decoded, with dot segments resolved, so these all named its /metrics)."""
    with simulator("vllm", params=STEADY) as (sim_url, _), frontdoor(sim_url) as (door_url, _):
        for path in ("/v1/models", "/health", "//v1//models"):
            direct = urllib.request.urlopen(sim_url + path.replace("//", "/"), timeout=5).read()
            assert urllib.request.urlopen(door_url + path, timeout=5).read() == direct
        with pytest.raises(urllib.error.HTTPError) as err:  # the engine's 404, not ours
            urllib.request.urlopen(door_url + "/v1/embeddings", timeout=5)
        assert err.value.code in (404, 405) and b"--allow-path" not in err.value.read()
        refused = {
            "/metrics": 404,
            "/metrics/": 404,
            "/METRICS": 404,
            "/%6detrics": 404,
            "//metrics": 404,
            "/admin/scenario": 404,
            "/v1/../metrics": 400,
            "/v1/%2e%2e/metrics": 400,
            "/v1/%2E%2E%2Fmetrics": 400,
            "/v1/..%5Cmetrics": 400,
            "/./metrics": 400,
        }
        for path, code in refused.items():
            for method in ("GET", "POST"):
                with socket.create_connection(("127.0.0.1", int(door_url.rsplit(":", 1)[1])), timeout=5) as s:
                    s.sendall(
                        f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
                        "Connection: close\r\n\r\n".encode()
                    )
                    answer = b"".join(iter(lambda: s.recv(65536), b""))
                assert answer.startswith(b"HTTP/1.1 %d " % code) and b"vllm:" not in answer, (method, path, answer)
        assert outcomes(door_url) == {}  # not metered
        assert total(door_url, "llm_frontdoor_refused_total", reason="path") == 12
        assert total(door_url, "llm_frontdoor_refused_total", reason="bad_path") == 10


def test_routes_by_model():
    with (
        simulator("vllm", params=STEADY, model="a") as (url_a, _),
        simulator("sglang", params=STEADY, model="b") as (url_b, _),
        frontdoor(f"a={url_a}", f"b={url_b}") as (door_url, _),
    ):
        for model in ("a", "b"):
            answer = client(door_url).chat.completions.create(model=model, messages=ASK)
            assert answer.model == model
        assert sorted(m.id for m in client(door_url).models.list()) == ["a", "b"]
        with pytest.raises(openai.NotFoundError, match="not served here"):
            client(door_url).chat.completions.create(model="c", messages=ASK)
        counts = scrape(door_url)
        upstreams = {
            dict(labels)["model"]: dict(labels)["upstream"]
            for (name, labels) in counts
            if name == "llm_frontdoor_requests_total"
        }
        # a model no upstream serves is no label value of its own
        assert upstreams == {"a": url_a.split("//")[1], "b": url_b.split("//")[1], "other": "none"}


def test_a_door_started_before_its_engine_learns_its_models_without_waiting_a_whole_refresh():
    """The read of /v1/models at start failed (nothing listens yet): the next try comes within seconds, not
    after --models-refresh (here ten minutes), so requests are labelled with their model, not `other`."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with frontdoor(f"http://127.0.0.1:{port}", models_refresh=600.0) as (_, door):
        assert "late" not in door.models.known
        with simulator("vllm", params=STEADY, model="late", port=port):
            wait_for(lambda: "late" in door.models.known, timeout=120)  # a guard against hanging, not a speed


# --- outcomes, each produced for real and counted once --------------------------------------------------------


def _exactly(door_url: str, outcome: str, code: str) -> None:
    assert outcomes(door_url) == {(outcome, code): 1}
    assert total(door_url, "llm_frontdoor_requests_in_flight") == 0


SIM_CASES = [  # (id, params, request kwargs, stream, outcome, code)
    ("ok", STEADY, {}, True, "ok", "200"),
    ("ok-whole", STEADY, {}, False, "ok", "200"),
    ("engine-error", replace(STEADY, error_share=1.0), {}, True, "error", "200"),
    ("engine-error-whole", replace(STEADY, error_share=1.0), {}, False, "error", "500"),
    ("engine-abort", replace(STEADY, abort_share=1.0), {}, True, "error", "200"),
    ("length", STEADY, {"max_tokens": 2}, True, "length", "200"),
    ("truncation-scenario", replace(STEADY, truncate_share=1.0), {}, True, "length", "200"),
    ("broken-tools", replace(STEADY, broken_tool_share=1.0), {"tools": TOOLS}, True, "tool_call_invalid", "200"),
    ("broken-tools-whole", replace(STEADY, broken_tool_share=1.0), {"tools": TOOLS}, False, "tool_call_invalid", "200"),
    (
        "schema-violation",
        STEADY,
        {
            "tools": [
                {
                    "type": "function",
                    "function": {"name": "get_weather", "parameters": {"type": "object", "required": ["location"]}},
                }
            ]
        },
        True,
        "tool_call_invalid",
        "200",
    ),
    ("valid-tool", STEADY, {"tools": TOOLS}, True, "ok", "200"),
    ("unknown-model", STEADY, {"model": "nope"}, True, "invalid_request", "404"),
]


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_each_simulated_outcome_is_counted_once(engine):
    for case, params, kwargs, stream, outcome, code in SIM_CASES:
        with simulator(engine, params=params) as (sim_url, _), frontdoor(sim_url) as (door_url, _):
            body = {"model": "m", "messages": ASK, "stream": stream, **kwargs}
            status, _ = post_raw(door_url, body)
            assert str(status) == code, case
            assert outcomes(door_url) == {(outcome, code): 1}, case
            assert total(door_url, "llm_frontdoor_requests_in_flight") == 0, case


FAKE_CASES = [  # (model, outcome, code)
    ("ok", "ok", "200"),
    ("busy", "rate_limited", "429"),
    ("no-done", "truncated", "200"),
    ("finish-no-done", "truncated", "200"),
    ("cut", "truncated", "200"),
    ("empty", "empty", "200"),
    ("filtered", "content_filter", "200"),
    ("broken-json", "error", "200"),
    ("whole-broken", "error", "200"),
    ("not-offered", "tool_call_invalid", "200"),
]


def test_each_loopback_outcome_is_counted_once():
    with fake_engine() as (fake_url, _):
        for model, outcome, code in FAKE_CASES:
            with frontdoor(fake_url) as (door_url, _):
                try:
                    post_raw(door_url, {"model": model, "stream": True, "tools": TOOLS})
                except Exception:  # noqa: BLE001 - a cut stream may end the client's read with an error
                    pass
                assert wait_for(lambda: outcomes(door_url)) == {(outcome, code): 1}, model


def test_thinking_shows_first_chunk_before_first_visible_token():
    """Hidden reasoning: the first chunk comes early, the first visible token late; both counted."""
    with (
        simulator("sglang", params=replace(STEADY, decode_step_s=0.005), scenario="thinking") as (sim_url, _),
        frontdoor(sim_url) as (door_url, _),
    ):
        got = _streamed(client(door_url))
        assert got["reasoning"] and got["content"]
        samples = scrape(door_url)
        ttft = next(v for (n, _), v in samples.items() if n == "llm_frontdoor_time_to_first_token_seconds_sum")
        ttfc = next(v for (n, _), v in samples.items() if n == "llm_frontdoor_time_to_first_chunk_seconds_sum")
        assert ttft > ttfc + 400 * 0.005 * 0.8  # 400 reasoning tokens at 5 ms before any visible one
        assert total(door_url, "llm_frontdoor_reasoning_tokens_total") == 400
        assert total(door_url, "llm_frontdoor_output_tokens_total") == got["usage"]["completion_tokens"]
        assert outcomes(door_url) == {("ok", "200"): 1}


def test_errors_scenario_each_request_counted_once():
    """Through the simulator's `errors` scenario, the counts match what the client saw, request for request."""
    with simulator("vllm", params=STEADY, scenario="errors") as (sim_url, _), frontdoor(sim_url) as (door_url, _):
        seen = {"ok": 0, "error": 0}
        for _ in range(30):
            got = _streamed(client(door_url))
            seen["ok" if got["finish"] == "stop" else "error"] += 1
        counts = outcomes(door_url)
        assert sum(counts.values()) == 30 and seen["error"] > 0
        assert {k[0]: v for k, v in counts.items()} == {k: v for k, v in seen.items() if v}


def test_scenarios_switched_through_the_front_door_are_counted_as_the_client_saw_them():
    """POST /admin/scenario passes through when allowed; truncation and broken-tools then show up as length and
    tool_call_invalid, request for request."""
    with (
        simulator("sglang", params=replace(STEADY, decode_step_s=0.001)) as (sim_url, _),
        frontdoor(sim_url, allow_paths=("/v1/*", "/admin/scenario")) as (door_url, _),
    ):
        seen: dict[str, int] = {}
        c = client(door_url)
        for scenario, kwargs in (("truncation", {}), ("broken-tools", {"tools": TOOLS}), ("normal", {})):
            request = urllib.request.Request(
                door_url + "/admin/scenario", method="POST", data=json.dumps({"scenario": scenario}).encode()
            )
            assert json.load(urllib.request.urlopen(request, timeout=5)) == {"scenario": scenario}
            for _ in range(6):
                got = _streamed(c, **kwargs)
                try:
                    broken = bool(got["tools"]) and not isinstance(json.loads(got["tools"].split("|", 1)[1]), dict)
                except ValueError:
                    broken = True
                kind = {"length": "length"}.get(got["finish"], "tool_call_invalid" if broken else "ok")
                seen[kind] = seen.get(kind, 0) + 1
        assert {k[0]: v for k, v in outcomes(door_url).items()} == seen
        assert seen["length"] and seen["tool_call_invalid"] == 6 and seen["ok"] >= 6


# --- cancellation, timeouts, limits ------------------------------------------------------------------------------


def test_a_client_that_leaves_mid_stream_aborts_the_engine_request():
    slow = replace(STEADY, decode_step_s=0.01, output_tokens_mean=5000)
    with simulator("sglang", params=slow) as (sim_url, sim), frontdoor(sim_url) as (door_url, _):
        with client(door_url).chat.completions.create(model="m", messages=ASK, stream=True) as chunks:
            for i, _ in enumerate(chunks):
                if i == 3:
                    break  # leaving the block closes the connection
        left = time.monotonic()
        wait_for(lambda: not sim.engine.running and not sim.engine.waiting, timeout=2)
        assert time.monotonic() - left < 0.2  # at once, not at the end of a 5000-token answer
        text = urllib.request.urlopen(sim_url + "/metrics", timeout=5).read().decode()
        assert re.search(r"^sglang:num_aborted_requests_total\{[^}]*\} 1\.0$", text, re.M), "the engine saw no abort"
        assert wait_for(lambda: outcomes(door_url)) == {("cancelled", "200"): 1}
        assert total(door_url, "llm_frontdoor_requests_in_flight") == 0


def test_a_client_that_leaves_before_the_answer_closes_the_upstream_request():
    """Non-streamed, nothing to write yet: the front door still hangs up on the engine at once."""
    with fake_engine() as (fake_url, engine), frontdoor(fake_url) as (door_url, _):
        with pytest.raises(openai.APITimeoutError):
            client(door_url, timeout=0.3).chat.completions.create(model="silent", messages=ASK)
        left = time.monotonic()
        wait_for(lambda: engine.gone, timeout=1)
        assert engine.gone[0] - left < 0.1
        assert wait_for(lambda: outcomes(door_url)) == {("cancelled", "499"): 1}
        assert total(door_url, "llm_frontdoor_requests_in_flight") == 0


def test_an_upstream_silent_before_the_first_byte_is_bounded_by_the_idle_timeout():
    with fake_engine() as (fake_url, _), frontdoor(fake_url, idle_timeout=0.3) as (door_url, _):
        began = time.monotonic()
        status, body = post_raw(door_url, {"model": "silent", "stream": True})
        assert status == 504 and b"did not answer in time" in body
        assert time.monotonic() - began < 2
        _exactly(door_url, "timeout", "504")


def test_an_upstream_silent_mid_stream_is_cut_at_the_idle_timeout():
    with fake_engine() as (fake_url, _), frontdoor(fake_url, idle_timeout=0.3) as (door_url, _):
        began = time.monotonic()
        with pytest.raises((http.client.HTTPException, OSError)):  # the client sees a broken stream, not a clean end
            post_raw(door_url, {"model": "stall", "stream": True})
        assert time.monotonic() - began < 2
        assert wait_for(lambda: outcomes(door_url)) == {("timeout", "200"): 1}


def test_an_unmetered_answer_silent_mid_body_is_cut_at_the_idle_timeout():
    """Paths the front door does not meter go through aiohttp's client: the same idle timeout bounds them."""
    with fake_engine() as (fake_url, _), frontdoor(fake_url, idle_timeout=0.3) as (door_url, _):
        request = urllib.request.Request(
            door_url + "/v1/embeddings",
            data=json.dumps({"model": "stall"}).encode(),
            headers={"Content-Type": "application/json"},
        )
        began = time.monotonic()
        with pytest.raises((http.client.HTTPException, OSError)):  # a broken answer, not a clean end
            urllib.request.urlopen(request, timeout=10).read()
        assert time.monotonic() - began < 2


def test_a_client_slower_than_the_idle_timeout_is_not_an_upstream_timeout():
    """The upstream sent all; the client reads nothing for three idle timeouts, then everything, whole."""
    import http.client

    with fake_engine() as (fake_url, _), frontdoor(fake_url, idle_timeout=0.2) as (door_url, _):
        connection = http.client.HTTPConnection(door_url.removeprefix("http://"), timeout=10)
        connection.request(
            "POST",
            "/v1/chat/completions",
            json.dumps({"model": "large", "stream": True}),
            {"Content-Type": "application/json"},
        )
        response = connection.getresponse()
        time.sleep(0.6)  # the case itself: a client idle for three idle timeouts (no event to wait on)
        body = response.read()
        connection.close()
        assert len(body) > 32 << 20 and body.endswith(b"data: [DONE]\n\n")
        assert wait_for(lambda: outcomes(door_url)) == {("ok", "200"): 1}


def test_an_unreachable_upstream_is_a_502_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connection refused
        with frontdoor(f"127.0.0.1:{port}") as (door_url, _):
            assert post_raw(door_url, {"model": "m"})[0] == 502
            _exactly(door_url, "error", "502")


def _413(door_url: str, head: bytes, chunks) -> bytes:
    """Send a request head and as much of a body as the front door takes; its answer."""
    host, port = door_url.split("//")[1].split(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(head)
        try:
            for chunk in chunks:
                s.sendall(chunk)
        except OSError:
            pass  # it stopped reading and closed: as it should
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer.split(b"\r\n\r\n", 1)[1]) < int(
            re.search(rb"Content-Length: (\d+)", answer).group(1)
        ):
            answer += s.recv(65536)  # the answer comes before the front door stops reading (lingering)
        return answer


def test_a_100_mb_body_gets_413_without_reaching_the_engine():
    with fake_engine() as (fake_url, engine), frontdoor(fake_url) as (door_url, _):
        head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        declared = _413(door_url, head + b"Content-Length: 100000000\r\n\r\n", [])
        assert declared.startswith(b"HTTP/1.1 413") and b"--max-body" in declared
        mib = b"x" * (1 << 20)  # one MiB, sent 100 times, chunked: no length declared
        chunked = _413(
            door_url, head + b"Transfer-Encoding: chunked\r\n\r\n", (b"100000\r\n" + mib + b"\r\n" for _ in range(100))
        )
        assert chunked.startswith(b"HTTP/1.1 413")
        assert engine.requests == 0 and engine.bytes_in == 0
        assert outcomes(door_url) == {("invalid_request", "413"): 2}


# --- callers and the access log ----------------------------------------------------------------------------


def _callers(door_url: str) -> set[str]:
    return {dict(labels)["caller"] for (name, labels) in scrape(door_url) if name == "llm_frontdoor_requests_total"}


def test_the_caller_header_is_ignored_unless_configured():
    with fake_engine() as (fake_url, _):
        with frontdoor(fake_url) as (door_url, _):
            post_raw(door_url, {"model": "ok"}, {"X-Team": "search", "Authorization": "Bearer sk-secret"})
            post_raw(door_url, {"model": "ok"})
            callers = _callers(door_url)
            assert "search" not in callers and "anonymous" in callers
            assert any(re.fullmatch(r"key-[0-9a-f]{12}", c) for c in callers)
            assert not any("sk-secret" in c for c in callers)
        with frontdoor(fake_url, caller_header="X-Team", max_callers=2) as (door_url, _):
            for team in ("search", "ads", "mail", "maps"):
                post_raw(door_url, {"model": "ok"}, {"X-Team": team})
            assert _callers(door_url) == {"search", "ads", "other"}


def test_the_access_log_holds_no_content(tmp_path):
    log = tmp_path / "access.jsonl"
    secret_prompt, key = "my-bank-password-is-hunter2", "sk-very-secret-key"
    with simulator("vllm", params=STEADY) as (sim_url, _), frontdoor(sim_url, access_log=str(log)) as (door_url, _):
        c = client(door_url, key=key)
        answer = "".join(
            ch.choices[0].delta.content or ""
            for ch in c.chat.completions.create(
                model="m", messages=[{"role": "user", "content": secret_prompt}], stream=True
            )
            if ch.choices
        )
        c.chat.completions.create(model="m", messages=[{"role": "user", "content": secret_prompt}], tools=TOOLS)
        urllib.request.urlopen(door_url + "/v1/models", timeout=5).read()
    text = log.read_text()
    lines = [json.loads(line) for line in text.splitlines()]
    assert [(r["path"], r["outcome"], r["status"]) for r in lines] == [
        ("/v1/chat/completions", "ok", 200),
        ("/v1/chat/completions", "ok", 200),
        ("/v1/models", None, 200),
    ]
    assert lines[0]["first_token_ms"] > 0 and lines[0]["output_tokens"] > 0 and lines[0]["caller"].startswith("key-")
    for forbidden in (secret_prompt, key, "Bearer", "celsius", "Paris", "Lima", "Osaka") + tuple(
        w for w in answer.split() if len(w) > 3
    ):
        assert forbidden not in text


# --- the command ------------------------------------------------------------------------------------------


def _cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "inferwatch", "frontdoor", *args], capture_output=True, text=True, timeout=20
    )


def test_user_mistakes_are_one_line_errors():
    bad = _cli("--upstream", "not-a-url")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--upstream" in bad.stderr
    twice = _cli("--upstream", "a:1", "--upstream", "b:2")
    assert twice.returncode == 2 and "only one upstream may be the default" in twice.stderr
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        busy = _cli("--upstream", "a:1", "--listen", f"127.0.0.1:{s.getsockname()[1]}", "--caller-salt", "x")
    assert busy.returncode == 1 and busy.stderr.strip().endswith("choose another with --listen HOST:PORT")
    assert "Traceback" not in bad.stderr + twice.stderr + busy.stderr


def test_the_command_serves_on_uvloop_with_room_for_a_thousand_streams():
    """`inferwatch frontdoor` as deployed: its loop (uvloop where installed) streams byte-identical, a soft
    limit of 256 open files (two sockets per stream) is raised to the hard one, and /metrics has no x_created."""
    import resource

    uvloop = pytest.importorskip("uvloop")
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 2048:
        pytest.skip(f"the hard open-files limit is {hard}")
    with socket.socket() as s, socket.socket() as s2:
        s.bind(("127.0.0.1", 0))
        s2.bind(("127.0.0.1", 0))
        port, admin = s.getsockname()[1], s2.getsockname()[1]
    with fake_engine() as (fake_url, _):
        door = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "inferwatch",
                "frontdoor",
                "--upstream",
                fake_url,
                "--listen",
                f"127.0.0.1:{port}",
                "--metrics-listen",
                f"127.0.0.1:{admin}",
                "--caller-salt",
                "x",
                "--log-level",
                "info",
            ],
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard)),
        )
        try:
            started = door.stderr.readline()
            assert f"({uvloop.__name__}, " in started and "open files at most" in started, started
            limits = open(f"/proc/{door.pid}/limits").read() if sys.platform == "linux" else ""
            soft = re.search(r"^Max open files\s+(\d+)", limits, re.M)
            assert not limits or int(soft.group(1)) >= 2048, limits
            url = f"http://127.0.0.1:{port}"
            assert post_raw(url, {"model": "ok", "stream": True}) == (200, b"".join(FAKE["ok"][0]))
            # the process serves no x_created series: nothing reads them, and they double a counter's series
            scraped = urllib.request.urlopen(f"http://127.0.0.1:{admin}/metrics", timeout=10).read().decode()
            assert "llm_frontdoor_requests_total{" in scraped and "_created" not in scraped
        finally:
            door.terminate()
            door.wait(10)
