"""The deploy config (`deploy.yaml`, version 1) into frozen dataclasses, every problem with its file:line: field.

Unknown keys are errors, so a typo never silently drops a setting; a missing
key takes the default of the dataclass, so `{version: 1}` is the embedded
default deployment (what `deploy/kubernetes/` and `deploy/compose/` hold).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path

from inferwatch import __version__
from inferwatch.durations import parse_duration
from inferwatch.errors import Problem, SpecError
from inferwatch.yamlio import Positions, Problems, load_document

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
    "ENGINES",
    "SCRAPE_MODES",
    "BACKENDS",
    "DEFAULT_IMAGE",
]

ENGINES = ("vllm", "sglang")
DEFAULT_IMAGE = f"ghcr.io/inferwatch/inferwatch:{__version__}"
SCRAPE_MODES = ("relabel", "exporter", "sidecar")
BACKENDS = ("prometheus", "victoriametrics")  # who scrapes, stores and evaluates the rules
_DNS = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")  # a Kubernetes object or namespace name
_LABEL_KEY = re.compile(r"([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?\Z")
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?\Z")
_IMAGE = re.compile(r"[a-z0-9./_-]+(:[A-Za-z0-9_.-]+)?(@sha256:[0-9a-f]{64})?\Z")
_WORKLOAD = re.compile(r"(deployment|statefulset|daemonset)/[a-z0-9]([-a-z0-9.]*[a-z0-9])?\Z")
_URL = re.compile(r"https?://[^\s/]+(/\S*)?\Z")


@dataclass(frozen=True)
class Engine:
    """One fleet of engine pods, found by label; `role_label` names the pod label that says prefill or decode."""

    name: str
    engine: str = "vllm"
    namespace: str = "llm"
    selector: tuple[tuple[str, str], ...] = ()
    port: str = "http"  # container port name ('' for port_number); /metrics is on the API port
    port_number: int = 8000  # for URLs in exporter mode and compose
    path: str = "/metrics"
    role_label: str | None = None
    urls: tuple[str, ...] = ()  # exporter mode and compose: where to scrape, one URL per replica
    max_running_requests: tuple[tuple[str, int], ...] = ()  # model -> cap; no engine exports it
    workload: str = ""  # sidecar mode: the workload to patch, e.g. deployment/vllm [deployment/NAME]
    model: str = ""  # the model it serves: with a deployment workload, what autoscaling scales


@dataclass(frozen=True)
class Dcgm:
    """The GPU operator's dcgm-exporter: our counters ConfigMap and its scrape (honorLabels)."""

    enabled: bool = True
    namespace: str = "gpu-operator"
    selector: tuple[tuple[str, str], ...] = (("app", "nvidia-dcgm-exporter"),)
    port: str = "gpu-metrics"


@dataclass(frozen=True)
class Nvml:
    """inferwatch's own NVML GPU exporter as a DaemonSet on GPU nodes (for clusters without DCGM)."""

    enabled: bool = False
    node_selector: tuple[tuple[str, str], ...] = (("nvidia.com/gpu.present", "true"),)
    runtime_class: str = "nvidia"


@dataclass(frozen=True)
class FrontDoor:
    """The metering proxy, a Deployment and Service in front of one engine Service."""

    enabled: bool = True
    namespace: str = "llm"
    upstream: str = "http://vllm.llm.svc:8000"
    replicas: int = 2


@dataclass(frozen=True)
class Alerting:
    """Receivers: pages (severity critical) and tickets (severity warning); empty URLs leave them silent."""

    page_webhook: str = ""
    ticket_webhook: str = ""


@dataclass(frozen=True)
class Compose:
    """The laptop target: stand-in engines (`inferwatch simulate`) or the engines' `urls`. Our image is built from
    the clone's Dockerfile (`build`, relative to the rendered folder) unless `image:` names one you pushed."""

    simulate: bool = True
    build: str = ""  # the folder holding inferwatch's Dockerfile; "" = the clone's root (see _compose)


@dataclass(frozen=True)
class Cluster:
    """Many clusters into one store: this cluster's name and where its Prometheus remote-writes."""

    name: str = ""
    remote_write_url: str = ""


@dataclass(frozen=True)
class VictoriaMetrics:
    """backend: victoriametrics on Kubernetes: the store our VMAlert reads and writes its records to, and the
    Alertmanager it notifies. The defaults are the services of the victoria-metrics-k8s-stack chart installed as
    `vmks` in `monitoring` (the release name its docs use); compose runs its own and ignores these."""

    url: str = "http://vmsingle-vmks-victoria-metrics-k8s-stack.monitoring.svc:8428"
    alertmanager_url: str = "http://vmalertmanager-vmks-victoria-metrics-k8s-stack.monitoring.svc:9093"


@dataclass(frozen=True)
class Autoscaling:
    """What scales each engine with a `model` and a `workload: deployment/NAME` on the signals of
    autoscale/ (llm_autoscale:scaling_signal, waiting requests): none (the rules and alerts only), a KEDA
    ScaledObject, or an HPA on prometheus-adapter's external metrics. The knobs: autoscale/knobs.yaml."""

    via: str = "none"
    prometheus_url: str = "http://prometheus-operated.monitoring.svc:9090"  # what KEDA queries


@dataclass(frozen=True)
class Config:
    file: str = "<embedded defaults>"
    namespace: str = "monitoring"
    release: str = "kube-prometheus-stack"
    image: str = DEFAULT_IMAGE  # not published: build it (deploy/README.md), or compose builds it
    backend: str = "prometheus"  # or victoriametrics: vmagent, VictoriaMetrics, vmalert (operator CRs)
    scrape_mode: str = "relabel"
    scrape_interval: str = "15s"
    grafana_folder: str = "inferwatch"
    slo_specs: tuple[str, ...] = ()  # files, relative to the config; default: slo/defaults*.yaml
    engines: tuple[Engine, ...] = (
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
    dcgm: Dcgm = Dcgm()
    nvml: Nvml = Nvml()
    frontdoor: FrontDoor = FrontDoor()
    alerting: Alerting = Alerting()
    compose: Compose = Compose()
    cluster: Cluster = Cluster()
    victoriametrics: VictoriaMetrics = VictoriaMetrics()
    autoscaling: Autoscaling = Autoscaling()


class _Reader:
    """Reads one mapping node into a dataclass by its fields' types; problems go to a shared list."""

    def __init__(self, file: str, positions: Positions | None = None):
        self.collected = Problems(file, positions)
        self.problems = self.collected.problems

    def problem(self, node, key, where: str, message: str) -> None:
        self.collected.add(node if isinstance(node, dict) else None, where, message, key=key)

    def read(self, cls, node, where: str, **extra):
        if not isinstance(node, dict):
            self.problem(node, None, where.rstrip("."), f"expected a mapping, got {node!r}")
            return cls(**extra) if not _required(cls) - set(extra) else None
        names = [f.name for f in dataclasses.fields(cls) if f.name != "file"]
        values = dict(extra)
        ignore = ("version",) if cls is Config else ()
        self.collected.unknown_keys(node, names, where, ignore)
        for key, value in node.items():
            if key in ignore or key not in names:
                continue
            parsed = self.value(cls, key, value, node, f"{where}{key}")
            if parsed is not _BAD:
                values[key] = parsed
        missing = _required(cls) - set(values)
        for key in sorted(missing):
            self.problem(node, None, f"{where}{key}", "required")
        return None if missing else cls(**values)

    def value(self, cls, key, value, node, where):
        kind = {f.name: f.type for f in dataclasses.fields(cls)}[key]
        nested = {
            "Dcgm": Dcgm,
            "Nvml": Nvml,
            "FrontDoor": FrontDoor,
            "Alerting": Alerting,
            "Cluster": Cluster,
            "Compose": Compose,
            "VictoriaMetrics": VictoriaMetrics,
            "Autoscaling": Autoscaling,
        }
        if kind in nested:
            result = self.read(nested[kind], value, where + ".")
            return _BAD if result is None else result
        if kind == "tuple[Engine, ...]":
            if not isinstance(value, list) or not value:
                self.problem(node, key, where, "expected a non-empty list of engines")
                return _BAD
            engines = [self.read(Engine, item, f"{where}[{i}].") for i, item in enumerate(value)]
            return _BAD if None in engines else tuple(engines)
        check = _CHECKS.get((cls.__name__, key)) or _CHECKS.get(("*", key)) or _TYPE_CHECKS[kind]
        try:
            return check(value)
        except (ValueError, TypeError) as err:
            self.problem(node, key, where, str(err))
            return _BAD


_BAD = object()


def _required(cls) -> set[str]:
    return {
        f.name
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }


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
_CHECKS = {
    ("*", "name"): _DNS_CHECK,
    ("*", "namespace"): _DNS_CHECK,
    ("Engine", "engine"): _one_of(ENGINES),
    ("Config", "scrape_mode"): _one_of(SCRAPE_MODES),
    ("Config", "backend"): _one_of(BACKENDS),
    ("Config", "image"): _image,
    ("Config", "scrape_interval"): _interval,
    ("Config", "release"): _matching(_LABEL_VALUE, "a label value"),
    ("Config", "slo_specs"): _specs,
    ("*", "selector"): _labels,
    ("Nvml", "node_selector"): _labels,
    ("Engine", "urls"): _urls,
    ("Engine", "max_running_requests"): _caps,
    ("Engine", "path"): _path,
    ("Engine", "port"): _matching(
        re.compile(r"([a-z0-9]([-a-z0-9]{0,13}[a-z0-9])?)?\Z"), "a port name ('' to scrape port_number)"
    ),
    ("Engine", "workload"): _matching(_WORKLOAD, "KIND/NAME with KIND deployment, statefulset or daemonset"),
    ("Engine", "role_label"): _matching(_LABEL_KEY, "a label name"),
    ("FrontDoor", "upstream"): _url_or_empty,
    ("Alerting", "page_webhook"): _url_or_empty,
    ("Alerting", "ticket_webhook"): _url_or_empty,
    ("Cluster", "remote_write_url"): _url_or_empty,
    ("Nvml", "runtime_class"): _DNS_CHECK,
    ("Cluster", "name"): _matching(_LABEL_VALUE, "a label value"),
    ("VictoriaMetrics", "url"): _url,
    ("VictoriaMetrics", "alertmanager_url"): _url,
    ("Autoscaling", "via"): _one_of(("none", "keda", "hpa")),
    ("Autoscaling", "prometheus_url"): _url,
    ("Engine", "model"): _matching(_LABEL_VALUE, "a model name as the engine's `model` label has it"),
}
_TYPE_CHECKS = {"str": _str, "bool": _bool, "int": _count, "str | None": _str}


def parse_config(data, file: str = "<config>", positions: Positions | None = None) -> Config:
    """A loaded YAML document (and where load_document found each part) into a Config; a SpecError lists every
    problem."""
    reader = _Reader(file, positions)
    if not isinstance(data, dict):
        raise SpecError([Problem(file, None, "", "expected a mapping with `version: 1`")])
    if data.get("version") != 1:
        reader.problem(data, "version", "version", f"{data.get('version')!r}: this inferwatch reads version 1")
    config = reader.read(Config, data, "", file=file)
    if config is not None:
        _cross_checks(config, data, reader)
    if reader.problems or config is None:
        raise SpecError(reader.problems)
    return config


def _cross_checks(config: Config, node, reader: _Reader) -> None:
    names = [e.name for e in config.engines]
    for name in sorted({n for n in names if names.count(n) > 1}):
        reader.problem(node, "engines", "engines", f"two engines named {name!r}; names must be unique")
    if bool(config.cluster.name) != bool(config.cluster.remote_write_url):
        reader.problem(
            node,
            "cluster",
            "cluster",
            "give both name and remote_write_url (the store tells clusters apart by the name), or neither",
        )
    if config.autoscaling.via != "none" and not scaled_engines(config):
        reader.problem(
            node,
            "autoscaling",
            "autoscaling.via",
            f"{config.autoscaling.via}: no engine to scale; give an engine a model and workload: deployment/NAME",
        )
    for i, engine in enumerate(config.engines):
        if not engine.selector:
            reader.problem(node, "engines", f"engines[{i}].selector", "required: the labels of the engine's pods")
        if config.scrape_mode == "exporter" and not engine.urls:
            reader.problem(
                node,
                "engines",
                f"engines[{i}].urls",
                "required with scrape_mode: exporter: the URL of each replica's /metrics",
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
    loaded = load_document(path)
    return parse_config(loaded.data, loaded.file, loaded.positions)
