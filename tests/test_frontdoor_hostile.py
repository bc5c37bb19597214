"""The front door against hostile clients on loopback: junk models and keys that would mint series, connections
that hold heads or sit idle, floods from one address, smuggled hop-by-hop headers, bytes that are not UTF-8,
huge fields for the access log, and paths that reach the engine's own /metrics. Each bound is configured small
and each test waits for the event (a close, a count), never for a time; loops are bounded."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from contextlib import ExitStack, contextmanager
from urllib.parse import unquote

import pytest
import requests
from aiohttp import web
from test_frontdoor import DOORS, FAKE, METRICS, _serving, frontdoor, outcomes, scrape, total, wait_for

from inferwatch.frontdoor import Limits
from inferwatch.frontdoor._labels import Callers, Models, load_keys
from inferwatch.frontdoor._metrics import worst_case_series
from inferwatch.frontdoor._paths import allowed, normalized, parse_allowed

REAL_KEY, REAL_MODEL = "sk-real", "real-model"
ASK = {"messages": [{"role": "user", "content": "hi"}]}


class StrictEngine:
    """An engine as vLLM with --api-key answers: 401 for a key it does not know, 404 for a model it does not
    serve; it lists its one model, echoes the headers it got on /v1/echo, and remembers the last request's."""

    def __init__(self):
        self.headers: list[tuple[str, str]] = []
        self.gate, self.waiting = threading.Event(), threading.Event()  # model `gated` waits for the gate

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.path == "/v1/models":
            return web.json_response({"object": "list", "data": [{"id": REAL_MODEL, "object": "model"}]})
        self.headers = list(request.headers.items())
        if request.path == "/v1/echo":
            return web.json_response(self.headers)
        if request.headers.get("Authorization") != f"Bearer {REAL_KEY}":
            return web.json_response({"error": {"message": "unauthorized"}}, status=401)
        body = await request.json()
        if body.get("model") == "gated":
            self.waiting.set()
            await asyncio.to_thread(self.gate.wait, 30)
        elif body.get("model") != REAL_MODEL:
            return web.json_response({"error": {"message": "no such model"}}, status=404)
        return web.Response(body=b"".join(FAKE["ok"][0]), content_type="text/event-stream")


@contextmanager
def strict_door(**options):
    """(front door URL, engine): a StrictEngine behind a front door."""
    engine = StrictEngine()

    async def starter():
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", engine.handle)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        return runner

    with _serving(starter) as (engine_url, _), frontdoor(engine_url, **options) as (url, _):
        yield url, engine


def _address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def _closed(sock: socket.socket) -> bytes:
    """What comes on `sock` until the front door closes it (the test's own timeout is only a safety net)."""
    answer = b""
    try:
        while piece := sock.recv(65536):
            answer += piece
    except ConnectionResetError:
        pass
    return answer


def _label_values(url: str, label: str) -> set[str]:
    return {dict(labels)[label] for (name, labels) in scrape(url) if label in dict(labels)}


# --- cardinality --------------------------------------------------------------------------------------------------


def test_junk_models_and_keys_mint_no_series_and_real_ones_are_still_labelled_after():
    """300 requests with junk keys (the engine's 401) and junk models (the front door's or the engine's 404) take
    no label slot: they count as `other`, and the real model and the real caller that come after keep their
    names. The series stay under the documented worst case for the values the door knows."""
    with strict_door(max_models=50, max_callers=20) as (url, _), requests.Session() as http:
        for i in range(300):
            key = REAL_KEY if i % 3 == 0 else f"sk-junk-{i}"
            answer = http.post(
                url + "/v1/chat/completions",
                json={"model": f"junk-{i}", **ASK},
                headers={"Authorization": f"Bearer {key}"},
                timeout=10,
            )
            assert answer.status_code in (401, 404)
        for i in range(100):  # other paths with junk keys: no series either
            http.get(url + f"/v1/models/junk-{i}", headers={"Authorization": f"Bearer sk-j{i}"}, timeout=10)
        real = http.post(
            url + "/v1/chat/completions",
            json={"model": REAL_MODEL, "stream": True, **ASK},
            headers={"Authorization": f"Bearer {REAL_KEY}"},
            timeout=10,
        )
        assert real.status_code == 200
        callers = Callers(None, "s", 20)
        real_caller = callers.name({"Authorization": f"Bearer {REAL_KEY}"})
        assert total(url, "llm_frontdoor_requests_total", model=REAL_MODEL, caller=real_caller, outcome="ok") == 1
        assert _label_values(url, "model") == {REAL_MODEL, "other"}
        assert _label_values(url, "caller") == {real_caller, "other"}
        page = requests.get(METRICS[url] + "/metrics", timeout=5).text
        # (`inferwatch frontdoor` serves no `_created` series; this test process does)
        series = [line for line in page.splitlines() if line and not line.startswith("#") and "_created" not in line]
        pairs = len(outcomes(url))
        # known: one model (+ unknown, other), one caller (+ anonymous, other), one upstream (+ none)
        assert len(series) <= worst_case_series(3, 3, 2, pairs) and len(page) < 200_000


def test_a_gateway_named_caller_and_a_listed_model_are_labelled_and_a_keys_file_names_callers():
    with strict_door(caller_header="X-Team", max_callers=2) as (url, _):
        for team in ("search", "ads", "mail"):
            requests.post(
                url + "/v1/chat/completions",
                json={"model": REAL_MODEL, **ASK},
                timeout=10,
                headers={"Authorization": f"Bearer {REAL_KEY}", "X-Team": team},
            )
        assert _label_values(url, "caller") == {"search", "ads", "other"}
    with strict_door(callers_file={REAL_KEY: "search"}) as (url, _):
        for key in (REAL_KEY, "sk-junk"):
            requests.post(
                url + "/v1/chat/completions",
                json={"model": REAL_MODEL, **ASK},
                timeout=10,
                headers={"Authorization": f"Bearer {key}"},
            )
        assert _label_values(url, "caller") == {"search", "other"}


# --- connections --------------------------------------------------------------------------------------------------


def test_an_unfinished_head_is_closed_at_the_head_timeout_and_an_oversized_one_at_once():
    with strict_door(limits=Limits(head_timeout=0.2, max_head=4096)) as (url, _):
        with socket.create_connection(_address(url), timeout=30) as slow:
            slow.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: door\r\nX-A: ")
            assert _closed(slow) == b""
        with socket.create_connection(_address(url), timeout=30) as large:
            try:
                large.sendall(b"POST /v1/chat/completions HTTP/1.1\r\n")
                for i in range(64):  # 64 lines of 100 bytes, each well under aiohttp's limit
                    large.sendall(b"X-H%02d: " % i + b"a" * 92 + b"\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass
            assert _closed(large) == b""
        wait_for(lambda: total(url, "llm_frontdoor_refused_total", reason="head_too_large") == 1)
        assert total(url, "llm_frontdoor_refused_total", reason="head_timeout") == 1
        # the door still answers
        assert requests.get(url + "/v1/models", timeout=10).status_code == 200


def test_an_idle_connection_new_or_kept_alive_is_closed_at_the_keepalive_timeout():
    with strict_door(limits=Limits(keepalive_timeout=0.2)) as (url, _):
        with socket.create_connection(_address(url), timeout=30) as idle:
            assert _closed(idle) == b""
        with socket.create_connection(_address(url), timeout=30) as kept:
            kept.sendall(b"GET /v1/models HTTP/1.1\r\nHost: door\r\n\r\n")
            assert _closed(kept).startswith(b"HTTP/1.1 200 ")
        wait_for(lambda: total(url, "llm_frontdoor_refused_total", reason="idle_timeout") == 2)


def test_a_request_in_progress_is_not_cut_by_the_head_or_idle_timeout():
    """The timeouts are for a connection waiting for a head: a request whose answer takes longer than both (the
    engine holds it until another connection, idle, was closed) is answered whole."""
    with (
        strict_door(limits=Limits(head_timeout=0.05, keepalive_timeout=0.1)) as (url, engine),
        socket.create_connection(_address(url), timeout=30) as sock,
    ):
        body = json.dumps({"model": "gated", "stream": True, **ASK}).encode()
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: door\r\nAuthorization: Bearer sk-real\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body)
        )
        assert engine.waiting.wait(30)
        with socket.create_connection(_address(url), timeout=30) as clock:  # both timeouts pass
            assert _closed(clock) == b""
        engine.gate.set()
        answer = _closed(sock)
        assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b"data: [DONE]\n\n")
        assert total(url, "llm_frontdoor_refused_total", reason="idle_timeout") == 1
        assert total(url, "llm_frontdoor_refused_total", reason="head_timeout") == 0


def test_a_flood_from_one_address_is_refused_before_anyone_else_is():
    limits = Limits(max_connections=12, max_client_connections=5)
    with strict_door(limits=limits) as (url, _), ExitStack() as held:
        flood = [held.enter_context(socket.create_connection(_address(url), timeout=30)) for _ in range(5)]
        extra = held.enter_context(socket.create_connection(_address(url), timeout=30))
        head, _, text = _closed(extra).partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 503 ") and b"Content-Length: %d" % len(text) in head
        # another address (127.0.0.2 is loopback too) still gets in
        other = socket.create_connection(_address(url), timeout=30, source_address=("127.0.0.2", 0))
        with other:
            other.sendall(b"GET /v1/models HTTP/1.1\r\nHost: door\r\nConnection: close\r\n\r\n")
            assert _closed(other).startswith(b"HTTP/1.1 200 ")
        # all addresses together: the global limit
        for i in range(3, 10):
            held.enter_context(socket.create_connection(_address(url), timeout=30, source_address=(f"127.0.0.{i}", 0)))
        wait_for(lambda: _open_connections(url) == 12)
        late = held.enter_context(socket.create_connection(_address(url), timeout=30, source_address=("127.0.0.99", 0)))
        assert _closed(late).startswith(b"HTTP/1.1 503 ")
        assert total(url, "llm_frontdoor_refused_total", reason="client_connections") == 1
        assert total(url, "llm_frontdoor_refused_total", reason="connections") == 1
        for sock in flood:
            sock.close()


def _open_connections(url: str) -> int:
    return DOORS[url].guard.open


def _gated_head(body_extra: bytes = b"") -> bytes:
    body = json.dumps({"model": "gated", "stream": True, **ASK}).encode()
    return (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: door\r\nAuthorization: Bearer sk-real\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    ) + body_extra


def test_requests_sent_ahead_within_the_bound_are_answered_in_order():
    limits = Limits(max_pipelined=2)
    with strict_door(limits=limits) as (url, engine), socket.create_connection(_address(url), timeout=30) as sock:
        ahead = b"GET /v1/models HTTP/1.1\r\nHost: door\r\n\r\n"
        sock.sendall(_gated_head(ahead + ahead.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n")))
        assert engine.waiting.wait(30)
        engine.gate.set()
        answers = _closed(sock)
        assert answers.startswith(b"HTTP/1.1 200 ") and answers.count(b"HTTP/1.1 200 ") == 3, answers[:300]
        assert total(url, "llm_frontdoor_refused_total", reason="pipelined") == 0


@pytest.mark.parametrize("ahead", ["requests", "bytes"])
def test_a_client_sending_ahead_past_the_bound_is_closed_while_its_request_waits(ahead):
    """HTTP/1.1 pipelining: while the engine holds a request, its connection may queue --max-pipelined requests
    and --max-body + that many --max-head bytes; past either it is closed, and counted."""
    limits = Limits(max_pipelined=2, max_head=1024)
    with (
        strict_door(limits=limits, max_body=4096) as (url, engine),
        socket.create_connection(_address(url), timeout=30) as sock,
    ):
        try:
            sock.sendall(_gated_head())
            assert engine.waiting.wait(30)
            if ahead == "requests":
                sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: door\r\n\r\n" * 3)
            else:  # one unfinished header line, under aiohttp's own 8,190-byte limit, over 4096 + 2 x 1024
                sock.sendall(b"GET /v1/models HTTP/1.1\r\nX-A: " + b"a" * 7000)
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            assert _closed(sock) == b""
        finally:
            engine.gate.set()
        wait_for(lambda: total(url, "llm_frontdoor_refused_total", reason="pipelined") == 1)
        assert requests.get(url + "/v1/models", timeout=10).status_code == 200


def test_max_connections_is_lowered_to_what_the_open_files_limit_allows():
    import resource
    import subprocess
    import sys

    from inferwatch.frontdoor._guard import SPARE_FILES, check_aiohttp, fit_open_files

    check_aiohttp()  # the installed aiohttp has what the guard reads
    assert fit_open_files(Limits(), 1 << 16) == Limits()
    fitted = fit_open_files(Limits(max_connections=4096, max_client_connections=1024), 1024)
    assert (fitted.max_connections, fitted.max_client_connections) == ((1024 - SPARE_FILES) // 2,) * 2
    files = 200  # soft and hard: the door cannot raise it
    most = (files - SPARE_FILES) // 2
    with socket.socket() as s, socket.socket() as s2:
        s.bind(("127.0.0.1", 0))
        s2.bind(("127.0.0.1", 0))
        port, admin = s.getsockname()[1], s2.getsockname()[1]
    door = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "inferwatch",
            "frontdoor",
            "--upstream",
            "127.0.0.1:9",
            "--listen",
            f"127.0.0.1:{port}",
            "--metrics-listen",
            f"127.0.0.1:{admin}",
            "--models-refresh",
            "0",
            "--caller-salt",
            "x",
        ],
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (files, files)),
    )
    try:
        lines = []
        while not (lines and "open files at most" in lines[-1]):
            line = door.stderr.readline()
            assert line, "".join(lines)
            lines.append(line)
        assert f"serving at most {most} connections" in "".join(lines) and "Traceback" not in "".join(lines)
        url = f"http://127.0.0.1:{port}"
        with ExitStack() as held:
            for _ in range(most):
                held.enter_context(socket.create_connection(_address(url), timeout=30))
            late = held.enter_context(socket.create_connection(_address(url), timeout=30))
            assert _closed(late).startswith(b"HTTP/1.1 503 ")
    finally:
        door.terminate()
        door.wait(30)


# --- headers, the access log, paths -------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/echo", "/v1/chat/completions"])
def test_every_connection_field_and_proxy_connection_are_hop_by_hop(path):
    with strict_door() as (url, engine), socket.create_connection(_address(url), timeout=30) as sock:
        body = json.dumps({"model": REAL_MODEL, **ASK}).encode()
        sock.sendall(
            b"POST %s HTTP/1.1\r\nHost: door\r\nAuthorization: Bearer sk-real\r\nConnection: keep-alive\r\n"
            b"Connection: X-Secret, X-Other\r\nX-Secret: 1\r\nX-Other: 2\r\nProxy-Connection: keep-alive\r\n"
            b"X-Kept: 3\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (path.encode(), len(body), body)
        )
        assert _closed(sock).startswith(b"HTTP/1.1 200 ")
        names = {name.lower() for name, _ in engine.headers}
        assert "x-kept" in names and not names & {"x-secret", "x-other", "proxy-connection"}


def test_a_header_that_is_not_utf8_is_refused_not_forwarded_changed():
    with strict_door() as (url, engine), socket.create_connection(_address(url), timeout=30) as sock:
        sock.sendall(b"GET /v1/echo HTTP/1.1\r\nHost: door\r\nX-A: caf\xe9\r\nConnection: close\r\n\r\n")
        assert _closed(sock).startswith(b"HTTP/1.1 400 ")
        assert engine.headers == []
        assert total(url, "llm_frontdoor_refused_total", reason="bad_header") == 1


def test_every_client_field_of_the_access_log_is_capped_and_escaped(tmp_path):
    log = tmp_path / "access.jsonl"
    with strict_door(access_log=str(log)) as (url, _):
        requests.post(
            url + "/v1/chat/completions",
            json={"model": "m" * 900_000, **ASK},
            timeout=10,
            headers={"Authorization": f"Bearer {REAL_KEY}", "X-Request-Id": 'a"quote\\' + "r" * 8000},
        )
        requests.get(url + "/v1/" + "p" * 8000, timeout=10)
    lines = log.read_text().splitlines()
    assert len(lines) == 2 and all(len(line) < 4096 for line in lines)
    first, second = (json.loads(line) for line in lines)
    assert first["model"].endswith("...") and first["request_id"].startswith('a"quote\\')
    assert second["path"].endswith("...") and len(second["path"]) == 256 + 3


def test_the_front_doors_metrics_are_on_the_admin_listener_only():
    with strict_door() as (url, _):
        assert "llm_frontdoor_refused_total" in requests.get(METRICS[url] + "/metrics", timeout=5).text
        assert requests.get(url + "/metrics", timeout=5).status_code == 404
        assert requests.post(METRICS[url] + "/metrics", timeout=5).status_code == 405


# --- the pure parts -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sent, routed",
    [
        ("/v1/models", "/v1/models"),
        ("//v1//models", "/v1/models"),
        ("/%6detrics", "/metrics"),
        ("/v1/models/org%2Fname", "/v1/models/org/name"),
        ("/v1/a.b/..c", "/v1/a.b/..c"),
        ("/v1/../metrics", None),
        ("/v1/%2e%2e/metrics", None),
        ("/v1/%2E%2E%2Fmetrics", None),
        ("/./metrics", None),
        ("/v1/..", None),
        ("/v1\\..\\metrics", None),
        ("/v1/%5C..%5Cmetrics", None),
        ("/v1/%00", None),
    ],
)
def test_paths_are_routed_as_the_engine_reads_them(sent, routed):
    got = normalized(sent)
    assert (got and got[0]) == routed
    if got:
        assert "//" not in got[1] and unquote(got[1]).replace("//", "/") == routed


def test_only_allowed_paths_match_and_bad_patterns_are_refused():
    patterns = parse_allowed(["/v1/*", "/health"])
    assert [allowed(p, patterns) for p in ("/v1/x", "/v1/", "/v1", "/health", "/health/", "/healthz")] == [
        True,
        True,
        False,
        True,
        False,
        False,
    ]
    for bad in ("v1/*", "/v1*", "/*/x", "/../metrics"):
        with pytest.raises(ValueError, match="is not /PATH or /PREFIX/"):
            parse_allowed([bad])


def test_known_models_are_the_routes_then_the_listed_ones_up_to_the_limit():
    models = Models(("routed",), limit=3)
    assert [models(m) for m in ("routed", "a", None, "")] == ["routed", "other", "unknown", "unknown"]
    models.listed("up:1", ["a", "b", "c", None, 7, "x" * 300])
    assert models.known == {"routed", "a", "b"}
    models.listed("up:1", ["c"])  # the upstream now serves another
    assert models.known == {"routed", "c"}


def test_callers_are_known_by_gateway_keys_file_or_an_accepted_key(tmp_path):
    callers = Callers(None, "s", limit=1)
    first, second = (callers.name({"Authorization": f"Bearer sk-{i}"}) for i in (1, 2))
    assert callers.label(first) == "other" and callers.label(callers.name({})) == "anonymous"
    callers.accept(first)
    callers.accept(second)  # over the limit: stays other, first is not evicted
    assert (callers.label(first), callers.label(second)) == (first, "other")
    keys = tmp_path / "callers.yaml"
    keys.write_text("search: sk-1\nads: [sk-2, sk-3]\n")
    named = Callers(None, "s", limit=0, keys=load_keys(str(keys)))
    assert [named.label(named.name({"Authorization": f"Bearer sk-{i}"})) for i in (1, 3, 4)] == [
        "search",
        "ads",
        "other",
    ]
    for text, fault in (
        ("- sk-1\n", "a mapping of caller names"),
        ("a: sk-1\nb: sk-1\n", "a key of 'a' too"),
        ("other: sk-1\n", "not anonymous or other"),
        ("a: ''\n", "non-empty string"),
    ):
        keys.write_text(text)
        with pytest.raises(ValueError, match=fault):
            load_keys(str(keys))


def test_flag_mistakes_are_one_line_errors(tmp_path):
    import subprocess
    import sys

    def cli(*args):
        return subprocess.run(
            [sys.executable, "-m", "inferwatch", "frontdoor", "--upstream", "a:1", *args],
            capture_output=True,
            text=True,
            timeout=20,
        )

    for args, flag in (
        (["--allow-path", "metrics"], "--allow-path"),
        (["--max-head", "lots"], "--max-head"),
        (["--max-connections", "0"], "--max-connections"),
        (["--callers-file", str(tmp_path / "none.yaml")], "--callers-file"),
        (["--metrics-listen", "0.0.0.0:8080"], "--metrics-listen"),
    ):
        run = cli(*args)
        assert run.returncode == 2 and flag in run.stderr and "Traceback" not in run.stderr, run.stderr
