"""Reading a turn: its text parsed into calls or a final, or refused with the reason."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..tools import Tool
from ._schema import MAX_CALLS, MAX_THOUGHT

__all__ = ["BadTurn", "ParsedCall", "Turn", "json_closed", "parse_turn"]


# Not frozen, as what a turn parses to is made on every turn and never changed after: a
# frozen dataclass takes twice as long to make.
@dataclass(kw_only=True, slots=True)
class ParsedCall:
    """A call as the turn wrote it, before it gets an id."""

    tool: str
    input: dict[str, Any]


@dataclass(kw_only=True, slots=True)
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
    if not obj.keys() <= _TURN_KEYS or ("calls" in obj) == ("final" in obj):
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
        if not isinstance(c, dict) or c.keys() != _CALL_KEYS:
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


_TURN_KEYS = frozenset({"calls", "final", "thought"})
_CALL_KEYS = frozenset({"tool", "input"})


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
