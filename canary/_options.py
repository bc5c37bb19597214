"""`inferwatch canary`'s options model: one field per flag, with its help and its check, from which the flags and
canary/README.md's table are made (inferwatch/options.py). The connection flags (auth, TLS, proxy, limits) are
inferwatch/promapi_flags.py's, shared with triage and doctor. Light to import: `inferwatch --help` builds the
flags from it."""

from __future__ import annotations

from dataclasses import MISSING, dataclass

from inferwatch.options import option

__all__ = ["CanaryOptions"]


def _prometheus(text: str) -> str:
    from inferwatch._urls import http_url

    return http_url(text, "http://localhost:9090")


def _window(text: str) -> str:
    """A duration, kept as written: the queries read it so."""
    from inferwatch.durations import parse_duration

    parse_duration(text)
    return text


def _source(text: str) -> str:
    if text not in ("engine", "frontdoor"):
        raise ValueError(f"{text!r}: use engine or frontdoor")
    return text


@dataclass(frozen=True)
class CanaryOptions:
    """`inferwatch canary`'s flags; a wrong value is a usage error naming the flag (exit 2). The selectors are
    parsed when the command runs (canary.parse_selector), the bounds of the numbers checked by click."""

    model: str = option(MISSING, "The model both versions serve.", metavar="NAME")
    canary_selector: str = option(
        MISSING,
        "Label matchers of the canary's series, e.g. 'version=\"v2\"' or 'pod=~\"llama-7d9f.*\"'.",
        flag="--canary",
        metavar="SELECTOR",
    )
    stable_selector: str = option(
        MISSING, "Label matchers of the stable version's series.", flag="--stable", metavar="SELECTOR"
    )
    prometheus: str = option(
        "http://localhost:9090",
        "Prometheus' base URL.",
        metavar="URL",
        envvar="INFERWATCH_PROMETHEUS",
        parse=_prometheus,
    )
    window: str = option("30m", "Compare over this window.", metavar="DURATION", parse=_window)
    at: str | None = option(None, "The window's end: RFC 3339 or Unix seconds [now].", metavar="TIME")
    source: str = option(
        "engine",
        "Whose series: the engines' (selectors on pod, version...) or the front door's (selectors on upstream), "
        "which adds tool-call failures and goodput.",
        metavar="engine|frontdoor",
        parse=_source,
    )
    min_requests: int = option(
        100, "Requests each side needs per signal; fewer is inconclusive.", metavar="N", kind=int, min=1
    )
    alpha: float = option(
        0.01, "Significance level of the one-sided tests.", metavar="P", kind=float, min=1e-9, max=0.5
    )
    latency_tolerance: float = option(
        0.10, "A canary mean this much above the stable one fails (0.1: 10 %).", metavar="SHARE", kind=float, min=0.0
    )
    share_tolerance: float = option(
        0.5,
        "An error, truncation or tool-call share this much above the stable one, relatively, fails (0.5: 1.5x).",
        metavar="SHARE",
        kind=float,
        min=0.0,
    )
    mix_tolerance: float = option(
        0.25,
        "Prompt length or prefix-cache hits this far apart make latency inconclusive.",
        metavar="SHARE",
        kind=float,
        min=0.0,
    )
    as_json: bool = option(False, "Print JSON.", flag="--json", kind=bool)
