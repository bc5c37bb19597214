"""The one way inferwatch reads a user's YAML, and collects what is wrong with it.

`load_document(path)` returns a `Document`: the plain data (dicts, lists, scalars; nothing added) and, apart from
it, a `Positions` map from each key or item's path to its file, line and column. Every limit is here: the file's
size (the input cap of inferwatch/_files.py), nodes after alias expansion (MAX_NODES: the "billion laughs" took
6 GB) and nesting (MAX_DEPTH), checked before the data is built; a duplicate key is a problem, never a silent
override. `Problems` is the one collector the readers share: each problem with its file, line, column, field path,
message and what would be valid, all reported at once as one SpecError.

`safe_load` and `safe_load_all` are the same bounded loader without positions, for YAML that is not a user's spec
(a Prometheus config, a manifest); `dump_yaml` writes generated files."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from inferwatch._files import max_input, read_input_text
from inferwatch.errors import InputError, Problem, SpecError

__all__ = [
    "MAX_NODES",
    "MAX_DEPTH",
    "TooLarge",
    "safe_load",
    "safe_load_all",
    "Position",
    "Positions",
    "Document",
    "load_document",
    "load_documents",
    "Problems",
    "dump_yaml",
]

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


class _Bounded:
    """Mixin: check a composed document's bounds before constructing it."""

    def construct_document(self, node):
        _check_bounds(node)
        return super().construct_document(node)


class _BoundedSafeLoader(_Bounded, yaml.SafeLoader):
    """yaml.SafeLoader (its messages, which users see) with MAX_NODES and MAX_DEPTH."""


def _guard(load):
    """Run a load; RecursionError (a composer deeper than Python allows) reads as TooLarge."""
    try:
        return load()
    except RecursionError:
        raise TooLarge("nested too deeply to read") from None


def safe_load(text):
    """yaml.safe_load, bounded."""
    return _guard(lambda: yaml.load(text, Loader=_BoundedSafeLoader))  # noqa: S506 - a SafeLoader subclass


def safe_load_all(text) -> list:
    """yaml.safe_load_all as a list, bounded."""
    return _guard(lambda: list(yaml.load_all(text, Loader=_BoundedSafeLoader)))  # noqa: S506


if TYPE_CHECKING:  # the pure-Python classes, as typed; the C ones behave the same
    _SafeLoader = yaml.SafeLoader
    _SafeDumper = yaml.SafeDumper
else:  # libyaml's parser (5x faster) and emitter (same text, faster) when present
    _SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    _SafeDumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


@dataclass(frozen=True)
class Position:
    """Where something starts in a file: 1-based line and column."""

    file: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


class Positions:
    """Where each part of a loaded document starts, kept apart from the data.

    `at(path)` is the position of a mapping's key (so a problem points at the field's own line) or a list's
    item; `()` is the document itself. `line(node, key)` finds a node of the loaded data by identity, which is
    what the readers hold while they walk it: the line of `key` in it when the file has that key, else the
    node's own line. Nodes a reader makes up (a default, a wrapper) have no position; `same_place` lends one."""

    def __init__(self, file: str = "<input>"):
        self.file = file
        self._at: dict[tuple, Position] = {}
        self._nodes: dict[int, tuple[tuple, Position]] = {}  # id(node) -> (its path, where the node itself starts)
        self._held: list = []  # the nodes whose id() is a key of _nodes, kept alive so no id is reused

    def _record(self, path: tuple, at, node=None, start=None) -> None:
        self._at.setdefault(path, Position(self.file, at.line + 1, at.column + 1))
        if isinstance(node, (dict, list)) and id(node) not in self._nodes:
            self._nodes[id(node)] = (path, Position(self.file, start.line + 1, start.column + 1))
            self._held.append(node)

    def at(self, path: Iterable) -> Position | None:
        """Where the key (or item) at `path` starts."""
        return self._at.get(tuple(path))

    def path_of(self, node) -> tuple | None:
        """The path of a mapping or list of the loaded data (its first, where an alias repeats it)."""
        found = self._nodes.get(id(node))
        return found[0] if found else None

    def position(self, node, key=None) -> Position | None:
        """Where `key` of `node` is written when the file has it, else where `node` itself starts."""
        found = self._nodes.get(id(node))
        if found is None:
            return None
        if key is not None and isinstance(node, (dict, list)):
            try:
                return self._at.get(found[0] + (key,), found[1])
            except TypeError:  # an unhashable key
                pass
        return found[1]

    def line(self, node, key=None) -> int | None:
        found = self.position(node, key)
        return found.line if found else None

    def same_place(self, made, node) -> None:
        """`made` (a node a reader built in place of `node`) reports `node`'s position."""
        found = self._nodes.get(id(node))
        if found is not None and id(made) not in self._nodes:
            self._nodes[id(made)] = found
            self._held.append(made)

    def __len__(self) -> int:
        return len(self._at)


class _Positioning(_Bounded):
    """Mixin of a bounded safe loader that also records, per document, where each key and item starts, and the
    duplicate keys of each mapping (found on the nodes, before a later key silently replaces an earlier one)."""

    file: str  # set by _read, with documents: (data, positions, duplicate keys) of each document read
    documents: list[tuple[Any, Positions, list]]

    def construct_mapping(self, node, deep=False):
        self._duplicates(node)
        return super().construct_mapping(node, deep=deep)

    def _duplicates(self, node) -> None:
        seen: dict[tuple, Any] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue
            ident = (key_node.tag, key_node.value)
            if ident in seen:
                self._found_duplicates.append((node, key_node, seen[ident]))
            else:
                seen[ident] = key_node

    def construct_document(self, node):
        """BaseConstructor.construct_document, with the positions read while the nodes' objects are known."""
        _check_bounds(node)
        self._found_duplicates = []
        data = self.construct_object(node)
        while self.state_generators:
            generators, self.state_generators = self.state_generators, []
            for generator in generators:
                for _ in generator:
                    pass
        positions = Positions(self.file)
        _walk(self, node, positions)
        duplicates = [
            ((positions.path_of(self.constructed_objects.get(mapping)) or ()) + (key.value,), key, first)
            for mapping, key, first in self._found_duplicates
        ]
        self.documents.append((data, positions, duplicates))
        self.constructed_objects, self.recursive_objects, self.deep_construct = {}, {}, False
        return data


class _PositionLoader(_Positioning, _SafeLoader):
    """libyaml's parser when present."""


class _PyPositionLoader(_Positioning, yaml.SafeLoader):
    """PyYAML's own parser, for its error messages."""


def _walk(loader, root, positions: Positions) -> None:
    """Record the position of every key and item under `root`, each node once (an alias repeated elsewhere
    reports where it is used, through its parent)."""
    built = loader.constructed_objects
    done: set[int] = set()
    stack: list[tuple[tuple, Any, Any]] = [((), root, root.start_mark)]
    while stack:
        path, node, mark = stack.pop()
        positions._record(path, mark, built.get(node), node.start_mark)
        if id(node) in done:
            continue
        done.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                key = built.get(key_node)
                if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                    stack.append((path + (key,), value_node, key_node.start_mark))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((path + (i,), item, item.start_mark) for i, item in enumerate(node.value))


@dataclass(frozen=True)
class Document:
    """One loaded YAML document: its plain data, and where each part of it is in `file`."""

    file: str
    data: Any
    positions: Positions


def load_documents(path: Path | str, text: str | None = None) -> list[Document]:
    """Every document of a YAML file (or of `text`, read as that file), with positions; an empty file has none.

    The file is read through the input cap (a file over it, missing or not UTF-8 is an InputError naming it);
    a document that expands past MAX_NODES or nests past MAX_DEPTH is an InputError too (exit 2, nothing built);
    a syntax error or a duplicate key is a SpecError naming the file, line and field."""
    file = str(path)
    if text is None:
        text = read_input_text(path)  # missing, a folder, over the cap, not UTF-8: one InputError naming it
    elif len(text) > max_input():
        raise InputError(f"{file}: larger than the input cap of {max_input()} bytes; raise it with --max-input SIZE")
    try:
        loader = _read(_PositionLoader, text, file)
    except yaml.YAMLError:  # libyaml's messages are terse and can point past the end: PyYAML's own say more
        try:
            loader = _read(_PyPositionLoader, text, file)
        except TooLarge as err:
            raise InputError(f"{file}: refused: {err.problem}") from None
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            line = mark.line + 1 if mark else None
            reason = getattr(err, "problem", None) or str(err).splitlines()[0]
            column = mark.column + 1 if mark else None
            raise SpecError([Problem(file, line, "", f"invalid YAML: {reason}", column=column)]) from None
    duplicates = [
        Problem(
            file,
            key.start_mark.line + 1,
            _field(path),
            f"duplicate key; the first is on line {first.start_mark.line + 1} (give each key once)",
            column=key.start_mark.column + 1,
        )
        for _, _, found in loader.documents
        for path, key, first in found
    ]
    if duplicates:
        raise SpecError(duplicates)
    return [Document(file, data, positions) for data, positions, _ in loader.documents]


def _read(cls, text: str, file: str):
    """A loader of `cls` that has read every document of `text`."""
    loader = cls(text)
    loader.file, loader.documents = file, []
    try:
        _guard(lambda: _drain(loader))
    finally:
        loader.dispose()
    return loader


def _drain(loader) -> None:
    while loader.check_node():
        loader.construct_document(loader.get_node())


def load_document(path: Path | str, text: str | None = None) -> Document:
    """The one document of a YAML file (`data` None when the file is empty), as load_documents reads it."""
    documents = load_documents(path, text)
    if len(documents) > 1:
        raise SpecError([Problem(str(path), documents[1].positions.line(documents[1].data), "", _ONE_DOCUMENT)])
    return documents[0] if documents else Document(str(path), None, Positions(str(path)))


_ONE_DOCUMENT = "a second YAML document (after ---); this file holds one"


def _field(path: Iterable) -> str:
    """A path as the messages write it: `objectives[0].threshold`."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) and not isinstance(part, bool) else f"{'.' if out else ''}{part}"
    return out


_INDEX = re.compile(r"\[\d+\]$")


class Problems:
    """Everything wrong with one file, collected so a reader reports it all at once (`raise_if_any`).

    `add(node, field, message)` points at the line and column of the field's own key in `node` (a mapping or
    list of the loaded data; the key is the field path's last name unless given), else at the node itself;
    `valid` says what would be accepted."""

    def __init__(self, file: str, positions: Positions | None = None):
        self.file = file
        self.positions = positions if positions is not None else Positions(file)
        self.problems: list[Problem] = []

    def position(self, node, key=None) -> Position | None:
        return self.positions.position(node, key)

    def line(self, node, key=None) -> int | None:
        return self.positions.line(node, key)

    def add(self, node, field: str, message: str, key: Any = ..., valid: Sequence[str] = ()) -> None:
        if key is ...:
            key = _INDEX.sub("", field.rsplit(".", 1)[-1]) if field else None
        found = self.positions.position(node, key)
        self.problems.append(
            Problem(
                self.file,
                found.line if found else None,
                field,
                message,
                column=found.column if found else None,
                valid=tuple(valid),
            )
        )

    def unknown_keys(self, node: dict, allowed: Sequence[str], prefix: str = "", ignore: Sequence = ()) -> None:
        """A problem for each key of `node` not in `allowed`, with the closest allowed key and the valid ones."""
        for key in node:
            if key in allowed or key in ignore:
                continue
            close = difflib.get_close_matches(str(key), [str(a) for a in allowed], n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            self.add(node, f"{prefix}{key}", f"unknown key{hint}", key=key, valid=allowed)

    def raise_if_any(self) -> None:
        if self.problems:
            raise SpecError(self.problems)

    def __bool__(self) -> bool:
        return bool(self.problems)


class _Dumper(_SafeDumper):
    """Block style, keys in insertion order, long lines kept whole."""


def _str(dumper: yaml.SafeDumper, value: str):
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump_yaml(data) -> str:
    """YAML for generated files: block style, keys in the order given, multi-line strings as | blocks."""
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, width=1000, default_flow_style=False)
