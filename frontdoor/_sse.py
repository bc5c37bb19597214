"""Server-sent events split from a byte stream however it is chunked, for metering a copy of what passes."""

from __future__ import annotations

__all__ = ["SSESplitter", "MAX_EVENT_BYTES"]

MAX_EVENT_BYTES = 16 * 1024 * 1024   # one event larger than this is not metered (the bytes still pass)


class SSESplitter:
    """Feed chunks as they arrive; get back the `data` payload of each event they complete.

    Lines end in LF or CRLF; an empty line ends an event; `data:` lines of one event
    are joined with LF; comments and other fields are skipped (WHATWG HTML, 9.2.6).
    """

    __slots__ = ("_buffer", "overflow")

    def __init__(self) -> None:
        self._buffer = b""
        self.overflow = False

    def feed(self, chunk: bytes) -> list[bytes]:
        if (not self._buffer and chunk.startswith(b"data:") and chunk.endswith(b"\n\n")
                and chunk.count(b"\n") == 2 and b"\r" not in chunk):     # the usual read: one one-line event
            return [chunk[6:-2] if chunk[5:6] == b" " else chunk[5:-2]]
        buffer = self._buffer + chunk if self._buffer else chunk
        if b"\r" in buffer:
            tail = buffer.endswith(b"\r")
            buffer = buffer.replace(b"\r\n", b"\n")
            if tail:                       # a CR at the end may be half of a CRLF: wait for the next chunk
                self._buffer = buffer
                return []
        *events, rest = buffer.split(b"\n\n")
        if len(rest) > MAX_EVENT_BYTES:
            self.overflow, rest = True, b""
        self._buffer = rest
        return [payload for event in events if (payload := _data(event)) is not None]


def _data(event: bytes) -> bytes | None:
    if event.startswith(b"data:") and b"\n" not in event:           # the usual one-line event
        return event[6:] if event[5:6] == b" " else event[5:]
    lines = [line[6:] if line[5:6] == b" " else line[5:] for line in event.split(b"\n") if line.startswith(b"data:")]
    return b"\n".join(lines) if lines else None
