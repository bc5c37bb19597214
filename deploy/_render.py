"""Render a deploy config for a target: the one entry point the CLI and `inferwatch build` call."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from inferwatch.deploy._config import Config
from inferwatch.deploy._inputs import gather_inputs

__all__ = ["TARGETS", "DEFAULT_FOLDERS", "render", "render_default"]

TARGETS = ("kubernetes", "compose")
# the default render as checked in under deploy/: folder -> (target, backend)
DEFAULT_FOLDERS = {
    "kubernetes": ("kubernetes", "prometheus"),
    "compose": ("compose", "prometheus"),
    "kubernetes-victoriametrics": ("kubernetes", "victoriametrics"),
    "compose-victoriametrics": ("compose", "victoriametrics"),
}


def _renderer(target: str):
    from inferwatch.deploy._compose import render_compose
    from inferwatch.deploy._kubernetes import render_kubernetes

    return {"kubernetes": render_kubernetes, "compose": render_compose}[target]


def render(config: Config, target: str = "kubernetes", dashboards: dict[str, str] | None = None) -> dict[str, str]:
    """{path under the output folder: text} for one target, on the config's backend."""
    source = "the embedded defaults" if config.file.startswith("<") else Path(config.file).name
    return _renderer(target)(config, gather_inputs(config, dashboards), source)


def render_default(dashboards: dict[str, str] | None = None) -> dict[str, str]:
    """Every target and backend of the embedded defaults, as checked in: {"kubernetes/...": text,
    "compose-victoriametrics/...": text, ...} (DEFAULT_FOLDERS)."""
    config = Config()
    inputs = gather_inputs(config, dashboards)  # compiled once: the backend changes no rule
    return {
        f"{folder}/{path}": text
        for folder, (target, backend) in DEFAULT_FOLDERS.items()
        for path, text in _renderer(target)(replace(config, backend=backend), inputs, "the embedded defaults").items()
    }
