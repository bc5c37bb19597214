"""Running the real Prometheus and promtool in tests: a loopback fixture server and a Prometheus around it."""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import yaml

from inferwatch.sim._demo import free_port


@contextmanager
def serve(routes: dict[str, object]):
    """Serve {path: text or callable(handler)} on loopback; yields the base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            route = routes.get(self.path)
            if route is None:
                self.send_error(404)
                return
            if callable(route):
                route(self)
                return
            body = route.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    with serving(ThreadingHTTPServer(("127.0.0.1", 0), Handler)) as base:
        yield base


@contextmanager
def serving(server: ThreadingHTTPServer):
    """Run `server` (bound on loopback) in a thread; yields its base URL and shuts it down after."""
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


# How long any wait of the tests may last: a deadline for a busy CI machine (load 40 here made Prometheus answer a
# query after 10 s and start after 30), never a measure of speed; a test that passes never waits for it.
PATIENCE = 120


def query(base: str, expr: str) -> list[dict]:
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=PATIENCE) as resp:
        data = json.load(resp)
    assert data["status"] == "success", data
    return data["data"]["result"]


def wait_ready(base: str, path: str, proc: subprocess.Popen, log: Path, timeout: float = PATIENCE) -> None:
    deadline = time.time() + timeout
    while True:
        try:
            urllib.request.urlopen(base + path, timeout=1)
            return
        except OSError:
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"{proc.args[0]} did not start: {log.read_text()[-3000:]}") from None
            time.sleep(0.1)


@contextmanager
def process(args: list[str], log: Path, ready: str | None = None, ready_path: str = "/health"):
    """A real server process logging to `log`; waits for `ready` + `ready_path` to answer, stops it after."""
    out = open(log, "w")
    proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    try:
        if ready:
            wait_ready(ready, ready_path, proc, log)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        out.close()


@contextmanager
def prometheus(binary: str, config: dict, workdir: Path, flags: tuple[str, ...] = ()):
    """A real Prometheus server on loopback with `config` (and extra command-line `flags`); yields its base URL."""
    port = free_port()
    cfg = workdir / "prometheus.yml"
    cfg.write_text(yaml.safe_dump(config, sort_keys=False))
    base = f"http://127.0.0.1:{port}"
    with process(
        [
            binary,
            f"--config.file={cfg}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            *flags,
        ],
        workdir / "prometheus.log",
        base,
        "/-/ready",
    ):
        yield base


def wait_for(predicate, timeout: float = PATIENCE, step: float = 0.3):
    """`predicate()`'s first truthy value, asked every `step` seconds until `timeout` (a deadline)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise AssertionError("condition not met in time")


def create_blocks(openmetrics: Path, data_dir: Path, *flags: str, timeout: float = 900) -> None:
    """OpenMetrics history (with timestamps) into TSDB blocks under data_dir, for a Prometheus started on it."""
    data_dir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        ["promtool", "tsdb", "create-blocks-from", "openmetrics", *flags, str(openmetrics), str(data_dir)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode:
        raise RuntimeError(f"promtool could not load {openmetrics}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}")


_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
_DURATION = re.compile(r"(?:\d+(?:ms|[smhdwy]))+")


def _scaled(duration: str, factor: float) -> str:
    seconds = sum(int(n) * _UNITS[u] for n, u in re.findall(r"(\d+)(ms|[smhdwy])", duration)) / factor
    return f"{seconds:g}s" if seconds == int(seconds) else f"{round(seconds * 1000)}ms"


def compress_durations(text: str, factor: float) -> str:
    """A rule file with time run `factor` times faster: every range and subquery (`[5m]`, `[30m:1m]`), `offset`,
    `for:` and group `interval:` divided by `factor`. Right for rules whose thresholds are rates per second,
    ratios and means (a window's length does not change them), as the operational alerts' are; not for rules that
    count events per fixed window (the SLO rules' `increase1m`, `rate(...) * 60`)."""
    scale = lambda m: _scaled(m.group(0), factor)  # noqa: E731 - one use, three places
    text = re.sub(r"\[([^\]\[]*)\]", lambda m: "[" + _DURATION.sub(scale, m.group(1)) + "]", text)
    text = re.sub(r"(\boffset\s+)(" + _DURATION.pattern + ")", lambda m: m.group(1) + _scaled(m.group(2), factor), text)
    return re.sub(
        r"(?m)^(\s*(?:for|interval):\s*)(" + _DURATION.pattern + r")[ \t]*$",
        lambda m: m.group(1) + _scaled(m.group(2), factor),
        text,
    )
