"""The system message: the instructions, the contract, the tools and the answer type.

A tool reads as a list of its fields, each with its type, whether it is
required, its notes (enum, bounds, pattern, …) and its description; sub-fields
are indented below their field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..tools import Tool
from ._schema import DECODED_CALLS, MAX_INTEGER, _input_of, _types

__all__ = ["CONTRACT", "CONTRACT_NO_TOOLS", "fit_text", "render_answer", "render_system", "render_tool"]


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
