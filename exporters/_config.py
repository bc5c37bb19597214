"""Configuration of the normalizing exporter: one options model (ExporterConfig) for its flags and its YAML file,
validated at the edge. Light to import: `inferwatch --help` builds the flags from it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from inferwatch import durations
from inferwatch._urls import http_url, listen_address
from inferwatch.options import load_yaml, option

__all__ = [
    "Target",
    "ExporterConfig",
    "parse_target",
    "parse_listen",
    "parse_duration",
    "parse_cap",
    "parse_target_label",
    "parse_max_labels",
    "parse_max_body",
    "parse_connections",
    "load_config",
    "MAX_BODY_BYTES",
]

MAX_BODY_BYTES = 16 * 1024 * 1024  # the default of --max-body: one target's body, inflated
_MIN_BODY_BYTES = 1024  # below this no exposition fits: `--max-body 16` meant 16MiB, not 16 bytes
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
# Labels a target label must not overwrite: histogram buckets and summary quantiles.
RESERVED_LABELS = ("le", "quantile")


@dataclass(frozen=True)
class Target:
    """One /metrics endpoint to scrape; `name` is the value of the target label."""

    name: str
    url: str


def parse_target(text: str) -> Target:
    """`URL` or `NAME=URL`; a URL without a path scrapes /metrics."""
    name, sep, url = text.partition("=")
    if not sep or "://" in name:
        name, url = "", text
    try:
        url = http_url(url, "http://localhost:8000/metrics or localhost:8000")  # a bare word is not a host
    except ValueError:
        raise ValueError(
            f"{text!r} is not an http(s) URL or HOST:PORT, e.g. http://localhost:8000/metrics or localhost:8000"
        ) from None
    parts = urlsplit(url)
    if parts.path in ("", "/"):
        url = url.rstrip("/") + "/metrics"
    return Target(name or parts.netloc, url)


def parse_listen(text: str) -> tuple[str, int]:
    """`HOST:PORT`, `:PORT` or `[::1]:PORT`."""
    return listen_address(text, "0.0.0.0:9400")


def parse_duration(value) -> float:
    """Seconds from 5, 2.5, '5s', '500ms' or '1m'."""
    return float(durations.parse_duration(value, units="ms s m"))


def parse_target_label(text: str) -> str:
    """A label name for --target-label, or '' for none; never one that would break or overwrite data."""
    if text and (not _LABEL_NAME.match(text) or text.startswith("__") or text in RESERVED_LABELS):
        raise ValueError(
            f"{text!r} is not a usable label name: use [a-zA-Z_][a-zA-Z0-9_]*, not starting with "
            f"'__' and not one of {', '.join(RESERVED_LABELS)} (or '' for no target label)"
        )
    return text


def parse_max_labels(value) -> int:
    """A whole number >= 0 for --max-labels (0: no limit)."""
    if isinstance(value, bool) or not str(value).strip().isdigit():
        raise ValueError(f"{value!r} is not a whole number >= 0 (0 means no limit), e.g. 64")
    return int(str(value).strip())


def parse_max_body(value) -> int:
    """Bytes for --max-body: `64MiB`, `100MB` or a number of bytes, at least 1KiB."""
    from inferwatch.frontdoor import parse_size  # the front door's --max-body takes the same sizes

    number = parse_size(value) if not isinstance(value, bool) else 0
    if number < _MIN_BODY_BYTES:
        raise ValueError(f"{value!r} is under 1KiB (a bare number is bytes): give a size such as 16MiB or 64MiB")
    return number


def parse_cap(text: str) -> tuple[str, float]:
    """`MODEL=N` for --max-running-requests."""
    model, sep, number = text.rpartition("=")
    try:
        value = float(number)
    except ValueError:
        value = -1
    if not sep or not model or value <= 0:
        raise ValueError(f"{text!r} is not MODEL=N with N > 0, e.g. llama-3-70b=256")
    return model, value


def _yaml_target(item) -> Target:
    """A target in YAML: `URL`, or `{name: NAME, url: URL}`."""
    url = item.get("url") if isinstance(item, dict) else item
    return parse_target(f"{item['name']}={url}" if isinstance(item, dict) and item.get("name") else str(url))


def _yaml_cap(model, cap) -> tuple[str, float]:
    """`MODEL: N` of `max_running_requests:` in YAML."""
    if isinstance(cap, bool) or not isinstance(cap, (int, float)) or cap <= 0:
        raise ValueError(f"expected a positive number, got {cap!r}")
    return str(model), float(cap)


def _target_label(value) -> str:
    return parse_target_label(str(value or ""))  # YAML's `target_label:` (null) is '' too


def parse_connections(value) -> int:
    """A whole number >= 1 for --max-connections."""
    number = parse_max_labels(value)
    if number < 1:
        raise ValueError(f"{value!r} is not a whole number >= 1, e.g. 100")
    return number


@dataclass(frozen=True)
class ExporterConfig:
    """`inferwatch exporter normalize`'s options model: each field is a flag and a key of `--config` (the flags'
    names and help, the keys, their checks and README.md's table are all made from it; inferwatch/options.py)."""

    targets: tuple[Target, ...] = option(
        (),
        "URL or HOST:PORT of a /metrics endpoint, optionally NAME=... (repeatable).",
        flag="--target",
        metavar="[NAME=]URL",
        repeatable=True,
        parse=parse_target,
        item=_yaml_target,
        expected="a list of targets, URL or {name: NAME, url: URL}",
    )
    listen: tuple[str, int] = option(
        ("0.0.0.0", 9400), "Where to serve /metrics.", metavar="HOST:PORT", parse=parse_listen, shown="0.0.0.0:9400"
    )
    timeout: float = option(
        5.0, "Per-target scrape timeout, e.g. 5s.", metavar="DURATION", parse=parse_duration, shown="5s"
    )
    max_running_requests: tuple[tuple[str, float], ...] = option(
        (),
        "The concurrency cap, served as llm_max_running_requests (repeatable).",
        metavar="MODEL=N",
        repeatable=True,
        pairs=True,
        parse=parse_cap,
        item=lambda pair: _yaml_cap(*pair),
        expected="a mapping of model name to cap, e.g. {llama-3-70b: 256}",
    )
    source: str | None = option(
        None,
        "Use this mapping only (vllm, sglang, dcgm or a user's).",
        metavar="SOURCE",
        parse=lambda value: None if value is None else str(value),  # YAML's `source:` (null): every mapping
    )
    drop_unmapped: bool = option(False, "Serve only mapped metrics.", kind=bool)
    target_label: str = option(
        "target",
        "Label naming the target on every series; '' for none.",
        metavar="LABEL",
        parse=_target_label,
    )
    min_interval: float = option(
        1.0,  # at most one fetch per target this often, shared by concurrent scrapes
        "Fetch each target at most this often; concurrent scrapes share it.",
        metavar="DURATION",
        parse=parse_duration,
        shown="1s",
    )
    max_labels: int = option(
        64,  # labels per sample, like Prometheus' label_limit
        "Drop samples with more labels than this (a counted error); 0 for no limit.",
        metavar="N",
        parse=parse_max_labels,
    )
    max_connections: int = option(
        100,
        "Open connections to the targets, all together.",
        metavar="N",
        parse=parse_connections,
    )
    max_body: int = option(
        MAX_BODY_BYTES,
        "Largest body read from a target, inflated, e.g. 64MiB; a larger one is a too_large error.",
        metavar="SIZE",
        parse=parse_max_body,
        shown="16MiB",
    )
    mappings: tuple[str, ...] = option(
        (),
        "Extra mapping file (repeatable).",
        flag="--mapping",
        short="-m",
        metavar="FILE",
        repeatable=True,
        parse=str,
        expected="a list of mapping files",
    )

    @property
    def host(self) -> str:
        return self.listen[0]

    @property
    def port(self) -> int:
        return self.listen[1]


def load_config(path: str) -> ExporterConfig:
    """Read an exporter config file (the keys of ExporterConfig); every problem is reported at once."""
    return load_yaml(ExporterConfig, path, "a mapping with `targets` (see README)")
