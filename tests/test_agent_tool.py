"""`Agent.as_tool` (SPEC 10.5): an agent as another agent's tool.

Every test runs on `ScriptedModel`; each inner run's reply is a function of its messages,
so that copies running at once answer their own prompts whatever order they run in.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from aerix import AbortController, AerixError, Agent, tool
from aerix.events import CallEvent, EndEvent, FinalEvent, ResultEvent
from aerix.model import ChatMessage
from aerix.testing import ScriptedModel, Stall


def echo(messages: list[ChatMessage]) -> str:
    """An inner turn that answers with the prompt it got."""
    return json.dumps({"final": f"inner: {messages[-1]['content']}"})


def ask_twice(tool_name: str, *prompts: str) -> str:
    """An outer turn calling `tool_name` once per prompt."""
    return json.dumps({"calls": [{"tool": tool_name, "input": {"prompt": p}} for p in prompts]})


def quote_results(messages: list[ChatMessage]) -> str:
    """An outer final that quotes the results message it got."""
    return json.dumps({"final": messages[-1]["content"]})


def outer(sub: Any, *prompts: str, **options: Any) -> Agent:
    """An agent whose first turn calls `sub` with each prompt, then answers with the results."""
    script = [ask_twice(sub.name, *prompts), quote_results]
    return Agent(model=ScriptedModel(script), tools=[sub], calls_per_turn=max(1, len(prompts)), **options)


def results(events: Sequence[Any]) -> dict[str, tuple[str, bool]]:
    return {ev.id: (ev.text, ev.error) for ev in events if isinstance(ev, ResultEvent)}


# -- the tool ----------------------------------------------------------------------------


def test_the_tool_takes_a_prompt_and_is_named_and_described_after_the_agent() -> None:
    sub = Agent(model=ScriptedModel([echo]), instructions="You look things up.", name="researcher")
    t = sub.as_tool()
    assert t.name == "researcher"
    assert t.description == "You look things up."
    assert t.schema["properties"]["prompt"]["type"] == "string"
    assert t.schema["required"] == ["prompt"]
    assert list(t.input) == ["prompt"]
    assert not t.needs_approval


@pytest.mark.parametrize("instructions", ["", "  \n "])
def test_without_instructions_the_description_says_whom_to_ask(instructions: str) -> None:
    sub = Agent(model=ScriptedModel([echo]), instructions=instructions, name="helper")
    assert sub.as_tool().description == "Ask the agent helper."
    named = sub.as_tool(name="second_opinion")
    assert (named.name, named.description) == ("second_opinion", "Ask the agent second_opinion.")
    assert sub.as_tool(description="Asks a colleague.").description == "Asks a colleague."


def test_an_agent_without_a_name_needs_one() -> None:
    sub = Agent(model=ScriptedModel([echo]))
    with pytest.raises(AerixError, match=r"as_tool needs a name.*as_tool\(name=") as info:
        sub.as_tool()
    assert info.value.kind == "options"
    assert sub.as_tool(name="helper").name == "helper"


@pytest.mark.parametrize(
    ("agent_name", "name", "said"),
    [
        ("Research Bot", None, r"the agent's name 'Research Bot' is not a tool name"),
        (None, "Bad-Name", r"name 'Bad-Name' is not a tool name"),
        (None, "", r"name '' is not a tool name"),
        (None, "x" * 65, r"is not a tool name"),
        (None, 7, r"name 7 is not a tool name"),
    ],
)
def test_a_name_that_is_not_a_tool_name_is_an_options_error(
    agent_name: str | None, name: object, said: str
) -> None:
    sub = Agent(model=ScriptedModel([echo]), name=agent_name)
    with pytest.raises(AerixError, match=said) as info:
        sub.as_tool(name=name)  # type: ignore[arg-type]
    assert info.value.kind == "options"


def test_a_description_that_is_not_a_string_is_an_options_error() -> None:
    sub = Agent(model=ScriptedModel([echo]), name="helper")
    with pytest.raises(AerixError, match="description must be a string or None, got int 3"):
        sub.as_tool(description=3)  # type: ignore[arg-type]


# -- what a call gives ----------------------------------------------------------------------


def test_the_result_is_the_inner_final_and_the_agent_keeps_no_conversation() -> None:
    model = ScriptedModel([echo] * 2)
    sub = Agent(model=model, instructions="Answer briefly.", name="researcher")
    boss = outer(sub.as_tool(), "who wrote Dune?")
    answer = asyncio.run(boss.ask("go"))
    assert results(answer.events) == {"call_1": ("inner: who wrote Dune?", False)}
    assert answer.text == "Results:\n[call_1 researcher] inner: who wrote Dune?"
    # the copy had the agent's system message and a conversation of its own: the prompt alone
    inner = model.calls[0].messages
    assert inner[0] == {"role": "system", "content": sub.system}
    assert inner[1:] == [{"role": "user", "content": "who wrote Dune?"}]
    assert sub.messages == () and not sub.busy


def test_each_call_starts_a_new_conversation_even_after_the_agent_ran() -> None:
    model = ScriptedModel([echo] * 3)
    sub = Agent(model=model, name="researcher")
    asyncio.run(sub.ask("an earlier question"))
    boss = outer(sub.as_tool(), "first", "second")
    asyncio.run(boss.ask("go"))
    assert [c.messages[1:] for c in model.calls[1:]] == [
        [{"role": "user", "content": "first"}],
        [{"role": "user", "content": "second"}],
    ]
    assert len(sub.messages) == 2  # its own conversation is untouched


def test_a_typed_answer_is_its_json_text() -> None:
    @dataclass
    class City:
        name: str
        people: int

    sub = Agent(
        model=ScriptedModel(['{"final":{"name":"Lyon","people":522000}}']), name="census", output=City
    )
    answer = asyncio.run(outer(sub.as_tool(), "Lyon?").ask("go"))
    text, error = results(answer.events)["call_1"]
    assert not error and json.loads(text) == {"name": "Lyon", "people": 522000}


def test_the_copy_has_the_agents_tools_hooks_and_limits() -> None:
    seen: list[str] = []

    @tool
    def lookup(word: str) -> str:
        """Look a word up."""
        return word.upper()

    script = ['{"calls":[{"tool":"lookup","input":{"word":"dune"}}]}', quote_results]
    hooks = {"before_call": lambda call: seen.append(call.tool)}
    sub = Agent(model=ScriptedModel(script), tools=[lookup], hooks=hooks, name="researcher")
    answer = asyncio.run(outer(sub.as_tool(), "look up dune").ask("go"))
    text, error = results(answer.events)["call_1"]
    assert (text, error) == ("Results:\n[call_1 lookup] DUNE", False)
    assert seen == ["lookup"]


# -- calls at once --------------------------------------------------------------------------


def test_calls_at_once_run_their_copies_at_once() -> None:
    both_in = asyncio.Barrier(2)

    @tool
    async def wait_for_the_other(word: str) -> str:
        """Wait until the other copy is here too."""
        await asyncio.wait_for(both_in.wait(), 10)  # only two copies running at once get past
        return word

    def call_wait(messages: list[ChatMessage]) -> str:
        return json.dumps(
            {"calls": [{"tool": "wait_for_the_other", "input": {"word": messages[-1]["content"]}}]}
        )

    def answer_last(messages: list[ChatMessage]) -> str:
        return json.dumps({"final": messages[-1]["content"].split("] ")[-1]})

    model = ScriptedModel([call_wait, call_wait, answer_last, answer_last])
    sub = Agent(model=model, tools=[wait_for_the_other], name="waiter")
    boss = outer(sub.as_tool(), "left", "right", concurrent_calls=True)
    answer = asyncio.run(boss.ask("go"))
    assert results(answer.events) == {"call_1": ("left", False), "call_2": ("right", False)}


# -- inner endings ----------------------------------------------------------------------------


def test_an_inner_run_that_ends_without_a_final_is_an_error_result_naming_the_agent() -> None:
    @tool
    def lookup(word: str) -> str:
        """Look a word up."""
        return word

    looping = [f'{{"calls":[{{"tool":"lookup","input":{{"word":"w{i}"}}}}]}}' for i in range(3)]
    sub = Agent(model=ScriptedModel(looping), tools=[lookup], name="researcher", limits={"turns": 2})
    answer = asyncio.run(outer(sub.as_tool(), "anything").ask("go"))
    text, error = results(answer.events)["call_1"]
    assert error
    assert text.startswith("error: agent researcher ended without an answer (turns): ")
    assert "2" in text  # the limit's message, which names it
    assert isinstance(answer.events[-1], FinalEvent)  # the outer run goes on


def test_an_agent_named_otherwise_than_its_tool_is_named_by_both() -> None:
    sub = Agent(model=ScriptedModel(['{"calls":[]}'] * 3), name="City Expert", limits={"turns": 1})
    answer = asyncio.run(outer(sub.as_tool(name="city"), "Lisbon?").ask("go"))
    text, error = results(answer.events)["call_1"]
    assert error and text.startswith("error: agent City Expert (the tool city) ended without an answer")


def test_an_inner_engine_failure_is_an_error_result_with_its_message() -> None:
    class Closed:
        def chat(self, messages: Any, opts: Any) -> Any:
            raise RuntimeError("this model is closed")

    sub = Agent(model=Closed(), name="researcher")  # type: ignore[arg-type]
    answer = asyncio.run(outer(sub.as_tool(), "anything").ask("go"))
    text, error = results(answer.events)["call_1"]
    assert error
    assert text.startswith("error: agent researcher ended without an answer (error): ")
    assert "this model is closed" in text


def test_a_paused_inner_run_is_an_error_result_naming_the_calls_it_waited_for() -> None:
    @tool(needs_approval=True)
    def delete(path: str) -> str:
        """Delete a file."""
        raise AssertionError("never runs: nobody approved it")

    script = ['{"calls":[{"tool":"delete","input":{"path":"notes.txt"}}]}']
    sub = Agent(model=ScriptedModel(script), tools=[delete], name="janitor")
    answer = asyncio.run(outer(sub.as_tool(), "tidy up").ask("go"))
    text, error = results(answer.events)["call_1"]
    assert error
    assert text.startswith(
        "error: agent janitor paused: its calls wait for a person's decision (delete (call_1))"
    )


@pytest.mark.parametrize("prompt", ["", "   "])
def test_a_prompt_the_agent_refuses_is_an_error_result_naming_the_agent(prompt: str) -> None:
    sub = Agent(model=ScriptedModel([echo]), name="researcher")
    answer = asyncio.run(outer(sub.as_tool(), prompt).ask("go"))
    text, error = results(answer.events)["call_1"]
    assert error and text.startswith("error: agent researcher: ") and "prompt" in text


# -- the abort -------------------------------------------------------------------------------


def test_the_outer_abort_reaches_the_inner_run() -> None:
    inner = ScriptedModel([Stall(text='{"final":"')])  # hangs until its generation is aborted
    sub = Agent(model=inner, name="slow")
    boss = outer(sub.as_tool(), "take your time")

    async def main() -> list[Any]:
        controller = AbortController()
        events = []
        async for ev in boss.run("go", signal=controller.signal):
            events.append(ev)
            if isinstance(ev, CallEvent):
                asyncio.get_running_loop().call_later(0.05, controller.abort)
        return events

    events = asyncio.run(asyncio.wait_for(main(), 30))
    assert isinstance(events[-1], EndEvent) and events[-1].reason == "abort"
    assert inner.calls and inner.calls[0].opts["signal"].aborted  # the inner generation saw it
    assert not [ev for ev in events if isinstance(ev, ResultEvent)]  # the aborted call keeps no result


def test_cancelling_the_outer_run_stops_the_inner_one() -> None:
    inner = ScriptedModel([Stall(text='{"final":"')])
    sub = Agent(model=inner, name="slow")
    boss = outer(sub.as_tool(), "take your time")

    async def main() -> None:
        consumer = asyncio.create_task(boss.ask("go"))
        for _ in range(3000):  # until the inner run is generating
            if inner.calls:
                break
            await asyncio.sleep(0.01)
        consumer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await consumer
        assert not boss.busy
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        assert others == []  # nothing of the inner run is left running

    asyncio.run(main())
