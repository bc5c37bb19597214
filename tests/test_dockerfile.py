"""The Dockerfile of the image the rendered manifests name, read as text (no docker here to build it): a pinned
python:3.11 slim base, a numeric non-root user equal to the manifests' runAsUser, `inferwatch` as entrypoint, and
the extras of the commands the manifests run."""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import replace

import yaml
from conftest import ROOT
from test_deploy import FULL

from inferwatch.deploy import parse_config, render
from inferwatch.deploy._workloads import UID
from inferwatch.extras import EXTRAS, ROLES

DOCKERFILE = ROOT / "Dockerfile"


def _instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def _final_stage() -> list[tuple[str, str]]:
    steps = _instructions()
    last = max(i for i, (op, _) in enumerate(steps) if op == "FROM")
    return steps[last:]


def test_every_base_image_is_python_3_11_slim_pinned_to_a_patch_release_or_digest():
    bases = [args.split()[0] for op, args in _instructions() if op == "FROM"]
    assert bases
    for base in bases:
        assert re.fullmatch(r"python:3\.11\.\d+-slim(-\w+)?(@sha256:[0-9a-f]{64})?", base), (
            f"{base}: pin python:3.11.PATCH-slim (or a digest), never a moving tag"
        )


def test_the_image_runs_as_the_numeric_non_root_user_the_manifests_set():
    users = [args for op, args in _final_stage() if op == "USER"]
    assert users, "the final stage must switch to a non-root USER"
    user, _, group = users[-1].partition(":")
    assert user.isdigit() and int(user) != 0 and int(user) == UID, users[-1]  # numeric: runAsNonRoot can verify it
    assert not group or (group.isdigit() and int(group) != 0)
    after = _final_stage()[[op for op, _ in _final_stage()].index("USER") :]
    assert not [args for op, args in after if op == "RUN"], "nothing runs as root after USER"


def test_it_installs_the_package_and_runs_inferwatch():
    assert any(op == "RUN" and 'pip install ".${EXTRAS:+[$EXTRAS]}"' in args for op, args in _instructions())
    entrypoint = [args for op, args in _final_stage() if op == "ENTRYPOINT"]
    assert entrypoint and json.loads(entrypoint[-1]) == ["inferwatch"]


def test_the_build_context_leaves_out_the_venv_and_git():
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", "tests"} <= set(ignored)


def _default_extras() -> set[str]:
    default = next(args for op, args in _instructions() if op == "ARG" and args.startswith("EXTRAS="))
    return set(default.removeprefix("EXTRAS=").split(","))


def _commands_the_manifests_run() -> list[list[str]]:
    """The argument lists of every container or service that runs the inferwatch image, for a config with every
    part on (tests/test_deploy.py's FULL), rendered for Kubernetes and for compose with simulated engines."""
    config = parse_config(yaml.safe_load(FULL), "full.yaml")
    found = []

    def walk(node) -> None:
        if isinstance(node, dict):
            if node.get("image") == config.image:
                words = [*(node.get("command") or []), *(node.get("args") or [])]
                found.append(words[1:] if words[:1] == ["inferwatch"] else words)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for target, cfg in (
        ("kubernetes", config),
        ("compose", replace(config, compose=replace(config.compose, simulate=True))),
    ):
        for name, text in render(cfg, target).items():
            if name.endswith((".yaml", ".yml")):
                for doc in yaml.safe_load_all(text):
                    walk(doc)
    return found


def test_the_image_carries_the_extras_of_every_command_the_manifests_run_and_no_more():
    """A role's command without its extra stops at once (inferwatch/extras.py): an image missing one fails in the
    cluster. Triage and the build (pandas, matplotlib, grafanalib) run where the user is, not in the image."""
    commands = _commands_the_manifests_run()
    assert {words[0] for words in commands} >= {"exporter", "frontdoor", "simulate"}, commands
    needed = set()
    for words in commands:
        role = next((" ".join(words[:n]) for n in (2, 1) if " ".join(words[:n]) in ROLES), None)
        needed |= set(ROLES.get(role, ()))
        if words[:2] == ["exporter", "gpu"]:
            needed.add("gpu")  # the NVML backend (checked as it starts, not by ROLES)
        if words[:1] == ["frontdoor"]:
            needed.add("otel")  # --otlp-endpoint: a flag the user adds to the rendered manifest
    assert needed == _default_extras()
    assert set(EXTRAS) - needed == {"triage", "build"}


def test_the_extras_argument_makes_the_install_spec():
    for extras_arg in ("exporter", "exporter,otel", ""):  # what the shell in the RUN line makes of the argument
        spec = subprocess.run(
            ["sh", "-c", 'echo ".${EXTRAS:+[$EXTRAS]}"'], env={"EXTRAS": extras_arg}, capture_output=True, text=True
        ).stdout.strip()
        assert spec == (f".[{extras_arg}]" if extras_arg else ".")
