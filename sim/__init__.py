"""A stand-in inference engine, a load generator and the demo: the whole pipeline with no GPU.

inferwatch simulate --engine vllm|sglang      OpenAI-compatible API + that engine's /metrics
inferwatch load --target URL --rate R         open-loop load, measuring what users see
inferwatch capacity sweep --target URL        the request rate it serves within its SLO
inferwatch demo                               engines, exporter, Prometheus, load and an incident
"""

from inferwatch import _lazy

__all__ = [
    "Engine",
    "Event",
    "Request",
    "EngineMetrics",
    "EngineParams",
    "SimulatorConfig",
    "LoadConfig",
    "LoadReport",
    "make_app",
    "serve",
    "run_load",
    "format_report",
    "percentile",
    "releases",
    "default_release",
    "scenarios",
    "with_scenario",
    "run_demo",
    "register",
    "SimulateOptions",
    "LoadOptions",
    "DemoOptions",
    "SweepOptions",
    "CapacityCompareOptions",
]

# loaded on first use: the server and the load generator pull in aiohttp, which `inferwatch --help` and the
# commands that only read sim's tables never need
_LAZY = {
    name: module
    for module, names in {
        "_cli": ("register",),
        "_cli_options": ("SimulateOptions", "LoadOptions", "DemoOptions", "SweepOptions", "CapacityCompareOptions"),
        "_demo": ("run_demo",),
        "_engine": ("Engine", "Event", "Request"),
        "_load": ("LoadConfig", "LoadReport", "format_report", "percentile", "run_load"),
        "_metrics": ("EngineMetrics", "default_release", "releases"),
        "_params": ("EngineParams", "scenarios", "with_scenario"),
        "_server": ("SimulatorConfig", "make_app", "serve"),
    }.items()
    for name in names
}

__getattr__ = _lazy.lazy_attributes(__name__, _LAZY)
