"""The front door's own upstream client (frontdoor/_upstream.py) on what an engine's HTTP can do besides the
usual: connections kept and reused, one the engine closed while idle, `Connection: close`, an HTTP/1.0 answer
read to the connection's end, `100 Continue` first, an HTTP/1.0 client, and TLS. The engine here writes its
HTTP by hand, since aiohttp's server will not close a kept connection without answering."""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import subprocess
import threading
from contextlib import contextmanager

import pytest

from test_frontdoor import _sse, _chunk, frontdoor, outcomes, post_raw

EVENTS = b"".join(_sse(_chunk({"role": "assistant", "content": ""}), _chunk({"content": "Hi"}),
                       _chunk({}, "stop"))) + b"data: [DONE]\n\n"
ASKED = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}


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
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                await reader.readexactly(length)
                self.requests += 1
                if self.mode == "stale" and answered == 1:
                    break
                answered += 1
                writer.write(self._answer())
                await writer.drain()
                if self.mode in ("close", "http10"):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    def _answer(self) -> bytes:
        if self.mode == "http10":
            return b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + EVENTS
        framed = b"".join(b"%x\r\n%s\r\n" % (len(event + b"\n\n"), event + b"\n\n")
                          for event in EVENTS.split(b"\n\n") if event) + b"0\r\n\r\n"
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
        if self.mode == "close":
            head += b"Connection: close\r\n"
        first = b"HTTP/1.1 100 Continue\r\n\r\n" if self.mode == "continue" else b""
        return first + head + b"\r\n" + framed


@contextmanager
def raw_engine(mode: str, tls: ssl.SSLContext | None = None):
    """A RawEngine on a loopback port in a thread; yields (its base URL, the engine)."""
    engine, loop, ready, holder = RawEngine(mode), asyncio.new_event_loop(), threading.Event(), {}

    def run():
        asyncio.set_event_loop(loop)
        server = loop.run_until_complete(asyncio.start_server(engine.serve, "127.0.0.1", 0, ssl=tls))
        holder["port"] = server.sockets[0].getsockname()[1]
        ready.set()
        loop.run_forever()
        server.close()
        loop.run_until_complete(server.wait_closed())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(10)
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{holder['port']}", engine
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


def test_an_http10_client_gets_the_stream_unframed_to_the_connections_end():
    with raw_engine("keep") as (engine_url, _), frontdoor(engine_url) as (door_url, _):
        body = json.dumps(ASKED).encode()
        with socket.create_connection(("127.0.0.1", int(door_url.rsplit(":", 1)[1])), timeout=5) as sock:
            sock.sendall(b"POST /v1/chat/completions HTTP/1.0\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            answer = b""
            while data := sock.recv(65536):
                answer += data
        head, _, rest = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.0 200") and b"chunked" not in head.lower()
        assert rest == EVENTS
        assert outcomes(door_url) == {("ok", "200"): 1}


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    """A self-signed certificate for 127.0.0.1: (its PEM file, a server context that presents it)."""
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=engine",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
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
