"""Which tool a call names: the tools of a turn's schema, and the calls already made.

A small model with several tools often names the wrong one, while the tool
the request makes likeliest by the fit score is more often the answer's
(`docs/quality.md`, "tool pick"). `ToolPick` nudges the tool name towards the
tools that fit; `tool_texts` says which tools a schema offers, found where
the hand-over says a call's tool name and input sit (`CallSite`).

In a later turn, the same model often writes the call it just made again
instead of the next one of a chain (the capital of a country looked up twice,
not the population of that capital). `NewCalls` leans such a turn's tool name
away from a call that already ran (`aerix.model.Handover.calls`, each as
`call_key`); `written_call` reads the call a turn writes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from ....model import JsonPath
from ._site import CallSite

__all__ = ["call_key", "tool_texts", "written_call"]


def _at(schema: object, path: JsonPath) -> Iterator[dict[str, Any]]:
    """The schemas a JSON Schema gives the values at `path`: an object's property by key, an
    array's `items` for `None`, through each alternative of an `anyOf`, `oneOf` or `allOf`."""
    if not isinstance(schema, dict):
        return
    for key in ("anyOf", "oneOf", "allOf"):
        for alternative in schema.get(key) or ():
            yield from _at(alternative, path)
    if not path:
        yield schema
        return
    properties = schema.get("properties")
    if path[0] is None:
        yield from _at(schema.get("items"), path[1:])
    elif isinstance(properties, dict):
        yield from _at(properties.get(path[0]), path[1:])


def tool_texts(schema: object, site: CallSite) -> dict[str, str]:
    """The tools a schema offers, by name, each as the fit score reads it from the schema
    alone: `"name(fields)"` (the input's top-level fields, in order).

    A tool is a call's object where `site` says calls sit, with a constant tool name
    and an input object (`aerix.turn.calls_shape`); without calls, a schema offers none.
    """
    found: dict[str, str] = {}
    if site.call is None:
        return found
    for node in _at(schema, site.call):
        properties = node.get("properties")
        if not isinstance(properties, dict):
            continue
        tool, given = properties.get(site.tool_key), properties.get(site.input_key)
        if isinstance(tool, dict) and isinstance(tool.get("const"), str) and isinstance(given, dict):
            fields = given.get("properties")
            names = ", ".join(fields) if isinstance(fields, dict) else ""
            found.setdefault(tool["const"], f"{tool['const']}({names})")
    return found


def call_key(tool: str, given: object) -> str:
    """One call as a string that two calls share when they name the same tool with the same
    input (its keys in any order)."""
    return json.dumps([tool, given], sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def written_call(text: str, input_key: str) -> str | None:
    """The `call_key` of a call written as compact JSON from its tool name's first
    character on, with its input under `input_key`
    (`capital_of","input":{"country":"Quenland"}}`); `None` for text that is not such a call."""
    name, quote, rest = text.partition('"')
    field = json.dumps(input_key) + ":"
    at = rest.find(field)
    if not quote or at < 0:
        return None
    try:
        given, _ = json.JSONDecoder().raw_decode(rest, at + len(field))
    except ValueError:
        return None
    return call_key(name, given)
