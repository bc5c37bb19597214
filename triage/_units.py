"""The unit of triage: a model, or a model within one deployment when its name is served in several at once.

Two teams serving `llama-3-8b` in namespaces `a` and `b` (or two clusters behind one Thanos) run two
deployments: one can queue while the other is fine, and blending them would hide the one and slander the other.
Every query keeps the deployment labels (`DEPLOYMENT`: cluster, namespace); a model whose engine series are in
more than one deployment at the same step is judged per deployment, named `llama-3-8b (namespace=a)`. Every
other model is one unit under its bare name, all its series together, as before: a front door scraped in
another namespace than its engine, or a model that moved namespace between the baseline and the incident, is
not split. Pure functions on the long frames of _fetch.
"""

from __future__ import annotations

import re

from inferwatch.errors import InferwatchError
from inferwatch.triage._signals import DEPLOYMENT

__all__ = ["Unit", "unit_name", "split_deployments", "asked_models", "asked_units"]

# a unit name as the report writes it, `llama-3-8b (cluster=west, namespace=a)`, given back to --model
UNIT_NAME = re.compile(rf"(?P<model>.+) \((?:{'|'.join(DEPLOYMENT)})=[^()]*\)")
PRESENCE = "engine_series"  # the signal whose rows say where a model's engines run: llm_requests_running

Unit = tuple[str, tuple[tuple[str, str], ...]]  # (model, ((label, value), ...)): the deployment's labels (_deployment)


def unit_name(model: str, deployment: tuple[tuple[str, str], ...]) -> str:
    """`model`, or `model (cluster=x, namespace=a)` for one deployment of a model served in several."""
    if not deployment:
        return model
    return f"{model} ({', '.join(f'{k}={v}' for k, v in deployment)})"


def _deployment(labels: tuple[str, ...], engine: bool) -> tuple[tuple[str, str], ...]:
    """A split model's deployment as its non-empty (label, value) pairs; `namespace=""` for an engine deployment
    with none (a static scrape config beside a team's namespace), so that it is named and asked for apart from
    the bare model name, which is left to series no one deployment claims."""
    pairs = tuple((label, value) for label, value in zip(DEPLOYMENT, labels, strict=True) if value)
    return pairs or (((DEPLOYMENT[-1], ""),) if engine else ())


def _engine_deployments(frames) -> dict[str, set[tuple[str, ...]]]:
    """{model: the deployments (DEPLOYMENT values) of its engine series} for the models whose engine series are
    in more than one deployment at one step, in any window: the models to split."""
    seen: dict[str, set[tuple[str, ...]]] = {}
    split: set[str] = set()
    for frame in frames:
        if frame is None or not len(frame) or not set(DEPLOYMENT) <= set(frame.columns):
            continue
        rows = frame[frame["signal"] == PRESENCE]
        if not len(rows):
            continue
        at_once = rows.groupby(["model", "t"], sort=False)[list(DEPLOYMENT)].nunique().max(axis=1)
        split |= set(at_once[at_once > 1].index.get_level_values(0))
        for model, *labels in rows[["model", *DEPLOYMENT]].drop_duplicates().itertuples(index=False):
            seen.setdefault(model, set()).add(tuple(labels))
    return {model: seen[model] for model in split}


def _home(labels: tuple[str, ...], engines: set[tuple[str, ...]]) -> tuple[str, ...]:
    """The engine deployment that series with deployment `labels` belong to: their own, else the one engine
    deployment that agrees with every label they carry (a front door scraped without `cluster` by a central
    Prometheus), else their own (none agrees, or several do: a front door with no labels before two)."""
    if labels in engines:
        return labels
    agree = [d for d in engines if all(not value or value == mine for value, mine in zip(labels, d, strict=True))]
    return agree[0] if len(agree) == 1 else labels


def _renamed(frame, engines: dict[str, set[tuple[str, ...]]], units: dict[str, Unit]):
    """A copy of `frame` whose rows of the split models (`engines`) carry their unit's name; `units` learns each
    unit."""
    import numpy as np
    import pandas as pd

    mine = frame["model"].isin(engines).to_numpy()
    if not mine.any():
        return frame
    frame = frame.copy()
    keys = pd.MultiIndex.from_frame(frame.loc[mine, ["model", *DEPLOYMENT]])
    distinct = keys.unique()
    names = np.empty(len(distinct), dtype=object)
    for i, (model, *labels) in enumerate(distinct):
        home = _home(tuple(labels), engines[model])
        deployment = _deployment(home, home in engines[model])
        names[i] = unit_name(model, deployment)
        units[names[i]] = (model, deployment)
    frame.loc[mine, "model"] = names[distinct.get_indexer(keys)]
    return frame


def split_deployments(frames) -> tuple[list, dict[str, Unit]]:
    """The frames with `model` holding each row's unit name, and {unit name: (model, deployment labels)} for
    every unit with rows."""
    engines = _engine_deployments(frames)
    out: list = []
    units: dict = {}
    for frame in frames:
        if frame is None or not len(frame):
            out.append(frame)
            continue
        for model in frame["model"].unique():
            units.setdefault(model, (model, ()))
        if engines and set(DEPLOYMENT) <= set(frame.columns):
            frame = _renamed(frame, engines, units)
        out.append(frame)
    used = {m for frame in out if frame is not None and len(frame) for m in frame["model"].unique()}
    return out, {name: unit for name, unit in units.items() if name in used}


def asked_models(text: str) -> tuple[str, ...]:
    """The models a --model value may name: itself, and for a unit name the report wrote, its model last (a
    model may be named `mistral (namespace=x)` itself)."""
    match = UNIT_NAME.fullmatch(text)
    return (text, match["model"]) if match else (text,)


def asked_units(asked, judged: list[str], units: dict[str, Unit]) -> list[str]:
    """The units (of `judged`) that --model values ask for, in their order: every deployment of a model, or the
    one a unit name names; an InferwatchError names the deployments there are when it names none of them."""
    out: dict[str, None] = {}
    for text in asked:
        mine = [name for name in judged if units.get(name, (name, ()))[0] == text] or [
            name for name in judged if name == text
        ]
        if not mine:
            model = asked_models(text)[-1]
            there = [name for name in judged if units.get(name, (name, ()))[0] == model]
            if there == [model]:
                raise InferwatchError(f"--model {text!r}: {model} is served in one deployment here: ask for {model!r}")
            raise InferwatchError(
                f"--model {text!r}: no such deployment; {model} is served as {', '.join(map(repr, there)) or 'nothing'}"
            )
        out.update(dict.fromkeys(mine))
    return list(out)
