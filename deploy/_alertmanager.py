"""Alertmanager routing for inferwatch's alerts, and for theirs alone.

Every render is one sub-route scoped by `alertname=~"<the alerts our rules raise>"` (no label other than the name
is common to every rule we install), inside which pages and tickets go by SLO `tier` and `severity`. It is merged
into a tree, never laid over one: `merge_into(existing, ...)` puts it first under the existing root, appends our
receivers and the SLO tier inhibitions (a faster burn-rate tier silences the slower ones of the same objective),
and keeps every other route, receiver and inhibit rule (Watchdog, InfoInhibitor) as it was. The compose stack
merges it into an empty tree, kube-prometheus-stack's values into the chart's default one, and
`inferwatch deploy merge-alertmanager` into a user's own.
"""

from __future__ import annotations

import copy
import re

from inferwatch.deploy._config import Config
from inferwatch.deploy._routing import matches
from inferwatch.errors import InferwatchError
from inferwatch.slo import BURN_ALERT

__all__ = [
    "alertmanager_config",
    "alertmanager_config_resource",
    "alert_names",
    "merge_into",
    "merge_document",
    "sub_route",
    "CHART_DEFAULT",
    "RECEIVERS",
    "ROUTES",
]

RECEIVERS = {"page": "inferwatch-page", "ticket": "inferwatch-ticket"}
# (receiver, matcher): first match wins; the tier matchers catch SLO alerts whose severity a spec overrode
ROUTES = (
    ("page", 'tier=~"page_.+"'),
    ("ticket", 'tier=~"ticket_.+"'),
    ("page", 'severity="critical"'),
    ("ticket", 'severity="warning"'),
)
_TIMING = {
    "page": {"group_wait": "30s", "group_interval": "5m", "repeat_interval": "4h"},
    "ticket": {"group_wait": "5m", "group_interval": "30m", "repeat_interval": "24h"},
}
_GROUP_BY = ["alertname", "service", "slo", "model", "cluster"]
_MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"(.*)"\Z')
# The root a tree of our own starts from (compose): whatever our sub-route does not take notifies nobody.
_EMPTY = {"route": {"receiver": "default", "group_by": _GROUP_BY}, "receivers": [{"name": "default"}]}
# kube-prometheus-stack's own `alertmanager.config` (chart 88.5.3 values.yaml, which
# tests/test_deploy_alertmanager.py compares it with): what `helm upgrade -f alertmanager/values.yaml` would replace.
CHART_DEFAULT = {
    "global": {"resolve_timeout": "5m"},
    "inhibit_rules": [
        {
            "source_matchers": ["severity = critical"],
            "target_matchers": ["severity =~ warning|info"],
            "equal": ["namespace", "alertname"],
        },
        {
            "source_matchers": ["severity = warning"],
            "target_matchers": ["severity = info"],
            "equal": ["namespace", "alertname"],
        },
        {
            "source_matchers": ["alertname = InfoInhibitor"],
            "target_matchers": ["severity = info"],
            "equal": ["namespace"],
        },
        {"target_matchers": ["alertname = InfoInhibitor"]},
    ],
    "route": {
        "group_by": ["namespace"],
        "group_wait": "30s",
        "group_interval": "5m",
        "repeat_interval": "12h",
        "receiver": "null",
        "routes": [{"receiver": "null", "matchers": ['alertname = "Watchdog"']}],
    },
    "receivers": [{"name": "null"}],
    "templates": ["/etc/alertmanager/config/*.tmpl"],
}


def alert_names(rules) -> tuple[str, ...]:
    """Every alert name in a deployment's rule groups (`Inputs.rules`), sorted: what our sub-route takes."""
    return tuple(sorted({r["alert"] for rs in rules for g in rs.groups for r in g["rules"] if "alert" in r}))


def _ours(names) -> str:
    return "alertname=~" + '"' + "|".join(re.escape(n) for n in names) + '"'


def _receiver(name: str, url: str) -> dict:
    return {"name": name, "webhook_configs": [{"url": url, "send_resolved": True}]} if url else {"name": name}


def _receivers(config: Config) -> list[dict]:
    return [
        _receiver(RECEIVERS["page"], config.alerting.page_webhook),
        _receiver(RECEIVERS["ticket"], config.alerting.ticket_webhook),
    ]


def sub_route(names) -> dict:
    """The route that takes inferwatch's alerts (`names`) and no other; an alert of ours that is neither page nor
    ticket still reaches the ticket receiver rather than the tree's default."""
    routes = [{"receiver": RECEIVERS[r], "matchers": [m], **_TIMING[r]} for r, m in ROUTES]
    return {"receiver": RECEIVERS["ticket"], "matchers": [_ours(names)], "group_by": _GROUP_BY, "routes": routes}


def _is_ours(route) -> bool:
    return isinstance(route, dict) and route.get("receiver") in RECEIVERS.values()


def _shield(rule: dict, alerts: list[dict], names) -> dict:
    """A foreign inhibit rule that lets one of our alerts silence another (kube-prometheus-stack's `critical`
    silences `warning` of the same alertname and namespace: any model's SLO page would silence every model's
    ticket) leaves ours out of its targets; for every other alert it is unchanged."""
    kept = [m for m in rule.get("target_matchers") or [] if not _exclusion(m)]  # an earlier merge's, if any
    rule = {**rule, "target_matchers": kept} if kept else {k: v for k, v in rule.items() if k != "target_matchers"}
    if not (any(matches(rule, a, "source_") for a in alerts) and any(matches(rule, a, "target_") for a in alerts)):
        return rule
    return {**rule, "target_matchers": [*kept, _ours(names).replace("=~", "!~", 1)]}


def _exclusion(matcher) -> bool:
    """The matcher `_shield` adds: our names, excluded (they always include the SLO burn-rate alert)."""
    return isinstance(matcher, str) and matcher.startswith('alertname!~"') and BURN_ALERT in matcher


def merge_into(existing: dict, config: Config, inhibit_rules, rules) -> dict:
    """`existing` (an alertmanager.yml as a mapping) with our sub-route first under its root, our receivers and
    inhibit rules appended, every other route, receiver and rule kept. Merging again replaces what an earlier
    merge added (found by our receiver names and the SLO alert), so it can run on every upgrade."""
    names = alert_names(rules)
    alerts = [
        {"alertname": r["alert"], **(r.get("labels") or {})}
        for rs in rules
        for g in rs.groups
        for r in g["rules"]
        if "alert" in r
    ]
    ours_inhibit = [dict(rule) for rule in inhibit_rules]
    out = copy.deepcopy(existing)
    route = out.setdefault("route", {})
    route["routes"] = [sub_route(names)] + [r for r in route.get("routes") or [] if not _is_ours(r)]
    out["receivers"] = [r for r in out.get("receivers") or [] if r.get("name") not in RECEIVERS.values()]
    out["receivers"] += _receivers(config)
    foreign = [r for r in out.get("inhibit_rules") or [] if r not in ours_inhibit and not _previous(r)]
    out["inhibit_rules"] = [_shield(r, alerts, names) for r in foreign] + ours_inhibit
    return out


def _previous(rule: dict) -> bool:
    """An SLO tier inhibition an earlier merge added (its sources are our burn-rate alert by name)."""
    return f'alertname="{BURN_ALERT}"' in rule.get("source_matchers", [])


def alertmanager_config(config: Config, inhibit_rules, rules, base: dict | None = None) -> dict:
    """A whole alertmanager.yml: our sub-route merged into `base` (default: an empty tree; kube-prometheus-stack's
    `alertmanager.config` passes `CHART_DEFAULT`)."""
    return merge_into(_EMPTY if base is None else base, config, inhibit_rules, rules)


def _matcher(text: str) -> dict:
    found = _MATCHER.match(text)
    if found is None:  # the matchers of our own routes: a bug, never user input
        raise ValueError(f"not an Alertmanager matcher: {text!r}")
    name, op, value = found.groups()
    return {"name": name, "value": value, "matchType": op}


def _camel(timing: dict) -> dict:
    return {re.sub(r"_(\w)", lambda m: m.group(1).upper(), k): v for k, v in timing.items()}


def alertmanager_config_resource(config: Config, inhibit_rules, rules) -> dict:
    """The same sub-route as an AlertmanagerConfig (monitoring.coreos.com/v1alpha1). The operator puts it under
    the Alertmanager's root with `continue: true`, so every alert still reaches the rest of the tree."""

    def receiver(name, url):
        return {"name": name, "webhookConfigs": [{"url": url, "sendResolved": True}]} if url else {"name": name}

    route = sub_route(alert_names(rules))
    routes = [
        {
            "receiver": r["receiver"],
            "matchers": [_matcher(m) for m in r["matchers"]],
            **_camel({k: v for k, v in r.items() if k in _TIMING["page"]}),
        }
        for r in route["routes"]
    ]
    return {
        "apiVersion": "monitoring.coreos.com/v1alpha1",
        "kind": "AlertmanagerConfig",
        "metadata": {
            "name": "inferwatch",
            "namespace": config.namespace,
            "labels": {"app.kubernetes.io/name": "inferwatch", "release": config.release},
        },
        "spec": {
            "route": {
                "receiver": route["receiver"],
                "matchers": [_matcher(m) for m in route["matchers"]],
                "groupBy": _GROUP_BY,
                "routes": routes,
            },
            "inhibitRules": [
                {
                    "sourceMatch": [_matcher(m) for m in rule["source_matchers"]],
                    "targetMatch": [_matcher(m) for m in rule["target_matchers"]],
                    "equal": list(rule["equal"]),
                }
                for rule in inhibit_rules
            ],
            "receivers": [
                receiver(RECEIVERS["page"], config.alerting.page_webhook),
                receiver(RECEIVERS["ticket"], config.alerting.ticket_webhook),
            ],
        },
    }


def _list_of_maps(doc: dict, key: str, where: str) -> None:
    value = doc.get(key)
    if value is not None and not (isinstance(value, list) and all(isinstance(v, dict) for v in value)):
        raise InferwatchError(f"{where}{key}: expected a list of mappings, got {type(value).__name__}")


def merge_document(doc, where: str, config: Config, inputs) -> dict:
    """`merge_into` for a file as users keep it: an alertmanager.yml, or kube-prometheus-stack values holding one
    under `alertmanager.config` (returned as values again, the rest of them untouched). `where` names the file."""
    values = isinstance(doc, dict) and isinstance(doc.get("alertmanager"), dict) and "route" not in doc
    am = doc["alertmanager"].get("config", CHART_DEFAULT) if values else doc
    prefix = f"{where}: " + ("alertmanager.config." if values else "")
    if not isinstance(am, dict):
        raise InferwatchError(
            f"{where}: {'alertmanager.config: ' if values else ''}expected an Alertmanager config "
            f"(a mapping with route and receivers), got {type(am).__name__}"
        )
    route = am.get("route")
    if not isinstance(route, dict) or not route.get("receiver"):
        raise InferwatchError(
            f"{prefix}route: required, a mapping naming the root `receiver` (Alertmanager refuses a config without it)"
        )
    if not isinstance(route.get("routes") or [], list):
        raise InferwatchError(f"{prefix}route.routes: expected a list of routes, got {type(route['routes']).__name__}")
    for key in ("receivers", "inhibit_rules"):
        _list_of_maps(am, key, prefix)
    merged = merge_into(am, config, inputs.inhibit_rules, inputs.rules)
    return {**doc, "alertmanager": {**doc["alertmanager"], "config": merged}} if values else merged
