"""The loop: endings, limits, hooks, retries, the conversation, busy, sync, aborts."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import pickle
import threading
from collections.abc import Sequence
from typing import Any

import pytest

from _tools import clock, weather
from aerix import (
    AbortController,
    AbortSignal,
    AerixError,
    Agent,
    CallEvent,
    EndEvent,
    FinalEvent,
    Hooks,
    Limits,
    ResultEvent,
    RetryEvent,
    TextEvent,
    ToolFit,
    TurnEvent,
    UsageEvent,
    tool,
)
from aerix._observe import OBSERVERS
from aerix.agent import Answer
from aerix.model import Delta, Usage
from aerix.testing import Cut, Fail, NoDone, ScriptedModel, Stall
from aerix.turn import fit_text, turn_schema


def call(tool_name: str = "weather", **input: Any) -> str:
    return json.dumps({"calls": [{"tool": tool_name, "input": input or {"city": "Lisbon"}}]})


def final(text: str = "Yes", thought: str | None = None) -> str:
    return json.dumps({"final": text, **({"thought": thought} if thought else {})})


async def events_of(agent: Agent, prompt: str = "Umbrella?", **kw: Any) -> list[Any]:
    return [ev async for ev in agent.run(prompt, **kw)]


def types(events: list[Any]) -> list[str]:
    return [ev.type for ev in events]


def agent_with(*script: Any, **kw: Any) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(script)
    kw.setdefault("tools", [weather, clock])
    return Agent(model=model, **kw), model


# -- a run, start to end ---------------------------------------------------------


async def test_a_run_with_a_call_then_a_final() -> None:
    agent, model = agent_with(call(), final("Pack sunglasses", "sunny"))
    events = await events_of(agent)
    assert types(events) == ["text", "usage", "turn", "call", "result", "text", "usage", "final"]
    turn = events[2]
    assert isinstance(turn, TurnEvent) and turn.turn == 1 and turn.calls[0].id == "call_1"
    assert events[4] == ResultEvent(id="call_1", tool="weather", text="Sunny in Lisbon, 21°c", error=False)
    assert events[-1] == FinalEvent(text="Pack sunglasses", thought="sunny")
    assert [m["role"] for m in agent.messages] == ["user", "assistant", "user", "assistant"]
    assert agent.messages[0]["content"] == "Umbrella?"
    assert agent.messages[1]["content"] == call()
    assert agent.messages[2]["content"] == "Results:\n[call_1 weather] Sunny in Lisbon, 21°c"


async def test_every_generation_gets_the_schema_and_the_limits() -> None:
    agent, model = agent_with(
        call(), Cut(), final(), limits={"max_tokens": 64}, generation={"temperature": 0}
    )
    await events_of(agent)
    assert len(model.calls) == 3
    for i, c in enumerate(model.calls):
        assert c.opts["constraint"] == {"json": turn_schema([weather, clock], short=i == 2, max_tokens=64)}
        assert c.opts["max_tokens"] == 64 and c.opts["temperature"] == 0
        assert c.opts["signal"] is not None
        assert c.messages[0] == {"role": "system", "content": agent.system}
        assert all(set(m) == {"role", "content"} for m in c.messages)


async def test_a_turn_schema_is_built_once_and_only_when_a_generation_needs_it() -> None:
    agent, model = agent_with(call(), final(), final())
    assert not agent._contract._schemas  # an idle agent holds no schema (each is dozens of objects)
    await events_of(agent)
    await agent.ask("again")
    first, second, third = (c.opts["constraint"]["json"] for c in model.calls)
    assert first is second is third
    assert list(agent._contract._schemas) == [("auto", False)]


async def test_constrain_false_sends_no_constraint() -> None:
    agent, model = agent_with(final(), constrain=False)
    await events_of(agent)
    assert "constraint" not in model.calls[0].opts


async def test_the_prompt_goes_unchanged_as_the_last_user_message() -> None:
    agent, model = agent_with(final())
    await events_of(agent, "  odd\nprompt {json} ")
    assert model.calls[0].messages[-1] == {"role": "user", "content": "  odd\nprompt {json} "}


async def test_each_prompt_only_appends_to_the_last() -> None:
    agent, model = agent_with(call(), call("clock"), final(), final("again"))
    await events_of(agent)
    await events_of(agent, "and again?")
    for before, after in zip(model.calls, model.calls[1:], strict=False):
        assert after.messages[: len(before.messages)] == before.messages
    assert model.calls[1].messages[-1]["content"].startswith("Results:\n[call_1 weather]")


async def test_call_ids_are_unique_across_runs_and_turns() -> None:
    two = json.dumps({"calls": [{"tool": "clock", "input": {}}] * 2})
    agent, _ = agent_with(two, call(), final(), two, final())
    events = await events_of(agent) + await events_of(agent, "more")
    ids = [ev.id for ev in events if isinstance(ev, CallEvent)]
    assert ids == ["call_1", "call_2", "call_3", "call_4", "call_5"]


async def test_calls_run_in_order_one_at_a_time() -> None:
    order: list[str] = []
    running = 0

    @tool
    async def slow(n: int) -> str:
        """Slow."""
        nonlocal running
        running += 1
        assert running == 1
        order.append(f"start {n}")
        await asyncio.sleep(0.001)
        order.append(f"end {n}")
        running -= 1
        return str(n)

    turn = json.dumps({"calls": [{"tool": "slow", "input": {"n": i}} for i in range(3)]})
    agent, _ = agent_with(turn, final(), tools=[slow])
    await events_of(agent)
    assert order == ["start 0", "end 0", "start 1", "end 1", "start 2", "end 2"]


async def test_more_than_eight_calls_keep_eight_and_say_so() -> None:
    turn = json.dumps({"calls": [{"tool": "clock", "input": {}}] * 10})
    agent, _ = agent_with(turn, final())
    events = await events_of(agent)
    assert sum(isinstance(e, ResultEvent) for e in events) == 8
    assert "2 more call(s) were dropped" in agent.messages[2]["content"]


async def test_text_events_stream_the_raw_text() -> None:
    model = ScriptedModel([final("streamed")], chunk_size=3)
    agent = Agent(model=model)
    events = await events_of(agent)
    assert "".join(e.text for e in events if isinstance(e, TextEvent)) == final("streamed")
    assert sum(isinstance(e, TextEvent) for e in events) > 3


async def test_usage_event_reports_cached_tokens() -> None:
    agent, _ = agent_with(call(), final())
    usage = [e for e in await events_of(agent) if isinstance(e, UsageEvent)]
    assert len(usage) == 2 and usage[0].cached_tokens == 0 and usage[1].cached_tokens > 0
    assert usage[1].cached_tokens == usage[0].prompt_tokens


async def test_no_tools_only_a_final() -> None:
    agent, model = agent_with(call(), final("hi"), tools=[])
    events = await events_of(agent)
    assert isinstance(events[-1], FinalEvent)
    assert [e.reason for e in events if isinstance(e, RetryEvent)][0].startswith("this turn must be a final")


# -- input checks and results ------------------------------------------------------


async def test_a_bad_input_is_an_error_result_and_the_tool_does_not_run() -> None:
    ran: list[object] = []

    @tool
    def t(n: int) -> str:
        """T."""
        ran.append(n)
        return "ran"

    agent, _ = agent_with('{"calls":[{"tool":"t","input":{"n":"7"}}]}', final(), tools=[t])
    events = await events_of(agent)
    result = next(e for e in events if isinstance(e, ResultEvent))
    assert result.error and result.text == 'error: input.n: expected integer, got "7"'
    assert ran == []
    assert isinstance(events[-1], FinalEvent)


async def test_a_tool_that_raises_never_ends_the_run() -> None:
    @tool
    def bad() -> str:
        """Bad."""
        raise KeyError("k")

    agent, _ = agent_with('{"calls":[{"tool":"bad","input":{}}]}', final(), tools=[bad])
    events = await events_of(agent)
    assert next(e for e in events if isinstance(e, ResultEvent)).text == "error: KeyError: 'k'"
    assert isinstance(events[-1], FinalEvent)


async def test_results_are_cut_at_result_chars() -> None:
    @tool
    def big() -> str:
        """Big."""
        return "y" * 1_000_000

    agent, _ = agent_with(
        '{"calls":[{"tool":"big","input":{}}]}', final(), tools=[big], limits={"result_chars": 10}
    )
    result = next(e for e in await events_of(agent) if isinstance(e, ResultEvent))
    assert result.text == "y" * 10 + "\n[cut: 999990 more characters]"


async def test_non_string_results_are_json_and_unserialisable_ones_errors() -> None:
    @tool
    def obj() -> dict[str, int]:
        """Obj."""
        return {"a": 1}

    @tool
    def odd() -> object:
        """Odd."""
        return {1, 2}

    turn = '{"calls":[{"tool":"obj","input":{}},{"tool":"odd","input":{}}]}'
    agent, _ = agent_with(turn, final(), tools=[obj, odd])
    results = [e for e in await events_of(agent) if isinstance(e, ResultEvent)]
    assert (results[0].text, results[0].error) == ('{"a": 1}', False)
    assert results[1].error and "cannot be serialised" in results[1].text


# -- hooks -----------------------------------------------------------------------------


async def test_before_call_deny_refuses_without_running() -> None:
    seen_after: list[str] = []
    agent, _ = agent_with(
        call(),
        final(),
        hooks={
            "before_call": lambda c: {"deny": "not today"},
            "after_call": lambda c, r: seen_after.append(r),
        },
    )
    events = await events_of(agent)
    assert types(events)[2:5] == ["turn", "call", "result"]
    assert events[4] == ResultEvent(id="call_1", tool="weather", text="refused: not today", error=True)
    assert seen_after == []


async def test_before_call_input_replaces_and_is_checked() -> None:
    async def swap(c: Any) -> dict[str, Any]:
        return {"input": {"city": "Porto"} if c.id == "call_1" else {"city": 3}}

    agent, _ = agent_with(call(), call(), final(), hooks=Hooks(before_call=swap))
    events = await events_of(agent)
    calls = [e for e in events if isinstance(e, CallEvent)]
    results = [e for e in events if isinstance(e, ResultEvent)]
    assert calls[0].input == {"city": "Porto"} and results[0].text.startswith("Sunny in Porto")
    assert results[1].error and "expected string" in results[1].text
    turn = next(e for e in events if isinstance(e, TurnEvent))
    assert turn.calls[0].input == {"city": "Lisbon"}


async def test_after_call_sees_errors_and_replaces_results() -> None:
    seen: list[tuple[str, str]] = []

    def after(c: Any, result: str) -> dict[str, str] | None:
        seen.append((c.tool, result))
        return {"result": "replaced"} if c.tool == "clock" else None

    agent, _ = agent_with(
        '{"calls":[{"tool":"weather","input":{}},{"tool":"clock","input":{}}]}',
        final(),
        hooks={"after_call": after},
    )
    events = await events_of(agent)
    assert seen == [("weather", "error: input: missing required field 'city'"), ("clock", "12:00")]
    assert [e.text for e in events if isinstance(e, ResultEvent)][1] == "replaced"


async def test_on_final_continue_gives_another_turn() -> None:
    answers = iter([{"continue": "Check Porto too."}, None])
    agent, model = agent_with(final("first"), final("second"), hooks={"on_final": lambda t: next(answers)})
    events = await events_of(agent)
    assert [e.text for e in events if isinstance(e, FinalEvent)] == ["second"]
    assert model.calls[1].messages[-2:] == [
        {"role": "assistant", "content": final("first")},
        {"role": "user", "content": "Check Porto too."},
    ]
    assert len(agent.messages) == 4


async def test_on_final_continue_is_bounded_by_turns() -> None:
    agent, _ = agent_with(
        final(), final(), hooks={"on_final": lambda t: {"continue": "more"}}, limits={"turns": 2}
    )
    events = await events_of(agent)
    assert events[-1].type == "end" and events[-1].reason == "turns"
    assert not any(isinstance(e, FinalEvent) for e in events)


@pytest.mark.parametrize(
    ("hooks", "message"),
    [
        ({"before_call": lambda c: 1 / 0}, "hook before_call raised ZeroDivisionError"),
        ({"before_call": lambda c: {"deny": 3}}, "deny reason must be a string"),
        ({"before_call": lambda c: {"input": [1]}}, "replacement input must be a dict"),
        (
            {"before_call": lambda c: {"input": {"city": {"Lisbon"}}}},
            "replacement input must be JSON, but input.city is {'Lisbon'}, a set",
        ),
        (
            {"before_call": lambda c: {"input": {"n": [1, float("nan")]}}},
            "replacement input must be JSON, but input.n[1] is nan, which JSON has no value for",
        ),
        (
            {"before_call": lambda c: {"input": {1: 2, "city": "Lisbon"}}},
            "replacement input must be JSON, but input has the key 1, which is not a string",
        ),
        ({"before_call": lambda c: {"allow": True}}, "hook before_call returned"),
        ({"before_call": lambda c: "deny"}, "hook before_call returned 'deny'"),
        ({"after_call": lambda c, r: {"result": 3}}, "replacement result must be a string"),
        ({"after_call": lambda c, r: r}, "hook after_call returned"),
        ({"on_final": lambda t: {"continue": None}}, "continue text must be a string"),
        ({"on_final": lambda t: {"continue": " "}}, "hook on_final: the continue text is empty (' ')"),
        ({"on_final": lambda t: {"stop": 1}}, "hook on_final returned"),
    ],
)
async def test_a_hook_that_raises_or_returns_junk_ends_with_error(
    hooks: dict[str, Any], message: str
) -> None:
    agent, _ = agent_with(call(), final(), hooks=hooks)
    events = await events_of(agent)
    assert isinstance(events[-1], EndEvent) and events[-1].reason == "error"
    assert message in events[-1].message
    assert sum(e.type in ("final", "end") for e in events) == 1
    assert not agent.busy


async def test_a_replacement_input_reads_as_json_and_stays_the_hooks_own() -> None:
    given = {"city": "Lisbon", "days": (1, 2)}  # a tuple reads as an array, as json.dumps writes it
    agent, _ = agent_with(call(), final(), hooks={"before_call": lambda c: {"input": given}})
    events = await events_of(agent)
    (ev,) = [e for e in events if e.type == "call"]
    assert ev.input == {"city": "Lisbon", "days": [1, 2]} and json.loads(json.dumps(ev.to_dict()))
    given["city"] = "Porto"  # what the hook does with its dict afterwards changes no event
    assert ev.input["city"] == "Lisbon"


async def test_async_hook_that_raises() -> None:
    async def bad(c: Any) -> None:
        raise RuntimeError("async hook broke")

    agent, _ = agent_with(call(), final(), hooks={"before_call": bad})
    events = await events_of(agent)
    assert events[-1] == EndEvent(
        reason="error", message="hook before_call raised RuntimeError: async hook broke"
    )


# -- retries and limits ----------------------------------------------------------------


async def test_a_bad_turn_is_retried_with_the_reason_and_then_forgotten() -> None:
    agent, model = agent_with("not json", final())
    events = await events_of(agent)
    retry = next(e for e in events if isinstance(e, RetryEvent))
    assert retry.turn == 1 and retry.reason.startswith("not JSON")
    assert model.calls[1].messages[-2] == {"role": "assistant", "content": "not json"}
    assert "not valid: not JSON" in model.calls[1].messages[-1]["content"]
    assert [m["content"] for m in agent.messages] == ["Umbrella?", final()]


async def test_a_cut_turn_is_retried_shorter() -> None:
    agent, model = agent_with(Cut(text='{"final":"long'), final(), limits={"max_tokens": 50})
    events = await events_of(agent)
    retry = next(e for e in events if isinstance(e, RetryEvent))
    assert retry.reason.startswith("cut: the turn reached max_tokens (50)")
    assert "cut off at 50 tokens" in model.calls[1].messages[-1]["content"]
    assert "shorter" in model.calls[1].messages[-1]["content"]
    short = model.calls[1].opts["constraint"]["json"]["anyOf"]
    assert short[0]["properties"]["calls"]["maxItems"] == 1
    assert "thought" not in short[0]["properties"] and "thought" not in short[1]["properties"]
    assert isinstance(events[-1], FinalEvent)


async def test_a_bad_turn_whose_json_closed_at_max_tokens_is_bad_not_cut() -> None:
    agent, model = agent_with(Cut(text='{"answer":"x"}'), final(), limits={"max_tokens": 50})
    events = await events_of(agent)
    retry = next(e for e in events if isinstance(e, RetryEvent))
    assert retry.reason.startswith("not one of the two shapes")  # the real reason, not "cut"
    assert "cut off" not in model.calls[1].messages[-1]["content"]
    full = model.calls[1].opts["constraint"]["json"]["anyOf"]
    assert "thought" in full[1]["properties"]  # the full schema, not the shorter one
    assert isinstance(events[-1], FinalEvent)


async def test_an_error_result_and_an_engine_failure_say_the_exceptions_own_message() -> None:
    @tool
    def bad() -> str:
        """Bad."""
        raise ValueError("no such city")

    @tool
    def empty() -> str:
        """Empty."""
        raise TimeoutError

    two = '{"calls":[{"tool":"bad","input":{}},{"tool":"empty","input":{}}]}'
    agent, _ = agent_with(two, Fail(error=RuntimeError("disk on fire")), tools=[bad, empty], calls_per_turn=2)
    events = await events_of(agent)
    results = [e.text for e in events if isinstance(e, ResultEvent)]
    assert results == ["error: no such city", "error: TimeoutError"]  # SPEC: `error: <message>`
    assert events[-1] == EndEvent(reason="error", message="disk on fire")


async def test_a_turn_that_closes_exactly_at_max_tokens_is_kept() -> None:
    agent, _ = agent_with(Cut(text=final("fits")))
    events = await events_of(agent)
    assert events[-1] == FinalEvent(text="fits")


async def test_retries_exhausted() -> None:
    agent, model = agent_with("x", "y", "z", final(), limits={"retries": 2})
    events = await events_of(agent)
    assert types(events).count("retry") == 2
    assert events[-1].type == "end" and events[-1].reason == "retries"
    assert "3 bad turns in a row" in events[-1].message
    assert len(model.calls) == 3 and agent.messages == ()


async def test_retries_zero() -> None:
    agent, _ = agent_with("x", final(), limits={"retries": 0})
    events = await events_of(agent)
    assert types(events) == ["text", "usage", "end"] and events[-1].reason == "retries"
    assert events[-1].message.startswith("a bad turn (limits.retries=0): not JSON")


async def test_retries_count_per_turn() -> None:
    agent, _ = agent_with("x", call(), "y", final(), limits={"retries": 1})
    events = await events_of(agent)
    assert isinstance(events[-1], FinalEvent) and types(events).count("retry") == 2


async def test_turns_exhausted_without_final() -> None:
    agent, model = agent_with(call(), call(), call(), limits={"turns": 3})
    events = await events_of(agent)
    assert events[-1].type == "end" and events[-1].reason == "turns"
    assert len(model.calls) == 3
    assert len(agent.messages) == 1 + 2 * 3


async def test_a_bad_turn_on_the_last_generation_ends_with_turns_without_a_retry() -> None:
    agent, _ = agent_with(call(), "bad", limits={"turns": 2, "retries": 5})
    events = await events_of(agent)
    assert "retry" not in types(events)
    assert events[-1].type == "end" and events[-1].reason == "turns"


async def test_turns_count_retries_and_cuts() -> None:
    agent, model = agent_with("bad", Cut(), final(), limits={"turns": 2, "retries": 5})
    events = await events_of(agent)
    assert events[-1].reason == "turns" and len(model.calls) == 2
    assert [e.turn for e in events if isinstance(e, RetryEvent)] == [1]


# -- engine failures ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("step", "message"),
    [
        (Fail(error="engine exploded"), "engine exploded"),
        (Fail(text='{"fi', error=ValueError("half way")), "half way"),
        (NoDone(text=final()), "ended without its done delta"),
    ],
)
async def test_engine_failures_end_with_error(step: Any, message: str) -> None:
    agent, _ = agent_with(call(), step)
    events = await events_of(agent)
    assert isinstance(events[-1], EndEvent) and events[-1].reason == "error"
    assert message in events[-1].message
    assert len(agent.messages) == 3  # the completed first turn stays
    assert not agent.busy


async def test_a_delta_without_a_done_flag_still_streams_its_text_then_ends_with_error() -> None:
    class TextOnly:
        text = "hi"

    async def chat(messages: Any, opts: Any = None) -> Any:
        yield TextOnly()

    events = await events_of(Agent(model=RawModel(chat)))
    assert events == [
        TextEvent(text="hi"),
        EndEvent(reason="error", message="'TextOnly' object has no attribute 'done'"),
    ]


async def test_script_exhausted_is_an_engine_error() -> None:
    agent, _ = agent_with()
    events = await events_of(agent)
    assert events == [
        EndEvent(reason="error", message="ScriptedModel: no script entry left for generation 1")
    ]


class RawModel:
    """A model whose stream is whatever the test gives."""

    def __init__(self, chat: Any) -> None:
        self.chat = chat


async def test_a_chat_that_raises_or_returns_junk_or_doubles_done() -> None:
    from aerix import Delta, Usage

    def raises(messages: Any, opts: Any = None) -> Any:
        raise ConnectionError("down")

    async def double(messages: Any, opts: Any = None) -> Any:
        yield Delta(text=final())
        yield Delta(done=True, finish="stop", usage=Usage(prompt_tokens=1, completion_tokens=1))
        yield Delta(done=True, finish="stop")

    async def coroutine(messages: Any, opts: Any = None) -> Any:  # a stream returned, not yielded
        return double(messages, opts)

    async def strings(messages: Any, opts: Any = None) -> Any:
        yield final()

    for chat, message in [
        (raises, "down"),
        (lambda m, o=None: 42, "the model's chat returned int, not an async iterator of Delta"),
        (coroutine, "the model's chat is a coroutine function; it must return an async iterator of Delta"),
        (strings, "the model's stream yielded a str, not a Delta (aerix.model.Delta)"),
        (double, "after its done delta"),
    ]:
        events = await events_of(Agent(model=RawModel(chat)))
        assert events[-1].type == "end" and events[-1].reason == "error", chat
        assert message in events[-1].message


# -- options ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"model": object()}, "model must have a chat"),
        ({"instructions": 3}, "instructions must be a string"),
        ({"tools": [weather, weather]}, "two tools are named 'weather'"),
        ({"tools": [len]}, "tools[0] is not a Tool"),
        ({"tools": weather}, "tools must be a list"),
        ({"limits": {"turns": 0}}, "limits.turns must be at least 1, got 0"),
        ({"limits": {"retries": -1}}, "limits.retries must be at least 0, got -1"),
        ({"limits": {"max_tokens": 1.5}}, "limits.max_tokens must be an integer, got 1.5"),
        ({"limits": {"result_chars": True}}, "limits.result_chars must be an integer, got True"),
        ({"limits": {"turn": 3}}, "unknown limit 'turn'"),
        ({"limits": [1]}, "limits must be a Limits or a dict"),
        ({"hooks": {"before": print}}, "unknown hook 'before'"),
        ({"hooks": {"on_final": 3}}, "hooks.on_final must be callable"),
        ({"hooks": 3}, "hooks must be a Hooks or a dict"),
        ({"generation": {"max_tokens": 5}}, "generation.max_tokens is set by the loop"),
        ({"generation": {"constraint": {}}}, "generation.constraint is set by the loop"),
        ({"generation": {"temperature": "hot"}}, "generation.temperature must be a number in [0.0, 100.0]"),
        ({"generation": {"temperature": float("nan")}}, "generation.temperature must be a number in [0.0"),
        ({"generation": {"top_k": 2.5}}, "generation.top_k must be an integer in [0, "),
        ({"generation": {"top_k": -1}}, "generation.top_k must be an integer in [0, 2147483647], got -1"),
        ({"generation": {"top_p": 2}}, "generation.top_p must be a number in [0.0, 1.0], got 2"),
        ({"generation": {"min_p": 5}}, "generation.min_p must be a number in [0.0, 1.0], got 5"),
        ({"generation": {"seed": 2**70}}, "generation.seed must be an integer in ["),
        ({"generation": {"stop": "x"}}, "generation.stop must be a list"),
        ({"generation": {"topp": 1}}, "unknown generation option 'topp'"),
        ({"constrain": "yes"}, "constrain must be True or False"),
        ({"tool_choice": "sometimes"}, "bad tool_choice 'sometimes'"),
        ({"tool_choice": ["a"]}, "tool_choice must be a string, got list ['a']"),
        ({"tool_choice": {"a": 1}}, "tool_choice must be a string, got dict {'a': 1}"),
        ({"tool_choice": "required", "tools": []}, "needs at least one tool"),
        ({"limit": {"turns": 3}}, "unknown option 'limit'; options are model, instructions"),
        ({"limits": {"repeats": -1}}, "limits.repeats must be at least 0, got -1"),
        (
            {"limits": {"max_tokens": 2**31}},
            "limits.max_tokens must be at most 2147483647, got 2147483648",
        ),
        ({"name": 3}, "name must be a string or None, got int 3"),
        ({"calls_per_turn": 9}, "calls_per_turn must be an integer from 1 to 8, got 9"),
        ({"concurrent_calls": "yes"}, "concurrent_calls must be True or False, got 'yes'"),
        ({"output": 3}, "output=3 is not a type"),
        ({"outputs": int}, "output, calls_per_turn, concurrent_calls, name"),
    ],
)
def test_bad_options_are_refused_by_name(kwargs: dict[str, Any], message: str) -> None:
    kwargs = {"model": ScriptedModel(), **kwargs}
    with pytest.raises(AerixError) as info:
        Agent(**kwargs)
    assert info.value.kind == "options"
    assert message in info.value.message


def test_limits_accept_a_limits_or_a_dict() -> None:
    assert Agent(model=ScriptedModel(), limits=Limits(turns=3)).limits.turns == 3
    assert Agent(model=ScriptedModel(), limits={"retries": 0}).limits == Limits(retries=0)
    assert Agent(model=ScriptedModel(), limits={"repeats": 0}).limits == Limits(repeats=0)
    assert Limits() == Limits(turns=8, retries=2, max_tokens=512, result_chars=4000, repeats=1)


def test_a_name_shows_in_the_repr() -> None:
    named = Agent(model=ScriptedModel(), tools=[weather], name="travel")
    assert named.name == "travel"
    assert repr(named) == (
        "Agent(name='travel', model=ScriptedModel, tools=['weather'], limits=Limits(turns=8, retries=2, "
        "max_tokens=512, result_chars=4000, repeats=1))"
    )
    assert Agent(model=ScriptedModel()).name is None
    assert repr(Agent(model=ScriptedModel())).startswith("Agent(model=ScriptedModel, tools=[]")


@pytest.mark.parametrize("sync", [False, True])
async def test_every_run_goes_through_the_observe_seam_once(sync: bool) -> None:
    seen: list[tuple[str | None, str]] = []
    made: list[Agent] = []
    signals: list[AbortSignal | None] = []

    def observer(agent: Any, events: Any, signal: AbortSignal | None) -> Any:
        made.append(agent)
        signals.append(signal)

        async def watched() -> Any:
            async with contextlib.aclosing(events):
                async for ev in events:
                    seen.append((agent.name, ev.type))
                    yield ev

        return watched()

    agent, _ = agent_with(call(), final(), name="seamed")
    OBSERVERS.append(observer)
    try:
        controller = AbortController()
        if sync:
            events = list(agent.run_sync("q", signal=controller.signal))
        else:
            events = await events_of(agent, signal=controller.signal)
    finally:
        OBSERVERS.remove(observer)
    assert made == [agent]
    # the signal the run follows: the user's, or for `run_sync` its own, which follows the user's
    assert len(signals) == 1 and isinstance(signals[0], AbortSignal)
    assert signals[0] is controller.signal or sync
    assert seen == [("seamed", ev.type) for ev in events] and seen[-1] == ("seamed", "final")


def test_bad_prompt_or_signal() -> None:
    agent = Agent(model=ScriptedModel())
    with pytest.raises(AerixError, match="prompt must be a string, got int"):
        agent.run(3)  # type: ignore[arg-type]
    with pytest.raises(AerixError, match="signal must be an AbortSignal"):
        agent.run("x", signal=AbortController())  # type: ignore[arg-type]
    with pytest.raises(AerixError, match="prompt must be a string"):
        agent.ask_sync(None)  # type: ignore[arg-type]


async def refusals(agent: Agent, prompt: str) -> list[AerixError]:
    """What each of the four entry points raises for `prompt` (each must raise)."""
    errors: list[AerixError] = []
    for start in (agent.run, agent.run_sync, agent.ask_sync):
        with pytest.raises(AerixError) as info:
            start(prompt)
        errors.append(info.value)
    with pytest.raises(AerixError) as info:
        await agent.ask(prompt)
    return [*errors, info.value]


@pytest.mark.parametrize("prompt", ["", " ", "\n\t  \r", "\u3000\u00a0"])
async def test_an_empty_or_blank_prompt_is_refused_by_run_ask_and_their_sync_forms(prompt: str) -> None:
    agent, model = agent_with(final())
    for error in await refusals(agent, prompt):
        assert error.kind == "options"
        assert error.message == f"the prompt is empty ({prompt!r}); give the model a question or a task"
    assert model.calls == [] and agent.messages == () and not agent.busy
    assert (await agent.ask("a real question")).text == "Yes"


@pytest.mark.parametrize(
    ("prompt", "start"),
    [
        ("hi \ud800", "prompt[3] is '\\ud800', a lone surrogate that UTF-8 cannot encode; remove it"),
        ("\udfff and more", "prompt[0] is '\\udfff', a lone surrogate that UTF-8 cannot encode"),
        ("Grüß \udc80", "prompt[5] is '\\udc80', a lone surrogate"),
        ("é \ud83d\ude00!", "prompt[2:4] is '\\ud83d\\ude00', a UTF-16 surrogate pair that UTF-8 cannot"),
    ],
)
async def test_a_prompt_that_utf8_cannot_encode_is_refused_naming_the_character(
    prompt: str, start: str
) -> None:
    agent, model = agent_with(final())
    for error in await refusals(agent, prompt):
        assert error.kind == "options" and error.message.startswith(start), error.message
    assert model.calls == [] and not agent.busy


def test_the_fixes_the_surrogate_messages_name_work() -> None:
    assert "hi \ud800".encode("utf-8", "replace").decode() == "hi ?"
    assert "é \ud83d\ude00!".encode("utf-16", "surrogatepass").decode("utf-16") == "é 😀!"
    agent, _ = agent_with()
    with pytest.raises(AerixError) as info:
        agent.run("é \ud83d\ude00!")
    assert "text.encode('utf-16', 'surrogatepass').decode('utf-16')" in info.value.message
    with pytest.raises(AerixError) as info:
        agent.run("hi \ud800")
    assert "text.encode('utf-8', 'replace').decode()" in info.value.message


async def test_a_prompt_of_any_other_text_goes_through() -> None:
    agent, model = agent_with(final(), final())
    for prompt in ("Grüß dich 😀 ✓", " x "):
        assert (await agent.ask(prompt)).text == "Yes"
    assert [c.messages[-1]["content"] for c in model.calls] == ["Grüß dich 😀 ✓", " x "]


@pytest.mark.parametrize(
    ("hooks", "what"),
    [
        ({"before_call": lambda c: {"deny": "bad \ud800"}}, "hook before_call: the deny reason[4]"),
        ({"after_call": lambda c, r: {"result": "bad \ud800"}}, "hook after_call: the replacement result[4]"),
    ],
)
async def test_a_hook_text_that_utf8_cannot_encode_ends_the_run_with_error(
    hooks: dict[str, Any], what: str
) -> None:
    agent, model = agent_with(call(), final(), hooks=hooks)
    events = await events_of(agent)
    assert events[-1] == EndEvent(
        reason="error",
        message=f"{what} is '\\ud800', a lone surrogate that UTF-8 cannot "
        "encode; remove it, or replace it and any other: text.encode('utf-8', 'replace').decode()",
    )
    assert len(model.calls) == 1 and agent.messages == () and not agent.busy


async def test_an_on_final_continue_text_that_utf8_cannot_encode_ends_the_run_with_error() -> None:
    agent, model = agent_with(
        final("a"), final("b"), hooks={"on_final": lambda t: {"continue": "more \udc80"}}
    )
    events = await events_of(agent)
    assert events[-1] == EndEvent(
        reason="error",
        message="hook on_final: the continue text[5] is '\\udc80', a lone surrogate that UTF-8 cannot "
        "encode; remove it, or replace it and any other: text.encode('utf-8', 'replace').decode()",
    )
    assert len(model.calls) == 1 and agent.messages == () and not agent.busy


async def test_an_answer_prints_short_and_keeps_its_equality() -> None:
    agent, _ = agent_with(call(), final("x" * 200))
    answer = await agent.ask("q")
    assert repr(answer) == (
        f"Answer(text='{'x' * 59}…', events=<8 events: 2 text, 2 usage, turn, call, result, final>)"
    )
    assert str(answer) == repr(answer)
    assert answer == Answer(text="x" * 200, events=answer.events)
    assert answer != Answer(text="x" * 199, events=answer.events)
    short, _ = agent_with(final("391"))
    assert repr(await short.ask("q")) == "Answer(text='391', events=<3 events: text, usage, final>)"
    assert repr(Answer(text="", events=())) == "Answer(text='', events=<0 events>)"
    # `Answer(text, events)`, as SPEC writes it: positional, and in a `match` too
    assert Answer("x" * 200, answer.events) == answer
    match answer:
        case Answer(text, events) if events[-1].type == "final":
            assert (text, events) == ("x" * 200, answer.events)
        case _:
            pytest.fail("Answer(text, events) does not match")


# -- tool_choice --------------------------------------------------------------------------------


async def test_tool_choice_applies_to_the_first_turn_of_each_run() -> None:
    agent, model = agent_with(call(), final(), call(), final(), tool_choice="required")
    await events_of(agent)
    await events_of(agent, "again")
    schemas = [c.opts["constraint"]["json"] for c in model.calls]
    assert [[s["required"] for s in sch["anyOf"]] for sch in schemas] == [
        [["calls"]],
        [["calls"], ["final"]],
        [["calls"]],
        [["calls"], ["final"]],
    ]


async def test_tool_choice_retries_keep_the_first_turn_schema() -> None:
    agent, model = agent_with(final(), call("clock"), final(), tool_choice="clock", constrain=False)
    events = await events_of(agent)
    assert types(events).count("retry") == 1 and isinstance(events[-1], FinalEvent)
    assert "must call a tool" in next(e for e in events if isinstance(e, RetryEvent)).reason


async def test_tool_choice_none() -> None:
    agent, model = agent_with(final(), tool_choice="none")
    await events_of(agent)
    assert model.calls[0].opts["constraint"]["json"]["anyOf"][0]["required"] == ["final"]


class FittingModel(ScriptedModel):
    """A scripted model that is a `ToolFit`: it says whether the tools fit, and records what it was asked."""

    def __init__(self, fit: bool | None, *script: Any) -> None:
        super().__init__(script)
        self.fit = fit
        self.asked: list[tuple[str, list[str]]] = []

    async def tools_fit(self, request: str, tools: Sequence[str]) -> bool | None:
        self.asked.append((request, list(tools)))
        return self.fit


@pytest.mark.parametrize(
    ("fit", "first"),
    [(True, [["calls"]]), (False, [["final"]]), (None, [["calls"], ["final"]])],
)
async def test_auto_asks_a_tool_fit_model_before_each_runs_first_turn(
    fit: bool | None, first: list[list[str]]
) -> None:
    script = [call(), final(), call(), final()] if fit else [final(), final()]
    model = FittingModel(fit, *script)
    agent = Agent(model=model, tools=[weather, clock])
    await events_of(agent, "Umbrella in Lisbon?")
    await events_of(agent, "again")
    assert isinstance(model, ToolFit)
    texts = ["weather(city, unit)", "clock()"]
    assert texts == [fit_text(weather), fit_text(clock)]
    assert model.asked == [("Umbrella in Lisbon?", texts), ("again", texts)]
    schemas = [[s["required"] for s in c.opts["constraint"]["json"]["anyOf"]] for c in model.calls]
    if fit:  # a call, then a free turn after the results; twice
        assert schemas == [first, [["calls"], ["final"]], first, [["calls"], ["final"]]]
    else:
        assert schemas == [first, first]


@pytest.mark.parametrize(
    "kw",
    [
        {"tool_choice": "required"},
        {"tool_choice": "none"},
        {"tool_choice": "clock"},
        {"constrain": False},
        {"tools": []},
    ],
)
async def test_tool_fit_is_asked_only_under_auto_with_tools_and_the_schema(kw: dict[str, Any]) -> None:
    model = FittingModel(False, call("clock"), final(), final())
    kw.setdefault("tools", [weather, clock])
    await events_of(Agent(model=model, **kw))
    assert model.asked == []


# -- ask, busy, reset, sync --------------------------------------------------------------------


async def test_ask_returns_the_answer_or_raises_end() -> None:
    agent, _ = agent_with(final("yes"), "bad", limits={"retries": 0})
    answer = await agent.ask("q")
    assert answer.text == "yes" and isinstance(answer.events[-1], FinalEvent)
    with pytest.raises(AerixError) as info:
        await agent.ask("q2")
    assert info.value.kind == "end" and info.value.reason == "retries"
    assert info.value.events[-1].type == "end"
    # it crosses process boundaries (pickle) and copies whole, as an exception should
    info.value.note = "kept"  # type: ignore[attr-defined]
    for again in (pickle.loads(pickle.dumps(info.value)), copy.copy(info.value), copy.deepcopy(info.value)):
        assert isinstance(again, AerixError) and str(again) == str(info.value)
        assert (again.kind, again.message, again.reason) == ("end", info.value.message, "retries")
        assert again.events == info.value.events and again.note == "kept"  # type: ignore[attr-defined]


async def test_one_run_at_a_time() -> None:
    agent, _ = agent_with(Stall(text="{"), final())
    controller = AbortController()
    first = agent.run("a", signal=controller.signal)
    assert (await first.__anext__()).type  # the run started and holds the agent
    with pytest.raises(AerixError) as info:
        agent.run("b")
    assert info.value.kind == "busy"
    with pytest.raises(AerixError, match="busy|during a run"):
        agent.reset()
    controller.abort()
    rest = [ev async for ev in first]
    assert rest[-1] == EndEvent(reason="abort", message="aborted")
    assert (await agent.ask("b")).text == "Yes"


async def test_two_runs_started_together_one_is_busy() -> None:
    agent, _ = agent_with(Stall(text="{"), final())
    controller = AbortController()
    a, b = agent.run("a", signal=controller.signal), agent.run("b")  # both made before either starts
    asyncio.get_running_loop().call_later(0.05, controller.abort)
    results = await asyncio.gather(_drain(a), _drain(b), return_exceptions=True)
    busy = [r for r in results if isinstance(r, AerixError)]
    assert len(busy) == 1 and busy[0].kind == "busy"
    assert [r for r in results if isinstance(r, list)][0][-1].reason == "abort"


async def _drain(run: Any) -> list[Any]:
    return [ev async for ev in run]


async def test_many_agents_run_concurrently_on_one_loop() -> None:
    agents = [agent_with(call(), final(str(i)))[0] for i in range(50)]
    answers = await asyncio.gather(*(a.ask("q") for a in agents))
    assert [a.text for a in answers] == [str(i) for i in range(50)]


async def test_reset_forgets_the_conversation() -> None:
    agent, model = agent_with(final(), final())
    await agent.ask("a")
    agent.reset()
    assert agent.messages == ()
    await agent.ask("b")
    assert [m["content"] for m in model.calls[1].messages[1:]] == ["b"]


def test_messages_are_read_only_copies() -> None:
    agent, _ = agent_with(final())
    agent.ask_sync("a")
    msgs = agent.messages
    with pytest.raises(TypeError):
        msgs[0] = {"role": "user", "content": "x"}  # type: ignore[index]
    msgs[0]["content"] = "changed"
    assert agent.messages[0]["content"] == "a"


def test_sync_wrappers_without_a_loop() -> None:
    agent, _ = agent_with(call(), final("sync"))
    events = list(agent.run_sync("q"))
    assert events[-1] == FinalEvent(text="sync")
    agent2, _ = agent_with(final("sync2"))
    assert agent2.ask_sync("q").text == "sync2"


async def test_sync_wrappers_inside_a_running_loop() -> None:
    agent, _ = agent_with(call(), final("nb"))
    # as in a notebook: the loop runs, and sync code calls ask_sync
    assert agent.ask_sync("q").text == "nb"
    # the script is used up: the run still ends, with the engine's error, and frees the agent
    assert list(agent.run_sync("q2")) == [
        EndEvent(reason="error", message="ScriptedModel: no script entry left for generation 3")
    ]
    assert not agent.busy


def test_sync_run_left_early_aborts_and_frees_the_agent() -> None:
    agent, model = agent_with(Stall(text='{"fi'), final())
    it = agent.run_sync("q")
    assert next(it).type == "text"
    it.close()  # type: ignore[attr-defined]
    assert not agent.busy and agent.messages == ()
    assert agent.ask_sync("again").text == "Yes"


def test_sync_abort_from_another_thread() -> None:
    agent, _ = agent_with(Stall())
    controller = AbortController()
    threading.Timer(0.05, controller.abort).start()
    with pytest.raises(AerixError) as info:
        agent.ask_sync("q", signal=controller.signal)
    assert info.value.reason == "abort"


# -- aborts and cancellation ---------------------------------------------------------------------


async def test_abort_during_a_generation_stops_it() -> None:
    agent, model = agent_with(Stall(text='{"final":'))
    controller = AbortController()
    events = []
    async for ev in agent.run("q", signal=controller.signal):
        events.append(ev)
        if ev.type == "text":
            controller.abort()
    assert events[-1] == EndEvent(reason="abort", message="aborted")
    assert model.calls[0].opts["signal"].aborted
    assert agent.messages == () and not agent.busy


@pytest.mark.parametrize(
    ("reason", "message"),
    [
        (TimeoutError("too slow"), "too slow"),
        (TimeoutError(), "TimeoutError"),
        ("", "aborted"),
        (3, "aborted"),
    ],
)
async def test_an_abort_reason_that_is_an_exception_gives_its_message(reason: object, message: str) -> None:
    agent, _ = agent_with(final())
    controller = AbortController()
    controller.abort(reason)
    assert await events_of(agent, signal=controller.signal) == [EndEvent(reason="abort", message=message)]


async def test_abort_before_the_run_starts() -> None:
    agent, model = agent_with(final())
    controller = AbortController()
    controller.abort("user left")
    events = await events_of(agent, signal=controller.signal)
    assert events == [EndEvent(reason="abort", message="user left")]
    assert model.calls == []


async def test_abort_during_a_hanging_tool_tells_the_tool() -> None:
    contexts: list[Any] = []

    @tool
    async def hang(cx: Any) -> str:
        """Hang."""
        contexts.append(cx)
        await asyncio.sleep(3600)
        return "never seen"

    controller = AbortController()
    agent, _ = agent_with('{"calls":[{"tool":"hang","input":{}}]}', final(), tools=[hang])
    asyncio.get_running_loop().call_later(0.02, controller.abort)
    events = await events_of(agent, signal=controller.signal)
    assert events[-1].type == "end" and events[-1].reason == "abort"
    assert types(events)[-2] == "call"
    assert contexts[0].signal.aborted
    assert agent.messages == ()


@pytest.mark.parametrize("concurrent", [False, True])
async def test_a_tool_that_returns_after_the_abort_cancelled_it_gives_no_result(concurrent: bool) -> None:
    @tool
    async def fetch() -> str:
        """Fetch."""
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            return "cleaned up"  # swallows the cancellation and returns: the turn is still not kept
        return "never seen"

    controller = AbortController()
    calls = '{"calls":[{"tool":"fetch","input":{}},{"tool":"fetch","input":{}}]}'
    agent, _ = agent_with(calls, final(), tools=[fetch], calls_per_turn=2, concurrent_calls=concurrent)
    asyncio.get_running_loop().call_later(0.05, controller.abort, "user pressed stop")
    events = await events_of(agent, signal=controller.signal)
    assert "result" not in types(events)  # one at a time, the second call never started
    assert types(events).count("call") == (2 if concurrent else 1) and types(events)[-2] == "call"
    assert events[-1] == EndEvent(reason="abort", message="user pressed stop")
    assert agent.messages == () and not agent.busy


@pytest.mark.parametrize("hook", ["before_call", "after_call", "on_final"])
async def test_a_hook_that_raises_cancelled_error_is_named_like_any_failing_hook(hook: str) -> None:
    def gives_up(*args: Any) -> None:
        raise asyncio.CancelledError("hook gave up")  # its own, not a cancellation of the run

    agent, _ = agent_with('{"calls":[{"tool":"clock","input":{}}]}', final(), hooks={hook: gives_up})
    events = await events_of(agent)
    assert events[-1] == EndEvent(reason="error", message=f"hook {hook} raised CancelledError: hook gave up")
    assert not agent.busy


async def test_the_agents_tools_are_read_only() -> None:
    agent, _ = agent_with(final())
    with pytest.raises(TypeError):
        del agent.tools["clock"]  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        agent.tools["other"] = clock  # type: ignore[index]
    assert list(agent.tools) == ["weather", "clock"]


async def test_abort_during_a_hanging_sync_tool() -> None:
    release = threading.Event()

    @tool
    def block(cx: Any) -> str:
        """Block."""
        cx.signal.add_callback(release.set)
        release.wait(5)
        return "late"

    controller = AbortController()
    agent, _ = agent_with('{"calls":[{"tool":"block","input":{}}]}', final(), tools=[block])
    threading.Timer(0.02, controller.abort).start()
    events = await events_of(agent, signal=controller.signal)
    assert events[-1].reason == "abort"
    assert release.wait(1)


async def test_abort_during_an_async_hook() -> None:
    controller = AbortController()

    async def slow_hook(c: Any) -> None:
        controller.abort()
        await asyncio.sleep(10)

    agent, _ = agent_with(call(), final(), hooks={"before_call": slow_hook})
    events = await asyncio.wait_for(events_of(agent, signal=controller.signal), 2)
    assert events[-1].reason == "abort"


async def test_cancelling_the_consumer_raises_there_and_frees_the_agent() -> None:
    agent, model = agent_with(call(), Stall(text="{"), final())
    task = asyncio.create_task(events_of(agent))
    while len(model.calls) < 2:
        await asyncio.sleep(0.001)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert model.calls[1].opts["signal"].aborted
    assert not agent.busy
    assert [m["role"] for m in agent.messages] == ["user", "assistant", "user"]
    assert (await agent.ask("go on")).text == "Yes"


async def test_closing_the_generator_early_frees_the_agent() -> None:
    agent, model = agent_with(call(), final())
    run = agent.run("q")
    async for ev in run:
        if ev.type == "call":
            break
    await run.aclose()  # type: ignore[attr-defined]
    assert not agent.busy and agent.messages == ()
    assert model.calls[0].opts["signal"].aborted


@pytest.mark.parametrize("concurrent", [False, True])
async def test_leaving_at_a_turns_last_result_keeps_the_turn(concurrent: bool) -> None:
    """A turn is complete once its last result is in: a consumer that leaves at that event
    keeps it; one that leaves at an earlier result keeps nothing of it."""
    turn = json.dumps({"calls": [{"tool": "weather", "input": {"city": c}} for c in ("Lisbon", "Porto")]})
    for leave_at, kept in ((2, ["user", "assistant", "user"]), (1, [])):
        agent, _ = agent_with(turn, final(), concurrent_calls=concurrent)
        run = agent.run("Umbrella?")
        seen = 0
        async for ev in run:
            seen += ev.type == "result"
            if seen == leave_at:
                break
        await run.aclose()  # type: ignore[attr-defined]
        assert not agent.busy
        assert [m["role"] for m in agent.messages] == kept
        if kept:
            assert agent.messages[-1]["content"].startswith("Results:")
            assert "Porto" in agent.messages[-1]["content"]


async def test_leaving_run_sync_at_the_last_result_keeps_the_turn() -> None:
    agent, _ = agent_with(call(), final())
    for ev in agent.run_sync("Umbrella?"):
        if ev.type == "result":
            break
    assert [m["role"] for m in agent.messages] == ["user", "assistant", "user"]
    assert agent.ask_sync("And now?").text == "Yes"


async def test_a_tool_that_changes_its_input_changes_no_event_and_no_repeat_check() -> None:
    """The tool gets its own copy of the input: the `turn` and `call` events stay as the model
    wrote the call, and the repeat rule compares what the model wrote."""

    def change(i: dict[str, Any], c: Any) -> str:
        i["tags"].append("mine")
        i["meta"]["n"] = 99
        i["extra"] = 1
        return "ok"

    fields: dict[str, Any] = {
        "tags": {"type": "array", "items": {"type": "string"}},
        "meta": {"type": "object", "properties": {"n": {"type": "integer"}}},
    }
    note = tool(name="note", description="Note.", input=fields, run=change)
    written = {"tags": ["a"], "meta": {"n": 1}}
    turn = json.dumps({"calls": [{"tool": "note", "input": written}]})
    agent = Agent(model=ScriptedModel([turn, turn, final()]), tools=[note], limits={"repeats": 0})
    events = await events_of(agent)
    turns = [e for e in events if e.type == "turn"]
    assert [e.input for e in events if e.type == "call"] == [written, written]
    assert [t.calls[0].input for t in turns] == [written, written]
    results = [e for e in events if e.type == "result"]
    assert [r.error for r in results] == [False, True]  # the second call repeats the first, as written
    assert events[-1].type == "final"


@pytest.mark.parametrize("concurrent", [False, True])
async def test_a_consumer_that_changes_an_events_input_changes_no_call(concurrent: bool) -> None:
    """The `turn` and `call` events hold their own copies of the inputs: changing them (they
    are frozen, their dicts are not) changes neither what the tool gets nor the repeat rule."""
    got: list[dict[str, Any]] = []
    fields: dict[str, Any] = {"tags": {"type": "array", "items": {"type": "string"}}}
    note = tool(name="note", description="Note.", input=fields, run=lambda i: got.append(i) or "ok")
    written = {"tags": ["a"]}
    turn = json.dumps({"calls": [{"tool": "note", "input": written}]})
    agent = Agent(
        model=ScriptedModel([turn, turn, final()]),
        tools=[note],
        limits={"repeats": 0},
        concurrent_calls=concurrent,
    )
    events = []
    async for ev in agent.run("q"):
        if ev.type == "turn":
            ev.calls[0].input["tags"].append("from the turn event")
        elif ev.type == "call":
            ev.input["tags"].append("from the call event")
            ev.input["x"] = 1
        events.append(ev)
    assert got == [written]  # as the model wrote it, once: the second call repeats it
    assert [e.error for e in events if e.type == "result"] == [False, True]
    assert events[-1].type == "final"


async def test_an_abort_never_cancels_the_consumer_code() -> None:
    agent, _ = agent_with(call(), final())
    controller = AbortController()
    seen = []
    async for ev in agent.run("q", signal=controller.signal):
        seen.append(ev.type)
        if ev.type == "turn":
            controller.abort()
            await asyncio.sleep(0.01)  # the consumer's own await is not cancelled
    assert seen[-1] == "end"
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_an_engine_that_ends_its_stream_on_abort_is_an_abort_not_an_error() -> None:
    controller = AbortController()

    def abort_then_stop(messages: Any) -> Any:
        controller.abort()
        return NoDone(text="")

    agent, _ = agent_with(abort_then_stop)
    events = await events_of(agent, signal=controller.signal)
    assert events == [EndEvent(reason="abort", message="aborted")]


async def test_a_run_left_by_a_timeout_or_a_break_frees_the_agent_at_once() -> None:
    """`asyncio.timeout()` around `async for`, out of time in the loop's body: the task goes on
    and Python leaves the run's generator open; dropped, nothing can resume it, so the agent
    is free at once, for `run` as for `ask`."""
    agent = Agent(model=ScriptedModel(['{"final":"one"}', '{"final":"two"}', '{"final":"three"}']))
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.01):
            async for _ in agent.run("first"):
                await asyncio.sleep(1)
    assert not agent.busy
    assert [ev.type async for ev in agent.run("second")][-1] == "final"
    async for _ in agent.run("third"):
        break
    assert not agent.busy  # not only once the event loop has closed the generator
    assert [m["content"] for m in agent.messages] == ["second", '{"final":"two"}']  # completed turns only
    # kept in a variable, the run stays open until closed: `aclosing` closes it on the way out
    agent = Agent(model=ScriptedModel(['{"final":"one"}', '{"final":"two"}']))
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.01), contextlib.aclosing(agent.run("first")) as run:
            async for _ in run:
                await asyncio.sleep(1)
    assert not agent.busy
    assert (await agent.ask("second")).text == "two"


async def test_run_events_still_being_awaited_are_not_freed_when_dropped() -> None:
    """Only events dropped between two of them end the run: a `__anext__` in flight holds it."""
    agent = Agent(model=ScriptedModel([Stall(text='{"final":"')]))
    events = agent.run("wait")
    assert (await anext(events)).type == "text"
    pending = asyncio.ensure_future(anext(events))  # waits in the stalled generation
    await asyncio.sleep(0.01)
    del events
    await asyncio.sleep(0.05)
    assert agent.busy and not pending.done()
    pending.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await pending


async def test_a_cut_turn_that_may_only_answer_is_asked_for_a_shorter_final() -> None:
    call = '{"calls":[{"tool":"clock","input":{}}]}'
    model = ScriptedModel([call, call, Cut(text='{"final":"the time is'), '{"final":"noon"}'])
    agent = Agent(model=model, tools=[clock], limits={"repeats": 0})
    events = [ev async for ev in agent.run("time?")]
    assert events[-1].type == "final"
    retry_prompt = model.calls[3].messages[-1]["content"]
    assert retry_prompt.endswith("one JSON object, a shorter final answer, no thought.")


class _LingeringReader:
    """A model whose stream reader (a task iterating an async generator, as an HTTP client's
    is) is still going when its done delta is out."""

    async def chat(self, messages: Any, opts: Any = None) -> Any:
        async def lines() -> Any:
            for i in range(100):
                await asyncio.sleep(0.05)
                yield i

        async def read() -> None:
            async for _ in lines():
                pass

        asyncio.get_running_loop().create_task(read())
        await asyncio.sleep(0.06)
        yield Delta(text='{"final":"hi"}')
        yield Delta(done=True, finish="stop", usage=Usage(prompt_tokens=1, completion_tokens=1))


def test_sync_runs_end_the_tasks_their_loop_leaves_without_noise(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("ERROR", logger="asyncio")
    agent = Agent(model=_LingeringReader())
    assert agent.ask_sync("x").text == "hi"
    assert [ev.type for ev in agent.run_sync("y")][-1] == "final"
    assert not [r for r in caplog.records if r.name == "asyncio"], [r.getMessage() for r in caplog.records]


def test_a_generation_past_the_script_plays_no_entry_so_one_added_later_is_played() -> None:
    model = ScriptedModel(['{"final":"one"}'])
    agent = Agent(model=model)
    assert agent.ask_sync("a").text == "one" and model.remaining == 0
    ending = list(agent.run_sync("b"))[-1]
    assert (
        isinstance(ending, EndEvent)
        and ending.message == "ScriptedModel: no script entry left for generation 2"
    )
    assert model.remaining == 0
    model.add('{"final":"two"}')
    assert model.remaining == 1
    assert agent.ask_sync("c").text == "two" and model.remaining == 0
    assert len(model.calls) == 3  # every generation asked for is recorded


def test_a_scripted_model_refuses_entries_it_cannot_play() -> None:
    with pytest.raises(AerixError, match=r"got one string; wrap it in a list: ScriptedModel\(\['"):
        ScriptedModel(final())  # type: ignore[arg-type]
    with pytest.raises(AerixError, match=r"script entry 1 is int 5; an entry is the turn's text"):
        ScriptedModel([final(), 5])  # type: ignore[list-item]
    model = ScriptedModel([final()])
    with pytest.raises(AerixError, match=r"script entry 1 is NoneType None"):
        model.add(None)  # type: ignore[arg-type]
    assert model.remaining == 1


async def test_a_scripted_callable_that_returns_no_step_ends_the_run_naming_the_entry() -> None:
    agent = Agent(model=ScriptedModel([lambda messages: {"final": "x"}]))  # type: ignore[list-item]
    events = await events_of(agent)
    assert events[-1] == EndEvent(
        reason="error",
        message="ScriptedModel: script entry 0 (a callable) returned dict; it must return the turn's text "
        "(a str), or a Cut, Fail, Stall or NoDone",
    )


@pytest.mark.parametrize("size", [0, -1, 2.5, "3", True])
def test_a_scripted_model_refuses_a_chunk_size_that_is_no_count(size: Any) -> None:
    with pytest.raises(AerixError, match=r"chunk_size must be a whole number of characters >= 1, got "):
        ScriptedModel([], chunk_size=size)


async def test_a_step_requested_keeps_the_run_though_its_events_are_dropped() -> None:
    add_tool = tool(
        name="add", description="Add.", input={"a": {"type": "integer"}}, run=lambda i: str(i["a"])
    )
    model = ScriptedModel(['{"calls":[{"tool":"add","input":{"a":2}}]}', '{"final":"2"}'])
    agent = Agent(model=model, tools=[add_tool])
    events = agent.run("go")
    assert (await anext(events)).type == "text"
    step = asyncio.ensure_future(anext(events))  # scheduled, not started
    del events
    assert (await step).type == "usage"  # the run went on


async def test_a_run_dropped_while_its_tools_run_at_once_stops_them_before_freeing_the_agent() -> None:
    """With `concurrent_calls`, tools run while the consumer has an event: dropped there, they are
    aborted at once, and the agent is free once they have stopped (not while one still runs)."""
    stopped: list[str] = []

    async def slow(input: dict[str, Any], cx: Any) -> str:
        try:
            await asyncio.sleep(30)
        finally:
            stopped.append(str(cx.signal.reason))
        return "late"

    quick = tool(name="quick", description="Quick.", input={}, run=lambda i: "fast")
    slow_tool = tool(name="slow", description="Slow.", input={}, run=slow)
    turn = '{"calls":[{"tool":"quick","input":{}},{"tool":"slow","input":{}}]}'
    agent = Agent(
        model=ScriptedModel([turn, '{"final":"x"}']),
        tools=[quick, slow_tool],
        calls_per_turn=2,
        concurrent_calls=True,
    )
    async for ev in agent.run("go"):
        if ev.type == "result":
            break  # `quick`'s result; `slow` still runs
    assert agent.busy  # not free while `slow` runs
    async with asyncio.timeout(5):
        while agent.busy:  # the event loop closes the run, which waits for `slow` to stop
            await asyncio.sleep(0.01)
    assert stopped == ["the run's consumer dropped it"]


async def test_an_event_read_in_a_task_then_left_frees_the_agent() -> None:
    """`asyncio.wait_for(anext(events), t)` runs the step in a task, which ends normally: it holds
    the run no more, and the agent is free once the consumer lets go."""
    agent = Agent(model=ScriptedModel([Stall(text='{"final":"'), '{"final":"two"}']))

    async def first_event() -> str:
        events = agent.run("one")
        ev = await asyncio.wait_for(anext(events), 5)
        return ev.type

    assert await first_event() == "text"
    async with asyncio.timeout(5):
        while agent.busy:
            await asyncio.sleep(0.01)
    assert (await agent.ask("again")).text == "two"


async def test_a_break_at_a_call_event_with_tools_at_once_frees_the_agent_at_once() -> None:
    """No tool runs yet at a `call` event (all `call`s come first): nothing to wait for."""
    quick = tool(name="quick", description="Quick.", input={}, run=lambda i: "fast")
    turn = '{"calls":[{"tool":"quick","input":{}},{"tool":"quick","input":{}}]}'
    agent = Agent(
        model=ScriptedModel([turn, '{"final":"x"}', '{"final":"y"}']),
        tools=[quick],
        calls_per_turn=2,
        concurrent_calls=True,
        limits={"repeats": 2},
    )
    async for ev in agent.run("go"):
        if ev.type == "call":
            break
    assert not agent.busy
