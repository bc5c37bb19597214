"""The GPU exporter: a sampler thread runs the backend, scrapes serve its last complete pass.

A scrape never calls the backend: NVML can block for seconds on a sick GPU,
and a GPM pass needs a wait between its two samples. When the backend cannot
start (no driver, no NVML), the exporter keeps serving `gpu_exporter_up 0`,
logs why once, and tries again every `retry` seconds.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from inferwatch import __version__
from inferwatch.errors import ListenError
from inferwatch.exporters.gpu._model import Snapshot
from inferwatch.exporters.gpu._render import render_health, render_snapshot
from inferwatch.mappings import Catalog, load_catalog

__all__ = ["GpuExporter"]

log = logging.getLogger("inferwatch.exporter.gpu")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# The HTTP server's bounds (one thread per connection, so connections are threads): a client idle this long
# is closed, at most this many connections are served at once (more are closed at once), and an admin body
# over this size is refused.
IDLE_TIMEOUT = 10.0
MAX_CONNECTIONS = 64
MAX_ADMIN_BODY = 65536


class GpuExporter:
    """Runs `backend` every `interval` seconds in a thread; `serve()` answers /metrics from the last pass."""

    def __init__(
        self,
        backend,
        interval: float = 1.0,
        catalog: Catalog | None = None,
        retry: float = 30.0,
        stale_after: float | None = None,
        idle_timeout: float = IDLE_TIMEOUT,
        max_connections: int = MAX_CONNECTIONS,
    ):
        self.backend, self.interval, self.retry = backend, interval, retry
        self.idle_timeout, self.max_connections = idle_timeout, max_connections
        # A pass older than this is not served as live: one interval late plus 5 s for a slow NVML call or a
        # follow read at its deadline. Past it the GPU series go and gpu_exporter_up is 0 (a frozen sampler).
        self.stale_after = stale_after if stale_after is not None else 2 * interval + 5.0
        self.catalog = catalog or load_catalog()
        self.snapshot = Snapshot(False, error="starting")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._errors: dict[str, int] = {}
        self._started = False
        self._last_error: str | None = None

    # -- sampling -----------------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="inferwatch-gpu-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.interval + 5)
        if self._started:
            self.backend.close()

    def step(self) -> Snapshot:
        """One pass (or one start attempt); what the thread does in a loop, callable from tests."""
        if not self._started:
            try:
                self.backend.start()
            except Exception as err:  # noqa: BLE001 - pynvml.NVMLError and OSError alike: serve the gap
                self._fail("init", f"cannot start {self.backend.name}: {type(err).__name__}: {err}")
                return self.snapshot
            self._started = True
            log.info("%s backend started", self.backend.name)
        try:
            snapshot = self.backend.sample(self.interval)
        except Exception as err:  # noqa: BLE001 - a driver gone mid-run: restart it on the next pass
            self._fail("backend", f"{self.backend.name} sampling failed: {type(err).__name__}: {err}")
            self.backend.close()
            self._started = False
            return self.snapshot
        if self._last_error is not None:
            log.info("%s backend is back", self.backend.name)
            self._last_error = None
        self.snapshot = replace(snapshot, errors={**self._errors, **snapshot.errors})
        return self.snapshot

    def _fail(self, kind: str, message: str) -> None:
        self._errors[kind] = self._errors.get(kind, 0) + 1
        if message != self._last_error:
            log.error("%s; serving gpu_exporter_up 0, retrying every %gs", message, self.retry)
        self._last_error = message
        self.snapshot = self._health(self.snapshot, message, dict(self._errors))

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.step()
            except Exception:  # noqa: BLE001 - the sampler must outlive any bug in one pass
                log.exception("sampling pass failed")
            if not self._started:
                self._stop.wait(self.retry)

    # -- serving ------------------------------------------------------------------------------------------

    def render(self) -> str:
        start = time.monotonic()
        snapshot = self._live(self.snapshot)  # one reference read: a consistent pass
        body = render_snapshot(snapshot, self.catalog)
        return body + render_health(snapshot, time.time(), time.monotonic() - start, self.backend.name)

    def _live(self, snapshot: Snapshot) -> Snapshot:
        """The snapshot, or, when its pass is older than `stale_after`, its health without its GPU values."""
        if not snapshot.up or not snapshot.taken_at or time.time() - snapshot.taken_at <= self.stale_after:
            return snapshot
        return replace(
            self._health(snapshot, f"the last pass is over {self.stale_after:g}s old (sampler stuck)", snapshot.errors),
            taken_at=snapshot.taken_at,
            duration=snapshot.duration,
        )

    @staticmethod
    def _health(snapshot: Snapshot, error: str, errors: dict[str, int]) -> Snapshot:
        """A down snapshot with no pass (no age, no duration, no GPU), keeping the attribution health of
        `snapshot`: a counter never goes back."""
        return Snapshot(
            False,
            error=error,
            errors=errors,
            pod_list_errors=snapshot.pod_list_errors,
            pod_resources_errors=snapshot.pod_resources_errors,
            pod_resources_up=snapshot.pod_resources_up,
        )

    def admin(self, path: str, body: bytes | None) -> tuple[int, dict]:
        """GET/POST /admin/scenario for backends that have scenarios (the simulated one)."""
        if path != "/admin/scenario" or not hasattr(self.backend, "scenario"):
            return 404, {"error": "not found"}
        if body is not None:
            try:
                self.backend.set_scenario(json.loads(body)["scenario"])
            except (ValueError, KeyError, TypeError, RecursionError) as err:
                return 400, {"error": f'give {{"scenario": one of {", ".join(self.backend.scenarios)}}}: {err}'}
        return 200, {"scenario": self.backend.scenario, "scenarios": list(self.backend.scenarios)}

    def server(
        self, host: str, port: int, idle_timeout: float = IDLE_TIMEOUT, max_connections: int = MAX_CONNECTIONS
    ) -> ThreadingHTTPServer:
        """A bound HTTP server (not yet serving); a failed bind is a ListenError."""
        exporter = self
        slots = threading.BoundedSemaphore(max_connections)

        class Server(ThreadingHTTPServer):
            def process_request(self, request, client_address):
                if not slots.acquire(blocking=False):  # over the limit: close it, keep serving the others
                    exporter._errors["connections_refused"] = exporter._errors.get("connections_refused", 0) + 1
                    self.shutdown_request(request)
                    return
                try:
                    super().process_request(request, client_address)
                except BaseException:
                    slots.release()
                    raise

            def process_request_thread(self, request, client_address):
                try:
                    super().process_request_thread(request, client_address)
                finally:
                    slots.release()

        class Handler(BaseHTTPRequestHandler):
            timeout = idle_timeout  # an idle or slow client is closed, its thread ends

            def _send(self, status: int, body: bytes, ctype: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):  # noqa: N802 - http.server's name
                if self.path == "/metrics":
                    self._send(200, exporter.render().encode(), CONTENT_TYPE)
                elif self.path == "/healthz":
                    self._send(200, b"ok\n", "text/plain")
                elif self.path == "/":
                    self._send(
                        200,
                        f"inferwatch GPU exporter {__version__} ({exporter.backend.name})\n/metrics\n".encode(),
                        "text/plain",
                    )
                else:
                    self._answer(None)

            def do_POST(self):  # noqa: N802
                text = (self.headers.get("Content-Length") or "0").strip()
                if not text.isdigit() or int(text) > MAX_ADMIN_BODY:
                    self.close_connection = True
                    self._send(
                        400,
                        json.dumps(
                            {"error": f"Content-Length must be 0 to {MAX_ADMIN_BODY}, got {text[:40]!r}"}
                        ).encode()
                        + b"\n",
                        "application/json",
                    )
                    return
                self._answer(self.rfile.read(int(text)))

            def _answer(self, body: bytes | None) -> None:
                status, doc = exporter.admin(self.path, body)
                self._send(status, json.dumps(doc).encode() + b"\n", "application/json")

            def log_message(self, *args):
                pass

        try:
            server = Server((host, port), Handler)
        except OSError as err:
            raise ListenError(host, port, err) from None
        server.daemon_threads = True
        return server

    def run(self, host: str, port: int) -> None:
        """Bind, start sampling, serve until interrupted."""
        server = self.server(host, port, self.idle_timeout, self.max_connections)
        self.start()
        log.info(
            "serving on http://%s:%d/metrics (%s backend, every %gs)", host, port, self.backend.name, self.interval
        )
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
            self.stop()
