"""Hardened pods: every inferwatch container runs non-root on a read-only root filesystem, with resources,
probes and no capabilities; the exceptions (the NVML exporter's hostPID, and its UID 0 for the kubelet's root-owned
PodResources socket, still without capabilities) say why where they are set."""

from __future__ import annotations

import json

from inferwatch.yamlio import dump_yaml

__all__ = ["dump", "labels", "container", "pod_spec", "deployment", "service", "UID"]

UID = 65532  # the distroless "nonroot" user; any non-zero id works


def dump(data) -> str:
    """YAML without anchors: objects shared between manifests are written out in full each time."""
    return dump_yaml(json.loads(json.dumps(data)))


def labels(component: str) -> dict:
    return {
        "app.kubernetes.io/name": "inferwatch",
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/managed-by": "inferwatch",
    }


def _selector(component: str) -> dict:
    return {"app.kubernetes.io/name": "inferwatch", "app.kubernetes.io/component": component}


def container(
    name: str,
    image: str,
    args: list[str],
    port: int,
    probe_path: str,
    *,
    cpu: str = "50m",
    memory: str = "128Mi",
    memory_limit: str = "256Mi",
    env: list | None = None,
    mounts: list | None = None,
    port_name: str = "http",
    tmp_volume: str = "tmp",
) -> dict:
    probe = {"httpGet": {"path": probe_path, "port": port_name}, "periodSeconds": 10, "timeoutSeconds": 5}
    out: dict[str, object] = {
        "name": name,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["inferwatch"],
        "args": args,
        "ports": [{"name": port_name, "containerPort": port, "protocol": "TCP"}],
    }
    if env:
        out["env"] = env
    out.update(
        {
            "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": {"memory": memory_limit}},
            "livenessProbe": {**probe, "failureThreshold": 6},
            "readinessProbe": {**probe, "failureThreshold": 2},
            "securityContext": {
                "allowPrivilegeEscalation": False,
                "readOnlyRootFilesystem": True,
                "runAsNonRoot": True,
                "runAsUser": UID,
                "capabilities": {"drop": ["ALL"]},
            },
            "volumeMounts": [{"name": tmp_volume, "mountPath": "/tmp"}] + (mounts or []),
        }
    )
    return out


def pod_spec(containers: list[dict], volumes: list | None = None, **extra) -> dict:
    return {
        **extra,
        "automountServiceAccountToken": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": UID,
            "runAsGroup": UID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": containers,
        "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}] + (volumes or []),
    }


def deployment(
    name: str, namespace: str, component: str, replicas: int, spec: dict, annotations: dict | None = None
) -> dict:
    template_meta = {"labels": labels(component)}
    if annotations:
        template_meta["annotations"] = annotations
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels(component)},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": _selector(component)},
            "template": {"metadata": template_meta, "spec": spec},
        },
    }


def service(name: str, namespace: str, component: str, port: int) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "labels": labels(component)},
        "spec": {
            "selector": _selector(component),
            "ports": [{"name": "http", "port": port, "targetPort": "http", "protocol": "TCP"}],
        },
    }
