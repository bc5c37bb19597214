"""Hostile-but-valid targets: whole bodies or a clear error, never wrong data as good, never a frozen exporter."""

from __future__ import annotations

import asyncio
import gzip
import subprocess
import sys
import time
import zlib

import aiohttp
import pytest
from conftest import REAL_CAPTURES, need
from exporter_tools import (
    RawTargets,
    chunked,
    client_parse,
    dropped,
    endless,
    expected_samples,
    hang,
    health,
    make_config,
    promtool_problems,
    running_exporter,
    scrape,
    slowloris,
    static,
    target_samples,
)
from promtools import prometheus, query, serve, wait_for

from inferwatch.exporters import Normalizer, split_families
from inferwatch.exporters._config import parse_target_label
from inferwatch.exporters._server import scrape_deadline

VLLM = (REAL_CAPTURES / "vllm-0.11.0-hardware-aware-router.txt").read_bytes()
DCGM = (REAL_CAPTURES / "dcgm-exporter-4.4.1-4.6.0-lke-ai-conformance.txt").read_bytes()


@pytest.fixture(scope="module")
def normalizer(mappings, catalog):
    return Normalizer(mappings, catalog)


def run(coro):
    return asyncio.run(coro)


async def serve_once(routes: dict, normalizer, timeout_header=None, **options) -> tuple[str, float]:
    """One scrape of the exporter over `routes` (path -> route); the text and how long it took."""
    options.setdefault("timeout", 1.0)
    async with RawTargets(routes) as targets:
        config = make_config({p.strip("/"): targets.url(p) for p in routes}, **options)
        async with running_exporter(config, normalizer) as (base, _), aiohttp.ClientSession() as session:
            start = time.monotonic()
            text = await scrape(session, base, timeout_header)
            return text, time.monotonic() - start


def assert_served_parses(text: str) -> None:
    assert promtool_problems(text) is None, promtool_problems(text)
    client_parse(text)


# -- 1. the whole body, or a clear error -------------------------------------------------------


def test_bodies_in_paced_pieces_cut_inside_values_are_served_whole(normalizer):
    body = VLLM.replace(b" 0.0\n", b" 123456.0\n")
    routes = {
        "/len": static(body, pieces=7, pause=0.05),
        "/close": static(body, pieces=5, pause=0.05, length=False),
        "/chunked": chunked(body, pieces=6, pause=0.05),
    }
    text, _ = run(serve_once(routes, normalizer))
    want = expected_samples(body.decode(), normalizer)
    assert health(text) == {"len": "1.0", "close": "1.0", "chunked": "1.0"}
    for name in ("len", "close", "chunked"):
        assert target_samples(text, name) == want, name


def test_a_body_that_ends_early_is_truncated_never_served(normalizer):
    at_line_end = VLLM.index(b"\n", len(VLLM) // 2) + 1
    routes = {
        "/line-end": dropped(VLLM, at_line_end),
        "/mid-value": dropped(VLLM, at_line_end - 3),
        "/no-length": dropped(VLLM, at_line_end - 3, length=False),
        "/no-last-chunk": chunked(VLLM, pieces=3, pause=0.01, finish=False),
    }
    text, _ = run(serve_once(routes, normalizer))
    assert health(text) == dict.fromkeys(("line-end", "mid-value", "no-length", "no-last-chunk"), "0.0")
    assert health(text, "last_error_timestamp_seconds") == dict.fromkeys(
        ("line-end", "mid-value", "no-length", "no-last-chunk"), "truncated"
    )
    assert not any(target_samples(text, t) for t in ("line-end", "mid-value", "no-length", "no-last-chunk"))


def test_a_close_delimited_body_reset_at_a_line_end_is_truncated(normalizer):
    """A reset is not an end: a body without Content-Length cut by a TCP RST between two lines reads as a whole
    exposition, but it is a part of one (issue 23)."""
    at_line_end = VLLM.index(b"\n", len(VLLM) // 2) + 1
    text, _ = run(serve_once({"/reset": dropped(VLLM, at_line_end, length=False, reset=True)}, normalizer))
    assert health(text) == {"reset": "0.0"}
    assert health(text, "last_error_timestamp_seconds") == {"reset": "truncated"}
    assert not target_samples(text, "reset")


def test_200_mb_and_a_gzip_bomb_are_too_large_cheaply(normalizer):
    line = b'big_gauge{a="xxxxxxxxxxxxxxxxxxxxxxxx"} 1\n'
    header, block = gzip_bomb_parts()
    bomb_body = header + block * 256  # 256 MiB inflated, 260 KB sent
    routes = {
        "/big": endless(line, 200 * 1024 * 1024),
        "/big-unannounced": endless(line, 200 * 1024 * 1024, length=False),
        "/bomb": static(bomb_body, extra=("Content-Encoding: gzip",)),
        "/gzip-ok": static(gzip.compress(VLLM), extra=("Content-Encoding: gzip",)),
    }
    cpu = time.process_time()
    text, elapsed = run(serve_once(routes, normalizer, timeout=5.0))
    cpu = time.process_time() - cpu
    assert health(text) == {"big": "0.0", "big-unannounced": "0.0", "bomb": "0.0", "gzip-ok": "1.0"}
    kinds = health(text, "last_error_timestamp_seconds")
    assert kinds == {"big": "too_large", "big-unannounced": "too_large", "bomb": "too_large"}
    assert target_samples(text, "gzip-ok") == expected_samples(VLLM.decode(), normalizer)
    # cheaply is the CPU (the server side streams 16 MiB of it too); the wall clock only catches a hang past the
    # 5 s timeout + 2 s, as a busy machine may slow everything
    assert elapsed < 5 + 2 and cpu < 2.5, (elapsed, cpu)


def test_max_body_is_the_cap_it_names(normalizer):
    """--max-body (max_body): bodies over it, raw or inflated, are too_large; under it they are served whole."""
    cap = len(DCGM) + 1024
    routes = {
        "/raw": static(VLLM),
        "/unannounced": static(VLLM, length=False),
        "/inflated": static(gzip.compress(VLLM), extra=("Content-Encoding: gzip",)),
        "/ok": static(DCGM),
    }
    text, _ = run(serve_once(routes, normalizer, max_body=cap))
    assert health(text) == {"raw": "0.0", "unannounced": "0.0", "inflated": "0.0", "ok": "1.0"}
    assert health(text, "last_error_timestamp_seconds") == dict.fromkeys(
        ("raw", "unannounced", "inflated"), "too_large"
    )
    assert target_samples(text, "ok") == expected_samples(DCGM.decode(), normalizer)


def gzip_bomb_parts() -> tuple[bytes, bytes]:
    """A gzip header and a deflate block of 1 MiB of "0" that ends in a full flush, so it can be repeated."""
    packer = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    block = packer.compress(b"0" * (1 << 20)) + packer.flush(zlib.Z_FULL_FLUSH)
    return b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff", block


def test_a_gzip_bomb_costs_milliseconds_of_cpu():
    from inferwatch.exporters._fetch import MAX_BODY_BYTES, FetchError, _Inflater

    header, block = gzip_bomb_parts()
    bomb = [header] + [block] * 1024  # 1 GiB inflated
    inflater = _Inflater("gzip", MAX_BODY_BYTES)
    cpu = time.process_time()
    with pytest.raises(FetchError) as err:
        for chunk in bomb:
            inflater.feed(chunk)
    assert err.value.kind == "too_large"
    assert time.process_time() - cpu < 0.2
    assert len(inflater.out) <= MAX_BODY_BYTES + 1


def test_compressed_bodies_are_read_whole_or_named(normalizer):
    raw = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    gz = gzip.compress(DCGM)
    routes = {
        "/deflate": static(zlib.compress(DCGM), pieces=4, pause=0.02, extra=("Content-Encoding: deflate",)),
        "/raw-deflate": static(raw.compress(DCGM) + raw.flush(), extra=("Content-Encoding: deflate",)),
        "/brotli": static(b"\x0b\x02\x80", extra=("Content-Encoding: br",)),
        "/corrupt": static(gz[:20] + b"\xff" * 40 + gz[60:], extra=("Content-Encoding: gzip",)),
        "/cut-gzip": static(gz[: len(gz) // 2], extra=("Content-Encoding: gzip",)),
    }
    text, _ = run(serve_once(routes, normalizer))
    assert health(text) == {
        "deflate": "1.0",
        "raw-deflate": "1.0",
        "brotli": "0.0",
        "corrupt": "0.0",
        "cut-gzip": "0.0",
    }
    assert health(text, "last_error_timestamp_seconds") == {
        "brotli": "http",
        "corrupt": "parse",
        "cut-gzip": "truncated",
    }
    want = expected_samples(DCGM.decode(), normalizer)
    assert target_samples(text, "deflate") == want and target_samples(text, "raw-deflate") == want


def test_slowloris_body_ends_as_timeout_within_the_target_timeout(normalizer):
    routes = {"/slow": slowloris(b"x 1\n" * 100, pause=0.05), "/good": static(DCGM)}
    text, elapsed = run(serve_once(routes, normalizer, timeout=1.0))
    assert health(text) == {"slow": "0.0", "good": "1.0"}
    assert health(text, "last_error_timestamp_seconds") == {"slow": "timeout"}
    assert elapsed < 1.0 + 2.0  # a hang detector: the timeout + 2 s of a busy machine


# -- 2. one target never takes down the others ------------------------------------------------

ODD_SEPARATORS = ["\u2028", "\u2029", "\r", "\x85", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e"]


def test_line_separators_inside_label_values_stay_inside_them(normalizer):
    body = "".join(f'odd_gauge{{sep="a{c}b",i="{i}"}} {i}\n' for i, c in enumerate(ODD_SEPARATORS)).encode()
    text, _ = run(serve_once({"/odd": static(body), "/good": static(DCGM)}, normalizer))
    assert health(text) == {"odd": "1.0", "good": "1.0"}
    served = target_samples(text, "odd")
    assert {dict(labels)["sep"] for _, labels in served} == {f"a{c}b" for c in ODD_SEPARATORS}
    assert_served_parses(text)


OPENMETRICS_AND_OVERFLOW = (
    '# TYPE build info\nbuild_info{version="1"} 1\n'
    '# TYPE state stateset\nstate{state="a"} 1\n'
    '# TYPE gh gaugehistogram\ngh_bucket{le="+Inf"} 1\ngh_gcount 1\ngh_gsum 1\n'
    "# TYPE huge gauge\nhuge 1e999\n"
    "# TYPE huge_ts gauge\nhuge_ts 1 99999999999999999999\n"
    '# TYPE lat histogram\nlat_bucket{le="0.1"} 1 # {trace_id="abc"} 0.05 1700000000.0\nlat_count 1\nlat_sum 1\n'
    '# TYPE bad_le histogram\nbad_le_bucket{le="fast"} 1\nbad_le_bucket{le="+Inf"} 1\nbad_le_count 1\n'
    '# TYPE dup gauge\ndup{a="1",a="2"} 1\n'
    '# TYPE reserved gauge\nreserved{__name__="other"} 1\n'
    "# TYPE fine_unknown unknown\nfine_unknown 7\n"
    "# TYPE fine gauge\nfine 1\n"
    "# EOF\n"
)


def test_what_prometheus_cannot_read_is_dropped_per_family_and_counted(normalizer):
    routes = {"/om": static(OPENMETRICS_AND_OVERFLOW.encode()), "/good": static(DCGM)}
    text, _ = run(serve_once(routes, normalizer))
    assert_served_parses(text)
    assert health(text) == {"om": "1.0", "good": "1.0"}
    served = {(n, dict(labels).get("le")) for n, labels in target_samples(text, "om")}
    assert served == {("fine", None), ("fine_unknown", None), ("bad_le_bucket", "+Inf"), ("bad_le_count", None)}
    dropped_total = {}
    for fam in split_families(text):
        for s in fam.samples():
            if s.name == "inferwatch_exporter_target_dropped_total":
                dropped_total[dict(s.labels)["reason"]] = float(s.value)
    # families: info, stateset, gaugehistogram; 1e999, a 20-digit timestamp, an exemplar. samples: the rest
    assert dropped_total == {"openmetrics_type": 3, "invalid_line": 3, "invalid_labels": 2, "invalid_sample": 1}
    assert target_samples(text, "good") == expected_samples(DCGM.decode(), normalizer)


def test_a_target_with_nothing_readable_is_down_with_parse(normalizer):
    routes = {"/html": static(b"<html><body>502</body></html>\n"), "/words": static(b"upstream connect error\n")}
    text, _ = run(serve_once(routes, normalizer))
    assert health(text) == {"html": "0.0", "words": "0.0"}
    assert health(text, "last_error_timestamp_seconds") == {"html": "parse", "words": "parse"}


def test_a_family_clashing_with_another_target_or_the_exporter_is_left_out(normalizer):
    routes = {
        "/a": static(
            b"# TYPE shared gauge\nshared 1\n# TYPE inferwatch_exporter_target_up gauge\n"
            b"inferwatch_exporter_target_up 5\n"
        ),
        "/b": static(b"# TYPE shared counter\nshared 2\n# TYPE other gauge\nother_total 1\n"),
        "/c": static(b"# TYPE other_total counter\nother_total 3\n"),
    }
    text, _ = run(serve_once(routes, normalizer))
    assert_served_parses(text)
    assert health(text) == {"a": "1.0", "b": "1.0", "c": "1.0"}
    assert list(target_samples(text, "a")) == [("shared", ())]
    assert target_samples(text, "b") == {("other_total", ()): "1"}  # first come, first served
    assert target_samples(text, "c") == {}


@pytest.mark.parametrize("bad", ["bad-label", "le", "quantile", "__meta", "9x", "a b"])
def test_target_label_is_validated(bad):
    with pytest.raises(ValueError, match="not a usable label name"):
        parse_target_label(bad)


@pytest.mark.parametrize("bad", ["bad-label", "le"])
def test_target_label_flag_gets_one_clear_line(bad):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "inferwatch",
            "exporter",
            "normalize",
            "--target",
            "localhost:1",
            "--target-label",
            bad,
            "--listen",
            "127.0.0.1:1",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "--target-label" in proc.stderr and "Traceback" not in proc.stderr


def test_no_target_label_with_two_targets_is_refused_not_served_as_duplicates():
    """Two targets without a target label serve the same series twice; Prometheus silently keeps one (issue 23)."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "inferwatch",
            "exporter",
            "normalize",
            "--target",
            "a=localhost:1",
            "--target",
            "b=localhost:2",
            "--target-label",
            "",
            "--listen",
            "127.0.0.1:9",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )  # before the fix it served, never exited
    assert proc.returncode == 2 and "--target-label" in proc.stderr and "2 targets" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_good_target_labels_pass():
    assert [parse_target_label(x) for x in ("target", "", "_t", "instance_name")] == [
        "target",
        "",
        "_t",
        "instance_name",
    ]


# -- 3. no input freezes the exporter ----------------------------------------------------------


def go_style(lines: int) -> str:
    """Integer values as Go clients write them, then one line the fast path does not take."""
    body = "# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).\n# TYPE DCGM_FI_DEV_FB_USED gauge\n"
    body += "".join(f'DCGM_FI_DEV_FB_USED{{gpu="{i}",UUID="GPU-{i}"}} 1234567890123456{i}\n' for i in range(lines))
    return body + 'DCGM_FI_DEV_FB_USED{gpu="x" } 1\n'


# Linear time is checked on this process's CPU time (not the wall clock, which other processes stretch) with a
# bound that is 100x the linear cost and far below the quadratic one (minutes): no test depends on speed.
LINEAR_CPU_S = 2.0


@pytest.mark.parametrize("lines", [8, 40, 2000])
def test_go_style_integers_then_a_non_canonical_line_parse_in_linear_time(lines):
    start = time.process_time()
    fams = split_families(go_style(lines))
    assert time.process_time() - start < LINEAR_CPU_S
    assert sum(len(f.samples()) for f in fams) == lines + 1


def test_long_values_are_checked_in_linear_time():
    for text in ("x " + "1" * 1_000_000 + "x\n", "# TYPE x gauge\nx " + "1" * 1_000_000 + ".5e+7\n"):
        start = time.process_time()
        try:
            split_families(text)
        except Exception:  # noqa: BLE001 - only the time matters here
            pass
        assert time.process_time() - start < LINEAR_CPU_S


def test_30000_labels_on_one_line_cost_milliseconds_and_drop_that_sample(normalizer):
    line = "wide{" + ",".join(f'l{i}="v"' for i in range(30000)) + "} 1\n"
    start = time.process_time()
    assert len(split_families(line)[0].samples()[0].labels) == 30000
    assert time.process_time() - start < LINEAR_CPU_S
    body = ("# TYPE narrow gauge\nnarrow 1\n# TYPE wide gauge\n" + line).encode()
    text, elapsed = run(
        serve_once({"/wide": static(body), "/wide-canonical": static(body.replace(b'v"}', b'v"} '))}, normalizer)
    )
    assert health(text) == {"wide": "1.0", "wide-canonical": "1.0"}
    assert list(target_samples(text, "wide")) == [("narrow", ())]
    assert "label_limit" in text and elapsed < 10  # a hang detector: the parse is timed on CPU above


def test_healthz_answers_while_a_large_body_is_parsed(normalizer):
    body = "".join(f'slow{{ a="{i}", b="v"}} {i}\n' for i in range(40_000)).encode()  # not canonical: exact path

    async def main():
        async with RawTargets({"/big": static(body)}) as targets:
            config = make_config({"big": targets.url("/big")}, timeout=5.0)
            async with running_exporter(config, normalizer) as (base, exporter), aiohttp.ClientSession() as session:
                began = time.monotonic()
                scraping = asyncio.create_task(scrape(session, base))
                answered = 0
                while not scraping.done():
                    async with session.get(base + "/healthz") as resp:
                        assert resp.status == 200
                    answered += 1
                    await asyncio.sleep(0.02)
                text = await scraping
                return answered, time.monotonic() - began, text

    answered, took, text = run(main())
    assert health(text) == {"big": "1.0"}
    # a parse that held the event loop would let one /healthz through at most, before or after all of it; counted,
    # not timed, so a loaded machine that slows both does not fail it
    assert answered >= 3, (answered, took)


# -- 4/5. deadlines and shared fetches ---------------------------------------------------------


def test_the_scrape_answers_before_prometheus_timeout_with_what_is_ready(normalizer):
    routes = {"/hang": hang, "/good": static(DCGM)}
    text, elapsed = run(serve_once(routes, normalizer, timeout_header=1.0, timeout=5.0))
    assert elapsed < 1.0 + 2.0  # a hang detector: Prometheus' 1 s + 2 s of a busy machine
    assert health(text) == {"hang": "0.0", "good": "1.0"}
    assert health(text, "last_error_timestamp_seconds") == {"hang": "timeout"}
    assert target_samples(text, "good") == expected_samples(DCGM.decode(), normalizer)


@pytest.mark.parametrize(
    "header,budget",
    [
        (None, 5.5),
        ("2", 1.75),
        ("4", 3.6),
        ("10", 5.5),
        ("0.3", 0.15),
        ("junk", 5.5),
        ("-1", 5.5),
        ("nan", 5.5),
        ("inf", 5.5),
    ],
)
def test_scrape_deadline(header, budget):
    assert scrape_deadline(5.0, header) == pytest.approx(budget)


def test_concurrent_scrapes_share_one_fetch_per_target(normalizer):
    bodies = {f"/t{i}": static(DCGM, pieces=2, pause=0.1) for i in range(10)}
    bodies["/hang"] = hang

    async def main():
        async with RawTargets(bodies) as targets:
            config = make_config({p.strip("/"): targets.url(p) for p in bodies}, timeout=0.6, min_interval=5.0)
            async with running_exporter(config, normalizer) as (base, exporter), aiohttp.ClientSession() as session:
                texts = await asyncio.gather(*(scrape(session, base) for _ in range(8)))
                return texts, exporter.fetches, targets.requests

    texts, fetches, requests = run(main())
    assert fetches == 11 and requests == 11
    want = expected_samples(DCGM.decode(), normalizer)
    for text in texts:
        up = health(text)
        assert up.pop("hang") == "0.0" and set(up.values()) == {"1.0"}
        assert all(target_samples(text, f"t{i}") == want for i in range(10))
        series_out = health(text, "series_out")
        assert all(float(series_out[f"t{i}"]) == len(want) for i in range(10))


def test_config_file_checks_the_new_keys(tmp_path):
    from inferwatch.errors import SpecError
    from inferwatch.exporters import load_config

    cfg = tmp_path / "exporter.yaml"
    cfg.write_text(
        "targets: [localhost:8000]\ntarget_label: le\nmax_labels: -1\nmin_interval: soon\n"
        "max_connections: 0\nmax_body: 16\n"
    )
    with pytest.raises(SpecError) as err:
        load_config(str(cfg))
    text = str(err.value)
    for key in ("target_label", "max_labels", "min_interval", "max_connections", "max_body"):
        assert f"{key}:" in text, text
    assert "max_body: 16 is under 1KiB (a bare number is bytes): give a size such as 16MiB or 64MiB" in text
    cfg.write_text(
        "targets: [localhost:8000]\ntarget_label: instance\nmax_labels: 0\nmin_interval: 250ms\n"
        "max_connections: 8\nmax_body: 64MiB\n"
    )
    config = load_config(str(cfg))
    assert (config.target_label, config.max_labels, config.min_interval, config.max_connections, config.max_body) == (
        "instance",
        0,
        0.25,
        8,
        64 << 20,
    )
    cfg.write_text("targets: [localhost:8000]\n")
    assert load_config(str(cfg)).max_body == 16 << 20


# -- 6. escapes, and samples away from their family (from test_exporter_fuzz draws) -------------

LAT = (
    '# HELP lat Latency.\n# TYPE lat histogram\nlat_bucket{le="0.025"} 1\nlat_bucket{le="+Inf"} 2\n'
    "lat_sum 3\nlat_count 2\n# HELP other Other.\n# TYPE other gauge\nother 1\n"
)
LAT_SERVED = {
    ("lat_bucket", (("le", "0.025"),)): "1",
    ("lat_bucket", (("le", "+Inf"),)): "2",
    ("lat_sum", ()): "3",
    ("lat_count", ()): "2",
    ("other", ()): "1",
}
QUANTILES = '# TYPE q summary\nq{quantile="0.5"} 1\nq_sum 2\nq_count 3\n# TYPE other gauge\nother 1\n'
QUANTILES_SERVED = {("q", (("quantile", "0.5"),)): "1", ("q_sum", ()): "2", ("q_count", ()): "3", ("other", ()): "1"}
ESCAPED = '# TYPE esc gauge\nesc{a="\\\\",b="\\"",c="\\n",d="\\t",e="\\0.5"} 1\n'
STRAYS = {
    # name: ({target: body}, {target: what it is served as}, {target: samples dropped as invalid_sample})
    # [escapes, escapes, shuffle_lines]: le="\\0.025" is \0.025 to Prometheus, and the line sits after another
    # family, where it was a family of its own that no le check saw, while promtool reads it as a bucket of `lat`
    "fuzz-draw": ({"t": LAT + 'lat_bucket{le="\\\\0.025"} 1\n'}, {"t": LAT_SERVED}, {"t": 1}),
    # an escape the text format does not define, in place: read as 0.025, it was served as a second 0.025 bucket
    "unknown-escape": (
        {"t": LAT.replace("lat_sum", 'lat_bucket{le="\\0.025"} 4\nlat_sum')},
        {"t": LAT_SERVED},
        {"t": 1},
    ),
    "stray-sum-le": ({"t": LAT + 'lat_sum{le="x"} 5\n'}, {"t": LAT_SERVED}, {"t": 1}),
    "stray-good-bucket": (
        {"t": LAT + 'lat_bucket{le="0.5"} 1\n'},
        {"t": {**LAT_SERVED, ("lat_bucket", (("le", "0.5"),)): "1"}},
        {},
    ),
    "stray-quantile": (
        {"t": QUANTILES + 'q{quantile="\\\\0.5"} 4\nq_count{quantile="\\t"} 5\n'},
        {"t": QUANTILES_SERVED},
        {"t": 2},
    ),
    # no histogram `lat` in this target, but another target's `lat` would take these lines in the served text
    "bucket-names-elsewhere": (
        {"t": LAT, "u": 'lat_bucket{le="fast"} 1\nlat_count{quantile="\\0"} 2\nok 1\n'},
        {"t": LAT_SERVED, "u": {("ok", ()): "1"}},
        {"u": 2},
    ),
    "escapes-kept": (
        {"t": ESCAPED},
        {"t": {("esc", (("a", "\\"), ("b", '"'), ("c", "\n"), ("d", "\\t"), ("e", "\\0.5"))): "1"}},
        {},
    ),
}


def dropped_total(text: str) -> dict[tuple[str, str], float]:
    """(target, reason) -> inferwatch_exporter_target_dropped_total."""
    return {
        (dict(s.labels)["target"], dict(s.labels)["reason"]): float(s.value)
        for fam in split_families(text)
        for s in fam.samples()
        if s.name == "inferwatch_exporter_target_dropped_total"
    }


@pytest.mark.parametrize("bodies,served,dropped", STRAYS.values(), ids=STRAYS)
def test_le_and_quantile_are_numbers_wherever_promtool_files_the_sample(bodies, served, dropped, normalizer):
    routes = {f"/{name}": static(body.encode()) for name, body in bodies.items()}
    text, _ = run(serve_once(routes, normalizer))
    assert_served_parses(text)
    assert health(text) == {name: "1.0" for name in bodies}
    assert {name: target_samples(text, name) for name in bodies} == served
    assert {t: n for (t, reason), n in dropped_total(text).items() if reason == "invalid_sample"} == dropped


def test_prometheus_reads_the_served_label_values_as_it_reads_the_target(normalizer, tmp_path):
    """A real Prometheus scrapes a target and what the exporter serves for it: same label values, escapes and
    all, but for the bucket whose le Prometheus itself reads as \\0.025, which is left out."""
    body = ESCAPED + LAT.replace("lat_sum", 'lat_bucket{le="\\0.025"} 4\nlat_sum')
    text, _ = run(serve_once({"/t": static(body.encode())}, normalizer))
    jobs = {"direct": body, "served": text}
    with serve({f"/{job}": page for job, page in jobs.items()}) as base:
        config = {
            "global": {"scrape_interval": "1s"},
            "scrape_configs": [
                {
                    "job_name": job,
                    "metrics_path": f"/{job}",
                    "static_configs": [{"targets": [base.removeprefix("http://")]}],
                }
                for job in jobs
            ],
        }
        with prometheus(need("prometheus"), config, tmp_path) as prom:
            selector = '{__name__=~"esc|lat_bucket"}'
            wait_for(lambda: len(query(prom, f"up == 1 and on (job) count by (job) ({selector})")) == 2)
            read = {job: set() for job in jobs}
            for series in query(prom, selector):
                labels = series["metric"]
                job = labels.pop("job")
                read[job].add(tuple(sorted((k, v) for k, v in labels.items() if k not in ("instance", "target"))))
    not_a_number = (("__name__", "lat_bucket"), ("le", "\\0.025"))
    assert not_a_number in read["direct"] and len(read["direct"]) == 4
    assert read["served"] == read["direct"] - {not_a_number}
    assert (("__name__", "esc"), ("a", "\\"), ("b", '"'), ("c", "\n"), ("d", "\\t"), ("e", "\\0.5")) in read["served"]


# -- 7. names promtool files under a histogram or summary served by another family -----------------

HIST = '# HELP x X.\n# TYPE x histogram\nx_bucket{le="1"} 1\nx_bucket{le="+Inf"} 2\nx_sum 3\nx_count 2\n'
HIST_SERVED = {
    ("x_bucket", (("le", "1"),)): "1",
    ("x_bucket", (("le", "+Inf"),)): "2",
    ("x_sum", ()): "3",
    ("x_count", ()): "2",
}
NO_COUNT = HIST.replace("x_count 2\n", "")
COUNT_GAUGE = "# TYPE x_count gauge\nx_count 5\n"
SUMMARY = '# TYPE s summary\ns{quantile="0.5"} 1\ns_sum 2\ns_count 3\n'
SUMMARY_SERVED = {("s", (("quantile", "0.5"),)): "1", ("s_sum", ()): "2", ("s_count", ()): "3"}
OK = "# TYPE ok gauge\nok 1\n"
CLASHES = {
    # name: ({target: body}, {target: what it is served as}, {target: families left out as conflict})
    # `# TYPE x_count gauge` after histogram x is a second TYPE for x: promtool rejected the whole scrape
    "histogram-then-count-gauge": ({"t": HIST + COUNT_GAUGE + OK}, {"t": {**HIST_SERVED, ("ok", ()): "1"}}, {"t": 1}),
    "histogram-then-count-gauge-elsewhere": (
        {"t": HIST, "u": COUNT_GAUGE + OK},
        {"t": HIST_SERVED, "u": {("ok", ()): "1"}},
        {"u": 1},
    ),
    # the histogram takes x_count whether its own body has one or not
    "histogram-without-count-then-count-gauge": (
        {"t": NO_COUNT, "u": COUNT_GAUGE},
        {"t": {k: v for k, v in HIST_SERVED.items() if k[0] != "x_count"}, "u": {}},
        {"u": 1},
    ),
    "histogram-then-help-only-bucket": (
        {"t": HIST, "u": '# HELP x_bucket B.\nx_bucket{le="1"} 7\n' + OK},
        {"t": HIST_SERVED, "u": {("ok", ()): "1"}},
        {"u": 1},
    ),
    # the other way round: the histogram's x_count would be one more series of gauge x_count (from one target,
    # the same series twice: Prometheus keeps one, as a gauge); first come, first served
    "count-gauge-then-histogram": (
        {"t": COUNT_GAUGE + HIST + OK},
        {"t": {("x_count", ()): "5", ("ok", ()): "1"}},
        {"t": 1},
    ),
    "count-gauge-then-histogram-elsewhere": (
        {"t": COUNT_GAUGE, "u": HIST + OK},
        {"t": {("x_count", ()): "5"}, "u": {("ok", ()): "1"}},
        {"u": 1},
    ),
    # nothing else is lost: a histogram without x_count beside gauge x_count, x_created, stray buckets
    "count-gauge-then-histogram-without-count": (
        {"t": COUNT_GAUGE, "u": NO_COUNT},
        {"t": {("x_count", ()): "5"}, "u": {k: v for k, v in HIST_SERVED.items() if k[0] != "x_count"}},
        {},
    ),
    "histogram-and-created": (
        {"t": HIST + "# TYPE x_created gauge\nx_created 1.7e+09\n"},
        {"t": {**HIST_SERVED, ("x_created", ()): "1.7e+09"}},
        {},
    ),
    "stray-bucket-before-histogram": (
        {"t": OK + 'x_bucket{le="0.5"} 1\n', "u": HIST},
        {"t": {("ok", ()): "1", ("x_bucket", (("le", "0.5"),)): "1"}, "u": HIST_SERVED},
        {},
    ),
    "summary-then-sum-gauge": (
        {"t": SUMMARY, "u": "# TYPE s_sum gauge\ns_sum 9\n# TYPE s_bucket gauge\ns_bucket 4\n"},
        {"t": SUMMARY_SERVED, "u": {("s_bucket", ()): "4"}},
        {"u": 1},
    ),
    "count-counter-then-summary": (
        {"t": "# TYPE s_count counter\ns_count 4\n", "u": SUMMARY + OK},
        {"t": {("s_count", ()): "4"}, "u": {("ok", ()): "1"}},
        {"u": 1},
    ),
}


def served_twice(text: str) -> list[tuple]:
    """(name, labels) served more than once: Prometheus would keep one of them."""
    from collections import Counter

    seen = Counter((s.name, s.labels) for fam in split_families(text) for s in fam.samples())
    return [key for key, n in seen.items() if n > 1]


@pytest.mark.parametrize("bodies,served,conflicts", CLASHES.values(), ids=CLASHES)
def test_a_family_promtool_files_under_another_is_left_out_counted_and_logged(
    bodies, served, conflicts, normalizer, caplog
):
    routes = {f"/{name}": static(body.encode()) for name, body in bodies.items()}
    with caplog.at_level("WARNING", logger="inferwatch.exporter"):
        text, _ = run(serve_once(routes, normalizer))
    assert_served_parses(text)
    assert health(text) == {name: "1.0" for name in bodies}
    assert {name: target_samples(text, name) for name in bodies} == served
    assert not served_twice(text)
    assert {t: n for (t, reason), n in dropped_total(text).items() if reason == "conflict"} == conflicts
    logged = [r.getMessage() for r in caplog.records if "clash" in r.getMessage()]
    assert [m.split(":")[0] for m in logged] == [f"target {t}" for t in conflicts], logged
