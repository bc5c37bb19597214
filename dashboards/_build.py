"""Build dashboards: load `*.dashboard.py` files (grafanalib's convention), write modern JSON, or ConfigMaps."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from grafanalib import core

from inferwatch.dashboards._modern import modern
from inferwatch.dashboards._objectives import slo_specs
from inferwatch.errors import InferwatchError
from inferwatch.resources import data_path

__all__ = ["HERE", "builtin_sources", "load_dashboard", "render_json", "build", "configmap"]

HERE = data_path("inferwatch.dashboards")  # the built-in *.dashboard.py sources and their JSON


def builtin_sources() -> list[Path]:
    return sorted(HERE.glob("*.dashboard.py"))


def load_dashboard(path: Path) -> core.Dashboard:
    """Import a `*.dashboard.py` file and take its module variable `dashboard`."""
    path = Path(path)
    spec = importlib.util.spec_from_file_location(f"inferwatch_user_dashboard_{path.stem.replace('.', '_')}", path)
    if spec is None or spec.loader is None or not path.is_file():
        raise InferwatchError(f"{path}: not a readable *.dashboard.py file")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as err:  # noqa: BLE001 - a user's file may fail in any way; say where and why
        raise InferwatchError(f"{path}: {type(err).__name__}: {err}") from None
    board = getattr(module, "dashboard", None)
    if not isinstance(board, core.Dashboard):
        raise InferwatchError(f"{path}: defines no grafanalib Dashboard named `dashboard`")
    return board


def render_json(board: core.Dashboard) -> str:
    return json.dumps(modern(board), indent=2, sort_keys=True) + "\n"


def json_name(source: Path) -> str:
    return Path(source).name.removesuffix(".dashboard.py") + ".json"


def build(sources: list[Path] | None = None, specs=None) -> dict[str, str]:
    """{file name: JSON text} for each source (default: the built-in dashboards); `specs` are the installed SLO
    specs whose latency objectives the dashboards show (default: slo/defaults.yaml's)."""
    with slo_specs(specs or ()):
        return {json_name(src): render_json(load_dashboard(src)) for src in (sources or builtin_sources())}


def configmap(name: str, text: str, folder: str = "inferwatch") -> dict:
    """A ConfigMap the Grafana sidecar (kube-prometheus-stack) picks up: label grafana_dashboard: "1"."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "inferwatch-dashboard-" + Path(name).stem,
            "labels": {
                "grafana_dashboard": "1",
                "app.kubernetes.io/name": "inferwatch",
                "app.kubernetes.io/component": "dashboards",
            },
            "annotations": {"grafana_folder": folder},
        },
        "data": {name: text},
    }
