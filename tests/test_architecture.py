"""ARCHITECTURE.md says how the packages import each other; this reads the same from the code (issue 26).

Its layer drawing and its edge table are parsed: every import between packages in the library is a row of the
table, every row is such an import, and each goes to a lower layer of the drawing (so there is no cycle). The root
`inferwatch/` counts as three: the assembly (`cli.py`, `reference.py`, which import every package), the bundle
(`build.py`, which the demo reads) and the core (the rest, which import none).
"""

from __future__ import annotations

import ast
import re

from test_seams import ROOT, library_modules, package_of

DOC = ROOT / "ARCHITECTURE.md"
ASSEMBLY = {"inferwatch.cli", "inferwatch.reference", "inferwatch.__main__"}
BUNDLE = "inferwatch.build"  # the generated bundle, which the demo reads: a unit of its own


def unit_of(module: str) -> str:
    """`slo` for inferwatch.slo._rules; `assembly`, `build` or `core` for a root module."""
    package = package_of(module)
    if package != "inferwatch":
        return package.removeprefix("inferwatch.")
    if module == BUNDLE or module.startswith(BUNDLE + "."):
        return "build"
    return "assembly" if module in ASSEMBLY or module.rpartition(".")[0] in ASSEMBLY else "core"


def imported_modules(source: str) -> set[str]:
    """The inferwatch modules (or names in them) a source imports absolutely, at any depth of its code."""
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
    return {name for name in out if name.split(".")[0] == "inferwatch"}


def code_edges() -> set[tuple[str, str]]:
    """(importer, imported) for every import between two units of the library; the core is imported by all."""
    edges = set()
    for path, module in library_modules().items():
        here = unit_of(module)
        for name in imported_modules(path.read_text(encoding="utf-8")):
            there = unit_of(name)
            if there not in (here, "core"):
                edges.add((here, there))
    return edges


def _rows() -> list[tuple[str, str]]:
    """(unit, the units it imports) of the edge table: its rows of two cells, the header aside."""
    rows = re.findall(r"^\| (\w+) \|([^|\n]*)\|$", DOC.read_text(encoding="utf-8"), re.M)
    return [(unit, targets) for unit, targets in rows if unit != "package"]


def doc_edges() -> set[tuple[str, str]]:
    return {(unit, there.strip()) for unit, targets in _rows() for there in targets.split(",") if there.strip()}


def doc_units() -> set[str]:
    return {unit for unit, _ in _rows()}


def doc_layers() -> dict[str, int]:
    """{unit: depth} from the drawing: the names before the description on each line of the code block."""
    block = DOC.read_text(encoding="utf-8").split("```")[1]
    known = doc_units()
    layers: dict[str, int] = {}
    depth = 0
    for line in block.splitlines():
        words = [w for w in re.split(r"\s{2,}", line.strip()) if w]
        names = [w for w in words if w in known]
        if names:
            layers.update({name: depth for name in names})
            depth += 1
    return layers


def test_every_import_between_packages_is_in_the_table_and_every_row_is_one():
    code, doc = code_edges(), doc_edges()
    assert code - doc == set(), f"imports not in ARCHITECTURE.md's table: {sorted(code - doc)}"
    assert doc - code == set(), f"rows of ARCHITECTURE.md's table no module imports: {sorted(doc - code)}"


def test_every_package_is_in_the_table_and_the_drawing():
    units = {unit_of(module) for module in library_modules().values()}
    assert units == doc_units(), sorted(units ^ doc_units())
    assert set(doc_layers()) == units, sorted(units ^ set(doc_layers()))


def test_imports_go_down_the_layers():
    layers = doc_layers()
    upward = [(a, b) for a, b in code_edges() if layers[b] <= layers[a]]
    assert upward == [], f"imports of a package in the same layer or above: {upward}"
