"""The calls of a turn: several a turn (SPEC 9.3), concurrent calls, and the repeat rule (SPEC 9.4)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aerix import (
    AbortController,
    AerixError,
    Agent,
    Call,
    CallEvent,
    ChatMessage,
    Delta,
    EndEvent,
    FinalEvent,
    Limits,
    ResultEvent,
    RetryEvent,
    Usage,
    tool,
)
from aerix.testing import ScriptedModel
from aerix.turn import final_shape

GUARD = 10
"""Seconds a test waits for something that must happen (never a timing under test)."""


def calls(*pairs: tuple[str, dict[str, Any]]) -> str:
    return json.dumps({"calls": [{"tool": t, "input": i} for t, i in pairs]})


def final(text: str = "done") -> str:
    return json.dumps({"final": text})


async def events_of(agent: Agent, prompt: str = "go", **kw: Any) -> list[Any]:
    return [ev async for ev in agent.run(prompt, **kw)]


# -- several calls a turn -------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 8])
async def test_calls_per_turn_is_the_decoded_schemas_max_items(n: int) -> None:
    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    model = ScriptedModel([final()])
    agent = Agent(model=model, tools=[ping], calls_per_turn=n)
    await agent.ask("q")
    shapes = model.calls[0].opts["constraint"]["json"]["anyOf"]
    assert shapes[0]["properties"]["calls"]["maxItems"] == n
    assert (f"up to {n} calls" in agent.system) == (n > 1)


@pytest.mark.parametrize("value", [0, 9, -1, True, 2.0, "2", None])
def test_calls_per_turn_out_of_range_or_not_an_int_is_refused(value: Any) -> None:
    with pytest.raises(AerixError) as info:
        Agent(model=ScriptedModel(), calls_per_turn=value)
    assert info.value.kind == "options"
    assert info.value.message == f"calls_per_turn must be an integer from 1 to 8, got {value!r}"


@pytest.mark.parametrize("value", [1, "yes", None])
def test_concurrent_calls_must_be_a_bool(value: Any) -> None:
    with pytest.raises(AerixError, match=r"concurrent_calls must be True or False, got"):
        Agent(model=ScriptedModel(), concurrent_calls=value)


# -- concurrent calls: order -----------------------------------------------------------------


def chained(log: list[str], n: int) -> Any:
    """`step(i)`: logs its start, waits for step i+1 to end (the last ends first), logs its end."""
    ended = [asyncio.Event() for _ in range(n)]

    @tool
    async def step(i: int) -> str:
        """A step."""
        log.append(f"start {i}")
        if i + 1 < n:
            await asyncio.wait_for(ended[i + 1].wait(), GUARD)
        log.append(f"end {i}")
        ended[i].set()
        return f"done {i}"

    return step


async def test_concurrent_calls_keep_hooks_and_events_in_call_order() -> None:
    log: list[str] = []
    step = chained(log, 3)
    hooks = {
        "before_call": lambda c: log.append(f"before {c.input['i']}"),
        "after_call": lambda c, r: log.append(f"after {c.input['i']}"),
    }
    turn = calls(*[("step", {"i": i}) for i in range(3)])
    agent = Agent(model=ScriptedModel([turn, final()]), tools=[step], hooks=hooks, concurrent_calls=True)
    async for ev in agent.run("q"):
        if isinstance(ev, CallEvent | ResultEvent):
            log.append(f"{ev.type} {ev.input['i'] if isinstance(ev, CallEvent) else ev.text}")
    before_tools = log[: log.index("start 0")]
    # every before_call (and input check) first, then every call event, then the tools (SPEC 9.3)
    assert before_tools == ["before 0", "before 1", "before 2", "call 0", "call 1", "call 2"]
    started = log[6:9]
    assert sorted(started) == ["start 0", "start 1", "start 2"]  # every tool starts before any ends
    assert log[9:] == [
        "end 2",
        "end 1",
        "end 0",  # the tools finish in reverse order ...
        "after 0",
        "result done 0",  # ... and their results follow in call order
        "after 1",
        "result done 1",
        "after 2",
        "result done 2",
    ]
    assert agent.messages[2]["content"].splitlines()[1:] == [
        "[call_1 step] done 0",
        "[call_2 step] done 1",
        "[call_3 step] done 2",
    ]


async def test_sequential_calls_run_one_after_another_with_their_events_between() -> None:
    log: list[str] = []

    @tool
    async def step(i: int) -> str:
        """A step."""
        log.append(f"start {i}")
        await asyncio.sleep(0)
        log.append(f"end {i}")
        return f"done {i}"

    turn = calls(*[("step", {"i": i}) for i in range(2)])
    agent = Agent(model=ScriptedModel([turn, final()]), tools=[step])
    async for ev in agent.run("q"):
        if isinstance(ev, CallEvent | ResultEvent):
            log.append(ev.type)
    assert log == ["call", "start 0", "end 0", "result", "call", "start 1", "end 1", "result"]


# -- concurrent calls: overlap ---------------------------------------------------------------


async def test_concurrent_async_tools_overlap() -> None:
    running, most = 0, 0
    all_in = asyncio.Event()

    @tool
    async def meet(i: int) -> str:
        """Wait until all three are running."""
        nonlocal running, most
        running += 1
        most = max(most, running)
        if running == 3:
            all_in.set()
        await asyncio.wait_for(all_in.wait(), GUARD)  # one at a time, this would time out
        running -= 1
        return f"met {i}"

    turn = calls(*[("meet", {"i": i}) for i in range(3)])
    agent = Agent(model=ScriptedModel([turn, final()]), tools=[meet], concurrent_calls=True)
    events = await events_of(agent)
    assert [e.text for e in events if isinstance(e, ResultEvent)] == ["met 0", "met 1", "met 2"]
    assert most == 3


async def test_concurrent_sync_tools_overlap_on_worker_threads() -> None:
    barrier = threading.Barrier(3, timeout=GUARD)  # broken, with error results, if they ran one by one

    @tool
    def meet(i: int) -> str:
        """Wait at the barrier."""
        barrier.wait()
        return f"met {i}"

    turn = calls(*[("meet", {"i": i}) for i in range(3)])
    agent = Agent(model=ScriptedModel([turn, final()]), tools=[meet], concurrent_calls=True)
    results = [e for e in await events_of(agent) if isinstance(e, ResultEvent)]
    assert [(r.text, r.error) for r in results] == [("met 0", False), ("met 1", False), ("met 2", False)]


async def test_concurrent_refusals_and_bad_inputs_do_not_run_and_keep_their_places() -> None:
    ran: list[int] = []
    seen_after: list[str] = []

    @tool
    async def step(i: int) -> str:
        """A step."""
        ran.append(i)
        return f"done {i}"

    hooks = {
        "before_call": lambda c: {"deny": "no"} if c.input.get("i") == 1 else None,
        "after_call": lambda c, r: seen_after.append(r),
    }
    turn = calls(("step", {"i": 0}), ("step", {"i": 1}), ("step", {"i": "2"}), ("step", {"i": 3}))
    agent = Agent(model=ScriptedModel([turn, final()]), tools=[step], hooks=hooks, concurrent_calls=True)
    results = [(e.text, e.error) for e in await events_of(agent) if isinstance(e, ResultEvent)]
    assert results == [
        ("done 0", False),
        ("refused: no", True),
        ('error: input.i: expected integer, got "2"', True),
        ("done 3", False),
    ]
    assert sorted(ran) == [0, 3]
    assert seen_after == ["done 0", 'error: input.i: expected integer, got "2"', "done 3"]  # not the refusal


@pytest.mark.parametrize("concurrent", [False, True])
async def test_a_before_call_hook_that_aborts_stops_the_hooks_of_the_turns_other_calls(
    concurrent: bool,
) -> None:
    """An abort stops what is in progress and ends the run: no later call's hook runs (an
    approval prompt, an audit log), one at a time or at once."""
    hooked: list[str] = []
    controller = AbortController()

    def before(call: Call) -> None:
        hooked.append(call.id)
        if call.id == "call_1":
            controller.abort("stopped in a hook")

    turn = calls(*[("step", {"i": i}) for i in range(4)])
    step = chained([], 4)
    agent = Agent(
        model=ScriptedModel([turn, final()]),
        tools=[step],
        hooks={"before_call": before},
        calls_per_turn=4,
        concurrent_calls=concurrent,
    )
    kinds = [
        ev.type async for ev in agent.run("q", signal=controller.signal) if ev.type not in ("text", "usage")
    ]
    assert hooked == ["call_1"]
    assert kinds == ["turn", "call", "end"] and not agent.busy


# -- concurrent calls: every ending rule holds ----------------------------------------------------


def hanging(started: list[int], ended: list[int], quick: frozenset[int] = frozenset()) -> Any:
    """`hang(i)`, which returns at once for i in `quick` and else hangs until cancelled, recording
    its start and end; and an event set once three have started."""
    everyone = asyncio.Event()

    @tool
    async def hang(i: int) -> str:
        """Hang."""
        started.append(i)
        if len(started) == 3:
            everyone.set()
        try:
            if i not in quick:
                await asyncio.sleep(3600)
            return f"quick {i}"
        finally:
            ended.append(i)

    return hang, everyone


async def test_an_abort_while_three_calls_run_ends_every_call_and_the_run_once() -> None:
    started: list[int] = []
    ended: list[int] = []
    hang, everyone = hanging(started, ended)
    turn = calls(*[("hang", {"i": i}) for i in range(3)])
    agent = Agent(model=ScriptedModel([turn, final()]), tools=[hang], concurrent_calls=True)
    controller = AbortController()

    async def abort_when_all_run() -> None:
        await asyncio.wait_for(everyone.wait(), GUARD)
        controller.abort("stop")

    aborter = asyncio.create_task(abort_when_all_run())
    events = await asyncio.wait_for(events_of(agent, signal=controller.signal), GUARD)
    await aborter
    assert sorted(ended) == [0, 1, 2]  # every call ended, before the run's end was handed out
    assert [e.type for e in events if e.type in ("final", "end")] == ["end"]
    assert events[-1] == EndEvent(reason="abort", message="stop")
    assert [e.type for e in events[-4:-1]] == ["call", "call", "call"]  # no result for a stopped call
    assert not agent.busy and agent.messages == ()


async def test_an_abort_stops_concurrent_sync_tools_through_their_signal() -> None:
    started = threading.Semaphore(0)
    stopped: list[bool] = []

    @tool
    def block(i: int, cx: Any) -> str:
        """Block until aborted."""
        started.release()
        stopped.append(_wait(cx.signal))
        return "late"

    turn = calls(*[("block", {"i": i}) for i in range(3)])
    agent = Agent(model=ScriptedModel([turn, final()]), tools=[block], concurrent_calls=True)
    controller = AbortController()

    def abort_when_all_run() -> None:
        for _ in range(3):
            assert started.acquire(timeout=GUARD)
        controller.abort()

    threading.Thread(target=abort_when_all_run).start()
    events = await asyncio.wait_for(events_of(agent, signal=controller.signal), GUARD)
    assert events[-1].type == "end" and events[-1].reason == "abort"
    for _ in range(100):  # the threads see the abort and return; wait for them
        if len(stopped) == 3:
            break
        await asyncio.sleep(0.01)
    assert stopped == [True, True, True]


def _wait(signal: Any) -> bool:
    """Block until `signal` is aborted (`False` if it is not, within `GUARD`)."""
    done = threading.Event()
    signal.add_callback(done.set)
    return done.wait(GUARD)


async def test_closing_the_run_after_a_result_stops_the_calls_still_running() -> None:
    started: list[int] = []
    ended: list[int] = []
    hang, _ = hanging(started, ended, quick=frozenset({0}))
    turn = calls(*[("hang", {"i": i}) for i in range(3)])
    agent = Agent(model=ScriptedModel([turn, final()]), tools=[hang], concurrent_calls=True)
    run = agent.run("q")
    async for ev in run:
        if isinstance(ev, ResultEvent):
            assert ev.text == "quick 0"
            break
    await run.aclose()  # type: ignore[attr-defined]
    assert sorted(ended) == [0, 1, 2] and not agent.busy and agent.messages == ()


async def test_cancelling_the_consumer_while_calls_run_cancels_them_and_raises_there() -> None:
    started: list[int] = []
    ended: list[int] = []
    hang, everyone = hanging(started, ended)
    turn = calls(*[("hang", {"i": i}) for i in range(3)])
    agent = Agent(model=ScriptedModel([turn, final()]), tools=[hang], concurrent_calls=True)
    task = asyncio.create_task(events_of(agent))
    await asyncio.wait_for(everyone.wait(), GUARD)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sorted(ended) == [0, 1, 2] and not agent.busy


async def test_a_hook_that_raises_after_a_concurrent_call_ends_the_run_and_stops_the_rest() -> None:
    started: list[int] = []
    ended: list[int] = []
    hang, _ = hanging(started, ended, quick=frozenset({0}))

    def after(call: Any, result: str) -> None:
        raise RuntimeError("after_call broke")

    turn = calls(*[("hang", {"i": i}) for i in range(3)])
    agent = Agent(
        model=ScriptedModel([turn, final()]), tools=[hang], hooks={"after_call": after}, concurrent_calls=True
    )
    events = await asyncio.wait_for(events_of(agent), GUARD)
    assert events[-1] == EndEvent(
        reason="error", message="hook after_call raised RuntimeError: after_call broke"
    )
    assert sum(e.type in ("final", "end") for e in events) == 1
    assert sorted(ended) == [0, 1, 2] and not agent.busy


# -- repeated calls -------------------------------------------------------------------------


def counting() -> tuple[Any, list[str]]:
    ran: list[str] = []

    @tool
    def look(city: str) -> str:
        """Look a city up."""
        ran.append(city)
        return f"{city}: sunny"

    return look, ran


LISBON = calls(("look", {"city": "Lisbon"}))
ONLY_FINAL = {"anyOf": [final_shape()]}


async def test_an_identical_call_may_run_again_once_by_default_then_not_and_the_next_turn_must_answer() -> (
    None
):
    look, ran = counting()
    model = ScriptedModel([LISBON, LISBON, LISBON, final("Sunny.")])
    agent = Agent(model=model, tools=[look])
    assert agent.limits.repeats == 1
    events = await events_of(agent)
    results = [e for e in events if isinstance(e, ResultEvent)]
    assert ran == ["Lisbon", "Lisbon"]
    assert [(r.text, r.error) for r in results[:2]] == [("Lisbon: sunny", False)] * 2
    assert results[2].error and results[2].text == (
        "error: Lisbon: sunny\n(that is the result of call_2; this call repeats it, the same tool and input, "
        "which ran 2 times: limits.repeats=1, so it was not run again)"
    )
    schemas = [c.opts["constraint"]["json"] for c in model.calls]
    assert [s == ONLY_FINAL for s in schemas] == [False, False, False, True]
    assert events[-1] == FinalEvent(text="Sunny.")


async def test_repeats_zero_runs_an_identical_call_once_in_a_run_and_afresh_in_the_next() -> None:
    look, ran = counting()
    other = calls(("look", {"city": "Porto"}))
    model = ScriptedModel([LISBON, other, LISBON, final(), LISBON, final()])
    agent = Agent(model=model, tools=[look], limits={"repeats": 0})
    events = await events_of(agent)
    results = [e.text for e in events if isinstance(e, ResultEvent)]
    assert results[:2] == ["Lisbon: sunny", "Porto: sunny"]  # another input is another call
    assert results[2].startswith("error: Lisbon: sunny\n(that is the result of call_1; this call repeats it")
    assert results[2].endswith("which ran once: limits.repeats=0, so it was not run again)")
    second = [e for e in await events_of(agent, "again") if isinstance(e, ResultEvent)]
    assert second[0].text == "Lisbon: sunny"  # a new run counts afresh
    assert ran == ["Lisbon", "Porto", "Lisbon"]


async def test_a_repeat_keeps_its_note_whole_after_a_result_cut_at_result_chars() -> None:
    @tool
    def fetch(url: str) -> str:
        """Fetch a page."""
        return "x" * 5000

    turn = calls(("fetch", {"url": "a"}))
    agent = Agent(model=ScriptedModel([turn, turn, final()]), tools=[fetch], limits={"repeats": 0})
    results = [e for e in await events_of(agent) if isinstance(e, ResultEvent)]
    first = "x" * 4000 + "\n[cut: 1000 more characters]"
    assert results[0].text == first
    assert results[1].error and results[1].text == (
        f"error: {first}\n(that is the result of call_1; this call repeats it, the same tool and input, "
        "which ran once: limits.repeats=0, so it was not run again)"
    )


async def test_identical_means_the_same_tool_and_input_whatever_the_key_order() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    turn = calls(("add", {"a": 1, "b": 2}), ("add", {"b": 2, "a": 1}), ("add", {"a": 2, "b": 1}))
    agent = Agent(model=ScriptedModel([turn, final()]), tools=[add], limits=Limits(repeats=0))
    results = [e for e in await events_of(agent) if isinstance(e, ResultEvent)]
    assert [r.error for r in results] == [False, True, False]
    assert results[1].text.startswith("error: 3\n(that is the result of call_1;")


async def test_identical_means_the_same_json_numbers_whether_written_1_or_1_0() -> None:
    scale = tool(
        name="scale",
        description="Scale.",
        schema={"type": "object", "properties": {"factor": {"type": "number"}, "flags": {"type": "array"}}},
        run=lambda given: f"x{given['factor']}",
    )

    turn = calls(
        ("scale", {"factor": 1, "flags": [2, {"n": 3}]}),
        ("scale", {"factor": 1.0, "flags": [2.0, {"n": 3.0}]}),  # the same numbers: a repeat
        ("scale", {"factor": 1.5, "flags": [2]}),
        ("scale", {"factor": 1, "flags": [True]}),  # `true` is not 1
    )
    model = ScriptedModel([turn, final()])
    agent = Agent(model=model, tools=[scale], limits=Limits(repeats=0), calls_per_turn=4)
    results = [e for e in await events_of(agent) if isinstance(e, ResultEvent)]
    assert [r.error for r in results] == [False, True, False, False]


async def test_a_repeat_of_a_failed_call_quotes_its_error_with_one_error_prefix() -> None:
    @tool
    def find(city: str) -> str:
        """Find a city."""
        raise ValueError(f"no city named {city!r}")

    turn = calls(("find", {"city": "Mars"}), ("find", {"city": "Mars"}))
    agent = Agent(model=ScriptedModel([turn, final()]), tools=[find], limits=Limits(repeats=0))
    results = [e for e in await events_of(agent) if isinstance(e, ResultEvent)]
    assert [r.error for r in results] == [True, True]
    assert results[0].text == "error: no city named 'Mars'"
    assert results[1].text.startswith("error: no city named 'Mars'\n(that is the result of call_1;")


@pytest.mark.parametrize("concurrent", [False, True])
async def test_a_repeat_within_one_turn_quotes_the_earlier_call_and_skips_after_call(
    concurrent: bool,
) -> None:
    look, ran = counting()
    after: list[str] = []
    turn = calls(("look", {"city": "Lisbon"}), ("look", {"city": "Lisbon"}))
    agent = Agent(
        model=ScriptedModel([turn, final()]),
        tools=[look],
        limits={"repeats": 0},
        hooks={"after_call": lambda c, r: after.append(c.id)},
        concurrent_calls=concurrent,
    )
    events = await events_of(agent)
    results = [e for e in events if isinstance(e, ResultEvent)]
    assert ran == ["Lisbon"] and after == ["call_1"]
    assert [e.type for e in events if e.type in ("call", "result")] == (
        ["call", "call", "result", "result"] if concurrent else ["call", "result", "call", "result"]
    )
    assert results[1].error and results[1].text.startswith(
        "error: Lisbon: sunny\n(that is the result of call_1;"
    )


async def test_a_refused_call_is_not_counted_and_a_replaced_input_is_what_counts() -> None:
    look, ran = counting()
    denied = iter([True, False, False, False])

    def before(call: Any) -> dict[str, Any] | None:
        if next(denied):
            return {"deny": "not yet"}
        return {"input": {"city": "Porto"}}

    model = ScriptedModel([LISBON, LISBON, calls(("look", {"city": "Faro"})), LISBON, final()])
    agent = Agent(model=model, tools=[look], limits={"repeats": 1}, hooks={"before_call": before})
    results = [e for e in await events_of(agent) if isinstance(e, ResultEvent)]
    assert [r.text for r in results[:3]] == ["refused: not yet", "Porto: sunny", "Porto: sunny"]
    assert (
        results[3].error and "the result of call_3; this call repeats it" in results[3].text
    )  # Lisbon and Faro both became Porto
    assert ran == ["Porto", "Porto"]


async def test_after_a_repeat_an_unconstrained_model_that_calls_again_is_asked_to_answer() -> None:
    look, ran = counting()
    model = ScriptedModel([LISBON, LISBON, LISBON, final()])
    agent = Agent(model=model, tools=[look], limits={"repeats": 0}, constrain=False)
    events = await events_of(agent)
    retry = next(e for e in events if isinstance(e, RetryEvent))
    assert retry.turn == 3 and retry.reason.startswith("this turn must be a final answer")
    assert isinstance(events[-1], FinalEvent) and ran == ["Lisbon"]


class Looper:
    """A constrained model that repeats one call whenever its schema allows calls, else answers."""

    def __init__(self) -> None:
        self.generations = 0

    async def chat(self, messages: list[ChatMessage], opts: Any = None) -> AsyncIterator[Delta]:
        self.generations += 1
        shapes = opts["constraint"]["json"]["anyOf"]
        text = LISBON if any("calls" in s["properties"] for s in shapes) else final("It is sunny in Lisbon.")
        yield Delta(text=text)
        yield Delta(done=True, finish="stop", usage=Usage(prompt_tokens=1, completion_tokens=1))


async def test_a_model_that_loops_ends_with_a_final_not_with_turns() -> None:
    look, ran = counting()
    looper = Looper()
    answer = await Agent(model=looper, tools=[look]).ask("Weather in Lisbon?")
    assert answer.text == "It is sunny in Lisbon." and looper.generations == 4 and len(ran) == 2


@pytest.mark.parametrize(("value", "message"), [(-1, "at least 0, got -1"), (True, "an integer, got True")])
def test_repeats_is_an_integer_of_at_least_zero(value: Any, message: str) -> None:
    for make in (
        lambda: Limits(repeats=value),
        lambda: Agent(model=ScriptedModel(), limits={"repeats": value}),
    ):
        with pytest.raises(AerixError) as info:
            make()
        assert info.value.kind == "options" and info.value.message == f"limits.repeats must be {message}"


# -- the repeat rule against a reference model -------------------------------------------------

CALL = st.tuples(st.sampled_from(["look", "find"]), st.sampled_from(["a", "b"]))


class Planned:
    """A constrained model that plays planned call turns, and answers when the schema says so
    (or when the plan is done)."""

    def __init__(self, turns: Sequence[Sequence[tuple[str, str]]]) -> None:
        self.turns = list(turns)
        self.only_final: list[bool] = []

    async def chat(self, messages: list[ChatMessage], opts: Any = None) -> AsyncIterator[Delta]:
        shapes = opts["constraint"]["json"]["anyOf"]
        only_final = not any("calls" in s["properties"] for s in shapes)
        self.only_final.append(only_final)
        if only_final or not self.turns:
            text = final()
        else:
            text = calls(*[(t, {"q": q}) for t, q in self.turns.pop(0)])
        yield Delta(text=text)
        yield Delta(done=True, finish="stop", usage=Usage(prompt_tokens=1, completion_tokens=1))


@settings(max_examples=60, deadline=None)
@given(
    turns=st.lists(st.lists(CALL, min_size=1, max_size=3), min_size=1, max_size=5),
    repeats=st.integers(0, 2),
    concurrent=st.booleans(),
)
def test_the_repeat_rule_matches_a_reference_model(
    turns: list[list[tuple[str, str]]], repeats: int, concurrent: bool
) -> None:
    ran: list[tuple[str, str]] = []

    def make(name: str) -> Any:
        def run(input: dict[str, str]) -> str:
            ran.append((name, input["q"]))
            return f"{name} {input['q']}"

        return tool(name=name, input={"q": {"type": "string", "required": True}}, run=run)

    model = Planned(turns)
    agent = Agent(
        model=model,
        tools=[make("look"), make("find")],
        limits={"turns": 8, "repeats": repeats},
        calls_per_turn=3,
        concurrent_calls=concurrent,
    )
    events = list(agent.run_sync("go"))

    # the reference: count each (tool, q); a call past 1 + repeats runs does not run, and ends the plan
    counts: dict[tuple[str, str], int] = {}
    want_ran: list[tuple[str, str]] = []
    want_results: list[tuple[str, bool]] = []
    want_only_final: list[bool] = []
    forced = False
    for turn in turns:
        want_only_final.append(False)
        forced = False
        for call in turn:
            if counts.get(call, 0) > repeats:
                want_results.append(("repeat", True))
                forced = True
            else:
                counts[call] = counts.get(call, 0) + 1
                want_ran.append(call)
                want_results.append((f"{call[0]} {call[1]}", False))
        if forced:
            break
    want_only_final.append(forced)
    got = [(("repeat" if e.error else e.text), e.error) for e in events if isinstance(e, ResultEvent)]
    assert got == want_results
    assert sorted(ran) == sorted(want_ran) and (concurrent or ran == want_ran)
    assert model.only_final == want_only_final[: len(model.only_final)]
    assert isinstance(events[-1], FinalEvent)


# -- where a plain tool runs --------------------------------------------------------------


def _where_made(blocking: bool) -> list[Any]:
    """The tool `where` (it gives the thread it ran on) made each way `tool()` makes one."""

    def where() -> str:
        """Say where it runs."""
        return str(threading.get_ident())

    return [
        tool(where, blocking=blocking),
        tool(blocking=blocking)(where),
        tool(name="where", input={}, run=lambda i: where(), blocking=blocking),
        tool(name="where", schema={"type": "object"}, run=lambda i: where(), blocking=blocking),
    ]


@pytest.mark.parametrize("concurrent", [False, True])
@pytest.mark.parametrize("blocking", [True, False])
async def test_a_plain_tool_runs_on_a_worker_thread_unless_made_with_blocking_false(
    blocking: bool, concurrent: bool
) -> None:
    loop_thread = str(threading.get_ident())
    for made in _where_made(blocking):
        assert made.blocking is blocking
        agent = Agent(
            model=ScriptedModel([calls(("where", {})), final()]), tools=[made], concurrent_calls=concurrent
        )
        results = [e for e in await events_of(agent) if isinstance(e, ResultEvent)]
        assert [r.error for r in results] == [False]
        assert (results[0].text == loop_thread) is not blocking


async def test_a_tool_made_with_blocking_false_keeps_every_rule_of_a_call() -> None:
    """On the loop itself, a plain tool's failures are error results, a coroutine it returns is
    awaited, its input is checked and its own copy, and a coroutine function is awaited as ever."""
    seen: list[dict[str, Any]] = []

    def fail(n: int) -> str:
        """Fail."""
        raise ValueError(f"no {n}")

    async def later(n: int) -> str:
        return f"later {n}"

    def soon(n: int) -> Any:
        """Answer later."""
        return later(n)

    def keep(tags: list[str]) -> str:
        """Keep the tags."""
        seen.append({"tags": tags})
        tags.append("mine")
        return "kept"

    async def wait(n: int) -> str:
        """Wait."""
        await asyncio.sleep(0)
        return f"waited {n}"

    tools = [tool(f, blocking=False) for f in (fail, soon, keep, wait)]
    turns = [
        calls(("fail", {"n": 1})),
        calls(("soon", {"n": 2})),
        calls(("keep", {"tags": ["a"]})),
        calls(("fail", {"n": "three"})),
        calls(("wait", {"n": 4})),
        final(),
    ]
    agent = Agent(model=ScriptedModel(turns), tools=tools, limits={"turns": 8})
    events = await events_of(agent)
    results = [(e.text, e.error) for e in events if isinstance(e, ResultEvent)]
    assert results == [
        ("error: no 1", True),
        ("later 2", False),
        ("kept", False),
        ('error: input.n: expected integer, got "three"', True),
        ("waited 4", False),
    ]
    assert [e.input for e in events if isinstance(e, CallEvent) and e.tool == "keep"] == [{"tags": ["a"]}]
    assert seen == [{"tags": ["a", "mine"]}]  # its own copy, which it changed
    assert isinstance(events[-1], FinalEvent)


@pytest.mark.parametrize("value", [None, 0, 1, "no", [], 0.0])
def test_blocking_must_be_true_or_false(value: Any) -> None:
    def where() -> str:
        """Say where it runs."""
        return "here"

    makers = [
        lambda: tool(where, blocking=value),
        lambda: tool(blocking=value)(where),
        lambda: tool(name="where", input={}, run=lambda i: "here", blocking=value),
    ]
    for make in makers:
        with pytest.raises(AerixError) as info:
            make()
        assert info.value.kind == "options"
        assert "blocking must be True" in info.value.message and "or False" in info.value.message
        assert repr(value) in info.value.message
