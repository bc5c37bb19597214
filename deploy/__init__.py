"""Deployment: Kubernetes manifests, compose, local. Coming next."""

__all__: list[str] = []
