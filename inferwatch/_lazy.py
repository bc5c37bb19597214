"""Package attributes loaded on first use, so `inferwatch --help` and a text rewrite never import aiohttp."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(package: str, table: dict[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for `package` that imports `table[name]` (a submodule) when `name` is first read.
    Its names type as Any: a type checker cannot follow the table."""
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str) -> Any:
        if name not in table:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{table[name]}"), name)
        namespace[name] = value
        return value

    return __getattr__
