"""`inferwatch slo import`: Sloth `prometheus/v1` (and its Kubernetes CRD) and OpenSLO v1 into our spec format.

Every setting that cannot be carried over is listed, never dropped silently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import yaml

from inferwatch.errors import InferwatchError
from inferwatch.slo._spec import RESERVED_LABELS

__all__ = ["ImportResult", "import_file", "import_text"]

_SEL = r"[a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^{}]*\})?"
_WINDOW = r"\[\s*(?:\{\{\s*\.window\s*\}\}|[0-9a-z]+)\s*\]"
_SUM_RATE = rf"sum\s*\(\s*(?:rate|increase)\s*\(\s*({_SEL})\s*{_WINDOW}\s*\)\s*\)"
_COUNTER = re.compile(rf"\s*\(?\s*{_SUM_RATE}\s*\)?\s*\Z")
_LATENCY = re.compile(rf"\s*\(?\s*{_SUM_RATE}\s*-\s*{_SUM_RATE}\s*\)?\s*\Z")
_LE = re.compile(r'\s*,?\s*le\s*=\s*"([^"]*)"\s*,?\s*')


@dataclass
class ImportResult:
    """Specs in our format (plain dicts, ready to dump) and what could not be carried over."""

    specs: list[dict] = field(default_factory=list)
    not_carried: list[str] = field(default_factory=list)


def _selector_of(query: str) -> str | None:
    match = _COUNTER.match(query or "")
    return match.group(1) if match else None


def _latency_of(query: str) -> tuple[str, str] | None:
    """`sum(rate(x_count{m}[w])) - sum(rate(x_bucket{le="T",m}[w]))` -> (x{m}, T)."""
    match = _LATENCY.match(query or "")
    return _bucket_pair(*match.groups()) if match else None


def _canon(matchers: str) -> list[str]:
    return sorted(m.strip() for m in matchers.split(",") if m.strip())


def _name(text: str) -> str:
    return re.sub(r"[^a-z0-9_.-]+", "-", str(text).lower()).strip("-._") or "slo"


def _labels(raw: dict | None, where: str, result: ImportResult) -> dict[str, str]:
    out = {}
    for key, value in (raw or {}).items():
        if key in RESERVED_LABELS:
            result.not_carried.append(f"{where}: label {key}={value!r} dropped: inferwatch sets {key} itself "
                                      "(route on tier and severity instead)")
        else:
            out[str(key)] = str(value)
    return out


def import_text(text: str, origin: str = "<input>") -> ImportResult:
    try:
        docs = [d for d in yaml.safe_load_all(text) if d]
    except yaml.YAMLError as err:
        raise InferwatchError(f"{origin}: invalid YAML: {getattr(err, 'problem', None) or err}") from None
    if not docs or not all(isinstance(d, dict) for d in docs):
        raise InferwatchError(f"{origin}: not a Sloth or OpenSLO document")
    first = docs[0]
    if first.get("version") == "prometheus/v1":
        return _sloth(first, origin, crd=False)
    if first.get("apiVersion") == "sloth.slok.dev/v1":
        return _sloth(first.get("spec") or {}, origin, crd=True)
    if any(str(d.get("apiVersion", "")).startswith("openslo/") for d in docs):
        return _openslo(docs, origin)
    raise InferwatchError(f"{origin}: not a Sloth prometheus/v1 spec, a Sloth PrometheusServiceLevel or "
                          "OpenSLO v1 documents")


def import_file(path) -> ImportResult:
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as err:
        raise InferwatchError(f"{path}: cannot read: {err.strerror}") from None
    return import_text(text, str(path))


# --- Sloth --------------------------------------------------------------------------------------------------

def _camel(doc, crd: bool):
    """The CRD spells keys in camelCase; map them to prometheus/v1's snake_case."""
    if not crd:
        return doc
    if isinstance(doc, dict):
        return {re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), k): _camel(v, crd) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_camel(v, crd) for v in doc]
    return doc


def _sloth(doc: dict, origin: str, crd: bool) -> ImportResult:
    doc, result = _camel(doc, crd), ImportResult()
    service = _name(doc.get("service", "service"))
    spec = {"version": 1, "service": service, "window": "30d", "engines": []}
    result.not_carried.append(f"{origin}: Sloth sets the SLO period per run (default 30d): window 30d used")
    labels = _labels(doc.get("labels"), f"{origin}: labels", result)
    if labels:
        spec["labels"] = labels
    if doc.get("slo_plugins"):
        result.not_carried.append(f"{origin}: slo_plugins: plugins are Sloth's own; not carried over")
    objectives = []
    for i, slo in enumerate(doc.get("slos") or []):
        where = f"{origin}: slos[{i}] ({slo.get('name')})"
        objective = _sloth_objective(slo, where, result)
        if objective:
            objectives.append(objective)
    spec["objectives"] = objectives
    if objectives:
        result.specs.append(spec)
    _engines_hint(result, origin)
    return result


def _engines_hint(result: ImportResult, origin: str) -> None:
    for spec in result.specs:
        if any(str(o.get("metric", "")).startswith("llm_") for o in spec["objectives"]):
            result.not_carried.append(f"{origin}: engines: [] skips the bucket check; name your engines "
                                      "(engines: [vllm, sglang]) to check thresholds against their buckets")


def _sloth_objective(slo: dict, where: str, result: ImportResult) -> dict | None:
    objective = {"name": _name(slo.get("name", "slo"))}
    if slo.get("description"):
        objective["description"] = str(slo["description"])
    sli = slo.get("sli") or {}
    events = sli.get("events")
    if not events:
        kind = "raw (an error-ratio query)" if "raw" in sli else "plugin" if "plugin" in sli else "missing"
        result.not_carried.append(f"{where}: sli {kind}: inferwatch counts events; rewrite it as a ratio or "
                                  "latency SLI")
        return None
    error_q, total_q = events.get("error_query", ""), events.get("total_query", "")
    total, bad, latency = _selector_of(total_q), _selector_of(error_q), _latency_of(error_q)
    if latency and total and total.split("{")[0] == latency[0].split("{")[0] + "_count":
        objective.update({"sli": "latency", "metric": latency[0], "threshold": f"{latency[1]}s"})
    elif total and bad:
        objective.update({"sli": "ratio", "total": total, "bad": bad})
    else:
        result.not_carried.append(f"{where}: queries are not sum(rate(selector[{{{{.window}}}}])) forms; "
                                  "rewrite them as total/bad selectors")
        return None
    objective["target"] = f"{slo.get('objective')}%"
    labels = _labels({**(slo.get("labels") or {}), **((slo.get("alerting") or {}).get("labels") or {})},
                     where, result)
    if labels:
        objective["labels"] = labels
    _sloth_alerting(slo.get("alerting") or {}, objective, where, result)
    return objective


def _sloth_alerting(alerting: dict, objective: dict, where: str, result: ImportResult) -> None:
    if alerting.get("name"):
        result.not_carried.append(f"{where}: alert name {alerting['name']}: inferwatch alerts are "
                                  f"LLMErrorBudgetBurn and LLMSLIDataMissing, with slo={objective['name']}")
    annotations = {k: str(v) for k, v in (alerting.get("annotations") or {}).items()
                   if "{{" not in str(v) or re.fullmatch(r"[^{]*(\{\{\s*\$labels\.\w+\s*\}\}[^{]*)*", str(v))}
    for key in set(alerting.get("annotations") or {}) - set(annotations):
        result.not_carried.append(f"{where}: annotation {key}: uses templates other than $labels")
    if annotations:
        objective["annotations"] = annotations
    for kind in ("page_alert", "ticket_alert"):
        sub = alerting.get(kind) or {}
        if sub.get("disable"):
            result.not_carried.append(f"{where}: {kind}.disable: every tier is generated; drop the unwanted "
                                      "tier in Alertmanager")
        for part in ("labels", "annotations"):
            if sub.get(part):
                shown = ", ".join(f"{k}={v}" for k, v in sub[part].items())
                result.not_carried.append(f"{where}: {kind}.{part} ({shown}): inferwatch labels every alert with "
                                          "tier and severity; route on those")


# --- OpenSLO v1 ---------------------------------------------------------------------------------------------

def _openslo(docs: list[dict], origin: str) -> ImportResult:
    result = ImportResult()
    by_kind: dict[str, dict[str, dict]] = {}
    for doc in docs:
        version = doc.get("apiVersion")
        if version != "openslo/v1":
            result.not_carried.append(f"{origin}: {doc.get('kind')} {version}: only openslo/v1 is read")
            continue
        by_kind.setdefault(doc.get("kind"), {})[(doc.get("metadata") or {}).get("name")] = doc
    specs: dict[str, dict] = {}
    for name, slo in (by_kind.get("SLO") or {}).items():
        where = f"{origin}: SLO {name}"
        body = slo.get("spec") or {}
        service = _name(body.get("service", "service"))
        indicator = body.get("indicator") or (by_kind.get("SLI") or {}).get(body.get("indicatorRef"))
        sli = _openslo_sli(indicator, where, result)
        window = _openslo_window(body, where, result) or "28d"
        if body.get("budgetingMethod", "Occurrences") != "Occurrences":
            result.not_carried.append(f"{where}: budgetingMethod {body['budgetingMethod']}: inferwatch budgets "
                                      "by events (Occurrences)")
        if body.get("alertPolicies"):
            result.not_carried.append(f"{where}: alertPolicies: replaced by the Workbook's multiwindow tiers and "
                                      "a missing-data alert (alertWhenNoData is always on)")
        if sli is None:
            continue
        spec = specs.setdefault(service, {"version": 1, "service": service, "window": window, "engines": [],
                                          "objectives": []})
        if spec["window"] != window:
            result.not_carried.append(f"{where}: window {window} differs from other SLOs of {service}; "
                                      f"{spec['window']} used")
        objectives = body.get("objectives") or []
        for i, target in enumerate(objectives):
            objective = {"name": _name(name if len(objectives) == 1 else f"{name}-{i}"), **sli}
            if target.get("displayName"):
                objective["description"] = str(target["displayName"])
            value = target.get("targetPercent")
            objective["target"] = f"{value}%" if value is not None else str(target.get("target"))
            spec["objectives"].append(objective)
    result.specs = [s for s in specs.values() if s["objectives"]]
    _engines_hint(result, origin)
    return result


def _openslo_window(body: dict, where: str, result: ImportResult) -> str | None:
    windows = body.get("timeWindow") or []
    if not windows:
        return None
    window = windows[0]
    duration = str(window.get("duration", ""))
    if not window.get("isRolling", True) or window.get("calendar"):
        result.not_carried.append(f"{where}: calendar window {duration}: alerts use a rolling window of the "
                                  "same length")
    if duration.endswith(("M", "Q", "Y")):
        days = {"M": 30, "Q": 90, "Y": 365}[duration[-1]] * int(duration[:-1] or 1)
        result.not_carried.append(f"{where}: {duration} taken as {days}d")
        return f"{days}d"
    return duration


def _openslo_query(metric: dict | None) -> str | None:
    source = ((metric or {}).get("metricSource") or {}).get("spec") or {}
    query = source.get("query") or source.get("promql")
    if not query:
        return None
    query = str(query).strip()
    return query if re.fullmatch(_SEL, query) else _selector_of(query)


def _openslo_sli(indicator: dict | None, where: str, result: ImportResult) -> dict | None:
    if not indicator:
        result.not_carried.append(f"{where}: no indicator found (inline or indicatorRef)")
        return None
    spec = indicator.get("spec") or {}
    ratio = spec.get("ratioMetric")
    if not ratio:
        result.not_carried.append(f"{where}: thresholdMetric SLIs are not event counts; use a ratio SLI")
        return None
    if "raw" in ratio:
        result.not_carried.append(f"{where}: ratioMetric.raw is a precomputed ratio; give good/bad and total")
        return None
    total = _openslo_query(ratio.get("total"))
    part_key = "good" if "good" in ratio else "bad"
    part = _openslo_query(ratio.get(part_key))
    if not total or not part:
        result.not_carried.append(f"{where}: queries are not plain selectors or sum(rate(selector[w])); "
                                  "rewrite them as selectors")
        return None
    if part_key == "good":
        latency = _bucket_pair(total, part)
        if latency:
            return {"sli": "latency", "metric": latency[0], "threshold": f"{latency[1]}s"}
    return {"sli": "ratio", "total": total, part_key: part}


def _bucket_pair(count: str, bucket: str) -> tuple[str, str] | None:
    """`x_count{m}` and `x_bucket{m, le="T"}` -> (x{m}, T): a latency SLI, robust to how `le` is spelled."""
    name, _, rest = bucket.partition("{")
    le = _LE.search(rest)
    if not name.endswith("_bucket") or not le or count.partition("{")[0] != name[:-len("_bucket")] + "_count":
        return None
    matchers = _LE.sub(",", rest.rstrip("}")).strip(", ")
    if _canon(matchers) != _canon(count.partition("{")[2].rstrip("}")):
        return None
    return name[:-len("_bucket")] + (f"{{{matchers}}}" if matchers else ""), le.group(1)
