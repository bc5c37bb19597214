"""The normalizing exporter: scrape targets when scraped, normalize, serve the union.

Each target is fetched by one task at a time, shared by every scrape that
arrives meanwhile, and its outcome is reused for `min_interval`: twenty
concurrent scrapers cost one fetch per target, not twenty. The per-target
timeout starts when the request goes out (connections are bounded by a
semaphore taken first, so a wait for one never counts against the target).
Reading, parsing and normalizing run in a worker thread, so a large or odd
body never stalls /healthz or the other scrapes.

Every scrape has a deadline: the exporter's timeout, or Prometheus' own
(`X-Prometheus-Scrape-Timeout-Seconds`) less a margin. Targets not ready by
then are served as timed out in that response; their fetch goes on (bounded
by the target's own timeout): a scrape that comes while it is in flight, or
within `min_interval` of its start, is served its outcome, and every outcome
is counted and logged. The health series of a response describe the outcomes
served in that same response.
"""

from __future__ import annotations

import asyncio
import logging
import re
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import aiohttp
from aiohttp import web

from inferwatch import __version__
from inferwatch.errors import ExpositionError, ListenError
from inferwatch.exporters._config import ExporterConfig, Target
from inferwatch.exporters._exposition import Sample, format_header, format_sample, format_value, split_families
from inferwatch.exporters._fetch import FetchError, decode_text, read_body
from inferwatch.exporters._guard import ALLOWED_SUFFIXES, check_families, names_used
from inferwatch.exporters._normalize import Normalizer, add_label

__all__ = ["NormalizingExporter", "Outcome", "ServedFamily", "scrape_deadline"]

log = logging.getLogger("inferwatch.exporter")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
TIMEOUT_HEADER = "X-Prometheus-Scrape-Timeout-Seconds"
_PREFIX = "inferwatch_exporter_"
_OWN_FAMILIES = (
    "target_up",
    "target_scrape_duration_seconds",
    "target_series_in",
    "target_series_out",
    "target_source_info",
    "target_scrape_errors_total",
    "target_dropped_total",
    "target_last_error_timestamp_seconds",
    "scrape_duration_seconds",
    "build_info",
)
_TYPE_OF = re.compile(r"^# TYPE [^ ]+ ([a-z]+)$", re.M)
_SLACK = 0.5  # seconds for parsing and answering after the per-target timeout
_SCRAPE_DURATION_HEADER = format_header(
    _PREFIX + "scrape_duration_seconds", "gauge", "Time this exporter took to answer this scrape."
)
_BUILD_INFO = format_header(_PREFIX + "build_info", "gauge", "inferwatch version.") + format_sample(
    Sample(_PREFIX + "build_info", (("version", __version__),), "1.0")
)


def scrape_deadline(timeout: float, header: str | None) -> float:
    """Seconds this scrape may take: our timeout + slack, and within Prometheus' own timeout less a margin
    (10 %, between 0.25 and 0.5 s, at most half) left for merging, sending and Prometheus reading it."""
    ours = timeout + _SLACK
    try:
        theirs = float(header) if header is not None else None
    except ValueError:
        theirs = None
    if theirs is None or not 0 < theirs < 1e6:
        return ours
    return min(ours, theirs - min(0.5, max(0.25, theirs * 0.1), theirs / 2))


@dataclass(frozen=True)
class ServedFamily:
    """One family of one target, ready to merge: its header, type, sample lines and sample names."""

    name: str
    header: str
    type: str
    body: str
    names: frozenset[str]


@dataclass(frozen=True)
class Outcome:
    """One fetch of one target, immutable, so a response's health series agree with its data."""

    target: Target
    started: float  # time.monotonic() when the fetch began
    duration: float
    families: tuple[ServedFamily, ...] | None = None  # None: nothing served
    kind: str | None = None  # why not (ERROR_KINDS)
    series_in: int = 0
    series_out: int = 0
    sources: tuple[str, ...] = ()
    dropped: tuple[tuple[str, int], ...] = ()
    problem: str | None = None  # the first thing dropped, for the log

    @property
    def up(self) -> bool:
        return self.families is not None


def prepare(text: str, normalizer: Normalizer, target: Target, label: str, max_labels: int) -> Outcome:
    """Parse, check and normalize one body, with the target label: the CPU part of a fetch."""
    families = split_families(text, target.url, tolerant=True)
    checked = check_families(families, max_labels)
    if not checked.families and checked.dropped:
        raise FetchError("parse", checked.problem or "nothing Prometheus could read")
    result = normalizer.normalize_families(checked.families)
    served = []
    for name, fam in result.families.items():
        body = "".join(
            add_label(c, canon, label, target.name) if label else c
            for c, canon in zip(fam.chunks, fam.canonical, strict=True)
        )
        match = _TYPE_OF.search(fam.header)
        served.append(
            ServedFamily(
                name, fam.header, match.group(1) if match else "untyped", body, frozenset(names_used(name, body))
            )
        )
    return Outcome(
        target,
        0.0,
        0.0,
        tuple(served),
        None,
        result.series_in,
        result.series_out,
        result.sources,
        tuple(sorted(checked.dropped.items())),
        checked.problem,
    )


def _claims(fam: ServedFamily) -> tuple[str, ...]:
    """The names other than its own that promtool files under this family once it is served.

    A histogram `x` takes every `x_bucket`, `x_sum` and `x_count` after it, sample or HELP/TYPE line,
    whether its own body has them or not (a summary: `x_sum` and `x_count`). Other families' samples of
    another name (`x_count` in gauge `x`) make families of their own, typed once read: a TYPE for one of
    them later is "TYPE reported after samples". `x_created` is no part of a histogram in this format.
    """
    allowed = ALLOWED_SUFFIXES.get(fam.type)
    if allowed is not None:
        return tuple(fam.name + s for s in allowed if s)
    return tuple(n for n in fam.names if n != fam.name)


def _conflict(fam: ServedFamily, types: dict[str, str], owner: dict[str, str]) -> str | None:
    """Why `fam` clashes with a family served before it, or None.

    `types`: family name -> type served; `owner`: name -> the family promtool files it under. A HELP or
    TYPE line for a name another family owns is a second one for that family: promtool rejects the whole
    scrape. Samples of another name that another family owns would be read as part of it (gauge `x_count`,
    then histogram `x`: of two equal `x_count` series Prometheus keeps one, as a gauge). Sample lines with
    no header of their own (a stray `x_bucket` after another family) are read, as in the target's own
    text, as part of the family that owns their name.
    """
    served = types.get(fam.name, fam.type)
    if served != fam.type:
        return "the exporter's own family" if served == "own" else f"served before as a {served}"
    taken = sorted(n for n in fam.names if n != fam.name and owner.get(n, fam.name) != fam.name)
    if fam.header and owner.get(fam.name, fam.name) != fam.name:
        taken.insert(0, fam.name)
    if not taken:
        return None
    first = owner[taken[0]]
    return f"promtool reads {taken[0]} as part of {types[first]} {first}"


@dataclass
class _Runner:
    """One target: its in-flight fetch, its last outcome and its counters."""

    target: Target
    last: Outcome | None = None
    task: asyncio.Task | None = None
    errors: Counter = field(default_factory=Counter)
    dropped: Counter = field(default_factory=Counter)
    last_error: tuple[str, float] | None = None  # kind, unix time
    last_message: str | None = None  # logged once until it changes
    last_problem: str | None = None
    last_conflicts: list[str] = field(default_factory=list)  # families left out of the last response
    late: tuple[asyncio.Task, Outcome] | None = None  # the fetch that missed a deadline, as served meanwhile

    def record(self, outcome: Outcome, message: str, counted: bool = False) -> None:
        """Count and log a finished fetch; `counted`: its timeout was already counted as late."""
        if outcome.problem != self.last_problem and outcome.problem:
            log.warning("target %s: left out what Prometheus cannot read: %s", self.target.name, outcome.problem)
        self.last_problem = outcome.problem
        if outcome.kind is None:
            if self.last is not None and not self.last.up:
                log.info("target %s is back", self.target.name)
            self.last_message = None
        else:
            if message != self.last_message:
                log.warning("target %s (%s): %s: %s", self.target.name, self.target.url, outcome.kind, message)
            self.last_message = message
            if not (counted and outcome.kind == "timeout"):
                self.errors[outcome.kind] += 1
                self.last_error = (outcome.kind, time.time())
        self.dropped.update(dict(outcome.dropped))
        self.last = outcome

    def note_conflicts(self, left_out: list[str]) -> None:
        """Log the families left out of a response for clashing with another, once until they change."""
        if left_out and left_out != self.last_conflicts:
            log.warning(
                "target %s: left out %d family(ies) that clash with another: %s",
                self.target.name,
                len(left_out),
                "; ".join(left_out[:5]) + ("; ..." if len(left_out) > 5 else ""),
            )
        self.last_conflicts = left_out


class NormalizingExporter:
    """Scrapes, normalizes and merges; `app()` serves it over HTTP."""

    def __init__(self, config: ExporterConfig, normalizer: Normalizer):
        self.config = config
        self.normalizer = normalizer
        self.runners = [_Runner(t) for t in config.targets]
        self._session: aiohttp.ClientSession | None = None
        self._slots: asyncio.Semaphore | None = None
        self._switch_interval = sys.getswitchinterval()
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="inferwatch-parse")
        self._rendered: tuple[tuple[Outcome, ...], tuple[str, str]] | None = None
        self.fetches = 0  # fetches started, for tests and the benchmark

    # -- fetching -------------------------------------------------------------------------------

    async def _fetch_text(self, target: Target) -> str:
        slots, session = self._slots, self._session
        if slots is None or session is None:  # both made by `scrape` before it fetches
            raise RuntimeError("fetch before the first scrape opened the session")
        async with slots:  # bounded connections; waiting here is not the target's time
            async with asyncio.timeout(self.config.timeout):
                async with session.get(
                    target.url, headers={"Accept": "text/plain;version=0.0.4", "Accept-Encoding": "gzip"}
                ) as resp:
                    if resp.status != 200:
                        raise FetchError("http", f"HTTP {resp.status} from {target.url}")
                    body = await read_body(resp, self.config.max_body)
        return decode_text(body)

    async def _fetch(self, runner: _Runner) -> Outcome:
        target = runner.target
        self.fetches += 1
        started = time.monotonic()
        kind, message, outcome = None, "", None
        try:
            text = await self._fetch_text(target)
            loop = asyncio.get_running_loop()
            outcome = await loop.run_in_executor(
                self._pool, prepare, text, self.normalizer, target, self.config.target_label, self.config.max_labels
            )
        except TimeoutError:
            kind, message = "timeout", f"no complete answer within {self.config.timeout:g}s"
        except FetchError as err:
            kind, message = err.kind, err.message
        except aiohttp.ClientConnectorError as err:
            kind, message = "connect", f"cannot connect: {err.os_error or err}"
        except aiohttp.ClientError as err:
            kind, message = "connect", f"{type(err).__name__}: {err}"
        except ExpositionError as err:
            kind, message = "parse", f"line {err.line}: {err.reason}"
        except Exception as err:  # noqa: BLE001 - one bad target must never take the exporter down
            log.exception("target %s: unexpected error", target.name)
            kind, message = "internal", f"{type(err).__name__}: {err}"
        duration = time.monotonic() - started
        if outcome is None:
            outcome = Outcome(target, started, duration, kind=kind)
        else:
            outcome = Outcome(
                target,
                started,
                duration,
                outcome.families,
                None,
                outcome.series_in,
                outcome.series_out,
                outcome.sources,
                outcome.dropped,
                outcome.problem,
            )
        late = runner.late is not None and runner.late[0] is asyncio.current_task()
        runner.record(outcome, message.replace("\n", " ")[:300], counted=late)
        runner.task = None
        return outcome

    async def _outcome(self, runner: _Runner, deadline: float) -> Outcome:
        """The target's fresh outcome, joining the fetch in flight; timed out if not ready by `deadline`."""
        now = time.monotonic()
        if runner.last is not None and now - runner.last.started < self.config.min_interval:
            return runner.last
        if runner.task is None:
            runner.task = asyncio.create_task(self._fetch(runner))
        task = runner.task
        try:
            return await asyncio.wait_for(asyncio.shield(task), max(0.0, deadline - now))
        except TimeoutError:
            if runner.late is None or runner.late[0] is not task:
                # one outcome per late fetch, counted once and shared, so concurrent scrapes merge once
                runner.late = (task, Outcome(runner.target, now, time.monotonic() - now, kind="timeout"))
                runner.errors["timeout"] += 1
                runner.last_error = ("timeout", time.time())
                log.warning("target %s: not ready before the scrape's deadline", runner.target.name)
            return runner.late[1]

    # -- serving --------------------------------------------------------------------------------

    async def collect(self, budget: float | None = None) -> str:
        """One scrape of every target within `budget` seconds, merged, with the exporter's own series."""
        if self._session is None:
            # parsing runs in worker threads: a short switch interval hands the GIL back to the event loop
            # soon after each wait, so answers and /healthz are not held up behind a parse
            self._switch_interval = sys.getswitchinterval()
            sys.setswitchinterval(min(self._switch_interval, 0.001))
            self._slots = asyncio.Semaphore(self.config.max_connections)
            connector = aiohttp.TCPConnector(limit=self.config.max_connections, limit_per_host=0)
            self._session = aiohttp.ClientSession(
                connector=connector, auto_decompress=False, timeout=aiohttp.ClientTimeout(total=None)
            )
        start = time.monotonic()
        deadline = start + (budget if budget is not None else self.config.timeout + _SLACK)
        outcomes = await asyncio.gather(*(self._outcome(r, deadline) for r in self.runners))
        data, health = self._render(outcomes)
        total = format_sample(Sample(_PREFIX + "scrape_duration_seconds", (), format_value(time.monotonic() - start)))
        return data + health + _SCRAPE_DURATION_HEADER + total + _BUILD_INFO

    def _render(self, outcomes: list[Outcome]) -> tuple[str, str]:
        """The targets' families merged by name, one header each, in target order.

        A family is left out (counted as `conflict`, logged) when promtool would file it, or any of its
        samples, under another family of the response (see `_conflict`): first come, first served.
        """
        key = tuple(outcomes)  # held, not ids: an id may be reused once its outcome is gone
        if self._rendered is not None and all(a is b for a, b in zip(self._rendered[0], key, strict=True)):
            return self._rendered[1]  # concurrent scrapes served the same outcomes: render once
        types = {_PREFIX + n: "own" for n in _OWN_FAMILIES}
        if self.config.max_running_requests:
            types["llm_max_running_requests"] = "gauge"
        owner = {n: n for n in types}  # sample or family name -> the family promtool files it under
        merged: dict[str, list[str]] = {}
        headers: dict[str, str] = {}
        for runner, o in zip(self.runners, outcomes, strict=True):
            left_out = []
            for fam in o.families or ():
                why = _conflict(fam, types, owner)
                if why:
                    runner.dropped["conflict"] += 1
                    left_out.append(f"{fam.name} ({fam.type}): {why}")
                    continue
                types[fam.name] = fam.type
                if fam.header:
                    owner[fam.name] = fam.name
                for n in _claims(fam):
                    owner.setdefault(n, fam.name)  # a family of that name served before stays its own
                headers.setdefault(fam.name, fam.header)
                merged.setdefault(fam.name, []).append(fam.body)
            runner.note_conflicts(left_out)
        self._add_caps(merged, headers)
        text = "".join(headers[n] + "".join(bodies) for n, bodies in merged.items())
        self._rendered = (key, (text, self._health(outcomes)))
        return self._rendered[1]

    def _add_caps(self, merged: dict[str, list[str]], headers: dict[str, str]) -> None:
        if not self.config.max_running_requests:
            return
        name = "llm_max_running_requests"
        headers.setdefault(name, format_header(name, "gauge", self.normalizer.catalog[name].help))
        merged.setdefault(name, []).append(
            "".join(
                format_sample(Sample(name, (("model", model),), format_value(cap)))
                for model, cap in self.config.max_running_requests
            )
        )

    def _health(self, outcomes: list[Outcome]) -> str:
        lines: list[str] = []

        def family(name: str, mtype: str, help_text: str, samples: list[tuple[tuple, float]]) -> None:
            lines.append(format_header(_PREFIX + name, mtype, help_text))
            for labels, value in samples:
                lines.append(format_sample(Sample(_PREFIX + name, labels, format_value(value))))

        per = [(o, r, (("target", o.target.name),)) for o, r in zip(outcomes, self.runners, strict=True)]
        family(
            "target_up",
            "gauge",
            "1 if the target's data is in this response.",
            [(lab, float(o.up)) for o, _, lab in per],
        )
        family(
            "target_scrape_duration_seconds",
            "gauge",
            "Time the fetch served in this response took.",
            [(lab, o.duration) for o, _, lab in per],
        )
        family(
            "target_series_in",
            "gauge",
            "Samples read from the target in the fetch served here.",
            [(lab, o.series_in) for o, _, lab in per],
        )
        family(
            "target_series_out",
            "gauge",
            "Samples served for the target after normalizing, in this response.",
            [(lab, o.series_out) for o, _, lab in per],
        )
        family(
            "target_source_info",
            "gauge",
            "Sources (mappings) detected in the fetch served here.",
            [(lab + (("source", src),), 1.0) for o, _, lab in per for src in o.sources],
        )
        family(
            "target_scrape_errors_total",
            "counter",
            "Failed or late fetches of the target by kind.",
            [(lab + (("kind", k),), n) for _, r, lab in per for k, n in sorted(r.errors.items())],
        )
        family(
            "target_dropped_total",
            "counter",
            "Families or samples of the target left out because Prometheus could not read them, by reason.",
            [(lab + (("reason", k),), n) for _, r, lab in per for k, n in sorted(r.dropped.items())],
        )
        family(
            "target_last_error_timestamp_seconds",
            "gauge",
            "When the target last failed, with the kind of error (the message is in the log).",
            [(lab + (("kind", r.last_error[0]),), r.last_error[1]) for _, r, lab in per if r.last_error],
        )
        return "".join(lines)

    async def _handle_metrics(self, request: web.Request) -> web.Response:
        budget = scrape_deadline(self.config.timeout, request.headers.get(TIMEOUT_HEADER))
        body = await self.collect(budget)
        return web.Response(body=body.encode("utf-8"), headers={"Content-Type": CONTENT_TYPE})

    async def _handle_index(self, request: web.Request) -> web.Response:
        rows = "\n".join(
            f"  {r.target.name}: {r.target.url} ({'up' if r.last and r.last.up else 'down'})" for r in self.runners
        )
        return web.Response(text=f"inferwatch normalizing exporter {__version__}\n/metrics\ntargets:\n{rows}\n")

    async def _handle_health(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _close(self, app: web.Application) -> None:
        if self._session is not None:
            await self._session.close()
            sys.setswitchinterval(self._switch_interval)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/metrics", self._handle_metrics)
        app.router.add_get("/healthz", self._handle_health)
        app.router.add_get("/", self._handle_index)
        app.on_cleanup.append(self._close)
        return app

    def run(self) -> None:
        host, port = self.config.host, self.config.port

        def started(_message: str) -> None:  # aiohttp calls it once the port is bound
            log.info("serving on http://%s:%d/metrics for %d target(s)", host, port, len(self.runners))

        try:
            web.run_app(self.app(), host=host, port=port, print=started, access_log=None, handle_signals=True)
        except OSError as err:
            raise ListenError(host, port, err) from None
