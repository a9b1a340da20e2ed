"""OpenAI Agents SDK: a scripted `Model` subclass, run with `await Runner.run(...)`."""

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
    """The OpenAI Agents SDK side of the comparison, with `add` of the given kind."""
    from agents import (
        Agent,
        ModelResponse,
        RunConfig,
        Runner,
        ToolCallOutputItem,
        Usage,
        function_tool,
        set_tracing_disabled,
    )
    from agents.models.interface import Model
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    set_tracing_disabled(True)
    add = function_tool(add_tool(kind))

    class ScriptedModel(Model):
        """Plays prepared outputs in order, like the SDK's own tests' FakeModel."""

        def __init__(self, outputs: list[list[Any]]) -> None:
            self._outputs = iter(outputs)

        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            return ModelResponse(output=next(self._outputs), usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the scenario does not stream")

    def prepare() -> Trial:
        outputs: list[list[Any]] = [
            [
                ResponseFunctionToolCall(
                    id=f"fc_{i}",
                    call_id=f"call_{i}",
                    type="function_call",
                    name="add",
                    arguments=call_json(i),
                )
            ]
            for i in range(CALL_TURNS)
        ]
        outputs.append(
            [
                ResponseOutputMessage(
                    id="msg_final",
                    type="message",
                    role="assistant",
                    status="completed",
                    content=[ResponseOutputText(type="output_text", text=FINAL, annotations=[])],
                )
            ]
        )
        agent = Agent(name="bench", model=ScriptedModel(outputs), tools=[add])
        config = RunConfig(tracing_disabled=True)

        def check(result: Any) -> None:
            items = result.new_items
            outs = [item.output for item in items if isinstance(item, ToolCallOutputItem)]
            expect_results("openai-agents", outs, result.final_output)

        return Trial(
            run=lambda: Runner.run(agent, PROMPT, max_turns=MAX_TURNS, run_config=config),
            awaits=True,
            check=check,
        )

    return Contender(
        name="openai-agents",
        version=version("openai-agents"),
        tool=kind,
        how="Agent(model=scripted Model subclass, tools=[function_tool(add)]); "
        "await Runner.run(), tracing disabled",
        prepare=prepare,
    )
