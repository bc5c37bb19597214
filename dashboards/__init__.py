"""Core Grafana dashboards as code (grafanalib), written against the common vocabulary. Coming next."""

__all__: list[str] = []
