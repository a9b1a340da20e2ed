"""`LlamaCpp(kv_slots=...)`: the KV caches of several conversations on one engine (`_slots`).

Fast tests on the tiny generated GGUF; the real model's are in test_kv_slots_real.py.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import pytest
from _signals import AbortAfter

pytest.importorskip("llama_cpp", reason="the LlamaCpp tests need aerix[llama]")

from aerix import Agent, Limits
from aerix.abort import AbortController, AbortSignal
from aerix.engines import LlamaCpp
from aerix.engines.llamacpp import _llama
from aerix.engines.llamacpp._slots import most_slots
from aerix.errors import AerixError
from aerix.model import ChatMessage, ContextExceeded, Delta, GenerateOptions, Usage
from aerix.tools import ToolContext, run_tool

SYSTEM: ChatMessage = {"role": "system", "content": "You answer in JSON. " * 3}

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"final": {"type": "string", "pattern": "^[a-z]{1,8}$"}},
    "required": ["final"],
    "additionalProperties": False,
}
"""A short answer: each turn's text is a whole JSON value, written back as it was generated."""


def user(text: str) -> ChatMessage:
    return {"role": "user", "content": text}


class Talk:
    """One conversation on an engine: each `turn` sends it, then writes the answer back."""

    def __init__(self, engine: LlamaCpp, first: str) -> None:
        self.engine = engine
        self.messages: list[ChatMessage] = [SYSTEM, user(first)]
        self.texts: list[str] = []
        self.usages: list[Usage] = []
        self.held = 0
        """The tokens of this conversation the KV cache held after its last turn."""

    async def turn(self, signal: AbortSignal | None = None) -> Usage:
        opts: dict[str, Any] = {"temperature": 0, "max_tokens": 40, "constraint": {"json": SCHEMA}}
        if signal is not None:
            opts["signal"] = signal
        deltas: list[Delta] = [d async for d in self.engine.chat(self.messages, GenerateOptions(**opts))]  # type: ignore[typeddict-item]
        usage = deltas[-1].usage
        assert deltas[-1].done and usage is not None
        text = "".join(d.text for d in deltas)
        self.texts.append(text)
        self.usages.append(usage)
        stats = self.engine.last_stats
        assert stats is not None
        self.held = usage.prompt_tokens + usage.completion_tokens - stats.unevaluated_tokens
        n = len(self.texts)
        self.messages += [{"role": "assistant", "content": text}, user(f"and then {n}?")]
        return usage


def held_tokens(engine: LlamaCpp) -> int:
    """The tokens of every conversation the engine keeps, the one in its context included."""
    return sum(len(t) for t in engine._slots.kept) + engine._cache.n_tokens


def shared(engine: LlamaCpp, messages: list[ChatMessage]) -> int:
    """The longest prefix a fresh tokenisation of `messages` shares with a conversation kept."""
    fresh = engine._tokenize(engine.render(messages).encode(), True)
    best = 0
    for tokens in [*engine._slots.kept, list(engine._cache.history.tokens)]:
        n = next((i for i, (a, b) in enumerate(zip(fresh, tokens, strict=False)) if a != b), None)
        best = max(best, min(len(fresh), len(tokens)) if n is None else n)
    return min(best, len(fresh) - 1)


def assert_cache_consistent(engine: LlamaCpp) -> None:
    llama = engine._llama
    assert engine._cache.history.tokens == _llama.evaluated(llama, _llama.n_evaluated(llama))


@pytest.fixture
def slots(tiny_gguf: Path) -> Any:
    """`slots(n, **options)`: an engine on the tiny model keeping `n` conversations."""
    made: list[LlamaCpp] = []

    def make(n: int, **options: Any) -> LlamaCpp:
        made.append(LlamaCpp(tiny_gguf, n_ctx=options.pop("n_ctx", 2048), n_threads=1, kv_slots=n, **options))
        return made[-1]

    yield make
    for engine in made:
        engine.close()


# -- the option ------------------------------------------------------------------------------


def test_four_conversations_by_default(tiny_gguf: Path) -> None:
    assert inspect.signature(LlamaCpp).parameters["kv_slots"].default == 4
    engine = LlamaCpp(tiny_gguf, n_ctx=256)
    try:
        assert engine._slots.count == 4
    finally:
        engine.close()


def test_one_conversation_for_each_64_tokens_of_the_context() -> None:
    # llama.cpp makes a context of at least 256 tokens: the default fits any n_ctx
    assert [most_slots(n) for n in (1, 64, 256, 300, 2048, 4096)] == [4, 4, 4, 4, 32, 64]


@pytest.mark.parametrize(
    ("kv_slots", "n_ctx", "said"),
    [
        (0, 2048, "from 1 to 32 (one conversation for each 64 tokens of the context, n_ctx=2048), got 0"),
        (-1, 2048, "from 1 to 32 (one conversation for each 64 tokens of the context, n_ctx=2048), got -1"),
        (33, 2048, "from 1 to 32 (one conversation for each 64 tokens of the context, n_ctx=2048), got 33"),
        (5, 256, "from 1 to 4 (one conversation for each 64 tokens of the context, n_ctx=256), got 5"),
        (2.0, 2048, "got 2.0"),
        (True, 2048, "got True"),
        ("4", 2048, "got '4'"),
        (None, 2048, "got None"),
    ],
)
def test_bad_kv_slots_are_refused_before_loading(
    tiny_gguf: Path, monkeypatch: pytest.MonkeyPatch, kv_slots: object, n_ctx: int, said: str
) -> None:
    monkeypatch.setattr(_llama, "open_llama", lambda *a, **k: pytest.fail("loaded"))
    with pytest.raises(AerixError) as info:
        LlamaCpp(tiny_gguf, n_ctx=n_ctx, kv_slots=kv_slots)  # type: ignore[arg-type]
    assert info.value.kind == "options"
    assert info.value.message.startswith("kv_slots must be a whole number ")
    assert said in info.value.message and "1 keeps one conversation" in info.value.message


def test_kv_slots_for_the_training_length_are_checked_once_it_is_known(tiny_gguf: Path) -> None:
    with pytest.raises(AerixError) as info:
        LlamaCpp(tiny_gguf, n_ctx=0, kv_slots=10_000)
    assert info.value.kind == "options"
    assert "kv_slots must be a whole number from 1 to " in info.value.message
    assert "n_ctx=0, the model's " in info.value.message and "got 10000" in info.value.message
    with pytest.raises(AerixError, match=r"kv_slots must be a whole number 1 or more, got 0"):
        LlamaCpp(tiny_gguf, n_ctx=0, kv_slots=0)


# -- conversations taking turns --------------------------------------------------------------


async def test_conversations_taking_turns_each_reuse_their_own(slots: Any) -> None:
    engine = slots(4)
    talks = [Talk(engine, q) for q in ("weather in Lisbon?", "a poem on ships", "sum 2 and 3")]
    for _ in range(3):
        for talk in talks:
            before = talk.held
            usage = await talk.turn()
            assert usage.cached_tokens == before if before else usage.cached_tokens < usage.prompt_tokens
            assert_cache_consistent(engine)
    assert len(engine._slots.kept) == 2 and engine._slots.kept_bytes > 0


async def test_one_slot_keeps_one_conversation_as_before(slots: Any) -> None:
    engine = slots(1)
    a, b = Talk(engine, "weather in Lisbon?"), Talk(engine, "a poem on ships")
    await a.turn()
    await b.turn()
    for talk in (a, b, a):
        expected = shared(engine, talk.messages)
        usage = await talk.turn()
        assert usage.cached_tokens == expected < talk.usages[-2].prompt_tokens
        assert engine._slots.kept == [] and engine._slots.kept_bytes == 0
        assert_cache_consistent(engine)


async def test_the_least_recently_used_gives_way(slots: Any) -> None:
    engine = slots(2)
    a, b, c = (Talk(engine, q) for q in ("weather in Lisbon?", "a poem on ships", "sum 2 and 3"))
    await a.turn()
    await b.turn()
    held = a.held
    assert (await a.turn()).cached_tokens == held  # b waits out of the context
    await c.turn()  # a goes out, b (used least recently) is dropped
    assert len(engine._slots.kept) == 1
    held = a.held
    assert (await a.turn()).cached_tokens == held
    expected = shared(engine, b.messages)
    usage = await b.turn()
    assert usage.cached_tokens == expected < b.usages[0].prompt_tokens  # only what all share
    assert_cache_consistent(engine)


async def test_outputs_are_those_of_each_conversation_alone(slots: Any) -> None:
    questions = ("weather in Lisbon?", "a poem on ships")
    alone = []
    for q in questions:
        talk = Talk(slots(1), q)
        for _ in range(3):
            await talk.turn()
        alone.append(talk)
    engine = slots(4)
    together = [Talk(engine, q) for q in questions]
    for _ in range(3):
        for talk in together:
            await talk.turn()
    for one, other in zip(alone, together, strict=True):
        assert one.texts == other.texts
        # the same prompts, and after the first turn (the second conversation's reuses the
        # system message of the first), the same cached tokens
        assert [(u.prompt_tokens, u.completion_tokens) for u in one.usages] == [
            (u.prompt_tokens, u.completion_tokens) for u in other.usages
        ]
        assert one.usages[1:] == other.usages[1:]


async def test_a_prompt_that_parts_from_a_conversation_leaves_it_whole(slots: Any) -> None:
    engine = slots(4)
    a = Talk(engine, "weather in Lisbon?")
    await a.turn()
    branch = Talk(engine, "")
    branch.messages = [*a.messages[:2], {"role": "assistant", "content": '{"final":"x"}'}, user("no")]
    usage = await branch.turn()
    assert 0 < usage.cached_tokens < a.held  # the first prompt, not a's answer
    held = a.held
    assert (await a.turn()).cached_tokens == held


@pytest.mark.parametrize("checks", [0, 1, 4])  # before the prefill, after a chunk, mid-decode
async def test_an_abort_leaves_the_other_conversations_whole(slots: Any, checks: int) -> None:
    engine = slots(4, prefill_chunk=8)
    a, b = Talk(engine, "weather in Lisbon?"), Talk(engine, "a poem on ships " * 4)
    await a.turn()
    usage = await b.turn(AbortAfter(checks))
    assert usage.completion_tokens < 40
    assert [len(t) for t in engine._slots.kept] == [a.held]  # copied out whole before b began
    assert_cache_consistent(engine)
    held = a.held
    assert (await a.turn()).cached_tokens == held


async def test_every_conversation_together_holds_at_most_n_ctx_tokens(slots: Any) -> None:
    engine = slots(4, n_ctx=512)
    talks = [Talk(engine, f"question {i}: " + "words " * 20) for i in range(3)]  # 230 tokens each
    for talk in talks:
        await talk.turn()
        assert held_tokens(engine) <= engine.n_ctx
    assert len(engine._slots.kept) == 1  # four would be allowed, but not more than n_ctx holds
    held = talks[1].held
    assert (await talks[1].turn()).cached_tokens == held


async def test_a_prompt_refused_for_its_length_drops_nothing(slots: Any) -> None:
    engine = slots(2, n_ctx=256)
    a, b = Talk(engine, "weather in Lisbon?"), Talk(engine, "a poem on ships")
    await a.turn()
    await b.turn()
    kept, live = engine._slots.kept, list(engine._cache.history.tokens)
    with pytest.raises(ContextExceeded):
        await Talk(engine, "long " * 400).turn()
    assert engine._slots.kept == kept and engine._cache.history.tokens == live
    held = a.held
    assert (await a.turn()).cached_tokens == held


async def test_a_state_llama_cpp_refuses_is_prefilled_again(
    slots: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = slots(4)
    a, b = Talk(engine, "weather in Lisbon?"), Talk(engine, "a poem on ships")
    await a.turn()
    await b.turn()
    real = _llama.restore_sequence
    monkeypatch.setattr(_llama, "restore_sequence", lambda llama, state, tokens: real(llama, state, []))
    usage = await a.turn()
    assert usage.cached_tokens == 0
    assert_cache_consistent(engine)
    monkeypatch.setattr(_llama, "restore_sequence", real)
    held = b.held
    assert (await b.turn()).cached_tokens == held


async def test_reset_forgets_every_conversation(slots: Any) -> None:
    engine = slots(4)
    a, b = Talk(engine, "weather in Lisbon?"), Talk(engine, "a poem on ships")
    await a.turn()
    await b.turn()
    engine.reset()
    assert engine._slots.kept == [] and engine._cache.n_tokens == 0
    assert (await a.turn()).cached_tokens == 0


# -- agents on one engine ---------------------------------------------------------------------

ANSWER = Limits(turns=1, retries=0, max_tokens=24)
"""One short generation a run: the tiny model's text is noise, its prompt is what counts."""


def first_usage(events: list[Any]) -> dict[str, Any]:
    """The first generation's usage event of a run, as a dict."""
    return next(e if isinstance(e, dict) else e.to_dict() for e in events if _type(e) == "usage")


def _type(event: Any) -> str:
    return event["type"] if isinstance(event, dict) else event.type


@pytest.mark.parametrize("kv_slots", [4, 1])
async def test_playground_sessions_each_keep_their_own_conversation_warm(slots: Any, kv_slots: int) -> None:
    pytest.importorskip("starlette")
    import httpx

    from aerix.playground import create_app

    engine = slots(kv_slots)
    app = create_app(lambda: engine, tools=[], limits=ANSWER)
    clients = [
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") for _ in range(2)
    ]
    usages: list[list[dict[str, Any]]] = [[], []]
    try:
        for _ in range(2):
            for i, client in enumerate(clients):
                settings = {
                    "instructions": f"You are helper number {i} of two, the {('first', 'second')[i]}."
                }
                r = await client.post("/api/run", json={"prompt": f"a question of {i}", "settings": settings})
                assert r.status_code == 200, r.text
                got = [json.loads(line[5:]) for line in r.text.splitlines() if line.startswith("data:")]
                usages[i].append(first_usage(got))
    finally:
        for client in clients:
            await client.aclose()
    # the runs end cut, keeping nothing: each session's second prompt is its first again
    for _, second in usages:  # after the other session ran, each reuses its own conversation
        reused = second["cached_tokens"] / second["prompt_tokens"]
        assert reused >= 0.9 if kv_slots == 4 else reused < 0.5


@pytest.mark.parametrize("kv_slots", [4, 1])
async def test_an_agent_reuses_its_own_after_the_agent_it_calls_ran(slots: Any, kv_slots: int) -> None:
    engine = slots(kv_slots)
    expert = Agent(model=engine, instructions="You know every city. " * 8, name="expert", limits=ANSWER)
    helper = expert.as_tool()
    boss = Agent(model=engine, instructions="You plan trips.", tools=[helper], limits=ANSWER)
    usages = []
    for step in range(2):
        usages.append(first_usage([ev async for ev in boss.run("plan a trip")]))  # keeps nothing
        # the agent it calls, a fresh copy a call, runs on the same engine in between
        before = engine.last_stats
        cx = ToolContext(signal=AbortController().signal, call_id=f"call_{step}")
        text, _ = await run_tool(helper, {"prompt": f"What is Lisbon known for? ({step})"}, cx)
        assert text and engine.last_stats is not before  # it generated
    reused = usages[1]["cached_tokens"] / usages[1]["prompt_tokens"]
    assert reused >= 0.9 if kv_slots == 4 else reused < 0.5


async def test_an_agent_tool_whose_model_is_closed_says_so(tiny_gguf: Path) -> None:
    engine = LlamaCpp(tiny_gguf, n_ctx=512, n_threads=1)
    helper = Agent(model=engine, name="expert", limits=ANSWER).as_tool()
    engine.close()
    cx = ToolContext(signal=AbortController().signal, call_id="call_1")
    text, error = await run_tool(helper, {"prompt": "Lisbon?"}, cx)
    assert error
    assert text == "error: agent expert ended without an answer (error): this LlamaCpp engine is closed"
