"""The schema walk: what the value rules read from a JSON Schema. Its objects' fields by
type, with their descriptions; the number fields beside each field; the fields of a
series; each object's keys; the schemas at a path (where a call's tool name sits)."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Sequence
from typing import Any

from ....model import JsonPath

__all__ = [
    "NUMBER_TYPES",
    "at_path",
    "constants",
    "enum_keys",
    "fields",
    "in_series",
    "number_siblings",
    "object_keys",
    "string_series",
]

NUMBER_TYPES = ("number", "integer")
"""The JSON Schema types of a number field."""


def _nodes(schema: object) -> Iterator[dict[str, Any]]:
    """Each schema (dict) in a JSON Schema, at any depth."""
    if isinstance(schema, dict):
        yield schema
        for value in schema.values():
            yield from _nodes(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _nodes(value)


def _objects(schema: object) -> Iterator[dict[str, Any]]:
    """Each object of a JSON Schema with `properties`, at any depth."""
    return (node for node in _nodes(schema) if isinstance(node.get("properties"), dict))


def _constant(node: object) -> bool:
    return isinstance(node, dict) and isinstance(node.get("const"), str)


def _typed(properties: dict[str, Any], types: Sequence[str]) -> Iterator[tuple[str, str]]:
    for key, prop in properties.items():
        if isinstance(prop, dict) and prop.get("type") in types:
            description = prop.get("description")
            yield key, description if isinstance(description, str) else ""


def fields(schema: object, types: Sequence[str]) -> Iterator[tuple[str, str]]:
    """Each property of a JSON Schema of one of `types`, at any depth: its key and description."""
    for node in _objects(schema):
        yield from _typed(node["properties"], types)


def number_siblings(schema: object) -> dict[str, set[str]]:
    """Each property of a JSON Schema that shares an object with number or integer
    properties, at any depth, with those properties (its own key included if it is one)."""
    found: dict[str, set[str]] = {}
    for node in _objects(schema):
        numbers = {key for key, _ in _typed(node["properties"], NUMBER_TYPES)}
        for key in node["properties"] if numbers else ():
            found.setdefault(key, set()).update(numbers)
    return found


def string_series(schema: object) -> set[str]:
    """The string properties of a JSON Schema, at any depth, that are one of a series with
    another string property of their object (`in_series`: `city1`, `city2`;
    `from_timezone`, `to_timezone`)."""
    found: set[str] = set()
    for node in _objects(schema):
        strings = [key for key, _ in _typed(node["properties"], ("string",))]
        found.update(key for key in strings if in_series(key, strings))
    return found


def constants(schema: object) -> tuple[set[str], set[str]]:
    """The string constants of a JSON Schema (`"const": "get_weather"`: a tool's name), at any
    depth, and the keys of the properties that are such a constant (`tool`)."""
    found = {node["const"] for node in _nodes(schema) if _constant(node)}
    keys = {key for node in _objects(schema) for key, prop in node["properties"].items() if _constant(prop)}
    return found, keys


def enum_keys(schema: object) -> set[str]:
    """The keys of the string properties of a JSON Schema, at any depth, that take one of an
    `enum`'s values (`"unit": {"enum": ["celsius", "fahrenheit"]}`)."""
    return {
        key
        for node in _objects(schema)
        for key, prop in node["properties"].items()
        if isinstance(prop, dict)
        and isinstance(prop.get("enum"), list)
        and any(isinstance(v, str) for v in prop["enum"])
    }


def object_keys(schema: object) -> list[tuple[list[str], set[str]]]:
    """The keys of each object of a JSON Schema, at any depth, in order, with its required ones."""
    found = []
    for node in _objects(schema):
        required = node.get("required")
        found.append((list(node["properties"]), set(required) if isinstance(required, list) else set()))
    return found


def at_path(schema: object, path: JsonPath) -> Iterator[dict[str, Any]]:
    """The schemas a JSON Schema gives the values at `path`: an object's property by key, an
    array's `items` for `None`, through each alternative of an `anyOf`, `oneOf` or `allOf`."""
    if not isinstance(schema, dict):
        return
    for key in ("anyOf", "oneOf", "allOf"):
        for alternative in schema.get(key) or ():
            yield from at_path(alternative, path)
    if not path:
        yield schema
        return
    properties = schema.get("properties")
    if path[0] is None:
        yield from at_path(schema.get("items"), path[1:])
    elif isinstance(properties, dict):
        yield from at_path(properties.get(path[0]), path[1:])


_ORDER_WORDS = frozenset(
    {"first", "second", "third", "initial", "final", "start", "end", "begin", "from", "to", "min", "max"}
    | {"lower", "upper", "low", "high", "x", "y", "z"}
)
"""Words of a field's name that give its place in a series (`initial_temperature`, `x`)."""


def in_series(key: str, others: Collection[str]) -> bool:
    """Whether field `key` is one of a series among `others`: the same name but for a number
    or a word of order (`mass1`, `mass2`; `initial_temperature`, `final_temperature`;
    `x`, `y`), so that the fields take the values in the order the messages give them."""

    def rest(k: str) -> tuple[frozenset[str], bool]:
        words = [w.lower() for w in re.findall(r"[A-Za-z]+|\d+", k)]
        kept = frozenset(w for w in words if not w.isdigit() and w not in _ORDER_WORDS)
        return kept, len(kept) < len(words)

    mine, marked = rest(key)
    return marked and any(o != key and rest(o) == (mine, True) for o in others)
