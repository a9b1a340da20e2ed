"""The turn contract, as pure functions: the system message, the turn schema,
parsing a turn, and the messages that carry results and retries back.

Every turn is one JSON object: `{"calls": [{"tool": …, "input": {…}}]}` or
`{"final": "…"}`, either with an optional `"thought"` string. One module per
concept: `_schema` (the turn schema and its bounds), `_system` (the system
message), `_parse` (reading a turn) and `_messages` (what the loop writes back).
"""

from __future__ import annotations

from ._messages import render_results, render_retry
from ._parse import BadTurn, ParsedCall, Turn, json_closed, parse_turn
from ._schema import (
    DECODED_CALLS,
    FRACTION_DIGITS,
    MAX_CALLS,
    MAX_INTEGER,
    MAX_THOUGHT,
    RETRY_FINAL_CHARS,
    RETRY_ITEMS,
    RETRY_MARGIN_TOKENS,
    RETRY_STRING_CHARS,
    calls_shape,
    decoded_schema,
    final_shape,
    input_schema,
    turn_schema,
)
from ._system import CONTRACT, CONTRACT_NO_TOOLS, fit_text, render_answer, render_system, render_tool

__all__ = [
    "CONTRACT",
    "CONTRACT_NO_TOOLS",
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
    "calls_shape",
    "decoded_schema",
    "final_shape",
    "fit_text",
    "input_schema",
    "json_closed",
    "parse_turn",
    "render_answer",
    "render_results",
    "render_retry",
    "render_system",
    "render_tool",
    "turn_schema",
]
