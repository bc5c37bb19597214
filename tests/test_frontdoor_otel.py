"""The front door's OpenTelemetry GenAI view (frontdoor/_otel.py): a real OTLP/HTTP receiver, written here on
http.server, decodes what the SDK's exporter sends (ExportMetricsServiceRequest, with the opentelemetry-proto
package the exporter itself depends on) from a front door in front of the simulator; names, units, attributes and
bucket bounds are checked against the GenAI semantic conventions v1.41.1 as written in the spec (not against the
module's own table), and counts against the requests sent and the Prometheus series."""

from __future__ import annotations

import gzip
import os
import socket
import subprocess
import sys
import threading
import zlib
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import openai
import pytest

pytest.importorskip("opentelemetry.sdk.metrics", reason="the [otel] extra is not installed")

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (  # noqa: E402
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from simtools import simulator  # noqa: E402
from test_frontdoor import client, frontdoor, scrape, wait_for  # noqa: E402

from inferwatch.frontdoor import FrontdoorOptions  # noqa: E402
from inferwatch.frontdoor._cli import _otlp  # noqa: E402
from inferwatch.frontdoor._otel import OtlpConfig, otlp_metrics_url  # noqa: E402
from inferwatch.options import from_flags  # noqa: E402

# docs/gen-ai/gen-ai-metrics.md at open-telemetry/semantic-conventions v1.41.1: name -> (unit, bucket bounds)
SPEC = {
    "gen_ai.server.request.duration": (
        "s",
        [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92],
    ),
    "gen_ai.server.time_to_first_token": (
        "s",
        [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0],
    ),
    "gen_ai.server.time_per_output_token": (
        "s",
        [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5],
    ),
    "gen_ai.client.token.usage": (
        "{token}",
        [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864],
    ),
}
REQUIRED = {"gen_ai.operation.name", "gen_ai.provider.name"}


@contextmanager
def otlp_receiver():
    """An OTLP/HTTP metrics endpoint on a loopback port; yields (URL, the decoded requests in arrival order)."""
    received: list[ExportMetricsServiceRequest] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            coding = self.headers.get("Content-Encoding", "")
            body = gzip.decompress(body) if coding == "gzip" else zlib.decompress(body) if coding == "deflate" else body
            ok = self.path == "/v1/metrics" and self.headers.get("Content-Type") == "application/x-protobuf"
            if ok:
                request = ExportMetricsServiceRequest()
                request.ParseFromString(body)
                received.append(request)
            reply = ExportMetricsServiceResponse().SerializeToString()
            self.send_response(200 if ok else 400)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()


def _points(request: ExportMetricsServiceRequest) -> dict[str, list[tuple[dict, object]]]:
    """{metric name: [(attributes, histogram data point)]} of one export."""
    out: dict = {}
    for rm in request.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                out.setdefault(metric.name, []).extend(
                    ({a.key: a.value.string_value for a in p.attributes}, p) for p in metric.histogram.data_points
                )
    return out


def _count(points, name: str, **match) -> int:
    return sum(p.count for attrs, p in points.get(name, ()) if all(attrs.get(k) == v for k, v in match.items()))


def _sum(points, name: str, **match) -> float:
    return sum(p.sum for attrs, p in points.get(name, ()) if all(attrs.get(k) == v for k, v in match.items()))


def _prom(url: str, name: str, **match) -> float:
    return sum(
        v
        for (n, labels), v in scrape(url).items()
        if n == name and all(dict(labels).get(k) == w for k, w in match.items())
    )


def test_a_front_door_pushes_genai_metrics_the_spec_names_with_the_counts_prometheus_has():
    streamed, whole, completions = 4, 2, 2
    with otlp_receiver() as (collector, received), simulator() as (engine, _):
        config = OtlpConfig(
            otlp_metrics_url(collector),
            interval=0.2,
            provider="vllm",
            resource=(("service.name", "door-under-test"), ("deployment.environment", "test")),
        )
        with frontdoor(engine, otlp=config) as (url, _):
            api = client(url)
            for _ in range(streamed):
                for _ in api.chat.completions.create(
                    model="m", stream=True, max_tokens=8, messages=[{"role": "user", "content": "hi"}]
                ):
                    pass
            for _ in range(whole):
                api.chat.completions.create(model="m", max_tokens=8, messages=[{"role": "user", "content": "hi"}])
            for _ in range(completions):
                api.completions.create(model="m", prompt="hi", max_tokens=8)
            with pytest.raises(openai.APIStatusError):  # the engine does not serve it: 404, an invalid request
                api.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "hi"}])
            sent = streamed + whole + completions + 1
            # cumulative: an export that has them all, at the reader's interval (no fixed wait)
            points = wait_for(
                lambda: received and _count(p := _points(received[-1]), "gen_ai.server.request.duration") == sent and p,
                timeout=15,
            )
            prometheus = {
                name: _prom(url, name)
                for name in (
                    "llm_frontdoor_requests_total",
                    "llm_frontdoor_time_to_first_token_seconds_count",
                    "llm_frontdoor_prompt_tokens_total",
                    "llm_frontdoor_output_tokens_total",
                )
            }
            models = {
                dict(labels).get("model")
                for (n, labels), _ in scrape(url).items()
                if n == "llm_frontdoor_requests_total"
            }

    last = received[-1]
    resource = {a.key: a.value.string_value for a in last.resource_metrics[0].resource.attributes}
    assert resource["service.name"] == "door-under-test" and resource["deployment.environment"] == "test"
    scope = last.resource_metrics[0].scope_metrics[0]
    assert scope.scope.name == "inferwatch.frontdoor" and scope.schema_url.endswith("/1.41.1")

    metrics = {m.name: m for sm in last.resource_metrics[0].scope_metrics for m in sm.metrics}
    assert set(metrics) == set(SPEC)
    for name, (unit, bounds) in SPEC.items():
        assert metrics[name].unit == unit, name
        assert metrics[name].HasField("histogram"), name
        for attrs, point in _points(last)[name]:
            assert list(point.explicit_bounds) == bounds, name
            assert len(point.bucket_counts) == len(bounds) + 1 and sum(point.bucket_counts) == point.count
            assert REQUIRED <= set(attrs) and attrs["gen_ai.provider.name"] == "vllm"
            # the same bounded values as the Prometheus series: never the client's raw model name
            assert attrs["gen_ai.request.model"] in models and attrs["gen_ai.request.model"] != "no-such-model"

    # every request once, by operation; error.type on the failed one only, and only on the duration
    assert prometheus["llm_frontdoor_requests_total"] == sent
    assert _count(points, "gen_ai.server.request.duration", **{"gen_ai.operation.name": "chat"}) == streamed + whole + 1
    assert (
        _count(points, "gen_ai.server.request.duration", **{"gen_ai.operation.name": "text_completion"}) == completions
    )
    failed = [a for a, p in points["gen_ai.server.request.duration"] if "error.type" in a]
    assert [a["error.type"] for a in failed] == ["invalid_request"]
    assert not any(
        "error.type" in a for name in SPEC if name != "gen_ai.server.request.duration" for a, _ in points.get(name, ())
    )
    # first token and time per output token: the streamed requests (all successful), as Prometheus counts them
    assert (
        _count(points, "gen_ai.server.time_to_first_token")
        == streamed
        == prometheus["llm_frontdoor_time_to_first_token_seconds_count"]
    )
    assert _count(points, "gen_ai.server.time_per_output_token") == streamed
    # tokens: the same sums as the Prometheus counters, one input and one output point per answered request
    tokens = "gen_ai.client.token.usage"
    prompt, output = prometheus["llm_frontdoor_prompt_tokens_total"], prometheus["llm_frontdoor_output_tokens_total"]
    assert _sum(points, tokens, **{"gen_ai.token.type": "input"}) == prompt > 0
    assert _sum(points, tokens, **{"gen_ai.token.type": "output"}) == output > 0
    assert _count(points, tokens, **{"gen_ai.token.type": "output"}) == streamed + whole + completions


def test_the_environment_alone_turns_the_export_on_and_the_last_export_comes_at_stop(monkeypatch):
    with otlp_receiver() as (collector, received), simulator() as (engine, _):
        # the standard variable, a base URL: the SDK adds /v1/metrics; and an hour between exports: none yet
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector)
        monkeypatch.delenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", raising=False)
        config = _otlp(from_flags(FrontdoorOptions, {"otlp_interval": "1h", "otlp_provider": "sglang"}))
        assert config == OtlpConfig(None, 3600.0, (), "sglang")
        with frontdoor(engine, otlp=config) as (url, _):
            client(url).chat.completions.create(model="m", max_tokens=4, messages=[{"role": "user", "content": "x"}])
            assert not received  # an hour's interval: nothing yet
    points = _points(received[-1])
    assert _count(points, "gen_ai.server.request.duration", **{"gen_ai.provider.name": "sglang"}) == 1
    resource = {a.key: a.value.string_value for a in received[-1].resource_metrics[0].resource.attributes}
    assert resource["service.name"] == "inferwatch-frontdoor"


@pytest.mark.parametrize(
    "given, url",
    [
        ("http://collector:4318", "http://collector:4318/v1/metrics"),
        ("http://collector:4318/", "http://collector:4318/v1/metrics"),
        ("collector:4318", "http://collector:4318/v1/metrics"),
        ("https://otlp.example.com/otlp/v1/metrics", "https://otlp.example.com/otlp/v1/metrics"),
    ],
)
def test_the_endpoint_is_a_collectors_base_url_or_a_full_one(given, url):
    assert otlp_metrics_url(given) == url


@pytest.mark.parametrize("given", ["collector", "ftp://collector:4318", "http://collector:4318/?x=1"])
def test_an_endpoint_that_is_not_an_http_url_is_refused(given):
    with pytest.raises(ValueError, match="e.g. http://otel-collector:4318"):
        otlp_metrics_url(given)


_WITHOUT_OTEL = """
import sys
class Hide:
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Hide())
from inferwatch.cli import main
sys.argv = ["inferwatch"] + sys.argv[1:]
main()
"""


def _door(*flags: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-c",
            _WITHOUT_OTEL,
            "frontdoor",
            "--upstream",
            "127.0.0.1:1",
            "--listen",
            "127.0.0.1:8",
            "--metrics-listen",
            "127.0.0.1:9",
            *flags,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def test_without_the_extra_the_flag_is_one_line_naming_it():
    result = _door("--otlp-endpoint", "http://127.0.0.1:4318")
    assert result.returncode == 1, result.stderr
    assert "pip install 'inferwatch[otel]'" in result.stderr and "--otlp-endpoint" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_without_the_extra_an_endpoint_from_the_environment_is_a_warning_and_the_door_starts():
    with socket.socket() as taken:  # the door gets as far as binding: its --listen port is taken
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        result = subprocess.run(
            [
                sys.executable,
                "-c",
                _WITHOUT_OTEL,
                "frontdoor",
                "--upstream",
                "127.0.0.1:1",
                "--listen",
                f"127.0.0.1:{taken.getsockname()[1]}",
                "--metrics-listen",
                "127.0.0.1:9",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"},
        )
    assert "$OTEL_EXPORTER_OTLP_ENDPOINT is set" in result.stderr and "inferwatch[otel]" in result.stderr
    assert "cannot listen" in result.stderr and "Traceback" not in result.stderr


def test_otlp_settings_without_an_endpoint_are_refused():
    result = _door(
        "--otlp-interval", "10s", env={k: v for k, v in os.environ.items() if not k.startswith("OTEL_EXPORTER_OTLP")}
    )
    assert result.returncode == 2 and "--otlp-interval" in result.stderr and "--otlp-endpoint" in result.stderr
    assert "Traceback" not in result.stderr


def test_an_unreachable_collector_costs_the_requests_nothing(caplog, monkeypatch):
    # the exporter's own OTEL_* setting, honoured: each export gives up after a second (seconds, as Python's reads it)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "1")
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
    with closed, simulator() as (engine, _):
        config = OtlpConfig(f"http://127.0.0.1:{closed.getsockname()[1]}/v1/metrics", interval=0.1)
        with frontdoor(engine, otlp=config) as (url, _):
            for _ in range(3):
                client(url).chat.completions.create(
                    model="m", max_tokens=4, messages=[{"role": "user", "content": "x"}]
                )
            wait_for(lambda: any("Failed to export" in r.getMessage() for r in caplog.records), timeout=15)
            assert _prom(url, "llm_frontdoor_requests_total", code="200") == 3
    assert not any(r.exc_info for r in caplog.records)  # one line each, no traceback


@pytest.mark.parametrize(
    "outcome, error_type",
    [("ok", None), ("length", None), ("error", "error"), ("truncated", "truncated"), ("cancelled", "cancelled")],
)
def test_first_token_and_per_token_times_count_successful_responses_only(outcome, error_type):
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from inferwatch.frontdoor._metrics import FrontdoorMetrics
    from inferwatch.frontdoor._otel import OtelView

    reader = InMemoryMetricReader()
    metrics = FrontdoorMetrics(OtelView(OtlpConfig(None), reader=reader))
    metrics.record(
        ("m", "anonymous", "e:1"),
        outcome,
        200,
        {"duration": 1.0, "ttft": 0.1, "tpot": 0.02},
        (7, 3, None),
        operation="text_completion",
    )
    points = {
        m.name: [(dict(p.attributes), p) for p in m.data.data_points]
        for rm in reader.get_metrics_data().resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
    }
    ((attrs, _),) = points["gen_ai.server.request.duration"]
    assert attrs.get("error.type") == error_type and attrs["gen_ai.operation.name"] == "text_completion"
    successful = error_type is None
    assert (
        len(points.get("gen_ai.server.time_to_first_token", ()))
        == len(points.get("gen_ai.server.time_per_output_token", ()))
        == int(successful)
    )
    # Prometheus counts the first token of a failed answer too (its TTFT SLO reads it)
    assert metrics.ttft.labels("m", "anonymous", "e:1")._sum.get() == 0.1
    assert sorted((a["gen_ai.token.type"], p.sum) for a, p in points["gen_ai.client.token.usage"]) == [
        ("input", 7),
        ("output", 3),
    ]
