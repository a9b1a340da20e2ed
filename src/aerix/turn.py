"""The turn contract, as pure functions: the system message, the turn schema,
parsing a turn, and the messages that carry results and retries back.

Every turn is one JSON object: `{"calls": [{"tool": …, "input": {…}}]}` or
`{"final": "…"}`, either with an optional `"thought"` string.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .tools import Tool

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
    "BadTurn",
    "ParsedCall",
    "Turn",
    "decoded_schema",
    "fit_text",
    "input_schema",
    "parse_turn",
    "render_answer",
    "render_results",
    "render_retry",
    "render_system",
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


CONTRACT = """\
Answer every turn with one JSON object and nothing else. Either call tools:
{"calls":[{"tool":"<tool name>","input":{<the tool's fields>}}]}
or give your final answer:
{"final":"<your answer>"}
Either object may also have a short "thought" string. After your calls you \
get their results, then you answer again. Call only the tools listed below, \
with their fields. If no tool fits the request, give your final answer."""

CONTRACT_NO_TOOLS = """\
Answer with one JSON object and nothing else:
{"final":"<your answer>"}
It may also have a short "thought" string."""

_TEXT_FINAL = '{"final":"<your answer>"}'
_TYPED_FINAL = '{"final":<your answer, a JSON value of the answer type below>}'


def _contract(tools: bool, typed: bool, calls: int) -> str:
    """The fixed statement of the contract, for an agent with or without tools, a typed answer
    or text, and `calls` calls a turn at most."""
    text = CONTRACT if tools else CONTRACT_NO_TOOLS
    if typed:
        text = text.replace(_TEXT_FINAL, _TYPED_FINAL)
    if tools and calls > 1:
        text = text.replace("Either object may", f"One turn may hold up to {calls} calls. Either object may")
    return text


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


_BOUNDS = (
    ("minimum", "at least {}"),
    ("exclusiveMinimum", "more than {}"),
    ("maximum", "at most {}"),
    ("exclusiveMaximum", "less than {}"),
    ("minLength", "at least {} characters"),
    ("maxLength", "at most {} characters"),
    ("minItems", "at least {} items"),
    ("maxItems", "at most {} items"),
)


def _notes(schema: Mapping[str, Any]) -> list[str]:
    """What a schema says of its value beyond its type: enum, const, bounds, pattern, format, default."""
    notes = []
    if "enum" in schema:
        notes.append("one of " + ", ".join(json.dumps(v) for v in schema["enum"]))
    if "const" in schema:
        notes.append(f"always {json.dumps(schema['const'])}")
    for key, text in _BOUNDS:
        # a bound at ±MAX_INTEGER (zod's `.int()`) says no more than "an integer": left unsaid
        if key in schema and not isinstance(schema[key], bool) and abs(schema[key]) < MAX_INTEGER:
            note = text.format(json.dumps(schema[key]))
            notes.append(note[:-1] if schema[key] == 1 and note.endswith("s") else note)  # 1 item
    if "pattern" in schema:
        notes.append(f"matching {schema['pattern']}")
    if "format" in schema:
        notes.append(f"format {schema['format']}")
    if "default" in schema:
        notes.append(f"default {json.dumps(schema['default'])}")
    return notes


def _shape(schema: Mapping[str, Any] | bool, indent: str) -> tuple[str, list[str], list[str]]:
    """How a value of `schema` reads: its kind (`string`, `array of object`, …), the notes on
    it, and the lines of its sub-fields, indented by `indent`."""
    if isinstance(schema, bool):  # `true` takes any value, `false` none
        return ("any JSON value" if schema else "no value: leave it out"), [], []
    kinds = _types(schema)
    notes = _notes(schema)
    lines: list[str] = []
    options = schema.get("anyOf", schema.get("oneOf"))
    if isinstance(options, list) and options and all(_requires_only(o) for o in options):
        # "id or name": choices that only require some of the object's own fields
        notes.append("give " + " or ".join(" and ".join(map(str, o["required"])) for o in options))
    elif isinstance(options, list) and options:
        choices = [o for o in options if isinstance(o, Mapping)]
        # A typed parent's keywords hold for each choice too: the choices narrow its kind rather
        # than add to it, and each reads as a schema of its own (`_narrowed`).
        inherited = "type" in schema
        if inherited:
            choices = [_narrowed(o, schema) for o in choices]
        shapes = [_shape(o, indent + "  ") for o in choices]
        fielded = [i for i, (_, _, sub) in enumerate(shapes) if sub]
        nulls = sum(_types(o) == ["null"] for o in choices)
        if not fielded or (len(fielded) == 1 and nulls == len(choices) - 1):  # `string or null`, and
            # one with fields that may be null (`object or null`, pydantic's `Address | None`)
            if not inherited:  # inherited, they are of the kind the parent says already
                kinds += [k for k, _, _ in shapes]
            noted = list(dict.fromkeys(tuple(ns) for _, ns, _ in shapes if ns))
            if len(noted) > 1:  # each choice's own: `at least 8 characters, or matching ^X`
                notes.append(", or ".join(" and ".join(ns) for ns in noted))
            else:
                notes += [n for ns in noted for n in ns if n not in notes]
            lines += [line[2:] for line in shapes[fielded[0]][2]] if fielded else []  # up to this field
        else:
            if inherited:  # the shapes say the kind: "one of 2 shapes", each an object
                kinds = []
            kinds.append(f"one of {len(shapes)} shapes")
            for i, (kind, ns, sub) in enumerate(shapes, 1):
                lines.append(f"{indent}- shape {i} ({'; '.join([kind, *ns])})")
                lines += sub
    items = schema.get("items")
    if "array" in kinds and isinstance(items, Mapping):
        kind, item_notes, lines_of_items = _shape(items, indent)
        kinds[kinds.index("array")] = f"array of {_grouped(kind)}"
        notes += [f"each {n}" for n in item_notes]
        lines += lines_of_items
    properties = schema.get("properties")
    named: Mapping[str, Any] = properties if isinstance(properties, Mapping) else {}
    required = schema.get("required") or ()
    # An object's required key that its properties leave out (what additionalProperties allows);
    # a bare `{"required": [...]}` (one choice of an anyOf) speaks of its parent's properties.
    whole = ("properties" in schema or "object" in kinds) and schema.get("additionalProperties") is not False
    unnamed = [str(name) for name in required if name not in named] if whole else []
    if named or unnamed:
        for name, sub in named.items():
            lines += _field_lines(str(name), sub, name in required, indent)
        extra = schema.get("additionalProperties", True)
        for name in unnamed:
            lines += _field_lines(name, extra, True, indent)
        if isinstance(extra, Mapping):
            kind, _, sub_lines = _shape(extra, indent + "  ")
            lines.append(f"{indent}- any other key ({kind})")
            lines += sub_lines
    elif isinstance(schema.get("additionalProperties"), Mapping) and "object" in kinds:
        kind, value_notes, sub_lines = _shape(schema["additionalProperties"], indent)
        kinds[kinds.index("object")] = f"object of any keys, each {_grouped(kind)}"
        notes += [f"each {n}" for n in value_notes]
        lines += sub_lines
    unique = list(dict.fromkeys(kinds))
    # `array of object, or null`: a comma keeps the container's own options apart from its items'
    joint = ", or " if any(" of " in k for k in unique) else " or "
    return joint.join(unique) if unique else "any JSON value", notes, lines


def _narrowed(choice: Mapping[str, Any], parent: Mapping[str, Any]) -> dict[str, Any]:
    """A choice of a typed parent's `anyOf`/`oneOf` as a schema of its own: of the parent's type
    where it names none, and, where it narrows the parent's fields (`"required": ["path"]`,
    `"properties": {"mode": {"const": "file"}}`), with what the parent says of them too."""
    out = dict(choice) if _types(choice) else {**choice, "type": parent["type"]}
    own = parent.get("properties")
    if isinstance(own, Mapping) and ("properties" in choice or "required" in choice):
        said = choice.get("properties")
        narrowed = said.items() if isinstance(said, Mapping) else ()
        fields = {name: _both(own.get(name), sub) for name, sub in narrowed}
        for name in choice.get("required") or ():
            if name not in fields and isinstance(own.get(name), Mapping):
                fields[name] = own[name]
        out["properties"] = fields
    extra = parent.get("additionalProperties")
    if isinstance(extra, Mapping) and "additionalProperties" not in choice:
        out["additionalProperties"] = extra  # the parent's other keys: "each integer"
    return out


def _both(field: object, narrowed: object) -> object:
    """A parent's field as a choice narrows it: the two schemas' keywords, the choice's last (its
    `const` in place of the parent's `enum`)."""
    if not isinstance(field, Mapping) or not isinstance(narrowed, Mapping):
        return narrowed
    both = {**field, **narrowed}
    if "const" in narrowed:
        both.pop("enum", None)
    return both


def _requires_only(schema: object) -> bool:
    """A choice that only requires keys (`{"required": ["id"]}`), of its parent's fields."""
    return (
        isinstance(schema, Mapping)
        and bool(schema.get("required"))
        and set(schema) <= {"required", "description", "title"}
    )


def _grouped(kind: str) -> str:
    """An item's kind inside its container's: `(object or null)` when it has options."""
    return f"({kind})" if " or " in kind and not kind.startswith("one of ") else kind


def _continued(text: str, indent: str) -> str:
    """A description as an entry of the list carries it: its lines after the first indented
    under the entry (`indent`), so that none reads as a tool or field of its own."""
    if "\n" not in text:
        return text
    first, *rest = text.splitlines()
    return "\n".join([first, *[f"{indent}{line}" if line.strip() else "" for line in rest]])


def _field_lines(name: str, schema: Mapping[str, Any] | bool, required: bool, indent: str) -> list[str]:
    """One field as the system message lists it, then its sub-fields, indented two more."""
    kind, notes, sub = _shape(schema, indent + "  ")
    line = f"{indent}- {name} ({'; '.join([kind, 'required' if required else 'optional', *notes])})"
    description = schema.get("description") if isinstance(schema, Mapping) else None
    return [f"{line}: {_continued(description, indent + '    ')}" if description else line, *sub]


def render_tool(t: Tool) -> str:
    """One tool as the system message lists it: each field with its type, whether it is
    required, its notes (enum, bounds, …) and description, sub-fields indented below it."""
    head = f"- {t.name}: {_continued(t.description, '    ')}" if t.description else f"- {t.name}"
    schema = _input_of(t)
    properties = schema.get("properties")
    if (isinstance(properties, Mapping) and properties) or schema.get("required"):
        _, notes, lines = _shape(schema, "  ")
        choices = [f"  ({n})" for n in notes if n.startswith("give ")]  # "id or name", at the root
        return "\n".join([head, "  input:", *lines, *choices])
    if not (
        isinstance(schema.get("additionalProperties"), Mapping) or "anyOf" in schema or "oneOf" in schema
    ):
        return f"{head}\n  input: none"
    kind, notes, sub = _shape(schema, "    ")  # keys of one type, or one of several shapes
    return "\n".join([head, f"  input: {'; '.join([kind, *notes])}", *sub])


def fit_text(t: Tool, description: str | None = None) -> str:
    """A tool as a `ToolFit` model reads it: its name and its input's top-level fields,
    `"price_of(product)"`; with `description`, that after a colon
    (`"price_of(product): Look up the price of a product."`, for comparisons).

    The name and fields say what a tool is for in the words tools are named with. On BFCL's
    tuning part they separate the requests a tool fits from those no tool serves as well as
    with the description after them, and on the agent benchmark's tuning part they fit far
    more of the requests the description's own wording missed ("How much does the Zorbix
    lamp cost?" for a tool that "looks up the price"; docs/quality.md, "the tool-fit
    decision"). They are also what the engine's tool pick reads from the turn schema.
    """
    properties = _input_of(t).get("properties")
    fields = ", ".join(properties) if isinstance(properties, Mapping) else ""
    return f"{t.name}({fields})" if description is None else f"{t.name}({fields}): {description}"


def render_answer(output: Mapping[str, Any]) -> str:
    """The answer type's section of the system message: `final` as a field of that type."""
    return "Answer type:\n" + "\n".join(_field_lines("final", output, True, ""))


def render_system(
    instructions: str,
    tools: Sequence[Tool],
    *,
    output: Mapping[str, Any] | None = None,
    calls_per_turn: int = DECODED_CALLS,
) -> str:
    """The system message: the instructions, the contract, then the tools.

    Args:
        instructions: The start of the message.
        tools: The agent's tools.
        output: The JSON Schema of a typed answer; `None` for text (`str`). The
            message then ends with the answer type, rendered as the tools' fields.
        calls_per_turn: The most calls one turn may hold (said when above 1).
    """
    parts = [instructions.strip()] if instructions.strip() else []
    parts.append(_contract(bool(tools), output is not None, calls_per_turn))
    if tools:
        parts.append("Tools:\n" + "\n".join(render_tool(t) for t in tools))
    if output is not None:
        parts.append(render_answer(output))
    return "\n\n".join(parts)


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


@dataclass(frozen=True, kw_only=True, slots=True)
class ParsedCall:
    """A call as the turn wrote it, before it gets an id."""

    tool: str
    input: dict[str, Any]


@dataclass(frozen=True, kw_only=True, slots=True)
class Turn:
    """A valid turn: calls (at most `MAX_CALLS`) or a final."""

    calls: tuple[ParsedCall, ...] = ()
    final: str | None = None
    """The final's text: the string, or for a typed answer the value's JSON text."""
    thought: str | None = None
    dropped: int = 0
    """Calls beyond `MAX_CALLS` that were dropped."""
    value: Any = None
    """The final's value: the string, or for a typed answer the JSON value as parsed (then
    the agent checks it against the answer type and converts it)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class BadTurn:
    """A turn that is refused, and why."""

    reason: str
    bound: bool = False
    """It wrote a number too large for a float: its retry bounds numbers (`turn_schema`'s `bounded`)."""


def _final_shape(typed: bool) -> str:
    """A final's shape, as a bad turn's reason names it."""
    return '{"final":<a value of the answer type>}' if typed else '{"final":"..."}'


def _expected(tool_choice: str, tools: Sequence[Tool], typed: bool) -> str:
    """The shapes a turn may take under `tool_choice`, as a bad turn's reason names them."""
    final = _final_shape(typed)
    if tool_choice == "none" or not tools:
        return f"expected {final}"
    return f'expected {{"calls":[...]}} or {final}' if tool_choice == "auto" else 'expected {"calls":[...]}'


def parse_turn(
    text: str, tools: Sequence[Tool], tool_choice: str = "auto", *, typed: bool = False
) -> Turn | BadTurn:
    """Parse a turn's text; never raises.

    Args:
        text: The generated text.
        tools: The agent's tools (unknown tools are refused).
        tool_choice: Which shapes this turn may take (see `turn_schema`).
        typed: The answer is typed: a final may be any JSON value (the agent
            checks it against the answer type), not only a string.
    """
    try:
        obj = _DECODER.decode(text)
    except _Overflow as exc:
        return BadTurn(reason=f"{exc}; write it with at most 16 digits and no exponent", bound=True)
    except (ValueError, RecursionError) as exc:
        return BadTurn(reason=f"not JSON ({_json_error(exc)}); {_expected(tool_choice, tools, typed)}")
    if not isinstance(obj, dict):
        return BadTurn(reason=f"not a JSON object; {_expected(tool_choice, tools, typed)}")
    extra = [k for k in obj if k not in ("calls", "final", "thought")]
    if extra or ("calls" in obj) == ("final" in obj):
        return BadTurn(reason=f"not one of the two shapes; {_expected(tool_choice, tools, typed)}")
    thought = obj.get("thought")
    if thought is not None and not isinstance(thought, str):
        return BadTurn(reason='"thought" must be a string')
    thought = None if thought is None else thought[:MAX_THOUGHT]
    only_final = tool_choice == "none" or not tools
    if "final" in obj:
        value = obj["final"]
        if not typed and not isinstance(value, str):
            return BadTurn(reason='"final" must be a string')
        if tool_choice not in ("auto", "none") and tools:
            return BadTurn(reason="this turn must call a tool, not answer")
        if not typed:
            return Turn(final=value, thought=thought, value=value)
        try:
            final = json.dumps(value, ensure_ascii=False)
        except (ValueError, RecursionError) as exc:
            return BadTurn(reason=f'"final" cannot be read back as JSON ({_json_error(exc)})')
        return Turn(final=final, thought=thought, value=value)
    if only_final:
        return BadTurn(reason=f"this turn must be a final answer: {_final_shape(typed)}")
    raw = obj["calls"]
    if not isinstance(raw, list):
        return BadTurn(reason='"calls" must be a list')
    if not raw:
        return BadTurn(reason='"calls" is empty; call at least one tool or give a final')
    allowed = {t.name for t in tools}
    if tool_choice not in ("auto", "required"):
        allowed = {tool_choice}
    calls = []
    for i, c in enumerate(raw[:MAX_CALLS], 1):
        if not isinstance(c, dict) or set(c) != {"tool", "input"}:
            return BadTurn(reason=f'call {i} must be {{"tool":"<name>","input":{{...}}}}')
        if not isinstance(c["tool"], str) or c["tool"] not in allowed:
            if any(c["tool"] == t.name for t in tools):  # a known tool, but tool_choice names another
                return BadTurn(reason=f"call {i}: this turn must call {tool_choice}, not {_short(c['tool'])}")
            names = ", ".join(sorted(allowed))
            return BadTurn(reason=f"call {i}: unknown tool {_short(c['tool'])} (tools: {names})")
        if not isinstance(c["input"], dict):
            return BadTurn(reason=f"call {i}: input must be an object")
        calls.append(ParsedCall(tool=c["tool"], input=c["input"]))
    return Turn(calls=tuple(calls), thought=thought, dropped=max(0, len(raw) - MAX_CALLS))


def json_closed(text: str) -> bool:
    """Whether `text` starts with a whole JSON value (whatever follows it): a generation
    that stopped on `max_tokens` with its JSON closed was not cut short, only bad."""
    try:
        _DECODER.raw_decode(text.lstrip())
    except (ValueError, RecursionError):
        return False
    return True


def _not_json(constant: str) -> None:
    """`json.loads` takes `NaN`, `Infinity` and `-Infinity`; JSON has no such values."""
    raise ValueError(f"{constant} is not a JSON value")


class _Overflow(ValueError):
    """A number too large for a float (`1e999`): JSON's grammar takes it, Python reads infinity."""


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _Overflow(f"the number {text[:24]} is too large (at most about 1.8e308)")
    return value


_DECODER = json.JSONDecoder(parse_constant=_not_json, parse_float=_finite)
"""One decoder for every turn (`json.loads` with an option makes a new one each call)."""


def _json_error(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return str(exc).split(":")[0] if isinstance(exc, json.JSONDecodeError) else str(exc)[:80]


def _short(v: object) -> str:
    if isinstance(v, list | dict):
        return "a list" if isinstance(v, list) else "an object"
    s = json.dumps(v, ensure_ascii=False) if isinstance(v, str) else repr(v)
    return s if len(s) <= 60 else s[:59] + "…"


def render_results(results: Sequence[tuple[str, str, str]], dropped: int = 0) -> str:
    """The user message that carries a turn's results back.

    Args:
        results: `(call id, tool name, result text)` for each call, in order.
        dropped: How many calls of the turn were dropped (beyond `MAX_CALLS`).
    """
    lines = ["Results:"]
    for call_id, tool_name, text in results:
        lines.append(f"[{call_id} {tool_name}] {text}")
    if dropped:
        lines.append(f"({dropped} more call(s) were dropped: at most {MAX_CALLS} run per turn)")
    return "\n".join(lines)


def render_retry(reason: str, *, cut: bool, max_tokens: int, final_only: bool = False) -> str:
    """The user message that asks for a turn again (`final_only`: a turn that may only answer)."""
    if cut:
        shape = "a shorter final answer" if final_only else "at most one call"
        return (
            f"Your last turn was cut off at {max_tokens} tokens before its JSON closed. "
            f"Answer again with a shorter turn: one JSON object, {shape}, no thought."
        )
    return f"Your last turn was not valid: {reason}. Answer again with one JSON object."
