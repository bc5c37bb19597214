"""Parse PromQL vector selectors (`name{label=~"v"}`) and write `le` matchers that every spelling satisfies."""

from __future__ import annotations

import re
from decimal import Decimal
from fractions import Fraction

from inferwatch.slo._model import Matcher, Selector

__all__ = ["parse_selector", "le_matcher", "le_spellings"]

_NAME = re.compile(r"\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*")
_MATCHER = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*(,?)')


def parse_selector(text: str) -> Selector:
    """`metric{a="b", c=~"d"}` into a Selector; ValueError says what is wrong."""
    match = _NAME.match(text)
    if not match:
        raise ValueError(f"{text!r} does not start with a metric name")
    pos, matchers = match.end(), []
    if pos < len(text) and text[pos] == "{":
        pos += 1
        while True:
            close = re.compile(r"\s*}\s*").match(text, pos)
            if close:
                pos = close.end()
                break
            item = _MATCHER.match(text, pos)
            if not item:
                raise ValueError(f'{text!r}: expected label="value" at column {pos + 1}')
            value = _unquote(text, item.start(3), item.group(3))
            matchers.append(Matcher(item.group(1), item.group(2), value))
            pos = item.end()
            if not item.group(4) and not re.compile(r"\s*}").match(text, pos):
                raise ValueError(f"{text!r}: expected , or }} at column {pos + 1}")
    if pos != len(text):
        raise ValueError(f"{text!r}: unexpected text at column {pos + 1}; give a plain selector, not a query")
    return Selector(match.group(1), tuple(matchers))


def _unquote(text: str, start: int, body: str) -> str:
    """The value of a double-quoted PromQL string; only \\\\ and \\" escapes, so nothing changes meaning."""
    for match in re.finditer(r"\\(.)", body):
        if match.group(1) not in '\\"':
            raise ValueError(
                f"{text!r}: escape \\{match.group(1)} at column {start + match.start() + 1} is not "
                "supported; write \\\\ for a backslash (a regex's \\. is \\\\.)"
            )
    return re.sub(r"\\(.)", r"\1", body)


def _go_float(value: float) -> str:
    """Go's strconv.FormatFloat(v, 'g', -1, 64), the spelling of Go clients and Prometheus 2."""
    sign, digits, exp = Decimal(repr(value)).normalize().as_tuple()
    if not isinstance(exp, int):  # 'n', 'N', 'F': no bucket bound is NaN or infinite
        raise ValueError(f"{value!r} is not a finite number")
    text = "".join(map(str, digits))
    point = len(text) + exp  # position of the decimal point
    eprec = len(text) if len(text) >= point and len(text) < 6 else 6
    x = point - 1
    if x < -4 or x >= eprec:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return f"{'-' if sign else ''}{mantissa}e{'-' if x < 0 else '+'}{abs(x):02d}"
    if point <= 0:
        body = "0." + "0" * -point + text
    elif point >= len(text):
        body = text + "0" * (point - len(text))
    else:
        body = text[:point] + "." + text[point:]
    return ("-" if sign else "") + body


def le_spellings(threshold: Fraction) -> list[str]:
    """Every way an exporter writes this bucket bound: `1`, `1.0` (Python clients, Prometheus 3), `1e-05`..."""
    value = float(threshold)
    return sorted({repr(value), _go_float(value)}, key=lambda s: (len(s), s))


def le_matcher(threshold: Fraction) -> Matcher:
    """`le=~"1|1[.]0"`: matches the bound however it is spelled."""
    spellings = le_spellings(threshold)
    if len(spellings) == 1:
        return Matcher("le", "=", spellings[0])
    return Matcher("le", "=~", "|".join(s.replace(".", "[.]").replace("+", "[+]") for s in spellings))
