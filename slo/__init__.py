"""The SLO compiler: objectives to burn-rate and missing-data alerts. Coming next."""

__all__: list[str] = []
