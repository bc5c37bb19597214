"""The normalizing exporter as a user runs it: a subprocess scraping good, dead, hanging and garbage targets."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import urllib.request

import pytest
from conftest import EXPOSITIONS, REAL_CAPTURES
from promtools import free_port, serve, wait_for

from inferwatch.exporters import split_families

_RELEASE = threading.Event()  # set when the module's exporter is gone


def _hang(handler):
    """A target that never answers while the exporter runs: longer than any --timeout, whatever the machine's
    speed (a fixed sleep would be a bet that the exporter gives up first)."""
    _RELEASE.wait()


def _garbage(handler):
    body = b"<html><body>upstream connect error</body></html>\n"
    handler.send_response(200)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def _error(handler):
    handler.send_error(503)


@pytest.fixture(scope="module")
def exporter():
    routes = {
        "/vllm/metrics": (REAL_CAPTURES / "vllm-0.11.0-hardware-aware-router.txt").read_text(),
        "/sglang/metrics": (EXPOSITIONS / "sglang-0.5.23.txt").read_text(),
        "/dcgm/metrics": (REAL_CAPTURES / "dcgm-exporter-4.4.1-4.6.0-lke-ai-conformance.txt").read_text(),
        "/hang/metrics": _hang,
        "/garbage/metrics": _garbage,
        "/error/metrics": _error,
    }
    with serve(routes) as base:
        port = free_port()
        dead = f"127.0.0.1:{free_port()}"
        args = [
            sys.executable,
            "-m",
            "inferwatch",
            "exporter",
            "normalize",
            "--listen",
            f"127.0.0.1:{port}",
            "--timeout",
            "1s",
            "--max-running-requests",
            "Qwen/Qwen1.5-0.5B-Chat=128",
            "--max-running-requests",
            "llama=64",
        ]
        for name in ("vllm", "sglang", "dcgm", "hang", "garbage", "error"):
            args += ["--target", f"{name}={base}/{name}/metrics"]
        args += ["--target", f"dead=http://{dead}"]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        url = f"http://127.0.0.1:{port}/metrics"
        try:
            wait_for(lambda: _get(url) is not None, timeout=20)
            yield url, proc
        finally:
            proc.terminate()
            proc.wait(10)
            _RELEASE.set()


def _get(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.read().decode()
    except OSError:
        return None


def _samples(text):
    return {(s.name, tuple(sorted(s.labels))): s.value for f in split_families(text) for s in f.samples()}


def test_bad_targets_never_take_the_exporter_down_or_make_it_hang(exporter):
    url, proc = exporter
    start = time.perf_counter()
    text = _get(url)
    elapsed = time.perf_counter() - start
    assert elapsed < 3, "a hanging target must be cut at its timeout, concurrently"
    samples = _samples(text)  # parses: valid exposition
    fams = split_families(text)
    assert len({f.name for f in fams}) == len(fams), "one HELP/TYPE per family across targets"
    up = {dict(labels)["target"]: v for (n, labels), v in samples.items() if n == "inferwatch_exporter_target_up"}
    assert up == {
        "vllm": "1.0",
        "sglang": "1.0",
        "dcgm": "1.0",
        "hang": "0.0",
        "garbage": "0.0",
        "error": "0.0",
        "dead": "0.0",
    }
    errors = {
        dict(labels)["target"]: dict(labels)["kind"]
        for (n, labels), _ in samples.items()
        if n == "inferwatch_exporter_target_last_error_timestamp_seconds"
    }
    assert errors == {"hang": "timeout", "garbage": "parse", "error": "http", "dead": "connect"}
    assert not any("message" in dict(labels) for n, labels in samples), "messages churn series: they go to the log only"
    assert proc.poll() is None


def test_union_of_targets_in_the_vocabulary(exporter):
    url, _ = exporter
    samples = _samples(_get(url))
    running = {
        dict(labels)["target"]: dict(labels)["engine"]
        for (n, labels), _ in samples.items()
        if n == "llm_requests_running"
    }
    assert running == {"vllm": "vllm", "sglang": "sglang"}
    assert any(n == "gpu_utilization_ratio" and dict(labels)["target"] == "dcgm" for n, labels in samples)
    caps = {dict(labels)["model"]: v for (n, labels), v in samples.items() if n == "llm_max_running_requests"}
    assert caps == {"Qwen/Qwen1.5-0.5B-Chat": "128.0", "llama": "64.0"}
    series_in = {
        dict(labels)["target"]: float(v)
        for (n, labels), v in samples.items()
        if n == "inferwatch_exporter_target_series_in"
    }
    assert series_in["vllm"] == 379
    # what LLMEngineTargetDown reads to name an engine behind the exporter and to leave its GPU target out
    sources = {
        (dict(labels)["target"], dict(labels)["source"])
        for (n, labels), _ in samples.items()
        if n == "inferwatch_exporter_target_source_info"
    }
    assert sources == {("vllm", "vllm"), ("sglang", "sglang"), ("dcgm", "dcgm")}


def test_failures_are_logged(exporter):
    url, proc = exporter
    _get(url)
    proc.terminate()
    out = proc.communicate(timeout=10)[0]
    assert "target hang" in out and "timeout" in out
    assert "target dead" in out and "cannot connect" in out
    assert "target garbage" in out and "line 1:" in out
    assert "Traceback" not in out


def test_bad_flags_get_one_clear_line():
    proc = subprocess.run(
        [sys.executable, "-m", "inferwatch", "exporter", "normalize", "--target", "ftp://x", "--listen", "127.0.0.1:1"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "not an http(s) URL" in proc.stderr and "Traceback" not in proc.stderr
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "inferwatch",
            "exporter",
            "normalize",
            "--target",
            "localhost:8000",
            "--max-running-requests",
            "llama",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "MODEL=N" in proc.stderr


def test_config_file_errors_name_file_and_field(tmp_path):
    cfg = tmp_path / "exporter.yaml"
    cfg.write_text("targets:\n  - url: http://localhost:8000\nmax_running_requests:\n  llama: lots\ntimeoutt: 5s\n")
    proc = subprocess.run(
        [sys.executable, "-m", "inferwatch", "exporter", "normalize", "--config", str(cfg)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert f"{cfg}:4: max_running_requests.llama: expected a positive number" in proc.stderr
    assert f"{cfg}:5: timeoutt: unknown key" in proc.stderr
