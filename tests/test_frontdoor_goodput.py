"""Goodput judged per request by the front door (frontdoor/_goodput.py): the verdict of each request against
its SLO spec's objectives, the counters a real front door exports for a known mix, and clear errors for specs
it cannot judge by."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from contextlib import contextmanager

import openai
import pytest
import yaml
from aiohttp import web
from test_frontdoor import _chunk, _serving, _sse, client, frontdoor, scrape, wait_for

from inferwatch.frontdoor import GoodputError, default_goodput, load_goodput

LABELS = ("m", "anonymous", "e:1")


def _spec(tmp_path, objectives, **top) -> str:
    path = tmp_path / "spec.yaml"
    path.write_text(
        yaml.safe_dump({"version": 1, "service": "chat", "source": "frontdoor", **top, "objectives": objectives})
    )
    return str(path)


@pytest.mark.parametrize(
    "outcome, code, times, verdict",
    [
        ("ok", 200, {"ttft": 0.2, "tpot": 0.03}, True),
        ("ok", 200, {"ttft": 1.0, "tpot": 0.1}, True),  # at the threshold: the `le` bucket counts it as good
        ("ok", 200, {"ttft": 1.2, "tpot": 0.03}, False),  # slow first token
        ("ok", 200, {"ttft": 0.2, "tpot": 0.2}, False),  # fast first token, slow stream: bad all the same
        ("length", 200, {"ttft": 0.2, "tpot": 0.03}, True),  # a length stop is answered (the default SLI's reading)
        ("ok", 200, {}, True),  # not streamed: only answered judges it
        ("error", 500, {"ttft": 0.2}, False),  # a quick error is not goodput
        ("rate_limited", 429, {}, False),
        ("cancelled", 499, {"ttft": 0.2}, None),  # the client gave up: not judged, as answered
        ("invalid_request", 400, {}, None),  # the caller's own mistake: not judged
    ],
)
def test_each_request_is_judged_against_every_default_objective(outcome, code, times, verdict):
    assert default_goodput().judge(LABELS, outcome, code, times) is verdict


def test_only_requests_an_objective_selects_are_judged(tmp_path):
    goodput = load_goodput(
        [
            _spec(
                tmp_path,
                [{"name": "fast", "sli": "ttft", "threshold": "500ms", "target": "99%"}],
                selector={"model": "llama"},
            )
        ]
    )
    assert goodput.judge(("llama", "a", "u"), "ok", 200, {"ttft": 0.4}) is True
    assert goodput.judge(("llama", "a", "u"), "ok", 200, {"ttft": 0.6}) is False
    assert goodput.judge(("qwen", "a", "u"), "ok", 200, {"ttft": 0.6}) is None
    # an objective that selects the request but measured nothing for it (not streamed) judges nothing
    assert goodput.judge(("llama", "a", "u"), "ok", 200, {}) is None


def test_length_is_bad_spec_makes_length_stops_bad(tmp_path):
    goodput = load_goodput(
        [_spec(tmp_path, [{"name": "answered", "sli": "answered", "length_is_bad": True, "target": "99%"}])]
    )
    assert goodput.judge(LABELS, "ok", 200, {}) is True
    assert goodput.judge(LABELS, "length", 200, {}) is False


@pytest.mark.parametrize(
    "objectives, top, says",
    [
        (
            [{"name": "x", "sli": "ttft", "threshold": "1s", "target": "99%"}],
            {"source": "engine"},
            "source is 'engine'",
        ),
        (
            [{"name": "x", "sli": "ttft", "threshold": "1s", "target": "99%", "selector": {"namespace": "a"}}],
            {},
            "label 'namespace'",
        ),
        (
            [
                {
                    "name": "x",
                    "sli": "latency",
                    "metric": "llm_request_queue_time_seconds",
                    "threshold": "1s",
                    "target": "99%",
                }
            ],
            {},
            "not a front door histogram",
        ),
        (
            [
                {
                    "name": "x",
                    "sli": "ratio",
                    "total": "llm_requests_finished_total",
                    "good": 'llm_requests_finished_total{finished_reason="stop"}',
                    "target": "99%",
                }
            ],
            {},
            "not counted per request",
        ),
    ],
)
def test_a_spec_goodput_cannot_judge_by_is_refused_with_the_file_and_objective(tmp_path, objectives, top, says):
    path = _spec(tmp_path, objectives, **top)
    with pytest.raises(GoodputError) as err:
        load_goodput([path])
    assert path in str(err.value) and says in str(err.value)
    assert "objective x" in str(err.value) or "source" in says


def test_the_cli_says_what_is_wrong_without_a_traceback(tmp_path):
    path = _spec(tmp_path, [{"name": "x", "sli": "ttft", "threshold": "1s", "target": "99%"}], source="engine")
    proc = subprocess.run(
        [sys.executable, "-m", "inferwatch", "frontdoor", "--upstream", "http://127.0.0.1:9", "--goodput-spec", path],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert path in proc.stderr and "source: frontdoor" in proc.stderr


def test_goodput_sli_is_refused_on_the_engine_source_with_where_it_exists(tmp_path):
    from inferwatch.errors import SpecError
    from inferwatch.slo import load_spec

    with pytest.raises(SpecError, match="measured only with source: frontdoor"):
        load_spec(_spec(tmp_path, [{"name": "g", "sli": "goodput", "target": "95%"}], source="engine"))


# --- a real front door: the counters for a known mix --------------------------------------------------------------

SLOW = 0.6  # seconds between a slow answer's two visible tokens: over the 250ms objective however busy


@contextmanager
def _engine():
    """A loopback engine by model: `fast` sends its whole answer in one write, `slow` waits SLOW between its
    visible tokens, `busy` answers 429."""

    async def handle(request: web.Request) -> web.StreamResponse:
        if request.path == "/v1/models":
            return web.json_response({"object": "list", "data": [{"id": m} for m in ("fast", "slow", "busy")]})
        model = (await request.json())["model"]
        if model == "busy":
            return web.json_response({"error": {"message": "slow down", "code": 429}}, status=429)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        chunks = _sse(_chunk({"content": "Hi"}), _chunk({"content": " there"}), _chunk({}, "stop"))
        if model == "fast":
            await response.write(b"".join(chunks) + b"data: [DONE]\n\n")
        else:
            await response.write(chunks[0])
            await asyncio.sleep(SLOW)
            await response.write(b"".join(chunks[1:]) + b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    async def starter():
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        return runner

    with _serving(starter) as (url, _):
        yield url


def test_a_real_front_door_counts_judged_and_good_requests_per_model(tmp_path):
    spec = _spec(
        tmp_path,
        [
            {"name": "fast-enough", "sli": "tpot", "threshold": "250ms", "target": "95%"},
            {"name": "answered", "sli": "answered", "target": "99%"},
        ],
        group_by=["model"],
    )
    mix = {"fast": 3, "slow": 2, "busy": 2}
    with _engine() as engine, frontdoor(engine, goodput=load_goodput([spec])) as (door, _):
        c = client(door)
        for model, count in mix.items():
            for _ in range(count):
                try:
                    list(
                        c.chat.completions.create(
                            model=model, messages=[{"role": "user", "content": "hi"}], stream=True
                        )
                    )
                except openai.RateLimitError:
                    pass

        def counts():
            got = {}
            for (name, labels), value in scrape(door).items():
                if name.startswith("llm_frontdoor_goodput_") and name.endswith("_total"):
                    got[(name.split("_")[3], dict(labels)["model"])] = value
            return got if sum(v for (kind, _), v in got.items() if kind == "judged") == 7 else None

        got = wait_for(counts, timeout=30)
    assert got == {
        ("judged", "fast"): 3,
        ("good", "fast"): 3,
        ("judged", "slow"): 2,
        ("good", "slow"): 0,
        ("judged", "busy"): 2,
        ("good", "busy"): 0,
    }
