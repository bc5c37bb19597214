"""Renderers 2 and 3 proven for real: Prometheus scraping with our relabel configs, promtool evaluating our
recording rules, together yield the same common series as `inferwatch normalize`."""

from __future__ import annotations

import math
import re
import subprocess

import pytest
import yaml
from conftest import EXPOSITIONS, all_expositions, need
from promtools import prometheus, query, serve, wait_for

from inferwatch.exporters import Normalizer, split_families
from inferwatch.mappings import recording_rules, relabel_configs
from inferwatch.yamlio import dump_yaml

# plus dcgm-exporter edge values kept out of all_expositions() (a custom CSV with both clock-event names, every
# reason bit, none, a bit above the nine known ones, DCGM blanks): the bit arithmetic is checked here, in all three
FIXTURES = all_expositions() + sorted((EXPOSITIONS / "dcgm-edges").glob("*.txt"))


def _job(path) -> str:
    return re.sub(r"[^a-zA-Z0-9_]", "_", path.stem)


def _key(labels: dict) -> tuple:
    return tuple(sorted((k, v) for k, v in labels.items() if v and k not in ("job", "instance")))


def _normalized(normalizer, path) -> dict[str, dict[tuple, float]]:
    out: dict[str, dict[tuple, float]] = {}
    for fam in split_families(normalizer.normalize(path.read_text()).render()):
        for s in fam.samples():
            if s.name.startswith(("llm_", "gpu_")):
                out.setdefault(s.name, {})[_key(dict(s.labels))] = float(s.value)
    return out


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b or abs(a - b) <= 1e-9 * max(abs(a), abs(b))


@pytest.fixture(scope="module")
def scraped(mappings, tmp_path_factory):
    """Every fixture scraped once by a real Prometheus through the generated relabel configs."""
    binary = need("prometheus")
    routes = {f"/{_job(p)}/metrics": p.read_text() for p in FIXTURES}
    workdir = tmp_path_factory.mktemp("prom")
    with serve(routes) as base:
        host = base.removeprefix("http://")
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [
                {
                    "job_name": _job(p),
                    "metrics_path": f"/{_job(p)}/metrics",
                    "static_configs": [{"targets": [host]}],
                    "metric_relabel_configs": relabel_configs(mappings),
                }
                for p in FIXTURES
            ],
        }
        (workdir / "check.yml").write_text(yaml.safe_dump(config))
        check = subprocess.run(
            [need("promtool"), "check", "config", str(workdir / "check.yml")], capture_output=True, text=True
        )
        assert check.returncode == 0, check.stdout + check.stderr
        with prometheus(binary, config, workdir) as prom:
            wait_for(
                lambda: (
                    len(query(prom, "up == 1")) == len(FIXTURES)
                    and len(query(prom, "scrape_samples_post_metric_relabeling > 0")) == len(FIXTURES)
                )
            )
            result = {}
            for path in FIXTURES:
                rows = query(prom, f'{{job="{_job(path)}"}}')
                result[path] = [
                    (r["metric"], float(r["value"][1]))
                    for r in rows
                    if not r["metric"]["__name__"].startswith(("up", "scrape_"))
                ]
            return result


def _relabeled(rows) -> dict[str, dict[tuple, float]]:
    got: dict[str, dict[tuple, float]] = {}
    for labels, value in rows:
        name = labels["__name__"]
        if name.startswith(("llm_", "gpu_")):
            got.setdefault(name, {})[_key({k: v for k, v in labels.items() if k != "__name__"})] = value
    return got


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_relabeled_series_match_normalize(path, scraped, mappings, catalog):
    normalizer = Normalizer(mappings, catalog)
    expected = _normalized(normalizer, path)
    sources = normalizer.normalize(path.read_text()).sources
    own_rules = {
        r["record"] for g in recording_rules([m for m in mappings if m.source in sources])["groups"] for r in g["rules"]
    }
    got = _relabeled(scraped[path])
    assert not set(got) & own_rules, "relabeling must not produce what this source's rules record"
    for name in set(expected) - own_rules:
        assert set(got.get(name, {})) == set(expected[name]), name
        assert all(_same(got[name][k], v) for k, v in expected[name].items()), name
    assert set(got) <= set(expected)


def _series_literal(labels: dict) -> str:
    name = labels["__name__"]
    rest = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()) if k != "__name__")
    return f"{name}{{{rest}}}"


def _value(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Inf" if v > 0 else "-Inf"
    return repr(v)


@pytest.mark.promtool
def test_recording_rules_match_normalize_under_promtool(scraped, mappings, catalog, tmp_path):
    rules = tmp_path / "rules.yaml"
    rules.write_text(dump_yaml(recording_rules(mappings)))
    check = subprocess.run([need("promtool"), "check", "rules", str(rules)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    rule_names = [r["record"] for g in recording_rules(mappings)["groups"] for r in g["rules"]]
    normalizer = Normalizer(mappings, catalog)
    tests = []
    for path in FIXTURES:
        expected = _normalized(normalizer, path)
        inputs = [
            {
                "series": _series_literal({k: v for k, v in labels.items() if k not in ("job", "instance")}),
                "values": _value(value),
            }
            for labels, value in scraped[path]
        ]
        checks = []
        for name in rule_names:  # input (relabeled) plus rule output must be exactly what normalize gives
            samples = [
                {"labels": _series_literal({"__name__": name, **dict(key)}), "value": v}
                for key, v in sorted(expected.get(name, {}).items())
            ]
            checks.append({"expr": name, "eval_time": "0m", "exp_samples": samples})
        tests.append({"name": path.name, "interval": "1m", "input_series": inputs, "promql_expr_test": checks})
    test_file = tmp_path / "test.yaml"
    test_file.write_text(
        yaml.safe_dump({"rule_files": [str(rules)], "evaluation_interval": "1m", "tests": tests}, sort_keys=False)
    )
    proc = subprocess.run([need("promtool"), "test", "rules", str(test_file)], capture_output=True, text=True)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]


@pytest.mark.promtool
def test_checked_in_rules_pass_promtool_check():
    from inferwatch.build import source_copies

    path = source_copies()["prometheus/rules/inferwatch-mappings.rules.yaml"]
    proc = subprocess.run([need("promtool"), "check", "rules", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = yaml.safe_load(path.read_text())
    for group in doc["groups"]:
        assert not {"labels", "query_offset", "partial_response_strategy"} & set(group)
