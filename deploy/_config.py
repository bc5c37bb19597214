"""The deploy config (`deploy.yaml`, version 1) into frozen dataclasses, every problem with its file:line: field.

Each key is a dataclass field whose option (inferwatch/options.py) holds its help and its check: options'
read_mapping, the reader of every command's YAML (a section's option names its model, read in turn), and
deploy/README.md's table of every key (`reference_table`, written by `inferwatch build`) are made from them.

Unknown keys are errors, so a typo never silently drops a setting; a missing
key takes the default of the dataclass, so `{version: 1}` is the embedded
default deployment (what `deploy/kubernetes/` and `deploy/compose/` hold).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from inferwatch import __version__
from inferwatch.deploy._render_options import BACKENDS, backend_option
from inferwatch.durations import parse_duration
from inferwatch.errors import Problem, SpecError
from inferwatch.options import option, read_mapping, reference_rows, table_head

if TYPE_CHECKING:
    from inferwatch.yamlio import Positions, Problems

__all__ = [
    "Config",
    "Engine",
    "Dcgm",
    "Nvml",
    "FrontDoor",
    "Alerting",
    "Compose",
    "Cluster",
    "VictoriaMetrics",
    "load_config",
    "parse_config",
    "reference_table",
    "ENGINES",
    "SCRAPE_MODES",
    "BACKENDS",
    "DEFAULT_IMAGE",
]

ENGINES = ("vllm", "sglang")
DEFAULT_IMAGE = f"ghcr.io/inferwatch/inferwatch:{__version__}"
SCRAPE_MODES = ("relabel", "exporter", "sidecar")
_DNS = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")  # a Kubernetes object or namespace name
_LABEL_KEY = re.compile(r"([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?\Z")
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?\Z")
_IMAGE = re.compile(r"[a-z0-9./_-]+(:[A-Za-z0-9_.-]+)?(@sha256:[0-9a-f]{64})?\Z")
_WORKLOAD = re.compile(r"(deployment|statefulset|daemonset)/[a-z0-9]([-a-z0-9.]*[a-z0-9])?\Z")
_URL = re.compile(r"https?://[^\s/]+(/\S*)?\Z")


def _str(value) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected text, got {value!r}")
    return value


def _matching(pattern: re.Pattern, what: str):
    def check(value) -> str:
        text = _str(value)
        if not pattern.match(text):
            raise ValueError(f"{text!r} is not {what}")
        return text

    return check


def _one_of(choices):
    def check(value) -> str:
        if value not in choices:
            raise ValueError(f"{value!r}: use one of {', '.join(choices)}")
        return value

    return check


def _bool(value) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {value!r}")
    return value


def _count(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise ValueError(f"expected a whole number from 1 to 65535, got {value!r}")
    return value


def _labels(value) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict) or not value:
        raise ValueError(f"expected a mapping of labels, e.g. {{app: vllm}}, got {value!r}")
    pairs = tuple(sorted((str(k), str(v)) for k, v in value.items()))
    for key, val in pairs:
        if not _LABEL_KEY.match(key) or not _LABEL_VALUE.match(val):
            raise ValueError(f"{key}: {val!r} is not a Kubernetes label")
    return pairs


def _caps(value) -> tuple[tuple[str, int], ...]:
    if not isinstance(value, dict):
        raise ValueError(f"expected a mapping of model: cap, e.g. {{llama-3-8b: 256}}, got {value!r}")
    pairs = tuple(sorted((str(k), v) for k, v in value.items()))
    for model, cap in pairs:
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
            raise ValueError(f"{model}: the cap must be a whole number of requests, got {cap!r}")
    return pairs


def _urls(value) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(u, str) and _URL.match(u) for u in value):
        raise ValueError(f"expected a list of http:// URLs, got {value!r}")
    return tuple(value)


def _url(value) -> str:
    text = _str(value)
    if not _URL.match(text):
        raise ValueError(f"{text!r} is not an http:// or https:// URL")
    return text


def _url_or_empty(value) -> str:
    text = _str(value)
    if text and not _URL.match(text):
        raise ValueError(f"{text!r} is not an http:// or https:// URL")
    return text


def _image(value) -> str:
    text = _str(value)
    if not _IMAGE.match(text) or (":" not in text.rsplit("/", 1)[-1] and "@" not in text):
        raise ValueError(
            f"{text!r}: pin the image with a tag or digest, e.g. ghcr.io/inferwatch/inferwatch:{__version__}"
        )
    if text.rsplit("/", 1)[-1].endswith(":latest"):
        raise ValueError(f"{text!r}: `latest` is not a pinned tag; name a version")
    return text


def _interval(value) -> str:
    text = _str(value)
    try:
        seconds = parse_duration(text, "s m")
    except ValueError as err:
        raise ValueError(str(err)) from None
    if seconds > 30:
        raise ValueError(f"{text}: the SLO rules count requests per minute, so scrape at least every 30s")
    return text


def _specs(value) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise ValueError(f"expected a list of SLO spec files, got {value!r}")
    return tuple(value)


def _path(value) -> str:
    text = _str(value)
    if not text.startswith("/"):
        raise ValueError(f"{text!r}: a URL path starts with /")
    return text


_DNS_CHECK = _matching(_DNS, "a Kubernetes name (lower-case letters, digits and -, at most 63)")
_LABEL_VALUE_CHECK = _matching(_LABEL_VALUE, "a label value")
_PORT_NAME = _matching(re.compile(r"([a-z0-9]([-a-z0-9]{0,13}[a-z0-9])?)?\Z"), "a port name ('' to scrape port_number)")


def _key(default: Any = dataclasses.MISSING, help: str = "", **names: Any) -> Any:
    """A key of deploy.yaml (a flag of `inferwatch deploy render` too only where `flag` names one), checked by
    `parse` when given, else by its type (_TYPE_CHECKS); its row of deploy/README.md's table is made from the same
    help."""
    return option(default, help, **{"flag": None, **names})


@dataclass(frozen=True)
class Engine:
    """One fleet of engine pods, found by label; `role_label` names the pod label that says prefill or decode."""

    name: str = _key(help="The fleet's name (a Kubernetes name), unique among the engines.", parse=_DNS_CHECK)
    engine: str = _key("vllm", "Which engine it runs: " + " or ".join(ENGINES) + ".", parse=_one_of(ENGINES))
    namespace: str = _key("llm", "Where its pods run.", parse=_DNS_CHECK)
    selector: tuple[tuple[str, str], ...] = _key(
        (), "The labels of its pods, e.g. {app: llama}.", parse=_labels, shown="required"
    )
    port: str = _key(
        "http",
        "The name of the container port /metrics is served on (the API port); '' to use port_number.",
        parse=_PORT_NAME,
    )
    port_number: int = _key(8000, "The API port, for URLs in exporter mode and compose.")
    path: str = _key("/metrics", "The metrics path.", parse=_path)
    role_label: str | None = _key(
        None,
        "The pod label that says prefill or decode in a disaggregated setup, e.g. llm-d.ai/role.",
        parse=_matching(_LABEL_KEY, "a label name"),
    )
    urls: tuple[str, ...] = _key(
        (), "Where to scrape, one /metrics URL per replica: for scrape_mode exporter and compose.", parse=_urls
    )
    max_running_requests: tuple[tuple[str, int], ...] = _key(
        (),
        "model: cap, the concurrency cap no engine exports, as a recording rule, e.g. {llama-3-70b: 256}.",
        parse=_caps,
    )
    workload: str = _key(
        "",
        "scrape_mode sidecar: the workload to patch, KIND/NAME with KIND deployment, statefulset or daemonset.",
        parse=_matching(_WORKLOAD, "KIND/NAME with KIND deployment, statefulset or daemonset"),
        shown="deployment/NAME",
    )
    model: str = _key(
        "",
        "The model it serves (its `model` label): with a deployment workload, what autoscaling scales.",
        parse=_matching(_LABEL_VALUE, "a model name as the engine's `model` label has it"),
    )


@dataclass(frozen=True)
class Dcgm:
    """The GPU operator's dcgm-exporter: our counters ConfigMap and its scrape (honorLabels)."""

    enabled: bool = _key(True, "Render our counters ConfigMap (profiling fields on) and the scrape of dcgm-exporter.")
    namespace: str = _key("gpu-operator", "Where dcgm-exporter runs.", parse=_DNS_CHECK)
    selector: tuple[tuple[str, str], ...] = _key(
        (("app", "nvidia-dcgm-exporter"),), "The labels of its Service.", parse=_labels
    )
    port: str = _key("gpu-metrics", "Its Service's port name.")


@dataclass(frozen=True)
class Nvml:
    """inferwatch's own NVML GPU exporter as a DaemonSet on GPU nodes (for clusters without DCGM)."""

    enabled: bool = _key(
        False, "Run our NVML GPU exporter as a DaemonSet on GPU nodes (root without capabilities, not privileged)."
    )
    node_selector: tuple[tuple[str, str], ...] = _key(
        (("nvidia.com/gpu.present", "true"),), "The nodes it runs on.", parse=_labels
    )
    runtime_class: str = _key("nvidia", "The RuntimeClass that gives it the GPUs.", parse=_DNS_CHECK)


@dataclass(frozen=True)
class FrontDoor:
    """The metering proxy, a Deployment and Service in front of one engine Service."""

    enabled: bool = _key(True, "Render the front door: a Deployment and Service in front of one engine Service.")
    namespace: str = _key("llm", "Where it runs.", parse=_DNS_CHECK)
    upstream: str = _key("http://vllm.llm.svc:8000", "The engine Service it proxies.", parse=_url_or_empty)
    replicas: int = _key(2, "How many replicas run.")


@dataclass(frozen=True)
class Alerting:
    """Receivers: pages (severity critical) and tickets (severity warning); empty URLs leave them silent."""

    page_webhook: str = _key("", "Where pages (severity critical) go; '' leaves them silent.", parse=_url_or_empty)
    ticket_webhook: str = _key("", "Where tickets (severity warning) go; '' leaves them silent.", parse=_url_or_empty)


@dataclass(frozen=True)
class Compose:
    """The laptop target: stand-in engines (`inferwatch simulate`) or the engines' `urls`. Our image is built from
    the clone's Dockerfile (`build`, relative to the rendered folder) unless `image:` names one you pushed."""

    simulate: bool = _key(True, "Stand-in engines from `inferwatch simulate`; false: the engines' urls.")
    build: str = _key(  # the folder holding inferwatch's Dockerfile; "" = the clone's root (see _compose)
        "",
        "The folder holding inferwatch's Dockerfile, relative to the rendered folder; '' for this clone's root "
        "(unless image: names one you pushed).",
    )


@dataclass(frozen=True)
class Cluster:
    """Many clusters into one store: this cluster's name and where its Prometheus remote-writes."""

    name: str = _key(
        "",
        "This cluster's name, its `cluster` label in the central store (give both keys or neither).",
        parse=_LABEL_VALUE_CHECK,
    )
    remote_write_url: str = _key(
        "",
        "Where this cluster's Prometheus remote-writes; the rules then run centrally (central/rules/).",
        parse=_url_or_empty,
    )


@dataclass(frozen=True)
class VictoriaMetrics:
    """backend: victoriametrics on Kubernetes: the store our VMAlert reads and writes its records to, and the
    Alertmanager it notifies. The defaults are the services of the victoria-metrics-k8s-stack chart installed as
    `vmks` in `monitoring` (the release name its docs use); compose runs its own and ignores these."""

    url: str = _key(
        "http://vmsingle-vmks-victoria-metrics-k8s-stack.monitoring.svc:8428",
        "backend victoriametrics on Kubernetes: the store our VMAlert reads and writes its records to.",
        parse=_url,
    )
    alertmanager_url: str = _key(
        "http://vmalertmanager-vmks-victoria-metrics-k8s-stack.monitoring.svc:9093",
        "The Alertmanager our VMAlert notifies.",
        parse=_url,
    )


@dataclass(frozen=True)
class Autoscaling:
    """What scales each engine with a `model` and a `workload: deployment/NAME` on the signals of
    autoscale/ (llm_autoscale:scaling_signal, waiting requests): none (the rules and alerts only), a KEDA
    ScaledObject, or an HPA on prometheus-adapter's external metrics. The knobs: autoscale/knobs.yaml."""

    via: str = _key(
        "none",
        "What scales each engine with a model and a deployment workload: none (the rules and alerts only), keda "
        "(a ScaledObject) or hpa (an HPA and prometheus-adapter values).",
        parse=_one_of(("none", "keda", "hpa")),
    )
    prometheus_url: str = _key("http://prometheus-operated.monitoring.svc:9090", "What KEDA queries.", parse=_url)


_DEFAULT_ENGINES = (
    Engine(
        "vllm",
        "vllm",
        selector=(("app.kubernetes.io/name", "vllm"),),
        urls=("http://vllm.llm.svc:8000/metrics",),
        max_running_requests=(("llama-3-8b", 256),),
    ),
    Engine(
        "sglang",
        "sglang",
        selector=(("app.kubernetes.io/name", "sglang"),),
        port_number=30000,
        urls=("http://sglang.llm.svc:30000/metrics",),
    ),
)


def _section(model) -> Any:
    """A section of deploy.yaml: a mapping of `model`'s keys, its defaults when left out."""
    return _key(model(), f"The {model.__name__} keys below.", section=model)


@dataclass(frozen=True)
class Config:
    file: str = "<embedded defaults>"
    namespace: str = _key("monitoring", "Where monitors, rules, dashboards and our exporters go.", parse=_DNS_CHECK)
    release: str = _key(
        "kube-prometheus-stack",
        "The `release` label the stack's Prometheus selects monitors and rules by.",
        parse=_LABEL_VALUE_CHECK,
    )
    image: str = _key(  # not published: build it (deploy/README.md), or compose builds it
        DEFAULT_IMAGE, "The inferwatch image, pinned by a tag or digest (never latest).", parse=_image
    )
    backend: str = backend_option()  # the flag --backend too: deploy/_render_options.py
    scrape_mode: str = _key(
        "relabel",
        "relabel: PodMonitors with the mappings' metricRelabelings; exporter: the normalizing exporter as one "
        "Deployment; sidecar: the exporter patched into each engine workload.",
        parse=_one_of(SCRAPE_MODES),
    )
    scrape_interval: str = _key(
        "15s", "How often engines and GPUs are scraped, at most 30s (the SLO rules count per minute).", parse=_interval
    )
    grafana_folder: str = _key("inferwatch", "The Grafana folder the dashboards go to.")
    slo_specs: tuple[str, ...] = _key(
        (), "SLO spec files, relative to the config.", parse=_specs, shown="slo/defaults*.yaml"
    )
    engines: tuple[Engine, ...] = _key(
        _DEFAULT_ENGINES,
        "The engine fleets, a non-empty list of the engines[] keys below.",
        shown="vllm and sglang in llm",
        section=Engine,
        repeatable=True,
        expected="a non-empty list of engines",
    )
    dcgm: Dcgm = _section(Dcgm)
    nvml: Nvml = _section(Nvml)
    frontdoor: FrontDoor = _section(FrontDoor)
    alerting: Alerting = _section(Alerting)
    compose: Compose = _section(Compose)
    cluster: Cluster = _section(Cluster)
    victoriametrics: VictoriaMetrics = _section(VictoriaMetrics)
    autoscaling: Autoscaling = _section(Autoscaling)


# the sections of Config: each field's key is the section's name, with the keys of its dataclass under it
_SECTIONS = {
    "Dcgm": Dcgm,
    "Nvml": Nvml,
    "FrontDoor": FrontDoor,
    "Alerting": Alerting,
    "Cluster": Cluster,
    "Compose": Compose,
    "VictoriaMetrics": VictoriaMetrics,
    "Autoscaling": Autoscaling,
}


def reference_table() -> str:
    """deploy/README.md's table of every key, from the dataclasses' options."""
    rows = ["| `version` | `required` | `1`: the config format this inferwatch reads. |"]
    rows += reference_rows(Config, flags=False)
    rows += reference_rows(Engine, flags=False, prefix="engines[].")
    for f in dataclasses.fields(Config):
        if f.type in _SECTIONS:
            rows += reference_rows(_SECTIONS[f.type], flags=False, prefix=f"{f.name}.")
    return "\n".join(table_head(flags=False) + rows)


_TYPE_CHECKS = {"str": _str, "bool": _bool, "int": _count, "str | None": _str}


def parse_config(data, file: str = "<config>", positions: Positions | None = None) -> Config:
    """A loaded YAML document (and where load_document found each part) into a Config; a SpecError lists every
    problem."""
    from inferwatch.yamlio import Problems

    if not isinstance(data, dict):
        raise SpecError([Problem(file, None, "", "expected a mapping with `version: 1`")])
    problems = Problems(file, positions)
    if data.get("version") != 1:
        problems.add(data, "version", f"{data.get('version')!r}: this inferwatch reads version 1")
    config = read_mapping(Config, data, problems, ignore=("version",), extra={"file": file}, checks=_TYPE_CHECKS)
    if config is not None:
        _cross_checks(config, data, problems)
    if problems or config is None:
        raise SpecError(problems.problems)
    return config


def _cross_checks(config: Config, node, problems: Problems) -> None:
    names = [e.name for e in config.engines]
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.add(node, "engines", f"two engines named {name!r}; names must be unique", key="engines")
    if bool(config.cluster.name) != bool(config.cluster.remote_write_url):
        problems.add(
            node,
            "cluster",
            "give both name and remote_write_url (the store tells clusters apart by the name), or neither",
            key="cluster",
        )
    if config.autoscaling.via != "none" and not scaled_engines(config):
        problems.add(
            node,
            "autoscaling.via",
            f"{config.autoscaling.via}: no engine to scale; give an engine a model and workload: deployment/NAME",
            key="autoscaling",
        )
    for i, engine in enumerate(config.engines):
        if not engine.selector:
            problems.add(node, f"engines[{i}].selector", "required: the labels of the engine's pods", key="engines")
        if config.scrape_mode == "exporter" and not engine.urls:
            problems.add(
                node,
                f"engines[{i}].urls",
                "required with scrape_mode: exporter: the URL of each replica's /metrics",
                key="engines",
            )


def scaled_engines(config: Config) -> list[tuple[Engine, str]]:
    """(engine, Deployment name) of each engine autoscaling scales: a model and a deployment workload."""
    return [
        (e, e.workload.split("/", 1)[1]) for e in config.engines if e.model and e.workload.startswith("deployment/")
    ]


def load_config(path: Path | str | None) -> Config:
    """The config in `path`, or the embedded defaults when None."""
    if path is None:
        return Config()
    from inferwatch.yamlio import load_document  # here: only a command that reads a file needs YAML

    loaded = load_document(path)
    return parse_config(loaded.data, loaded.file, loaded.positions)
