"""Compose with VictoriaMetrics (`backend: victoriametrics`): vmagent scrapes, victoria-metrics stores, vmalert runs
the same rule files Prometheus would and notifies the same Alertmanager; Grafana reads victoria-metrics.

`render_compose_vm(config, inputs)` is pure: {path: text}. vmagent gets a scrape file it reads strictly as it is
(`vmagent -dryRun -promscrape.config=vmagent/scrape.yml` passes): only `global.scrape_interval` and `scrape_configs`,
never Prometheus' rule_files or alerting, so no -promscrape.config.strictParse=false hides a typo.
"""

from __future__ import annotations

from inferwatch.deploy._compose import BANNER, build_note, hardened, scrape_configs, services, shared_files
from inferwatch.deploy._config import Config
from inferwatch.deploy._inputs import Inputs
from inferwatch.deploy._victoriametrics import (
    IMAGES,
    STORE_FLAGS,
    STORE_PORT,
    VMAGENT_PORT,
    VMALERT_PORT,
    vmagent_flags,
    vmalert_flags,
)
from inferwatch.deploy._workloads import dump

__all__ = ["render_compose_vm"]

_STORE = f"http://victoria-metrics:{STORE_PORT}"


def _cluster(config: Config) -> dict[str, str]:
    return {"cluster": config.cluster.name} if config.cluster.name else {}


def _store_services(config: Config) -> dict[str, dict]:
    """victoria-metrics, vmagent and vmalert. With `cluster`, vmagent also writes every sample to the central store,
    labelled with the cluster (the local store gets the label too, so local and central read alike); the rules
    still run here, as in the Prometheus render."""
    writes = [f"{_STORE}/api/v1/write"] + ([config.cluster.remote_write_url] if config.cluster.remote_write_url else [])
    return {
        "victoria-metrics": hardened(
            IMAGES["victoria-metrics"],
            ["-storageDataPath=/storage", *STORE_FLAGS],
            [f"127.0.0.1:{STORE_PORT}:{STORE_PORT}"],
            volumes=["vm-data:/storage"],
        ),
        "vmagent": hardened(
            IMAGES["vmagent"],
            vmagent_flags("/etc/vmagent/scrape.yml", writes, "/vmagent-data", _cluster(config)),
            [f"127.0.0.1:{VMAGENT_PORT}:{VMAGENT_PORT}"],
            volumes=["./vmagent:/etc/vmagent:ro", "vmagent-data:/vmagent-data"],
        ),
        "vmalert": hardened(
            IMAGES["vmalert"],
            vmalert_flags(["/etc/vmalert/rules/*.yaml"], _STORE, "http://alertmanager:9093", _cluster(config)),
            [f"127.0.0.1:{VMALERT_PORT}:{VMALERT_PORT}"],
            volumes=["./vmalert:/etc/vmalert:ro"],
        ),
    }


def render_compose_vm(config: Config, inputs: Inputs, source: str = "the embedded defaults") -> dict[str, str]:
    """{path: text}: compose.yaml and the files it mounts."""
    banner = BANNER.format(source=source)
    files = {
        "compose.yaml": banner + "# docker compose up; Grafana on http://localhost:3000, VictoriaMetrics on :8428, "
        "vmalert on :8880.\n"
        + build_note(config)
        + dump(
            {
                "name": "inferwatch",
                "services": services(config, _store_services(config)),
                "volumes": {"vm-data": {}, "vmagent-data": {}, "alertmanager-data": {}, "grafana-data": {}},
            }
        ),
        "vmagent/scrape.yml": banner
        + dump(
            {"global": {"scrape_interval": config.scrape_interval}, "scrape_configs": scrape_configs(config, inputs)}
        ),
        **shared_files(config, inputs, banner, ("VictoriaMetrics", _STORE)),
    }
    for rules in inputs.rules:
        files[f"vmalert/rules/{rules.name}.yaml"] = banner + dump({"groups": list(rules.groups)})
    return dict(sorted(files.items()))
