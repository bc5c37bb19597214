"""An Alertmanager config read the way Alertmanager reads it, for doctor: which receiver an SLO alert reaches
through the route tree (`match`, `match_re`, `matchers`, `continue`), whether that receiver notifies anyone, and
which inhibit rules silence SLO alerts.
"""

from __future__ import annotations

import json
import re

from inferwatch.deploy._result import Result
from inferwatch.deploy._shape import as_list, as_map
from inferwatch.slo import BURN_ALERT

__all__ = ["check_alertmanager_config", "receivers_for", "matches", "slo_alerts"]

_MATCHER = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*(.*?)\s*\Z")


def _matcher(text: str) -> tuple[str, str, str] | None:
    """`name="value"` (or =~, !=, !~) as (name, op, value); None for what Alertmanager would refuse."""
    found = _MATCHER.match(str(text))
    if not found:
        return None
    name, op, value = found.groups()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        try:
            value = json.loads(value)
        except ValueError:
            value = value[1:-1]
    return name, op, value


def _holds(op: str, value: str, actual: str) -> bool:
    """One matcher against a label's value; regexes are anchored, as Alertmanager anchors them."""
    if op in ("=", "!="):
        return (actual == value) == (op == "=")
    try:
        hit = re.fullmatch(value, actual) is not None
    except re.error:
        return False
    return hit == (op == "=~")


def matches(node: dict, labels: dict[str, str], prefix: str = "") -> bool:
    """Whether `labels` satisfy a route's (prefix '') or an inhibit rule side's (prefix 'source_', 'target_')
    equality, regex and matcher lists. A matcher doctor cannot parse matches nothing: no route is taken on a guess."""
    tests: list[tuple[str, str, str] | None] = [
        (str(k), "=", str(v)) for k, v in as_map(node.get(f"{prefix}match")).items()
    ]
    tests += [(str(k), "=~", str(v)) for k, v in as_map(node.get(f"{prefix}match_re")).items()]
    tests += [_matcher(m) for m in as_list(node.get(f"{prefix}matchers"))]
    return all(t is not None and _holds(t[1], t[2], labels.get(t[0], "")) for t in tests)


def receivers_for(route: dict, labels: dict[str, str], inherited: str = "") -> list[str]:
    """The receivers an alert with `labels` reaches from `route`, the root route matching everything."""
    receiver = str(route.get("receiver") or inherited)
    found = []
    for child in as_list(route.get("routes")):
        if isinstance(child, dict) and matches(child, labels):
            found += receivers_for(child, labels, receiver)
            if not child.get("continue"):
                break
    return found or [receiver]


def _notifies_nobody(config: dict, name: str) -> bool:
    """A receiver without any *_configs (kube-prometheus-stack's 'null'), or one the config does not define."""
    receiver = next((r for r in map(as_map, as_list(config.get("receivers"))) if str(r.get("name")) == name), {})
    return not any(key.endswith("_configs") and value for key, value in receiver.items())


def _inhibits_others(rule: dict, page: dict, ticket: dict) -> bool:
    """A rule that lets one SLO's page silence another model's ticket: both sides match, every `equal` label agrees."""
    return (
        matches(rule, page, "source_")
        and matches(rule, ticket, "target_")
        and all(page.get(str(k), "") == ticket.get(str(k), "") for k in as_list(rule.get("equal")))
    )


def check_alertmanager_config(config: dict, where: str, alerts: dict[str, dict]) -> list[Result]:
    """Where the SLO alerts go through `config`: a receiver that notifies nobody, inhibit rules that silence
    other models' tickets, or none between the tiers. `alerts` is `slo_alerts()`; `where` ends each check's name."""
    route = as_map(config.get("route"))
    out = []
    for kind, labels in alerts.items():
        names = receivers_for(route, labels)
        silent = [n for n in names if _notifies_nobody(config, n)]
        if silent and len(silent) == len(names):
            out.append(
                Result(
                    "wrong",
                    f"Alertmanager routing{where}",
                    f"SLO {kind} ({labels.get('alertname')}, severity {labels.get('severity')}) reach "
                    + (
                        f"receiver {silent[0]!r}, which notifies nobody"
                        if silent[0]
                        else "no receiver: the route names none"
                    ),
                    "route them to a receiver with a webhook, pager or chat (deploy.yaml: "
                    "alerting.page_webhook, ticket_webhook)",
                )
            )
    rules = [r for r in as_list(config.get("inhibit_rules")) if isinstance(r, dict)]
    page, ticket = alerts.get("pages", {}), {**alerts.get("tickets", {}), "model": "another", "slo": "another"}
    for i, rule in enumerate(rules):
        if _inhibits_others(rule, page, ticket):
            out.append(
                Result(
                    "wrong",
                    f"Alertmanager inhibit_rules[{i}]{where}",
                    f"silences every SLO ticket while any SLO page fires, for all models alike (equal: "
                    f"{', '.join(map(str, as_list(rule.get('equal')))) or 'nothing'})",
                    f"add slo and model to its equal list, or exclude {BURN_ALERT} from it",
                )
            )
    if not any(BURN_ALERT in repr(r) for r in rules):
        out.append(
            Result(
                "missing",
                f"Alertmanager inhibit rules{where}",
                f"no inhibit rule for {BURN_ALERT}: slow tiers page alongside fast ones",
                "`inferwatch deploy merge-alertmanager FILE` adds them (and our route) to your tree",
            )
        )
    return out or [
        Result("ok", f"Alertmanager routing{where}", "SLO pages and tickets reach a receiver; tiers inhibit each other")
    ]


def slo_alerts(inputs) -> dict[str, dict]:
    """Labels of one SLO page and one SLO ticket as the deployment's rules (an `Inputs`) raise them."""
    out: dict[str, dict] = {}
    for rules in inputs.rules:
        for rule in (r for group in rules.groups for r in group["rules"] if r.get("alert") == BURN_ALERT):
            labels = {"alertname": rule["alert"], **(rule.get("labels") or {}), "model": "m"}
            out.setdefault("pages" if labels.get("severity") == "critical" else "tickets", labels)
    return out
