"""Fuzzing the exporter with mutated fixtures: what it serves parses, and healthy targets are exact.

Each round serves one unmodified fixture (first, the healthy target) beside
mutated ones: cuts, CRLF, unicode and line separators, escapes (defined by
the format or not), odd `le` and `quantile` values, long and out-of-range
values, OpenMetrics `# EOF`, exemplars, timestamps, swapped, doubled and
renamed lines. A fixed seed keeps it repeatable and bounded (a few seconds).
"""

from __future__ import annotations

import asyncio
import random
import re

import aiohttp
import pytest
from conftest import all_expositions
from exporter_tools import (
    RawTargets,
    client_parse,
    expected_samples,
    make_config,
    promtool_problems,
    running_exporter,
    scrape,
    static,
)

from inferwatch.exporters import Normalizer, split_families

SEED = 20261130
ROUNDS = 25
MUTATED_PER_ROUND = 12
ODD = [
    "\u2028",
    "\u2029",
    "\r",
    "\x85",
    "\x0b",
    "\x0c",
    "\x1c",
    "é",
    "日本",
    "😀",
    "\ufeff",
    "\t",
    " ",
    "{",
    "}",
    ",",
    "=",
    "#",
]


def _lines(text: str) -> list[str]:
    return text.split("\n")


def cut(rnd: random.Random, text: str) -> str:
    return text[: rnd.randrange(len(text))]


def cut_at_line(rnd: random.Random, text: str) -> str:
    lines = _lines(text)
    return "\n".join(lines[: rnd.randrange(len(lines))]) + "\n"


def crlf(rnd: random.Random, text: str) -> str:
    return text.replace("\n", "\r\n")


def unicode(rnd: random.Random, text: str) -> str:
    quote = [i for i, c in enumerate(text) if c == '"']
    at = rnd.choice(quote) + 1 if quote and rnd.random() < 0.7 else rnd.randrange(len(text))
    return text[:at] + rnd.choice(ODD) + text[at:]


def escapes(rnd: random.Random, text: str) -> str:
    escape = rnd.choice(['\\"', "\\\\", "\\n", "\\t", "\\", "\\u2028"])
    lines = _lines(text)
    i = rnd.randrange(len(lines))
    if lines[i].startswith("# HELP"):
        lines[i] += escape
    elif '"' in lines[i]:
        at = lines[i].index('"') + 1
        lines[i] = lines[i][:at] + escape + lines[i][at:]
    return "\n".join(lines)


def escape_anywhere(rnd: random.Random, text: str) -> str:
    """A backslash sequence, one the format defines or not, at the start or end of any quoted value."""
    quotes = [i for i, c in enumerate(text) if c == '"']
    if not quotes:
        return text
    at = rnd.choice(quotes) + rnd.randint(0, 1)
    return text[:at] + rnd.choice(["\\0", "\\\\0", "\\\\", "\\t", "\\"]) + text[at:]


def rename_line(rnd: random.Random, text: str) -> str:
    """A sample line under another family's name, or a histogram's or summary's sample name of it."""
    lines = _lines(text)
    names = [ln.split()[2] for ln in lines if ln.startswith("# TYPE ") and len(ln.split()) > 2]
    i = rnd.randrange(len(lines))
    if names and lines[i] and not lines[i].startswith("#"):
        head = len(re.match(r"[^{ ]*", lines[i]).group(0))
        lines[i] = rnd.choice(names) + rnd.choice(["", "_bucket", "_sum", "_count"]) + lines[i][head:]
    return "\n".join(lines)


def bound(rnd: random.Random, text: str) -> str:
    """One histogram `le` or summary `quantile` spelled oddly: a float Go reads, or one it does not."""
    found = list(re.finditer(r'(?:le|quantile)="([^"]*)"', text))
    if not found:
        return text
    at = rnd.choice(found)
    value = rnd.choice(["\\0.5", "\\\\0.5", "fast", "", "0x10", "1e999", "INF", "1e-999", "+Inf", ".5", "2"])
    return text[: at.start(1)] + value + text[at.end(1) :]


def long_value(rnd: random.Random, text: str) -> str:
    value = rnd.choice(
        [
            "1" * 5000,
            "1e999",
            "-1e999",
            "1e308",
            "0x10",
            "1_000",
            "Infinity",
            "+Inf",
            "NaN",
            "1e-999",
            "9" * 400 + ".5",
            ".5e+99",
            "-NaN",
        ]
    )
    lines = _lines(text)
    i = rnd.randrange(len(lines))
    if lines[i] and not lines[i].startswith("#"):
        lines[i] = lines[i].rsplit(" ", 1)[0] + " " + value
    return "\n".join(lines)


def long_label(rnd: random.Random, text: str) -> str:
    return text.replace('"', '"' + "x" * rnd.choice([1000, 70000]), 1)


def eof(rnd: random.Random, text: str) -> str:
    return text + "# EOF\n"


def exemplar(rnd: random.Random, text: str) -> str:
    lines = _lines(text)
    candidates = [i for i, ln in enumerate(lines) if "_bucket" in ln and not ln.startswith("#")] or [0]
    i = rnd.choice(candidates)
    lines[i] += ' # {trace_id="4bf92f3577b34da6"} 0.05 1700000000.123'
    return "\n".join(lines)


def timestamp(rnd: random.Random, text: str) -> str:
    stamp = rnd.choice(["1700000000000", "-1", "99999999999999999999", "1.5", "1700000000.5", "0"])
    lines = _lines(text)
    for _ in range(rnd.randint(1, 5)):
        i = rnd.randrange(len(lines))
        if lines[i] and not lines[i].startswith("#"):
            lines[i] += " " + stamp
    return "\n".join(lines)


def openmetrics_type(rnd: random.Random, text: str) -> str:
    mtype = rnd.choice(["info", "stateset", "gaugehistogram", "unknown", "histogramm", "Gauge"])
    return text.replace(" gauge\n", f" {mtype}\n", 1)


def shuffle_lines(rnd: random.Random, text: str) -> str:
    lines = _lines(text)
    i, j = rnd.randrange(len(lines)), rnd.randrange(len(lines))
    if rnd.random() < 0.5:
        lines[i], lines[j] = lines[j], lines[i]
    else:
        lines.insert(j, lines[i])
    return "\n".join(lines)


def delete_chars(rnd: random.Random, text: str) -> str:
    at = rnd.randrange(len(text))
    return text[:at] + text[at + rnd.randint(1, 3) :]


MUTATIONS = [
    cut,
    cut_at_line,
    crlf,
    unicode,
    escapes,
    escape_anywhere,
    bound,
    long_value,
    long_label,
    eof,
    exemplar,
    timestamp,
    openmetrics_type,
    shuffle_lines,
    rename_line,
    delete_chars,
]


def mutate(rnd: random.Random, text: str) -> tuple[str, list[str]]:
    names = []
    for _ in range(rnd.randint(1, 3)):
        mutation = rnd.choice(MUTATIONS)
        text = mutation(rnd, text) or "\n"
        names.append(mutation.__name__)
    return text, names


@pytest.fixture(scope="module")
def normalizer(mappings, catalog):
    return Normalizer(mappings, catalog)


def test_whatever_targets_send_the_exporter_serves_what_prometheus_parses(normalizer):
    rnd = random.Random(SEED)
    fixtures = [p.read_text() for p in all_expositions()]
    rounds = []
    for _ in range(ROUNDS):
        healthy = rnd.choice(fixtures)
        mutated = [mutate(rnd, rnd.choice(fixtures)) for _ in range(MUTATED_PER_ROUND)]
        rounds.append((healthy, mutated))

    async def main():
        served = []
        for healthy, mutated in rounds:
            routes = {"/healthy": static(healthy.encode())}
            routes.update(
                {f"/m{i}": static(text.encode("utf-8", "surrogatepass")) for i, (text, _) in enumerate(mutated)}
            )
            async with RawTargets(routes) as targets:
                config = make_config({p.strip("/"): targets.url(p) for p in routes}, timeout=2.0)
                async with running_exporter(config, normalizer) as (base, _), aiohttp.ClientSession() as session:
                    served.append(await scrape(session, base))
        return served

    served = asyncio.run(main())
    ups = 0
    for (healthy, mutated), text in zip(rounds, served, strict=True):
        mutations = [names for _, names in mutated]
        problem = promtool_problems(text)
        assert problem is None, f"{problem}\nmutations: {mutations}"
        client_parse(text)
        up, samples = by_target(text)
        assert up["healthy"] == "1.0"
        assert samples["healthy"] == expected_samples(healthy, normalizer), mutations
        ups += sum(v == "1.0" for k, v in up.items() if k != "healthy")
    assert 0 < ups < ROUNDS * MUTATED_PER_ROUND  # the mutations reach both outcomes


def by_target(text: str) -> tuple[dict[str, str], dict[str, dict]]:
    """target_up per target, and each target's samples without the target label (one parse of `text`)."""
    up: dict[str, str] = {}
    samples: dict[str, dict] = {}
    for fam in split_families(text):
        for s in fam.samples():
            labels = dict(s.labels)
            target = labels.pop("target", None)
            if s.name == "inferwatch_exporter_target_up":
                up[target] = s.value
            elif not s.name.startswith("inferwatch_exporter_"):
                samples.setdefault(target, {})[(s.name, tuple(sorted(labels.items())))] = s.value
    return up, samples
