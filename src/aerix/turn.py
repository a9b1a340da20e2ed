"""The turn contract, as pure functions: the system message, the turn schema,
parsing a turn, and the messages that carry results and retries back.

Every turn is one JSON object: `{"calls": [{"tool": …, "input": {…}}]}` or
`{"final": "…"}`, either with an optional `"thought"` string.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .tools import Field, Tool

__all__ = [
    "DECODED_CALLS",
    "FRACTION_DIGITS",
    "MAX_CALLS",
    "MAX_INTEGER",
    "MAX_THOUGHT",
    "RETRY_FINAL_CHARS",
    "RETRY_MARGIN_TOKENS",
    "RETRY_STRING_CHARS",
    "BadTurn",
    "ParsedCall",
    "Turn",
    "input_schema",
    "parse_turn",
    "render_results",
    "render_retry",
    "render_system",
    "turn_schema",
]

MAX_CALLS = 8
"""Calls of one turn that are kept; the rest are dropped."""
MAX_THOUGHT = 600
"""Characters of a thought that are kept."""

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


def _field_line(name: str, f: Field) -> str:
    parts = [f.type, "required" if f.required else "optional"]
    if f.enum is not None:
        parts.append("one of " + ", ".join(json.dumps(v) for v in f.enum))
    line = f"  - {name} ({'; '.join(parts)})"
    return f"{line}: {f.description}" if f.description else line


def render_tool(t: Tool) -> str:
    """One tool as the system message lists it."""
    head = f"- {t.name}: {t.description}" if t.description else f"- {t.name}"
    if not t.input:
        return f"{head}\n  input: none"
    return "\n".join([head, "  input:", *(_field_line(n, f) for n, f in t.input.items())])


def render_system(instructions: str, tools: Sequence[Tool]) -> str:
    """The system message: the instructions, the contract, then the tools."""
    parts = [instructions.strip()] if instructions.strip() else []
    if tools:
        parts += [CONTRACT, "Tools:\n" + "\n".join(render_tool(t) for t in tools)]
    else:
        parts.append(CONTRACT_NO_TOOLS)
    return "\n\n".join(parts)


_THOUGHT = {"type": "string", "maxLength": MAX_THOUGHT}

DECODED_CALLS = 1
"""Calls per turn that the schema lets a model write. A small model that may
write several tends to repeat its first call until a limit stops it; one call
a turn, with the results in between, is what it can do reliably."""

FRACTION_DIGITS = 6
"""Digits after the point that a retry's schema allows in a `number` value."""
MAX_INTEGER = 2**53 - 1
"""The largest magnitude the schema allows in an `integer` value (and in a
retry's `number` value): the largest integer a double holds exactly."""
RETRY_STRING_CHARS = 100
"""Characters that a retry's schema allows in a `string` input value."""
RETRY_FINAL_CHARS = 400
"""Characters that a retry's schema allows in a final answer."""
RETRY_MARGIN_TOKENS = 16
"""Tokens kept for the JSON around a retry's final answer, under `max_tokens`."""


def input_schema(t: Tool, *, bounded: bool = False) -> dict[str, Any]:
    """The schema of a call's input as decoded: `t.schema`, required fields first,
    integers bounded.

    Required fields come first, so that every required value is written before
    the model is offered any optional one. Integers are bounded by
    `MAX_INTEGER` (at most 16 digits). Numbers and strings stay free, exponents
    included (`8.854e-12`), unless `bounded`: a small model can write digits
    (`0.0000…`, `3.3333…`) or text until `max_tokens` cuts the turn, so the
    retry of a cut turn allows at most `FRACTION_DIGITS` digits after the point
    and no exponent, and at most `RETRY_STRING_CHARS` characters in a string.
    """
    order = [n for n, f in t.input.items() if f.required] + [n for n, f in t.input.items() if not f.required]
    properties: dict[str, Any] = {}
    for name in order:
        f = t.input[name]
        prop = dict(t.schema["properties"][name])
        if f.enum is None and (f.type == "integer" or (f.type == "number" and bounded)):
            prop["minimum"], prop["maximum"] = -MAX_INTEGER, MAX_INTEGER
            if f.type == "number":
                prop["multipleOf"] = 10.0**-FRACTION_DIGITS
        if f.enum is None and f.type == "string" and bounded:
            prop["maxLength"] = RETRY_STRING_CHARS
        properties[name] = prop
    return {**t.schema, "properties": properties}


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


def final_shape(*, thought: bool = True, max_length: int | None = None) -> dict[str, Any]:
    """The final shape of a turn; the thought, if any, after the answer."""
    final: dict[str, Any] = {"type": "string"}
    if max_length is not None:
        final["maxLength"] = max_length
    properties: dict[str, Any] = {"final": final}
    if thought:
        properties["thought"] = _THOUGHT
    return {"type": "object", "properties": properties, "required": ["final"], "additionalProperties": False}


def turn_schema(
    tools: Sequence[Tool], tool_choice: str = "auto", *, short: bool = False, max_tokens: int | None = None
) -> dict[str, Any]:
    """The JSON Schema of one turn: the calls shape, the final shape, or both.

    A turn decoded under it has at most `DECODED_CALLS` calls (parsing keeps up
    to `MAX_CALLS`, for models decoded without it), numbers of bounded length,
    and any thought after the calls or the answer, never before.

    Args:
        tools: The agent's tools; with none, only a final is possible.
        tool_choice: `"auto"` (either shape), `"required"` (calls only),
            `"none"` (final only) or a tool's name (calls of that tool only).
        short: The schema of a retry after a cut turn: no thought, bounded
            numbers and strings (see `input_schema`) and a final of at most
            `RETRY_FINAL_CHARS`, so that the turn closes.
        max_tokens: The generation's token limit: a short final also stays
            `RETRY_MARGIN_TOKENS` under it (a token may be one character).
    """
    thought = not short
    length = RETRY_FINAL_CHARS
    if max_tokens is not None:
        length = max(1, min(length, max_tokens - RETRY_MARGIN_TOKENS))
    final = final_shape(thought=thought, max_length=length if short else None)
    if tool_choice == "none" or not tools:
        shapes = [final]
    elif tool_choice == "auto":
        shapes = [calls_shape(tools, thought=thought, bounded=short), final]
    elif tool_choice == "required":
        shapes = [calls_shape(tools, thought=thought, bounded=short)]
    else:
        chosen = [t for t in tools if t.name == tool_choice]
        shapes = [calls_shape(chosen, thought=thought, bounded=short)]
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
    thought: str | None = None
    dropped: int = 0
    """Calls beyond `MAX_CALLS` that were dropped."""


@dataclass(frozen=True, kw_only=True, slots=True)
class BadTurn:
    """A turn that is refused, and why."""

    reason: str


_SHAPES = 'expected {"calls":[...]} or {"final":"..."}'


def parse_turn(text: str, tools: Sequence[Tool], tool_choice: str = "auto") -> Turn | BadTurn:
    """Parse a turn's text; never raises.

    Args:
        text: The generated text.
        tools: The agent's tools (unknown tools are refused).
        tool_choice: Which shapes this turn may take (see `turn_schema`).
    """
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return BadTurn(reason=f"not JSON ({_json_error(exc)}); {_SHAPES}")
    if not isinstance(obj, dict):
        return BadTurn(reason=f"not a JSON object; {_SHAPES}")
    extra = [k for k in obj if k not in ("calls", "final", "thought")]
    if extra or ("calls" in obj) == ("final" in obj):
        return BadTurn(reason=f"not one of the two shapes; {_SHAPES}")
    thought = obj.get("thought")
    if thought is not None and not isinstance(thought, str):
        return BadTurn(reason='"thought" must be a string')
    thought = None if thought is None else thought[:MAX_THOUGHT]
    only_final = tool_choice == "none" or not tools
    if "final" in obj:
        if not isinstance(obj["final"], str):
            return BadTurn(reason='"final" must be a string')
        if tool_choice not in ("auto", "none") and tools:
            return BadTurn(reason="this turn must call a tool, not answer")
        return Turn(final=obj["final"], thought=thought)
    if only_final:
        return BadTurn(reason='this turn must be a final answer: {"final":"..."}')
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
            names = ", ".join(sorted(allowed))
            return BadTurn(reason=f"call {i}: unknown tool {_short(c['tool'])} (tools: {names})")
        if not isinstance(c["input"], dict):
            return BadTurn(reason=f"call {i}: input must be an object")
        calls.append(ParsedCall(tool=c["tool"], input=c["input"]))
    return Turn(calls=tuple(calls), thought=thought, dropped=max(0, len(raw) - MAX_CALLS))


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


def render_retry(reason: str, *, cut: bool, max_tokens: int) -> str:
    """The user message that asks for a turn again."""
    if cut:
        return (
            f"Your last turn was cut off at {max_tokens} tokens before its JSON closed. "
            "Answer again with a shorter turn: one JSON object, at most one call, no thought."
        )
    return f"Your last turn was not valid: {reason}. Answer again with one JSON object."
