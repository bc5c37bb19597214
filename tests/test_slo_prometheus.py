"""The default SLO rules loaded into a real Prometheus that scrapes every engine exposition, normalized.

Counters grow in proportion to the time since a common origin, so every rate
keeps the capture's own proportions and every source counts with the same
weight: the per-minute good and total counts Prometheus records for each model
must give the error ratio computed here from the normalized text, as a sum over
sums. That proves the selectors, the `le` spellings of real engines (`1.0`) and
the grouping against real series, not only synthetic ones.

The minute before Prometheus starts is written as TSDB blocks of the very same
series (the scrape's `job` and `instance` added), so `increase(...[1m])` sees a
full minute from the first evaluation instead of a minute of waiting; the live
scrapes go on from there, and the test checks that each one parsed every sample
and continued the recorded series rather than starting new ones.
"""

from __future__ import annotations

import re
import time
from collections import defaultdict

import pytest
from conftest import ROOT, all_expositions, need
from promtools import create_blocks, prometheus, query, serve, wait_for

from inferwatch.exporters import Normalizer, split_families

ENGINES = [p for p in all_expositions() if not p.name.startswith("dcgm")]
HISTORY = 70  # seconds of one-second samples written as blocks before Prometheus starts: over the 1m window
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$")
COUNTER = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*(?:_total|_count|_bucket|_sum))(\{[^}]*\})? (\S+)(.*)$")
BAD_REASONS = re.compile(r"abort|error|repetition")  # slo/slis.yaml: a length stop is answered


def _grow(text: str, factor: float) -> str:
    out = []
    for line in text.splitlines():
        match = COUNTER.match(line)
        if match and match.group(3) not in ("NaN", "+Inf", "-Inf"):
            line = f"{match.group(1)}{match.group(2) or ''} {float(match.group(3)) * factor}{match.group(4)}"
        out.append(line)
    return "\n".join(out) + "\n"


def _history(text: str, job: str, instance: str, until: float, origin: float) -> list[str]:
    """OpenMetrics lines of one exposition, a sample a second for HISTORY seconds up to `until`, with the labels
    the scrape adds: the counters at each instant as the live route serves them then."""
    steps = [until - HISTORY + i for i in range(HISTORY + 1)]
    grown = [_grow(text, t - origin).splitlines() for t in steps]
    out = []
    for index, line in enumerate(grown[0]):
        if not line or line.startswith("#"):
            continue
        name, labels, _ = SAMPLE.match(line).groups()
        labels = (labels[:-1] + "," if labels and labels != "{}" else "{") + f'job="{job}",instance="{instance}"}}'
        out += [
            f"{name}{labels} {SAMPLE.match(lines[index]).group(3)} {t:.3f}"
            for t, lines in zip(steps, grown, strict=True)
        ]
    return out


def _expected(normalized: list[str]) -> dict[str, dict[str, float]]:
    """{slo: {model: error ratio}} from the normalized expositions, summed over every source."""
    sums: dict[tuple, float] = defaultdict(float)
    for text in normalized:
        for fam in split_families(text):
            for s in fam.samples():
                labels = dict(s.labels)
                model, value = labels.get("model"), float(s.value)
                if model is None:
                    continue
                if s.name == "llm_time_to_first_token_seconds_count" and labels.get("is_streaming") != "false":
                    sums["responsive", "total", model] += value
                elif (
                    s.name == "llm_time_to_first_token_seconds_bucket"
                    and labels.get("is_streaming") != "false"
                    and float(labels["le"]) == 1
                ):
                    sums["responsive", "good", model] += value
                elif s.name == "llm_time_per_output_token_seconds_count":
                    sums["fast-enough", "total", model] += value
                elif s.name == "llm_time_per_output_token_seconds_bucket" and float(labels["le"]) == 0.1:
                    sums["fast-enough", "good", model] += value
                elif s.name == "llm_requests_finished_total":
                    sums["answered", "total", model] += value
                    if BAD_REASONS.fullmatch(labels.get("finished_reason", "")):
                        sums["answered", "bad", model] += value
                elif s.name == "llm_requests_aborted_total" and labels.get("engine") == "sglang":
                    sums["answered", "excluded", model] += value  # neither good nor bad: out of the total
    out: dict[str, dict[str, float]] = defaultdict(dict)
    for (slo, kind, model), total in list(sums.items()):
        total -= sums[slo, "excluded", model]
        if kind == "total" and total > 0:
            bad = sums[slo, "bad", model] if slo == "answered" else total - sums[slo, "good", model]
            out[slo][model] = max(0.0, bad / total)
    return out


def test_default_slo_rules_on_real_series(mappings, catalog, tmp_path):
    binary = need("prometheus")
    normalizer = Normalizer(mappings, catalog)
    normalized = {p: normalizer.normalize(p.read_text()).render() for p in ENGINES}
    expected = _expected(list(normalized.values()))
    assert set(expected) == {"responsive", "fast-enough", "answered"}
    rule_files = []
    for path in sorted((ROOT / "alerts").glob("llm.*.rules.yaml")):
        fast = tmp_path / path.name  # evaluate every second instead of every minute: same expressions
        fast.write_text(path.read_text().replace("interval: 1m", "interval: 1s"))
        rule_files.append(str(fast))
    scrapes: dict[str, int] = defaultdict(int)
    origin = time.time() - HISTORY - 1  # each counter: its value in the capture times the seconds since this

    def route(path, text):
        def handler(request):
            scrapes[path] += 1
            body = _grow(text, time.time() - origin).encode()
            request.send_response(200)
            request.send_header("Content-Type", "text/plain; version=0.0.4")
            request.end_headers()
            request.wfile.write(body)

        return handler

    routes = {f"/{p.stem}/metrics": route(p.stem, text) for p, text in normalized.items()}
    with serve(routes) as base:
        host = base.removeprefix("http://")
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": rule_files,
            "scrape_configs": [
                {"job_name": p.stem, "metrics_path": f"/{p.stem}/metrics", "static_configs": [{"targets": [host]}]}
                for p in ENGINES
            ],
        }
        history = [line for p, text in normalized.items() for line in _history(text, p.stem, host, time.time(), origin)]
        (tmp_path / "history.om").write_text("\n".join(history) + "\n# EOF\n")
        create_blocks(tmp_path / "history.om", tmp_path / "data", "--quiet")
        with prometheus(binary, config, tmp_path) as prom:

            def recorded(expr):
                got: dict[str, dict[str, float]] = defaultdict(dict)
                for row in query(prom, expr):
                    got[row["metric"]["slo"]][row["metric"]["model"]] = float(row["value"][1])
                return got if all(set(got[s]) == set(m) for s, m in expected.items()) else None

            wait_for(lambda: recorded("llm_slo:error_ratio:5m"), timeout=60)
            # every source scraped live a few times, each scrape parsing every sample of its exposition into the
            # series the blocks began (no second series beside them), then an evaluation over the whole minute
            wait_for(lambda: all(scrapes[p.stem] >= 3 for p in ENGINES), timeout=30)
            for p, text in normalized.items():
                lines = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
                # a scrape may miss its 1 s timeout on a busy machine (0 samples, up 0): wait for one that did not
                samples = f'scrape_samples_scraped{{job="{p.stem}"}} and on (job, instance) up == 1'
                got = wait_for(lambda samples=samples: query(prom, samples), timeout=60)
                assert [int(float(r["value"][1])) for r in got] == [lines], p.name
                got = query(prom, f'count({{job="{p.stem}", __name__!~"up|scrape_.+"}})')
                assert int(float(got[0]["value"][1])) == lines, p.name
            scraped = time.time()
            wait_for(
                lambda: min(float(r["value"][1]) for r in query(prom, "timestamp(llm_slo:total:increase1m)")) > scraped,
                timeout=30,
            )
            # each source counts with the same weight, a minute's growth (a wrong selector or le spelling is off
            # by far more than 2%)
            got = recorded("1 - llm_slo:good:increase1m / (llm_slo:total:increase1m > 0)")
            for slo, models in expected.items():
                for model, ratio in models.items():
                    assert got[slo][model] == pytest.approx(ratio, rel=0.02, abs=1e-9), (slo, model)
            missing = query(prom, 'ALERTS{alertname="LLMSLIDataMissing", model!=""}')
            assert missing == [], "models with data must not read as missing"
