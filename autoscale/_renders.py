"""What scales a model's Deployment on the signals: a KEDA ScaledObject, or a Prometheus Adapter rule with an
autoscaling/v2 HPA. Both target llm_autoscale:scaling_signal (the SLO pressure with its hysteresis band folded
in, metric type Value: desired = ceil(replicas x signal / scale_up)) and the waiting requests per replica
(AverageValue), for vLLM and SGLang alike since both read the vocabulary.

Missing data never scales down: KEDA is told not to read an empty answer as 0 (`ignoreNullValues: false`), so
the query errors and the HPA keeps its replicas; an HPA whose external metric is missing does the same.
"""

from __future__ import annotations

from inferwatch.autoscale._rules import Knobs

__all__ = ["keda_scaled_object", "adapter_rules", "hpa", "ADAPTER_SIGNAL", "ADAPTER_WAITING"]

ADAPTER_SIGNAL = "llm_autoscale_scaling_signal"  # Kubernetes metric names cannot hold a colon
ADAPTER_WAITING = "llm_requests_waiting"


def _labels(namespace: str, model: str) -> str:
    return f'namespace="{namespace}", model="{model}"'


def _behavior(knobs: Knobs) -> dict:
    return {
        "scaleUp": {"stabilizationWindowSeconds": knobs.seconds("scale_up_stabilization")},
        "scaleDown": {"stabilizationWindowSeconds": knobs.seconds("scale_down_delay")},
    }


def keda_scaled_object(model: str, namespace: str, deployment: str, knobs: Knobs, address: str) -> dict:
    sel = _labels(namespace, model)
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": f"{deployment}-inferwatch", "namespace": namespace},
        "spec": {
            "scaleTargetRef": {"name": deployment},
            "minReplicaCount": knobs.min_replicas,
            "maxReplicaCount": knobs.max_replicas,
            "pollingInterval": 15,
            "cooldownPeriod": knobs.seconds("scale_down_delay"),
            "advanced": {"horizontalPodAutoscalerConfig": {"behavior": _behavior(knobs)}},
            "triggers": [
                {
                    "type": "prometheus",
                    "name": "slo-pressure",
                    "metricType": "Value",
                    "metadata": {
                        "serverAddress": address,
                        "query": f"max(llm_autoscale:scaling_signal{{{sel}}})",
                        "threshold": f"{knobs.scale_up:g}",
                        "activationThreshold": f"{knobs.scale_down:g}",
                        "ignoreNullValues": "false",
                    },
                },
                {
                    "type": "prometheus",
                    "name": "waiting",
                    "metricType": "AverageValue",
                    "metadata": {
                        "serverAddress": address,
                        "query": f"sum(llm_requests_waiting{{{sel}}})",
                        "threshold": f"{knobs.waiting_per_replica:g}",
                        "activationThreshold": "0",
                        "ignoreNullValues": "false",
                    },
                },
            ],
        },
    }


def adapter_rules() -> dict:
    """prometheus-adapter `rules` for the external metrics API: the signal and the waiting requests, by
    namespace and model."""
    return {
        "externalRules": [
            {
                "seriesQuery": 'llm_autoscale:scaling_signal{namespace!="", model!=""}',
                "resources": {"overrides": {"namespace": {"resource": "namespace"}}},
                "name": {"matches": "^llm_autoscale:scaling_signal$", "as": ADAPTER_SIGNAL},
                "metricsQuery": "max(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)",
            },
            {
                "seriesQuery": 'llm_requests_waiting{namespace!="", model!=""}',
                "resources": {"overrides": {"namespace": {"resource": "namespace"}}},
                "name": {"matches": "^llm_requests_waiting$", "as": ADAPTER_WAITING},
                "metricsQuery": "sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)",
            },
        ]
    }


def hpa(model: str, namespace: str, deployment: str, knobs: Knobs) -> dict:
    match = {"matchLabels": {"model": model}}
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": f"{deployment}-inferwatch", "namespace": namespace},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment},
            "minReplicas": knobs.min_replicas,
            "maxReplicas": knobs.max_replicas,
            "behavior": _behavior(knobs),
            "metrics": [
                {
                    "type": "External",
                    "external": {
                        "metric": {"name": ADAPTER_SIGNAL, "selector": match},
                        "target": {"type": "Value", "value": f"{round(knobs.scale_up * 1000)}m"},
                    },
                },
                {
                    "type": "External",
                    "external": {
                        "metric": {"name": ADAPTER_WAITING, "selector": match},
                        "target": {"type": "AverageValue", "averageValue": f"{knobs.waiting_per_replica:g}"},
                    },
                },
            ],
        },
    }
