"""Compose for a laptop: Prometheus, Alertmanager and Grafana provisioned with our rules and dashboards, the
front door, and the engines (stand-ins from `inferwatch simulate`, or real ones by URL). One `docker compose up`.

`render_compose(config, inputs)` is pure: {path: text}. Rule files resolve relative to prometheus.yml, so
`promtool check config prometheus/prometheus.yml` works on the rendered folder as it is. `backend:
victoriametrics` puts victoria-metrics, vmagent and vmalert in Prometheus' place (_compose_vm.py).
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit

from inferwatch import __version__
from inferwatch.deploy._alertmanager import alertmanager_config
from inferwatch.deploy._config import DEFAULT_IMAGE, Config, Engine
from inferwatch.deploy._inputs import DEPLOY_DIR, Inputs
from inferwatch.deploy._workloads import UID, dump
from inferwatch.errors import InferwatchError

__all__ = [
    "render_compose",
    "sim_models",
    "for_folder",
    "services",
    "shared_files",
    "scrape_configs",
    "build_note",
    "hardened",
    "IMAGES",
    "SIM_MODELS",
    "CLONE_ROOT",
    "BANNER",
    "EVALUATION_INTERVAL",
]

# Pinned; README.md's deploy section names them.
IMAGES = {
    "prometheus": "prom/prometheus:v2.53.2",
    "alertmanager": "prom/alertmanager:v0.27.0",
    "grafana": "grafana/grafana:11.2.2",
}
# the stock images already run as their own non-root users (nobody, grafana); ours gets an explicit one
_HARDENED = {
    "read_only": True,
    "cap_drop": ["ALL"],
    "security_opt": ["no-new-privileges:true"],
    "tmpfs": ["/tmp"],
    "restart": "unless-stopped",
}


# the model a stand-in engine serves when the config names no cap for it: one name per engine, so the per-model
# views (dashboards, SLOs, triage) keep them apart
SIM_MODELS = {"vllm": "llama-3-8b", "sglang": "qwen3-8b"}
# how often rule groups without an interval of their own run (the mappings', the caps', the operational alerts'):
# as often as the engines are scraped by default, so a rate over a record reads as many samples as over the series
EVALUATION_INTERVAL = "15s"
CLONE_ROOT = "../.."  # the clone's root seen from deploy/compose/, where the default render is checked in


def _sim_port(engine: Engine) -> int:
    return engine.port_number


def sim_models(config: Config) -> dict[str, str]:
    """{engine name: the model its stand-in serves}: the first model it has a cap for, else SIM_MODELS' name for
    its kind; a name two engines would share gets the engine's name after it."""
    wanted = {
        e.name: (e.max_running_requests[0][0] if e.max_running_requests else SIM_MODELS[e.engine])
        for e in config.engines
    }
    taken = list(wanted.values())
    return {name: model if taken.count(model) == 1 else f"{model}-{name}" for name, model in wanted.items()}


def _image(config: Config) -> dict:
    """Our image: built from the clone's Dockerfile (and tagged locally) unless the config names a pushed one;
    with both, built and tagged as that name."""
    if config.image != DEFAULT_IMAGE and not config.compose.build:
        return {"image": config.image}
    image = config.image if config.image != DEFAULT_IMAGE else f"inferwatch:{__version__}"
    return {"image": image, "build": {"context": config.compose.build or CLONE_ROOT}}


def _targets(config: Config, engine: Engine) -> list[str]:
    if config.compose.simulate:
        return [f"{engine.name}:{_sim_port(engine)}"]
    return [urlsplit(url).netloc for url in engine.urls]


def scrape_configs(config: Config, inputs: Inputs) -> list[dict]:
    if config.scrape_mode != "relabel":  # compose has no pods: one exporter serves
        jobs = [
            {
                "job_name": "inferwatch-exporter",
                "honor_labels": True,
                "static_configs": [{"targets": ["exporter:9400"]}],
            }
        ]
    else:
        # honor_labels: a stand-in engine's simulated GPUs carry the pod that uses them, as dcgm-exporter does
        jobs = [
            {
                "job_name": engine.name,
                "metrics_path": engine.path,
                "honor_labels": True,
                "static_configs": [{"targets": _targets(config, engine)}],
                "metric_relabel_configs": inputs.relabel_configs[engine.engine],
            }
            for engine in config.engines
        ]
    if config.frontdoor.enabled:
        jobs.append({"job_name": "frontdoor", "static_configs": [{"targets": ["frontdoor:9403"]}]})  # admin listener
    return jobs


def _prometheus(config: Config, inputs: Inputs) -> dict:
    return {
        "global": {
            "scrape_interval": config.scrape_interval,
            "evaluation_interval": EVALUATION_INTERVAL,
            **({"external_labels": {"cluster": config.cluster.name}} if config.cluster.name else {}),
        },
        **({"remote_write": [{"url": config.cluster.remote_write_url}]} if config.cluster.remote_write_url else {}),
        "rule_files": ["rules/*.yaml"],
        "alerting": {"alertmanagers": [{"static_configs": [{"targets": ["alertmanager:9093"]}]}]},
        "scrape_configs": scrape_configs(config, inputs),
    }


def hardened(image: str, command: list[str], ports: list[str], **extra) -> dict:
    return {"image": image, "command": command, "ports": ports, **_HARDENED, **extra}


def _ours(config: Config, command: list[str], ports: list[str]) -> dict:
    return {
        **_image(config),
        "command": command,
        "ports": ports,
        **_HARDENED,
        "user": f"{UID}:{UID}",
        "entrypoint": ["inferwatch"],
    }


def _prometheus_service() -> dict:
    return hardened(
        IMAGES["prometheus"],
        [
            "--config.file=/etc/prometheus/prometheus.yml",
            "--storage.tsdb.path=/prometheus",
            "--storage.tsdb.retention.time=7d",
        ],
        ["127.0.0.1:9090:9090"],
        volumes=["./prometheus:/etc/prometheus:ro", "prometheus-data:/prometheus"],
    )


def services(config: Config, store: dict[str, dict]) -> dict:
    """Every service: `store` (the backend's: Prometheus, or VictoriaMetrics with vmagent and vmalert) first, then
    Alertmanager, Grafana and inferwatch's own (stand-in engines, the exporter, the front door)."""
    services = {
        **store,
        "alertmanager": hardened(
            IMAGES["alertmanager"],
            ["--config.file=/etc/alertmanager/alertmanager.yml", "--storage.path=/alertmanager"],
            ["127.0.0.1:9093:9093"],
            volumes=["./alertmanager:/etc/alertmanager:ro", "alertmanager-data:/alertmanager"],
        ),
        "grafana": {
            **hardened(
                IMAGES["grafana"],
                [],
                ["127.0.0.1:3000:3000"],
                volumes=[
                    "./grafana/provisioning:/etc/grafana/provisioning:ro",
                    "./grafana/dashboards:/var/lib/grafana/dashboards:ro",
                    "grafana-data:/var/lib/grafana",
                ],
                environment={"GF_AUTH_ANONYMOUS_ENABLED": "true", "GF_AUTH_ANONYMOUS_ORG_ROLE": "Viewer"},
            )
        },
    }
    del services["grafana"]["command"]
    if config.compose.simulate:
        models = sim_models(config)
        for engine in config.engines:
            cap = [f"--max-num-seqs={c}" for m, c in engine.max_running_requests if m == models[engine.name]]
            services[engine.name] = _ours(
                config,
                [
                    "simulate",
                    "--engine",
                    engine.engine,
                    "--model",
                    models[engine.name],
                    *cap,
                    "--listen",
                    f"0.0.0.0:{_sim_port(engine)}",
                    "--gpus",
                    "1",
                ],
                [f"127.0.0.1:{_sim_port(engine)}:{_sim_port(engine)}"],
            )
    if config.scrape_mode != "relabel":  # compose has no pods: one exporter serves
        targets = [
            f"--target={e.name}-{i}=http://{t}{e.path}"
            for e in config.engines
            for i, t in enumerate(_targets(config, e))
        ]
        caps = [f"--max-running-requests={m}={c}" for e in config.engines for m, c in e.max_running_requests]
        services["exporter"] = _ours(config, ["exporter", "normalize", "--listen", "0.0.0.0:9400", *targets, *caps], [])
    if config.frontdoor.enabled:
        first = config.engines[0]
        upstream = f"http://{first.name}:{_sim_port(first)}" if config.compose.simulate else config.frontdoor.upstream
        services["frontdoor"] = _ours(
            config,
            ["frontdoor", "--upstream", upstream, "--listen", "0.0.0.0:8080", "--metrics-listen", "0.0.0.0:9403"],
            ["127.0.0.1:8080:8080"],
        )
    return services


def for_folder(config: Config, out: Path) -> Config:
    """The config as rendered into `out`: where it builds our image from, the clone this inferwatch runs from
    (relative to `out`), unless it names a pushed image or a build folder of its own."""
    if config.image != DEFAULT_IMAGE or config.compose.build:
        return config
    root = DEPLOY_DIR.parent
    if not (root / "Dockerfile").is_file():
        raise InferwatchError(
            f"{config.file}: image: the default {DEFAULT_IMAGE} is not published and this "
            "inferwatch is no clone to build it from: build and push it from a clone "
            "(deploy/README.md) and name it in `image:`, or set compose.build to a clone"
        )
    return replace(config, compose=replace(config.compose, build=os.path.relpath(root, Path(out).resolve())))


def build_note(config: Config) -> str:
    built = _image(config)
    if "build" not in built:
        return ""
    return (
        f"# inferwatch's image is built from the Dockerfile in {built['build']['context']} (tagged "
        f"{built['image']}); after updating the clone: docker compose up --build. To run a pushed image "
        "instead, set `image:` in deploy.yaml.\n"
    )


BANNER = "# Generated by `inferwatch deploy render --target compose` from {source}; do not edit by hand.\n"


def shared_files(config: Config, inputs: Inputs, banner: str, datasource: tuple[str, str]) -> dict[str, str]:
    """Alertmanager's config, Grafana's provisioning (one data source: (name, URL)) and the dashboards: the same
    for every backend."""
    name, url = datasource
    files = {
        "alertmanager/alertmanager.yml": banner + dump(alertmanager_config(config, inputs.inhibit_rules, inputs.rules)),
        # uid `prometheus` on every backend: the dashboards' $datasource variable picks any data source of the
        # Prometheus type, and links saved against this uid keep working after a switch
        "grafana/provisioning/datasources/inferwatch.yaml": banner
        + dump(
            {
                "apiVersion": 1,
                "datasources": [
                    {
                        "name": name,
                        "type": "prometheus",
                        "uid": "prometheus",
                        "access": "proxy",
                        "url": url,
                        "isDefault": True,
                        "jsonData": {"timeInterval": config.scrape_interval},
                    },
                ],
            }
        ),
        "grafana/provisioning/dashboards/inferwatch.yaml": banner
        + dump(
            {
                "apiVersion": 1,
                "providers": [
                    {
                        "name": "inferwatch",
                        "folder": config.grafana_folder,
                        "type": "file",
                        "disableDeletion": True,
                        "options": {"path": "/var/lib/grafana/dashboards"},
                    }
                ],
            }
        ),
    }
    for name, text in inputs.dashboards.items():
        files[f"grafana/dashboards/{name}"] = text
    return files


def render_compose(config: Config, inputs: Inputs, source: str = "the embedded defaults") -> dict[str, str]:
    """{path: text}: compose.yaml and the files it mounts."""
    if config.backend == "victoriametrics":
        from inferwatch.deploy._compose_vm import render_compose_vm

        return render_compose_vm(config, inputs, source)
    banner = BANNER.format(source=source)
    files = {
        "compose.yaml": banner
        + "# docker compose up; Grafana on http://localhost:3000, Prometheus on :9090.\n"
        + build_note(config)
        + dump(
            {
                "name": "inferwatch",
                "services": services(config, {"prometheus": _prometheus_service()}),
                "volumes": {"prometheus-data": {}, "alertmanager-data": {}, "grafana-data": {}},
            }
        ),
        "prometheus/prometheus.yml": banner + dump(_prometheus(config, inputs)),
        **shared_files(config, inputs, banner, ("Prometheus", "http://prometheus:9090")),
    }
    for rules in inputs.rules:
        files[f"prometheus/rules/{rules.name}.yaml"] = banner + dump({"groups": list(rules.groups)})
    return dict(sorted(files.items()))
