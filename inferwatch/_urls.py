"""HTTP addresses as users type them: a URL with a scheme, or a bare HOST:PORT; never a guessed host name."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

__all__ = ["http_url", "listen_address", "openai_server_url"]

_HOST_PORT = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):[0-9]+")


def http_url(text: str, example: str) -> str:
    """`text` as an http(s) URL: one with a scheme as given, `HOST:PORT[/path]` with http:// added.

    A bare word (`not-a-url`) is refused rather than taken as a host name; ValueError says what is valid.
    """
    wrong = f"{text!r} is not an http(s) URL or HOST:PORT, e.g. {example}"
    if "://" not in text:
        if not _HOST_PORT.fullmatch(text.split("/", 1)[0]):
            raise ValueError(wrong)
        text = "http://" + text
    parts = urlsplit(text)
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"{wrong} (port out of range)") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or port == 0:
        raise ValueError(wrong)
    return text


def openai_server_url(text: str) -> str:
    """A server's base URL from `http://host:port`, its OpenAI base URL `http://host:port/v1`, or `host:port`.

    A query or fragment is refused: paths are appended to a base URL, which would then be wrong.
    """
    example = "http://localhost:8000, http://localhost:8000/v1 or localhost:8000"
    url = http_url(text.strip(), example).rstrip("/")
    parts = urlsplit(url)
    if parts.query or parts.fragment:
        raise ValueError(
            f"{text!r} is a base URL with a query or fragment: give only scheme, host, port and path, e.g. {example}"
        )
    return url[: -len("/v1")] if url.endswith("/v1") else url


def listen_address(text: str, example: str) -> tuple[str, int]:
    """(host, port) from `HOST:PORT`, `:PORT` (every address) or `[::1]:PORT`; ValueError names `example`."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{text!r} is not HOST:PORT, e.g. {example}")
    return host.strip("[]") or "0.0.0.0", int(port)
