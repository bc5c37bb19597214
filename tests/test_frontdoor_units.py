"""The front door's pure parts: SSE splitting, metering, outcomes, the schema check, flags, callers, and
the SLO compiler knowing its buckets."""

from __future__ import annotations

import importlib
import json
import random
from fractions import Fraction
from pathlib import Path

import jsonschema
import pytest

from inferwatch.errors import SpecError
from inferwatch.frontdoor import (
    OUTCOMES,
    Facts,
    SSESplitter,
    classify,
    observe_event,
    observe_whole,
    parse_listen,
    parse_seconds,
    parse_size,
    parse_upstreams,
    request_info,
    schema_problem,
    token_counts,
    tool_call_problem,
)
from inferwatch.frontdoor._accesslog import access_record
from inferwatch.frontdoor._caller import LabelCap, caller_of
from inferwatch.slo import parse_spec, source_buckets
from inferwatch.slo._selector import parse_selector

STREAM = (
    b': comment\r\n\r\ndata: {"choices":[{"index":0,"delta":{"content":"a\\nb"}}]}\n\n'
    b'event: message\ndata: {"choices":\ndata: []}\n\n'
    b"data:[DONE]\r\n\r\n"
)


def test_exported_names_are_the_public_ones():
    module = importlib.import_module("inferwatch.frontdoor")
    for name in module.__all__:
        getattr(module, name)
    public = {n for n, v in vars(module).items() if not n.startswith("_") and type(v).__name__ != "module"}
    assert public <= set(module.__all__)


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, len(STREAM)])
def test_sse_events_are_the_same_however_the_bytes_are_cut(size):
    splitter = SSESplitter()
    payloads = []
    for i in range(0, len(STREAM), size):
        payloads += splitter.feed(STREAM[i : i + size])
    assert payloads == [b'{"choices":[{"index":0,"delta":{"content":"a\\nb"}}]}', b'{"choices":\n[]}', b"[DONE]"]


def test_one_event_per_read_takes_the_short_path_to_the_same_payloads():
    splitter = SSESplitter()
    reads = [
        b"data: {}\n\n",
        b"data:[DONE]\n\n",
        b"data: x\r\n\r\n",
        b"data: a",
        b"\n\n",
        b"data: \n\n",
        b"data: y\n\n",
        b": ping\n\n",
        b"data: 1\ndata: 2\n\n",
    ]
    assert [p for read in reads for p in splitter.feed(read)] == [b"{}", b"[DONE]", b"x", b"a", b"", b"y", b"1\n2"]


def test_events_json_accepts_and_orjson_refuses_are_metered_alike():
    """NaN and integers over 64 bits: orjson refuses them, json takes them; an engine's event stays a chunk."""
    facts = _facts(
        b'{"created": 123456789012345678901234567890, "choices": [{"index": 0, "delta": '
        b'{"content": "a"}, "finish_reason": null}], "x": NaN}',
        _delta("stop"),
        b"[DONE]",
    )
    assert facts.error is None and facts.visible_chunks == 1
    assert classify(200, "complete", facts, True, None) == "ok"
    assert [classify(status, "complete", facts, True, None) for status in (204, 302)] == ["error", "error"]
    assert request_info(b'{"model": "m", "stream": true, "seed": 123456789012345678901234567890}').model == "m"


def _evil_events(rng: random.Random) -> list[bytes]:
    """A stream of chunks an engine sends, mixed with ones of the same bytes around a text that is not one JSON
    string, and others that look alike but differ in what the meter reads."""
    texts = ["a", " token", 'say "hi"', "back\\slash\\", "é", "\U0001f600", "line\nbreak", "", "\x00", "}]}"]
    head = '{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'

    def chunk(delta=None, finish=None, usage=None, **choice):
        doc = json.loads(head + '"x":0}]}')
        doc["choices"][0] = {
            "index": 0,
            **({"delta": delta} if delta is not None else {}),
            **choice,
            "logprobs": None,
            "finish_reason": finish,
        }
        if usage is not None:
            doc["usage"] = usage
        return json.dumps(doc, separators=(",", ":"), ensure_ascii=rng.random() < 0.5).encode()

    plain = chunk({"content": "X"})
    before, after = plain.split(b"X")
    raw = [b'a"b', b"a\\", b"\x01", b"\xff", b'","x":"y', b"\\u12", b"\\\\", b'\\"']
    makers = [
        lambda: chunk({"content": rng.choice(texts)}),
        lambda: chunk({"content": rng.choice(texts)}),
        lambda: before + rng.choice(raw) + after,
        lambda: chunk({"role": "assistant", "content": ""}),
        lambda: chunk({"reasoning_content": rng.choice(texts)}),
        lambda: chunk({"content": rng.choice(texts)}, finish=rng.choice(["stop", "length", None])),
        lambda: chunk({"content": "a"}, usage={"prompt_tokens": 1, "completion_tokens": 2}),
        lambda: chunk({"tool_calls": [{"index": 0, "function": {"name": "get", "arguments": rng.choice(texts)}}]}),
        lambda: chunk(text=rng.choice(texts)),
        lambda: chunk({"content": "a"}).replace(b'"c1"', b'"c2"'),
        lambda: chunk({"content": rng.choice(texts)}).replace(b'"created":1', b'"created":2'),  # SGLang's clock
        lambda: chunk({"content": rng.choice(texts)}).replace(b'"index":0', b'"index":1'),  # n > 1
        lambda: chunk({"refusal": rng.choice(texts)}),
        lambda: chunk({"tool_calls": [{"function": {"name": rng.choice(["get", None]), "arguments": "{}"}}]}),
        lambda: b'{"error":{"message":"x"}}',
        lambda: b"[DONE]",
    ]
    return [rng.choice(makers)() for _ in range(rng.randint(1, 12))]


@pytest.mark.parametrize("seed", range(300))
def test_events_of_a_known_shape_are_metered_as_if_parsed_whole(seed):
    events = _evil_events(random.Random(seed))
    fast, whole = Facts(), Facts()
    for i, event in enumerate(events):
        observe_event(fast, event, float(i))
        whole.shape = None  # no shape: every event parsed whole
        observe_event(whole, event, float(i))
    assert fast == whole, events


def test_a_plain_stream_parses_one_event_whole():
    facts = _facts(
        _delta(role="assistant", content=""),
        *[_delta(content=t) for t in ("a", '"b"', "c\\")],
        _delta("stop"),
        b"[DONE]",
    )
    assert facts.shape is not None and facts.shape[0].endswith(b'"content": "') and facts.visible_chunks == 3


FRAMING = [  # (wire bytes, payloads): the standard's corners, and what servers send beyond it
    (b"data: a\r\rdata: b\r\r\n", [b"a", b"b"]),  # CR alone ends a line
    (b"data\n\ndata:\n\n", [b"", b""]),  # a bare field name: an empty value
    (b"id: 1\nretry: 5\nevent: ping\n\n: comment\n\n", []),  # no data: no event
    (b'event: error\ndata: {"message": "x"}\n\n', [b'{"error":{"message": "x"}}']),
    (b'error: {"code":500,"message":"x"}\n\n', [b'{"error":{"code":500,"message":"x"}}']),  # llama.cpp
    (b"error:\n\n", [b'{"error":""}']),
    (b"data: 1\n\ndata: [DONE]", [b"1", b"[DONE]"]),  # the last blank line never came
    (b"data: 1\r\n\r\ndata: [DONE]\r\n", [b"1", b"[DONE]"]),
    (b"data: [DONE]\n\n", [b"[DONE]"]),  # once, however it is cut
    (b"data: [DONE]\r\n\r\n", [b"[DONE]"]),
]


@pytest.mark.parametrize("wire,payloads", FRAMING, ids=[repr(w)[:40] for w, _ in FRAMING])
def test_sse_framing(wire, payloads):
    for size in (1, 2, 5, len(wire)):
        splitter, got = SSESplitter(), []
        for i in range(0, len(wire), size):
            got += splitter.feed(wire[i : i + size])
        assert got == payloads, size


def test_an_event_too_large_to_meter_is_dropped_not_kept():
    splitter = SSESplitter()
    for _ in range(20):
        splitter.feed(b"x" * (1 << 20))
    assert splitter.overflow and splitter.feed(b"\n\ndata: 1\n\n") == [b"1"]


def _facts(*events, whole: bytes | None = None) -> Facts:
    facts = Facts()
    for i, event in enumerate(events):
        observe_event(facts, event if isinstance(event, bytes) else json.dumps(event).encode(), float(i))
    if whole is not None:
        observe_whole(facts, whole)
    return facts


def _delta(finish=None, **delta) -> dict:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


OFFERED = {"get": {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}}}
CALL = {"tool_calls": [{"index": 0, "id": "t", "type": "function", "function": {"name": "get", "arguments": ""}}]}


def _args(text: str) -> dict:
    return _delta(tool_calls=[{"index": 0, "function": {"arguments": text}}])


# (name, status, ended, events, stream, outcome)
CASES = [
    ("ok", 200, "complete", [_delta(content="hi"), _delta("stop"), b"[DONE]"], True, "ok"),
    ("cancelled", 200, "cancelled", [_delta(content="hi")], True, "cancelled"),
    ("left after [DONE]", 200, "cancelled", [_delta(content="hi"), _delta("stop"), b"[DONE]"], True, "ok"),
    ("timeout", None, "timeout", [], True, "timeout"),
    ("unreachable", None, "unreachable", [], True, "error"),
    ("5xx", 503, "complete", [], True, "error"),
    ("429", 429, "complete", [], True, "rate_limited"),
    ("400", 400, "complete", [], True, "invalid_request"),
    ("error object", 200, "complete", [{"object": "error", "message": "x"}, b"[DONE]"], True, "error"),
    ("openai error", 200, "complete", [{"error": {"message": "x"}}, b"[DONE]"], True, "error"),
    ("not JSON", 200, "complete", [b"{", _delta("stop"), b"[DONE]"], True, "error"),
    ("abort", 200, "complete", [_delta(content="hi"), _delta("abort"), b"[DONE]"], True, "error"),
    ("repetition", 200, "complete", [_delta(content="hi"), _delta("repetition"), b"[DONE]"], True, "error"),
    ("no [DONE]", 200, "complete", [_delta(content="hi"), _delta("stop")], True, "truncated"),
    ("no finish", 200, "complete", [_delta(content="hi"), b"[DONE]"], True, "truncated"),
    ("cut", 200, "broken", [_delta(content="hi")], True, "truncated"),
    ("length", 200, "complete", [_delta(content="hi"), _delta("length"), b"[DONE]"], True, "length"),
    ("filter", 200, "complete", [_delta(content="hi"), _delta("content_filter"), b"[DONE]"], True, "content_filter"),
    ("reasoning only", 200, "complete", [_delta(reasoning_content="hm"), _delta("stop"), b"[DONE]"], True, "empty"),
    (
        "good tool",
        200,
        "complete",
        [_delta(**CALL), _args('{"city":'), _args('"Lima"}'), _delta("tool_calls"), b"[DONE]"],
        True,
        "ok",
    ),
    (
        "broken tool",
        200,
        "complete",
        [_delta(**CALL), _args('{"city":'), _delta("tool_calls"), b"[DONE]"],
        True,
        "tool_call_invalid",
    ),
    (
        "length beats broken tool",
        200,
        "complete",
        [_delta(**CALL), _args('{"ci'), _delta("length"), b"[DONE]"],
        True,
        "length",
    ),
    ("refusal is output", 200, "complete", [_delta(refusal="I can't."), _delta("stop"), b"[DONE]"], True, "ok"),
    (
        "SGLang's finish object",
        200,
        "complete",
        [
            _delta(content="hi"),
            {"choices": [{"index": 0, "delta": {}, "finish_reason": {"type": "length", "length": 9}}]},
            b"[DONE]",
        ],
        True,
        "length",
    ),
    (
        "calls without an index",
        200,
        "complete",
        [
            _delta(tool_calls=[{"id": "a", "function": {"name": "get", "arguments": '{"city": "Lima"}'}}]),
            _delta(tool_calls=[{"id": "b", "function": {"name": "get", "arguments": '{"city": '}}]),
            _delta(tool_calls=[{"function": {"arguments": '"Oslo"}'}}]),
            _delta("tool_calls"),
            b"[DONE]",
        ],
        True,
        "ok",
    ),
    ("[DONE] and more", 200, "complete", [_delta(content="hi"), _delta("stop"), b"[DONE] "], True, "ok"),
    ("an empty event", 200, "complete", [_delta(content="hi"), b"", _delta("stop"), b"[DONE]"], True, "error"),
]


@pytest.mark.parametrize("name,status,ended,events,stream,outcome", CASES, ids=[c[0] for c in CASES])
def test_outcomes(name, status, ended, events, stream, outcome):
    assert classify(status, ended, _facts(*events), stream, OFFERED) == outcome


def test_whole_answers():
    def whole(message, finish="stop"):
        return json.dumps({"choices": [{"index": 0, "message": message, "finish_reason": finish}]}).encode()

    assert classify(200, "complete", _facts(whole=whole({"content": "hi"})), False, None) == "ok"
    assert classify(200, "complete", _facts(whole=whole({"content": ""})), False, None) == "empty"
    assert classify(200, "complete", _facts(whole=b"{not json"), False, None) == "error"
    assert classify(200, "complete", _facts(whole=b'{"object": "list"}'), False, None) == "error"
    call = {
        "content": None,
        "tool_calls": [{"id": "t", "type": "function", "function": {"name": "get", "arguments": '{"city": 1}'}}],
    }
    assert classify(200, "complete", _facts(whole=whole(call, "tool_calls")), False, OFFERED) == "tool_call_invalid"
    completion = json.dumps({"choices": [{"index": 0, "text": "hi", "finish_reason": "length"}]}).encode()
    assert classify(200, "complete", _facts(whole=completion), False, None) == "length"
    assert set(c[-1] for c in CASES) <= set(OUTCOMES)


def test_tool_call_problems():
    assert tool_call_problem([("get", '{"city": "Lima"}')], OFFERED) is None
    assert tool_call_problem([("get", "")], {"get": None}) is None  # no parameters, no arguments
    assert "not offered" in tool_call_problem([("rm", "{}")], OFFERED)
    assert "not offered" in tool_call_problem([("get", "{}")], None)
    assert "not JSON" in tool_call_problem([("get", '{"city": ')], OFFERED)
    assert "not a JSON object" in tool_call_problem([("get", "[1]")], OFFERED)
    assert "missing required key 'city'" in tool_call_problem([("get", "{}")], OFFERED)


SCHEMA = {
    "type": "object",
    "required": ["a"],
    "additionalProperties": False,
    "properties": {
        "a": {"type": "integer"},
        "b": {"type": ["string", "null"]},
        "c": {"enum": [1, "x", True]},
        "d": {"type": "array", "items": {"type": "object", "required": ["k"], "properties": {"k": {"type": "number"}}}},
        "e": {"anyOf": [{"type": "string"}, {"type": "boolean"}]},
        "f": {"$ref": "#/x"},
        "g": {"type": "string", "pattern": "^z"},
        "h": {"const": 0},
        "i": {"allOf": [{"type": "number"}]},
    },
}
VALUES = [
    {"a": 1},
    {"a": 1.0},
    {"a": True},
    {"a": "1"},
    {},
    {"a": 1, "z": 0},
    {"a": 1, "b": None},
    {"a": 1, "b": 2},
    {"a": 1, "c": 1},
    {"a": 1, "c": 1.0},
    {"a": 1, "c": "y"},
    {"a": 1, "c": True},
    {"a": 1, "c": False},
    {"a": 1, "d": [{"k": 1}, {"k": 2.5}]},
    {"a": 1, "d": [{"k": "1"}]},
    {"a": 1, "d": [{}]},
    {"a": 1, "e": "s"},
    {"a": 1, "e": False},
    {"a": 1, "e": 1},
    {"a": 1, "f": 5},
    {"a": 1, "g": "nope"},
    {"a": 1, "h": 0.0},
    {"a": 1, "h": False},
    {"a": 1, "i": "x"},
    {"a": 1, "i": 2},
]


@pytest.mark.parametrize("value", VALUES, ids=[json.dumps(v) for v in VALUES])
def test_the_schema_check_never_flags_what_jsonschema_accepts(value):
    """Sound: a flagged call is invalid for jsonschema too. Complete for the keywords it knows (no $ref/pattern)."""
    ours = schema_problem(SCHEMA, value)
    valid = jsonschema.Draft202012Validator(
        {**SCHEMA, "$defs": {}, "properties": {**SCHEMA["properties"], "f": {}}}
    ).is_valid(value)
    if ours is not None:
        assert not valid, ours
    elif not valid:
        assert "f" in value or "g" in value, "missed a violation of a keyword it knows"


def test_requests_and_token_counts():
    info = request_info(
        json.dumps(
            {
                "model": "m",
                "stream": True,
                "tools": [{"type": "function", "function": {"name": "get", "parameters": {"type": "object"}}}],
            }
        ).encode()
    )
    assert (info.model, info.stream, info.tools) == ("m", True, {"get": {"type": "object"}})
    assert request_info(b"not json").model is None and request_info(b"[1]").tools is None
    streamed = _facts(_delta(reasoning_content="x"), _delta(content="a"), _delta(content="b"), _delta("stop"))
    assert token_counts(streamed) == (None, 3, 1, 2)
    streamed.usage = {"prompt_tokens": 5, "completion_tokens": 9, "completion_tokens_details": {"reasoning_tokens": 4}}
    assert token_counts(streamed) == (5, 9, 4, 5)
    assert token_counts(Facts()) == (None, None, None, None)
    streamed.usage = {"prompt_tokens": 5, "completion_tokens": 9, "reasoning_tokens": 4}  # SGLang's place
    assert token_counts(streamed) == (5, 9, 4, 5)
    streamed.usage = {"prompt_tokens": 5, "completion_tokens": 9, "reasoning_tokens": 0}  # SGLang's bug
    assert token_counts(streamed) == (5, 9, 1, 8)
    plain = _facts(_delta(content="a"), _delta("stop"))
    plain.usage = {"completion_tokens": 3, "completion_tokens_details": {"reasoning_tokens": 0}}
    assert token_counts(plain) == (None, 3, 0, 3)
    two = _facts(*[{"choices": [{"index": i % 2, "delta": {"content": "x"}}]} for i in range(8)])
    assert token_counts(two) == (None, 8, 0, 4) and two.choices == {0, 1}  # per choice: what TPOT divides by


def test_flags():
    default, routes = parse_upstreams(["http://e:8000/v1/", "b=localhost:30000", "c=https://x/api"])
    assert default.url == "http://e:8000" and default.name == "e:8000"
    assert [(m, u.url) for m, u in routes] == [("b", "http://localhost:30000"), ("c", "https://x/api")]
    for bad, message in (
        (["nope"], "not URL or MODEL=URL"),
        (["a:1", "b:2"], "only one upstream"),
        (["m=a:1", "m=b:2"], "already goes to"),
        ([], "at least one"),
        (["ftp://x"], "not URL"),
        (["a:99999"], "not URL"),
    ):
        with pytest.raises(ValueError, match=message):
            parse_upstreams(bad)
    assert parse_listen(":8080") == ("0.0.0.0", 8080) and parse_listen("[::1]:1") == ("::1", 1)
    assert parse_size("32MiB") == 32 << 20 and parse_size("100MB") == 10**8 and parse_size("1024") == 1024
    assert parse_seconds("500ms") == 0.5 and parse_seconds("5m") == 300
    for parse, text in ((parse_listen, "8080"), (parse_size, "lots"), (parse_size, "0"), (parse_seconds, "-1s")):
        with pytest.raises(ValueError):
            parse(text)


def test_callers():
    assert caller_of({"X-Team": "a"}, None, "s") == "anonymous"
    assert caller_of({"X-Team": "a"}, "X-Team", "s") == "a"
    hashed = caller_of({"Authorization": "Bearer sk-1"}, None, "s")
    assert hashed.startswith("key-") and len(hashed) == 16 and "sk-1" not in hashed
    assert caller_of({"Authorization": "Bearer sk-1"}, None, "t") != hashed  # salted
    cap = LabelCap(2)
    assert [cap(v) for v in ("a", "anonymous", "b", "c", "a")] == ["a", "anonymous", "b", "other", "a"]


def test_access_record_has_named_fields_only():
    record = access_record(
        request_id="r",
        caller="c",
        model="m",
        upstream="u",
        method="POST",
        path="/v1/x",
        status=200,
        outcome="ok",
        stream=True,
        times={"ttft": 0.0123, "duration": 1},
        tokens=(1, 2, None),
        now=0.5,
    )
    assert record["time"] == "1970-01-01T00:00:00.500Z" and record["first_token_ms"] == 12.3
    assert set(record) == {
        "time",
        "request_id",
        "caller",
        "model",
        "upstream",
        "method",
        "path",
        "status",
        "outcome",
        "stream",
        "first_chunk_ms",
        "first_token_ms",
        "time_per_output_token_ms",
        "duration_ms",
        "prompt_tokens",
        "output_tokens",
        "reasoning_tokens",
    }


# --- the SLO compiler and the front door's buckets --------------------------------------------------------


def test_frontdoor_buckets_hold_the_usual_slo_thresholds():
    table = source_buckets()["frontdoor"]
    latency = table.families["latency"][0].bounds
    for threshold in ("0.1", "0.25", "0.5", "1", "2", "2.5", "5", "10"):
        assert Fraction(threshold) in latency
    per_token = table.families["time_per_output_token"][0].bounds
    assert {Fraction(t) for t in ("0.02", "0.05", "0.1")} <= set(per_token)


def _spec(threshold: str):
    return parse_spec(
        {
            "service": "chat",
            "source": "frontdoor",
            "objectives": [
                {"name": "responsive", "sli": "ttft", "threshold": threshold, "target": "99%"},
                {"name": "answered", "sli": "answered", "target": "99%"},
            ],
        }
    )


def test_frontdoor_slos_are_checked_against_the_front_doors_buckets():
    spec = _spec("2s")
    assert spec.objectives[0].sli.metric == "llm_frontdoor_time_to_first_token_seconds"
    with pytest.raises(SpecError, match="inferwatch frontdoor latency has no bucket at 3.5s"):
        _spec("3.5s")


def test_answered_counts_ok_and_length_among_all_but_cancelled_and_invalid_requests():
    sli = _spec("1s").objectives[1].sli
    assert sli.good == parse_selector('llm_frontdoor_requests_total{outcome=~"ok|length"}')
    assert sli.total == parse_selector('llm_frontdoor_requests_total{outcome!~"cancelled|invalid_request"}')


@pytest.mark.promtool
def test_the_front_door_defaults_mirror_the_engine_defaults_and_compile(tmp_path):
    import subprocess

    from conftest import need

    from inferwatch.resources import data_path
    from inferwatch.slo import compile_spec, load_spec, render_files

    engine, frontdoor = (
        load_spec(data_path("inferwatch.slo", f)) for f in ("defaults.yaml", "defaults-frontdoor.yaml")
    )
    assert frontdoor.source == "frontdoor" and frontdoor.group_by == engine.group_by
    assert [(o.name, o.target) for o in frontdoor.objectives] == [(o.name, o.target) for o in engine.objectives]
    assert [getattr(o.sli, "threshold", None) for o in frontdoor.objectives] == [
        getattr(o.sli, "threshold", None) for o in engine.objectives
    ]
    files, _ = render_files(compile_spec(frontdoor), tests=False)
    rules = []
    for name, text in files.items():
        if name.endswith(".rules.yaml"):
            (tmp_path / name).write_text(text)
            rules.append(str(tmp_path / name))
    proc = subprocess.run([need("promtool"), "check", "rules", *rules], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --- real response shapes: tests/fixtures/frontdoor/ (each file names the server, version and source it follows) ---

FIXTURES = Path(__file__).parent / "fixtures" / "frontdoor"
EXPECTED = json.loads((FIXTURES / "expected.json").read_text())


def _fixture(name: str) -> bytes:
    """The bytes on the wire: the file less its `# ...` header, which ends at `#---`."""
    return (FIXTURES / name).read_bytes().split(b"#---\n", 1)[1]


def _cuts(body: bytes, seed: int) -> list[list[bytes]]:
    """The body as one read, one byte per read, and cut at random places."""
    rng = random.Random(seed)
    cut = sorted(rng.sample(range(1, len(body)), 12))
    return [
        [body],
        [body[i : i + 1] for i in range(len(body))],
        [body[a:b] for a, b in zip([0, *cut], [*cut, len(body)], strict=True)],
    ]


def _metered(name: str) -> dict:
    """What the meter makes of one fixture: the outcome, the event numbers of first chunk and first and last
    visible token, counts, tokens and tool calls (a stream is fed however it is cut; all cuts must agree)."""
    case = EXPECTED[name]
    info = request_info(json.dumps(case["request"]).encode())
    body = _fixture(name)
    if name.endswith(".body"):
        facts = Facts()
        observe_whole(facts, body)
        return {
            "outcome": classify(200, "complete", facts, False, info.tools),
            "tokens": list(token_counts(facts)),
            "tools": sorted(facts.tools.values()),
        }
    seen = []
    for reads in _cuts(body, len(name)):
        splitter, facts = SSESplitter(), Facts()
        payloads = [p for read in reads for p in splitter.feed(read)]
        for n, payload in enumerate(payloads, 1):
            observe_event(facts, payload, float(n))
        seen.append(
            {
                "outcome": classify(200, "complete", facts, True, info.tools),
                "events": len(payloads),
                "first_chunk": facts.first_chunk,
                "first_visible": facts.first_visible,
                "last_visible": facts.last_visible,
                "visible_chunks": facts.visible_chunks,
                "reasoning_chunks": facts.reasoning_chunks,
                "tokens": list(token_counts(facts)),
                "tools": sorted(facts.tools.values()),
            }
        )
    assert seen[1] == seen[0] and seen[2] == seen[0], "the same bytes cut differently metered differently"
    return seen[0]


def test_every_fixture_has_an_expectation():
    names = sorted(p.name for p in FIXTURES.iterdir() if p.suffix in (".sse", ".body"))
    assert names == sorted(EXPECTED) and len(names) == 26


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_response_shapes_are_metered_right(name):
    assert _metered(name) == EXPECTED[name]["metered"]


def test_a_changing_shape_is_learnt_again(monkeypatch):
    """SGLang stamps each chunk with the second it was made: a plain event that misses the shape becomes it, so
    the stream stays on the fast path (5 events parsed of 10, not 7: role, first token, one per new second,
    finish)."""
    from inferwatch.frontdoor import _meter

    parsed = []
    monkeypatch.setattr(_meter, "_loads", lambda data: parsed.append(data) or json.loads(data))
    facts = Facts()
    for payload in SSESplitter().feed(_fixture("sglang-0.5-chat-msgspec.sse")):
        observe_event(facts, payload, 0.0)
    assert facts.visible_chunks == 7 and len(parsed) == 5


@pytest.mark.parametrize("size", [1, 2, 3, 4, 64])
def test_a_leading_byte_order_mark_is_dropped(size):
    """WHATWG event-stream parsing strips one BOM at the very start, however the bytes are cut; not a later one."""
    stream = b'\xef\xbb\xbfdata: {"a":1}\n\n\xef\xbb\xbfdata: {"b":2}\n\ndata: [DONE]\n\n'
    splitter, payloads = SSESplitter(), []
    for i in range(0, len(stream), size):
        payloads += splitter.feed(stream[i : i + size])
    assert payloads == [b'{"a":1}', b"[DONE]"]  # the second BOM makes its field name "\ufeffdata"


@pytest.mark.parametrize("arguments", [{"city": "Lima"}, ["Lima"], 1, True])
def test_tool_call_arguments_not_a_string_are_an_invalid_call(arguments):
    call = {"index": 0, "id": "t", "type": "function", "function": {"name": "get", "arguments": arguments}}
    facts = _facts(_delta(tool_calls=[call]), _delta("tool_calls"), b"[DONE]")
    assert facts.error is None and classify(200, "complete", facts, True, OFFERED) == "tool_call_invalid"
    facts = _facts(_delta(tool_calls=[call]), _args('{"city": "Lima"}'), _delta("tool_calls"), b"[DONE]")
    assert classify(200, "complete", facts, True, OFFERED) == "tool_call_invalid"  # a string after: still
    whole = {
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {"role": "assistant", "content": None, "tool_calls": [call]},
            }
        ]
    }
    facts = _facts(whole=json.dumps(whole).encode())
    assert facts.error is None and classify(200, "complete", facts, False, OFFERED) == "tool_call_invalid"
    assert "not a JSON string" in tool_call_problem([("get", None)], OFFERED)


def test_whitespace_is_not_the_first_visible_token():
    """After reasoning, "\\n\\n" is a token but nothing to see: the first visible token is the first content with
    a non-whitespace character (or a refusal or tool call), and whitespace alone is empty. Time per output token
    divides the gaps from the first visible token by the visible tokens from there on, so the whitespace before
    it is not among them."""
    facts = _facts(
        _delta(reasoning_content="hm"),
        _delta(content="\n\n"),
        _delta(content=" \t"),
        _delta(content="Lima"),
        _delta(content=" ok"),
        _delta("stop"),
        b"[DONE]",
    )
    assert (facts.first_chunk, facts.first_visible, facts.last_visible, facts.visible_chunks) == (0.0, 3.0, 4.0, 2)
    assert classify(200, "complete", facts, True, None) == "ok"
    # the two whitespace tokens are output, but not what time per output token divides by: that is the gaps
    # from the first visible token on (here one, over two visible tokens), with or without the engine's usage
    assert token_counts(facts) == (None, 5, 1, 2)
    facts.usage = {"prompt_tokens": 7, "completion_tokens": 10, "completion_tokens_details": {"reasoning_tokens": 6}}
    assert token_counts(facts) == (7, 10, 6, 2)
    facts = _facts(_delta(content="\n"), _delta(refusal="No."), _delta("stop"), b"[DONE]")
    assert facts.first_visible == 1.0
    facts = _facts(_delta(content="\n\n"), _delta(content="\n"), _delta("stop"), b"[DONE]")
    assert facts.first_visible is None and classify(200, "complete", facts, True, None) == "empty"
    whole = {"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "\n "}}]}
    assert classify(200, "complete", _facts(whole=json.dumps(whole).encode()), False, None) == "empty"
