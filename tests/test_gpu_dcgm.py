"""deploy/dcgm/counters.csv: dcgm-exporter's format, every field the DCGM mapping reads, profiling switched on."""

from __future__ import annotations

import yaml
from conftest import ROOT

CSV = ROOT / "deploy" / "dcgm" / "counters.csv"
PROFILING = (
    "DCGM_FI_PROF_SM_ACTIVE",
    "DCGM_FI_PROF_SM_OCCUPANCY",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "DCGM_FI_PROF_DRAM_ACTIVE",
)


def _rows() -> dict[str, tuple[str, str, int]]:
    rows = {}
    for number, line in enumerate(CSV.read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        field, mtype, help_text = (part.strip() for part in line.split(",", 2))
        assert field.startswith("DCGM_FI_") and mtype in ("gauge", "counter", "label") and help_text, line
        assert field not in rows, f"{field} twice"
        rows[field] = (mtype, help_text, number)
    return rows


def test_profiling_fields_are_on_with_the_reason_above_them():
    rows, lines = _rows(), CSV.read_text().splitlines()
    for field in PROFILING:
        assert rows[field][0] == "gauge", field
    for field in ("DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_SM_OCCUPANCY"):
        comment = lines[rows[field][2] - 2]
        assert comment.startswith("# ON here, off in dcgm-exporter's files"), comment


def test_every_field_the_dcgm_mapping_reads_is_collected():
    """One name of each entry's `from` list: aliases name the same field (the older name, which every
    dcgm-exporter release accepts, where there are two)."""
    mapping = yaml.safe_load((ROOT / "mappings" / "sources" / "dcgm.yaml").read_text())
    wanted = [[m["from"]] if isinstance(m["from"], str) else m["from"] for m in mapping["metrics"]]
    missing = [names for names in wanted if not set(names) & set(_rows())]
    assert not missing, missing
