"""Two adaptations of recent typer (0.2x) to a command line that is read by people and started often.

* Help in the user's words: typer writes `<path>` or `<list[Path]>` beside every
  argument, ignores an argument's metavar there, and shows a required one as
  `{FILE}...`. `plain_metavars()` makes arguments read as click writes them:
  `FILE...` when required, `[FILE]` when optional.
* No pydantic for strings: typer builds a pydantic TypeAdapter for every
  parameter it converts, and importing pydantic costs more than a whole
  `inferwatch normalize` of a large scrape spends on its own work.
  `plain_strings()` converts `str`, `Path` and `bool` parameters (and lists
  of them) directly; numbers and everything else still go through typer.

Typer versions without these internals are left as they are.
"""

from __future__ import annotations

from pathlib import Path

from typer import BadParameter, core

__all__ = ["plain_metavars", "plain_strings"]


def _no_type(self, ctx) -> str | None:
    return None  # the name column already shows the metavar


def _dots(self, name: str) -> str:
    return name + ("..." if self.nargs != 1 and not name.endswith("...") else "")


def _usage_name(self) -> str:
    name = self.metavar or self.name.upper()
    return _dots(self, name if self.required else f"[{name}]")


def _help_name(self) -> str:
    return _dots(self, self.metavar or self.name.upper())


def plain_metavars() -> None:
    argument = getattr(core, "TyperArgument", None)
    if argument is None or not hasattr(argument, "display_type_rich"):
        return
    argument.display_type_rich = _no_type
    if hasattr(argument, "_usage_display_name"):
        argument._usage_display_name = _usage_name
    if hasattr(argument, "_rich_display_name"):
        argument._rich_display_name = _help_name


def _flag(value) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "t", "yes", "y", "on"):
        return True
    if text in ("0", "false", "f", "no", "n", "off"):
        return False
    raise BadParameter(f"{value!r} is not a boolean: use true or false")


_PLAIN = {str: str, Path: Path, bool: _flag, list[str]: str, list[Path]: Path}


class _Plain:
    """Typer's runtime coercion for a str, Path or bool parameter, without pydantic."""

    def __init__(self, convert):
        self.convert = convert

    def coerce(self, value, param, ctx):
        if value is None:
            return () if param.multiple or param.nargs == -1 else None
        if isinstance(value, (list, tuple)):
            return [self.convert(v) for v in value]
        return self.convert(value)


def plain_strings() -> None:
    parameter = getattr(core, "_TyperParameter", None)
    original = getattr(parameter, "get_runtime_param", None)
    if original is None or getattr(original, "plain", False):
        return

    def get_runtime_param(self):
        if getattr(self, "_runtime_param", None) is None:
            desc = getattr(self, "type_descriptor", None)
            info = getattr(desc, "parameter_info", None)
            convert = _PLAIN.get(getattr(desc, "annotation", None))
            if convert is not None and desc.file_annotation is None and getattr(info, "parser", None) is None:
                self._runtime_param = _Plain(convert)
        return original(self)

    get_runtime_param.plain = True
    parameter.get_runtime_param = get_runtime_param
