"""Mapping files: the shipped ones are valid, a user's works without code, and bad ones get exact errors."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT
from gpu_tools import series

from inferwatch.errors import SpecError
from inferwatch.exporters import Normalizer
from inferwatch.mappings import builtin_mapping_paths, load_mapping

GOOD = """version: 1
source: tgi
detect: ["tgi_"]
set_labels: {engine: tgi}
metrics:
  - name: llm_requests_waiting
    from: tgi_queue_size
"""

BAD = [
    # (change to GOOD, line of the field's own key, field, words)
    (
        ("from: tgi_queue_size", "fro: tgi_queue_size"),
        7,
        "metrics[0] (llm_requests_waiting).fro",
        "unknown key; did you mean 'from'?",
    ),
    (
        ("llm_requests_waiting", "llm_request_waiting"),
        6,
        "metrics[0] (llm_request_waiting).name",
        "did you mean 'llm_requests_waiting'?",
    ),
    (("version: 1", "version: 2"), 1, "version", "must be 1"),
    (('detect: ["tgi_"]\n', ""), 1, "detect", "required"),
    (
        ("    from: tgi_queue_size", "    from: tgi_queue_size\n    multiply: -3"),
        8,
        "metrics[0] (llm_requests_waiting).multiply",
        "positive number",
    ),
    (
        ("    from: tgi_queue_size", "    from: 'tgi queue'"),
        7,
        "metrics[0] (llm_requests_waiting).from",
        "not a valid metric name",
    ),
    (("source: tgi", "source: TGI!"), 2, "source", "short lower-case id"),
    (("metrics:", "metrix:"), 5, "metrix", "unknown key; did you mean 'metrics'?"),
    (
        ("    from: tgi_queue_size", "    from: tgi_queue_size\n    bit: 3"),
        8,
        "metrics[0] (llm_requests_waiting).bit",
        "a power of two such as 0x4",
    ),
    (
        ("    from: tgi_queue_size", "    from: tgi_queue_size\n    bit: 0x4\n    divide: 100"),
        8,
        "metrics[0] (llm_requests_waiting).bit",
        "either bit or multiply/divide",
    ),
    (
        ("llm_requests_waiting\n    from: tgi_queue_size", "llm_preemptions_total\n    from: tgi_x\n    bit: 0x4"),
        8,
        "metrics[0] (llm_preemptions_total).bit",
        "a gauge; this name is a counter",
    ),
    (
        ("    from: tgi_queue_size", "    from: tgi_queue_size\n    set_labels: {reason: [a]}"),
        8,
        "metrics[0] (llm_requests_waiting).set_labels.reason",
        "expected a string value",
    ),
]


@pytest.mark.parametrize("change,line,field,words", BAD)
def test_bad_mapping_names_file_line_field(change, line, field, words, catalog, tmp_path):
    path = tmp_path / "tgi.yaml"
    path.write_text(GOOD.replace(*change))
    with pytest.raises(SpecError) as err:
        load_mapping(path, catalog)
    messages = [str(p) for p in err.value.problems]
    assert any(m.startswith(f"{path}:{line}: {field}:") and words in m for m in messages), messages


def test_histogram_scale_and_duplicates_are_rejected_together(catalog, tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text(
        GOOD + "  - name: llm_time_to_first_token_seconds\n    from: tgi_ttft\n    divide: 1000\n"
        "  - name: llm_requests_waiting\n    from: tgi_other\n"
    )
    with pytest.raises(SpecError) as err:
        load_mapping(path, catalog)
    text = str(err.value)
    assert "cannot be scaled" in text and "maps llm_requests_waiting a second time" in text


def test_invalid_yaml_names_the_line(catalog, tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("version: 1\nmetrics: [\n")
    with pytest.raises(SpecError) as err:
        load_mapping(path, catalog)
    assert str(err.value).startswith(f"{path}:3: invalid YAML")


@pytest.mark.parametrize("path", builtin_mapping_paths() + [ROOT / "mappings/examples/tgi.yaml"], ids=lambda p: p.name)
def test_shipped_mappings_check_clean(path):
    proc = subprocess.run(
        [sys.executable, "-m", "inferwatch", "mappings", "check", str(path)], capture_output=True, text=True
    )
    assert proc.returncode == 0 and ": ok: source" in proc.stdout


def test_cli_check_lists_every_problem_without_traceback(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(GOOD.replace("version: 1", "version: 3").replace("tgi_queue_size", "9x"))
    proc = subprocess.run(
        [sys.executable, "-m", "inferwatch", "mappings", "check", str(path)], capture_output=True, text=True
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.count(str(path)) == 2


def test_user_mapping_works_without_code(mappings, catalog):
    from inferwatch.mappings import load_mappings

    user = load_mappings([ROOT / "mappings/examples/tgi.yaml"], catalog)
    text = (
        "# TYPE tgi_queue_size gauge\ntgi_queue_size 3\n"
        '# TYPE tgi_request_duration histogram\ntgi_request_duration_bucket{le="1"} 2\n'
        'tgi_request_duration_bucket{le="+Inf"} 3\ntgi_request_duration_sum 2.5\ntgi_request_duration_count 3\n'
    )
    out = Normalizer(user, catalog).normalize(text)
    assert out.sources == ("tgi",)
    rendered = out.render()
    assert 'llm_requests_waiting{engine="tgi"} 3' in rendered
    assert 'llm_request_duration_seconds_bucket{le="+Inf",engine="tgi"} 3' in rendered
    relabel = subprocess.run(
        [
            sys.executable,
            "-m",
            "inferwatch",
            "mappings",
            "relabel",
            "--source",
            "tgi",
            "--mapping",
            str(ROOT / "mappings/examples/tgi.yaml"),
        ],
        capture_output=True,
        text=True,
    )
    assert relabel.returncode == 0 and "replacement: llm_requests_waiting" in relabel.stdout


def test_servicemonitor_format_uses_operator_keys():
    proc = subprocess.run(
        [sys.executable, "-m", "inferwatch", "mappings", "relabel", "--format", "servicemonitor", "--source", "vllm"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0
    assert proc.stdout.startswith("metricRelabelings:") and "sourceLabels:" in proc.stdout
    assert "source_labels" not in proc.stdout


@pytest.mark.promtool
def test_mapping_rules_record_each_name_once_and_promtool_is_silent():
    """promtool lints a name recorded twice (vLLM's and SGLang's queue time) as a duplicate rule."""
    from conftest import need

    from inferwatch.build import source_copies
    from inferwatch.mappings import load_mappings, recording_rules

    names = [r["record"] for g in recording_rules(load_mappings())["groups"] for r in g["rules"]]
    assert len(names) == len(set(names))
    path = source_copies()["prometheus/rules/inferwatch-mappings.rules.yaml"]
    proc = subprocess.run([need("promtool"), "check", "rules", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0 and "SUCCESS" in proc.stdout
    assert "FAILED" not in proc.stdout + proc.stderr and "lint" not in proc.stdout + proc.stderr


# --- dcgm-exporter: the NVML exporter's names, units and labels -------------------------------------------

# What `inferwatch exporter gpu` serves that no DCGM field gives exactly (mappings/README.md says why)
NOT_FROM_DCGM = {"gpu_up", "gpu_profiling_supported", "gpu_xid_errors_total"}
DCGM_ONLY_LABELS = {"device", "pci_bus_id", "DCGM_FI_DRIVER_VERSION", "pod_uid", "err_code", "err_msg"}


def _dcgm(mappings):
    from inferwatch.mappings import select_source

    return select_source(mappings, "dcgm")


def test_dcgm_maps_every_family_the_nvml_exporter_serves_but_the_documented_ones(mappings):
    from inferwatch.exporters.gpu._render import GPU_FAMILIES

    mapped = {e.name for e in _dcgm(mappings).entries}
    assert set(GPU_FAMILIES) - mapped == NOT_FROM_DCGM
    readme = (ROOT / "mappings" / "README.md").read_text()
    assert all(f"`{name}`" in readme for name in NOT_FROM_DCGM)


def test_dcgm_clock_event_bits_are_the_nvml_exporters_reasons(mappings):
    """DCGM_CLOCKS_EVENT_REASON_* are NVML's nvmlClocksEventReason* bits: same bit, same `reason` label."""
    import pynvml

    from inferwatch.exporters.gpu._nvml import THROTTLE_REASONS

    bits = {
        dict(e.set_labels)["reason"]: e.bit for e in _dcgm(mappings).entries if e.name == "gpu_clock_throttle_active"
    }
    assert bits == {label: getattr(pynvml, const) for label, const in THROTTLE_REASONS}


def test_dcgm_series_carry_the_nvml_exporters_labels(mappings, catalog):
    """Each family both serve: the simulated NVML exporter's label names, DCGM's own extras aside."""
    from inferwatch.exporters.gpu._model import Workload
    from inferwatch.exporters.gpu._sim import simulated_gpus

    nvml = series(simulated_gpus(2, "t", Workload("inference", "sglang-1", "sglang"))("", False))
    text = (ROOT / "tests/fixtures/expositions/dcgm-4.5-exported-labels.txt").read_text()
    dcgm = series(Normalizer(mappings, catalog).normalize(text).render())
    keys = {}
    for source, found in (("nvml", nvml), ("dcgm", dcgm)):
        for name, labels in found:
            keys.setdefault(name, {}).setdefault(source, set()).add(frozenset(k for k, _ in labels) - DCGM_ONLY_LABELS)
    both = {name: k for name, k in keys.items() if len(k) == 2}
    assert {
        "gpu_sm_clock_hertz",
        "gpu_clock_throttle_active",
        "gpu_ecc_errors_total",
        "gpu_pcie_tx_bytes_per_second",
        "gpu_nvlink_rx_bytes_per_second",
    } <= set(both)
    assert all(k["nvml"] == k["dcgm"] for k in both.values()), both
    ecc = {dict(labels)["type"] for name, labels in dcgm if name == "gpu_ecc_errors_total"}
    assert ecc == {dict(labels)["type"] for name, labels in nvml if name == "gpu_ecc_errors_total"}


def test_dcgm_edges_decode_exactly(mappings, catalog):
    """Both clock-event names in one scrape read once; every bit, none, an unknown bit, DCGM blanks dropped."""
    text = (ROOT / "tests/fixtures/expositions/dcgm-edges/dcgm-4.x-custom-csv.txt").read_text()
    result = Normalizer(mappings, catalog).normalize(text)
    out = series(result.render())
    active: dict[str, list[str]] = {}
    for (name, labels), value in sorted(out.items()):
        if name == "gpu_clock_throttle_active":
            active.setdefault(dict(labels)["gpu"], []).append(dict(labels)["reason"] if value else "")
    assert {gpu: len(r) for gpu, r in active.items()} == {"0": 9, "1": 9, "3": 9}  # gpu 2: a blank
    assert "" not in active["0"] and set(active["1"]) == {""} and set(active["3"]) - {""} == {"hw_slowdown"}
    ecc = {
        (dict(labels)["gpu"], dict(labels)["type"]): v for (n, labels), v in out.items() if n == "gpu_ecc_errors_total"
    }
    assert ecc == {
        ("0", "corrected"): 3,
        ("0", "uncorrected"): 0,
        ("1", "corrected"): 0,
        ("1", "uncorrected"): 0,
        ("3", "corrected"): 0,
        ("3", "uncorrected"): 2,
    }
    assert result.blanks_dropped == 9 + 2 and result.warnings == []


# --- le and quantile: Prometheus reads them on histograms and summaries, a mapping never writes them -----

HIST = "  - name: llm_request_duration_seconds\n    from: tgi_request_duration\n"
BOUNDS = [
    # (text appended to GOOD, line, field, words); `le="fast"` was served, promtool rejected the whole scrape
    (
        HIST + "    set_labels: {le: fast}\n",
        10,
        "metrics[1] (llm_request_duration_seconds).set_labels.le",
        "a mapping may not write le: Prometheus reads it as the bucket bound of a histogram",
    ),
    (
        HIST + "    labels: {le: [speed]}\n",
        10,
        "metrics[1] (llm_request_duration_seconds).labels.le",
        "a mapping may not write le",
    ),
    (
        HIST + "    labels:\n      quantile: [q]\n",
        11,
        "metrics[1] (llm_request_duration_seconds).labels.quantile",
        "a mapping may not write quantile: Prometheus reads it as the quantile of a summary",
    ),
    (
        HIST + "    drop_labels: [le]\n",
        10,
        "metrics[1] (llm_request_duration_seconds).drop_labels",
        "dropping le breaks histogram llm_request_duration_seconds: its buckets would collide as one series",
    ),
    (
        HIST + "    labels: {speed: [le]}\n",
        10,
        "metrics[1] (llm_request_duration_seconds).labels.speed",
        "renaming le to speed breaks histogram llm_request_duration_seconds",
    ),
    # a filter on le keeps some buckets and no _sum/_count: Prometheus accepts the partial histogram, quantiles lie
    (
        HIST + "    match: {le: '+Inf'}\n",
        10,
        "metrics[1] (llm_request_duration_seconds).match.le",
        "matching le keeps only some buckets of histogram llm_request_duration_seconds and drops its _sum and _count",
    ),
    # the mapping's own set_labels and labels: checked too (its problems were never raised before)
    ("", 4, "set_labels.le", "a mapping may not write le"),
    (HIST, 11, "labels.model", "renaming le to model breaks histogram llm_request_duration_seconds"),
]


@pytest.mark.parametrize("extra,line,field,words", BOUNDS, ids=[b[2] for b in BOUNDS])
def test_mappings_never_write_or_remove_le_and_quantile(extra, line, field, words, catalog, tmp_path):
    text = GOOD + extra
    if field.startswith("set_labels"):
        text = text.replace("{engine: tgi}", "{engine: tgi, le: fast}")
    elif field.startswith("labels"):
        text += "labels:\n  model: [model_name, le]\n"
    path = tmp_path / "tgi.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as err:
        load_mapping(path, catalog)
    messages = [str(p) for p in err.value.problems]
    assert len(messages) == 1 and messages[0].startswith(f"{path}:{line}: {field}: ") and words in messages[0], messages


def test_le_stays_where_it_cannot_break_a_histogram(catalog, tmp_path):
    """le dropped, renamed or matched on a gauge, quantile dropped or matched on a histogram: all load."""
    path = tmp_path / "tgi.yaml"
    path.write_text(
        GOOD
        + "    drop_labels: [le]\n    labels: {kind: [le]}\n    match: {le: '+Inf'}\n"
        + HIST
        + "    drop_labels: [quantile]\n    match: {quantile: '0.5'}\n"
    )
    assert [(e.drop_labels, e.match) for e in load_mapping(path, catalog).entries] == [
        (("le",), (("le", "+Inf"),)),
        (("quantile",), (("quantile", "0.5"),)),
    ]


def test_quantile_in_match_is_refused_on_a_summary_and_kept_on_a_gauge(catalog, tmp_path):
    """The shipped catalog has no summary; a catalog that had one gets the same refusal as le on a histogram."""
    from inferwatch.mappings import Catalog, CatalogMetric

    summary = CatalogMetric("llm_request_duration_summary_seconds", "summary", "seconds", "latency", "h")
    with_summary = Catalog({**catalog.metrics, summary.name: summary})
    path = tmp_path / "tgi.yaml"
    path.write_text(
        GOOD + "    match: {quantile: '0.99'}\n  - name: llm_request_duration_summary_seconds\n"
        "    from: tgi_request_duration\n    match: {quantile: '0.99', method: POST}\n"
    )
    with pytest.raises(SpecError) as err:
        load_mapping(path, with_summary)
    assert [str(p) for p in err.value.problems] == [
        f"{path}:11: metrics[1] (llm_request_duration_summary_seconds).match.quantile: matching quantile keeps "
        "only some quantiles of summary llm_request_duration_summary_seconds and drops its _sum and _count: "
        "Prometheus accepts the partial summary and what is read from it silently goes wrong; match on other "
        "labels only"
    ]


def test_cli_refuses_le_in_one_line_per_problem(tmp_path):
    path = tmp_path / "tgi.yaml"
    path.write_text(GOOD.replace("{engine: tgi}", "{engine: tgi, le: fast}"))
    proc = subprocess.run(
        [sys.executable, "-m", "inferwatch", "mappings", "check", str(path)], capture_output=True, text=True
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert (
        proc.stderr.startswith(f"error: {path}:4: set_labels.le: a mapping may not write le")
        and proc.stderr.count("\n") == 1
    ), proc.stderr
