"""SLO-aware autoscaling: per-replica demand, load and SLO-pressure signals as recording rules, scale-up alerts,
and the KEDA or Prometheus Adapter + HPA manifests that scale a model's Deployment on them.

    rules = render_autoscaling(load_spec("slo/defaults.yaml"), load_knobs())
    keda_scaled_object("llama", "ml", "vllm-llama", load_knobs(), "http://prometheus:9090")
"""

from inferwatch.autoscale._promtest import promtool_test
from inferwatch.autoscale._renders import ADAPTER_SIGNAL, ADAPTER_WAITING, adapter_rules, hpa, keda_scaled_object
from inferwatch.autoscale._rules import (
    ALERTS,
    RECORDS,
    Knobs,
    compile_autoscaling,
    load_knobs,
    objectives,
    render_autoscaling,
)

__all__ = [
    "Knobs",
    "load_knobs",
    "objectives",
    "compile_autoscaling",
    "render_autoscaling",
    "RECORDS",
    "ALERTS",
    "keda_scaled_object",
    "adapter_rules",
    "hpa",
    "ADAPTER_SIGNAL",
    "ADAPTER_WAITING",
    "promtool_test",
]
