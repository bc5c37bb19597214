"""Reading what `inferwatch dashboards lint` is given: classic dashboard JSON (a file, an API export, a
Kubernetes resource), schema v2 (the resource and Grafana 12's JSON model, turned into the classic shape the
rules read), and Kubernetes YAML (ConfigMaps, GrafanaDashboards, Helm templates of them). Never raises on what
it reads: what is not a dashboard comes back with the reason."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from inferwatch._files import read_input
from inferwatch.yamlio import safe_load_all

__all__ = ["read_dashboards", "from_v2", "SUFFIXES"]

SUFFIXES = (".json", ".yaml", ".yml")  # what a folder given to lint is searched for


def _dicts(value) -> list[dict]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _text(value) -> str:
    return value if isinstance(value, str) else ""


def _map(value) -> dict:
    """`value` if it is a mapping, else an empty one: a field of the wrong type reads as absent."""
    return value if isinstance(value, dict) else {}


def read_dashboards(path) -> list[tuple[str, dict | None, str, str]]:
    """(label, classic dashboard, "", "") per dashboard in the file, or (label, None, rule, why) where there is
    none: `invalid-json`, `not-a-dashboard`. A ConfigMap key is labelled file:key. A folder is read file by file
    (its *.json, *.yaml and *.yml, below it too, hidden folders aside), passing over files that are no dashboard
    (package.json, values.yaml) but not those that do not parse; `-` is standard input."""
    if str(path) != "-" and Path(path).is_dir():
        each = [found for file in _dashboard_files(Path(path)) for found in read_dashboards(file)]
        return [f for f in each if f[2] != "not-a-dashboard" or " points at " in f[3]] or [
            (str(path), None, "not-a-dashboard", "a folder with no dashboard in a .json, .yaml or .yml file")
        ]
    name = "<stdin>" if str(path) == "-" else str(path)
    try:
        data = read_input(path)  # missing, a folder, over the cap: InputError, exit 2
        text = data.decode("utf-8-sig")
    except OSError as err:
        return [(name, None, "not-a-dashboard", f"cannot read it: {err.strerror or err}")]
    except UnicodeDecodeError as err:
        return [(name, None, "invalid-json", f"not UTF-8 text (byte {err.start})")]
    try:
        docs = [json.loads(text)]
    except RecursionError:
        return [(name, None, "invalid-json", "nested too deeply to read")]
    except ValueError as err:
        manifests, why = _manifests(text)
        if why:
            return [(name, None, "not-a-dashboard", why)]
        if manifests is None:
            conflict = "; it holds git merge-conflict markers" if re.search(r"^<<<<<<< ", text, re.M) else ""
            why = (
                "the file is empty"
                if not text.strip()
                else _not_yaml(text)
                if name.endswith((".yaml", ".yml"))
                else f"not JSON: {err}"
            )
            return [(name, None, "invalid-json", why + conflict)]
        docs = manifests
    found: list[tuple[str, dict | None, str, str]] = []
    pointers: list[tuple[str, None, str, str]] = []
    for label, doc in _documents(docs, name):
        if isinstance(doc, _NotJson):
            found.append((label, None, "invalid-json", str(doc)))
            continue
        board, problem = _unwrap(doc)
        if not problem:
            found.append((label, board, "", ""))
        else:
            (pointers if " points at " in problem else found).append((label, None, "not-a-dashboard", problem))
    boards = any(board is not None for _, board, _, _ in found)
    return found + (pointers if not boards else [])  # a GrafanaDashboard beside the ConfigMap it points at


def _dashboard_files(folder: Path) -> list[Path]:
    """The files of a folder lint reads, sorted, hidden folders (.git) aside."""
    return sorted(
        file
        for file in folder.rglob("*")
        if file.suffix in SUFFIXES
        and file.is_file()
        and not any(part.startswith(".") for part in file.relative_to(folder).parts)
    )


class _NotJson(str):
    """A ConfigMap key whose value does not parse."""


def _manifests(text: str) -> tuple[list | None, str]:
    """The documents of a Kubernetes YAML file (ConfigMaps, GrafanaDashboards), a Helm template's with its actions
    blanked; (None, why) for YAML that holds no Kubernetes resources, (None, "") for text that is not YAML."""
    if "{{" in text and re.search(r"\{\{-?\s*(?:/\*|\.Values|\$|if\b|end\b|include\b|template\b|toYaml\b|`)", text):
        text = _unhelm(text)
    elif text.lstrip()[:1] in ("{", "["):
        return None, ""
    try:
        docs = [d for d in safe_load_all(text) if d is not None]
    except (yaml.YAMLError, RecursionError):
        return None, ""
    if docs and all(isinstance(d, dict) and "kind" in d for d in docs):
        return docs, ""
    if docs and all(isinstance(d, (dict, list)) for d in docs):
        return None, "YAML, but no Kubernetes resource (a ConfigMap, GrafanaDashboard or List) holding a dashboard"
    return None, ""


def _not_yaml(text: str) -> str:
    """Why a .yaml file does not parse, in one line: 'not YAML: <problem> (line N)'."""
    try:
        safe_load_all(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        return f"not YAML: {problem}" + (f" (line {mark.line + 1})" if mark else "")
    except RecursionError:
        return "not YAML: nested too deeply to read"
    return "YAML, but neither a dashboard nor a Kubernetes resource holding one"


def _unhelm(text: str) -> str:
    """A Helm template read as plain YAML: comments and lines that are only actions (`{{- if ... }}`) dropped,
    raw strings ({{`...`}}) kept, an inline `{{ if }}a{{ else }}b{{ end }}` as `a`, any other action as null.
    kube-prometheus-stack ships its dashboards this way."""
    text = re.sub(r"\{\{-?\s*/\*.*?\*/\s*-?\}\}", "", text, flags=re.S)
    text = "\n".join(line for line in text.splitlines() if not re.fullmatch(r"\s*(\{\{(?!`).*?\}\}\s*)+", line))
    text = re.sub(r"\{\{`(.*?)`\}\}", lambda m: m.group(1).replace("{{", "\0").replace("}}", "\1"), text, flags=re.S)
    text = re.sub(r"\{\{-?\s*if\b.*?\}\}(.*?)(?:\{\{-?\s*else\s*-?\}\}.*?)?\{\{-?\s*end\s*-?\}\}", r"\1", text)
    text = re.sub(r"\{\{.*?\}\}", "null", text)
    return text.replace("\0", "{{").replace("\1", "}}")


def _documents(docs: list, name: str):
    """(label, document) per dashboard: a ConfigMap's `*.json` keys one by one (labelled file:key), a List's items."""
    for doc in docs:
        kind = doc.get("kind") if isinstance(doc, dict) else None
        if kind == "List":
            yield from _documents([i for i in doc.get("items") or [] if isinstance(i, dict)], name)
        elif kind == "ConfigMap":
            data = _map(doc.get("data"))
            keys = [k for k in data if str(k).endswith(".json")]
            if not keys:
                yield name, {"kind": "ConfigMap"}
            for key in keys:
                try:
                    yield f"{name}:{key}", json.loads(str(data[key]))
                except ValueError as err:
                    yield f"{name}:{key}", _NotJson(f"not JSON: {err}")
        else:
            yield name, doc


def _unwrap(doc) -> tuple[dict, str]:
    """The classic dashboard inside an API export or a Kubernetes resource (a v2 one converted), or why there is
    none."""
    if not isinstance(doc, dict):
        return {}, f"a JSON {_json_type(doc)}, not a Grafana dashboard object"
    if doc.get("kind") == "ConfigMap":
        return {}, "a ConfigMap with no `*.json` key: no dashboard in it"
    if isinstance(doc.get("dashboard"), dict) and "panels" not in doc:  # GET /api/dashboards/uid/...
        doc = doc["dashboard"]
    spec = doc.get("spec")
    if isinstance(spec, dict) and str(doc.get("kind", "")).endswith("Dashboard"):
        if isinstance(spec.get("json"), str):  # grafana-operator GrafanaDashboard
            try:
                return _unwrap(json.loads(spec["json"]))
            except ValueError as err:
                return {}, f"spec.json is not JSON: {err}"
        for key, what in (
            ("url", "the URL"),
            ("configMapRef", "the ConfigMap"),
            ("grafanaCom", "grafana.com id"),
            ("gzipJson", "gzipped JSON"),
        ):
            if spec.get(key) and not any(k in spec for k in ("panels", "elements", "rows")):
                where = spec[key]
                if isinstance(where, dict):
                    where = " ".join(f"{k} {v}" for k, v in where.items() if isinstance(v, (str, int)))
                return {}, f"a {doc.get('kind')} that points at {what} {_short(where)}: lint that dashboard"
        doc = spec
    if isinstance(doc.get("elements"), dict) and "panels" not in doc:  # schema v2 (Grafana 12+): its JSON model
        try:
            return from_v2(doc), ""
        except RecursionError:
            return {}, "a schema v2 layout nested too deeply to read"
    if not any(key in doc for key in ("panels", "rows", "templating", "schemaVersion")):
        return {}, "no panels, rows, templating or schemaVersion: not a Grafana dashboard"
    return doc, ""


def _json_type(value) -> str:
    return {list: "list", str: "string", int: "number", float: "number", bool: "boolean"}.get(type(value), "null")


def _short(value) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."


# --- schema v2 ----------------------------------------------------------------------------------------------

_V2_VARIABLES = {
    "QueryVariable": "query",
    "DatasourceVariable": "datasource",
    "CustomVariable": "custom",
    "ConstantVariable": "constant",
    "IntervalVariable": "interval",
    "TextVariable": "textbox",
    "AdhocVariable": "adhoc",
    "GroupByVariable": "groupby",
    "SwitchVariable": "switch",
}


def _v2_datasource(query: dict, spec: dict):
    """v2beta1 names the datasource in the query ({"name": uid} beside "group": plugin); v2alpha1 in the PanelQuery
    ({"type", "uid"}, the plugin as the query's kind)."""
    if isinstance(spec.get("datasource"), dict):
        return spec["datasource"]
    named = query.get("datasource")
    kind = _text(query.get("group")) or (_text(query.get("kind")) if query.get("kind") != "DataQuery" else "")
    if isinstance(named, dict) and ("name" in named or "uid" in named):
        return {"type": kind or "prometheus", "uid": named.get("name", named.get("uid"))}
    return {"type": kind} if kind else None


def _v2_target(query_item: dict) -> dict:
    """A v2 PanelQuery as a classic target: the query's own fields, refId, datasource and hide."""
    spec = _map(query_item.get("spec"))
    query = _map(spec.get("query"))
    target = dict(_map(query.get("spec")))
    target["refId"] = spec.get("refId", target.get("refId"))
    datasource = _v2_datasource(query, spec)
    if datasource is not None:
        target["datasource"] = datasource
    if spec.get("hidden") is True:
        target["hide"] = True
    return target


def _v2_panel(element: dict) -> dict:
    """A v2 element (Panel or LibraryPanel) as a classic panel: title, type, fieldConfig, targets."""
    spec = _map(element.get("spec"))
    panel = {k: spec[k] for k in ("id", "title", "description", "links") if k in spec}
    if element.get("kind") == "LibraryPanel":
        panel["libraryPanel"] = spec.get("libraryPanel")
        return panel
    viz = _map(spec.get("vizConfig"))
    panel["type"] = _text(viz.get("group")) or (_text(viz.get("kind")) if viz.get("kind") != "VizConfig" else "")
    viz_spec = _map(viz.get("spec"))
    panel["fieldConfig"], panel["options"] = viz_spec.get("fieldConfig"), viz_spec.get("options")
    data = _map(spec.get("data"))
    group = _map(data.get("spec"))
    panel["targets"] = [_v2_target(q) for q in _dicts(group.get("queries"))]
    return panel


def _v2_layout(layout, elements: dict, out: list, repeat: str = "") -> None:
    """Panels in layout order; a repeated row becomes a row panel that repeats, a repeated item a panel."""
    if isinstance(layout, list):
        for item in layout:
            _v2_layout(item, elements, out, repeat)
        return
    if not isinstance(layout, dict):
        return
    spec = _map(layout.get("spec"))
    again = _map(spec.get("repeat"))
    element = _map(spec.get("element"))
    if isinstance(element.get("name"), str) and element["name"] in elements:
        panel = dict(elements.pop(element["name"]))
        if again.get("value"):
            panel["repeat"] = again["value"]
        out.append(panel)
    elif again.get("value") or "title" in spec:  # a row or a tab
        out.append({"type": "row", "title": _text(spec.get("title")), "repeat": again.get("value"), "panels": []})
    for value in spec.values():
        if isinstance(value, (dict, list)) and value is not element:
            _v2_layout(value, elements, out)


def from_v2(spec: dict) -> dict:
    """A schema v2 dashboard (the resource's spec, or Grafana 12+'s JSON model) as the classic shape the rules read:
    panels with targets and a datasource each, variables under templating. No schemaVersion: v2 has none."""
    elements = {name: _v2_panel(e) for name, e in spec["elements"].items() if isinstance(e, dict)}
    panels: list[dict] = []
    _v2_layout(spec.get("layout"), elements, panels)
    panels += elements.values()  # elements no layout places
    variables = []
    for var in _dicts(spec.get("variables")):
        vspec = _map(var.get("spec"))
        query = vspec.get("query")
        out = {
            "name": vspec.get("name"),
            "type": _V2_VARIABLES.get(_text(var.get("kind")), _text(var.get("kind"))),
            "definition": vspec.get("definition"),
        }
        if isinstance(query, dict):  # a DataQuery
            inner = _map(query.get("spec"))
            out["query"] = inner.get("query", inner.get("expr", vspec.get("definition")))
            out["datasource"] = _v2_datasource(query, vspec)
        else:
            out["query"] = vspec.get("pluginId") if var.get("kind") == "DatasourceVariable" else query
        variables.append(out)
    board = {k: spec[k] for k in ("title", "links", "description") if k in spec}
    board.update({"panels": panels, "templating": {"list": variables}})
    return board
