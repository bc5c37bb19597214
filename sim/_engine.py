"""A small, wall-clock model of an inference engine: a batch cap, a KV cache, prefill and decode speeds,
a waiting queue, preemptions, prefix caching and speculative decoding.

Every metric comes from what the model actually did to the requests it served,
so the numbers on /metrics agree with what a client measures.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field

from inferwatch.sim._metrics import EngineMetrics
from inferwatch.sim._params import EngineParams

__all__ = ["Engine", "Request", "Event", "WORDS"]

WORDS = (
    "the model answers in plain words while tokens stream out one by one and the user reads along "
    "as fast as the engine can decode them on a busy GPU"
).split()
CLIENT_ABORT = "client"


@dataclass
class Event:
    """One thing for the API layer to send: kind is reasoning, content, tool_start, tool, finish or error."""

    kind: str
    text: str = ""


@dataclass(eq=False)
class Request:
    prompt: list[str]  # prompt tokens (words)
    plan: list[tuple[str, str]]  # (kind, text) of every token to generate, in order
    finish_reason: str  # how it ends once the plan is done: stop, length, error, abort
    streaming: bool = True
    tool_name: str | None = None
    arrival: float = field(default_factory=time.monotonic)
    events: asyncio.Queue = field(default_factory=asyncio.Queue)
    generated: int = 0
    cached: int = 0
    admitted_at: float | None = None
    first_token_at: float | None = None
    finished_at: float | None = None
    fail_at: int | None = None  # an engine error or abort after this many tokens
    preemptions: int = 0

    @property
    def kv_tokens(self) -> int:
        return len(self.prompt) + self.generated


class Engine:
    """Schedules requests step by step; call `start()` inside a running event loop."""

    def __init__(
        self,
        engine: str,
        version: str,
        model: str,
        params: EngineParams,
        seed: int | None = None,
        clock=time.monotonic,
        keep_pace_s: float = 0.0,
    ):
        self.engine, self.model = engine, model
        self.clock = clock  # tests drive it on a virtual clock: begin_step(), end_step()
        self.keep_pace_s = keep_pace_s  # how far behind its timeline the loop may fall and make it up
        self.params = params
        self.metrics = EngineMetrics(engine, version, model)
        self.rng = random.Random(seed)
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.kv_used = 0
        self._prefix: OrderedDict[int, None] = OrderedDict()
        self._wake = asyncio.Event()
        self._prefill = 0  # prompt tokens admitted after the last step, prefilled in the next
        self._task: asyncio.Task | None = None
        # releases before vLLM 0.13 have no `error` finish reason: an engine error ends as an abort there
        self._error_reason = (
            "error" if self.engine == "sglang" or "error" in self.metrics.values("finished") else "abort"
        )

    # --- requests ----------------------------------------------------------------------------------------

    def new_request(
        self,
        prompt: str,
        max_tokens: int | None,
        streaming: bool,
        tool_name: str | None = None,
        stop: tuple[str, ...] = (),
        ignore_eos: bool = False,
    ) -> Request:
        """Plan what the request will generate, under the current parameters. `stop` strings end the answer at
        the first token holding one (kept in the output); `ignore_eos` writes up to max_tokens, as vLLM does."""
        p, rng = self.params, self.rng
        words = prompt.split() or ["hi"]
        if p.prompt_scale > 1:  # context added after the client's text (long-prompts)
            words += [rng.choice(WORDS) for _ in range(int(len(words) * (p.prompt_scale - 1)))]
        plan = [("reasoning", " " + rng.choice(WORDS)) for _ in range(p.reasoning_tokens)]
        if tool_name:
            arguments = json.dumps({"city": rng.choice(["Paris", "Lima", "Osaka"]), "unit": "celsius"})
            if rng.random() < p.broken_tool_share:
                arguments = arguments[:-1] + ', "unit": '  # cut off: not valid JSON
            plan += [("tool", arguments[i : i + 4]) for i in range(0, len(arguments), 4)]
        else:
            length = max(1, int(rng.expovariate(1 / p.output_tokens_mean)) + 1)
            if ignore_eos and max_tokens:  # no end of its own: it runs into the limit
                length = max_tokens + 1
            plan += [("content", " " + rng.choice(WORDS)) for _ in range(length)]
        reason = "stop"
        hit = next(
            (i for i, (kind, text) in enumerate(plan) if kind == "content" and any(s in text for s in stop)), None
        )
        if hit is not None:
            plan = plan[: hit + 1]
        limit = min(max_tokens or p.max_model_len, p.max_model_len - len(words))
        if rng.random() < p.truncate_share:  # the answer runs into the length limit halfway
            limit = min(limit, p.reasoning_tokens + max(1, (len(plan) - p.reasoning_tokens) // 2))
        if len(plan) > limit:
            plan, reason = plan[: max(1, limit)], "length"
        request = Request(words, plan, reason, streaming, tool_name, arrival=self.clock())
        roll = rng.random()
        if roll < p.error_share:
            request.fail_at, request.finish_reason = len(plan) // 2, self._error_reason
        elif roll < p.error_share + p.abort_share:
            request.fail_at, request.finish_reason = len(plan) // 3, "abort"
        return request

    def full(self) -> bool:
        """Whether a new request is refused (--max-num-queued-reqs), counting the rejection if so."""
        limit = self.params.max_num_queued_reqs
        if not limit or len(self.running) + len(self.waiting) < limit:
            return False
        self.metrics.inc("rejections", 1, reason="max_num_queued_reqs")
        return True

    def submit(self, request: Request) -> None:
        self.waiting.append(request)
        self._gauges()
        self._wake.set()

    def abort(self, request: Request) -> None:
        """The client went away: drop the request wherever it is."""
        if request in self.running:
            self.running.remove(request)
            self.kv_used -= request.kv_tokens
        elif request in self.waiting:
            self.waiting.remove(request)
        else:
            return
        self._gauges()
        self._finish(request, CLIENT_ABORT)

    # --- the loop ----------------------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    async def _loop(self) -> None:
        """Step after step. By default each step starts when the one before it woke up, so a busy host that wakes
        the loop late stretches every step: the modelled engine serves fewer tokens a second and, near its cap,
        queues (the demo's healthy vLLM paged on a loaded machine). With `keep_pace_s` the steps are due on a
        fixed timeline instead: late ones run at once until the engine is back on it, at most `keep_pace_s`
        behind (after a longer stall it goes on from now). Tokens then reach clients late but the engine keeps
        its pace; its own histograms time the modelled engine, not the host's delays."""
        due = self.clock()
        while True:
            if not self.running and not self.waiting:
                self._wake.clear()
                await self._wake.wait()
                due = self.clock()
            seconds = self.begin_step()
            if self.keep_pace_s > 0:
                due = max(due + seconds, self.clock() - self.keep_pace_s)
                await asyncio.sleep(max(0.0, due - self.clock()))
            else:
                await asyncio.sleep(seconds)
            self.end_step(seconds)

    def begin_step(self) -> float:
        """Admit what fits; how long the next step takes (prefill of the admitted, then a decode step)."""
        prefill, self._prefill = self._prefill + self._admit(), 0
        p = self.params
        if not self.running:
            return p.decode_step_s
        return prefill / p.prefill_tokens_per_s + p.decode_step_s * (1 + p.decode_batch_slope * (len(self.running) - 1))

    def end_step(self, seconds: float) -> None:
        """The step of `seconds` is over: every running request gets its tokens."""
        if not self.running:
            return
        self._decode(seconds)
        self._relieve_kv_pressure()
        self._prefill = self._admit()  # freed slots refill at once, as a continuous-batching scheduler does
        self._gauges()

    def _admit(self) -> int:
        """Move waiting requests into the batch while the cap and the KV cache allow; returns prefill tokens."""
        p, prefill = self.params, 0
        while self.waiting and len(self.running) < p.max_num_seqs:
            request = self.waiting[0]
            if self.running and self.kv_used + request.kv_tokens + 1 > p.kv_cache_tokens:
                break
            self.waiting.popleft()
            if request.admitted_at is None:
                request.admitted_at = self.clock()
                request.cached = self._prefix_hit(request.prompt)
                if self.engine == "vllm":  # SGLang counts prompt tokens when a request ends
                    self.metrics.inc("prompt_tokens", len(request.prompt))
                    self.metrics.inc("prompt_by_source", len(request.prompt) - request.cached, source="local_compute")
                    self.metrics.inc("prompt_by_source", request.cached, source="local_cache_hit")
                    self.metrics.inc("prompt_cached", request.cached)
                self.metrics.inc("prefix_queries", len(request.prompt))
                self.metrics.inc("prefix_hits", request.cached)
                prefill += len(request.prompt) - request.cached
            else:
                prefill += request.kv_tokens  # resumed after preemption: recompute
            self.running.append(request)
            self.kv_used += request.kv_tokens
        return prefill

    def _prefix_hit(self, prompt: list[str]) -> int:
        """Tokens of leading full blocks already cached; the prompt's blocks become cached."""
        if not self.params.prefix_caching:  # flushed on every request: nothing is ever found
            self._prefix.clear()
            return 0
        size, hit, matching = self.params.prefix_block, 0, True
        capacity = max(1, self.params.kv_cache_tokens // size)
        for i in range(len(prompt) // size):
            key = hash(tuple(prompt[: (i + 1) * size]))
            if matching and key in self._prefix:
                hit += size
                self._prefix.move_to_end(key)
            else:
                matching = False
                self._prefix[key] = None
                if len(self._prefix) > capacity:
                    self._prefix.popitem(last=False)
        return hit

    def _tokens_this_step(self) -> int:
        p, accepted = self.params, 0
        if p.spec_tokens:
            for _ in range(p.spec_tokens):
                if self.rng.random() >= p.spec_acceptance:
                    break
                accepted += 1
            self.metrics.inc("spec_drafts", 1)
            self.metrics.inc("spec_draft_tokens", p.spec_tokens)
            self.metrics.inc("spec_accepted", accepted)
        return 1 + accepted

    def _decode(self, step: float) -> None:
        now = self.clock()
        p = self.params
        if p.spec_tokens:
            self.metrics.set("spec_accept_rate", p.spec_acceptance)
        for request in list(self.running):
            n = min(self._tokens_this_step(), len(request.plan) - request.generated)
            if request.fail_at is not None:
                n = max(0, min(n, request.fail_at - request.generated))
            first = request.first_token_at is None
            for kind, text in request.plan[request.generated : request.generated + n]:
                if kind == "tool" and not any(k == "tool" for k, _ in request.plan[: request.generated]):
                    request.events.put_nowait(Event("tool_start", request.tool_name or "tool"))
                request.events.put_nowait(Event(kind, text))
                request.generated += 1
            self.kv_used += n
            if self.engine == "vllm":  # vLLM counts tokens per step, SGLang at the end
                self.metrics.inc("generation_tokens", n)
            if first and n:
                request.first_token_at = now
                if request.streaming or self.engine == "vllm":
                    self.metrics.observe("ttft", now - request.arrival, request.streaming)
            elif n:
                self.metrics.observe("itl", step)  # vLLM: a sample per step
                self.metrics.observe("itl_per_token", step / n, times=n)  # SGLang: a sample per token
            if request.fail_at is not None and request.generated >= request.fail_at:
                self._retire(request, request.finish_reason)
            elif request.generated >= len(request.plan):
                self._retire(request, request.finish_reason)

    def _relieve_kv_pressure(self) -> None:
        while self.kv_used > self.params.kv_cache_tokens and len(self.running) > 1:
            victim = self.running.pop()  # the newest goes back to the queue
            self.kv_used -= victim.kv_tokens
            victim.preemptions += 1
            self.waiting.appendleft(victim)
            self.metrics.inc("preemptions", 1)

    def _retire(self, request: Request, reason: str) -> None:
        self.running.remove(request)
        self.kv_used -= request.kv_tokens
        self._finish(request, reason)

    def _finish(self, request: Request, reason: str) -> None:
        """Tell the client, and count the request as the engine would. `reason` may be CLIENT_ABORT."""
        now = request.finished_at = self.clock()
        m, streaming = self.metrics, request.streaming
        shown = "abort" if reason == CLIENT_ABORT else reason
        request.finish_reason = shown
        request.events.put_nowait(Event("error" if reason == "error" else "finish", shown))
        if self.engine == "vllm":
            if reason != CLIENT_ABORT:  # vLLM V1 does not count client aborts
                m.inc("finished", 1, finished_reason=shown)
        else:
            m.inc("requests", 1, streaming)
            if shown in ("abort", "error"):  # SGLang has no finish reason: errors end as aborts
                m.inc("aborted", 1)
            m.inc("prompt_tokens", len(request.prompt), streaming)
            m.inc("generation_tokens", request.generated, streaming)
            if m.values("cached_tokens"):
                m.inc("cached_tokens", request.cached, cache_source="device")
            else:
                m.inc("cached_tokens", request.cached)
            if not streaming and request.first_token_at is not None:
                m.observe("ttft", now - request.arrival, streaming)  # a non-streamed first chunk comes at the end
        if request.admitted_at is None or (self.engine == "vllm" and reason == CLIENT_ABORT):
            return  # vLLM V1 observes no request histogram for a dropped request
        m.observe("e2e", now - request.arrival, streaming)
        m.observe("queue", request.admitted_at - request.arrival)
        if request.first_token_at is not None:
            m.observe("prefill", request.first_token_at - request.admitted_at)
            m.observe("decode", now - request.first_token_at)
            # vLLM observes it for every finished request, one token long or not (SGLang only past one token)
            if reason in ("stop", "length") and (request.generated > 1 or self.engine == "vllm"):
                m.observe("tpot", (now - request.first_token_at) / max(1, request.generated - 1), streaming)
            m.observe("inference", now - request.admitted_at)
        m.observe("prompt_len", len(request.prompt))
        m.observe("gen_len", request.generated)
        m.observe("prefill_computed", len(request.prompt) - request.cached)
        m.observe("request_preemptions", request.preemptions)

    def _gauges(self) -> None:
        self.metrics.set("running", len(self.running))
        self.metrics.set("waiting", len(self.waiting))
        self.metrics.set("kv_usage", min(1.0, self.kv_used / self.params.kv_cache_tokens))
