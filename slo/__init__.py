"""The SLO compiler: TTFT, time-per-output-token and answered objectives into tested burn-rate alerts.

spec = load_spec("chat.yaml")            # typed, validated; SpecError lists every problem
ruleset = compile_spec(spec)             # pure: rule groups, inhibit rules, warnings
files, warnings = render_files(ruleset)  # {file name: text}: rules, promtool tests, inhibit rules
print(explain(spec))                     # windows, factors, detection and reset times per tier
"""

from inferwatch import _lazy

__all__ = [
    "load_spec",
    "parse_spec",
    "builtin_sli",
    "compile_spec",
    "render_files",
    "explain",
    "import_file",
    "check_rule_files",
    "run_rule_tests",
    "tier_math",
    "TierMath",
    "RuleSet",
    "Spec",
    "Objective",
    "LatencySLI",
    "RatioSLI",
    "Selector",
    "Matcher",
    "Tier",
    "EngineRef",
    "FORMATS",
    "BURN_ALERT",
    "MISSING_ALERT",
    "le_matcher",
    "bucket_tables",
    "source_buckets",
    "version_tuple",
    "register",
    "CompileOptions",
    "ImportOptions",
]

# loaded on first use: `inferwatch --help` registers the slo commands without loading the compiler
_LAZY = {
    name: module
    for module, names in {
        "_cli": ("register",),
        "_options": ("CompileOptions", "ImportOptions"),
        "_burn": ("TierMath", "tier_math"),
        "_explain": ("explain",),
        "_import": ("import_file",),
        "_model": ("EngineRef", "LatencySLI", "Matcher", "Objective", "RatioSLI", "Selector", "Spec", "Tier"),
        "_output": ("FORMATS", "render_files"),
        "_promtool": ("check_rule_files", "run_rule_tests"),
        "_rules": ("BURN_ALERT", "MISSING_ALERT", "RuleSet", "compile_spec"),
        "_selector": ("le_matcher",),
        "_spec": ("builtin_sli", "load_spec", "parse_spec"),
        "_tables": ("bucket_tables", "source_buckets", "version_tuple"),
    }.items()
    for name in names
}

__getattr__ = _lazy.lazy_attributes(__name__, _LAZY)
