"""`inferwatch triage`: name the kind of slow from Prometheus, with evidence.

    inferwatch triage --prometheus http://prometheus:9090 --since 30m [--model M] [--json] [--plot FILE.png]

The signals (signals.yaml) are PromQL over the common vocabulary, one range
query per signal for every model, rewritten through the mappings to the engines'
own names where Prometheus holds no vocabulary series (`_sources`); the kinds (kinds.yaml) are weighted conditions
on how each signal changed from a baseline window to the incident. Summing up
(`summarise`) and judging (`judge`, `assess`) are pure functions on pandas
frames; `triage` reads Prometheus with inferwatch.promapi. Every name is
loaded on first use, so the CLI pays nothing for pandas or matplotlib until a
command runs.
"""

from inferwatch import _lazy

__all__ = [
    "Signal",
    "load_signals",
    "signal_queries",
    "model_matcher",
    "Condition",
    "Clause",
    "Kind",
    "parse_condition",
    "parse_kinds",
    "load_kinds",
    "Window",
    "parse_time",
    "incident_window",
    "baseline_choices",
    "choose_step",
    "rate_window",
    "Reading",
    "summarise",
    "others",
    "bucket_quantile",
    "Evidence",
    "Finding",
    "score",
    "judge_kind",
    "judge",
    "Connection",
    "Verdict",
    "Report",
    "assess",
    "triage",
    "to_json",
    "render_text",
    "render_rich",
    "headline",
    "plot_report",
    "register",
    "TriageOptions",
]

_LAZY = {
    "register": "_cli",
    "TriageOptions": "_options",
    **dict.fromkeys(["Signal", "load_signals", "signal_queries", "model_matcher"], "_signals"),
    **dict.fromkeys(["Condition", "Clause", "Kind", "parse_condition", "parse_kinds", "load_kinds"], "_rules"),
    **dict.fromkeys(
        ["Window", "parse_time", "incident_window", "baseline_choices", "choose_step", "rate_window"], "_window"
    ),
    **dict.fromkeys(["Reading", "summarise", "others", "bucket_quantile"], "_summary"),
    **dict.fromkeys(["Evidence", "Finding", "score", "judge_kind", "judge"], "_judge"),
    "Connection": "_fetch",
    **dict.fromkeys(["Verdict", "Report", "assess", "triage"], "_triage"),
    **dict.fromkeys(["to_json", "render_text", "render_rich", "headline"], "_report"),
    "plot_report": "_plot",
}

__getattr__ = _lazy.lazy_attributes(__name__, _LAZY)
