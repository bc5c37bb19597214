"""Configuration of the normalizing exporter: flags and an optional YAML file, validated at the edge."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

from inferwatch import durations
from inferwatch._urls import http_url, listen_address
from inferwatch.errors import Problem, SpecError
from inferwatch.yamlio import Problems, load_document

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
    "load_config",
    "MAX_BODY_BYTES",
]

CONFIG_KEYS = (
    "listen",
    "timeout",
    "targets",
    "max_running_requests",
    "source",
    "drop_unmapped",
    "target_label",
    "mappings",
    "min_interval",
    "max_labels",
    "max_connections",
    "max_body",
)
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


@dataclass(frozen=True)
class ExporterConfig:
    targets: tuple[Target, ...] = ()
    host: str = "0.0.0.0"
    port: int = 9400
    timeout: float = 5.0
    max_running_requests: tuple[tuple[str, float], ...] = ()
    source: str | None = None
    drop_unmapped: bool = False
    target_label: str = "target"
    mappings: tuple[str, ...] = field(default=())
    min_interval: float = 1.0  # at most one fetch per target this often, shared by concurrent scrapes
    max_labels: int = 64  # labels per sample, like Prometheus' label_limit; 0 for no limit
    max_connections: int = 100  # open connections to targets, all together
    max_body: int = MAX_BODY_BYTES  # bytes of one target's body, inflated; a larger one is a too_large error


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


def load_config(path: str) -> ExporterConfig:
    """Read an exporter config file; every problem is reported at once."""
    loaded = load_document(path)
    doc, problems = loaded.data, Problems(path, loaded.positions)
    bad = problems.add

    if not isinstance(doc, dict):
        raise SpecError([Problem(path, None, "", "expected a mapping with `targets` (see README)")])
    problems.unknown_keys(doc, CONFIG_KEYS)
    config = ExporterConfig()
    targets = []
    items = doc.get("targets") or []
    for i, item in enumerate(items):
        url = item.get("url") if isinstance(item, dict) else item
        text = f"{item['name']}={url}" if isinstance(item, dict) and item.get("name") else url
        try:
            targets.append(parse_target(str(text)))
        except ValueError as err:
            bad(items, f"targets[{i}]", str(err), key=i)
    config = replace(config, targets=tuple(targets))
    try:
        if "listen" in doc:
            host, port = parse_listen(doc["listen"])
            config = replace(config, host=host, port=port)
    except ValueError as err:
        bad(doc, "listen", str(err))
    try:
        if "timeout" in doc:
            config = replace(config, timeout=parse_duration(doc["timeout"]))
    except ValueError as err:
        bad(doc, "timeout", str(err))
    caps = doc.get("max_running_requests") or {}
    if not isinstance(caps, dict):
        bad(doc, "max_running_requests", "expected a mapping of model name to cap, e.g. {llama-3-70b: 256}")
        caps = {}
    parsed_caps = []
    for model, cap in caps.items():
        if isinstance(cap, bool) or not isinstance(cap, (int, float)) or cap <= 0:
            bad(caps, f"max_running_requests.{model}", f"expected a positive number, got {cap!r}", key=model)
        else:
            parsed_caps.append((str(model), float(cap)))
    config = replace(config, max_running_requests=tuple(parsed_caps))
    if "source" in doc:
        config = replace(config, source=str(doc["source"]))
    if "drop_unmapped" in doc:
        config = replace(config, drop_unmapped=bool(doc["drop_unmapped"]))
    if "target_label" in doc:
        try:
            config = replace(config, target_label=parse_target_label(str(doc["target_label"] or "")))
        except ValueError as err:
            bad(doc, "target_label", str(err))
    for key, parse in (
        ("min_interval", parse_duration),
        ("max_labels", parse_max_labels),
        ("max_connections", _parse_connections),
        ("max_body", parse_max_body),
    ):
        if key in doc:
            try:
                changed: dict[str, Any] = {key: parse(doc[key])}  # one field, named by the table above
                config = replace(config, **changed)
            except ValueError as err:
                bad(doc, key, str(err))
    mappings = doc.get("mappings") or []
    if not isinstance(mappings, list):
        bad(doc, "mappings", "expected a list of mapping files")
        mappings = []
    config = replace(config, mappings=tuple(str(m) for m in mappings))
    problems.raise_if_any()
    return config


def _parse_connections(value) -> int:
    number = parse_max_labels(value)
    if number < 1:
        raise ValueError(f"{value!r} is not a whole number >= 1, e.g. 100")
    return number
