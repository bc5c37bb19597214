"""Canary against stable: is the new release worse for users? From Prometheus, per model, with a verdict of
pass, fail or inconclusive (too little traffic, or a traffic mix too different to compare).

    report = compare(client, "llama", canary=parse_selector('version="v2"', "--canary"),
                     stable=parse_selector('version="v1"', "--stable"))
    report.verdict, report.exit_code       # "fail", 1
"""

from inferwatch.canary._compare import (EXIT, FAIL, INCONCLUSIVE, PASS, Finding, Report, SelectorError, Settings,
                                        compare, parse_selector, signals)
from inferwatch.canary._report import render_text, to_json

__all__ = ["compare", "parse_selector", "Settings", "Report", "Finding", "SelectorError", "signals",
           "render_text", "to_json", "EXIT", "PASS", "FAIL", "INCONCLUSIVE"]
