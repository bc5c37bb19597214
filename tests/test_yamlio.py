"""The one YAML loader (inferwatch/yamlio.py): plain data with positions kept apart, its limits, and the one
problem collector every reader uses."""

from __future__ import annotations

import pytest

from inferwatch.errors import InputError, Problem, SpecError
from inferwatch.yamlio import MAX_DEPTH, Problems, load_document, load_documents

SPEC = """\
service: chat
objectives:
  - name: responsive
    threshold: 1s
  - {name: fast, target: 99%}
labels:
  team: serving
"""


def _plain(value) -> bool:
    """Only dict, list and scalars, nothing added by the loader."""
    if isinstance(value, dict):
        return (
            type(value) is dict
            and all(isinstance(k, (str, int, float, bool)) for k in value)
            and all(_plain(v) for v in value.values())
        )
    if isinstance(value, list):
        return type(value) is list and all(_plain(v) for v in value)
    return value is None or isinstance(value, (str, int, float, bool))


def test_data_is_plain_and_positions_are_apart():
    loaded = load_document("spec.yaml", SPEC)
    assert loaded.data == {
        "service": "chat",
        "objectives": [{"name": "responsive", "threshold": "1s"}, {"name": "fast", "target": "99%"}],
        "labels": {"team": "serving"},
    }
    assert _plain(loaded.data)
    at = loaded.positions.at
    assert str(at(("service",))) == "spec.yaml:1:1"
    assert str(at(("objectives", 0))) == "spec.yaml:3:5"
    assert str(at(("objectives", 0, "threshold"))) == "spec.yaml:4:5"
    assert str(at(("objectives", 1, "target"))) == "spec.yaml:5:18"  # flow style: the key's own column
    assert str(at(("labels", "team"))) == "spec.yaml:7:3"
    assert at(("objectives", 2)) is None


def test_a_node_of_the_data_finds_its_key_else_itself():
    loaded = load_document("spec.yaml", SPEC)
    objective = loaded.data["objectives"][0]
    assert loaded.positions.path_of(objective) == ("objectives", 0)
    assert loaded.positions.line(objective, "threshold") == 4
    assert loaded.positions.line(objective, "target") == 3  # not written: where the objective starts
    assert loaded.positions.line(loaded.data["objectives"], 1) == 5
    assert loaded.positions.line({"made": "up"}) is None


def test_a_node_made_in_place_of_another_reports_its_position():
    loaded = load_document("spec.yaml", SPEC)
    made = {"bad": "x"}
    loaded.positions.same_place(made, loaded.data["objectives"][1])
    assert loaded.positions.line(made, "bad") == 5


def test_problems_point_at_the_fields_own_key_and_say_what_is_valid():
    loaded = load_document("spec.yaml", SPEC + "windw: 30d\n")
    problems = Problems(loaded.file, loaded.positions)
    problems.add(loaded.data["objectives"][0], "objectives[0].threshold", "too long")
    problems.unknown_keys(loaded.data, ("service", "window", "objectives", "labels"))
    assert [str(p) for p in problems.problems] == [
        "spec.yaml:4: objectives[0].threshold: too long",
        "spec.yaml:8: windw: unknown key; did you mean 'window'? (valid: service, window, objectives, labels)",
    ]
    assert problems.problems[0] == Problem("spec.yaml", 4, "objectives[0].threshold", "too long", column=5)
    with pytest.raises(SpecError) as err:
        problems.raise_if_any()
    assert err.value.problems == problems.problems
    Problems("x.yaml").raise_if_any()  # nothing wrong: nothing raised


def test_a_duplicate_key_is_refused_with_both_lines():
    with pytest.raises(SpecError) as err:
        load_document("spec.yaml", "objectives:\n  - name: a\n    target: 99%\n    target: 90%\n")
    assert (
        str(err.value)
        == "spec.yaml:4: objectives[0].target: duplicate key; the first is on line 3 (give each key once)"
    )


def test_a_merge_key_overridden_is_no_duplicate():
    loaded = load_document("x.yaml", "base: &b {target: 99%, name: a}\nmine:\n  <<: *b\n  target: 90%\n")
    assert loaded.data["mine"] == {"target": "90%", "name": "a"}
    assert loaded.positions.line(loaded.data["mine"], "target") == 4


def test_syntax_errors_name_file_line_and_what():
    with pytest.raises(SpecError) as err:
        load_document("x.yaml", "a: [")
    assert str(err.value).startswith("x.yaml:1: invalid YAML: ")
    with pytest.raises(SpecError) as err:
        load_document("x.yaml", "a: 1\nb: *nowhere\n")
    assert str(err.value) == "x.yaml:2: invalid YAML: found undefined alias 'nowhere'"


def test_an_alias_bomb_is_refused_before_it_is_built():
    bomb = 'a: &a ["x","x","x","x","x","x","x","x","x","x"]\n'
    for i, name in enumerate("bcdefghi"):
        prev = "abcdefghi"[i]
        bomb += f"{name}: &{name} [{', '.join([f'*{prev}'] * 10)}]\n"
    with pytest.raises(InputError, match=r"^x\.yaml: refused: expands to more than \d+ nodes"):
        load_document("x.yaml", bomb)


def test_nesting_past_the_limit_is_refused():
    with pytest.raises(InputError, match=r"^x\.yaml: refused: nested"):
        load_document("x.yaml", "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5))
    with pytest.raises(InputError, match=r"^x\.yaml: refused: nested"):
        load_document("x.yaml", "a: &x [*x]\n")  # an alias inside itself nests without end


def test_a_file_over_the_input_cap_is_refused_by_name(tmp_path, monkeypatch):
    path = tmp_path / "big.yaml"
    path.write_text("a: " + "x" * 2000 + "\n")
    monkeypatch.setenv("INFERWATCH_MAX_INPUT", "1000")
    with pytest.raises(InputError, match=r"big\.yaml: larger than the input cap of 1000 bytes"):
        load_document(path)
    with pytest.raises(InputError, match=r"^given\.yaml: larger than the input cap of 1000 bytes"):
        load_document("given.yaml", path.read_text())


def test_a_file_that_is_not_utf8_is_refused_by_name(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("service: caf\u00e9\n".encode("latin-1"))
    with pytest.raises(InputError, match=r"latin1\.yaml: not UTF-8 text \(byte 0xe9 at offset 12\)"):
        load_document(path)


def test_empty_files_and_roots_that_are_no_mapping_load_as_they_are(tmp_path):
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert load_document(empty).data is None
    assert load_document(tmp_path / "x.yaml", "# only a comment\n").data is None
    assert load_document("x.yaml", "- a\n- b\n").data == ["a", "b"]
    assert load_document("x.yaml", "just text\n").data == "just text"
    assert load_document("x.yaml", "- a\n- b\n").positions.line(load_document("x.yaml", "- a\n").data) is None


def test_one_document_per_file_unless_a_stream_is_read():
    with pytest.raises(SpecError, match=r"^x\.yaml:3: a second YAML document"):
        load_document("x.yaml", "a: 1\n---\nb: 2\n")
    first, second = load_documents("x.yaml", "a: 1\n---\nb: 2\n")
    assert (first.data, second.data) == ({"a": 1}, {"b": 2})
    assert second.positions.line(second.data, "b") == 3
    assert first.positions.path_of(second.data) is None


def test_a_missing_file_is_one_line_naming_it(tmp_path):
    with pytest.raises(InputError, match=r"nothere\.yaml: cannot read: No such file or directory"):
        load_document(tmp_path / "nothere.yaml")
