"""`--plot FILE.png`: one figure, a row of panels per signal group, the incident shaded, the baseline faint, the
verdict in the title. matplotlib (Agg) is imported here only, so the CLI pays for it only with --plot."""

from __future__ import annotations

from pathlib import Path

from inferwatch.triage._report import headline
from inferwatch.triage._signals import GROUPS, load_signals
from inferwatch.triage._summary import model_series

__all__ = ["plot_report", "COLUMNS", "MAX_MODELS"]

COLUMNS = 6  # panels per row at most; a group with more signals continues on the next row
MAX_MODELS = 4  # lines per panel: the models with findings first
GROUP_TITLES = {
    "load-queue": "load and queue",
    "latency": "latency",
    "tokens": "tokens",
    "cache": "cache",
    "gpu": "GPU",
    "outcomes": "outcomes",
    "freshness": "freshness",
}
COLORS = ("tab:blue", "tab:red", "tab:green", "tab:purple")
# always drawn when they have data: the panels an on-call engineer reads first; any other signal is drawn when
# it is evidence of a finding
CORE = (
    "running",
    "waiting",
    "queue_time_mean",
    "ttft_mean",
    "tpot_mean",
    "e2e_mean",
    "door_ttft_mean",
    "prompt_tokens_per_request",
    "output_tokens_per_request",
    "kv_usage",
    "prefix_hit_ratio",
    "gpu_util",
    "sm_active",
    "door_unanswered_share",
    "engine_error_share",
    "engine_series",
)


def _rows(signals, series, evidence):
    """[(group, [signal, ...])] of the core and evidence signals that have data for a plotted model, COLUMNS per
    row at most."""
    rows = []
    drawn = {name for _, name, _ in series}
    for group in GROUPS:
        present = [
            s for s in signals if s.group == group and s.name in drawn and (s.name in CORE or s.name in evidence)
        ]
        for i in range(0, len(present), COLUMNS):
            rows.append((group, present[i : i + COLUMNS]))
    return rows


def _series(frames, signals, models) -> dict:
    """{(0 baseline or 1 incident, signal, model): per-step series} of the plotted models."""
    out = {}
    by_name = {s.name: s for s in signals}
    for k, frame in enumerate(frames or ()):
        if frame is None or not len(frame):
            continue
        rows = frame[frame["model"].isin(models)]
        for (name, model), group in rows.groupby(["signal", "model"], sort=False):
            line = model_series(group, by_name[name]) if name in by_name else None
            if line is not None and len(line):
                out[k, name, model] = line
    return out


def _offset(report) -> float:
    """Where the baseline is drawn: as is when it ends where the incident starts, else laid over the incident."""
    if abs(report.baseline.end - report.incident.start) <= report.step:
        return 0.0
    return report.incident.start - report.baseline.start


def plot_report(report, path: Path | str) -> None:
    """Draw the report's signals into a PNG at `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    signals = load_signals()
    verdicts = sorted(report.verdicts, key=lambda v: not v.findings)[:MAX_MODELS]
    models = [v.unit for v in verdicts]  # the frames' `model`: a unit name where a model is split
    series = _series(report.frames, signals, models)
    evidence = {e.signal for v in verdicts for f in v.findings for e in f.evidence if e.score > 0}
    strongest = {e.signal for v in verdicts for f in v.findings[:1] for e in f.evidence if e.score > 0}
    rows = _rows(signals, series, evidence) or [("freshness", [])]
    columns = max([len(r) for _, r in rows] + [1])
    fig, axes = plt.subplots(
        len(rows), columns, figsize=(3.6 * columns, 2.4 * len(rows) + 0.6 + 0.25 * len(verdicts)), squeeze=False
    )
    offset, zero = _offset(report), report.incident.start
    span = max(report.incident.seconds, report.baseline.seconds if not offset else 0)
    scale, unit = (1, "seconds") if span <= 300 else (60, "minutes") if span <= 36000 else (3600, "hours")
    for (group, row_signals), row_axes in zip(rows, axes, strict=True):
        for ax, signal in zip(row_axes, row_signals, strict=False):  # a row's spare axes stay empty
            for color, model in zip(COLORS, models, strict=False):  # more models than colours: the first ones
                for k, shift, alpha, style in ((0, offset, 0.35, "--"), (1, 0.0, 1.0, "-")):
                    line = series.get((k, signal.name, model))
                    if line is not None and len(line):
                        ax.plot(
                            (line.index + shift - zero) / scale,
                            line.values,
                            style,
                            color=color,
                            alpha=alpha,
                            linewidth=1.4,
                            label=model if style == "-" else None,
                        )
            ax.axvspan(0, report.incident.seconds / scale, color="orange", alpha=0.12)
            ax.set_ylim(bottom=0, top=max(ax.get_ylim()[1], 1e-9) * 1.05)  # from zero: noise looks flat
            strong = signal.name in strongest
            ax.set_title(
                f"{signal.name} ({signal.unit})",
                fontsize=9,
                color="firebrick" if strong else "black",
                fontweight="bold" if strong else "normal",
            )
            ax.tick_params(labelsize=7)
            ax.grid(alpha=0.3)
        row_axes[0].set_ylabel(GROUP_TITLES[group], fontsize=10, fontweight="bold")
        for ax in row_axes[len(row_signals) :]:
            ax.axis("off")
    for ax in axes[-1]:
        if ax.axison:
            ax.set_xlabel(f"{unit} from the incident's start", fontsize=8)
    handles, labels = axes[0][0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="upper right", fontsize=9, ncol=len(labels))
    lines = [headline(v) for v in verdicts]
    fig.suptitle(
        "inferwatch triage: "
        + "\n".join(lines)
        + "\n(incident shaded; baseline dashed and faint"
        + (", laid over the incident)" if offset else ")"),
        fontsize=11,
        x=0.01,
        ha="left",
    )
    height = 2.4 * len(rows) + 0.6 + 0.25 * len(verdicts)
    fig.subplots_adjust(
        left=0.06,
        right=0.99,
        bottom=0.5 / height,
        top=1 - (0.5 + 0.25 * (len(lines) + 1)) / height,
        hspace=0.45,
        wspace=0.25,
    )  # fixed margins: tight_layout costs seconds on 30 axes
    try:
        fig.savefig(path, dpi=90)
    except (OSError, ValueError) as err:
        from inferwatch.errors import InferwatchError

        raise InferwatchError(f"--plot {path}: cannot write it: {getattr(err, 'strerror', None) or err}") from None
    finally:
        plt.close(fig)
