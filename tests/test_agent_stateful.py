"""A stateful model of one Agent across many runs: hypothesis drives random
sequences of runs, asks, resets, aborts, cancellations, early closes, engine
failures and concurrent attempts, on one agent and one event loop.

The machine keeps the conversation it expects (call ids aside: they are
checked for uniqueness instead) and, after every step, checks it against
`agent.messages`, along with the invariants of tests/reliability_kit.py.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Coroutine
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from aerix import (
    AbortController,
    AerixError,
    Agent,
    AgentEvent,
    ChatMessage,
    Delta,
    EndEvent,
    FinalEvent,
    ResultEvent,
    TurnEvent,
    tool,
)
from aerix.testing import Fail, ScriptedModel, Stall
from aerix.turn import render_results
from reliability_kit import check_events, check_messages

T = TypeVar("T")
HANG_GUARD = 20
_IDS = re.compile(r"\[call_\d+ ")


@tool
async def echo(text: str) -> str:
    """Echo the text (async)."""
    await asyncio.sleep(0)
    return text


@tool
def shout(text: str) -> str:
    """Shout the text (sync: it runs on a worker thread)."""
    return text.upper()


OUTPUT = {"echo": lambda s: s, "shout": str.upper}


class Deck:
    """A model that plays the next step of `deck` per generation, each on a fresh ScriptedModel."""

    def __init__(self) -> None:
        self.deck: list[Any] = []
        self.generations = 0

    def chat(self, messages: list[ChatMessage], opts: Any = None) -> AsyncIterator[Delta]:
        self.generations += 1
        step = self.deck.pop(0) if self.deck else Fail(error="the deck is empty")
        return ScriptedModel([step], chunk_size=6).chat(messages, opts)


def calls_turn(calls: list[tuple[str, str]]) -> str:
    return json.dumps({"calls": [{"tool": t, "input": {"text": x}} for t, x in calls]})


def final_turn(text: str) -> str:
    return json.dumps({"final": text})


def results_message(calls: list[tuple[str, str]]) -> str:
    rows = [("call_0", t, "refused: denied" if x == "deny" else OUTPUT[t](x)) for t, x in calls]
    return _IDS.sub("[call_# ", render_results(rows))


def normal(messages: list[ChatMessage]) -> list[tuple[str, str]]:
    return [(m["role"], _IDS.sub("[call_# ", m["content"])) for m in messages]


texts = st.text(alphabet="abcxyz ", min_size=1, max_size=8)
call_lists = st.lists(
    st.tuples(st.sampled_from(["echo", "shout"]), st.one_of(texts, st.just("deny"))), min_size=1, max_size=3
)


class AgentMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.model = Deck()
        self.agent = Agent(
            model=self.model,
            instructions="Stateful.",
            tools=[echo, shout],
            # a run has at most 5 turns of 3 calls: no call repeats past 15 (the repeat
            # rule has its own reference model, in tests/test_calls.py)
            limits={"turns": 5, "retries": 1, "result_chars": 50, "repeats": 15},
            hooks={
                "before_call": lambda call: {"deny": "denied"} if call.input.get("text") == "deny" else None,
                "on_final": self._on_final,
            },
        )
        self.expected: list[tuple[str, str]] = []
        self.n = 0

    @staticmethod
    async def _on_final(text: str) -> Any:
        await asyncio.sleep(0)
        return {"continue": "go on"} if text == "more" else None

    def teardown(self) -> None:
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()

    def do(self, coro: Coroutine[Any, Any, T]) -> T:
        async def guarded() -> T:
            async with asyncio.timeout(HANG_GUARD):
                return await coro

        return self.loop.run_until_complete(guarded())

    def prompt(self) -> str:
        self.n += 1
        return f"prompt {self.n}"

    def full_run(self, prompt: str, turns: list[list[tuple[str, str]]], final: str | None) -> list[Any]:
        """The conversation a complete run of this script would commit."""
        out: list[tuple[str, str]] = [("user", prompt)]
        for calls in turns:
            out += [("assistant", calls_turn(calls)), ("user", results_message(calls))]
        if final is not None:
            out.append(("assistant", final_turn(final)))
        return out

    # -- runs that end on their own -------------------------------------------

    @rule(turns=st.lists(call_lists, max_size=3), bad=st.booleans(), final=texts, use_ask=st.booleans())
    def run_to_final(self, turns: list[list[tuple[str, str]]], bad: bool, final: str, use_ask: bool) -> None:
        p = self.prompt()
        self.model.deck = [calls_turn(c) for c in turns] + (["not json"] if bad else []) + [final_turn(final)]
        if use_ask:
            answer = self.do(self.agent.ask(p))
            events = list(answer.events)
            assert answer.text == final
        else:
            events = self.do(self._collect(self.agent.run(p)))
        check_events(events, result_chars=50)
        assert events[-1] == FinalEvent(text=final)
        assert sum(e.type == "retry" for e in events) == int(bad)
        self.expected += self.full_run(p, turns, final)

    @rule(first=texts)
    def run_with_continuation(self, first: str) -> None:
        """`on_final` continues a final "more": it stays, a user message follows, then the next turn."""
        p = self.prompt()
        self.model.deck = [final_turn("more"), final_turn(first)]
        events = self.do(self._collect(self.agent.run(p)))
        check_events(events)
        assert events[-1] == FinalEvent(text=first)
        assert not any(isinstance(e, FinalEvent) and e.text == "more" for e in events)
        self.expected += [
            ("user", p),
            ("assistant", final_turn("more")),
            ("user", "go on"),
            ("assistant", final_turn(first)),
        ]

    @rule(turns=st.lists(call_lists, min_size=5, max_size=5))
    def run_out_of_turns(self, turns: list[list[tuple[str, str]]]) -> None:
        p = self.prompt()
        self.model.deck = [calls_turn(c) for c in turns]
        events = self.do(self._collect(self.agent.run(p)))
        check_events(events)
        assert isinstance(events[-1], EndEvent) and events[-1].reason == "turns"
        self.expected += self.full_run(p, turns, None)

    @rule(before=st.lists(call_lists, max_size=2))
    def run_out_of_retries(self, before: list[list[tuple[str, str]]]) -> None:
        p = self.prompt()
        self.model.deck = [calls_turn(c) for c in before] + ["nope", '{"calls":[]}']
        events = self.do(self._collect(self.agent.run(p)))
        check_events(events)
        assert isinstance(events[-1], EndEvent) and events[-1].reason == "retries"
        self.expected += self.full_run(p, before, None) if before else []

    @rule(before=st.lists(call_lists, max_size=2), streamed=st.text(max_size=10), use_ask=st.booleans())
    def engine_fails(self, before: list[list[tuple[str, str]]], streamed: str, use_ask: bool) -> None:
        p = self.prompt()
        self.model.deck = [calls_turn(c) for c in before] + [Fail(text=streamed, error="engine down")]
        if use_ask:
            with pytest.raises(AerixError) as info:
                self.do(self.agent.ask(p))
            assert info.value.kind == "end" and info.value.reason == "error"
            events = list(info.value.events)
        else:
            events = self.do(self._collect(self.agent.run(p)))
        check_events(events)
        assert events[-1] == EndEvent(reason="error", message="engine down")
        self.expected += self.full_run(p, before, None) if before else []

    # -- runs cut short -----------------------------------------------------------

    def _cut_short(self, how: str, k: int, turns: list[list[tuple[str, str]]], final: str) -> None:
        p = self.prompt()
        self.model.deck = [calls_turn(c) for c in turns] + [final_turn(final)]
        before = list(self.agent.messages)
        controller = AbortController()
        events: list[AgentEvent] = []

        async def consume() -> None:
            stream = self.agent.run(p, signal=controller.signal)
            async for ev in stream:
                events.append(ev)
                if len(events) == k + 1:
                    if how == "abort":
                        controller.abort("cut short")
                    elif how == "close":
                        await stream.aclose()  # type: ignore[attr-defined]
                        return
                    else:
                        task = asyncio.current_task()
                        assert task is not None
                        task.cancel()

        try:
            self.do(consume())
            cancelled = False
        except asyncio.CancelledError:
            cancelled = True
        assert not self.agent.busy
        ended = any(isinstance(e, FinalEvent | EndEvent) for e in events)
        check_events(events, ended=ended)
        if how == "abort" and k + 1 < len(events):
            assert events[-1] == EndEvent(reason="abort", message="cut short") and k + 2 == len(events)
        if how == "cancel" and not ended:
            assert cancelled
        full = self.full_run(p, turns, final)
        added = normal(list(self.agent.messages))[len(before) :]
        assert added == full[: len(added)], (added, full)
        # committed: whole turns only, at most those whose results were all delivered,
        # at least those the run went past
        done_turns = _turns_with_all_results(events)
        went_past = done_turns - (1 if done_turns and _ends_right_after_results(events) else 0)
        committed = sum(1 for role, text in added if role == "user" and text.startswith("Results:"))
        assert went_past <= committed <= done_turns, (events, added)
        has_final = any(isinstance(e, FinalEvent) for e in events)
        assert len(added) in ({0, 1 + 2 * committed} if not has_final else {len(full)})
        event(f"{how}: {'completed' if has_final else 'kept ' + str(committed) + ' turns'}")
        if added:
            self.expected += added

    @rule(k=st.integers(0, 40), turns=st.lists(call_lists, max_size=3), final=texts)
    def abort_at_event(self, k: int, turns: list[list[tuple[str, str]]], final: str) -> None:
        self._cut_short("abort", k, turns, final)

    @rule(k=st.integers(0, 40), turns=st.lists(call_lists, max_size=3), final=texts)
    def close_at_event(self, k: int, turns: list[list[tuple[str, str]]], final: str) -> None:
        self._cut_short("close", k, turns, final)

    @rule(k=st.integers(0, 40), turns=st.lists(call_lists, max_size=3), final=texts)
    def cancel_at_event(self, k: int, turns: list[list[tuple[str, str]]], final: str) -> None:
        self._cut_short("cancel", k, turns, final)

    @rule(before=st.lists(call_lists, max_size=2))
    def stall_then_abort(self, before: list[list[tuple[str, str]]]) -> None:
        """A generation that hangs until aborted, after some complete turns: they are kept."""
        p = self.prompt()
        self.model.deck = [calls_turn(c) for c in before] + [Stall()]
        controller = AbortController()
        start = self.model.generations

        async def scenario() -> list[AgentEvent]:
            async def abort_when_stalled() -> None:
                while self.model.generations < start + len(before) + 1:
                    await asyncio.sleep(0)
                controller.abort("stalled")

            aborter = asyncio.create_task(abort_when_stalled())
            events = await self._collect(self.agent.run(p, signal=controller.signal))
            await aborter
            return events

        events = self.do(scenario())
        check_events(events)
        assert events[-1] == EndEvent(reason="abort", message="stalled")
        self.expected += self.full_run(p, before, None) if before else []

    # -- one run at a time ------------------------------------------------------------

    @rule()
    def concurrent_attempts(self) -> None:
        p = self.prompt()
        self.model.deck = [Stall(text='{"fi')]
        controller = AbortController()

        async def scenario() -> list[AgentEvent]:
            events: list[AgentEvent] = []
            first = asyncio.create_task(self._collect(self.agent.run(p, signal=controller.signal), events))
            while not events:
                await asyncio.sleep(0)
            before = list(self.agent.messages)
            for attempt in (lambda: self.agent.run("x"), self.agent.reset, lambda: self.agent.run_sync("x")):
                with pytest.raises(AerixError) as info:
                    attempt()
                assert info.value.kind == "busy"
            with pytest.raises(AerixError) as info:
                await self.agent.ask("x")
            assert info.value.kind == "busy"
            assert list(self.agent.messages) == before
            controller.abort("enough")
            return await first

        events = self.do(scenario())
        assert events[-1] == EndEvent(reason="abort", message="enough")

    @rule(final=texts)
    def ask_sync(self, final: str) -> None:
        p = self.prompt()
        self.model.deck = [final_turn(final)]
        assert self.agent.ask_sync(p).text == final
        self.expected += [("user", p), ("assistant", final_turn(final))]

    @rule()
    def reset(self) -> None:
        self.agent.reset()
        self.expected = []

    # -- after every step -----------------------------------------------------------------

    @invariant()
    def conversation_is_as_expected(self) -> None:
        assert not self.agent.busy
        messages = check_messages(self.agent)
        assert normal(messages) == self.expected

    async def _collect(
        self, stream: AsyncIterator[AgentEvent], into: list[AgentEvent] | None = None
    ) -> list[AgentEvent]:
        events = [] if into is None else into
        async for ev in stream:
            events.append(ev)
        return events


def _turns_with_all_results(events: list[AgentEvent]) -> int:
    done, want = 0, 0
    for ev in events:
        if isinstance(ev, TurnEvent):
            want = len(ev.calls)
        elif isinstance(ev, ResultEvent):
            want -= 1
            if want == 0:
                done += 1
    return done


def _ends_right_after_results(events: list[AgentEvent]) -> bool:
    """The last delivered event is a turn's last result (or an ending right after it)."""
    tail = [e for e in events if not isinstance(e, FinalEvent | EndEvent)]
    return bool(tail) and isinstance(tail[-1], ResultEvent)


AgentMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_agent_state_machine = AgentMachine.TestCase
