"""What the Sloth and OpenSLO readers share: YAML that remembers lines, notes that point at the input, drafts.

A reader turns one foreign document into `Draft` objectives (our spec keys, plain data) and records every
setting it cannot carry over in `Notes`; a document it cannot import at all raises `Refused`.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
import unicodedata
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from inferwatch.errors import Problem, SpecError
from inferwatch.slo._spec import RESERVED_LABELS
from inferwatch.yamlio import Positions
from inferwatch.yamlio import load_documents as load_yaml_documents

__all__ = [
    "DEFAULT_DAYS",
    "Draft",
    "Notes",
    "Refused",
    "load_documents",
    "name_of",
    "label_map",
    "annotation_map",
    "percent",
    "window_of",
    "text_of",
    "join",
    "mapping",
    "listing",
    "keys_text",
]

_NAME = re.compile(r"[a-z0-9]([a-z0-9_.-]*[a-z0-9])?\Z")
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
_TEMPLATE = re.compile(r"\{\{(.*?)\}\}", re.S)
_LABEL_TEMPLATE = re.compile(r"\s*\$labels\.[a-zA-Z_][a-zA-Z0-9_]*\s*\Z")
MIN_DAYS, MAX_DAYS, DEFAULT_DAYS = 7, 90, 28


class Refused(Exception):
    """A document (or one objective of it) cannot be imported; `problems` say why."""

    def __init__(self, problems: list[Problem]):
        super().__init__("\n".join(map(str, problems)))
        self.problems = problems


class Notes:
    """Everything of one file that is not carried over (`items`), and what was carried over as written but may not
    mean what it says (`checks`), each pointing at its line and field."""

    def __init__(self, file: str):
        self.file = file
        self.items: list[Problem] = []
        self.checks: list[Problem] = []
        self.positions: list[Positions] = []  # one per document of the file, set by load_documents

    def problem(self, node, field: str, message: str) -> Problem:
        key = re.sub(r"\[\d+\]$", "", field.rsplit(".", 1)[-1]) if field else None
        found = next((p.position(node, key) for p in self.positions if p.path_of(node) is not None), None)
        return Problem(self.file, found.line if found else None, field, message, column=found.column if found else None)

    def add(self, node, field: str, message: str) -> None:
        self.items.append(self.problem(node, field, message))

    def check(self, node, field: str, message: str) -> None:
        self.checks.append(self.problem(node, field, message))

    def refuse(self, node, field: str, message: str) -> Refused:
        return Refused([self.problem(node, field, message)])


@dataclass
class Draft:
    """One objective in our keys, the service and window it belongs to, and where it came from."""

    service: str
    objective: dict
    node: object
    field: str
    window: int | None = None  # days; None when the source does not say (Sloth: a flag of its CLI)
    group_by: tuple[str, ...] = ()
    labels: dict = dataclasses.field(default_factory=dict)  # `field` is the attribute above


def load_documents(text: str, file: str, notes: Notes | None = None) -> list[tuple[str, object]]:
    """Every document of a YAML stream as (field path, document): a top-level list (the form of OpenSLO's
    go-sdk and oslo) or a Kubernetes `kind: List` counts as its items, `[0]`, `[1]`, ...; each note also
    carries its line, so documents need no other name. `notes` learn where each part of the documents is."""
    try:
        loaded = load_yaml_documents(file, text)
    except SpecError as err:  # a syntax error, a duplicate key (nested too deep or an alias bomb: InputError)
        raise Refused(err.problems) from None
    if notes is not None:
        notes.positions = [d.positions for d in loaded]
    docs: list[tuple[str, object]] = []
    for doc in (d.data for d in loaded):
        if isinstance(doc, list):
            docs += [(f"[{j}]", item) for j, item in enumerate(doc)]
        elif isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            docs += [(f"items[{j}]", item) for j, item in enumerate(doc["items"])]
        elif doc is not None:
            docs.append(("", doc))
    return docs


def join(path: str, key: str) -> str:
    """A field path: `spec` + `slos` -> `spec.slos`, `[0]` + `spec` -> `[0].spec`."""
    return f"{path}.{key}" if path and key and not key.startswith("[") else path + key


def mapping(value) -> dict:
    """`value` if it is a mapping, else an empty one: a misshapen field reads as absent, never as a crash."""
    return value if isinstance(value, dict) else {}


def listing(value) -> list:
    return value if isinstance(value, list) else []


def keys_text(value) -> str:
    """The keys of a mapping (or the items of a list) as `a, b`, to name what is not carried over."""
    items = value if isinstance(value, (dict, list)) else [value]
    return ", ".join(text_of(item) for item in items)


def text_of(value) -> str:
    """A YAML scalar as the text Sloth (Go) would see: true, 0.2, 2022-01-01T12:00:00."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    return "" if value is None else str(value)


def name_of(notes: Notes, node, key: str, field: str, what: str) -> str:
    """A Sloth/OpenSLO name as ours (lower case, [a-z0-9_.-]); an empty or missing one is refused, as the
    source tool refuses it; a changed spelling is noted."""
    raw = node.get(key) if isinstance(node, dict) else None
    if raw is None or (isinstance(raw, str) and not raw.strip()) or isinstance(raw, (dict, list)):
        shown = "missing" if raw is None else f"{raw!r} is not a name"
        raise notes.refuse(node, field, f"{shown}: a {what} name is required")
    text = text_of(raw)
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    name = re.sub(r"[^a-z0-9_.-]+", "-", ascii_text.lower()).strip("-_.")
    if not _NAME.match(name):
        raise notes.refuse(node, field, f"{text!r} is not a {what} name: letters, digits, '-', '_' and '.'")
    if name != text:
        notes.add(
            node, field, f"{text!r} written {name!r}: inferwatch names are lower-case letters, digits, '-', '_' and '.'"
        )
    return name


def label_map(notes: Notes, node, key: str, field: str, prefix: str = "") -> dict[str, str]:
    """Labels to add to our alerts: keys kept exactly as written; reserved or invalid ones noted and dropped.
    With a prefix, only the keys that start with it, the prefix cut off (Pyrra's `pyrra.dev/team` is `team`)."""
    raw = node.get(key) if isinstance(node, dict) else None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        notes.add(node, field, f"is a {type(raw).__name__}, not a mapping of label: value; not carried over")
        return {}
    out = {}
    for name, value in raw.items():
        where = f"{field}.{name}"
        if prefix:
            if not isinstance(name, str) or not name.startswith(prefix):
                continue
            name = name[len(prefix) :]
        if not isinstance(name, str) or not _LABEL.match(name):
            notes.add(raw, where, "is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*); not carried over")
        elif name in RESERVED_LABELS:
            notes.add(
                raw,
                where,
                f"{text_of(value)!r} not carried over: inferwatch sets the {name} label itself "
                "(route on tier and severity)",
            )
        elif isinstance(value, (dict, list)):
            notes.add(raw, where, f"is a {type(value).__name__}, not a label value; not carried over")
        else:
            out[name] = text_of(value)
    return out


def annotation_map(notes: Notes, node, key: str, field: str, prefix: str = "") -> dict[str, str]:
    """Annotations whose templates are only `{{ $labels.NAME }}` (so generated tests can check them)."""
    out = {}
    for name, value in label_map(notes, node, key, field, prefix).items():
        if all(_LABEL_TEMPLATE.match(t) for t in _TEMPLATE.findall(value)):
            out[name] = value
        else:
            notes.add(
                node[key], f"{field}.{prefix}{name}", "uses templates other than {{ $labels.NAME }}; not carried over"
            )
    return out


def percent(value, scale: int = 1) -> str | None:
    """99.9 (scale 1) or 0.999 (scale 100) as '99.9%'; None when not a number."""
    try:
        number = Decimal(text_of(value).strip().rstrip("%")) * scale
    except InvalidOperation:
        return None
    if not number.is_finite():
        return None
    text = f"{number.normalize():f}"
    return (text.rstrip("0").rstrip(".") if "." in text else text) + "%"


_UNITS: dict[str, Decimal | int] = {
    "m": Decimal(1) / 1440,
    "h": Decimal(1) / 24,
    "d": 1,
    "w": 7,
    "M": 30,
    "Q": 90,
    "Y": 365,
}


def window_of(notes: Notes, node, field: str, count, unit: str) -> int:
    """A window in whole days within our 7d-90d; anything else is moved to the nearest and noted."""
    shown = f"{text_of(count)}{unit}"
    try:
        days = Decimal(text_of(count)) * _UNITS[unit]
    except (InvalidOperation, KeyError):
        days = Decimal(0)
    if not days.is_finite() or days <= 0:
        notes.add(node, field, f"{shown!r} is not a window; {DEFAULT_DAYS}d used")
        return DEFAULT_DAYS
    if unit in ("M", "Q", "Y"):
        notes.add(node, field, f"{shown} taken as {days}d (alerts use a rolling window of whole days)")
    whole = max(MIN_DAYS, min(MAX_DAYS, int(days.to_integral_value())))
    if whole != days:
        hint = " (OpenSLO writes a month 1M; 1m is one minute)" if shown == "1m" else ""
        notes.add(
            node,
            field,
            f"{shown}{hint} is outside inferwatch's rolling windows of 7d to 90d in whole days; {whole}d used",
        )
    return whole
