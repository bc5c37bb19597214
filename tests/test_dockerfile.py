"""The Dockerfile of the image the rendered manifests name, read as text (no docker here to build it): a pinned
python:3.11 slim base, a numeric non-root user equal to the manifests' runAsUser, `inferwatch` as entrypoint."""

from __future__ import annotations

import json
import re
import subprocess
import tomllib

from conftest import ROOT

from inferwatch.deploy._workloads import UID

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


def test_the_image_carries_every_optional_extra_by_default():
    """The front door's OTLP export is an extra: an image without it fails `--otlp-endpoint` in the cluster."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    shipped = set(extras) - {"test"}
    default = next(args for op, args in _instructions() if op == "ARG" and args.startswith("EXTRAS="))
    assert set(default.removeprefix("EXTRAS=").split(",")) == shipped
    for extras_arg in ("otel", ""):  # what the shell in the RUN line makes of the argument
        spec = subprocess.run(
            ["sh", "-c", 'echo ".${EXTRAS:+[$EXTRAS]}"'], env={"EXTRAS": extras_arg}, capture_output=True, text=True
        ).stdout.strip()
        assert spec == (f".[{extras_arg}]" if extras_arg else ".")
