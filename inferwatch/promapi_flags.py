"""The flags of every command that calls a Prometheus-like API (triage, doctor, canary): one options model,
`ConnectionOptions` (inferwatch/options.py), turned into one `ClientOptions`. Written once here: a command takes
`client: ClientOptions` as its last parameter and is decorated with `@connection_flags`, which shows the model's
flags in its place, in their own --help panel; triage/README.md's `connection-options` table is made from it."""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from inferwatch.options import flag_parameters, from_flags, option, options_of
from inferwatch.promapi import DEFAULT_MAX_BYTES, DEFAULT_TIMEOUT, ClientOptions

__all__ = ["ConnectionOptions", "client_options", "parse_header", "connection_flags"]

_PANEL = "Connection (auth, TLS, proxy, limits)"
_TOKEN_MAX = 64 * 1024


def parse_header(text: str) -> tuple[str, str]:
    """`Name: value` into (name, value); ValueError with an example otherwise."""
    name, sep, value = text.partition(":")
    if not sep or not name.strip() or any(c.isspace() for c in name.strip()) or "\n" in value or "\r" in value:
        raise ValueError(f"{text!r} is not a header; write 'Name: value', e.g. 'Authorization: Bearer TOKEN'")
    return name.strip(), value.strip()


def _basic_auth(text: str) -> tuple[str, str]:
    user, sep, password = text.partition(":")
    if not sep:
        raise ValueError("want USER:PASSWORD")
    return user, password


def _readable(flag: str) -> Callable[[Path], str]:
    """A file's parser: its path once it is a readable regular file; a missing, unreadable or oversized one is one
    line naming the flag, exit 2 (inferwatch/_files.py)."""

    def parse(path: Path) -> str:
        from inferwatch._files import check_readable

        return check_readable(path, flag)

    return parse


def _proxy(text: str) -> str:
    """An http(s) URL, or '' for none."""
    if not text:
        return text
    from inferwatch._urls import http_url

    return http_url(text, "http://proxy:3128")


def _token(path: Path) -> str:
    """The token in a file, read as every named input is (inferwatch/_files.py): a file that cannot be read, is
    too large for a token or is not text is one line naming it, exit 2."""
    from inferwatch._files import read_input_text
    from inferwatch.errors import InputError

    token = read_input_text(path, "--bearer-token-file", _TOKEN_MAX).strip()
    if not token or any(not c.isprintable() for c in token):
        raise InputError(f"--bearer-token-file {path}: want one line holding the token")
    return token


@dataclasses.dataclass(frozen=True)
class ConnectionOptions:
    """The connection flags, each checked by its field; what reads two flags (one auth, one way to trust the
    server, --key with --cert) is `client_options`. Flags only: no command reads them from a file."""

    header: tuple[tuple[str, str], ...] = option(
        (),
        "An HTTP header for every request, e.g. 'X-Scope-OrgID: tenant' (repeatable).",
        metavar="'NAME: VALUE'",
        parse=parse_header,
        repeatable=True,
        panel=_PANEL,
    )
    bearer_token: str | None = option(
        None,
        "Send 'Authorization: Bearer TOKEN'.",
        metavar="TOKEN",
        envvar="INFERWATCH_BEARER_TOKEN",
        panel=_PANEL,
    )
    bearer_token_file: Path | None = option(
        None, "Send this file's token as 'Authorization: Bearer'.", metavar="FILE", kind=Path, panel=_PANEL
    )
    basic_auth: tuple[str, str] | None = option(
        None,
        "HTTP basic auth.",
        metavar="USER:PASSWORD",
        envvar="INFERWATCH_BASIC_AUTH",
        parse=_basic_auth,
        panel=_PANEL,
    )
    ca_file: str | None = option(
        None,
        "Verify the server's TLS certificate with this CA bundle.",
        metavar="FILE",
        kind=Path,
        parse=_readable("--ca-file"),
        panel=_PANEL,
    )
    insecure: bool = option(False, "Do not verify the server's TLS certificate.", kind=bool, panel=_PANEL)
    cert: str | None = option(
        None,
        "Client certificate (PEM) for mutual TLS.",
        metavar="FILE",
        kind=Path,
        parse=_readable("--cert"),
        panel=_PANEL,
    )
    key: str | None = option(
        None, "The client certificate's key.", metavar="FILE", kind=Path, parse=_readable("--key"), panel=_PANEL
    )
    proxy: str | None = option(
        None,
        "An HTTP proxy for every request; '' for none [the environment's HTTP(S)_PROXY and NO_PROXY].",
        metavar="URL",
        parse=_proxy,
        panel=_PANEL,
    )
    timeout: float = option(
        DEFAULT_TIMEOUT,
        "The most one request may take, all of it (connect, wait, body).",
        metavar="SECONDS",
        kind=float,
        min=0.001,
        panel=_PANEL,
    )
    max_bytes: int = option(
        DEFAULT_MAX_BYTES,
        "The most bytes of answers held at once, after decompression (the concurrent queries share it).",
        metavar="BYTES",
        kind=int,
        min=1,
        panel=_PANEL,
    )


def _check_pairs(given: dict[str, Any]) -> None:
    """What reads two flags, as given (before any file is read): one usage line naming the flag."""
    from inferwatch.clikit import bad_flag

    token, token_file = given.get("bearer_token"), given.get("bearer_token_file")
    if token is not None and token_file is not None:
        bad_flag("--bearer-token", "give --bearer-token or --bearer-token-file, not both")
    if given.get("basic_auth") is not None and (token is not None or token_file is not None):
        bad_flag("--basic-auth", "give a bearer token or --basic-auth, not both")
    if given.get("insecure") and given.get("ca_file") is not None:
        bad_flag("--insecure", "give --ca-file or --insecure, not both")
    if given.get("key") is not None and given.get("cert") is None:
        bad_flag("--key", "--key goes with --cert FILE")


def client_options(given: dict[str, Any]) -> ClientOptions:
    """The flags as typer gives them, as ClientOptions; a wrong one is a usage error naming it (typer.BadParameter),
    a file that cannot be read one line naming it (InputError)."""
    _check_pairs(given)
    flags = from_flags(ConnectionOptions, given)
    token = _token(flags.bearer_token_file) if flags.bearer_token_file is not None else flags.bearer_token
    return ClientOptions(
        headers=flags.header,
        bearer_token=token,
        basic_auth=flags.basic_auth,
        ca_file=flags.ca_file,
        insecure=flags.insecure,
        cert=flags.cert,
        key=flags.key,
        proxy=flags.proxy,
        timeout=flags.timeout,
        max_bytes=flags.max_bytes,
    )


_Command = TypeVar("_Command", bound=Callable[..., Any])


def connection_flags(command: _Command) -> _Command:
    """`command(..., client: ClientOptions)` as typer sees it: `client` replaced by ConnectionOptions' flags, whose
    values become the ClientOptions it is called with (a wrong flag is a usage error naming it). Public Python
    only: the wrapper's `__signature__`, which typer reads as `inspect.signature` does."""
    signature = inspect.signature(command, eval_str=True)  # typer reads the annotations as objects
    if list(signature.parameters)[-1:] != ["client"]:
        raise TypeError(f"{command.__name__} takes `client: ClientOptions` as its last parameter")
    kept = [p for p in signature.parameters.values() if p.name != "client"]
    flags = flag_parameters(ConnectionOptions)
    names = [n.name for n in options_of(ConnectionOptions) if n.flag]

    @functools.wraps(command)
    def run(*args, **kwargs):
        given = {name: kwargs.pop(name) for name in names if name in kwargs}
        return command(*args, **kwargs, client=client_options(given))

    run.__signature__ = signature.replace(parameters=[*kept, *flags])  # type: ignore[attr-defined]
    return run  # type: ignore[return-value]
