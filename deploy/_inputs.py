"""What a deployment carries, gathered once from the library, so the renderers stay pure functions of data.

The renderers never compile or read files: they take an `Inputs` (relabelings per
source, rule groups, inhibit rules, dashboard JSON, the DCGM counters file).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from importlib.resources import files
from pathlib import Path

import yaml

from inferwatch.deploy._config import Config
from inferwatch.errors import InferwatchError, SpecError, collect
from inferwatch.resources import data_path

__all__ = ["Inputs", "RuleGroups", "gather_inputs", "DEPLOY_DIR"]

DEPLOY_DIR = data_path("inferwatch.deploy")  # a clone's deploy/ (the Dockerfile is one up), or the installed package


@dataclass(frozen=True)
class RuleGroups:
    """One PrometheusRule's worth: a name (no `_`, a Kubernetes name) and its rule groups."""

    name: str
    component: str
    groups: tuple[dict, ...]


@dataclass(frozen=True)
class Inputs:
    relabelings: dict  # source (vllm, sglang, dcgm) -> metricRelabelings
    relabel_configs: dict  # source -> metric_relabel_configs (plain Prometheus, for compose)
    rules: tuple[RuleGroups, ...]
    inhibit_rules: tuple[dict, ...]
    dashboards: dict  # file name -> Grafana JSON text
    dcgm_counters: str


def _caps_group(config: Config) -> tuple[dict, ...]:
    """llm_max_running_requests as recording rules: no engine exports the cap, and the relabel path runs no
    exporter to serve it."""
    rules = [
        {"record": "llm_max_running_requests", "expr": f"vector({cap})", "labels": {"model": model}}
        for engine in config.engines
        for model, cap in engine.max_running_requests
    ]
    return ({"name": "inferwatch-caps", "rules": rules},) if rules and config.scrape_mode == "relabel" else ()


def _slo_specs(config: Config) -> list[Path]:
    if not config.slo_specs:
        embedded = ["defaults.yaml"] + (["defaults-frontdoor.yaml"] if config.frontdoor.enabled else [])
        return [data_path("inferwatch.slo", name) for name in embedded]
    base = Path(config.file).parent if not config.file.startswith("<") else Path.cwd()
    return [base / spec for spec in config.slo_specs]


def gather_inputs(config: Config, dashboards: dict[str, str] | None = None) -> Inputs:
    """Compile the config's SLO specs and collect the rest; `dashboards` defaults to the checked-in JSON (which
    `inferwatch build --check` keeps equal to what the dashboard sources generate), built anew with the config's
    own SLO specs when it names some, so the overview's latency tiles show their thresholds."""
    from inferwatch.autoscale import compile_autoscaling, load_knobs
    from inferwatch.mappings import (
        load_mappings,
        recording_rules,
        relabel_configs,
        select_source,
        servicemonitor_relabelings,
    )
    from inferwatch.slo import compile_spec, load_spec

    mappings = load_mappings()
    sources = ("vllm", "sglang", "dcgm")
    loaded, problems = collect(load_spec, _slo_specs(config))
    if problems:
        raise SpecError(problems)
    specs = [spec for _, spec in loaded]
    if config.cluster.remote_write_url:  # rules run once, centrally, over every cluster: one SLO per cluster
        specs = [replace(spec, group_by=tuple(dict.fromkeys((*spec.group_by, "cluster")))) for spec in specs]
    rulesets = [compile_spec(spec) for spec in specs]
    rules = [
        RuleGroups(f"inferwatch-slo-{rs.spec.service.replace('_', '-')}", "slo", tuple(rs.groups)) for rs in rulesets
    ]
    rules.append(RuleGroups("inferwatch-mappings", "mappings", tuple(recording_rules(mappings)["groups"])))
    operational = yaml.safe_load(files("inferwatch.alerts").joinpath("operational.rules.yaml").read_text("utf-8"))
    rules.append(RuleGroups("inferwatch-operational", "alerts", tuple(operational["groups"])))
    if _caps_group(config):
        rules.append(RuleGroups("inferwatch-caps", "caps", _caps_group(config)))
    rules.append(
        RuleGroups(
            "inferwatch-autoscaling",
            "autoscaling",
            tuple(
                compile_autoscaling(next((s for s in specs if s.source == "engine"), specs[0]), load_knobs())["groups"]
            ),
        )
    )
    if dashboards is None and config.slo_specs:  # the tiles show the thresholds the pager uses
        from inferwatch.dashboards import build

        dashboards = build(specs=specs)
    if dashboards is None:
        folder = files("inferwatch.dashboards")
        dashboards = {
            p.name: p.read_text(encoding="utf-8")
            for p in sorted(folder.iterdir(), key=lambda p: p.name)
            if p.name.endswith(".json")
        }
    if not dashboards:
        raise InferwatchError("no dashboard JSON found next to inferwatch.dashboards; run `inferwatch build`")
    return Inputs(
        relabelings={s: servicemonitor_relabelings([select_source(mappings, s)]) for s in sources},
        relabel_configs={s: relabel_configs([select_source(mappings, s)]) for s in sources},
        rules=tuple(rules),
        inhibit_rules=tuple(r for rs in rulesets for r in rs.inhibit_rules),
        dashboards=dict(dashboards),
        dcgm_counters=files("inferwatch.deploy").joinpath("dcgm", "counters.csv").read_text(encoding="utf-8"),
    )
