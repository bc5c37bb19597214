"""The simulator's HTTP side: an OpenAI-compatible API streaming as vLLM does, /metrics, and an admin endpoint.

GET  /v1/models
POST /v1/chat/completions, /v1/completions     streaming (SSE) or not
GET  /metrics                                  the release's exposition (flaky-metrics: 500, hang or 404)
GET  /admin/scenario, POST /admin/scenario {"scenario": "queueing"}
GET  /health
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiohttp import web

from inferwatch.errors import InferwatchError, ListenError
from inferwatch.sim._engine import Engine, Event, Request
from inferwatch.sim._params import EngineParams, scenarios, with_scenario

if TYPE_CHECKING:  # the GPU exporter is imported only when the simulator serves GPUs
    from inferwatch.exporters.gpu import Workload

__all__ = ["SimulatorConfig", "make_app", "serve", "SIMULATOR"]

log = logging.getLogger("inferwatch.sim")
SIMULATOR = web.AppKey("simulator", object)  # app[SIMULATOR]: the running simulator, for tests and tools


@dataclass(frozen=True)
class SimulatorConfig:
    engine: str = "vllm"
    version: str | None = None
    model: str = "llama-3-8b"
    scenario: str = "normal"
    params: EngineParams = EngineParams()
    seed: int | None = None
    gpus: int = 0  # simulated GPUs on /metrics beside the engine; gpu_stall stalls them
    workload: Workload | None = None  # the GPUs' pod; None: this process's HOSTNAME
    keep_pace_s: float = 0.0  # make up late steps up to this far behind (Engine.keep_pace_s)


class _Simulator:
    def __init__(self, config: SimulatorConfig):
        from inferwatch.sim._metrics import default_release

        self.config = config
        self.version = config.version or default_release(config.engine)
        self.engine = Engine(
            config.engine,
            self.version,
            config.model,
            with_scenario(config.params, config.scenario),
            config.seed,
            keep_pace_s=config.keep_pace_s,
        )
        self.scenario = config.scenario
        self.created = int(time.time())
        self.gpus = None
        if config.gpus:
            from inferwatch.exporters.gpu import simulated_gpus

            self.gpus = simulated_gpus(config.gpus, f"{config.engine}/{config.model}", config.workload)

    # --- helpers -----------------------------------------------------------------------------------------

    def _http(self, endpoint: str, status: int) -> None:
        if self.config.engine == "vllm":
            self.engine.metrics.inc("http", 1, handler=endpoint, method="POST", status=f"{status // 100}xx")
        else:
            self.engine.metrics.inc("http", 1, endpoint=endpoint, status_code=str(status), method="POST")

    @staticmethod
    def _error(status: int, message: str, kind: str = "BadRequestError") -> web.Response:
        return web.json_response(
            {"object": "error", "message": message, "type": kind, "param": None, "code": status}, status=status
        )

    # --- endpoints ---------------------------------------------------------------------------------------

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "object": "list",
                "data": [
                    {
                        "id": self.config.model,
                        "object": "model",
                        "created": self.created,
                        "owned_by": self.config.engine,
                        "root": self.config.model,
                        "parent": None,
                        "max_model_len": self.engine.params.max_model_len,
                    }
                ],
            }
        )

    async def metrics(self, request: web.Request) -> web.StreamResponse:
        p = self.engine.params
        if p.metrics_fault_share and self.engine.rng.random() < p.metrics_fault_share:
            fault = self.engine.rng.choice(["error", "hang", "vanish"])
            if fault == "hang":
                await asyncio.sleep(30)
            return web.Response(status=500 if fault == "error" else 404, text=f"simulated metrics fault: {fault}\n")
        text = self.engine.metrics.render()
        if self.gpus is not None:
            text += self.gpus(text, p.gpu_stall)
        return web.Response(body=text.encode(), headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})

    async def get_scenario(self, request: web.Request) -> web.Response:
        return web.json_response({"scenario": self.scenario, "scenarios": list(scenarios())})

    async def set_scenario(self, request: web.Request) -> web.Response:
        try:
            name = (await request.json())["scenario"]
            params = with_scenario(self.config.params, name)
        except InferwatchError as err:  # an unknown name: the message lists the known ones
            return self._error(400, str(err))
        except Exception:  # noqa: BLE001 - any bad body is the caller's mistake, said back to them
            return self._error(400, f'give {{"scenario": NAME}}, NAME one of {", ".join(scenarios())}')
        self.engine.params, self.scenario = params, name
        log.info("scenario: %s", name)
        return web.json_response({"scenario": name})

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=True)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=False)

    async def _generate(self, request: web.Request, chat: bool) -> web.StreamResponse:
        endpoint = request.path
        delay = self.engine.params.ingress_delay_s
        if delay:  # a slow path in front of the engine: its clocks (arrival, TTFT, e2e) start after it
            await asyncio.sleep(delay * self.engine.rng.uniform(0.5, 1.5))
        try:
            body = await request.json()
            if chat:
                prompt = " ".join(_text(m.get("content")) for m in body["messages"])
            else:
                prompt = body["prompt"] if isinstance(body["prompt"], str) else " ".join(body["prompt"])
        except (ValueError, KeyError, TypeError, AttributeError):
            self._http(endpoint, 400)
            field = "messages" if chat else "prompt"
            return self._error(400, f"the body must be JSON with {field}")
        if body.get("model", self.config.model) != self.config.model:
            self._http(endpoint, 404)
            return self._error(404, f"The model `{body.get('model')}` does not exist.", "NotFoundError")
        tools = body.get("tools") or []
        tool_name = None
        if chat and tools and body.get("tool_choice", "auto") != "none":
            tool_name = tools[0].get("function", {}).get("name", "tool")
        max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
        stream = bool(body.get("stream"))
        stop = body.get("stop") or ()
        stop = (stop,) if isinstance(stop, str) else stop
        if not isinstance(stop, list | tuple) or len(stop) > 4 or not all(isinstance(s, str) for s in stop):
            self._http(endpoint, 400)  # vLLM's own limit: a string or at most 4
            return self._error(400, "stop: a string or a list of at most 4 strings")
        if self.engine.full():
            self._http(endpoint, 503)
            return self._error(
                503,
                "The engine is currently busy: too many requests queued (--max-num-queued-reqs). Retry later.",
                "ServiceUnavailableError",
            )
        req = self.engine.new_request(prompt, max_tokens, stream, tool_name, tuple(stop), bool(body.get("ignore_eos")))
        self.engine.submit(req)
        meta = _Meta(chat, self.config.model, bool((body.get("stream_options") or {}).get("include_usage")))
        if stream:
            return await self._stream(request, req, meta, endpoint)
        return await self._complete(request, req, meta, endpoint)

    async def _stream(self, request: web.Request, req: Request, meta: _Meta, endpoint: str):
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        status = 200
        try:
            started = False
            while True:
                event = await _next_event(request, req)
                if not started and meta.chat:
                    await _send(response, meta.chunk({"role": "assistant", "content": ""}))
                    started = True
                if event.kind == "error":
                    status = 500
                    await _send(
                        response,
                        {
                            "object": "error",
                            "message": "simulated engine error",
                            "type": "InternalServerError",
                            "param": None,
                            "code": 500,
                        },
                    )
                    break
                if event.kind == "finish":
                    reason = "tool_calls" if req.tool_name and event.text == "stop" else event.text
                    await _send(response, meta.chunk({} if meta.chat else "", reason))
                    if meta.usage:
                        await _send(response, meta.usage_chunk(req))
                    break
                await _send(response, meta.delta(event, req))
            await response.write(b"data: [DONE]\n\n")
        except ConnectionResetError:
            self.engine.abort(req)  # the client went away mid-stream; its 200 was sent, and
            status = 499 if self.config.engine == "sglang" else 200  # vLLM counts that response as 2xx
        except asyncio.CancelledError:
            self.engine.abort(req)
            raise
        finally:
            self._http(endpoint, status)
        return response

    async def _complete(self, request: web.Request, req: Request, meta: _Meta, endpoint: str):
        events: list[Event] = []
        while True:
            try:
                event = await _next_event(request, req)
            except ConnectionResetError:
                self.engine.abort(req)  # the client hung up
                self._http(endpoint, 499)
                return web.Response(status=499)
            if event.kind in ("finish", "error"):
                break
            events.append(event)
        if event.kind == "error":
            self._http(endpoint, 500)
            return self._error(500, "simulated engine error", "InternalServerError")
        self._http(endpoint, 200)
        reason = "tool_calls" if req.tool_name and event.text == "stop" else event.text
        return web.json_response(meta.whole(events, req, reason))


async def _next_event(request: web.Request, req: Request) -> Event:
    """The request's next event; ConnectionResetError once its client has hung up, looked for before each event
    and every 0.1 s without one (in the queue, between steps): aiohttp does not cancel a handler whose client left,
    and a write only fails once there is something to write."""
    while request.transport is not None and not request.transport.is_closing():
        try:
            return await asyncio.wait_for(req.events.get(), timeout=0.1)
        except TimeoutError:
            continue
    raise ConnectionResetError("the client hung up")


def _text(content) -> str:
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content or "")


async def _send(response: web.StreamResponse, payload: dict) -> None:
    await response.write(b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n")


class _Meta:
    """Shapes the OpenAI response objects of one request."""

    def __init__(self, chat: bool, model: str, usage: bool):
        self.chat, self.model, self.usage = chat, model, usage
        self.id = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        self.created = int(time.time())
        self.tool_id = "chatcmpl-tool-" + uuid.uuid4().hex[:16]

    def _base(self, choices: list) -> dict:
        return {
            "id": self.id,
            "object": "chat.completion.chunk" if self.chat else "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }

    def chunk(self, delta, finish_reason: str | None = None) -> dict:
        if self.chat:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        else:
            choice = {"index": 0, "text": delta, "logprobs": None, "finish_reason": finish_reason}
        return self._base([choice])

    def delta(self, event: Event, req: Request) -> dict:
        if not self.chat:
            return self.chunk(event.text)
        if event.kind == "reasoning":
            return self.chunk({"reasoning_content": event.text})
        if event.kind == "tool_start":
            return self.chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": self.tool_id,
                            "type": "function",
                            "function": {"name": event.text, "arguments": ""},
                        }
                    ]
                }
            )
        if event.kind == "tool":
            return self.chunk({"tool_calls": [{"index": 0, "function": {"arguments": event.text}}]})
        return self.chunk({"content": event.text})

    def usage_chunk(self, req: Request) -> dict:
        return {**self._base([]), "usage": _usage(req)}

    def whole(self, events: list[Event], req: Request, reason: str) -> dict:
        content = "".join(e.text for e in events if e.kind == "content")
        if not self.chat:
            return {
                "id": self.id,
                "object": "text_completion",
                "created": self.created,
                "model": self.model,
                "choices": [{"index": 0, "text": content, "logprobs": None, "finish_reason": reason}],
                "usage": _usage(req),
            }
        message: dict = {"role": "assistant", "content": content or None}
        reasoning = "".join(e.text for e in events if e.kind == "reasoning")
        if reasoning:
            message["reasoning_content"] = reasoning
        if req.tool_name:
            message["tool_calls"] = [
                {
                    "id": self.tool_id,
                    "type": "function",
                    "function": {
                        "name": req.tool_name,
                        "arguments": "".join(e.text for e in events if e.kind == "tool"),
                    },
                }
            ]
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": reason}],
            "usage": _usage(req),
        }


def _usage(req: Request) -> dict:
    return {
        "prompt_tokens": len(req.prompt),
        "completion_tokens": req.generated,
        "total_tokens": len(req.prompt) + req.generated,
    }


def make_app(config: SimulatorConfig) -> web.Application:
    """The aiohttp application; the engine loop starts and stops with it."""
    sim = _Simulator(config)
    app = web.Application()
    app[SIMULATOR] = sim
    app.router.add_get("/v1/models", sim.models)
    app.router.add_post("/v1/chat/completions", sim.chat)
    app.router.add_post("/v1/completions", sim.completions)
    app.router.add_get("/metrics", sim.metrics)
    app.router.add_get("/admin/scenario", sim.get_scenario)
    app.router.add_post("/admin/scenario", sim.set_scenario)
    app.router.add_get("/health", sim.health)

    async def lifecycle(app):
        sim.engine.start()
        yield
        await sim.engine.stop()

    app.cleanup_ctx.append(lifecycle)
    return app


def serve(config: SimulatorConfig, host: str, port: int) -> None:
    """Serve until interrupted; "serving" is logged once the port is bound, a failed bind is a ListenError."""

    def started(_message: str) -> None:
        log.info(
            "simulating %s %s serving %s on %s:%d (scenario %s)",
            config.engine,
            config.version or "(default)",
            config.model,
            host,
            port,
            config.scenario,
        )

    try:
        web.run_app(make_app(config), host=host, port=port, print=started, access_log=None)
    except OSError as err:
        raise ListenError(host, port, err) from None
