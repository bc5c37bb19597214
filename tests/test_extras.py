"""Optional extras: each role's command, run without its extra, stops with one line that names it (no traceback),
the commands of the core install need none, and inferwatch/extras.py's table agrees with pyproject.toml.

The fast tests hide modules with a meta path finder in a subprocess, as if they were not installed; the slow one
installs the core and the exporter extra alone into a fresh venv, as a deployment would, and runs the exporter."""

from __future__ import annotations

import http.server
import os
import re
import subprocess
import sys
import threading
import time
import tomllib
import urllib.request
from importlib import metadata

import pytest
from conftest import REAL_CAPTURES, ROOT

from inferwatch.cli import app
from inferwatch.extras import EXTRAS, ROLES

# run `inferwatch ARGS...` with the modules named in argv[1] (comma-separated) not installed
HIDDEN = """
import importlib.abc, sys
hidden = set(sys.argv[1].split(","))

class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name in hidden or name.split(".")[0] in hidden:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NotInstalled())
sys.argv = ["inferwatch", *sys.argv[2:]]
from inferwatch.cli import main
main()
"""

EVERY_OPTIONAL = sorted({module.split(".")[0] for modules in EXTRAS.values() for module in modules} | {"uvloop"})


def run_without(hidden: list[str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", HIDDEN, ",".join(hidden), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


@pytest.mark.parametrize(
    ("hidden", "args", "line"),
    [
        (
            ["pandas"],
            ["triage", "--prometheus", "http://127.0.0.1:9", "--since", "5m"],
            "inferwatch triage needs the 'triage' extra (pandas not installed): pip install 'inferwatch[triage]'",
        ),
        (
            ["aiohttp"],
            ["exporter", "normalize", "--target", "127.0.0.1:9", "--listen", "127.0.0.1:9"],
            "inferwatch exporter normalize needs the 'exporter' extra (aiohttp not installed): "
            "pip install 'inferwatch[exporter]'",
        ),
        (
            ["orjson", "httptools"],
            ["frontdoor", "--upstream", "http://127.0.0.1:9", "--listen", "127.0.0.1:9"],
            "inferwatch frontdoor needs the 'frontdoor' extra (httptools, orjson not installed): "
            "pip install 'inferwatch[frontdoor]'",
        ),
        (
            ["grafanalib"],
            ["build", "--check"],
            "inferwatch build needs the 'build' extra (grafanalib not installed): pip install 'inferwatch[build]'",
        ),
        (
            ["aiohttp", "pandas"],
            ["demo"],
            "inferwatch demo needs the 'sim', 'exporter' and 'triage' extras (aiohttp, pandas not installed): "
            "pip install 'inferwatch[sim,exporter,triage]'",
        ),
        # not checked before it starts (the simulated backend needs no extra): the NVML backend's import is
        (
            ["pynvml"],
            ["exporter", "gpu", "--listen", "127.0.0.1:9"],
            "inferwatch exporter gpu needs the 'gpu' extra (pynvml not installed): pip install 'inferwatch[gpu]'",
        ),
        # grpcio alone missing: said as the exporter starts, not pass after pass in the sampler thread
        (
            ["grpc"],
            ["exporter", "gpu", "--listen", "127.0.0.1:9"],
            "inferwatch exporter gpu needs the 'gpu' extra (grpc not installed): pip install 'inferwatch[gpu]'",
        ),
    ],
    ids=["triage", "exporter", "frontdoor", "build", "demo", "gpu-nvml", "gpu-kubelet"],
)
def test_a_command_without_its_extra_says_which_in_one_line(hidden, args, line):
    proc = run_without(hidden, *args)
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", f"error: {line}\n")


def test_the_core_commands_and_every_help_need_no_extra(tmp_path):
    """`inferwatch --help`, each role's --help and the text commands run with every optional module missing."""
    for args in (["--help"], ["triage", "--help"], ["exporter", "normalize", "--help"], ["demo", "--help"]):
        proc = run_without(EVERY_OPTIONAL, *args)
        assert proc.returncode == 0 and "Usage: inferwatch" in proc.stdout, (args, proc.stderr)
    capture = REAL_CAPTURES / "vllm-0.11.0-hardware-aware-router.txt"
    proc = run_without(EVERY_OPTIONAL, "normalize", "--drop-unmapped", str(capture))
    assert proc.returncode == 0 and "llm_requests_running" in proc.stdout, proc.stderr
    proc = run_without(EVERY_OPTIONAL, "slo", "check", str(ROOT / "slo" / "examples" / "chat.yaml"))
    assert proc.returncode == 0, proc.stderr


def _commands(group, words=()) -> set[str]:
    """Every leaf command of the click tree, as its words after `inferwatch`."""
    found = set()
    for name, command in getattr(group, "commands", {}).items():
        path = (*words, name)
        found |= _commands(command, path) if hasattr(command, "commands") else {" ".join(path)}
    return found


def test_the_table_names_real_commands_and_the_extras_pyproject_declares():
    import typer.main

    commands = _commands(typer.main.get_command(app))
    assert set(ROLES) <= commands, set(ROLES) - commands
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(EXTRAS) == set(declared) - {"all", "test"}
    assert {extra for extras in ROLES.values() for extra in extras} <= set(EXTRAS)
    # `all` (the README's install) is every extra, and the tests install all of it
    every = re.fullmatch(r"inferwatch\[(.*)\]", declared["all"][0])
    assert every and set(every.group(1).split(",")) == set(EXTRAS) and len(declared["all"]) == 1
    assert "inferwatch[all]" in declared["test"]
    first = re.search(r"```sh\n(.*?)\n```", (ROOT / "README.md").read_text(), re.S)
    assert first and "pip install -e '.[all]' && inferwatch build" in first.group(1)
    # each module the table checks for an extra comes with one of that extra's distributions
    for extra, requirements in declared.items():
        if extra in ("all", "test"):
            continue
        brought = set().union(*(_top_level(re.split(r"[<>=;\s\[]", req, maxsplit=1)[0]) for req in requirements))
        modules = {module.split(".")[0] for module in EXTRAS[extra]}
        assert modules <= brought, (extra, modules - brought)


def _top_level(distribution: str) -> set[str]:
    """The top-level modules an installed distribution brings, from its RECORD."""
    return {
        file.parts[0].removesuffix(".py")
        for file in metadata.files(distribution) or ()
        if len(file.parts) > 1 or file.suffix == ".py"
    }


class _Target(http.server.BaseHTTPRequestHandler):
    body = (REAL_CAPTURES / "vllm-0.11.0-hardware-aware-router.txt").read_bytes()

    def do_GET(self):  # noqa: N802 - http.server's name
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_a_venv_with_only_the_exporter_extra_runs_the_exporter_and_names_the_triage_extra(tmp_path):
    """A deployment's install, resolved by pip for real (from the index the README's install uses)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    bin_ = venv / "bin"
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("VIRTUAL_ENV", None)
    pip = subprocess.run(
        [str(bin_ / "pip"), "install", "-q", "-e", f"{ROOT}[exporter]"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert pip.returncode == 0, f"pip install -e '.[exporter]' failed (is the package index reachable?):\n{pip.stderr}"
    absent = subprocess.run([str(bin_ / "python"), "-c", "import pandas"], capture_output=True, timeout=60)
    assert absent.returncode != 0, "pandas came with the core and exporter extra"

    proc = subprocess.run(
        [str(bin_ / "inferwatch"), "triage", "--prometheus", "http://127.0.0.1:9", "--since", "5m"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert re.fullmatch(
        r"error: inferwatch triage needs the 'triage' extra \([a-z, ]*pandas[a-z, ]* not installed\): "
        r"pip install 'inferwatch\[triage\]'\n",
        proc.stderr,
    ), proc.stderr

    target = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Target)
    threading.Thread(target=target.serve_forever, daemon=True).start()
    port = _free_port()
    exporter = subprocess.Popen(
        [
            str(bin_ / "inferwatch"),
            "exporter",
            "normalize",
            "--listen",
            f"127.0.0.1:{port}",
            "--target",
            f"vllm=http://127.0.0.1:{target.server_address[1]}/metrics",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline, text = time.monotonic() + 60, ""
        while exporter.poll() is None and time.monotonic() < deadline:  # until it serves (or exits)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
                    text = answer.read().decode()
                break
            except OSError:
                time.sleep(0.1)
        assert exporter.poll() is None, exporter.communicate()[1]
        assert re.search(r'^llm_requests_running\{.*target="vllm"', text, re.M), text[:2000]
    finally:
        exporter.terminate()
        exporter.wait(timeout=30)
        target.shutdown()
