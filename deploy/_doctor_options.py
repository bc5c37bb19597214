"""`inferwatch doctor`'s options model: one field per flag, with its help and its check, from which the flags and
deploy/README.md's table are made (inferwatch/options.py). The connection flags (auth, TLS, proxy, limits) are
inferwatch/promapi_flags.py's, shared with triage and canary. Light to import: `inferwatch --help` builds the
flags from it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from inferwatch.options import option

__all__ = ["DoctorOptions", "SERVERS"]

# the servers asked along with --prometheus: (field, flag)
SERVERS = (("scraper", "--scraper"), ("ruler", "--ruler"), ("alertmanager", "--alertmanager"), ("grafana", "--grafana"))


def _base_url(example: str) -> Callable[[str], str]:
    """A server's base URL, without a trailing slash; ValueError with `example`."""

    def parse(text: str) -> str:
        from inferwatch._urls import http_url

        return http_url(text, example).rstrip("/")

    return parse


@dataclass(frozen=True)
class DoctorOptions:
    """`inferwatch doctor`'s flags. A server's URL is checked by its field; which servers go together (every
    other with --prometheus, --alertmanager or --no-alertmanager) by `pairs_problem`."""

    prometheus: str | None = option(
        None,
        "Prometheus base URL, e.g. http://prometheus:9090; or victoria-metrics', vmagent's or vmalert's (doctor says "
        "which it found).",
        metavar="URL",
        parse=_base_url("http://prometheus:9090"),
    )
    scraper: str | None = option(
        None,
        "The server that scrapes, where --prometheus does not: vmagent or a Prometheus agent.",
        metavar="URL",
        parse=_base_url("http://vmagent:8429"),
    )
    ruler: str | None = option(
        None,
        "The server that evaluates the rules and sends the alerts, where --prometheus does not: vmalert.",
        metavar="URL",
        parse=_base_url("http://vmalert:8880"),
    )
    file: tuple[Path, ...] = option(
        (),
        "Check files instead of (or as well as) a running stack: prometheus.yml, compose, ServiceMonitors, "
        "PodMonitors, PrometheusRules, kube-prometheus-stack values, Alertmanager config; a folder: every *.yaml and "
        "*.yml below it. Repeatable.",
        metavar="PATH",
        short="-f",
        kind=Path,
        repeatable=True,
    )
    alertmanager: str | None = option(
        None, "Alertmanager base URL.", metavar="URL", parse=_base_url("http://alertmanager:9093")
    )
    grafana: str | None = option(
        None, "Grafana base URL (token from GRAFANA_TOKEN).", metavar="URL", parse=_base_url("http://grafana:3000")
    )
    external_metrics: str | None = option(
        None,
        "The Kubernetes API, e.g. `kubectl proxy`'s http://127.0.0.1:8001: check that prometheus-adapter serves each "
        "autoscaled model's signal.",
        metavar="URL",
    )
    config: Path | None = option(
        None,
        "deploy.yaml (version 1); default: the embedded defaults, as checked in under deploy/.",
        metavar="FILE",
        short="-c",
        kind=Path,
    )
    no_alertmanager: bool = option(
        False,
        "This stack runs no Alertmanager (a laptop, the demo): report its absence as skipped, not missing.",
        kind=bool,
    )


def pairs_problem(given: dict) -> tuple[str, str] | None:
    """(flag, why) when the flags as given do not go together: a server other than Prometheus without
    --prometheus, or --alertmanager with --no-alertmanager. Read before the URLs are, as the command always has."""
    if given.get("prometheus") is None and any(given.get(name) for name, _ in SERVERS):
        return (
            "--prometheus",
            "--alertmanager, --grafana, --scraper and --ruler are asked along with a running Prometheus (or "
            "victoria-metrics): give --prometheus URL too",
        )
    if given.get("no_alertmanager") and given.get("alertmanager") is not None:
        return "--no-alertmanager", "--alertmanager URL and --no-alertmanager contradict each other: give one"
    return None
