"""One options model per command: a frozen dataclass whose fields carry an `Option` (field metadata), from which
the command's typer flags, its YAML keys, their validation and its README reference table are all made.

    @dataclass(frozen=True)
    class Config:
        timeout: float = option(5.0, "Per-target scrape timeout, e.g. 5s.", metavar="DURATION", parse=seconds,
                                shown="5s")

    @app.command()
    @flags_of(Config, from_file=True)      # --timeout DURATION [5s], and every other field's flag
    def serve(config: Path | None = None, **given):
        cfg = from_flags(Config, given, load_yaml(Config, config) if config else None)

A field's flag is `--name-with-dashes` and its YAML key its name unless the Option says otherwise; `flag=None`
or `key=None` leaves one out, with the reason in `only` (the reference table prints it). `parse` turns a flag's
text, or a YAML value, into the field's value and raises ValueError with what would be valid. A repeatable field
is a tuple: each flag adds an item, and its YAML key is a list (or, with `pairs`, a mapping whose `key: value`
entries are the items). Flags override the file's scalars and add to its lists.

Only the standard library and typer at import: every command's `_cli.py` builds its flags from its model when
`inferwatch --help` starts, so a model's module stays light (heavier parsers import inside themselves) and YAML is
imported here only when a file is read.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, NamedTuple, TypeVar

import typer

__all__ = [
    "Option",
    "option",
    "options_of",
    "flags_of",
    "flag_parameters",
    "from_flags",
    "load_yaml",
    "read_yaml",
    "read_mapping",
    "reference_table",
    "reference_rows",
    "table_head",
    "with_section",
    "section_markers",
]

T = TypeVar("T")
_META = "inferwatch.option"


class Option(NamedTuple):
    """How one field of a command's model is given, checked and documented.

    help: one sentence for --help and the table; metavar: the flag's value as the help writes it (DURATION);
    parse: flag text or YAML value -> the field's value, ValueError with what is valid (None: taken as given);
    item: a YAML item of a repeatable field -> the field's item, when YAML writes it otherwise than the flag
    (a mapping {name, url} for NAME=URL); pairs: the YAML is a mapping, each `key: value` one item (item gets
    the pair); expected: the YAML shape in a problem ("a list of mapping files"); flag, short, key: the names
    (None: not given that way, `only` says why); kind: the flag's type for typer (bool: a switch, int: typer
    counts; default str); shown: the default as the help and table write it ('' for none); repeatable: a tuple,
    one item per flag given, a list (or with `pairs` a mapping) in YAML; envvar: the environment variable the flag
    falls back to; min, max: the flag's bounds, which click checks (a number's); section: a model whose keys the
    YAML value holds (a nested mapping; with `repeatable`, a list of them), read by read_mapping; panel: the --help
    panel the flag shows in (typer's rich_help_panel). A NamedTuple, not a dataclass: every command's options are
    made when `inferwatch --help` starts, and a class is cheaper made."""

    help: str
    metavar: str | None = None
    parse: Callable[[Any], Any] | None = None
    item: Callable[[Any], Any] | None = None
    pairs: bool = False
    expected: str = ""
    flag: str | None = ""
    short: str = ""
    key: str | None = ""
    kind: type = str
    shown: str | None = None
    only: str = ""
    repeatable: bool = False
    envvar: str | None = None
    min: float | None = None
    max: float | None = None
    section: Any = None
    panel: str | None = None


class _Named(NamedTuple):
    """An Option with its field's name, its names filled in and its default."""

    name: str
    option: Option
    default: Any
    flag: str | None
    key: str | None

    def parse(self, value):
        return self.option.parse(value) if self.option.parse else value

    def parse_item(self, value):
        return self.option.item(value) if self.option.item else self.parse(value)

    @property
    def default_text(self) -> str:
        """The default as the help and the tables write it."""
        return _shown(self)


def option(default: Any = None, help: str = "", **names: Any) -> Any:
    """A dataclass field of a command's model: its default and its Option (see Option for the names)."""
    meta = Option(help, **names)
    if isinstance(default, (list, dict, set)):
        raise TypeError("a model's default must be immutable: a tuple, not a list")
    return dataclasses.field(default=default, metadata={_META: meta})


def options_of(model) -> list[_Named]:
    """The model's options in field order (fields without an Option are not options)."""
    found = []
    for f in dataclasses.fields(model):
        meta = f.metadata.get(_META)
        if meta is None:
            continue
        flag = "--" + f.name.replace("_", "-") if meta.flag == "" else meta.flag
        key = f.name if meta.key == "" else meta.key
        found.append(_Named(f.name, meta, f.default, flag, key))
    return found


def _shown(named: _Named) -> str:
    """The default as the help and the table write it: '' for none, `required` for a field without one."""
    default = named.default
    if named.option.shown is not None:
        return named.option.shown
    if default is dataclasses.MISSING:
        return "required"
    if isinstance(default, bool):
        return str(default).lower()
    if default == "":
        return "''"
    if default is None or default == ():
        return ""
    if isinstance(default, tuple) and all(isinstance(p, tuple) and len(p) == 2 for p in default):
        return "{" + ", ".join(f"{k}: {v}" for k, v in default) + "}"
    if isinstance(default, tuple):
        return "[" + ", ".join(map(str, default)) + "]"
    return str(default)


def _parameter(named: _Named, from_file: bool) -> inspect.Parameter:
    """A typer parameter for one flag. A command that also reads a file gets None (or False, or ()) when the flag
    is not given, so the file's value stands; its default is then written into the help, as `[5s]`."""
    meta, shown = named.option, _shown(named)
    help_text = meta.help
    if from_file and shown:
        help_text = f"{help_text.rstrip('.')} [{shown}]."
    decls = [d for d in (named.flag, meta.short) if d]
    required = named.default is dataclasses.MISSING  # typer's `...`: click says `Missing option` itself
    extra: dict[str, Any] = {
        k: v
        for k, v in (("envvar", meta.envvar), ("min", meta.min), ("max", meta.max), ("rich_help_panel", meta.panel))
        if v is not None
    }
    if meta.kind is bool:
        info = typer.Option(*decls, help=help_text, **extra)
        annotation: Any = bool
        default: Any = False if from_file else bool(named.default)
    elif meta.repeatable:
        info = typer.Option(*decls, metavar=meta.metavar, help=help_text, **extra)
        annotation, default = list[meta.kind], ... if required else []  # type: ignore[name-defined]
    else:
        show = not from_file and bool(shown) and not required and named.default is not None
        info = typer.Option(*decls, metavar=meta.metavar, help=help_text, show_default=show, **extra)
        annotation = meta.kind if required else meta.kind | None
        default = ... if required else None if from_file or named.default is None else _raw_default(named)
    return inspect.Parameter(
        named.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=Annotated[annotation, info]
    )


def _raw_default(named: _Named):
    """What typer passes when the flag is not given: the default as the user would write it."""
    if named.option.kind in (int, float):
        return named.option.kind(named.default)
    return _shown(named) or str(named.default)


def flag_parameters(model, from_file: bool = False) -> list[inspect.Parameter]:
    """The model's flags as typer parameters (keyword-only, in field order), for a decorator of its own
    (promapi_flags.connection_flags)."""
    return [_parameter(n, from_file) for n in options_of(model) if n.flag]


def flags_of(model, *, from_file: bool = False, after: Iterable[str] = ()) -> Callable[[T], T]:
    """Decorate a command written as `def cmd(own params..., **given)`: its signature gets one typer option per
    flag of `model` (in field order, before the command's own parameters except those named in `after`), so typer
    reads them as if written out; the command receives them in `given`. Only Python's public `__signature__` (and
    `__annotations__`, so typing.get_type_hints sees the flags too)."""

    def decorate(command):
        # eval_str: a module with `from __future__ import annotations` writes them as text, and typer does not
        # evaluate a signature it is given
        own = inspect.signature(command, eval_str=True).parameters.values()
        own = [p for p in own if p.kind is not p.VAR_KEYWORD]
        flags = flag_parameters(model, from_file)
        first = [p.replace(kind=p.KEYWORD_ONLY) for p in own if p.name not in after]
        last = [p.replace(kind=p.KEYWORD_ONLY) for p in own if p.name in after]
        command.__signature__ = inspect.Signature(first + flags + last)
        # and the annotations to match, for typing.get_type_hints (the signature's are objects already)
        command.__annotations__ = {p.name: p.annotation for p in first + flags + last if p.annotation is not p.empty}
        return command

    return decorate


def from_flags(model: type[T], given: Mapping[str, Any], base: T | None = None, bad=None) -> T:
    """`base` (the file's values, or the defaults) with the flags that were given: a scalar replaces, a
    repeatable adds, a switch turns on. `bad(flag, message)` reports a value `parse` refused (a usage error)."""
    from inferwatch.clikit import bad_flag

    bad = bad or bad_flag
    changes: dict[str, Any] = {}
    for named in options_of(model):
        if not named.flag or named.name not in given:
            continue
        value = given[named.name]
        try:
            if named.option.repeatable:
                if value:
                    before = getattr(base, named.name) if base is not None else ()
                    changes[named.name] = before + tuple(named.parse(v) for v in value)
            elif named.option.kind is bool:
                if value:
                    changes[named.name] = True
            elif value is not None:
                changes[named.name] = named.parse(value)
        except ValueError as err:
            bad(named.flag, err)
    return dataclasses.replace(base, **changes) if base is not None else model(**changes)  # type: ignore[type-var]


def load_yaml(model: type[T], path: Path | str, expected: str = "a mapping of options") -> T:
    """A model from a YAML file of its keys, every problem (unknown keys with the valid ones included) reported at
    once with its file:line as a SpecError."""
    from inferwatch.yamlio import load_document

    loaded = load_document(path)
    return read_yaml(model, loaded.data, str(path), loaded.positions, expected)


def read_yaml(model: type[T], doc, file: str, positions=None, expected: str = "a mapping of options") -> T:
    """`load_yaml` of data already loaded (`positions` from yamlio, for the lines)."""
    from inferwatch.errors import Problem, SpecError
    from inferwatch.yamlio import Problems

    if not isinstance(doc, dict):
        raise SpecError([Problem(file, None, "", f"expected {expected}")])
    problems = Problems(file, positions)
    found = read_mapping(model, doc, problems)
    problems.raise_if_any()
    return found  # type: ignore[return-value]  # no problem: it was built


def read_mapping(
    model: type[T],
    node,
    problems,
    where: str = "",
    *,
    ignore: Iterable[str] = (),
    extra: Mapping[str, Any] | None = None,
    checks: Mapping[str, Callable[[Any], Any]] | None = None,
) -> T | None:
    """One mapping of a loaded YAML document into `model`, each problem added to `problems` (yamlio.Problems) at its
    line, named `where` + its key: unknown keys (but `ignore`), required keys missing, values their option refuses.
    A `section` option's value is read as its model in turn (a `repeatable` one: a non-empty list of them). A field
    without `parse` is checked by `checks[its annotation]` when given. `extra`: fields that are not keys (a file
    name). None when a problem leaves it unbuilt; a mapping that is not one is a problem, and the defaults."""
    named = [n for n in options_of(model) if n.key]
    values: dict[str, Any] = dict(extra or {})
    required = {n.name for n in named if n.default is dataclasses.MISSING}
    if not isinstance(node, dict):
        problems.add(None, where.rstrip("."), f"expected a mapping, got {node!r}", key=None)
        return None if required - set(values) else model(**values)
    problems.unknown_keys(node, [str(n.key) for n in named], where, tuple(ignore))
    types = {f.name: f.type for f in dataclasses.fields(model)}  # type: ignore[arg-type]
    by_key = {n.key: n for n in named}
    for key in node:  # in the file's order, so the problems follow its lines
        if (n := by_key.get(key)) is not None:
            check = None if n.option.parse or checks is None else checks.get(str(types[n.name]))
            found = _yaml_value(n, node, problems, where, checks, check)
            if found is not _BAD:
                values[n.name] = found
    for n in named:
        if n.key not in node and n.default is dataclasses.MISSING:
            problems.add(node, f"{where}{n.key}", f"required: {n.option.help}", key=None)
    return None if required - set(values) else model(**values)


_BAD = object()


def _yaml_value(named: _Named, doc: dict, problems, where: str = "", checks=None, check=None) -> Any:
    key, value = str(named.key), doc[named.key]
    if named.option.section is not None:
        return _yaml_section(named, key, value, doc, problems, where, checks)
    if named.option.repeatable:
        return _yaml_items(named, key, value, doc, problems, where)
    if named.option.kind is bool and not isinstance(value, bool):
        problems.add(doc, where + key, f"expected true or false, got {value!r}")
        return _BAD
    try:
        return check(value) if check else named.parse(value)
    except (ValueError, TypeError) as err:
        problems.add(doc, where + key, str(err))
        return _BAD


def _yaml_section(named: _Named, key: str, value, doc: dict, problems, where: str, checks) -> Any:
    """A section's YAML: a mapping of its model's keys, or (repeatable) a non-empty list of them."""
    model, path = named.option.section, where + key
    if not named.option.repeatable:
        found = read_mapping(model, value, problems, path + ".", checks=checks)
        return _BAD if found is None else found
    if not isinstance(value, list) or not value:
        problems.add(doc, path, f"expected {named.option.expected or 'a non-empty list'}")
        return _BAD
    items = [read_mapping(model, item, problems, f"{path}[{i}].", checks=checks) for i, item in enumerate(value)]
    return _BAD if None in items else tuple(items)


def _yaml_items(named: _Named, key: str, value, doc: dict, problems, where: str = "") -> Any:
    """A repeatable field's YAML: a list (or, with `pairs`, a mapping) of items; each bad item at its own line."""
    if value is None:
        return ()
    pairs = named.option.pairs
    if not isinstance(value, dict if pairs else list):
        shape = named.option.expected or ("a mapping" if pairs else "a list")
        problems.add(doc, where + key, f"expected {shape}")
        return _BAD
    entries: Iterable[tuple[Any, Any]] = value.items() if isinstance(value, dict) else enumerate(value)
    items, bad = [], False
    for at, item in entries:
        try:
            items.append(named.parse_item((at, item) if pairs else item))
        except ValueError as err:
            field = f"{where}{key}.{at}" if pairs else f"{where}{key}[{at}]"
            problems.add(value, field, str(err), key=at)
            bad = True
    return _BAD if bad else tuple(items)


# -- reference tables ---------------------------------------------------------------------------------------------


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def reference_table(model, flags: bool = True, keys: bool = True) -> str:
    """The model's options as a markdown table: flag, YAML key (each column only when asked), default, what."""
    return "\n".join(table_head(flags, keys) + reference_rows(model, flags, keys))


def table_head(flags: bool = True, keys: bool = True) -> list[str]:
    head = [name for name, on in (("flag", flags), ("YAML key", keys)) if on] + ["default", "what"]
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]


def reference_rows(model, flags: bool = True, keys: bool = True, prefix: str = "") -> list[str]:
    """One table row per option of `model` (its keys written `prefix + key`, for a nested section's)."""
    lines = []
    for named in options_of(model):
        if not (flags and named.flag) and not (keys and named.key):
            continue
        if named.option.section is not None and not named.option.repeatable:
            continue  # a nested mapping: its own keys are rows (deploy's reference_table)
        cells = []
        if flags:
            flag = ", ".join(f"`{d}`" for d in (named.option.short, named.flag) if d)
            metavar = f" `{named.option.metavar}`" if named.option.metavar and named.option.kind is not bool else ""
            cells.append(flag + metavar if named.flag else "")
        if keys:
            cells.append(f"`{prefix}{named.key}`" if named.key else "")
        shown = _shown(named)
        cells.append(f"`{shown}`" if shown else "")
        what = named.option.help
        if named.option.only:
            what += f" ({'flag' if named.flag else 'YAML'} only: {named.option.only})"
        if named.flag and not flags:  # a table of keys: the key that is a flag too says so
            what += f" Also the flag `{named.flag}`."
        low, high = named.option.min, named.option.max
        if low is not None or high is not None:
            what += " " + (
                f"From {low:g} to {high:g}."
                if low is not None and high is not None
                else f"At least {low:g}."
                if low is not None
                else f"At most {high:g}."
            )
        if named.option.envvar and flags:
            what += f" Default from `${named.option.envvar}` when set."
        cells.append(what)
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return lines


def section_markers(name: str) -> tuple[str, str]:
    """The comments around a generated section of a markdown file."""
    return (
        f"<!-- {name}: generated by `inferwatch build` from the options model; do not edit by hand -->",
        f"<!-- end {name} -->",
    )


def with_section(text: str, name: str, body: str, file: str = "") -> str:
    """`text` with the section `name` (between its markers) replaced by `body`; ValueError when it has none."""
    begin, end = section_markers(name)
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise ValueError(f"{file or 'the file'} has no generated section {name!r} ({begin} ... {end})")
    return pattern.sub(lambda _: f"{begin}\n\n{body}\n\n{end}", text)
