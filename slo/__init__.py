"""The SLO compiler: TTFT, time-per-output-token and answered objectives into tested burn-rate alerts.

    spec = load_spec("chat.yaml")            # typed, validated; SpecError lists every problem
    ruleset = compile_spec(spec)             # pure: rule groups, inhibit rules, warnings
    files, warnings = render_files(ruleset)  # {file name: text}: rules, promtool tests, inhibit rules
    print(explain(spec))                     # windows, factors, detection and reset times per tier
"""

from inferwatch.slo._burn import TierMath, tier_math
from inferwatch.slo._explain import explain
from inferwatch.slo._import import import_file
from inferwatch.slo._model import EngineRef, LatencySLI, Matcher, Objective, RatioSLI, Selector, Spec, Tier
from inferwatch.slo._output import FORMATS, render_files
from inferwatch.slo._promtool import check_rule_files, run_rule_tests
from inferwatch.slo._rules import BURN_ALERT, MISSING_ALERT, RuleSet, compile_spec
from inferwatch.slo._spec import builtin_sli, load_spec, parse_spec

__all__ = ["load_spec", "parse_spec", "builtin_sli",
           "compile_spec", "render_files", "explain", "import_file", "check_rule_files",
           "run_rule_tests", "tier_math", "TierMath", "RuleSet", "Spec", "Objective", "LatencySLI", "RatioSLI",
           "Selector", "Matcher", "Tier", "EngineRef", "FORMATS", "BURN_ALERT", "MISSING_ALERT"]
