"""The front door's own upstream client (frontdoor/_upstream.py) on what an engine's HTTP can do besides the
usual: connections kept and reused, one the engine closed while idle, `Connection: close`, an HTTP/1.0 answer
read to the connection's end, `100 Continue` first, an HTTP/1.0 client, and TLS. The engine here writes its
HTTP by hand, since aiohttp's server will not close a kept connection without answering.

ScriptEngine then tries what real servers and broken networks do, as a client of the front door sees it:
answers that are not HTTP, odd but valid framing, bytes past the end of an answer, an answer before the
request was read, silences and resets at each point, TLS that fails, IPv6, hostname and path-prefixed
upstreams, many requests at once, and clients that leave at each stage. What a client gets never looks
whole when it is not, and each request is counted once."""

from __future__ import annotations

import asyncio
import concurrent.futures
import http.client
import json
import socket
import ssl
import struct
import subprocess
import threading
import time
from contextlib import contextmanager

import pytest
from test_frontdoor import _chunk, _sse, outcomes, post_raw, total, wait_for
from test_frontdoor import frontdoor as _frontdoor

from inferwatch.frontdoor._upstream import UpstreamPool

EVENTS = (
    b"".join(_sse(_chunk({"role": "assistant", "content": ""}), _chunk({"content": "Hi"}), _chunk({}, "stop")))
    + b"data: [DONE]\n\n"
)
ASKED = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}


def frontdoor(*upstreams: str, **options):
    """A front door that never reads the engines' /v1/models: these tests count the engine's connections."""
    return _frontdoor(*upstreams, **{"models_refresh": 0, **options})


class RawEngine:
    """Answers every request with EVENTS, framed as `mode` says:

    keep      HTTP/1.1, chunked, the connection kept
    stale     as keep, but the second request on a connection is met by closing it, unanswered
    close     HTTP/1.1 with `Connection: close`, then closes
    http10    HTTP/1.0, no length: the body ends when the connection does
    continue  `100 Continue` before the answer
    """

    def __init__(self, mode: str):
        self.mode, self.connections, self.requests = mode, 0, 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        answered = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                await reader.readexactly(_length(head))
                self.requests += 1
                if self.mode == "stale" and answered == 1:
                    break
                answered += 1
                writer.write(self._answer())
                await writer.drain()
                if self.mode in ("close", "http10"):
                    break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    def _answer(self) -> bytes:
        if self.mode == "http10":
            return b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + EVENTS
        framed = (
            b"".join(
                b"%x\r\n%s\r\n" % (len(event + b"\n\n"), event + b"\n\n") for event in EVENTS.split(b"\n\n") if event
            )
            + b"0\r\n\r\n"
        )
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
        if self.mode == "close":
            head += b"Connection: close\r\n"
        first = b"HTTP/1.1 100 Continue\r\n\r\n" if self.mode == "continue" else b""
        return first + head + b"\r\n" + framed


@contextmanager
def raw_engine(mode: str, tls: ssl.SSLContext | None = None):
    """A RawEngine on a loopback port in a thread; yields (its base URL, the engine)."""
    with serving(RawEngine(mode), tls=tls) as served:
        yield served


@contextmanager
def serving(engine, host: str = "127.0.0.1", tls: ssl.SSLContext | None = None):
    """`engine.serve` on a port of `host` in a thread; yields (its base URL, the engine)."""
    loop, ready, holder = asyncio.new_event_loop(), threading.Event(), {}

    def run():
        asyncio.set_event_loop(loop)
        server = loop.run_until_complete(asyncio.start_server(engine.serve, host, 0, ssl=tls))
        holder["port"] = server.sockets[0].getsockname()[1]
        ready.set()
        loop.run_forever()
        pending = asyncio.all_tasks(loop)  # connections still open: end them, quietly
        for task in pending:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        server.close()
        loop.run_until_complete(server.wait_closed())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(10)
    try:
        yield f"{'https' if tls else 'http'}://{f'[{host}]' if ':' in host else host}:{holder['port']}", engine
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


@pytest.mark.parametrize("mode, connections", [("keep", 1), ("close", 3), ("http10", 3), ("continue", 1)])
def test_each_framing_passes_whole_and_connections_are_kept_only_when_they_may_be(mode, connections):
    with raw_engine(mode) as (engine_url, engine), frontdoor(engine_url) as (door_url, _):
        for _ in range(3):
            assert post_raw(door_url, ASKED) == (200, EVENTS)
        assert outcomes(door_url) == {("ok", "200"): 3}
        assert engine.connections == connections


def test_a_kept_connection_the_engine_closed_is_retried_once_on_a_new_one():
    """The second request finds its kept connection closed unanswered: it goes again, on a new connection,
    and the client never sees it."""
    with raw_engine("stale") as (engine_url, engine), frontdoor(engine_url) as (door_url, _):
        assert post_raw(door_url, ASKED) == (200, EVENTS)
        assert post_raw(door_url, ASKED) == (200, EVENTS)
        assert (engine.requests, engine.connections) == (3, 2)
        assert outcomes(door_url) == {("ok", "200"): 2}


def door_socket(door_url: str, version: bytes = b"1.1", rcvbuf: int = 0) -> socket.socket:
    """A client's socket to the front door, ASKED sent on it (`rcvbuf`: a small receive buffer)."""
    sock = socket.socket()
    sock.settimeout(5)
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.connect(("127.0.0.1", int(door_url.rsplit(":", 1)[1])))
    body = json.dumps(ASKED).encode()
    sock.sendall(
        b"POST /v1/chat/completions HTTP/%s\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (version, len(body), body)
    )
    return sock


def ask10(door_url: str) -> tuple[bytes, str]:
    """What an HTTP/1.0 client gets (head and body), and how it ended: "eof" or "reset"."""
    answer = b""
    with door_socket(door_url, b"1.0") as sock:
        try:
            while data := sock.recv(65536):
                answer += data
        except ConnectionResetError:
            return answer, "reset"
    return answer, "eof"


def test_an_http10_client_gets_the_stream_unframed_to_the_connections_end():
    with raw_engine("keep") as (engine_url, _), frontdoor(engine_url) as (door_url, _):
        answer, end = ask10(door_url)
        head, _, rest = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.0 200") and b"chunked" not in head.lower()
        assert (rest, end) == (EVENTS, "eof")
        assert outcomes(door_url) == {("ok", "200"): 1}


@pytest.mark.parametrize("then, outcome", [("reset", "truncated"), ("hang", "timeout")])
def test_an_http10_client_whose_stream_is_cut_gets_a_reset_not_an_end(then, outcome):
    """Its body ends with the connection, so a clean close would look whole: the front door resets it."""
    with (
        serving(ScriptEngine(answering(STREAM[:-30], then=then))) as (engine_url, _),
        frontdoor(engine_url, idle_timeout=0.2) as (door_url, _),
    ):
        answer, end = ask10(door_url)
        assert end == "reset" and EVENTS.startswith(answer.partition(b"\r\n\r\n")[2])
        counted(door_url, {(outcome, "200"): 1})


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    """A self-signed certificate for 127.0.0.1: (its PEM file, a server context that presents it)."""
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=engine",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert, key)
    return cert, server


def test_a_tls_engine_is_verified_against_the_system_cas_or_ssl_cert_file(certificate, monkeypatch):
    """An engine behind TLS: trusted through SSL_CERT_FILE it is proxied; not trusted, it is a 502 error and
    the request never reaches it."""
    cert, server = certificate
    with raw_engine("keep", tls=server) as (engine_url, engine):
        with frontdoor(engine_url) as (door_url, _):
            status, body = post_raw(door_url, ASKED)
            assert status == 502 and b"unreachable" in body
            assert engine.requests == 0
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        with frontdoor(engine_url) as (door_url, _):
            assert post_raw(door_url, ASKED) == (200, EVENTS)
            assert outcomes(door_url) == {("ok", "200"): 1}


# --- what real servers and broken networks do ---------------------------------------------------------------------


class ScriptEngine:
    """Runs `script(engine, reader, writer)` on each connection; counts connections and requests, keeps each
    request's head, and notes when a connection's client (the front door) left while the engine waited."""

    def __init__(self, script):
        self.script, self.connections, self.requests, self.left = script, 0, 0, []
        self.overlaps = 0  # a request that came on a connection still busy with another

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            await self.script(self, reader, writer)
        except (asyncio.IncompleteReadError, asyncio.CancelledError):  # cancelled: the test is over
            pass
        except ConnectionError:  # the front door left while the engine wrote
            self.left.append(time.monotonic())
        finally:
            writer.close()

    async def request(self, reader: asyncio.StreamReader, body: bool = True) -> bytes:
        """Read one request (its body too unless `body` is False); its head."""
        head = await reader.readuntil(b"\r\n\r\n")
        self.requests += 1
        if body:
            await reader.readexactly(_length(head))
        return head

    async def think(self, reader: asyncio.StreamReader, seconds: float) -> None:
        """Take `seconds` to answer; a byte from the front door meanwhile is a second request on a busy
        connection, its end the front door leaving."""
        try:
            got = await asyncio.wait_for(reader.read(1), seconds)
        except TimeoutError:
            return
        if got:
            self.overlaps += 1
        else:
            self.left.append(time.monotonic())
        raise ConnectionError("not for this test")

    async def until_gone(self, reader: asyncio.StreamReader) -> None:
        while await reader.read(65536):
            pass
        self.left.append(time.monotonic())


def _length(head: bytes) -> int:
    return next(
        (int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")), 0
    )


def answering(answer: bytes, then: str = "keep"):
    """A script: each request gets `answer`; then the engine keeps the connection for the next, or closes it,
    resets it (a TCP reset) or waits until the front door leaves (`then`: keep, close, reset, hang)."""

    async def script(engine: ScriptEngine, reader, writer) -> None:
        while True:
            await engine.request(reader)
            writer.write(answer)
            await writer.drain()
            if then == "close":
                return
            if then == "reset":
                return _reset(writer)
            if then == "hang":
                return await engine.until_gone(reader)

    return script


def _reset(writer: asyncio.StreamWriter) -> None:
    writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


def chunked(*pieces: bytes, end: bytes = b"0\r\n\r\n") -> bytes:
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
        + b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces)
        + end
    )


def sized(body: bytes, status: bytes = b"200 OK", extra: bytes = b"", kind: bytes = b"application/json") -> bytes:
    return b"HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n%s\r\n%s" % (status, kind, len(body), extra, body)


WHOLE = json.dumps(
    {
        "id": "c1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}],
    }
).encode()
STREAM = chunked(*(event + b"\n\n" for event in EVENTS.split(b"\n\n") if event))


def ask(door_url: str, asked: dict = ASKED, timeout: float = 5) -> tuple[int | None, bytes, bool]:
    """(status, body, whether the body came whole) as an HTTP/1.1 client sees them; status None: no answer."""
    connection = http.client.HTTPConnection(door_url.removeprefix("http://"), timeout=timeout)
    try:
        connection.request("POST", "/v1/chat/completions", json.dumps(asked), {"Content-Type": "application/json"})
        response = connection.getresponse()
        try:
            return response.status, response.read(), True
        except http.client.IncompleteRead as err:
            return response.status, err.partial, False
    except (ConnectionError, http.client.RemoteDisconnected):
        return None, b"", False
    finally:
        connection.close()


def counted(door_url: str, expected: dict) -> None:
    """The front door counted exactly `expected`, nothing is in flight."""
    assert wait_for(lambda: outcomes(door_url) == expected and outcomes(door_url)), outcomes(door_url)
    assert total(door_url, "llm_frontdoor_requests_in_flight") == 0


GARBAGE = {  # what the engine sends; then it waits for the front door to leave, or closes where it says
    "not http": b"SSH-2.0-OpenSSH_9.6\r\n",
    "status then reset": b"HTTP/1.1 200 OK\r\n",
    "head cut": b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Enc",
    "duplicate content-length": sized(WHOLE, extra=b"Content-Length: %d\r\n" % len(WHOLE)),
    "length and chunked": STREAM.replace(b"chunked\r\n", b"chunked\r\nContent-Length: 5\r\n"),
    "huge head": b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * (4 << 20) + b"\r\nContent-Length: 0\r\n\r\n",
    "endless 103s": b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n" * 50000,
    "status 099": b"HTTP/1.1 099 Odd\r\nContent-Length: 0\r\n\r\n",
    "101 unasked": b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nxx",
}


@pytest.mark.parametrize("case", GARBAGE)
def test_an_answer_that_is_not_http_is_a_502_error_and_the_connection_is_closed(case):
    then = {"status then reset": "reset", "head cut": "close"}.get(case, "hang")
    with (
        serving(ScriptEngine(answering(GARBAGE[case], then=then))) as (engine_url, engine),
        frontdoor(engine_url) as (door_url, _),
    ):
        status, body, _ = ask(door_url)
        assert status == 502 and b"unreachable" in body
        counted(door_url, {("error", "502"): 1})
        assert ask(door_url)[0] == 502 and engine.connections == 2  # never kept
        assert wait_for(lambda: len(engine.left) == (2 if then == "hang" else 0))  # the front door hung up


ODD_BUT_WHOLE = {
    "lines ending in LF alone": (sized(EVENTS, kind=b"text/event-stream").replace(b"\r\n", b"\n"), 1),
    "spaces after a chunk's size": (STREAM.replace(b"\r\ndata", b"  \r\ndata"), 1),
    "chunk extensions": (STREAM.replace(b"\r\ndata", b';ext=1;q="a"\r\ndata'), 1),
    "trailers": (STREAM[:-2] + b"X-Checksum: 1\r\nX-Other: 2\r\n\r\n", 1),
    "103 then 100 first": (b"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\nHTTP/1.1 100 Continue\r\n\r\n" + STREAM, 1),
    "keep-alive, close": (STREAM.replace(b"chunked\r\n", b"chunked\r\nConnection: keep-alive, close\r\n"), 3),
    "close, keep-alive": (STREAM.replace(b"chunked\r\n", b"chunked\r\nConnection: Close , Keep-Alive\r\n"), 3),
    "http/1.0 keep-alive, sized": (
        sized(EVENTS, kind=b"text/event-stream", extra=b"Connection: keep-alive\r\n").replace(b"HTTP/1.1", b"HTTP/1.0"),
        1,
    ),
    "coded, not chunked": (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: identity\r\n\r\n" + EVENTS,
        3,
    ),
    "http/1.0 keep-alive, unsized": (
        b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\nConnection: keep-alive\r\n\r\n" + EVENTS,
        3,
    ),
}


@pytest.mark.parametrize("case", ODD_BUT_WHOLE)
def test_odd_but_valid_framing_passes_whole_and_is_kept_only_when_it_may_be(case):
    answer, connections = ODD_BUT_WHOLE[case]
    then = "keep" if connections == 1 else "close"
    with (
        serving(ScriptEngine(answering(answer, then=then))) as (engine_url, engine),
        frontdoor(engine_url) as (door_url, _),
    ):
        assert [ask(door_url) for _ in range(3)] == [(200, EVENTS, True)] * 3
        counted(door_url, {("ok", "200"): 3})
        assert engine.connections == connections


def test_bytes_after_a_sized_answer_are_not_passed_on_nor_is_the_connection_kept():
    """An engine that sends more than its Content-Length (here: a second, made-up answer right behind the
    first) is out of step: the client gets the sized answer, the connection is closed, not reused."""
    smuggled = sized(b'{"error": "not yours"}', status=b"500 Internal Server Error")
    with (
        serving(ScriptEngine(answering(sized(WHOLE) + smuggled))) as (engine_url, engine),
        frontdoor(engine_url) as (door_url, _),
    ):
        assert [ask(door_url) for _ in range(2)] == [(200, WHOLE, True)] * 2
        counted(door_url, {("ok", "200"): 2})
        assert engine.connections == 2


def test_an_answer_before_the_request_was_read_whole():
    """The engine answers as soon as it has the head, then reads the (large) body: the answer passes whole
    and the connection is kept only once the request is sent."""

    async def early(engine: ScriptEngine, reader, writer) -> None:
        while True:
            head = await engine.request(reader, body=False)
            writer.write(STREAM)
            await reader.readexactly(_length(head))

    big = dict(ASKED, padding="x" * (8 << 20))
    with serving(ScriptEngine(early)) as (engine_url, engine), frontdoor(engine_url) as (door_url, _):
        assert [ask(door_url, big), ask(door_url)] == [(200, EVENTS, True)] * 2
        counted(door_url, {("ok", "200"): 2})
        assert engine.connections <= 2 and engine.requests == 2


def test_an_engine_that_refuses_a_request_before_reading_its_body_is_heard():
    """It answers 413 and closes without reading the (large) body: the client gets the 413, not a 502."""

    async def refuse(engine: ScriptEngine, reader, writer) -> None:
        await engine.request(reader, body=False)
        writer.write(
            sized(
                b'{"error": {"message": "too long"}}', status=b"413 Payload Too Large", extra=b"Connection: close\r\n"
            )
        )
        await asyncio.sleep(0.05)  # then closes, the body unread: a reset

    big = dict(ASKED, padding="x" * (8 << 20))
    with serving(ScriptEngine(refuse)) as (engine_url, _), frontdoor(engine_url) as (door_url, _):
        assert [ask(door_url, big)[0] for _ in range(2)] == [413, 413]
        counted(door_url, {("invalid_request", "413"): 2})


@pytest.mark.parametrize("status, outcome", [(b"204 No Content", "error"), (b"304 Not Modified", "error")])
def test_a_bodiless_status_to_a_post_ends_at_once_and_is_kept(status, outcome):
    with (
        serving(ScriptEngine(answering(b"HTTP/1.1 %s\r\n\r\n" % status))) as (engine_url, engine),
        frontdoor(engine_url) as (door_url, _),
    ):
        assert [ask(door_url) for _ in range(2)] == [(int(status[:3]), b"", True)] * 2
        counted(door_url, {(outcome, status[:3].decode()): 2})
        assert engine.connections == 1


def test_a_kept_connection_reset_while_the_next_request_goes_out_is_retried_on_a_new_one():
    """The engine resets its kept connection when the next request's first bytes arrive."""

    async def reset_second(engine: ScriptEngine, reader, writer) -> None:
        await engine.request(reader)
        writer.write(STREAM)
        await reader.readexactly(1)
        _reset(writer)

    with serving(ScriptEngine(reset_second)) as (engine_url, engine), frontdoor(engine_url) as (door_url, _):
        assert [ask(door_url) for _ in range(3)] == [(200, EVENTS, True)] * 3
        counted(door_url, {("ok", "200"): 3})
        assert engine.connections == 3


SILENCES = {  # what the engine sends before it goes silent (and waits for the front door to leave)
    "nothing": b"",
    "the head": b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n",
    "half a chunk": STREAM[: STREAM.index(b"data: ") + 10],
    "half a sized body": sized(WHOLE)[:-5],
    "an unsized body": b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + EVENTS[:40],
}


@pytest.mark.parametrize("case", SILENCES)
def test_an_engine_gone_silent_is_cut_at_the_idle_timeout_and_never_looks_whole(case):
    with (
        serving(ScriptEngine(answering(SILENCES[case], then="hang"))) as (engine_url, engine),
        frontdoor(engine_url, idle_timeout=0.2) as (door_url, _),
    ):
        began = time.monotonic()
        status, _, whole = ask(door_url)
        assert time.monotonic() - began < 1
        if case == "nothing":
            assert (status, whole) == (504, True)
            counted(door_url, {("timeout", "504"): 1})
        else:
            assert (status, whole) == (200, False)
            counted(door_url, {("timeout", "200"): 1})
        assert wait_for(lambda: engine.left)


def test_a_tls_engine_that_never_handshakes_is_a_timeout_and_plain_http_is_a_502():
    with serving(ScriptEngine(answering(b"", then="hang"))) as (engine_url, _):
        with frontdoor(engine_url.replace("http:", "https:"), connect_timeout=0.2) as (door_url, _):
            began = time.monotonic()
            assert ask(door_url)[0] == 504 and time.monotonic() - began < 1
            counted(door_url, {("timeout", "504"): 1})

    async def refuse(engine: ScriptEngine, reader, writer) -> None:  # as a plain HTTP server meets TLS
        await reader.read(1)
        writer.write(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")

    with (
        serving(ScriptEngine(refuse)) as (engine_url, _),
        frontdoor(engine_url.replace("http:", "https:"), connect_timeout=2) as (door_url, _),
    ):
        assert ask(door_url)[0] == 502
        counted(door_url, {("error", "502"): 1})


async def echo_line(engine: ScriptEngine, reader, writer) -> None:
    """A script: answers each request with its request line and Host header, as JSON in a whole answer."""
    while True:
        lines = (await engine.request(reader)).decode().split("\r\n")
        host = next(line for line in lines if line.lower().startswith("host:"))
        writer.write(sized(json.dumps({"line": lines[0], "host": host[5:].strip()}).encode()))


@pytest.mark.parametrize(
    "host, upstream, path",
    [
        ("::1", "http://[::1]:{port}", "/v1/chat/completions"),
        ("127.0.0.1", "http://localhost:{port}", "/v1/chat/completions"),
        ("127.0.0.1", "http://127.0.0.1:{port}/prefix/", "/prefix/v1/chat/completions"),
    ],
)
def test_the_upstream_may_be_ipv6_a_hostname_or_have_a_path(host, upstream, path):
    with serving(ScriptEngine(echo_line), host=host) as (engine_url, engine):
        upstream = upstream.format(port=engine_url.rsplit(":", 1)[1])
        with frontdoor(upstream) as (door_url, _):
            status, body, _ = ask(door_url)
            assert status == 200
            assert json.loads(body) == {"line": f"POST {path} HTTP/1.1", "host": upstream.split("/")[2]}
            counted(door_url, {("error", "200"): 1})  # the echo is not a completion: judged an error


def test_concurrent_requests_never_share_a_connection_and_reuse_the_kept_ones():
    async def slow(engine: ScriptEngine, reader, writer) -> None:
        while True:
            await engine.request(reader)
            await engine.think(reader, 0.05)
            writer.write(STREAM)

    with (
        serving(ScriptEngine(slow)) as (engine_url, engine),
        frontdoor(engine_url) as (door_url, _),
        concurrent.futures.ThreadPoolExecutor(24) as pool,
    ):
        for _ in range(2):
            assert list(pool.map(lambda _: ask(door_url), range(24))) == [(200, EVENTS, True)] * 24
        counted(door_url, {("ok", "200"): 48})
        assert engine.overlaps == 0 and engine.left == [] and engine.requests == 48
        assert engine.connections <= 24


def _leave(door_url: str, engine: ScriptEngine, after: bytes) -> float:
    """A client that asks for ASKED and leaves once `after` came back (b"": once the request reached the engine);
    when."""
    with door_socket(door_url) as sock:
        seen = b""
        while after not in seen:
            seen += sock.recv(65536)
        wait_for(lambda: engine.requests)
        left = time.monotonic()
    return left


def _hold(door_url: str) -> float:
    """A client that reads a byte, then nothing for 0.3 s (the front door's relay pauses), then leaves; when."""
    with door_socket(door_url, rcvbuf=4096) as sock:
        sock.recv(1)
        time.sleep(0.3)  # the case itself: a client that stops reading; the relay's pause is not seen from outside
        left = time.monotonic()
    return left


@pytest.mark.parametrize("stage", ["before the head", "mid-body", "while the relay is paused"])
def test_a_client_that_leaves_closes_the_upstream_connection_at_once_and_is_counted_once(stage):
    endless = chunked(b"data: " + json.dumps(_chunk({"content": "x" * 2000})).encode() + b"\n\n", end=b"")

    async def script(engine: ScriptEngine, reader, writer) -> None:
        await engine.request(reader)
        if stage == "before the head":
            return await engine.until_gone(reader)
        head, _, piece = endless.partition(b"\r\n\r\n")
        writer.write(head + b"\r\n\r\n" + piece)
        if stage == "mid-body":
            return await engine.until_gone(reader)
        while True:  # as fast as the front door reads, for the client not reading
            writer.write(piece * 64)
            await writer.drain()

    with serving(ScriptEngine(script)) as (engine_url, engine), frontdoor(engine_url) as (door_url, door):
        left = {
            "before the head": lambda: _leave(door_url, engine, b""),
            "mid-body": lambda: _leave(door_url, engine, b"data: "),
            "while the relay is paused": lambda: _hold(door_url),
        }[stage]()
        assert wait_for(lambda: engine.left, timeout=1)[0] - left < 0.1
        counted(door_url, {("cancelled", "499" if stage == "before the head" else "200"): 1})
        assert sum(map(len, door.pool._idle.values())) == 0  # closed, not kept


def test_a_client_that_leaves_while_sending_its_request_is_counted_and_never_reaches_the_engine():
    with raw_engine("keep") as (engine_url, engine), frontdoor(engine_url) as (door_url, _):
        with socket.create_connection(("127.0.0.1", int(door_url.rsplit(":", 1)[1])), timeout=5) as sock:
            sock.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b'Content-Length: 100000\r\n\r\n{"model": "m", '
            )
            time.sleep(0.05)  # for the head to be read: a handler waiting for the body shows nothing outside
        counted(door_url, {("cancelled", "499"): 1})
        assert (engine.connections, engine.requests) == (0, 0)


CUTS = {  # what the engine sends before it resets the connection
    "chunked": STREAM[:-30],
    "sized": sized(WHOLE)[:-5],
    "unsized": b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + EVENTS[:-20],
}


@pytest.mark.parametrize("case", CUTS)
def test_an_answer_cut_by_a_reset_never_looks_whole(case):
    """A reset ends even an answer whose end is the connection's: the client's copy is cut too."""
    with (
        serving(ScriptEngine(answering(CUTS[case], then="reset"))) as (engine_url, _),
        frontdoor(engine_url) as (door_url, _),
    ):
        status, body, whole = ask(door_url)
        assert (status, whole) == (200, False) and body and (EVENTS.startswith(body) or WHOLE.startswith(body))
        counted(door_url, {("truncated", "200"): 1})


def test_the_retry_after_a_stale_kept_connection_goes_on_a_new_one():
    """Two kept connections the engine closes unanswered when the next request comes: the retry does not
    take the second stale one, it opens a new connection."""

    async def once(engine: ScriptEngine, reader, writer) -> None:
        await engine.request(reader)
        await engine.think(reader, 0.05)
        writer.write(STREAM)
        await engine.request(reader)  # the next request on it: closed unanswered

    with (
        serving(ScriptEngine(once)) as (engine_url, engine),
        frontdoor(engine_url) as (door_url, _),
        concurrent.futures.ThreadPoolExecutor(2) as pool,
    ):
        assert list(pool.map(lambda _: ask(door_url), range(2))) == [(200, EVENTS, True)] * 2
        assert ask(door_url) == (200, EVENTS, True)
        counted(door_url, {("ok", "200"): 3})
        assert (engine.connections, engine.requests) == (3, 4)


@pytest.mark.parametrize("then", ["close", "reset"])
def test_an_engine_that_hangs_up_on_connect_is_a_502(then):
    async def hang_up(engine: ScriptEngine, reader, writer) -> None:
        if then == "reset":
            _reset(writer)

    with serving(ScriptEngine(hang_up)) as (engine_url, engine), frontdoor(engine_url) as (door_url, _):
        assert [ask(door_url)[0] for _ in range(3)] == [502] * 3
        counted(door_url, {("error", "502"): 3})


def test_an_answer_complete_in_the_read_that_finds_the_client_behind_leaves_the_connection_kept():
    """The relay holds reading at the very read that completes the answer: the answer is whole, so the
    connection goes back to the pool all the same."""

    async def exchange(engine_url: str) -> int:
        pool = UpstreamPool(connect_timeout=2)
        for _ in range(2):
            conn = await pool.send(engine_url, "POST", "/v1/completions", [], b"{}", 5)
            conn.start(conn.pause)  # the client is behind at every read
            assert await conn.wait() == "complete"
            conn.finish()
        kept = sum(map(len, pool._idle.values()))
        pool.close()
        return kept

    with serving(ScriptEngine(answering(sized(WHOLE)))) as (engine_url, engine):
        assert asyncio.run(exchange(engine_url)) == 1
        assert engine.connections == 1
