"""Shared pieces of the reliability tests: the run invariants, and fault doubles.

`check_events` and `check_messages` are the invariants every scenario of
test_reliability.py, test_properties.py and test_agent_stateful.py checks
after a run ends, however it ended. `Points` counts the await points of a run
so that a sweep can abort (or cancel) at each one in turn, deterministically.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from aerix import (
    Agent,
    AgentEvent,
    CallEvent,
    ChatMessage,
    Delta,
    EndEvent,
    FinalEvent,
    ResultEvent,
    RetryEvent,
    TextEvent,
    TurnEvent,
    UsageEvent,
)
from aerix.turn import BadTurn, Turn, parse_turn

ENDINGS = (FinalEvent, EndEvent)
_RESULT_LINE = re.compile(r"^\[(call_\d+) ([a-z][a-z0-9_]*)\] ", re.M)
_CUT_NOTE = re.compile(r"\n\[cut: \d+ more characters\]\Z")


def ending_of(events: Sequence[AgentEvent]) -> FinalEvent | EndEvent | None:
    """The run's ending, if its last event is one."""
    return events[-1] if events and isinstance(events[-1], ENDINGS) else None


def check_events(
    events: Sequence[AgentEvent],
    *,
    ended: bool = True,
    result_chars: int | None = None,
) -> None:
    """Check the order and content of a run's events.

    Args:
        events: The events the consumer received.
        ended: Whether the run was consumed to its ending. `False` for a run
            whose consumer was cancelled or closed it: then no ending at all.
        result_chars: If given, every result is at most this long, plus the cut note.
    """
    endings = [i for i, e in enumerate(events) if isinstance(e, ENDINGS)]
    if ended:
        assert len(endings) == 1, f"expected exactly one ending, got {len(endings)}: {events!r}"
        assert endings[0] == len(events) - 1, f"the ending is not the last event: {events!r}"
    else:
        assert not endings, f"a run cut short by its consumer has no ending: {events!r}"
    generations = 0
    state = "gen"  # gen: texts then usage; after: what a usage may be followed by; calls: call/result
    pending_calls: list[Any] = []
    awaiting_result: CallEvent | None = None
    for ev in events:
        json.dumps(ev.to_dict())  # plain JSON, always
        if isinstance(ev, ENDINGS):
            if isinstance(ev, FinalEvent):
                assert state == "after", f"a final must follow a generation's usage: {events!r}"
            else:
                assert isinstance(ev.message, str)
                assert ev.reason in ("turns", "retries", "abort", "error")
            break
        if isinstance(ev, TextEvent):
            assert state in ("gen", "after"), f"text in the middle of calls: {events!r}"
            assert isinstance(ev.text, str) and ev.text, f"a text event must carry text: {ev!r}"
            state = "gen"
        elif isinstance(ev, UsageEvent):
            assert state in ("gen", "after"), f"usage in the middle of calls: {events!r}"
            for n in (ev.prompt_tokens, ev.completion_tokens, ev.cached_tokens):
                assert isinstance(n, int) and n >= 0
            generations += 1
            state = "after"
        elif isinstance(ev, RetryEvent):
            assert state == "after", f"retry not right after a usage: {events!r}"
            assert ev.turn == generations and isinstance(ev.reason, str) and ev.reason
            state = "gen"
        elif isinstance(ev, TurnEvent):
            assert state == "after", f"turn not right after a usage: {events!r}"
            assert ev.turn == generations
            assert 1 <= len(ev.calls) <= 8
            assert len({c.id for c in ev.calls}) == len(ev.calls)
            pending_calls = list(ev.calls)
            state = "calls" if pending_calls else "gen"
        elif isinstance(ev, CallEvent):
            assert state == "calls" and awaiting_result is None and pending_calls, events
            expected = pending_calls.pop(0)
            assert (ev.id, ev.tool) == (expected.id, expected.tool)
            awaiting_result = ev
        elif isinstance(ev, ResultEvent):
            assert awaiting_result is not None, f"a result without its call: {events!r}"
            assert (ev.id, ev.tool) == (awaiting_result.id, awaiting_result.tool)
            assert isinstance(ev.text, str) and isinstance(ev.error, bool)
            if result_chars is not None:
                assert len(_CUT_NOTE.sub("", ev.text)) <= result_chars
            awaiting_result = None
            state = "calls" if pending_calls else "gen"
        else:  # pragma: no cover - an unknown event type
            raise AssertionError(f"unknown event {ev!r}")


def check_messages(agent: Agent, *, prompts: Sequence[str] | None = None) -> list[ChatMessage]:
    """Check that the agent's conversation holds only completed turns and their results.

    The shape is runs one after the other, each: the user's prompt, then
    (an assistant turn with calls, the user message with their results)*,
    then optionally the assistant's final (which an `on_final` continuation
    may follow with a user message). Every assistant message is a valid turn,
    so a retried bad turn never appears; every results message answers the
    calls of the turn before it; call ids are unique.

    Args:
        agent: The agent, idle.
        prompts: If given, the user messages that open a run must be among these.

    Returns:
        The messages.
    """
    assert not agent.busy, "the agent is still busy after the run ended"
    messages = list(agent.messages)
    tools = list(agent.tools.values())
    seen_ids: set[str] = set()
    expect_results: list[tuple[str, str]] | None = None
    previous: ChatMessage | None = None
    for i, m in enumerate(messages):
        assert set(m) == {"role", "content"}, m
        assert m["role"] in ("user", "assistant") and isinstance(m["content"], str), m
        if i == 0:
            assert m["role"] == "user", f"the conversation must open with a user message: {messages!r}"
        if m["role"] == "assistant":
            assert previous is not None and previous["role"] == "user", f"two assistant turns: {messages!r}"
            turn = parse_turn(m["content"], tools)
            assert isinstance(turn, Turn), f"a bad turn in the conversation: {m['content']!r}"
            expect_results = None if turn.final is not None else [("", c.tool) for c in turn.calls]
        else:
            if expect_results is not None:
                found = _RESULT_LINE.findall(m["content"])
                assert m["content"].startswith("Results:"), f"the calls' results are missing: {messages!r}"
                assert [t for _, t in found] == [t for _, t in expect_results], (found, expect_results)
                for call_id, _ in found:
                    assert call_id not in seen_ids, f"call id {call_id} used twice: {messages!r}"
                    seen_ids.add(call_id)
            elif prompts is not None and not m["content"].startswith("Results:"):
                assert m["content"] in prompts, f"unexpected user message {m['content']!r}"
            expect_results = None
        previous = m
    assert expect_results is None, (
        f"a turn with calls is in the conversation without its results: {messages!r}"
    )
    return messages


def commit_points(messages: Sequence[ChatMessage], tools: Sequence[Any]) -> set[int]:
    """The lengths the conversation may have after a run cut short at any moment.

    A run commits after each turn's results and after its final: these are
    the only prefixes of the full run's conversation that may be left.
    """
    points = {0}
    for i, m in enumerate(messages):
        if m["role"] == "user" and m["content"].startswith("Results:"):
            points.add(i + 1)
        elif m["role"] == "assistant":
            turn = parse_turn(m["content"], tools)
            if isinstance(turn, Turn) and turn.final is not None:
                points.add(i + 1)
    return points


def is_bad(text: str, tools: Sequence[Any]) -> bool:
    """Whether `text` is a turn the parser refuses."""
    return isinstance(parse_turn(text, tools), BadTurn)


class Points:
    """Numbers the await points of a run; fires `action` at point `k`.

    Tools, hooks and the model call `hit(where)` at each point. The action
    aborts the run's controller or cancels the consuming task. Thread-safe
    (sync tools run on a worker thread).
    """

    def __init__(self, k: int | None = None, action: Callable[[], None] | None = None) -> None:
        self.k = k
        self.action = action
        self.log: list[str] = []
        self.fired_at: str | None = None
        self._lock = threading.Lock()

    def hit(self, where: str) -> bool:
        """Count a point; return whether the action fired here."""
        with self._lock:
            index = len(self.log)
            self.log.append(where)
        if index == self.k and self.action is not None:
            self.fired_at = where
            self.action()
            return True
        return False


class Instrumented:
    """Wraps a model: a point before each delta is handed to the agent.

    With `hang=True`, the generation hangs forever once the action fired:
    the run must get out of it by cancelling the await (the abort guard).
    """

    def __init__(self, inner: Any, points: Points, *, hang: bool = False, at_start: bool = True) -> None:
        self.inner = inner
        self.points = points
        self.hang = hang
        self.at_start = at_start

    async def chat(self, messages: list[ChatMessage], opts: Any = None) -> AsyncIterator[Delta]:
        if self.at_start and self.points.hit("chat") and self.hang:
            await asyncio.Event().wait()
        stream = self.inner.chat(messages, opts)
        try:
            async for delta in stream:
                if self.points.hit("done" if delta.done else "delta") and self.hang:
                    await asyncio.Event().wait()
                yield delta
        finally:
            await stream.aclose()


async def collect(stream: AsyncIterator[AgentEvent], events: list[AgentEvent]) -> list[AgentEvent]:
    """Consume a run into `events` (kept when the consumer is cancelled)."""
    async for ev in stream:
        events.append(ev)
    return events
