"""Renderer 1 of the mappings: rewrite a scraped exposition into the vocabulary.

`Normalizer.normalize(text)` detects the sources present, maps their families
to common names and labels, scales values where a mapping says so, and passes
everything else through. When an engine emits an old and a new name for the
same data (vLLM 0.10 to 0.14), only the preferred name is read, so each common
series appears once.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from inferwatch.exporters._exposition import (
    Family,
    Sample,
    blank_elisions,
    format_header,
    format_sample,
    format_value,
    has_label,
    parse_sample,
    split_families,
)
from inferwatch.mappings import Catalog, Entry, SourceMapping, sanitized, select_source

__all__ = ["Normalizer", "NormalizeResult", "OutFamily", "add_label", "KEY_SERIES"]

log = logging.getLogger("inferwatch.normalize")

# what an engine's dashboards and SLOs cannot do without; a scrape that lacks them is worth a warning
KEY_SERIES = (
    "llm_requests_running",
    "llm_requests_waiting",
    "llm_kv_cache_usage_ratio",
    "llm_time_to_first_token_seconds",
)
_SUFFIXES_BY_TYPE = {"counter": ("", "_total"), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count")}


@dataclass
class OutFamily:
    """One family of the output: header lines and sample chunks from one or more inputs."""

    name: str
    header: str
    chunks: list[str] = field(default_factory=list)
    canonical: list[bool] = field(default_factory=list)

    def add(self, body: str, canonical: bool) -> None:
        if body:
            self.chunks.append(body)
            self.canonical.append(canonical)


@dataclass
class NormalizeResult:
    """The normalized families of one scrape, plus what happened on the way."""

    families: dict[str, OutFamily]
    sources: tuple[str, ...]
    series_in: int
    series_out: int
    blanks_dropped: int = 0
    warnings: list[str] = field(default_factory=list)
    detected: tuple[str, ...] = ()  # sources whose names are in the input, whatever `source=` forced
    produced: dict[str, set[str]] = field(default_factory=dict)  # source -> common names it gave samples for

    def render(self) -> str:
        return render(self.families.values())


def _line_list(numbers: list[int], most: int = 10) -> str:
    """`lines 2-3, 5` for [2, 3, 5]: runs as ranges, the first `most` of them, then how many lines more."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    shown = ", ".join(f"{a}-{b}" if b > a else str(a) for a, b in runs[:most])
    rest = sum(b - a + 1 for a, b in runs[most:])
    return f"line{'s' if len(numbers) > 1 else ''} {shown}" + (f" and {rest} more" if rest else "")


def render(families) -> str:
    """Families as exposition text: one HELP and TYPE each, then their samples."""
    parts = []
    for fam in families:
        parts.append(fam.header)  # kept for families without samples too, as the source had them
        parts.extend(fam.chunks)
    return "".join(parts)


def add_label(body: str, canonical: bool, key: str, value: str) -> str:
    """Every sample of `body` with one more label (replacing one of the same name)."""
    escaped = format_sample(Sample("x", ((key, value),), "0"))[1:-3]  # {key="value"}, escaped once
    if canonical and body.count('"} ') == body.count("\n") and not has_label(body, key):
        return body.replace('"} ', f'",{escaped[1:-1]}}} ')
    out = []
    for line in body.split("\n"):  # "\n" only: splitlines() also cuts at U+2028 inside label values
        if line:
            s = parse_sample(line)
            labels = tuple((k, v) for k, v in s.labels if k != key) + ((key, value),)
            out.append(format_sample(s._replace(labels=labels)))
    return "".join(out)


class _Index:
    """Source family name (both spellings) -> the entries that read it, for one set of mappings."""

    def __init__(self, mappings: list[SourceMapping]):
        self.uses: dict[str, list[tuple[SourceMapping, Entry, str]]] = {}
        owner: dict[str, str] = {}
        for mapping in mappings:
            for entry in mapping.entries:
                for src in entry.sources:
                    for spelling in {src, sanitized(src)}:
                        if owner.get(spelling, mapping.source) != mapping.source:
                            # a later (user) mapping overrides a built-in one for this name
                            self.uses[spelling] = []
                        owner[spelling] = mapping.source
                        self.uses.setdefault(spelling, []).append((mapping, entry, src))

    def lookup(self, family: Family) -> tuple[list[tuple[SourceMapping, Entry, str]], bool]:
        """Entries for a family, and whether its name is the source name exactly."""
        uses = self.uses.get(family.name)
        if uses:
            return uses, True
        if family.type == "counter":
            return self.uses.get(family.name + "_total", []), False
        return [], False

    def is_created_companion(self, name: str) -> bool:
        """`x_created` families that prometheus_client writes beside mapped counters and histograms."""
        if not name.endswith("_created"):
            return False
        base = name[: -len("_created")]
        return base in self.uses or base + "_total" in self.uses


class Normalizer:
    """Translate expositions from any mapped source into the common vocabulary."""

    def __init__(
        self,
        mappings: list[SourceMapping],
        catalog: Catalog,
        *,
        source: str | None = None,
        drop_unmapped: bool = False,
        keep_original: bool = False,
    ):
        self.mappings = list(mappings)
        self.catalog = catalog
        self.drop_unmapped = drop_unmapped
        self.keep_original = keep_original
        self.forced = select_source(self.mappings, source) if source is not None else None
        # detect prefixes in both spellings, computed once rather than per scrape
        self._detect = [(m, tuple({*m.detect, *(sanitized(p) for p in m.detect)})) for m in self.mappings]
        self._indexes: dict[tuple[str, ...], _Index] = {}

    def detect(self, families: list[Family]) -> list[SourceMapping]:
        """The mappings whose detect prefixes match a family of this scrape."""
        if self.forced is not None:
            return [self.forced]
        return self._detected(families)

    def _detected(self, families: list[Family]) -> list[SourceMapping]:
        names = [f.name for f in families]
        return [mapping for mapping, prefixes in self._detect if any(n.startswith(prefixes) for n in names)]

    def _index(self, active: list[SourceMapping]) -> _Index:
        key = tuple(m.path for m in active)
        index = self._indexes.get(key)
        if index is None:
            index = self._indexes[key] = _Index(active)
        return index

    def normalize(self, text: str, origin: str = "<input>") -> NormalizeResult:
        """Normalize an exposition as read from a file or pasted (`origin` names it in errors and warnings).

        Lines that are only `...` or `…` (docs eliding part of a scrape) are skipped with one warning naming
        them; any other line that does not parse is an ExpositionError at its line."""
        text, elided = blank_elisions(text)
        result = self.normalize_families(split_families(text, origin))
        if elided:
            result.warnings.insert(
                0, f"{origin}: skipped {_line_list(elided)}: only '...', an elision in pasted docs, not a sample"
            )
        return result

    def normalize_families(self, families: list[Family]) -> NormalizeResult:
        """`normalize` for families already split (and checked) by the caller."""
        active = self.detect(families)
        index = self._index(active)
        looked_up = [(fam, *index.lookup(fam)) for fam in families]
        present = {src for _, uses, _ in looked_up for _, _, src in uses}
        out: dict[str, OutFamily] = {}
        result = NormalizeResult(out, tuple(m.source for m in active), 0, 0)
        result.detected = result.sources if self.forced is None else tuple(m.source for m in self._detected(families))
        for fam, uses, exact in looked_up:
            result.series_in += fam.body.count("\n")
            if fam.type == "histogram":
                _check_histogram(fam, result.warnings)
            if uses:
                for mapping, entry, src in uses:
                    if _preferred(entry, present) == src:
                        self._emit(out, mapping, entry, fam, exact, result)
                if self.keep_original:
                    _passthrough(out, fam)
            elif index.is_created_companion(fam.name):
                if self.keep_original:
                    _passthrough(out, fam)
            elif not self.drop_unmapped:
                _passthrough(out, fam)
        result.series_out = sum(c.count("\n") for f in out.values() for c in f.chunks)
        return result

    def _emit(
        self,
        out: dict[str, OutFamily],
        mapping: SourceMapping,
        entry: Entry,
        fam: Family,
        exact: bool,
        result: NormalizeResult,
    ) -> None:
        if fam.type and fam.type not in ("untyped", "unknown") and fam.type != entry.type:
            if "histogram" in (fam.type, entry.type):
                result.warnings.append(f"{fam.name} is a {fam.type}, but {entry.name} is a {entry.type}: not mapped")
                _passthrough(out, fam)
                return
            result.warnings.append(f"{fam.name} is typed {fam.type}; exposed as {entry.name} ({entry.type})")
        target = out.get(entry.name)
        if target is None:
            target = out[entry.name] = OutFamily(
                entry.name, format_header(entry.name, entry.type, self.catalog[entry.name].help)
            )
        body = _fast_rewrite(mapping, entry, fam) if exact else None
        if body is not None:
            target.add(body, True)
        else:
            body, blanks = _slow_rewrite(mapping, entry, fam)
            result.blanks_dropped += blanks
            target.add(body, False)
        if body:
            result.produced.setdefault(mapping.source, set()).add(entry.name)

    def check(self, result: NormalizeResult) -> list[str]:
        """What a user should hear about a result that is not useful: an empty output, a --source that matches
        nothing, no known source, or a detected engine without its key series. Data only; callers print."""
        notes = []
        forced = self.forced.source if self.forced is not None else None
        if forced is not None and forced not in result.detected:
            seen = f" (the input looks like {', '.join(result.detected)})" if result.detected else ""
            notes.append(f"--source {forced}: no {forced} metrics in the input{seen}")
        elif not result.sources:
            notes.append(
                "no known source detected; "
                + (
                    "--drop-unmapped left out everything"
                    if self.drop_unmapped
                    else "everything passed through unchanged"
                )
                + " (use --source or add a mapping)"
            )
        if result.series_out == 0 and not (result.sources == () and self.drop_unmapped):
            notes.append(
                f"the output has no samples ({result.series_in} series in"
                + ("; --drop-unmapped left out every unmapped one)" if self.drop_unmapped else ")")
            )
        for mapping in self.mappings:
            if mapping.source not in result.detected or mapping.source not in result.sources:
                continue
            mapped = {e.name for e in mapping.entries}
            missing = [n for n in KEY_SERIES if n in mapped and n not in result.produced.get(mapping.source, ())]
            if missing:
                notes.append(
                    f"{mapping.source}: no samples for {', '.join(missing)}: dashboards and SLOs that "
                    "read them will show no data (a partial scrape, or a release whose names no "
                    "mapping knows?)"
                )
        return notes


def _check_histogram(fam: Family, warnings: list[str]) -> None:
    """Warn on a histogram that looks cut short (a part missing, or its last line a bucket), or has no buckets."""
    body = fam.body
    if not body:
        return
    missing = [
        part
        for part, text in (("+Inf bucket", 'le="+Inf"'), ("_sum", fam.name + "_sum"), ("_count", fam.name + "_count"))
        if text not in body
    ]
    last = body[body.rfind("\n", 0, len(body) - 1) + 1 :]
    if missing == ["+Inf bucket"] and fam.name + "_bucket" not in body:  # not cut: printed so (blogs, proxies)
        warnings.append(
            f"histogram {fam.name} (line {fam.line}) has only _sum and _count, no buckets: "
            "means can be read, quantiles and latency SLOs cannot"
        )
    elif missing:
        parts = ", ".join(missing[:-1]) + " or " + missing[-1] if len(missing) > 1 else missing[0]
        warnings.append(f"histogram {fam.name} (line {fam.line}) has no {parts}: was the input cut short?")
    elif last.startswith(fam.name + "_bucket"):
        warnings.append(f"histogram {fam.name} (line {fam.line}) ends in a _bucket line: was the input cut short?")


def _preferred(entry: Entry, present: set[str]) -> str | None:
    for src in entry.sources:
        if src in present:
            return src
    return None


def _passthrough(out: dict[str, OutFamily], fam: Family) -> None:
    target = out.get(fam.name)
    if target is None:
        target = out[fam.name] = OutFamily(fam.name, fam.header())
    target.add(fam.body, fam.canonical)


def _renames(rules, body: str) -> list[tuple[str, str]] | None:
    """Plain label renames for a canonical body, or None when the exact path is needed."""
    renames = []
    for rule in rules:
        present = [c for c in rule.candidates if has_label(body, c)]
        if not present or present == [rule.target]:
            continue
        if len(present) > 1 or has_label(body, rule.target):
            return None  # precedence between several present labels: decide per series
        renames.append((present[0], rule.target))
    return renames


def _fast_rewrite(mapping: SourceMapping, entry: Entry, fam: Family) -> str | None:
    """The rewritten body by string operations, or None if this family needs the exact path."""
    body = fam.body
    if not body:
        return ""
    if not fam.canonical or entry.reshaped or mapping.blank_at_or_above is not None or "_created" in body:
        return None
    renames = _renames((*mapping.labels, *entry.labels), body)
    if renames is None:
        return None
    if renames and ('=",' in body or '="}' in body):
        return None  # a label value ending in "=" could fake a label boundary
    for old, new in renames:
        body = body.replace(f'{{{old}="', f'{{{new}="').replace(f',{old}="', f',{new}="')
    if mapping.set_labels:
        if any(has_label(body, k) for k, _ in mapping.set_labels) or body.count('"} ') != body.count("\n"):
            return None
        extra = "".join(f',{k}="{v}"' for k, v in mapping.set_labels)
        body = body.replace('"} ', f'"{extra}}} ')
    src, dst = fam.name, entry.name
    return dst + body[len(src) :].replace("\n" + src, "\n" + dst)


def _slow_rewrite(mapping: SourceMapping, entry: Entry, fam: Family) -> tuple[str, int]:
    """The rewritten body, sample by sample; returns it and the number of blank values dropped."""
    allowed = _SUFFIXES_BY_TYPE[entry.type]
    rules = (*mapping.labels, *entry.labels)
    drop = set(entry.drop_labels)
    out: list[str] = []
    blanks = 0
    for s in fam.samples():
        suffix = s.name[len(fam.name) :]
        if suffix not in allowed:
            continue  # _created, or a suffix this type does not have
        name = entry.name if entry.type != "histogram" else entry.name + suffix
        labels = dict(s.labels)
        if any(labels.get(k) != v for k, v in entry.match):
            continue
        if mapping.blank_at_or_above is not None or entry.scaled:
            number = float(s.value)
            if mapping.blank_at_or_above is not None and number >= mapping.blank_at_or_above:
                blanks += 1
                continue
            value = format_value(entry.scale(number)) if entry.scaled else s.value
        else:
            value = s.value
        for rule in rules:
            found = next((labels[c] for c in rule.candidates if labels.get(c)), None)  # empty = absent
            for c in rule.candidates:
                labels.pop(c, None)
            if found is not None:
                labels[rule.target] = found
        for key in drop:
            labels.pop(key, None)
        labels.update(mapping.set_labels)
        labels.update(entry.set_labels)
        out.append(format_sample(Sample(name, tuple(labels.items()), value, s.timestamp)))
    return "".join(out), blanks
