"""What serving costs: a price table compiled to recording rules over the GPU and engine series.

    spec = load_cost("cost.yaml")          # typed, validated; SpecError names the file, line and field
    groups = compile_cost(spec)            # pure: Prometheus rule groups (llm_cost:*)
    text = render_cost(spec)               # the rule file, with its banner
"""

from inferwatch.cost._rules import RECORDS, compile_cost, render_cost
from inferwatch.cost._spec import CostSpec, LabelPrice, load_cost, parse_cost

__all__ = ["CostSpec", "LabelPrice", "load_cost", "parse_cost", "compile_cost", "render_cost", "RECORDS"]
