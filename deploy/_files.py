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
from inferwatch.deploy._shape import as_list, as_map, dig
from inferwatch.deploy._scrape import Job, check_job, job_from_scrape_config, jobs_from_prometheus, seconds

__all__ = ["check_files"]

_MONITORS = ("ServiceMonitor", "PodMonitor")
_WORKLOADS = ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job")
_VALUES_KEYS = ("prometheusOperator", "defaultRules", "kubeStateMetrics", "prometheus-node-exporter", "kubelet")
_SELECTORS = {"ServiceMonitor": "serviceMonitorSelector", "PodMonitor": "podMonitorSelector",
              "PrometheusRule": "ruleSelector"}      # prometheusSpec.<key>, and <key>NilUsesHelmValues
_OPERATOR_DEFAULT = "30s"


@dataclass
class Bundle:
    """The documents of the files given, by kind; `where` strings name file and document."""

    prometheus: list[tuple[str, dict]] = field(default_factory=list)
    alertmanager: list[tuple[str, dict]] = field(default_factory=list)
    values: list[tuple[str, dict]] = field(default_factory=list)
    objects: list[tuple[str, dict]] = field(default_factory=list)      # Kubernetes objects
    rules: list[tuple[str, dict]] = field(default_factory=list)        # rule files (PrometheusRule specs too)
    results: list[Result] = field(default_factory=list)                # what could not be read
    read: set = field(default_factory=set)                             # files read or to be read

    def kind(self, *kinds: str) -> list[tuple[str, dict]]:
        return [(w, d) for w, d in self.objects if d.get("kind") in kinds]


def _documents(path: Path, bundle: Bundle) -> list[tuple[str, object]]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        bundle.results.append(Result("wrong", str(path), f"cannot read it: {getattr(err, 'strerror', err)}"))
        return []
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        hint = " (a Helm template? run helm template first)" if "{{" in text else ""
        bundle.results.append(Result("skipped", str(path), f"not YAML{hint}: line {mark.line + 1 if mark else '?'}"))
        return []
    return [(f"{path}" + (f" #{i + 1}" if len(docs) > 1 else ""), d) for i, d in enumerate(docs)]


def _sort(where: str, doc, path: Path, bundle: Bundle) -> None:
    if not isinstance(doc, dict):
        bundle.results.append(Result("skipped", where, "not a mapping"))
    elif isinstance(doc.get("kind"), str) and "apiVersion" in doc:
        bundle.objects.append((where, doc))
        if doc["kind"] == "PrometheusRule":
            bundle.rules.append((where, as_map(doc.get("spec"))))
        data = {**as_map(doc.get("data")), **as_map(doc.get("stringData"))} if doc["kind"] in ("ConfigMap", "Secret") \
            else {}
        for key, text in data.items():
            if isinstance(text, str) and re.search(r"(prometheus|alertmanager)\.ya?ml\Z", str(key)):
                _sort(f"{where} {key}", _safe(text), path, bundle)
    elif "scrape_configs" in doc or {"global", "rule_files"} <= doc.keys():
        bundle.prometheus.append((where, doc))
    elif "route" in doc and "receivers" in doc:
        bundle.alertmanager.append((where, doc))
    elif isinstance(doc.get("services"), dict):
        _compose(where, doc, path, bundle)
    elif any(k in doc for k in _VALUES_KEYS) or {"prometheus", "alertmanager"} <= doc.keys() or \
            {"config", "alertmanagerSpec"} & as_map(doc.get("alertmanager")).keys() or \
            {"prometheusSpec", "additionalServiceMonitors", "additionalPodMonitors"} & as_map(doc.get("prometheus")).keys():
        bundle.values.append((where, doc))
    elif isinstance(doc.get("groups"), list):
        bundle.rules.append((where, doc))
    else:
        bundle.results.append(Result("skipped", where, "not a file doctor reads (prometheus.yml, Alertmanager "
                                                       "config, compose, kube-prometheus-stack values, Kubernetes "
                                                       "monitors)"))


def _safe(text: str):
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return None


def _compose(where: str, doc: dict, path: Path, bundle: Bundle) -> None:
    """The prometheus.yml and alertmanager.yml a compose file mounts, read from beside it when they are there;
    an SGLang service started without --enable-metrics."""
    for name, service in doc["services"].items():
        service = as_map(service)
        bundle.results += _sglang_flag(f"{where} service {name}", service.get("image"), service.get("entrypoint"),
                                       service.get("command"))
        for volume in as_list(service.get("volumes")):
            long = as_map(volume)                     # the long syntax: {type: bind, source: ..., target: ...}
            parts = volume.split(":") if isinstance(volume, str) else [str(long.get("source")), str(long.get("target"))]
            if len(parts) < 2 or not re.search(r"/(prometheus|alertmanager)\.ya?ml\Z", parts[1]):
                continue
            source = Path(re.sub(r"\$\{?PWD\}?/?", "", parts[0]))
            mounted = Path(os.path.normpath(source if source.is_absolute() else path.parent / source))
            if mounted.resolve() in bundle.read:
                continue
            if mounted.is_file():
                bundle.read.add(mounted.resolve())
                for inner, sub in _documents(mounted, bundle):
                    _sort(f"{inner} (mounted by {where} service {name})", sub, mounted, bundle)
            else:
                bundle.results.append(Result("skipped", f"{where} service {name}", f"mounts {parts[0]}, which is "
                                                                                   "not beside it: pass it with "
                                                                                   "--file"))


def _sglang_flag(where: str, *parts) -> list[Result]:
    """SGLang has no /metrics unless started with --enable-metrics (no environment variable turns it on)."""
    text = " ".join(" ".join(map(str, p)) if isinstance(p, list) else str(p or "") for p in parts)
    if not re.search(r"sglang[./]launch_server|\bsglang\s+serve\b", text) or "--enable-metrics" in text:
        return []
    return [Result("wrong", where, "runs SGLang without --enable-metrics: it serves no /metrics, so its scrape "
                                   "fails", "add --enable-metrics to its command")]


def _workload_flags(bundle: Bundle) -> list[Result]:
    out = []
    for where, doc in bundle.kind(*_WORKLOADS, "Pod"):
        for c in map(as_map, as_list(dig(_template(doc), "spec").get("containers"))):
            out += _sglang_flag(f"{doc['kind']} {dig(doc, 'metadata').get('name')} container {c.get('name')} "
                                f"({where})", c.get("image"), c.get("command"), c.get("args"))
    return out


def _template(doc: dict) -> dict:
    """A workload's pod template (a Pod is its own)."""
    return doc if doc["kind"] == "Pod" else dig(doc, "spec", "template")


def _values_spec(bundle: Bundle) -> dict:
    return next((dig(v, "prometheus", "prometheusSpec") for _, v in bundle.values
                 if dig(v, "prometheus", "prometheusSpec")), {})


def _monitor_jobs(bundle: Bundle) -> list[tuple[str, dict, Job]]:
    spec = _values_spec(bundle)
    interval = str(spec.get("scrapeInterval") or _OPERATOR_DEFAULT)
    origin = (" (prometheusSpec.scrapeInterval)" if spec.get("scrapeInterval")
              else " (the Prometheus resource's default, 30s)")
    monitors = list(bundle.kind(*_MONITORS))
    for where, values in bundle.values:
        for kind, key in (("ServiceMonitor", "additionalServiceMonitors"), ("PodMonitor", "additionalPodMonitors")):
            monitors += [(where, {"kind": kind, "metadata": {"name": m.get("name"), "labels": {"release": "*"}},
                                  "spec": m}) for m in map(as_map, as_list(dig(values, "prometheus").get(key)))]
    out = []
    for where, doc in monitors:
        spec_, meta = dig(doc, "spec"), dig(doc, "metadata")
        for i, ep in enumerate(_endpoints(doc)):
            name = f"{doc['kind']} {meta.get('namespace', '')}/{meta.get('name', '')}".replace(" /", " ")
            texts = (str(meta.get("name", "")), _text(spec_.get("selector")), str(ep.get("port", "")),
                     str(spec_.get("jobLabel", "")), _text(ep.get("metricRelabelings")))
            job = Job(f"{name} endpoint {i} ({where})", str(ep.get("interval") or interval),
                      "" if ep.get("interval") else origin, ep.get("honorLabels") is True, True,
                      tuple(as_list(ep.get("metricRelabelings"))), texts)
            out.append((where, doc, job))
    return out


def _endpoints(doc: dict) -> list[dict]:
    key = "endpoints" if doc["kind"] == "ServiceMonitor" else "podMetricsEndpoints"
    return [e for e in as_list(dig(doc, "spec").get(key)) if isinstance(e, dict)]


def _text(node) -> str:
    return yaml.safe_dump(node) if node else ""


def _selected(selector, labels: dict) -> bool:
    if not isinstance(selector, dict):
        return False
    ok = all(labels.get(k) == str(v) for k, v in as_map(selector.get("matchLabels")).items())
    for expr in map(as_map, as_list(selector.get("matchExpressions"))):
        key, op, values = expr.get("key"), str(expr.get("operator", "")), [str(v) for v in as_list(expr.get("values"))]
        ok &= {"In": key in labels and labels[key] in values, "NotIn": labels.get(key) not in values,
               "Exists": key in labels, "DoesNotExist": key not in labels}.get(op, False)
    return ok and bool(selector)


def _endpoints_problems(bundle: Bundle, where: str, doc: dict) -> list[Result]:
    """A port given by number where a name is asked, and a port no selected Service or pod has."""
    spec, service = dig(doc, "spec"), doc["kind"] == "ServiceMonitor"
    ports = [str(e["port"]) for e in _endpoints(doc) if e.get("port") is not None]
    meta, out = dig(doc, "metadata"), []
    name = f"{doc['kind']} {meta.get('name', '')} ({where})"
    numeric = sorted({p for p in ports if p.isdigit()})
    if numeric:
        said = f"port {numeric[0]} is a number" if len(numeric) == 1 else f"ports {', '.join(numeric)} are numbers"
        out.append(Result("wrong", name, f"{said}, but `port` names a port, and Kubernetes port names always hold "
                                         "a letter: it selects nothing",
                          "name the port (ports[].name) and use that name, or use "
                          + ("targetPort" if service else "portNumber") + " for a number"))
    namespaces = as_list(dig(spec, "namespaceSelector").get("matchNames")) or [meta.get("namespace")]
    any_ns = dig(spec, "namespaceSelector").get("any") is True
    for kind_where, obj_ns, labels, names in _targets(bundle, service):
        if not _selected(spec.get("selector"), labels):
            continue
        if not any_ns and None not in namespaces and obj_ns and obj_ns not in namespaces:
            out.append(Result("wrong", name, f"selects {kind_where} by label, but it lives in namespace {obj_ns}, "
                                             f"outside {', '.join(map(str, namespaces))}",
                              "add its namespace to namespaceSelector.matchNames"))
        lacking = sorted({p for p in ports if not p.isdigit()} - set(names))
        if lacking and names:
            out.append(Result("wrong", name, f"port {', '.join(lacking)} is not a port of {kind_where} "
                                             f"(it has {', '.join(sorted(names))})", "use one of its port names"))
    return out


def _targets(bundle: Bundle, service: bool):
    """(what, namespace, labels, port names) of each Service, or of each workload's pod template."""
    if service:
        for where, doc in bundle.kind("Service"):
            meta = dig(doc, "metadata")
            yield (f"Service {meta.get('name')}", meta.get("namespace"), _labels(meta),
                   [str(p["name"]) for p in map(as_map, as_list(dig(doc, "spec").get("ports"))) if p.get("name")])
        return
    for where, doc in bundle.kind(*_WORKLOADS, "Pod"):
        template = _template(doc)
        names = [str(p["name"]) for c in map(as_map, as_list(dig(template, "spec").get("containers")))
                 for p in map(as_map, as_list(c.get("ports"))) if p.get("name")]
        yield (f"the pods of {doc['kind']} {dig(doc, 'metadata').get('name')}", dig(doc, "metadata").get("namespace"),
               _labels(dig(template, "metadata")), names)


def _labels(meta) -> dict:
    return {str(k): str(v) for k, v in dig(meta, "labels").items()}


def _release(bundle: Bundle, config: Config) -> list[Result]:
    """Monitors and rules kube-prometheus-stack's selectors skip: labels the values' selector misses, or, by
    default, no `release: <release>`. Judged only where it is known how Prometheus selects: values among the files,
    or a deploy.yaml (--config) naming the release; OpenShift's user workload monitoring, for one, needs no label."""
    spec, out, unlabelled = _values_spec(bundle), [], []
    if not bundle.values and config.file.startswith("<"):
        return []
    for where, doc in bundle.kind(*_SELECTORS):
        key, name, labels = _SELECTORS[doc["kind"]], f"{doc['kind']} {dig(doc, 'metadata').get('name')}", \
            _labels(doc.get("metadata"))
        if as_map(spec.get(key)):
            if not _selected(spec[key], labels):
                out.append(Result("wrong", name, f"its labels do not match prometheusSpec.{key} of the values: "
                                                 "Prometheus ignores it", f"label it to match {key}"))
        elif spec.get(f"{key}NilUsesHelmValues") is not False and labels.get("release") != config.release:
            unlabelled.append(name)
    if not unlabelled:
        return out
    return out + [Result("wrong", "release label", f"{', '.join(unlabelled)} lack release: {config.release}: "
                                             "kube-prometheus-stack's Prometheus selects only what carries it",
                   f"label them release: {config.release} (deploy.yaml's release), or set prometheus.prometheusSpec."
                   "serviceMonitorSelectorNilUsesHelmValues (and pod, rule) to false")]


def _values_scrape_jobs(bundle: Bundle) -> list[Job]:
    """prometheusSpec.additionalScrapeConfigs of kube-prometheus-stack values, at the spec's scrape interval."""
    jobs = []
    for where, values in bundle.values:
        spec = dig(values, "prometheus", "prometheusSpec")
        interval = str(spec.get("scrapeInterval") or _OPERATOR_DEFAULT)
        origin = " (prometheusSpec.scrapeInterval)" if spec.get("scrapeInterval") else \
            " (the Prometheus resource's default, 30s)"
        jobs += [job_from_scrape_config(sc, interval, origin, f" ({where} additionalScrapeConfigs)")
                 for sc in as_list(spec.get("additionalScrapeConfigs")) if isinstance(sc, dict)]
    return jobs


def _prometheus_results(bundle: Bundle, alertmanager_expected: bool) -> list[Result]:
    out = [r for job in _values_scrape_jobs(bundle) for r in check_job(job)]
    for where, config in bundle.prometheus:
        jobs = jobs_from_prometheus(config, f" ({where})")
        out += [r for job in jobs for r in check_job(job)]
        managers = [as_map(am) for am in as_list(dig(config, "alerting").get("alertmanagers"))]
        targets = [t for am in managers for sc in map(as_map, as_list(am.get("static_configs")))
                   for t in as_list(sc.get("targets"))]
        sd = [am for am in managers if set(am) - {"static_configs", "scheme", "path_prefix", "timeout", "api_version"}]
        if alertmanager_expected and not targets and not sd:
            out.append(Result("missing", f"Prometheus sends alerts ({where})", "no Alertmanager in "
                                                                               "alerting.alertmanagers: SLO pages "
                                                                               "fire in Prometheus only",
                              "add one, or pass --no-alertmanager if this stack has none"))
    return out


def _alertmanager_results(bundle: Bundle, config: Config, alertmanager_expected: bool) -> list[Result]:
    out, configs = [], list(bundle.alertmanager)
    for where, values in bundle.values:
        section = dig(values, "alertmanager")
        if section.get("enabled") is False:
            if alertmanager_expected:
                out.append(Result("missing", f"Alertmanager ({where})", "alertmanager.enabled is false",
                                  "enable it, or pass --no-alertmanager if this stack has none"))
        elif isinstance(section.get("config"), dict):
            configs.append((f"{where} alertmanager.config", section["config"]))
        elif not section.get("stringConfig") and "alertmanagerSpec" not in section:
            out.append(Result("wrong", f"Alertmanager routing ({where})", "alertmanager.config is not set, so the "
                                                                          "chart's default routes every alert to "
                                                                          "the receiver 'null', which notifies "
                                                                          "nobody", "set alertmanager.config (merge "
                                                                                    "alertmanager/values.yaml of "
                                                                                    "inferwatch deploy render)"))
    if configs:
        from inferwatch.deploy._inputs import gather_inputs

        alerts = slo_alerts(gather_inputs(config))
        for where, am in configs:
            out += check_alertmanager_config(am, f" ({where})", alerts)
    return out


def _rule_results(bundle: Bundle) -> list[Result]:
    """Engine names no release exposes (or that a release renamed) in rule expressions, and range windows too
    short for the engines' scrape interval in these files."""
    from inferwatch.dashboards._lint_promql import PanelContext, metric_names, query_findings

    jobs = [job for _, _, job in _monitor_jobs(bundle)] + _values_scrape_jobs(bundle) + [
        j for _, c in bundle.prometheus for j in jobs_from_prometheus(c)]
    longest = max((seconds(j.interval) for j in jobs if j.sources), default=0)
    out = []
    for where, doc in bundle.rules:
        for group in map(as_map, as_list(doc.get("groups"))):
            for rule in map(as_map, as_list(group.get("rules"))):
                if not isinstance(rule.get("expr"), (str, int, float)):
                    continue
                name, expr = rule.get("alert") or rule.get("record"), str(rule["expr"])
                what = f"rule {name} ({where})"
                for kind, text in query_findings(expr, PanelContext(type="rule")):
                    successor = re.search(r"use (\S+)", text) if kind == "deprecated-metric" else None
                    if successor and successor.group(1) in metric_names(expr):
                        continue          # reads the old name beside the new one: a fallback for old releases
                    if kind in ("unknown-metric", "deprecated-metric", "invalid-promql"):
                        out.append(Result("wrong", what, text, "fix the name (curl the engine's /metrics for "
                                                               "what it exposes)" if kind != "invalid-promql"
                                          else "fix the expression (promtool check rules)"))
                windows = [seconds(w) for w in re.findall(r"\[\s*(\d+[smhdw])\s*[]:]", expr)]
                engine = any(n.startswith(("vllm:", "sglang:", "DCGM_", "llm_", "gpu_")) for n in metric_names(expr))
                if engine and windows and longest and min(windows) < 2 * longest:
                    out.append(Result("wrong", what, f"a {min(windows):g}s window holds fewer than two samples of "
                                                     f"engines scraped every {longest:g}s: it reads empty",
                                      f"widen the window to at least {2 * longest:g}s (4 scrapes are safer)"))
    return out


def _once(results: list[Result]) -> list[Result]:
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
    files = [f for path in paths for f in (sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml"))
                                           if path.is_dir() else [path])]
    bundle.read = {f.resolve() for f in files}
    for file in files:
        for where, doc in _documents(file, bundle):
            _sort(where, doc, file, bundle)
    out = list(bundle.results) + _prometheus_results(bundle, alertmanager_expected)
    out += _once([r for _, _, job in _monitor_jobs(bundle) for r in check_job(job)])
    for where, doc in bundle.kind(*_MONITORS):
        out += _endpoints_problems(bundle, where, doc)
    out += _workload_flags(bundle) + _rule_results(bundle) + _release(bundle, config)
    out += _alertmanager_results(bundle, config, alertmanager_expected)
    read = len(bundle.prometheus) + len(bundle.alertmanager) + len(bundle.values) + len(bundle.objects)
    if not [r for r in out if r.bad] and read:
        out.append(Result("ok", "files", f"{read} documents read, nothing to fix"))
    return out
