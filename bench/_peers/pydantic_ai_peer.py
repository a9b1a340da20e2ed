"""pydantic-ai: `Agent(FunctionModel(fn), tools=[add])`, run with `await agent.run(...)`."""

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
    add_tool,
    call_json,
    expect_results,
)


def contender(kind: ToolKind = "def") -> Contender:
    """The pydantic-ai side of the comparison, with `add` of the given kind."""
    from pydantic_ai import Agent, UsageLimits
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import RequestUsage

    def prepare() -> Trial:
        # Usage is given so FunctionModel skips estimating it from the whole history.
        replies = [
            ModelResponse(
                parts=[ToolCallPart("add", call_json(i), tool_call_id=f"call_{i}")],
                usage=RequestUsage(input_tokens=1, output_tokens=1),
            )
            for i in range(CALL_TURNS)
        ]
        replies.append(
            ModelResponse(parts=[TextPart(FINAL)], usage=RequestUsage(input_tokens=1, output_tokens=1))
        )
        turn = iter(replies)

        async def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            return next(turn)

        agent = Agent(FunctionModel(scripted), tools=[add_tool(kind)])
        limits = UsageLimits(request_limit=MAX_TURNS)  # the default, 50, is below 51

        def check(result: Any) -> None:
            returns = [
                part.content
                for message in result.all_messages()
                if isinstance(message, ModelRequest)
                for part in message.parts
                if isinstance(part, ToolReturnPart) and part.tool_name == "add"
            ]
            expect_results("pydantic-ai", returns, result.output)

        return Trial(run=lambda: agent.run(PROMPT, usage_limits=limits), awaits=True, check=check)

    return Contender(
        name="pydantic-ai",
        version=version("pydantic-ai-slim"),
        tool=kind,
        how="Agent(FunctionModel(async fn), tools=[add]); "
        "await agent.run(usage_limits=UsageLimits(request_limit=60))",
        prepare=prepare,
    )
