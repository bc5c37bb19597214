"""Every command that reads a Prometheus-like API (triage, canary, doctor) takes the same connection flags, written
once (inferwatch/promapi_flags.py ConnectionOptions), and reaches a real Prometheus behind basic auth with them."""

from __future__ import annotations

import base64
import subprocess
import sys
import time

import pytest
import typer
from conftest import need
from promtools import process

from inferwatch.options import options_of
from inferwatch.promapi import ApiError, Client, ClientOptions
from inferwatch.promapi_flags import ConnectionOptions
from inferwatch.sim._demo import free_port

COMMANDS = ("triage", "canary", "doctor")
CANARY = ("--model", "m", "--canary", 'version="v2"', "--stable", 'version="v1"')
ARGS = {"triage": ("--since", "10m"), "canary": CANARY, "doctor": ("--no-alertmanager",)}
# Prometheus' web config takes bcrypt hashes: this one is of "s3cret" at cost 4 (cheap: every request checks it)
USERS = {"watcher": "$2b$04$yUgRvxG3m4eAzAjTCsBNQeOgjM7b0BystXaueThTAMngNPAq.mDtK"}


def _params(name: str) -> dict[str, object]:
    from inferwatch.cli import app

    group = typer.main.get_command(app)
    command = group.get_command(typer.Context(group), name)  # type: ignore[attr-defined]
    return {p.name: p for p in command.params}


@pytest.mark.parametrize("name", COMMANDS)
def test_each_command_has_every_connection_flag_with_one_help(name):
    params = _params(name)
    reference = _params("triage")
    for named in options_of(ConnectionOptions):
        flag, default = named.name, named.default
        assert flag in params, (name, flag)
        mine, theirs = params[flag], reference[flag]
        assert (mine.opts, mine.help, mine.default, mine.envvar) == (
            theirs.opts,
            theirs.help,
            theirs.default,
            theirs.envvar,
        )
        assert mine.default == default or (default == () and not mine.default)
    assert "client" not in params


@pytest.mark.parametrize("name", COMMANDS)
def test_a_wrong_connection_flag_is_a_usage_error_naming_it_on_every_command(name):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "inferwatch",
            name,
            "--prometheus",
            "http://127.0.0.1:9",
            *ARGS[name],
            "--basic-auth",
            "nocolon",
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2, done.stderr
    assert "--basic-auth" in done.stderr and "USER:PASSWORD" in done.stderr and "Traceback" not in done.stderr


def _wait_ready(base: str, options: ClientOptions, proc: subprocess.Popen) -> None:
    """/-/ready through the client itself (behind auth, a bare GET is refused)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            Client(base, options).text("/-/ready")
            return
        except ApiError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    """A real Prometheus that answers only with basic auth (its own web config)."""
    import yaml

    binary = need("prometheus")
    work = tmp_path_factory.mktemp("guarded")
    (work / "web.yml").write_text(yaml.safe_dump({"basic_auth_users": USERS}))
    (work / "prometheus.yml").write_text(yaml.safe_dump({"global": {"scrape_interval": "15s"}}))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    args = [
        binary,
        f"--config.file={work / 'prometheus.yml'}",
        f"--storage.tsdb.path={work / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        f"--web.config.file={work / 'web.yml'}",
    ]
    with process(args, work / "prometheus.log") as proc:
        _wait_ready(base, ClientOptions(basic_auth=("watcher", "s3cret")), proc)
        yield base


def _run(name: str, base: str, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "inferwatch", name, "--prometheus", base, *ARGS[name], *flags],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("name", COMMANDS)
def test_without_credentials_every_command_says_401_and_how_to_pass_them(guarded, name):
    done = _run(name, guarded)
    text = done.stdout + done.stderr
    assert "HTTP 401" in text and "--basic-auth USER:PASSWORD" in text, text
    assert "Traceback" not in text


@pytest.mark.parametrize(
    "flags",
    [
        ("--basic-auth", "watcher:s3cret"),
        ("--header", "Authorization: Basic " + base64.b64encode(b"watcher:s3cret").decode()),
    ],
    ids=["basic-auth", "header"],
)
@pytest.mark.parametrize("name", COMMANDS)
def test_with_credentials_every_command_gets_past_the_guard(guarded, name, flags):
    done = _run(name, guarded, *flags)
    text = done.stdout + done.stderr
    assert "401" not in text and "Traceback" not in text, text
    # what each says of an empty Prometheus, read through the guard, and its exit status for that
    expected, code = {
        "triage": ("no model has engine series", 1),
        "canary": ("INCONCLUSIVE", 3),
        "doctor": ("Prometheus", None),
    }[name]
    assert expected in text, text
    assert code is None or done.returncode == code, (done.returncode, text)


@pytest.mark.parametrize(
    "given, flag, words",
    [
        ({"header": ["nocolon"]}, "--header", "is not a header"),
        ({"bearer_token": "t", "bearer_token_file": "f"}, "--bearer-token", "not both"),
        ({"bearer_token": "t", "basic_auth": "u:p"}, "--basic-auth", "not both"),
        ({"basic_auth": "nocolon"}, "--basic-auth", "USER:PASSWORD"),
        ({"insecure": True, "ca_file": "ca.pem"}, "--insecure", "not both"),
        ({"key": "k.pem"}, "--key", "goes with --cert"),
        ({"proxy": "not-a-url"}, "--proxy", "is not an http"),
    ],
)
def test_each_connection_check_names_its_flag(given, flag, words):
    """ConnectionOptions' fields check one flag each; client_options what reads two: a usage error naming it."""
    from inferwatch.promapi_flags import client_options

    with pytest.raises(typer.BadParameter, match=words) as err:
        client_options(given)
    assert err.value.param_hint == flag


def test_the_flags_become_the_client_options(tmp_path):
    from inferwatch.promapi import DEFAULT_MAX_BYTES, DEFAULT_TIMEOUT
    from inferwatch.promapi_flags import client_options

    token = tmp_path / "token"
    token.write_text("s3cret\n")
    made = client_options({"header": ["X-Scope-OrgID: a"], "bearer_token_file": token, "proxy": ""})
    assert made == ClientOptions(
        headers=(("X-Scope-OrgID", "a"),),
        bearer_token="s3cret",
        proxy="",
        timeout=DEFAULT_TIMEOUT,
        max_bytes=DEFAULT_MAX_BYTES,
    )
