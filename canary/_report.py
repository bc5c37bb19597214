"""A canary Report as text for a terminal or CI log, and as JSON."""

from __future__ import annotations

import math
from dataclasses import asdict

__all__ = ["render_text", "to_json"]


def _value(kind: str, value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2%}" if kind == "share" else f"{value:.4g}"


def render_text(report) -> str:
    lines = [
        f"canary verdict for {report.model}: {report.verdict.upper()} (source {report.source}, window {report.window})",
        "",
    ]
    rows = [("signal", "stable", "canary", "ratio", "verdict", "why")]
    for f in report.findings:
        ratio = "-" if f.ratio is None else ("inf" if math.isinf(f.ratio) else f"{f.ratio:.2f}x")
        rows.append((f.signal, _value(f.kind, f.stable), _value(f.kind, f.canary), ratio, f.verdict, f.why))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(row[:5], widths, strict=True)) + "  " + row[5] for row in rows]
    if report.mix:
        lines += ["", "traffic mix (latency compares like with like only when these agree):"]
        lines += [f"  {m.signal}: stable {m.stable:.4g}, canary {m.canary:.4g} ({m.why})" for m in report.mix]
    if report.skipped:
        lines += ["", "not compared: " + "; ".join(report.skipped)]
    return "\n".join(lines) + "\n"


def _finite(value):
    if isinstance(value, float) and (math.isinf(value) or math.isnan(value)):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def to_json(report) -> dict:
    return _finite({**asdict(report), "exit_code": report.exit_code})
