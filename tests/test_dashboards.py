"""Dashboards: modern Grafana JSON that validates against the foundation-sdk schema, lints clean, and a linter
that flags the anchors' documented defects; build, ConfigMaps, push, and users' own *.dashboard.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import pairwise

import jsonschema
import pytest
import yaml
from conftest import FIXTURES

from inferwatch.dashboards import build
from inferwatch.dashboards._lint import lint_dashboard, lint_file
from inferwatch.dashboards._push import push
from inferwatch.errors import InferwatchError
from inferwatch.slo import bucket_tables, source_buckets

SCHEMAS = FIXTURES / "schemas" / "grafana-foundation-sdk"
ANCHORS = FIXTURES / "anchors" / "dashboards"
BOARDS = {name: json.loads(text) for name, text in build().items()}
UIDS = {
    "serving-overview.json": "inferwatch-serving-overview",
    "gpu-activity.json": "inferwatch-gpu-activity",
    "slos.json": "inferwatch-slos",
    "which-slow.json": "inferwatch-which-slow",
}


def _schema(name: str) -> dict:
    return json.loads((SCHEMAS / f"{name}.jsonschema.json").read_text())


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_dashboard_validates_against_the_grafana_schema(name):
    board = BOARDS[name]
    errors = list(jsonschema.Draft7Validator(_schema("dashboard")).iter_errors(board))
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors[:5]]
    for panel in board["panels"]:
        if panel["type"] in ("timeseries", "stat"):
            options = {"$ref": "#/definitions/Options", "definitions": _schema(panel["type"])["definitions"]}
            errors = list(jsonschema.Draft7Validator(options).iter_errors(panel.get("options", {})))
            assert not errors, (panel["title"], [e.message for e in errors[:3]])


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_dashboard_is_what_current_grafana_exports(name):
    board = BOARDS[name]
    assert board["uid"] == UIDS[name] and board["schemaVersion"] >= 39
    assert not {"rows", "style", "hideControls", "sharedCrosshair", "__inputs", "gnetId"} & set(board)
    assert "inferwatch" in board["tags"] and board["links"][0]["tags"] == ["inferwatch"]
    ids = [p["id"] for p in _all_panels(board)]
    assert len(ids) == len(set(ids))
    for panel in board["panels"]:
        if panel["type"] == "row":
            assert panel["collapsed"] == bool(panel["panels"])
            continue
        assert panel["type"] in ("timeseries", "stat") and panel["description"]
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert [t["refId"] for t in panel["targets"]] == [chr(65 + i) for i in range(len(panel["targets"]))]
        for t in panel["targets"]:
            assert not {"intervalFactor", "step", "target", "metric", "alias"} & set(t)
        if panel["type"] == "stat":
            assert panel["options"]["reduceOptions"]["calcs"] == ["lastNotNull"]
    for var in board["templating"]["list"]:
        if var["type"] == "query":
            assert var["multi"] and var["includeAll"] and var["refresh"] == 2 and var["allValue"] == ".*"
    assert board["templating"]["list"][0]["type"] == "datasource"


def _all_panels(board: dict) -> list[dict]:
    """Top-level panels, then those of collapsed rows."""
    return board["panels"] + [inner for p in board["panels"] for inner in p.get("panels", [])]


# what current Grafana requires of a logs panel's options and allows in a Loki query (grafana-foundation-sdk's
# logs and loki JSON Schemas, definitions Options and dataquery)
LOGS_OPTIONS = {
    "showLabels",
    "showCommonLabels",
    "showTime",
    "showLogContextToggle",
    "wrapLogMessage",
    "prettifyLogMessage",
    "enableLogDetails",
    "sortOrder",
    "dedupStrategy",
}
LOKI_QUERY = {
    "expr",
    "legendFormat",
    "maxLines",
    "resolution",
    "editorMode",
    "range",
    "instant",
    "step",
    "refId",
    "hide",
    "queryType",
    "datasource",
}


def test_the_access_log_panel_reads_loki_through_a_variable_of_its_own():
    """Issue 29: the access-log panel once told users to pick ${datasource}, which lists Prometheus data sources
    only. It reads Loki through $loki, filters by the dashboard's model, keeps to JSON lines of the access log and
    shows failed outcomes and answers slower than the SLOs' bounds; its description says how the log gets there."""
    board = BOARDS["serving-overview.json"]
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert (variables["loki"]["type"], variables["loki"]["query"]) == ("datasource", "loki")
    assert (variables["datasource"]["type"], variables["datasource"]["query"]) == ("datasource", "prometheus")
    job = variables["access_log_job"]
    assert job["type"] == "textbox" and job["query"] == job["current"]["value"] == "inferwatch-frontdoor"
    row = next(p for p in board["panels"] if p["type"] == "row" and p["panels"])
    assert row["collapsed"] and row is board["panels"][-1]
    [panel] = row["panels"]
    assert panel["type"] == "logs" and panel["gridPos"]["y"] == row["gridPos"]["y"] + 1
    assert panel["datasource"] == {"type": "loki", "uid": "${loki}"}
    assert LOGS_OPTIONS <= set(panel["options"])
    exprs = [t["expr"] for t in panel["targets"]]
    for t in panel["targets"]:
        assert set(t) <= LOKI_QUERY and t["datasource"] == panel["datasource"] and t["queryType"] == "range"
        assert t["expr"].startswith(
            '{job="$access_log_job"} |= "\\"outcome\\":" | json | __error__="" | model=~"$model" | '
        )
    assert exprs[0].endswith('| outcome!~"ok|cancelled|length"')
    assert exprs[1].endswith('| outcome="ok" | first_token_ms > 1000 | __error__=""')  # defaults.yaml's 1 s
    assert exprs[2].endswith('| outcome="ok" | time_per_output_token_ms > 100 | __error__=""')  # and 100 ms
    for words in ("--access-log", "Promtail", "Alloy", 'job="inferwatch-frontdoor"', '"Loki"'):
        assert words in panel["description"], words
    # the linter reads the collapsed row's panel, and would flag it on $datasource
    assert lint_dashboard(board) == []
    on_prometheus = json.loads(json.dumps(board).replace('"uid": "${loki}"', '"uid": "${datasource}"'))
    assert {f.rule for f in lint_dashboard(on_prometheus)} == {"loki-on-prometheus-datasource", "unused-variable"}


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_our_dashboards_lint_clean(name):
    assert lint_dashboard(BOARDS[name], name) == []


def test_the_linter_flags_the_anchors_documented_defects():
    found = {}
    for path in sorted(ANCHORS.glob("*.json")):
        for f in lint_file(path):
            found.setdefault(path.name.split("__")[1], set()).add((f.panel, f.rule))
    stack, models, dcgm = (
        found["vllm-dashboard.json"],
        found["vllm-model-metrics-dashboard.json"],
        found["dcgm-exporter-dashboard.json"],
    )
    assert {
        ("Average Latency", "counter-without-rate"),  # lifetime mean, not a rate
        ("Request latency distribution", "counter-without-rate"),  # cumulative buckets
        ("Request TTFT distribution", "counter-without-rate"),
        ("GPU KV Cache Hit Rate", "counter-without-rate"),  # lifetime ratio
        ("GPU KV Cache Hit Rate", "deprecated-metric"),  # gpu_prefix_cache_* names
        ("Number of Running Requests", "hard-coded-datasource"),
    } <= stack
    assert {
        ("Queue Time", "sum-rate-as-latency"),
        ("Requests Prefill and Decode Time", "sum-rate-as-latency"),
    } <= models
    assert {("", "old-schema"), ("GPU Temperature", "angular-panel"), ("GPU Utilization", "legacy-datasource")} <= dcgm


@pytest.mark.parametrize(
    "expr, rule",
    [
        ("histogram_quantile(0.9, sum(rate(llm_time_to_first_token_seconds_bucket[5m])))", "quantile-without-le"),
        (
            "avg(rate(llm_prefix_cache_hit_tokens_total[5m]) / rate(llm_prefix_cache_queried_tokens_total[5m]))",
            "average-of-ratios",
        ),
        ("avg(sglang:cache_hit_rate)", "average-of-ratios"),
        ("vllm:num_requests_swapped", "deprecated-metric"),
        ("llm_requests_runing + llm_requests_waiting", "unknown-metric"),
        ("rate(llm_requests_finished_total[$__rate_interval]", "invalid-promql"),
        ("llm_generation_tokens_total", "counter-without-rate"),
    ],
)
def test_lint_rules(expr, rule):
    board = {
        "schemaVersion": 41,
        "templating": {"list": []},
        "panels": [
            {
                "type": "timeseries",
                "title": "p",
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
                "targets": [{"expr": expr, "refId": "A"}],
            }
        ],
    }
    rules = {f.rule for f in lint_dashboard(board)}
    assert rule in rules, rules


def test_lint_variables():
    board = {
        "schemaVersion": 41,
        "templating": {
            "list": [
                {"name": "datasource", "type": "datasource", "query": "prometheus"},
                {
                    "name": "unused",
                    "type": "query",
                    "query": "label_values(up, job)",
                    "multi": True,
                    "includeAll": True,
                    "datasource": {"type": "prometheus", "uid": "${datasource}"},
                },
            ]
        },
        "panels": [
            {
                "type": "stat",
                "title": "s",
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
                "targets": [{"expr": 'up{job=~"$job"}', "refId": "A"}],
            }
        ],
    }
    assert {
        (f.rule, f.message.split()[0] if f.rule == "undefined-variable" else f.panel) for f in lint_dashboard(board)
    } == {("undefined-variable", "$job"), ("unused-variable", "variable unused")}


def _cli(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "inferwatch", "dashboards", *map(str, args)], capture_output=True, text=True, env=env
    )


def test_build_with_configmaps(tmp_path):
    proc = _cli("build", "-o", tmp_path, "--configmaps")
    assert proc.returncode == 0, proc.stderr
    for name in BOARDS:
        assert json.loads((tmp_path / name).read_text()) == BOARDS[name]
        cm = yaml.safe_load((tmp_path / name.replace(".json", ".configmap.yaml")).read_text())
        assert cm["kind"] == "ConfigMap" and cm["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert json.loads(cm["data"][name])["uid"] == UIDS[name]
    assert _cli("lint", *sorted(tmp_path.glob("*.json"))).returncode == 0
    assert _cli("lint", *sorted(ANCHORS.glob("*.json"))).returncode == 1


def test_users_own_dashboard_file(tmp_path):
    source = tmp_path / "team.dashboard.py"
    source.write_text(
        "from inferwatch.dashboards import ENGINE_FILTERS, Selector, dashboard, engine_variables, quantiles, "
        "timeseries\n"
        "sel = Selector(ENGINE_FILTERS)\n"
        "dashboard = dashboard(uid='team-ttft', title='Team TTFT', description='ours', variables=engine_variables(),\n"
        "    panels=[timeseries('TTFT', quantiles(sel, 'llm_time_to_first_token_seconds'), unit='s',\n"
        "                       description='p50/p95/p99 TTFT')])\n"
    )
    proc = _cli("build", source, "-o", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    board = json.loads((tmp_path / "out" / "team.json").read_text())
    assert board["uid"] == "team-ttft" and lint_dashboard(board) == []
    broken = tmp_path / "broken.dashboard.py"
    broken.write_text("dashboard = 1 / 0\n")
    proc = _cli("build", broken, "-o", tmp_path / "out")
    assert proc.returncode == 1 and proc.stderr.startswith(f"error: {broken}: ZeroDivisionError")


class _FakeGrafana:
    """Grafana's folder and dashboard HTTP API on loopback, keeping dashboards by uid."""

    def __init__(self, token="s3cret-token"):
        self.token, self.dashboards, self.folders, self.requests = token, {}, {}, []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _authorized(self):
                fake.requests.append((self.command, self.path, self.headers.get("Authorization")))
                if self.headers.get("Authorization") != f"Bearer {fake.token}":
                    self._reply(401, {"message": "invalid API key"})
                    return False
                return True

            def do_GET(self):  # noqa: N802
                if self._authorized():
                    uid = self.path.rsplit("/", 1)[1]
                    self._reply(200, fake.folders[uid]) if uid in fake.folders else self._reply(404, {})

            def do_POST(self):  # noqa: N802
                if not self._authorized():
                    return
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path == "/api/folders":
                    fake.folders[body["uid"]] = body
                    self._reply(200, body)
                else:
                    board = body["dashboard"]
                    version = fake.dashboards.get(board["uid"], ({}, 0))[1] + 1
                    fake.dashboards[board["uid"]] = (dict(board, folder=body["folderUid"]), version)
                    self._reply(200, {"uid": board["uid"], "url": f"/d/{board['uid']}", "version": version})

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


def test_push_is_idempotent_by_uid_and_never_shows_the_token():
    grafana = _FakeGrafana()
    env = {**os.environ, "GRAFANA_TOKEN": grafana.token}
    for _ in range(2):
        proc = _cli("push", "--grafana-url", grafana.url, "--folder", "LLM serving", env=env)
        assert proc.returncode == 0, proc.stderr
        assert grafana.token not in proc.stdout + proc.stderr
    assert set(grafana.dashboards) == set(UIDS.values())
    assert all(
        version == 2 and board["folder"] == "inferwatch-llm-serving" for board, version in grafana.dashboards.values()
    )
    assert list(grafana.folders) == ["inferwatch-llm-serving"]
    bad = _cli("push", "--grafana-url", grafana.url, env={**os.environ, "GRAFANA_TOKEN": "wrong-token"})
    assert bad.returncode == 1 and "HTTP 401" in bad.stderr and "wrong-token" not in bad.stderr
    missing = _cli(
        "push", "--grafana-url", grafana.url, env={k: v for k, v in os.environ.items() if k != "GRAFANA_TOKEN"}
    )
    assert missing.returncode == 1 and "set GRAFANA_TOKEN" in missing.stderr
    grafana.server.shutdown()


def test_push_to_nowhere_is_a_clear_error():
    with pytest.raises(InferwatchError, match="cannot reach Grafana"):
        push({"x.json": {"uid": "x"}}, "http://127.0.0.1:9", token="t")


# --- which kind of slow? (issue 12) --------------------------------------------------------------------------

KINDS = (
    "queueing",
    "long-prompts",
    "prefix-cache-loss",
    "kv-pressure",
    "slow-decode",
    "spec-decode-collapse",
    "thinking",
    "long-outputs",
    "gpu-not-computing",
    "errors",
    "not-the-engine",
    "missing-data",
)


def _which_slow_rows() -> dict[str, list[dict]]:
    """{row title: the panels under it} of the which-slow dashboard, in order."""
    rows: dict[str, list[dict]] = {}
    for panel in BOARDS["which-slow.json"]["panels"]:
        if panel["type"] == "row":
            rows[panel["title"]] = []
        else:
            rows[list(rows)[-1]].append(panel)
    return rows


def test_which_slow_has_one_row_per_kind_that_says_what_confirms_and_rules_it_out():
    """Grafana rows carry no description (the schema forbids one): each kind's row opens with a tile whose
    description is the row's, naming by title the panels that confirm the kind and those that rule it out."""
    rows = _which_slow_rows()
    assert [title.split(":")[0] for title in rows] == list(KINDS)
    titles = {p["title"] for panels in rows.values() for p in panels}
    assert len(titles) == sum(len(panels) for panels in rows.values())  # titles name panels unambiguously
    for kind, panels in zip(KINDS, rows.values(), strict=True):
        guide = panels[0]
        assert guide["type"] == "stat" and f"{kind}: " in guide["description"], kind
        confirm, _, rule_out = guide["description"].partition("Confirmed by:")[2].partition("Ruled out by:")
        for part in (confirm, rule_out):
            named = re.findall(r'"([^"]+)"', part)
            assert named, (kind, part)
            assert set(named) <= titles, (kind, set(named) - titles)
        assert set(re.findall(r'"([^"]+)"', confirm)) & {p["title"] for p in panels[1:]}, (
            f"{kind}: none of the confirming panels is in its own row"
        )


def _coarse_histograms() -> set[str]:
    """Histograms whose current default buckets somewhere at least double from one bound to the next (a
    doubling can hide inside one bucket), in any engine or in the front door (slo/buckets.yaml)."""
    tables = {**bucket_tables(), **source_buckets()}
    coarse = set()
    for table in tables.values():
        for metric, family in table.metrics.items():
            bounds = [b for b in table.families[family][0].bounds if b > 0]
            if any(high >= 2 * low for low, high in pairwise(bounds)):
                coarse.add(metric)
    return coarse


def test_which_slow_shows_the_mean_beside_every_quantile_on_coarse_buckets():
    """vLLM's TPOT p95 sits between 0.01 and 0.025 s whatever happens below 25 ms: wherever buckets are that
    coarse (and for histograms whose buckets no table holds: token counts), the exact mean stands beside the
    quantile, as a sum over a sum."""
    coarse = _coarse_histograms()
    assert {"llm_time_per_output_token_seconds", "llm_inter_token_latency_seconds"} <= coarse
    known = set(coarse) | {m for t in {**bucket_tables(), **source_buckets()}.values() for m in t.metrics}
    checked = set()
    for panel in BOARDS["which-slow.json"]["panels"]:
        exprs = [t["expr"] for t in panel.get("targets", [])]
        for expr in exprs:
            for histogram in re.findall(r"histogram_quantile\([^,]+, sum by \(le, [^)]*\) \(rate\((\w+)_bucket", expr):
                if histogram in known and histogram not in coarse:
                    continue
                mean = (
                    rf"sum by \(([^)]*)\) \(rate\({histogram}_sum\{{[^}}]*\}}\[[^]]+\]\)\)"
                    rf"\n/\n\(sum by \(\1\) \(rate\({histogram}_count\{{"
                )
                means = [e for e in exprs if re.search(mean, e)]
                assert means, (panel["title"], histogram)
                checked.add(histogram)
    assert {
        "llm_time_per_output_token_seconds",
        "llm_inter_token_latency_seconds",
        "llm_time_to_first_token_seconds",
        "llm_request_queue_time_seconds",
    } <= checked


def test_which_slow_ratios_read_no_data_rather_than_good_without_traffic():
    """Every division is a sum over a sum with its denominator kept above 0, so zero traffic is no data; no
    `or vector(...)` fills a missing series with a value that reads fine."""
    for panel in BOARDS["which-slow.json"]["panels"]:
        for t in panel.get("targets", []):
            assert "vector(" not in t["expr"], panel["title"]
            for denominator in re.findall(r"\n/\n(.*)", t["expr"]):
                assert re.match(r"\(sum by \(.* > 0\)", denominator), (panel["title"], denominator)


STRICT_SLO = """\
version: 1
service: chat
engines: [vllm]
objectives:
  - {name: snappy, sli: ttft, threshold: 500ms, target: 99.9%}
  - {name: smooth, sli: tpot, threshold: 50ms, target: 90%}
"""


def _tiles(board: dict) -> dict[str, dict]:
    return {p["title"]: p for p in board["panels"] if p.get("type") == "stat" and " within " in p["title"]}


def test_latency_tiles_show_the_installed_slos_thresholds(tmp_path):
    """Issue 29 §6: the tiles hard-coded 1 s and 100 ms whatever the pager used. The defaults still give those;
    a spec of one's own gives its bound (in the title and the bucket read) and its target (green from there)."""
    default = _tiles(BOARDS["serving-overview.json"])
    assert set(default) == {"TTFT within 1 s", "TPOT within 100 ms"}
    assert 'le=~"1|1[.]0"' in default["TTFT within 1 s"]["targets"][0]["expr"]
    assert [s["value"] for s in default["TTFT within 1 s"]["fieldConfig"]["defaults"]["thresholds"]["steps"]] == [
        None,
        0.98,
        0.99,
    ]
    spec = tmp_path / "chat.yaml"
    spec.write_text(STRICT_SLO)
    proc = subprocess.run(
        [sys.executable, "-m", "inferwatch", "dashboards", "build", "-o", str(tmp_path / "out"), "--slo", str(spec)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    board = json.loads((tmp_path / "out" / "serving-overview.json").read_text())
    tiles = _tiles(board)
    assert set(tiles) == {"TTFT within 500 ms", "TPOT within 50 ms"}
    assert 'le="0.5"' in tiles["TTFT within 500 ms"]["targets"][0]["expr"]
    assert 'le="0.05"' in tiles["TPOT within 50 ms"]["targets"][0]["expr"]
    assert [s["value"] for s in tiles["TTFT within 500 ms"]["fieldConfig"]["defaults"]["thresholds"]["steps"]] == [
        None,
        0.998,
        0.999,
    ]
    assert "chat.yaml, objective snappy" in tiles["TTFT within 500 ms"]["description"]
    assert jsonschema.Draft7Validator(_schema("dashboard")).is_valid(board)
    assert lint_dashboard(board, "serving-overview.json") == []
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nservice: chat\nobjectives: []\nwindw: 28d\n")
    proc = subprocess.run(
        [sys.executable, "-m", "inferwatch", "dashboards", "build", "-o", str(tmp_path / "o2"), "--slo", str(bad)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0 and "bad.yaml" in proc.stderr and "Traceback" not in proc.stderr
