"""Scrape jobs, however they are written (a prometheus.yml `scrape_configs` entry, a ServiceMonitor or PodMonitor
endpoint, or the config a running Prometheus reports), and what doctor checks on each: how often it scrapes, whether
a GPU exporter found through Kubernetes keeps its own `pod` labels, and what its metric relabelings do to the series
the mappings read.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from inferwatch.deploy._relabel import apply, samples, snake
from inferwatch.deploy._result import RENDER, Result
from inferwatch.deploy._shape import as_list, as_map, dig

__all__ = ["Job", "MAX_SCRAPE_INTERVAL", "job_from_scrape_config", "jobs_from_prometheus", "check_job", "seconds"]

MAX_SCRAPE_INTERVAL = 30  # seconds: the SLO rules count requests per minute (two samples at least)
_PROMETHEUS_DEFAULT = "1m"  # Prometheus' scrape_interval when prometheus.yml sets none
_SOURCES = {"vllm": "vLLM", "sglang": "SGLang", "dcgm": "dcgm-exporter"}  # mapping source: its name in reports


@dataclass(frozen=True)
class Job:
    """One way of scraping: `name` says where it is written (for the report); `job_name` is the scrape pool a
    running Prometheus names its targets by; `texts` what tells which engine or exporter it scrapes (job name,
    selector, port, targets)."""

    name: str
    interval: str
    job_name: str = ""
    interval_origin: str = ""  # '' when written on the job, else where the value comes from
    honor_labels: bool = False
    kubernetes: bool = False  # targets carry pod/namespace/container labels of their own
    relabelings: tuple[dict, ...] = ()  # metric_relabel_configs, Prometheus' spelling
    texts: tuple[str, ...] = ()

    @property
    def sources(self) -> list[str]:
        """The mappings whose series this job scrapes, told by a source's name in its texts (no one names a
        dcgm-exporter job without 'dcgm'); none for other exporters, which doctor leaves alone."""
        text = " ".join(self.texts).lower()
        return [source for source in _SOURCES if source in text]


def seconds(text) -> float:
    """A Prometheus duration in seconds; 0 for what is not one (a check then says so rather than crash)."""
    from inferwatch.durations import parse_duration

    try:
        return float(parse_duration(str(text)))
    except ValueError:
        return 0.0


def job_from_scrape_config(config: dict, default_interval: str, origin: str, where: str) -> Job:
    """A prometheus.yml scrape config; `default_interval` is the global one (`origin` says where it is set)."""
    relabel = [snake(c) for c in as_list(config.get("relabel_configs")) if isinstance(c, dict)]
    metric = [snake(c) for c in as_list(config.get("metric_relabel_configs")) if isinstance(c, dict)]
    targets = [repr(as_map(s).get("targets")) for s in as_list(config.get("static_configs"))]
    keeps = [str(c.get("regex", "")) for c in relabel + metric if c.get("action") == "keep"]
    name = str(config.get("job_name", ""))
    interval = config.get("scrape_interval")
    return Job(
        f"scrape job {name}{where}",
        str(interval or default_interval),
        job_name=name,
        interval_origin="" if interval else origin,
        honor_labels=config.get("honor_labels") is True,
        kubernetes=bool(config.get("kubernetes_sd_configs")),
        relabelings=tuple(metric),
        texts=(name, *targets, *keeps),
    )


def jobs_from_prometheus(config: dict, where: str = "") -> list[Job]:
    """Every scrape job of a prometheus.yml (or of what /api/v1/status/config answers)."""
    interval = dig(config, "global").get("scrape_interval")
    origin = " (the global scrape_interval)" if interval else " (Prometheus' default: no scrape_interval is set)"
    return [
        job_from_scrape_config(sc, str(interval or _PROMETHEUS_DEFAULT), origin, where)
        for sc in as_list(config.get("scrape_configs"))
        if isinstance(sc, dict)
    ]


@functools.cache
def _mappings() -> dict:
    from inferwatch.mappings import load_mappings, select_source

    mappings = load_mappings()
    return {source: select_source(mappings, source) for source in _SOURCES}


def check_job(job: Job, running: bool = False) -> list[Result]:
    """Problems of one job that scrapes an engine or dcgm-exporter; nothing for jobs of other exporters.
    `running`: the job is read from a running Prometheus, whose targets and series doctor checks apart (so no
    interval here, and no 'without the relabelings': the series say whether the common names arrive)."""
    sources = job.sources
    if not sources:
        return []
    out = [] if running else _interval_results(job)
    if "dcgm" in sources and job.kubernetes and not job.honor_labels:
        out.append(
            Result(
                "wrong",
                job.name,
                "scrapes dcgm-exporter through Kubernetes without honor_labels: its "
                "pod, namespace and container (the GPU's workload) become exported_*, "
                "and idle GPUs carry the dcgm-exporter pod",
                "set honorLabels: true (honor_labels in prometheus.yml)",
            )
        )
    for source in sources:
        out += _relabel_results(job, source, not running)
    return out


def _interval_results(job: Job) -> list[Result]:
    interval = seconds(job.interval)
    if not interval:
        return [
            Result(
                "wrong",
                job.name,
                f"scrape interval {job.interval!r}{job.interval_origin} is not a "
                "duration: Prometheus refuses the config",
                "write it as 15s",
            )
        ]
    if interval > MAX_SCRAPE_INTERVAL:
        return [
            Result(
                "wrong",
                job.name,
                f"scraped every {job.interval}{job.interval_origin}; the SLO rules' "
                f"1m increases need at most {MAX_SCRAPE_INTERVAL}s",
                "set the job's scrape_interval (a monitor's interval) to 15s",
            )
        ]
    return []


@dataclass
class _Fate:
    """What a job's metric relabelings do to the series of one mapping."""

    dropped: list[str] = field(default_factory=list)
    renamed: list[str] = field(default_factory=list)  # 'old to new'
    lost: list[str] = field(default_factory=list)  # 'labels of name'
    common: int = 0  # series that arrive in the common vocabulary


def _fate(relabelings: list[dict], mapping) -> _Fate | None:
    """None when the relabelings cannot be read (an unknown action, a regex Python does not take): no guess."""
    fate = _Fate()
    for common_name, labels, needed in samples(mapping):
        name = labels["__name__"]
        after = apply(relabelings, labels)
        if after is False:
            return None
        if after is None:
            fate.dropped.append(name)
        elif after["__name__"] in (common_name, common_name + "_bucket") or _relabeled(labels, after, needed):
            fate.common += 1
        elif after["__name__"] != name:
            fate.renamed.append(f"{name} to {after['__name__']}")
        else:
            gone = sorted(
                key for key, renamed_to in needed.items() if labels[key] not in (after.get(key), after.get(renamed_to))
            )
            if gone:
                fate.lost.append(f"{', '.join(gone)} of {name}")
    return fate


def _relabel_results(job: Job, source: str, vocabulary: bool) -> list[Result]:
    """`vocabulary`: also say when nothing turns the series into the common names (not asked of a running
    Prometheus, whose series say it)."""
    mapping = _mappings()[source]
    fate = _fate(list(job.relabelings), mapping)
    if fate is None:
        return []
    what, out = _SOURCES[source], []
    if fate.dropped:
        out.append(
            Result(
                "wrong",
                job.name,
                f"its metric relabelings drop {len(fate.dropped)} of the "
                f"{len(mapping.entries)} {what} series inferwatch maps: "
                f"{_few(fate.dropped)}",
                "keep them (widen the keep regex, or narrow the drop)",
            )
        )
    if fate.renamed:
        out.append(
            Result(
                "wrong",
                job.name,
                f"its metric relabelings rename {_few(fate.renamed)}: the {what} mapping no longer finds them",
                f"drop the rename, or rename to the common names ({RENDER})",
            )
        )
    if fate.lost:
        out.append(
            Result(
                "wrong",
                job.name,
                f"its metric relabelings change labels the {what} mapping reads: {_few(fate.lost)}",
                "keep model_name, le and the engine's own labels",
            )
        )
    ours = any("inferwatch" in text for text in job.texts)  # the normalizing exporter already speaks it
    if vocabulary and not fate.common and not ours:  # beside what its own relabelings break, if anything
        out.append(
            Result(
                "missing",
                job.name,
                f"scrapes {what} without the inferwatch relabelings: the dashboards "
                "and SLOs read the common names (llm_*, gpu_*), which it never gets",
                f"add the metricRelabelings of {RENDER} (or scrape through the normalizing exporter)",
            )
        )
    return out


def _relabeled(before: dict, after: dict, needed: dict) -> bool:
    """Whether the mapping's label renames were applied (model_name to model, UUID to uuid): the relabelings
    are there even for series that recording rules, not relabeling, give their common name."""
    return any(
        key != target and after.get(target) == before[key] and key not in after for key, target in needed.items()
    )


def _few(items: list[str], shown: int = 3) -> str:
    """The first few items, and how many more: a line stays readable when a relabeling drops every series."""
    return ", ".join(items[:shown]) + (f" and {len(items) - shown} more" if len(items) > shown else "")
