"""Kubernetes for the VictoriaMetrics operator (`backend: victoriametrics`), beside the Prometheus-operator render:
the same workloads, dashboards and rule groups, with VMPodScrape, VMServiceScrape and VMRule in place of PodMonitor,
ServiceMonitor and PrometheusRule, and a VMAlert of our own that runs our VMRules with the flags they need.

`render_kubernetes_vm(config, inputs)` is pure: {path: text}. Field names are the operator's CRDs
(VictoriaMetrics/operator, config/crd/overlay/crd.descriptionless.yaml, vendored under tests/fixtures/k8s/ and
validated strictly by tests/test_deploy_vm.py; documented in the operator's docs/api.md).
"""

from __future__ import annotations

from inferwatch.deploy._alertmanager import alertmanager_config
from inferwatch.deploy._compose import EVALUATION_INTERVAL
from inferwatch.deploy._config import Config
from inferwatch.deploy._inputs import Inputs
from inferwatch.deploy._kubernetes import BANNER, assemble, workload_objects
from inferwatch.deploy._victoriametrics import VMALERT_EXTRA_ARGS, vmalert_flags
from inferwatch.deploy._workloads import dump, labels

__all__ = ["render_kubernetes_vm", "VM_API", "KINDS"]

VM_API = "operator.victoriametrics.com/v1beta1"
# Prometheus-operator kind -> (VM operator kind, file suffix, the spec's endpoint list): the operator's own
# converter maps them the same way (docs/api.md: VMPodScrapeSpec.podMetricsEndpoints, VMServiceScrapeSpec.endpoints,
# VMRuleSpec.groups)
KINDS = {
    "PodMonitor": ("VMPodScrape", "vmpodscrape", "podMetricsEndpoints"),
    "ServiceMonitor": ("VMServiceScrape", "vmservicescrape", "endpoints"),
    "PrometheusRule": ("VMRule", "vmrule", None),
}
# endpoint fields the VM operator names otherwise (docs/api.md, Endpoint / PodMetricsEndpoint:
# metricRelabelConfigs, relabelConfigs); port, portNumber, path, interval, honorLabels keep their names
_ENDPOINT_FIELDS = {"metricRelabelings": "metricRelabelConfigs", "relabelings": "relabelConfigs"}
_OURS = {"app.kubernetes.io/name": "inferwatch"}  # on every object we render (_workloads.labels)


def _converted(path: str, obj: dict) -> tuple[str, dict]:
    """A PodMonitor, ServiceMonitor or PrometheusRule as the VM operator's kind; anything else as it is. The
    `release` label goes: the VM operator selects by selectors of its own (victoria-metrics-k8s-stack's VMAgent
    selects every scrape object)."""
    if obj.get("kind") not in KINDS:
        return path, obj
    kind, suffix, endpoints = KINDS[obj["kind"]]
    spec = dict(obj["spec"])
    if endpoints:
        spec[endpoints] = [{_ENDPOINT_FIELDS.get(k, k): v for k, v in e.items()} for e in spec[endpoints]]
    meta = {**obj["metadata"], "labels": {k: v for k, v in obj["metadata"]["labels"].items() if k != "release"}}
    return path.rsplit(".", 2)[0] + f".{suffix}.yaml", {
        "apiVersion": VM_API,
        "kind": kind,
        "metadata": meta,
        "spec": spec,
    }


def _vmalert(config: Config) -> dict:
    """Our VMAlert: our VMRules only, read from and recorded to the store, alerts to the Alertmanager (docs/api.md,
    VMAlertSpec: datasource, remoteWrite, remoteRead, notifier, ruleSelector, selectAllByDefault, extraArgs).
    `?nocache=1` on the datasource: the store's -search.latencyOffset (30s by default, not ours to set here) would
    run every rule 30 s in the past. One replica: two would store each record twice at different moments, and the
    SLO windows summing per-minute records would count each minute twice. `evaluationInterval`: the groups without
    an interval of their own run as often as in the Prometheus render (vmalert's default is 1m)."""
    store = config.victoriametrics.url.rstrip("/")
    return {
        "apiVersion": VM_API,
        "kind": "VMAlert",
        "metadata": {"name": "inferwatch", "namespace": config.namespace, "labels": labels("vmalert")},
        "spec": {
            "replicaCount": 1,
            "evaluationInterval": EVALUATION_INTERVAL,
            "selectAllByDefault": False,
            "ruleSelector": {"matchLabels": dict(_OURS)},
            "datasource": {"url": f"{store}/?nocache=1"},
            "remoteWrite": {"url": store},
            "remoteRead": {"url": store},
            "notifier": {"url": config.victoriametrics.alertmanager_url},
            "extraArgs": dict(VMALERT_EXTRA_ARGS),
        },
    }


_VMALERT_NOTE = (
    "# Runs inferwatch's VMRules (label app.kubernetes.io/name: inferwatch) and no others. A VMAlert that selects "
    "every VMRule\n# (victoria-metrics-k8s-stack's: selectAllByDefault) would run them too and store each record "
    "twice: keep it off them\n# with vmalert/values.yaml (`helm upgrade vmks vm/victoria-metrics-k8s-stack -f "
    "vmalert/values.yaml`, merged into yours).\n"
)
_STACK_VALUES_NOTE = (
    "# victoria-metrics-k8s-stack Helm values: its VMAlert goes on selecting every VMRule in every namespace but "
    "inferwatch's,\n# which our VMAlert (vmalert/vmalert.yaml) runs with the flags they need. Not applied by "
    "kustomize.\n"
)
_ALERTMANAGER_NOTE = (
    "# inferwatch's route (it takes our alerts only) under an empty root: merge it into your Alertmanager's config "
    "with\n# `inferwatch deploy merge-alertmanager <yours>` (deploy/README.md). Not applied by kustomize.\n"
)


def _central_note() -> str:
    flags = " ".join(vmalert_flags(["central/rules/*.yaml"], "http://CENTRAL:8428", "http://ALERTMANAGER:9093"))
    return (
        "# Load centrally into a vmalert reading the central store (single node, or vmselect's "
        "/select/0/prometheus URL;\n# start victoria-metrics with -search.latencyOffset=1s, or add ?nocache=1 to "
        f"-datasource.url):\n# vmalert {flags}\n"
    )


def render_kubernetes_vm(config: Config, inputs: Inputs, source: str = "the embedded defaults") -> dict[str, str]:
    """{path: YAML text}: one object per file, listed in kustomization.yaml."""
    objects = dict(_converted(path, obj) for path, obj in workload_objects(config, inputs).items())
    banner = BANNER.format(source=source)
    files = {
        "alertmanager/alertmanager.yml": banner
        + _ALERTMANAGER_NOTE
        + dump(alertmanager_config(config, inputs.inhibit_rules, inputs.rules))
    }
    if config.cluster.remote_write_url:  # the rules run centrally: no VMRule, no VMAlert here
        files["vmagent/values.yaml"] = (
            banner
            + (
                "# victoria-metrics-k8s-stack Helm values: its VMAgent writes to the central store too, every sample "
                "labelled with this cluster.\n"
            )
            + dump(
                {
                    "vmagent": {
                        "additionalRemoteWrites": [{"url": config.cluster.remote_write_url}],
                        "spec": {"externalLabels": {"cluster": config.cluster.name}},
                    }
                }
            )
        )
    else:
        files["vmalert/vmalert.yaml"] = banner + _VMALERT_NOTE + dump(_vmalert(config))
        files["vmalert/values.yaml"] = (
            banner
            + _STACK_VALUES_NOTE
            + dump(
                {
                    "vmalert": {
                        "spec": {
                            "ruleNamespaceSelector": {},
                            "ruleSelector": {
                                "matchExpressions": [
                                    {"key": k, "operator": "NotIn", "values": [v]} for k, v in _OURS.items()
                                ]
                            },
                        }
                    }
                }
            )
        )
    return assemble(config, inputs, source, objects, files, _central_note())
