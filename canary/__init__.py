"""Canary against stable: is the new release worse for users? From Prometheus, per model, with a verdict of
pass, fail or inconclusive (too little traffic, or a traffic mix too different to compare).

    report = compare(client, "llama", canary=parse_selector('version="v2"', "--canary"),
                     stable=parse_selector('version="v1"', "--stable"))
    report.verdict, report.exit_code       # "fail", 1
"""

from inferwatch import _lazy

__all__ = [
    "compare",
    "parse_selector",
    "Settings",
    "Report",
    "Finding",
    "SelectorError",
    "signals",
    "render_text",
    "to_json",
    "EXIT",
    "PASS",
    "FAIL",
    "INCONCLUSIVE",
    "render_templates",
    "analysis_template",
    "metric_templates",
    "register",
    "CanaryOptions",
]

# loaded on first use: `inferwatch --help` registers the canary command without loading promql_parser
_LAZY = {
    name: module
    for module, names in {
        "_cli": ("register",),
        "_options": ("CanaryOptions",),
        "_compare": (
            "EXIT",
            "FAIL",
            "INCONCLUSIVE",
            "PASS",
            "Finding",
            "Report",
            "SelectorError",
            "Settings",
            "compare",
            "parse_selector",
            "signals",
        ),
        "_report": ("render_text", "to_json"),
        "_templates": ("analysis_template", "metric_templates", "render_templates"),
    }.items()
    for name in names
}

__getattr__ = _lazy.lazy_attributes(__name__, _LAZY)
