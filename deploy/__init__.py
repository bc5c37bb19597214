"""Deployment: one config into everything a cluster (or a laptop) needs.

    config = load_config("deploy.yaml")      # typed; SpecError lists every problem with file:line
    files = render(config, "kubernetes")     # {path: text}: manifests and kustomization.yaml, or compose
                                             # (`backend: victoriametrics`: VM operator CRs, or vmagent + vmalert)
    inferwatch doctor --prometheus URL       # checks that every signal arrives (inferwatch.deploy._doctor)

The default render (no config) is checked in under deploy/kubernetes/ and deploy/compose/, on VictoriaMetrics under
deploy/kubernetes-victoriametrics/ and deploy/compose-victoriametrics/, and drift-checked by `inferwatch build --check`.
"""

from inferwatch.deploy._config import Config, load_config, parse_config
from inferwatch.deploy._render import TARGETS, render, render_default

__all__ = ["Config", "load_config", "parse_config", "render", "render_default", "TARGETS"]
