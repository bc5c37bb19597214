"""One load script, run against a real vLLM and against `inferwatch simulate`, and what its events do to /metrics.

Each event is a small, deterministic sequence of requests: a length stop, a stop-string stop, a client that leaves
mid-stream, a rejection by a full waiting queue (--max-num-queued-reqs), and (on an engine with few KV blocks) a
preemption. After each, the engine is let to settle (nothing running or waiting, two reads alike), and every
counter's change is described in terms of what the engine answered: token counters as `prompt`, `completion` or
`prompt+completion` (the sums of the answers' `usage`, so a BPE tokenizer and the simulator's words compare),
other counters as numbers. Two engines agree on an event when the descriptions are equal.

Used by tests/test_sim_calibration.py (the simulator against the recorded real engine), tests/real_engine/
test_real_calibration.py (both, live) and tests/record_calibration.py (records the real engine).
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from prometheus_client.parser import text_string_to_metric_families

PATIENCE = 300  # seconds: a deadline for conditions, never a measure of speed
PROMPT = "Tell me a short story about a cat who likes the sea."  # under one 16-token block: no prefix hits
QUEUED = 4  # --max-num-queued-reqs of the engine the rejection event runs on
RUNNING = 2  # --max-num-seqs of the shared engines, real and simulated
# the engines the events need: the real vLLM's flags and the simulator's parameters alike (the real engine runs
# without a draft model, so the simulator without speculative decoding; the harness serves --max-model-len 1024)
SHARED_REAL = ("--max-num-seqs", str(RUNNING), "--max-num-queued-reqs", str(QUEUED))
SHARED_SIM = {"max_num_seqs": RUNNING, "max_num_queued_reqs": QUEUED, "spec_tokens": 0, "max_model_len": 1024}
# few KV blocks: two long answers cannot both stay (vLLM's CPU blocks are 128 tokens; 10 blocks hold 1,280). The
# real-engine step's pressure engine (tests/real_engine/engines.py), which its KV-pressure incident shares: four
# slots there, of which the preemption event uses two
KV_BLOCKS = 10
PRESSURE_RUNNING = 4
PRESSURE_REAL = (
    "--max-num-seqs",
    str(PRESSURE_RUNNING),
    "--num-gpu-blocks-override",
    str(KV_BLOCKS),
    "--no-enable-prefix-caching",
)
PRESSURE_SIM = {
    "max_num_seqs": PRESSURE_RUNNING,
    "kv_cache_tokens": KV_BLOCKS * 128,
    "prefix_caching": False,
    "spec_tokens": 0,
    "max_model_len": 1024,
}
RELEASE = "0.32.0"  # the real engine's (tests/real_engine/harness.py VLLM) and the simulated profile
LONG = 700  # tokens each preemption request writes: two of them overflow the KV cache above
HOLD = 900  # tokens each request filling the engine writes: seconds, long beside a /metrics poll

SHARED_EVENTS = ("length", "stop", "client_cancel", "rejection")
PRESSURE_EVENTS = ("preemption",)
TRIES = 3  # runs of an event whose precondition was lost (Outcome.again) before its last one counts


@dataclass
class Outcome:
    """What the clients saw: each request's HTTP status, and the usage of those answered whole."""

    statuses: list[int] = field(default_factory=list)
    usages: list[dict] = field(default_factory=list)
    partial: bool = False  # a request left before its usage came: its tokens are only `counted`
    again: str = ""  # why the event's precondition may not have held: run() runs it again


def _post(url: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=PATIENCE) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, {}


def _chat(url: str, model: str, outcome: Outcome, **body) -> dict:
    status, answer = _post(
        url + "/v1/chat/completions", {"model": model, "messages": [{"role": "user", "content": PROMPT}], **body}
    )
    outcome.statuses.append(status)
    if status == 200:
        outcome.usages.append(answer["usage"])
    return answer


def metrics(url: str) -> str:
    with urllib.request.urlopen(url + "/metrics", timeout=PATIENCE) as response:
        return response.read().decode()


def _gauge(text: str, name: str) -> float:
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples if s.name == name)


def _until(predicate, what: str):
    deadline = time.monotonic() + PATIENCE
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not seen within {PATIENCE} s: {what}")
        time.sleep(0.2)
    return value


def _length(url: str, model: str) -> Outcome:
    out = Outcome()
    _chat(url, model, out, max_tokens=5, ignore_eos=True)
    return out


def _stop(url: str, model: str) -> Outcome:
    """A stop string the answer reaches (the random model never ends by itself; at most 4, vLLM's limit)."""
    out = Outcome()
    _chat(url, model, out, max_tokens=200, stop=["e", "a", "o", "i"], include_stop_str_in_output=True)
    return out


def _client_cancel(url: str, model: str) -> Outcome:
    """A stream whose client leaves after its first event; the engine is waited on to drop it. Where the engine
    finished the answer before it saw the client leave (a busy API server notices a closed socket late: the tiny
    model writes HOLD tokens in a few seconds), the event was no cancel and runs again (`again`)."""
    finished = _finished(counters(metrics(url)))
    request = urllib.request.Request(
        url + "/v1/chat/completions",
        headers={"Content-Type": "application/json"},
        data=json.dumps(
            {
                "model": model,
                "stream": True,
                "max_tokens": HOLD,
                "ignore_eos": True,
                "messages": [{"role": "user", "content": PROMPT}],
            }
        ).encode(),
    )
    with urllib.request.urlopen(request, timeout=PATIENCE) as response:
        assert response.readline().startswith(b"data: ")
        status = response.status
    out = Outcome([status], [], partial=True)
    if _finished(settle(url)) > finished:
        out.again = "the engine finished the answer before it saw the client leave"
    return out


def _finished(counters: dict[str, float]) -> float:
    """Requests the engine counts as finished (any finish reason)."""
    return sum(v for k, v in counters.items() if k.startswith("vllm:request_success_total{"))


def _hold(url: str, model: str, outcome: Outcome, n: int, tokens: int) -> tuple[list, ThreadPoolExecutor]:
    """`n` requests of `tokens` tokens each, sent at once: their futures and the pool to shut down."""
    pool = ThreadPoolExecutor(n)
    return [pool.submit(_chat, url, model, outcome, max_tokens=tokens, ignore_eos=True) for _ in range(n)], pool


class _Stream:
    """One streamed chat request, read in a thread of its own: its HTTP status once it came (`answered` set then),
    the tokens it has streamed so far (vLLM's running usage where it sends one, else one per chunk, as the
    simulator streams), and its usage once it ended (`ended` set then)."""

    def __init__(self, url: str, model: str, **body):
        self.status: int | None = None
        self.tokens = 0
        self.usage: dict | None = None
        self.answered, self.ended = threading.Event(), threading.Event()
        body = {
            "model": model,
            "messages": [{"role": "user", "content": PROMPT}],
            "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
            **body,
        }
        self._thread = threading.Thread(target=self._read, args=(url, body), daemon=True)
        self._thread.start()

    def _read(self, url: str, body: dict) -> None:
        request = urllib.request.Request(
            url + "/v1/chat/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=PATIENCE) as response:
                self.status = response.status
                self.answered.set()
                for line in response:
                    if not line.startswith(b"data: {"):
                        continue
                    chunk = json.loads(line[len(b"data: ") :])
                    if chunk.get("usage"):
                        self.usage = chunk["usage"]
                        self.tokens = self.usage.get("completion_tokens", self.tokens)
                    elif chunk.get("choices"):
                        self.tokens += 1
        except urllib.error.HTTPError as err:
            self.status = err.code
        finally:
            self.answered.set()
            self.ended.set()

    def result(self, outcome: Outcome) -> None:
        """Waits for the end, then files the status (and the usage of one answered whole) in `outcome`."""
        self._thread.join(PATIENCE)
        outcome.statuses.append(self.status or 0)
        if self.status == 200 and self.usage:
            outcome.usages.append(self.usage)


def _rejection(url: str, model: str) -> Outcome:
    """The engine full, then one request more: refused. vLLM 0.32 counts running and waiting requests together
    against --max-num-queued-reqs: with 2 slots and 4 queued, 2 run, 2 wait, the 5th is refused.

    The engine's fullness is read from the holders' own streams, not from its gauges: a busy engine's /metrics took
    1.6 s to answer (at load 8), about as long as a 900-token answer on a quiet machine, so the gauges that saw the
    engine full described an engine whose first holders had finished by the time the probe came (it was admitted,
    on every try). The probe goes as soon as every holder was admitted (its status came) and RUNNING of them
    stream, a few tokens into answers of HOLD; when it is answered, every holder must still be open and short of
    its end by a third of HOLD, or the event runs again (`again`): then the engine may no longer have been full. A
    probe refused is a fact whatever the timing: vLLM counted QUEUED requests in flight."""
    out = Outcome()
    holders = [_Stream(url, model, max_tokens=HOLD, ignore_eos=True) for _ in range(QUEUED)]
    _until(
        lambda: (
            any(h.ended.is_set() for h in holders)  # one refused or ended early: the statuses say what went wrong
            or all(h.answered.is_set() for h in holders)
            and sum(h.tokens > 0 for h in holders) >= RUNNING
        ),
        f"{QUEUED} requests admitted and {RUNNING} of them streaming",
    )
    probe = _Stream(url, model, max_tokens=5, ignore_eos=True)
    probe.answered.wait(PATIENCE)
    full = not any(h.ended.is_set() for h in holders) and max(h.tokens for h in holders) < HOLD - HOLD // 3
    for stream in (*holders, probe):
        stream.result(out)
    if probe.status == 200 and not full:
        out.again = "the probe was answered when a holder was near its end or ended: the engine may not have been full"
    return out


def _preemption(url: str, model: str) -> Outcome:
    """Two long answers side by side on an engine whose KV cache holds one: the newer one is preempted."""
    out = Outcome()
    futures, pool = _hold(url, model, out, 2, LONG)
    for future in futures:
        future.result()
    pool.shutdown()
    return out


EVENTS = {
    "length": _length,
    "stop": _stop,
    "client_cancel": _client_cancel,
    "rejection": _rejection,
    "preemption": _preemption,
}


def _tokens(name: str) -> bool:
    """A counter of tokens (or a histogram's _sum of them): its change depends on the tokenizer."""
    return ("tokens" in name or "prefix_cache" in name) and not name.endswith("_count")


def counters(text: str) -> dict[str, float]:
    """{series: value} of the engine's counters (vllm: and its HTTP requests), and every histogram's _count (and
    _sum where it counts tokens), labels written sorted without model_name (the engines serve different names)."""
    out = {}
    for family in text_string_to_metric_families(text):
        if family.type not in ("counter", "histogram") or not (
            family.name.startswith("vllm:") or family.name == "http_requests"
        ):
            continue
        for s in family.samples:
            if (
                s.name.endswith("_created")
                or s.name.endswith("_bucket")
                or (s.name.endswith("_sum") and not _tokens(s.name))
            ):
                continue
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()) if k != "model_name")
            out[f"{s.name}{{{labels}}}"] = s.value
    return out


def settle(url: str) -> dict[str, float]:
    """The counters once nothing runs or waits and two reads in a row agree (vLLM updates them asynchronously)."""
    last: dict = {}

    def settled():
        nonlocal last
        text = metrics(url)
        if _gauge(text, "vllm:num_requests_running") or _gauge(text, "vllm:num_requests_waiting"):
            return None
        now = counters(text)
        same, last = now == last, now
        return now if same else None

    return _until(settled, "the engine idle and its counters still")


def describe(before: dict[str, float], after: dict[str, float], outcome: Outcome) -> dict[str, object]:
    """{series: change} of what moved; token counters as symbols of the answers' usage where they match."""
    prompt = sum(u["prompt_tokens"] for u in outcome.usages)
    completion = sum(u["completion_tokens"] for u in outcome.usages)
    symbols = {prompt: "prompt", completion: "completion", prompt + completion: "prompt+completion"}
    steps = completion - len(outcome.usages)  # one inter-token sample per token after each first one
    out: dict[str, object] = {}
    for key, value in after.items():
        delta = value - before.get(key, 0)
        name = key.split("{")[0]
        per_token = name.endswith("inter_token_latency_seconds_count") and outcome.usages and not outcome.partial
        if per_token and delta == steps:  # said even when 0 (one-token answers): a symbol, not a number
            out[key] = "completion-requests"
        elif not delta:
            continue
        elif _tokens(name):
            out[key] = "counted" if outcome.partial else symbols.get(delta, int(delta))
        else:
            out[key] = int(delta)
    return out


def run(url: str, model: str, events) -> dict[str, dict]:
    """{event: {"statuses": [...], "deltas": {series: change}}} of the events run one after the other; an event
    whose precondition was lost (Outcome.again) runs again, up to TRIES times, and its last run counts."""
    before = settle(url)
    out = {}
    for name in events:
        for _ in range(TRIES):
            outcome = EVENTS[name](url, model)
            after = settle(url)
            out[name] = {"statuses": sorted(outcome.statuses), "deltas": describe(before, after, outcome)}
            before = after
            if not outcome.again:
                break
    return out


def shapes(text: str) -> dict[str, dict]:
    """{family: {type, labels, buckets}} of the vllm: families, _created left out."""
    out = {}
    for family in text_string_to_metric_families(text):
        if not family.name.startswith("vllm:") or family.name.endswith("_created"):
            continue
        labels = sorted({k for s in family.samples for k in s.labels if k != "le"})
        bounds = sorted({float(s.labels["le"]) for s in family.samples if "le" in s.labels})
        out[family.name] = {"type": family.type, "labels": labels, "buckets": bounds}
    return out


def family(series: str) -> str:
    """The family a series of counters() belongs to: vllm:request_success for vllm:request_success_total{...}."""
    name = series.split("{")[0]
    for suffix in ("_total", "_count", "_sum"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def compare(real: dict, simulated: dict, differences: dict) -> list[str]:
    """What differs between two run() results, beside what `differences` lists with its reason: `not_simulated`
    (a family only the real engine has), `per_event` (event -> family not compared there)."""
    skip, per_event = set(differences.get("not_simulated", {})), differences.get("per_event", {})
    out = []
    for event in real:
        if event not in simulated:
            out.append(f"{event}: not run on the simulator")
            continue
        if real[event]["statuses"] != simulated[event]["statuses"]:
            out.append(f"{event}: statuses real {real[event]['statuses']}, simulated {simulated[event]['statuses']}")
        r, s = real[event]["deltas"], simulated[event]["deltas"]
        for key in sorted(set(r) | set(s)):
            if family(key) in skip or family(key) in per_event.get(event, {}):
                continue
            if r.get(key) != s.get(key):
                out.append(f"{event}: {key} real {r.get(key, 0)}, simulated {s.get(key, 0)}")
    return out


@contextmanager
def simulated(overrides: dict):
    """The simulated vLLM of RELEASE with `overrides` (SHARED_SIM, PRESSURE_SIM), fast steps; yields its URL."""
    from simtools import FAST, simulator

    with simulator("vllm", RELEASE, params=replace(FAST, **overrides), model="tiny-llama") as (url, _):
        yield url


def run_simulated() -> dict[str, dict]:
    """Every event on the simulator, each on the engine it needs (as the recording ran them)."""
    with simulated(SHARED_SIM) as url:
        out = run(url, "tiny-llama", SHARED_EVENTS)
    with simulated(PRESSURE_SIM) as url:
        out.update(run(url, "tiny-llama", PRESSURE_EVENTS))
    return out
