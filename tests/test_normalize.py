"""Normalizing every real capture and every release where names, labels or buckets changed."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pytest
from conftest import EXPOSITIONS, GOLDEN, REAL_CAPTURES, all_expositions, check_golden

from inferwatch.exporters import Normalizer, _normalize, split_families
from inferwatch.mappings import sanitized


@pytest.fixture(scope="module")
def normalizer(mappings, catalog):
    return Normalizer(mappings, catalog)


def series(text: str) -> list[tuple]:
    """(name, sorted labels) of every sample, with empty labels dropped as Prometheus does."""
    out = []
    for fam in split_families(text):
        for s in fam.samples():
            out.append((s.name, tuple(sorted((k, v) for k, v in s.labels if v)), s.value))
    return out


def common(text: str) -> dict[tuple, str]:
    return {(n, labels): v for n, labels, v in series(text) if n.startswith(("llm_", "gpu_"))}


@pytest.mark.parametrize("path", all_expositions(), ids=lambda p: p.name)
def test_golden(path, normalizer):
    """The whole normalized output, compared byte for byte (INFERWATCH_UPDATE_GOLDEN=1 rewrites)."""
    out = normalizer.normalize(path.read_text()).render()
    check_golden(GOLDEN / (path.stem + ".prom"), out)


@pytest.mark.parametrize("path", all_expositions(), ids=lambda p: p.name)
def test_output_is_valid_with_each_series_once(path, normalizer):
    out = normalizer.normalize(path.read_text()).render()
    fams = split_families(out)
    names = [f.name for f in fams]
    assert len(names) == len(set(names)), "one HELP/TYPE per family"
    keys = [(n, labels) for n, labels, _ in series(out)]
    dupes = [k for k, c in Counter(keys).items() if c > 1]
    assert not dupes


@pytest.mark.parametrize("path", all_expositions(), ids=lambda p: p.name)
def test_fast_path_equals_exact_path(path, normalizer, monkeypatch):
    fast = common(normalizer.normalize(path.read_text()).render())
    monkeypatch.setattr(_normalize, "_fast_rewrite", lambda *a: None)
    slow = common(normalizer.normalize(path.read_text()).render())
    assert fast == slow


def test_every_mapped_source_name_is_exercised(mappings, normalizer):
    """Each source name of every mapping appears in a fixture, and normalizing yields its common name."""
    seen: set[str] = set()
    produced: set[str] = set()
    for path in all_expositions():
        text = path.read_text()
        seen |= {f.name for f in split_families(text)}
        produced |= {n for n, _ in common(normalizer.normalize(text).render())}
    missing = []
    for mapping in mappings:
        for entry in mapping.entries:
            for src in entry.sources:
                if src not in seen and sanitized(src) not in seen:
                    missing.append(f"{mapping.source}: {src}")
            hist = (entry.name + "_count") if entry.type == "histogram" else entry.name
            if hist not in produced:
                missing.append(f"{mapping.source}: {entry.name} never produced")
    assert not missing


def _one(text, normalizer, name, **labels):
    found = [
        (got, v)
        for (n, got), v in common(normalizer.normalize(text).render()).items()
        if n == name and all(dict(got).get(k) == val for k, val in labels.items())
    ]
    return found


def test_vllm_0_10_emits_itl_once_from_old_and_new_names(normalizer):
    text = (EXPOSITIONS / "vllm-0.10.2.txt").read_text()
    counts = _one(text, normalizer, "llm_inter_token_latency_seconds_count")
    assert sorted(dict(labels)["dp_rank"] for labels, _ in counts) == ["0", "1"]
    assert len(_one(text, normalizer, "llm_kv_cache_usage_ratio")) == 2
    assert len(_one(text, normalizer, "llm_prefix_cache_hit_tokens_total")) == 2


def test_old_vllm_tpot_is_inter_token_latency_but_old_sglang_tpot_is_per_request(normalizer):
    old_vllm = (EXPOSITIONS / "vllm-0.7.3.v1.txt").read_text()
    assert _one(old_vllm, normalizer, "llm_inter_token_latency_seconds_count")
    assert not _one(old_vllm, normalizer, "llm_time_per_output_token_seconds_count")
    old_sglang = (REAL_CAPTURES / "sglang-0.3.6-docs-production-metrics.txt").read_text()
    [(labels, value)] = _one(old_sglang, normalizer, "llm_time_per_output_token_seconds_count")
    assert value == "7.400757e+06"
    assert not _one(old_sglang, normalizer, "llm_inter_token_latency_seconds_count")


def test_vllm_engine_label_becomes_dp_rank(normalizer):
    text = (REAL_CAPTURES / "vllm-0.11.0-hardware-aware-router.txt").read_text()
    [(labels, _)] = _one(text, normalizer, "llm_requests_running")
    assert dict(labels) == {"model": "Qwen/Qwen1.5-0.5B-Chat", "dp_rank": "0", "engine": "vllm"}


def test_sglang_labels(normalizer):
    text = (EXPOSITIONS / "sglang-0.5.23.txt").read_text()
    running = _one(text, normalizer, "llm_requests_running", dp_rank="1")
    assert dict(running[0][0])["role"] == "unified" and dict(running[0][0])["engine"] == "sglang"
    assert _one(text, normalizer, "llm_time_to_first_token_seconds_count", is_streaming="true")
    assert len(_one(text, normalizer, "llm_prefix_cache_hit_tokens_total")) == 2  # by cache_source
    assert _one(text, normalizer, "llm_http_requests_total", status_code="503")
    # SGLang's queue histogram is named queue_time_s in 0.5.2 only
    assert _one((EXPOSITIONS / "sglang-0.5.2.txt").read_text(), normalizer, "llm_request_queue_time_seconds_count")


def test_vllm_aborted_is_filtered_from_finished(normalizer):
    text = (EXPOSITIONS / "vllm-0.33.0.txt").read_text()
    [(labels, value)] = _one(text, normalizer, "llm_requests_aborted_total")
    assert "finished_reason" not in dict(labels) and value == "1.0"
    assert len(_one(text, normalizer, "llm_requests_finished_total")) == 5


def test_dcgm_units_and_labels(normalizer):
    text = (REAL_CAPTURES / "dcgm-exporter-4.4.1-4.6.0-lke-ai-conformance.txt").read_text()
    [(labels, used)] = _one(text, normalizer, "gpu_memory_used_bytes")
    assert float(used) == 1 * 1048576
    labels = dict(labels)
    assert labels["uuid"].startswith("GPU-a8394b51") and labels["gpu_model"] == "NVIDIA RTX 4000 Ada Generation"
    assert labels["hostname"].startswith("lke") and labels["pod"] == "cuda-75454ffb9f-8ljq7"
    assert not {"UUID", "modelName", "Hostname"} & set(labels)
    [(_, energy)] = _one(text, normalizer, "gpu_energy_joules_total")
    assert float(energy) == 455497156 / 1000


def test_dcgm_exported_labels_win_and_old_namespace_maps(normalizer):
    text = (EXPOSITIONS / "dcgm-4.5-exported-labels.txt").read_text()
    [(labels, util)] = _one(text, normalizer, "gpu_utilization_ratio")
    labels = dict(labels)
    assert (labels["pod"], labels["namespace"], labels["container"]) == ("sglang-1", "inference", "sglang")
    assert not any(k.startswith("exported_") for k in labels) and float(util) == 0.99
    old = (EXPOSITIONS / "dcgm-3.3-old-namespace.txt").read_text()
    gpu0 = dict(_one(old, normalizer, "gpu_utilization_ratio", gpu="0")[0][0])
    assert (gpu0["pod"], gpu0["namespace"], gpu0["container"], gpu0["hostname"]) == (
        "vllm-0",
        "inference",
        "vllm",
        "node-a",
    )


def test_dcgm_blank_sentinels_are_missing_not_huge(normalizer):
    result = normalizer.normalize((EXPOSITIONS / "dcgm-3.3-old-namespace.txt").read_text())
    temps = _one(result.render(), normalizer, "gpu_temperature_celsius")
    assert [dict(labels)["gpu"] for labels, _ in temps] == ["0"]
    assert result.blanks_dropped == 1


def test_sanitized_names_are_recognised(normalizer):
    text = (EXPOSITIONS / "vllm-0.33.0.txt").read_text().replace("vllm:", "vllm_")
    assert common(normalizer.normalize(text).render()) == common(
        normalizer.normalize((EXPOSITIONS / "vllm-0.33.0.txt").read_text()).render()
    )


def test_openmetrics_style_counter_family(normalizer):
    text = (
        '# TYPE vllm:prompt_tokens counter\nvllm:prompt_tokens_total{model_name="m"} 5\n'
        'vllm:prompt_tokens_created{model_name="m"} 1.7e9\n'
    )
    assert common(normalizer.normalize(text).render()) == {
        ("llm_prompt_tokens_total", (("engine", "vllm"), ("model", "m"))): "5"
    }


def test_keep_original_and_drop_unmapped(mappings, catalog):
    text = (REAL_CAPTURES / "vllm-0.11.0-hardware-aware-router.txt").read_text()
    kept = Normalizer(mappings, catalog, keep_original=True).normalize(text).render()
    assert "vllm:num_requests_running{" in kept and "llm_requests_running{" in kept
    dropped = Normalizer(mappings, catalog, drop_unmapped=True).normalize(text).render()
    assert {f.name[:4] for f in split_families(dropped)} == {"llm_"}


def test_forced_source_maps_without_detection(mappings, catalog):
    text = "num_running_reqs_x 1\n"
    assert Normalizer(mappings, catalog, source="sglang").normalize(text).sources == ("sglang",)


def _cli(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "inferwatch", *args], input=stdin, capture_output=True, text=True)


def test_cli_normalize_from_file_and_stdin():
    path = REAL_CAPTURES / "sglang-0.3.6-docs-production-metrics.txt"
    from_file = _cli("normalize", str(path))
    from_stdin = _cli("normalize", stdin=path.read_text())
    assert from_file.returncode == 0 and from_file.stdout == from_stdin.stdout
    assert "llm_requests_waiting{" in from_file.stdout


def test_cli_garbage_gets_a_line_number_not_a_traceback():
    proc = _cli("normalize", stdin="# TYPE a gauge\na 1\na{ 2\n")
    assert proc.returncode == 1
    assert proc.stderr.strip() == "error: <stdin>:3: malformed label set in 'a{ 2'"


def test_cli_unknown_source():
    proc = _cli("normalize", "--source", "tgi", stdin="a 1\n")
    assert proc.returncode == 1 and "known" in proc.stderr and "Traceback" not in proc.stderr


# --- saying when the output is not useful (warnings are data; the CLI prints them) ---------------------------

VLLM = REAL_CAPTURES / "vllm-0.11.0-hardware-aware-router.txt"
SGLANG = REAL_CAPTURES / "sglang-0.3.6-docs-production-metrics.txt"


@pytest.mark.parametrize("path", all_expositions(), ids=lambda p: p.name)
def test_complete_scrapes_raise_no_warning(path, normalizer):
    result = normalizer.normalize(path.read_text())
    assert result.warnings == [] and normalizer.check(result) == []


def _notes(mappings, catalog, text: str, **options) -> tuple[str, list[str]]:
    normalizer = Normalizer(mappings, catalog, **options)
    result = normalizer.normalize(text)
    return result.render(), result.warnings + normalizer.check(result)


def test_a_source_that_does_not_match_the_input_is_named(mappings, catalog):
    out, notes = _notes(mappings, catalog, SGLANG.read_text(), source="vllm", drop_unmapped=True)
    assert out == ""
    assert notes[0] == "--source vllm: no vllm metrics in the input (the input looks like sglang)"
    assert any(n.startswith("the output has no samples") for n in notes)


def test_drop_unmapped_without_a_known_source_says_the_output_is_empty(mappings, catalog):
    out, notes = _notes(mappings, catalog, "# TYPE foo gauge\nfoo 1\n", drop_unmapped=True)
    assert out == "" and notes == [
        "no known source detected; --drop-unmapped left out everything (use --source or add a mapping)"
    ]
    _, notes = _notes(mappings, catalog, "# TYPE foo gauge\nfoo 1\n")
    assert notes == ["no known source detected; everything passed through unchanged (use --source or add a mapping)"]


def test_an_engine_without_its_key_series_is_named(mappings, catalog):
    text = "".join(
        line + "\n"
        for line in VLLM.read_text().splitlines()
        if "num_requests_running" not in line and "time_to_first_token" not in line
    )
    _, notes = _notes(mappings, catalog, text)
    assert notes == [
        "vllm: no samples for llm_requests_running, llm_time_to_first_token_seconds: dashboards and "
        "SLOs that read them will show no data (a partial scrape, or a release whose names no mapping "
        "knows?)"
    ]


def _cut(after: str) -> str:
    lines = VLLM.read_text().splitlines()
    end = next(
        i for i, line in enumerate(lines) if line.startswith("vllm:time_to_first_token_seconds") and after in line
    )
    return "\n".join(lines[: end + 1]) + "\n"


@pytest.mark.parametrize(
    "after,words", [('le="0.1"', "has no +Inf bucket, _sum or _count"), ('le="+Inf"', "has no _sum or _count")]
)
def test_a_histogram_cut_at_a_line_boundary_is_named(after, words, mappings, catalog):
    _, notes = _notes(mappings, catalog, _cut(after))
    assert [n for n in notes if "cut short" in n] == [
        f"histogram vllm:time_to_first_token_seconds (line 208) {words}: was the input cut short?"
    ]


def test_a_histogram_whose_last_series_is_cut_is_named(normalizer):
    text = (
        '# TYPE h histogram\nh_bucket{a="1",le="+Inf"} 1\nh_sum{a="1"} 1\nh_count{a="1"} 1\nh_bucket{a="2",le="1"} 1\n'
    )
    assert normalizer.normalize(text).warnings == [
        "histogram h (line 1) ends in a _bucket line: was the input cut short?"
    ]


def test_cli_prints_the_warnings_on_stderr_and_exits_0():
    proc = _cli("normalize", "--source", "vllm", "--drop-unmapped", str(SGLANG))
    assert proc.returncode == 0 and proc.stdout == ""
    assert (
        proc.stderr.splitlines()[0] == "warning: --source vllm: no vllm metrics in the input (the input looks "
        "like sglang)"
    )


# --- real pastes that are not complete scrapes (real-captures/partial/): what each one gives and says -------------

PARTIAL = REAL_CAPTURES / "partial"
NO_DATA = (
    "dashboards and SLOs that read them will show no data (a partial scrape, or a release whose names no "
    "mapping knows?)"
)
PARTIAL_NOTES = {
    # SGLang's docs, Nov 2024: a pre-0.3.6 build (model in `name`, old gauge names no wheel shipped)
    "sglang-0.3.5-dev-docs-2024-11.txt": [
        f"sglang: no samples for llm_requests_running, llm_requests_waiting: {NO_DATA}"
    ],
    # aibrix docs: a vLLM 0.7 V0 scrape cut inside vllm:iteration_tokens_total, before the TTFT histogram
    "vllm-0.7-v0-aibrix-docs.txt": [
        "histogram vllm:iteration_tokens_total (line 39) has no +Inf bucket or _count: was the input cut short?",
        f"vllm: no samples for llm_time_to_first_token_seconds: {NO_DATA}",
    ],
}


@pytest.mark.parametrize("name", sorted(PARTIAL_NOTES))
def test_partial_real_pastes_say_what_is_missing_and_map_the_rest(name, normalizer):
    result = normalizer.normalize((PARTIAL / name).read_text())
    assert result.warnings + normalizer.check(result) == PARTIAL_NOTES[name]
    check_golden(GOLDEN / (name.removesuffix(".txt") + ".prom"), result.render())


def test_pre_0_3_6_sglang_keeps_its_model(normalizer):
    """The model was in `name` before 0.3.6; every series that maps keeps it as `model`."""
    text = (PARTIAL / "sglang-0.3.5-dev-docs-2024-11.txt").read_text()
    labels = {"model": "google/gemma-2-9b-it", "engine": "sglang"}
    for name in (
        "llm_time_to_first_token_seconds_count",
        "llm_request_duration_seconds_count",
        "llm_kv_cache_usage_ratio",
        "llm_prompt_tokens_total",
    ):
        assert _one(text, normalizer, name, **labels), name
    assert [v for _, v in _one(text, normalizer, "llm_request_duration_seconds_sum", **labels)] == ["70517.99934530258"]
    assert all(
        "name" not in dict(got) for (n, got) in common(normalizer.normalize(text).render()) if n.startswith("llm_")
    )


def test_sum_and_count_only_histograms_still_map(normalizer):
    """vLLM on Neuron as a blog printed it: every histogram as _sum/_count only; each one is named, none is lost."""
    result = normalizer.normalize((PARTIAL / "vllm-neuron-v0-blog-sum-count-only.txt").read_text())
    notes = result.warnings + normalizer.check(result)
    assert len(notes) == 13 and all(
        n.endswith("has only _sum and _count, no buckets: means can be read, quantiles and latency SLOs cannot")
        for n in notes
    )
    out = result.render()
    for name in (
        "llm_time_to_first_token_seconds_count",
        "llm_inter_token_latency_seconds_sum",
        "llm_request_duration_seconds_count",
        "llm_request_queue_time_seconds_count",
        "llm_requests_running",
        "llm_kv_cache_usage_ratio",
    ):
        assert f"\n{name}{{" in out, name


ELIDED = PARTIAL / "vllm-docs-design-metrics-elided.txt"


def test_docs_output_with_elision_lines_skips_them_with_one_warning_and_maps_the_rest():
    """vLLM's docs print a scrape with `...` between families: those lines are skipped, said once with the file and
    their line numbers, and the rest is normalized as any cut paste is (its TTFT histogram has no +Inf bucket)."""
    proc = _cli("normalize", str(ELIDED))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    assert proc.stderr.splitlines() == [
        f"warning: {ELIDED}: skipped lines 4, 8, 14: only '...', an elision in pasted docs, not a sample",
        "warning: histogram vllm:time_to_first_token_seconds (line 15) has no +Inf bucket or _sum: was the input "
        "cut short?",
        f"warning: vllm: no samples for llm_requests_waiting, llm_kv_cache_usage_ratio: {NO_DATA}",
    ]
    check_golden(GOLDEN / "vllm-docs-design-metrics-elided.prom", proc.stdout)
    assert "llm_generation_tokens_total{" in proc.stdout and "llm_time_to_first_token_seconds_bucket{" in proc.stdout


@pytest.mark.parametrize("elision", ["...", "…", "  ...", "\t…  "])
def test_an_elision_line_anywhere_is_skipped_and_its_line_named(elision, normalizer):
    text = (
        "# TYPE vllm:num_requests_running gauge\n" + elision + "\n" + elision + "\n"
        'vllm:num_requests_running{model_name="m"} 3\n' + elision + "\n"
    )
    result = normalizer.normalize(text, "paste.txt")
    assert result.warnings[0] == "paste.txt: skipped lines 2-3, 5: only '...', an elision in pasted docs, not a sample"
    assert 'llm_requests_running{model="m",engine="vllm"} 3\n' in result.render()


@pytest.mark.parametrize(
    "line,message",
    [
        ("....", "expected a metric name at the start of '....'"),
        ("... 12 more", "expected a metric name at the start of '... 12 more'"),
        ("…more", "expected a metric name at the start of '…more'"),
    ],
)
def test_other_malformed_lines_stay_a_one_line_error_at_their_true_line(line, message, tmp_path):
    """Only a line that is nothing but an elision is skipped; the next bad line keeps its own number."""
    path = tmp_path / "paste.txt"
    path.write_text(
        ELIDED.read_text().replace("vllm:generation_tokens_total{", line + "\nvllm:generation_tokens_total{")
    )
    proc = _cli("normalize", str(path))
    assert proc.returncode == 1 and proc.stderr.splitlines() == [f"error: {path}:7: {message}"]
