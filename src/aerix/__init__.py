"""aerix: an agent turn loop for local language models.

An `Agent` asks a model for one JSON turn at a time, decoded under a schema
built from its tools, runs the calls, and stops on a final answer or a named
limit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .abort import AbortController, AbortSignal
from .agent import Agent, Answer
from .errors import AerixError
from .events import (
    AgentEvent,
    Call,
    CallEvent,
    EndEvent,
    EndReason,
    FinalEvent,
    ResultEvent,
    RetryEvent,
    TextEvent,
    TrimEvent,
    TurnEvent,
    UsageEvent,
)
from .model import ChatMessage, Delta, GenerateOptions, GenerationOptions, Model, ToolFit, Usage
from .options import Hooks, Limits
from .tools import Field, FieldType, Tool, ToolContext, tool

if TYPE_CHECKING:
    from .engines._load import load, model_path

__version__ = "0.1.0"

__all__ = [
    "AbortController",
    "AbortSignal",
    "AerixError",
    "Agent",
    "AgentEvent",
    "Answer",
    "Call",
    "CallEvent",
    "ChatMessage",
    "Delta",
    "EndEvent",
    "EndReason",
    "Field",
    "FieldType",
    "FinalEvent",
    "GenerateOptions",
    "GenerationOptions",
    "Hooks",
    "Limits",
    "Model",
    "ResultEvent",
    "RetryEvent",
    "TextEvent",
    "Tool",
    "ToolContext",
    "ToolFit",
    "TrimEvent",
    "TurnEvent",
    "Usage",
    "UsageEvent",
    "load",
    "model_path",
    "tool",
]


def __getattr__(name: str) -> Any:
    # `load` and `model_path` import the engines' machinery only when they are used.
    if name in ("load", "model_path"):
        from .engines import _load

        return getattr(_load, name)
    raise AttributeError(f"module 'aerix' has no attribute {name!r}")
