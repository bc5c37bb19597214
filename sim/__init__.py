"""A stand-in inference engine, a load generator and the demo: the whole pipeline with no GPU.

    inferwatch simulate --engine vllm|sglang      OpenAI-compatible API + that engine's /metrics
    inferwatch load --target URL --rate R         open-loop load, measuring what users see
    inferwatch capacity sweep --target URL        the request rate it serves within its SLO
    inferwatch demo                               engines, exporter, Prometheus, load and an incident
"""

from inferwatch.sim._demo import run_demo
from inferwatch.sim._engine import Engine, Event, Request
from inferwatch.sim._load import LoadConfig, LoadReport, format_report, percentile, run_load
from inferwatch.sim._metrics import EngineMetrics, default_release, releases
from inferwatch.sim._params import EngineParams, scenarios, with_scenario
from inferwatch.sim._server import SimulatorConfig, make_app, serve

__all__ = ["Engine", "Event", "Request", "EngineMetrics", "EngineParams", "SimulatorConfig", "LoadConfig",
           "LoadReport", "make_app", "serve", "run_load", "format_report", "percentile", "releases",
           "default_release", "scenarios", "with_scenario", "run_demo"]
