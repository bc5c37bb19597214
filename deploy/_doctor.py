"""`inferwatch doctor`: monitor the monitor. Asks a running Prometheus, or a VictoriaMetrics stack (victoria-metrics,
vmagent, vmalert: deploy/_backend.py says which server answers what), and Alertmanager and Grafana, whether every
signal the dashboards, SLOs and triage read arrives, and says how to fix what does not.

Each check is a small function from what the servers answered to `Result`s, so the list reads like the issue's:
engine targets, per-model signals, `model` on every engine series, SLO thresholds as buckets, the cap where an
alert reads it, GPU activity with a workload pod, the GPU <-> engine join on pod that triage runs, honor_labels,
scrape intervals, rule groups, Alertmanager and Grafana. A check that cannot run, or is not asked for, says
`skipped` and why; `note` is a part that cannot work as set up but needs no fix (a cap nobody gave).
"""

from __future__ import annotations

import json
from dataclasses import replace
from fractions import Fraction

from inferwatch.deploy._backend import QUERY, RULES, SCRAPE
from inferwatch.deploy._config import Config
from inferwatch.deploy._doctor_stack import (
    assign_roles,
    check_notifiers,
    check_stored_up,
    detect_servers,
    missed_iterations,
    skipped,
)
from inferwatch.deploy._result import RENDER, Result
from inferwatch.deploy._routing import check_alertmanager_config, slo_alerts
from inferwatch.deploy._scrape import MAX_SCRAPE_INTERVAL, check_job, jobs_from_prometheus, seconds
from inferwatch.deploy._shape import as_map, yaml_or_none
from inferwatch.promapi import ApiError, Client, ClientOptions

__all__ = ["Result", "run_checks", "summary", "MAX_SCRAPE_INTERVAL"]


# (signal, series, fix): read per model by the dashboards, SLOs and triage
_PER_MODEL = (
    ("running requests", "llm_requests_running", "scrape the engine with the mapping's relabelings (" + RENDER + ")"),
    ("waiting requests", "llm_requests_waiting", "scrape the engine with the mapping's relabelings"),
    ("KV-cache usage", "llm_kv_cache_usage_ratio", "load the inferwatch-mappings rules (old engines need them)"),
)


def _le(threshold: Fraction) -> str:
    value = float(threshold)
    text = repr(value).removesuffix(".0")
    return f"{text}|{text}[.]0" if value.is_integer() else text.replace(".", "[.]")


def _specs(config: Config):
    from inferwatch.deploy._inputs import _slo_specs
    from inferwatch.slo import LatencySLI, load_spec

    return [
        (spec, objective)
        for spec in map(load_spec, _slo_specs(config))
        for objective in spec.objectives
        if isinstance(objective.sli, LatencySLI)
    ]


def _models(prom: Client, expr: str) -> set[str]:
    """The models `expr` has series for; series without `model` are check_model_label's."""
    return {r["metric"]["model"] for r in prom.query(f"count by (model) ({expr})") if r["metric"].get("model")}


def _engine_models(prom: Client) -> set[str]:
    return _models(prom, "llm_requests_running") | _models(prom, "llm_time_to_first_token_seconds_count")


def check_targets(prom: Client, name: str = "Prometheus") -> list[Result]:
    """Active targets that are down or scraped too seldom, and (from the same target list) the engine and GPU jobs
    of the config that find no target at all. An empty list is no target, never "every target is up"."""
    active = prom.api("/api/v1/targets", "targets", state="active")["activeTargets"]
    out = _guarded(
        "scrape config",
        check_config,
        prom,
        {t.get("scrapePool") for t in active if isinstance(t.get("scrapePool"), str)},
        name,
    )
    if not active:
        return [
            Result(
                "missing",
                "targets",
                f"{name} at {prom.base} has no active scrape target: nothing is scraped",
                "check its scrape config; if another server scrapes "
                "(vmagent, a Prometheus agent), give its URL with "
                "--scraper",
            )
        ] + out
    for target in active:
        label = f"target {target['labels'].get('job', '')} {target['scrapeUrl']}"
        interval = target.get("scrapeInterval", "")
        if target["health"] == "down":
            hint = (
                "SGLang serves /metrics only when started with --enable-metrics"
                if "404" in target["lastError"]
                else "check the port name and path of its monitor"
            )
            out.append(Result("wrong", label, f"down: {target['lastError']}", hint))
        elif interval and seconds(interval) > MAX_SCRAPE_INTERVAL:
            out.append(
                Result(
                    "wrong",
                    label,
                    f"scraped every {interval}; the SLO rules' 1m increases need at most {MAX_SCRAPE_INTERVAL}s",
                    "lower the monitor's interval",
                )
            )
    return out or [Result("ok", "targets", f"all {len(active)} active targets are up and scraped often enough")]


def check_config(prom: Client, pools: set[str], name: str = "Prometheus") -> list[Result]:
    """The engine and GPU scrape jobs the scraper runs, as its config says: jobs that find no target (a monitor
    whose selector, namespace or port matches nothing), and what their relabelings and honor_labels do."""
    try:
        config = yaml_or_none(prom.api("/api/v1/status/config", "config")["yaml"])
    except ApiError as err:
        if err.status not in (400, 404, 405):
            raise
        config = None
    if not isinstance(config, dict):
        return [
            Result(
                "skipped",
                "scrape config",
                f"{name} at {prom.base} does not serve its scrape config (an old "
                "one, or behind a proxy): its jobs' relabelings are not checked; "
                "check the files with --file",
            )
        ]
    out = []
    for job in jobs_from_prometheus(config):
        if job.job_name not in pools and job.sources:
            out.append(
                Result(
                    "wrong",
                    job.name,
                    "finds no target: nothing is scraped",
                    "check its selector, namespace and port name (a monitor's), or its targets",
                )
            )
        out += check_job(job, running=True)
    return out


def _raw_engine_jobs(prom: Client) -> list[str]:
    """`job (name)` of each job whose engine series arrive under the engine's own names: scraped without the
    relabelings (and no recording rule renames the running-requests gauge, so it never becomes common)."""
    from inferwatch.deploy._scrape import _mappings

    raw = sorted(
        {
            source
            for mapping in _mappings().values()
            for entry in mapping.entries
            if entry.name == "llm_requests_running"
            for source in entry.sources
        }
    )
    found = prom.query(f'count by (__name__, job) ({{__name__=~"{"|".join(raw)}"}})')
    return sorted({f"{r['metric'].get('job', '')} ({r['metric'].get('__name__', '')})" for r in found})


def check_models(prom: Client, specs) -> list[Result]:
    models = _engine_models(prom)
    if not models:
        raw = _raw_engine_jobs(prom)
        detail = "no llm_requests_running with a model from any engine" + (
            f"; engine series arrive under the engine's own names, scraped without the inferwatch relabelings: "
            f"job {', '.join(raw)}"
            if raw
            else ""
        )
        return [
            Result(
                "missing", "engine series", detail, f"apply the engine monitors ({RENDER}) and check their relabelings"
            ),
            Result("skipped", "per-model signals and SLO thresholds", "no engine series to check them on"),
        ]
    out = []
    for signal, series, fix in _PER_MODEL:
        lacking = sorted(models - _models(prom, series))
        out.append(
            Result("missing", signal, f"{series} absent for model {', '.join(lacking)}", fix)
            if lacking
            else Result("ok", signal, f"{series} for {len(models)} models")
        )
    for spec, objective in specs:
        if spec.source != "engine":
            out.append(
                Result(
                    "skipped",
                    f"SLO {spec.service}/{objective.name} threshold",
                    f"source {spec.source}: its buckets are inferwatch's own, not the engines'",
                )
            )
            continue
        sli = objective.sli
        series = f'{sli.metric}_bucket{{le=~"{_le(sli.threshold)}"}}'
        lacking = sorted(models - _models(prom, series))
        what = f"SLO {spec.service}/{objective.name} threshold"
        out.append(
            Result(
                "missing",
                what,
                f"no {sli.metric} bucket at {float(sli.threshold):g}s for model {', '.join(lacking)}",
                "pick a threshold that is a bucket boundary of every engine (inferwatch slo check)",
            )
            if lacking
            else Result("ok", what, f"bucket le={float(sli.threshold):g} for every model")
        )
    return out


def check_gpus(prom: Client, expected: bool = True) -> list[Result]:
    """`expected` False: the config runs no GPU exporter (CPU engines, a laptop); no GPU series is then skipped."""
    if not prom.query("count(gpu_utilization_ratio)"):
        if not expected:
            return [
                Result(
                    "skipped",
                    "GPU series",
                    "deploy.yaml runs no GPU exporter (dcgm and nvml disabled): GPU activity is not checked",
                )
            ]
        return [
            Result(
                "missing",
                "GPU series",
                "no gpu_utilization_ratio",
                "scrape dcgm-exporter (its ServiceMonitor) or run the NVML exporter DaemonSet (nvml.enabled)",
            )
        ]
    out = []
    for series in ("gpu_sm_active_ratio", "gpu_tensor_active_ratio"):
        if prom.query(f"count({series})"):
            out.append(Result("ok", series))
        else:
            out.append(
                Result(
                    "missing",
                    series,
                    "GPU-Util arrives but not the profiling fields (DCGM without DCGM_FI_PROF_*, or NVML without GPM)",
                    "mount deploy/dcgm/counters.csv (the inferwatch-dcgm-counters ConfigMap) in dcgm-exporter",
                )
            )
    if prom.query('count({__name__=~"gpu_.+|DCGM_.+", exported_pod!=""})'):
        out.append(
            Result(
                "wrong",
                "honor_labels on GPU scrapes",
                "GPU series carry exported_pod: the exporter's pod label was renamed",
                "set honorLabels: true on the GPU monitor",
            )
        )
    elif not prom.query('count(gpu_utilization_ratio{pod!=""})'):
        out.append(
            Result(
                "missing",
                "GPU workload pod",
                "no GPU series names the pod using it",
                "enable dcgm-exporter's pod mapping (kubelet pod-resources) or use the NVML exporter",
            )
        )
    else:
        out.append(Result("ok", "GPU workload pod", "GPU series name the pod using them"))
    return out


# what an engine series behind the normalizing exporter, or a GPU series scraped without honor_labels, lacks
_JOIN_FIX = (
    "engine series need the pod they come from: scrape the engines' pods (scrape_mode relabel or sidecar: "
    "the monitor's pod target label), or behind the normalizing exporter name each --target after its pod "
    "and copy `target` to `pod` (metric_relabel_configs); GPU series need the pod using the GPU "
    "(honor_labels: true on the GPU scrape)"
)


def _pods(prom: Client, series: str) -> set[tuple[str, str]]:
    return {
        (r["metric"].get("namespace", ""), r["metric"]["pod"])
        for r in prom.query(f'count by (namespace, pod) ({series}{{pod!=""}})')
    }


def check_join(prom: Client) -> list[Result]:
    """The GPU <-> engine join triage and the GPU dashboard run: GPU series (per the workload pod using them) meet
    engine series on namespace and pod. GPUs used by other workloads match nothing, so only engine pods no GPU
    series names are named; no match at all means the join cannot work (engines behind the normalizing exporter
    carry the exporter's pod, or none)."""
    name = "GPU <-> engine join"
    gpus = _pods(prom, "gpu_utilization_ratio")
    if not gpus:
        reason = (
            "no gpu_utilization_ratio"
            if not prom.query("count(gpu_utilization_ratio)")
            else "no GPU series names the pod using it"
        )
        return [Result("skipped", name, f"{reason}: nothing to join to the engines")]
    engines = _pods(prom, "llm_requests_running")
    if not engines:
        return [
            Result(
                "wrong",
                name,
                "no engine series (llm_requests_running) carries pod: triage cannot join GPUs "
                "to engines, and the GPU dashboard shows no model",
                _JOIN_FIX,
            )
        ]
    unjoined = sorted(engines - gpus)
    if unjoined == sorted(engines):
        return [
            Result(
                "wrong",
                name,
                f"no GPU series' pod ({_names(gpus)}) matches an engine series' pod "
                f"({_names(engines)}): triage cannot join GPUs to engines",
                _JOIN_FIX,
            )
        ]
    if unjoined:
        return [
            Result(
                "missing",
                name,
                f"engine pods {_names(set(unjoined))} match no GPU series' pod: triage and "
                "the GPU dashboard show no GPU for them",
                _JOIN_FIX,
            )
        ]
    return [Result("ok", name, f"{len(engines)} engine pods joined to their GPUs")]


def _names(pods: set[tuple[str, str]], most: int = 5) -> str:
    text = sorted(f"{ns}/{pod}" if ns else pod for ns, pod in pods)
    return ", ".join(text[:most]) + (f" and {len(text) - most} more" if len(text) > most else "")


def check_model_label(prom: Client, specs) -> list[Result]:
    """The engine series read per model (the table above, the engine SLOs' histograms) carry `model` on every
    series: dashboards, SLOs and triage group by it, so one without falls out of every per-model view (and the cap
    alert's `on (model)` join). Series no view reads by model (vLLM's HTTP counters) may lack it."""
    names = sorted(
        {series for _, series, _ in _PER_MODEL}
        | {f"{o.sli.metric}_bucket" for spec, o in specs if spec.source == "engine"}
    )
    lacking = prom.query(f'count by (__name__, job) ({{__name__=~"{"|".join(names)}", model=""}})')
    if not lacking and not prom.query(f'count({{__name__=~"{"|".join(names)}"}})'):
        return [Result("skipped", "model label", "no engine series read per model arrives: nothing to check")]
    if not lacking:
        return [Result("ok", "model label", "every engine series read per model names its model")]
    found = sorted({f"{r['metric'].get('__name__', '')} (job {r['metric'].get('job', '')})" for r in lacking})
    return [
        Result(
            "wrong",
            "model label",
            f"{len(found)} engine series without model: "
            f"{', '.join(found[:5])}" + (f" and {len(found) - 5} more" if len(found) > 5 else ""),
            "scrape with the mapping's relabelings (they copy the engine's model name to model) or load the "
            "inferwatch-mappings rules; behind a proxy, keep the engine's model label",
        )
    ]


CAP = "llm_max_running_requests"
CAP_GROUP = "inferwatch-caps"  # the cap as recording rules; the normalizing exporter may serve it instead


def check_cap(prom: Client, configured: set[str], ruler: Client | None = None) -> list[Result]:
    """The cap where an alert reads it (LLMQueueSaturated): a model whose cap `configured` names (the user's
    deploy.yaml, not the embedded example) must have it; one no one gave a cap is a note: that alert's cap part
    cannot fire for it, its KV-cache part still can. The alerts are the `ruler`'s (default: `prom`)."""
    alerts = sorted(
        {
            r["name"]
            for g in (ruler or prom).api("/api/v1/rules", "rules")["groups"]
            for r in g["rules"]
            if r.get("type") == "alerting" and CAP in str(r.get("query", ""))
        }
    )
    models = _engine_models(prom)
    if not alerts:
        return [Result("skipped", "concurrency cap", f"no loaded alert reads {CAP}: not checked")]
    if not models:
        return [Result("skipped", "concurrency cap", "no engine series to check it on")]
    lacking = models - _models(prom, CAP)
    out = []
    if lacking & configured:
        out.append(
            Result(
                "missing",
                "concurrency cap",
                f"{CAP} absent for model "
                f"{', '.join(sorted(lacking & configured))} though deploy.yaml "
                f"sets it: {', '.join(alerts)} cannot fire on the cap",
                f"load the {CAP_GROUP} rules ({RENDER}), or pass the exporter's --max-running-requests",
            )
        )
    if lacking - configured:
        out.append(
            Result(
                "note",
                "concurrency cap",
                f"no {CAP} for model {', '.join(sorted(lacking - configured))}: "
                f"the cap part of {', '.join(alerts)} cannot fire for it (the "
                "KV-cache part still can)",
                "no engine exports the cap: set engines[].max_running_requests in deploy.yaml (a recording "
                "rule) or the exporter's --max-running-requests",
            )
        )
    return out or [Result("ok", "concurrency cap", f"{CAP} for {len(models)} models")]


def check_autoscaling(prom: Client, config: Config, external: Client | None = None) -> list[Result]:
    """Each model deploy.yaml autoscales has its scaling signal in Prometheus and, given the Kubernetes API
    (`external`), in the external metrics API that prometheus-adapter serves the HPA from: an empty answer there
    leaves the HPA holding its replicas, never scaling."""
    from inferwatch.autoscale import ADAPTER_SIGNAL
    from inferwatch.deploy._config import scaled_engines

    out = []
    for engine, deployment in scaled_engines(config):
        signal = f'llm_autoscale:scaling_signal{{namespace="{engine.namespace}", model="{engine.model}"}}'
        if prom.query(signal):
            out.append(Result("ok", f"autoscaling signal {engine.model}", f"in Prometheus for {deployment}"))
        else:
            out.append(
                Result(
                    "missing",
                    f"autoscaling signal {engine.model}",
                    f"no {signal}: {deployment} cannot scale on it",
                    "load the inferwatch-autoscaling rules (every deploy render has them); "
                    "the engine needs TTFT and TPOT histograms with traffic",
                )
            )
        if external is None or config.autoscaling.via != "hpa":
            continue
        path = f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{engine.namespace}/{ADAPTER_SIGNAL}"
        answer = external.get(path, labelSelector=f"model={engine.model}")
        items = answer.get("items") if isinstance(answer, dict) else None
        if not isinstance(items, list):
            out.append(
                Result(
                    "wrong",
                    f"external metric {engine.model}",
                    f"{path} is no external metrics answer",
                    "point --external-metrics at the Kubernetes API (kubectl proxy)",
                )
            )
            continue
        out.append(
            Result("ok", f"external metric {engine.model}", f"{ADAPTER_SIGNAL} = {items[0].get('value')}")
            if items
            else Result(
                "missing",
                f"external metric {engine.model}",
                f"prometheus-adapter answers {path} with no value: the HPA holds its replicas",
                "install prometheus-adapter with "
                "autoscaling/prometheus-adapter-values.yaml, pointed at this Prometheus",
            )
        )
    return out


def configured_caps(config: Config) -> set[str]:
    """The models whose cap the user's config sets: the embedded defaults' example cap is nobody's."""
    if config.engines == Config().engines:
        return set()
    return {model for engine in config.engines for model, _ in engine.max_running_requests}


def check_rules(prom: Client, expected: list[str], kind: str = "prometheus") -> list[Result]:
    """Rule groups expected but not loaded, failing rules, and missed iterations (a Prometheus' last hour; a
    vmalert's since it started)."""
    groups = {g["name"]: g for g in prom.api("/api/v1/rules", "rules")["groups"]}
    out = []
    lacking = [name for name in expected if name not in groups and name != CAP_GROUP]
    if lacking:
        out.append(
            Result(
                "missing",
                "rule groups",
                ", ".join(lacking),
                f"apply the PrometheusRules ({RENDER}) with the `release` label your Prometheus selects",
            )
        )
    for name, group in groups.items():
        failing = [r for r in group["rules"] if r.get("health") == "err"]
        if failing:
            out.append(
                Result(
                    "wrong",
                    f"rule group {name}",
                    f"{len(failing)} rules fail: {str(failing[0].get('lastError', ''))[:300]}",
                    "fix the expression (promtool check rules), or regenerate with inferwatch build",
                )
            )
    out += missed_iterations(prom) if kind == "vmalert" else _missed_in_prometheus(prom)
    if not lacking and all(r.status == "note" for r in out):  # a note (a few missed runs) is not a failure
        out.insert(0, Result("ok", "rule groups", f"{sum(n in groups for n in expected)} loaded, none failing"))
    return out


def _missed_in_prometheus(prom: Client) -> list[Result]:
    missed = prom.query("sum by (rule_group) (increase(prometheus_rule_group_iterations_missed_total[1h])) > 0")
    return [
        Result(
            "wrong",
            f"rule group {sample['metric'].get('rule_group', '')}",
            "missed iterations in the last hour",
            "give Prometheus more CPU or a longer group interval",
        )
        for sample in missed
    ]


def check_sends_alerts(prom: Client, expected: bool = True) -> list[Result]:
    """A Prometheus' Alertmanagers. `expected` False: this stack has none (a demo, a laptop): skipped, not
    missing."""
    if prom.api("/api/v1/alertmanagers", "alertmanagers")["activeAlertmanagers"]:
        return [Result("ok", "Prometheus sends alerts")]
    if not expected:
        return [
            Result(
                "skipped",
                "Prometheus sends alerts",
                "no Alertmanager in this stack, as told (--no-alertmanager): alerts fire in Prometheus only",
            )
        ]
    return [
        Result(
            "missing",
            "Prometheus sends alerts",
            "no Alertmanager configured",
            "set alerting.alertmanagers in prometheus.yml (kube-prometheus-stack does), or pass "
            "--no-alertmanager if this stack has none",
        )
    ]


def check_alertmanager(am: Client | None, expected: bool = True, alerts: dict | None = None) -> list[Result]:
    """Alertmanager's routes and inhibit rules for the SLO alerts `alerts` names."""
    if am is None:
        return (
            [
                Result(
                    "skipped",
                    "Alertmanager routing",
                    "no --alertmanager given: its routes and inhibit rules are not checked",
                )
            ]
            if expected
            else []
        )
    try:
        status = am.get("/api/v2/status", "am_status")
    except ApiError as err:
        return [Result("missing", "Alertmanager", str(err), "check --alertmanager")]
    config = as_map(yaml_or_none(status["config"]["original"]))
    return check_alertmanager_config(config, "", alerts or {})


def check_grafana(grafana: Client, uids: dict[str, str]) -> list[Result]:
    try:
        found = grafana.get("/api/search", "grafana_search", type="dash-db")
    except ApiError as err:
        return [Result("missing", "Grafana", str(err), "check --grafana and GRAFANA_TOKEN")]
    have = {board.get("uid") for board in found}
    lacking = [title for uid, title in uids.items() if uid not in have]
    return [
        Result(
            "missing",
            "Grafana dashboards",
            ", ".join(lacking),
            "apply the dashboard ConfigMaps (Grafana sidecar) or inferwatch dashboards push",
        )
        if lacking
        else Result("ok", "Grafana dashboards", f"all {len(uids)} present")
    ]


def run_checks(
    config: Config,
    prometheus: str,
    alertmanager: str | None = None,
    grafana: str | None = None,
    token: str | None = None,
    rule_groups: list[str] | None = None,
    alertmanager_expected: bool = True,
    options: ClientOptions | None = None,
    scraper: str | None = None,
    ruler: str | None = None,
    external_metrics: str | None = None,
) -> list[Result]:
    """Every check against the servers given, each call bounded by `options` (auth, TLS, deadline, size cap; one
    set for every server, Grafana's bearer token from `token` when given). What each server is (Prometheus,
    VictoriaMetrics, vmagent, vmalert) is detected first; each check asks the server that can answer it (`scraper`
    and `ruler` where the `prometheus` URL's server does not scrape or evaluate rules), and a check no server given
    can answer is `skipped`, naming the flag that would let it run. The rule groups expected are the config's,
    unless `rule_groups` names them (a stack that loads other rule files, such as the demo's);
    `alertmanager_expected` False says the stack has none; `external_metrics` is the Kubernetes API (a `kubectl
    proxy`) where prometheus-adapter's external metrics are read for an HPA. A server that answers a check wrongly
    fails that check, in one line naming the endpoint, and the other checks still run."""
    from inferwatch.deploy._inputs import gather_inputs

    options = options or ClientOptions()
    servers, results = detect_servers({"--prometheus": prometheus, "--scraper": scraper, "--ruler": ruler}, options)
    if "--prometheus" not in servers:
        return results
    roles, lines = assign_roles(servers)
    results += lines
    store, scrapes, rules = roles[QUERY], roles[SCRAPE], roles[RULES]
    inputs = gather_inputs(config)
    expected = rule_groups if rule_groups is not None else [g["name"] for rules in inputs.rules for g in rules.groups]
    specs = _specs(config)
    if scrapes is not None:
        results += _guarded("targets", check_targets, scrapes.client, scrapes.name)
    else:
        results += skipped(servers, SCRAPE, "targets", "scrape config")
        results += _guarded("stored up", check_stored_up, store) if store is not None else []
    if store is not None:
        prom = store.client
        results += _guarded("engine series", check_models, prom, specs) + _guarded(
            "model label", check_model_label, prom, specs
        )
        results += (
            _guarded("concurrency cap", check_cap, prom, configured_caps(config), rules.client)
            if rules is not None
            else skipped(servers, RULES, "concurrency cap")
        )
        results += _guarded("GPU series", check_gpus, prom, config.dcgm.enabled or config.nvml.enabled) + _guarded(
            "GPU <-> engine join", check_join, prom
        )
        if config.autoscaling.via != "none":
            kube = Client(external_metrics, options, "Kubernetes API") if external_metrics else None
            results += _guarded("autoscaling", check_autoscaling, prom, config, kube)
    else:
        results += skipped(
            servers, QUERY, "engine series", "model label", "concurrency cap", "GPU series", "GPU <-> engine join"
        )
    if rules is not None:
        sends = f"{rules.short} sends alerts"
        results += _guarded("rule groups", check_rules, rules.client, expected, rules.kind)
        results += (
            _guarded(sends, check_notifiers, rules.client, alertmanager_expected)
            if rules.kind == "vmalert"
            else _guarded(sends, check_sends_alerts, rules.client, alertmanager_expected)
        )
    else:
        results += skipped(servers, RULES, "rule groups", "alerts sent")
    am = Client(alertmanager, options, "Alertmanager") if alertmanager else None
    results += _guarded("Alertmanager", check_alertmanager, am, alertmanager_expected, slo_alerts(inputs))
    if grafana:
        uids = {board["uid"]: board["title"] for board in map(json.loads, inputs.dashboards.values())}
        grafana_options = replace(options, bearer_token=token, basic_auth=None) if token else options
        results += check_grafana(Client(grafana, grafana_options, "Grafana"), uids)
    else:
        results.append(Result("skipped", "Grafana dashboards", "no --grafana given: not checked"))
    return results


def _guarded(name: str, check, *args) -> list[Result]:
    """`check(*args)`, or one line saying which answer made it impossible: a hostile or broken server fails the
    check it broke, not the command."""
    try:
        return check(*args)
    except ApiError as err:
        return [
            Result(
                "wrong",
                name,
                f"cannot check: {err}",
                "check that the URL is the server's own API (not a proxy's or login page), or raise --timeout",
            )
        ]


def summary(results: list[Result]) -> str:
    """`9 ok, 1 note, 1 skipped, 2 to fix`: the line after the checks."""
    notes = sum(r.status == "note" for r in results)
    skipped = sum(r.status == "skipped" for r in results)
    bad = sum(r.bad for r in results)
    return (
        f"{len(results) - notes - skipped - bad} ok, "
        + (f"{notes} note{'s' * (notes > 1)}, " if notes else "")
        + (f"{skipped} skipped, " if skipped else "")
        + f"{bad} to fix"
    )
