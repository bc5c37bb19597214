"""The cost file (cost/example.yaml documents it) into a typed CostSpec, every problem named with its line."""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from inferwatch.errors import Problem, SpecError
from inferwatch.yamlio import Positions, Problems, load_document

__all__ = ["CostSpec", "LabelPrice", "load_cost", "parse_cost"]

_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
_KEYS = ("version", "currency", "gpu_hour", "by_label", "overhead")


@dataclass(frozen=True)
class LabelPrice:
    """GPUs whose `label` matches the anchored regex `match` cost `gpu_hour` an hour."""

    label: str
    match: str
    gpu_hour: Fraction


@dataclass(frozen=True)
class CostSpec:
    file: str
    currency: str
    gpu_hour: tuple[tuple[str, Fraction], ...]  # (gpu_model, price), in the file's order
    default: Fraction | None = None  # any other gpu_model; None: unpriced
    by_label: tuple[LabelPrice, ...] = ()  # checked first, first match wins
    overhead: Fraction = Fraction(0)  # a share on top: 0.15 for 15 %


def load_cost(path) -> CostSpec:
    loaded = load_document(path)
    return parse_cost(loaded.data, loaded.file, loaded.positions)


def _price(problems: Problems, node, key, field: str) -> Fraction | None:
    value = node.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        problems.add(
            node,
            field,
            f"{value!r} is no price: a number of currency units per GPU-hour, 0 or more, e.g. 2.49",
            key=key,
        )
        return None
    return Fraction(str(value))


def parse_cost(doc, file: str = "<cost>", positions: Positions | None = None) -> CostSpec:
    """A CostSpec, or SpecError listing every problem (file, line, field, what would be valid)."""
    problems = Problems(file, positions)
    if not isinstance(doc, dict):
        raise SpecError([Problem(file, None, "", "a cost file is a mapping with gpu_hour: {GPU model: price}")])
    problems.unknown_keys(doc, _KEYS)
    if doc.get("version", 1) != 1:
        problems.add(doc, "version", "must be 1")
    currency = doc.get("currency", "USD")
    if not isinstance(currency, str) or not currency.strip():
        problems.add(doc, "currency", "a name such as USD or EUR")
    table = doc.get("gpu_hour")
    prices, default = [], None
    if not isinstance(table, dict) or not table:
        problems.add(
            doc,
            "gpu_hour",
            "a mapping of GPU model (the gpu_model label) to its price per GPU-hour, "
            "e.g. {NVIDIA H100 80GB HBM3: 2.49}",
        )
    else:
        for model in table:
            price = _price(problems, table, model, f"gpu_hour.{model}")
            if price is not None and model == "default":
                default = price
            elif price is not None:
                prices.append((str(model), price))
    rules = []
    by_label = doc.get("by_label") or ()
    for i, item in enumerate(by_label):
        field = f"by_label[{i}]"
        if not isinstance(item, dict):
            problems.add(by_label, field, "{label, match, gpu_hour}", key=i)
            continue
        label, match = item.get("label"), item.get("match")
        if not isinstance(label, str) or not _LABEL.match(label):
            problems.add(item, field + ".label", f"{label!r} is no label name")
        try:
            re.compile(str(match))
            if not isinstance(match, str):
                raise re.error("not a string")
        except re.error as err:
            problems.add(item, field + ".match", f"{match!r}: {err}")
        price = _price(problems, item, "gpu_hour", field + ".gpu_hour")
        if price is not None and isinstance(label, str) and isinstance(match, str):
            rules.append(LabelPrice(label, match, price))
    overhead = Fraction(0)
    if "overhead" in doc:
        raw = str(doc["overhead"]).strip()
        try:
            overhead = Fraction(raw[:-1]) / 100 if raw.endswith("%") else Fraction(raw)
            if overhead < 0:
                raise ValueError
        except (ValueError, ZeroDivisionError):
            problems.add(doc, "overhead", f"{raw!r}: a share such as 15% or 0.15, 0 or more")
    problems.raise_if_any()
    return CostSpec(file, str(currency).strip(), tuple(prices), default, tuple(rules), overhead)
