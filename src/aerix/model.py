"""The model side: the types every engine speaks, and the `Model` protocol.

An engine streams one generation as text `Delta`s followed by exactly one
done `Delta` that carries `finish` and `usage`. Any object with a matching
`chat` method is a `Model`; engines import only this floor.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypedDict, runtime_checkable

from .abort import AbortSignal

__all__ = [
    "ChatMessage",
    "Constraint",
    "Delta",
    "FinishReason",
    "GenerateOptions",
    "GenerationOptions",
    "Model",
    "Role",
    "ToolFit",
    "Usage",
]

Role = Literal["system", "user", "assistant"]
FinishReason = Literal["stop", "length"]


class ChatMessage(TypedDict):
    """One message of a conversation: exactly `role` and `content`."""

    role: Role
    content: str


class Constraint(TypedDict):
    """Decode under this JSON Schema: every generation is a valid instance."""

    json: dict[str, Any]


class GenerationOptions(TypedDict, total=False):
    """Sampling settings; every key is optional."""

    max_tokens: int
    temperature: float
    top_p: float
    top_k: int
    min_p: float
    seed: int
    stop: list[str]


class GenerateOptions(GenerationOptions, total=False):
    """Sampling settings plus what the loop sets on each generation."""

    constraint: Constraint
    signal: AbortSignal


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts of one generation."""

    prompt_tokens: int
    """Tokens in the prompt, cached ones included."""
    completion_tokens: int
    """Tokens generated."""
    cached_tokens: int = 0
    """Prompt tokens reused from the engine's cache instead of prefilled."""


@dataclass(frozen=True, slots=True)
class Delta:
    """One piece of a streamed generation."""

    text: str = ""
    """Text generated since the last delta."""
    done: bool = False
    """True on the last delta of a stream, and only there."""
    finish: FinishReason | None = None
    """On the done delta: `"stop"` (ended on its own) or `"length"` (cut by `max_tokens`)."""
    usage: Usage | None = None
    """On the done delta: the generation's token counts."""


@runtime_checkable
class Model(Protocol):
    """Anything that streams a chat generation as `Delta`s."""

    def chat(self, messages: list[ChatMessage], opts: GenerateOptions | None = None) -> AsyncIterator[Delta]:
        """Stream one generation: text deltas, then exactly one done delta.

        Args:
            messages: The conversation, system message first.
            opts: Sampling settings, the JSON constraint and the abort signal.
        """
        ...


@runtime_checkable
class ToolFit(Protocol):
    """A model that can tell whether tools fit a request (optional; an engine may offer it).

    An `Agent` with `tool_choice="auto"` asks it before each run's first turn:
    `True` makes that turn call a tool (as `"required"`), `False` makes it
    answer (as `"none"`), `None` leaves the choice to the model's first key.
    """

    async def tools_fit(self, request: str, tools: Sequence[str]) -> bool | None:
        """Whether one of `tools` (each `"name(fields)"`, `turn.fit_text`) fits
        `request`; `None`: no opinion."""
        ...
