#!/usr/bin/env bash
# The NVML backend and the GPU exporter on one real NVIDIA GPU (an H200), offline, in under 4 minutes.
#
#   PYTHONPATH=/tmp/site:$PWD bash tests/device/nvml_check.sh      (from the repository root)
#
# Python packages beyond the standard library (carried as wheels, installed to /tmp/site):
#   nvidia-ml-py   (import pynvml)       the NVML bindings the backend reads through
#   PyYAML         (import yaml)         the vocabulary (mappings/catalog.yaml) the exporter renders from
# Optional: typer, click, shellingham, annotated-doc: only for the `inferwatch exporter gpu` CLI path; without
# them the exporter is started through its library (GpuExporter.run), the same server and backend.
# Exit status: 0 when every check passed; 1 with a `FAIL ...` line for each failure.
set -u
cd "$(dirname "$0")/../.." || exit 1
# The repo tree laid out as the installed package (pyproject's package-dir), without pip: no network there.
PKG=$(mktemp -d /tmp/inferwatch-pkg.XXXXXX) && cp -r inferwatch "$PKG/inferwatch" || exit 1
for sub in mappings exporters dashboards slo alerts deploy sim frontdoor triage; do ln -s "$PWD/$sub" "$PKG/inferwatch/$sub"; done
trap 'rm -rf "$PKG"' EXIT
export PYTHONPATH="$PKG${PYTHONPATH:+:$PYTHONPATH}"
smi=0
echo "== nvidia-smi -L"; timeout 30 nvidia-smi -L || { echo "FAIL nvidia-smi -L"; smi=1; }
echo "== driver"; timeout 30 nvidia-smi --query-gpu=index,name,driver_version,memory.total,power.limit --format=csv \
  || { echo "FAIL nvidia-smi --query-gpu"; smi=1; }
timeout 240 python3 tests/device/nvml_check.py
rc=$?
[ $rc -eq 124 ] && echo "FAIL the check ran past 240 s"
[ $rc -eq 0 ] && [ $smi -ne 0 ] && rc=1
exit $rc
