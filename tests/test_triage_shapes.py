"""`inferwatch triage` on label shapes of other people's Prometheus: one model name served by two teams (two
namespaces) and in a second cluster, the model in `model` instead of `model_name` (or in both, disagreeing), each
engine series under `vllm:x` and its sanitized copy `vllm_x` (the same target's, an OTel copy's with its own job
and instance, or only the copy), and Hugging Face ids with a `/` that differ only by case.

One real Prometheus holds them all, each at an hour of its own: models of the main recording
(tests/fixtures/triage/) relabeled as those Prometheus servers would hold them, turned into TSDB blocks by promtool.
Each recorded model must keep its recorded kind, and count every signal once: the readings of the engines'
own names, plainly exposed ("reference"), are what the other shapes must read."""

from __future__ import annotations

import math

import pytest
from triage_tools import (
    HOUR_MS,
    NEEDS_PROMETHEUS,
    hour_windows,
    load_manifest,
    own_names,
    relabeled,
    series_of,
    series_prometheus,
    shifted,
    times,
    used_series,
)

from inferwatch.errors import InferwatchError
from inferwatch.mappings import sanitized
from inferwatch.triage import Connection, load_signals, plot_report, render_text, to_json, triage
from inferwatch.triage._plot import _series

pytestmark = NEEDS_PROMETHEUS

MANIFEST = load_manifest()
KINDS = MANIFEST["models"]
HOURS = {"deployments": 1, "labels": 2, "spellings": 3, "reference": 4, "edges": 5}
LLAMA = "llama-3-8b"
HF, HF_LOWER = "meta-llama/Llama-3.1-8B-Instruct", "meta-llama/llama-3.1-8b-instruct"
# the model each unit of the "deployments" hour was recorded as, and so its kind
DEPLOYED = {
    f"{LLAMA} (namespace=a)": "m-queueing",
    f"{LLAMA} (namespace=b)": "m-doubling",
    f"{LLAMA} (cluster=west, namespace=a)": "m-kv-pressure",
    HF: "m-long-prompts",
    HF_LOWER: "m-quiet",
}
ENGINES = ("m-queueing", "m-kv-pressure", "m-errors", "m-doubling")  # vLLM but m-errors (SGLang)
ODD = "mistral (namespace=x)"  # a model name that reads like a unit name
# the "edges" hour: each unit's first kind
EDGES = {
    f"{LLAMA} (cluster=west, namespace=a)": ["queueing"],
    f"{LLAMA} (namespace=b)": [],
    f"{LLAMA} (namespace=c)": ["missing-data"],
    "qwen (namespace=)": [],
    "qwen (namespace=b)": ["kv-pressure"],
    ODD: ["long-prompts"],
}
COUNTED = ("request_rate", "generation_throughput", "running", "waiting", "engine_series")  # doubled if read twice


def _of(series: list[dict], model: str) -> list[dict]:
    """A recorded model's engine, front-door and GPU series (its GPU's workload pod is `<model>-0`)."""
    return [s for s in series if s["labels"].get("model") == model or s["labels"].get("pod") == f"{model}-0"]


def _deployed(series: list[dict], model: str, name: str, **where: str) -> list[dict]:
    """`model`'s series served as `name` with the deployment labels `where`, on a pod named after `name`."""

    def change(labels):
        for key in ("model", "pod", "target"):
            if key in labels:
                labels[key] = labels[key].replace(model, name)
        return labels | where

    return relabeled(_of(series, model), change)


def _during(series: list[dict], keep) -> list[dict]:
    """The samples whose time (ms) `keep` keeps: a deployment that started or stopped."""
    out = []
    for s in series:
        kept = [(t, v) for t, v in zip(times(s), s["v"], strict=True) if keep(t)]
        if kept:
            out.append(series_of(s["labels"], [t for t, _ in kept], [v for _, v in kept]))
    return out


def _edges(recording: list[dict]) -> list[dict]:
    """llama-3-8b in cluster west, whose front door and GPUs are scraped without the cluster label (a central
    Prometheus; a relabeling on the engines' monitors only), in namespace b from the incident's start on only, in
    namespace c until then only; qwen in namespace b and in no namespace at all (a static scrape config); a model
    whose name reads like a unit name."""

    def engine_in_west(labels):
        engine = labels["__name__"].startswith("llm_") and not labels["__name__"].startswith("llm_frontdoor_")
        return labels | ({"cluster": "west"} if engine else {})

    def no_namespace(labels):
        return {key: value for key, value in labels.items() if key != "namespace"}

    start = MANIFEST["incident"]["start"] * 1000
    return (
        relabeled(_deployed(recording, "m-queueing", LLAMA, namespace="a"), engine_in_west)
        + _during(_deployed(recording, "m-doubling", LLAMA, namespace="b"), lambda t: t >= start)
        + _during(_deployed(recording, "m-quiet", LLAMA, namespace="c"), lambda t: t < start)
        + relabeled(_deployed(recording, "m-quiet", "qwen"), no_namespace)
        + _deployed(recording, "m-kv-pressure", "qwen", namespace="b")
        + _deployed(recording, "m-long-prompts", ODD)
    )


def _model_label(series: list[dict], model: str, value: str | None = None) -> list[dict]:
    """`model`'s engine series carrying `model` (`value`, beside `model_name`) or, without `value`, `model`
    instead of `model_name`: a scrape config that relabeled or set it."""

    def change(labels):
        if "model_name" in labels:
            labels["model"] = value or labels["model_name"]
            if value is None:
                del labels["model_name"]
        return labels

    return relabeled(series, change)


def _sanitized(series: list[dict], **labels: str) -> list[dict]:
    """The engine series under their sanitized names (`vllm_x`), with the `labels` a copy's scrape gives them."""
    engine = ("vllm:", "sglang:")
    return [
        dict(s, labels=s["labels"] | {"__name__": sanitized(s["labels"]["__name__"])} | labels)
        for s in series
        if s["labels"]["__name__"].startswith(engine)
    ]


@pytest.fixture(scope="module")
def prom(tmp_path_factory):
    recording = used_series(MANIFEST)
    own = {model: own_names(_of(recording, model)) for model in ENGINES}
    hours = {
        "deployments": _deployed(recording, "m-queueing", LLAMA, namespace="a")
        + _deployed(recording, "m-doubling", LLAMA, namespace="b")
        + _deployed(recording, "m-kv-pressure", LLAMA, namespace="a", cluster="west")
        + relabeled(
            _of(recording, "m-long-prompts"), lambda labels: labels | ({"model": HF} if "model" in labels else {})
        )
        + relabeled(
            _of(recording, "m-quiet"), lambda labels: labels | ({"model": HF_LOWER} if "model" in labels else {})
        ),
        "labels": _model_label(own["m-queueing"], "m-queueing")
        + _model_label(own["m-errors"], "m-errors")
        + _model_label(own["m-kv-pressure"], "m-kv-pressure", "vllm-pool")
        + own["m-doubling"],
        "spellings": own["m-queueing"]
        + _sanitized(own["m-queueing"])
        + own["m-kv-pressure"]
        + _sanitized(own["m-kv-pressure"], job="otel-collector", instance="otel:8889")
        + [s for s in own["m-errors"] if not s["labels"]["__name__"].startswith("sglang:")]
        + _sanitized(own["m-errors"])
        + own["m-doubling"],
        "reference": [s for model in ENGINES for s in own[model]],
        "edges": _edges(recording),
    }
    everything = [s for name, series in hours.items() for s in shifted(series, HOURS[name] * HOUR_MS)]
    with series_prometheus(everything, tmp_path_factory.mktemp("triage-shapes")) as base:
        yield base


@pytest.fixture(scope="module")
def reference(prom):
    incident, baseline = hour_windows(MANIFEST, HOURS["reference"])
    return triage(Connection(prom), incident, baseline)


def _kinds(report) -> dict[str, list[str]]:
    return {v.unit: [f.kind for f in v.findings] for v in report.verdicts}


def _expected(kind: str) -> list[str]:
    return [] if kind == "none" else [kind]


def _assert_counted_once(report, reference) -> None:
    """Every model's counts and gauges read as the plainly exposed engines' do: none doubled, none lost."""
    expected = {v.model: v for v in reference.verdicts}
    assert {v.model for v in report.verdicts} == set(expected)
    for verdict in report.verdicts:
        for window in ("baseline", "incident"):
            mine, theirs = getattr(verdict, window), getattr(expected[verdict.model], window)
            for name in COUNTED:
                assert math.isclose(mine[name].value, theirs[name].value, rel_tol=1e-9), (
                    verdict.model,
                    window,
                    name,
                    mine[name].value,
                    theirs[name].value,
                )


def test_one_model_name_in_two_namespaces_and_a_second_cluster_is_judged_per_deployment(prom, tmp_path):
    incident, baseline = hour_windows(MANIFEST, HOURS["deployments"])
    report = triage(Connection(prom), incident, baseline)
    assert {unit: kinds[:1] for unit, kinds in _kinds(report).items()} == {
        unit: _expected(KINDS[model]) for unit, model in DEPLOYED.items()
    }
    assert report.warnings == ()
    # one pod name in each deployment (a StatefulSet's llama-3-8b-0): each unit has its own replica
    a = next(v for v in report.verdicts if v.unit == f"{LLAMA} (namespace=a)")
    assert a.model == LLAMA and a.deployment == (("namespace", "a"),) and a.incident["waiting"].value > 1
    assert next(v for v in report.verdicts if v.unit == f"{LLAMA} (namespace=b)").incident["waiting"].value < 0.5
    # --json keeps the model and the labels apart; a model served once reads exactly as before
    doc = {(m["model"], tuple(sorted(m.get("deployment", {}).items()))): m for m in to_json(report)["models"]}
    assert set(doc) == {
        (LLAMA, (("namespace", "a"),)),
        (LLAMA, (("namespace", "b"),)),
        (LLAMA, (("cluster", "west"), ("namespace", "a"))),
        (HF, ()),
        (HF_LOWER, ()),
    }
    assert "deployment" not in doc[HF, ()]
    text = render_text(report)
    assert f"\n{LLAMA} (namespace=a): queueing (" in text and f"\n{LLAMA} (namespace=b): nothing wrong" in text
    assert f"\n{LLAMA} (cluster=west, namespace=a): kv-pressure (" in text and f"\n{HF}: long-prompts (" in text
    # --plot draws a line per deployment, under the name the report gives it
    lines = _series(report.frames, load_signals(), [v.unit for v in report.verdicts])
    assert {unit for k, signal, unit in lines if k == 1 and signal == "waiting"} == set(DEPLOYED)
    plot_report(report, tmp_path / "incident.png")
    assert (tmp_path / "incident.png").stat().st_size > 10_000


def test_models_are_asked_for_exactly_by_name_with_a_slash_or_by_the_name_of_one_deployment(prom):
    incident, baseline = hour_windows(MANIFEST, HOURS["deployments"])
    asked = triage(Connection(prom), incident, baseline, (HF,))
    assert [(v.unit, [f.kind for f in v.findings][:1]) for v in asked.verdicts] == [
        (HF, _expected(KINDS["m-long-prompts"]))
    ]
    every = triage(Connection(prom), incident, baseline, (f"{LLAMA} (namespace=b)", LLAMA))
    assert [v.unit for v in every.verdicts] == [
        f"{LLAMA} (namespace=b)",
        f"{LLAMA} (cluster=west, namespace=a)",
        f"{LLAMA} (namespace=a)",
    ]
    with pytest.raises(
        InferwatchError,
        match=r"--model 'llama-3-8b \(namespace=c\)': no such deployment; "
        r"llama-3-8b is served as 'llama-3-8b \(cluster=west",
    ):
        triage(Connection(prom), incident, baseline, (f"{LLAMA} (namespace=c)",))
    with pytest.raises(
        InferwatchError,
        match="case-sensitive: did you mean 'meta-llama/Llama-3.1-8B-Instruct' or 'meta-llama/llama-3.1-8b-instruct'",
    ):
        triage(Connection(prom), incident, baseline, (HF.upper(),))
    # a model served in one deployment has no deployment names: say which name to ask for
    with pytest.raises(
        InferwatchError,
        match=rf"--model '{HF} \(namespace=inference\)': {HF} is served in one "
        rf"deployment here: ask for '{HF}'$",
    ):
        triage(Connection(prom), incident, baseline, (f"{HF} (namespace=inference)",))


def test_the_model_in_model_instead_of_model_name_is_read_and_model_name_wins_where_both_are(prom, reference):
    incident, baseline = hour_windows(MANIFEST, HOURS["labels"])
    report = triage(Connection(prom), incident, baseline)
    assert report.warnings == () and report.read_from_sources == ("engine", "gpu")
    for verdict in report.verdicts:  # m-kv-pressure's `model="vllm-pool"` loses to its model_name
        assert [f.kind for f in verdict.findings][:1] == _expected(KINDS[verdict.model]), verdict
    _assert_counted_once(report, reference)


def test_colon_names_and_their_sanitized_copies_are_counted_once(prom, reference):
    incident, baseline = hour_windows(MANIFEST, HOURS["spellings"])
    report = triage(Connection(prom), incident, baseline)
    assert report.warnings == ()  # the same target's two spellings are no "duplicate labelset" error
    for verdict in report.verdicts:  # m-errors is read from its sanitized names alone
        assert [f.kind for f in verdict.findings][:1] == _expected(KINDS[verdict.model]), verdict
    _assert_counted_once(report, reference)


@pytest.fixture(scope="module")
def edges(prom):
    incident, baseline = hour_windows(MANIFEST, HOURS["edges"])
    return {v.unit: v for v in triage(Connection(prom), incident, baseline).verdicts}


def test_every_deployment_of_the_edges_hour_is_a_unit_with_its_kind(edges):
    # namespace c, gone with the incident, is missing data, as a replica that went away is
    assert {unit: [f.kind for f in v.findings][:1] for unit, v in edges.items()} == EDGES


def test_series_without_the_cluster_label_go_with_the_one_deployment_their_labels_agree_with(edges):
    """A front door scraped without `cluster` goes with the one engine deployment that agrees with its labels;
    GPU series without it are joined to the engine's pods on namespace and pod."""
    unit = edges[f"{LLAMA} (cluster=west, namespace=a)"]  # its front door and GPUs lack `cluster`
    assert [f.kind for f in unit.findings][:1] == ["queueing"]
    assert unit.incident["door_ttft_mean"].value > 0.5 and unit.incident["door_series"].value == 1
    # its GPUs, joined on namespace and pod and given the engine's cluster, as where every series has cluster
    assert all(0 < unit.incident[name].value <= 1 for name in ("gpu_util", "sm_active", "tensor_active"))
    assert f"{LLAMA} (namespace=a)" not in edges


def test_a_deployment_without_labels_is_named_apart_from_the_model(prom, edges):
    # a static scrape config without `namespace` beside a team's namespace: two deployments, each named as one
    assert {
        unit: [f.kind for f in edges[unit].findings][:1] for unit in ("qwen (namespace=)", "qwen (namespace=b)")
    } == {"qwen (namespace=)": _expected(KINDS["m-quiet"]), "qwen (namespace=b)": ["kv-pressure"]}
    assert edges["qwen (namespace=)"].deployment == (("namespace", ""),) and "qwen" not in edges
    incident, baseline = hour_windows(MANIFEST, HOURS["edges"])
    asked = triage(Connection(prom), incident, baseline, ("qwen (namespace=)",))
    assert [v.unit for v in asked.verdicts] == ["qwen (namespace=)"]
    assert to_json(asked)["models"][0]["deployment"] == {"namespace": ""}


def test_a_model_whose_name_reads_like_a_unit_name_is_asked_for_by_it(prom, edges):
    assert [f.kind for f in edges[ODD].findings][:1] == ["long-prompts"] and edges[ODD].deployment == ()
    incident, baseline = hour_windows(MANIFEST, HOURS["edges"])
    asked = triage(Connection(prom), incident, baseline, (ODD,))
    assert [(v.model, v.unit) for v in asked.verdicts] == [(ODD, ODD)]


def test_a_deployment_that_started_with_the_incident_has_no_baseline_and_says_so(edges):
    unit = edges[f"{LLAMA} (namespace=b)"]
    assert unit.findings == () and unit.incident["ttft_mean"].value is not None
    assert unit.not_enough_data.startswith(
        "no baseline to compare with: latency measured in the incident only (queue_time_mean, ttft_mean"
    ), unit.not_enough_data
