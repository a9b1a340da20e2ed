"""Reliability of the loop under aborts, cancellation, engine faults and bad input.

The invariants (tests/reliability_kit.py) are checked after every scenario:
exactly one ending, last; `run` raises nothing but `busy` (and `CancelledError`
in a cancelled consumer); the conversation holds only completed turns; the
agent is idle and usable at once.

The sweeps are deterministic: tools, hooks and the model number their await
points, and the run is aborted (or its consumer cancelled) at point k, for
every k until the run completes unaborted. Nothing depends on timing; each
scenario sits under a generous hang guard (`asyncio.timeout`) that only a
hung run would reach.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib.util
import json
import math
import sys
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Literal

import pytest

from aerix import (
    AbortController,
    AerixError,
    Agent,
    AgentEvent,
    Delta,
    EndEvent,
    Field,
    FinalEvent,
    Limits,
    ResultEvent,
    RetryEvent,
    TextEvent,
    ToolContext,
    Usage,
    tool,
)
from aerix.testing import Cut, Fail, NoDone, ScriptedModel, Stall
from aerix.tools import check_input
from reliability_kit import (
    Instrumented,
    Points,
    check_events,
    check_messages,
    collect,
    commit_points,
    ending_of,
)

HANG_GUARD = 20  # seconds; only a hung run reaches it
AGAIN = '{"final":"again"}'

# A run with two tool turns (an async and a sync tool), a bad turn and a cut
# turn that are retried, a refusal, an input that fails its check, and a final.
SWEEP_SCRIPT: list[str | Cut] = [
    '{"thought":"look","calls":[{"tool":"lookup","input":{"city":"Lisbon"}},'
    '{"tool":"count","input":{"n":3}}]}',
    "this is not json",
    Cut(text='{"calls":[{"tool":"cou'),
    '{"calls":[{"tool":"count","input":{"n":0}},{"tool":"count","input":{"n":"7"}}]}',
    '{"final":"Pack an umbrella."}',
]


class Sweep:
    """One sweep scenario: a fresh agent whose tools, hooks and model count their points."""

    def __init__(self, points: Points, *, hang: bool, at_start: bool = True) -> None:
        self.points = points
        self.replay = True
        self.tool_inputs: list[tuple[str, Any]] = []

        def entry(step: str | Cut) -> Callable[[Any], str | Cut]:
            return lambda messages: step if self.replay else AGAIN

        script = [entry(s) for s in SWEEP_SCRIPT] + [entry(AGAIN)] * 8
        self.model = ScriptedModel(script, chunk_size=7)
        sweep = self

        @tool
        async def lookup(city: str, cx: ToolContext) -> str:
            """The weather of a city.

            Args:
                city: The city.
            """
            sweep.tool_inputs.append(("lookup", {"city": city}))
            if points.hit("tool:lookup") and hang:
                await asyncio.Event().wait()
            await asyncio.sleep(0)
            return f"sunny in {city}"

        @tool
        def count(n: int, cx: ToolContext) -> int:
            """Count to n (a sync tool: it runs on a worker thread)."""
            sweep.tool_inputs.append(("count", {"n": n}))
            if points.hit("tool:count") and hang:
                released = threading.Event()
                cx.signal.add_callback(released.set)
                released.wait(HANG_GUARD)
            return n

        def before_call(call: Any) -> Any:
            points.hit("before_call")  # a sync hook: it cannot hang, the next await sees the abort
            return {"deny": "zero is not counted"} if call.input == {"n": 0} else None

        async def after_call(call: Any, result: str) -> Any:
            if points.hit("after_call") and hang:
                await asyncio.Event().wait()
            await asyncio.sleep(0)
            return {"result": result.upper()} if call.tool == "lookup" else None

        self.agent = Agent(
            model=Instrumented(self.model, points, hang=hang, at_start=at_start),
            instructions="Sweep.",
            tools=[lookup, count],
            limits=Limits(turns=8, retries=2),
            hooks={"before_call": before_call, "after_call": after_call},
        )

    async def usable(self) -> None:
        """The agent answers a new run at once, on top of what it kept."""
        assert not self.agent.busy
        before = list(self.agent.messages)
        self.replay = False
        self.points.k = None
        answer = await self.agent.ask("again")
        assert answer.text == "again"
        assert list(self.agent.messages) == [
            *before,
            {"role": "user", "content": "again"},
            {"role": "assistant", "content": AGAIN},
        ]

    def checked_inputs(self) -> None:
        """A tool's run only ever saw inputs that passed the check."""
        for name, value in self.tool_inputs:
            assert check_input(self.agent.tools[name], value) is None, (name, value)


async def reference(*, at_start: bool = True) -> tuple[int, list[AgentEvent], list[Any], set[int], set[str]]:
    """The unaborted run: its number of points, events, conversation and commit points."""
    points = Points()
    sweep = Sweep(points, hang=False, at_start=at_start)
    async with asyncio.timeout(HANG_GUARD):
        events = [ev async for ev in sweep.agent.run("Umbrella?")]
    assert isinstance(events[-1], FinalEvent)
    # the scenario is what it says: hooks applied, a refusal, a failed check, two retries
    results = [(e.text, e.error) for e in events if isinstance(e, ResultEvent)]
    assert results == [
        ("SUNNY IN LISBON", False),
        ("3", False),
        ("refused: zero is not counted", True),
        ('error: input.n: expected integer, got "7"', True),
    ]
    assert [e.type for e in events].count("retry") == 2
    messages = check_messages(sweep.agent)
    sweep.checked_inputs()
    return (
        len(points.log),
        events,
        messages,
        commit_points(messages, list(sweep.agent.tools.values())),
        set(points.log),
    )


def assert_prefix(messages: list[Any], full: list[Any], points: set[int]) -> None:
    assert len(messages) in points, f"{len(messages)} messages is not a completed-turn boundary {points}"
    assert messages == full[: len(messages)]


@pytest.mark.parametrize("mode", ["abort", "abort-hang"])
async def test_abort_sweep(mode: str) -> None:
    """Abort at every await point: `end(abort)`, completed turns kept, agent usable."""
    hang = mode == "abort-hang"
    n, _, full, boundaries, kinds = await reference()
    assert {"chat", "delta", "done", "tool:lookup", "tool:count", "before_call", "after_call"} <= kinds
    ran, kept = 0, set()
    for k in range(n + 1):
        controller = AbortController()
        points = Points(k, lambda c=controller: c.abort("sweep"))  # type: ignore[misc]
        sweep = Sweep(points, hang=hang)
        async with asyncio.timeout(HANG_GUARD):
            events = [ev async for ev in sweep.agent.run("Umbrella?", signal=controller.signal)]
        check_events(events)
        ending = events[-1]
        if points.fired_at is None:
            assert k >= len(points.log) and isinstance(ending, FinalEvent), (k, ending)
        else:
            assert isinstance(ending, EndEvent), (k, points.fired_at, ending)
            assert (ending.reason, ending.message) == ("abort", "sweep"), (k, points.fired_at, ending)
        messages = check_messages(sweep.agent)
        assert_prefix(messages, full, boundaries)
        kept.add(len(messages))
        sweep.checked_inputs()
        await sweep.usable()
        ran += 1
    print(f"{mode} sweep: {ran} runs, aborted at {n} points")
    assert ran == n + 1 > 40
    assert kept == boundaries  # every completed-turn boundary was reached by some abort


@pytest.mark.parametrize("mode", ["cancel", "cancel-hang"])
async def test_cancel_sweep(mode: str) -> None:
    """Cancel the consuming task at every await point: `CancelledError` there, agent freed."""
    hang = mode == "cancel-hang"
    n, _, full, boundaries, _ = await reference()
    loop = asyncio.get_running_loop()
    loop_thread = threading.current_thread()
    cancelled = 0
    for k in range(n + 1):
        holder: list[asyncio.Task[Any]] = []

        def cancel(holder: list[asyncio.Task[Any]] = holder) -> None:
            if threading.current_thread() is loop_thread:
                holder[0].cancel()
            else:  # the sync tool's worker thread
                loop.call_soon_threadsafe(holder[0].cancel)

        points = Points(k, cancel)
        sweep = Sweep(points, hang=hang)
        events: list[AgentEvent] = []
        task = asyncio.create_task(collect(sweep.agent.run("Umbrella?"), events))
        holder.append(task)
        async with asyncio.timeout(HANG_GUARD):
            try:
                await task
                was_cancelled = False
            except asyncio.CancelledError:
                was_cancelled = True
        assert not sweep.agent.busy, (k, points.fired_at)
        if points.fired_at is None:
            assert not was_cancelled and isinstance(events[-1], FinalEvent)
        else:
            assert was_cancelled, (k, points.fired_at)
            cancelled += 1
        if ending_of(events) is None:
            check_events(events, ended=False)
        else:  # cancelled after the run's last suspension: the run had ended with its final
            check_events(events)
            assert isinstance(events[-1], FinalEvent)
        assert_prefix(check_messages(sweep.agent), full, boundaries)
        sweep.checked_inputs()
        await sweep.usable()
    print(f"{mode} sweep: {n + 1} runs, cancelled at {cancelled} points")
    assert cancelled == n


async def test_close_at_every_event() -> None:
    """`await agen.aclose()` after each event: the agent is freed at once, completed turns kept."""
    _, ref_events, full, boundaries, _ = await reference()
    for k in range(len(ref_events)):
        sweep = Sweep(Points(), hang=False)
        stream = sweep.agent.run("Umbrella?")
        events = []
        async with asyncio.timeout(HANG_GUARD):
            async for ev in stream:
                events.append(ev)
                if len(events) == k + 1:
                    break
            await stream.aclose()  # type: ignore[attr-defined]
        assert not sweep.agent.busy, k
        check_events(events, ended=k == len(ref_events) - 1)
        assert events == ref_events[: k + 1]
        assert_prefix(check_messages(sweep.agent), full, boundaries)
        await sweep.usable()
    print(f"aclose sweep: {len(ref_events)} runs")


async def test_abort_at_every_event() -> None:
    """The consumer aborts on receiving event k: the next event is `end(abort)`, the last."""
    _, ref_events, full, boundaries, _ = await reference()
    for k in range(len(ref_events)):
        sweep = Sweep(Points(), hang=False)
        controller = AbortController()
        events: list[AgentEvent] = []
        async with asyncio.timeout(HANG_GUARD):
            async for ev in sweep.agent.run("Umbrella?", signal=controller.signal):
                events.append(ev)
                if len(events) == k + 1:
                    controller.abort("consumer")
        check_events(events)
        if k == len(ref_events) - 1:
            assert events == ref_events
        else:
            assert events[:-1] == ref_events[: k + 1]
            assert events[-1] == EndEvent(reason="abort", message="consumer")
        assert_prefix(check_messages(sweep.agent), full, boundaries)
        await sweep.usable()
    print(f"consumer abort sweep: {len(ref_events)} runs")


def test_run_sync_left_at_every_event() -> None:
    """Leaving a `run_sync` iteration at each event aborts the run and frees the agent at once."""
    ref_events = list(Sweep(Points(), hang=False).agent.run_sync("Umbrella?"))
    ref_sweep = Sweep(Points(), hang=False)
    list(ref_sweep.agent.run_sync("Umbrella?"))
    full = list(ref_sweep.agent.messages)
    boundaries = commit_points(full, list(ref_sweep.agent.tools.values()))
    threads = threading.active_count()
    for k in range(len(ref_events)):
        sweep = Sweep(Points(), hang=False)
        it = sweep.agent.run_sync("Umbrella?")
        events = []
        for ev in it:
            events.append(ev)
            if len(events) == k + 1:
                break
        it.close()  # type: ignore[attr-defined]
        assert not sweep.agent.busy, k
        assert events == ref_events[: k + 1]
        assert_prefix(list(check_messages(sweep.agent)), full, boundaries)
        sweep.replay = False
        assert sweep.agent.ask_sync("again").text == "again"
    # sync tools share one bounded pool; nothing else may be left behind
    assert threading.active_count() <= threads + 8


async def test_ask_sync_inside_a_running_loop_joins_its_thread() -> None:
    """`ask_sync` where a loop runs (a notebook) drives the run on a worker thread, then joins it."""
    threads = threading.active_count()
    sweep2 = Sweep(Points(), hang=False)
    assert sweep2.agent.ask_sync("Umbrella?").text == "Pack an umbrella."
    assert not any(t.name == "aerix-sync" for t in threading.enumerate())
    assert threading.active_count() <= threads


async def test_abort_before_the_run_starts() -> None:
    """A signal aborted before the run: `end(abort)` and the model is never asked."""
    controller = AbortController()
    controller.abort("early")
    model = ScriptedModel(['{"final":"x"}', AGAIN])
    agent = Agent(model=model)
    events = [ev async for ev in agent.run("hi", signal=controller.signal)]
    assert events == [EndEvent(reason="abort", message="early")]
    assert model.calls == [] and agent.messages == ()
    assert (await agent.ask("again")).text == "x"


# -- holes the sweeps found, all fixed now (docs/reliability.md, "Bugs found, and fixed");
# none is marked xfail: each is an ordinary test that pins the expected behaviour


async def test_abort_before_a_generation_is_not_an_engine_error() -> None:
    """A sync abort just as the run asks the model: ScriptedModel (like OpenAICompatible)
    sees the aborted signal and ends its stream without a done delta; the loop
    reports the abort, not "stream ended without its done delta"."""
    controller = AbortController()
    points = Points(0, lambda: controller.abort("sweep"))  # point 0 is chat's start
    sweep = Sweep(points, hang=False, at_start=True)
    events = [ev async for ev in sweep.agent.run("Umbrella?", signal=controller.signal)]
    assert points.fired_at == "chat"
    assert events[-1] == EndEvent(reason="abort", message="sweep")


async def test_abort_in_on_final_that_continues() -> None:
    controller = AbortController()

    def on_final(text: str) -> Any:
        controller.abort("stop")
        return {"continue": "go on"}

    agent = Agent(model=ScriptedModel(['{"final":"a"}', '{"final":"b"}']), hooks={"on_final": on_final})
    events = [ev async for ev in agent.run("hi", signal=controller.signal)]
    check_events(events)
    assert events[-1] == EndEvent(reason="abort", message="stop")


async def test_abort_in_on_final_that_accepts() -> None:
    controller = AbortController()
    agent = Agent(
        model=ScriptedModel(['{"final":"a"}']), hooks={"on_final": lambda t: controller.abort("stop")}
    )
    events = [ev async for ev in agent.run("hi", signal=controller.signal)]
    check_events(events)
    assert events[-1] == EndEvent(reason="abort", message="stop")


class PollingModel:
    """Honours the signal by polling it between awaits, and then stops without a done delta."""

    async def chat(self, messages: list[Any], opts: Any = None) -> AsyncIterator[Delta]:
        signal = opts["signal"]
        yield Delta(text='{"fin')
        while not signal.aborted:
            await asyncio.sleep(0)


async def test_abort_from_another_task_while_the_engine_polls() -> None:
    controller = AbortController()
    agent = Agent(model=PollingModel())

    async def abort_soon() -> None:
        for _ in range(5):
            await asyncio.sleep(0)
        controller.abort("stop")

    aborter = asyncio.create_task(abort_soon())
    async with asyncio.timeout(HANG_GUARD):
        events = [ev async for ev in agent.run("hi", signal=controller.signal)]
    await aborter
    check_events(events)
    assert events[-1] == EndEvent(reason="abort", message="stop")


class RaisingOnAbortModel:
    """Honours the signal by raising an error of its own when it sees it."""

    async def chat(self, messages: list[Any], opts: Any = None) -> AsyncIterator[Delta]:
        signal = opts["signal"]
        yield Delta(text='{"fin')
        while not signal.aborted:
            await asyncio.sleep(0)
        raise RuntimeError("generation aborted")


async def test_abort_seen_by_an_engine_that_raises_on_it() -> None:
    controller = AbortController()
    agent = Agent(model=RaisingOnAbortModel())

    async def abort_soon() -> None:
        for _ in range(5):
            await asyncio.sleep(0)
        controller.abort("stop")

    aborter = asyncio.create_task(abort_soon())
    async with asyncio.timeout(HANG_GUARD):
        events = [ev async for ev in agent.run("hi", signal=controller.signal)]
    await aborter
    check_events(events)
    assert events[-1] == EndEvent(reason="abort", message="stop")


async def test_break_after_the_final_then_run_again() -> None:
    agent = Agent(model=ScriptedModel(['{"final":"a"}', '{"final":"b"}']))
    async for ev in agent.run("one"):
        if ev.type == "final":
            break
    assert not agent.busy
    assert (await agent.ask("two")).text == "b"


async def test_cancel_while_the_consumer_awaits_between_events() -> None:
    """A consumer that may stop between events closes the run (the documented way):
    a generator left suspended at a yield holds the agent until it is finalised."""
    agent = Agent(model=ScriptedModel([Stall(text='{"fi'), '{"final":"b"}']))
    got_text = asyncio.Event()

    async def consume() -> None:
        async with contextlib.aclosing(agent.run("one")) as run:
            async for _ in run:
                got_text.set()
                await asyncio.Event().wait()  # the consumer's own work

    task = asyncio.create_task(consume())
    await got_text.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not agent.busy


@pytest.mark.parametrize("awaited", [True, False])
async def test_a_consumer_cancelled_in_its_own_code_frees_the_agent_at_once(awaited: bool) -> None:
    """SPEC 2: cancelling the consumer's task frees the agent, also where the task is
    cancelled in its own code with the run held open (not closed with `aclosing`): the run
    waits at the event it handed over, and nothing else would resume it."""
    agent = Agent(model=ScriptedModel([CALL, '{"final":"a"}', '{"final":"b"}']), tools=[echo])
    runs: list[Any] = []
    handed = asyncio.Event()

    async def consume() -> None:
        runs.append(run := agent.run("one"))  # held: never closed by the consumer
        async for ev in run:
            if ev.type == "result":
                handed.set()
                await asyncio.Event().wait()  # the consumer's own work

    task = asyncio.create_task(consume())
    await handed.wait()
    task.cancel()
    if awaited:
        with pytest.raises(asyncio.CancelledError):
            await task
    else:  # not even awaited: the agent is free as soon as the task is done
        while not task.done():
            await asyncio.sleep(0)
    assert not agent.busy
    assert [m["role"] for m in agent.messages] == ["user", "assistant", "user"]  # the turn was complete
    assert (await agent.ask("two")).text == "a"
    # the old run, resumed by another task after all, ends there and leaves the new state alone
    rest = [ev async for ev in runs[0]]
    assert rest == [EndEvent(reason="abort", message="the task that consumed the run was cancelled")]
    assert not agent.busy and len(agent.messages) == 5


async def test_a_consumer_cancelled_with_the_agent_asked_at_once_is_not_busy() -> None:
    """The agent is free the moment the cancelled task is done, before its callbacks run."""
    agent = Agent(model=ScriptedModel([CALL, '{"final":"a"}']), tools=[echo])
    run = agent.run("one")
    task = asyncio.ensure_future(anext(run))  # the consumer's task, which ends with an event
    await task
    other = asyncio.create_task(asyncio.sleep(3600))
    other.cancel()  # a later consumer, cancelled while it holds the next event
    with contextlib.suppress(asyncio.CancelledError):
        await other

    async def holds_one() -> None:
        await anext(run)
        await asyncio.sleep(3600)

    third = asyncio.create_task(holds_one())
    await asyncio.sleep(0.01)
    assert agent.busy  # the consumer holds an event: the run is under way
    third.cancel()
    with pytest.raises(asyncio.CancelledError):
        await third
    assert (await agent.ask("two")).text == "a"


# -- fault injection: ScriptedModel steps ---------------------------------------

CALL = '{"calls":[{"tool":"echo","input":{"text":"hi"}}]}'


@tool
async def echo(text: str) -> str:
    """Echo the text."""
    return text


async def run_to_end(agent: Agent, prompt: str = "go", **kw: Any) -> list[AgentEvent]:
    async with asyncio.timeout(HANG_GUARD):
        events = [ev async for ev in agent.run(prompt, **kw)]
    check_events(events, result_chars=agent.limits.result_chars)
    check_messages(agent)
    return events


async def test_fail_after_every_delta() -> None:
    """`Fail` after k deltas, for every k, in the first and in a later generation."""
    text = '{"final":"a longer answer"}'
    for later in (False, True):
        for k in range(len(text) + 1):
            head = [CALL] if later else []
            model = ScriptedModel(
                [*head, Fail(text=text[:k], error=ValueError(f"at {k}")), AGAIN], chunk_size=1
            )
            agent = Agent(model=model, tools=[echo])
            events = await run_to_end(agent)
            assert events[-1] == EndEvent(reason="error", message=f"at {k}")
            last_result = max((i for i, e in enumerate(events) if e.type == "result"), default=-1)
            streamed = [e.text for e in events[last_result + 1 :] if isinstance(e, TextEvent)]
            assert streamed == list(text[:k])
            assert len(agent.messages) == (3 if later else 0)  # the good turn and its results only
            assert (await agent.ask("again")).text == "again"


@pytest.mark.parametrize(
    ("step", "reason", "words"),
    [
        (Fail(), "error", "scripted engine failure"),
        (Fail(text='{"final":"x"}', error="boom in the done delta"), "error", "boom in the done delta"),
        (NoDone(text='{"final":"x"}'), "error", "without its done delta"),
        (NoDone(), "error", "without its done delta"),
    ],
    ids=["fail-before-first-delta", "fail-instead-of-done", "no-done", "empty-no-done"],
)
async def test_scripted_faults(step: Any, reason: str, words: str) -> None:
    agent = Agent(model=ScriptedModel([step, AGAIN]), tools=[echo])
    events = await run_to_end(agent)
    ending = events[-1]
    assert isinstance(ending, EndEvent) and ending.reason == reason and words in ending.message
    assert agent.messages == ()
    assert (await agent.ask("again")).text == "again"


async def test_script_exhausted_is_an_error() -> None:
    agent = Agent(model=ScriptedModel([CALL]), tools=[echo])
    events = await run_to_end(agent)
    assert isinstance(events[-1], EndEvent) and "no script entry left" in events[-1].message
    assert len(agent.messages) == 3


async def test_cut_turns_until_each_limit() -> None:
    """Cut turns: retried while `retries` allows, `turns` on the last generation allowed."""
    agent = Agent(model=ScriptedModel([Cut(), Cut(), Cut(), AGAIN]), limits={"retries": 2, "turns": 8})
    events = await run_to_end(agent)
    assert events[-1].type == "end" and events[-1].reason == "retries"
    agent = Agent(model=ScriptedModel([Cut(), Cut()]), limits={"retries": 5, "turns": 2})
    events = await run_to_end(agent)
    assert events[-1].type == "end" and events[-1].reason == "turns"
    assert [e.type for e in events].count("retry") == 1  # a retry only when asked again


async def test_stall_until_aborted() -> None:
    """A generation that hangs until aborted: `end(abort)`, in the first and a later turn."""
    for head in ([], [CALL]):
        model = ScriptedModel([*head, Stall(), AGAIN])
        agent = Agent(model=model, tools=[echo])
        controller = AbortController()

        async def abort_once_stalled(
            model: ScriptedModel = model, controller: AbortController = controller, n: int = len(head) + 1
        ) -> None:
            while len(model.calls) < n:
                await asyncio.sleep(0)
            controller.abort("stalled")

        aborter = asyncio.create_task(abort_once_stalled())
        events = await run_to_end(agent, signal=controller.signal)
        await aborter
        assert events[-1] == EndEvent(reason="abort", message="stalled")
        assert len(agent.messages) == 3 * len(head)
        assert (await agent.ask("again")).text == "again"


# -- fault injection: raw Model doubles -----------------------------------------


class Raw:
    """A model whose first `chat` is `first(messages, opts)`; later ones answer `AGAIN`."""

    def __init__(self, first: Callable[[Any, Any], Any]) -> None:
        self.first = first
        self.calls = 0

    def chat(self, messages: list[Any], opts: Any = None) -> Any:
        self.calls += 1
        if self.calls == 1:
            return self.first(messages, opts)
        return _stream(
            Delta(text=AGAIN),
            Delta(done=True, finish="stop", usage=Usage(prompt_tokens=1, completion_tokens=1)),
        )


async def _stream(*items: Any, raise_at: int | None = None, exc: BaseException | None = None) -> Any:
    for i, item in enumerate(items):
        if i == raise_at:
            raise exc or RuntimeError("engine broke")
        yield item
    if raise_at == len(items):
        raise exc or RuntimeError("engine broke")


DONE = Delta(done=True, finish="stop", usage=Usage(prompt_tokens=3, completion_tokens=2))
TEXT = Delta(text='{"final":')
TEXT2 = Delta(text='"x"}')


def _sync_raise(m: Any, o: Any) -> Any:
    raise ValueError("chat refused synchronously")


async def _coroutine_chat(m: Any, o: Any) -> Any:
    return _stream(TEXT, TEXT2, DONE)


class _EmptyIterator:
    def __aiter__(self) -> _EmptyIterator:
        return self

    async def __anext__(self) -> Delta:
        raise StopAsyncIteration


class _BadClose:
    def __init__(self) -> None:
        self.inner = _stream(TEXT, TEXT2, DONE)

    def __aiter__(self) -> _BadClose:
        return self

    async def __anext__(self) -> Delta:
        delta: Delta = await self.inner.__anext__()
        return delta

    async def aclose(self) -> None:
        raise OSError("the connection could not be closed")


async def _stop_iteration(m: Any, o: Any) -> Any:
    yield TEXT
    raise StopIteration


RAW_FAULTS: dict[str, tuple[Callable[[Any, Any], Any], str]] = {
    "chat-raises-synchronously": (_sync_raise, "chat refused synchronously"),
    "chat-returns-none": (lambda m, o: None, "chat returned NoneType, not an async iterator of Delta"),
    "chat-returns-an-int": (lambda m, o: 5, "chat returned int, not an async iterator of Delta"),
    "chat-returns-a-sync-list": (
        lambda m, o: [TEXT, TEXT2, DONE],
        "chat returned list, not an async iterator of Delta",
    ),
    "chat-returns-a-coroutine": (
        lambda m, o: _coroutine_chat(m, o),
        "chat is a coroutine function; it must return an async iterator of Delta",
    ),
    "raise-before-first-delta": (lambda m, o: _stream(TEXT, DONE, raise_at=0), "engine broke"),
    "raise-after-1-delta": (lambda m, o: _stream(TEXT, TEXT2, DONE, raise_at=1), "engine broke"),
    "raise-after-2-deltas": (lambda m, o: _stream(TEXT, TEXT2, DONE, raise_at=2), "engine broke"),
    "raise-after-done": (lambda m, o: _stream(TEXT, TEXT2, DONE, raise_at=3), "engine broke"),
    "done-missing": (lambda m, o: _stream(TEXT, TEXT2), "without its done delta"),
    "empty-stream": (lambda m, o: _EmptyIterator(), "without its done delta"),
    "done-doubled": (lambda m, o: _stream(TEXT, TEXT2, DONE, DONE), "after its done delta"),
    "text-after-done": (lambda m, o: _stream(TEXT, DONE, TEXT2), "after its done delta"),
    "delta-is-a-dict": (lambda m, o: _stream({"text": "x"}, DONE), "stream yielded a dict, not a Delta"),
    "delta-is-a-str": (lambda m, o: _stream("x", DONE), "stream yielded a str, not a Delta"),
    "delta-is-none": (lambda m, o: _stream(None, DONE), "stream yielded None, not a Delta"),
    "usage-is-a-dict": (
        lambda m, o: _stream(TEXT, TEXT2, Delta(done=True, usage={"prompt_tokens": 1})),  # type: ignore[arg-type]
        "'dict' object has no attribute 'prompt_tokens'",
    ),
    "aclose-raises": (lambda m, o: _BadClose(), "the connection could not be closed"),
    "stop-iteration-inside": (_stop_iteration, "StopIteration"),
    "os-error": (
        lambda m, o: _stream(TEXT, raise_at=1, exc=ConnectionResetError("peer reset")),
        "peer reset",
    ),
    "memory-error": (lambda m, o: _stream(raise_at=0, exc=MemoryError()), "MemoryError"),
    "recursion-error": (lambda m, o: _stream(raise_at=0, exc=RecursionError("deep")), "deep"),
}


@pytest.mark.filterwarnings("ignore:coroutine .* was never awaited:RuntimeWarning")
@pytest.mark.parametrize("name", sorted(RAW_FAULTS))
async def test_any_engine_misbehaviour_is_one_end_error(name: str) -> None:
    first, words = RAW_FAULTS[name]
    model = Raw(first)
    agent = Agent(model=model)
    events = await run_to_end(agent)
    ending = events[-1]
    assert isinstance(ending, EndEvent) and ending.reason == "error", ending
    assert words in ending.message, ending.message
    assert agent.messages == ()
    assert (await agent.ask("again")).text == "again"
    gc.collect()


async def test_engine_failure_in_a_later_turn_keeps_the_earlier_turns() -> None:
    script = [CALL, CALL]
    scripted = ScriptedModel(script)

    class Later:
        def __init__(self) -> None:
            self.n = 0

        def chat(self, messages: list[Any], opts: Any = None) -> Any:
            self.n += 1
            if self.n <= 2:
                return scripted.chat(messages, opts)
            return _stream(TEXT, raise_at=1, exc=RuntimeError("gone"))

    agent = Agent(model=Later(), tools=[echo])
    events = await run_to_end(agent)
    assert events[-1] == EndEvent(reason="error", message="gone")
    assert len(agent.messages) == 5
    assert [e.type for e in events].count("result") == 2


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise ValueError("no text for this error")


@pytest.mark.parametrize("where", ["engine", "tool"])
async def test_exception_that_cannot_be_printed(where: str) -> None:
    def raise_it(input: dict[str, Any]) -> str:
        raise _Unprintable()

    model: Any = (
        Raw(lambda m, o: _stream(raise_at=0, exc=_Unprintable()))
        if where == "engine"
        else ScriptedModel(['{"calls":[{"tool":"bad","input":{}}]}', AGAIN])
    )
    agent = Agent(model=model, tools=[tool(name="bad", input={}, run=raise_it)])
    try:
        events = await run_to_end(agent)
    except ValueError as exc:
        pytest.fail(f"{exc!r} escaped run()")
    if where == "engine":
        assert events[-1].type == "end" and events[-1].reason == "error"
    else:  # a tool error is an error result; it never ends the run
        (result,) = [e for e in events if isinstance(e, ResultEvent)]
        assert result.error and "_Unprintable" in result.text
        assert events[-1] == FinalEvent(text="again")


@pytest.mark.parametrize("where", ["engine", "tool", "hook"])
async def test_stray_cancelled_error_is_a_failure_not_a_cancellation(where: str) -> None:
    """A `CancelledError` that no one asked for (the consumer is not being cancelled):
    from an engine or a hook it ends the run with error; from a tool it is an error result."""

    async def cancelled_tool(input: dict[str, Any]) -> str:
        raise asyncio.CancelledError()

    def hook(call: Any) -> Any:
        raise asyncio.CancelledError()

    model: Any = (
        Raw(lambda m, o: _stream(raise_at=0, exc=asyncio.CancelledError()))
        if where == "engine"
        else ScriptedModel(['{"calls":[{"tool":"stray","input":{}}]}', AGAIN])
    )
    agent = Agent(
        model=model,
        tools=[tool(name="stray", input={}, run=cancelled_tool)],
        hooks={"before_call": hook} if where == "hook" else None,
    )
    try:
        events = await run_to_end(agent)
    except asyncio.CancelledError:
        pytest.fail("CancelledError escaped run()")
    if where == "tool":
        (result,) = [e for e in events if isinstance(e, ResultEvent)]
        assert result.error and "CancelledError" in result.text
        assert events[-1] == FinalEvent(text="again")
    else:
        assert events[-1].type == "end" and events[-1].reason == "error"


async def test_delta_with_non_string_text() -> None:
    agent = Agent(model=Raw(lambda m, o: _stream(Delta(text=5), DONE)))  # type: ignore[arg-type]
    events = await run_to_end(agent)  # check_events: every TextEvent carries a str
    assert events[-1].type == "end"


async def test_stream_that_ignores_the_signal_is_cancelled_by_the_abort() -> None:
    """A stream that never ends and never looks at the signal: the abort still ends the run."""
    started = asyncio.Event()

    async def deaf(m: Any, o: Any) -> Any:
        yield TEXT
        started.set()
        await asyncio.Event().wait()

    agent = Agent(model=Raw(deaf))
    controller = AbortController()
    task = asyncio.create_task(run_to_end(agent, signal=controller.signal))
    await started.wait()
    controller.abort("deaf")
    events = await task
    assert events[-1] == EndEvent(reason="abort", message="deaf")
    assert (await agent.ask("again")).text == "again"


async def test_abort_from_another_thread_during_a_stall() -> None:
    """An abort from another thread, while the engine (deaf to the signal) hangs."""

    async def deaf(m: Any, o: Any) -> Any:
        yield TEXT
        await asyncio.Event().wait()

    agent = Agent(model=Raw(deaf))
    controller = AbortController()
    events: list[AgentEvent] = []
    async with asyncio.timeout(HANG_GUARD):
        async for ev in agent.run("go", signal=controller.signal):
            events.append(ev)
            if isinstance(ev, TextEvent):
                threading.Thread(target=controller.abort, args=("thread",)).start()
    check_events(events)
    assert events[-1] == EndEvent(reason="abort", message="thread")
    assert (await agent.ask("again")).text == "again"


# -- tools that hang, fail or return what cannot be sent ------------------------


async def test_tools_that_hang_until_aborted() -> None:
    """An async tool that ignores the signal, and a sync one that blocks its thread."""
    release = threading.Event()

    @tool
    async def deaf_async() -> str:
        """Hangs."""
        await asyncio.Event().wait()
        return "never"

    @tool
    def deaf_sync() -> str:
        """Blocks its thread until the test releases it."""
        release.wait(HANG_GUARD)
        return "late"

    try:
        for name in ("deaf_async", "deaf_sync"):
            model = ScriptedModel([f'{{"calls":[{{"tool":"{name}","input":{{}}}}]}}', AGAIN])
            agent = Agent(model=model, tools=[deaf_async, deaf_sync])
            controller = AbortController()
            events: list[AgentEvent] = []
            async with asyncio.timeout(HANG_GUARD):
                async for ev in agent.run("go", signal=controller.signal):
                    events.append(ev)
                    if ev.type == "call":
                        asyncio.get_running_loop().call_soon(controller.abort, "hung tool")
            check_events(events)
            assert events[-1] == EndEvent(reason="abort", message="hung tool")
            assert agent.messages == ()
            assert (await agent.ask("again")).text == "again"
    finally:
        release.set()


def _circular() -> Any:
    c: list[Any] = []
    c.append(c)
    return c


UNSENDABLE: dict[str, Callable[[], Any]] = {
    "object": object,
    "set": lambda: {1, 2},
    "bytes": lambda: b"x",
    "nan": lambda: math.nan,
    "inf-in-a-list": lambda: [1, math.inf],
    "circular": _circular,
    "huge-int": lambda: 10**5000,
    "deep": lambda: _deep(100_000),
    "dict-with-tuple-keys": lambda: {(1, 2): 3},
}


def _deep(n: int) -> Any:
    v: Any = []
    for _ in range(n):
        v = [v]
    return v


@pytest.mark.parametrize("name", sorted(UNSENDABLE))
async def test_results_that_cannot_be_serialised_are_error_results(name: str) -> None:
    make = UNSENDABLE[name]

    @tool
    def bad() -> Any:
        """Returns what JSON cannot carry."""
        return make()

    bad_tool = tool(name="bad", input={}, run=lambda input: make())
    for t in (bad, bad_tool):
        agent = Agent(model=ScriptedModel(['{"calls":[{"tool":"bad","input":{}}]}', AGAIN]), tools=[t])
        events = await run_to_end(agent)
        (result,) = [e for e in events if isinstance(e, ResultEvent)]
        assert result.error and result.text.startswith("error: the result cannot be serialised"), result
        assert events[-1] == FinalEvent(text="again")


@pytest.mark.parametrize("size", [4001, 1_000_000, 8_000_000])
async def test_megabyte_results_are_cut_with_a_note(size: int) -> None:
    @tool
    def big(as_json: bool) -> Any:
        """A large result."""
        return ["y" * size] if as_json else "x" * size

    for as_json in (False, True):
        call = json.dumps({"calls": [{"tool": "big", "input": {"as_json": as_json}}]})
        agent = Agent(model=ScriptedModel([call, AGAIN]), tools=[big], limits={"result_chars": 4000})
        events = await run_to_end(agent)
        (result,) = [e for e in events if isinstance(e, ResultEvent)]
        full = len(json.dumps(["y" * size])) if as_json else size
        assert result.text.endswith(f"\n[cut: {full - 4000} more characters]")
        assert len(agent.messages[2]["content"]) < 4100


async def test_tool_exceptions_are_error_results_and_the_run_goes_on() -> None:
    @tool
    def broken(mode: str) -> str:
        """Raises."""
        raise {"value": ValueError("bad value"), "key": KeyError("k"), "os": OSError("disk")}[mode]

    calls = [{"tool": "broken", "input": {"mode": m}} for m in ("value", "key", "os")]
    agent = Agent(model=ScriptedModel([json.dumps({"calls": calls}), AGAIN]), tools=[broken])
    events = await run_to_end(agent)
    results = [e for e in events if isinstance(e, ResultEvent)]
    assert [r.text for r in results] == [
        "error: bad value",
        "error: KeyError: 'k'",
        "error: disk",
    ]
    assert all(r.error for r in results) and events[-1] == FinalEvent(text="again")


# -- the model's input is checked before run ------------------------------------


def record(into: list[Any], value: Any) -> str:
    into.append(value)
    return "ran"


BAD_INPUTS: list[Any] = [
    {"n": "3"},
    {"n": 3.0},
    {"n": True},
    {"n": None},
    {"n": [3]},
    {"n": {"v": 3}},
    {},
    {"n": 3, "extra": 1},
    {"n": 3, "unit": "k"},
    {"n": 3, "unit": 1},
    {"n": 3, "ratio": "1"},
    {"n": 3, "ratio": True},
    {"n": 3, "flag": 1},
    {"n": 3, "flag": "true"},
]
NOT_OBJECTS: list[Any] = [5, "n=3", [3], None, True]
NOT_JSON_TEXTS = [  # Python's json module reads these; JSON has no such values: a bad turn
    '{"calls":[{"tool":"typed","input":{"n":1e400}}]}',  # JSON's grammar takes it; a float cannot
    '{"calls":[{"tool":"typed","input":{"n":NaN}}]}',
    '{"calls":[{"tool":"typed","input":{"n":3,"ratio":Infinity}}]}',
    '{"calls":[{"tool":"typed","input":{"n":3,"ratio":-Infinity}}]}',
]
GOOD_INPUTS: list[Any] = [
    {"n": 3},
    {"n": -(10**30)},
    {"n": 3, "ratio": 2},
    {"n": 3, "ratio": 0.5},
    {"n": 3, "unit": "c", "flag": False},
]


async def test_the_input_is_checked_before_run() -> None:
    """Wrong-typed inputs from the model become `error: …` results; run never sees them."""
    seen: list[Any] = []

    typed = tool(
        name="typed",
        input={
            "n": Field("integer", required=True),
            "ratio": Field("number"),
            "unit": Field("string", enum=["c", "f"]),
            "flag": {"type": "boolean"},
        },
        run=lambda input: record(seen, dict(input)),
    )
    texts = [json.dumps({"calls": [{"tool": "typed", "input": v}]}) for v in BAD_INPUTS]
    good = [json.dumps({"calls": [{"tool": "typed", "input": v}]}) for v in GOOD_INPUTS]
    model = ScriptedModel([*texts, *NOT_JSON_TEXTS, *good, AGAIN])
    agent = Agent(model=model, tools=[typed], limits={"turns": 100, "retries": len(NOT_JSON_TEXTS)})
    events = await run_to_end(agent)
    retries = [e.reason for e in events if isinstance(e, RetryEvent)]
    assert [r.split(" is not")[0] for r in retries] == [
        "the number 1e400 is too large (at most about 1.8e308); write it with at most 16 digits and no exponent",
        "not JSON (NaN",
        "not JSON (Infinity",
        "not JSON (-Infinity",
    ]
    results = [e for e in events if isinstance(e, ResultEvent)]
    assert len(results) == len(texts) + len(GOOD_INPUTS)
    for r in results[: len(texts)]:
        assert r.error and r.text.startswith("error: "), r
    assert [r.text for r in results[len(texts) :]] == ["ran"] * len(GOOD_INPUTS)
    assert seen == GOOD_INPUTS


@pytest.mark.parametrize("value", NOT_OBJECTS, ids=repr)
async def test_an_input_that_is_not_an_object_is_a_bad_turn(value: Any) -> None:
    """Not even a call: the turn is refused and asked again; the tool never runs."""
    seen: list[Any] = []
    typed = tool(name="typed", input={"n": Field("integer")}, run=lambda input: record(seen, input))
    model = ScriptedModel([json.dumps({"calls": [{"tool": "typed", "input": value}]}), AGAIN])
    agent = Agent(model=model, tools=[typed])
    events = await run_to_end(agent)
    assert [e.type for e in events if e.type in ("retry", "call", "result", "final")] == ["retry", "final"]
    assert "input must be an object" in events[[e.type for e in events].index("retry")].reason  # type: ignore[union-attr]
    assert seen == []
    assert [m["content"] for m in agent.messages if m["role"] == "assistant"] == [AGAIN]


async def test_before_call_replacement_input_is_checked_too() -> None:
    seen: list[Any] = []

    @tool
    def typed(n: int) -> str:
        """Typed."""
        seen.append(n)
        return "ran"

    agent = Agent(
        model=ScriptedModel([json.dumps({"calls": [{"tool": "typed", "input": {"n": 1}}] * 3}), AGAIN]),
        tools=[typed],
        hooks={"before_call": lambda call: {"input": {"n": "one"}}},
    )
    events = await run_to_end(agent)
    results = [e for e in events if isinstance(e, ResultEvent)]
    assert all(r.error and "expected integer" in r.text for r in results) and seen == []
    calls = [e for e in events if e.type == "call"]
    assert all(c.input == {"n": "one"} for c in calls)


# -- hooks: raising, or returning what they may not ------------------------------

BAD_RETURNS: dict[str, list[Any]] = {
    "before_call": [
        5,
        "deny",
        [],
        {"deny": 5},
        {"deny": None},
        {"input": "x"},
        {"input": [1]},
        {"deny": "a", "input": {}},
        {"bogus": 1},
        {},
        True,
    ],
    "after_call": [
        5,
        "text",
        {"result": 5},
        {"result": None},
        {"result": "a", "x": 1},
        {"bogus": "x"},
        [],
        False,
    ],
    "on_final": [
        5,
        "more",
        {"continue": 5},
        {"continue": None},
        {"stop": "x"},
        {"continue": "a", "x": 1},
        [],
    ],
}


def _hook_cases() -> list[tuple[str, Any, bool]]:
    return [
        (name, value, is_async)
        for name, values in BAD_RETURNS.items()
        for value in values
        for is_async in (False, True)
    ]


@pytest.mark.parametrize(
    ("hook", "value", "is_async"), _hook_cases(), ids=lambda v: v if isinstance(v, str) else None
)
async def test_bad_hook_returns_end_with_error(hook: str, value: Any, is_async: bool) -> None:
    def sync_hook(*args: Any) -> Any:
        return value

    async def async_hook(*args: Any) -> Any:
        return value

    model = ScriptedModel([CALL, '{"final":"done"}', AGAIN, AGAIN])
    agent = Agent(model=model, tools=[echo], hooks={hook: async_hook if is_async else sync_hook})
    events = await run_to_end(agent)
    ending = events[-1]
    assert isinstance(ending, EndEvent) and ending.reason == "error", ending
    assert f"hook {hook}" in ending.message, ending.message
    assert len(agent.messages) == (3 if hook == "on_final" else 0)
    if hook != "on_final":  # the next run answers at once, without calling the hook
        assert (await agent.ask("again")).text == "done"


@pytest.mark.parametrize("hook", ["before_call", "after_call", "on_final"])
@pytest.mark.parametrize("is_async", [False, True])
async def test_raising_hooks_end_with_error(hook: str, is_async: bool) -> None:
    def sync_hook(*args: Any) -> Any:
        raise LookupError(f"{hook} failed")

    async def async_hook(*args: Any) -> Any:
        await asyncio.sleep(0)
        raise LookupError(f"{hook} failed")

    agent = Agent(
        model=ScriptedModel([CALL, '{"final":"done"}', AGAIN]),
        tools=[echo],
        hooks={hook: async_hook if is_async else sync_hook},
    )
    events = await run_to_end(agent)
    assert events[-1] == EndEvent(reason="error", message=f"hook {hook} raised LookupError: {hook} failed")
    # the turn whose calls were running is not kept; before on_final, the turn with calls was
    assert len(agent.messages) == (3 if hook == "on_final" else 0)
    check_messages(agent)


# -- bad options, definitions and prompts: AerixError("options") naming them ----


def _model() -> ScriptedModel:
    return ScriptedModel([AGAIN])


def _plain(city: str) -> str:
    return city


BAD_AGENT_OPTIONS: list[tuple[str, dict[str, Any], str]] = [
    ("model-without-chat", {"model": object()}, "chat"),
    ("model-chat-not-callable", {"model": type("M", (), {"chat": 5})()}, "chat"),
    ("instructions-int", {"instructions": 5}, "instructions"),
    ("constrain-str", {"constrain": "yes"}, "constrain"),
    ("limits-str", {"limits": "fast"}, "limits"),
    ("limits-unknown", {"limits": {"turn": 3}}, "'turn'"),
    ("limits-zero-turns", {"limits": {"turns": 0}}, "limits.turns"),
    ("limits-bool", {"limits": {"turns": True}}, "limits.turns"),
    ("limits-float", {"limits": {"max_tokens": 1.5}}, "limits.max_tokens"),
    ("limits-negative-retries", {"limits": {"retries": -1}}, "limits.retries"),
    ("limits-zero-result-chars", {"limits": {"result_chars": 0}}, "limits.result_chars"),
    ("limits-str-value", {"limits": {"turns": "8"}}, "limits.turns"),
    ("hooks-int", {"hooks": 5}, "hooks"),
    ("hooks-unknown", {"hooks": {"before": print}}, "'before'"),
    ("hooks-not-callable", {"hooks": {"on_final": "stop"}}, "hooks.on_final"),
    ("generation-int", {"generation": 5}, "generation"),
    ("generation-max-tokens", {"generation": {"max_tokens": 5}}, "limits.max_tokens"),
    ("generation-constraint", {"generation": {"constraint": {}}}, "generation.constraint"),
    ("generation-unknown", {"generation": {"temp": 0.5}}, "'temp'"),
    ("generation-nan", {"generation": {"temperature": math.nan}}, "generation.temperature"),
    ("generation-negative", {"generation": {"top_p": -1}}, "generation.top_p"),
    ("generation-bool", {"generation": {"temperature": True}}, "generation.temperature"),
    ("generation-top-k-float", {"generation": {"top_k": 1.5}}, "generation.top_k"),
    ("generation-seed-str", {"generation": {"seed": "1"}}, "generation.seed"),
    ("generation-stop-str", {"generation": {"stop": "\n"}}, "generation.stop"),
    ("generation-stop-empty", {"generation": {"stop": [""]}}, "generation.stop"),
    ("tools-function", {"tools": [_plain]}, "@aerix.tool"),
    ("tools-single-tool", {"tools": echo}, "tools"),
    ("tools-str", {"tools": "echo"}, "tools"),
    ("tools-none-item", {"tools": [None]}, "tools[0]"),
    ("tools-duplicate", {"tools": [echo, tool(name="echo", input={}, run=lambda i: "x")]}, "'echo'"),
    ("tool-choice-unknown", {"tools": [echo], "tool_choice": "search"}, "tool_choice"),
    ("tool-choice-required-no-tools", {"tool_choice": "required"}, "tool_choice"),
    ("tool-choice-int", {"tool_choice": 1}, "tool_choice"),
]


@pytest.mark.parametrize(
    ("kwargs", "words"), [c[1:] for c in BAD_AGENT_OPTIONS], ids=[c[0] for c in BAD_AGENT_OPTIONS]
)
def test_bad_agent_options(kwargs: dict[str, Any], words: str) -> None:
    kwargs = {"model": _model(), **kwargs}
    with pytest.raises(AerixError) as info:
        Agent(**kwargs)
    assert info.value.kind == "options"
    assert words in info.value.message, info.value.message


def _run(input: dict[str, Any]) -> str:
    return "x"


BAD_TOOLS: list[tuple[str, dict[str, Any], str]] = [
    ("name-upper", {"name": "Search"}, "'Search'"),
    ("name-digit-first", {"name": "1st"}, "'1st'"),
    ("name-empty", {"name": ""}, "''"),
    ("name-dash", {"name": "a-b"}, "'a-b'"),
    ("name-too-long", {"name": "a" * 65}, "a" * 65),
    ("name-int", {"name": 5}, "5"),
    ("name-unicode", {"name": "café"}, "café"),
    ("description-int", {"description": 5}, "description"),
    ("run-not-callable", {"run": "go"}, "run"),
    ("input-list", {"input": ["a"]}, "input"),
    ("field-type-str", {"input": {"a": {"type": "str"}}}, "'str'"),
    ("field-type-object", {"input": {"a": {"type": "object", "enum": ["x"]}}}, "'object'"),
    ("field-type-array", {"input": {"a": Field("array")}}, "'array'"),  # type: ignore[arg-type]
    ("field-type-missing", {"input": {"a": {"required": True}}}, "'type'"),
    ("field-unknown-key", {"input": {"a": {"type": "string", "default": "x"}}}, "default"),
    ("field-spec-str", {"input": {"a": "string"}}, "'a'"),
    ("field-name-space", {"input": {"a b": {"type": "string"}}}, "'a b'"),
    ("field-name-int", {"input": {1: {"type": "string"}}}, "1"),
    ("field-required-str", {"input": {"a": {"type": "string", "required": "yes"}}}, "required"),
    ("field-description-int", {"input": {"a": {"type": "string", "description": 5}}}, "description"),
    ("enum-mixed", {"input": {"a": {"type": "string", "enum": ["x", 1]}}}, "enum value 1"),
    ("enum-bool-in-integer", {"input": {"a": {"type": "integer", "enum": [1, True]}}}, "True"),
    ("enum-str-in-number", {"input": {"a": {"type": "number", "enum": [1.5, "2"]}}}, "'2'"),
    ("enum-nan", {"input": {"a": {"type": "number", "enum": [math.nan]}}}, "nan"),
    ("enum-empty", {"input": {"a": {"type": "string", "enum": []}}}, "empty"),
    ("enum-duplicates", {"input": {"a": {"type": "integer", "enum": [1, 1]}}}, "duplicate"),
    ("enum-list-value", {"input": {"a": {"type": "string", "enum": [["x"]]}}}, "enum value"),
]


@pytest.mark.parametrize(("override", "words"), [c[1:] for c in BAD_TOOLS], ids=[c[0] for c in BAD_TOOLS])
def test_bad_tool_definitions(override: dict[str, Any], words: str) -> None:
    spec: dict[str, Any] = {"name": "search", "description": "Search.", "input": {}, "run": _run, **override}
    with pytest.raises(AerixError) as info:
        tool(**spec)
    assert info.value.kind == "options"
    assert words in info.value.message, info.value.message


def test_enum_that_is_not_a_list() -> None:
    with pytest.raises(AerixError) as info:
        tool(name="search", input={"a": {"type": "integer", "enum": 5}}, run=_run)
    assert info.value.kind == "options" and "enum" in info.value.message


def test_enum_that_is_a_string() -> None:
    with pytest.raises(AerixError) as info:
        tool(name="search", input={"a": {"type": "string", "enum": "abc"}}, run=_run)
    assert "enum" in info.value.message


def _list_param(xs: list) -> str:  # type: ignore[type-arg]
    return ""


def _dict_param(d: dict) -> str:  # type: ignore[type-arg]
    return ""


def _no_annotation(x) -> str:  # type: ignore[no-untyped-def]
    return ""


def _any_param(x: Any) -> str:
    return ""


def _star_args(*xs: int) -> str:
    return ""


def _mixed_literal(x: Literal["a", 1]) -> str:
    return ""


def _union(x: int | str) -> str:
    return ""


BAD_FUNCTIONS = [_list_param, _dict_param, _no_annotation, _any_param, _star_args, _mixed_literal, _union]


@pytest.mark.parametrize("fn", BAD_FUNCTIONS, ids=[f.__name__ for f in BAD_FUNCTIONS])
def test_bad_tool_functions(fn: Callable[..., Any]) -> None:
    with pytest.raises(AerixError) as info:
        tool(fn)
    assert info.value.kind == "options"
    param = next(iter(__import__("inspect").signature(fn).parameters))
    assert repr(param) in info.value.message, info.value.message


@pytest.mark.parametrize(
    "prompt",
    [5, None, b"hi", ["hi"], {"role": "user", "content": "hi"}],
    ids=["int", "none", "bytes", "list", "message"],
)
async def test_prompts_that_are_not_strings(prompt: Any) -> None:
    agent = Agent(model=_model())
    for call in (lambda: agent.run(prompt), lambda: agent.run_sync(prompt)):
        with pytest.raises(AerixError) as info:
            call()
        assert info.value.kind == "options" and "prompt" in info.value.message
    with pytest.raises(AerixError) as info:
        await agent.ask(prompt)
    assert info.value.kind == "options" and "prompt" in info.value.message
    with pytest.raises(AerixError) as info:
        agent.run("hi", signal=AbortController())  # type: ignore[arg-type]
    assert info.value.kind == "options" and "signal" in info.value.message
    assert not agent.busy and (await agent.ask("fine")).text == "again"


# -- busy: one run at a time ----------------------------------------------------


async def test_concurrent_attempts_are_busy_and_change_nothing() -> None:
    model = ScriptedModel([Stall(text='{"fin'), AGAIN, AGAIN])
    agent = Agent(model=model)
    controller = AbortController()
    events: list[AgentEvent] = []
    first = asyncio.create_task(collect(agent.run("one", signal=controller.signal), events))
    while not events:
        await asyncio.sleep(0)
    assert agent.busy
    for attempt in (lambda: agent.run("two"), agent.reset, lambda: agent.run_sync("two")):
        with pytest.raises(AerixError) as info:
            attempt()
        assert info.value.kind == "busy"
    with pytest.raises(AerixError) as info:
        await agent.ask("two")
    assert info.value.kind == "busy"
    assert len(model.calls) == 1
    controller.abort("done")
    await first
    assert events[-1] == EndEvent(reason="abort", message="done")
    assert (await agent.ask("three")).text == "again"


async def test_a_run_created_while_idle_and_started_while_busy_is_refused() -> None:
    model = ScriptedModel([Stall(text='{"fin'), AGAIN])
    agent = Agent(model=model)
    early = agent.run("early")  # passes the idle check, starts later
    controller = AbortController()
    events: list[AgentEvent] = []
    first = asyncio.create_task(collect(agent.run("one", signal=controller.signal), events))
    while not events:
        await asyncio.sleep(0)
    with pytest.raises(AerixError) as info:
        await early.__anext__()
    assert info.value.kind == "busy"
    assert agent.busy  # the refused run did not free the running one
    controller.abort()
    await first
    assert not agent.busy and len(model.calls) == 1


# -- a small soak: no task or thread leak, bounded memory -------------------------


def _load_soak() -> Any:
    path = Path(__file__).resolve().parent.parent / "bench" / "soak.py"
    spec = importlib.util.spec_from_file_location("aerix_bench_soak", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


async def test_small_soak_leaks_nothing() -> None:
    """400 runs on one agent and 100 concurrent agents (the soak bench, scaled down)."""
    soak = _load_soak()
    figures = await soak.soak(runs=400, agents=100, rounds=3, checkpoint_every=100)
    assert figures["runs"] == 400 and figures["outcomes_ok"]
    assert figures["tasks_after"] == figures["tasks_before"]
    assert figures["threads_after"] <= figures["threads_before"] + figures["pool_max"]
    # nothing outlives its run: one live agent (the soaked one), no live run, then none at all
    assert all(c["generators"] == 0 for c in figures["checkpoints"] + figures["concurrent"])
    assert all(c["agents"] == 1 for c in figures["checkpoints"][1:])
    assert all(c["agents"] == 0 for c in figures["concurrent"][1:])
    # memory is flat once warm (a generous bound: a leak of one object per run would pass it);
    # the heap still settles over the first 200 runs (interpreter caches), by a few KiB
    checkpoints, concurrent = figures["checkpoints"], figures["concurrent"]
    traced = [c["traced_kib"] for c in checkpoints]
    assert traced[-1] - traced[2] < 16, (traced, soak.traced_growth(checkpoints[2], checkpoints[-1]))
    rounds = [c["traced_kib"] for c in concurrent[1:]]
    assert rounds[-1] - rounds[0] < 256, (rounds, soak.traced_growth(concurrent[1], concurrent[-1]))
