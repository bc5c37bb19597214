"""inferwatch against a real vLLM: the vocabulary, the exporter, the relabel rules, the front door, and the facts a
simulator would guess (what a client's disconnect counts).

Every wait here is on a condition (an answer, a counter, a gauge back at zero) with a generous deadline: the
engine shares two cores with everything else, and one of its /metrics answers can take seconds.
"""

from __future__ import annotations

import http.client
import json
import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
import yaml
from conftest import ROOT, need
from engines import engine_url, shared_flags  # noqa: F401 - fixtures
from harness import free_port, get
from prometheus_client.parser import text_string_to_metric_families
from promtools import prometheus, query, wait_for

from inferwatch.mappings import renamed_by_relabel

pytestmark = pytest.mark.real_engine
PATIENCE = 300  # seconds: a deadline for conditions, never a measure of speed


def _post(url: str, body: dict, timeout: float = PATIENCE) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}")


def _model(url: str) -> str:
    status, body = get(url + "/v1/models")
    assert status == 200, status
    return json.loads(body)["data"][0]["id"]


def _samples(text: str) -> dict[tuple, float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _sum(samples: dict, name: str, **match) -> float:
    return sum(
        v for (n, labels), v in samples.items() if n == name and all(dict(labels).get(k) == w for k, w in match.items())
    )


def _metrics(url: str) -> str:
    status, body = get(url + "/metrics", timeout=PATIENCE)
    assert status == 200, status
    return body.decode()


def _chat(url: str, model: str, **body) -> tuple[int, dict]:
    return _post(
        url + "/v1/chat/completions",
        {"model": model, "messages": [{"role": "user", "content": "Say something."}], **body},
    )


def _until(predicate, what: str):
    deadline = time.monotonic() + PATIENCE
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"not seen within {PATIENCE} s: {what}"
        time.sleep(0.5)
    return value


def test_every_vllm_family_is_mapped_or_deliberately_ignored(engine_url, mappings):
    """A family a new vLLM brings fails here until the mapping maps it or lists it under `ignored` with a reason."""
    model = _model(engine_url)
    assert _chat(engine_url, model, max_tokens=4)[0] == 200
    text = _metrics(engine_url)
    vllm = next(m for m in mappings if m.source == "vllm")
    known = set(vllm.source_names()) | set(dict(vllm.ignored))
    real = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}
    real = {name for name in real if name.startswith("vllm:") and not name.endswith("_created")}
    assert real, "no vllm: family in the engine's /metrics"
    assert sorted(real - known) == [], "vLLM families neither mapped nor ignored in mappings/sources/vllm.yaml"


def test_finish_reasons_and_a_prompt_over_the_context_limit(engine_url):
    """A length stop and a stop-string stop move request_success_total by their reason; a prompt over
    --max-model-len is a 400 that counts no finished request."""
    model = _model(engine_url)
    before = _samples(_metrics(engine_url))
    status, body = _chat(engine_url, model, max_tokens=3, ignore_eos=True)
    assert status == 200 and body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 3
    status, body = _post(engine_url + "/v1/completions", {"model": model, "prompt": "hello " * 3000, "max_tokens": 2})
    assert status == 400, body
    after = _until(
        lambda: (
            (s := _samples(_metrics(engine_url)))
            and _sum(s, "vllm:request_success_total", finished_reason="length")
            > _sum(before, "vllm:request_success_total", finished_reason="length")
            and s
        ),
        "the length stop counted",
    )
    assert _sum(after, "vllm:request_success_total") - _sum(before, "vllm:request_success_total") == 1


def test_a_client_that_disconnects_mid_stream_moves_no_abort_counter(engine_url):
    """vLLM V1 drops a request whose client left without counting it anywhere as finished or aborted (the
    simulator's vLLM 0.32 must do the same); only its prompt tokens are counted."""
    model = _model(engine_url)
    before = _samples(_metrics(engine_url))
    request = urllib.request.Request(
        engine_url + "/v1/chat/completions",
        headers={"Content-Type": "application/json"},
        data=json.dumps(
            {
                "model": model,
                "stream": True,
                "max_tokens": 400,
                "ignore_eos": True,
                "messages": [{"role": "user", "content": "Write a long story."}],
            }
        ).encode(),
    )
    with urllib.request.urlopen(request, timeout=PATIENCE) as response:
        assert response.readline().startswith(b"data: ")  # the stream began: then the client leaves
    _until(
        lambda: _sum(_samples(_metrics(engine_url)), "vllm:num_requests_running") == 0,
        "the engine dropped the abandoned request",
    )
    after = _samples(_metrics(engine_url))
    for reason in ("abort", "stop", "length", "error"):
        assert _sum(after, "vllm:request_success_total", finished_reason=reason) == _sum(
            before, "vllm:request_success_total", finished_reason=reason
        ), reason


def test_a_full_queue_refuses_with_503_and_counts_the_rejection(engine_url, shared_flags):
    """More clients at once than running slots plus --max-num-queued-reqs: the rest get 503 at once, each
    counted in admission_rejections_total{reason="max_num_queued_reqs"} (0.32+), none as a finished request."""
    from concurrent.futures import ThreadPoolExecutor

    model = _model(engine_url)
    before = _samples(_metrics(engine_url))
    with ThreadPoolExecutor(12) as pool:
        statuses = list(pool.map(lambda _: _chat(engine_url, model, max_tokens=64, ignore_eos=True)[0], range(12)))
    refused = statuses.count(503)
    assert set(statuses) <= {200, 503} and statuses.count(200) >= 2, statuses
    after = _until(
        lambda: (
            (s := _samples(_metrics(engine_url)))
            and _sum(s, "vllm:request_success_total") - _sum(before, "vllm:request_success_total")
            >= statuses.count(200)
            and s
        ),
        "every admitted request finished",
    )
    rejected = _sum(after, "vllm:admission_rejections_total", reason="max_num_queued_reqs") - _sum(
        before, "vllm:admission_rejections_total", reason="max_num_queued_reqs"
    )
    assert rejected == refused
    assert _sum(after, "vllm:request_success_total") - _sum(before, "vllm:request_success_total") == statuses.count(200)


def test_normalize_and_the_exporter_read_the_real_engine(engine_url):
    model = _model(engine_url)
    assert _chat(engine_url, model, max_tokens=4)[0] == 200
    proc = subprocess.run(
        [sys.executable, "-m", "inferwatch", "normalize", "--source", "vllm"],
        input=_metrics(engine_url),
        capture_output=True,
        text=True,
        timeout=PATIENCE,
    )
    assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr
    samples = _samples(proc.stdout)
    for name in (
        "llm_requests_running",
        "llm_time_to_first_token_seconds_count",
        "llm_requests_finished_total",
        "llm_prompt_tokens_by_source_total",
        "llm_admission_rejections_total",
        "llm_request_prefill_computed_tokens_count",
    ):
        assert any(
            n == name and dict(labels).get("model") == model and dict(labels).get("engine") == "vllm"
            for n, labels in samples
        ), name
    port = free_port()
    exporter = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "inferwatch",
            "exporter",
            "normalize",
            "--listen",
            f"127.0.0.1:{port}",
            "--target",
            engine_url,
            "--timeout",
            "60s",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def served():
            try:
                return _samples(get(f"http://127.0.0.1:{port}/metrics", timeout=PATIENCE)[1].decode())
            except OSError:
                return None

        samples = _until(
            lambda: (s := served()) and _sum(s, "llm_time_to_first_token_seconds_count") and s,
            "the exporter serving the engine's series",
        )
        assert _sum(samples, "llm_requests_finished_total", model=model) >= 1
    finally:
        exporter.terminate()
        exporter.wait(30)


def test_prometheus_with_the_relabel_rules_stores_the_vocabulary(engine_url, mappings, tmp_path):
    """The generated metric_relabel_configs, in a real Prometheus scraping the engine directly: every family
    relabeling can rename (one source, no scaling) arrives under its common name with `model` and `engine`,
    and none under its vLLM name (the rest is the recording rules' job)."""
    model = _model(engine_url)
    vllm = next(m for m in mappings if m.source == "vllm")
    renamed = {e.sources[0]: e.name for e in vllm.entries if renamed_by_relabel(vllm, e)}
    relabel = yaml.safe_load((ROOT / "mappings" / "generated" / "metric-relabel-configs.yaml").read_text())
    host = engine_url.removeprefix("http://")
    # one /metrics answer can take seconds on a busy 2-core machine: a scrape timeout well above that
    config = {
        "global": {"scrape_interval": "10s", "scrape_timeout": "10s"},
        "scrape_configs": [{"job_name": "vllm", "static_configs": [{"targets": [host]}], **relabel}],
    }
    with prometheus(need("prometheus"), config, tmp_path) as prom:
        assert _chat(engine_url, model, max_tokens=4)[0] == 200
        wait_for(lambda: query(prom, 'up{job="vllm"} == 1'), timeout=PATIENCE)
        stored = {r["metric"]["__name__"]: r["metric"] for r in query(prom, '{job="vllm"}')}
        real = {line.split()[2] for line in _metrics(engine_url).splitlines() if line.startswith("# TYPE ")}
        for source, common in renamed.items():
            if source not in real:
                continue  # a family of another release
            name = next((n for n in stored if n in (common, common + "_count")), None)
            assert name, f"{source} did not arrive as {common}"
            assert stored[name].get("engine") == "vllm", stored[name]
            if source.startswith("vllm:"):  # the HTTP instrumentator's series carry no model_name
                assert stored[name].get("model") == model, stored[name]
            assert not any(n.startswith(source) for n in stored), source


def test_the_front_door_meters_the_real_engine(engine_url, tmp_path):
    """Outcomes and tokens at the front door match what the engine answered: stop, length, a client's cancel
    and a prompt over the context limit; output tokens equal the engine's `usage`."""
    model = _model(engine_url)
    port, admin = free_port(), free_port()
    door = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "inferwatch",
            "frontdoor",
            "--upstream",
            engine_url,
            "--listen",
            f"127.0.0.1:{port}",
            "--metrics-listen",
            f"127.0.0.1:{admin}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "door.log").open("w"),
    )
    url, metrics_url = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{admin}"
    try:
        _until(lambda: _reachable(url + "/health"), "the front door answering")
        status, body = _chat(url, model, max_tokens=5, ignore_eos=True)
        assert status == 200 and body["choices"][0]["finish_reason"] == "length"
        length_tokens = body["usage"]["completion_tokens"]
        # the random model never ends by itself: a stop string that stays in the answer, so it is visible
        status, body = _chat(url, model, max_tokens=200, stop=["e", "a", "o", "i"], include_stop_str_in_output=True)
        assert status == 200 and body["choices"][0]["finish_reason"] == "stop", body
        stop_tokens = body["usage"]["completion_tokens"]
        status, _ = _post(url + "/v1/completions", {"model": model, "prompt": "hello " * 3000, "max_tokens": 2})
        assert status == 400
        # a client that leaves after the first event: a reset (SO_LINGER 0), so the front door's next write fails at
        # once; a plain close let a fast engine finish the stream first (counted `length`, in a clean .ci/run)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=PATIENCE)
        body = {
            "model": model,
            "stream": True,
            "max_tokens": 400,
            "ignore_eos": True,
            "messages": [{"role": "user", "content": "Write a long story."}],
        }
        conn.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
        response = conn.getresponse()
        assert response.readline().startswith(b"data: ")
        conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.sock.close()

        def counted():
            s = _samples(get(metrics_url + "/metrics")[1].decode())
            return s if _sum(s, "llm_frontdoor_requests_total") >= 4 else None

        samples = _until(counted, "four requests counted at the front door")
        outcomes = {
            dict(labels)["outcome"]: v
            for (n, labels), v in samples.items()
            if n == "llm_frontdoor_requests_total" and v
        }
        # the stream that was left: `cancelled` when the reset reached the door first; a quiet engine can also have
        # streamed all 400 tokens into the socket buffers by then (it did in a clean .ci/run), which is `length`
        assert outcomes in (
            {"length": 1, "ok": 1, "invalid_request": 1, "cancelled": 1},
            {"length": 2, "ok": 1, "invalid_request": 1},
        ), outcomes
        assert _sum(samples, "llm_frontdoor_output_tokens_total", model=model) >= length_tokens + stop_tokens
    finally:
        door.terminate()
        door.wait(30)


def _reachable(url: str) -> bool:
    try:
        return get(url, timeout=10)[0] == 200
    except OSError:
        return False
