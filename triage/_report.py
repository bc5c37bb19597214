"""A Report as JSON (the issue's shape, with extra keys), as plain text, and as rich tables on a terminal."""

from __future__ import annotations

from inferwatch.triage._judge import Finding
from inferwatch.triage._sources import SOURCE_NAMES
from inferwatch.triage._window import iso

__all__ = ["to_json", "render_text", "render_rich", "headline", "runbook_url", "RUNBOOKS"]

RUNBOOKS = "https://github.com/inferwatch/inferwatch/blob/main/triage/README.md#"


def runbook_url(anchor: str) -> str:
    return anchor if "://" in anchor else RUNBOOKS + anchor


def _num(value):
    if value is None or value != value:
        return None
    return float(f"{value:.4g}")


def _finding(f: Finding) -> dict:
    out = {
        "kind": f.kind,
        "confidence": f.confidence,
        "evidence": [
            {
                "signal": e.signal,
                "baseline": _num(e.baseline),
                "incident": _num(e.incident),
                "change": _num(e.change),
                "condition": e.condition,
                "score": round(e.score, 3),
            }
            for e in f.evidence
        ],
        "summary": f.summary,
        "runbook": runbook_url(f.runbook),
        "next": f.next,
    }
    if f.explains:
        out["explains"] = list(f.explains)
    if f.explained_by:
        out["explained_by"] = list(f.explained_by)
    if f.pod is not None:
        out["pod"] = f.pod
    return out


def to_json(report) -> dict:
    """{"start", "end", "baseline": {"start", "end"}, "models": [{"model", "kinds": [...]}]}, kinds by confidence;
    a model served in several deployments has an entry per deployment, with its labels under "deployment"."""
    return {
        **report.incident.iso(),
        "baseline": report.baseline.iso(),
        "step_seconds": report.step,
        "rate_window_seconds": report.rate_window,
        "read_from_sources": list(report.read_from_sources),
        "models": [
            {
                "model": v.model,
                **({"deployment": dict(v.deployment)} if v.deployment else {}),
                **({"baseline": {**v.baseline_window.iso(), "why": v.baseline_why}} if v.baseline_window else {}),
                **({"onset": _onset(v.onset)} if v.onset else {}),
                **({"incident": v.incident_window.iso()} if v.incident_window else {}),
                "kinds": [_finding(f) for f in v.findings],
                "pods": [{"pod": pod, "kinds": [_finding(f) for f in fs]} for pod, fs in sorted(v.pods.items())],
                "not_measured": list(v.not_measured),
                "too_few_events": list(v.too_few),
                "enough_data": v.enough_data,
                **({"not_enough_data": v.not_enough_data} if v.not_enough_data else {}),
            }
            for v in report.verdicts
        ],
        "warnings": list(report.warnings),
    }


def _onset(onset) -> dict:
    """Where the model's incident signals rose (_onset): the step, and the signals that rose, earliest first."""
    return {"at": iso(onset.at), "signals": list(onset.signals)}


def _rose(signals) -> str:
    """`queue_time_mean, waiting, ttft_mean (+2) rose`: the first three, so that the line fits 100 columns."""
    more = f" (+{len(signals) - 3})" if len(signals) > 3 else ""
    return f"{', '.join(signals[:3])}{more} rose"


def headline(verdict) -> str:
    """One line: `model: kind (0.92, explains queueing); other (0.7)`, `model: nothing wrong`, or `model: not
    enough data (why)`; `model (namespace=a): ...` for one deployment of a model served in several."""
    if not verdict.findings:
        if verdict.not_enough_data:
            return f"{verdict.unit}: not enough data ({verdict.not_enough_data})"
        return f"{verdict.unit}: nothing wrong"
    parts = []
    for f in verdict.findings:
        notes = (
            [f"{f.confidence:.2f}"]
            + ([f"pod {f.pod}"] if f.pod else [])
            + ([f"explains {', '.join(f.explains)}"] if f.explains else [])
        )
        parts.append(f"{f.kind} ({', '.join(notes)})")
    return f"{verdict.unit}: " + "; ".join(parts)


def _fmt(value) -> str:
    if value is None:
        return "-"
    return f"{value:.3g}"


def _change(e) -> str:
    if e.change is None:
        return "new" if e.baseline in (0, 0.0) and e.incident else "-"
    return f"x{e.change:.2f}"


def _title(report) -> str:
    return (
        f"incident {iso(report.incident.start)} .. {iso(report.incident.end)}, baseline "
        f"{iso(report.baseline.start)} .. {iso(report.baseline.end)} (step {report.step:g}s)"
    )


def _sources_note(report) -> str | None:
    if not report.read_from_sources:
        return None
    names = " and ".join(SOURCE_NAMES[f] for f in report.read_from_sources)
    return f"read from {names} through inferwatch's mappings: Prometheus holds no common-vocabulary series for them"


def render_text(report) -> str:
    lines = [f"inferwatch triage: {_title(report)}"]
    if note := _sources_note(report):
        lines.append(note)
    for v in report.verdicts:
        lines.append("")
        lines.append(headline(v))
        if v.onset:
            lines.append(f"  onset {iso(v.onset.at)}: {_rose(v.onset.signals)}")
        if v.incident_window:
            lines.append(f"  incident {iso(v.incident_window.start)} .. {iso(v.incident_window.end)}: from the onset")
        if v.baseline_window:
            lines.append(f"  baseline {iso(v.baseline_window.start)} .. {iso(v.baseline_window.end)}: {v.baseline_why}")
        for f in v.findings:
            by = f" (explained by {', '.join(f.explained_by)})" if f.explained_by else ""
            pod = f" on pod {f.pod}" if f.pod else ""
            lines.append(f"  {f.kind}{pod} {f.confidence:.2f}: {f.summary}{by}")
            for e in f.evidence:
                lines.append(
                    f"    {e.signal:28} baseline {_fmt(e.baseline):>9}  incident {_fmt(e.incident):>9}  "
                    f"{_change(e):>7}   [{e.condition}]"
                )
            lines.append(f"    next: {f.next}")
            lines.append(f"    runbook: {runbook_url(f.runbook)}")
        if v.not_measured:
            lines.append(f"  not measured (no series in either window): {', '.join(v.not_measured)}")
        if v.too_few:
            lines.append(f"  too few events in the incident to judge: {', '.join(v.too_few)}")
    lines += [f"warning: {w}" for w in report.warnings]
    return "\n".join(lines) + "\n"


def render_rich(report, console) -> None:
    from rich.markup import escape
    from rich.table import Table

    console.print(f"[bold]inferwatch triage[/bold]: {_title(report)}")
    if note := _sources_note(report):
        console.print(f"[dim]{escape(note)}[/dim]")
    for v in report.verdicts:
        if not v.findings and v.not_enough_data:
            console.print(
                f"\n[bold]{escape(v.unit)}[/bold]: [yellow]not enough data[/yellow] ({escape(v.not_enough_data)})"
            )
        elif not v.findings:
            console.print(f"\n[bold]{escape(v.unit)}[/bold]: [green]nothing wrong[/green]")
        else:
            table = Table(title=escape(v.unit), title_justify="left", show_lines=True)
            for name, style in (
                ("kind", "bold"),
                ("conf.", None),
                ("signal", None),
                ("baseline", None),
                ("incident", None),
                ("change", None),
            ):
                table.add_column(name, style=style, justify="right" if name not in ("kind", "signal") else "left")
            for f in v.findings:
                label = (
                    f.kind
                    + (f"\npod {f.pod}" if f.pod else "")
                    + (f"\nexplained by {', '.join(f.explained_by)}" if f.explained_by else "")
                )
                rows = list(f.evidence) or [None]
                table.add_row(
                    label,
                    f"{f.confidence:.2f}",
                    "\n".join(e.signal for e in rows if e),
                    "\n".join(_fmt(e.baseline) for e in rows if e),
                    "\n".join(_fmt(e.incident) for e in rows if e),
                    "\n".join(_change(e) for e in rows if e),
                )
            console.print()
            console.print(table)
            for f in v.findings:
                console.print(
                    f"  [bold]{escape(f.kind)}[/bold]: {escape(f.summary)}. Next: {escape(f.next)} "
                    f"Runbook: {runbook_url(f.runbook)}",
                    highlight=False,
                )
        if v.onset:
            console.print(f"  [dim]onset {iso(v.onset.at)}: {escape(_rose(v.onset.signals))}[/dim]")
        if v.baseline_window:
            console.print(
                f"  [dim]baseline {iso(v.baseline_window.start)} .. {iso(v.baseline_window.end)}: "
                f"{escape(v.baseline_why)}[/dim]"
            )
        if v.not_measured:
            console.print(f"  [dim]not measured: {', '.join(v.not_measured)}[/dim]")
        if v.too_few:
            console.print(f"  [dim]too few events to judge: {', '.join(v.too_few)}[/dim]")
    for warning in report.warnings:
        console.print(f"[yellow]warning:[/yellow] {escape(warning)}", highlight=False)
