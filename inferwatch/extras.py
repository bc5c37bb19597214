"""Which optional extra each command needs, and the one line that says so when it is not installed.

The core install (prometheus-client, pyyaml, typer) runs the text commands; each role's libraries are an extra
(pyproject.toml), so an exporter image carries no pandas. Every command is checked here and nowhere else
(inferwatch/clikit.py's `Command.invoke` calls `check` before the command and `explain` on a ModuleNotFoundError
from it): a command in ROLES is refused before it does anything when a module of its extras cannot be found, and
any other command that imports a module of an extra it lacks gets the same one line instead of a traceback.
"""

from __future__ import annotations

import importlib.util

from inferwatch.errors import InferwatchError

__all__ = ["EXTRAS", "ROLES", "MissingExtra", "check", "explain", "missing_modules"]

# extra (pyproject.toml's [project.optional-dependencies]) -> the modules it brings, as they are imported;
# uvloop is left out: the front door uses it where it is installed (never on Windows) and asyncio otherwise
EXTRAS: dict[str, tuple[str, ...]] = {
    "exporter": ("aiohttp",),
    "frontdoor": ("aiohttp", "orjson", "httptools"),
    "gpu": ("pynvml", "grpc"),
    "triage": ("pandas", "rich", "matplotlib"),
    "build": ("grafanalib", "promql_parser"),
    "sim": ("aiohttp",),
    "otel": ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http"),
}

# command (its words after `inferwatch`) -> the extras it cannot start without. Left out on purpose: commands
# that need none (normalize, slo compile/check/test/explain, mappings, deploy, doctor, cost, capacity compare), and
# `exporter gpu`, whose simulated backend needs none: its NVML backend imports pynvml (and grpc for the kubelet's
# PodResources API) as it starts, and `explain` names the gpu extra then; likewise `frontdoor --otlp-endpoint`
# (otel) and `capacity sweep --plot` (matplotlib, of the triage extra)
ROLES: dict[str, tuple[str, ...]] = {
    "exporter normalize": ("exporter",),
    "frontdoor": ("frontdoor",),
    "probe": ("frontdoor",),
    "triage": ("triage",),
    "build": ("build",),
    "dashboards build": ("build",),
    "dashboards lint": ("build",),
    "dashboards push": ("build",),
    "slo import": ("build",),
    "canary": ("build",),
    "simulate": ("sim",),
    "load": ("sim",),
    "capacity sweep": ("sim",),
    # two simulated engines, the exporter, a Prometheus fed the built rules, and triage at the end
    "demo": ("sim", "exporter", "build", "triage"),
}


class MissingExtra(InferwatchError):
    """A command's optional extra is not installed. Exit status 2, as for a usage error: the command did nothing
    (and `canary`'s or `doctor`'s status 1 keeps meaning what they found)."""

    exit_code = 2


def missing_modules(extra: str) -> list[str]:
    """The modules of `extra` that cannot be found (found, not imported: the check costs no import time)."""
    absent = []
    for module in EXTRAS[extra]:
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:  # a dotted name whose parent package is absent
            found = False
        if not found:
            absent.append(module)
    return absent


def _message(command: str, extras: list[str], modules: list[str]) -> str:
    quoted = [f"'{extra}'" for extra in extras]
    named = " and ".join([", ".join(quoted[:-1]), quoted[-1]] if len(quoted) > 1 else quoted)
    noun = "extra" if len(extras) == 1 else "extras"
    return (
        f"inferwatch {command} needs the {named} {noun} ({', '.join(modules)} not installed): "
        f"pip install 'inferwatch[{','.join(extras)}]'"
    )


def check(command: str) -> None:
    """Raise MissingExtra when `command` (e.g. "exporter normalize") is in ROLES and one of its extras is not
    installed."""
    lacking: dict[str, list[str]] = {}
    for extra in ROLES.get(command, ()):
        if absent := missing_modules(extra):
            lacking[extra] = absent
    if lacking:
        modules = sorted({module for absent in lacking.values() for module in absent})
        raise MissingExtra(_message(command, list(lacking), modules))


def explain(err: ModuleNotFoundError, command: str) -> MissingExtra | None:
    """The MissingExtra for a module `command` failed to import, if an extra brings that module (the command's
    own extras first); None for any other module (a bug, or a user's dashboard file importing its own)."""
    name = err.name or ""

    def brings(module: str) -> bool:
        return module == name or module.startswith(name + ".") or name.startswith(module + ".")

    extras = [extra for extra, modules in EXTRAS.items() if any(map(brings, modules))]
    if not extras:
        return None
    own = [extra for extra in extras if extra in ROLES.get(command, ())]
    return MissingExtra(_message(command, own[:1] or extras[:1], [name]))
