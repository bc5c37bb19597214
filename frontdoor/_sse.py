"""Server-sent events split from a byte stream however it is chunked, for metering a copy of what passes."""

from __future__ import annotations

__all__ = ["SSESplitter", "MAX_EVENT_BYTES"]

MAX_EVENT_BYTES = 16 * 1024 * 1024  # one event larger than this is not metered (the bytes still pass)

_DONE_LINES = (b"data: [DONE]", b"data:[DONE]")
_BOM = b"\xef\xbb\xbf"


class SSESplitter:
    """Feed chunks as they arrive; get back the `data` payload of each event they complete.

    One UTF-8 byte-order mark at the very start of the stream is dropped; lines end in LF, CRLF or CR; an empty
    line ends an event; `data:` lines of one event are joined with LF (a bare `data` line is an empty one);
    comments and other fields are skipped (WHATWG HTML, 9.2.6). Two things servers send are read beyond that:

    - `data: [DONE]` counts as soon as its line is whole, so a stream whose last event
      lacks the blank line after it (the connection closed first) still ends in `[DONE]`,
      as a client that reads to the end of the body sees it;
    - an `error:` field (llama.cpp's server writes a stream error so) and an event named
      `error` come back as `{"error": ...}`, so the meter sees the error instead of nothing.
    """

    __slots__ = ("_buffer", "overflow")

    def __init__(self) -> None:
        # a tuple until the stream's first bytes show whether they begin with a BOM
        self._buffer: bytes | tuple[bytes] = (b"",)
        self.overflow = False

    def feed(self, chunk: bytes) -> list[bytes]:
        if (
            not self._buffer
            and chunk.startswith(b"data:")
            and chunk.endswith(b"\n\n")
            and chunk.count(b"\n") == 2
            and b"\r" not in chunk
        ):  # the usual read: one one-line event
            return [chunk[6:-2] if chunk[5:6] == b" " else chunk[5:-2]]
        held_back = self._buffer
        if isinstance(held_back, tuple):  # the stream's start (the short path above never takes it)
            buffer = held_back[0] + chunk
            if len(buffer) < len(_BOM) and _BOM.startswith(buffer):
                self._buffer = (buffer,)  # maybe half of a BOM: wait for the rest
                return []
            buffer = buffer[len(_BOM) :] if buffer.startswith(_BOM) else buffer
        else:
            buffer = held_back + chunk if held_back else chunk
        held = b""
        if b"\r" in buffer:
            if buffer.endswith(b"\r"):  # may be half of a CRLF: keep it for the next chunk
                buffer, held = buffer[:-1], b"\r"
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")  # a lone CR ends a line too
        *events, rest = buffer.split(b"\n\n")
        if len(rest) > MAX_EVENT_BYTES:
            self.overflow, rest = True, b""
        payloads = [payload for event in events if (payload := _data(event)) is not None]
        if rest.strip(b"\n") in _DONE_LINES:  # its blank line may never come: the stream ends here either way
            payloads.append(b"[DONE]")
            rest = b"\n" if rest.endswith(b"\n") else b""
        self._buffer = rest + held
        return payloads


def _data(event: bytes) -> bytes | None:
    if event.startswith(b"data:") and b"\n" not in event:  # the usual one-line event
        return event[6:] if event[5:6] == b" " else event[5:]
    lines, name, error = [], None, None
    for line in event.split(b"\n"):
        field, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if field == b"data":
            lines.append(value)
        elif field == b"event":
            name = value
        elif field == b"error":  # llama.cpp: `error: {"code":500,"message":...}`
            error = value
    if error is not None:
        return b'{"error":' + (error or b'""') + b"}"
    if not lines:
        return None
    data = b"\n".join(lines)
    return b'{"error":' + data + b"}" if name == b"error" else data
