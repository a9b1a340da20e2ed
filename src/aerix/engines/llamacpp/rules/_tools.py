"""Which tool a call names: the tools of a turn's schema, and the request they are picked for.

A small model with several tools often names the wrong one (BFCL's
live_multiple tuning part, SmolLM2-135M: the first call's tool is the
answer's on 55 of 100 requests), while the tool the request makes likeliest
by the fit score is the answer's on 73 (`docs/quality.md`, "tool pick").
`ToolPick` nudges the tool name towards the tools that fit; these helpers
say which tools a schema offers and which request a generation answers.

In a later turn, the same model often writes the call it just made again
instead of the next one of a chain (the capital of a country looked up twice,
not the population of that capital). `NewCalls` leans such a turn's tool name
away from a call that already ran; `calls_made` says which calls the turns for
the request made, and `written_call` reads the call a turn writes.

Values copy from what the user and the tools said (`copy_source`): the user's
messages without the frame the agent loop writes around the tools' results.
They never copy a placeholder of the system prompt (`placeholders`: the
contract's `<your answer>`), which a small model copies whole for its answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

from ....model import ChatMessage
from ._fields import _objects

__all__ = [
    "PLACEHOLDER",
    "call_key",
    "calls_made",
    "copy_source",
    "first_request",
    "placeholders",
    "tool_texts",
    "user_words",
    "written_call",
]


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


_RESULTS = "Results:\n"
"""The first line of the message that carries a turn's results (`aerix.turn.render_results`)."""
_LABEL = re.compile(r"^\[[^\]\s]+ [^\]\s]+\] (?:error: )*", re.M)
"""A result's label (`[call_1 capital_of] `) and an error's `error: `."""
_NOTE = re.compile(
    r"\n\((?:that is the result of call_|\d+ more call\(s\) were dropped)[^\n]*\)$"
    r"|\n\[cut: \d+ more characters\]$",
    re.M,
)
"""The loop's notes in a results message: a repeated call's, the dropped calls', a cut result's."""
_RETRIES = ("Your last turn was not valid: ", "Your last turn was cut off at ")
"""How the loop's requests for a turn again begin (`aerix.turn.render_retry`)."""


def copy_source(messages: Sequence[ChatMessage]) -> str:
    """The text values copy from: the user's messages, where a message of results
    (`aerix.turn.render_results`) gives only the tools' own words, without the loop's
    frame (the `Results:` line, each result's `[call_1 tool]` label and `error: `, a
    repeated call's note, a cut result's note); a request for a turn again
    (`render_retry`) gives nothing. Their words and numbers ("call_1", "2 times") are
    neither the user's nor a tool's."""
    return "\n".join(
        _NOTE.sub("", _LABEL.sub("", text[len(_RESULTS) :])) if text.startswith(_RESULTS) else text
        for text in _said(messages)
    )


PLACEHOLDER = r"<[A-Za-z][^<>\n]{0,78}>"
"""A placeholder: a letter and a few words in angle brackets (`<your answer>`, `<tool name>`)."""
_VALUE_PLACEHOLDER = re.compile(rf':[ \t]*"?({PLACEHOLDER})')
"""A placeholder written as a value in a JSON example (`"final":"<your answer>"`)."""


def placeholders(messages: Sequence[ChatMessage]) -> tuple[str, ...]:
    """The placeholders of the system messages, in order, each once: the texts in angle
    brackets written as a value in a JSON example there, as the contract shows a turn
    (`{"final":"<your answer>"}`, `aerix.turn.CONTRACT`) and instructions may show one
    (`{"name": "<your name>"}`). They stand for a value; a value that copies one is none
    (`NoPlaceholders`). Angle brackets elsewhere ("answer <OK> or <FAIL>") may be what
    the instructions ask the model to write, and are left alone."""
    found = (
        m.group(1)
        for message in messages
        if message["role"] == "system"
        for m in _VALUE_PLACEHOLDER.finditer(message["content"])
    )
    return tuple(dict.fromkeys(found))


def user_words(messages: Sequence[ChatMessage]) -> str:
    """The user's own messages: not the tools' results, nor the loop's requests for a
    turn again."""
    return "\n".join(text for text in _said(messages) if not text.startswith(_RESULTS))


def _said(messages: Sequence[ChatMessage]) -> Iterator[str]:
    """The user messages' texts, but the loop's requests for a turn again."""
    return (m["content"] for m in messages if m["role"] == "user" and not m["content"].startswith(_RETRIES))


def call_key(tool: str, given: object) -> str:
    """One call as a string that two calls share when they name the same tool with the same
    input (its keys in any order)."""
    return json.dumps([tool, given], sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def written_call(text: str) -> str | None:
    """The `call_key` of a call written as compact JSON from its tool name's first
    character on (`capital_of","input":{"country":"Quenland"}}`); `None` for text that
    is not such a call."""
    name, quote, rest = text.partition('"')
    at = rest.find('"input":')
    if not quote or at < 0:
        return None
    try:
        given, _ = json.JSONDecoder().raw_decode(rest, at + len('"input":'))
    except ValueError:
        return None
    return call_key(name, given)


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


def calls_made(messages: Sequence[ChatMessage]) -> frozenset[str]:
    """The calls that the turns answering the latest request wrote (each as `call_key`);
    empty in the first turn for a request."""
    made: set[str] = set()
    previous: ChatMessage | None = None
    for m in messages:
        if m["role"] == "user" and _opens(previous):
            made = set()
        elif m["role"] == "assistant":
            calls = _turn(m["content"]).get("calls")
            for call in calls if isinstance(calls, list) else ():
                if isinstance(call, dict) and isinstance(call.get("tool"), str):
                    made.add(call_key(call["tool"], call.get("input", {})))
        previous = m
    return frozenset(made)
