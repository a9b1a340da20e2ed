"""An agent as a tool (`Agent.as_tool`): each call asks a fresh copy of the agent.

The tool's input is `{"prompt": string}`. A call runs a copy of the agent (its
model, instructions, tools, limits, hooks and options; a conversation of its
own, empty) on that prompt, with the outer run's signal, so that calls may run
at once and an abort of the outer run reaches the inner one. The inner run's
final is the result (a typed answer's JSON text); any other ending is an error
result that names the agent and says why.

Traced (`aerix.otel`), the inner run's span is a child of the outer call's
`execute_tool` span: `_observe.CALL` says which call's tool the inner run was
made in.
"""

from __future__ import annotations

from contextlib import aclosing
from typing import TYPE_CHECKING, Any

from .errors import AerixError, message_of
from .events import EndEvent, FinalEvent
from .tools import NAME_PATTERN, Field, Tool, ToolContext, tool

if TYPE_CHECKING:
    from .agent import Agent

__all__ = ["agent_tool"]

_PROMPT = {"prompt": Field("string", "What to ask the agent, in full: it sees nothing else", required=True)}


class AgentEnded(Exception):
    """The inner run ended without a final: its error result's text."""


def agent_tool(agent: Agent, name: str | None, description: str | None) -> Tool:
    """The tool of `agent.as_tool(name, description)` (see there)."""
    tool_name = _tool_name(agent, name)
    if description is not None and not isinstance(description, str):
        raise AerixError(
            "options",
            f"as_tool: description must be a string or None, "
            f"got {type(description).__name__} {description!r}",
        )
    if description is None:
        description = agent._instructions if agent._instructions.strip() else f"Ask the agent {tool_name}."
    # who the results name: the agent's own name, and the tool's where it has another
    said = tool_name if agent.name in (None, tool_name) else f"{agent.name} (the tool {tool_name})"

    async def ask(input: dict[str, Any], cx: ToolContext) -> str:
        return await _ask(agent, said, input["prompt"], cx)

    return tool(name=tool_name, description=description, input=_PROMPT, run=ask)


def _tool_name(agent: Agent, name: object) -> str:
    """`name`, else the agent's, checked against the tool-name pattern."""
    if name is None:
        if agent.name is None:
            raise AerixError(
                "options",
                "as_tool needs a name: this agent has none; pass as_tool(name='...') "
                "or make the agent with Agent(..., name='...')",
            )
        name, source = agent.name, "the agent's name"
    else:
        source = "name"
    if not isinstance(name, str) or NAME_PATTERN.fullmatch(name) is None:
        raise AerixError(
            "options",
            f"as_tool: {source} {name!r} is not a tool name (lowercase letters, digits and "
            "underscores, starting with a letter, at most 64); pass as_tool(name='...') with one",
        )
    return name


async def _ask(agent: Agent, name: str, prompt: str, cx: ToolContext) -> str:
    """Run a fresh copy of `agent` on `prompt`; its final's text, or `AgentEnded` saying why not."""
    twin = agent._copy()
    try:
        events = twin.run(prompt, signal=cx.signal)
    except AerixError as exc:  # the prompt (empty, only whitespace, a lone surrogate)
        raise AgentEnded(f"agent {name}: {message_of(exc)}") from None
    ending: FinalEvent | EndEvent | None = None
    async with aclosing(events):
        async for ev in events:
            if isinstance(ev, FinalEvent | EndEvent):
                ending = ev
    if isinstance(ending, FinalEvent):
        return ending.text
    assert ending is not None  # every run ends with exactly one ending
    raise AgentEnded(_ended(name, ending))


def _ended(name: str, end: EndEvent) -> str:
    """What an inner run that ended without a final says as the call's error result."""
    if end.reason == "paused":
        calls = ", ".join(f"{c.tool} ({c.id})" for c in end.pending)
        return (
            f"agent {name} paused: its calls wait for a person's decision ({calls}), "
            f"which a call of it as a tool cannot give: {end.message}"
        )
    return f"agent {name} ended without an answer ({end.reason}): {end.message}"
