"""Which tool a call names: the tools of a turn's schema, and the request they are picked for.

A small model with several tools often names the wrong one (BFCL's
live_multiple tuning part, SmolLM2-135M: the first call's tool is the
answer's on 55 of 100 requests), while the tool the request makes likeliest
by the fit score is the answer's on 73 (`docs/quality.md`, "tool pick").
`ToolPick` nudges the tool name towards the tools that fit; these helpers
say which tools a schema offers and which request a generation answers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ....model import ChatMessage
from ._fields import _objects

__all__ = ["first_request", "tool_texts"]


def tool_texts(schema: object) -> dict[str, str]:
    """The tools a calls shape offers, by name, each as the fit score reads it from the
    schema alone: `"name(fields)"` (the `input`'s top-level fields, in order).

    A tool is an object of the schema with a `tool` constant and an `input` object
    (`aerix.turn.calls_shape`); a schema without them offers none.
    """
    found: dict[str, str] = {}
    for node in _objects(schema):
        tool, given = node["properties"].get("tool"), node["properties"].get("input")
        if isinstance(tool, dict) and isinstance(tool.get("const"), str) and isinstance(given, dict):
            fields = given.get("properties")
            names = ", ".join(fields) if isinstance(fields, dict) else ""
            found.setdefault(tool["const"], f"{tool['const']}({names})")
    return found


def _turn(content: str) -> dict[str, Any]:
    """A turn's JSON object; `{}` for a turn that did not parse as one."""
    try:
        turn = json.loads(content)
    except ValueError:
        return {}
    return turn if isinstance(turn, dict) else {}


def _opens(previous: ChatMessage | None) -> bool:
    """Whether a user message after `previous` is a new request: first, after the system
    message, or after a final."""
    if previous is None or previous["role"] == "system":
        return True
    return previous["role"] == "assistant" and "final" in _turn(previous["content"])


def first_request(messages: Sequence[ChatMessage]) -> str | None:
    """The user's request, when this generation writes the first turn that answers it; else `None`.

    A request is a user message that opens the conversation or follows the system message or
    a final turn (`{"final": ...}`); a user message after a turn with calls carries results,
    one after a turn that did not parse asks for it again. Once a turn with calls answered
    the request, later generations are not its first turn.
    """
    request: str | None = None
    previous: ChatMessage | None = None
    for m in messages:
        if m["role"] == "user" and _opens(previous):
            request = m["content"]
        elif m["role"] == "assistant" and "calls" in _turn(m["content"]):
            request = None
        previous = m
    if previous is None or previous["role"] != "user":
        return None
    return request
