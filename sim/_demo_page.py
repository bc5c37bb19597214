"""From the demo's page to triage's verdict, as on-call would go: the firing alert's description carries an
`inferwatch triage --alert ...` command (slo/_rules.py `triage_command`); Prometheus' /api/v1/alerts gives it with
its templates filled in (`$externalURL`, `$labels.x`), as Alertmanager and Grafana show it. The demo runs that
command as pasted (a child `python -m inferwatch`, `--json` added so the verdict can be read), and prints the
command and the verdict."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import urllib.request

__all__ = ["page_command", "triage_from_page", "PageVerdict", "COMMAND"]

COMMAND = re.compile(r"`(inferwatch triage [^`]*)`")  # how an annotation quotes the command
TIMEOUT_S = 300.0  # one triage of a few minutes of data takes seconds; a wedged child must not hang the demo


def page_command(prom: str, labels: dict[str, str]) -> str | None:
    """The triage command of the firing alert whose labels include `labels`, as Prometheus rendered its
    description; None while no such alert fires (or its description has none)."""
    try:
        with urllib.request.urlopen(f"{prom}/api/v1/alerts", timeout=5) as resp:
            alerts = json.loads(resp.read())["data"]["alerts"]
    except (OSError, ValueError, KeyError):
        return None
    for alert in alerts:
        if alert.get("state") == "firing" and labels.items() <= alert.get("labels", {}).items():
            found = COMMAND.search(alert.get("annotations", {}).get("description", ""))
            if found:
                return found[1]
    return None


class PageVerdict(tuple):
    """(the lines to print, {model: its kinds, most likely first}): what the pasted command answered."""

    @property
    def lines(self) -> list[str]:
        return self[0]

    @property
    def kinds(self) -> dict[str, list[str]]:
        return self[1]


def triage_from_page(command: str) -> PageVerdict:
    """Run `command` as pasted into a shell (its `inferwatch` this interpreter's), with `--json`; a headline a
    model, or the error it ended with."""
    args = shlex.split(command)
    lines = [f"  on-call pastes the page's command: {command}"]
    try:
        done = subprocess.run(
            [sys.executable, "-m", "inferwatch", *args[1:], "--json"],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return PageVerdict((lines + [f"  triage from the page: no answer within {TIMEOUT_S:.0f}s"], {}))
    if done.returncode != 0:
        error = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        return PageVerdict((lines + [f"  triage from the page failed ({done.returncode}): {error}"], {}))
    report = json.loads(done.stdout)
    kinds = {}
    for model in report["models"]:
        kinds[model["model"]] = [k["kind"] for k in model["kinds"]]
        lines.append(f"  triage from the page: {_headline(model)}")
        if "onset" in model:
            used = model.get("baseline", report["baseline"])
            lines.append(
                f"    onset {model['onset']['at']} ({', '.join(model['onset']['signals'][:3])}); baseline "
                f"{used['start']} .. {used['end']}"
            )
    return PageVerdict((lines, kinds))


def _headline(model: dict) -> str:
    """`model: kind (0.80); other (0.60)`, or nothing wrong, or not enough data (why): headline()'s words."""
    if not model["kinds"]:
        if model.get("not_enough_data"):
            return f"{model['model']}: not enough data ({model['not_enough_data']})"
        return f"{model['model']}: nothing wrong"
    return f"{model['model']}: " + "; ".join(f"{k['kind']} ({k['confidence']:.2f})" for k in model["kinds"])
