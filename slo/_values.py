"""What a spec's values may be, as pure checks: each returns why a value is refused, or None.

YAML turns `yes` into a boolean and an empty value into null; Prometheus
reserves labels starting with `__`, runs RE2 regexes and drops labels whose
value is empty. `slo check` refuses all of these, so nothing silently becomes
'True' or 'None' and nothing compiles into rules Prometheus rejects.
"""

from __future__ import annotations

import re

from inferwatch.slo._model import Matcher

__all__ = ["show", "text_problem", "value_problem", "label_name_problem", "matcher_problem", "regex_problem"]

_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
_CONTROL = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]")
_CONTROL_MULTILINE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\ud800-\udfff]")  # tab and newline allowed


def show(value) -> str:
    return repr(value)


def text_problem(value) -> str | None:
    """Text is a string or a whole number (`dp_rank: 0`); null, booleans and fractions are not."""
    if value is None:
        return "has no value; write the text (quoted if it could read as a number, a boolean or null)"
    if isinstance(value, bool):
        return (
            f"is the boolean {str(value).lower()} (YAML reads yes, no, on, off, true and false so); "
            "quote it if you mean the text"
        )
    if isinstance(value, float):
        return f"{value!r} is a number with a fraction; quote it so the value is exactly what you wrote"
    if not isinstance(value, (str, int)):
        return f"{show(value)} must be text"
    return None


def value_problem(value, multiline: bool = False, empty: bool = False) -> str | None:
    """A label or annotation value: text, on one line unless `multiline`, not empty unless `empty`."""
    problem = text_problem(value)
    if problem:
        return problem
    text = str(value)
    if (_CONTROL_MULTILINE if multiline else _CONTROL).search(text):
        return f"{text!r} contains a control character; {'' if multiline else 'one line of '}text only"
    if not empty and text == "":
        return "is empty, and Prometheus drops what has an empty value; remove it or give it a value"
    return None


def label_name_problem(name) -> str | None:
    if not isinstance(name, str) or not _LABEL.match(name):
        return f"{show(name)} is not a label name: letters, digits and '_', not starting with a digit"
    if name.startswith("__"):
        return "names starting with __ are reserved for Prometheus' own use"
    return None


def matcher_problem(m: Matcher, allow_le: bool) -> str | None:
    """A matcher Prometheus accepts and that can match: no reserved label, no `le` where the threshold sets
    it, a one-line value, a regex RE2 compiles."""
    if m.label == "__name__":
        return "give the metric name before the braces, not as __name__"
    problem = label_name_problem(m.label)
    if problem is None and m.label == "le" and not allow_le:
        problem = "le is set from the threshold; a second le matcher would match no bucket"
    elif problem is None and _CONTROL.search(m.value):
        problem = f"{m.label}: {m.value!r} contains a control character"
    elif problem is None and "~" in m.op:
        problem = regex_problem(m.value)
    return problem


def regex_problem(pattern: str) -> str | None:
    """Prometheus' regexes are RE2: no lookaround or backreferences."""
    if re.search(r"\(\?<?[=!]|\\[1-9]", pattern):
        return f"{pattern!r}: RE2 has no lookaround or backreferences"
    try:
        re.compile(pattern)
    except re.error as err:
        return f"{pattern!r} is not a valid regular expression ({err})"
    return None
