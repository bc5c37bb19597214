"""The command line as a user first meets it: --version, help with examples and no Python types, and a start
that does not import what the command does not use."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys

import pytest
import typer.main
from conftest import ROOT
from typer.testing import CliRunner

from inferwatch import __version__
from inferwatch.cli import app


def _commands(group, path=()) -> list[list[str]]:
    """Every command and group of the CLI, as argument lists, found by walking the tree."""
    found = [list(path)]
    for name, command in getattr(group, "commands", {}).items():
        found += _commands(command, (*path, name))
    return found


COMMANDS = _commands(typer.main.get_command(app))


def _is_leaf(path: list[str]) -> bool:
    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]
    return not hasattr(command, "commands")


MAIN = [[], *filter(_is_leaf, COMMANDS)]  # the top and every leaf: the README says each shows examples


def _help(command: list[str]) -> str:
    result = CliRunner().invoke(app, [*command, "--help"], prog_name="inferwatch", terminal_width=100)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "inferwatch")
def test_help_shows_no_python_types(command):
    text = _help(command)
    assert not re.search(r"<(bool|str|int|float|path|list\[|Path)", text), text
    assert "{" not in text.split("\n", 1)[0], "usage line spells a required argument as {X}"


def test_every_command_is_a_clikit_command():
    """A package's `_cli.py` builds its commands with `cls=Command`, which keeps arguments in the user's words."""
    from inferwatch.clikit import Command

    def leaf(path):
        command = typer.main.get_command(app)
        for name in path:
            command = command.commands[name]
        return command

    assert [" ".join(path) for path in MAIN[1:] if not isinstance(leaf(path), Command)] == []


@pytest.mark.parametrize("command", MAIN, ids=lambda c: " ".join(c) or "inferwatch")
def test_main_commands_show_examples(command):
    assert re.search(r"\n  Examples?:\n    (inferwatch|curl|GRAFANA_TOKEN)", _help(command))


def test_version():
    proc = subprocess.run([sys.executable, "-m", "inferwatch", "--version"], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout == f"inferwatch {__version__}\n"


def test_grafana_url_is_marked_required():
    line = next(ln for ln in _help(["dashboards", "push"]).splitlines() if ln.startswith("  --grafana-url"))
    assert "[required]" in line


def test_engine_version_lists_every_simulated_release():
    from inferwatch.sim import releases

    text = " ".join(_help(["simulate"]).split())
    for engine in ("vllm", "sglang"):
        assert f"{engine} {', '.join(releases(engine))}" in text


def test_build_help_names_everything_it_writes():
    text = _help(["build"])
    for where in (
        "prometheus/",
        "prometheus/rules/",
        "promtool tests",
        "alertmanager/",
        "grafana/dashboards/",
        "mappings/generated/",
        "alerts/",
        "dashboards/",
    ):
        assert where in text, where


def test_build_check_says_up_to_date(monkeypatch):
    from inferwatch import build

    monkeypatch.setattr(build, "check", lambda: [])
    result = CliRunner().invoke(app, ["build", "--check"], prog_name="inferwatch")
    assert result.exit_code == 0 and result.output.startswith("up to date")


HEAVY = ("aiohttp", "ssl", "pydantic", "rich", "grafanalib", "prometheus_client", "inferwatch.sim.")
# typer from 0.2x converts every flag's value through pydantic, a dependency of its own: a command that takes flags
# then imports it (older typer did not, and then nothing may)
TYPER_USES_PYDANTIC = any(r.startswith("pydantic") for r in importlib.metadata.requires("typer") or ())


def _imported(code: str) -> set[str]:
    proc = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys; print('\\n' + ' '.join(sys.modules))"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    return set(proc.stdout.splitlines()[-1].split())


def _heavy(modules: set[str], allowed: tuple[str, ...] = ()) -> set[str]:
    """The heavy modules among `modules`; a package's command-line modules (`inferwatch.sim._cli`,
    `inferwatch.sim._cli_capacity`) are not."""
    return {
        m
        for m in modules
        if (m.split(".")[0] in HEAVY or m.startswith(HEAVY))
        and not m.rsplit(".", 1)[-1].startswith("_cli")
        and not m.startswith(allowed)
    }


def test_importing_the_cli_imports_nothing_heavy():
    assert not _heavy(_imported("import inferwatch.cli"))


def test_normalize_imports_nothing_heavy(tmp_path):
    """A text rewrite needs no HTTP stack and no simulator; pydantic only where typer itself converts through it."""
    path = tmp_path / "in.txt"
    path.write_text("# TYPE tgi_queue_size gauge\ntgi_queue_size 1\n")
    modules = _imported(
        f"import sys\nsys.argv = ['inferwatch', 'normalize', '--drop-unmapped', '-m', "
        f"{str(ROOT / 'mappings/examples/tgi.yaml')!r}, {str(path)!r}]\n"
        "from inferwatch.cli import main\ntry:\n    main()\nexcept SystemExit as exit:\n"
        "    assert exit.code == 0, exit.code"
    )
    allowed = ("pydantic",) if TYPER_USES_PYDANTIC else ()
    assert "inferwatch.exporters._normalize" in modules and not _heavy(modules, allowed)
