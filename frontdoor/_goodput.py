"""Goodput, judged per request: did this request meet every objective of the model's SLO specs?

A ratio of histograms cannot say it (a request fast to its first token may be slow per token), so the front
door, which measured each request whole, judges it once and counts the answer:

    llm_frontdoor_goodput_judged_requests_total   requests goodput counts (those the answered SLI counts)
    llm_frontdoor_goodput_good_requests_total     of those, the ones that met every objective that selects them

Which objectives: every objective of the SLO specs given to the front door (`--goodput-spec`, default the
embedded slo/defaults-frontdoor.yaml) that selects the request. A latency objective reads the time the front
door measured for the histogram it names (`LATENCY_TIMES`) and holds when that time is at or under its threshold,
as the histogram's `le` bucket counts it; a time not measured (no first token on a request that was not
streamed) leaves that objective out. A ratio objective on llm_frontdoor_requests_total holds when the request's
outcome is one its good selector counts. Whatever the objectives, a request is good only if it was answered
(the built-in answered SLI's good outcomes): an error that came quickly is not goodput. A request no objective
selects is not judged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib.resources import as_file, files
from pathlib import Path

from inferwatch.errors import InferwatchError
from inferwatch.slo import LatencySLI, Matcher, RatioSLI, Spec, builtin_sli, load_spec

__all__ = ["Goodput", "GoodputError", "LATENCY_TIMES", "default_goodput", "load_goodput"]

# the front door's histograms an objective may name, and the key of the time `_done` measured for each
LATENCY_TIMES = {
    "llm_frontdoor_time_to_first_token_seconds": "ttft",
    "llm_frontdoor_time_to_first_chunk_seconds": "ttfc",
    "llm_frontdoor_time_per_output_token_seconds": "tpot",
    "llm_frontdoor_request_duration_seconds": "duration",
}
REQUESTS = "llm_frontdoor_requests_total"
# labels of the front door's series that a selector may match on; `outcome` and `code` only on REQUESTS
LABELS = ("model", "caller", "upstream")
REQUEST_LABELS = LABELS + ("outcome", "code")

# the built-in answered SLI at the front door: which requests it counts and which it calls answered
_ANSWERED = builtin_sli("answered", "frontdoor")


class GoodputError(InferwatchError):
    """A spec the front door cannot judge requests by: the message names the file and the objective."""


@dataclass(frozen=True)
class _Objective:
    name: str  # "FILE: objective NAME", for messages
    matchers: tuple[Matcher, ...]  # on LABELS (latency) or REQUEST_LABELS (ratio)
    time: str | None = None  # latency: the key of `times`
    threshold: float = 0.0
    good: tuple[Matcher, ...] | None = None  # ratio: the good selector's matchers (None: judged by `bad`)
    bad: tuple[tuple[Matcher, ...], ...] = ()


def _matches(matchers: tuple[Matcher, ...], labels: dict[str, str]) -> bool:
    return all(m.matches(labels) for m in matchers)


def _checked(matchers: tuple[Matcher, ...], allowed: tuple[str, ...], where: str) -> tuple[Matcher, ...]:
    for m in matchers:
        if m.label not in allowed:
            raise GoodputError(
                f"{where}: selects on label {m.label!r}, which the front door's series do not carry "
                f"(it can judge a request by {', '.join(allowed)})"
            )
    return matchers


def _objective(spec: Spec, index: int) -> _Objective:
    objective = spec.objectives[index]
    where = f"{spec.file}: objective {objective.name}"
    sli = objective.sli
    if isinstance(sli, LatencySLI):
        if sli.metric not in LATENCY_TIMES:
            raise GoodputError(
                f"{where}: {sli.metric} is not a front door histogram; goodput judges requests by "
                f"{', '.join(LATENCY_TIMES)}"
            )
        return _Objective(
            where,
            _checked(spec.selector + sli.matchers, LABELS, where),
            LATENCY_TIMES[sli.metric],
            float(sli.threshold),
        )
    assert isinstance(sli, RatioSLI)
    for selector in (sli.total, sli.good, *sli.bad, *sli.exclude):
        if selector is not None and selector.metric != REQUESTS:
            raise GoodputError(
                f"{where}: {selector.metric} is not counted per request by the front door; a ratio "
                f"objective goodput can judge counts {REQUESTS}"
            )
    return _Objective(
        where,
        _checked(spec.selector + sli.total.matchers, REQUEST_LABELS, where),
        good=_checked(sli.good.matchers, REQUEST_LABELS, where) if sli.good else None,
        bad=tuple(_checked(b.matchers, REQUEST_LABELS, where) for b in sli.bad),
    )


@dataclass(frozen=True)
class Goodput:
    """The objectives requests are judged by, from one or more SLO specs with `source: frontdoor`."""

    objectives: tuple[_Objective, ...]
    files: tuple[str, ...] = ()

    def judge(self, labels: tuple[str, str, str], outcome: str, code: int, times: dict) -> bool | None:
        """True: good; False: judged and not good; None: not judged (the answered SLI does not count it, or no
        objective selects it)."""
        request = dict(zip(LABELS, labels, strict=True), outcome=outcome, code=str(code))
        if not _matches(_ANSWERED.total.matchers, request):
            return None
        good = _ANSWERED.good is not None and _matches(_ANSWERED.good.matchers, request)
        judged = False
        for o in self.objectives:
            if not _matches(o.matchers, request):
                continue
            if o.time is not None:
                value = times.get(o.time)
                if value is None:
                    continue
                judged, good = True, good and value <= o.threshold
            else:
                held = _matches(o.good, request) if o.good is not None else not any(_matches(b, request) for b in o.bad)
                judged, good = True, good and held
        return good if judged else None


def load_goodput(paths: Sequence[str | Path]) -> Goodput:
    """Every objective of the specs at `paths`; SpecError for a spec that does not load, GoodputError for one that
    loads but cannot be judged per request (another source, a metric or label the front door does not have)."""
    objectives: list[_Objective] = []
    for path in paths:
        spec = load_spec(path)
        if spec.source != "frontdoor":
            raise GoodputError(
                f"{spec.file}: source is {spec.source!r}; goodput judges requests by objectives "
                "measured at the front door (source: frontdoor)"
            )
        objectives.extend(_objective(spec, i) for i in range(len(spec.objectives)))
    return Goodput(tuple(objectives), tuple(str(p) for p in paths))


@lru_cache(maxsize=1)
def default_goodput() -> Goodput:
    """The embedded front-door SLOs (slo/defaults-frontdoor.yaml): what a front door judges by unless told."""
    with as_file(files("inferwatch.slo") / "defaults-frontdoor.yaml") as path:
        return load_goodput([path])
