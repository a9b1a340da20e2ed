"""Checks of what an `Agent` is given: its options, and each run's prompt and signal.

Each refuses a bad value with `AerixError(kind="options")`, naming the value and the fix.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .abort import AbortSignal
from .errors import AerixError
from .tools import Tool, surrogate_at
from .turn import MAX_CALLS

__all__ = [
    "check_agent_options",
    "check_calls_per_turn",
    "check_run_args",
    "check_tool_choice",
    "check_tools",
    "unencodable",
]

OPTIONS = (
    "model, instructions, tools, limits, generation, constrain, hooks, tool_choice, "
    "output, calls_per_turn, concurrent_calls, name"
)


def check_agent_options(
    unknown: Mapping[str, Any],
    model: object,
    instructions: object,
    constrain: object,
    concurrent_calls: object = False,
    name: object = None,
) -> None:
    """Check the `Agent` options that have no type of their own."""
    if unknown:
        raise AerixError("options", f"unknown option {next(iter(unknown))!r}; options are {OPTIONS}")
    if not callable(getattr(model, "chat", None)):
        raise AerixError(
            "options",
            f"model must have a chat(messages, opts) method; got {type(model).__name__}",
        )
    if not isinstance(instructions, str):
        raise AerixError("options", f"instructions must be a string, got {type(instructions).__name__}")
    if (problem := unencodable(instructions)) is not None:
        raise AerixError("options", f"instructions{problem}")
    if not isinstance(constrain, bool):
        raise AerixError("options", f"constrain must be True or False, got {constrain!r}")
    if not isinstance(concurrent_calls, bool):
        raise AerixError("options", f"concurrent_calls must be True or False, got {concurrent_calls!r}")
    if name is not None and not isinstance(name, str):
        raise AerixError("options", f"name must be a string or None, got {type(name).__name__} {name!r}")


def check_calls_per_turn(value: object) -> int:
    """`calls_per_turn`: an integer from 1 to `MAX_CALLS` (8)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_CALLS:
        raise AerixError("options", f"calls_per_turn must be an integer from 1 to {MAX_CALLS}, got {value!r}")
    return value


def check_run_args(prompt: object, signal: object) -> None:
    """Check a run's prompt (a string with some text, all of it encodable as UTF-8) and signal."""
    if not isinstance(prompt, str):
        raise AerixError("options", f"prompt must be a string, got {type(prompt).__name__}")
    if not prompt or prompt.isspace():
        raise AerixError("options", f"the prompt is empty ({prompt!r}); give the model a question or a task")
    if (problem := unencodable(prompt)) is not None:
        raise AerixError("options", f"prompt{problem}")
    if signal is not None and not isinstance(signal, AbortSignal):
        raise AerixError("options", f"signal must be an AbortSignal or None, got {type(signal).__name__}")


def unencodable(text: str) -> str | None:
    """Where `text` holds a surrogate, which UTF-8 cannot encode (`"[3] is '\\ud800', …"`), else `None`."""
    if (i := surrogate_at(text)) is None:
        return None
    pair = text[i : i + 2]
    if len(pair) == 2 and pair[0] <= "\udbff" and "\udc00" <= pair[1] <= "\udfff":  # high, then low
        return (
            f"[{i}:{i + 2}] is {pair!r}, a UTF-16 surrogate pair that UTF-8 cannot encode; "
            "join it into one character: text.encode('utf-16', 'surrogatepass').decode('utf-16')"
        )
    return (
        f"[{i}] is {text[i]!r}, a lone surrogate that UTF-8 cannot encode; remove it, "
        "or replace it and any other: text.encode('utf-8', 'replace').decode()"
    )


def check_tools(tools: object) -> dict[str, Tool]:
    """The agent's tools by name: a list of `Tool`s with unique names."""
    if isinstance(tools, Tool | str | Mapping) or not isinstance(tools, Iterable):
        raise AerixError("options", f"tools must be a list of tools, got {type(tools).__name__}")
    out: dict[str, Tool] = {}
    for i, t in enumerate(tools):
        if not isinstance(t, Tool):
            hint = "; decorate it with @aerix.tool" if callable(t) else ""
            raise AerixError("options", f"tools[{i}] is not a Tool: {t!r}{hint}")
        if t.name in out:
            raise AerixError("options", f"two tools are named {t.name!r}; tool names must be unique")
        out[t.name] = t
    return out


def check_tool_choice(choice: object, tools: Mapping[str, Tool]) -> str:
    """`"auto"`, `"none"`, or (with tools) `"required"` or one tool's name."""
    if not isinstance(choice, str):
        raise AerixError("options", f"tool_choice must be a string, got {type(choice).__name__} {choice!r}")
    if choice in ("auto", "none"):
        return choice
    if choice == "required" or choice in tools:
        if not tools:
            raise AerixError("options", f"tool_choice={choice!r} needs at least one tool")
        return str(choice)
    allowed = ", ".join(repr(c) for c in ("auto", "required", "none", *tools))
    raise AerixError("options", f"bad tool_choice {choice!r}; one of {allowed}")
