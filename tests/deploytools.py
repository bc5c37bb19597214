"""Offline validation of rendered manifests: core kinds against Kubernetes' OpenAPI schemas (kubernetes-validate),
monitoring.coreos.com kinds against the prometheus-operator CRDs and operator.victoriametrics.com kinds against the
VictoriaMetrics operator's, vendored under tests/fixtures/k8s/, strictly (an unknown field is an error, as
`kubectl apply --validate=strict` makes it)."""

from __future__ import annotations

import functools
import gzip
import subprocess
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import jsonschema
import kubernetes_validate
import yaml
from conftest import FIXTURES

from inferwatch.sim._demo import free_port

CRDS = FIXTURES / "k8s" / "prometheus-operator-crd"
VM_CRDS = FIXTURES / "k8s" / "victoriametrics-operator-crd"
_CRD_GROUPS = ("monitoring.coreos.com/", "operator.victoriametrics.com/")
KUBERNETES_VERSION = "1.33"


class _CrdLoader(yaml.SafeLoader):
    """PyYAML reads a bare `=` (an enum value of AlertmanagerConfig's matchType) as YAML 1.1's value tag."""


_CrdLoader.add_constructor("tag:yaml.org,2002:value", lambda loader, node: loader.construct_scalar(node))


def _strict(schema):
    """Unknown fields refused wherever the CRD lists properties and does not keep unknown fields."""
    if isinstance(schema, dict):
        schema = {k: _strict(v) for k, v in schema.items()}
        if (
            "properties" in schema
            and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")
        ):
            schema["additionalProperties"] = False
        return schema
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


@functools.cache
def crd_schemas() -> dict:
    """{(apiVersion, kind): strict JSON schema} from the vendored CRDs."""
    out = {}
    for path in sorted([*CRDS.glob("*.yaml*"), *VM_CRDS.glob("*.yaml*")]):
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        crd = yaml.load(raw, Loader=_CrdLoader)  # noqa: S506 - a SafeLoader subclass
        for version in crd["spec"]["versions"]:
            schema = version["schema"]["openAPIV3Schema"]
            out[(f"{crd['spec']['group']}/{version['name']}", crd["spec"]["names"]["kind"])] = _strict(schema)
    return out


def validate_manifest(doc: dict) -> list[str]:
    """Problems of one Kubernetes object; empty when valid."""
    key = (doc.get("apiVersion"), doc.get("kind"))
    if str(key[0]).startswith(_CRD_GROUPS):
        schema = crd_schemas().get(key)
        if schema is None:
            return [f"{key}: no vendored CRD"]
        return [
            f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
            for e in jsonschema.Draft7Validator(schema).iter_errors(doc)
        ]
    try:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as err:
        return [f"{'.'.join(map(str, err.path))}: {err.message}"]
    return []


def wait_ready(url: str, proc, log: Path, timeout: float = 20) -> None:
    deadline = time.time() + timeout
    while True:
        try:
            urllib.request.urlopen(url, timeout=1)
            return
        except OSError:
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(log.read_text()[-3000:]) from None
            time.sleep(0.2)


@contextmanager
def alertmanager(binary: str, config: Path, workdir: Path):
    """A real Alertmanager on loopback, clustering off; yields its base URL."""
    port = free_port()
    log_path = workdir / "alertmanager.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.path={workdir / 'am-data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--cluster.listen-address=",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            wait_ready(base + "/-/ready", proc, log_path)
            yield base
        finally:
            proc.terminate()
            proc.wait(10)
