"""PromQL text that several packages write: one escaper for a double-quoted label value.

A label value in a query (`model="a\\"b"`) and in the text exposition format (`{model="a\\"b"}`) take the same
three escapes: a backslash, a double quote and a line break. Every writer of either goes through
`escape_label_value`, so a value with a quote or a newline reads back as itself everywhere.
"""

from __future__ import annotations

__all__ = ["escape_label_value"]


def escape_label_value(value: str) -> str:
    """`value` escaped for the inside of a double-quoted label value (PromQL and the exposition format alike).
    The exporter's hot path calls this per label: most values need no escape, and those are returned as given."""
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value
