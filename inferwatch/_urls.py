"""HTTP addresses as users type them: a URL with a scheme, or a bare HOST:PORT; never a guessed host name."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

__all__ = ["http_url", "openai_server_url"]

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
    """A server's base URL from `http://host:port`, its OpenAI base URL `http://host:port/v1`, or `host:port`."""
    url = http_url(text.strip(), "http://localhost:8000, http://localhost:8000/v1 or localhost:8000").rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url
