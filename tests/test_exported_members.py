"""Each inferwatch package's __all__ is exactly its public names (after httpx's test)."""

from __future__ import annotations

import importlib

import pytest

PACKAGES = [
    "inferwatch",
    "inferwatch.mappings",
    "inferwatch.exporters",
    "inferwatch.dashboards",
    "inferwatch.slo",
    "inferwatch.alerts",
    "inferwatch.deploy",
    "inferwatch.sim",
    "inferwatch.frontdoor",
    "inferwatch.triage",
    "inferwatch.canary",
    "inferwatch.cost",
    "inferwatch.autoscale",
]


@pytest.mark.parametrize("name", PACKAGES)
def test_all_matches_public_names(name):
    module = importlib.import_module(name)
    for public_name in module.__all__:  # every name resolves, lazy ones (module __getattr__) included
        getattr(module, public_name)
    public = {
        n
        for n, v in vars(module).items()
        if (not n.startswith("_") or n == "__version__")
        and not (hasattr(v, "__name__") and type(v).__name__ == "module")
    }
    assert set(module.__all__) == public
