"""One JSON line per request, ready for Loki or Vector: times, ids, labels, status, outcome, token counts.

Never a prompt, an output, a header value or an API key: the record is built
from named fields only. What a client chose (request id, caller, model, method,
path) is cut to LONGEST characters, so no request writes a long line; JSON
escapes the control characters, and what UTF-8 cannot encode reads `?`.
"""

from __future__ import annotations

import json
import sys
import time

from inferwatch.frontdoor._caller import encodable

__all__ = ["AccessLog", "access_record", "LONGEST"]

LONGEST = 256  # characters of a field a client chose; more are cut and marked with `...`


def _capped(text: str | None) -> str | None:
    return text if text is None or len(text) <= LONGEST else text[:LONGEST] + "..."


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)


def access_record(
    *,
    request_id: str,
    caller: str,
    model: str | None,
    upstream: str,
    method: str,
    path: str,
    status: int,
    outcome: str | None,
    stream: bool,
    times: dict,
    tokens,
    now: float | None = None,
) -> dict:
    """The log line of one request, as a dict; times in milliseconds, `time` in UTC (RFC 3339)."""
    now = time.time() if now is None else now
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"
    prompt, output, reasoning = tokens
    return {
        "time": stamp,
        "request_id": _capped(request_id),
        "caller": _capped(caller),
        "model": _capped(model),
        "upstream": upstream,
        "method": _capped(method),
        "path": _capped(path),
        "status": status,
        "outcome": outcome,
        "stream": stream,
        "first_chunk_ms": _ms(times.get("ttfc")),
        "first_token_ms": _ms(times.get("ttft")),
        "time_per_output_token_ms": _ms(times.get("tpot")),
        "duration_ms": _ms(times.get("duration")),
        "prompt_tokens": prompt,
        "output_tokens": output,
        "reasoning_tokens": reasoning,
    }


class AccessLog:
    """Appends lines to a file, or writes them to standard output for `-`."""

    def __init__(self, target: str):
        self._file = sys.stdout if target == "-" else open(target, "a", encoding="utf-8")  # noqa: SIM115

    def write(self, record: dict) -> None:
        self._file.write(encodable(json.dumps(record, separators=(",", ":"), ensure_ascii=False)) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not sys.stdout:
            self._file.close()
