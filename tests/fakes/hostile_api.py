"""A hostile fake of Prometheus, Alertmanager and Grafana: one loopback HTTP server whose answers are broken in a
chosen way (`MODES`), for the paths a predicate picks; every other path answers like a healthy, empty server.

    with hostile_server("gzip_bomb", lambda path: path != "/api/v1/status/buildinfo") as url:
        ...   # run inferwatch triage / doctor against url

Every endless answer (a trickle, a huge body, silence) is a bounded loop that stops when the client hangs up or
after `STALL_S`, so a client without a deadline shows up as a test timeout rather than a stuck suite.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import socket
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from promtools import serving

STALL_S = 120.0  # the longest an endless answer lasts; far past any deadline the tests give
TRICKLE_S = 0.05  # one byte this often

_SAMPLE = [1764496800, "1"]


def _prom(data) -> bytes:
    return json.dumps({"status": "success", "data": data}).encode()


def _vector(result) -> bytes:
    return _prom({"resultType": "vector", "result": result})


# Valid JSON of the wrong shape: each is what a broken proxy, an old or foreign server, or a hostile one answered.
SHAPES: dict[str, bytes] = {
    "null": b"null",
    "empty_list": b"[]",
    "number": b"42",
    "string": b'"hello"',
    "status_only": b'{"status": "success"}',
    "status_error": b'{"status": "error", "errorType": "bad_data", "error": "nope"}',
    "status_number": b'{"status": 7, "data": {}}',
    "data_null": _prom(None),
    "data_list": _prom([1, 2]),
    "data_string": _prom("x"),
    "result_null": _prom({"resultType": "vector", "result": None}),
    "result_string": _prom({"resultType": "vector", "result": "x"}),
    "result_type_string": _prom({"resultType": "string", "result": [1, "x"]}),
    "result_type_bogus": _prom({"resultType": {"a": 1}, "result": []}),
    "metric_null": _vector([{"metric": None, "value": _SAMPLE}]),
    "metric_list": _vector([{"metric": ["model"], "value": _SAMPLE}]),
    "metric_nested": _vector([{"metric": {"model": {"x": 1}}, "value": _SAMPLE}]),
    "half_sample": _vector([{"metric": {"model": "m"}, "value": [1764496800]}]),
    "sample_nested": _vector([{"metric": {"model": "m"}, "value": [1764496800, [["1"]]]}]),
    "sample_number_value": _vector([{"metric": {"model": "m"}, "value": [1764496800, 1]}]),
    "sample_text_value": _vector([{"metric": {"model": "m"}, "value": [1764496800, "lots"]}]),
    "series_null": _vector([None]),
    "matrix_half": _prom({"resultType": "matrix", "result": [{"metric": {"model": "m"}, "values": [[1]]}]}),
    "matrix_values_null": _prom({"resultType": "matrix", "result": [{"metric": {"model": "m"}, "values": None}]}),
    "vector_as_matrix": _prom({"resultType": "matrix", "result": [{"metric": {"model": "m"}, "value": _SAMPLE}]}),
    "targets_null": _prom({"activeTargets": None, "groups": None, "activeAlertmanagers": None, "yaml": None}),
    "targets_items_wrong": _prom(
        {
            "activeTargets": [{"labels": None, "health": 1}],
            "groups": [{"rules": None}],
            "activeAlertmanagers": "x",
            "yaml": 5,
        }
    ),
    "grafana_wrong": b'[{"uid": ["x"]}, 5, null]',
}

# Broken HTTP: (status, headers, body) or a callable writing to the socket itself.
_HTML = b"<html><body><h1>Bad Gateway</h1>" + b"<p>upstream unavailable</p>" * 50 + b"</body></html>"


def gzip_bomb(inflated: int = 1 << 30, members: bool = True) -> bytes:
    """`inflated` zero bytes as gzip (~1 MiB for 1 GiB): one MiB compressed once and repeated as gzip members
    (fast to build, and valid gzip), or one member holding all of it (`members=False`, slow to build)."""
    if members:
        return gzip.compress(bytes(1 << 20), 9) * (inflated >> 20)
    out = io.BytesIO()
    zeros = bytes(1 << 20)
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=9) as file:
        for _ in range(inflated >> 20):
            file.write(zeros)
    return out.getvalue()


_BOMB: list[bytes] = []


def bomb() -> bytes:
    if not _BOMB:
        _BOMB.append(gzip_bomb())
    return _BOMB[0]


def _send(sock: socket.socket, data: bytes) -> bool:
    try:
        sock.sendall(data)
        return True
    except OSError:
        return False


def _trickle(handler: BaseHTTPRequestHandler) -> None:
    """A valid header, then a JSON body one byte every TRICKLE_S: no read ever waits long, the whole never ends."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000000\r\n\r\n"
    if not _send(handler.connection, head + b'{"status": "success", "data": '):
        return
    end = time.monotonic() + STALL_S
    while time.monotonic() < end and _send(handler.connection, b" "):
        time.sleep(TRICKLE_S)


def _trickle_head(handler: BaseHTTPRequestHandler) -> None:
    """The status line and headers themselves, one byte at a time."""
    end = time.monotonic() + STALL_S
    for byte in b"HTTP/1.1 200 OK\r\n" + b"X-Slow: " + b"a" * 100000:
        if time.monotonic() > end or not _send(handler.connection, bytes([byte])):
            return
        time.sleep(TRICKLE_S)


def _silent(handler: BaseHTTPRequestHandler) -> None:
    """Read the request, answer nothing until the client hangs up."""
    handler.connection.settimeout(STALL_S)
    with contextlib.suppress(OSError):
        handler.connection.recv(1)


def _huge(handler: BaseHTTPRequestHandler) -> None:
    """A close-delimited JSON list that never ends (fast), until the client hangs up."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
    piece = b"[" + b"0," * 32767
    if not _send(handler.connection, head):
        return
    end = time.monotonic() + STALL_S
    sent = 0
    while time.monotonic() < end and sent < 8 << 30 and _send(handler.connection, piece):
        sent += len(piece)


def _truncated(handler: BaseHTTPRequestHandler) -> None:
    body = _vector([{"metric": {"model": "m"}, "value": _SAMPLE}])
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body) + 500}\r\n\r\n"
    _send(handler.connection, head.encode() + body)


def _truncated_chunked(handler: BaseHTTPRequestHandler) -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    _send(handler.connection, head + b"10\r\n" + b'{"status": "succ')


def _gzip(handler: BaseHTTPRequestHandler) -> None:
    data = bomb()
    head = (
        f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
        f"Content-Length: {len(data)}\r\n\r\n"
    ).encode()
    _send(handler.connection, head + data)


def _gzip_corrupt(handler: BaseHTTPRequestHandler) -> None:
    data = b"\x1f\x8b\x08\x00" + b"not gzip at all" * 10
    head = (
        f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
        f"Content-Length: {len(data)}\r\n\r\n"
    ).encode()
    _send(handler.connection, head + data)


def _deflate_nested(handler: BaseHTTPRequestHandler) -> None:
    """100k-deep JSON, compressed: small on the wire, deep once parsed."""
    data = zlib.compress(b"[" * 100_000 + b"]" * 100_000)
    head = (
        f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: deflate\r\n"
        f"Content-Length: {len(data)}\r\n\r\n"
    ).encode()
    _send(handler.connection, head + data)


def _bad_status_line(handler: BaseHTTPRequestHandler) -> None:
    _send(handler.connection, b"SPDY/9 banana\r\n\r\n")


def _reset(handler: BaseHTTPRequestHandler) -> None:
    handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    handler.connection.close()


RAW = {
    "trickle_body": _trickle,
    "trickle_head": _trickle_head,
    "silent": _silent,
    "huge_body": _huge,
    "truncated": _truncated,
    "truncated_chunked": _truncated_chunked,
    "gzip_bomb": _gzip,
    "gzip_corrupt": _gzip_corrupt,
    "deep_json_deflate": _deflate_nested,
    "bad_status_line": _bad_status_line,
    "reset": _reset,
}

ANSWERS: dict[str, tuple[int, dict, bytes]] = {
    "deep_json": (200, {"Content-Type": "application/json"}, b"[" * 100_000 + b"]" * 100_000),
    "deep_object": (200, {"Content-Type": "application/json"}, b'{"a":' * 100_000 + b"1" + b"}" * 100_000),
    "html_500": (500, {"Content-Type": "text/html"}, _HTML),
    "html_503": (503, {"Content-Type": "text/html"}, _HTML),
    "html_200": (200, {"Content-Type": "text/html"}, _HTML),
    "json_as_text": (200, {"Content-Type": "text/plain"}, b"null"),
    "empty_200": (200, {"Content-Type": "application/json"}, b""),
    "not_utf8": (200, {"Content-Type": "application/json"}, b'{"status": "\xff\xfe"}'),
    "nan_json": (200, {"Content-Type": "application/json"}, b"NaN"),
    "unauthorized": (401, {"Content-Type": "text/plain", "WWW-Authenticate": "Bearer"}, b"no token\n"),
    "redirect_loop": (302, {"Location": "/loop"}, b""),
    "redirect_ftp": (302, {"Location": "ftp://example.invalid/x"}, b""),
    "unknown_encoding": (200, {"Content-Type": "application/json", "Content-Encoding": "br"}, b"\x00\x01"),
    **{name: (200, {"Content-Type": "application/json"}, body) for name, body in SHAPES.items()},
}

MODES = sorted([*ANSWERS, *RAW])


def healthy(path: str) -> bytes:
    """A healthy, empty server: Prometheus with no series, targets or rules; Alertmanager; Grafana."""
    if path == "/api/v1/status/buildinfo":
        return _prom({"version": "2.53.0"})
    if path in ("/api/v1/query", "/api/v1/query_range"):
        return _prom({"resultType": "vector" if path.endswith("query") else "matrix", "result": []})
    return _prom({"activeTargets": [], "groups": [], "activeAlertmanagers": [], "yaml": "scrape_configs: []\n"})


def _handler(mode: str, hostile):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet
            pass

        def do_GET(self):  # noqa: N802 - http.server's name
            path = urlsplit(self.path).path
            if not hostile(path):
                self._answer(200, {"Content-Type": "application/json"}, healthy(path))
            elif mode in RAW:
                RAW[mode](self)
                self.close_connection = True
            else:
                self._answer(*ANSWERS[mode])

        def _answer(self, status: int, headers: dict, body: bytes) -> None:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            with contextlib.suppress(OSError):
                self.wfile.write(body)

    return Handler


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address):  # a client hanging up mid-answer is expected here
        pass


@contextlib.contextmanager
def hostile_server(mode: str, hostile=lambda path: True):
    """A server answering `mode` on the paths `hostile(path)` picks, healthily elsewhere; yields its base URL."""
    with serving(_QuietServer(("127.0.0.1", 0), _handler(mode, hostile))) as base:
        yield base
