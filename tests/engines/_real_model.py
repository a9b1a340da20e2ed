"""Shared by the tests on real models: a turn schema, a conversation, a turn check, a recorder."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from aerix.model import ChatMessage, Delta, GenerateOptions, Model


def tool_shape(name: str, fields: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """The schema of one call of the tool `name`."""
    return {
        "type": "object",
        "properties": {
            "tool": {"const": name},
            "input": {
                "type": "object",
                "properties": fields,
                "required": required,
                "additionalProperties": False,
            },
        },
        "required": ["tool", "input"],
        "additionalProperties": False,
    }


SCHEMA: dict[str, Any] = {
    "anyOf": [
        {
            "type": "object",
            "properties": {
                "thought": {"type": "string"},
                "calls": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": 1,  # one call a turn, as aerix's turn schema decodes
                    "items": {
                        "anyOf": [
                            tool_shape(
                                "weather",
                                {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
                                ["city"],
                            ),
                            tool_shape("search", {"query": {"type": "string"}}, ["query"]),
                        ]
                    },
                },
            },
            "required": ["calls"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {"thought": {"type": "string"}, "final": {"type": "string"}},
            "required": ["final"],
            "additionalProperties": False,
        },
    ]
}
"""A turn: one call of `weather` or `search`, or a final."""

MESSAGES: list[ChatMessage] = [
    {
        "role": "system",
        "content": (
            "You are a travel helper. Use the tools to answer.\n"
            'Answer with one JSON object: {"calls": [{"tool": ..., "input": {...}}]} '
            'or {"final": "..."}.\n'
            "Tools:\n- weather: Today's forecast for a city. Fields: city (string, required), "
            "unit (c or f)\n- search: Search the web. Fields: query (string, required)"
        ),
    },
    {"role": "user", "content": "Should I pack an umbrella for Lisbon?"},
]
"""A conversation whose next turn `SCHEMA` describes."""


def check_turn(turn: Any) -> None:
    """Assert that `turn` (parsed JSON) is a turn of `SCHEMA`."""
    assert isinstance(turn, dict)
    if "final" in turn:
        assert set(turn) <= {"thought", "final"} and isinstance(turn["final"], str)
        return
    assert set(turn) <= {"thought", "calls"} and turn["calls"]
    for call in turn["calls"]:
        assert list(call) == ["tool", "input"]
        if call["tool"] == "weather":
            assert isinstance(call["input"]["city"], str)
            assert set(call["input"]) <= {"city", "unit"}
            assert call["input"].get("unit", "c") in ("c", "f")
        else:
            assert call["tool"] == "search" and set(call["input"]) == {"query"}


async def generate(model: Model, messages: list[ChatMessage], **opts: Any) -> list[Delta]:
    """All the deltas of one generation."""
    return [d async for d in model.chat(messages, opts)]  # type: ignore[arg-type]


@dataclass
class Generation:
    """One generation that went through a `Recorder`."""

    opts: GenerateOptions
    text: str = ""
    done: Delta | None = None


@dataclass
class Recorder:
    """A model that passes every call to `engine` and records what went through."""

    engine: Model
    generations: list[Generation] = field(default_factory=list)

    async def chat(
        self, messages: list[ChatMessage], opts: GenerateOptions | None = None
    ) -> AsyncIterator[Delta]:
        g = Generation(opts=dict(opts or {}))  # type: ignore[arg-type]
        self.generations.append(g)
        async for delta in self.engine.chat(messages, opts):
            g.text += delta.text
            if delta.done:
                g.done = delta
            yield delta
