"""YAML loading that remembers line numbers, so errors can point at the input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from inferwatch.errors import Problem, SpecError

__all__ = ["LINE", "read_text", "load_yaml_file", "line_of", "plain", "dump_yaml"]

LINE = "__line__"


class _Mapping(dict):
    """A loaded mapping that also knows the line of each of its keys."""

    key_lines: dict


class _LineLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # libyaml's parser when present: 5x faster
    """SafeLoader that stores each mapping's 1-based start line under LINE, and its keys' lines."""

    def construct_mapping(self, node, deep=False):  # type: ignore[override]
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
    """A file's text; a missing, unreadable or non-UTF-8 file becomes a SpecError naming it."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise SpecError([Problem(str(path), None, "", f"cannot read file: {err.strerror}")]) from None
    except UnicodeDecodeError as err:
        raise SpecError([Problem(str(path), None, "", f"not UTF-8 text (byte {err.object[err.start]:#04x} at "
                                                      f"offset {err.start}); save it as UTF-8")]) from None


def load_yaml_file(path: Path | str, text: str | None = None) -> Any:
    """Parse one YAML document; a syntax error becomes a SpecError naming the line."""
    path = str(path)
    if text is None:
        text = read_text(path)
    try:
        return yaml.load(text, Loader=_LineLoader)  # noqa: S506 - a SafeLoader subclass
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


class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # libyaml's emitter when present: same text, faster
    """Block style, keys in insertion order, long lines kept whole."""


def _str(dumper: yaml.SafeDumper, value: str):
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump_yaml(data) -> str:
    """YAML for generated files: block style, keys in the order given, multi-line strings as | blocks."""
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, width=1000, default_flow_style=False)
