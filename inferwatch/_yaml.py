"""YAML loading that remembers line numbers, so errors can point at the input, and that refuses a document whose
aliases expand past MAX_NODES or whose nesting passes MAX_DEPTH (the "billion laughs" took 6 GB) before
building it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from inferwatch._files import read_input_text
from inferwatch.errors import InputError, Problem, SpecError

__all__ = [
    "LINE",
    "MAX_NODES",
    "MAX_DEPTH",
    "TooLarge",
    "Bounded",
    "BoundedSafeLoader",
    "safe_load",
    "safe_load_all",
    "read_text",
    "load_yaml_file",
    "line_of",
    "plain",
    "dump_yaml",
]

LINE = "__line__"
MAX_NODES = 2_000_000  # nodes after alias expansion: ~50x the largest real file; a bomb reaches 10^9
MAX_DEPTH = 500  # deeper than any real config, shallow enough for Python's recursion limit


class TooLarge(yaml.YAMLError):
    """A document expands past MAX_NODES or nests past MAX_DEPTH; a YAMLError so every reader already says so."""

    def __init__(self, problem: str):
        super().__init__(problem)
        self.problem, self.problem_mark = problem, None


def _check_bounds(root) -> None:
    """Count the nodes `root` expands to (an alias counts each time it is used) and its depth, without recursion
    and without expanding: a node's size and height are memoized, so a bomb costs its size in the text, not in
    memory, and an alias used deep down counts the depth of what it names."""
    sizes: dict[int, int] = {}
    heights: dict[int, int] = {}
    stack = [(root, 1, False)]
    while stack:
        node, depth, done = stack.pop()
        if depth + heights.get(id(node), 1) - 1 > MAX_DEPTH:
            raise TooLarge(f"nested deeper than {MAX_DEPTH} levels")
        children = (
            [c for pair in node.value for c in pair]
            if isinstance(node, yaml.MappingNode)
            else node.value
            if isinstance(node, yaml.SequenceNode)
            else []
        )
        if done:
            sizes[id(node)] = 1 + sum(sizes[id(c)] for c in children)
            heights[id(node)] = 1 + max((heights[id(c)] for c in children), default=0)
            if sizes[id(node)] > MAX_NODES:
                raise TooLarge(f"expands to more than {MAX_NODES} nodes (aliases repeat what they name)")
        elif id(node) not in sizes:
            stack.append((node, depth, True))
            stack.extend((c, depth + 1, False) for c in children)


class Bounded:
    """Mixin: check a composed document's bounds before constructing it."""

    def construct_document(self, node):
        _check_bounds(node)
        return super().construct_document(node)


class BoundedSafeLoader(Bounded, yaml.SafeLoader):
    """yaml.SafeLoader (its messages, which users see) with MAX_NODES and MAX_DEPTH."""


def _guard(load):
    """Run a load; RecursionError (a composer deeper than Python allows) reads as TooLarge."""
    try:
        return load()
    except RecursionError:
        raise TooLarge("nested too deeply to read") from None


def safe_load(text):
    """yaml.safe_load, bounded."""
    return _guard(lambda: yaml.load(text, Loader=BoundedSafeLoader))  # noqa: S506 - a SafeLoader subclass


def safe_load_all(text) -> list:
    """yaml.safe_load_all as a list, bounded."""
    return _guard(lambda: list(yaml.load_all(text, Loader=BoundedSafeLoader)))  # noqa: S506


class _Mapping(dict):
    """A loaded mapping that also knows the line of each of its keys."""

    key_lines: dict


if TYPE_CHECKING:  # the pure-Python classes, as typed; the C ones behave the same
    _SafeLoader = yaml.SafeLoader
    _SafeDumper = yaml.SafeDumper
else:  # libyaml's parser (5x faster) and emitter (same text, faster) when present
    _SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    _SafeDumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _LineLoader(Bounded, _SafeLoader):
    """SafeLoader that stores each mapping's 1-based start line under LINE, and its keys' lines."""

    def construct_mapping(self, node, deep=False):
        mapping = super().construct_mapping(node, deep=deep)
        mapping[LINE] = node.start_mark.line + 1
        return mapping

    def construct_yaml_map(self, node):
        data = _Mapping()
        data.key_lines = {k.value: k.start_mark.line + 1 for k, _ in node.value if isinstance(k.value, str)}
        yield data
        data.update(self.construct_mapping(node))


_LineLoader.add_constructor("tag:yaml.org,2002:map", _LineLoader.construct_yaml_map)


def read_text(path: Path | str) -> str:
    """A file's text, capped; a missing, unreadable, oversized or non-UTF-8 file is an InputError naming it."""
    return read_input_text(path)


def load_yaml_file(path: Path | str, text: str | None = None) -> Any:
    """Parse one YAML document; a syntax error becomes a SpecError naming the line."""
    path = str(path)
    if text is None:
        text = read_text(path)
    try:
        return _guard(lambda: yaml.load(text, Loader=_LineLoader))  # noqa: S506 - a SafeLoader subclass
    except TooLarge as err:
        raise InputError(f"{path}: refused: {err.problem}") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = mark.line + 1 if mark else None
        reason = getattr(err, "problem", None) or str(err)
        raise SpecError([Problem(path, line, "", f"invalid YAML: {reason}")]) from None


def line_of(node: Any, key: str | None = None) -> int | None:
    """The line of `key` in a loaded mapping, else the line the mapping started on, if known."""
    if key is not None and key in getattr(node, "key_lines", {}):
        return node.key_lines[key]
    return node.get(LINE) if isinstance(node, dict) else None


def plain(value: Any) -> Any:
    """A loaded value without the loader's line bookkeeping, for messages and values."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items() if k != LINE}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


class _Dumper(_SafeDumper):
    """Block style, keys in insertion order, long lines kept whole."""


def _str(dumper: yaml.SafeDumper, value: str):
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump_yaml(data) -> str:
    """YAML for generated files: block style, keys in the order given, multi-line strings as | blocks."""
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, width=1000, default_flow_style=False)
