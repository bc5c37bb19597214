"""The front door against what real clients and gateways send: the openai client (sync and async, streamed or
not, n > 1, no usage asked), gzip request bodies, a browser's CORS preflight, a trailing slash that the engine
redirects, a body shorter than its Content-Length, pipelined requests. One simulator, made to answer as vLLM's
FastAPI server does where the simulator's own aiohttp would differ (CORS, the slash redirect), and one front
door in front of it; each request is counted once, with its model, and nothing stays in flight."""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
import socket
import time

import openai
import pytest
import requests
from aiohttp import web
from simtools import serve_app
from test_frontdoor import ASK, METRICS, STEADY, client, frontdoor, outcomes, scrape, total, wait_for

from inferwatch.sim import SimulatorConfig, make_app

IDLE = 1.0  # the front door's idle timeout: also how long a stalled request body is waited for
ORIGIN = "http://app.example"


@web.middleware
async def _as_fastapi(request: web.Request, handler):
    """What vLLM's FastAPI server does before its routes: CORS (`--allowed-origins`) and the slash redirect."""
    if request.method == "OPTIONS" and request.headers.get("Access-Control-Request-Method"):
        return web.Response(
            headers={
                "Access-Control-Allow-Origin": ORIGIN,
                "Access-Control-Allow-Methods": "POST",
                "Access-Control-Allow-Headers": "authorization, content-type",
            }
        )
    if not request.raw_path.startswith("/"):  # uvicorn's h11 takes an absolute-form target for a path
        raise web.HTTPNotFound()
    if request.path != "/" and request.path.endswith("/"):
        raise web.HTTPTemporaryRedirect(str(request.url.with_path(request.path.rstrip("/")).with_query(request.query)))
    return await handler(request)


@pytest.fixture(scope="module")
def access_log(tmp_path_factory):
    return tmp_path_factory.mktemp("frontdoor") / "access.log"


@pytest.fixture(scope="module")
def door(access_log):
    """(front door URL, engine URL): one simulated engine, one front door before it (callers from X-Team)."""
    app = make_app(SimulatorConfig("vllm", None, "m", "normal", STEADY, seed=1))
    app.middlewares.append(_as_fastapi)
    with (
        serve_app(app) as engine,
        frontdoor(engine, idle_timeout=IDLE, caller_header="X-Team", access_log=str(access_log)) as (url, _),
    ):
        yield url, engine


def counted(url: str, before: dict, expected: dict) -> None:
    """The front door counted exactly `expected` (by (outcome, code)) since `before`, and nothing is in flight."""

    def added():
        now = outcomes(url)
        return {key: now[key] - before.get(key, 0) for key in now if now[key] != before.get(key, 0)}

    wait_for(lambda: added() == expected, timeout=3) if added() != expected else None
    assert added() == expected
    assert total(url, "llm_frontdoor_requests_in_flight") == 0


def test_the_openai_client_sync_and_async_streamed_or_not_is_counted_once_each(door):
    url, _ = door
    histograms = ("time_to_first_token", "time_to_first_chunk", "time_per_output_token", "request_duration")
    before = outcomes(url)
    samples_before = [total(url, f"llm_frontdoor_{name}_seconds_count") for name in histograms]
    c = client(url)
    whole = c.chat.completions.create(model="m", messages=ASK)
    streamed = list(c.chat.completions.create(model="m", messages=ASK, stream=True))  # no include_usage
    two = list(
        c.chat.completions.create(model="m", messages=ASK, stream=True, n=2, stream_options={"include_usage": False})
    )
    text = list(c.completions.create(model="m", prompt="hi", stream=True))

    async def asynchronous():
        async with openai.AsyncOpenAI(base_url=url + "/v1", api_key="k", max_retries=0, timeout=10) as ac:
            answer = await ac.chat.completions.create(model="m", messages=ASK)
            return answer, [
                chunk
                async for chunk in await ac.chat.completions.create(
                    model="m", messages=ASK, stream=True, stream_options={"include_usage": True}
                )
            ]

    async_whole, async_streamed = asyncio.run(asynchronous())
    assert whole.choices[0].message.content and async_whole.choices[0].message.content
    assert two[-1].choices[0].finish_reason  # the simulator answers n=2 with one choice
    assert streamed[-1].choices[0].finish_reason and text[-1].choices[0].finish_reason
    assert async_streamed[-1].usage.completion_tokens > 0
    counted(url, before, {("ok", "200"): 6})
    samples = [
        total(url, f"llm_frontdoor_{name}_seconds_count") - was
        for name, was in zip(histograms, samples_before, strict=True)
    ]
    assert samples == [4, 4, 4, 6]  # times to first token and per token: the four streamed answers only
    assert total(url, "llm_frontdoor_requests_total", model="m") >= 6


def _post(url: str, path: str = "/v1/chat/completions", **options) -> requests.Response:
    return requests.post(url + path, timeout=10, **options)


def test_a_gzip_request_body_reaches_the_engine_decoded_and_a_broken_one_is_a_400(door, caplog):
    """aiohttp decodes a `Content-Encoding: gzip` body as it reads it; the engine must get it decoded and
    without that header (it got the decoded bytes with the header: a 500 from any engine that honours it)."""
    url, engine = door
    body = json.dumps({"model": "m", "messages": ASK, "stream": True}).encode()
    gzipped = {"Content-Encoding": "gzip", "Content-Type": "application/json"}
    before = outcomes(url)
    through, direct = (
        _post(url, data=gzip.compress(body), headers=gzipped),
        _post(engine, data=gzip.compress(body), headers=gzipped),
    )
    assert (through.status_code, direct.status_code) == (200, 200)
    assert through.text.endswith("data: [DONE]\n\n") and direct.text.endswith("data: [DONE]\n\n")
    with caplog.at_level(logging.ERROR):
        broken = _post(url, data=b"\x1f\x8b\x08\x00not gzip at all", headers=gzipped)
    assert broken.status_code == 400 and "cannot be read" in broken.json()["error"]["message"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
    counted(url, before, {("ok", "200"): 1, ("invalid_request", "400"): 1})


def test_a_cors_preflight_and_other_methods_on_the_metered_paths_are_the_engines_to_answer(door):
    """A browser app's preflight (OPTIONS), HEAD and GET on the metered paths pass through, unmetered, as the
    engine answers them (the front door's own routes are POST only, and must not answer 405 themselves)."""
    url, engine = door
    preflight = {
        "Origin": ORIGIN,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type",
    }
    before = outcomes(url)
    for path in ("/v1/chat/completions", "/v1/completions"):
        through = requests.options(url + path, headers=preflight, timeout=5)
        direct = requests.options(engine + path, headers=preflight, timeout=5)
        assert (through.status_code, through.headers.get("Access-Control-Allow-Origin")) == (200, ORIGIN)
        assert through.headers["Access-Control-Allow-Methods"] == direct.headers["Access-Control-Allow-Methods"]
        for method in (requests.head, requests.get):
            assert method(url + path, timeout=5).status_code == method(engine + path, timeout=5).status_code
    counted(url, before, {})


def test_a_redirect_from_the_engine_comes_back_through_the_front_door(door):
    """FastAPI redirects `/v1/chat/completions/` to the path without the slash, on the Host it was asked for:
    the engine's own address, which the client then called around the front door (or could not reach)."""
    url, engine = door
    asked = {"model": "m", "messages": ASK}
    redirect = _post(url, "/v1/chat/completions/", json=asked, allow_redirects=False)
    assert redirect.status_code == 307 and redirect.headers["Location"] == "/v1/chat/completions"
    before = outcomes(url)
    followed = _post(url, "/v1/chat/completions/?api-version=2024-06-01", json=asked)  # an Azure-style query
    assert followed.status_code == 200 and followed.url == url + "/v1/chat/completions?api-version=2024-06-01"
    counted(url, before, {("ok", "200"): 1})


def _raw(url: str, data: bytes, timeout: float = 5, until: bytes | None = None) -> bytes:
    """What the front door answers to `data` sent on a socket, read until it closes (or `until` came)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(data)
        answer = b""
        while (until is None or until not in answer) and (piece := sock.recv(65536)):
            answer += piece
        return answer


def _request(body: bytes, length: int | None = None, extra: bytes = b"") -> bytes:
    return (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: door\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n%s\r\n%s" % (len(body) if length is None else length, extra, body)
    )


def test_a_request_body_that_stops_coming_is_a_408_after_the_idle_timeout(door):
    """A body shorter than its Content-Length (or a slowloris sending it a byte now and then, then stopping)
    held a handler forever; it is refused once it has been silent for the idle timeout."""
    url, _ = door
    body = json.dumps({"model": "m", "messages": ASK}).encode()
    before, start = outcomes(url), time.monotonic()
    answer = _raw(url, _request(body[:-5], length=len(body)), until=b"(--idle-timeout)")
    assert answer.startswith(b"HTTP/1.1 408 ") and b"stopped coming" in answer
    assert IDLE <= time.monotonic() - start < IDLE + 2
    counted(url, before, {("invalid_request", "408"): 1})


def test_pipelined_requests_on_one_connection_each_get_their_whole_answer(door):
    """Two streamed requests and a whole one, sent at once on one keep-alive connection: each answer follows
    the last one's end on the socket (the stream's bytes bypass aiohttp's writer), each counted once."""
    url, _ = door
    streamed = json.dumps({"model": "m", "messages": ASK, "stream": True}).encode()
    whole = json.dumps({"model": "m", "messages": ASK}).encode()
    before = outcomes(url)
    answer = _raw(url, _request(streamed) + _request(streamed) + _request(whole, extra=b"Connection: close\r\n"))
    heads = answer.count(b"HTTP/1.1 200 OK\r\n")
    assert heads == 3 and answer.count(b"data: [DONE]\n\n") == 2 and answer.count(b"\r\n0\r\n\r\n") == 2
    assert answer.endswith(b"}") and b'"chat.completion"' in answer
    counted(url, before, {("ok", "200"): 3})
    assert all(labels != () for (name, labels) in scrape(url) if name == "llm_frontdoor_requests_total")


def test_bytes_that_are_not_utf8_in_a_header_are_refused_and_a_lone_surrogate_model_never_breaks_the_metrics(
    door, access_log, caplog
):
    """An API key or a caller header with a byte that is not UTF-8 would reach the engine changed (aiohttp's
    client blanked it): it is refused with 400, never forwarded. A model that is a lone surrogate (`\\ud800` is
    valid JSON) is no model an engine serves (`other`), and the access log writes it as `?`."""
    url, _ = door
    body = json.dumps({"model": "m", "messages": ASK}).encode()
    before = outcomes(url)
    with caplog.at_level(logging.ERROR):
        for extra in (b"Authorization: Bearer sk-caf\xe9\r\n", b"X-Team: caf\xe9\r\n", b"X-A: \xff\r\n"):
            assert _raw(url, _request(body, extra=extra + b"Connection: close\r\n")).startswith(b"HTTP/1.1 400 ")
        lone = b'{"model": "\\ud800", "messages": []}'
        assert _raw(url, _request(lone, extra=b"Connection: close\r\n")).startswith(b"HTTP/1.1 404 ")
        counted(url, before, {("invalid_request", "404"): 1})
    assert total(url, "llm_frontdoor_refused_total", reason="bad_header") >= 3
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
    logged = [json.loads(line) for line in access_log.read_text().splitlines()]
    assert "?" in {entry["model"] for entry in logged}


def test_a_model_name_of_half_a_megabyte_is_counted_as_other_not_copied_into_every_series(door):
    url, _ = door
    size = len(requests.get(METRICS[url] + "/metrics", timeout=5).content)
    before = outcomes(url)
    assert _post(url, json={"model": "x" * (1 << 19), "messages": ASK}).status_code == 404
    counted(url, before, {("invalid_request", "404"): 1})
    assert total(url, "llm_frontdoor_requests_total", model="other") >= 1
    assert len(requests.get(METRICS[url] + "/metrics", timeout=5).content) < size + 20_000


MALFORMED = {
    "a header line over 8,190 bytes": b"X-Long: " + b"a" * 9000 + b"\r\n",
    "200 headers": b"".join(b"X-H%d: v\r\n" % i for i in range(200)),
    "a bad chunk size": b"Transfer-Encoding: chunked\r\n\r\nzz\r\n",
}


@pytest.mark.parametrize("mistake", MALFORMED.values(), ids=MALFORMED)
def test_a_clients_malformed_http_is_a_400_and_one_warning_line_not_a_traceback(door, caplog, mistake):
    url, _ = door
    before = outcomes(url)
    with caplog.at_level(logging.INFO):
        answer = _raw(url, b"POST /v1/chat/completions HTTP/1.1\r\nHost: door\r\n" + mistake + b"\r\n")
        wait_for(lambda: caplog.records)
    assert answer.startswith(b"HTTP/1.0 400 Bad Request")
    assert [(r.name, r.levelname, r.exc_info) for r in caplog.records] == [
        ("inferwatch.frontdoor.http", "WARNING", None)
    ]
    assert b"aaaa" not in caplog.text.encode() and "client got a 400" in caplog.text
    counted(url, before, {})


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/models"])
def test_a_client_using_the_front_door_as_its_http_proxy_reaches_the_engine(door, path):
    """A client with HTTP_PROXY pointing at the front door sends an absolute-form target (`POST http://host/...`):
    its path and query go to the engine, not the client's URL (a 404 from uvicorn's h11, a 502 on other paths)."""
    url, _ = door
    body = json.dumps({"model": "m", "messages": ASK}).encode()
    method = b"POST" if path.endswith("completions") else b"GET"
    target = b"http://vllm.example:8000" + path.encode() + b"?api-version=1"
    answer = _raw(
        url,
        _request(body, extra=b"Connection: close\r\n").replace(b"POST /v1/chat/completions", method + b" " + target, 1),
    )
    assert answer.startswith(b"HTTP/1.1 200 ")
