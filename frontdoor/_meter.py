"""What one request asked for and what its response said, read from a copy of the bytes that pass.

`RequestInfo` comes from the request body; `Facts` accumulate from each SSE
event (`observe_event`; `observe_stream` reads a client's body into it) or from
a whole JSON answer (`observe_whole`). Nothing
here keeps content: only times, counts, finish reasons, and tool-call names and
arguments until the request is judged (they are needed to validate the call).

Most events of a stream are the same bytes but for the text of one token. The
first such plain one (visible content, nothing else the meter reads) is parsed
and its bytes before and after that text are kept as the stream's `shape`; a
later event with the same bytes around a text that is one valid JSON string
counts as a visible token without parsing the rest (`_same_shape`). Anything
else (reasoning, tool calls, a finish reason, usage, errors, another id) is
parsed whole, and a parsed plain event that did not match becomes the new shape
(SGLang stamps each chunk with the second it was made, so its shape changes).

What counts (the response shapes of vLLM, SGLang, llama.cpp and the OpenAI API
that `tests/fixtures/frontdoor/` follows):

- visible: `delta.content` / `message.content`, `text` (/v1/completions),
  `refusal` (the user reads it), `tool_calls` and the legacy `function_call`; text that is whitespace only is
  an output token, but not the first visible one (the user sees nothing), and alone it is nothing visible;
- hidden: `reasoning_content` (vLLM until its rename, SGLang, DeepSeek) and
  `reasoning` (vLLM since vllm-project/vllm#27752, Nov 2025; OpenRouter);
- tool calls are keyed by choice and the call's `index`; a call without one (a
  whole answer, or a server that omits it) is a new call when it has a name,
  else more of the last one;
- `finish_reason` is a string; SGLang's own `{"type": ...}` form is read too;
- `usage` is taken from any event that has one (the last wins: the `choices: []`
  chunk of `stream_options.include_usage`, or every chunk with
  `continuous_usage_stats`).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from inferwatch.frontdoor._sse import SSESplitter

__all__ = ["RequestInfo", "Facts", "request_info", "observe_event", "observe_stream", "observe_whole", "token_counts"]

_fast_loads: Callable[[bytes | bytearray], Any]
try:
    from orjson import loads as _orjson_loads  # about 5 times json's speed on a chunk: the per-chunk budget

    _fast_loads = _orjson_loads
except ImportError:  # pragma: no cover - a declared dependency
    _fast_loads = json.loads


def _loads(data: bytes | bytearray):
    """orjson, and json where orjson refuses what json accepts (NaN, integers over 64 bits): the same verdicts."""
    try:
        return _fast_loads(data)
    except ValueError:
        return json.loads(data)


@dataclass(frozen=True)
class RequestInfo:
    model: str | None = None
    stream: bool = False
    tools: dict[str, object] | None = None  # offered function name -> its parameters schema; None: none offered


def request_info(body: bytes) -> RequestInfo:
    """Model, streaming and offered functions of an OpenAI request body; empty when it is not one."""
    try:
        doc = _loads(body)
    except (ValueError, UnicodeDecodeError):
        return RequestInfo()
    if not isinstance(doc, dict):
        return RequestInfo()
    model = doc.get("model") if isinstance(doc.get("model"), str) else None
    offered = {}
    for tool in doc.get("tools") or ():
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            offered[function["name"]] = function.get("parameters")
    for function in doc.get("functions") or ():  # the legacy `functions` list
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            offered[function["name"]] = function.get("parameters")
    return RequestInfo(model, doc.get("stream") is True, offered or None)


@dataclass
class Facts:
    """What a response said so far; times are monotonic seconds."""

    events: int = 0
    first_chunk: float | None = None
    first_visible: float | None = None
    last_visible: float | None = None
    last_event: float | None = None  # the stream's end so far (a finish chunk, [DONE])
    visible_chunks: int = 0  # events with content or a tool call, from the first visible one
    blank_before: int = 0  # whitespace-only events before the first visible one (a "\n\n"
    # after reasoning): output tokens, but no gap between visible ones
    reasoning_chunks: int = 0  # events with hidden reasoning
    done: bool = False  # `data: [DONE]` seen
    finish: dict[int, str] = field(default_factory=dict)  # choice index -> finish_reason
    tools: dict[tuple[int, int], list] = field(default_factory=dict)  # (choice, call) -> [name, args]; args None:
    # sent as something other than a string
    error: str | None = None  # an error object, or a body that is not the JSON it should be
    usage: dict | None = None
    visible_whole: bool = False  # a whole (non-streamed) answer had content or a tool call
    choices: set[int] = field(default_factory=set)  # indexes of the choices that showed something
    shape: tuple[bytes, bytes] | None = field(default=None, compare=False, repr=False)  # around a token's text


async def observe_stream(content, facts: Facts, until_error: bool = False) -> None:
    """Fold a streamed answer into `facts` as it arrives, each read at the time it came: the body of a client's
    response (`content.readany()`: aiohttp's StreamReader), for the prober and the load generator. `until_error`
    stops reading at the first event that makes `facts.error`."""
    splitter = SSESplitter()
    while not (until_error and facts.error) and (chunk := await content.readany()):
        now = time.monotonic()
        for payload in splitter.feed(chunk):
            observe_event(facts, payload, now)


def observe_event(facts: Facts, payload: bytes, now: float) -> None:
    """Fold one SSE event's data into `facts`."""
    facts.events += 1
    facts.last_event = now
    if facts.first_chunk is None:
        facts.first_chunk = now
    shape = facts.shape
    if shape is not None and _same_shape(payload, shape):
        facts.visible_chunks += 1
        facts.last_visible = now
        return
    if payload.startswith(b"[DONE]"):  # as the OpenAI client reads it
        facts.done = True
        return
    try:
        doc = _loads(payload)
        visible = _observe_choices(facts, doc, whole=False)
    except (ValueError, UnicodeDecodeError, TypeError, AttributeError):
        facts.error = facts.error or "an event that is not a chunk object"
        return
    if visible:
        if facts.first_visible is None:
            if visible is _BLANK:  # whitespace only: the user sees nothing yet, nor learn its shape
                facts.blank_before += 1
                return
            facts.first_visible = now
        facts.visible_chunks += 1
        facts.last_visible = now
        if (learnt := _shape_of(payload, doc)) is not None:  # a plain event the shape did not match
            facts.shape = learnt


def _same_shape(payload: bytes, shape: tuple[bytes, bytes]) -> bool:
    """Whether `payload` is `head + text + tail` with `text` one non-empty JSON string's inside: then it is the
    shape's event with another token, which the meter counts alike (every other byte is the same)."""
    head, tail = shape
    if len(payload) <= len(head) + len(tail) or not payload.startswith(head) or not payload.endswith(tail):
        return False
    try:  # an unescaped quote, a bad escape, a control character or bad UTF-8 in `text` fails here
        _fast_loads(b'"' + payload[len(head) : len(payload) - len(tail)] + b'"')
    except ValueError:
        return False
    return True


def _shape_of(payload: bytes, doc: dict) -> tuple[bytes, bytes] | None:
    """The bytes before and after the token text of a plain visible event: one choice, non-empty content (or
    completion text), and no finish reason, reasoning, tool call, usage or error. None for any other event."""
    choices = doc.get("choices")
    if not isinstance(choices, list) or len(choices) != 1 or doc.get("usage") is not None:
        return None
    choice = choices[0]
    part = choice.get("delta")
    if choice.get("finish_reason") or (part is None and "message" in choice):
        return None
    if part is None:
        key, text = _TEXT_KEY, choice.get("text")
    elif (
        part.get("reasoning_content")
        or part.get("reasoning")
        or part.get("tool_calls")
        or part.get("function_call")
        or part.get("refusal")
    ):
        return None
    else:
        key, text = _CONTENT_KEY, part.get("content")
    found = key.findall(payload) if isinstance(text, str) and text else ()
    if len(found) != 1:
        return None
    start = payload.index(found[0]) + len(found[0])
    end = payload.find(b'"', start)
    while end > 0 and _escaped(payload, end):
        end = payload.find(b'"', end + 1)
    if end < 0:
        return None
    try:
        same = _fast_loads(payload[start - 1 : end + 1]) == text
    except ValueError:
        return None
    return (payload[:start], payload[end:]) if same else None


_CONTENT_KEY, _TEXT_KEY = re.compile(rb'"content"\s*:\s*"'), re.compile(rb'"text"\s*:\s*"')


def _escaped(data: bytes, at: int) -> bool:
    """Whether the byte at `at` follows an odd number of backslashes."""
    n = at
    while n > 0 and data[n - 1] == 0x5C:
        n -= 1
    return (at - n) % 2 == 1


def observe_whole(facts: Facts, body: bytes | bytearray) -> None:
    """Fold a whole JSON answer into `facts`."""
    try:
        facts.visible_whole = _observe_choices(facts, _loads(body), whole=True) is True
    except (ValueError, UnicodeDecodeError, TypeError, AttributeError):
        facts.error = facts.error or "a body that is not a completion object"


_BLANK = "blank"  # what `_observe_choices` says of content that is whitespace only: a token, but nothing to see


def _observe_choices(facts: Facts, doc, whole: bool) -> bool | str:
    """Record finish reasons, tool calls, usage and errors; True when the document shows the user something,
    `_BLANK` when all it shows is whitespace (a token the user cannot see), else False."""
    if not isinstance(doc, dict):
        raise TypeError
    if doc.get("object") == "error" or doc.get("error") is not None:
        facts.error = facts.error or "an error object"
        return False
    if isinstance(doc.get("usage"), dict):
        facts.usage = doc["usage"]
    choices = doc.get("choices")
    if choices is None and whole:
        raise TypeError  # a 200 answer without choices is not a completion
    visible: bool | str = False
    for choice in choices or ():
        index = choice.get("index", 0)
        part = choice.get("message" if whole else "delta")
        if part is None:  # /v1/completions
            shows = _shows(choice.get("text"))
        else:
            if part.get("reasoning_content") or part.get("reasoning"):
                facts.reasoning_chunks += 0 if whole else 1
            content, refusal = _shows(part.get("content")), _shows(part.get("refusal"))
            shows = content if content is True or not refusal else refusal
            if part.get("tool_calls") or part.get("function_call"):
                shows = _tool_calls(facts, index, part) or shows
        if shows:
            visible = True if shows is True else visible or _BLANK
            facts.choices.add(index)
        if reason := choice.get("finish_reason"):
            facts.finish[index] = reason if isinstance(reason, str) else _reason(reason)
    return visible


def _shows(text) -> bool | str:
    """True for text with something to see, `_BLANK` for whitespace only, False for none."""
    if not text:
        return False
    return _BLANK if isinstance(text, str) and text.isspace() else True


def _reason(reason) -> str:
    """SGLang's native `{"type": "stop", "matched": ...}` as its type; anything else as text."""
    kind = reason.get("type") if isinstance(reason, dict) else None
    return kind if isinstance(kind, str) and kind else str(reason)


def _tool_calls(facts: Facts, index: int, part: dict) -> bool:
    calls = part.get("tool_calls") or ()
    for call in calls:
        function = call.get("function") or {}
        at = call.get("index")
        if not isinstance(at, int) or isinstance(at, bool):
            at = _next_call(facts, index, function)
        _add_call(facts, (index, at), function)
    if part.get("function_call"):  # the legacy single function call
        _add_call(facts, (index, -1), part["function_call"])
    return bool(calls) or bool(part.get("function_call"))


def _next_call(facts: Facts, index: int, function: dict) -> int:
    """Where a call without an `index` goes: a new call when it names a function, else the last one of its choice."""
    last = max((n for c, n in facts.tools if c == index and n >= 0), default=-1)
    return last + 1 if function.get("name") or last < 0 else last


def _add_call(facts: Facts, key: tuple[int, int], function: dict) -> None:
    entry = facts.tools.setdefault(key, ["", ""])
    if function.get("name") and not entry[0]:
        entry[0] = function["name"]
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        if isinstance(entry[1], str):
            entry[1] += arguments
    elif arguments is not None:  # an object (or any other non-string): not the JSON text clients parse
        entry[1] = None


def _int(doc, key) -> int | None:
    value = doc.get(key) if isinstance(doc, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def token_counts(facts: Facts) -> tuple[int | None, int | None, int | None, int | None]:
    """(prompt, output, reasoning, visible) tokens: from `usage` where the engine gave it, else counted events
    (one token per event; streamed only). None where nothing says.

    Reasoning is `completion_tokens_details.reasoning_tokens` (OpenAI), else SGLang's top-level
    `usage.reasoning_tokens`; a reported 0 while reasoning was streamed (SGLang reports 0 until it counts them)
    gives way to the counted reasoning events. `visible` is per choice (the visible tokens over the choices that
    showed something), since n choices are decoded side by side: it is what time per output token divides by,
    so the whitespace events before the first visible token (one token each) are not in it.
    """
    usage = facts.usage or {}
    prompt, output = _int(usage, "prompt_tokens"), _int(usage, "completion_tokens")
    reasoning = _int(usage.get("completion_tokens_details"), "reasoning_tokens")
    if reasoning is None:
        reasoning = _int(usage, "reasoning_tokens")
    counted = facts.events > 0
    if not reasoning and counted and (reasoning is None or facts.reasoning_chunks):
        reasoning = facts.reasoning_chunks
    if output is None and counted:
        output = facts.visible_chunks + facts.reasoning_chunks + facts.blank_before
    if output is None:
        return prompt, None, reasoning, None
    visible = max(0, output - (reasoning or 0) - facts.blank_before)
    if len(facts.choices) > 1:
        visible = round(visible / len(facts.choices))
    return prompt, output, reasoning, visible
