"""The exposition reader: exact errors with line numbers, and byte-exact round trips."""

from __future__ import annotations

import pytest
from conftest import all_expositions
from prometheus_client.parser import text_string_to_metric_families

from inferwatch.errors import ExpositionError
from inferwatch.exporters import Normalizer, format_sample, parse_sample, split_families

INVALID = [
    # (exposition, line of the error, words in the message)
    # not an exposition at all
    ("<html><body>502 Bad Gateway</body></html>\n", 1, "metric name"),
    ("garbage here\n", 1, "invalid sample value"),
    ("\x00\x01binary", 1, "binary"),
    # truncated or broken sample lines
    ('ok 1\nvllm:x{model_name="a" 1\n', 2, "label set not closed"),
    ('vllm:x{model_name="a} 1\n', 1, "malformed label set"),
    ("vllm:x{model_name=a} 1\n", 1, "malformed label set"),
    ("vllm:x{} \n", 1, "expected"),
    ("vllm:x 1 2 3\n", 1, "expected"),
    ("vllm:x one\n", 1, "invalid sample value"),
    # canonical-looking lines must not slip through the fast path with a bad value
    ('# TYPE vllm:x gauge\nvllm:x{model_name="m"} 1.2.3\n', 2, "invalid sample value"),
    ('# TYPE vllm:x gauge\nvllm:x{model_name="m"} 1 2 3\n', 2, "expected"),
    ("vllm:x 1_000\n", 1, "invalid sample value"),
    ("vllm:x 1 12.5\n", 1, "invalid timestamp"),
    # what Go's ParseFloat (so Prometheus) rejects: out of float64 range, a signed NaN, an int64 overflow
    ("vllm:x 1e999\n", 1, "invalid sample value"),
    ('# TYPE vllm:x gauge\nvllm:x{a="b"} 1e999\n', 2, "invalid sample value"),
    ("vllm:x -NaN\n", 1, "invalid sample value"),
    ('# TYPE vllm:x gauge\nvllm:x{a="b"} +NaN\n', 2, "invalid sample value"),
    ("vllm:x 1 99999999999999999999\n", 1, "invalid timestamp"),
    ('vllm:x{a="1",a="2"} 1\n', 1, "appears twice"),
    ('{a="1"} 1\n', 1, "metric name"),
    # comment lines
    ("# TYPE vllm:x histogramm\nvllm:x 1\n", 1, "unknown metric type"),
    ("# HELP 9bad name\n", 1, "invalid metric name"),
    ("# TYPE x gauge\nx 1\n\n\nx{ 2\n", 5, "malformed label set"),
]


@pytest.mark.parametrize("text,line,words", INVALID)
def test_invalid_input_names_the_line(text, line, words):
    with pytest.raises(ExpositionError) as err:
        split_families(text, "scrape.txt")
    assert err.value.line == line
    assert words in str(err.value)
    assert str(err.value).startswith(f"scrape.txt:{line}:")


VALID_ODDITIES = [
    'x{a="with \\"quotes\\" and \\\\ and \\n"} 1\n',
    'x{a="1",} 1\n',
    "x +Inf\nx -Inf\nx NaN\nx nan\nx -Infinity\nx 1e-999\nx 1e308\n",
    "x 1e-3 1700000000000\n",
    'x{ a = "1" , b="2"} 3\n',
    "# arbitrary comment\nx 1\n",
    "x 1",  # no final newline
]


@pytest.mark.parametrize("text", VALID_ODDITIES)
def test_valid_oddities_parse(text):
    fams = split_families(text)
    assert sum(len(f.samples()) for f in fams) >= 1


@pytest.mark.parametrize("path", all_expositions(), ids=lambda p: p.name)
def test_round_trip_without_mappings_is_byte_exact(path, catalog):
    text = path.read_text()
    assert Normalizer([], catalog).normalize(text).render() == text


@pytest.mark.parametrize("path", all_expositions(), ids=lambda p: p.name)
def test_every_fixture_is_canonical_so_the_fast_path_runs(path):
    assert all(f.canonical for f in split_families(path.read_text()))


def test_untyped_families_without_comments_are_grouped():
    fams = split_families('a 1\na{x="1"} 2\nb_total 3\n')
    assert [(f.name, len(f.samples())) for f in fams] == [("a", 2), ("b_total", 1)]


def test_prometheus_client_agrees_on_the_real_captures():
    for path in all_expositions():
        ours = sum(len(f.samples()) for f in split_families(path.read_text()))
        theirs = sum(len(f.samples) for f in text_string_to_metric_families(path.read_text()))
        assert ours == theirs, path.name


# Label value escapes as Prometheus and prometheus_client read them: \\, \" and \n; any other backslash stands
# for itself (Prometheus stores le="\0.025" as the six characters \0.025), and is written back escaped.
ESCAPES = [
    # (the label value as a target writes it, the value read, the value as written back)
    (r"\\", "\\", r"\\"),
    (r"\"", '"', r"\""),
    (r"\n", "\n", r"\n"),
    (r"a\\\"b\nc", 'a\\"b\nc', r"a\\\"b\nc"),
    (r"\t", "\\t", r"\\t"),
    (r"\0.025", "\\0.025", r"\\0.025"),
    (r"\\0.025", "\\0.025", r"\\0.025"),
    (r"\\\0.025", "\\\\0.025", r"\\\\0.025"),
    (r"0.025\\", "0.025\\", r"0.025\\"),
    ("\\\u2028", "\\\u2028", "\\\\\u2028"),
    (r"\u2028", "\\u2028", r"\\u2028"),
]


@pytest.mark.parametrize("written,read,back", ESCAPES)
def test_label_escapes_read_as_prometheus_reads_them_and_round_trip(written, read, back):
    line = f'x{{le="{written}",b="1"}} 1'
    sample = parse_sample(line)
    assert dict(sample.labels) == {"le": read, "b": "1"}
    theirs = next(iter(text_string_to_metric_families(line + "\n"))).samples[0].labels
    assert theirs == {"le": read, "b": "1"}
    assert format_sample(sample) == f'x{{le="{back}",b="1"}} 1\n'
    assert parse_sample(format_sample(sample).rstrip("\n")) == sample
