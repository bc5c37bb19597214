"""The options reference tables of the READMEs, each from its command's options model (inferwatch/options.py):
kept in step by `inferwatch build` and checked by `inferwatch build --check` beside the bundle (inferwatch/build.py).
Apart from the bundle because it reads every command's model, the simulator's among them, and the simulator's demo
reads the bundle (ARCHITECTURE.md)."""

from __future__ import annotations

from pathlib import Path

from inferwatch.build import DEPLOY_DIR, MAPPINGS_DIR, in_checkout
from inferwatch.resources import data_path

__all__ = ["reference_sections", "stale_sections", "refresh", "check"]


def reference_sections() -> dict[Path, dict[str, str]]:
    """{markdown file: {section name: table}}: the generated options tables, each from its command's options model
    (inferwatch/options.py). The top-level README is only in a checkout; frontdoor/README.md only in one too."""
    from inferwatch.canary import CanaryOptions
    from inferwatch.cost import CostCompileOptions
    from inferwatch.deploy import DoctorOptions
    from inferwatch.deploy import reference_table as deploy_table
    from inferwatch.exporters import ExporterConfig, GpuOptions
    from inferwatch.frontdoor import FrontdoorOptions, ProbeOptions
    from inferwatch.options import reference_table
    from inferwatch.promapi_flags import ConnectionOptions
    from inferwatch.sim import CapacityCompareOptions, DemoOptions, LoadOptions, SimulateOptions, SweepOptions
    from inferwatch.slo import CompileOptions, ImportOptions
    from inferwatch.triage import TriageOptions

    return {
        MAPPINGS_DIR.parent / "README.md": {
            "exporter-options": reference_table(ExporterConfig),
            "gpu-exporter-options": reference_table(GpuOptions, keys=False),
        },
        data_path("inferwatch.frontdoor") / "README.md": {
            "frontdoor-options": reference_table(FrontdoorOptions, keys=False),
            "probe-options": reference_table(ProbeOptions, keys=False),
        },
        DEPLOY_DIR / "README.md": {
            "deploy-keys": deploy_table(),
            "doctor-options": reference_table(DoctorOptions, keys=False),
        },
        data_path("inferwatch.triage") / "README.md": {
            "triage-options": reference_table(TriageOptions, keys=False),
            "connection-options": reference_table(ConnectionOptions, keys=False),
        },
        data_path("inferwatch.slo") / "README.md": {
            "slo-compile-options": reference_table(CompileOptions, keys=False),
            "slo-import-options": reference_table(ImportOptions, keys=False),
        },
        data_path("inferwatch.sim") / "README.md": {
            "simulate-options": reference_table(SimulateOptions, keys=False),
            "load-options": reference_table(LoadOptions, keys=False),
            "demo-options": reference_table(DemoOptions, keys=False),
            "capacity-sweep-options": reference_table(SweepOptions, keys=False),
            "capacity-compare-options": reference_table(CapacityCompareOptions, keys=False),
        },
        data_path("inferwatch.canary") / "README.md": {"canary-options": reference_table(CanaryOptions, keys=False)},
        data_path("inferwatch.cost") / "README.md": {
            "cost-compile-options": reference_table(CostCompileOptions, keys=False)
        },
    }


def stale_sections() -> list[tuple[Path, str]]:
    """(file, its text with every generated section as the models make it now) for each that differs."""
    from inferwatch.errors import InferwatchError
    from inferwatch.options import with_section

    stale = []
    for path, sections in reference_sections().items():
        if not path.is_file():
            continue  # an installed package carries no top-level README
        text = wanted = path.read_text(encoding="utf-8")
        for name, body in sections.items():
            try:
                wanted = with_section(wanted, name, body, str(path))
            except ValueError as err:
                raise InferwatchError(str(err)) from None
        if wanted != text:
            stale.append((path, wanted))
    return stale


def refresh() -> list[Path]:
    """Rewrite the files whose tables differ (in a checkout only, as the bundle's copies); returns them."""
    if not in_checkout():
        return []
    stale = stale_sections()
    for path, text in stale:
        path.write_text(text, encoding="utf-8")
    return [path for path, _ in stale]


def check() -> list[str]:
    """The files whose tables differ from what the options models make now."""
    return [str(path) for path, _ in stale_sections()]
