"""Generated and hand-written alert rules, tested with promtool. Coming next."""

__all__: list[str] = []
