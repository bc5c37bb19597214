"""Shared fixtures: where the real captures and our own expositions live, and the loaded mappings."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from inferwatch.mappings import load_catalog, load_mappings

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"  # everything the tests read; SOURCES.md says where each file came from
REAL_CAPTURES = FIXTURES / "real-captures"
EXPOSITIONS = FIXTURES / "expositions"
GOLDEN = ROOT / "tests" / "golden"
UPDATE_GOLDEN = os.environ.get("INFERWATCH_UPDATE_GOLDEN") == "1"


def check_golden(path: Path, text: str) -> None:
    """Compare `text` with a golden file byte for byte; INFERWATCH_UPDATE_GOLDEN=1 rewrites it."""
    if UPDATE_GOLDEN:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert text == path.read_text(), f"{path} differs (INFERWATCH_UPDATE_GOLDEN=1 rewrites it)"


def all_expositions() -> list[Path]:
    """Every exposition the tests normalize: the real captures, then ours per release."""
    return sorted(REAL_CAPTURES.glob("*.txt")) + sorted(EXPOSITIONS.glob("*.txt"))


@pytest.fixture(scope="session")
def catalog():
    return load_catalog()


@pytest.fixture(scope="session")
def mappings(catalog):
    return load_mappings(catalog=catalog)


def need(tool: str) -> str:
    """Path of a required tool; the suite fails (not skips) without it, since CI installs it."""
    path = shutil.which(tool)
    if path is None:
        pytest.fail(f"{tool} not found: install Debian's prometheus package (apt-get install -y prometheus)")
    return path


def pytest_collection_modifyitems(config, items):
    """Slow end-to-end tests first, so xdist starts the longest at once."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
