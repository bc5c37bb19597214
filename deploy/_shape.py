"""Other people's YAML has any shape: these read a node as the mapping or list a check expects, or as empty."""

from __future__ import annotations

__all__ = ["as_map", "as_list", "dig", "yaml_or_none"]


def as_map(node) -> dict:
    return node if isinstance(node, dict) else {}


def as_list(node) -> list:
    return node if isinstance(node, list) else []


def dig(node, *keys) -> dict:
    """`node[k1][k2]...` as a mapping, `{}` wherever a step is missing or not a mapping."""
    for key in keys:
        node = as_map(node).get(key)
    return as_map(node)


def yaml_or_none(text):
    """YAML embedded in something else (a ConfigMap key, what a server answers): its value, or None when it is not
    YAML, so the caller says what it could not read instead of raising."""
    import yaml

    from inferwatch.yamlio import safe_load

    if not isinstance(text, str):
        return None
    try:
        return safe_load(text)
    except (yaml.YAMLError, TypeError, ValueError):
        return None
