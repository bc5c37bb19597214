"""`inferwatch slo import`: Sloth (`prometheus/v1` and its CRD), OpenSLO (v1, v1alpha, v2alpha) and Pyrra specs.

Every document of a file is read, and each ends one of three ways: imported whole, imported with every setting
that was not carried over listed (`ImportResult.not_carried`; bad events named as successes are imported as
written and listed in `ImportResult.to_check`), or refused with the reason (`SpecError`). Specs
are grouped one per service and each passes `slo check` before it is returned.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import partial

from inferwatch.errors import Problem, SpecError
from inferwatch.slo._import_base import Draft, Notes, Refused, load_documents, mapping, text_of
from inferwatch.slo._import_openslo import read_openslo
from inferwatch.slo._import_pyrra import read_pyrra
from inferwatch.slo._import_sloth import read_sloth
from inferwatch.slo._spec import parse_spec

__all__ = ["ImportResult", "import_file", "import_text"]

SLOTH_PERIOD_DAYS = 30  # `sloth generate --default-slo-period`


@dataclass
class ImportResult:
    """Specs in our format (plain dicts, one per service, ready to dump), what could not be carried over, and what
    was carried over as written but reads as if it may mean the opposite (`to_check`)."""

    specs: list[dict] = field(default_factory=list)
    not_carried: list[Problem] = field(default_factory=list)
    to_check: list[Problem] = field(default_factory=list)


def import_file(path) -> ImportResult:
    """Import one Sloth or OpenSLO file; SpecError (file: field: reason) when nothing can be imported."""
    from inferwatch._files import read_input_text

    text = read_input_text(path)  # missing, a folder, over the cap, not UTF-8: InputError, exit 2
    return import_text(text, str(path))


def import_text(text: str, origin: str = "<input>") -> ImportResult:
    notes = Notes(origin)
    try:
        docs = load_documents(text, origin, notes)
    except Refused as refused:
        raise SpecError(refused.problems) from None
    if not docs:
        raise SpecError([Problem(origin, None, "", "is empty: no YAML document to import")])
    drafts: list[Draft] = []
    openslo: list[tuple[str, dict]] = []
    services: dict[str, str] = {}
    for where, doc in docs:
        reader = _reader(doc, where, notes)
        if not isinstance(doc, dict):  # _reader has said what it is
            continue
        if reader == "openslo":
            openslo.append((where, doc))
        elif reader:
            read = (
                partial(read_pyrra, doc, where, notes)
                if reader == "pyrra"
                else partial(read_sloth, doc, where, notes, crd=reader == "sloth-crd")
            )
            drafts += _guarded(doc, where, notes, read)
    if openslo:
        drafts += _guarded(openslo[0][1], "", notes, lambda: read_openslo(openslo, notes, services))
    specs = [
        spec
        for spec in (
            _spec(service, group, notes, services.get(service)) for service, group in _by_service(drafts).items()
        )
        if spec
    ]
    notes.items.sort(key=lambda problem: problem.line or 0)  # in the order of the file
    notes.checks.sort(key=lambda problem: problem.line or 0)
    if not specs:
        raise SpecError(notes.items or [Problem(origin, None, "", "nothing to import")])
    return ImportResult(specs, notes.items, notes.checks)


def _guarded(doc, where: str, notes: Notes, read):
    """A reader's result; a refusal, or a shape no reader foresaw, becomes a note instead of a traceback."""
    try:
        return read()
    except Refused as refused:
        notes.items += refused.problems
    except (TypeError, AttributeError, KeyError, ValueError, RecursionError) as err:
        notes.add(
            doc,
            where,
            f"could not be read ({type(err).__name__}: {err}); not imported. This is a bug in "
            "inferwatch: please report it with the file",
        )
    return []


_YAML_KINDS = {str: "a string", int: "a number", float: "a number", bool: "true or false", list: "a list"}


def _reader(doc, where: str, notes: Notes) -> str | None:
    """Which reader a document is for; None (and a note saying what it is) when none."""
    if not isinstance(doc, dict):
        what = _YAML_KINDS.get(type(doc), f"a {type(doc).__name__}")
        notes.add(None, where, f"{what} ({text_of(doc)[:40]!r}), not a Sloth, OpenSLO or Pyrra document")
        return None
    api, kind, version = text_of(doc.get("apiVersion")), text_of(doc.get("kind")), doc.get("version")
    if isinstance(version, str) and version.startswith("prometheus/"):
        if version == "prometheus/v1":
            return "sloth"
        notes.add(
            doc,
            f"{where} version".strip(),
            f"{version} is not a Sloth spec version (Sloth reads prometheus/v1); not imported",
        )
    elif api == "sloth.slok.dev/v1" and kind == "PrometheusServiceLevel":
        return "sloth-crd"
    elif api.startswith("sloth.slok.dev/") and kind == "AlertWindows":
        period = text_of(mapping(doc.get("spec")).get("sloPeriod"))
        notes.add(
            doc,
            where,
            f"a Sloth AlertWindows file: the burn-rate windows Sloth alerts with for a "
            f"{period or 'custom'} SLO period, not an SLO; nothing to import (inferwatch's alert "
            "tiers are fixed: see slo/tiers.yaml)",
        )
    elif api.startswith(("openslo/", "openslo.com/")):
        return "openslo"
    elif (api.startswith("pyrra.dev/") or api == "v1alpha1") and kind == "ServiceLevelObjective":
        # Pyrra's filesystem mode reads the spec whatever its apiVersion; rhobs/configuration writes bare v1alpha1
        return "pyrra"
    elif api.startswith("pyrra.dev/"):
        notes.add(doc, where, f"a Pyrra {kind or 'document'}, not a ServiceLevelObjective: nothing to import")
    elif api.startswith("n9/"):
        notes.add(
            doc,
            where,
            f"a Nobl9 {kind or 'document'}: not imported (export it as OpenSLO, e.g. with "
            "sloctl, or write the SLO as openslo/v1)",
        )
    elif kind == "PrometheusRule" or "groups" in doc:
        notes.add(
            doc,
            where,
            "Prometheus rules (perhaps Sloth's generated output), not an SLO spec: import the "
            "Sloth, OpenSLO or Pyrra spec they were generated from",
        )
    elif "slos" in doc and "service" in doc and not {"apiVersion", "kind", "version"} & set(doc):
        notes.add(
            doc,
            where,
            "has service and slos like a Sloth spec, but no version: prometheus/v1 line (Sloth "
            "requires it too); not imported",
        )
    else:
        found = ", ".join(f"{k}: {text_of(doc[k])}" for k in ("apiVersion", "kind", "version") if k in doc)
        notes.add(
            doc,
            where,
            "not a Sloth, OpenSLO or Pyrra document"
            + (f" ({found})" if found else "")
            + ": expected version: prometheus/v1 (Sloth), apiVersion: sloth.slok.dev/v1 (Sloth), openslo/v1 "
            "(OpenSLO) or pyrra.dev/v1alpha1 (Pyrra)",
        )
    return None


def _by_service(drafts: list[Draft]) -> dict[str, list[Draft]]:
    groups: dict[str, list[Draft]] = {}
    for draft in drafts:
        groups.setdefault(draft.service, []).append(draft)
    return groups


def _spec(service: str, drafts: list[Draft], notes: Notes, description: str | None) -> dict | None:
    """One service's spec from its drafts; objectives that our spec rejects are refused with the reason."""
    window = next((d.window for d in drafts if d.window is not None), None)
    kept, names, group_by = [], set(), drafts[0].group_by
    for draft in drafts:
        name = draft.objective["name"]
        if name in names:
            notes.add(
                draft.node,
                draft.field,
                f"SLO {name} of service {service} is defined twice; the second is "
                "not imported (Sloth refuses duplicate SLOs)",
            )
        elif draft.group_by != group_by:
            notes.add(
                draft.node,
                draft.field,
                f"sums by ({', '.join(draft.group_by)}) where other SLOs of "
                f"{service} sum by ({', '.join(group_by)}); not imported",
            )
        elif draft.window is not None and draft.window != window:
            notes.add(
                draft.node,
                draft.field,
                f"window {draft.window}d differs from {window}d of the other SLOs of {service}; {window}d used",
            )
            kept.append(draft)
        else:
            kept.append(draft)
        names.add(name)
    if window is None:
        window = SLOTH_PERIOD_DAYS
        notes.add(
            drafts[0].node,
            "",
            f"service {service}: window {window}d: Sloth takes the SLO period from its "
            f"command line (--default-slo-period, {window}d unless set); edit window: if "
            "yours differs",
        )
    while kept:
        spec = _assemble(service, window, group_by, kept, description)
        try:
            parse_spec(spec, f"<{service}>")
        except SpecError as err:
            remaining = _drop_rejected(kept, err.problems, notes)
            if remaining is None:
                return None
            kept = remaining
            continue
        _engines_hint(spec, drafts[0], notes)
        return spec
    return None


def _assemble(service: str, window: int, group_by: tuple, drafts: list[Draft], description: str | None) -> dict:
    common = dict(set.intersection(*(set(d.labels.items()) for d in drafts)))
    spec = {"version": 1, "service": service}
    if description:
        spec["description"] = " ".join(description.split())
    spec.update({"window": f"{window}d", "engines": []})
    if group_by:
        spec["group_by"] = list(group_by)
    if common:
        spec["labels"] = dict(sorted(common.items()))
    objectives = []
    for draft in drafts:
        own = {k: v for k, v in sorted(draft.labels.items()) if common.get(k) != v}
        objective = dict(draft.objective)
        if own:
            annotations = objective.pop("annotations", None)
            objective["labels"] = own
            if annotations:
                objective["annotations"] = annotations
        objectives.append(objective)
    spec["objectives"] = objectives
    return spec


def _drop_rejected(drafts: list[Draft], problems: list[Problem], notes: Notes) -> list[Draft] | None:
    """Drafts without the objectives our spec rejects (each noted); None when the spec itself is rejected."""
    rejected: dict[int, Problem] = {}
    for problem in problems:
        match = re.match(r"objectives\[(\d+)\]", problem.field)
        if not match:
            for draft in drafts:
                notes.add(draft.node, draft.field, f"not imported: as inferwatch's {problem.field}: {problem.message}")
            return None
        rejected.setdefault(int(match.group(1)), problem)
    for i, problem in sorted(rejected.items()):
        field_ = problem.field.split(".", 1)[1] if "." in problem.field else problem.field
        notes.add(drafts[i].node, drafts[i].field, f"not imported: as inferwatch's {field_}: {problem.message}")
    return [d for i, d in enumerate(drafts) if i not in rejected]


def _engines_hint(spec: dict, draft: Draft, notes: Notes) -> None:
    if any(str(o.get("metric", "")).startswith("llm_") for o in spec["objectives"]):
        notes.add(
            draft.node,
            "",
            f"service {spec['service']}: engines: [] skips the bucket check; name your "
            "engines (engines: [vllm, sglang]) to check thresholds against their buckets",
        )
