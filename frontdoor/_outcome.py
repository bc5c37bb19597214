"""How a request ended, as users feel it: one outcome per request, from pure facts.

    cancelled          the client went away first
    timeout            the upstream did not connect, or went silent longer than the idle timeout
    rate_limited       429
    error              5xx, no upstream, an error object or finish reason error/abort/repetition (vLLM's stop of
                       a degenerate, repeating answer), a body that is not JSON
    invalid_request    any other 4xx: the caller's mistake (left out of `answered`, like cancelled)
    truncated          200, but the stream ended without a finish_reason or [DONE], or the body was cut
    content_filter     a finish reason content_filter
    length             a finish reason length
    tool_call_invalid  a tool call with arguments that are not a JSON object, a function that was not offered,
                       or arguments against the offered schema's required keys and types
    empty              nothing visible (whitespace only is not) and no tool call
    ok                 everything else

The order above is the precedence: the first that applies wins.
"""

from __future__ import annotations

import json

from inferwatch.frontdoor._meter import Facts
from inferwatch.frontdoor._schema import schema_problem

__all__ = ["OUTCOMES", "classify", "tool_call_problem"]

OUTCOMES = (
    "ok",
    "error",
    "rate_limited",
    "timeout",
    "cancelled",
    "truncated",
    "length",
    "empty",
    "tool_call_invalid",
    "content_filter",
    "invalid_request",
)
FAILED_REASONS = {"error", "abort", "repetition"}  # finish reasons of a failed answer
ENDINGS = ("complete", "cancelled", "timeout", "unreachable", "broken")  # how the exchange itself ended


def tool_call_problem(calls, offered: dict | None) -> str | None:
    """Why one of `calls` ([name, arguments] pairs) is not a valid call of an `offered` function, or None.
    `arguments` is the JSON text the call sent; anything but a string (the meter keeps None for arguments sent
    as an object or any other non-string) is not a call in the shape clients parse."""
    for name, arguments in calls:
        if offered is None or name not in offered:
            return f"function {name!r} was not offered"
        if not isinstance(arguments, str):
            return f"arguments of {name} are not a JSON string"
        try:
            value = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return f"arguments of {name} are not JSON"
        if not isinstance(value, dict):
            return f"arguments of {name} are not a JSON object"
        if problem := schema_problem(offered[name], value):
            return f"{name}: {problem}"
    return None


def classify(status: int | None, ended: str, facts: Facts, stream: bool, offered: dict | None) -> str:
    """The outcome of one request. `status` is the upstream's (None: no answer); `ended` one of ENDINGS."""
    if ended == "cancelled" and stream and facts.done:
        ended = "complete"  # the client left after [DONE]: it had the whole answer
    if ended in ("cancelled", "timeout"):
        return ended
    if status is None or status >= 500:
        return "error"
    if status == 429:
        return "rate_limited"
    if status >= 400:
        return "invalid_request"
    reasons = set(facts.finish.values())
    if facts.error or status != 200 or reasons & FAILED_REASONS:  # a 204 or a 3xx is no completion
        return "error"
    if ended == "broken" or not facts.finish or (stream and not facts.done):
        return "truncated"
    for reason in ("content_filter", "length"):
        if reason in reasons:
            return reason
    if facts.tools and tool_call_problem(facts.tools.values(), offered):
        return "tool_call_invalid"
    if not (facts.first_visible is not None or facts.visible_whole or facts.tools):  # whitespace is not seen
        return "empty"
    return "ok"
