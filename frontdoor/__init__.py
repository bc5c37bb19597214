"""The front door: a metering reverse proxy in front of each engine, measuring what users feel.

    inferwatch frontdoor --upstream http://127.0.0.1:8000 --listen 0.0.0.0:8080
    inferwatch probe --target http://127.0.0.1:8000 --model llama-3-8b --every 30s

Its series are `llm_frontdoor_*` (slo/slis.yaml, `source: frontdoor`); outcomes
are pure functions of the parsed response (`classify`).
"""

from inferwatch.frontdoor._config import (FrontdoorConfig, Upstream, parse_listen, parse_seconds, parse_size,
                                          parse_upstreams)
from inferwatch.frontdoor._meter import Facts, RequestInfo, observe_event, observe_whole, request_info, token_counts
from inferwatch.frontdoor._outcome import OUTCOMES, classify, tool_call_problem
from inferwatch.frontdoor._schema import schema_problem
from inferwatch.frontdoor._sse import SSESplitter

__all__ = ["FrontdoorConfig", "Upstream", "parse_listen", "parse_seconds", "parse_size", "parse_upstreams",
           "Facts", "RequestInfo", "observe_event", "observe_whole", "request_info", "token_counts", "OUTCOMES",
           "classify", "tool_call_problem", "schema_problem", "SSESplitter", "Frontdoor", "make_app", "start",
           "serve", "FRONTDOOR", "ProbeConfig", "ProbeResult", "Prober", "probe_once"]

# loaded on first use: the proxy pulls in aiohttp and prometheus_client, the pure parts need neither
_LAZY = {"Frontdoor": "_proxy", "make_app": "_proxy", "start": "_proxy", "serve": "_proxy", "FRONTDOOR": "_proxy",
         "ProbeConfig": "_probe", "ProbeResult": "_probe", "Prober": "_probe", "probe_once": "_probe"}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    globals()[name] = value
    return value
