"""The packages meet at public names only (issue 26, "public seams").

A package is a top-level subpackage of inferwatch (`inferwatch.slo`, `inferwatch.frontdoor`, ...; `exporters.gpu`
belongs to `exporters`); the root's own modules (`inferwatch/cli.py`, `build.py`, ...) count as one more. No module
imports another package's private module (`inferwatch.slo._tables`) or private name (`_escape`): what is shared is
exported by the package (`from inferwatch.slo import bucket_tables`) or lives in a public module. Package data is
read with importlib.resources, and one function escapes a label value for PromQL and the exposition format.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import promql_parser
import pytest

from inferwatch.exporters import parse_sample
from inferwatch.promql import escape_label_value

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIRS = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["package-dir"]
# The root's helpers every package still imports under a private name (the YAML loader, the input and output
# files, URL and listen-address parsing, lazy package attributes; the YAML loader went public as
# inferwatch.yamlio): drop an entry when its module goes public.
SHARED_CORE = {"inferwatch._files", "inferwatch._lazy", "inferwatch._urls"}
# __file__ where no package is importable: the tiny model's builder runs as a script inside the engine's venv
FILE_PATHS_ALLOWED = {"sim/_tiny_model.py"}


def _private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__")


def package_of(module: str) -> str:
    """The package a module belongs to: `inferwatch.X` for a subpackage's module, `inferwatch` for the root's."""
    parts = module.split(".")
    top = ".".join(parts[:2])
    return top if len(parts) > 1 and top in PACKAGE_DIRS else "inferwatch"


def library_modules() -> dict[Path, str]:
    """{source file: its module name} for every module the wheel installs (pyproject's package-dir)."""
    out = {}
    for package, folder in PACKAGE_DIRS.items():
        for path in sorted((ROOT / folder).glob("*.py")):
            stem = path.name.removesuffix(".py")
            out[path] = package if stem == "__init__" else f"{package}.{stem}"
    return out


def private_imports(source: str, module: str, is_package: bool = False) -> list[str]:
    """`line: target` for each import in `source` (the text of `module`) of a private module or name of another
    package; SHARED_CORE's modules aside."""
    here = package_of(module)
    base = module if is_package else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                parent = base.split(".")[: len(base.split(".")) - node.level + 1]
                target = ".".join(parent + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            pairs = [(target, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            pairs = [(alias.name, "") for alias in node.names]
        else:
            continue
        for target, name in pairs:
            full = f"{target}.{name}" if name else target
            if not full.startswith("inferwatch") or full in SHARED_CORE or target in SHARED_CORE:
                continue
            owner = package_of(full) if package_of(full) != "inferwatch" else package_of(target)
            if owner != here and (any(map(_private, target.split("."))) or _private(name)):
                found.append(f"{node.lineno}: {full}")
    return found


def test_no_package_imports_another_packages_private_module_or_name():
    found = [
        f"{path.relative_to(ROOT)}:{hit}"
        for path, module in library_modules().items()
        for hit in private_imports(path.read_text(encoding="utf-8"), module, path.name == "__init__.py")
    ]
    assert found == [], "import these through the package's public names (its __init__'s __all__):\n" + "\n".join(found)


@pytest.mark.parametrize(
    "source, module, hits",
    [
        ("from inferwatch.slo._tables import bucket_tables\n", "inferwatch.sim._metrics", 1),
        ("from inferwatch.slo import _ANSWERED\n", "inferwatch.frontdoor._goodput", 1),
        ("import inferwatch.deploy._doctor\n", "inferwatch.sim._demo", 1),
        ("from inferwatch.dashboards._build import build\n", "inferwatch.build", 1),  # the root counts too
        ("from ._tables import bucket_tables\n", "inferwatch.slo._spec", 0),  # its own package
        ("from ..dashboards._build import build\n", "inferwatch.deploy._inputs", 1),
        ("from inferwatch.exporters._config import load_config\n", "inferwatch.exporters.gpu._config", 0),
        ("from inferwatch.slo import bucket_tables\n", "inferwatch.sim._metrics", 0),
        ("from inferwatch._files import read_text\n", "inferwatch.slo._spec", 0),  # SHARED_CORE
    ],
)
def test_the_check_sees_private_imports(source, module, hits):
    assert len(private_imports(source, module)) == hits


def test_shared_core_lists_only_what_is_still_shared():
    """An entry no package imports any more is dropped, so the list only shrinks."""
    text = "\n".join(p.read_text(encoding="utf-8") for p in library_modules() if p.parent.name != "inferwatch")
    for module in SHARED_CORE:
        name = module.rpartition(".")[2]
        assert re.search(rf"\b{module}\b|from inferwatch import .*\b{name}\b", text), f"{module} is not shared"


def test_package_data_is_found_through_importlib_resources():
    found = [
        str(path.relative_to(ROOT))
        for path in library_modules()
        if "__file__" in path.read_text(encoding="utf-8") and str(path.relative_to(ROOT)) not in FILE_PATHS_ALLOWED
    ]
    assert found == [], "read package data with importlib.resources (inferwatch.resources.data_path for a path)"


def test_one_label_value_escaper():
    """Every writer of a quoted label value calls escape_label_value; no module escapes quotes by hand."""
    by_hand = re.compile(r"""replace\(\s*'"'\s*,""")
    found = [
        str(path.relative_to(ROOT))
        for path in library_modules()
        if by_hand.search(path.read_text(encoding="utf-8")) and path != ROOT / "inferwatch" / "promql.py"
    ]
    assert found == []


@pytest.mark.parametrize("value", ["plain", 'a"b', "back\\slash", "new\nline", '\\"\n\\n', "", "ünï 漢字"])
def test_escaped_label_values_read_back_as_themselves(value):
    """Prometheus' own PromQL parser and the exporter's exposition parser read the escaped value back unchanged."""
    selector = promql_parser.parse(f'x{{l="{escape_label_value(value)}"}}')
    assert [(m.name, m.value) for m in selector.matchers.matchers] == [("l", value)]
    assert parse_sample(f'x{{l="{escape_label_value(value)}"}} 1').labels == (("l", value),)
