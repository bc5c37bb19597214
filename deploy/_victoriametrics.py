"""What a VictoriaMetrics backend needs beside the rules Prometheus runs: the flags of victoria-metrics, vmagent and
vmalert, as data, each with why (slo/README.md, "On VictoriaMetrics", measured the ones that move alerts).

Both renders read these tables: compose passes them on the command line, the VM operator's VMAlert as `extraArgs`;
tests/test_deploy_vm.py starts the real binaries with them.
"""

from __future__ import annotations

from inferwatch.deploy._compose import EVALUATION_INTERVAL

__all__ = [
    "VERSION",
    "IMAGES",
    "STORE_FLAGS",
    "VMALERT_EXTRA_ARGS",
    "vmagent_flags",
    "vmalert_flags",
    "STORE_PORT",
    "VMAGENT_PORT",
    "VMALERT_PORT",
]

# The release the tests run (Debian's victoria-metrics package: victoria-metrics, vmagent and vmalert 1.79.5, an LTS
# line); compose pins its images to it, so what runs is what was checked.
VERSION = "v1.79.5"
IMAGES = {
    "victoria-metrics": f"victoriametrics/victoria-metrics:{VERSION}",
    "vmagent": f"victoriametrics/vmagent:{VERSION}",
    "vmalert": f"victoriametrics/vmalert:{VERSION}",
}
STORE_PORT, VMAGENT_PORT, VMALERT_PORT = 8428, 8429, 8880  # each binary's default -httpListenAddr

# victoria-metrics (the store), beyond where it keeps data
STORE_FLAGS = (
    # every query of a recent time runs 30 s in the past by default: each rule would read data 30 s old
    "-search.latencyOffset=1s",
    "-retentionPeriod=7d",  # the Prometheus render's retention
)

# vmalert's flags that change what a rule sees (name: value, as the VM operator's VMAlert `extraArgs` takes them)
VMALERT_EXTRA_ARGS = {
    # default true: truncates each query's time to a multiple of the group's interval, so the 1m group read data
    # up to a minute old and the 10-minute long-window group up to ten
    "datasource.queryTimeAlignment": "false",
}


def vmalert_flags(
    rules: list[str],
    store: str,
    alertmanager: str,
    labels: dict[str, str] | None = None,
    evaluation_interval: str = EVALUATION_INTERVAL,
) -> list[str]:
    """vmalert's command line. `store`: the VictoriaMetrics base URL it reads from, stores its records and alert
    state in (-remoteWrite.url is required: without it no record is stored and no SLO alert can fire) and restores
    pending alerts from after a restart (-remoteRead.url). `evaluation_interval`: for the groups without an interval
    of their own (mappings, caps, operational alerts), Prometheus' evaluation_interval in the Prometheus render;
    vmalert's default, 1m, would record the mapped series once a minute, and a rate over a minute of them would
    read one sample. -datasource.queryStep stays at its default 5m: MetricsQL's instant lookback follows it, as
    PromQL's 5m does."""
    return [
        *(f"-rule={r}" for r in rules),
        f"-evaluationInterval={evaluation_interval}",
        f"-datasource.url={store}",
        *(f"-{k}={v}" for k, v in VMALERT_EXTRA_ARGS.items()),
        f"-remoteWrite.url={store}",
        f"-remoteRead.url={store}",
        f"-notifier.url={alertmanager}",
        *(f"-external.label={k}={v}" for k, v in sorted((labels or {}).items())),
    ]


def vmagent_flags(
    config_file: str, remote_writes: list[str], tmp_data: str, labels: dict[str, str] | None = None
) -> list[str]:
    """vmagent's command line: scrape what `config_file` says (a Prometheus `scrape_configs` file it reads strictly:
    no rule_files or alerting, which it refuses) and write every sample to each URL, with `labels` added (the
    `cluster` a central store tells clusters apart by)."""
    return [
        f"-promscrape.config={config_file}",
        *(f"-remoteWrite.url={u}" for u in remote_writes),
        f"-remoteWrite.tmpDataPath={tmp_data}",
        *(f"-remoteWrite.label={k}={v}" for k, v in sorted((labels or {}).items())),
    ]
