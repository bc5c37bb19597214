"""`inferwatch triage`'s options model: one field per flag, with its help and its check, from which the flags and
triage/README.md's table are made (inferwatch/options.py). The connection flags (auth, TLS, proxy, limits) are
inferwatch/promapi_flags.py's, shared with doctor and canary. Light to import: `inferwatch --help` builds the
flags from it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from inferwatch.options import option

__all__ = ["TriageOptions", "DEFAULT_PROMETHEUS"]

DEFAULT_PROMETHEUS = "http://localhost:9090"


def prometheus_url(text: str) -> str:
    """A Prometheus base URL as http(s)://HOST:PORT[/path]; ValueError with an example."""
    from inferwatch._urls import http_url

    return http_url(text, DEFAULT_PROMETHEUS)


@dataclass(frozen=True)
class TriageOptions:
    """`inferwatch triage`'s flags. Times stay text: the window is read against the clock when the command runs
    (triage/_window.py), and --alert with --since/--start is refused there, where both are known."""

    prometheus: str = option(
        DEFAULT_PROMETHEUS,
        "Prometheus' base URL.",
        metavar="URL",
        envvar="INFERWATCH_PROMETHEUS",
        parse=prometheus_url,
    )
    since: str | None = option(None, "The incident: this long before --end (default now) [30m].", metavar="DURATION")
    start: str | None = option(None, "The incident's start: RFC 3339 or Unix seconds.", metavar="TIME")
    end: str | None = option(None, "The incident's end [now].", metavar="TIME")
    model: tuple[str, ...] = option(
        (),
        "A model to judge (repeatable), in every namespace and cluster that serves it, or one deployment as the "
        "report names it, 'llama-3-8b (namespace=a)'; names are case-sensitive [every model with series].",
        metavar="NAME",
        repeatable=True,
    )
    baseline: str = option(
        "auto",
        "What normal looked like: auto (the same window a day earlier if it has data, else the hour before), "
        "1d / 7d (the same window that much earlier), 1h / 30m (that long before the incident), or START/END.",
        metavar="auto|1d|1h|START/END",
    )
    as_json: bool = option(
        False, "Print JSON (kinds sorted by confidence; empty when nothing is wrong).", flag="--json", kind=bool
    )
    plot: Path | None = option(
        None, "Also draw the signals, incident shaded and baseline faint, into this PNG.", metavar="FILE.png", kind=Path
    )
    rules: tuple[Path, ...] = option(
        (), "Kinds to add or replace (kinds.yaml's format; repeatable).", metavar="FILE", kind=Path, repeatable=True
    )
    alert: str | None = option(
        None,
        "Judge the incident of this alert: from its last activation (less 5 minutes) to --end, for the models its "
        "labels name (read from ALERTS_FOR_STATE); instead of --since/--start.",
        metavar="NAME",
    )
    alert_match: tuple[str, ...] = option(
        (),
        "With --alert: pick the alert's instance by label (repeatable; =, !=, =~, !~).",
        metavar="LABEL=VALUE",
        repeatable=True,
    )
