"""Deployment: one config into everything a cluster (or a laptop) needs.

    config = load_config("deploy.yaml")      # typed; SpecError lists every problem with file:line
    files = render(config, "kubernetes")     # {path: text}: manifests and kustomization.yaml, or compose
                                             # (`backend: victoriametrics`: VM operator CRs, or vmagent + vmalert)
    results = run_checks(config, "http://prometheus:9090")   # `inferwatch doctor`: does every signal arrive?
    print(summary(results))                  # `9 ok, 1 note, 1 skipped, 2 to fix`

The default render (no config) is checked in under deploy/kubernetes/ and deploy/compose/, on VictoriaMetrics under
deploy/kubernetes-victoriametrics/ and deploy/compose-victoriametrics/, and drift-checked by `inferwatch build --check`.
"""

from inferwatch import _lazy

__all__ = [
    "Config",
    "load_config",
    "parse_config",
    "reference_table",
    "render",
    "render_default",
    "TARGETS",
    "DEFAULT_FOLDERS",
    "run_checks",
    "summary",
    "DoctorOptions",
    "register",
]

# loaded on first use: the doctor reads Prometheus, which rendering never needs, and `inferwatch --help` needs only
# `register` (not YAML, nor the renderers)
__getattr__ = _lazy.lazy_attributes(
    __name__,
    {
        **dict.fromkeys(("Config", "load_config", "parse_config", "reference_table"), "_config"),
        **dict.fromkeys(("render", "render_default", "TARGETS", "DEFAULT_FOLDERS"), "_render"),
        "run_checks": "_doctor",
        "summary": "_doctor",
        "DoctorOptions": "_doctor_options",
        "register": "_cli",
    },
)
