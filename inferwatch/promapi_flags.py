"""The flags of every command that calls a Prometheus-like API (triage, doctor, canary): the same names, help and
checks, turned into one `ClientOptions`. Written once here: a command takes `client: ClientOptions` as its last
parameter and is decorated with `@connection_flags`, which shows these flags in its place."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from inferwatch.promapi import DEFAULT_MAX_BYTES, DEFAULT_TIMEOUT, ClientOptions

__all__ = [
    "HeaderOpt",
    "BearerTokenOpt",
    "BearerTokenFileOpt",
    "BasicAuthOpt",
    "CaFileOpt",
    "InsecureOpt",
    "CertOpt",
    "KeyOpt",
    "ProxyOpt",
    "TimeoutOpt",
    "MaxBytesOpt",
    "options",
    "parse_header",
    "connection_flags",
]

_PANEL = "Connection (auth, TLS, proxy, limits)"
_TOKEN_MAX = 64 * 1024

HeaderOpt = Annotated[
    list[str],
    typer.Option(
        metavar="'NAME: VALUE'",
        rich_help_panel=_PANEL,
        help="An HTTP header for every request, e.g. 'X-Scope-OrgID: tenant' (repeatable).",
    ),
]
BearerTokenOpt = Annotated[
    str | None,
    typer.Option(
        metavar="TOKEN",
        envvar="INFERWATCH_BEARER_TOKEN",
        show_default=False,
        rich_help_panel=_PANEL,
        help="Send 'Authorization: Bearer TOKEN'.",
    ),
]
BearerTokenFileOpt = Annotated[
    Path | None,
    typer.Option(
        metavar="FILE",
        show_default=False,
        rich_help_panel=_PANEL,
        help="Send this file's token as 'Authorization: Bearer'.",
    ),
]
BasicAuthOpt = Annotated[
    str | None,
    typer.Option(
        metavar="USER:PASSWORD",
        envvar="INFERWATCH_BASIC_AUTH",
        show_default=False,
        rich_help_panel=_PANEL,
        help="HTTP basic auth.",
    ),
]
CaFileOpt = Annotated[
    Path | None,
    typer.Option(
        metavar="FILE",
        show_default=False,
        rich_help_panel=_PANEL,
        help="Verify the server's TLS certificate with this CA bundle.",
    ),
]
InsecureOpt = Annotated[
    bool, typer.Option("--insecure", rich_help_panel=_PANEL, help="Do not verify the server's TLS certificate.")
]
CertOpt = Annotated[
    Path | None,
    typer.Option(
        metavar="FILE", show_default=False, rich_help_panel=_PANEL, help="Client certificate (PEM) for mutual TLS."
    ),
]
KeyOpt = Annotated[
    Path | None,
    typer.Option(metavar="FILE", show_default=False, rich_help_panel=_PANEL, help="The client certificate's key."),
]
ProxyOpt = Annotated[
    str | None,
    typer.Option(
        metavar="URL",
        show_default=False,
        rich_help_panel=_PANEL,
        help="An HTTP proxy for every request; '' for none [the environment's HTTP(S)_PROXY and NO_PROXY].",
    ),
]
TimeoutOpt = Annotated[
    float,
    typer.Option(
        metavar="SECONDS",
        rich_help_panel=_PANEL,
        min=0.001,
        help="The most one request may take, all of it (connect, wait, body).",
    ),
]
MaxBytesOpt = Annotated[
    int,
    typer.Option(
        metavar="BYTES",
        rich_help_panel=_PANEL,
        min=1,
        help="The most bytes of answers held at once, after decompression (the concurrent queries share it).",
    ),
]
DEFAULTS: dict[str, Any] = {"timeout": DEFAULT_TIMEOUT, "max_bytes": DEFAULT_MAX_BYTES}


def parse_header(text: str) -> tuple[str, str]:
    """`Name: value` into (name, value); ValueError with an example otherwise."""
    name, sep, value = text.partition(":")
    if not sep or not name.strip() or any(c.isspace() for c in name.strip()) or "\n" in value or "\r" in value:
        raise ValueError(f"{text!r} is not a header; write 'Name: value', e.g. 'Authorization: Bearer TOKEN'")
    return name.strip(), value.strip()


def _token(path: Path) -> str:
    """The token in a file, read as every named input is (inferwatch/_files.py): a file that cannot be read, is
    too large for a token or is not text is one line naming it, exit 2."""
    from inferwatch._files import read_input_text
    from inferwatch.errors import InputError

    token = read_input_text(path, "--bearer-token-file", _TOKEN_MAX).strip()
    if not token or any(not c.isprintable() for c in token):
        raise InputError(f"--bearer-token-file {path}: want one line holding the token")
    return token


def options(
    header: list[str],
    bearer_token: str | None,
    bearer_token_file: Path | None,
    basic_auth: str | None,
    ca_file: Path | None,
    insecure: bool,
    cert: Path | None,
    key: Path | None,
    proxy: str | None,
    timeout: float,
    max_bytes: int,
) -> ClientOptions:
    """The flags as ClientOptions; typer.BadParameter names the flag that is wrong."""
    headers = []
    for text in header:
        try:
            headers.append(parse_header(text))
        except ValueError as err:
            raise typer.BadParameter(str(err), param_hint="--header") from None
    if bearer_token is not None and bearer_token_file is not None:
        raise typer.BadParameter("give --bearer-token or --bearer-token-file, not both", param_hint="--bearer-token")
    if basic_auth is not None and (bearer_token is not None or bearer_token_file is not None):
        raise typer.BadParameter("give a bearer token or --basic-auth, not both", param_hint="--basic-auth")
    user, sep, password = (basic_auth or "").partition(":")
    if basic_auth is not None and not sep:
        raise typer.BadParameter("want USER:PASSWORD", param_hint="--basic-auth")
    if insecure and ca_file is not None:
        raise typer.BadParameter("give --ca-file or --insecure, not both", param_hint="--insecure")
    if key is not None and cert is None:
        raise typer.BadParameter("--key goes with --cert FILE", param_hint="--key")
    from inferwatch._files import check_readable

    for flag, path in (("--ca-file", ca_file), ("--cert", cert), ("--key", key)):
        if path is not None:
            check_readable(path, flag)  # a missing, unreadable or oversized file: one line, exit 2
    if proxy:
        from inferwatch._urls import http_url

        try:
            proxy = http_url(proxy, "http://proxy:3128")
        except ValueError as err:
            raise typer.BadParameter(str(err), param_hint="--proxy") from None
    token = _token(bearer_token_file) if bearer_token_file is not None else bearer_token
    return ClientOptions(
        headers=tuple(headers),
        bearer_token=token,
        basic_auth=(user, password) if basic_auth is not None else None,
        ca_file=str(ca_file) if ca_file else None,
        insecure=insecure,
        cert=str(cert) if cert else None,
        key=str(key) if key else None,
        proxy=proxy,
        timeout=timeout,
        max_bytes=max_bytes,
    )


# the flags in the order --help lists them: (parameter name, its typer annotation, its default)
FLAGS: tuple[tuple[str, Any, Any], ...] = (
    ("header", HeaderOpt, []),
    ("bearer_token", BearerTokenOpt, None),
    ("bearer_token_file", BearerTokenFileOpt, None),
    ("basic_auth", BasicAuthOpt, None),
    ("ca_file", CaFileOpt, None),
    ("insecure", InsecureOpt, False),
    ("cert", CertOpt, None),
    ("key", KeyOpt, None),
    ("proxy", ProxyOpt, None),
    ("timeout", TimeoutOpt, DEFAULTS["timeout"]),
    ("max_bytes", MaxBytesOpt, DEFAULTS["max_bytes"]),
)
_Command = TypeVar("_Command", bound=Callable[..., Any])


def connection_flags(command: _Command) -> _Command:
    """`command(..., client: ClientOptions)` as typer sees it: `client` replaced by FLAGS, whose values become
    the ClientOptions it is called with (a wrong flag is a usage error naming it). Public Python only: the
    wrapper's `__signature__`, which typer reads as `inspect.signature` does."""
    signature = inspect.signature(command, eval_str=True)  # typer reads the annotations as objects
    if list(signature.parameters)[-1:] != ["client"]:
        raise TypeError(f"{command.__name__} takes `client: ClientOptions` as its last parameter")
    kept = [p for p in signature.parameters.values() if p.name != "client"]
    flags = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=kind, default=default)
        for name, kind, default in FLAGS
    ]

    @functools.wraps(command)
    def run(*args, **kwargs):
        values = {name: kwargs.pop(name, default) for name, _, default in FLAGS}
        return command(*args, **kwargs, client=options(**values))

    run.__signature__ = signature.replace(parameters=[*kept, *flags])  # type: ignore[attr-defined]
    return run  # type: ignore[return-value]
