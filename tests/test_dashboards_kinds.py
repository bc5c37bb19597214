"""Does the which-slow dashboard tell the kinds apart? Issue 12's claim in reverse, on the simulator's recordings
(tests/fixtures/triage/ and each variant below it, replayed into a real Prometheus by tests/triage_tools.py).

Every kind row opens with a tile; its Grafana thresholds colour it orange when the kind shows. Each tile's query,
the dashboard variables substituted as Grafana would for one model, is read at the end of the recorded baseline
and at the end of the incident. A tile is lit when its value falls in a step of a warning colour (past the first
step above the base, or under it for a tile where low is bad); no data is not lit. For every model the tile of its
recorded kind is lit in the incident and was not in the baseline; the quiet model and the harmless doubling light
no tile anew.

`python tests/test_dashboards_kinds.py [FOLDER]` prints the matrix (model x newly lit tile)."""

from __future__ import annotations

import json
import math
import sys

import pytest
from test_dashboards_data import _substitute
from triage_tools import FIXTURES, api, load_manifest, recorded_prometheus

from inferwatch.dashboards import build

pytestmark = [
    pytest.mark.skipif(not (FIXTURES / "manifest.yaml").exists(), reason="no recording yet"),
]

# A tile averages over up to 5 minutes (most over 2 or 5): an incident much shorter than that is diluted by what
# came before it, and its tile cannot be expected to light. The real engine's recordings (real-vllm/) are incidents
# of 20-90 s, time-compressed tenfold for their alerts; triage's own test judges them over their exact windows.
MIN_INCIDENT_S = 180


def _long_enough(folder) -> bool:
    incident = load_manifest(folder)["incident"]
    return incident["end"] - incident["start"] >= MIN_INCIDENT_S


FOLDERS = sorted(path.parent for path in FIXTURES.rglob("manifest.yaml") if _long_enough(path.parent))
QUIET = "none"  # the manifest's kind for m-quiet and m-doubling
WARNING = {"orange", "red", "yellow", "dark-red", "dark-orange", "semi-dark-red", "semi-dark-orange"}


def kind_tiles() -> dict[str, dict]:
    """{kind: its row's tile}, the kind being the first word of the row's title."""
    tiles, kind = {}, None
    for panel in json.loads(build()["which-slow.json"])["panels"]:
        if panel["type"] == "row":
            kind = panel["title"].split(":")[0]
        elif panel["type"] == "stat":
            assert kind not in tiles, f"two tiles in the {kind} row"
            tiles[kind] = panel
    return tiles


def lit(panel: dict, value: float | None) -> bool:
    """Whether the tile shows `value` in a warning colour of its own thresholds (steps ascend; the base's value
    is null)."""
    if value is None or math.isnan(value):
        return False
    colour = None
    for step in panel["fieldConfig"]["defaults"]["thresholds"]["steps"]:
        if step["value"] is None or value >= step["value"]:
            colour = step["color"]
    return colour in WARNING


def read(base: str, panel: dict, model: str, at: float) -> float | None:
    expr = _substitute(panel["targets"][0]["expr"], {"model": model})
    values = [float(r["value"][1]) for r in api(base, "query", query=expr, time=at)["result"]]
    assert len(values) <= 1, f"{panel['title']} for {model}: {len(values)} series"
    return values[0] if values else None


def matrix(base: str, manifest: dict) -> dict[str, dict[str, tuple]]:
    """{model: {kind: (baseline value, incident value, lit before, lit now)}}."""
    out: dict = {}
    for model in manifest["models"]:
        out[model] = {}
        for kind, panel in kind_tiles().items():
            b, a = (read(base, panel, model, manifest[w]["end"]) for w in ("baseline", "incident"))
            out[model][kind] = (b, a, lit(panel, b), lit(panel, a))
    return out


def newly_lit(row: dict) -> list[str]:
    return [kind for kind, (_, _, was, now) in row.items() if now and not was]


@pytest.fixture(scope="module")
def matrices():
    """matrices(folder): each recording replayed once and every tile read for every model."""
    read_: dict = {}

    def of(folder):
        if folder not in read_:
            with recorded_prometheus(folder) as (base, manifest):
                read_[folder] = matrix(base, manifest)
        return read_[folder]

    return of


def test_every_kind_has_a_tile_with_a_threshold():
    tiles = kind_tiles()
    assert len(tiles) == 12
    for kind, panel in tiles.items():
        steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
        assert any(s["color"] in WARNING for s in steps) and len(steps) >= 2, kind


def _explain(row: dict) -> str:
    return "; ".join(f"{kind} {b}->{a}" for kind, (b, a, _, _) in row.items())


CASES = [(folder, model) for folder in FOLDERS for model in sorted(load_manifest(folder)["models"])]


@pytest.mark.parametrize(
    "folder, model", CASES, ids=[f"{'main' if f == FIXTURES else f.relative_to(FIXTURES)}:{m}" for f, m in CASES]
)
def test_the_kinds_own_tile_lights(matrices, folder, model):
    expected = load_manifest(folder)["models"][model]
    row = matrices(folder)[model]
    if expected == QUIET:
        assert newly_lit(row) == [], f"{model}: {newly_lit(row)} lit: {_explain(row)}"
    else:
        b, a, was, now = row[expected]
        assert now and not was, f"{model}: the {expected} tile read {b} -> {a}"


if __name__ == "__main__":
    from pathlib import Path

    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else FIXTURES
    with recorded_prometheus(folder) as (url, loaded):
        found = matrix(url, loaded)
    kinds = list(kind_tiles())
    print(f"{'model':24}" + " ".join(k[:6].rjust(6) for k in kinds))
    apart = 0
    for model, row in found.items():
        expected = loaded["models"][model]
        new = newly_lit(row)
        apart += expected != QUIET and new == [expected]
        print(
            f"{model:24}"
            + " ".join(("NEW" if k in new else "lit" if row[k][3] else ".").rjust(6) for k in kinds)
            + f"   expected {expected}"
        )
    print(f"told apart (only their own tile newly lit): {apart} of {len(kinds)}")
