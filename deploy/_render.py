"""Render a deploy config for a target: the one entry point the CLI and `inferwatch build` call."""

from __future__ import annotations

from pathlib import Path

from inferwatch.deploy._config import Config
from inferwatch.deploy._inputs import gather_inputs

__all__ = ["TARGETS", "render", "render_default"]

TARGETS = ("kubernetes", "compose")


def _renderer(target: str):
    from inferwatch.deploy._compose import render_compose
    from inferwatch.deploy._kubernetes import render_kubernetes

    return {"kubernetes": render_kubernetes, "compose": render_compose}[target]


def render(config: Config, target: str = "kubernetes", dashboards: dict[str, str] | None = None) -> dict[str, str]:
    """{path under the output folder: text} for one target."""
    source = "the embedded defaults" if config.file.startswith("<") else Path(config.file).name
    return _renderer(target)(config, gather_inputs(config, dashboards), source)


def render_default(dashboards: dict[str, str] | None = None) -> dict[str, str]:
    """Both targets of the embedded defaults, as checked in: {"kubernetes/...": text, "compose/...": text}."""
    config = Config()
    inputs = gather_inputs(config, dashboards)      # compiled once for both targets
    return {f"{target}/{path}": text for target in TARGETS
            for path, text in _renderer(target)(config, inputs, "the embedded defaults").items()}
