"""smolagents: `ToolCallingAgent(tools=[add], model=<fake Model>)`, run with `agent.run(...)`."""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

from .scenario import (
    CALL_TURNS,
    FINAL,
    MAX_TURNS,
    PROMPT,
    Contender,
    ToolKind,
    Trial,
    add,
    call_json,
    expect_results,
)


def contender(kind: ToolKind = "def") -> Contender:
    """The smolagents side of the comparison; it runs only plain-function tools.

    Raises:
        ValueError: For `kind="async def"`: smolagents has no coroutine tools.
    """
    if kind != "def":
        raise ValueError("smolagents runs only plain-function tools")
    import json

    from smolagents import (
        ActionStep,
        ChatMessage,
        ChatMessageToolCall,
        LogLevel,
        Model,
        ToolCallingAgent,
        tool,
    )
    from smolagents.models import ChatMessageToolCallFunction, MessageRole

    add_tool = tool(add)  # its schema comes from the docstring, as smolagents requires

    class FakeModel(Model):
        """Plays prepared messages in order, like smolagents' own tests' fake models."""

        def __init__(self, replies: list[ChatMessage]) -> None:
            super().__init__(model_id="scripted")
            self._replies = iter(replies)

        def generate(self, messages: Any, *args: Any, **kwargs: Any) -> ChatMessage:
            return next(self._replies)

    def reply(i: int, name: str, arguments: str) -> ChatMessage:
        call = ChatMessageToolCall(
            id=f"call_{i}",
            type="function",
            function=ChatMessageToolCallFunction(name=name, arguments=arguments),
        )
        return ChatMessage(role=MessageRole.ASSISTANT, content="", tool_calls=[call])

    def prepare() -> Trial:
        replies = [reply(i, "add", call_json(i)) for i in range(CALL_TURNS)]
        replies.append(reply(CALL_TURNS, "final_answer", json.dumps({"answer": FINAL})))
        agent = ToolCallingAgent(
            tools=[add_tool],
            model=FakeModel(replies),
            max_steps=MAX_TURNS,
            verbosity_level=LogLevel.OFF,
        )

        def run() -> Any:
            return agent.run(PROMPT)

        def check(final: Any) -> None:
            outs = [
                step.observations
                for step in agent.memory.steps
                if isinstance(step, ActionStep) and step.tool_calls and step.tool_calls[0].name == "add"
            ]
            expect_results("smolagents", outs, final)

        return Trial(run=run, awaits=False, check=check)

    return Contender(
        name="smolagents",
        version=version("smolagents"),
        tool=kind,
        how="ToolCallingAgent(tools=[tool(add)], model=fake Model, verbosity off); "
        "agent.run(), final via final_answer",
        prepare=prepare,
    )
