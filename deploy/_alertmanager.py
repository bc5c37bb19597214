"""Alertmanager routing for inferwatch's alerts: pages and tickets by `severity` and SLO `tier`, with the inhibit
rules the SLO compiler writes (a faster burn-rate tier silences the slower ones of the same objective)."""

from __future__ import annotations

import re

from inferwatch.deploy._config import Config

__all__ = ["alertmanager_config", "alertmanager_config_resource", "ROUTES"]

# (receiver, matcher): first match wins; the tier matchers catch SLO alerts whose severity a spec overrode
ROUTES = (("page", 'tier=~"page_.+"'), ("ticket", 'tier=~"ticket_.+"'),
          ("page", 'severity="critical"'), ("ticket", 'severity="warning"'))
_TIMING = {"page": {"group_wait": "30s", "group_interval": "5m", "repeat_interval": "4h"},
           "ticket": {"group_wait": "5m", "group_interval": "30m", "repeat_interval": "24h"}}
_GROUP_BY = ["alertname", "service", "slo", "model", "cluster"]
_MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"(.*)"\Z')


def _receiver(name: str, url: str) -> dict:
    return {"name": name, "webhook_configs": [{"url": url, "send_resolved": True}]} if url else {"name": name}


def alertmanager_config(config: Config, inhibit_rules) -> dict:
    """A whole alertmanager.yml (kube-prometheus-stack: the `alertmanager.config` value)."""
    routes = [{"receiver": receiver, "matchers": [matcher], **_TIMING[receiver]} for receiver, matcher in ROUTES]
    return {"route": {"receiver": "default", "group_by": _GROUP_BY, "routes": routes},
            "inhibit_rules": [dict(rule) for rule in inhibit_rules],
            "receivers": [{"name": "default"}, _receiver("page", config.alerting.page_webhook),
                          _receiver("ticket", config.alerting.ticket_webhook)]}


def _matcher(text: str) -> dict:
    name, op, value = _MATCHER.match(text).groups()
    return {"name": name, "value": value, "matchType": op}


def _camel(timing: dict) -> dict:
    return {re.sub(r"_(\w)", lambda m: m.group(1).upper(), k): v for k, v in timing.items()}


def alertmanager_config_resource(config: Config, inhibit_rules) -> dict:
    """The same routing as an AlertmanagerConfig (monitoring.coreos.com/v1alpha1)."""
    def receiver(name, url):
        return {"name": name, "webhookConfigs": [{"url": url, "sendResolved": True}]} if url else {"name": name}

    routes = [{"receiver": r, "matchers": [_matcher(m)], **_camel(_TIMING[r])} for r, m in ROUTES]
    return {"apiVersion": "monitoring.coreos.com/v1alpha1", "kind": "AlertmanagerConfig",
            "metadata": {"name": "inferwatch", "namespace": config.namespace,
                         "labels": {"app.kubernetes.io/name": "inferwatch", "release": config.release}},
            "spec": {"route": {"receiver": "default", "groupBy": _GROUP_BY, "routes": routes},
                     "inhibitRules": [{"sourceMatch": [_matcher(m) for m in rule["source_matchers"]],
                                       "targetMatch": [_matcher(m) for m in rule["target_matchers"]],
                                       "equal": list(rule["equal"])} for rule in inhibit_rules],
                     "receivers": [{"name": "default"}, receiver("page", config.alerting.page_webhook),
                                   receiver("ticket", config.alerting.ticket_webhook)]}}
