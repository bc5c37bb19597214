"""`inferwatch doctor --file`: the same checks, read from the files a stack is made of, before (or without) a
running Prometheus: prometheus.yml, compose files (and the prometheus.yml they mount), ServiceMonitors,
PodMonitors, PrometheusRules, Services and workloads, kube-prometheus-stack values and Alertmanager configs.

Every document is sorted into a `Bundle` first; the checks then look across it (a monitor and the Service it
should select, the scrape interval the values set for every monitor).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from inferwatch.deploy._config import Config
from inferwatch.deploy._result import Result
from inferwatch.deploy._routing import check_alertmanager_config, slo_alerts
from inferwatch.deploy._scrape import Job, check_job, job_from_scrape_config, jobs_from_prometheus, seconds
from inferwatch.deploy._shape import as_list, as_map, dig, yaml_or_none

__all__ = ["check_files"]

_YAML_SUFFIXES = (".yaml", ".yml")
_READS = "prometheus.yml, Alertmanager config, compose, kube-prometheus-stack values, Kubernetes monitors"
_KIND_OF = {list: "list", str: "string", int: "number", float: "number", bool: "boolean"}  # a top-level node, in words
_CONFIG_FILE = re.compile(r"(prometheus|alertmanager)\.ya?ml\Z")  # a ConfigMap or Secret key
_MOUNTED_CONFIG = re.compile(r"/(prometheus|alertmanager)\.ya?ml\Z")  # a compose volume's target
_MONITORS = ("ServiceMonitor", "PodMonitor")
_WORKLOADS = ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job")
# kube-prometheus-stack values: top-level keys only its values have, and keys under `prometheus` / `alertmanager`
_VALUES_KEYS = ("prometheusOperator", "defaultRules", "kubeStateMetrics", "prometheus-node-exporter", "kubelet")
_VALUES_SECTIONS = {
    "alertmanager": {"config", "alertmanagerSpec"},
    "prometheus": {"prometheusSpec", "additionalServiceMonitors", "additionalPodMonitors"},
}
_SELECTORS = {
    "ServiceMonitor": "serviceMonitorSelector",
    "PodMonitor": "podMonitorSelector",
    "PrometheusRule": "ruleSelector",
}  # prometheusSpec.<key>, and <key>NilUsesHelmValues
_VALUES_MONITORS = {"ServiceMonitor": "additionalServiceMonitors", "PodMonitor": "additionalPodMonitors"}
_OPERATOR_DEFAULT = "30s"  # a Prometheus resource's scrapeInterval when none is set
_ENGINE_PREFIXES = ("vllm:", "sglang:", "DCGM_", "llm_", "gpu_")  # names scraped at the engines' interval
_ALERTMANAGER_NOT_DISCOVERY = {"static_configs", "scheme", "path_prefix", "timeout", "api_version"}
_RULE_FIXES = {
    "unknown-metric": "fix the name (curl the engine's /metrics for what it exposes)",
    "deprecated-metric": "fix the name (curl the engine's /metrics for what it exposes)",
    "invalid-promql": "fix the expression (promtool check rules)",
}


@dataclass
class Bundle:
    """The documents of the files given, by kind; `where` strings name file and document."""

    prometheus: list[tuple[str, dict]] = field(default_factory=list)
    alertmanager: list[tuple[str, dict]] = field(default_factory=list)
    values: list[tuple[str, dict]] = field(default_factory=list)
    objects: list[tuple[str, dict]] = field(default_factory=list)  # Kubernetes objects
    rules: list[tuple[str, dict]] = field(default_factory=list)  # rule files (PrometheusRule specs too)
    results: list[Result] = field(default_factory=list)  # said while reading: skipped, unreadable
    files_read: set = field(default_factory=set)  # resolved paths read or to be read
    documents: int = 0  # documents sorted into the lists above

    def kind(self, *kinds: str) -> list[tuple[str, dict]]:
        """The Kubernetes objects of these kinds."""
        return [(w, d) for w, d in self.objects if d.get("kind") in kinds]


def _files(paths: list[Path], bundle: Bundle) -> list[Path]:
    """The files given, and the *.yaml and *.yml files under the folders given, each once (a file and its folder
    may both be given); a folder without any is said."""
    files, seen = [], set()
    for path in paths:
        found = (
            [path]
            if not path.is_dir()
            else sorted(p for p in path.rglob("*") if p.suffix in _YAML_SUFFIXES and p.is_file())
        )
        if not found:
            bundle.results.append(Result("skipped", str(path), "a folder without *.yaml or *.yml files"))
        for file in found:
            if file.resolve() not in seen:
                seen.add(file.resolve())
                files.append(file)
    return files


def _documents(path: Path, bundle: Bundle) -> list[tuple[str, object]]:
    """(where, document) for each YAML document of `path` (`where` names the document when there are several);
    what cannot be read is said in `bundle.results`."""
    from inferwatch._files import read_input
    from inferwatch.yamlio import safe_load_all

    try:
        text = read_input(path).decode("utf-8")  # missing, a folder, over the cap: InputError, exit 2
    except UnicodeDecodeError as err:
        bundle.results.append(
            Result(
                "skipped",
                str(path),
                f"not a text file (byte {err.object[err.start]:#04x} at offset {err.start} is not UTF-8)",
            )
        )
        return []
    except OSError as err:
        bundle.results.append(Result("wrong", str(path), f"cannot read it: {err.strerror or err}"))
        return []
    try:
        docs = [d for d in safe_load_all(text) if d is not None]
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        hint = " (a Helm template? run helm template first)" if "{{" in text else ""
        bundle.results.append(Result("skipped", str(path), f"not YAML{hint}: line {mark.line + 1 if mark else '?'}"))
        return []
    if not docs:
        bundle.results.append(Result("skipped", str(path), "empty: no YAML document in it"))
    return [(f"{path}" + (f" #{i + 1}" if len(docs) > 1 else ""), d) for i, d in enumerate(docs)]


def _classify(where: str, doc, path: Path, bundle: Bundle) -> None:
    """Put `doc` (read from `path`) where the checks look for its kind, or say it is skipped."""
    if not isinstance(doc, dict):
        shape = _KIND_OF.get(type(doc), "value")
        bundle.results.append(Result("skipped", where, f"a YAML {shape} at top level: not a file doctor reads"))
        return
    if isinstance(doc.get("kind"), str) and "apiVersion" in doc:
        bundle.objects.append((where, doc))
        if doc["kind"] == "PrometheusRule":
            bundle.rules.append((where, as_map(doc.get("spec"))))
        for key, text in _embedded_configs(doc).items():
            embedded = yaml_or_none(text)
            if embedded is None:
                bundle.results.append(Result("skipped", f"{where} {key}", "not YAML"))
            else:
                _classify(f"{where} {key}", embedded, path, bundle)
    elif "scrape_configs" in doc or {"global", "rule_files"} <= doc.keys():
        bundle.prometheus.append((where, doc))
    elif "route" in doc and "receivers" in doc:
        bundle.alertmanager.append((where, doc))
    elif isinstance(doc.get("services"), dict):
        bundle.results += _compose_without_metrics(where, doc)
        _read_mounted_configs(where, doc, path, bundle)
    elif _is_values(doc):
        bundle.values.append((where, doc))
    elif isinstance(doc.get("groups"), list):
        bundle.rules.append((where, doc))
    else:
        bundle.results.append(Result("skipped", where, f"not a file doctor reads ({_READS})"))
        return
    bundle.documents += 1


def _embedded_configs(doc: dict) -> dict[str, str]:
    """{key: text} of a ConfigMap's or Secret's prometheus.yml and alertmanager.yml (stringData beside data)."""
    if doc["kind"] not in ("ConfigMap", "Secret"):
        return {}
    data = {**as_map(doc.get("data")), **as_map(doc.get("stringData"))}
    return {str(key): text for key, text in data.items() if isinstance(text, str) and _CONFIG_FILE.search(str(key))}


def _is_values(doc: dict) -> bool:
    """kube-prometheus-stack values (a whole file, or only the parts a user overrides)."""
    return (
        any(key in doc for key in _VALUES_KEYS)
        or {"prometheus", "alertmanager"} <= doc.keys()
        or any(_VALUES_SECTIONS[section] & as_map(doc.get(section)).keys() for section in _VALUES_SECTIONS)
    )


def _read_mounted_configs(where: str, doc: dict, path: Path, bundle: Bundle) -> None:
    """The prometheus.yml and alertmanager.yml a compose file mounts, read from beside it when they are there
    (and not given already)."""
    for name, service in doc["services"].items():
        for source in _mounted_config_sources(as_map(service)):
            mounted = Path(os.path.normpath(source if source.is_absolute() else path.parent / source))
            if mounted.resolve() in bundle.files_read:
                continue
            if mounted.is_file():
                bundle.files_read.add(mounted.resolve())
                for inner, sub in _documents(mounted, bundle):
                    _classify(f"{inner} (mounted by {where} service {name})", sub, mounted, bundle)
            else:
                bundle.results.append(
                    Result(
                        "skipped",
                        f"{where} service {name}",
                        f"mounts {source}, which is not beside it: pass it with --file",
                    )
                )


def _mounted_config_sources(service: dict) -> list[Path]:
    """Host paths of the prometheus.yml and alertmanager.yml bind-mounted into a compose service, short
    (`./prometheus.yml:/etc/prometheus/prometheus.yml`) or long syntax (`{source: ..., target: ...}`)."""
    out = []
    for volume in as_list(service.get("volumes")):
        long = as_map(volume)
        source, target = (
            volume.split(":")[:2]
            if isinstance(volume, str) and ":" in volume
            else (long.get("source"), long.get("target"))
        )
        if isinstance(source, str) and isinstance(target, str) and _MOUNTED_CONFIG.search(target):
            out.append(Path(re.sub(r"\$\{?PWD\}?/?", "", source)))
    return out


# how an engine's command line turns its metrics off: (the engine, what in image + command + args says it runs
# that engine, the flag, whether the flag's absence or its presence is the fault, what is wrong, the fix)
_METRICS_FLAGS = (
    (
        "SGLang",
        re.compile(r"sglang[./]launch_server|\bsglang\s+serve\b"),
        re.compile(r"--enable-metrics\b"),
        "absent",
        "runs SGLang without --enable-metrics: it serves no /metrics, so its scrape fails",
        "add --enable-metrics to its command",
    ),
    # vLLM (V0 and V1) creates its Prometheus stat logger only when it logs stats: the flag people add to quiet
    # the log takes every vllm:* series off /metrics (the scrape still succeeds, with no engine series)
    (
        "vLLM",
        re.compile(r"\bvllm\b", re.I),
        re.compile(r"--disable-log-stats(?![\w-])(?!=(?:false|0)\b)", re.I),
        "present",
        "runs vLLM with --disable-log-stats: vLLM then records no statistics and its /metrics has no "
        "vllm:* series, so every engine panel, SLO and triage signal reads no data",
        "remove --disable-log-stats",
    ),
)


def _compose_without_metrics(where: str, doc: dict) -> list[Result]:
    """Each compose service that starts an engine with its metrics off."""
    out = []
    for name, service in doc["services"].items():
        service = as_map(service)
        out += _metrics_off(
            f"{where} service {name}", service.get("image"), service.get("entrypoint"), service.get("command")
        )
    return out


def _metrics_off(where: str, *parts) -> list[Result]:
    """An engine started so that it serves no engine series (_METRICS_FLAGS; no environment variable turns
    SGLang's on or vLLM's off)."""
    text = " ".join(" ".join(map(str, p)) if isinstance(p, list) else str(p or "") for p in parts)
    return [
        Result("wrong", where, wrong, fix)
        for engine, runs, flag, fault, wrong, fix in _METRICS_FLAGS
        if runs.search(text) and bool(flag.search(text)) == (fault == "present")
    ]


def _workloads_without_metrics(bundle: Bundle) -> list[Result]:
    """Each container of a workload or Pod that starts an engine with its metrics off."""
    out = []
    for where, doc in bundle.kind(*_WORKLOADS, "Pod"):
        name = f"{doc['kind']} {dig(doc, 'metadata').get('name')}"
        for c in map(as_map, as_list(dig(_template(doc), "spec").get("containers"))):
            out += _metrics_off(
                f"{name} container {c.get('name')} ({where})", c.get("image"), c.get("command"), c.get("args")
            )
    return out


def _template(doc: dict) -> dict:
    """A workload's pod template (a Pod is its own)."""
    return doc if doc["kind"] == "Pod" else dig(doc, "spec", "template")


def _values_spec(bundle: Bundle) -> dict:
    """prometheus.prometheusSpec of the first values that set it: how the chart's Prometheus scrapes and selects."""
    return next(
        (dig(v, "prometheus", "prometheusSpec") for _, v in bundle.values if dig(v, "prometheus", "prometheusSpec")), {}
    )


def _operator_interval(spec: dict) -> tuple[str, str]:
    """(interval, where it comes from) for what a Prometheus resource scrapes without an interval of its own."""
    if spec.get("scrapeInterval"):
        return str(spec["scrapeInterval"]), " (prometheusSpec.scrapeInterval)"
    return _OPERATOR_DEFAULT, f" (the Prometheus resource's default, {_OPERATOR_DEFAULT})"


def _monitors(bundle: Bundle) -> list[tuple[str, dict]]:
    """The monitors among the files, and those the values declare (additionalServiceMonitors, as objects)."""
    monitors = list(bundle.kind(*_MONITORS))
    for where, values in bundle.values:
        for kind, key in _VALUES_MONITORS.items():
            monitors += [
                (where, {"kind": kind, "metadata": {"name": m.get("name"), "labels": {"release": "*"}}, "spec": m})
                for m in map(as_map, as_list(dig(values, "prometheus").get(key)))
            ]
    return monitors


def _monitor_jobs(bundle: Bundle) -> list[Job]:
    """A job per monitor endpoint, at its own interval or the one the values set for every monitor."""
    interval, origin = _operator_interval(_values_spec(bundle))
    out = []
    for where, doc in _monitors(bundle):
        spec, meta = dig(doc, "spec"), dig(doc, "metadata")
        name = f"{doc['kind']} {meta.get('namespace', '')}/{meta.get('name', '')}".replace(" /", " ")
        for i, endpoint in enumerate(_endpoints(doc)):
            texts = (
                str(meta.get("name", "")),
                _text(spec.get("selector")),
                str(endpoint.get("port", "")),
                str(spec.get("jobLabel", "")),
                _text(endpoint.get("metricRelabelings")),
            )
            out.append(
                Job(
                    f"{name} endpoint {i} ({where})",
                    str(endpoint.get("interval") or interval),
                    interval_origin="" if endpoint.get("interval") else origin,
                    honor_labels=endpoint.get("honorLabels") is True,
                    kubernetes=True,
                    relabelings=tuple(as_list(endpoint.get("metricRelabelings"))),
                    texts=texts,
                )
            )
    return out


def _endpoints(doc: dict) -> list[dict]:
    key = "endpoints" if doc["kind"] == "ServiceMonitor" else "podMetricsEndpoints"
    return [e for e in as_list(dig(doc, "spec").get(key)) if isinstance(e, dict)]


def _text(node) -> str:
    return yaml.safe_dump(node) if node else ""


def _selected(selector, labels: dict) -> bool:
    """Whether a Kubernetes label selector (matchLabels, matchExpressions) selects `labels`; an empty or
    misshapen selector selects nothing here (doctor cannot tell what it was meant to select)."""
    if not isinstance(selector, dict):
        return False
    ok = all(labels.get(k) == str(v) for k, v in as_map(selector.get("matchLabels")).items())
    for expr in map(as_map, as_list(selector.get("matchExpressions"))):
        key, op, values = expr.get("key"), str(expr.get("operator", "")), [str(v) for v in as_list(expr.get("values"))]
        ok &= {
            "In": key in labels and labels[key] in values,
            "NotIn": labels.get(key) not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }.get(op, False)
    return ok and bool(selector)


def _monitor_name(where: str, doc: dict) -> str:
    return f"{doc['kind']} {dig(doc, 'metadata').get('name', '')} ({where})"


def _numeric_ports(where: str, doc: dict) -> list[Result]:
    """A monitor's `port` given as a number: it names a port, and port names always hold a letter."""
    numeric = sorted({str(e["port"]) for e in _endpoints(doc) if str(e.get("port")).isdigit()})
    if not numeric:
        return []
    said = f"port {numeric[0]} is a number" if len(numeric) == 1 else f"ports {', '.join(numeric)} are numbers"
    number_field = "targetPort" if doc["kind"] == "ServiceMonitor" else "portNumber"
    return [
        Result(
            "wrong",
            _monitor_name(where, doc),
            f"{said}, but `port` names a port, and Kubernetes port names always hold a letter: it selects nothing",
            f"name the port (ports[].name) and use that name, or use {number_field} for a number",
        )
    ]


def _selection_problems(bundle: Bundle, where: str, doc: dict) -> list[Result]:
    """For each Service (or pod) a monitor's selector picks: outside its namespaces, or lacking its port name."""
    spec, meta, out = dig(doc, "spec"), dig(doc, "metadata"), []
    names = sorted({str(e["port"]) for e in _endpoints(doc) if e.get("port") is not None} - {""})
    names = [n for n in names if not n.isdigit()]
    namespaces = as_list(dig(spec, "namespaceSelector").get("matchNames")) or [meta.get("namespace")]
    any_namespace = dig(spec, "namespaceSelector").get("any") is True
    for what, namespace, labels, ports in _targets(bundle, doc["kind"] == "ServiceMonitor"):
        if not _selected(spec.get("selector"), labels):
            continue
        if not any_namespace and None not in namespaces and namespace and namespace not in namespaces:
            out.append(
                Result(
                    "wrong",
                    _monitor_name(where, doc),
                    f"selects {what} by label, but it lives in namespace {namespace}, outside "
                    f"{', '.join(map(str, namespaces))}",
                    "add its namespace to namespaceSelector.matchNames",
                )
            )
        lacking = [n for n in names if n not in ports]
        if lacking and ports:
            out.append(
                Result(
                    "wrong",
                    _monitor_name(where, doc),
                    f"port {', '.join(lacking)} is not a port of {what} (it has {', '.join(sorted(ports))})",
                    "use one of its port names",
                )
            )
    return out


def _targets(bundle: Bundle, service: bool):
    """(what, namespace, labels, port names) of each Service, or of each workload's pod template."""
    if service:
        for _, doc in bundle.kind("Service"):
            meta = dig(doc, "metadata")
            yield (
                f"Service {meta.get('name')}",
                meta.get("namespace"),
                _labels(meta),
                [str(p["name"]) for p in map(as_map, as_list(dig(doc, "spec").get("ports"))) if p.get("name")],
            )
        return
    for _, doc in bundle.kind(*_WORKLOADS, "Pod"):
        template = _template(doc)
        names = [
            str(p["name"])
            for c in map(as_map, as_list(dig(template, "spec").get("containers")))
            for p in map(as_map, as_list(c.get("ports")))
            if p.get("name")
        ]
        yield (
            f"the pods of {doc['kind']} {dig(doc, 'metadata').get('name')}",
            dig(doc, "metadata").get("namespace"),
            _labels(dig(template, "metadata")),
            names,
        )


def _labels(meta) -> dict:
    return {str(k): str(v) for k, v in dig(meta, "labels").items()}


def _release_known(bundle: Bundle, config: Config) -> bool:
    """Whether it is known how Prometheus selects monitors: values among the files, or a deploy.yaml given with
    --config (the embedded defaults' file name is in angle brackets)."""
    return bool(bundle.values) or not config.file.startswith("<")


def _release(bundle: Bundle, config: Config) -> list[Result]:
    """Monitors and rules kube-prometheus-stack's selectors skip: labels the values' selector misses, or, by
    default, no `release: <release>`. Judged only where `_release_known`: OpenShift's user workload monitoring,
    for one, needs no label."""
    if not _release_known(bundle, config):
        return []
    spec, out, unlabelled = _values_spec(bundle), [], []
    for _, doc in bundle.kind(*_SELECTORS):
        key, name, labels = (
            _SELECTORS[doc["kind"]],
            f"{doc['kind']} {dig(doc, 'metadata').get('name')}",
            _labels(doc.get("metadata")),
        )
        if as_map(spec.get(key)):
            if not _selected(spec[key], labels):
                out.append(
                    Result(
                        "wrong",
                        name,
                        f"its labels do not match prometheusSpec.{key} of the values: Prometheus ignores it",
                        f"label it to match {key}",
                    )
                )
        elif spec.get(f"{key}NilUsesHelmValues") is not False and labels.get("release") != config.release:
            unlabelled.append(name)
    if not unlabelled:
        return out
    return out + [
        Result(
            "wrong",
            "release label",
            f"{', '.join(unlabelled)} lack release: {config.release}: "
            "kube-prometheus-stack's Prometheus selects only what carries it",
            f"label them release: {config.release} (deploy.yaml's release), or set prometheus."
            "prometheusSpec.serviceMonitorSelectorNilUsesHelmValues (and pod, rule) to false",
        )
    ]


def _values_scrape_jobs(bundle: Bundle) -> list[Job]:
    """prometheusSpec.additionalScrapeConfigs of kube-prometheus-stack values, at the spec's scrape interval."""
    jobs = []
    for where, values in bundle.values:
        spec = dig(values, "prometheus", "prometheusSpec")
        interval, origin = _operator_interval(spec)
        jobs += [
            job_from_scrape_config(sc, interval, origin, f" ({where} additionalScrapeConfigs)")
            for sc in as_list(spec.get("additionalScrapeConfigs"))
            if isinstance(sc, dict)
        ]
    return jobs


def _prometheus_results(bundle: Bundle, alertmanager_expected: bool) -> list[Result]:
    """The scrape jobs of each prometheus.yml and of the values, and whether each prometheus.yml sends alerts."""
    out = [r for job in _values_scrape_jobs(bundle) for r in check_job(job)]
    for where, config in bundle.prometheus:
        out += [r for job in jobs_from_prometheus(config, f" ({where})") for r in check_job(job)]
        if alertmanager_expected and not _sends_alerts(config):
            out.append(
                Result(
                    "missing",
                    f"Prometheus sends alerts ({where})",
                    "no Alertmanager in alerting.alertmanagers: SLO pages fire in Prometheus only",
                    "add one, or pass --no-alertmanager if this stack has none",
                )
            )
    return out


def _sends_alerts(config: dict) -> bool:
    """A prometheus.yml names an Alertmanager: a static target, or any service discovery."""
    managers = [as_map(am) for am in as_list(dig(config, "alerting").get("alertmanagers"))]
    targets = [
        t
        for am in managers
        for sc in map(as_map, as_list(am.get("static_configs")))
        for t in as_list(sc.get("targets"))
    ]
    return bool(targets) or any(set(am) - _ALERTMANAGER_NOT_DISCOVERY for am in managers)


def _alertmanager_results(bundle: Bundle, config: Config, alertmanager_expected: bool) -> list[Result]:
    """Alertmanager configs among the files and in values, each walked with the SLO alerts `config` raises."""
    out, configs = [], list(bundle.alertmanager)
    for where, values in bundle.values:
        section = dig(values, "alertmanager")
        if section.get("enabled") is False:
            if alertmanager_expected:
                out.append(
                    Result(
                        "missing",
                        f"Alertmanager ({where})",
                        "alertmanager.enabled is false",
                        "enable it, or pass --no-alertmanager if this stack has none",
                    )
                )
        elif isinstance(section.get("config"), dict):
            configs.append((f"{where} alertmanager.config", section["config"]))
        elif not section.get("stringConfig") and "alertmanagerSpec" not in section:
            out.append(
                Result(
                    "wrong",
                    f"Alertmanager routing ({where})",
                    "alertmanager.config is not set, so the chart's default routes every alert to the "
                    "receiver 'null', which notifies nobody",
                    "set alertmanager.config: `inferwatch deploy merge-alertmanager VALUES` adds "
                    "inferwatch's route to the chart's default tree (or to yours)",
                )
            )
    if configs:
        from inferwatch.deploy._inputs import gather_inputs

        alerts = slo_alerts(gather_inputs(config))
        for where, am in configs:
            out += check_alertmanager_config(am, f" ({where})", alerts)
    return out


def _rule_results(bundle: Bundle) -> list[Result]:
    """Engine names no release exposes (or that a release renamed) in rule expressions, and range windows too
    short for the engines' scrape interval in these files."""
    longest = _longest_engine_interval(bundle)
    out = []
    for where, doc in bundle.rules:
        for group in map(as_map, as_list(doc.get("groups"))):
            for rule in map(as_map, as_list(group.get("rules"))):
                if isinstance(rule.get("expr"), (str, int, float)):
                    what = f"rule {rule.get('alert') or rule.get('record')} ({where})"
                    out += _name_findings(what, str(rule["expr"])) + _window_findings(what, str(rule["expr"]), longest)
    return out


def _longest_engine_interval(bundle: Bundle) -> float:
    """Seconds between scrapes of the engine or GPU job scraped least often in these files (0: none found)."""
    jobs = (
        _monitor_jobs(bundle)
        + _values_scrape_jobs(bundle)
        + [j for _, c in bundle.prometheus for j in jobs_from_prometheus(c)]
    )
    return max((seconds(j.interval) for j in jobs if j.sources), default=0)


def _name_findings(what: str, expr: str) -> list[Result]:
    """Metric names no engine release exposes, or that a release renamed (unless the successor is read too)."""
    from inferwatch.dashboards import PanelContext, metric_names, query_findings

    out = []
    for kind, text in query_findings(expr, PanelContext(type="rule")):
        successor = re.search(r"use (\S+)", text) if kind == "deprecated-metric" else None
        if successor and successor.group(1) in metric_names(expr):
            continue  # reads the old name beside the new one: a fallback for old releases
        if kind in _RULE_FIXES:
            out.append(Result("wrong", what, text, _RULE_FIXES[kind]))
    return out


def _window_findings(what: str, expr: str, longest: float) -> list[Result]:
    """A range window on engine series shorter than two scrapes: rate() and increase() read nothing."""
    from inferwatch.dashboards import metric_names

    windows = [seconds(w) for w in re.findall(r"\[\s*(\d+[smhdw])\s*[]:]", expr)]
    engine = any(n.startswith(_ENGINE_PREFIXES) for n in metric_names(expr))
    if not (engine and windows and longest and min(windows) < 2 * longest):
        return []
    return [
        Result(
            "wrong",
            what,
            f"a {min(windows):g}s window holds fewer than two samples of engines scraped "
            f"every {longest:g}s: it reads empty",
            f"widen the window to at least {2 * longest:g}s (4 scrapes are safer)",
        )
    ]


def _once_per_monitor(results: list[Result]) -> list[Result]:
    """One line per monitor for what its endpoints share (the same finding on endpoint 0 and 1)."""
    seen, out = set(), []
    for result in results:
        key = (result.status, re.sub(r" endpoint \d+", "", result.check), result.detail)
        if key not in seen:
            seen.add(key)
            out.append(Result(result.status, key[1], result.detail, result.fix))
    return out


def check_files(config: Config, paths: list[Path], alertmanager_expected: bool = True) -> list[Result]:
    """Every check that files can answer, over the files (folders: their *.yaml and *.yml) given."""
    bundle = Bundle()
    files = _files(paths, bundle)
    bundle.files_read = {f.resolve() for f in files}
    for file in files:
        for where, doc in _documents(file, bundle):
            _classify(where, doc, file, bundle)
    out = list(bundle.results) + _prometheus_results(bundle, alertmanager_expected)
    out += _once_per_monitor([r for job in _monitor_jobs(bundle) for r in check_job(job)])
    for where, doc in bundle.kind(*_MONITORS):
        out += _numeric_ports(where, doc) + _selection_problems(bundle, where, doc)
    out += _workloads_without_metrics(bundle) + _rule_results(bundle) + _release(bundle, config)
    out += _alertmanager_results(bundle, config, alertmanager_expected)
    return out + _summary(bundle, out, paths)


def _summary(bundle: Bundle, results: list[Result], paths: list[Path]) -> list[Result]:
    """An ok line when the documents read need nothing; a missing one when none could be read, so that a wrong
    path (an empty file, a folder of templates) does not pass as 'nothing to fix'."""
    if not bundle.documents:
        return [
            Result(
                "missing",
                "files",
                f"nothing doctor reads in {', '.join(map(str, paths))}",
                f"pass the files the stack is deployed from: {_READS} (render Helm templates first)",
            )
        ]
    if any(r.bad for r in results):
        return []
    return [
        Result("ok", "files", f"{bundle.documents} document{'s' if bundle.documents != 1 else ''} read, nothing to fix")
    ]
