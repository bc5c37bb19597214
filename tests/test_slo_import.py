"""`inferwatch slo import`: Sloth, OpenSLO and Pyrra specs become ours; nothing is dropped without a note.

Every real spec collected in `fixtures/slo/real-world/` (see `fixtures/SOURCES.md`) ends one of three ways:
imported whole, imported with what was not carried over listed, or refused with the reason; never a
traceback. Every imported spec passes `slo check` and compiles to rules promtool accepts.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import FIXTURES, need

from inferwatch.errors import SpecError
from inferwatch.slo import (
    check_rule_files,
    compile_spec,
    import_file,
    load_spec,
    parse_spec,
    render_files,
    run_rule_tests,
)
from inferwatch.slo._import import import_text
from inferwatch.slo._import_promql import QueryError, bad_sli, events_sli, good_sli
from inferwatch.yamlio import dump_yaml

CORPUS = FIXTURES / "slo" / "real-world"
SLOTH, OPENSLO, GO_SDK, OSLO = (CORPUS / d for d in ("sloth", "openslo", "go-sdk", "oslo"))
OURS = FIXTURES / "slo" / "openslo-v1.yaml"

# What each real file becomes: full / partial <specs>/<objectives>, or refused. Keeps cases from disappearing.
_SLOTH_TESTDATA = "sloth/test__integration__prometheus__testdata__"
OUTCOMES = {
    "go-sdk/openslo__v1__examples__alert_conditions.yaml": "refused",
    "go-sdk/openslo__v1__examples__alert_notification_targets.yaml": "refused",
    "go-sdk/openslo__v1__examples__alert_policies.yaml": "refused",
    "go-sdk/openslo__v1__examples__data_sources.yaml": "refused",
    "go-sdk/openslo__v1__examples__services.yaml": "refused",
    "go-sdk/openslo__v1__examples__slis.yaml": "refused",
    "go-sdk/openslo__v1__examples__slos.yaml": "partial 1/1",
    "go-sdk/openslo__v1alpha__examples__services.yaml": "refused",
    "go-sdk/openslo__v1alpha__examples__slos.yaml": "refused",
    "go-sdk/openslo__v2alpha__examples__alert_conditions.yaml": "refused",
    "go-sdk/openslo__v2alpha__examples__alert_notification_targets.yaml": "refused",
    "go-sdk/openslo__v2alpha__examples__alert_policies.yaml": "refused",
    "go-sdk/openslo__v2alpha__examples__data_sources.yaml": "refused",
    "go-sdk/openslo__v2alpha__examples__services.yaml": "refused",
    "go-sdk/openslo__v2alpha__examples__slis.yaml": "refused",
    "go-sdk/openslo__v2alpha__examples__slos.yaml": "refused",
    "go-sdk/openslosdk__test_data__decode__sequence_of_objects.yaml": "refused",
    "go-sdk/openslosdk__test_data__decode__single_object.yaml": "refused",
    "go-sdk/openslosdk__test_data__decode__two_documents.yaml": "refused",
    "go-sdk/openslosdk__test_data__decode__v1_slos.yaml": "partial 1/1",
    "go-sdk/openslosdk__test_data__decode__v2alpha_data_source.yaml": "refused",
    "go-sdk/openslosdk__test_data__decode__v2alpha_slos.yaml": "refused",
    "go-sdk/openslosdk__test_data__encode__v1_slo.yaml": "partial 1/1",
    "go-sdk/openslosdk__test_data__export__inputs__custom_config.yaml": "refused",
    "go-sdk/openslosdk__test_data__export__inputs__v1_alert_policies.yaml": "refused",
    "go-sdk/openslosdk__test_data__export__inputs__v1_slo.yaml": "refused",
    "go-sdk/openslosdk__test_data__inline__inputs__custom_config.yaml": "refused",
    "go-sdk/openslosdk__test_data__inline__inputs__v1_alert_policies_invalid_condition.yaml": "refused",
    "go-sdk/openslosdk__test_data__inline__inputs__v1_alert_policies_invalid_target.yaml": "refused",
    "go-sdk/openslosdk__test_data__inline__inputs__v1_alert_policies_keep_refs.yaml": "refused",
    "go-sdk/openslosdk__test_data__inline__inputs__v1_alert_policies_remove_refs.yaml": "refused",
    "go-sdk/openslosdk__test_data__inline__inputs__v1_slo.yaml": "refused",
    "go-sdk/openslosdk__test_data__inline__inputs__v1_slo_invalid_policy.yaml": "refused",
    "go-sdk/openslosdk__test_data__inline__inputs__v1_slo_invalid_sli.yaml": "refused",
    "go-sdk/openslosdk__test_data__inline__inputs__v1_slo_invalid_target.yaml": "refused",
    "openslo/budgeting-method__occurences-slo.yaml": "refused",
    "openslo/budgeting-method__ratio-timeslices.yaml": "refused",
    "openslo/budgeting-method__timeslices-slo.yaml": "refused",
    "openslo/treat-low-traffic-as-equally-important__timeslices-slo.yaml": "refused",
    "oslo/internal__files__testdata__format__invalid-service.yaml": "refused",
    "oslo/internal__files__testdata__format__list-of-services.yaml": "refused",
    "oslo/internal__files__testdata__format__two-documents.yaml": "refused",
    "oslo/internal__files__testdata__format__valid-service.yaml": "refused",
    "oslo/test__inputs__fmt__service.yaml": "refused",
    "oslo/test__inputs__validate__invalid-apiversion.yaml": "refused",
    "oslo/test__inputs__validate__mix__1.yaml": "refused",
    "oslo/test__inputs__validate__mix__2.yaml": "refused",
    "oslo/test__inputs__validate__mix__3.yaml": "refused",
    "oslo/test__inputs__validate__recursive__1.yaml": "refused",
    "oslo/test__inputs__validate__recursive__nested__2.yaml": "refused",
    "oslo/test__inputs__validate__recursive__nested__nested2__nested3__3.yaml": "refused",
    "oslo/test__inputs__validate__unknown-field.yaml": "refused",
    "oslo/test__inputs__validate__v1.yaml": "partial 1/1",
    "oslo/test__inputs__validate__v1alpha.yaml": "refused",
    "oslo/test__inputs__validate__v2alpha.yaml": "refused",
    "pyrra/caddy-response-latency.yaml": "partial 1/1",
    "pyrra/docker-compose__pyrra__prometheus-http.yaml": "partial 1/1",
    "pyrra/kubernetes__manifests__slos__slo-apiserver-read-cluster-latency.yaml": "partial 1/1",
    "pyrra/kubernetes__manifests__slos__slo-apiserver-read-namespace-latency.yaml": "partial 1/1",
    "pyrra/kubernetes__manifests__slos__slo-apiserver-read-resource-latency.yaml": "partial 1/1",
    "pyrra/kubernetes__manifests__slos__slo-apiserver-read-response-errors.yaml": "partial 1/1",
    "pyrra/kubernetes__manifests__slos__slo-apiserver-write-response-errors.yaml": "partial 1/1",
    "pyrra/kubernetes__manifests__slos__slo-coredns-response-errors.yaml": "partial 1/1",
    "pyrra/kubernetes__manifests__slos__slo-kubelet-request-errors.yaml": "partial 1/1",
    "pyrra/kubernetes__manifests__slos__slo-kubelet-runtime-errors.yaml": "partial 1/1",
    "pyrra/kubernetes__manifests__slos__slo-prometheus-notification-errors.yaml": "partial 1/1",
    "pyrra/kubernetes__manifests__slos__slo-prometheus-operator-http-errors.yaml": "partial 1/1",
    "pyrra/kubernetes__manifests__slos__slo-prometheus-operator-reconcile-errors.yaml": "partial 1/1",
    "pyrra/kubernetes__manifests__slos__slo-prometheus-query-errors.yaml": "partial 1/1",
    "pyrra/kubernetes__manifests__slos__slo-prometheus-rule-evaluation-failures.yaml": "partial 1/1",
    "pyrra/kubernetes__manifests__slos__slo-prometheus-sd-kubernetes-errors.yaml": "partial 1/1",
    "pyrra/prometheus-http.yaml": "partial 1/1",
    "sloth/contrib-denominator-corrected.yaml": "partial 1/1",
    "sloth/contrib-slo-plugins.yml": "partial 1/2",
    "sloth/getting-started.yml": "partial 1/1",
    "sloth/home-wifi.yml": "refused",
    "sloth/internal__alert__windows__google-28d.yaml": "refused",
    "sloth/internal__alert__windows__google-30d.yaml": "refused",
    "sloth/k8s-getting-started.yml": "partial 1/1",
    "sloth/k8s-home-wifi.yml": "refused",
    "sloth/k8s-multifile.yml": "partial 2/2",
    "sloth/kubernetes-apiserver.yml": "partial 1/2",
    "sloth/multifile.yml": "partial 2/2",
    "sloth/no-alerts.yml": "partial 1/1",
    "sloth/openslo-getting-started.yml": "full 1/1",
    "sloth/openslo-kubernetes-apiserver.yml": "full 1/3",
    "sloth/plugin-getting-started.yml": "refused",
    "sloth/plugin-k8s-getting-started.yml": "refused",
    "sloth/raw-home-wifi.yml": "refused",
    "sloth/slo-plugin-getting-started.yml": "partial 1/1",
    "sloth/slo-plugin-k8s-getting-started.yml": "partial 1/1",
    "sloth/test__integration__k8scontroller__windows__7d.yaml": "refused",
    _SLOTH_TESTDATA + "in-base-k8s.yaml": "partial 1/1",
    _SLOTH_TESTDATA + "in-base.yaml": "partial 1/1",
    _SLOTH_TESTDATA + "in-invalid-version.yaml": "refused",
    _SLOTH_TESTDATA + "in-multifile-k8s.yaml": "partial 2/2",
    _SLOTH_TESTDATA + "in-multifile.yaml": "partial 2/2",
    _SLOTH_TESTDATA + "in-openslo.yaml": "full 1/1",
    _SLOTH_TESTDATA + "in-sli-plugin.yaml": "refused",
    _SLOTH_TESTDATA + "in-slo-plugin-k8s.yaml": "partial 1/1",
    _SLOTH_TESTDATA + "in-slo-plugin.yaml": "partial 1/1",
    _SLOTH_TESTDATA + "validate__bad__bad-aa.yaml": "partial 1/1",
    _SLOTH_TESTDATA + "validate__bad__bad-ab.yaml": "partial 1/1",
    _SLOTH_TESTDATA + "validate__bad__bad-ba.yaml": "partial 1/1",
    _SLOTH_TESTDATA + "validate__bad__bad-k8s.yaml": "refused",
    _SLOTH_TESTDATA + "validate__bad__bad-multi-k8s.yaml": "partial 2/2",
    _SLOTH_TESTDATA + "validate__bad__bad-multi.yaml": "partial 2/2",
    _SLOTH_TESTDATA + "validate__bad__bad-openslo.yaml": "full 1/1",
    _SLOTH_TESTDATA + "validate__good__good-aa.yaml": "partial 1/1",
    _SLOTH_TESTDATA + "validate__good__good-ab.yaml": "partial 1/1",
    _SLOTH_TESTDATA + "validate__good__good-ba.yaml": "partial 1/1",
    _SLOTH_TESTDATA + "validate__good__good-k8s.yaml": "partial 1/1",
    _SLOTH_TESTDATA + "validate__good__good-multi-k8s.yaml": "partial 2/2",
    _SLOTH_TESTDATA + "validate__good__good-multi.yaml": "partial 2/2",
    _SLOTH_TESTDATA + "validate__good__good-openslo.yaml": "full 1/1",
    _SLOTH_TESTDATA + "validate_with_duplicates__bad-prom-multi-duplicates.yaml": "partial 1/1",
    _SLOTH_TESTDATA + "validate_with_duplicates__k8s__bad-k8s-1-duplicate.yaml": "partial 1/1",
    _SLOTH_TESTDATA + "validate_with_duplicates__k8s__bad-k8s-1-original.yaml": "partial 1/1",
    _SLOTH_TESTDATA + "validate_with_duplicates__openslo__bad-openslo-1-duplicate.yaml": "full 1/1",
    _SLOTH_TESTDATA + "validate_with_duplicates__openslo__bad-openslo-1-original.yaml": "full 1/1",
    _SLOTH_TESTDATA + "validate_with_duplicates__prom__bad-prom-1-duplicate.yaml": "partial 1/1",
    _SLOTH_TESTDATA + "validate_with_duplicates__prom__bad-prom-1-original.yaml": "partial 1/1",
    "sloth/test__integration__prometheus__windows__7d.yaml": "refused",
    "sloth/victoria-metrics.yml": "refused",
    "sloth/windows__7d.yaml": "refused",
    "sloth/windows__custom-30d.yaml": "refused",
    # Specs people wrote for their own services (not the tools' own examples)
    "doc-gen/configs__slo__slo.yaml": "refused",
    "homelab/k8s__helm__manifests__monitoring__slos.yaml": "partial 2/7",
    "kuadrant/examples__alerts__sloth__slo-availability.yaml": "partial 1/1",
    "kuadrant/examples__alerts__sloth__slo-latency.yaml": "partial 1/1",
    "osko/config__samples__openslo_v1_slo.yaml": "partial 1/1",
    "osko/config__samples__slo_gatekeeper_webhook_response_time_0005.yaml": "refused",
    "parca/deploy__pyrra__parca-agent-grpc-client-latency.yaml": "partial 1/1",
    "parca/deploy__pyrra__parca-grpc-profilestore-latency.yaml": "refused",
    "parca/deploy__pyrra__parca-grpc-query-errors.yaml": "partial 1/1",
    "rhobs/mst-production-api-metrics-query-availability-slo.yaml": "partial 1/1",
    "rhobs/mst-production-api-metrics-read-1M-latency-slo.yaml": "partial 1/1",
    "rhobs/mst-production-api-metrics-write-latency-slo.yaml": "partial 1/1",
    "rhobs/telemeter-production-rhobs-telemeter-server-metrics-upload-availability-slo.yaml": "partial 1/1",
    # More of them, collected later (fixtures/SOURCES.md): what each holds is said by the tests below
    "ai-infra/monitoring__slos.yaml": "partial 1/2",
    "banka-3/monitoring__slo.yaml": "partial 2/2",
    "checkout-api/monitoring__slo.yaml": "refused",
    "dash0/examples__resources__dash0_slo__slo.yaml": "partial 1/1",
    "genai-eks-infra/slo__slos.yaml": "refused",
    "lokalise/example-slo-spec.yaml": "refused",
    "m7-05-lab/slos.yaml": "refused",
    "pyrra-openshift/slo.yaml": "partial 42/42",
    "roller/slo__sloth.yaml": "partial 1/1",
    "talk-sloth/slo__slo.yaml": "partial 1/1",
}


def _outcome(path: Path):
    """(outcome, ImportResult or SpecError); any other exception fails the test that asked."""
    try:
        result = import_file(path)
    except SpecError as err:
        return "refused", err
    objectives = sum(len(s["objectives"]) for s in result.specs)
    return f"{'partial' if result.not_carried else 'full'} {len(result.specs)}/{objectives}", result


def _notes(result) -> str:
    return "\n".join(map(str, result.not_carried if hasattr(result, "not_carried") else result.problems))


def _cli(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "inferwatch", "slo", *map(str, args)], capture_output=True, text=True, cwd=cwd
    )


def _run_generated_cases(folder: Path, files: dict[str, str], keep) -> list[dict]:
    """Write a compiled spec's files into `folder` and run, with promtool, the generated test cases whose name
    `keep` accepts (a whole file takes 5-12 s); the cases run."""
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    (test_file,) = (folder / "tests").glob("*.test.yaml")
    doc = yaml.safe_load(test_file.read_text())
    cases = [c for c in doc["tests"] if keep(c["name"])]
    test_file.write_text(yaml.safe_dump({**doc, "tests": cases}))
    ok, output = run_rule_tests([test_file])
    assert ok, output
    return cases


def test_the_corpus_is_all_there():
    files = sorted(p.relative_to(CORPUS).as_posix() for p in CORPUS.rglob("*") if p.is_file())
    assert files == sorted(OUTCOMES)


@pytest.mark.parametrize("name", sorted(OUTCOMES))
def test_every_real_spec_imports_or_says_why_not(name):
    outcome, result = _outcome(CORPUS / name)
    assert outcome == OUTCOMES[name], _notes(result)
    problems = result.problems if outcome == "refused" else result.not_carried
    for problem in problems:  # file[:line]: field: message, pointing into the file
        assert problem.file == str(CORPUS / name) and problem.message
        assert "Traceback" not in problem.message
    if outcome == "refused":
        assert problems
    else:
        for spec in result.specs:
            parse_spec(yaml.safe_load(dump_yaml(spec)), name)


@pytest.mark.promtool
def test_every_imported_spec_passes_check_and_promtool(tmp_path):
    """`slo check` passes, promtool accepts the rules (one batched call), and `slo test` would have tests to run."""
    need("promtool")
    rule_files, untested = [], []
    for i, name in enumerate(n for n, outcome in OUTCOMES.items() if outcome != "refused"):
        for spec in import_file(CORPUS / name).specs:
            folder = tmp_path / f"{i:03d}"
            folder.mkdir(exist_ok=True)
            spec_file = folder / f"{spec['service']}.yaml"
            spec_file.write_text(dump_yaml(spec))
            files, warnings = render_files(compile_spec(load_spec(spec_file)))
            untested += [w for w in warnings if "no generated tests" in w]
            for file_name, text in files.items():
                if file_name.endswith(".rules.yaml"):
                    (folder / file_name).write_text(text)
                    rule_files.append(folder / file_name)
    assert len(rule_files) >= 60 and untested == []
    ok, output = check_rule_files(rule_files)
    assert ok, output


# --- one test per point of the issue -------------------------------------------------------------------------


def test_every_document_of_a_multi_document_sloth_file_is_imported():
    for name in ("multifile.yml", "k8s-multifile.yml"):
        specs = import_file(SLOTH / name).specs
        assert [(s["service"], s["objectives"][0]["target"]) for s in specs] == [
            ("myservice", "99.9%"),
            ("myservice2", "99.99%"),
        ]


def test_documents_of_one_service_are_one_spec_and_a_duplicate_slo_is_noted():
    result = import_file(
        SLOTH / "test__integration__prometheus__testdata__validate_with_duplicates__bad-prom-multi-duplicates.yaml"
    )
    (spec,) = result.specs
    assert spec["service"] == "svc01" and [o["name"] for o in spec["objectives"]] == ["slo1"]
    assert "SLO slo1 of service svc01 is defined twice" in _notes(result)


def test_per_slo_and_group_plugins_are_listed():
    notes = _notes(import_file(SLOTH / "contrib-slo-plugins.yml"))
    assert "slos[0].plugins.chain[0].id: Sloth plugin sloth.dev/contrib/info_labels/v1 not carried over" in notes
    assert "slos[1].plugins.chain[0].id: Sloth plugin sloth.dev/contrib/rule_intervals/v1 not carried over" in notes
    notes = _notes(import_file(SLOTH / "contrib-denominator-corrected.yaml"))
    assert "spec.sloPlugins.chain[0].id: Sloth plugin sloth.dev/contrib/denominator_corrected_rules/v1" in notes


CRD = """\
apiVersion: sloth.slok.dev/v1
kind: PrometheusServiceLevel
metadata: {name: checkout}
spec:
  service: checkout
  labels: {teamName: payments, costCenter: cc-42}
  slos:
    - name: availability
      objective: 99.5
      labels: {sloTier: gold}
      sli:
        events:
          errorQuery: sum(rate(http_requests_total{job="checkout",code=~"5.."}[{{.window}}]))
          totalQuery: sum(rate(http_requests_total{job="checkout"}[{{.window}}]))
      alerting:
        name: CheckoutErrors
        labels: {pagerTeam: payments}
        annotations: {runbookURL: https://runbooks/checkout, dashboardUID: abc}
        pageAlert: {labels: {routingKey: payments}}
"""


def test_user_label_and_annotation_keys_of_a_crd_are_kept_as_written():
    result = import_text(CRD, "crd.yaml")
    (spec,) = result.specs
    assert spec["labels"] == {"costCenter": "cc-42", "pagerTeam": "payments", "sloTier": "gold", "teamName": "payments"}
    (objective,) = spec["objectives"]
    assert objective["annotations"] == {"runbookURL": "https://runbooks/checkout", "dashboardUID": "abc"}
    assert "spec.slos[0].alerting.pageAlert.labels: (routingKey=payments) not carried over" in _notes(result)


def test_a_field_in_the_other_flavours_spelling_is_noted_not_renamed():
    notes = _notes(import_file(SLOTH / "test__integration__prometheus__testdata__validate__good__good-aa.yaml"))
    assert "slos[0].alerting.pageAlert: is no prometheus/v1 field (it spells it page_alert): Sloth ignores it" in notes


@pytest.mark.parametrize(
    "name, source",
    [
        (OPENSLO / "budgeting-method__ratio-timeslices.yaml", "Any"),
        (GO_SDK / "openslo__v1alpha__examples__slos.yaml", "datadog"),
    ],
)
def test_a_non_prometheus_source_is_refused_by_name(name, source):
    with pytest.raises(SpecError) as err:
        import_file(name)
    assert f"{source} is not a Prometheus source" in str(err.value)


@pytest.mark.promtool
def test_slo_test_fails_when_it_generates_no_test_cases(tmp_path):
    need("promtool")
    spec = tmp_path / "any.yaml"
    spec.write_text(
        "service: web\nengines: []\nobjectives:\n  - {name: a, sli: ratio, total: Any, good: Any, target: 99%}\n"
    )
    proc = _cli("test", spec)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "0 generated test cases: no tests for web.a" in proc.stderr


@pytest.mark.parametrize(
    "name, service",
    [
        (GO_SDK / "openslo__v1__examples__slos.yaml", "web"),
        (OSLO / "test__inputs__validate__v1.yaml", "web"),
        (GO_SDK / "openslosdk__test_data__decode__v1_slos.yaml", "foo"),
    ],
)
def test_openslo_documents_written_as_a_yaml_list_are_read(name, service):
    (spec,) = import_file(name).specs
    assert spec["service"] == service and spec["objectives"][0]["sli"] == "ratio"


V2ALPHA = """\
- apiVersion: openslo.com/v2alpha
  kind: DataSource
  metadata: {name: thanos}
  spec: {type: Prometheus}
- apiVersion: openslo.com/v2alpha
  kind: SLO
  metadata: {name: api}
  spec:
    serviceRef: web
    sli:
      spec:
        ratioMetric:
          counter: true
          bad: {dataSourceRef: thanos, spec: {query: 'sum(rate(http_requests_total{code=~"5.."}[5m]))'}}
          total: {dataSourceRef: thanos, spec: {query: 'sum(rate(http_requests_total[5m]))'}}
    timeWindow: [{duration: 4w, isRolling: true}]
    objectives: [{target: 0.995}]
"""


def test_a_source_type_is_found_through_its_data_source():
    result = import_text(V2ALPHA, "v2alpha.yaml")
    assert not result.not_carried
    assert result.specs == [
        {
            "version": 1,
            "service": "web",
            "window": "28d",
            "engines": [],
            "objectives": [
                {
                    "name": "api",
                    "target": "99.5%",
                    "sli": "ratio",
                    "total": "http_requests_total",
                    "bad": 'http_requests_total{code=~"5.."}',
                }
            ],
        }
    ]
    with pytest.raises(SpecError, match="no DataSource 'thanos' in this file"):
        import_text(V2ALPHA.replace("metadata: {name: thanos}", "metadata: {name: other}"), "x.yaml")


V1_WITH_SERVICE = """\
- apiVersion: openslo/v1
  kind: Service
  metadata: {name: web}
  spec: {description: The web shop.}
- apiVersion: openslo/v1
  kind: SLO
  metadata: {name: api}
  spec:
    service: web
    budgetPolicy: occurrences
    indicator:
      spec:
        ratioMetric:
          good: {metricSource: {type: Prometheus, spec: {query: 'http_requests_total{code!~"5.."}'}}}
          total: {metricSource: {type: Prometheus, spec: {query: http_requests_total}}}
    timeWindow: [{duration: 28d, isRolling: true}]
    objectives: [{target: 0.995, weight: 2}]
"""


def test_a_service_description_is_carried_and_unknown_openslo_keys_are_noted():
    result = import_text(V1_WITH_SERVICE, "v1.yaml")
    (spec,) = result.specs
    assert spec["description"] == "The web shop."
    assert spec["objectives"][0]["bad"] == 'http_requests_total{code=~"5.."}'
    notes = _notes(result)
    assert "v1.yaml:10: [1].spec.budgetPolicy: is no OpenSLO field" in notes
    assert "[1].spec.objectives[0].weight: is no OpenSLO field" in notes


def test_a_kubernetes_list_of_sloth_resources_is_read():
    items = CRD.replace("\n", "\n    ").strip()
    (spec,) = import_text(f"apiVersion: v1\nkind: List\nitems:\n  - {items}\n", "list.yaml").specs
    assert spec["service"] == "checkout"


def test_a_failed_import_writes_nothing(tmp_path):
    out = tmp_path / "out.yaml"
    proc = _cli("import", OPENSLO / "budgeting-method__ratio-timeslices.yaml", "-o", out)
    assert proc.returncode == 1 and not out.exists() and list(tmp_path.iterdir()) == []
    proc = _cli("import", SLOTH / "multifile.yml", "-o", out)  # two services, one file: refused
    assert proc.returncode == 1 and "give --out-dir DIR" in proc.stderr and list(tmp_path.iterdir()) == []


def test_several_services_go_to_a_folder_one_spec_each(tmp_path):
    proc = _cli("import", SLOTH / "k8s-multifile.yml", "--out-dir", tmp_path / "specs")
    assert proc.returncode == 0, proc.stderr
    written = sorted(p.name for p in (tmp_path / "specs").iterdir())
    assert written == ["myservice.yaml", "myservice2.yaml"]
    check = _cli("check", *sorted((tmp_path / "specs").iterdir()))
    assert check.returncode == 0, check.stderr


def test_several_services_on_standard_output_are_separate_documents():
    proc = _cli("import", SLOTH / "multifile.yml")
    assert proc.returncode == 0, proc.stderr
    assert [d["service"] for d in yaml.safe_load_all(proc.stdout)] == ["myservice", "myservice2"]
    assert "2 specs, one per service (myservice, myservice2)" in proc.stderr


@pytest.mark.parametrize(
    "name, says",
    [
        (
            SLOTH / "windows__7d.yaml",
            "a Sloth AlertWindows file: the burn-rate windows Sloth alerts with for a 7d SLO "
            "period, not an SLO; nothing to import",
        ),
        (
            GO_SDK / "openslosdk__test_data__decode__two_documents.yaml",
            "OpenSLO Service only: there is no SLO in this file, so nothing is imported",
        ),
        (
            OSLO / "internal__files__testdata__format__list-of-services.yaml",
            "[1] Service my-service-2: a Service only describes a service",
        ),
        (
            SLOTH / "test__integration__prometheus__testdata__in-invalid-version.yaml",
            "prometheus/v999 is not a Sloth spec version",
        ),
    ],
)
def test_a_file_with_nothing_to_import_says_what_it_is(name, says):
    with pytest.raises(SpecError) as err:
        import_file(name)
    assert says in str(err.value)


def test_an_empty_service_is_rejected_as_sloth_rejects_it():
    with pytest.raises(SpecError) as err:
        import_file(SLOTH / "test__integration__prometheus__testdata__validate__bad__bad-k8s.yaml")
    assert ":7: spec.service: '' is not a name: a service name is required" in str(err.value)
    with pytest.raises(SpecError, match="service: missing: a service name is required"):
        import_text("version: prometheus/v1\nslos: [{name: a, objective: 99}]\n", "x.yaml")


@pytest.mark.parametrize(
    "text, says",
    [
        ("a: [", "x.yaml:1: invalid YAML"),
        ("", "x.yaml: is empty"),
        ("just a string\n", "a string ('just a string'), not a Sloth, OpenSLO or Pyrra document"),
        ("- 1\n- 2\n", "[0]: a number ('1')"),
        ("kind: Something\n", "not a Sloth, OpenSLO or Pyrra document (kind: Something)"),
        ("groups: []\n", "Prometheus rules (perhaps Sloth's generated output)"),
        ("version: prometheus/v1\nservice: s\nslos: {a: 1}\n", "x.yaml:3: slos: must be a list"),
        ("version: prometheus/v1\nservice: s\nslos: []\n", "slos: at least one SLO is required"),
        (
            "version: prometheus/v1\nservice: s\nslos: [{name: a, objective: 101, sli: {events: {}}}]\n",
            "slos[0].objective: '101': the objective must be a percentage >0 and <=100",
        ),
        (
            "apiVersion: openslo/v1\nkind: SLO\nmetadata: {name: a}\nspec: {service: s, objectives: [{target: 0.9}]}\n",
            "spec.indicator: missing: an SLO needs an SLI",
        ),
        ("apiVersion: openslo/v2\nkind: SLO\n", "openslo/v2 is not read"),
    ],
)
def test_bad_input_is_a_clear_error(text, says):
    with pytest.raises(SpecError) as err:
        import_text(text, "x.yaml")
    assert says in str(err.value)


def test_cli_reports_bad_files_in_one_line_without_traceback(tmp_path):
    (tmp_path / "latin1.yaml").write_bytes("service: caf\xe9\n".encode("latin-1"))
    (tmp_path / "broken.yaml").write_text("version: prometheus/v1\nslos: [\n")
    for name, says, code in (
        ("latin1.yaml", "not UTF-8 text (byte 0xe9 at offset 12)", 2),
        ("broken.yaml", "broken.yaml:3: invalid YAML", 1),
        ("missing.yaml", "cannot read", 2),
    ):
        proc = _cli("import", tmp_path / name, "-o", tmp_path / "out.yaml")
        assert proc.returncode == code and "Traceback" not in proc.stderr, proc.stderr
        assert says in proc.stderr and not (tmp_path / "out.yaml").exists()


# --- what is carried over ------------------------------------------------------------------------------------


def test_sloth_getting_started():
    result = import_file(SLOTH / "getting-started.yml")
    (spec,) = result.specs
    assert (spec["service"], spec["window"], spec["labels"]) == (
        "myservice",
        "30d",
        {"category": "availability", "owner": "myteam", "repo": "myorg/myservice"},
    )
    (objective,) = spec["objectives"]
    assert objective == {
        "name": "requests-availability",
        "description": "Common SLO based on availability for HTTP request responses.",
        "sli": "ratio",
        "total": 'http_request_duration_seconds_count{job="myservice"}',
        "bad": 'http_request_duration_seconds_count{job="myservice", code=~"(5..|429)"}',
        "target": "99.9%",
        "annotations": {"summary": "High error rate on 'myservice' requests responses"},
    }
    notes = _notes(result)
    for dropped in (
        "labels.tier: '2' not carried over",
        "alert name MyServiceHighErrorRate",
        "page_alert.labels: (severity=pageteam, routing_key=myteam)",
        "ticket_alert.labels: (severity=slack, slack_channel=#alerts-myteam)",
        "window 30d: Sloth takes the SLO period from its command line",
    ):
        assert dropped in notes


def test_sloth_latency_from_buckets_becomes_a_latency_sli():
    (spec,) = import_file(SLOTH / "kubernetes-apiserver.yml").specs
    latency = spec["objectives"][1]
    assert (latency["sli"], latency["metric"], latency["threshold"]) == (
        "latency",
        'apiserver_request_duration_seconds{verb!="WATCH"}',
        "0.4s",
    )


def test_openslo_v1alpha_as_sloth_reads_it():
    result = import_file(SLOTH / "openslo-kubernetes-apiserver.yml")
    (spec,) = result.specs
    assert not result.not_carried and spec["window"] == "30d"
    assert [(o["name"], o["sli"], o.get("threshold"), o["target"]) for o in spec["objectives"]] == [
        ("requests-availability-openslo", "ratio", None, "99.9%"),
        ("requests-latency-openslo-0", "latency", "0.4s", "99%"),
        ("requests-latency-openslo-1", "latency", "5s", "99.9%"),
    ]


def test_pyrra_ratio_and_latency():
    (spec,) = import_file(CORPUS / "pyrra" / "caddy-response-latency.yaml").specs
    assert (spec["window"], spec["objectives"][0]["threshold"], spec["objectives"][0]["target"]) == (
        "28d",
        "0.05s",
        "90%",
    )
    (spec,) = import_file(
        CORPUS / "pyrra" / "kubernetes__manifests__slos__slo-prometheus-operator-reconcile-errors.yaml"
    ).specs
    assert spec["group_by"] == ["controller"] and spec["objectives"][0]["sli"] == "ratio"


def test_our_openslo_v1_fixture():
    result = import_file(OURS)
    (spec,) = result.specs
    assert spec["window"] == "28d"
    (objective,) = spec["objectives"]
    assert objective == {
        "name": "chat-responsive",
        "description": "first token within 1 s",
        "target": "99%",
        "sli": "latency",
        "metric": 'llm_time_to_first_token_seconds{model="llama-3-70b"}',
        "threshold": "1s",
    }
    notes = _notes(result)
    for dropped in (
        "spec.alertPolicies: not carried over",
        "AlertPolicy chat-fast-burn: not carried over",
        ":49: spec.indicator.spec.thresholdMetric: a threshold on one metric's value",
        "engines: [] skips the bucket check",
    ):
        assert dropped in notes


@pytest.mark.parametrize(
    "error, total, expected",
    [
        (
            'sum(rate(a{code=~"5.."}[{{.window}}]))',
            "sum(rate(a[{{.window}}]))",
            {"sli": "ratio", "total": "a", "bad": 'a{code=~"5.."}'},
        ),
        (
            'sum(increase(a{code="5"}[{{ .window }}])) OR on() vector(0)',
            "sum(increase(a[{{ .window }}]))",
            {"sli": "ratio", "total": "a", "bad": 'a{code="5"}'},
        ),
        (
            "sum(rate(a[{{.window}}])) + sum(rate(b[{{.window}}]))",
            "sum(rate(t[{{.window}}]))",
            {"sli": "ratio", "total": "t", "bad": ["a", "b"]},
        ),
        (
            'sum(rate(h_seconds_bucket{le="+Inf"}[{{.window}}])) - sum(rate(h_seconds_bucket{le="0.25"}[{{.window}}]))',
            "sum(rate(h_seconds_count[{{.window}}]))",
            {"sli": "latency", "metric": "h_seconds", "threshold": "0.25s"},
        ),
        (
            'sum(rate(t[{{.window}}])) - sum(rate(t{ok="1"}[{{.window}}]))',
            "sum(rate(t[{{.window}}]))",
            {"sli": "ratio", "total": "t", "good": 't{ok="1"}'},
        ),
        (
            'sum(rate(h_ms_count[{{.window}}])) - sum(rate(h_ms_bucket{le="500"}[{{.window}}]))',
            "sum(rate(h_ms_count[{{.window}}]))",
            {"sli": "ratio", "total": "h_ms_count", "good": 'h_ms_bucket{le="500"}'},
        ),
        (
            'sum(rate(t[{{.window}}])) - sum(rate(t{code!~"5.."}[{{.window}}]))',
            "sum(rate(t[{{.window}}]))",
            {"sli": "ratio", "total": "t", "bad": 't{code=~"5.."}'},
        ),
        (
            'sum(rate({__name__="a",x="y\\"z"}[{{.window}}]))',
            "sum(rate(t[{{.window}}]))",
            {"sli": "ratio", "total": "t", "bad": 'a{x="y\\"z"}'},
        ),
    ],
)
def test_event_queries_are_read_by_parsing(error, total, expected):
    assert events_sli(error, total) == (expected, ())


def test_grouping_becomes_group_by():
    assert events_sli("sum by (model) (rate(a[{{.window}}]))", "sum by(model)(rate(t[{{.window}}]))")[1] == ("model",)
    with pytest.raises(QueryError, match="sums by different labels"):
        events_sli("sum by (model) (rate(a[{{.window}}]))", "sum(rate(t[{{.window}}]))")


@pytest.mark.parametrize(
    "error, says",
    [
        ("sum_over_time(x[{{.window}}])", "error query is a call of sum_over_time(), not sum(rate("),
        ("avg(rate(x[{{.window}}]))", "aggregates with avg()"),
        ("sum(rate(x[{{.window}}])) / sum(rate(y[{{.window}}]))", "combines series with '/'"),
        ("sum(rate(x[{{.window}}] offset 1h))", "uses offset"),
        ("1 - histogram_share(0.2, x)", "is not PromQL that Prometheus accepts"),
        ("sum(rate(x[{{.service}}]))", "uses the template {{.service}}"),
        ("sum(x)", "sums raw counter values"),
        ("sum(rate(t[{{.window}}]))", "error query counts the total itself"),
    ],
)
def test_other_queries_are_refused_with_the_reason(error, says):
    with pytest.raises(QueryError, match=None) as err:
        events_sli(error, "sum(rate(t[{{.window}}]))")
    assert says in str(err.value)


def test_a_good_selector_that_excludes_errors_becomes_bad():
    assert good_sli('sum(rate(t{job="a",code!~"5.."}[5m]))', 'sum(rate(t{job="a"}[5m]))', bare_ok=True)[0] == {
        "sli": "ratio",
        "total": 't{job="a"}',
        "bad": 't{job="a", code=~"5.."}',
    }
    with pytest.raises(QueryError, match="good and total count the same events"):
        good_sli("t", "t", bare_ok=True)


def test_names_are_written_as_ours_and_noted():
    result = import_text(
        "version: prometheus/v1\nservice: Ñandú Shop\nslos: [{name: Checkout, objective: 99, sli: "
        "{events: {error_query: 'sum(rate(e[{{.window}}]))', "
        "total_query: 'sum(rate(t[{{.window}}]))'}}}]\n",
        "x.yaml",
    )
    assert (result.specs[0]["service"], result.specs[0]["objectives"][0]["name"]) == ("nandu-shop", "checkout")
    assert "service: 'Ñandú Shop' written 'nandu-shop'" in _notes(result)


def test_openslo_bare_counters_are_counted():
    assert good_sli('http_requests_total{status_code="200"}', "http_requests_total{}", bare_ok=True) == (
        {"sli": "ratio", "total": "http_requests_total", "good": 'http_requests_total{status_code="200"}'},
        (),
    )


# --- specs people wrote for their own services (fixtures/slo/real-world/{rhobs,parca,osko,kuadrant,doc-gen}) ---


def test_pyrra_files_with_a_bare_v1alpha1_are_read_with_the_labels_and_annotations_pyrra_alerts_carry():
    """rhobs writes `apiVersion: v1alpha1` (Pyrra's filesystem mode reads it); Pyrra puts `pyrra.dev/NAME`
    labels and annotations on its alerts, the prefix cut off, so `pyrra.dev/service` names the service."""
    result = import_file(CORPUS / "rhobs/mst-production-api-metrics-read-1M-latency-slo.yaml")
    (spec,) = result.specs
    (objective,) = spec["objectives"]
    assert spec["service"] == "observatorium-api" and "labels" not in spec
    assert sorted(objective["annotations"]) == ["dashboard", "message", "runbook"]
    assert objective["annotations"]["runbook"].endswith("#APIMetricsReadLatency1MErrorBudgetBurning")
    assert (objective["sli"], objective["threshold"]) == ("latency", "10s")
    assert objective["metric"] == (
        'up_custom_query_duration_seconds{query="query-path-sli-1M-samples", '
        'namespace="observatorium-mst-production", http_code=~"2.."}'
    )
    assert "metadata.labels: (instance) not carried over" in _notes(result)
    (spec,) = import_file(CORPUS / "parca/deploy__pyrra__parca-grpc-query-errors.yaml").specs
    assert spec["labels"] == {"team": "parca"} and spec["window"] == "14d"


@pytest.mark.promtool
def test_rhobs_dashboard_link_gets_the_namespace_its_selector_fixes_and_a_warning_where_none_is_fixed(tmp_path):
    """rhobs' dashboard annotations read {{$labels.namespace}}, a label our alerts' expressions do not carry. Where
    the SLI selects namespace="..." (as Pyrra puts such matchers on its alerts) the value is written out, and
    promtool renders it; where nothing fixes it, compiling warns naming the file, the annotation and the label."""
    need("promtool")
    link = "var-datasource=telemeter-prod-01-prometheus&var-namespace={}&var-job=All"
    rendered = []
    for name, namespace in (
        ("mst-production-api-metrics-read-1M-latency-slo.yaml", "observatorium-mst-production"),
        ("mst-production-api-metrics-write-latency-slo.yaml", None),
    ):
        (spec,) = import_file(CORPUS / "rhobs" / name).specs
        spec_file = tmp_path / name
        spec_file.write_text(dump_yaml(spec))
        files, warnings = render_files(compile_spec(load_spec(spec_file)))
        dashboards = {
            a["annotations"]["dashboard"]
            for f, text in files.items()
            if f.endswith(".rules.yaml")
            for g in yaml.safe_load(text)["groups"]
            for a in g["rules"]
            if "alert" in a
        }
        (dashboard,) = dashboards
        empty = [w for w in warnings if "annotations.dashboard" in w]
        if namespace:
            assert link.format(namespace) in dashboard and not empty
            rendered.append((tmp_path / name.replace(".yaml", ""), files))
        else:
            assert link.format("{{$labels.namespace}}") in dashboard
            assert empty == [
                f"{spec_file}: {spec['objectives'][0]['name']}: annotations.dashboard: "
                "{{ $labels.namespace }} renders empty: the alerts carry no namespace label; select one "
                'namespace with namespace="..." in the SLI\'s selectors, or add it to group_by for an '
                "SLO per namespace"
            ]
    ((folder, files),) = rendered  # promtool renders the alerts of a slow burn: the link is whole
    (case,) = _run_generated_cases(folder, files, lambda name: "opens a ticket" in name)
    alerts = [a for check in case["alert_rule_test"] for a in check["exp_alerts"]]
    assert alerts and all(
        link.format("observatorium-mst-production") in a["exp_annotations"]["dashboard"] for a in alerts
    )


def test_redundant_regex_anchors_are_dropped_so_the_rules_get_generated_tests():
    (spec,) = import_file(CORPUS / "rhobs/mst-production-api-metrics-query-availability-slo.yaml").specs
    assert spec["objectives"][0]["bad"].endswith('group="metricsv1", code=~"5.."}')
    assert (
        bad_sli('sum(rate(t{a=~"^x$",b!~"^y\\\\$",c=~"(?m)^z$"}[5m]))', "sum(rate(t[5m]))", bare_ok=True)[0]["bad"]
        == 't{a=~"x", b!~"y\\\\$", c=~"(?m)^z$"}'
    )


def test_osko_openslo_com_v1_is_openslo_v1_and_a_mimir_source_is_promql():
    (spec,) = import_file(CORPUS / "osko/config__samples__openslo_v1_slo.yaml").specs
    assert spec["service"] == "mimir" and spec["objectives"][0] == {
        "name": "mimir-ingestion-latency",
        "description": "95% of all queries should have a latency of less than 300 milliseconds",
        "target": "99%",
        "sli": "ratio",
        "total": 'cortex_distributor_query_duration_seconds_count{method="Distributor.QueryStream"}',
        "good": 'cortex_distributor_query_duration_seconds_bucket{le="0.5", method="Distributor.QueryStream", '
        'status_code="200"}',
    }


def test_sloths_nan_guards_on_a_total_count_what_the_total_counts():
    """meirongdev/homelab writes `(sum(rate(t)) > 0) OR on() vector(1)`: 0/0 would poison Sloth's 30d sums;
    ours record no ratio without events. Only a total loses it: as the error count it would invent an error."""
    specs = import_file(CORPUS / "homelab/k8s__helm__manifests__monitoring__slos.yaml").specs
    assert [len(s["objectives"]) for s in specs] == [4, 3]
    litellm = specs[0]["objectives"][3]
    assert (litellm["total"], litellm["bad"]) == (
        'envoy_cluster_upstream_rq_xx{envoy_cluster_name=~".*/litellm_litellm_.*"}',
        'envoy_cluster_upstream_rq_xx{envoy_cluster_name=~".*/litellm_litellm_.*", envoy_response_code_class="5"}',
    )
    assert events_sli("sum(rate(e[5m]))", "(sum(rate(t[5m])) > 0) or vector(1)")[0]["total"] == "t"
    for error, total in [
        ("(sum(rate(e[5m])) > 0) or vector(1)", "sum(rate(t[5m]))"),
        ("sum(rate(e[5m]))", "(sum(rate(t[5m])) > bool 0) or vector(1)"),
        ("sum(rate(e[5m]))", "(sum(rate(t[5m])) > 1) or vector(1)"),
    ]:
        with pytest.raises(QueryError, match="combines series with"):
            events_sli(error, total)


def test_a_millisecond_histogram_stays_the_ratio_it_was_written_as():
    (spec,) = import_file(CORPUS / "kuadrant/examples__alerts__sloth__slo-latency.yaml").specs
    objective = spec["objectives"][0]
    assert spec["group_by"] == ["request_host"] and objective["sli"] == "ratio"
    assert objective["good"].startswith('istio_request_duration_milliseconds_bucket{le="250", ')


@pytest.mark.parametrize(
    "name, says",
    [
        ("doc-gen/configs__slo__slo.yaml", "slos[0].sli.events: total query is a call of sum_over_time()"),
        (
            "osko/config__samples__slo_gatekeeper_webhook_response_time_0005.yaml",
            "ratioMetric.good.metricSource.type: unknown: no DataSource 'mimir' in this file",
        ),
        ("parca/deploy__pyrra__parca-grpc-profilestore-latency.yaml", "spec.indicator.latencyNative: a latencyNative"),
        (
            "genai-eks-infra/slo__slos.yaml",
            ":12: spec.slos[0].sli.events: total query is the bare selector "
            "latency_seconds_count, not sum(rate(counter[{{.window}}]))",
        ),
        (
            "checkout-api/monitoring__slo.yaml",
            ":1: not a Sloth, OpenSLO or Pyrra document (apiVersion: "
            "sre.platform.ohanyere.io/v1alpha1, kind: ServiceLevelObjective)",
        ),
        ("m7-05-lab/slos.yaml", ":1: has service and slos like a Sloth spec, but no version: prometheus/v1 line"),
        (
            "lokalise/example-slo-spec.yaml",
            ":44: spec.slos[1].sli.plugin: Sloth SLI plugin lokalise/http-latency writes its queries when Sloth runs",
        ),
    ],
)
def test_third_party_refusals_name_the_field_and_why(name, says):
    run = _cli("import", CORPUS / name, "-o", "/dev/null")
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert run.stderr.startswith(f"error: {CORPUS / name}") and says in run.stderr, run.stderr


# --- more specs people wrote (fixtures/slo/real-world/{pyrra-openshift,roller,ai-infra,banka-3,dash0,...}) ------


def test_an_error_query_that_counts_fast_requests_is_refused_with_the_slow_ones_written_out():
    """Three projects wrote a latency SLO's error query as the good events' query (the bucket at the threshold),
    one as good minus total (never above 0); Sloth would take them and page while requests are fast. A bucket of a
    histogram that is not of durations may count bad events (`tokens_bucket{le="0"}`: empty answers)."""
    notes = _notes(import_file(CORPUS / "ai-infra/monitoring__slos.yaml"))
    assert (
        'spec.slos[1].sli.events: error query counts http_request_duration_seconds_bucket{job="ml-api", '
        'le="0.5"}, the observations at or under 0.5 (the fast ones): good events, not errors; the slow ones are '
        'http_request_duration_seconds_count{job="ml-api"} - http_request_duration_seconds_bucket{job="ml-api", '
        'le="0.5"}; not carried over'
    ) in notes
    assert 'slos[2].sli.events: error query counts roller_1_happy_path_duration_nanoseconds_bucket{le="1"}' in _notes(
        import_file(CORPUS / "roller/slo__sloth.yaml")
    )
    notes = _notes(import_file(CORPUS / "banka-3/monitoring__slo.yaml"))
    assert (
        'spec.slos[1].sli.events: error query is http_server_request_duration_seconds_bucket{job="gateway", '
        'le="0.5"} minus all observations: the fast ones minus all, the negative of the slow ones'
    ) in notes
    assert events_sli('sum(rate(t_bucket{le="0"}[5m]))', "sum(rate(t_count[5m]))")[0]["bad"] == 't_bucket{le="0"}'
    assert (
        events_sli(
            'sum(rate(x_seconds_bucket{le="+Inf"}[5m])) - sum(rate(x_seconds_bucket{le="0.5"}[5m]))',
            "sum(rate(x_seconds_count[5m]))",
        )[0]["sli"]
        == "latency"
    )
    with pytest.raises(QueryError, match="bad query counts x_duration_bucket"):
        bad_sli('x_duration_bucket{le="250"}', "x_duration_count", bare_ok=True)


def test_adding_zero_is_read_as_nothing():
    """banka-3 ends an error query with `+ 0`; it adds nothing, so the query is read without it."""
    assert events_sli("sum(rate(e[5m])) + 0", "0 + sum(rate(t[5m]))") == (
        {"sli": "ratio", "total": "t", "bad": "e"},
        (),
    )
    assert events_sli("sum(rate(e[5m])) - 0", "sum(rate(t[5m]))")[0]["bad"] == "e"


def test_a_many_slo_pyrra_file_with_other_resources_imports_each_slo_and_names_the_rest():
    """vrutkovs/pyrra-openshift: 42 Pyrra SLOs (latency on odd buckets, `scope=~"resource|"`, `{}`, a millisecond
    histogram, `!~` errors) and two OpenShift Routes in one file: every SLO is a spec, each Route is named."""
    result = import_file(CORPUS / "pyrra-openshift/slo.yaml")
    specs = {s["service"]: s["objectives"][0] for s in result.specs}
    assert specs["kube-apiserver-read-resource-request-latency"] == {
        "name": "kube-apiserver-read-resource-request-latency",
        "sli": "latency",
        "threshold": "1s",
        "metric": 'apiserver_request_duration_seconds{job="apiserver", scope=~"resource|", verb=~"LIST|GET"}',
        "target": "99%",
    }
    assert specs["ingress-canary-latency"]["sli"] == "ratio"  # ingress_canary_check_duration: not seconds
    assert specs["coredns-kubeprogramming-latency"]["threshold"] == "16.384s"
    notes = _notes(result)
    assert notes.count("not a Sloth, OpenSLO or Pyrra document (apiVersion: route.openshift.io/v1, kind: Route)") == 2


@pytest.mark.promtool
def test_a_selector_excluding_one_value_gets_generated_tests(tmp_path):
    """banka-3's gRPC errors are `rpc_grpc_status_code!="0"`: the good series of the generated tests take the value
    the matcher excludes (before: no generated tests, `slo test` failed with 0 test cases). promtool runs the
    counting and the failing-target cases (`inferwatch slo test` passes the whole file too)."""
    need("promtool")
    (spec,) = [
        s for s in import_file(CORPUS / "banka-3/monitoring__slo.yaml").specs if s["service"] == "banka-internal"
    ]
    files, warnings = render_files(compile_spec(parse_spec(spec, "banka-internal.yaml")))
    assert not warnings
    assert 'rpc_grpc_status_code="0"' in files["tests/banka-internal.grpc-availability.test.yaml"]
    cases = _run_generated_cases(tmp_path, files, lambda name: "each minute once" in name or "failing scrape" in name)
    assert len(cases) == 2
