"""What serving costs: a price table compiled to recording rules over the GPU and engine series.

spec = load_cost("cost.yaml")          # typed, validated; SpecError names the file, line and field
groups = compile_cost(spec)            # pure: Prometheus rule groups (llm_cost:*)
text = render_cost(spec)               # the rule file, with its banner
"""

from inferwatch import _lazy

__all__ = [
    "CostSpec",
    "LabelPrice",
    "load_cost",
    "parse_cost",
    "compile_cost",
    "render_cost",
    "RECORDS",
    "register",
    "CostCompileOptions",
]

_LAZY = {
    name: module
    for module, names in {
        "_cli": ("register",),
        "_options": ("CostCompileOptions",),
        "_rules": ("RECORDS", "compile_cost", "render_cost"),
        "_spec": ("CostSpec", "LabelPrice", "load_cost", "parse_cost"),
    }.items()
    for name in names
}

__getattr__ = _lazy.lazy_attributes(__name__, _LAZY)
