"""Running the real VictoriaMetrics (single node) and vmalert in tests, and writing the same samples into it and
into a real Prometheus by remote write, staleness markers included.

Both stores take the same protobuf bytes on /api/v1/write, so an expression evaluated on both at the same
instant reads exactly the same samples: the way to prove a rule construct means the same in PromQL and in
MetricsQL. The write request is encoded here (a few protobuf fields, snappy literals only) rather than with a
protobuf and snappy library, which nothing else in inferwatch needs.
"""

from __future__ import annotations

import json
import math
import struct
import urllib.parse
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from promtools import process

from inferwatch.sim._demo import free_port

STALE = "stale"  # a sample value: Prometheus' staleness marker (the NaN with bits 0x7ff0000000000002)
_STALE_BITS = 0x7FF0000000000002


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # int64 timestamps, two's complement, as protobuf writes them
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _sample(value, ms: int) -> bytes:
    bits = _STALE_BITS if value == STALE else struct.unpack("<Q", struct.pack("<d", float(value)))[0]
    return _varint(1 << 3 | 1) + struct.pack("<Q", bits) + _varint(2 << 3) + _varint(ms)


def write_request(series: list[tuple[dict[str, str], list[tuple[float, object]]]]) -> bytes:
    """A Prometheus remote-write WriteRequest: [(labels with __name__, [(unix seconds, value or STALE)])]."""
    body = b""
    for labels, samples in series:
        ts = b"".join(_field(1, _field(1, k.encode()) + _field(2, v.encode())) for k, v in sorted(labels.items()))
        ts += b"".join(_field(2, _sample(v, round(t * 1000))) for t, v in samples)
        body += _field(1, ts)
    return body


def snappy_block(data: bytes) -> bytes:
    """Snappy's block format with literals only: valid, uncompressed, what every decoder reads."""
    out = bytearray(_varint(len(data)))
    for start in range(0, len(data), 65536):
        chunk = data[start : start + 65536]
        n = len(chunk) - 1
        if n < 60:
            out.append(n << 2)
        elif n < 256:
            out += bytes([60 << 2, n])
        else:
            out += bytes([61 << 2]) + struct.pack("<H", n)
        out += chunk
    return bytes(out)


def remote_write(base: str, series, path: str = "/api/v1/write") -> None:
    """Send `series` (see write_request) to a remote-write receiver."""
    req = urllib.request.Request(
        base + path,
        data=snappy_block(write_request(series)),
        method="POST",
        headers={
            "Content-Type": "application/x-protobuf",
            "Content-Encoding": "snappy",
            "X-Prometheus-Remote-Write-Version": "0.1.0",
        },
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status in (200, 204), resp.status


def instant(base: str, expr: str, at: float, **params) -> dict[tuple, float]:
    """{sorted label items (without __name__): value} of `expr` at unix time `at`. `nocache=1` keeps
    VictoriaMetrics from moving a recent `time` back by its -search.latencyOffset (Prometheus ignores it)."""
    query = {"query": expr, "time": f"{at:.3f}", "nocache": "1", **params}
    with urllib.request.urlopen(f"{base}/api/v1/query?" + urllib.parse.urlencode(query), timeout=10) as resp:
        data = json.load(resp)
    assert data["status"] == "success", data
    result = data["data"]["result"]
    if data["data"]["resultType"] == "scalar":
        return {(): float(result[1])}
    return {
        tuple(sorted((k, v) for k, v in r["metric"].items() if k != "__name__")): float(r["value"][1])
        for r in result
        if not math.isnan(float(r["value"][1]))
    }


@contextmanager
def victoria_metrics(binary: str, workdir: Path, *flags: str):
    """A real VictoriaMetrics single node on loopback; yields its base URL."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    workdir.mkdir(parents=True, exist_ok=True)
    with process(
        [
            binary,
            f"-storageDataPath={workdir / 'vm-data'}",
            f"-httpListenAddr=127.0.0.1:{port}",
            "-retentionPeriod=100y",
            "-search.disableCache",
            *flags,
        ],
        workdir / "victoria-metrics.log",
        ready=base,
    ):
        yield base


@contextmanager
def prometheus_receiver(binary: str, workdir: Path, rule_files: tuple[str, ...] = (), *flags: str):
    """A real Prometheus that takes remote write (no scrape jobs); yields its base URL."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    workdir.mkdir(parents=True, exist_ok=True)
    cfg = workdir / "prometheus.yml"
    cfg.write_text(json.dumps({"global": {"evaluation_interval": "1m"}, "rule_files": list(rule_files)}))
    with process(
        [
            binary,
            f"--config.file={cfg}",
            f"--storage.tsdb.path={workdir / 'prom-data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--web.enable-remote-write-receiver",
            *flags,
        ],
        workdir / "prometheus.log",
        ready=base,
        ready_path="/-/ready",
    ):
        yield base


@contextmanager
def vmagent(binary: str, workdir: Path, scrape_config: dict, remote_write: str, *flags: str):
    """A real vmagent scraping as `scrape_config` says (a prometheus.yml: the keys vmagent does not know are
    ignored) and remote-writing to `remote_write`; yields its base URL."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    workdir.mkdir(parents=True, exist_ok=True)
    cfg = workdir / "scrape.yml"
    cfg.write_text(json.dumps(scrape_config))
    with process(
        [
            binary,
            f"-promscrape.config={cfg}",
            "-promscrape.config.strictParse=false",
            f"-remoteWrite.url={remote_write}/api/v1/write",
            f"-remoteWrite.tmpDataPath={workdir / 'queue'}",
            f"-httpListenAddr=127.0.0.1:{port}",
            *flags,
        ],
        workdir / "vmagent.log",
        ready=base,
    ):
        yield base


@contextmanager
def vmalert(binary: str, workdir: Path, rules: str, datasource: str, *flags: str):
    """A real vmalert evaluating the rule files `rules` (a glob) on `datasource`, writing records back to it;
    yields its base URL. Give -notifier.url in `flags` where the rules hold alerts (vmalert refuses to start
    otherwise)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    workdir.mkdir(parents=True, exist_ok=True)
    with process(
        [
            binary,
            f"-rule={rules}",
            f"-datasource.url={datasource}",
            f"-remoteWrite.url={datasource}",
            f"-httpListenAddr=127.0.0.1:{port}",
            *flags,
        ],
        workdir / "vmalert.log",
        ready=base,
    ):
        yield base


def force_flush(base: str) -> None:
    """Make what VictoriaMetrics took in searchable now: a new series otherwise stays invisible for about 10 s
    (1.79.5), to queries and to vmalert's alike."""
    with urllib.request.urlopen(base + "/internal/force_flush", timeout=10) as resp:
        resp.read()
