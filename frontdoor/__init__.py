"""The front door: a metering reverse proxy in front of each engine, measuring what users feel.

    inferwatch frontdoor --upstream http://127.0.0.1:8000 --listen 0.0.0.0:8080
    inferwatch probe --target http://127.0.0.1:8000 --model llama-3-8b --every 30s

Its series are `llm_frontdoor_*` (slo/slis.yaml, `source: frontdoor`); outcomes
are pure functions of the parsed response (`classify`). Every name is loaded on
first use, so the CLI pays nothing for this package until a command runs.
"""

from inferwatch import _lazy

__all__ = [
    "FrontdoorConfig",
    "FrontdoorOptions",
    "ProbeOptions",
    "Upstream",
    "Limits",
    "parse_listen",
    "parse_seconds",
    "parse_size",
    "parse_upstreams",
    "parse_base_url",
    "Facts",
    "RequestInfo",
    "observe_event",
    "observe_stream",
    "observe_whole",
    "request_info",
    "token_counts",
    "OUTCOMES",
    "classify",
    "tool_call_problem",
    "schema_problem",
    "SSESplitter",
    "Frontdoor",
    "make_app",
    "start",
    "serve",
    "FRONTDOOR",
    "ProbeConfig",
    "ProbeResult",
    "Prober",
    "probe_once",
    "Goodput",
    "GoodputError",
    "default_goodput",
    "load_goodput",
    "register",
]

_LAZY = {
    "register": "_cli",
    "FrontdoorOptions": "_options",
    "ProbeOptions": "_options",
    **dict.fromkeys(
        [
            "FrontdoorConfig",
            "Upstream",
            "Limits",
            "parse_listen",
            "parse_seconds",
            "parse_size",
            "parse_upstreams",
            "parse_base_url",
        ],
        "_config",
    ),
    **dict.fromkeys(
        ["Facts", "RequestInfo", "observe_event", "observe_stream", "observe_whole", "request_info", "token_counts"],
        "_meter",
    ),
    **dict.fromkeys(["OUTCOMES", "classify", "tool_call_problem"], "_outcome"),
    "schema_problem": "_schema",
    "SSESplitter": "_sse",
    **dict.fromkeys(["Frontdoor", "make_app", "start", "serve", "FRONTDOOR"], "_proxy"),
    **dict.fromkeys(["ProbeConfig", "ProbeResult", "Prober", "probe_once"], "_probe"),
    **dict.fromkeys(["Goodput", "GoodputError", "default_goodput", "load_goodput"], "_goodput"),
}


__getattr__ = _lazy.lazy_attributes(__name__, _LAZY)
