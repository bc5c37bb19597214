"""Which pod a GPU process belongs to: PID -> /proc/PID/cgroup -> pod UID -> name and namespace.

The kubelet knows pods by UID. The pod list (a kubelet /pods answer or a saved
PodList file) names the pod, its namespace and, by container ID, its
container. Without one, the kubelet's own folder /var/lib/kubelet/pods/UID
still has the namespace (the service-account volume) and the pod's hostname
(etc-hosts). Last resort: HOSTNAME in the process environment, which
Kubernetes sets to the pod name. Every root is a parameter so tests use tmp dirs.
"""

from __future__ import annotations

import http.client
import json
import logging
import re
import time
import urllib.error
from dataclasses import dataclass, field
from pathlib import Path

from inferwatch.exporters.gpu._http import TooLarge, get_capped, one_line
from inferwatch.exporters.gpu._model import Workload

__all__ = ["PodResolver", "pod_of_cgroup", "index_pod_list", "POD_LIST_ERRORS"]

log = logging.getLogger("inferwatch.exporter.gpu")

# cgroup v1 `.../pod<uid>/<id>`; cgroup v2 systemd `...-pod<uid_with_underscores>.slice/cri-containerd-<id>.scope`
_POD = re.compile(r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})")
_CONTAINER = re.compile(r"(?:^|[/-])([0-9a-f]{64})(?:\.scope)?$")
_LIST_TTL = 30.0  # seconds a fetched pod list is trusted
# The most a kubelet /pods answer may be: a full node (110 pods with their specs) is a few MiB, so 64 MiB is
# generous, and a broken endpoint streaming without end cannot exhaust the exporter's memory.
MAX_POD_LIST_BYTES = 64 * 2**20
POD_LIST_TIMEOUT = 5.0  # seconds for the kubelet's whole answer
# Why the pod list could not be read: a bounded set, as it is a label value (the normalizing exporter's names
# for a failed fetch, exporters/_fetch.py ERROR_KINDS, and `file`).
POD_LIST_ERRORS = {
    "connect": "no connection to the kubelet, or no HTTP answer",
    "timeout": "no whole answer within POD_LIST_TIMEOUT",
    "http": "an HTTP status other than 2xx (401, 403: may the exporter's service account read nodes/proxy?)",
    "too_large": "the answer is over MAX_POD_LIST_BYTES",
    "parse": "not JSON, or not a PodList",
    "file": "the --pod-list file cannot be read",
}


def pod_of_cgroup(text: str) -> tuple[str, str] | None:
    """(pod UID, container ID or '') from the text of /proc/PID/cgroup; None outside Kubernetes."""
    for line in text.splitlines():
        path = line.rpartition(":")[2]
        match = _POD.search(path)
        if match:
            container = _CONTAINER.search(path)
            return match.group(1).replace("_", "-"), container.group(1) if container else ""
    return None


def index_pod_list(doc: dict) -> dict[str, tuple[str, str, dict[str, str]]]:
    """uid -> (namespace, name, {container ID: container name}) from a PodList document."""
    index = {}
    for pod in doc.get("items") or ():
        meta = pod.get("metadata") or {}
        status = pod.get("status") or {}
        containers = {}
        for key in ("containerStatuses", "initContainerStatuses"):
            for cs in status.get(key) or ():
                cid = (cs.get("containerID") or "").rpartition("://")[2]
                if cid:
                    containers[cid] = cs.get("name", "")
        if meta.get("uid"):
            index[meta["uid"]] = (meta.get("namespace", ""), meta.get("name", ""), containers)
    return index


def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None


@dataclass
class PodResolver:
    """Resolves PIDs to workloads; `pod_list` is a file path or an http(s) URL of a PodList (optional)."""

    proc_root: Path = Path("/proc")
    kubelet_pods_dir: Path = Path("/var/lib/kubelet/pods")
    pod_list: str | None = None
    errors: dict[str, int] = field(default_factory=dict)  # failed reads of the pod list by POD_LIST_ERRORS kind
    _index: dict | None = None
    _fetched: float = float("-inf")
    _last_problem: str | None = None  # the kind last said: said again only when it changes

    def workload(self, pid: int) -> Workload | None:
        cgroup = _read(self.proc_root / str(pid) / "cgroup")
        found = pod_of_cgroup(cgroup) if cgroup else None
        if found is not None:
            uid, container = found
            workload = self._from_list(uid, container) or self._from_kubelet_dir(uid)
            if workload is not None:
                return workload
        hostname = self._environ(pid).get("HOSTNAME", "")
        return Workload(pod=hostname) if hostname else None

    def workloads(self, pids) -> tuple[Workload, ...]:
        """The distinct workloads of these PIDs, sorted."""
        return tuple(sorted({w for w in map(self.workload, pids) if w is not None}))

    # -- sources, best first ------------------------------------------------------------------------------

    def _from_list(self, uid: str, container_id: str) -> Workload | None:
        index = self._pods()
        if uid not in index:
            return None
        namespace, name, containers = index[uid]
        return Workload(namespace, name, containers.get(container_id, ""))

    def _pods(self) -> dict:
        if self.pod_list is None:
            return {}
        now = time.monotonic()
        if self._index is None or now - self._fetched > _LIST_TTL:
            self._fetched = now
            try:
                self._index = index_pod_list(self._load_list(self.pod_list))
                self._last_problem = None
            # a kubelet can answer anything: JSON of another shape (TypeError), nested without end (RecursionError),
            # or no HTTP at all (HTTPException); none of it may cost more than the pod names
            except (OSError, ValueError, AttributeError, TypeError, RecursionError, http.client.HTTPException) as err:
                kind = self._kind(err)
                self.errors[kind] = self.errors.get(kind, 0) + 1
                problem = f"pod list {self.pod_list}: {kind}: {type(err).__name__}: {one_line(err)}"
                # once per kind: the detail of one kind varies (a connect or a read timing out on a busy node)
                if kind != self._last_problem:
                    log.warning("%s; falling back to %s", problem, self.kubelet_pods_dir)
                self._last_problem = kind
                self._index = self._index or {}
        return self._index

    def _is_url(self) -> bool:
        return (self.pod_list or "").startswith(("http://", "https://"))

    def _load_list(self, pod_list: str) -> dict:
        if self._is_url():
            return json.loads(get_capped(pod_list, POD_LIST_TIMEOUT, MAX_POD_LIST_BYTES))
        return json.loads(Path(pod_list).read_text())

    def _kind(self, err: BaseException) -> str:
        """The POD_LIST_ERRORS kind of a failed read."""
        if isinstance(err, TooLarge):
            return "too_large"
        if isinstance(err, urllib.error.HTTPError):
            return "http"
        if isinstance(err, TimeoutError) or isinstance(getattr(err, "reason", None), TimeoutError):
            return "timeout"
        if isinstance(err, (OSError, http.client.HTTPException)):
            return "connect" if self._is_url() else "file"
        return "parse"

    def _from_kubelet_dir(self, uid: str) -> Workload | None:
        pod_dir = self.kubelet_pods_dir / uid
        if not pod_dir.is_dir():
            return None
        namespace = ""
        for path in sorted(pod_dir.glob("volumes/kubernetes.io~projected/*/namespace")) + sorted(
            pod_dir.glob("volumes/kubernetes.io~secret/*/namespace")
        ):
            namespace = (_read(path) or "").strip()
            if namespace:
                break
        name = ""
        for line in reversed((_read(pod_dir / "etc-hosts") or "").splitlines()):
            parts = line.split()
            if parts and not line.startswith("#") and len(parts) >= 2:
                name = parts[-1].split(".")[0]  # the pod's hostname: its name unless spec.hostname
                break
        containers = sorted(p.name for p in (pod_dir / "containers").glob("*") if p.is_dir())
        return Workload(namespace, name, containers[0] if len(containers) == 1 else "")

    def _environ(self, pid: int) -> dict[str, str]:
        try:
            raw = (self.proc_root / str(pid) / "environ").read_bytes()
        except OSError:
            return {}
        pairs = (item.partition(b"=") for item in raw.split(b"\0") if b"=" in item)
        return {k.decode(errors="replace"): v.decode(errors="replace") for k, _, v in pairs}
