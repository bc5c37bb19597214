"""Read and write the Prometheus text exposition format (0.0.4), fast.

A scrape is split into families at its comment lines. A family whose sample
lines are all in the canonical shape that prometheus_client and the Go client
write (labels present or absent, no escapes) is validated with one regex over
its whole block and kept as text, so the normalizer can rewrite it with string
operations at C speed. Anything else takes the exact per-line parser, which
accepts the whole format and reports the line of the first problem.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import NamedTuple

from inferwatch.errors import ExpositionError
from inferwatch.promql import escape_label_value

__all__ = [
    "blank_elisions",
    "Family",
    "Sample",
    "split_families",
    "parse_sample",
    "format_header",
    "format_sample",
    "format_value",
    "has_label",
    "is_canonical_block",
    "is_float",
]

FAMILY_TYPES = ("counter", "gauge", "histogram", "summary", "untyped", "unknown", "info", "stateset", "gaugehistogram")
SUFFIXES = ("_bucket", "_sum", "_count", "_created", "_total", "_info", "_gsum", "_gcount")

# Every pattern below reads untrusted input, so each is unambiguous (one way to match any text) and
# the per-line repetition is atomic: matching stays linear, whatever a target sends.
_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_NAME_RE = re.compile(_NAME + r"\Z")
_CANON_LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*+="[^"\\\n]*+"'
_EXP = r"[eE][-+]?[0-9]++"
_VALUE_RE = rf"(?:[-+]?(?:[0-9]++(?:\.[0-9]*+)?(?:{_EXP})?|\.[0-9]++(?:{_EXP})?|[Ii]nf(?:inity)?)|NaN|nan)"
# The fast path takes only values that cannot overflow a float64 (Go's ParseFloat rejects those)
# and timestamps that fit an int64; anything longer goes the exact way.
_SAFE_EXP = r"[eE](?:-[0-9]++|\+?[0-9]{1,2}+)"
_SAFE_VALUE = (
    rf"(?:[-+]?(?:[0-9]{{1,200}}+(?:\.[0-9]*+)?(?:{_SAFE_EXP})?|\.[0-9]++(?:{_SAFE_EXP})?"
    r"|[Ii]nf(?:inity)?)|NaN|nan)"
)  # Go's ParseFloat takes no sign before NaN
_VALUE = re.compile(_VALUE_RE + r"\Z")
_TIMESTAMP = re.compile(r"-?[0-9]++\Z")
_INT64 = 2**63
_SAMPLE_HEAD = re.compile(rf"({_NAME})[ \t]*")
_LABEL = re.compile(r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"((?:[^"\\\n]|\\.)*+)"[ \t]*')
# Label values have three escapes (\\, \" and \n); any other backslash stands for itself, as Prometheus and
# prometheus_client read it: le="\0.5" is the four characters \0.5 (not a number), written back as le="\\0.5".
_UNESCAPE = re.compile(r'\\([\\"n])')
_HELP_UNESCAPE = re.compile(r"\\([\\n])")
_COMMENT = re.compile(r"#[ \t]+(HELP|TYPE)[ \t]+([^ \t]+)(?:[ \t]+(.*))?\Z")
# The family name comes first (`name\n`), then its lines; a back reference keeps one pattern for all names.
_CANON_BLOCK = re.compile(
    rf"(?P<n>{_NAME})\n(?>(?P=n)(?:_bucket|_sum|_count|_created|_total)?"
    rf"(?:\{{{_CANON_LABEL}(?:,{_CANON_LABEL})*+\}})? (?:{_SAFE_VALUE})(?: -?[0-9]{{1,18}}+)?\n)*+\Z"
)


class Sample(NamedTuple):
    """One sample line: label values unescaped, value and timestamp as written."""

    name: str
    labels: tuple[tuple[str, str], ...]
    value: str
    timestamp: str | None = None


@dataclass
class Family:
    """One metric family of a scrape: its comment lines and its sample lines."""

    name: str
    type: str | None = None
    help_line: str | None = None  # "# HELP ..." in canonical form, without newline
    type_line: str | None = None
    body: str = ""  # sample lines, each ending in "\n"
    canonical: bool = True  # body is in the canonical shape (see module doc)
    line: int = 0  # 1-based line where the family starts
    error: str | None = None  # set in tolerant mode: a line of this family did not parse
    _samples: list[Sample] | None = field(default=None, repr=False)

    def samples(self) -> list[Sample]:
        """The parsed samples (parsed once, on demand)."""
        if self._samples is None:
            # "\n" only: str.splitlines() would also cut at U+2028, \r, \x85... inside label values
            self._samples = [parse_sample(ln, self.line) for ln in self.body.split("\n") if ln.strip()]
        return self._samples

    def header(self) -> str:
        return "".join(f"{ln}\n" for ln in (self.help_line, self.type_line) if ln)


def is_canonical_block(name: str, block: str) -> bool:
    """Whether every line of `block` is a canonical sample of family `name` (linear time)."""
    return _CANON_BLOCK.match(f"{name}\n{block}") is not None


def _unescape(value: str) -> str:
    if "\\" not in value:
        return value
    return _UNESCAPE.sub(lambda m: "\n" if m.group(1) == "n" else m.group(1), value)


def is_float(text: str) -> bool:
    """Whether Prometheus reads `text` as a float: our grammar, and no overflow (Go rejects 1e999)."""
    if not _VALUE.match(text):
        return False
    number = float(text)
    return number not in (float("inf"), float("-inf")) or text.lstrip("+-")[:1] in "Ii"


def parse_sample(line: str, lineno: int = 0) -> Sample:
    """Parse one sample line exactly, or raise ExpositionError naming what is wrong."""
    head = _SAMPLE_HEAD.match(line)
    if not head:
        raise ExpositionError(lineno, f"expected a metric name at the start of {_excerpt(line)}")
    pos = head.end()
    labels: list[tuple[str, str]] = []
    seen: set[str] = set()
    if pos < len(line) and line[pos] == "{":
        pos += 1
        while True:
            while pos < len(line) and line[pos] in " \t":
                pos += 1
            if pos < len(line) and line[pos] == "}":
                pos += 1
                break
            lab = _LABEL.match(line, pos)
            if not lab:
                raise ExpositionError(lineno, f"malformed label set in {_excerpt(line)}")
            key = lab.group(1)
            if key in seen:
                raise ExpositionError(lineno, f"label {key!r} appears twice in {_excerpt(line)}")
            seen.add(key)
            labels.append((key, _unescape(lab.group(2))))
            pos = lab.end()
            if pos < len(line) and line[pos] == ",":
                pos += 1
            elif pos < len(line) and line[pos] == "}":
                pos += 1
                break
            else:
                raise ExpositionError(lineno, f"label set not closed in {_excerpt(line)}")
    rest = line[pos:].split()
    if not rest or len(rest) > 2:
        raise ExpositionError(lineno, f"expected 'name{{labels}} value [timestamp]', got {_excerpt(line)}")
    if not is_float(rest[0]):
        raise ExpositionError(lineno, f"invalid sample value {_excerpt(rest[0])} in {_excerpt(line)}")
    if len(rest) == 2 and not (_TIMESTAMP.match(rest[1]) and -_INT64 <= int(rest[1]) < _INT64):
        raise ExpositionError(lineno, f"invalid timestamp {_excerpt(rest[1])} in {_excerpt(line)}")
    return Sample(head.group(1), tuple(labels), rest[0], rest[1] if len(rest) == 2 else None)


def _excerpt(line: str) -> str:
    return repr(line if len(line) <= 80 else line[:77] + "...")


def format_value(value: float) -> str:
    """A float as the Python client writes it (repr, with +Inf/-Inf/NaN)."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_header(name: str, mtype: str, help_text: str) -> str:
    """The HELP and TYPE lines of a family, help text escaped."""
    return f"# HELP {name} {_escape_help(help_text)}\n# TYPE {name} {mtype}\n"


def format_sample(sample: Sample) -> str:
    """One sample line, newline included."""
    labels = ",".join(f'{k}="{escape_label_value(v)}"' for k, v in sample.labels)
    head = f"{sample.name}{{{labels}}}" if labels else sample.name
    tail = f" {sample.timestamp}" if sample.timestamp is not None else ""
    return f"{head} {sample.value}{tail}\n"


def has_label(body: str, label: str) -> bool:
    """Whether any line of a canonical body carries `label`."""
    return f'{{{label}="' in body or f',{label}="' in body


def _family_of(sample_name: str, current: Family) -> bool:
    if sample_name == current.name:
        return True
    return sample_name.startswith(current.name) and sample_name[len(current.name) :] in SUFFIXES


def _help_line(name: str, text: str) -> str:
    """The HELP line as Prometheus reads it (only \\\\ and \\n are escapes), written back canonically."""
    if "\\" in text:
        text = _HELP_UNESCAPE.sub(lambda m: "\\" if m.group(1) == "\\" else "\n", text)
    return f"# HELP {name} {_escape_help(text)}"


class _Splitter:
    """State of one pass over a scrape."""

    def __init__(self, text: str, source: str, tolerant: bool):
        self.text = text
        self.source = source
        self.tolerant = tolerant
        self.families: list[Family] = []
        self.current: Family | None = None
        self._counted = (0, 1)  # (offset, line there): offsets only grow, so counting stays linear

    def line_at(self, offset: int) -> int:
        start, line = self._counted
        if offset < start:
            return self.text.count("\n", 0, offset) + 1
        line += self.text.count("\n", start, offset)
        self._counted = (offset, line)
        return line

    def comment(self, line: str, offset: int) -> None:
        match = _COMMENT.match(line.rstrip("\r"))
        if not match:
            return  # other comments (and OpenMetrics' # EOF / # UNIT) carry no samples
        kind, name, rest = match.group(1), match.group(2), match.group(3) or ""
        if not _NAME_RE.match(name):
            raise ExpositionError(
                self.line_at(offset), f"invalid metric name {_excerpt(name)} in {kind} line", self.source
            )
        cur = self.current
        if (
            cur is None
            or cur.name != name
            or cur.body
            or (kind == "HELP" and cur.help_line)
            or (kind == "TYPE" and cur.type_line)
        ):
            cur = Family(name=name, line=self.line_at(offset))
            self.families.append(cur)
            self.current = cur
        if kind == "HELP":
            cur.help_line = _help_line(name, rest)
            return
        mtype = rest.strip(" \t")
        if mtype not in FAMILY_TYPES:
            error = ExpositionError(
                self.line_at(offset), f"unknown metric type {_excerpt(mtype)} for {name}", self.source
            )
            if not self.tolerant:
                raise error
            cur.error = cur.error or str(error)
            mtype = "untyped"
        cur.type_line, cur.type = f"# TYPE {name} {mtype}", mtype

    def samples(self, block: str, offset: int) -> None:
        cur = self.current
        if cur is not None and not cur.body and is_canonical_block(cur.name, block):
            cur.body = block
            return
        self.slow_samples(block, offset)

    def _bad_line(self, line: str, err: ExpositionError) -> Family:
        """Tolerant mode: the family a line that does not parse belongs to, marked broken."""
        error = ExpositionError(err.line, err.reason, self.source)
        head = _SAMPLE_HEAD.match(line)
        if not self.tolerant or head is None:
            raise error from None  # not even a metric name: not an exposition
        cur = self.current
        if cur is None or not _family_of(head.group(1), cur):
            cur = Family(name=head.group(1), line=err.line)
            self.families.append(cur)
            self.current = cur
        cur.error = cur.error or str(error)
        return cur

    def slow_samples(self, block: str, offset: int) -> None:
        lineno = self.line_at(offset)
        written: dict[int, tuple[Family, list[str]]] = {}  # new body lines per family, joined once at the end
        for line in block.split("\n"):
            if line.strip():
                try:
                    sample = parse_sample(line, lineno)
                except ExpositionError as err:
                    self._bad_line(line, err)
                    lineno += 1
                    continue
                cur = self.current
                if cur is None or not _family_of(sample.name, cur):
                    cur = Family(name=sample.name, line=lineno)
                    self.families.append(cur)
                    self.current = cur
                if id(cur) not in written:
                    cur.samples()  # parse what the family already holds before adding to it
                    written[id(cur)] = (cur, [])
                cur.samples().append(sample)  # parsed above: the family's own list
                written[id(cur)][1].append(format_sample(sample))
            lineno += 1
        for fam, lines in written.values():
            fam.body += "".join(lines)
            fam.canonical = False


# How docs and issues elide part of a scrape: a line that is nothing but an ellipsis, possibly indented.
_ELISION = re.compile(r"^[ \t]*(?:\.\.\.|\u2026)[ \t]*$", re.MULTILINE)


def blank_elisions(text: str) -> tuple[str, list[int]]:
    """`text` with every elision line (only `...` or `…`) emptied, and their line numbers; the other lines keep
    their numbers, so a later error still names the right one."""
    found: list[int] = []
    line, pos = 1, 0
    if "..." not in text and "\u2026" not in text:  # the usual scrape: two scans at C speed, no regex
        return text, found
    for match in _ELISION.finditer(text):
        line += text.count("\n", pos, match.start())
        pos = match.start()
        found.append(line)
    return (_ELISION.sub("", text) if found else text), found


def split_families(text: str, source: str = "<input>", *, tolerant: bool = False) -> list[Family]:
    """Split an exposition into families, validating every line.

    A line that does not parse raises ExpositionError; with `tolerant`, a line that starts with a
    metric name marks its family broken (`Family.error`) instead, so one bad family costs only itself.
    """
    if "\x00" in text:
        raise ExpositionError(text.count("\n", 0, text.index("\x00")) + 1, "binary data (NUL byte)", source)
    if text and not text.endswith("\n"):
        text += "\n"
    splitter = _Splitter(text, source, tolerant)
    pos = 0
    while pos < len(text):
        # the next comment line starts at `pos` or after a newline; str.find runs at C speed
        if text.startswith("#", pos):
            start = pos
        else:
            start = text.find("\n#", pos - 1 if pos else 0) + 1
            if start == 0:
                splitter.samples(text[pos:], pos)
                break
        if start > pos:
            splitter.samples(text[pos:start], pos)
        end = text.index("\n", start)
        splitter.comment(text[start:end], start)
        pos = end + 1
    return splitter.families
