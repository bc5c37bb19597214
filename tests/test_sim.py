"""The simulator: release-exact /metrics that normalize cleanly and agree with what it served; its API as clients
see it, with the official openai client; scenarios; the load generator against its own histograms."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest
from simtools import FAST, simulator

from inferwatch.exporters import Normalizer, split_families
from inferwatch.sim import LoadConfig, releases, run_load

ENGINE_RELEASES = [(e, v) for e in ("vllm", "sglang") for v in releases(e)]


def _post(base: str, body: dict, path: str = "/v1/chat/completions"):
    request = urllib.request.Request(
        base + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=30) as resp:
        return resp.status, resp.read().decode()


def _metrics(base: str) -> str:
    with urllib.request.urlopen(base + "/metrics", timeout=10) as resp:
        return resp.read().decode()


def _values(text: str) -> dict[str, float]:
    """{series: value} of a normalized exposition, summed by metric name and the labels we look at."""
    out: dict[str, float] = {}
    for fam in split_families(text):
        for s in fam.samples():
            labels = dict(s.labels)
            out[s.name] = out.get(s.name, 0.0) + float(s.value)
            for k in ("finished_reason", "is_streaming"):
                if k in labels:
                    key = f"{s.name}|{k}={labels[k]}"
                    out[key] = out.get(key, 0.0) + float(s.value)
    return out


def _requests(base: str, n: int = 12) -> tuple[int, int, int]:
    """n requests, alternately streamed; returns (prompt tokens, completion tokens, length-stopped) per usage."""
    prompt = completion = length = 0
    for i in range(n):
        body = {
            "model": "m",
            "messages": [{"role": "user", "content": "tell me a story " * (5 + i)}],
            "max_tokens": 15,
            "stream": i % 2 == 0,
            "stream_options": {"include_usage": True},
        }
        _, text = _post(base, body)
        if body["stream"]:
            chunks = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")]
            usage = chunks[-1]["usage"]
            reason = next(
                c["choices"][0]["finish_reason"] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]
            )
        else:
            doc = json.loads(text)
            usage, reason = doc["usage"], doc["choices"][0]["finish_reason"]
        prompt += usage["prompt_tokens"]
        completion += usage["completion_tokens"]
        length += reason == "length"
    return prompt, completion, length


@pytest.mark.parametrize("engine, version", ENGINE_RELEASES, ids=[f"{e}-{v}" for e, v in ENGINE_RELEASES])
def test_metrics_normalize_and_agree_with_what_was_served(engine, version, mappings, catalog):
    with simulator(engine, version) as (base, _):
        prompt, completion, length = _requests(base)
        deadline = time.monotonic() + 10  # the last answer can reach the client before its counts are kept
        while (
            _values(Normalizer(mappings, catalog).normalize(raw := _metrics(base)).render()).get(
                "llm_requests_finished_total"
            )
            != 12
            and time.monotonic() < deadline
        ):
            time.sleep(0.05)
    assert ("_created" in raw) == (engine == "vllm"), "vLLM writes _created series, SGLang (multiprocess) does not"
    result = Normalizer(mappings, catalog).normalize(raw)
    assert result.sources == (engine,) and not result.warnings
    got = _values(result.render())
    for name in (
        "llm_requests_running",
        "llm_requests_waiting",
        "llm_kv_cache_usage_ratio",
        "llm_time_to_first_token_seconds_count",
        "llm_prompt_tokens_total",
        "llm_generation_tokens_total",
    ):
        assert name in got, name
    assert got["llm_prompt_tokens_total"] == prompt
    assert got["llm_generation_tokens_total"] == completion
    assert got["llm_requests_finished_total"] == 12
    if engine == "vllm":
        assert got["llm_requests_finished_total|finished_reason=length"] == length
        assert got["llm_time_to_first_token_seconds_count"] == 12
    else:  # SGLang: non-streamed requests get their TTFT at the end, under is_streaming="false" where it exists
        assert got["llm_time_to_first_token_seconds_count" + ("|is_streaming=true" if version == "0.5.23" else "")] == (
            6 if version == "0.5.23" else 12
        )


def test_openai_client_streams_content_reasoning_and_tool_calls():
    openai = pytest.importorskip("openai")
    with simulator(params=replace(FAST, reasoning_tokens=5)) as (base, _):
        client = openai.OpenAI(base_url=base + "/v1", api_key="none")
        assert [m.id for m in client.models.list()] == ["m"]
        stream = client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            stream_options={"include_usage": True},
            max_tokens=30,
        )
        content = reasoning = ""
        usage = None
        for chunk in stream:
            if chunk.usage:
                usage = chunk.usage
            for choice in chunk.choices:
                content += choice.delta.content or ""
                reasoning += (choice.delta.model_extra or {}).get("reasoning_content") or ""
        assert reasoning.strip() and content.strip()
        assert usage.completion_tokens == len(reasoning.split()) + len(content.split())
        tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
        stream = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "weather?"}], tools=tools, stream=True
        )
        name, arguments, reason = None, "", None
        for chunk in stream:
            for choice in chunk.choices:
                for call in choice.delta.tool_calls or []:
                    name = name or call.function.name
                    arguments += call.function.arguments or ""
                reason = choice.finish_reason or reason
        assert name == "get_weather" and json.loads(arguments)["city"] and reason == "tool_calls"
        whole = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        assert whole.choices[0].message.content and whole.usage.total_tokens > 0
        text = client.completions.create(model="m", prompt="once upon a time", max_tokens=5)
        assert text.choices[0].finish_reason in ("stop", "length")


@pytest.mark.parametrize(
    "stream, cap",
    [(True, 32), (False, 32), (True, 0), (False, 0)],
    ids=["streamed", "whole", "streamed-queued", "whole-queued"],
)
def test_client_disconnect_aborts_the_request(stream, cap):
    """Streamed or not, generating or queued (a cap of 0 admits nothing), a client that goes away aborts its
    request, SGLang counts the abort and the running gauge drops at once. A whole answer used to be generated to
    its end (the hang-up was looked for only after 0.1 s without a token; here one comes every 0.05 s), and a
    queued stream waited for its first token."""
    slow = replace(FAST, decode_step_s=0.05, output_tokens_mean=400, max_num_seqs=cap)
    with simulator("sglang", params=slow) as (base, sim):
        request = urllib.request.Request(
            base + "/v1/chat/completions",
            data=json.dumps({"model": "m", "messages": [{"role": "user", "content": "go"}], "stream": stream}).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        if stream:
            resp = urllib.request.urlopen(request, timeout=10)
            if cap:
                resp.readline()  # a first chunk
            resp.close()  # the user closed the tab
        else:
            with pytest.raises(TimeoutError):
                urllib.request.urlopen(request, timeout=0.5)  # a client that gives up closes its connection
        deadline = time.time() + 5
        while time.time() < deadline and (sim.engine.running or sim.engine.waiting):
            time.sleep(0.05)
        assert not sim.engine.running and not sim.engine.waiting
        text = _metrics(base)
        assert 'sglang:num_aborted_requests_total{engine_type="unified",model_name="m"} 1.0' in text
        assert [
            line.rsplit(" ", 1)[1]
            for line in text.splitlines()
            if line.startswith(("sglang:num_running_reqs{", "sglang:num_queue_reqs{"))
        ] == ["0.0", "0.0"]


@pytest.mark.parametrize(
    "scenario, check",
    [
        ("errors", lambda r: r["errors"] > 0),
        ("truncation", lambda r: r["length"] >= 5),
        ("broken-tools", lambda r: r["bad_json"] == r["tools"] > 0),
        ("thinking", lambda r: r["reasoning"] > 0),
    ],
)
def test_scenarios_switch_at_runtime(scenario, check):
    with simulator() as (base, sim):
        status, body = _post(base, {"scenario": scenario}, "/admin/scenario")
        assert status == 200 and sim.scenario == scenario
        seen = {"errors": 0, "length": 0, "bad_json": 0, "tools": 0, "reasoning": 0}
        tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
        body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 400}
        if scenario == "broken-tools":
            body["tools"] = tools

        def one(_):
            try:
                return _post(base, body)[1]
            except urllib.error.HTTPError:
                return None

        # 30 requests, eight at a time: one by one, thinking's 400 reasoning tokens each took 13 s of waiting
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(one, range(30)))
        for text in answers:
            if text is None:
                seen["errors"] += 1
                continue
            choice = json.loads(text)["choices"][0]
            seen["length"] += choice["finish_reason"] == "length"
            seen["reasoning"] += bool(choice["message"].get("reasoning_content"))
            for call in choice["message"].get("tool_calls") or []:
                seen["tools"] += 1
                try:
                    json.loads(call["function"]["arguments"])
                except ValueError:
                    seen["bad_json"] += 1
        assert check(seen), seen


def test_unknown_scenario_is_refused_and_flaky_metrics_fail_sometimes():
    with simulator(params=replace(FAST, metrics_fault_share=0.0)) as (base, sim):
        with pytest.raises(urllib.error.HTTPError) as err:
            _post(base, {"scenario": "meltdown"}, "/admin/scenario")
        assert err.value.code == 400
        message = json.loads(err.value.read())["message"]  # the known names once, not twice
        assert message.startswith("unknown scenario 'meltdown'; use one of normal,") and message.count("queueing") == 1
        with pytest.raises(urllib.error.HTTPError) as err:
            _post(base, {"name": "queueing"}, "/admin/scenario")
        assert json.loads(err.value.read())["message"].startswith('give {"scenario": NAME}, NAME one of normal,')
        _post(base, {"scenario": "flaky-metrics"}, "/admin/scenario")
        sim.engine.rng.seed(3)
        outcomes = []
        for _ in range(12):
            try:
                outcomes.append(urllib.request.urlopen(base + "/metrics", timeout=0.5).status)
            except urllib.error.HTTPError as error:
                outcomes.append(error.code)
            except OSError:
                outcomes.append("hang")
        assert 200 in outcomes and set(outcomes) - {200}


def _bucket_bounds(text: str, name: str, q: float) -> tuple[float, float]:
    """(lower, upper) bound of the bucket holding quantile q of a histogram in the exposition."""
    buckets = []
    for fam in split_families(text):
        for s in fam.samples():
            if s.name == name + "_bucket":
                buckets.append((float(dict(s.labels)["le"]), float(s.value)))
    buckets.sort()
    total = buckets[-1][1]
    lower = 0.0
    for le, count in buckets:
        if count >= q * total:
            return lower, le
        lower = le
    raise AssertionError("no bucket")


def test_load_generator_percentiles_agree_with_the_simulators_histograms():
    """What the client measures lies in the bucket the engine's own histogram puts that quantile in."""
    params = replace(FAST, decode_step_s=0.01, max_num_seqs=4, output_tokens_mean=30)
    with simulator(params=params) as (base, _):
        report = asyncio.run(run_load(LoadConfig(base, rate=12, duration=6, prompt_tokens=50, seed=5)))
        raw = _metrics(base)
    assert report.ok == report.requests > 30 and not report.errors
    for q, key in ((0.5, "p50"), (0.95, "p95")):
        lower, upper = _bucket_bounds(raw, "vllm:time_to_first_token_seconds", q)
        assert lower - 0.02 <= report.ttft[key] <= upper + 0.02, (key, report.ttft[key], lower, upper)
        lower, upper = _bucket_bounds(raw, "vllm:request_time_per_output_token_seconds", q)
        assert lower - 0.005 <= report.tpot[key] <= upper + 0.005, (key, report.tpot[key], lower, upper)


def test_load_with_a_concurrency_keeps_that_many_requests_in_flight():
    """A rate far over what the engine serves, bounded to 3 in flight: never more than 3 at once (each sample's
    start to its end), and a slot freed is taken again, so the engine's queue stays at its length."""
    params = replace(FAST, decode_step_s=0.01, max_num_seqs=2, output_tokens_mean=20)
    with simulator(params=params) as (base, _):
        report = asyncio.run(run_load(LoadConfig(base, rate=200, duration=3, prompt_tokens=20, seed=3, concurrency=3)))
    assert report.ok == report.requests > 6 and not report.errors
    edges = sorted(
        [(s.started, 1) for s in report.samples] + [(s.started + s.e2e, -1) for s in report.samples],
        key=lambda edge: (edge[0], edge[1]),
    )
    in_flight = [0]
    for _, step in edges:
        in_flight.append(in_flight[-1] + step)
    assert max(in_flight) == 3


def test_simulate_and_load_commands(tmp_path):
    from promtools import free_port

    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "inferwatch",
            "simulate",
            "--engine",
            "sglang",
            "--listen",
            f"127.0.0.1:{port}",
            "--decode-step",
            "0.002",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.time() + 20
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except OSError:
                assert time.time() < deadline and proc.poll() is None
                time.sleep(0.2)
        load = subprocess.run(
            [
                sys.executable,
                "-m",
                "inferwatch",
                "load",
                "--target",
                f"http://127.0.0.1:{port}/v1",
                "--rate",
                "10",
                "--duration",
                "2s",
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )  # the OpenAI base URL, as users copy it
        assert load.returncode == 0, load.stderr
        report = json.loads(load.stdout)
        assert report["ok"] == report["requests"] > 5 and set(report["ttft"]) == {"p50", "p95", "p99", "mean"}
    finally:
        proc.terminate()
        proc.wait(10)


def test_bad_simulate_flags_are_clear_errors():
    proc = subprocess.run(
        [sys.executable, "-m", "inferwatch", "simulate", "--engine", "tgi"], capture_output=True, text=True
    )
    assert proc.returncode == 1 and proc.stderr.startswith("error: --engine 'tgi': use vllm or sglang")
    proc = subprocess.run(
        [sys.executable, "-m", "inferwatch", "simulate", "--engine-version", "0.1"], capture_output=True, text=True
    )
    assert proc.returncode == 1 and "simulated vllm releases are 0.33.0, 0.32.0, 0.10.2, 0.7.3" in proc.stderr


def test_engine_model_preempts_caches_prefixes_and_speculates():
    """A small KV cache forces preemptions; a shared prompt prefix hits the prefix cache; drafts are accepted
    at about the configured rate."""
    params = replace(FAST, kv_cache_tokens=700, max_num_seqs=16, output_tokens_mean=200, spec_acceptance=0.7)
    with simulator(params=params) as (base, _):
        prefix = "you are a helpful assistant " * 20
        report = asyncio.run(
            run_load(
                LoadConfig(
                    base,
                    rate=40,
                    duration=1.5,
                    prompt_tokens=30,
                    prefix_share=1.0,
                    prefix_tokens=80,
                    seed=3,
                    max_tokens=400,
                )
            )
        )
        _post(base, {"model": "m", "messages": [{"role": "user", "content": prefix + "one"}], "max_tokens": 5})
        _post(base, {"model": "m", "messages": [{"role": "user", "content": prefix + "two"}], "max_tokens": 5})
        got = {}
        for fam in split_families(_metrics(base)):
            for s in fam.samples():
                got[s.name] = got.get(s.name, 0.0) + float(s.value)
    assert report.ok == report.requests
    assert got["vllm:num_preemptions_total"] > 0
    assert 0 < got["vllm:prefix_cache_hits_total"] < got["vllm:prefix_cache_queries_total"]
    accepted = got["vllm:spec_decode_num_accepted_tokens_total"] / got["vllm:spec_decode_num_draft_tokens_total"]
    assert 0.4 < accepted < 0.8  # per-token acceptance 0.7, counted only up to the first rejection


@pytest.mark.parametrize(
    "given",
    [
        "http://h:8000",
        "http://h:8000/",
        "http://h:8000/v1",
        "http://h:8000/v1/",
        "h:8000",
        "h:8000/v1",
        " https://h:8000/v1 ",
    ],
)
def test_load_target_accepts_a_base_url_the_openai_base_url_or_host_port(given):
    from inferwatch._urls import openai_server_url

    assert openai_server_url(given) == ("https" if "https" in given else "http") + "://h:8000"


def _load(*args: str) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "inferwatch", "load", *args], capture_output=True, text=True, timeout=60
    )
    return proc, time.monotonic() - started


def test_load_against_a_server_that_never_answers_ends_soon_and_fails():
    """The server accepts connections (the kernel does, from the backlog) and never sends a byte."""
    import socket

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(128)
        target = f"127.0.0.1:{silent.getsockname()[1]}"
        proc, took = _load("--target", target, "--model", "m", "--rate", "8", "--duration", "1s", "--timeout", "2s")
        # ends: bounded by --duration + --timeout, with 30 s of slack for a loaded machine (a hang hits 60)
        assert proc.returncode == 1 and took < 1 + 2 + 30, (took, proc.stderr)
        assert "error: every request failed (no_response " in proc.stderr and "Traceback" not in proc.stderr
        assert proc.stdout.startswith("requests ") and ", ok 0," in proc.stdout
        proc, took = _load("--target", target, "--timeout", "1s")  # no --model: asks /v1/models first
        assert proc.returncode == 1 and took < 1 + 30 and "/v1/models: cannot find a model" in proc.stderr


def test_load_exits_1_when_every_request_failed():
    from promtools import free_port

    proc, _ = _load(
        "--target", f"127.0.0.1:{free_port()}", "--model", "m", "--rate", "20", "--duration", "0.5s", "--json"
    )
    assert proc.returncode == 1 and json.loads(proc.stdout)["ok"] == 0
    assert proc.stderr.startswith("error: every request failed (connect ")


def _finish_time(late: float, keep_pace: float) -> float:
    """When (on a virtual clock) the last of eight streamed requests finishes on an engine whose every sleep
    wakes `late` times as late as it asked, as on a host whose other work starves the event loop."""
    from inferwatch.sim import Engine, EngineParams

    now = [0.0]
    real_sleep = asyncio.sleep

    async def sleep(seconds):
        now[0] += late * seconds
        await real_sleep(0)

    async def run():
        engine = Engine(
            "vllm",
            releases("vllm")[0],
            "m",
            EngineParams(max_num_seqs=4),
            seed=1,
            clock=lambda: now[0],
            keep_pace_s=keep_pace,
        )
        engine.start()
        requests = [engine.new_request("say something", 200, True) for _ in range(8)]
        for request in requests:
            engine.submit(request)
        while any(r.finished_at is None for r in requests):
            await real_sleep(0)
        await engine.stop()
        return max(r.finished_at for r in requests)

    asyncio.sleep = sleep
    try:
        return asyncio.run(run())
    finally:
        asyncio.sleep = real_sleep


def test_keep_pace_makes_up_what_a_late_event_loop_costs():
    """The demo's healthy vLLM paged in the first minutes of a 30-minute soak on a loaded host: each late wake-up
    stretched a step, so the modelled engine served fewer tokens a second, queued at its cap and its TTFT rose to
    4 s. With --keep-pace (the demo's engines) steps are due on a fixed timeline: late wake-ups are made up."""
    on_time = _finish_time(1.0, keep_pace=0)
    assert on_time > 1.0  # two waves of four requests, well over a hundred steps each
    assert _finish_time(4.0, keep_pace=0) > 3 * on_time  # without it, the engine slows with the host
    assert _finish_time(4.0, keep_pace=2.0) < 1.1 * on_time
    assert _finish_time(1.0, keep_pace=2.0) == pytest.approx(on_time, rel=0.02)


@pytest.mark.parametrize("stop, status", [(5, 400), (["a"] * 5, 400), (["e", 3], 400), ("e", 200), (["e", "o"], 200)])
def test_stop_strings_as_vllm_takes_them(stop, status):
    """A string or at most four strings (vLLM's limit); anything else is the client's 400, never a 500. An answer
    that reaches a stop string ends there, finish_reason stop (every simulated word holds an e or an o, but `by`)."""
    with simulator("vllm", "0.32.0") as (base, _):
        try:
            got, body = _post(
                base, {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stop": stop, "max_tokens": 50}
            )
        except urllib.error.HTTPError as err:
            got, body = err.code, ""
    assert got == status
    if status == 200:
        assert json.loads(body)["choices"][0]["finish_reason"] == "stop"
