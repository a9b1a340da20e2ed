"""The turn schema: the JSON Schema a turn is decoded under, and its bounds.

Every turn is one JSON object: `{"calls": [{"tool": …, "input": {…}}]}` or
`{"final": "…"}`, either with an optional `"thought"` string. `turn_schema`
builds the schema of one (the calls shape, the final shape, or both);
`decoded_schema` is a value's schema as decoded (required fields first, numbers
bounded); the retry of a cut turn gets a bounded one (`short`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ..tools import Tool

__all__ = [
    "DECODED_CALLS",
    "FRACTION_DIGITS",
    "MAX_CALLS",
    "MAX_INTEGER",
    "MAX_THOUGHT",
    "RETRY_FINAL_CHARS",
    "RETRY_ITEMS",
    "RETRY_MARGIN_TOKENS",
    "RETRY_STRING_CHARS",
    "calls_shape",
    "decoded_schema",
    "final_shape",
    "input_schema",
    "turn_schema",
]


MAX_CALLS = 8
"""Calls of one turn that are kept; the rest are dropped."""
MAX_THOUGHT = 600
"""Characters of a thought that are kept."""
DECODED_CALLS = 1
"""Calls per turn that the schema lets a model write by default
(`Agent(calls_per_turn=...)` sets it, up to `MAX_CALLS`). A small model that may
write several tends to repeat its first call until a limit stops it; one call
a turn, with the results in between, is what it can do reliably."""


def _types(schema: Mapping[str, Any]) -> list[str]:
    """The JSON types a schema names (`type`, a string or a list), or those of its enum or const."""
    t = schema.get("type")
    if isinstance(t, str):
        return [t]
    values = schema["enum"] if "enum" in schema else [schema["const"]] if "const" in schema else None
    given = list(dict.fromkeys(_json_type(v) for v in values)) if isinstance(values, list) else None
    if isinstance(t, list):
        named = [str(x) for x in t]
        # a type the enum has no value of takes none (`"type": ["string", "null"]` without null)
        numbers = {"number", "integer"}
        kept = [k for k in named if given is None or k in given or (k in numbers and numbers & set(given))]
        return kept or named
    return given or []


def _json_type(v: object) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    return "string" if isinstance(v, str) else "array" if isinstance(v, list) else "object"


_THOUGHT = {"type": "string", "maxLength": MAX_THOUGHT}

FRACTION_DIGITS = 6
"""Digits after the point that a retry's schema allows in a `number` value."""
MAX_INTEGER = 2**53 - 1
"""The largest magnitude the schema allows in an `integer` value (and in a
retry's `number` value): the largest integer a double holds exactly."""
RETRY_STRING_CHARS = 100
"""Characters that a retry's schema allows in a `string` input value."""
RETRY_ITEMS = 8
"""Items that a retry's schema allows in an array (unless its `minItems` asks for more)."""
RETRY_FINAL_CHARS = 400
"""Characters that a retry's schema allows in a final answer."""
RETRY_MARGIN_TOKENS = 16
"""Tokens kept for the JSON around a retry's final answer, under `max_tokens`."""


def input_schema(t: Tool, *, bounded: bool = False) -> dict[str, Any]:
    """The schema of a call's input as decoded: the tool's schema (its `$ref`s inlined), with
    `decoded_schema`'s changes."""
    schema = _input_of(t)
    out = decoded_schema(schema, bounded=bounded)
    if isinstance(schema.get("properties"), Mapping):  # no keys named: a tool that takes no input
        out.setdefault("additionalProperties", False)  # (an MCP server's `"properties": {}`)
    return out


def _input_of(t: Tool) -> dict[str, Any]:
    """A tool's input schema, its `$ref`s inlined (`Tool.decoded`)."""
    return t.decoded if t.decoded is not None else t.schema


def decoded_schema(schema: Mapping[str, Any], *, bounded: bool = False) -> dict[str, Any]:
    """A value's schema as decoded: required fields first, integers bounded, at every depth.

    In every object, required fields come first, so that every required value is
    written before the model is offered any optional one. Integers are bounded
    by `MAX_INTEGER` (at most 16 digits). Numbers and strings stay free,
    exponents included (`8.854e-12`), unless `bounded`: a small model can write
    digits (`0.0000…`, `3.3333…`), text or items until `max_tokens` cuts the
    turn, so the retry of a cut turn allows at most `FRACTION_DIGITS` digits
    after the point and no exponent, at most `RETRY_STRING_CHARS` characters in
    a string (one without a pattern or format) and at most `RETRY_ITEMS` items
    in an array, where the schema allows that many. Enums and consts are bound
    already. An object whose schema names its keys but leaves
    `additionalProperties` out (as MCP servers' schemas do) is decoded with the
    keys it names only: a small model invents keys otherwise (`"date":
    {"date": …`) until `max_tokens`; the input check still takes the schema as
    given. One with `"properties": {}` names none, and takes any object, as
    without `properties` (a tool's input itself, though, is then `{}`:
    `input_schema`). The schema itself is left untouched.
    """
    out = dict(schema)
    kinds = _types(schema) if "type" in schema else []
    free = "enum" not in schema and "const" not in schema
    if free and ("integer" in kinds or ("number" in kinds and bounded)):
        low, high = _range(schema)
        if low <= MAX_INTEGER and high >= -MAX_INTEGER:  # else the schema's own range lies past
            out["minimum"] = max(out.get("minimum", -MAX_INTEGER), -MAX_INTEGER)  # the bound: kept
            out["maximum"] = min(out.get("maximum", MAX_INTEGER), MAX_INTEGER)
        step = 10.0**-FRACTION_DIGITS
        holds = math.isinf(low) or math.isinf(high) or math.ceil(low / step) * step <= high
        if "number" in kinds and "integer" not in kinds and holds:
            out.setdefault("multipleOf", step)  # where the range holds such a number
    if bounded and free and "string" in kinds and "pattern" not in schema and "format" not in schema:
        _cap(out, "minLength", "maxLength", RETRY_STRING_CHARS)
    if bounded and "array" in kinds:
        _cap(out, "minItems", "maxItems", RETRY_ITEMS)
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        required = schema.get("required") or ()
        named = {n: _decoded(properties[n], bounded) for n in properties}
        # A required key that the properties leave out takes what `additionalProperties`
        # allows (any value when it is left out), named so that the closed object admits it.
        extra = schema.get("additionalProperties", True)
        unnamed = {
            n: _decoded(extra, bounded) for n in required if n not in properties and extra is not False
        }
        out["properties"] = {
            **{n: named[n] for n in properties if n in required},
            **unnamed,
            **{n: named[n] for n in properties if n not in required},
        }
        if out["properties"]:  # `"properties": {}` names no key: any object, as without it
            out.setdefault("additionalProperties", False)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), Mapping):
            out[key] = decoded_schema(schema[key], bounded=bounded)
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            out[key] = [_decoded(o, bounded) for o in schema[key]]
    return out


def _range(schema: Mapping[str, Any]) -> tuple[float, float]:
    """The lowest and highest number a schema's bounds allow (exclusive ones as inclusive;
    unbounded: ±inf)."""
    low, high = -math.inf, math.inf
    for key, value in schema.items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            if key in ("minimum", "exclusiveMinimum"):
                low = max(low, value)
            elif key in ("maximum", "exclusiveMaximum"):
                high = min(high, value)
    return low, high


def _decoded(schema: Any, bounded: bool) -> Any:
    """`decoded_schema` of a sub-schema, which may also be `true` (any value) or `false` (none)."""
    return decoded_schema(schema, bounded=bounded) if isinstance(schema, Mapping) else schema


def _cap(schema: dict[str, Any], low: str, high: str, most: int) -> None:
    """Lower `schema[high]` to `most`, unless `schema[low]` asks for more."""
    if schema.get(low, 0) <= most:
        schema[high] = min(schema.get(high, most), most)


def _call_schema(t: Tool, bounded: bool) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"tool": {"const": t.name}, "input": input_schema(t, bounded=bounded)},
        "required": ["tool", "input"],
        "additionalProperties": False,
    }


def calls_shape(
    tools: Sequence[Tool], *, max_calls: int = DECODED_CALLS, thought: bool = True, bounded: bool = False
) -> dict[str, Any]:
    """The calls shape of a turn, calling any of `tools`; the thought, if any, after the calls."""
    items = [_call_schema(t, bounded) for t in tools]
    properties: dict[str, Any] = {
        "calls": {
            "type": "array",
            "items": items[0] if len(items) == 1 else {"anyOf": items},
            "minItems": 1,
            "maxItems": max_calls,
        },
    }
    if thought:
        properties["thought"] = _THOUGHT
    return {"type": "object", "properties": properties, "required": ["calls"], "additionalProperties": False}


def final_shape(
    *, thought: bool = True, max_length: int | None = None, output: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The final shape of a turn; the thought, if any, after the answer.

    Args:
        thought: Allow a thought.
        max_length: The most characters of a text answer.
        output: The schema of a typed answer (decoded as `decoded_schema` does,
            bounded when `max_length` is set); `None` for text.
    """
    final: dict[str, Any]
    if output is not None:
        final = decoded_schema(output, bounded=max_length is not None)
    else:
        final = {"type": "string"}
        if max_length is not None:
            final["maxLength"] = max_length
    properties: dict[str, Any] = {"final": final}
    if thought:
        properties["thought"] = _THOUGHT
    return {"type": "object", "properties": properties, "required": ["final"], "additionalProperties": False}


def turn_schema(
    tools: Sequence[Tool],
    tool_choice: str = "auto",
    *,
    short: bool = False,
    max_tokens: int | None = None,
    calls_per_turn: int = DECODED_CALLS,
    output: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON Schema of one turn: the calls shape, the final shape, or both.

    A turn decoded under it has at most `calls_per_turn` calls (parsing keeps
    up to `MAX_CALLS`, for models decoded without it), numbers of bounded
    length, and any thought after the calls or the answer, never before.

    Args:
        tools: The agent's tools; with none, only a final is possible.
        tool_choice: `"auto"` (either shape), `"required"` (calls only),
            `"none"` (final only) or a tool's name (calls of that tool only).
        short: The schema of a retry after a cut turn: no thought, one call,
            bounded numbers, strings and arrays (see `decoded_schema`) and a
            text final of at most `RETRY_FINAL_CHARS`, so that the turn closes.
        max_tokens: The generation's token limit: a short final also stays
            `RETRY_MARGIN_TOKENS` under it (a token may be one character).
        calls_per_turn: The calls shape's `maxItems`, 1 to `MAX_CALLS`.
        output: The JSON Schema of a typed answer: the final shape is then
            `{"final": <a value of it>}`; `None` (the default) for text.
    """
    thought = not short
    length = RETRY_FINAL_CHARS
    if max_tokens is not None:
        length = max(1, min(length, max_tokens - RETRY_MARGIN_TOKENS))
    final = final_shape(thought=thought, max_length=length if short else None, output=output)
    most = 1 if short else calls_per_turn
    if tool_choice == "none" or not tools:
        shapes = [final]
    elif tool_choice == "auto":
        shapes = [calls_shape(tools, max_calls=most, thought=thought, bounded=short), final]
    elif tool_choice == "required":
        shapes = [calls_shape(tools, max_calls=most, thought=thought, bounded=short)]
    else:
        chosen = [t for t in tools if t.name == tool_choice]
        shapes = [calls_shape(chosen, max_calls=most, thought=thought, bounded=short)]
    return {"anyOf": shapes}
